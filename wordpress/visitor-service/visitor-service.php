<?php

/**
 * Plugin Name:       Visitor Service
 * Description:       Sends pageviews, leads, survey answers, PHP errors and product statements to the Visitor Service.
 * Version:           0.2.0
 * Requires at least: 6.1
 * Requires PHP:      8.1
 * Author:            Visitor Service
 * License:           GPL-2.0-or-later
 * Text Domain:       visitor-service
 * Domain Path:       /languages
 * WC requires at least: 7.0
 * WC tested up to:   9.9
 *
 * @package VisitorService
 */

declare(strict_types=1);

defined('ABSPATH') || exit;

define('VISITOR_SERVICE_VERSION', '0.2.0');
define('VISITOR_SERVICE_FILE', __FILE__);

require_once __DIR__ . '/includes/class-options.php';
require_once __DIR__ . '/includes/class-request.php';
require_once __DIR__ . '/includes/class-url-secrets.php';
require_once __DIR__ . '/includes/class-client.php';
require_once __DIR__ . '/includes/class-limits.php';
require_once __DIR__ . '/includes/class-statements.php';
require_once __DIR__ . '/includes/class-outbox.php';
require_once __DIR__ . '/includes/class-errors.php';
require_once __DIR__ . '/includes/class-woocommerce.php';
require_once __DIR__ . '/includes/class-forms.php';
require_once __DIR__ . '/includes/class-rest.php';
require_once __DIR__ . '/includes/class-front.php';
require_once __DIR__ . '/includes/class-settings.php';
require_once __DIR__ . '/includes/class-privacy.php';

// PHP errors are watched from the moment the plugin loads, before most of the shop runs.
VisitorService\Errors::register();

register_activation_hook(__FILE__, [VisitorService\Outbox::class, 'activate']);
register_deactivation_hook(__FILE__, [VisitorService\Outbox::class, 'deactivate']);

add_action('init', static function (): void {
    load_plugin_textdomain('visitor-service', false, dirname(plugin_basename(__FILE__)) . '/languages');
});

VisitorService\Outbox::hooks();
VisitorService\Rest::hooks();
VisitorService\Front::hooks();
VisitorService\WooCommerce::hooks();
VisitorService\Forms::hooks();
VisitorService\Settings::hooks();
VisitorService\Privacy::hooks();
