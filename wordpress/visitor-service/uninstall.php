<?php

/**
 * Uninstall: removes every option and the outbox table of the plugin.
 *
 * @package VisitorService
 */

declare(strict_types=1);

defined('ABSPATH') || exit;
defined('WP_UNINSTALL_PLUGIN') || exit;

require_once __DIR__ . '/includes/class-options.php';
foreach (VisitorService\Options::ALL as $visitor_service_option) {
    delete_option($visitor_service_option);
}
wp_clear_scheduled_hook('visitor_service_retry');
global $wpdb;
// A table name cannot be a prepared value; it is the site's own prefix and a constant name.
$wpdb->query('DROP TABLE IF EXISTS ' . $wpdb->prefix . 'visitor_service_outbox');
