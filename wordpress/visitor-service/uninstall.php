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
wp_clear_scheduled_hook('visitor_service_deliver');
if (function_exists('as_unschedule_all_actions')) {
    as_unschedule_all_actions('visitor_service_deliver', [], 'visitor-service');
}
global $wpdb;
// The per-address counters of the public routes (transients; they expire by themselves too).
// phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- uninstall: WordPress has no API that deletes transients by prefix, and nothing is left to cache
$wpdb->query($wpdb->prepare(
    "DELETE FROM {$wpdb->options} WHERE option_name LIKE %s OR option_name LIKE %s",
    $wpdb->esc_like('_transient_visitor_service_rl_') . '%',
    $wpdb->esc_like('_transient_timeout_visitor_service_rl_') . '%'
));
// phpcs:ignore WordPress.DB.DirectDatabaseQuery, VisitorService.DB.DirectDatabaseQuery -- uninstall drops the plugin's own outbox table, which only this plugin created (dbDelta)
$wpdb->query("DROP TABLE IF EXISTS {$wpdb->prefix}visitor_service_outbox");
