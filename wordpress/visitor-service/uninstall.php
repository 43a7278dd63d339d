<?php

/**
 * Uninstall: removes every option and the outbox table of the plugin.
 *
 * @package VisitorService
 */

declare(strict_types=1);

if (!defined('WP_UNINSTALL_PLUGIN')) {
    exit;
}

foreach (
    [
        'visitor_service_url', 'visitor_service_public_key', 'visitor_service_api_key',
        'visitor_service_require_consent', 'visitor_service_dropped', 'visitor_service_last_check',
        'visitor_service_db_version',
    ] as $visitor_service_option
) {
    delete_option($visitor_service_option);
}
wp_clear_scheduled_hook('visitor_service_retry');
global $wpdb;
$wpdb->query('DROP TABLE IF EXISTS ' . $wpdb->prefix . 'visitor_service_outbox'); // phpcs:ignore
