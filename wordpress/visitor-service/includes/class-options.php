<?php

/**
 * The plugin's settings, and the one place the site API key is read.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

/**
 * Option names and accessors. The API key never leaves the server: it is read here and used
 * only in requests to the service and to derive the statement signing key.
 */
final class Options
{
    public const URL = 'visitor_service_url';
    public const PUBLIC_KEY = 'visitor_service_public_key';
    public const API_KEY = 'visitor_service_api_key';
    public const REQUIRE_CONSENT = 'visitor_service_require_consent';
    public const DROPPED = 'visitor_service_dropped';
    public const LAST_CHECK = 'visitor_service_last_check';
    public const DB_VERSION = 'visitor_service_db_version';
    public const SETTINGS_READ_AT = 'visitor_service_settings_read_at';

    /** Every option the plugin writes, removed by uninstall.php. */
    public const ALL = [
        self::URL, self::PUBLIC_KEY, self::API_KEY, self::REQUIRE_CONSENT, self::DROPPED,
        self::LAST_CHECK, self::DB_VERSION, self::SETTINGS_READ_AT,
    ];

    public static function serviceUrl(): string
    {
        return rtrim((string) get_option(self::URL, ''), '/');
    }

    public static function publicKey(): string
    {
        return (string) get_option(self::PUBLIC_KEY, '');
    }

    /** The API key: the wp-config.php constant when defined, otherwise the (non-autoloaded) option. */
    public static function apiKey(): string
    {
        if (defined('VISITOR_SERVICE_API_KEY') && is_string(constant('VISITOR_SERVICE_API_KEY'))) {
            return (string) constant('VISITOR_SERVICE_API_KEY');
        }
        return (string) get_option(self::API_KEY, '');
    }

    public static function apiKeyFromConstant(): bool
    {
        return defined('VISITOR_SERVICE_API_KEY');
    }

    /** Saves the API key without ever autoloading it with every page. */
    public static function saveApiKey(string $key): void
    {
        if (get_option(self::API_KEY, null) === null) {
            add_option(self::API_KEY, $key, '', false);
            return;
        }
        update_option(self::API_KEY, $key, false);
    }

    public static function requireConsent(): bool
    {
        return (bool) get_option(self::REQUIRE_CONSENT, false);
    }

    public static function configured(): bool
    {
        return self::serviceUrl() !== '' && self::publicKey() !== '' && self::apiKey() !== '';
    }

    /** Counts what was dropped while the service could not be reached (pageviews, errors). */
    public static function countDropped(string $kind, int $amount = 1): void
    {
        $counts = get_option(self::DROPPED, []);
        $counts = is_array($counts) ? $counts : [];
        $counts[$kind] = (int) ($counts[$kind] ?? 0) + $amount;
        update_option(self::DROPPED, $counts, false);
    }

    /** @return array<string, int> */
    public static function dropped(): array
    {
        $counts = get_option(self::DROPPED, []);
        return is_array($counts) ? array_map('intval', $counts) : [];
    }
}
