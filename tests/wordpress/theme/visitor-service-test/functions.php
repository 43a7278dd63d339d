<?php

add_action('after_setup_theme', static function (): void {
    add_theme_support('title-tag');
});

/** Raises a genuine E_WARNING (an undefined array key), as a buggy theme would. */
function visitor_service_test_theme_warning(): string
{
    $sizes = ['small' => 'S'];
    return (string) $sizes['extra-large'];
}

/** Ends the request with a fatal error (a call to a function that does not exist). */
function visitor_service_test_theme_fatal(): void
{
    $name = 'visitor_service_test_theme_' . 'missing_function';
    $name();
}

// A fatal error before any output: WordPress answers with its own error page (and wp_die).
add_action('template_redirect', static function (): void {
    if (isset($_GET['svc_fatal_early'])) {
        visitor_service_test_theme_fatal();
    }
});

/** A noisy page: one warning raised 30 times, and 15 distinct warnings (each on its own line). */
function visitor_service_test_theme_noise(): void
{
    for ($i = 0; $i < 30; $i++) {
        trigger_error('the same warning', E_USER_WARNING);
    }
    for ($i = 1; $i <= 15; $i++) {
        eval(str_repeat("\n", $i) . "trigger_error('warning number {$i}', E_USER_WARNING);");
    }
}
