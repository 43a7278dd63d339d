<?php

/**
 * WordPress's personal-data exporter and eraser for what the service holds (Tools → Export /
 * Erase Personal Data).
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * Registered with core's `wp_privacy_personal_data_exporters` / `_erasers` filters, so the shop
 * owner's one request by e-mail address also covers the service. Core's own screens and AJAX
 * handlers call these callbacks only after checking `export_others_personal_data` /
 * `erase_others_personal_data` and the request's nonce; the calls to the service happen here,
 * on the server, with the site API key, which therefore never reaches a browser.
 */
final class Privacy
{
    public const GROUP_ID = 'visitor-service';

    /** Export sections that are not a list of items (shown otherwise, or not at all). */
    private const NOT_SECTIONS = ['format', 'requestId', 'generatedAt', 'site', 'information', 'visitor', 'manifest'];

    public static function hooks(): void
    {
        add_filter('wp_privacy_personal_data_exporters', [self::class, 'registerExporter']);
        add_filter('wp_privacy_personal_data_erasers', [self::class, 'registerEraser']);
    }

    /**
     * @param array<string, mixed> $exporters
     * @return array<string, mixed>
     */
    public static function registerExporter($exporters): array
    {
        $exporters = is_array($exporters) ? $exporters : [];
        $exporters[self::GROUP_ID] = [
            'exporter_friendly_name' => __('Visitor Service', 'visitor-service'),
            'callback' => [self::class, 'export'],
        ];
        return $exporters;
    }

    /**
     * @param array<string, mixed> $erasers
     * @return array<string, mixed>
     */
    public static function registerEraser($erasers): array
    {
        $erasers = is_array($erasers) ? $erasers : [];
        $erasers[self::GROUP_ID] = [
            'eraser_friendly_name' => __('Visitor Service', 'visitor-service'),
            'callback' => [self::class, 'erase'],
        ];
        return $erasers;
    }

    /**
     * One page of the export: the service answers one visitor per page, and says when it is done.
     *
     * @return array{data: list<array<string, mixed>>, done: bool}|\WP_Error
     */
    public static function export(string $email, int $page = 1)
    {
        if (!Options::configured()) {
            return ['data' => [], 'done' => true];
        }
        $answer = Client::post('/ingest/privacy/export', ['email' => $email, 'page' => max(1, $page)], 30.0);
        if ($answer['status'] !== 200 || !is_array($answer['body'])) {
            return new \WP_Error('visitor_service_export', self::failure(true, $answer));
        }
        $items = [];
        foreach ((array) ($answer['body']['visitors'] ?? []) as $document) {
            if (is_array($document)) {
                array_push($items, ...self::items($document));
            }
        }
        return ['data' => $items, 'done' => (bool) ($answer['body']['done'] ?? true)];
    }

    /**
     * Erases every visitor of the address in the service; the receipt counts become the message.
     *
     * @return array{items_removed: bool, items_retained: bool, messages: list<string>, done: bool}
     */
    public static function erase(string $email, int $page = 1): array
    {
        $result = ['items_removed' => false, 'items_retained' => false, 'messages' => [], 'done' => true];
        if (!Options::configured()) {
            return $result;
        }
        $answer = Client::post('/ingest/privacy/erase', ['email' => $email], 60.0);
        $body = $answer['body'];
        if ($answer['status'] !== 200 || !is_array($body)) {
            // Nothing is known to be erased: say so, and let the owner run the request again.
            $result['items_retained'] = true;
            $result['messages'][] = self::failure(false, $answer);
            return $result;
        }
        $visitors = (int) ($body['visitors'] ?? 0);
        if ($visitors === 0) {
            return $result;
        }
        $removed = (int) ($body['itemsRemoved'] ?? 0);
        $anonymised = (int) ($body['itemsAnonymised'] ?? 0);
        $receipts = array_map(
            static fn ($receipt): string => is_array($receipt) ? (string) ($receipt['requestId'] ?? '') : '',
            (array) ($body['receipts'] ?? [])
        );
        $result['items_removed'] = $removed > 0 || $anonymised > 0;
        $result['messages'][] = implode(' ', [
            sprintf(
                /* translators: %d: number of visitors */
                _n(
                    'Visitor Service erased %d visitor.',
                    'Visitor Service erased %d visitors.',
                    $visitors,
                    'visitor-service'
                ),
                $visitors
            ),
            /* translators: %d: number of items */
            sprintf(_n('%d item was removed.', '%d items were removed.', $removed, 'visitor-service'), $removed),
            sprintf(
                /* translators: %d: number of error records */
                _n(
                    '%d error record was anonymised.',
                    '%d error records were anonymised.',
                    $anonymised,
                    'visitor-service'
                ),
                $anonymised
            ),
            /* translators: %s: the erasure receipts' ids, separated by commas */
            sprintf(__('Receipts: %s.', 'visitor-service'), implode(', ', array_filter($receipts))),
        ]);
        foreach ((array) ($body['receipts'] ?? []) as $receipt) {
            if (is_array($receipt) && !empty($receipt['legacyFootageNote'])) {
                $result['messages'][] = (string) $receipt['legacyFootageNote'] . ' '
                    . implode(', ', array_map('strval', (array) ($receipt['legacyFootage'] ?? [])));
            }
        }
        return $result;
    }

    /**
     * One visitor's export document as exporter items: the profile (with what the data is for),
     * then one item per entry of each section.
     *
     * @param array<string, mixed> $document
     * @return list<array<string, mixed>>
     */
    private static function items(array $document): array
    {
        $visitor = is_array($document['visitor'] ?? null) ? $document['visitor'] : [];
        $visitorId = (string) ($visitor['visitorId'] ?? 'unknown');
        $profile = [
            ['name' => __('Category', 'visitor-service'), 'value' => self::label('visitor')],
            ['name' => __('Request', 'visitor-service'), 'value' => (string) ($document['requestId'] ?? '')],
        ];
        foreach ($visitor as $name => $value) {
            $profile[] = ['name' => self::label((string) $name), 'value' => self::text($value)];
        }
        $information = is_array($document['information'] ?? null) ? $document['information'] : [];
        foreach ($information as $name => $value) {
            $profile[] = ['name' => self::label((string) $name), 'value' => self::text($value)];
        }
        $items = [self::item($visitorId . '-visitor', $profile)];
        foreach ($document as $section => $entries) {
            if (in_array($section, self::NOT_SECTIONS, true) || !is_array($entries)) {
                continue;
            }
            foreach (array_values($entries) as $index => $entry) {
                $data = [['name' => __('Category', 'visitor-service'), 'value' => self::label((string) $section)]];
                foreach ((is_array($entry) ? $entry : ['value' => $entry]) as $name => $value) {
                    $data[] = ['name' => self::label((string) $name), 'value' => self::text($value)];
                }
                $items[] = self::item($visitorId . '-' . $section . '-' . $index, $data);
            }
        }
        return $items;
    }

    /**
     * @param list<array{name: string, value: string}> $data
     * @return array<string, mixed>
     */
    private static function item(string $id, array $data): array
    {
        return [
            'group_id' => self::GROUP_ID,
            'group_label' => __('Visitor Service', 'visitor-service'),
            'group_description' => __(
                'What the Visitor Service holds about this person for this shop.',
                'visitor-service'
            ),
            'item_id' => self::GROUP_ID . '-' . preg_replace('/[^A-Za-z0-9_-]/', '', $id),
            'data' => $data,
        ];
    }

    /** "recordingSegments" → "Recording segments". */
    private static function label(string $name): string
    {
        return ucfirst(strtolower(trim((string) preg_replace('/(?<!^)[A-Z]/', ' $0', $name))));
    }

    /** @param mixed $value */
    private static function text($value): string
    {
        if ($value === null) {
            return '';
        }
        if (is_bool($value)) {
            return $value ? __('yes', 'visitor-service') : __('no', 'visitor-service');
        }
        if (is_scalar($value)) {
            return (string) $value;
        }
        if (is_array($value) && array_is_list($value) && array_filter($value, 'is_scalar') === $value) {
            return implode('; ', array_map('strval', $value));
        }
        return (string) wp_json_encode($value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
    }

    /**
     * What the owner is told when the service did not answer: never the API key, never a fatal.
     *
     * @param array{status: int, body: mixed, error: string} $answer
     */
    private static function failure(bool $export, array $answer): string
    {
        if ($answer['status'] === 0) {
            $why = __('the service could not be reached', 'visitor-service');
        } elseif ($answer['status'] === 429) {
            $why = __('too many requests for this site just now; please try again in a minute', 'visitor-service');
        } else {
            $why = sprintf(
                /* translators: %d: HTTP status */
                __('the service answered HTTP %d', 'visitor-service'),
                $answer['status']
            );
        }
        return $export
            ? sprintf(
                /* translators: %s: why the export failed */
                __(
                    'Visitor Service: the export did not complete (%s); run the request again once it is reachable.',
                    'visitor-service'
                ),
                $why
            )
            : sprintf(
                /* translators: %s: why the erasure failed */
                __(
                    'Visitor Service: the erasure did not complete (%s); run the request again once it is reachable.',
                    'visitor-service'
                ),
                $why
            );
    }
}
