<?php

/**
 * The Action Scheduler stand-in's functions and runner (see ../fake-action-scheduler.php).
 */

declare(strict_types=1);

/** @return array<int, array<string, mixed>> */
function fake_as_actions(): array
{
    wp_cache_delete('fake_as_actions', 'options');
    return (array) get_option('fake_as_actions', []);
}

/** @param array<int, array<string, mixed>> $actions */
function fake_as_save(array $actions): void
{
    update_option('fake_as_actions', $actions, false);
}

/** @param array<mixed> $args */
function fake_as_add(string $hook, array $args, string $group, int $at, bool $async): int
{
    $actions = fake_as_actions();
    $id = $actions === [] ? 1 : max(array_keys($actions)) + 1;
    $actions[$id] = ['hook' => $hook, 'args' => $args, 'group' => $group, 'at' => $at, 'async' => $async,
        'status' => 'pending'];
    fake_as_save($actions);
    return $id;
}

/**
 * @param array<mixed>|null $args
 * @return list<int> ids of the matching actions with one of $statuses, the earliest first
 */
function fake_as_find(string $hook, ?array $args, string $group, array $statuses): array
{
    $found = array_filter(fake_as_actions(), static fn ($action) => $action['hook'] === $hook
        && ($args === null || $action['args'] === $args) && ($group === '' || $action['group'] === $group)
        && in_array($action['status'], $statuses, true));
    uasort($found, static fn ($a, $b) => $a['at'] <=> $b['at']);
    return array_keys($found);
}

/** @param array<mixed> $args */
function as_enqueue_async_action(string $hook, array $args = [], string $group = '', bool $unique = false,
    int $priority = 10): int
{
    return fake_as_add($hook, $args, $group, time(), true);
}

/** @param array<mixed> $args */
function as_schedule_single_action(int $timestamp, string $hook, array $args = [], string $group = '',
    bool $unique = false, int $priority = 10): int
{
    return fake_as_add($hook, $args, $group, $timestamp, false);
}

/** @param array<mixed>|null $args */
function as_has_scheduled_action(string $hook, ?array $args = null, string $group = ''): bool
{
    return fake_as_find($hook, $args, $group, ['pending', 'in-progress']) !== [];
}

/**
 * As Action Scheduler: true for an action running or an async one pending, the timestamp of the
 * next pending one, false when there is none.
 *
 * @param array<mixed>|null $args
 * @return int|bool
 */
function as_next_scheduled_action(string $hook, ?array $args = null, string $group = '')
{
    if (fake_as_find($hook, $args, $group, ['in-progress']) !== []) {
        return true;
    }
    $pending = fake_as_find($hook, $args, $group, ['pending']);
    if ($pending === []) {
        return false;
    }
    $action = fake_as_actions()[$pending[0]];
    return $action['async'] ? true : (int) $action['at'];
}

/** As Action Scheduler: cancels the pending actions (not one that runs). @param array<mixed> $args */
function as_unschedule_all_actions(string $hook, array $args = [], string $group = ''): void
{
    $actions = fake_as_actions();
    foreach (fake_as_find($hook, $args === [] ? null : $args, $group, ['pending']) as $id) {
        $actions[$id]['status'] = 'canceled';
    }
    fake_as_save($actions);
}

/** Runs the due pending actions, oldest first, for at most 30 s. Answers how many ran. */
function fake_as_run_queue(): int
{
    $ran = 0;
    $until = time() + 30;
    while (time() < $until) {
        $due = array_filter(fake_as_actions(), static fn ($action) => $action['status'] === 'pending'
            && $action['at'] <= time());
        if ($due === []) {
            break;
        }
        uasort($due, static fn ($a, $b) => $a['at'] <=> $b['at']);
        $id = array_key_first($due);
        $actions = fake_as_actions();
        $actions[$id]['status'] = 'in-progress';
        fake_as_save($actions);
        do_action_ref_array($actions[$id]['hook'], $actions[$id]['args']);
        $actions = fake_as_actions();
        $actions[$id]['status'] = 'complete';
        fake_as_save($actions);
        $ran++;
    }
    return $ran;
}

add_action('init', static function (): void {
    add_action('action_scheduler_run_queue', 'fake_as_run_queue');
    if (!wp_next_scheduled('action_scheduler_run_queue')) {
        wp_schedule_event(time(), 'fake_as_every_minute', 'action_scheduler_run_queue');
    }
    do_action('action_scheduler_init');
}, 1);

add_filter('cron_schedules', static function (array $schedules): array {
    $schedules['fake_as_every_minute'] = ['interval' => 60, 'display' => 'Every minute (Action Scheduler)'];
    return $schedules;
});
