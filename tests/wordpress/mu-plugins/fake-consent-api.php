<?php

/**
 * Plugin Name: Fake WP Consent API (tests only)
 * Description: wp_has_consent() as the WP Consent API plugin answers it, from the cookie
 *              wp_consent_{category} = allow that consent banners set through it.
 */

declare(strict_types=1);

function wp_has_consent(string $category): bool
{
    return isset($_COOKIE['wp_consent_' . $category]) && $_COOKIE['wp_consent_' . $category] === 'allow';
}
