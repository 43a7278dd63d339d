<?php

/**
 * A script or style enqueued or registered with a source names its version (as
 * WordPress.WP.EnqueuedResourceParameters.MissingVersion): without one, browsers may keep an old
 * copy. `null` and `false` name none (`false` puts WordPress's own version in the URL).
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService\Sniffs\WP;

use PHP_CodeSniffer\Files\File;
use PHP_CodeSniffer\Sniffs\Sniff;
use VisitorService\Calls;

final class EnqueuedResourceParametersSniff implements Sniff
{
    private const FUNCTIONS = ['wp_enqueue_script', 'wp_register_script', 'wp_enqueue_style', 'wp_register_style'];
    /** Positions (from 0) of the source and the version. */
    private const SOURCE = 1;
    private const VERSION = 3;

    public function register(): array
    {
        return [T_STRING];
    }

    public function process(File $phpcsFile, $stackPtr): void
    {
        $name = Calls::functionCalled($phpcsFile, $stackPtr);
        if ($name === null || !in_array($name, self::FUNCTIONS, true)) {
            return;
        }
        $arguments = $this->byName($phpcsFile, Calls::arguments($phpcsFile, Calls::opener($phpcsFile, $stackPtr)));
        $source = $arguments[self::SOURCE] ?? $arguments['src'] ?? null;
        if ($source === null || in_array($source, ['false', "''", '""'], true)) {
            return; // registers a handle without a file of its own
        }
        $version = strtolower($arguments[self::VERSION] ?? $arguments['ver'] ?? 'null');
        if (in_array($version, ['null', 'false'], true)) {
            $phpcsFile->addWarning(
                'Set the version in the call to %s(): without one, browsers may keep an old copy',
                $stackPtr,
                'MissingVersion',
                [$name]
            );
        }
    }

    /**
     * Each argument's code, by position and, when named (`ver: '1.0'`), by name.
     *
     * @param list<array{0: int, 1: int}> $arguments
     * @return array<int|string, string>
     */
    private function byName(File $file, array $arguments): array
    {
        $tokens = $file->getTokens();
        $found = [];
        foreach ($arguments as $position => $argument) {
            if ($tokens[$argument[0]]['code'] === T_PARAM_NAME) {
                $value = $file->findNext(T_COLON, $argument[0]) + 1;
                $found[$tokens[$argument[0]]['content']] = Calls::text($file, [$value, $argument[1]]);
            } else {
                $found[$position] = Calls::text($file, $argument);
            }
        }
        return $found;
    }
}
