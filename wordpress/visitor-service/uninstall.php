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

require_once __DIR__ . '/includes/class-options.php';
foreach (VisitorService\Options::ALL as $visitor_service_option) {
    delete_option($visitor_service_option);
}
wp_clear_scheduled_hook('visitor_service_retry');
global $wpdb;
$wpdb->query('DROP TABLE IF EXISTS ' . $wpdb->prefix . 'visitor_service_outbox'); // phpcs:ignore
