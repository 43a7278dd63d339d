<?php

/**
 * Plugin Name: Fake WooCommerce features (tests only)
 * Description: WooCommerce's public FeaturesUtil::declare_compatibility(), part of the WooCommerce
 *              stand-in (fake-woocommerce.php, which fires before_woocommerce_init). As WooCommerce,
 *              a declaration counts only while before_woocommerce_init runs. What was declared is
 *              kept in $GLOBALS['fake_wc_compatibility'][feature][plugin file] for the tests.
 */

declare(strict_types=1);

namespace Automattic\WooCommerce\Utilities;

final class FeaturesUtil
{
    public static function declare_compatibility(string $feature_id, string $plugin_file,
        bool $positive_compatibility = true): bool
    {
        if (!doing_action('before_woocommerce_init')) {
            _doing_it_wrong(__METHOD__, 'Declare compatibility on before_woocommerce_init.', '7.0');
            return false;
        }
        $GLOBALS['fake_wc_compatibility'][$feature_id][plugin_basename($plugin_file)] = $positive_compatibility;
        return true;
    }
}
