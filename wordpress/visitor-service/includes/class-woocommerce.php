<?php

/**
 * The thin WooCommerce adapter: cart, session id, product pages, the checkout hook, and the
 * commerce events (cart, checkout, an order's life) the revenue figures are made of.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * Uses only WooCommerce's public API (WC(), the cart and session objects, wc_get_order-style
 * order objects, the checkout hook). Everything here switches off when WooCommerce is not active.
 */
final class WooCommerce
{
    public static function active(): bool
    {
        return class_exists('WooCommerce') && function_exists('WC');
    }

    public static function hooks(): void
    {
        add_action('before_woocommerce_init', [self::class, 'declareCompatibility']);
        add_action('woocommerce_checkout_order_processed', [self::class, 'checkoutProcessed'], 20, 3);
        // The block checkout (Store API) places orders through its own hook.
        add_action('woocommerce_store_api_checkout_order_processed', [self::class, 'blockCheckoutProcessed']);
        // An account registered at the checkout or on My Account.
        add_action('woocommerce_created_customer', [self::class, 'customerCreated'], 10, 2);
        // Commerce events (issue 31): the cart, the checkout page, and the order's later life.
        add_action('woocommerce_add_to_cart', [self::class, 'addedToCart'], 10, 4);
        add_action('woocommerce_before_checkout_form', [self::class, 'checkoutStarted']);
        add_filter('render_block_woocommerce/checkout', [self::class, 'blockCheckoutRendered']);
        // Paid is when WooCommerce records the payment: the gateway's payment_complete, or
        // date_paid set on a save (cash on delivery at Completed, a bank transfer marked paid).
        add_action('woocommerce_payment_complete', [self::class, 'paymentComplete']);
        add_action('woocommerce_update_order', [self::class, 'orderSaved'], 10, 2);
        add_action('woocommerce_order_status_changed', [self::class, 'statusChanged'], 10, 4);
        add_action('woocommerce_order_refunded', [self::class, 'refunded'], 10, 2);
    }

    /** The order meta that says the plugin reported the order's placing. */
    private const REPORTED = '_visitor_service_reported';
    /** The order meta that says the plugin reported its payment: one paid event per order. */
    private const PAID = '_visitor_service_paid';
    /** What a status reports by itself; no status alone means paid. */
    private const STATUS_EVENTS = ['cancelled' => 'order_cancelled', 'failed' => 'order_failed'];

    /**
     * woocommerce_add_to_cart($cart_item_key, $product_id, $quantity, $variation_id): the
     * product, quantity and unit price, in the shop's currency.
     *
     * @param mixed $key
     * @param mixed $productId
     * @param mixed $quantity
     * @param mixed $variationId
     */
    public static function addedToCart($key, $productId, $quantity = 1, $variationId = 0): void
    {
        $event = [
            'type' => 'add_to_cart',
            'productId' => (string) (int) $productId,
            'quantity' => max(1, (int) $quantity),
            'currency' => (string) get_woocommerce_currency(),
        ];
        $product = function_exists('wc_get_product') ? wc_get_product((int) $variationId ?: (int) $productId) : null;
        if (is_object($product) && method_exists($product, 'get_price') && is_numeric($product->get_price())) {
            $event['price'] = self::money($product->get_price());
        }
        self::sendVisitorEvent($event);
    }

    /** woocommerce_before_checkout_form: the classic checkout page is shown. */
    public static function checkoutStarted(): void
    {
        self::sendVisitorEvent(['type' => 'checkout_started']);
    }

    /**
     * render_block_woocommerce/checkout: the block checkout is shown (a WordPress filter, so
     * the block's HTML is handed back unchanged).
     *
     * @param mixed $html
     * @return mixed
     */
    public static function blockCheckoutRendered($html)
    {
        static $sent = false;
        if (!$sent && !is_admin()) {
            $sent = true;
            self::checkoutStarted();
        }
        return $html;
    }

    /**
     * A commerce event of the visitor on this request (a cart, a checkout, a placed order):
     * sent with the visitor's context, so the service's privacy gate applies to it, through
     * the outbox (kept, and sent after the response).
     *
     * @param array<string, mixed> $event
     */
    private static function sendVisitorEvent(array $event): bool
    {
        $visitor = Request::cookieVisitorId();
        if ($visitor === null || !Options::configured() || !Request::mayCollect()) {
            return false;
        }
        $event += ['eventId' => 'wc-' . Request::newId(), 'visitorId' => $visitor,
            'occurredAt' => self::now()] + Request::serverContext();
        // No sessionId: the loader's browser session is not known to the server, and WooCommerce's
        // customer session (days long) is not one; the service places the event by visitor and time.
        return Outbox::accept('/ingest/commerce', array_filter($event, static fn ($v) => $v !== '' && $v !== null));
    }

    /**
     * A later step of an order the plugin reported as placed. It happens on a request that is
     * not the visitor's (a payment provider's callback, the shop's back office), so it carries
     * no visitor: the service finds the order by its id. Its id is the step's own, so a step
     * reported twice (two requests marking one order paid at once) is stored once.
     *
     * @param object|null $order a WC_Order
     * @param array<string, mixed> $extra
     */
    private static function sendOrderEvent($order, string $type, string $step, array $extra = []): bool
    {
        if (!is_object($order) || !Options::configured() || !$order->get_meta(self::REPORTED)) {
            return false;
        }
        return Outbox::accept('/ingest/commerce', [
            'eventId' => self::orderKey($order) . '-' . $step,
            'type' => $type,
            'orderId' => (string) $order->get_id(),
            'occurredAt' => self::now(),
        ] + $extra);
    }

    /**
     * woocommerce_payment_complete($order_id): the gateway took the money.
     *
     * @param mixed $orderId
     */
    public static function paymentComplete($orderId): void
    {
        self::sendPaid(self::order($orderId));
    }

    /**
     * woocommerce_update_order($order_id, $order): an order was saved; paid once WooCommerce set
     * its date_paid. That is how offline payments are recorded: cash on delivery at Completed
     * (its gateway makes Completed the payment-complete status), a bank transfer or cheque when
     * the shop moves it on to Processing, an order marked paid through the REST API.
     *
     * @param mixed $orderId
     * @param mixed $order a WC_Order (older callers pass the id alone)
     */
    public static function orderSaved($orderId, $order = null): void
    {
        $order = is_object($order) ? $order : self::order($orderId);
        if (is_object($order) && method_exists($order, 'get_date_paid') && $order->get_date_paid() !== null) {
            self::sendPaid($order);
        }
    }

    /**
     * One paid event per order, whichever hook saw the payment first: the order's meta says it
     * was kept (saved alone, so no other save hook runs), and the event's id is the order's own.
     *
     * @param object|null $order a WC_Order
     */
    private static function sendPaid($order): void
    {
        if (!is_object($order) || $order->get_meta(self::PAID)) {
            return;
        }
        if (self::sendOrderEvent($order, 'order_paid', 'paid')) {
            $order->update_meta_data(self::PAID, '1');
            $order->save_meta_data();
        }
    }

    /**
     * woocommerce_order_status_changed($order_id, $from, $to, $order): cancelled and failed are
     * reported as such. A status by itself never means paid: processing is where cash on
     * delivery waits, unpaid, for the parcel; only a date_paid WooCommerce recorded does (a
     * store that changes the status without the save hook). "refunded" is left to
     * woocommerce_order_refunded, which carries the amount.
     *
     * @param mixed $orderId
     * @param mixed $from
     * @param mixed $to
     * @param mixed $order
     */
    public static function statusChanged($orderId, $from = '', $to = '', $order = null): void
    {
        self::orderSaved($orderId, $order);
        $to = (string) $to;
        if (isset(self::STATUS_EVENTS[$to])) {
            $order = is_object($order) ? $order : self::order($orderId);
            self::sendOrderEvent($order, self::STATUS_EVENTS[$to], $to);
        }
    }

    /**
     * woocommerce_order_refunded($order_id, $refund_id): the refund's amount, in part or whole.
     *
     * @param mixed $orderId
     * @param mixed $refundId
     */
    public static function refunded($orderId, $refundId): void
    {
        $order = self::order($orderId);
        $refund = self::order($refundId);
        if (!is_object($order) || !is_object($refund) || !method_exists($refund, 'get_amount')) {
            return;
        }
        self::sendOrderEvent($order, 'order_refunded', 'refund-' . (int) $refundId, [
            'amount' => self::money($refund->get_amount()),
            'currency' => (string) $order->get_currency(),
        ]);
    }

    /**
     * @param mixed $orderId
     * @return object|null a WC_Order (or WC_Order_Refund)
     */
    private static function order($orderId)
    {
        $order = function_exists('wc_get_order') ? wc_get_order((int) $orderId) : null;
        return is_object($order) ? $order : null;
    }

    /** Now, to the millisecond: an order's steps often fall in one second. */
    private static function now(): string
    {
        return (new \DateTimeImmutable('now', new \DateTimeZone('UTC')))->format('Y-m-d\TH:i:s.v\Z');
    }

    /** An order's id on the service, unique to this shop: several shops may share a site. */
    private static function orderKey(object $order): string
    {
        return 'wc-order-' . (int) $order->get_id() . '-' . substr(md5(home_url()), 0, 8);
    }

    /**
     * A WooCommerce amount as decimal text with the shop's decimals: the service keeps money in
     * minor units and refuses what does not fit the currency, so no float reaches it.
     *
     * @param mixed $amount
     */
    private static function money($amount): string
    {
        $decimals = function_exists('wc_get_price_decimals') ? (int) wc_get_price_decimals() : 2;
        return number_format((float) $amount, max(0, $decimals), '.', '');
    }

    /**
     * woocommerce_created_customer($customer_id, $new_customer_data, $password_generated): the
     * new account's e-mail address (and name, when the form asked for one) becomes a lead.
     *
     * @param mixed $customerId
     * @param mixed $data
     */
    public static function customerCreated($customerId, $data = []): void
    {
        $data = is_array($data) ? $data : [];
        $name = trim((string) ($data['first_name'] ?? '') . ' ' . (string) ($data['last_name'] ?? ''));
        Forms::capture('woocommerce-registration', 'account', (string) ($data['user_email'] ?? ''), $name);
    }

    /** @param object $order a WC_Order */
    public static function blockCheckoutProcessed($order): void
    {
        if (is_object($order) && method_exists($order, 'get_id')) {
            self::checkoutProcessed($order->get_id(), null, $order);
        }
    }

    /**
     * WooCommerce loads the cart and session for front-end pages only, not for REST requests:
     * the route asks for them with wc_load_cart() (public since WooCommerce 3.6.4).
     */
    private static function loadCart(): void
    {
        if (self::active() && (!isset(WC()->cart) || !isset(WC()->session)) && function_exists('wc_load_cart')) {
            wc_load_cart();
        }
    }

    /**
     * before_woocommerce_init: the plugin works with WooCommerce's custom order tables (orders
     * only through wc_get_order() and the order object) and with the block cart and checkout
     * (the Store API's checkout hook and the checkout block's render filter).
     */
    public static function declareCompatibility(): void
    {
        $util = '\Automattic\WooCommerce\Utilities\FeaturesUtil';
        if (!class_exists($util)) {
            return;
        }
        foreach (['custom_order_tables', 'cart_checkout_blocks'] as $feature) {
            $util::declare_compatibility($feature, VISITOR_SERVICE_FILE, true);
        }
    }

    /** The product a URL of this shop shows, or null. */
    public static function productForUrl(string $url): ?string
    {
        if (!self::active()) {
            return null;
        }
        $id = url_to_postid($url);
        return $id > 0 && get_post_type($id) === 'product' ? (string) $id : null;
    }

    /**
     * The pages where WooCommerce prints the customer's own data as text (name, addresses,
     * e-mail, phone, order lines): checkout, order received, My Account.
     */
    public static function isPersonalPage(): bool
    {
        if (!self::active()) {
            return false;
        }
        foreach (['is_checkout', 'is_order_received_page', 'is_account_page'] as $conditional) {
            if (function_exists($conditional) && $conditional()) {
                return true;
            }
        }
        return false;
    }

    public static function isProductPage(): bool
    {
        return self::active() && function_exists('is_product') && is_product();
    }

    /** @return array<string, mixed>|null the live cart in the service's LeadIngest shape */
    public static function cart(): ?array
    {
        self::loadCart();
        if (!self::active() || !isset(WC()->cart) || !is_object(WC()->cart)) {
            return null;
        }
        $cart = WC()->cart;
        $items = [];
        foreach ($cart->get_cart() as $line) {
            $product = $line['data'] ?? null;
            $item = [
                'productId' => (string) ($line['product_id'] ?? ''),
                'quantity' => (float) ($line['quantity'] ?? 0),
                'price' => (float) ($line['line_total'] ?? 0),
            ];
            if (is_object($product) && method_exists($product, 'get_name')) {
                $item['name'] = mb_substr((string) $product->get_name(), 0, 500);
            }
            $items[] = $item;
        }
        return [
            'items' => array_slice($items, 0, 200),
            'total' => (float) $cart->get_total('edit'),
            'currency' => (string) get_woocommerce_currency(),
        ];
    }

    /** The WooCommerce session (customer) id, when there is a session. */
    public static function sessionId(): ?string
    {
        self::loadCart();
        if (!self::active() || !isset(WC()->session) || !is_object(WC()->session)) {
            return null;
        }
        $id = (string) WC()->session->get_customer_id();
        return $id !== '' ? mb_substr($id, 0, 128) : null;
    }

    /**
     * A placed order is the completed order of spec §3: it is captured server-side as a checkout
     * lead with the order's items, and it ends the visitor's active recording (orderCompleted).
     *
     * @param mixed $postedData
     * @param object|null $order a WC_Order
     */
    public static function checkoutProcessed($orderId, $postedData = null, $order = null): void
    {
        if (!is_object($order) && function_exists('wc_get_order')) {
            $order = wc_get_order($orderId);
        }
        $visitor = Request::cookieVisitorId();
        if (!is_object($order) || $visitor === null || !Options::configured() || !Request::mayCollect()) {
            return;
        }
        // The order itself, for the revenue figures: counted once the shop reports it paid.
        $placed = self::sendVisitorEvent([
            'eventId' => self::orderKey($order) . '-placed',
            'type' => 'order_placed',
            'orderId' => (string) $order->get_id(),
            'total' => self::money($order->get_total()),
            'currency' => (string) $order->get_currency(),
        ]);
        if ($placed) {
            $order->update_meta_data(self::REPORTED, '1');
            $order->save();
        }
        $email = (string) $order->get_billing_email();
        if (!is_email($email)) {
            return;
        }
        $items = [];
        foreach ($order->get_items() as $item) {
            $items[] = [
                'productId' => (string) $item->get_product_id(),
                'name' => mb_substr((string) $item->get_name(), 0, 500),
                'quantity' => (float) $item->get_quantity(),
                'price' => (float) $item->get_total(),
            ];
        }
        $name = trim($order->get_billing_first_name() . ' ' . $order->get_billing_last_name());
        $lead = [
            'leadId' => 'wc-order-' . (int) $order->get_id() . '-' . substr(md5(home_url()), 0, 8),
            'kind' => 'checkout',
            'visitorId' => $visitor,
            // The classic checkout posts to ?wc-ajax=checkout, the block checkout to the Store
            // API: the checkout page that sent it is the page the customer was on.
            'url' => Request::pageUrl(function_exists('wc_get_checkout_url') ? (string) wc_get_checkout_url() : null),
            'email' => $email,
            'name' => mb_substr($name, 0, 200),
            'phone' => mb_substr((string) $order->get_billing_phone(), 0, 50),
            'fields' => ['orderId' => (string) $order->get_id()],
            'cart' => [
                'items' => array_slice($items, 0, 200),
                'total' => (float) $order->get_total(),
                'currency' => (string) $order->get_currency(),
            ],
            'orderCompleted' => true,
        ] + Request::serverContext();
        $session = self::sessionId();
        if ($session !== null) {
            $lead['ecommerceSessionId'] = $session;
        }
        Outbox::accept('/ingest/leads', array_filter($lead, static fn ($v) => $v !== '' && $v !== null));
    }
}
