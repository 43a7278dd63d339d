<?php

/**
 * Plugin Name: API key constant (tests only)
 * Description: Stands in for `define('VISITOR_SERVICE_API_KEY', …)` in wp-config.php, which is
 *              shared by the whole test run: defined only while the file api-key-constant.txt
 *              exists beside this one.
 */

declare(strict_types=1);

if (is_readable(__DIR__ . '/api-key-constant.txt') && !defined('VISITOR_SERVICE_API_KEY')) {
    define('VISITOR_SERVICE_API_KEY', trim((string) file_get_contents(__DIR__ . '/api-key-constant.txt')));
}
