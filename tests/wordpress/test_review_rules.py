"""The WordPress.org review rules the plugin must meet (issues 33 and 40), checked by our own
tests: the directory's checker (Plugin Check, WPCS) cannot be installed from the registries we
may use.

What Plugin Check reported (SQL not prepared, input not unslashed and sanitized, no nonce,
translators comments out of place, functions WordPress replaces, direct queries, no script
version) is checked by PHP_CodeSniffer with our own sniffs (wordpress/sniffs/VisitorService, in
wordpress/phpcs.xml): each is shown to catch a planted bad case and pass a good one, and the
plugin passes them all. The rest reads the plugin's PHP through PHP's own tokenizer (`php`, as
the WordPress tests need it): every file starts with the ABSPATH guard; no `<script` is echoed
(scripts are enqueued); what a person reads (echoed text, REST and error messages) goes through
a translation function; the .pot holds exactly the plugin's strings, each format string with a
translators comment where GNU xgettext sees it; readme.txt has what the directory asks.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.support.wordpress import PLUGIN

PHP_FILES = sorted(PLUGIN.rglob("*.php"))
TRANSLATE = {"__", "_e", "_n", "_x", "_nx", "esc_html__", "esc_html_e", "esc_attr__", "esc_attr_e",
             "esc_html_x", "esc_attr_x"}
RULESET = PLUGIN.parent / "phpcs.xml"
TOKENS = ("echo json_encode(array_map(fn ($t) => is_array($t) ? [token_name($t[0]), $t[1]]"
          " : [$t, $t], token_get_all(file_get_contents($argv[1]))));")
SKIP = {"T_WHITESPACE", "T_COMMENT", "T_DOC_COMMENT"}


@cache
def tokens(path: Path) -> tuple[tuple[str, str], ...]:
    """The file's tokens (kind, text), without whitespace and comments."""
    done = subprocess.run(["php", "-r", TOKENS, str(path)], capture_output=True, text=True,
                          check=True)
    return tuple((kind, text) for kind, text in json.loads(done.stdout) if kind not in SKIP)


def literal(text: str) -> str:
    """The value of a PHP single- or double-quoted string without interpolation."""
    body = text[1:-1]
    if text[0] == "'":
        return body.replace("\\'", "'").replace("\\\\", "\\")
    return body.encode().decode("unicode_escape")


def statements(path: Path, starts: set[str]) -> list[list[tuple[str, str]]]:
    """Each statement that begins with one of `starts` (token kinds or texts), up to its `;`."""
    found, toks = [], tokens(path)
    for index, (kind, text) in enumerate(toks):
        if kind in starts or text in starts:
            depth, end = 0, index + 1
            while end < len(toks) and not (toks[end][1] == ";" and depth == 0):
                depth += toks[end][0] in ("(", "[", "{", "T_CURLY_OPEN")
                depth -= toks[end][0] in (")", "]", "}")
                end += 1
            found.append(list(toks[index:end]))
    return found


def outside_translation(statement: list[tuple[str, str]]) -> str:
    """The statement's string literals joined as the reader sees them: every call, variable and
    translated string becomes `§`, so only text typed here in clear is left."""
    shown: list[str] = []
    stack: list[bool] = []  # per open parenthesis: inside a translation function?
    for index, (kind, text) in enumerate(statement):
        if text == "(":
            before = statement[index - 1][1] if index else ""
            stack.append(before in TRANSLATE or bool(stack and stack[-1]))
        elif text == ")":
            if stack:
                stack.pop()
        elif kind == "T_CONSTANT_ENCAPSED_STRING" and not (stack and stack[-1]):
            shown.append(literal(text))
        elif kind in ("T_VARIABLE", "T_STRING"):
            shown.append("§")
    return "".join(shown)


def visible_text(html: str) -> str:
    """What a browser shows of an HTML fragment: tags, entities and placeholders removed."""
    text = re.sub(r"<[^>]*(>|$)", " ", html)  # a tag, or one left open at the end
    return re.sub(r"&[#\w]+;|§", " ", text)


@pytest.mark.parametrize("path", PHP_FILES, ids=lambda p: str(p.relative_to(PLUGIN)))
def test_every_php_file_starts_with_the_abspath_guard(path: Path):
    toks = [text for kind, text in tokens(path) if kind != "T_OPEN_TAG"]
    code = " ".join(toks)
    code = re.sub(r"^declare \( strict_types = 1 \) ;\s*", "", code)
    code = re.sub(r"^namespace [\w\\]+ ;\s*", "", code)
    assert code.startswith("defined ( 'ABSPATH' ) || exit ;"), code[:120]


@pytest.mark.parametrize("path", PHP_FILES, ids=lambda p: str(p.relative_to(PLUGIN)))
def test_no_script_tag_is_echoed(path: Path):
    for statement in statements(path, {"T_ECHO", "T_PRINT", "printf", "T_INLINE_HTML"}):
        written = " ".join(literal(text) if kind == "T_CONSTANT_ENCAPSED_STRING" else text
                           for kind, text in statement)
        assert "<script" not in written.lower(), written


@pytest.mark.parametrize("path", PHP_FILES, ids=lambda p: str(p.relative_to(PLUGIN)))
def test_what_a_person_reads_goes_through_a_translation_function(path: Path):
    for statement in statements(path, {"T_ECHO", "T_PRINT", "printf", "T_RETURN"}):
        shown = outside_translation(statement)
        if statement[0][0] == "T_RETURN" and "<" not in shown:
            continue  # a returned value, not HTML for the page
        words = re.findall(r"[A-Za-z]{2,}", visible_text(shown))
        assert not words, f"untranslated text {words} in: {shown}"
    toks = tokens(path)
    for index, (kind, text) in enumerate(toks[:-2]):
        # 'message' => '…', $message = '…', new WP_Error('code', '…'), wp_die('…')
        named = (kind == "T_CONSTANT_ENCAPSED_STRING" and literal(text) == "message"
                 and toks[index + 1][0] == "T_DOUBLE_ARROW") or (
            kind == "T_VARIABLE" and text in ("$message", "$why", "$text")
            and toks[index + 1][1] == "=")
        if named:
            assert toks[index + 2][0] != "T_CONSTANT_ENCAPSED_STRING", toks[index:index + 3]
        if text in ("WP_Error", "wp_die") and toks[index + 1][1] == "(":
            message = index + (4 if text == "WP_Error" else 2)  # its message argument
            assert toks[message][0] != "T_CONSTANT_ENCAPSED_STRING", toks[index:message + 1]


def translated_strings() -> set[str]:
    """Every string given to a translation function in the plugin (singular and plural)."""
    found = set()
    for path in PHP_FILES:
        toks = tokens(path)
        for index, (_, text) in enumerate(toks):
            if text in TRANSLATE and toks[index + 1][1] == "(":
                args = [t for k, t in toks[index + 2:index + 6]
                        if k == "T_CONSTANT_ENCAPSED_STRING"]
                found.update(literal(arg) for arg in args[:2 if text in ("_n", "_nx") else 1])
    found.discard("visitor-service")
    return found


def pot_entries() -> list[str]:
    return (PLUGIN / "languages" / "visitor-service.pot").read_text().split("\n\n")[1:]


def test_the_pot_holds_exactly_the_plugins_strings_with_translators_comments():
    in_pot = set()
    for entry in pot_entries():
        for field in ("msgid", "msgid_plural"):
            value = re.search(rf'^{field} "(.*)"$', entry, re.M)
            if value:
                in_pot.add(json.loads(f'"{value.group(1)}"'))
        if "php-format" in entry:
            assert "#. translators:" in entry, entry
    assert in_pot == translated_strings(), "run wordpress/make-pot.sh"


def test_every_translation_call_has_a_literal_string_and_the_plugins_text_domain():
    for path in PHP_FILES:
        toks = tokens(path)
        for index, (_, text) in enumerate(toks):
            if text in TRANSLATE and toks[index + 1][1] == "(":
                depth, end = 0, index + 1
                while True:
                    depth += toks[end][1] == "("
                    depth -= toks[end][1] == ")"
                    end += 1
                    if depth == 0:
                        break
                assert toks[end - 2][1] == "'visitor-service'", (path.name, toks[index:end])
                # A literal, which translation tools can read (never a variable or a sum).
                assert toks[index + 2][0] == "T_CONSTANT_ENCAPSED_STRING", toks[index:end]
                assert toks[index + 3][1] in (",", ")"), toks[index:end]


def test_the_readme_says_what_the_directory_asks():
    readme = (PLUGIN / "readme.txt").read_text()
    assert "== External services ==" in readme
    services = readme.split("== External services ==")[1].split("\n== ")[0]
    for needed in ("What is sent", "terms", "privacy policy", "Global Privacy Control"):
        assert needed in services, needed
    assert re.search(r"^Tested up to: 6\.8$", readme, re.M)
    assert re.search(r"^WC tested up to: 9\.9$", readme, re.M)
    header = (PLUGIN / "visitor-service.php").read_text()
    version = re.search(r"Version:\s+(\S+)", header).group(1)
    assert re.search(rf"^Stable tag: {re.escape(version)}$", readme, re.M)
    assert "WC tested up to:   9.9" in header


def phpcs(*paths: Path) -> list[tuple[str, int]]:
    """What PHP_CodeSniffer reports with the project's ruleset: (rule code, line), sorted; with no
    path, on the files the ruleset names (the plugin and the sniffs)."""
    done = subprocess.run(["phpcs", f"--standard={RULESET}", "--report=json", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("{"), done.stdout + done.stderr
    files = json.loads(done.stdout)["files"].values()
    return sorted((m["source"], m["line"]) for file in files for m in file["messages"])


@dataclass(frozen=True)
class Planted:
    """A sniff's bad case with what it must report (rule code and a text that marks the line),
    and a good case, with any ignore comment the plugin would write, on which phpcs is silent."""

    bad: str
    found: list[tuple[str, str]]
    good: str


#: Ignore comments as the plugin writes them: WPCS's rule and ours, with the reason.
DIRECT_QUERY_IGNORED = ("// phpcs:ignore WordPress.DB.DirectDatabaseQuery,"
                        " VisitorService.DB.DirectDatabaseQuery -- the plugin's own table")
NONCE_IGNORED = ("// phpcs:ignore WordPress.Security.NonceVerification.Recommended,"
                 " VisitorService.Security.NonceVerification -- a read-only tab")
HANDLER_IGNORED = ("// phpcs:ignore WordPress.PHP.DevelopmentFunctions.error_log_set_error_handler,"
                   " VisitorService.PHP.DevelopmentFunctions -- collecting errors is the purpose")
PLANTED = {
    "VisitorService.WP.TranslatorsComment": Planted(
        bad="""
            function waiting(int $count): string
            {
                return sprintf(
                    _n(
                        /* translators: %d: number of items */
                        '%d item is waiting.',
                        '%d items are waiting.',
                        $count,
                        'visitor-service'
                    ),
                    $count
                );
            }

            function failed(string $why): string
            {
                return sprintf(__('It failed (%s).', 'visitor-service'), $why);
            }
            """,
        found=[("VisitorService.WP.TranslatorsComment.Missing", "_n("),
               ("VisitorService.WP.TranslatorsComment.Missing", "It failed")],
        good="""
            function waiting(int $count): string
            {
                return sprintf(
                    /* translators: %d: number of items */
                    _n(
                        '%d item is waiting.',
                        '%d items are waiting.',
                        $count,
                        'visitor-service'
                    ),
                    $count
                );
            }

            function failed(string $why): string
            {
                /* translators: %s: why it failed */
                return sprintf(__('It failed (%s).', 'visitor-service'), $why)
                    . ' ' . __('No placeholder here.', 'visitor-service');
            }
            """,
    ),
    "VisitorService.DB.PreparedSQL": Planted(
        bad=f"""
            function rows(string $status): array
            {{
                global $wpdb;
                $table = $wpdb->prefix . 'outbox';
                {DIRECT_QUERY_IGNORED}
                return $wpdb->get_results("SELECT * FROM $table WHERE status = '$status'");
            }}

            function retry(): void
            {{
                global $wpdb;
                {DIRECT_QUERY_IGNORED}
                $wpdb->query($wpdb->prepare('UPDATE ' . table() . ' SET due = %d', 0));
            }}
            """,
        found=[("VisitorService.DB.PreparedSQL.NotPrepared", "SELECT *"),
               ("VisitorService.DB.PreparedSQL.NotPrepared", "UPDATE")],
        good=f"""
            function rows(string $status): array
            {{
                global $wpdb;
                {DIRECT_QUERY_IGNORED}
                return $wpdb->get_results($wpdb->prepare(
                    "SELECT * FROM {{$wpdb->prefix}}outbox WHERE status = %s LIMIT %d",
                    $status,
                    50
                ));
            }}

            function retry(): void
            {{
                global $wpdb;
                {DIRECT_QUERY_IGNORED}
                $wpdb->query('UPDATE ' . $wpdb->prefix . 'outbox SET due = ' . (int) time());
            }}
            """,
    ),
    "VisitorService.DB.PreparedSQLPlaceholders": Planted(
        bad=f"""
            function rows(int $due): array
            {{
                global $wpdb;
                {DIRECT_QUERY_IGNORED}
                return $wpdb->get_results($wpdb->prepare(
                    "SELECT * FROM {{$wpdb->prefix}}outbox WHERE due <= %d ORDER BY id",
                    $due,
                    50
                ));
            }}
            """,
        found=[("VisitorService.DB.PreparedSQLPlaceholders.ReplacementsWrongNumber",
                "return $wpdb->get_results")],
        good=f"""
            function rows(int $due): array
            {{
                global $wpdb;
                {DIRECT_QUERY_IGNORED}
                return $wpdb->get_results($wpdb->prepare(
                    "SELECT * FROM {{$wpdb->prefix}}outbox WHERE due <= %d"
                        . " AND name LIKE 'a%%' LIMIT %d",
                    [$due, 50]
                ));
            }}
            """,
    ),
    "VisitorService.DB.DirectDatabaseQuery": Planted(
        bad="""
            function backlog(): int
            {
                global $wpdb;
                return (int) $wpdb->get_var("SELECT COUNT(*) FROM {$wpdb->prefix}outbox");
            }

            function forget(): void
            {
                global $wpdb;
                $wpdb->query("DROP TABLE IF EXISTS {$wpdb->prefix}outbox");
            }

            function keep(array $row): void
            {
                global $wpdb;
                $wpdb->insert($wpdb->prefix . 'outbox', $row);
            }
            """,
        found=[("VisitorService.DB.DirectDatabaseQuery.DirectQuery", "get_var"),
               ("VisitorService.DB.DirectDatabaseQuery.NoCaching", "get_var"),
               ("VisitorService.DB.DirectDatabaseQuery.DirectQuery", "DROP"),
               ("VisitorService.DB.DirectDatabaseQuery.NoCaching", "DROP"),
               ("VisitorService.DB.DirectDatabaseQuery.SchemaChange", "DROP"),
               ("VisitorService.DB.DirectDatabaseQuery.DirectQuery", "insert")],
        good=f"""
            function backlog(): int
            {{
                global $wpdb;
                {DIRECT_QUERY_IGNORED}
                return (int) $wpdb->get_var("SELECT COUNT(*) FROM {{$wpdb->prefix}}outbox");
            }}
            """,
    ),
    "VisitorService.Security.ValidatedSanitizedInput": Planted(
        bad="""
            function agent(): string
            {
                return isset($_SERVER['HTTP_DNT']) ? (string) $_SERVER['HTTP_DNT'] : '';
            }

            function address(): string
            {
                return isset($_SERVER['REMOTE_ADDR'])
                    ? sanitize_text_field($_SERVER['REMOTE_ADDR']) : '';
            }

            function visitor(): string
            {
                return isset($_COOKIE['visitor']) ? wp_unslash($_COOKIE['visitor']) : '';
            }
            """,
        found=[("VisitorService.Security.ValidatedSanitizedInput.InputNotSanitized", "(string)"),
               ("VisitorService.Security.ValidatedSanitizedInput.MissingUnslash", "(string)"),
               ("VisitorService.Security.ValidatedSanitizedInput.MissingUnslash", "? sanitize"),
               ("VisitorService.Security.ValidatedSanitizedInput.InputNotSanitized", "wp_unslash")],
        good="""
            function agent(): string
            {
                return isset($_SERVER['HTTP_USER_AGENT'])
                    ? sanitize_text_field(wp_unslash($_SERVER['HTTP_USER_AGENT'])) : '';
            }

            function page(): int
            {
                return isset($_COOKIE['page']) ? absint($_COOKIE['page']) : (int) $_COOKIE['first'];
            }
            """,
    ),
    "VisitorService.Security.NonceVerification": Planted(
        bad="""
            function showsTab(): bool
            {
                return isset($_GET['tab']);
            }

            function save(): void
            {
                update_option('name', sanitize_text_field(wp_unslash($_POST['name'] ?? '')));
            }
            """,
        found=[("VisitorService.Security.NonceVerification.Recommended", "isset($_GET"),
               ("VisitorService.Security.NonceVerification.Missing", "update_option")],
        good=f"""
            function showsTab(): bool
            {{
                {NONCE_IGNORED}
                return isset($_GET['tab']);
            }}

            function save(): void
            {{
                check_admin_referer('save-name');
                update_option('name', sanitize_text_field(wp_unslash($_POST['name'] ?? '')));
            }}
            """,
    ),
    "VisitorService.WP.EnqueuedResourceParameters": Planted(
        bad="""
            function enqueue(string $href): void
            {
                wp_enqueue_script('loader', 'https://service.example/loader.js');
                wp_enqueue_style('look', $href, [], null);
            }
            """,
        found=[("VisitorService.WP.EnqueuedResourceParameters.MissingVersion", "loader.js"),
               ("VisitorService.WP.EnqueuedResourceParameters.MissingVersion", "$href, [], null")],
        good="""
            function enqueue(string $href): void
            {
                wp_enqueue_script('loader', 'https://service.example/loader.js', [], '1.2.0', true);
                wp_enqueue_style('look', $href, ver: '1.2.0');
                wp_register_script('stub', false);
            }
            """,
    ),
    "VisitorService.PHP.DevelopmentFunctions": Planted(
        bad="""
            function watch(): void
            {
                set_error_handler('handle');
                error_log(print_r($_ENV, true));
            }
            """,
        found=[("VisitorService.PHP.DevelopmentFunctions.Discouraged", "set_error_handler"),
               ("VisitorService.PHP.DevelopmentFunctions.Discouraged", "error_log"),
               ("VisitorService.PHP.DevelopmentFunctions.Discouraged", "error_log")],
        good=f"""
            function watch(object $logger): void
            {{
                {HANDLER_IGNORED}
                set_error_handler('handle');
                $logger->error_log('a method of its own');
            }}
            """,
    ),
    "VisitorService.WP.FilesystemFunctions": Planted(
        bad="""
            function save(string $path, string $text): void
            {
                $handle = fopen($path, 'w');
                fwrite($handle, $text);
                fclose($handle);
            }
            """,
        found=[("VisitorService.WP.FilesystemFunctions.Found", "fopen"),
               ("VisitorService.WP.FilesystemFunctions.Found", "fwrite"),
               ("VisitorService.WP.FilesystemFunctions.Found", "fclose")],
        good="""
            function save(string $path, string $text): void
            {
                global $wp_filesystem;
                $wp_filesystem->put_contents($path, $text);
            }
            """,
    ),
    "Generic.PHP.ForbiddenFunctions": Planted(
        bad="""
            function host(string $url): string
            {
                return json_encode(parse_url($url, PHP_URL_HOST));
            }
            """,
        found=[("Generic.PHP.ForbiddenFunctions.FoundWithAlternative", "json_encode"),
               ("Generic.PHP.ForbiddenFunctions.FoundWithAlternative", "json_encode")],
        good="""
            function host(string $url): string
            {
                return (string) wp_json_encode(wp_parse_url($url, PHP_URL_HOST));
            }
            """,
    ),
}


def planted(directory: Path, name: str, body: str) -> tuple[Path, list[str]]:
    """A PHP file made of `body`, and its lines (line 1 first) for finding a mark's line."""
    code = "<?php\n\n" + textwrap.dedent(body).strip() + "\n"
    path = directory / name
    path.write_text(code)
    return path, code.splitlines()


@pytest.mark.parametrize("rule", PLANTED)
def test_each_review_sniff_reports_its_bad_case_and_passes_its_good_one(rule: str, tmp_path: Path):
    case = PLANTED[rule]
    bad, lines = planted(tmp_path, "bad.php", case.bad)
    marked = [(code, next(n for n, line in enumerate(lines, 1) if mark in line))
              for code, mark in case.found]
    assert [found for found in phpcs(bad) if found[0].startswith(rule + ".")] == sorted(marked)
    good, _ = planted(tmp_path, "good.php", case.good)
    assert phpcs(good) == []


def test_the_plugin_and_the_sniffs_pass_the_projects_ruleset():
    assert phpcs() == []
