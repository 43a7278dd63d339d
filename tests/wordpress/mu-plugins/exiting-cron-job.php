<?php

/**
 * Plugin Name: A cron job that exits (tests only)
 * Description: While the file exiting-cron-job.txt exists beside this one, a WP-Cron event due
 *              before every other one ends the cron run with exit(), as WooCommerce's privacy
 *              cleanup does (WP_Background_Process::handle_cron_healthcheck ends in exit): no later
 *              event of that run is called, and the cron lock stays taken for 60 s. Each run is
 *              counted in the option fake_exiting_cron_runs.
 */

declare(strict_types=1);

if (!is_readable(__DIR__ . '/exiting-cron-job.txt')) {
    return;
}

add_action('fake_exiting_cron_job', static function (): void {
    update_option('fake_exiting_cron_runs', (int) get_option('fake_exiting_cron_runs', 0) + 1, false);
    exit;
});

// Due at second 1 of 1970 on every request: before any other event of any run.
add_action('init', static function (): void {
    if (wp_next_scheduled('fake_exiting_cron_job') !== 1) {
        wp_clear_scheduled_hook('fake_exiting_cron_job');
        wp_schedule_event(1, 'hourly', 'fake_exiting_cron_job');
    }
});
