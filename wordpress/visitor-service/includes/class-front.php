<?php

/**
 * The loader on every front-end page, and the logged-in marker the loader looks for.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * Enqueues the two script tags of docs/sdk.md (the queue stub, then the loader with the public
 * key), the loader's tag carrying the CMS route and admin-ajax addresses. What is printed is the
 * same for every visitor of a page (so a full-page cache may keep it): no user id, no nonce, no
 * product statement. A product page is only marked (data-product-page); the loader asks the
 * never-cached route for a fresh statement.
 */
final class Front
{
    /** Not identifying: only says "a WordPress login exists in this browser", so ask for a nonce. */
    public const LOGIN_MARKER = 'svc_wp_li';
    public const HANDLE = 'visitor-service-loader';
    public const MASK_TEXT_CLASS = 'rr-mask';

    public static function hooks(): void
    {
        add_action('wp_enqueue_scripts', [self::class, 'enqueueLoader']);
        add_filter('script_loader_tag', [self::class, 'loaderTag'], 10, 2);
        add_filter('body_class', [self::class, 'maskPersonalPages']);
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

    /** wp_enqueue_scripts: the loader (in the head) and the queue stub that runs before it. */
    public static function enqueueLoader(): void
    {
        if (is_admin() || !Options::configured()) {
            return;
        }
        $loader = Options::serviceUrl() . '/sdk/v1/loader.js';
        $src = add_query_arg('key', rawurlencode(Options::publicKey()), $loader);
        // phpcs:ignore WordPress.WP.EnqueuedResourceParameters.MissingVersion, VisitorService.WP.EnqueuedResourceParameters -- the service's loader, not the plugin's: it serves its current version at this address (?key= is all it reads)
        wp_enqueue_script(self::HANDLE, $src, [], null, false);
        wp_add_inline_script(
            self::HANDLE,
            'window.svc = window.svc || function () { (svc.q = svc.q || []).push(arguments); };',
            'before'
        );
    }

    /**
     * script_loader_tag: the loader's tag gets async and the addresses the loader reads. Only the
     * loader's own <script> element is changed, not the inline stub printed before it.
     */
    public static function loaderTag(string $tag, string $handle): string
    {
        if ($handle !== self::HANDLE) {
            return $tag;
        }
        $attributes = ' async data-cms-route="' . esc_attr(esc_url(rest_url(Rest::NAMESPACE . '/'))) . '"'
            . ' data-cms-ajax="' . esc_attr(esc_url(admin_url('admin-ajax.php'))) . '"'
            . (WooCommerce::isProductPage() ? ' data-product-page' : '');
        $element = '/<script(?=[^>]*\sid=["\']' . preg_quote(self::HANDLE, '/') . '-js["\'])/';
        return (string) preg_replace($element, '<script' . $attributes, $tag, 1);
    }

    /**
     * body_class: on checkout, order-received and My Account pages every text of the page is
     * masked in recordings, not only the inputs. rrweb, which the loader records with, masks
     * the text of every element inside one with the class `rr-mask` (its default maskTextClass).
     *
     * @param list<string> $classes
     * @return list<string>
     */
    public static function maskPersonalPages(array $classes): array
    {
        if (WooCommerce::isPersonalPage()) {
            $classes[] = self::MASK_TEXT_CLASS;
        }
        return $classes;
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
