<?php

/**
 * Debugging functions that should not ship (as WordPress.PHP.DevelopmentFunctions): they print,
 * log or reveal paths. Where one is the code's purpose, it is ignored on its line with a reason.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService\Sniffs\PHP;

use PHP_CodeSniffer\Standards\Generic\Sniffs\PHP\ForbiddenFunctionsSniff;

final class DevelopmentFunctionsSniff extends ForbiddenFunctionsSniff
{
    /** @var array<string, string|null> */
    public $forbiddenFunctions = [
        'error_log' => null, 'var_dump' => null, 'var_export' => null, 'print_r' => null,
        'trigger_error' => null, 'set_error_handler' => null, 'debug_backtrace' => null,
        'debug_print_backtrace' => null, 'wp_debug_backtrace_summary' => null,
        'error_reporting' => null, 'phpinfo' => null,
    ];

    /** A warning, as WordPress's: such a call may have a reason. */
    public $error = false;
}
