<?php

/**
 * Plugin Name: Fake Action Scheduler (tests only)
 * Description: The few public functions of Action Scheduler, the job queue WooCommerce ships, that
 *              the Visitor Service plugin calls: as_enqueue_async_action, as_schedule_single_action,
 *              as_has_scheduled_action, as_next_scheduled_action and as_unschedule_all_actions, with
 *              the action_scheduler_init hook, and nothing more. Part of the WooCommerce stand-in;
 *              absent while the file no-action-scheduler.txt exists beside this one (a shop without
 *              WooCommerce's queue).
 *
 * Actions are kept in the option fake_as_actions. As Action Scheduler, the queue is run by the
 * WP-Cron event action_scheduler_run_queue every minute; fake_as_run_queue() runs it as
 * `wp action-scheduler run` would (the tests' runner, without WP-CLI): every due pending action,
 * oldest first, including those enqueued meanwhile, for at most 30 s. Nothing else runs it: real
 * Action Scheduler also starts an async runner from wp-admin requests, which these tests leave out.
 */

declare(strict_types=1);

// Functions are declared when their file is compiled, whatever returns before them: so they
// live in a file of their own, loaded only when wanted.
if (!is_readable(__DIR__ . '/no-action-scheduler.txt')) {
    require __DIR__ . '/fake-action-scheduler/action-scheduler.php';
}
