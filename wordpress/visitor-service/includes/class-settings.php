<?php

/**
 * Settings → Visitor Service: service URL, keys, "Check connection", backlog.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * Only for manage_options. The API key is never printed back: the field is always empty, an
 * empty submission keeps the saved key, and a key from wp-config.php cannot be edited here.
 */
final class Settings
{
    private const PAGE = 'visitor-service';
    private const GROUP = 'visitor_service';
    /** How long "Check connection" may wait for the service, both of its calls together. */
    private const CHECK_SECONDS = 3.0;

    public static function hooks(): void
    {
        add_action('admin_menu', [self::class, 'menu']);
        add_action('admin_init', [self::class, 'registerSettings']);
        add_action('admin_init', [self::class, 'removeKeyCopyBesideConstant']);
        add_filter('pre_update_option_' . Options::API_KEY, [Options::class, 'saveApiKeyFromForm'], 10, 2);
        add_action('admin_init', [self::class, 'checkAfterSaving']);
        add_action('admin_post_visitor_service_retry_now', [self::class, 'handleRetryNow']);
        add_action(Outbox::CRON_HOOK, [self::class, 'refreshSiteSettings']);
    }

    public static function menu(): void
    {
        add_options_page(
            __('Visitor Service', 'visitor-service'),
            __('Visitor Service', 'visitor-service'),
            'manage_options',
            self::PAGE,
            [self::class, 'render']
        );
    }

    public static function registerSettings(): void
    {
        register_setting(self::GROUP, Options::URL, [
            'type' => 'string',
            'sanitize_callback' => [self::class, 'sanitizeUrl'],
            'default' => '',
        ]);
        register_setting(self::GROUP, Options::PUBLIC_KEY, [
            'type' => 'string',
            'sanitize_callback' => [self::class, 'sanitizeKey'],
            'default' => '',
        ]);
        register_setting(self::GROUP, Forms::OPTION, [
            'type' => 'array',
            'sanitize_callback' => [Forms::class, 'sanitize'],
        ]);
        if (Options::apiKeyFromConstant()) {
            return; // no field, and no copy in the database
        }
        register_setting(self::GROUP, Options::API_KEY, [
            'type' => 'string',
            'sanitize_callback' => [self::class, 'sanitizeApiKey'],
            'default' => '',
        ]);
    }

    /**
     * With the key in wp-config.php, a copy saved earlier through the form is deleted (not only
     * ignored), and administrators are told once.
     */
    public static function removeKeyCopyBesideConstant(): void
    {
        if (!Options::apiKeyFromConstant()) {
            return;
        }
        if (Options::tidyStoredApiKey()) {
            update_option(Options::KEY_REMOVED, 1, false);
        }
        if (get_option(Options::KEY_REMOVED) && current_user_can('manage_options')) {
            add_action('admin_notices', [self::class, 'keyRemovedNotice']);
        }
    }

    public static function keyRemovedNotice(): void
    {
        delete_option(Options::KEY_REMOVED);
        $text = __(
            'Visitor Service: the API key is defined in wp-config.php, so its database copy was deleted.',
            'visitor-service'
        );
        echo '<div class="notice notice-info is-dismissible" id="visitor-service-key-removed"><p>'
            . esc_html($text) . '</p></div>';
    }

    public static function sanitizeUrl($value): string
    {
        $url = esc_url_raw(trim((string) $value), ['https', 'http']);
        return rtrim($url, '/');
    }

    public static function sanitizeKey($value): string
    {
        return preg_replace('/[^A-Za-z0-9_.-]/', '', (string) $value) ?? '';
    }

    /** An empty field keeps the saved key: the form never shows it, so it is never re-submitted. */
    public static function sanitizeApiKey($value): string
    {
        $key = self::sanitizeKey($value);
        return $key === '' ? (string) get_option(Options::API_KEY, '') : $key;
    }

    /**
     * Proves the URL and both keys: the public key and this site's origin through the loader's
     * own config endpoint (which also tells whether the site requires consent), the API key
     * through an ingest endpoint given an empty body (401 for a wrong key, 4xx validation
     * otherwise; nothing is stored).
     *
     * @return array{ok: bool, messages: list<string>}
     */
    public static function checkConnection(): array
    {
        $messages = [];
        $ok = true;
        if (!Options::configured()) {
            $missing = [];
            if (Options::serviceUrl() === '') {
                $missing[] = __('The service URL is missing.', 'visitor-service');
            }
            if (Options::publicKey() === '') {
                $missing[] = __('The public key is missing.', 'visitor-service');
            }
            if (Options::apiKey() === '') {
                $missing[] = __('The API key is missing.', 'visitor-service');
            }
            $result = ['ok' => false, 'messages' => $missing];
            update_option(Options::LAST_CHECK, $result + ['at' => time()], false);
            return $result;
        }
        // One budget for both calls: the owner waits for the answer, and a hung service must
        // not hold the settings screen (both calls at 5 s each took 10 s).
        $deadline = microtime(true) + self::CHECK_SECONDS;
        [$config, $origin] = self::readSiteSettings(self::CHECK_SECONDS);
        if ($config['status'] === 0) {
            // Unreachable or silent: the second call would fail the same way.
            $result = ['ok' => false, 'messages' => [self::unreachable($config['error'], $deadline)]];
            update_option(Options::LAST_CHECK, $result + ['at' => time()], false);
            return $result;
        }
        if ($config['status'] === 200) {
            $messages[] = __('Public key and this site\'s origin: accepted.', 'visitor-service');
        } else {
            $ok = false;
            $messages[] = $config['status'] === 403
                /* translators: %s: this site's origin */
                ? sprintf(__('This origin (%s) is not allowed: add it to the site.', 'visitor-service'), $origin)
                /* translators: %s: the error */
                : sprintf(__('Public key refused or service unreachable (%s).', 'visitor-service'), $config['error']);
        }
        $left = $deadline - microtime(true);
        $ingest = $left > 0.2 ? Client::post('/ingest/visitors', [], $left)
            : ['status' => 0, 'body' => null, 'error' => ''];
        if (in_array($ingest['status'], [400, 422], true)) {
            $messages[] = __('API key: accepted.', 'visitor-service');
            self::shareTimeZone($deadline);
        } else {
            $ok = false;
            if ($ingest['status'] === 401) {
                $messages[] = __('API key refused by the service.', 'visitor-service');
            } elseif ($ingest['status'] === 0) {
                $messages[] = self::unreachable($ingest['error'], $deadline);
            } else {
                /* translators: %s: the error */
                $messages[] = sprintf(__('API key could not be checked (%s).', 'visitor-service'), $ingest['error']);
            }
        }
        $result = ['ok' => $ok, 'messages' => $messages];
        update_option(Options::LAST_CHECK, $result + ['at' => time()], false);
        return $result;
    }

    /**
     * Tell the service the shop's time zone, which it takes as the site's until the owner
     * chooses one there (its days then run as the shop's do). Only a named zone: WordPress
     * may hold a bare UTC offset, which has no daylight-saving rules.
     */
    private static function shareTimeZone(float $deadline): void
    {
        $zone = wp_timezone_string();
        $left = $deadline - microtime(true);
        if ($left > 0.2 && ($zone === 'UTC' || strpos($zone, '/') !== false)) {
            Client::post('/ingest/shop', ['timeZone' => $zone], $left);
        }
    }

    /** Why the service did not answer "Check connection": silent past the budget, or unreachable. */
    private static function unreachable(string $error, float $deadline): string
    {
        if (microtime(true) >= $deadline - 0.1) {
            /* translators: 1: the service URL, 2: seconds waited */
            $silent = __(
                'The service at %1$s did not answer within %2$d seconds: it may be stopped or overloaded.',
                'visitor-service'
            );
            return sprintf($silent, Options::serviceUrl(), (int) self::CHECK_SECONDS);
        }
        /* translators: 1: the service URL, 2: the error */
        $unreachable = __('The service at %1$s could not be reached (%2$s).', 'visitor-service');
        return sprintf($unreachable, Options::serviceUrl(), $error);
    }

    /**
     * Reads the site's settings the loader gets (GET /sdk/v1/{pk}/config, with this site's
     * Origin) and keeps "require consent", which the REST route enforces too.
     *
     * @return array{0: array{status: int, body: mixed, error: string}, 1: string}
     */
    public static function readSiteSettings(float $timeout = 5.0): array
    {
        $home = wp_parse_url(home_url('/'));
        $origin = ($home['scheme'] ?? 'https') . '://' . ($home['host'] ?? '')
            . (isset($home['port']) ? ':' . $home['port'] : '');
        $configPath = '/sdk/v1/' . rawurlencode(Options::publicKey()) . '/config';
        $config = Client::get($configPath, ['Origin' => $origin], $timeout);
        if ($config['status'] === 200 && is_array($config['body'])) {
            update_option(Options::REQUIRE_CONSENT, !empty($config['body']['requireConsent']) ? 1 : 0, false);
            update_option(Options::SETTINGS_READ_AT, time(), false);
        } elseif ($config['status'] === 200) {
            // Something answered at that address, but not the service.
            $config = ['status' => 0, 'body' => null, 'error' => 'HTTP 200: not the service\'s settings'];
        }
        return [$config, $origin];
    }

    /** WP-Cron: a change of "require consent" in the dashboard reaches the route within an hour. */
    public static function refreshSiteSettings(): void
    {
        if (Options::configured() && (int) get_option(Options::SETTINGS_READ_AT, 0) < time() - HOUR_IN_SECONDS) {
            self::readSiteSettings();
        }
    }

    /**
     * "Save and check connection" is a button of the settings form, so the check proves what
     * was typed: core's options.php checks the nonce and the capability and saves, and just
     * before it redirects back, the saved values are checked.
     */
    public static function checkAfterSaving(): void
    {
        $nonce = isset($_POST['_wpnonce']) ? sanitize_text_field(wp_unslash((string) $_POST['_wpnonce'])) : '';
        if (!isset($_POST['visitor_service_check']) || !wp_verify_nonce($nonce, self::GROUP . '-options')) {
            return; // options.php refuses such a request itself; nothing to check
        }
        if (current_user_can('manage_options')) {
            add_filter('wp_redirect', [self::class, 'checkSavedValues']);
        }
    }

    public static function checkSavedValues(string $location): string
    {
        remove_filter('wp_redirect', [self::class, 'checkSavedValues']);
        self::checkConnection();
        return add_query_arg('checked', '1', $location);
    }

    /** "Retry now": every waiting item is due at once and one delivery runs while the owner waits. */
    public static function handleRetryNow(): void
    {
        if (!current_user_can('manage_options')) {
            wp_die(esc_html__('Sorry, you are not allowed to do that.', 'visitor-service'), 403);
        }
        check_admin_referer('visitor_service_retry_now');
        Outbox::retryNow();
        wp_safe_redirect(admin_url('options-general.php?page=' . self::PAGE . '&retried=1'));
        exit;
    }

    public static function render(): void
    {
        if (!current_user_can('manage_options')) {
            return;
        }
        // The result of the check just made, once: not a stale one on every later visit.
        // phpcs:ignore WordPress.Security.NonceVerification.Recommended, VisitorService.Security.NonceVerification -- a read-only flag: shows the result the nonce-checked save stored, changes nothing
        $check = isset($_GET['checked']) ? get_option(Options::LAST_CHECK, null) : null;
        $dropped = Options::dropped();
        echo '<div class="wrap"><h1>' . esc_html__('Visitor Service', 'visitor-service') . '</h1>';
        if (is_array($check)) {
            echo '<div id="visitor-service-check" class="notice '
                . ($check['ok'] ? 'notice-success' : 'notice-error') . '">';
            foreach ((array) $check['messages'] as $message) {
                echo '<p>' . esc_html((string) $message) . '</p>';
            }
            echo '</div>';
        }
        echo '<form method="post" action="options.php">';
        settings_fields(self::GROUP);
        echo '<table class="form-table" role="presentation">';
        $url = self::input('vs-url', 'url', Options::URL, Options::serviceUrl());
        self::row('vs-url', __('Service URL', 'visitor-service'), $url);
        $public = self::input('vs-public', 'text', Options::PUBLIC_KEY, Options::publicKey());
        self::row('vs-public', __('Public key', 'visitor-service'), $public);
        self::row('vs-api', __('Site API key', 'visitor-service'), self::apiKeyField());
        self::row('vs-forms-contact-form-7', __('Forms that count as leads', 'visitor-service'), self::formsField());
        $where = [
            __('All three are in the Visitor Service dashboard: Settings → Install on your shop.', 'visitor-service'),
            __('The API key is shown in full only when it is created or rotated (Settings → Keys).', 'visitor-service'),
        ];
        echo '</table><p class="description" id="visitor-service-keys-from">' . esc_html(implode(' ', $where))
            . '</p><p class="submit">';
        submit_button(__('Save Changes', 'visitor-service'), 'primary', 'submit', false);
        echo ' ';
        submit_button(
            __('Save and check connection', 'visitor-service'),
            'secondary',
            'visitor_service_check',
            false,
            ['id' => 'check']
        );
        echo '</p></form><p id="visitor-service-consent">' . esc_html(Options::requireConsent()
            ? __('The site requires consent: nothing is sent for visitors who have not given it.', 'visitor-service')
            : __('The site does not require consent before collecting.', 'visitor-service')) . '</p>';
        echo '<h2>' . esc_html__('Delivery', 'visitor-service') . '</h2>';
        $backlog = Outbox::backlogByKind();
        echo '<ul id="visitor-service-backlog">';
        foreach (self::backlogLines($backlog) as $line) {
            echo '<li>' . esc_html($line) . '</li>';
        }
        echo '</ul>';
        if ($backlog !== []) {
            echo '<form method="post" action="' . esc_url(admin_url('admin-post.php')) . '">';
            echo '<input type="hidden" name="action" value="visitor_service_retry_now">';
            wp_nonce_field('visitor_service_retry_now');
            submit_button(__('Retry now', 'visitor-service'), 'secondary', 'retry-now', false);
            echo '</form>';
        }
        echo '<ul id="visitor-service-dropped">';
        foreach (self::droppedLines($dropped) as $line) {
            echo '<li>' . esc_html($line) . '</li>';
        }
        echo '</ul>';
        if (($dropped['rate_limited'] ?? 0) > 0) {
            // Behind a proxy or CDN that WordPress does not know of, every visitor has its address.
            $hint = [
                __('Requests are counted per visitor address.', 'visitor-service'),
                __('If this shop is behind a proxy or CDN, all visitors may share its address.', 'visitor-service'),
                __('Pass the real address with the visitor_service_client_ip filter.', 'visitor-service'),
            ];
            echo '<p id="visitor-service-proxy-hint">' . esc_html(implode(' ', $hint)) . '</p>';
        }
        echo '</div>';
    }

    /**
     * One sentence per kind of item waiting in the outbox, with its count; one when none waits.
     *
     * @param array<string, int> $backlog kind => items (Outbox::backlogByKind)
     * @return list<string>
     */
    private static function backlogLines(array $backlog): array
    {
        if ($backlog === []) {
            return [__('Nothing is waiting to be sent.', 'visitor-service')];
        }
        $lines = [];
        foreach ($backlog as $kind => $items) {
            $lines[] = sprintf(self::backlogSentence($kind, $items), $items);
        }
        return $lines;
    }

    /** The sentence for $items waiting items of one kind, with %d for the count. */
    private static function backlogSentence(string $kind, int $items): string
    {
        switch ($kind) {
            case 'leads':
                /* translators: %d: number of leads (form submissions, checkouts) not delivered yet */
                return _n(
                    '%d lead is waiting to be sent.',
                    '%d leads are waiting to be sent.',
                    $items,
                    'visitor-service'
                );
            case 'surveys':
                /* translators: %d: number of survey answers not delivered yet */
                return _n(
                    '%d survey answer is waiting to be sent.',
                    '%d survey answers are waiting to be sent.',
                    $items,
                    'visitor-service'
                );
            case 'orders':
                /* translators: %d: number of order events not delivered yet */
                return _n(
                    '%d order event (placed, paid, refunded or cancelled) is waiting to be sent.',
                    '%d order events (placed, paid, refunded or cancelled) are waiting to be sent.',
                    $items,
                    'visitor-service'
                );
            case 'shop':
                /* translators: %d: number of cart and checkout events not delivered yet */
                return _n(
                    '%d cart or checkout event is waiting to be sent.',
                    '%d cart and checkout events are waiting to be sent.',
                    $items,
                    'visitor-service'
                );
            default:
                /* translators: %d: number of other items not delivered yet */
                return _n(
                    '%d other item is waiting to be sent.',
                    '%d other items are waiting to be sent.',
                    $items,
                    'visitor-service'
                );
        }
    }

    /**
     * One sentence per kind of item that was dropped or refused, with its count.
     *
     * @param array<string, int> $dropped
     * @return list<string>
     */
    private static function droppedLines(array $dropped): array
    {
        $count = static fn (string $kind): int => (int) ($dropped[$kind] ?? 0);
        return [
            sprintf(
                /* translators: %d: number of pageviews */
                _n(
                    '%d pageview was dropped while the service was unreachable.',
                    '%d pageviews were dropped while the service was unreachable.',
                    $count('pageviews'),
                    'visitor-service'
                ),
                $count('pageviews')
            ),
            sprintf(
                /* translators: %d: number of PHP errors */
                _n(
                    '%d PHP error was dropped while the service was unreachable.',
                    '%d PHP errors were dropped while the service was unreachable.',
                    $count('errors'),
                    'visitor-service'
                ),
                $count('errors')
            ),
            sprintf(
                /* translators: %d: number of leads, survey answers and shop events (carts, orders) */
                _n(
                    '%d lead, survey answer or shop event was refused by the service as invalid.',
                    '%d leads, survey answers and shop events were refused by the service as invalid.',
                    $count('rejected'),
                    'visitor-service'
                ),
                $count('rejected')
            ),
            sprintf(
                /* translators: %d: number of requests */
                _n(
                    '%d request to the public routes was refused: too many from one address in a minute.',
                    '%d requests to the public routes were refused: too many from one address in a minute.',
                    $count('rate_limited'),
                    'visitor-service'
                ),
                $count('rate_limited')
            ),
            sprintf(
                /* translators: %d: number of leads, survey answers and shop events (carts, orders) */
                _n(
                    '%d lead, survey answer or shop event was refused because the outbox was full.',
                    '%d leads, survey answers and shop events were refused because the outbox was full.',
                    $count('outbox_full'),
                    'visitor-service'
                ),
                $count('outbox_full')
            ),
        ];
    }

    /** Prints one form row; $field is already escaped HTML. */
    private static function row(string $id, string $label, string $field): void
    {
        echo '<tr><th scope="row"><label for="' . esc_attr($id) . '">' . esc_html($label) . '</label></th><td>'
            . $field . '</td></tr>'; // phpcs:ignore -- $field is escaped by its builder
    }

    private static function input(string $id, string $type, string $name, string $value): string
    {
        return '<input id="' . esc_attr($id) . '" class="regular-text" type="' . esc_attr($type) . '" name="'
            . esc_attr($name) . '" value="' . esc_attr($value) . '">';
    }

    /** One checkbox per form source; a source's plugin need not be active to be chosen. */
    private static function formsField(): string
    {
        $chosen = Forms::sources();
        $html = '<fieldset id="visitor-service-forms">';
        foreach (Forms::labels() as $source => $label) {
            $html .= '<label><input type="checkbox" id="' . esc_attr('vs-forms-' . $source) . '" name="'
                . esc_attr(Forms::OPTION) . '[]" value="' . esc_attr($source) . '"'
                . (in_array($source, $chosen, true) ? ' checked' : '') . '> ' . esc_html($label) . '</label><br>';
        }
        $note = __('Their e-mail address, name and phone are sent as a lead; no other field.', 'visitor-service');
        return $html . '</fieldset><p class="description">' . esc_html($note) . '</p>';
    }

    /** The API key is never printed back: an empty password field, or a note about wp-config.php. */
    private static function apiKeyField(): string
    {
        if (Options::apiKeyFromConstant()) {
            return '<p>' . esc_html__('Set in wp-config.php (VISITOR_SERVICE_API_KEY).', 'visitor-service') . '</p>';
        }
        $saved = Options::apiKey() !== '';
        $note = $saved ? __('A key is saved. Leave empty to keep it.', 'visitor-service')
            : __('Or define VISITOR_SERVICE_API_KEY in wp-config.php.', 'visitor-service');
        return '<input id="vs-api" class="regular-text" type="password" autocomplete="off" name="'
            . esc_attr(Options::API_KEY) . '" value="" placeholder="' . ($saved ? '••••••••' : '') . '">'
            . '<p class="description">' . esc_html($note) . '</p>';
    }
}
