<!doctype html>
<html <?php language_attributes(); ?>>
<head>
<meta charset="<?php bloginfo('charset'); ?>">
<?php wp_head(); ?>
</head>
<body <?php body_class(); ?>>
<?php
if (isset($_GET['svc_fatal'])) {
    visitor_service_test_theme_fatal();
}
if (isset($_GET['svc_noise'])) {
    visitor_service_test_theme_noise();
}
if (isset($_GET['svc_warn'])) {
    echo '<p id="size">' . esc_html(visitor_service_test_theme_warning()) . '</p>';
}
while (have_posts()) {
    the_post();
    echo '<h1>' . esc_html(get_the_title()) . '</h1>';
    the_content();
}
?>
<a id="home" href="<?php echo esc_url(home_url('/')); ?>">Home</a>
<?php wp_footer(); ?>
</body>
</html>
