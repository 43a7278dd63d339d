<?php

/**
 * The thin WooCommerce adapter: cart, session id, product pages and the checkout hook.
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

    /** Declares that the plugin works with WooCommerce's custom order tables. */
    public static function declareCompatibility(): void
    {
        $util = '\Automattic\WooCommerce\Utilities\FeaturesUtil';
        if (class_exists($util)) {
            $util::declare_compatibility('custom_order_tables', VISITOR_SERVICE_FILE, true);
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
