<?php

/**
 * The loader on every front-end page, and the logged-in marker the loader looks for.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

/**
 * Prints the two script tags of docs/sdk.md with the public key, plus the CMS route and
 * admin-ajax addresses. What is printed is the same for every visitor of a page (so a full-page
 * cache may keep it): no user id, no nonce, no product statement. A product page is only marked
 * (data-product-page); the loader asks the never-cached route for a fresh statement.
 */
final class Front
{
    /** Not identifying: only says "a WordPress login exists in this browser", so ask for a nonce. */
    public const LOGIN_MARKER = 'svc_wp_li';

    public static function hooks(): void
    {
        add_action('wp_head', [self::class, 'printLoader'], 1);
        add_action('set_logged_in_cookie', [self::class, 'markLogin'], 10, 4);
        add_action('clear_auth_cookie', [self::class, 'unmarkLogin']);
        add_action('template_redirect', [self::class, 'syncLoginMarker']);
    }

    /**
     * A login from before the plugin was active has no marker: it gets one (a session cookie).
     * A marker left behind by an expired login is removed. Anonymous pages without a marker,
     * which caches keep, never get a Set-Cookie from here.
     */
    public static function syncLoginMarker(): void
    {
        $marked = isset($_COOKIE[self::LOGIN_MARKER]);
        if (!$marked && is_user_logged_in()) {
            self::markLogin('', 0);
        } elseif ($marked && !is_user_logged_in()) {
            self::unmarkLogin();
        }
    }

    public static function printLoader(): void
    {
        if (is_admin() || !Options::configured()) {
            return;
        }
        $src = add_query_arg('key', rawurlencode(Options::publicKey()), Options::serviceUrl() . '/sdk/v1/loader.js');
        $attributes = [
            'data-cms-route' => esc_url(rest_url(Rest::NAMESPACE . '/')),
            'data-cms-ajax' => esc_url(admin_url('admin-ajax.php')),
        ];
        $line = '<script async src="' . esc_url($src) . '"';
        foreach ($attributes as $name => $value) {
            $line .= ' ' . $name . '="' . $value . '"';
        }
        if (WooCommerce::isProductPage()) {
            $line .= ' data-product-page';
        }
        echo "<script>window.svc = window.svc || function () { (svc.q = svc.q || []).push(arguments); };</script>\n";
        echo $line . "></script>\n"; // phpcs:ignore -- every part escaped above
    }

    /**
     * @param string $cookie
     * @param int $expire
     */
    public static function markLogin($cookie = '', $expire = 0): void
    {
        if (!headers_sent()) {
            setcookie(self::LOGIN_MARKER, '1', [
                'expires' => (int) $expire,
                'path' => COOKIEPATH ?: '/',
                'domain' => COOKIE_DOMAIN ?: '',
                'secure' => is_ssl(),
                'httponly' => false,
                'samesite' => 'Lax',
            ]);
        }
    }

    public static function unmarkLogin(): void
    {
        if (!headers_sent()) {
            setcookie(self::LOGIN_MARKER, '', ['expires' => time() - YEAR_IN_SECONDS, 'path' => COOKIEPATH ?: '/',
                'domain' => COOKIE_DOMAIN ?: '']);
        }
    }
}
