<?php

/**
 * A function that reads $_POST, $_FILES, $_GET or $_REQUEST also checks a nonce (as
 * WordPress.Security.NonceVerification): wp_verify_nonce(), check_admin_referer() or
 * check_ajax_referer() anywhere in it. Without one, a $_POST or $_FILES read is an error
 * (Missing), a $_GET or $_REQUEST read a warning (Recommended): a read-only flag may be ignored
 * on its line with the reason. A test with isset() is a read too.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService\Sniffs\Security;

use PHP_CodeSniffer\Files\File;
use PHP_CodeSniffer\Sniffs\Sniff;
use VisitorService\Calls;

final class NonceVerificationSniff implements Sniff
{
    /** Each form superglobal, and whether a read without a nonce is an error. */
    private const FORM = ['$_POST' => true, '$_FILES' => true, '$_GET' => false, '$_REQUEST' => false];
    private const NONCE_CHECKS = [
        'wp_verify_nonce' => true, 'check_admin_referer' => true, 'check_ajax_referer' => true,
    ];

    public function register(): array
    {
        return [T_VARIABLE];
    }

    public function process(File $phpcsFile, $stackPtr): void
    {
        $read = $phpcsFile->getTokens()[$stackPtr]['content'];
        if (!isset(self::FORM[$read])) {
            return;
        }
        [$from, $to] = Calls::scope($phpcsFile, $stackPtr);
        if (Calls::callsAnyOf($phpcsFile, $from, $to, self::NONCE_CHECKS)) {
            return;
        }
        $message = 'Processing form data (%s) without nonce verification in the same function';
        if (self::FORM[$read]) {
            $phpcsFile->addError($message, $stackPtr, 'Missing', [$read]);
        } else {
            $phpcsFile->addWarning($message, $stackPtr, 'Recommended', [$read]);
        }
    }
}
