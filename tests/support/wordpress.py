"""A real WordPress for the plugin's tests: Debian's `wordpress`, a private MariaDB, `php -S`.

Everything runs on loopback under one temporary directory and is stopped at the end:
MariaDB on its own port and socket, a private copy of WordPress with its own wp-config.php,
`php -S` with workers behind a small full-page cache (tests/wordpress/page_cache.py), which is
the shop's public address. The packages come from Debian (`make wordpress-deps`); when they are
missing the run fails loudly rather than skipping.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "wordpress" / "visitor-service"
FIXTURES = ROOT / "tests" / "wordpress"
DEBIAN_WORDPRESS = Path("/usr/share/wordpress")
#: What each needed Debian package provides: a file, or a PHP extension.
NEEDED = {"wordpress": DEBIAN_WORDPRESS / "wp-load.php",
          "wordpress-theme-twentytwentythree":
              DEBIAN_WORDPRESS / "wp-content/themes/twentytwentythree",
          "mariadb-server": Path("/usr/sbin/mariadbd"), "php-cli": Path("/usr/bin/php"),
          "php-mysql": "mysqli", "php-curl": "curl", "php-xml": "dom", "php-mbstring": "mbstring",
          # Tools → Export Personal Data builds its archive with ZipArchive.
          "php-zip": "zip"}
ADMIN = ("admin", "admin-password-1")
CUSTOMER = ("customer", "customer-password-1")

WP_CONFIG = """<?php
define('DB_NAME', 'wordpress');
define('DB_USER', 'wp');
define('DB_PASSWORD', '{db_password}');
define('DB_HOST', '127.0.0.1:{db_port}');
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');
{salts}
$table_prefix = 'wp_';
define('WP_HOME', '{home}');
define('WP_SITEURL', '{home}');
define('DISABLE_WP_CRON', true);
define('WP_DEBUG', false);
define('WP_DEBUG_DISPLAY', false);
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_HTTP_BLOCK_EXTERNAL', true);
define('WP_ACCESSIBLE_HOSTS', '127.0.0.1,localhost');
define('FS_METHOD', 'direct');
if (!defined('ABSPATH')) {{
    define('ABSPATH', __DIR__ . '/');
}}
require_once ABSPATH . 'wp-settings.php';
"""

ROUTER = """<?php
// php -S router: real files as they are, everything else to WordPress's index.php.
$path = urldecode((string) parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH));
$file = $_SERVER['DOCUMENT_ROOT'] . $path;
if ($path !== '/' && file_exists($file)) {
    if (!is_dir($file) || file_exists(rtrim($file, '/') . '/index.php')) {
        return false;
    }
}
$_SERVER['SCRIPT_NAME'] = '/index.php';
$_SERVER['SCRIPT_FILENAME'] = $_SERVER['DOCUMENT_ROOT'] . '/index.php';
require $_SERVER['DOCUMENT_ROOT'] . '/index.php';
"""

# Runs PHP code inside WordPress from the command line; the code's return value is printed as
# JSON. HTTP_HOST is set so that WordPress builds the same URLs as for a browser.
WP_EVAL = """<?php
$_SERVER['HTTP_HOST'] = $argv[2];
$_SERVER['REQUEST_URI'] = '/';
$_SERVER['SERVER_NAME'] = '127.0.0.1';
require $argv[1] . '/wp-load.php';
require_once ABSPATH . 'wp-admin/includes/plugin.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
$code = stream_get_contents(STDIN);
$result = (function () use ($code) { return eval($code); })();
echo "\\n@@RESULT@@" . json_encode($result);
"""

INSTALL = """<?php
define('WP_INSTALLING', true);
$_SERVER['HTTP_HOST'] = $argv[2];
require $argv[1] . '/wp-load.php';
require_once ABSPATH . 'wp-admin/includes/upgrade.php';
wp_install('Test shop', '{admin}', 'admin@shop.example', true, '', '{admin_password}');
"""


def _missing_packages() -> list[str]:
    modules: list[str] = []
    if Path("/usr/bin/php").exists():
        modules = subprocess.run(["php", "-m"], capture_output=True, text=True,
                                 check=False).stdout.split()
    return [package for package, probe in NEEDED.items()
            if not (probe.exists() if isinstance(probe, Path) else probe in modules)]


def _wait_for_port(port: int, process: subprocess.Popen[bytes], what: str, within: float = 30
                   ) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {within} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a process started in its own session, and its children (php -S workers)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@dataclass
class WordPress:
    """A running WordPress: its public (cached) URL, its files, and PHP run inside it."""

    url: str
    backend_url: str
    site: Path
    root: Path
    customer_id: int = 0
    product_id: int = 0
    product_url: str = ""
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: How mariadbd was started (the first of `processes`), to start it again.
    database_command: list[str] = field(default_factory=list)
    database_port: int = 0

    def restart_database_if_it_died(self) -> bool:
        """Start mariadbd again on its data if it has stopped: Debian's mariadbd has been seen to
        segfault under a loaded CI run (the kernel's log, CI of b5a39ee), after which this
        process's every later WordPress test failed on "Database Error". True if restarted."""
        if not self.database_command or self.processes[0].poll() is None:
            return False
        with open(self.root / "mariadb.log", "ab") as db_log:
            self.processes[0] = subprocess.Popen(
                self.database_command, stdout=db_log, stderr=subprocess.STDOUT,
                start_new_session=True)
        _wait_for_port(self.database_port, self.processes[0], "mariadbd")
        return True

    @property
    def host(self) -> str:
        return self.url.split("://", 1)[1]

    def php_sync(self, code: str) -> Any:
        """Run PHP inside WordPress (only for code that makes no call to the service)."""
        done = subprocess.run(["php", str(self.root / "wp-eval.php"), str(self.site), self.host],
                              input=code.encode(), capture_output=True, check=False, timeout=60)
        return _result(done.returncode, done.stdout, done.stderr, code)

    async def php(self, code: str) -> Any:
        """Run PHP inside WordPress without blocking the event loop (the service runs in it)."""
        process = await asyncio.create_subprocess_exec(
            "php", str(self.root / "wp-eval.php"), str(self.site), self.host,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(process.communicate(code.encode()), 60)
        return _result(process.returncode or 0, stdout, stderr, code)

    def log(self) -> str:
        """PHP's own error log of the web server."""
        path = self.root / "php-errors.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _result(code: int, stdout: bytes, stderr: bytes, source: str) -> Any:
    text = stdout.decode(errors="replace")
    if code != 0 or "@@RESULT@@" not in text:
        raise RuntimeError(f"PHP failed ({code}) running:\n{source}\n{text}\n{stderr.decode()}")
    return json.loads(text.rsplit("@@RESULT@@", 1)[1])


def _run(command: list[str], **kwargs: Any) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}\n{done.stderr}")


@contextmanager
def running_wordpress(root: Path) -> Iterator[WordPress]:
    """Provision and start WordPress under root; stop everything on exit."""
    missing = _missing_packages()
    if missing:
        raise RuntimeError("Debian packages missing for the WordPress tests: "
                           f"{' '.join(missing)} (run `make wordpress-deps`)")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        yield _start(root, processes)
    finally:
        for process in reversed(processes):
            _stop(process)


def _start(root: Path, processes: list[subprocess.Popen[bytes]]) -> WordPress:
    data = root / "db"
    db_port, php_port, public_port = free_port(), free_port(), free_port()
    sock = data / "mysql.sock"
    _run(["mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={data}",
          "--auth-root-authentication-method=normal", "--skip-test-db"])
    db_log = open(root / "mariadb.log", "wb")  # noqa: SIM115 - closed with the process
    database = ["mariadbd", "--no-defaults", "--user=root", f"--datadir={data}",
                f"--socket={sock}", f"--port={db_port}", "--bind-address=127.0.0.1",
                "--skip-log-bin", "--innodb-buffer-pool-size=32M",
                "--innodb-flush-log-at-trx-commit=0"]
    processes.append(subprocess.Popen(
        database, stdout=db_log, stderr=subprocess.STDOUT, start_new_session=True))
    db_log.close()
    _wait_for_port(db_port, processes[-1], "mariadbd")
    db_password = secrets.token_hex(12)
    _run(["mariadb", "--no-defaults", f"--socket={sock}", "-uroot", "-e",
          "CREATE DATABASE wordpress; "
          f"CREATE USER 'wp'@'127.0.0.1' IDENTIFIED BY '{db_password}'; "
          "GRANT ALL ON wordpress.* TO 'wp'@'127.0.0.1';"])

    site = root / "site"
    shutil.copytree(DEBIAN_WORDPRESS, site, symlinks=False)
    (site / "wp-config.php").unlink(missing_ok=True)
    home = f"http://127.0.0.1:{public_port}"
    salts = "\n".join(f"define('{name}', '{secrets.token_hex(32)}');" for name in (
        "AUTH_KEY", "SECURE_AUTH_KEY", "LOGGED_IN_KEY", "NONCE_KEY", "AUTH_SALT",
        "SECURE_AUTH_SALT", "LOGGED_IN_SALT", "NONCE_SALT"))
    (site / "wp-config.php").write_text(WP_CONFIG.format(
        db_password=db_password, db_port=db_port, salts=salts, home=home))
    content = site / "wp-content"
    shutil.copytree(FIXTURES / "mu-plugins", content / "mu-plugins")
    shutil.copytree(FIXTURES / "theme" / "visitor-service-test",
                    content / "themes" / "visitor-service-test")
    shutil.copytree(PLUGIN, content / "plugins" / "visitor-service")
    (root / "router.php").write_text(ROUTER)
    (root / "wp-eval.php").write_text(WP_EVAL)
    (root / "install.php").write_text(INSTALL.format(admin=ADMIN[0], admin_password=ADMIN[1]))
    host = f"127.0.0.1:{public_port}"
    _run(["php", str(root / "install.php"), str(site), host])

    wordpress = WordPress(url=home, backend_url=f"http://127.0.0.1:{php_port}", site=site,
                          root=root, processes=processes, database_command=database,
                          database_port=db_port)
    setup = wordpress.php_sync(f"""
        global $wp_rewrite;
        $wp_rewrite->set_permalink_structure('/%postname%/');
        switch_theme('visitor-service-test');
        $customer = wp_insert_user(['user_login' => '{CUSTOMER[0]}', 'user_pass' => '{CUSTOMER[1]}',
            'user_email' => 'customer@shop.example', 'role' => 'subscriber',
            'first_name' => 'Carla', 'show_admin_bar_front' => 'false']);
        update_user_meta(1, 'show_admin_bar_front', 'false');
        $product = wp_insert_post(['post_type' => 'product', 'post_status' => 'publish',
            'post_title' => 'Blue mug', 'post_name' => 'blue-mug', 'post_content' => 'A mug.']);
        update_post_meta($product, '_price', '12.5');
        $result = activate_plugin('visitor-service/visitor-service.php');
        if (is_wp_error($result)) {{ throw new RuntimeException($result->get_error_message()); }}
        flush_rewrite_rules(true);
        return ['customer' => $customer, 'product' => $product];
    """)
    wordpress.customer_id = int(setup["customer"])
    wordpress.product_id = int(setup["product"])
    # A fresh process: the product's permalink follows the structure set above.
    wordpress.product_url = wordpress.php_sync(f"return get_permalink({wordpress.product_id});")

    env = {**os.environ, "PHP_CLI_SERVER_WORKERS": "4"}
    php_log = open(root / "php-server.log", "wb")  # noqa: SIM115 - closed with the process
    processes.append(subprocess.Popen(
        ["php", "-d", "display_errors=0", "-d", "log_errors=1",
         "-d", f"error_log={root / 'php-errors.log'}", "-d", "memory_limit=256M",
         "-d", "opcache.enable_cli=1",  # as a production PHP would run WordPress
         "-S", f"127.0.0.1:{php_port}", "-t", str(site), str(root / "router.php")],
        stdout=php_log, stderr=subprocess.STDOUT, env=env, start_new_session=True))
    php_log.close()
    _wait_for_port(php_port, processes[-1], "php -S")
    cache_log = open(root / "page-cache.log", "wb")  # noqa: SIM115 - closed with the process
    processes.append(subprocess.Popen(
        [sys.executable, str(FIXTURES / "page_cache.py"), str(public_port), str(php_port)],
        stdout=cache_log, stderr=subprocess.STDOUT, start_new_session=True))
    cache_log.close()
    _wait_for_port(public_port, processes[-1], "the page cache")
    return wordpress
