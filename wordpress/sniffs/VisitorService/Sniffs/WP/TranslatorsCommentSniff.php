<?php

/**
 * A gettext call whose text has a placeholder needs a "translators:" comment where WordPress's
 * tools look for it (as WordPress.WP.I18n.MissingTranslatorsComment): ending on the line above
 * the line that holds the call's name, or just before the name on its line.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService\Sniffs\WP;

use PHP_CodeSniffer\Files\File;
use PHP_CodeSniffer\Sniffs\Sniff;
use PHP_CodeSniffer\Util\Tokens;
use VisitorService\Calls;

final class TranslatorsCommentSniff implements Sniff
{
    /** Each gettext function, with how many of its first arguments are texts. */
    private const GETTEXT = [
        '__' => 1, '_e' => 1, '_x' => 1, '_ex' => 1, 'esc_html__' => 1, 'esc_html_e' => 1,
        'esc_html_x' => 1, 'esc_attr__' => 1, 'esc_attr_e' => 1, 'esc_attr_x' => 1,
        '_n' => 2, '_nx' => 2, '_n_noop' => 2, '_nx_noop' => 2,
    ];
    /** A printf placeholder (`%%` is a literal percent sign and is removed first). */
    private const PLACEHOLDER = '/%(?:\d+\$)?[+-]?(?:[ 0]|\'.)?-?\d*(?:\.\d+)?[bcdeEfFgGosuxX]/';

    public function register(): array
    {
        return [T_STRING];
    }

    public function process(File $phpcsFile, $stackPtr): void
    {
        $name = Calls::functionCalled($phpcsFile, $stackPtr);
        if ($name === null || !isset(self::GETTEXT[$name])) {
            return;
        }
        $opener = Calls::opener($phpcsFile, $stackPtr);
        $texts = array_slice(Calls::arguments($phpcsFile, $opener), 0, self::GETTEXT[$name]);
        $tokens = $phpcsFile->getTokens();
        $placeholders = false;
        foreach ($texts as [$first, $last]) {
            if ($first === $last && $tokens[$first]['code'] === T_CONSTANT_ENCAPSED_STRING) {
                $text = str_replace('%%', '', substr($tokens[$first]['content'], 1, -1));
                $placeholders = $placeholders || preg_match(self::PLACEHOLDER, $text) === 1;
            }
        }
        if ($placeholders && !$this->hasTranslatorsComment($phpcsFile, $stackPtr)) {
            $phpcsFile->addError(
                'A call to %s() with placeholders needs a "translators:" comment on the line above the'
                    . ' line that holds %s( (where WordPress\'s tools look for it)',
                $stackPtr,
                'Missing',
                [$name, $name]
            );
        }
    }

    private function hasTranslatorsComment(File $file, int $call): bool
    {
        $tokens = $file->getTokens();
        $end = $file->findPrevious([T_COMMENT, T_DOC_COMMENT_CLOSE_TAG], $call - 1);
        if ($end === false) {
            return false;
        }
        $between = $file->findNext(T_WHITESPACE, $end + 1, $call, true);
        if ($tokens[$end]['line'] !== $tokens[$call]['line'] - 1 && $between !== false) {
            return false;
        }
        // A block comment is one token per line: read it from its first line.
        $start = $end;
        if ($tokens[$end]['code'] === T_DOC_COMMENT_CLOSE_TAG) {
            $start = $tokens[$end]['comment_opener'];
        } else {
            while (!preg_match('~^\s*(/\*|//|#)~', $tokens[$start]['content'])) {
                $previous = $file->findPrevious(T_WHITESPACE, $start - 1, null, true);
                if ($previous === false || $tokens[$previous]['code'] !== T_COMMENT) {
                    break;
                }
                $start = $previous;
            }
        }
        $text = '';
        for ($at = $start; $at <= $end; $at++) {
            $text .= $tokens[$at]['content'];
        }
        return preg_match('~^\s*(?:/\*+|//|#)[\s*]*translators:~i', $text) === 1;
    }
}
