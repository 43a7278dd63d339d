<?php

/**
 * The shop's PHP errors (warnings, notices, fatal errors) sent to /ingest/errors.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * An error handler and a shutdown function collect the request's errors; they are sent once the
 * response is out (fastcgi_finish_request where there is one, otherwise a request written and
 * closed without waiting for the answer). At most MAX_PER_REQUEST distinct errors per request,
 * each (type, file, line) once; while sending, new errors are ignored, so a failing send never
 * becomes another error to send. Deprecation notices are not collected: WordPress core on a
 * newer PHP raises many of them and they are not faults of the shop.
 */
final class Errors
{
    public const MAX_PER_REQUEST = 10;
    private const MAX_FRAMES = 30;
    private const FATAL = E_ERROR | E_PARSE | E_CORE_ERROR | E_COMPILE_ERROR | E_USER_ERROR | E_RECOVERABLE_ERROR;
    private const COLLECTED = self::FATAL | E_WARNING | E_NOTICE | E_CORE_WARNING | E_COMPILE_WARNING
        | E_USER_WARNING | E_USER_NOTICE;
    private const NAMES = [
        E_ERROR => 'E_ERROR', E_WARNING => 'E_WARNING', E_PARSE => 'E_PARSE', E_NOTICE => 'E_NOTICE',
        E_CORE_ERROR => 'E_CORE_ERROR', E_CORE_WARNING => 'E_CORE_WARNING',
        E_COMPILE_ERROR => 'E_COMPILE_ERROR', E_COMPILE_WARNING => 'E_COMPILE_WARNING',
        E_USER_ERROR => 'E_USER_ERROR', E_USER_WARNING => 'E_USER_WARNING',
        E_USER_NOTICE => 'E_USER_NOTICE', E_RECOVERABLE_ERROR => 'E_RECOVERABLE_ERROR',
    ];

    /** @var array<string, array<string, mixed>> collected errors by (type, file, line) */
    private static array $errors = [];
    private static int $skipped = 0;
    private static bool $sending = false;
    /** @var callable|null */
    private static $previous = null;

    public static function register(): void
    {
        // phpcs:ignore WordPress.PHP.DevelopmentFunctions.error_log_set_error_handler, VisitorService.PHP.DevelopmentFunctions -- collecting the site's PHP errors is this class's purpose; the previous handler still runs
        self::$previous = set_error_handler([self::class, 'handle']);
        register_shutdown_function([self::class, 'shutdown']);
        // WordPress's own fatal-error handler runs first at shutdown and ends the request with its
        // error page (wp_die), so later shutdown functions never run: send from its filter.
        add_filter('wp_php_error_message', [self::class, 'beforeErrorPage'], 10, 2);
    }

    /**
     * @param mixed $message
     * @param mixed $error what error_get_last() answered
     * @return mixed the message, unchanged
     */
    public static function beforeErrorPage($message, $error = null)
    {
        if (is_array($error) && isset($error['type']) && !self::$sending) {
            self::noteLast($error);
            self::$sending = true;
            try {
                self::send(false);
            } catch (\Throwable $ignored) {
                unset($ignored);
            }
        }
        return $message;
    }

    /** @param array<string, mixed> $last */
    private static function noteLast(array $last): void
    {
        if (((int) $last['type']) & self::FATAL) {
            $frame = self::frame(['file' => $last['file'] ?? '', 'line' => $last['line'] ?? 0]);
            $message = (string) ($last['message'] ?? '');
            $file = (string) ($last['file'] ?? '');
            self::note((int) $last['type'], $message, $file, (int) ($last['line'] ?? 0), [$frame]);
        }
    }

    /** The error handler: note the error, then let PHP (or the previous handler) go on as before. */
    public static function handle(int $type, string $message, string $file = '', int $line = 0): bool
    {
        // phpcs:ignore WordPress.PHP.DevelopmentFunctions.prevent_path_disclosure_error_reporting, VisitorService.PHP.DevelopmentFunctions -- reads the level only, to skip what the site silenced (@ or its own level); sets nothing
        if (!self::$sending && ($type & self::COLLECTED) && (error_reporting() & $type)) {
            $frames = [];
            // phpcs:ignore WordPress.PHP.DevelopmentFunctions.error_log_debug_backtrace, VisitorService.PHP.DevelopmentFunctions -- the stack of the error being reported: files and lines, no arguments, at most MAX_FRAMES
            foreach (array_slice(debug_backtrace(DEBUG_BACKTRACE_IGNORE_ARGS, self::MAX_FRAMES + 1), 1) as $frame) {
                $frames[] = self::frame($frame);
            }
            array_unshift($frames, self::frame(['file' => $file, 'line' => $line]));
            self::note($type, $message, $file, $line, $frames);
        }
        if (self::$previous !== null) {
            return (bool) call_user_func(self::$previous, $type, $message, $file, $line);
        }
        return false;
    }

    /** @param array<string, mixed> $frame @return array<string, mixed> */
    private static function frame(array $frame): array
    {
        $out = [];
        if (isset($frame['file'])) {
            $out['file'] = substr((string) $frame['file'], -2048);
        }
        if (isset($frame['line'])) {
            $out['line'] = max(0, (int) $frame['line']);
        }
        if (isset($frame['function'])) {
            $class = isset($frame['class']) ? $frame['class'] . '::' : '';
            $out['function'] = substr($class . $frame['function'], 0, 512);
        }
        return $out;
    }

    /** @param list<array<string, mixed>> $frames */
    private static function note(int $type, string $message, string $file, int $line, array $frames): void
    {
        $key = $type . '|' . $file . '|' . $line;
        if (isset(self::$errors[$key])) {
            return;
        }
        if (count(self::$errors) >= self::MAX_PER_REQUEST && !($type & self::FATAL)) {
            self::$skipped++;
            return;
        }
        self::$errors[$key] = [
            'source' => 'php',
            'type' => self::NAMES[$type] ?? 'E_' . $type,
            'message' => substr($message !== '' ? $message : 'unknown error', 0, 4000),
            'frames' => array_slice(array_values(array_filter($frames)), 0, 100),
            'context' => ['file' => substr($file, -2048), 'line' => $line],
        ];
    }

    /** At shutdown: a fatal error is noted, the response finished, then everything sent. */
    public static function shutdown(): void
    {
        if (self::$sending) {
            return;
        }
        $last = error_get_last();
        if (is_array($last)) {
            self::noteLast($last);
        }
        if (self::$errors === []) {
            return;
        }
        self::$sending = true;
        try {
            self::send(true);
        } catch (\Throwable $ignored) {
            // Sending is best effort: nothing here may break the shop or loop.
            unset($ignored);
        }
    }

    /** Sends the collected errors; after the response when $afterResponse and the server can. */
    private static function send(bool $afterResponse): void
    {
        $errors = array_values(self::$errors);
        self::$errors = [];
        if (!function_exists('get_option') || !Options::configured() || !Request::mayCollect()) {
            return;
        }
        $context = self::visitorContext();
        $finished = $afterResponse && Client::finishResponse();
        $lost = 0;
        foreach ($errors as $index => $error) {
            $body = $error + $context;
            $sent = $finished ? Client::post('/ingest/errors', $body, 2.0)['status'] === 200
                : Client::fireAndForget('/ingest/errors', $body);
            if (!$sent) {
                // Unreachable (or refusing): the rest would fail too. Count them, try no more.
                $lost += count($errors) - $index;
                break;
            }
        }
        if ($lost > 0) {
            Options::countDropped('errors', $lost);
        }
    }

    /** @return array<string, mixed> */
    private static function visitorContext(): array
    {
        $context = ['url' => Request::currentUrl()] + Request::serverContext();
        $visitor = Request::cookieVisitorId();
        if ($visitor !== null) {
            $context['visitorId'] = $visitor;
        }
        return $context;
    }
}
