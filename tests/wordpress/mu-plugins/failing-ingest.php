<?php

/**
 * Plugin Name: A failing ingest path (tests only)
 * Description: While the file failing-ingest.txt exists beside this one, WordPress's HTTP API
 *              answers 503 to every request for the ingest path it names (e.g. /ingest/surveys),
 *              as a service whose one endpoint is failing would; other requests go out as usual.
 */

declare(strict_types=1);

add_filter('pre_http_request', static function ($answer, array $args, string $url) {
    $flag = __DIR__ . '/failing-ingest.txt';
    if (!is_readable($flag)) {
        return $answer;
    }
    $path = trim((string) file_get_contents($flag));
    if ($path === '' || (string) wp_parse_url($url, PHP_URL_PATH) !== $path) {
        return $answer;
    }
    return ['headers' => [], 'body' => '{"error":"unavailable"}', 'cookies' => [], 'filename' => null,
        'response' => ['code' => 503, 'message' => 'Service Unavailable']];
}, 10, 3);
