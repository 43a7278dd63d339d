<?php

/**
 * Plugin Name: Fake form plugins (tests only)
 * Description: Contact Form 7, WPForms, Gravity Forms, Ninja Forms and Formidable as the Visitor
 *              Service plugin meets them: each one's documented server-side hook, fired with the
 *              argument shapes its documentation gives, and the few public classes the adapter
 *              reads (WPCF7_Submission, the contact form's tags, GF_Field, FrmField,
 *              FrmEntryMeta), nothing more. None can be installed from the registries these
 *              tests may use.
 *
 * POST /wp-admin/admin-ajax.php with action=fake_form, plugin=cf7|wpforms|gravity|ninja|formidable
 * and the fields email, first, last, phone, message submits one form, as these plugins' AJAX
 * submissions do (from the page in the Referer).
 */

declare(strict_types=1);

/** A form tag of Contact Form 7 (WPCF7_FormTag): its base type and name. */
final class Fake_WPCF7_FormTag
{
    public function __construct(public string $basetype, public string $name)
    {
    }
}

final class WPCF7_ContactForm
{
    public function __construct(private int $id)
    {
    }

    public function id(): int
    {
        return $this->id;
    }

    public function title(): string
    {
        return 'Contact form 1';
    }

    /** @return list<Fake_WPCF7_FormTag> the tags of CF7's default form, plus a phone */
    public function scan_form_tags(): array
    {
        return [new Fake_WPCF7_FormTag('text', 'your-name'), new Fake_WPCF7_FormTag('email', 'your-email'),
            new Fake_WPCF7_FormTag('tel', 'your-phone'), new Fake_WPCF7_FormTag('text', 'your-subject'),
            new Fake_WPCF7_FormTag('textarea', 'your-message'), new Fake_WPCF7_FormTag('submit', '')];
    }
}

final class WPCF7_Submission
{
    /** @var array<string, string> */
    public static array $posted = [];

    public static function get_instance(): self
    {
        return new self();
    }

    /** @return array<string, string> */
    public function get_posted_data(): array
    {
        return self::$posted;
    }
}

/** Gravity Forms' field object: type, id and (for a name) its inputs. */
final class GF_Field
{
    /** @param list<array<string, string>>|null $inputs */
    public function __construct(public string $type, public int $id, public string $label, public ?array $inputs = null)
    {
    }
}

final class FrmField
{
    /** @return list<object> the form's fields, as Formidable returns them */
    public static function get_all_for_form($form_id): array
    {
        $fields = [[11, 'name', 'Name'], [12, 'email', 'Email'], [13, 'phone', 'Phone'], [14, 'textarea', 'Message']];
        return array_map(static fn ($f) => (object) ['id' => $f[0], 'type' => $f[1], 'name' => $f[2],
            'form_id' => (int) $form_id], $fields);
    }
}

final class FrmEntryMeta
{
    /** @var array<int, mixed> */
    public static array $values = [];

    /** @return mixed */
    public static function get_entry_meta_by_field($entry_id, $field_id)
    {
        return self::$values[(int) $field_id] ?? '';
    }
}

$fake_form_submit = static function (): void {
    $get = static fn (string $name): string => sanitize_text_field(wp_unslash((string) ($_POST[$name] ?? '')));
    [$email, $first, $last, $phone, $message] = array_map($get, ['email', 'first', 'last', 'phone', 'message']);
    switch ($get('plugin')) {
        case 'cf7':
            WPCF7_Submission::$posted = ['your-name' => trim("$first $last"), 'your-email' => $email,
                'your-phone' => $phone, 'your-subject' => 'Hello', 'your-message' => $message];
            do_action('wpcf7_mail_sent', new WPCF7_ContactForm(7));
            break;
        case 'wpforms':
            $fields = [
                0 => ['name' => 'Name', 'value' => trim("$first $last"), 'id' => 0, 'type' => 'name',
                    'first' => $first, 'middle' => '', 'last' => $last],
                1 => ['name' => 'Email', 'value' => $email, 'id' => 1, 'type' => 'email'],
                2 => ['name' => 'Phone', 'value' => $phone, 'id' => 2, 'type' => 'phone'],
                3 => ['name' => 'Comment or Message', 'value' => $message, 'id' => 3, 'type' => 'textarea'],
            ];
            $entry = ['fields' => [0 => ['first' => $first, 'last' => $last], 1 => $email, 2 => $phone,
                3 => $message], 'id' => 5];
            do_action('wpforms_process_complete', $fields, $entry, ['id' => 5,
                'settings' => ['form_title' => 'Simple Contact Form']], 501);
            break;
        case 'gravity':
            $form = ['id' => 4, 'title' => 'Contact', 'fields' => [
                new GF_Field('name', 1, 'Name', [['id' => '1.3', 'label' => 'First'], ['id' => '1.6', 'label' => 'Last']]),
                new GF_Field('email', 2, 'Email'), new GF_Field('phone', 3, 'Phone'),
                new GF_Field('textarea', 4, 'Message')]];
            $entry = ['id' => '77', 'form_id' => '4', '1.3' => $first, '1.6' => $last, '2' => $email,
                '3' => $phone, '4' => $message];
            do_action('gform_after_submission', $entry, $form);
            break;
        case 'ninja':
            do_action('ninja_forms_after_submission', ['form_id' => 6, 'settings' => ['title' => 'Contact Me'],
                'extra' => [], 'fields' => [
                    ['id' => 1, 'key' => 'firstname_1', 'type' => 'firstname', 'label' => 'First Name', 'value' => $first],
                    ['id' => 2, 'key' => 'lastname_2', 'type' => 'lastname', 'label' => 'Last Name', 'value' => $last],
                    ['id' => 3, 'key' => 'email_3', 'type' => 'email', 'label' => 'Email', 'value' => $email],
                    ['id' => 4, 'key' => 'phone_4', 'type' => 'phone', 'label' => 'Phone', 'value' => $phone],
                    ['id' => 5, 'key' => 'message_5', 'type' => 'textarea', 'label' => 'Message', 'value' => $message],
                ]]);
            break;
        case 'formidable':
            FrmEntryMeta::$values = [11 => ['first' => $first, 'last' => $last], 12 => $email, 13 => $phone,
                14 => $message];
            do_action('frm_after_create_entry', 901, 3);
            break;
    }
    wp_send_json_success();
};
add_action('wp_ajax_fake_form', $fake_form_submit);
add_action('wp_ajax_nopriv_fake_form', $fake_form_submit);
