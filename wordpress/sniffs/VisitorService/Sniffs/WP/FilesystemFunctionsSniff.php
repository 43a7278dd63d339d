<?php

/**
 * PHP's file functions, which WordPress wants done through WP_Filesystem (as
 * WordPress.WP.AlternativeFunctions.file_system_operations_*). A socket written with fwrite() is
 * ignored on its line with a reason.
 *
 * @package VisitorService
 */

declare(strict_types=1);

namespace VisitorService\Sniffs\WP;

use PHP_CodeSniffer\Standards\Generic\Sniffs\PHP\ForbiddenFunctionsSniff;

final class FilesystemFunctionsSniff extends ForbiddenFunctionsSniff
{
    /** @var array<string, string|null> */
    public $forbiddenFunctions = [
        'fopen' => null, 'fwrite' => null, 'fputs' => null, 'fread' => null, 'fclose' => null,
        'file_put_contents' => null, 'readfile' => null, 'fsockopen' => null, 'pfsockopen' => null,
        'chmod' => null, 'chown' => null, 'chgrp' => null, 'touch' => null, 'mkdir' => null,
        'rmdir' => null, 'rename' => null, 'is_writable' => null, 'is_writeable' => null,
    ];
}
