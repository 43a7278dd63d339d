<?php

/**
 * Limits on the public routes: requests per address and minute, and the outbox's size.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * /leads, /surveys and /statement answer anyone (pages are cached, so no nonce can be asked
 * for), and each accepted request makes the shop call the service. A one-minute window per
 * address (an IPv6 address counts by its /64), opened by the address's first request, bounds
 * that; the counters are transients, so a persistent object cache keeps them in memory and
 * WordPress removes expired ones. The outbox keeps at most OUTBOX_CAP items. Whatever is refused
 * is counted and shown in Settings.
 */
final class Limits
{
    /** Requests per address and minute; the visitor_service_rate_limit filter changes them (0: none). */
    public const PER_MINUTE = ['statement' => 120, 'leads' => 10, 'surveys' => 10];
    public const OUTBOX_CAP = 1000;
    private const WINDOW = 60;

    /** @var array<string, true|\WP_Error> this request's answer per route */
    private static array $decided = [];

    /**
     * The public routes' permission check: true, or a 429 error for an address over its limit.
     * Counted once per request: WordPress asks again for the Allow header.
     *
     * @return true|\WP_Error
     */
    public static function allow(string $route)
    {
        self::$decided[$route] = self::$decided[$route] ?? self::count($route);
        return self::$decided[$route];
    }

    /** @return true|\WP_Error */
    private static function count(string $route)
    {
        $limit = (int) apply_filters('visitor_service_rate_limit', self::PER_MINUTE[$route] ?? 0, $route);
        if ($limit <= 0) {
            return true;
        }
        // A window opens with an address's first request and lasts a minute.
        $key = 'visitor_service_rl_' . md5($route . '|' . self::address());
        $now = time();
        $window = get_transient($key);
        if (!is_array($window) || $now - (int) ($window['since'] ?? 0) >= self::WINDOW) {
            $window = ['since' => $now, 'count' => 0];
        }
        if ((int) $window['count'] >= $limit) {
            Options::countDropped('rate_limited');
            return new \WP_Error(
                'visitor_service_rate_limited',
                __('Too many requests from this address. Please try again in a minute.', 'visitor-service'),
                ['status' => 429, 'retryAfter' => max(1, (int) $window['since'] + self::WINDOW - $now)]
            );
        }
        $window['count'] = (int) $window['count'] + 1;
        set_transient($key, $window, self::WINDOW);
        return true;
    }

    /** rest_post_dispatch: a refused request says when to come back. */
    public static function retryAfter(\WP_HTTP_Response $response): \WP_HTTP_Response
    {
        $data = $response->get_data();
        if ($response->get_status() === 429 && is_array($data) && isset($data['data']['retryAfter'])) {
            $response->header('Retry-After', (string) (int) $data['data']['retryAfter']);
        }
        return $response;
    }

    /** The address the limit counts: the visitor's IPv4 address, or the /64 of an IPv6 one. */
    private static function address(): string
    {
        $ip = Request::ip();
        $packed = $ip !== '' ? inet_pton($ip) : false;
        if ($packed === false) {
            return 'unknown';
        }
        return strlen($packed) === 16 ? bin2hex(substr($packed, 0, 8)) . '::/64' : $ip;
    }

    public static function outboxCap(): int
    {
        return max(1, (int) apply_filters('visitor_service_outbox_cap', self::OUTBOX_CAP));
    }
}
