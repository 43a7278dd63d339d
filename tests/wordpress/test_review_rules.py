"""The WordPress.org review rules the plugin must meet (issue 33), checked by our own test: the
directory's checker (Plugin Check, WPCS) cannot be installed from the registries we may use.

Reads the plugin's PHP through PHP's own tokenizer (`php`, as the WordPress tests need it):
every file starts with the ABSPATH guard; no `<script` is echoed (scripts are enqueued); what a
person reads (echoed text, REST and error messages) goes through a translation function; SQL
that is not prepared holds no variable but a table name; the .pot holds exactly the plugin's
strings, each format string with a translators comment; readme.txt has what the directory asks.
"""

from __future__ import annotations

import json
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.support.wordpress import PLUGIN

PHP_FILES = sorted(PLUGIN.rglob("*.php"))
TRANSLATE = {"__", "_e", "_n", "_x", "_nx", "esc_html__", "esc_html_e", "esc_attr__", "esc_attr_e",
             "esc_html_x", "esc_attr_x"}
#: What may stand in SQL that is not prepared: the site's table names.
TABLE_NAMES = {"self::table()", "$wpdb->prefix", "$wpdb->options"}
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


@pytest.mark.parametrize("path", PHP_FILES, ids=lambda p: str(p.relative_to(PLUGIN)))
def test_sql_that_is_not_prepared_holds_no_variable_but_a_table_name(path: Path):
    toks = tokens(path)
    for index, (_, text) in enumerate(toks):
        if text not in ("query", "get_var", "get_results", "get_row", "get_col"):
            continue
        if toks[index - 1][1] != "->" or toks[index - 2][1] != "$wpdb":
            continue
        depth, end, argument = 0, index + 1, []
        while True:
            depth += toks[end][1] == "("
            depth -= toks[end][1] == ")"
            argument.append(toks[end])
            end += 1
            if depth == 0:
                break
        code = "".join(t for _, t in argument[1:-1])
        if code.startswith("$wpdb->prepare("):
            continue
        for name in TABLE_NAMES:
            code = code.replace(name, "")
        kinds = {k for k, _ in argument[1:-1]}
        assert "$" not in code.replace("'", "") and '"' not in kinds, code


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
