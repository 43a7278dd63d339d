<?php

/**
 * The visitor's request as the shop server sees it: address, user agent, GPC, consent, ids.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * Reads the facts the service needs from the current request. Nothing here is ever printed into
 * a page: the user id and the visitor's address only travel from this server to the service.
 */
final class Request
{
    public const VISITOR_COOKIE = 'svc_vid';
    public const ID_PATTERN = '/^[A-Za-z0-9_-]{1,64}$/';

    /** Sec-GPC: 1 on the request (spec §1 rule 2: honoured unconditionally). */
    public static function gpc(): bool
    {
        return isset($_SERVER['HTTP_SEC_GPC']) && sanitize_text_field(wp_unslash($_SERVER['HTTP_SEC_GPC'])) === '1';
    }

    /**
     * The consent state: the WordPress Consent API when a consent plugin provides it, else what
     * the loader says the visitor decided ($claimed), else the loader's cookie: the loader writes
     * svc_vid only once collection may start, so on a site that requires consent its presence
     * means the visitor consented.
     */
    public static function consent(?string $claimed = null): string
    {
        if (function_exists('wp_has_consent') && wp_has_consent('statistics')) {
            return 'granted';
        }
        if ($claimed === 'granted' || ($claimed === null && self::cookieVisitorId() !== null)) {
            return 'granted';
        }
        return 'unknown';
    }

    /** Whether anything about this visitor may be forwarded at all. */
    public static function mayCollect(?string $claimedConsent = null): bool
    {
        if (self::gpc()) {
            return false;
        }
        return !Options::requireConsent() || self::consent($claimedConsent) === 'granted';
    }

    public static function cookieVisitorId(): ?string
    {
        $value = isset($_COOKIE[self::VISITOR_COOKIE])
            ? sanitize_text_field(wp_unslash($_COOKIE[self::VISITOR_COOKIE])) : '';
        return preg_match(self::ID_PATTERN, $value) ? $value : null;
    }

    /** The visitor's address as this server saw it (filterable for shops behind a trusted proxy). */
    public static function ip(): string
    {
        $ip = isset($_SERVER['REMOTE_ADDR']) ? sanitize_text_field(wp_unslash($_SERVER['REMOTE_ADDR'])) : '';
        $ip = (string) apply_filters('visitor_service_client_ip', $ip);
        return filter_var($ip, FILTER_VALIDATE_IP) ? $ip : '';
    }

    public static function userAgent(): string
    {
        $agent = isset($_SERVER['HTTP_USER_AGENT']) ? sanitize_text_field(wp_unslash($_SERVER['HTTP_USER_AGENT'])) : '';
        return mb_substr($agent, 0, 2048);
    }

    /**
     * The current page's absolute URL (without any fragment): the site's own scheme, host and
     * port from home_url(), never the request's Host header, which the client chooses.
     */
    public static function currentUrl(): string
    {
        $uri = isset($_SERVER['REQUEST_URI']) ? esc_url_raw(wp_unslash($_SERVER['REQUEST_URI'])) : '/';
        $home = wp_parse_url(home_url());
        $origin = ($home['scheme'] ?? 'http') . '://' . ($home['host'] ?? '')
            . (isset($home['port']) ? ':' . $home['port'] : '');
        return mb_substr($origin . '/' . ltrim($uri, '/'), 0, 4096);
    }

    /**
     * The page the visitor was on. A request made in the background (admin-ajax, ?wc-ajax, the
     * REST API: how checkouts and most form plugins submit) is not a page: its Referer is used
     * when it is an address of this site (wp_get_referer() checks), else $fallback, else the
     * request's own address.
     */
    public static function pageUrl(?string $fallback = null): string
    {
        // phpcs:ignore WordPress.Security.NonceVerification.Recommended, VisitorService.Security.NonceVerification -- only whether this is WooCommerce's AJAX endpoint; the value is not read and nothing changes
        $background = wp_doing_ajax() || isset($_GET['wc-ajax']) || (defined('REST_REQUEST') && REST_REQUEST);
        if (!$background) {
            return self::currentUrl();
        }
        $referer = wp_get_referer();
        if (is_string($referer) && $referer !== '' && wp_parse_url($referer, PHP_URL_HOST) !== null) {
            return mb_substr($referer, 0, 4096);
        }
        return $fallback ?? self::currentUrl();
    }

    /**
     * What the service's VisitorContext needs from this server: address, agent, GPC, consent,
     * and the logged-in user id (read from the WordPress cookie, never from the page).
     *
     * @return array<string, mixed>
     */
    public static function serverContext(?string $claimedConsent = null): array
    {
        $context = [
            'ip' => self::ip(),
            'userAgent' => self::userAgent(),
            'gpc' => self::gpc(),
            'consent' => self::consent($claimedConsent),
        ];
        $user = function_exists('get_current_user_id') ? get_current_user_id() : 0;
        if ($user > 0) {
            $context['wpUserId'] = (string) $user;
        }
        return array_filter($context, static fn ($value) => $value !== '');
    }

    /** A fresh random id in the service's id alphabet. */
    public static function newId(): string
    {
        return rtrim(strtr(base64_encode(random_bytes(16)), '+/', '-_'), '=');
    }
}
