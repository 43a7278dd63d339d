<?php

/**
 * Secrets in URLs: the query parameters that never leave the shop (issue 40 point 4).
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * An order-received address carries WooCommerce's order key (`?key=wc_order_…`), a password-reset
 * link its reset key and login, an OAuth callback its code or token: whoever holds one can open
 * the order or the account. The service strips them from every URL it is sent; the plugin strips
 * the same ones from every URL it sends, so they do not leave the shop at all, nor wait in the
 * outbox. The rules are the service's (privacy/url_secrets.py), line for line.
 */
final class UrlSecrets
{
    /**
     * Names (compared case-insensitively) whose value is a secret wherever they appear. Must
     * match DEFAULT_SECRET_PARAMETERS in the service's privacy/url_secrets.py:
     * tests/wordpress/test_url_secrets_in_plugin.py checks that the two lists are the same.
     * A shop adds its own names with the filter visitor_service_secret_url_parameters.
     */
    public const PARAMETERS = [
        // WooCommerce's order-received and order-pay key; WordPress's password-reset key.
        'key', 'order_key', 'rp_key',
        // Tokens and OAuth callbacks.
        'token', 'auth', 'access_token', 'id_token', 'refresh_token', 'code',
        // Credentials, signatures and nonces.
        'password', 'pass', 'pwd', 'secret', 'signature', 'sig', '_wpnonce', 'nonce',
        'apikey', 'api_key',
        // Session identifiers.
        'session', 'sessionid', 'phpsessid',
    ];

    /** WordPress's reset link (`wp-login.php?action=rp&key=…&login=…`): `login` completes the key. */
    private const PASSWORD_RESET_ACTIONS = ['rp', 'resetpass'];
    private const PASSWORD_RESET_LOGIN = 'login';

    /** A WooCommerce order key, under whatever name a theme or plugin passes it on. */
    private const ORDER_KEY_PREFIX = 'wc_order_';

    /** The fields of an item sent to the service that hold a URL (as the service's URL_FIELDS). */
    private const FIELDS = ['url', 'referrer', 'pageUrl'];

    /**
     * The item with the secret parameters stripped from its URL fields.
     *
     * @param array<string, mixed> $item
     * @return array<string, mixed>
     */
    public static function stripFields(array $item): array
    {
        $names = null;
        foreach (self::FIELDS as $field) {
            if (isset($item[$field]) && is_string($item[$field]) && $item[$field] !== '') {
                $names ??= self::names();
                $item[$field] = self::strip($item[$field], $names);
            }
        }
        return $item;
    }

    /**
     * The URL without its secret parameters (name and value), in its query and in a fragment
     * written as parameters (`#access_token=…`); everything else stays as it was, in order.
     *
     * @param list<string>|null $names lower-case names; the defaults and the shop's own when null
     */
    public static function strip(string $url, ?array $names = null): string
    {
        if (!str_contains($url, '?') && !str_contains($url, '#')) {
            return $url;
        }
        $names ??= self::names();
        [$base, $fragment] = array_pad(explode('#', $url, 2), 2, null);
        [$path, $query] = array_pad(explode('?', $base, 2), 2, null);
        if ($query !== null) {
            $kept = self::keptParameters($query, $names);
            if ($kept !== $query) {
                $base = $kept === '' ? $path : $path . '?' . $kept;
            }
        }
        if ($fragment === null) {
            return $base;
        }
        if (str_contains($fragment, '?')) {
            // A single-page app's route with its own query: `#/order?key=…`.
            $kept = self::strip($fragment, $names);
        } else {
            $kept = str_contains($fragment, '=') ? self::keptParameters($fragment, $names) : $fragment;
        }
        if ($kept === $fragment) {
            return $base . '#' . $fragment;
        }
        return $kept === '' ? $base : $base . '#' . $kept;
    }

    /** @return list<string> the default names and the ones the shop added, lower case */
    private static function names(): array
    {
        $names = apply_filters('visitor_service_secret_url_parameters', self::PARAMETERS);
        if (!is_array($names)) {
            return self::PARAMETERS;
        }
        return array_values(array_unique(array_merge(self::PARAMETERS, array_map(
            static fn ($name): string => strtolower(trim((string) $name)),
            array_filter($names, 'is_scalar')
        ))));
    }

    /** @param list<string> $names */
    private static function keptParameters(string $query, array $names): string
    {
        $parts = explode('&', $query);
        $split = array_map([self::class, 'nameAndValue'], $parts);
        foreach ($split as [$name, $value]) {
            if ($name === 'action' && in_array(strtolower($value), self::PASSWORD_RESET_ACTIONS, true)) {
                $names[] = self::PASSWORD_RESET_LOGIN;
                break;
            }
        }
        $kept = [];
        foreach ($parts as $index => $part) {
            [$name, $value] = $split[$index];
            if (!in_array($name, $names, true) && stripos($value, self::ORDER_KEY_PREFIX) === false) {
                $kept[] = $part;
            }
        }
        return implode('&', $kept);
    }

    /** @return array{0: string, 1: string} the decoded, lower-case name and the decoded value */
    private static function nameAndValue(string $part): array
    {
        [$name, $value] = array_pad(explode('=', $part, 2), 2, '');
        return [strtolower(trim(urldecode($name))), urldecode($value)];
    }
}
