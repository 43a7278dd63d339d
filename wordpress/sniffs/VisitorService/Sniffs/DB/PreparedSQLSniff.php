<?php

/**
 * SQL given to $wpdb->query(), get_var(), get_col(), get_row(), get_results() or prepare() is
 * written out (as WordPress.DB.PreparedSQL.NotPrepared): string literals, $wpdb's own properties
 * (table names such as {$wpdb->prefix}x or $wpdb->options), numbers, int and float casts, and a
 * $wpdb->prepare() call, whose own SQL is checked the same way. Any other variable, call or
 * constant in it is reported: a value goes in through a placeholder.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService\Sniffs\DB;

use PHP_CodeSniffer\Files\File;
use PHP_CodeSniffer\Sniffs\Sniff;
use PHP_CodeSniffer\Util\Tokens;
use VisitorService\Calls;

final class PreparedSQLSniff implements Sniff
{
    private const METHODS = ['query', 'get_var', 'get_col', 'get_row', 'get_results', 'prepare'];
    /** Tokens that cannot bring a value into the SQL. */
    private const LITERAL = [
        T_CONSTANT_ENCAPSED_STRING, T_STRING_CONCAT, T_OPEN_PARENTHESIS, T_CLOSE_PARENTHESIS,
        T_LNUMBER, T_DNUMBER, T_START_HEREDOC, T_END_HEREDOC, T_START_NOWDOC, T_NOWDOC, T_END_NOWDOC,
    ];
    private const NUMBER_CASTS = [T_INT_CAST, T_DOUBLE_CAST];
    private const NUMBER_FUNCTIONS = ['absint', 'intval', 'floatval'];

    public function register(): array
    {
        return [T_VARIABLE];
    }

    public function process(File $phpcsFile, $stackPtr): void
    {
        [$method, $opener] = Calls::wpdbMethod($phpcsFile, $stackPtr) ?? [null, null];
        if (!in_array($method, self::METHODS, true)) {
            return;
        }
        $sql = Calls::arguments($phpcsFile, $opener)[0] ?? null;
        if ($sql === null) {
            return;
        }
        $tokens = $phpcsFile->getTokens();
        for ($at = $sql[0]; $at <= $sql[1]; $at++) {
            $code = $tokens[$at]['code'];
            if (isset(Tokens::$emptyTokens[$code]) || in_array($code, self::LITERAL, true)) {
                continue;
            }
            if ($code === T_DOUBLE_QUOTED_STRING || $code === T_HEREDOC) {
                // Only $wpdb's properties may be interpolated: {$wpdb->prefix}, $wpdb->options.
                $rest = preg_replace('/\{?\$wpdb->\w+\}?/', '', $tokens[$at]['content']);
                if (preg_match('/(?<!\\\\)\$\{?[A-Za-z_]/', $rest) === 1) {
                    $this->report($phpcsFile, $at, $tokens[$at]['content']);
                }
                continue;
            }
            if ($code === T_VARIABLE && $tokens[$at]['content'] === '$wpdb') {
                $call = Calls::wpdbMethod($phpcsFile, $at);
                if ($call === null) {
                    $at = $phpcsFile->findNext(T_STRING, $at + 1); // a property: the site's table names
                    continue;
                }
                if ($call[0] === 'prepare') {
                    $at = $tokens[$call[1]]['parenthesis_closer']; // checked as a call of its own
                    continue;
                }
            }
            if (in_array($code, self::NUMBER_CASTS, true)) {
                $at = $this->endOfOperand($phpcsFile, $at, $sql[1]); // a number, whatever it was
                continue;
            }
            if (in_array(Calls::functionCalled($phpcsFile, $at), self::NUMBER_FUNCTIONS, true)) {
                $at = $tokens[Calls::opener($phpcsFile, $at)]['parenthesis_closer'];
                continue;
            }
            $this->report($phpcsFile, $at, $tokens[$at]['content']);
            $at = $this->endOfOperand($phpcsFile, $at, $sql[1]);
        }
    }

    /** Where the operand of `.` that holds $at ends (one report for `self::table()`, not three). */
    private function endOfOperand(File $file, int $at, int $end): int
    {
        $tokens = $file->getTokens();
        $depth = count($tokens[$at]['nested_parenthesis'] ?? []);
        for ($next = $at + 1; $next <= $end; $next++) {
            $outside = count($tokens[$next]['nested_parenthesis'] ?? []) <= $depth;
            if ($tokens[$next]['code'] === T_STRING_CONCAT && $outside) {
                return $next;
            }
        }
        return $end;
    }

    private function report(File $file, int $at, string $found): void
    {
        $file->addError('Use placeholders and $wpdb->prepare(); found %s', $at, 'NotPrepared', [trim($found)]);
    }
}
