<?php

/**
 * Product statements: the reference signer of docs/product-statements.md.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

defined('ABSPATH') || exit;

/**
 * Signs "a visitor viewed product P on page U at time T" with the key derived from the site API
 * key. A statement is single-use and expires, so one is made per page view by the never-cached
 * REST route, never printed into (cacheable) HTML.
 */
final class Statements
{
    public static function b64url(string $raw): string
    {
        return rtrim(strtr(base64_encode($raw), '+/', '-_'), '=');
    }

    public static function key(string $apiKey): string
    {
        return hash_hkdf(
            'sha256',
            $apiKey,
            32,
            'product-statement-signing',
            'visitor-service/product-statement/v1'
        );
    }

    public static function sign(
        string $apiKey,
        string $productId,
        string $pageUrl,
        int $issuedAt,
        ?string $nonce = null
    ): string {
        foreach ([[$productId, 128], [$pageUrl, 4096]] as [$value, $maxChars]) {
            $chars = preg_match_all('/./su', $value);
            if ($chars === false || $chars < 1 || $chars > $maxChars || strpos($value, "\n") !== false) {
                throw new \InvalidArgumentException('productId/pageUrl: 1..max characters, no line feed');
            }
        }
        if ($issuedAt < 0) {
            throw new \InvalidArgumentException('issuedAt must be a non-negative integer');
        }
        $nonce = $nonce ?? self::b64url(random_bytes(16));
        $canonical = "v1\n" . $productId . "\n" . $pageUrl . "\n" . $issuedAt . "\n" . $nonce;
        $mac = hash_hmac('sha256', $canonical, self::key($apiKey), true);
        // phpcs:ignore WordPress.WP.AlternativeFunctions.json_encode_json_encode, Generic.PHP.ForbiddenFunctions -- the reference signer of docs/product-statements.md runs without WordPress too; JSON_THROW_ON_ERROR fails loudly
        $payload = json_encode(
            ['n' => $nonce, 'p' => $productId, 't' => $issuedAt, 'u' => $pageUrl],
            JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR
        );
        return 'v1.' . self::b64url($payload) . '.' . self::b64url($mac);
    }
}
