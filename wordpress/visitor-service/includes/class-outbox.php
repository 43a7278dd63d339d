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
 * after the response, and deleted only once the service acknowledged it. Items carry their own id
 * (leadId, responseId, eventId), so an item sent twice is stored once by the service.
 *
 * What the service could not take is delivered by a run of its own: with WooCommerce, an action
 * of WooCommerce's Action Scheduler (its own queue, retried and logged, under WooCommerce →
 * Status → Scheduled Actions), so a WP-Cron run cut short by another plugin's job cannot starve
 * it; without WooCommerce, a WP-Cron event. A failure pauses only the kind that failed (leads,
 * survey answers, shop events): the others go on, and that kind is probed again seconds later,
 * twice as late after each failure up to five minutes. A new item of a paused kind is tried at
 * once, so the first item after the service is back goes out with everything waiting behind it.
 */
final class Outbox
{
    public const CRON_HOOK = 'visitor_service_retry';
    public const SCHEDULE = 'visitor_service_five_minutes';
    /** One delivery run: an Action Scheduler action with WooCommerce, a WP-Cron event without. */
    public const DELIVER_HOOK = 'visitor_service_deliver';
    /** The plugin's actions in Action Scheduler's list. */
    public const GROUP = 'visitor-service';
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
    /** A kind that failed is probed again after this many seconds, doubled per failure up to PAUSE_MAX. */
    private const PROBE_SECONDS = 5;
    private const PAUSE_MAX = 5 * MINUTE_IN_SECONDS;
    /**
     * Answers that say the service could not take anything now (unreachable, busy, a proxy in
     * front of it failing): the item stays due and only its kind's pause holds it. Any other
     * failure is the item's own as far as the plugin knows, and backs that item off.
     */
    private const SERVICE_DOWN = [0, 408, 429, 502, 503, 504];

    /** @var list<int> rows accepted in this request, sent after the response */
    private static array $pending = [];
    private static bool $shutdownHooked = false;
    /** True inside a delivery run (Action Scheduler counts its own action as running meanwhile). */
    private static bool $running = false;

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
        add_action(self::DELIVER_HOOK, [self::class, 'run']);
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
        wp_clear_scheduled_hook(self::DELIVER_HOOK);
        if (self::actionScheduler()) {
            as_unschedule_all_actions(self::DELIVER_HOOK, [], self::GROUP);
        }
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
            // Stripped here too, so no secret in a URL waits in the shop's database either.
            'body' => (string) wp_json_encode(UrlSecrets::stripFields($body), JSON_UNESCAPED_SLASHES),
            'attempts' => 0,
            'next_attempt_at' => 0,
            'created_at' => time(),
        ]);
        if ($kept === false) {
            return false;
        }
        self::$pending[] = (int) $wpdb->insert_id;
        self::resume($path, false); // a new item is a probe of its kind: tried at once
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
     * waited for. While a delivery is under way nothing is started: that one takes them too.
     */
    public static function sendPending(): void
    {
        $ids = self::$pending;
        self::$pending = [];
        if ($ids === [] || self::locked()) {
            return;
        }
        self::lock(self::DELIVERY_SECONDS);
        if (Client::finishResponse()) {
            self::deliver();
            return;
        }
        $at = time();
        $sent = Client::writeAndLeave(rest_url(Rest::NAMESPACE . '/deliver'), [
            'at' => $at,
            'signature' => self::signature($at),
        ], [], 0.5);
        if (!$sent) {
            self::lock(0); // the loopback could not be made: a scheduled run delivers
            self::runAt(time());
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
     * Action Scheduler's action, or WP-Cron's event without WooCommerce: one delivery, unless
     * one is under way (that one schedules what it leaves).
     */
    public static function run(): void
    {
        if (!Options::configured() || self::locked()) {
            return;
        }
        self::$running = true;
        try {
            self::lock(self::DELIVERY_SECONDS);
            self::deliver();
        } finally {
            self::$running = false;
        }
    }

    /**
     * Every due item of each kind that is not paused, oldest first, in batches, for up to
     * DELIVERY_SECONDS (the deliver route, after fastcgi_finish_request, or a scheduled run; the
     * caller holds the lock). A kind that fails is paused and left for this run; the others go
     * on. Then the lock is lifted, and the next run is scheduled for what is left, unless an item
     * that came in meanwhile is due now: this run takes it.
     */
    public static function deliver(): void
    {
        $until = time() + self::DELIVERY_SECONDS;
        $failed = [];
        while (true) {
            do {
                $removed = 0;
                foreach (array_keys(self::KINDS) as $path) {
                    if (isset($failed[$path]) || self::pausedUntil($path) > time()) {
                        continue;
                    }
                    $rows = self::dueRows($path);
                    if ($rows === []) {
                        continue;
                    }
                    [$done, $ok] = self::sendRows($rows);
                    $removed += $done;
                    if ($ok) {
                        self::resume($path, true);
                    } else {
                        $failed[$path] = true;
                        self::pause($path);
                    }
                }
            } while ($removed > 0 && time() < $until);
            self::lock(0);
            $next = self::nextDue();
            if ($next === null) {
                return;
            }
            if ($next > time() || time() >= $until || self::locked()) {
                self::runAt($next);
                return;
            }
            self::lock(self::DELIVERY_SECONDS);
        }
    }

    /** Whether a delivery is under way (it ends the lock, or the lock ends by itself). */
    private static function locked(): bool
    {
        return (int) self::freshOption(Options::DELIVERY_HOLD, 0) > time();
    }

    private static function lock(int $seconds): void
    {
        update_option(Options::DELIVERY_HOLD, $seconds > 0 ? time() + $seconds : 0, false);
    }

    /**
     * An option as stored now: a delivery runs for seconds, while other requests change it.
     *
     * @param mixed $default
     * @return mixed
     */
    private static function freshOption(string $name, $default)
    {
        wp_cache_delete($name, 'options');
        return get_option($name, $default);
    }

    /** @return array<string, array{until: int, failures: int}> each paused kind (path) */
    private static function pauses(): array
    {
        $pauses = self::freshOption(Options::PAUSED, []);
        return is_array($pauses) ? $pauses : [];
    }

    private static function pausedUntil(string $path): int
    {
        return (int) (self::pauses()[$path]['until'] ?? 0);
    }

    /** A failure of $path: its kind waits PROBE_SECONDS, twice as long per failure in a row. */
    private static function pause(string $path): void
    {
        $pauses = self::pauses();
        $failures = (int) ($pauses[$path]['failures'] ?? 0) + 1;
        $seconds = min(self::PAUSE_MAX, self::PROBE_SECONDS * 2 ** min($failures - 1, 10));
        $pauses[$path] = ['until' => time() + $seconds, 'failures' => $failures];
        update_option(Options::PAUSED, $pauses, false);
    }

    /**
     * Ends the pause of $path: for good once the service took an item of it ($delivered), or
     * for the next run only (a new item probes it; failing, the pause comes back longer).
     */
    private static function resume(string $path, bool $delivered): void
    {
        $pauses = self::pauses();
        if (!isset($pauses[$path])) {
            return;
        }
        if ($delivered) {
            unset($pauses[$path]);
        } else {
            $pauses[$path]['until'] = 0;
        }
        update_option(Options::PAUSED, $pauses, false);
    }

    /** Whether WooCommerce's Action Scheduler is there to run deliveries. */
    private static function actionScheduler(): bool
    {
        return function_exists('as_enqueue_async_action') && function_exists('as_schedule_single_action')
            && function_exists('as_next_scheduled_action') && function_exists('as_unschedule_all_actions')
            && did_action('action_scheduler_init') > 0;
    }

    /**
     * A delivery run at $at or earlier: an Action Scheduler action with WooCommerce, a WP-Cron
     * event without. One waits at a time; an earlier need replaces a later one.
     */
    private static function runAt(int $at): void
    {
        $at = max($at, time());
        if (self::actionScheduler()) {
            // Inside its own action, Action Scheduler answers "running" (true): only pending counts then.
            $next = self::$running ? false : as_next_scheduled_action(self::DELIVER_HOOK, [], self::GROUP);
            if ($next === true || (is_int($next) && $next <= $at)) {
                return;
            }
            as_unschedule_all_actions(self::DELIVER_HOOK, [], self::GROUP);
            if ($at <= time()) {
                as_enqueue_async_action(self::DELIVER_HOOK, [], self::GROUP);
            } else {
                as_schedule_single_action($at, self::DELIVER_HOOK, [], self::GROUP);
            }
            return;
        }
        $next = wp_next_scheduled(self::DELIVER_HOOK);
        if ($next !== false && $next <= $at) {
            return;
        }
        wp_clear_scheduled_hook(self::DELIVER_HOOK);
        wp_schedule_single_event($at, self::DELIVER_HOOK);
    }

    /** When the next item could go: its kind's pause over and its own backoff, or null when none waits. */
    private static function nextDue(): ?int
    {
        global $wpdb;
        // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
        $rows = $wpdb->get_results(
            "SELECT path, MIN(next_attempt_at) AS due FROM {$wpdb->prefix}visitor_service_outbox GROUP BY path"
        );
        $next = null;
        foreach (is_array($rows) ? $rows : [] as $row) {
            if (!isset(self::KINDS[(string) $row->path])) {
                continue; // never delivered: no path of the service's
            }
            $due = max((int) $row->due, self::pausedUntil((string) $row->path));
            $next = $next === null ? $due : min($next, $due);
        }
        return $next;
    }

    /**
     * WP-Cron, every five minutes, whatever else happens: with Action Scheduler, makes sure a
     * delivery is scheduled for what waits; without it, delivers.
     */
    public static function retry(): void
    {
        if (!Options::configured()) {
            return;
        }
        if (!self::actionScheduler()) {
            self::run();
            return;
        }
        $next = self::nextDue();
        if ($next !== null) {
            self::runAt($next);
        }
    }

    /**
     * The settings screen's "Retry now": every waiting item is due now, no kind is paused, and
     * one delivery runs while the owner waits.
     */
    public static function retryNow(): void
    {
        global $wpdb;
        // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
        $wpdb->query("UPDATE {$wpdb->prefix}visitor_service_outbox SET next_attempt_at = 0");
        delete_option(Options::PAUSED);
        if (Options::configured()) {
            self::lock(self::DELIVERY_SECONDS);
            self::deliver();
        }
    }

    /**
     * At most one batch of one kind's items that are due, oldest first.
     *
     * @return list<object>
     */
    private static function dueRows(string $path): array
    {
        global $wpdb;
        // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
        $rows = $wpdb->get_results($wpdb->prepare(
            "SELECT * FROM {$wpdb->prefix}visitor_service_outbox"
                . ' WHERE path = %s AND next_attempt_at <= %d ORDER BY id LIMIT %d',
            $path,
            time(),
            self::BATCH
        ));
        return is_array($rows) ? $rows : [];
    }

    /**
     * Sends one kind's rows in order until one fails. Answers how many left the outbox
     * (delivered, or refused for good) and whether none failed.
     *
     * @param list<object> $rows
     * @return array{0: int, 1: bool}
     */
    private static function sendRows(array $rows): array
    {
        global $wpdb;
        $removed = 0;
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
                $removed++;
                continue;
            }
            $attempts = (int) $row->attempts + 1;
            $backoff = min(self::MAX_BACKOFF, MINUTE_IN_SECONDS * (2 ** min($attempts - 1, 12)));
            // phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- the plugin's own outbox table; its rows change with every send, so a cache would be stale
            $wpdb->update(self::table(), [
                'attempts' => $attempts,
                'next_attempt_at' => in_array($status, self::SERVICE_DOWN, true) ? 0 : time() + $backoff,
                'last_error' => substr((string) $answer['error'], 0, 255),
            ], ['id' => (int) $row->id]);
            return [$removed, false];
        }
        return [$removed, true];
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
