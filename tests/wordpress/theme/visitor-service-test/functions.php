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
