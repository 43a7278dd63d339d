<?php

/**
 * Every direct $wpdb query is seen by a reviewer (as WordPress.DB.DirectDatabaseQuery): a
 * warning for the call (DirectQuery), for one whose function caches nothing (NoCaching), and
 * for SQL that changes the schema (SchemaChange). A query on the plugin's own table is ignored
 * on its line with the reason.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService\Sniffs\DB;

use PHP_CodeSniffer\Files\File;
use PHP_CodeSniffer\Sniffs\Sniff;
use PHP_CodeSniffer\Util\Tokens;
use VisitorService\Calls;

final class DirectDatabaseQuerySniff implements Sniff
{
    private const READS = ['get_var', 'get_col', 'get_row', 'get_results'];
    private const WRITES = ['query', 'update', 'delete', 'replace'];
    /** Not cached by anyone, so only DirectQuery applies. */
    private const INSERT = 'insert';
    private const CACHE_GET = ['wp_cache_get' => true, 'wp_cache_get_multiple' => true];
    private const CACHE_SET = ['wp_cache_set' => true, 'wp_cache_add' => true, 'wp_cache_set_multiple' => true];
    private const CACHE_DELETE = ['wp_cache_delete' => true, 'wp_cache_delete_multiple' => true,
        'wp_cache_flush_group' => true];

    public function register(): array
    {
        return [T_VARIABLE];
    }

    public function process(File $phpcsFile, $stackPtr): void
    {
        [$method, $opener] = Calls::wpdbMethod($phpcsFile, $stackPtr) ?? [null, null];
        $reads = in_array($method, self::READS, true);
        if (!$reads && !in_array($method, self::WRITES, true) && $method !== self::INSERT) {
            return;
        }
        $tokens = $phpcsFile->getTokens();
        $closer = $tokens[$opener]['parenthesis_closer'];
        for ($at = $opener; $at < $closer; $at++) {
            if (
                isset(Tokens::$textStringTokens[$tokens[$at]['code']])
                && preg_match('/\b(?:ALTER|CREATE|DROP)\b/i', $tokens[$at]['content']) === 1
            ) {
                $phpcsFile->addWarning('The query changes the database schema', $at, 'SchemaChange');
            }
        }
        $phpcsFile->addWarning('A direct database query: $wpdb->%s()', $stackPtr, 'DirectQuery', [$method]);
        if ($method === self::INSERT) {
            return;
        }
        [$from, $to] = Calls::scope($phpcsFile, $stackPtr);
        $cached = $reads
            ? Calls::callsAnyOf($phpcsFile, $from, $to, self::CACHE_GET)
                && Calls::callsAnyOf($phpcsFile, $from, $to, self::CACHE_SET)
            : Calls::callsAnyOf($phpcsFile, $from, $to, self::CACHE_DELETE);
        if (!$cached) {
            $phpcsFile->addWarning(
                'A direct database query whose function uses no object cache (%s)',
                $stackPtr,
                'NoCaching',
                [$reads ? 'wp_cache_get() and wp_cache_set()' : 'wp_cache_delete()']
            );
        }
    }
}
