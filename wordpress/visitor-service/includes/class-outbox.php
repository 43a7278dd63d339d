<?php

/**
 * The durable outbox: leads, survey answers and shop events (carts, checkouts, orders), kept until
 * the service has them.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * What must not be lost is written to the plugin's own table before the route answers, sent
 * after the response, and deleted only once the service acknowledged it. What the service could
 * not take is re-sent by WP-Cron with exponential backoff. Items carry their own id (leadId,
 * responseId), so an item sent twice is stored once by the service.
 */
final class Outbox
{
    public const CRON_HOOK = 'visitor_service_retry';
    public const SCHEDULE = 'visitor_service_five_minutes';
    /** Ingest paths whose items are kept until delivered. */
    public const DURABLE = ['/ingest/leads', '/ingest/surveys', '/ingest/commerce'];
    /** What each path's items are, for the settings screen (commerce splits into orders and shop). */
    private const KINDS = ['/ingest/leads' => 'leads', '/ingest/surveys' => 'surveys', '/ingest/commerce' => 'shop'];
    private const BATCH = 50;
    private const MAX_BACKOFF = 6 * HOUR_IN_SECONDS;
    /** Seconds one send may wait for the service (never on a visitor's request). */
    private const TIMEOUT = 5.0;
    /** How long one delivery may run; no other is started meanwhile. */
    private const DELIVERY_SECONDS = 20;

    /** @var list<int> rows accepted in this request, sent after the response */
    private static array $pending = [];
    private static bool $shutdownHooked = false;

    /**
     * The SQL below spells it {$wpdb->prefix}visitor_service_outbox: Plugin Check accepts no other
     * name in SQL, and the %i placeholder needs WordPress 6.2 (the plugin supports 6.1).
     */
    public static function table(): string
    {
        global $wpdb;
        return $wpdb->prefix . 'visitor_service_outbox';
    }

    public static function hooks(): void
    {
        add_filter('cron_schedules', [self::class, 'schedules']);
        add_action(self::CRON_HOOK, [self::class, 'retry']);
        // Updates do not run the activation hook: the table follows the plugin's version.
        add_action('plugins_loaded', [self::class, 'upgrade']);
    }

    public static function upgrade(): void
    {
        if (get_option(Options::DB_VERSION) !== VISITOR_SERVICE_VERSION) {
            self::activate();
            // Before 0.2.0 the settings form stored the API key autoloaded.
            Options::tidyStoredApiKey();
        }
    }

    /**
     * @param array<string, array<string, mixed>> $schedules
     * @return array<string, array<string, mixed>>
     */
    public static function schedules(array $schedules): array
    {
        $schedules[self::SCHEDULE] = [
            'interval' => 5 * MINUTE_IN_SECONDS,
            'display' => __('Every five minutes (Visitor Service)', 'visitor-service'),
        ];
        return $schedules;
    }

    public static function activate(): void
    {
        global $wpdb;
        require_once ABSPATH . 'wp-admin/includes/upgrade.php';
        $charset = $wpdb->get_charset_collate();
        dbDelta('CREATE TABLE ' . self::table() . " (
            id bigint(20) unsigned NOT NULL AUTO_INCREMENT,
            path varchar(64) NOT NULL,
            body longtext NOT NULL,
            attempts int(10) unsigned NOT NULL DEFAULT 0,
            next_attempt_at bigint(20) unsigned NOT NULL DEFAULT 0,
            created_at bigint(20) unsigned NOT NULL,
            last_error varchar(255) NOT NULL DEFAULT '',
            PRIMARY KEY  (id),
            KEY next_attempt_at (next_attempt_at)
        ) $charset;");
        update_option(Options::DB_VERSION, VISITOR_SERVICE_VERSION, true);
        add_filter('cron_schedules', [self::class, 'schedules']);
        if (!wp_next_scheduled(self::CRON_HOOK)) {
            wp_schedule_event(time() + 5 * MINUTE_IN_SECONDS, self::SCHEDULE, self::CRON_HOOK);
        }
    }

    /** Deactivation stops all collection: the plugin's code no longer runs, and cron stops too. */
    public static function deactivate(): void
    {
        wp_clear_scheduled_hook(self::CRON_HOOK);
    }

    /**
     * Keeps an item and sends it after the response. Answers false when it could not be kept
     * (the outbox is full, counted, or the database refused).
     *
     * @param array<string, mixed> $body
     */
    public static function accept(string $path, array $body): bool
    {
        global $wpdb;
        if (self::backlog() >= Limits::outboxCap()) {
            Options::countDropped('outbox_full');
            return false;
        }
        // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table
        $kept = $wpdb->insert(self::table(), [
            'path' => $path,
            'body' => (string) wp_json_encode($body, JSON_UNESCAPED_SLASHES),
            'attempts' => 0,
            'next_attempt_at' => 0,
            'created_at' => time(),
        ]);
        if ($kept === false) {
            return false;
        }
        self::$pending[] = (int) $wpdb->insert_id;
        if (!self::$shutdownHooked) {
            self::$shutdownHooked = true;
            add_action('shutdown', [self::class, 'sendPending'], 1);
        }
        return true;
    }

    /**
     * After the response, for the items accepted in this request. Where the server can release
     * the visitor first (PHP-FPM, LiteSpeed), they are sent right here. Elsewhere (php -S,
     * Apache's mod_php) the visitor would wait for every byte of this script, so the delivery is
     * handed to a request of its own: a loopback POST to the deliver route, written and not
     * waited for. While a delivery is under way or the service was just found unreachable
     * (the hold), nothing is started: WP-Cron delivers those items.
     */
    public static function sendPending(): void
    {
        $ids = self::$pending;
        self::$pending = [];
        if ($ids === [] || self::held()) {
            return;
        }
        self::hold(self::DELIVERY_SECONDS);
        if (Client::finishResponse()) {
            self::deliverFresh();
            return;
        }
        $at = time();
        $sent = Client::writeAndLeave(rest_url(Rest::NAMESPACE . '/deliver'), [
            'at' => $at,
            'signature' => self::signature($at),
        ], [], 0.5);
        if (!$sent) {
            self::hold(0); // the loopback could not be made: WP-Cron delivers
        }
    }

    /** The deliver route's proof that this site asked for it (WordPress's own secret salt). */
    public static function signature(int $at): string
    {
        return hash_hmac('sha256', 'visitor-service-deliver|' . $at, wp_salt('nonce'));
    }

    public static function validSignature(int $at, string $signature): bool
    {
        return abs(time() - $at) <= 5 * MINUTE_IN_SECONDS && hash_equals(self::signature($at), $signature);
    }

    /**
     * The items not tried yet, in batches, until there are none or the service fails (the
     * deliver route, or after fastcgi_finish_request). Ends the hold, unless the service was
     * unreachable: then it holds for a minute and WP-Cron takes over.
     */
    public static function deliverFresh(): void
    {
        $until = time() + self::DELIVERY_SECONDS;
        $reachable = true;
        // A second round, once the hold is lifted, for items accepted while the first ran: they
        // saw the hold and started no delivery of their own.
        for ($round = 0; $round < 2 && $reachable; $round++) {
            do {
                $rows = self::dueRows(true);
                $reachable = self::sendRows($rows);
            } while ($reachable && $rows !== [] && time() < $until);
            self::hold($reachable ? 0 : MINUTE_IN_SECONDS);
        }
    }

    private static function held(): bool
    {
        return (int) get_option(Options::DELIVERY_HOLD, 0) > time();
    }

    private static function hold(int $seconds): void
    {
        update_option(Options::DELIVERY_HOLD, $seconds > 0 ? time() + $seconds : 0, false);
    }

    /** WP-Cron: every item that is due, oldest first, at most one batch per run. */
    public static function retry(): void
    {
        if (!Options::configured()) {
            return;
        }
        self::hold(self::sendRows(self::dueRows(false)) ? 0 : MINUTE_IN_SECONDS);
    }

    /** The settings screen's "Retry now": every waiting item is due now, and one run sends them. */
    public static function retryNow(): void
    {
        global $wpdb;
        // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
        $wpdb->query("UPDATE {$wpdb->prefix}visitor_service_outbox SET next_attempt_at = 0");
        self::retry();
    }

    /**
     * At most one batch of the items that are due, oldest first; with $untriedOnly, only those
     * never tried yet. Two whole queries rather than one put together, so each reads as it runs.
     *
     * @return list<object>
     */
    private static function dueRows(bool $untriedOnly): array
    {
        global $wpdb;
        if ($untriedOnly) {
            // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
            $rows = $wpdb->get_results($wpdb->prepare(
                "SELECT * FROM {$wpdb->prefix}visitor_service_outbox"
                    . ' WHERE attempts = 0 AND next_attempt_at <= %d ORDER BY id LIMIT %d',
                time(),
                self::BATCH
            ));
        } else {
            // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
            $rows = $wpdb->get_results($wpdb->prepare(
                "SELECT * FROM {$wpdb->prefix}visitor_service_outbox"
                    . ' WHERE next_attempt_at <= %d ORDER BY id LIMIT %d',
                time(),
                self::BATCH
            ));
        }
        return is_array($rows) ? $rows : [];
    }

    /**
     * Answers false when the service could not be reached (the rest would fail the same way).
     *
     * @param list<object> $rows
     */
    private static function sendRows(array $rows): bool
    {
        global $wpdb;
        foreach ($rows as $row) {
            $body = json_decode((string) $row->body, true);
            $answer = is_array($body) ? Client::post((string) $row->path, $body, self::TIMEOUT)
                : ['status' => 422, 'error' => 'unreadable row'];
            $status = $answer['status'];
            if (($status >= 200 && $status < 300) || in_array($status, [400, 413, 415, 422], true)) {
                // Delivered, or refused for good (it will never become valid): either way, done.
                if ($status >= 400) {
                    Options::countDropped('rejected');
                }
                // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
                $wpdb->delete(self::table(), ['id' => (int) $row->id]);
                continue;
            }
            $attempts = (int) $row->attempts + 1;
            // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
            $wpdb->update(self::table(), [
                'attempts' => $attempts,
                'next_attempt_at' => time() + min(self::MAX_BACKOFF, MINUTE_IN_SECONDS * (2 ** min($attempts - 1, 12))),
                'last_error' => substr((string) $answer['error'], 0, 255),
            ], ['id' => (int) $row->id]);
            if ($status === 0) {
                return false; // unreachable: the next run tries again
            }
        }
        return true;
    }

    /**
     * The items the service does not have yet, per kind: leads, survey answers, order events
     * (placed, paid, refunded, cancelled, failed: those with an orderId) and the other shop
     * events (carts, checkouts started).
     *
     * @return array<string, int> kind => items, only the kinds that have some, orders first
     */
    public static function backlogByKind(): array
    {
        global $wpdb;
        // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
        $rows = $wpdb->get_results($wpdb->prepare(
            "SELECT path, body LIKE %s AS about_order, COUNT(*) AS items FROM {$wpdb->prefix}visitor_service_outbox"
                . ' GROUP BY path, about_order',
            '%' . $wpdb->esc_like('"orderId":') . '%'
        ));
        $kinds = ['orders' => 0, 'leads' => 0, 'surveys' => 0, 'shop' => 0, 'other' => 0]; // as listed
        foreach (is_array($rows) ? $rows : [] as $row) {
            $kind = self::KINDS[(string) $row->path] ?? 'other';
            if ($kind === 'shop' && (int) $row->about_order === 1) {
                $kind = 'orders';
            }
            $kinds[$kind] += (int) $row->items;
        }
        return array_filter($kinds);
    }

    /** How many accepted items the service does not have yet. */
    public static function backlog(): int
    {
        global $wpdb;
        // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
        $count = $wpdb->get_var("SELECT COUNT(*) FROM {$wpdb->prefix}visitor_service_outbox");
        return (int) $count;
    }
}
