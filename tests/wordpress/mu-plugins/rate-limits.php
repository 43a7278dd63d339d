<?php

/**
 * Plugin Name: Rate limits (tests and benchmarks only)
 * Description: While rate-limits.json exists beside this file ({"leads": 0, ...}), its numbers
 *              replace the plugin's per-address limits through the visitor_service_rate_limit
 *              filter, as a shop owner's own code would (0: no limit).
 */

declare(strict_types=1);

add_filter('visitor_service_rate_limit', static function (int $limit, string $route): int {
    $file = __DIR__ . '/rate-limits.json';
    $limits = is_readable($file) ? json_decode((string) file_get_contents($file), true) : null;
    return is_array($limits) && isset($limits[$route]) ? (int) $limits[$route] : $limit;
}, 10, 2);
