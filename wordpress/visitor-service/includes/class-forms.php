<?php

/**
 * Form submissions as leads: Contact Form 7, WPForms, Gravity Forms, Ninja Forms, Formidable,
 * WooCommerce's account registration and (when chosen) comments.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * Each form plugin is read through its own documented server-side hook, after it accepted the
 * submission; only the e-mail address, the name and the phone number are taken (by the field's
 * type where the plugin has types), never the other fields. A submission without an e-mail
 * address, from a browser without the loader's visitor id, under GPC or without consent where
 * the site requires it, is not a lead. The owner chooses under Settings which sources count.
 */
final class Forms
{
    public const OPTION = Options::FORM_SOURCES;
    /** Counted unless the owner says otherwise; comments only when chosen. */
    public const DEFAULT_SOURCES = [
        'contact-form-7', 'wpforms', 'gravity-forms', 'ninja-forms', 'formidable', 'woocommerce-registration',
    ];
    public const SOURCES = [...self::DEFAULT_SOURCES, 'comments'];

    public static function hooks(): void
    {
        add_action('wpcf7_mail_sent', [self::class, 'contactForm7']);
        add_action('wpforms_process_complete', [self::class, 'wpForms'], 10, 3);
        add_action('gform_after_submission', [self::class, 'gravityForms'], 10, 2);
        add_action('ninja_forms_after_submission', [self::class, 'ninjaForms']);
        add_action('frm_after_create_entry', [self::class, 'formidable'], 30, 2);
        add_action('comment_post', [self::class, 'comment'], 10, 3);
    }

    /** The sources that count as leads: the owner's choice, or the defaults. @return list<string> */
    public static function sources(): array
    {
        $chosen = get_option(self::OPTION, null);
        return is_array($chosen) ? array_values(array_intersect(self::SOURCES, $chosen)) : self::DEFAULT_SOURCES;
    }

    /** @return array<string, string> each source's name, for the settings screen */
    public static function labels(): array
    {
        return [
            'contact-form-7' => __('Contact Form 7', 'visitor-service'),
            'wpforms' => __('WPForms', 'visitor-service'),
            'gravity-forms' => __('Gravity Forms', 'visitor-service'),
            'ninja-forms' => __('Ninja Forms', 'visitor-service'),
            'formidable' => __('Formidable Forms', 'visitor-service'),
            'woocommerce-registration' => __('WooCommerce account registration', 'visitor-service'),
            'comments' => __('Comments', 'visitor-service'),
        ];
    }

    /**
     * @param mixed $value what the settings form sent
     * @return list<string>
     */
    public static function sanitize($value): array
    {
        return array_values(array_intersect(self::SOURCES, array_map('strval', (array) $value)));
    }

    /**
     * Keeps one submission as a lead, when its source counts and the visitor may be followed.
     * Its URL is the page the form was on: $url when the hook knows it, else the request's page.
     */
    public static function capture(
        string $source,
        string $formId,
        string $email,
        string $name = '',
        string $phone = '',
        ?string $url = null
    ): void {
        $email = trim($email);
        $visitor = Request::cookieVisitorId();
        if (!in_array($source, self::sources(), true) || $visitor === null || !is_email($email)) {
            return;
        }
        if (!Options::configured() || !Request::mayCollect()) {
            return;
        }
        $lead = [
            'leadId' => Request::newId(),
            'kind' => 'form',
            'visitorId' => $visitor,
            'url' => $url ?? Request::pageUrl(),
            'email' => $email,
            'name' => mb_substr(trim($name), 0, 200),
            'phone' => mb_substr(trim($phone), 0, 50),
            'formId' => mb_substr($source . ':' . $formId, 0, 128),
        ] + Request::serverContext();
        $cart = WooCommerce::cart();
        if ($cart !== null && $cart['items'] !== []) {
            $lead['cart'] = $cart;
        }
        $session = WooCommerce::sessionId();
        if ($session !== null) {
            $lead['ecommerceSessionId'] = $session;
        }
        Outbox::accept('/ingest/leads', array_filter($lead, static fn ($v) => $v !== '' && $v !== null));
    }

    /** @param mixed $value a field's value; a compound one (first and last name) is joined */
    private static function text($value): string
    {
        if (is_array($value)) {
            return trim(implode(' ', array_filter(array_map('strval', array_filter($value, 'is_scalar')))));
        }
        return is_scalar($value) ? trim((string) $value) : '';
    }

    /**
     * Contact Form 7, wpcf7_mail_sent($contact_form): the submission is
     * WPCF7_Submission::get_instance(), the field types come from the form's tags (email, tel);
     * CF7 has no name type, so the name is the text field named like "your-name".
     *
     * @param object $form a WPCF7_ContactForm
     */
    public static function contactForm7($form): void
    {
        if (!is_object($form) || !class_exists('WPCF7_Submission') || !method_exists($form, 'scan_form_tags')) {
            return;
        }
        $submission = \WPCF7_Submission::get_instance();
        $posted = is_object($submission) ? (array) $submission->get_posted_data() : [];
        $found = ['email' => '', 'name' => '', 'tel' => ''];
        foreach ((array) $form->scan_form_tags() as $tag) {
            $type = (string) ($tag->basetype ?? '');
            $field = (string) ($tag->name ?? '');
            if ($type === 'text' && preg_match('/(^|[-_])name$/', $field)) {
                $type = 'name';
            }
            if (isset($found[$type]) && $found[$type] === '') {
                $found[$type] = self::text($posted[$field] ?? '');
            }
        }
        self::capture('contact-form-7', (string) $form->id(), $found['email'], $found['name'], $found['tel']);
    }

    /**
     * WPForms, wpforms_process_complete($fields, $entry, $form_data, $entry_id): $fields holds
     * each field's 'type' and (sanitized) 'value'.
     *
     * @param mixed $fields
     * @param mixed $entry
     * @param mixed $formData
     */
    public static function wpForms($fields, $entry = null, $formData = []): void
    {
        $types = ['email' => 'email', 'name' => 'name', 'phone' => 'phone'];
        $found = self::byType((array) $fields, 'type', 'value', $types);
        $formId = is_array($formData) ? (string) ($formData['id'] ?? '') : '';
        self::capture('wpforms', $formId, $found['email'], $found['name'], $found['phone']);
    }

    /**
     * Gravity Forms, gform_after_submission($entry, $form): $form['fields'] are GF_Field objects
     * (type, id, inputs); the entry holds each value by field id, a name by its inputs' ids.
     *
     * @param mixed $entry
     * @param mixed $form
     */
    public static function gravityForms($entry, $form): void
    {
        $entry = (array) $entry;
        $found = ['email' => '', 'name' => '', 'phone' => ''];
        foreach ((array) (is_array($form) ? ($form['fields'] ?? []) : []) as $field) {
            $type = is_object($field) ? (string) ($field->type ?? '') : '';
            if (!isset($found[$type]) || $found[$type] !== '') {
                continue;
            }
            $ids = [(string) $field->id];
            if (is_array($field->inputs ?? null) && $field->inputs !== []) {
                $ids = array_map(static fn ($input) => (string) ($input['id'] ?? ''), $field->inputs);
            }
            $found[$type] = self::text(array_map(static fn ($id) => $entry[$id] ?? '', $ids));
        }
        $formId = is_array($form) ? (string) ($form['id'] ?? '') : '';
        self::capture('gravity-forms', $formId, $found['email'], $found['name'], $found['phone']);
    }

    /**
     * Ninja Forms, ninja_forms_after_submission($form_data): $form_data['fields'] holds each
     * field's 'type' (email, firstname, lastname, phone) and 'value'.
     *
     * @param mixed $formData
     */
    public static function ninjaForms($formData): void
    {
        $formData = (array) $formData;
        $fields = (array) ($formData['fields'] ?? []);
        $types = ['email' => 'email', 'firstname' => 'first', 'lastname' => 'last', 'phone' => 'phone'];
        $found = self::byType($fields, 'type', 'value', $types);
        $name = trim($found['first'] . ' ' . $found['last']);
        self::capture('ninja-forms', (string) ($formData['form_id'] ?? ''), $found['email'], $name, $found['phone']);
    }

    /**
     * Formidable, frm_after_create_entry($entry_id, $form_id): the form's fields
     * (FrmField::get_all_for_form) give the types, FrmEntryMeta::get_entry_meta_by_field the values.
     *
     * @param mixed $entryId
     * @param mixed $formId
     */
    public static function formidable($entryId, $formId): void
    {
        if (!class_exists('FrmField') || !class_exists('FrmEntryMeta')) {
            return;
        }
        $found = ['email' => '', 'name' => '', 'phone' => ''];
        foreach ((array) \FrmField::get_all_for_form((int) $formId) as $field) {
            $type = is_object($field) ? (string) ($field->type ?? '') : '';
            if (isset($found[$type]) && $found[$type] === '') {
                $found[$type] = self::text(\FrmEntryMeta::get_entry_meta_by_field((int) $entryId, (int) $field->id));
            }
        }
        self::capture('formidable', (string) $formId, $found['email'], $found['name'], $found['phone']);
    }

    /**
     * WordPress's comment_post($comment_id, $comment_approved, $commentdata): the commenter's
     * e-mail address and name; not for spam, and only when the owner chose comments. The form
     * posts to wp-comments-post.php, so the lead's page is the post's permalink.
     *
     * @param mixed $commentId
     * @param mixed $approved
     * @param mixed $data
     */
    public static function comment($commentId, $approved = 0, $data = []): void
    {
        $data = (array) $data;
        if ($approved === 'spam' || ($data['comment_type'] ?? 'comment') !== 'comment') {
            return;
        }
        $postId = (int) ($data['comment_post_ID'] ?? 0);
        $email = (string) ($data['comment_author_email'] ?? '');
        $permalink = $postId > 0 ? get_permalink($postId) : false;
        self::capture(
            'comments',
            'post-' . $postId,
            $email,
            (string) ($data['comment_author'] ?? ''),
            '',
            is_string($permalink) ? $permalink : null
        );
    }

    /**
     * The first value of each wanted type among fields given as arrays.
     *
     * @param array<mixed> $fields
     * @param array<string, string> $wanted field type => name of the result
     * @return array<string, string>
     */
    private static function byType(array $fields, string $typeKey, string $valueKey, array $wanted): array
    {
        $found = array_fill_keys(array_values($wanted), '');
        foreach ($fields as $field) {
            $type = is_array($field) ? (string) ($field[$typeKey] ?? '') : '';
            if (isset($wanted[$type]) && $found[$wanted[$type]] === '') {
                $found[$wanted[$type]] = self::text($field[$valueKey] ?? '');
            }
        }
        return $found;
    }
}
