<?php

/**
 * A value read from $_GET, $_POST, $_REQUEST, $_COOKIE or $_SERVER goes straight into
 * wp_unslash() and that into a sanitizer (as WordPress.Security.ValidatedSanitizedInput):
 * WordPress adds slashes to all of them, and none is what the code may assume. A read inside
 * isset() or empty() is only a test; an int, float or bool cast, absint(), intval() and the like
 * need no unslashing. Stricter than WordPress's rule: a comparison is no exception.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService\Sniffs\Security;

use PHP_CodeSniffer\Files\File;
use PHP_CodeSniffer\Sniffs\Sniff;
use PHP_CodeSniffer\Util\Tokens;
use VisitorService\Calls;

final class ValidatedSanitizedInputSniff implements Sniff
{
    private const INPUT = ['$_GET', '$_POST', '$_REQUEST', '$_COOKIE', '$_SERVER'];
    private const UNSLASH = ['wp_unslash', 'stripslashes_deep'];
    /** Sanitizers whose answer holds no slash that matters: a number, a key, a yes or no. */
    private const SANITIZE_WITHOUT_UNSLASH = ['absint', 'intval', 'floatval', 'boolval', 'sanitize_key', 'count'];
    private const SANITIZE = [
        'sanitize_text_field', 'sanitize_textarea_field', 'sanitize_email', 'sanitize_file_name',
        'sanitize_title', 'sanitize_user', 'sanitize_url', 'esc_url_raw', 'sanitize_hex_color',
        'sanitize_mime_type', 'wp_kses', 'wp_kses_post', 'wp_kses_data', 'wp_strip_all_tags',
        'wp_parse_id_list', 'is_email', 'hash_equals',
    ];
    private const CASTS = [T_INT_CAST, T_DOUBLE_CAST, T_BOOL_CAST];
    /** Where a superglobal is not read: tested, unset or written. */
    private const NOT_READ = [T_ISSET, T_EMPTY, T_UNSET];

    public function register(): array
    {
        return [T_VARIABLE];
    }

    public function process(File $phpcsFile, $stackPtr): void
    {
        $tokens = $phpcsFile->getTokens();
        if (
            !in_array($tokens[$stackPtr]['content'], self::INPUT, true)
            || $this->notRead($phpcsFile, $stackPtr)
        ) {
            return;
        }
        $before = $phpcsFile->findPrevious(Tokens::$emptyTokens, $stackPtr - 1, null, true);
        if (in_array($tokens[$before]['code'], self::CASTS, true)) {
            return;
        }
        $inner = $this->callAround($phpcsFile, $stackPtr);
        if (in_array($inner[0], self::SANITIZE_WITHOUT_UNSLASH, true)) {
            return;
        }
        $unslashed = in_array($inner[0], self::UNSLASH, true);
        $sanitizer = $unslashed ? $this->callAround($phpcsFile, $inner[1])[0] : $inner[0];
        $sanitized = in_array($sanitizer, self::SANITIZE, true)
            || in_array($sanitizer, self::SANITIZE_WITHOUT_UNSLASH, true);
        $read = $tokens[$stackPtr]['content'];
        if (!$unslashed) {
            $phpcsFile->addWarning('%s is not unslashed: use wp_unslash()', $stackPtr, 'MissingUnslash', [$read]);
        }
        if (!$sanitized) {
            $phpcsFile->addWarning(
                '%s is not sanitized: wrap wp_unslash() in a sanitizer such as sanitize_text_field()',
                $stackPtr,
                'InputNotSanitized',
                [$read]
            );
        }
    }

    /**
     * The function whose argument $at is (a cast may stand between), and its `(`.
     *
     * @return array{0: string|null, 1: int}
     */
    private function callAround(File $file, int $at): array
    {
        $tokens = $file->getTokens();
        $parentheses = $tokens[$at]['nested_parenthesis'] ?? [];
        if ($parentheses === []) {
            return [null, $at];
        }
        $opener = array_key_last($parentheses);
        return [Calls::functionOf($file, $opener), $opener];
    }

    private function notRead(File $file, int $at): bool
    {
        $tokens = $file->getTokens();
        foreach (array_keys($tokens[$at]['nested_parenthesis'] ?? []) as $opener) {
            $keyword = $file->findPrevious(Tokens::$emptyTokens, $opener - 1, null, true);
            if ($keyword !== false && in_array($tokens[$keyword]['code'], self::NOT_READ, true)) {
                return true;
            }
        }
        // Written: `$_GET['x'] = ...` (past its keys).
        $next = $file->findNext(Tokens::$emptyTokens, $at + 1, null, true);
        while ($next !== false && $tokens[$next]['code'] === T_OPEN_SQUARE_BRACKET) {
            $next = $file->findNext(Tokens::$emptyTokens, $tokens[$next]['bracket_closer'] + 1, null, true);
        }
        return $next !== false && $tokens[$next]['code'] !== T_DOUBLE_ARROW
            && isset(Tokens::$assignmentTokens[$tokens[$next]['code']]);
    }
}
