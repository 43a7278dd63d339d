<?php

/**
 * $wpdb->prepare() gets as many values as its SQL has placeholders (as
 * WordPress.DB.PreparedSQLPlaceholders.ReplacementsWrongNumber). Counted only where the SQL is
 * written out (literals and $wpdb's properties) and the values are not spread from an array.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService\Sniffs\DB;

use PHP_CodeSniffer\Files\File;
use PHP_CodeSniffer\Sniffs\Sniff;
use PHP_CodeSniffer\Util\Tokens;
use VisitorService\Calls;

final class PreparedSQLPlaceholdersSniff implements Sniff
{
    /** wpdb::prepare()'s placeholders, optionally numbered (`%1$s`); `%%` is a percent sign. */
    private const PLACEHOLDER = '/%(?:(\d+)\$)?[dsfFi]/';

    public function register(): array
    {
        return [T_VARIABLE];
    }

    public function process(File $phpcsFile, $stackPtr): void
    {
        [$method, $opener] = Calls::wpdbMethod($phpcsFile, $stackPtr) ?? [null, null];
        if ($method !== 'prepare') {
            return;
        }
        $arguments = Calls::arguments($phpcsFile, $opener);
        $sql = $arguments === [] ? null : $this->writtenSql($phpcsFile, $arguments[0]);
        $values = array_slice($arguments, 1);
        $tokens = $phpcsFile->getTokens();
        foreach ($values as [$first]) {
            if ($tokens[$first]['code'] === T_ELLIPSIS) {
                return; // spread: counted only when it runs
            }
        }
        if ($sql === null) {
            return;
        }
        $expected = $this->placeholders($sql);
        $given = count($values);
        if ($given === 1 && $expected !== 1) {
            // One value may be the array of all of them: count it when it is written out.
            $first = $values[0][0];
            if ($tokens[$first]['code'] === T_OPEN_SHORT_ARRAY || $tokens[$first]['code'] === T_ARRAY) {
                $opens = $tokens[$first]['code'] === T_ARRAY ? Calls::opener($phpcsFile, $first) : $first;
                $given = count(Calls::arguments($phpcsFile, $opens));
            } elseif ($tokens[$first]['code'] === T_VARIABLE && $values[0][0] === $values[0][1]) {
                return;
            }
        }
        if ($given !== $expected) {
            $phpcsFile->addWarning(
                'Incorrect number of replacements passed to $wpdb->prepare(): %s for %s placeholders',
                $stackPtr,
                'ReplacementsWrongNumber',
                [$given, $expected]
            );
        }
    }

    /** The SQL text when it is written out, else null. */
    private function writtenSql(File $file, array $argument): ?string
    {
        $tokens = $file->getTokens();
        $sql = '';
        for ($at = $argument[0]; $at <= $argument[1]; $at++) {
            $code = $tokens[$at]['code'];
            if (isset(Tokens::$emptyTokens[$code]) || $code === T_STRING_CONCAT) {
                continue;
            }
            if ($code === T_CONSTANT_ENCAPSED_STRING || $code === T_DOUBLE_QUOTED_STRING) {
                $sql .= substr($tokens[$at]['content'], 1, -1);
            } elseif (
                $code === T_VARIABLE && $tokens[$at]['content'] === '$wpdb'
                && Calls::wpdbMethod($file, $at) === null
            ) {
                $at = $file->findNext(T_STRING, $at + 1);
            } else {
                return null;
            }
        }
        return $sql;
    }

    private function placeholders(string $sql): int
    {
        preg_match_all(self::PLACEHOLDER, str_replace('%%', '', $sql), $found);
        $numbered = array_filter($found[1]);
        return $numbered === [] ? count($found[0]) : max(array_map('intval', $numbered));
    }
}
