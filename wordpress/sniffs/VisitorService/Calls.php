<?php

/**
 * What the project's sniffs need to know about a function or $wpdb call: its name and arguments,
 * and the function it stands in. PHP_CodeSniffer 3.7 has none of it (PHPCSUtils is not packaged).
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService;

use PHP_CodeSniffer\Files\File;
use PHP_CodeSniffer\Util\Tokens;

final class Calls
{
    /** What may stand before a name that is not a call of a plain function. */
    private const NOT_A_FUNCTION = [
        T_OBJECT_OPERATOR, T_NULLSAFE_OBJECT_OPERATOR, T_DOUBLE_COLON, T_FUNCTION, T_NEW, T_CONST,
    ];

    /** Where the arguments of the call at $name begin: its `(`, or null when $name is no call. */
    public static function opener(File $file, int $name): ?int
    {
        $tokens = $file->getTokens();
        $next = $file->findNext(Tokens::$emptyTokens, $name + 1, null, true);
        if (
            $next === false || $tokens[$next]['code'] !== T_OPEN_PARENTHESIS
            || !isset($tokens[$next]['parenthesis_closer'])
        ) {
            return null;
        }
        return $next;
    }

    /** The lower-case name of the plain function (not method) called at $name, or null. */
    public static function functionCalled(File $file, int $name): ?string
    {
        $tokens = $file->getTokens();
        if ($tokens[$name]['code'] !== T_STRING || self::opener($file, $name) === null) {
            return null;
        }
        $before = $file->findPrevious(Tokens::$emptyTokens, $name - 1, null, true);
        if ($before !== false && in_array($tokens[$before]['code'], self::NOT_A_FUNCTION, true)) {
            return null;
        }
        return strtolower(ltrim($tokens[$name]['content'], '\\'));
    }

    /** The lower-case name of the plain function whose `(` is $opener, or null. */
    public static function functionOf(File $file, int $opener): ?string
    {
        $name = $file->findPrevious(Tokens::$emptyTokens, $opener - 1, null, true);
        return $name === false ? null : self::functionCalled($file, $name);
    }

    /**
     * The $wpdb method called at $variable (`$wpdb->name(`): its lower-case name and `(`.
     *
     * @return array{0: string, 1: int}|null
     */
    public static function wpdbMethod(File $file, int $variable): ?array
    {
        $tokens = $file->getTokens();
        if ($tokens[$variable]['content'] !== '$wpdb') {
            return null;
        }
        $arrow = $file->findNext(Tokens::$emptyTokens, $variable + 1, null, true);
        $arrows = [T_OBJECT_OPERATOR, T_NULLSAFE_OBJECT_OPERATOR];
        if ($arrow === false || !in_array($tokens[$arrow]['code'], $arrows, true)) {
            return null;
        }
        $name = $file->findNext(Tokens::$emptyTokens, $arrow + 1, null, true);
        if ($name === false || $tokens[$name]['code'] !== T_STRING) {
            return null;
        }
        $opener = self::opener($file, $name);
        return $opener === null ? null : [strtolower($tokens[$name]['content']), $opener];
    }

    /**
     * The arguments of the call whose `(` is $opener (or the items of the array whose `[` or
     * `array(` it is): first and last token of each, spaces and comments left out.
     *
     * @return list<array{0: int, 1: int}>
     */
    public static function arguments(File $file, int $opener): array
    {
        $tokens = $file->getTokens();
        $closer = $tokens[$opener]['parenthesis_closer'] ?? $tokens[$opener]['bracket_closer'];
        $arguments = [];
        $start = null;
        for ($at = $opener + 1; $at < $closer; $at++) {
            $code = $tokens[$at]['code'];
            if ($code === T_COMMA) {
                if ($start !== null) {
                    $arguments[] = [$start, $file->findPrevious(Tokens::$emptyTokens, $at - 1, null, true)];
                }
                $start = null;
                continue;
            }
            if ($start === null && !isset(Tokens::$emptyTokens[$code])) {
                $start = $at;
            }
            // Commas inside nested parentheses, brackets and braces belong to something else.
            if (isset($tokens[$at]['parenthesis_closer']) && $tokens[$at]['parenthesis_opener'] === $at) {
                $at = $tokens[$at]['parenthesis_closer'];
            } elseif (isset($tokens[$at]['bracket_closer']) && $tokens[$at]['bracket_opener'] === $at) {
                $at = $tokens[$at]['bracket_closer'];
            } elseif ($code === T_OPEN_CURLY_BRACKET && isset($tokens[$at]['scope_closer'])) {
                $at = $tokens[$at]['scope_closer'];
            }
        }
        if ($start !== null) {
            $arguments[] = [$start, $file->findPrevious(Tokens::$emptyTokens, $closer - 1, null, true)];
        }
        return $arguments;
    }

    /** The code of an argument as written, comments and spaces left out. */
    public static function text(File $file, array $argument): string
    {
        $tokens = $file->getTokens();
        $text = '';
        for ($at = $argument[0]; $at <= $argument[1]; $at++) {
            if (!isset(Tokens::$emptyTokens[$tokens[$at]['code']])) {
                $text .= $tokens[$at]['content'];
            }
        }
        return $text;
    }

    /**
     * The body of the function or closure $at stands in, as its first and last token, or the
     * whole file outside any function.
     *
     * @return array{0: int, 1: int}
     */
    public static function scope(File $file, int $at): array
    {
        $tokens = $file->getTokens();
        foreach (array_reverse($tokens[$at]['conditions'], true) as $owner => $code) {
            if (in_array($code, [T_FUNCTION, T_CLOSURE], true) && isset($tokens[$owner]['scope_opener'])) {
                return [$tokens[$owner]['scope_opener'], $tokens[$owner]['scope_closer']];
            }
        }
        return [0, count($tokens) - 1];
    }

    /**
     * Whether one of $functions is called between $from and $to.
     *
     * @param array<string, mixed> $functions keyed by lower-case name
     */
    public static function callsAnyOf(File $file, int $from, int $to, array $functions): bool
    {
        $tokens = $file->getTokens();
        for ($at = $from; $at <= $to; $at++) {
            if (
                $tokens[$at]['code'] === T_STRING && isset($functions[strtolower($tokens[$at]['content'])])
                && self::functionCalled($file, $at) !== null
            ) {
                return true;
            }
        }
        return false;
    }
}
