<?php

/**
 * The plugin's settings, and the one place the site API key is read.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

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
    /** Set when the database copy of a key now defined in wp-config.php was removed (a notice). */
    public const KEY_REMOVED = 'visitor_service_key_removed';
    /** Until when no delivery of the outbox is started: one runs. */
    public const DELIVERY_HOLD = 'visitor_service_delivery_hold';
    /** The outbox's kinds (paths) paused after a failure: until when, and failures in a row. */
    public const PAUSED = 'visitor_service_paused';
    /** Which form plugins' submissions count as leads (Forms). */
    public const FORM_SOURCES = 'visitor_service_form_sources';

    /** Every option the plugin writes, removed by uninstall.php. */
    public const ALL = [
        self::URL, self::PUBLIC_KEY, self::API_KEY, self::REQUIRE_CONSENT, self::DROPPED,
        self::LAST_CHECK, self::DB_VERSION, self::SETTINGS_READ_AT, self::KEY_REMOVED,
        self::DELIVERY_HOLD, self::FORM_SOURCES, self::PAUSED,
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

    /** True while saveApiKey() writes, so the form's filter below lets its own write through. */
    private static bool $savingApiKey = false;

    /**
     * Saves the API key without ever autoloading it with every page. A row left autoloaded (by
     * an older version that saved it through the settings form) is replaced, not kept.
     */
    public static function saveApiKey(string $key): void
    {
        self::$savingApiKey = true;
        try {
            if (self::storedApiKeyAutoload() !== null) {
                delete_option(self::API_KEY);
            }
            add_option(self::API_KEY, $key, '', false);
        } finally {
            self::$savingApiKey = false;
        }
    }

    /**
     * pre_update_option_visitor_service_api_key: the settings form saves through options.php,
     * whose update_option() would add the key with autoload on. The key is saved here with
     * autoload off instead, and update_option() is handed the old value, so it writes nothing.
     * With the key in wp-config.php no copy is stored at all.
     *
     * @param mixed $value what the form sent, already sanitized
     * @param mixed $old the stored value
     * @return mixed
     */
    public static function saveApiKeyFromForm($value, $old)
    {
        if (self::$savingApiKey) {
            return $value;
        }
        if (!self::apiKeyFromConstant() && is_string($value) && $value !== '' && $value !== $old) {
            self::saveApiKey($value);
        }
        return $old;
    }

    /** The autoload flag of the stored key's row, or null when no key is stored. */
    private static function storedApiKeyAutoload(): ?string
    {
        global $wpdb;
        // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- WordPress 6.1 has no API that reads an option's autoload flag; read when the key is saved or tidied, where a cached answer could be stale
        $autoload = $wpdb->get_var($wpdb->prepare(
            "SELECT autoload FROM {$wpdb->options} WHERE option_name = %s",
            self::API_KEY
        ));
        return $autoload === null ? null : (string) $autoload;
    }

    /**
     * Once per plugin update, and whenever an administrator opens wp-admin with the key in
     * wp-config.php: a key stored in the database is removed when the constant defines one
     * (answers true then, for a notice), and re-stored with autoload off when it was autoloaded.
     */
    public static function tidyStoredApiKey(): bool
    {
        $autoload = self::storedApiKeyAutoload();
        if ($autoload === null) {
            return false;
        }
        if (self::apiKeyFromConstant()) {
            delete_option(self::API_KEY);
            return true;
        }
        // 'no' before WordPress 6.6; 'off' and 'auto-off' since.
        if (!in_array($autoload, ['no', 'off', 'auto-off'], true)) {
            self::saveApiKey((string) get_option(self::API_KEY, ''));
        }
        return false;
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
