<?php

/**
 * Plugin Name: Fake WooCommerce (tests only)
 * Description: The few public WooCommerce functions, objects and hooks the Visitor Service adapter
 *              calls (WC(), cart, session, order, get_woocommerce_currency, is_product, the
 *              conditional tags is_checkout, is_order_received_page and is_account_page,
 *              wc_get_checkout_url, the woocommerce_checkout_order_processed hook; for commerce
 *              events wc_get_product, wc_get_order, order meta, refunds, the checkout shortcode
 *              and block, and the hooks woocommerce_add_to_cart, woocommerce_before_checkout_form,
 *              woocommerce_payment_complete, woocommerce_update_order,
 *              woocommerce_order_status_changed and woocommerce_order_refunded; for payments
 *              WC_Order's payment_complete(), update_status(), get_date_paid() and
 *              save_meta_data(), with date_paid set as WC_Order::save() sets it, cash on
 *              delivery's at Completed; before_woocommerce_init and FeaturesUtil's
 *              declare_compatibility(), in fake-woocommerce-features.php), and nothing more. WooCommerce itself cannot be
 *              installed from the registries these tests may use.
 *
 * The cart lives in the cookie fake_wc_cart ({"productId": quantity}), the session id in the
 * cookie fake_wc_session. GET /?fake_wc_checkout=1&email=… places an order from the cart
 * (with &block=1 through the block checkout's Store API hook; with &payment_method=cod or bacs
 * the gateway then moves it to processing or on-hold, as WooCommerce's own offline gateways do); POST /?wc-ajax=checkout&email=…
 * places it as the classic checkout's AJAX request does, answering JSON. The checkout and My
 * Account pages are the pages with the slugs checkout and my-account; the order-received page
 * is the checkout page with ?order-received=ID (WooCommerce's endpoint, as a query argument).
 * POST register=1&email=…&first_name=… registers a customer as My Account's form does
 * (woocommerce_created_customer, with the documented $new_customer_data).
 *
 * GET /?add-to-cart=ID&quantity=N adds to the cart as WooCommerce's own link does. A page holding
 * [woocommerce_checkout] is the classic checkout, one holding the woocommerce/checkout block the
 * block checkout. Orders are kept in the option fake_wc_orders; GET /?fake_wc_order=ID with
 * &payment_complete=1, &status=S or &refund=AMOUNT changes one as WC_Order::payment_complete(),
 * WC_Order::update_status() and wc_create_refund() do, firing their hooks.
 */

declare(strict_types=1);

final class WooCommerce
{
    public ?Fake_WC_Cart $cart = null;
    public ?Fake_WC_Session $session = null;
}

final class Fake_WC_Product
{
    public function __construct(private int $id)
    {
    }

    public function get_name(): string
    {
        return (string) get_the_title($this->id);
    }

    /** As WooCommerce: the price as stored, decimal text. */
    public function get_price(): string
    {
        return (string) get_post_meta($this->id, '_price', true);
    }
}

final class Fake_WC_Cart
{
    /** @return array<string, array<string, mixed>> */
    public function get_cart(): array
    {
        $raw = isset($_COOKIE['fake_wc_cart']) ? wp_unslash((string) $_COOKIE['fake_wc_cart']) : '{}';
        $lines = [];
        foreach ((array) json_decode($raw, true) as $id => $quantity) {
            $price = (float) get_post_meta((int) $id, '_price', true);
            $lines['line-' . $id] = ['product_id' => (int) $id, 'quantity' => (int) $quantity,
                'line_total' => $price * (int) $quantity, 'data' => new Fake_WC_Product((int) $id)];
        }
        return $lines;
    }

    public function get_total(string $context = 'view'): float
    {
        return array_sum(array_column($this->get_cart(), 'line_total'));
    }

    public function empty_cart(): void
    {
        setcookie('fake_wc_cart', '', time() - 3600, '/');
    }
}

final class Fake_WC_Session
{
    public function get_customer_id(): string
    {
        return isset($_COOKIE['fake_wc_session']) ? sanitize_key((string) $_COOKIE['fake_wc_session']) : '';
    }
}

final class Fake_WC_Order_Item
{
    /** @param array<string, mixed> $line */
    public function __construct(private array $line)
    {
    }

    public function get_product_id(): int
    {
        return (int) $this->line['product_id'];
    }

    public function get_name(): string
    {
        return $this->line['data']->get_name();
    }

    public function get_quantity(): int
    {
        return (int) $this->line['quantity'];
    }

    public function get_total(): float
    {
        return (float) $this->line['line_total'];
    }
}

final class Fake_WC_Order
{
    /** The status change save() reports, as WC_Order::set_status() records it. */
    private ?string $transitionFrom = null;

    /**
     * @param array<string, array<string, mixed>> $lines
     * @param array<string, string> $meta
     */
    public function __construct(private int $id, private string $email, private array $lines,
        private array $meta = [], public string $status = 'pending', private string $paymentMethod = '',
        private ?int $datePaid = null)
    {
    }

    public function get_meta(string $key): string
    {
        return $this->meta[$key] ?? '';
    }

    public function update_meta_data(string $key, string $value): void
    {
        $this->meta[$key] = $value;
    }

    /** As WC_Data::save_meta_data(): the meta alone, without the order's save hooks. */
    public function save_meta_data(): void
    {
        $this->store();
    }

    public function get_payment_method(): string
    {
        return $this->paymentMethod;
    }

    /** As WC_Order: when WooCommerce recorded the payment, or null. */
    public function get_date_paid(): ?DateTimeImmutable
    {
        return $this->datePaid === null ? null : new DateTimeImmutable('@' . $this->datePaid);
    }

    public function set_status(string $status): void
    {
        $this->transitionFrom ??= $this->status;
        $this->status = $status;
    }

    /** As WC_Abstract_Order::update_status(): set_status() and save(), which fires the hooks. */
    public function update_status(string $status): bool
    {
        $this->set_status($status);
        $this->save();
        return true;
    }

    /**
     * As WC_Order::payment_complete(): on an order awaiting payment, date_paid, the status that
     * means paid, save(), then woocommerce_payment_complete.
     */
    public function payment_complete(string $transactionId = ''): bool
    {
        if (!in_array($this->status, ['on-hold', 'pending', 'failed', 'cancelled'], true)) {
            return false;
        }
        $this->datePaid ??= time();
        $this->set_status($this->paymentCompleteStatus());
        $this->save();
        do_action('woocommerce_payment_complete', $this->id, $transactionId);
        return true;
    }

    /**
     * As WooCommerce's woocommerce_payment_complete_order_status filter: processing, except for
     * cash on delivery, whose gateway makes it completed (paid when the parcel is).
     */
    private function paymentCompleteStatus(): string
    {
        return $this->paymentMethod === 'cod' ? 'completed' : 'processing';
    }

    /**
     * As WC_Order::save(): date_paid set when the order reaches its payment-complete status
     * (maybe_set_date_paid), the order stored, woocommerce_new_order or woocommerce_update_order,
     * then the status change's hooks.
     */
    public function save(): int
    {
        $paidStatus = $this->paymentCompleteStatus();
        if ($this->datePaid === null && ($this->status === $paidStatus
                || ($paidStatus === 'processing' && $this->status === 'completed'))) {
            $this->datePaid = time();
        }
        $new = !isset(((array) get_option('fake_wc_orders', []))[$this->id]);
        $this->store();
        do_action($new ? 'woocommerce_new_order' : 'woocommerce_update_order', $this->id, $this);
        if ($this->transitionFrom !== null && $this->transitionFrom !== $this->status) {
            $from = $this->transitionFrom;
            $this->transitionFrom = null;
            do_action('woocommerce_order_status_changed', $this->id, $from, $this->status, $this);
        }
        $this->transitionFrom = null;
        return $this->id;
    }

    /** Kept in an option, where wc_get_order() finds it on a later request. */
    private function store(): void
    {
        $orders = (array) get_option('fake_wc_orders', []);
        $orders[$this->id] = ['email' => $this->email, 'lines' => array_map(
            static fn ($line) => array_diff_key($line, ['data' => 1]), $this->lines),
            'meta' => $this->meta, 'status' => $this->status, 'payment_method' => $this->paymentMethod,
            'date_paid' => $this->datePaid];
        update_option('fake_wc_orders', $orders, false);
    }

    public function get_id(): int
    {
        return $this->id;
    }

    public function get_billing_email(): string
    {
        return $this->email;
    }

    public function get_billing_first_name(): string
    {
        return 'Carla';
    }

    public function get_billing_last_name(): string
    {
        return 'Customer';
    }

    public function get_billing_phone(): string
    {
        return '+49 30 1234567';
    }

    /** @return list<Fake_WC_Order_Item> */
    public function get_items(): array
    {
        return array_map(static fn ($line) => new Fake_WC_Order_Item($line), array_values($this->lines));
    }

    public function get_total(): float
    {
        return array_sum(array_column($this->lines, 'line_total'));
    }

    public function get_currency(): string
    {
        return get_woocommerce_currency();
    }
}

final class Fake_WC_Order_Refund
{
    public function __construct(private int $id, private string $amount)
    {
    }

    public function get_id(): int
    {
        return $this->id;
    }

    public function get_amount(): string
    {
        return $this->amount;
    }
}

/**
 * @param mixed $id
 * @return Fake_WC_Order|Fake_WC_Order_Refund|false
 */
function wc_get_order($id = false)
{
    $id = (int) $id;
    $kept = ((array) get_option('fake_wc_orders', []))[$id] ?? null;
    if (!is_array($kept)) {
        return false;
    }
    if (isset($kept['refund'])) {
        return new Fake_WC_Order_Refund($id, (string) $kept['refund']);
    }
    $lines = array_map(static fn ($line) => $line + ['data' => new Fake_WC_Product((int) $line['product_id'])],
        (array) $kept['lines']);
    return new Fake_WC_Order($id, (string) $kept['email'], $lines, (array) $kept['meta'], (string) $kept['status'],
        (string) ($kept['payment_method'] ?? ''), isset($kept['date_paid']) ? (int) $kept['date_paid'] : null);
}

/**
 * @param mixed $id
 * @return Fake_WC_Product|false
 */
function wc_get_product($id = false)
{
    $id = (int) $id;
    return get_post_type($id) === 'product' ? new Fake_WC_Product($id) : false;
}

function WC(): WooCommerce
{
    static $instance = null;
    if ($instance === null) {
        $instance = new WooCommerce();
    }
    return $instance;
}

/** As WooCommerce: the cart and session exist once loaded (front-end pages load them). */
function wc_load_cart(): void
{
    WC()->cart = WC()->cart ?? new Fake_WC_Cart();
    WC()->session = WC()->session ?? new Fake_WC_Session();
}

// As WC_Form_Handler::process_registration on wp_loaded: the account, then the hook.
add_action('wp_loaded', static function (): void {
    if (!isset($_POST['register'], $_POST['email'])) {
        return;
    }
    $data = ['user_login' => 'new-customer', 'user_pass' => 'x', 'role' => 'customer',
        'user_email' => sanitize_email(wp_unslash((string) $_POST['email'])),
        'first_name' => sanitize_text_field(wp_unslash((string) ($_POST['first_name'] ?? ''))),
        'last_name' => sanitize_text_field(wp_unslash((string) ($_POST['last_name'] ?? '')))];
    do_action('woocommerce_created_customer', 4242, $data, false);
    wp_safe_redirect(home_url('/my-account/'));
    exit;
});

// As WooCommerce: front-end requests get the cart, REST requests do not.
add_action('wp_loaded', static function (): void {
    $uri = isset($_SERVER['REQUEST_URI']) ? (string) $_SERVER['REQUEST_URI'] : '';
    if (!is_admin() && strpos($uri, trailingslashit(rest_get_url_prefix())) === false) {
        wc_load_cart();
    }
});

// As WooCommerce::init() on init, before its own setup: where extensions declare compatibility.
add_action('init', static function (): void {
    do_action('before_woocommerce_init');
}, 0);

function get_woocommerce_currency(): string
{
    return 'EUR';
}

function is_product(): bool
{
    return is_singular('product');
}

function is_checkout(): bool
{
    return is_page('checkout');
}

function is_order_received_page(): bool
{
    return is_checkout() && isset($_GET['order-received']);
}

function is_account_page(): bool
{
    return is_page('my-account');
}

function wc_get_checkout_url(): string
{
    return home_url('/checkout/');
}

add_action('init', static function (): void {
    register_post_type('product', [
        'public' => true,
        'label' => 'Products',
        'rewrite' => ['slug' => 'product'],
        'supports' => ['title', 'editor'],
    ]);
});

add_action('template_redirect', static function (): void {
    $ajax = isset($_GET['wc-ajax']) && $_GET['wc-ajax'] === 'checkout';
    if (!isset($_GET['fake_wc_checkout']) && !$ajax) {
        return;
    }
    $email = sanitize_email(wp_unslash((string) ($_GET['email'] ?? '')));
    $gateway = sanitize_key((string) ($_GET['payment_method'] ?? ''));
    $order = new Fake_WC_Order(random_int(1000, 999999), $email, WC()->cart->get_cart(), [], 'pending', $gateway);
    $order->save();
    if (isset($_GET['block'])) {
        do_action('woocommerce_store_api_checkout_order_processed', $order);
    } else {
        do_action('woocommerce_checkout_order_processed', $order->get_id(), ['billing_email' => $email], $order);
    }
    // Then the gateway's process_payment(), as WooCommerce's offline gateways do it: cash on
    // delivery puts the order in processing (unpaid: paid at Completed), a bank transfer on hold.
    // An online gateway leaves it pending until its callback (payment_complete, below).
    $offline = ['cod' => 'processing', 'bacs' => 'on-hold'];
    if (isset($offline[$gateway])) {
        $order->update_status($offline[$gateway]);
    }
    WC()->cart->empty_cart();
    if ($ajax) {
        wp_send_json(['result' => 'success', 'redirect' => wc_get_checkout_url() . '?order-received=' . $order->get_id()]);
    }
    nocache_headers();
    echo '<!doctype html><title>Order received</title><p id="order">Order ' . (int) $order->get_id() . ' received</p>';
    exit;
});

// As WC_Form_Handler::add_to_cart_action: ?add-to-cart=ID adds the product, then the hook.
add_action('wp_loaded', static function (): void {
    if (!isset($_GET['add-to-cart'])) {
        return;
    }
    $id = (int) $_GET['add-to-cart'];
    $quantity = max(1, (int) ($_GET['quantity'] ?? 1));
    $raw = isset($_COOKIE['fake_wc_cart']) ? wp_unslash((string) $_COOKIE['fake_wc_cart']) : '{}';
    $cart = (array) json_decode($raw, true);
    $cart[$id] = (int) ($cart[$id] ?? 0) + $quantity;
    setcookie('fake_wc_cart', (string) wp_json_encode($cart), 0, '/');
    do_action('woocommerce_add_to_cart', 'line-' . $id, $id, $quantity, 0, [], []);
});

// The classic checkout's shortcode and the block checkout's block, as WooCommerce registers them.
add_shortcode('woocommerce_checkout', static function (): string {
    ob_start();
    do_action('woocommerce_before_checkout_form', null);
    return ob_get_clean() . '<form class="checkout woocommerce-checkout"></form>';
});
add_action('init', static function (): void {
    register_block_type('woocommerce/checkout', [
        'render_callback' => static fn (): string => '<div class="wp-block-woocommerce-checkout"></div>',
    ]);
});

// An order's later life, as WC_Order::payment_complete(), update_status() and wc_create_refund()
// fire it: on a request of its own (a payment provider's callback, the back office).
add_action('wp_loaded', static function (): void {
    if (!isset($_GET['fake_wc_order'])) {
        return;
    }
    $id = (int) $_GET['fake_wc_order'];
    $order = wc_get_order($id);
    if (!$order instanceof Fake_WC_Order) {
        wp_send_json(['error' => 'no such order'], 404);
    }
    if (isset($_GET['payment_complete'])) {
        $order->payment_complete('txn-' . $id);
    } elseif (isset($_GET['status'])) {
        $order->update_status(sanitize_key((string) $_GET['status']));
    }
    if (isset($_GET['refund'])) {
        $orders = (array) get_option('fake_wc_orders', []);
        $refund = $id * 100 + count($orders);
        $orders[$refund] = ['refund' => sanitize_text_field(wp_unslash((string) $_GET['refund']))];
        update_option('fake_wc_orders', $orders, false);
        do_action('woocommerce_order_refunded', $id, $refund);
    }
    wp_send_json(['ok' => true]);
});
