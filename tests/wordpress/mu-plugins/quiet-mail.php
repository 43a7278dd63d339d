<?php

/**
 * Plugin Name: Quiet mail (tests only)
 * Description: There is no sendmail on the test machine; WordPress's mail is accepted and dropped.
 */

add_filter('pre_wp_mail', '__return_true');
