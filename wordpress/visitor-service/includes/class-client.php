<?php

/**
 * HTTP calls from the shop server to the service's /ingest endpoints.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * Every call carries X-Service-Key; none is ever made on a page's path (only after the response,
 * from a REST route, from WP-Cron or from the settings screen). No body leaves with a secret in
 * its URLs (UrlSecrets).
 */
final class Client
{
    /**
     * POSTs JSON to the service and answers ['status' => HTTP status or 0 when unreachable,
     * 'body' => decoded answer or null, 'error' => why it failed].
     *
     * @param array<string, mixed> $body
     * @return array{status: int, body: mixed, error: string}
     */
    public static function post(string $path, array $body, float $timeout = 3.0): array
    {
        $answer = wp_remote_post(Options::serviceUrl() . $path, [
            'timeout' => $timeout,
            'redirection' => 0,
            'headers' => [
                'Content-Type' => 'application/json',
                'X-Service-Key' => Options::apiKey(),
            ],
            'body' => (string) wp_json_encode(UrlSecrets::stripFields($body), JSON_UNESCAPED_SLASHES),
            'user-agent' => 'visitor-service-wordpress/' . VISITOR_SERVICE_VERSION,
        ]);
        return self::answer($answer);
    }

    /**
     * GETs a path of the service with extra headers (the settings check).
     *
     * @param array<string, string> $headers
     * @return array{status: int, body: mixed, error: string}
     */
    public static function get(string $path, array $headers = [], float $timeout = 5.0): array
    {
        return self::answer(wp_remote_get(Options::serviceUrl() . $path, [
            'timeout' => $timeout,
            'redirection' => 0,
            'headers' => $headers,
        ]));
    }

    /**
     * @param array<string, mixed>|\WP_Error $answer
     * @return array{status: int, body: mixed, error: string}
     */
    private static function answer($answer): array
    {
        if (is_wp_error($answer)) {
            return ['status' => 0, 'body' => null, 'error' => $answer->get_error_message()];
        }
        $status = (int) wp_remote_retrieve_response_code($answer);
        $text = (string) wp_remote_retrieve_body($answer);
        $decoded = json_decode($text, true);
        $error = $status >= 200 && $status < 300 ? '' : 'HTTP ' . $status . ': ' . substr($text, 0, 200);
        return ['status' => $status, 'body' => $decoded, 'error' => $error];
    }

    /**
     * Writes one POST to the service and closes the connection without waiting for the answer:
     * the non-blocking request for servers without fastcgi_finish_request. Plain PHP streams, so
     * it works even at shutdown after a fatal error. Answers false when the service could not be
     * reached. Never raises: a failure here must not become another error to send.
     *
     * @param array<string, mixed> $body
     */
    public static function fireAndForget(string $path, array $body, float $connectTimeout = 0.5): bool
    {
        return self::writeAndLeave(Options::serviceUrl() . $path, UrlSecrets::stripFields($body), [
            'X-Service-Key' => Options::apiKey(),
        ], $connectTimeout);
    }

    /**
     * Writes one JSON POST to $url and closes the connection without reading the answer.
     *
     * @param array<string, mixed> $body
     * @param array<string, string> $headers
     */
    public static function writeAndLeave(string $url, array $body, array $headers, float $connectTimeout): bool
    {
        $parts = wp_parse_url($url);
        if (!is_array($parts) || empty($parts['host'])) {
            return false;
        }
        $tls = ($parts['scheme'] ?? 'http') === 'https';
        $port = (int) ($parts['port'] ?? ($tls ? 443 : 80));
        $target = ($tls ? 'tls://' : 'tcp://') . $parts['host'] . ':' . $port;
        $errno = 0;
        $errstr = '';
        $context = stream_context_create(['ssl' => [
            // As WordPress's own loopback requests (spawn_cron): a local certificate need not verify.
            'verify_peer' => self::isOwnHost((string) $parts['host'])
                ? (bool) apply_filters('https_local_ssl_verify', false) : true,
        ]]);
        $socket = @stream_socket_client($target, $errno, $errstr, $connectTimeout, STREAM_CLIENT_CONNECT, $context);
        if ($socket === false) {
            return false;
        }
        $json = (string) wp_json_encode($body, JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
        $host = $parts['host'] . (isset($parts['port']) ? ':' . $parts['port'] : '');
        $path = ($parts['path'] ?? '/') . (isset($parts['query']) ? '?' . $parts['query'] : '');
        $request = 'POST ' . $path . " HTTP/1.1\r\n" . 'Host: ' . $host . "\r\n";
        foreach ($headers as $name => $value) {
            $request .= $name . ': ' . $value . "\r\n";
        }
        $request .= "Content-Type: application/json\r\n"
            . 'Content-Length: ' . strlen($json) . "\r\n"
            . "Connection: close\r\n\r\n" . $json;
        stream_set_timeout($socket, 1);
        // phpcs:ignore WordPress.WP.AlternativeFunctions.file_system_operations_fwrite, VisitorService.WP.FilesystemFunctions -- a socket, not a file: the request is written and left without waiting for the answer, which WP_Http cannot do
        $written = @fwrite($socket, $request);
        // phpcs:ignore WordPress.WP.AlternativeFunctions.file_system_operations_fclose, VisitorService.WP.FilesystemFunctions -- closes that socket
        @fclose($socket);
        return $written === strlen($request);
    }

    private static function isOwnHost(string $host): bool
    {
        return function_exists('home_url') && $host === (string) wp_parse_url(home_url(), PHP_URL_HOST);
    }

    /** Whether this server can release the visitor's response before the script ends. */
    public static function canFinishResponse(): bool
    {
        return function_exists('fastcgi_finish_request') || function_exists('litespeed_finish_request');
    }

    /**
     * Lets the visitor go before the work done after the response (FPM, LiteSpeed). Answers
     * whether it did: without either (php -S, Apache's mod_php) the visitor waits for whatever
     * the script still does, so nothing after this may wait on the service there.
     */
    public static function finishResponse(): bool
    {
        if (function_exists('fastcgi_finish_request')) {
            return fastcgi_finish_request();
        }
        if (function_exists('litespeed_finish_request')) {
            litespeed_finish_request();
            return true;
        }
        return false;
    }
}
