"""Tests for signed product statements, their test vectors and the documented reference signers."""

import base64
import hashlib
import hmac
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from privacy.statements import (
    ProductStatement,
    canonical_bytes,
    derive_statement_key,
    sign_statement,
    verify_statement,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SPEC_PATH = REPO_ROOT / "docs" / "product-statements.md"
VECTORS_PATH = Path(__file__).with_name("statement_vectors.json")
VECTORS: list[dict[str, Any]] = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))

CURRENT_KEY = derive_statement_key("current-api-key")
PREVIOUS_KEY = derive_statement_key("previous-api-key")
NOW = 1_700_000_000
PAGE_URL = "https://shop.example/products/blue-mug"
NONCE = "AAECAwQFBgcICQoLDA0ODw"

# Valid field text: no line feed, and no lone surrogates (they cannot be encoded as UTF-8).
field_text = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n"), min_size=1)
product_ids = field_text.filter(lambda text: len(text) <= 128)
page_urls = field_text.filter(lambda text: len(text) <= 4096)
issued_ats = st.integers(min_value=0, max_value=2**63 - 1)
nonces = st.binary(min_size=16, max_size=16).map(
    lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _token_parts(token: str) -> tuple[dict[str, Any], str]:
    _, payload, mac = token.split(".")
    return json.loads(_unb64(payload)), mac


def _token_with_payload(payload_json: str, mac: str) -> str:
    return f"v1.{_b64(payload_json.encode('utf-8'))}.{mac}"


def _doc_code_block(language: str) -> str:
    spec = SPEC_PATH.read_text(encoding="utf-8")
    section = re.search(
        rf"<!-- reference-signer:{language}:start -->\n```{language}\n(.*?)\n```\n"
        rf"<!-- reference-signer:{language}:end -->",
        spec,
        re.DOTALL,
    )
    assert section is not None, f"no {language} reference signer between markers in {SPEC_PATH}"
    return section.group(1)


def _python_reference_signer() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "product_statement_reference"}
    exec(compile(_doc_code_block("python"), str(SPEC_PATH), "exec"), namespace)
    return namespace


def _check(token: str, **overrides: Any) -> str | None:
    arguments: dict[str, Any] = {"keys": [CURRENT_KEY], "now": NOW, "max_age_seconds": 600}
    arguments.update(overrides)
    return verify_statement(token, **arguments).rejection


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: vector["product_id"])
def test_derive_statement_key_reproduces_each_vector(vector: dict[str, Any]) -> None:
    assert derive_statement_key(vector["api_key"]).hex() == vector["derived_key_hex"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: vector["product_id"])
def test_sign_statement_reproduces_each_vector_token(vector: dict[str, Any]) -> None:
    key = bytes.fromhex(vector["derived_key_hex"])
    token = sign_statement(
        key, vector["product_id"], vector["page_url"], vector["issued_at"], vector["nonce"]
    )
    assert token == vector["token"]


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: vector["product_id"])
def test_the_canonical_form_of_each_vector_is_as_documented(vector: dict[str, Any]) -> None:
    statement = ProductStatement(
        vector["product_id"], vector["page_url"], vector["issued_at"], vector["nonce"]
    )
    assert canonical_bytes(statement) == vector["canonical"].encode("utf-8")
    key = bytes.fromhex(vector["derived_key_hex"])
    expected_mac = hmac.new(key, vector["canonical"].encode("utf-8"), hashlib.sha256).digest()
    assert vector["token"].split(".")[2] == _b64(expected_mac)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: vector["product_id"])
def test_each_vector_token_verifies_with_its_derived_key(vector: dict[str, Any]) -> None:
    check = verify_statement(
        vector["token"],
        keys=[derive_statement_key(vector["api_key"])],
        now=vector["issued_at"],
        max_age_seconds=600,
    )
    assert check.rejection is None
    assert check.statement == ProductStatement(
        vector["product_id"], vector["page_url"], vector["issued_at"], vector["nonce"]
    )


def test_the_spec_shows_every_vector_key_and_token() -> None:
    spec = SPEC_PATH.read_text(encoding="utf-8")
    for vector in VECTORS:
        assert vector["derived_key_hex"] in spec
        assert vector["token"] in spec
        assert json.dumps(vector["canonical"], ensure_ascii=False) in spec


def test_the_spec_has_at_least_three_vectors() -> None:
    assert len(VECTORS) >= 3


def test_the_reference_hkdf_in_the_spec_matches_rfc_5869_test_case_1() -> None:
    hkdf_sha256 = _python_reference_signer()["hkdf_sha256"]
    output = hkdf_sha256(bytes([0x0B] * 22), bytes(range(13)), bytes(range(0xF0, 0xFA)), 42)
    assert output.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )


@pytest.mark.parametrize("vector", VECTORS, ids=lambda vector: vector["product_id"])
def test_the_python_reference_signer_in_the_spec_reproduces_each_vector(
    vector: dict[str, Any],
) -> None:
    reference = _python_reference_signer()
    assert reference["derive_statement_key"](vector["api_key"]).hex() == vector["derived_key_hex"]
    token = reference["sign_product_statement"](
        vector["api_key"],
        vector["product_id"],
        vector["page_url"],
        vector["issued_at"],
        vector["nonce"],
    )
    assert token == vector["token"]


def test_the_python_reference_signer_makes_tokens_the_service_accepts() -> None:
    reference = _python_reference_signer()
    token = reference["sign_product_statement"]("current-api-key", "SKU-7", PAGE_URL, NOW)
    check = verify_statement(token, keys=[CURRENT_KEY], now=NOW, max_age_seconds=600)
    assert check.rejection is None


PHP_DRIVER = """<?php
require $argv[1];
$vectors = json_decode(file_get_contents($argv[2]), true, 512, JSON_THROW_ON_ERROR);
$results = [];
foreach ($vectors as $vector) {
    $results[] = [
        'derived_key_hex' => bin2hex(visitor_service_statement_key($vector['api_key'])),
        'token' => visitor_service_sign_product_statement(
            $vector['api_key'],
            $vector['product_id'],
            $vector['page_url'],
            $vector['issued_at'],
            $vector['nonce']
        ),
    ];
}
echo json_encode($results, JSON_THROW_ON_ERROR);
"""


@pytest.mark.skipif(
    shutil.which("php") is None,
    reason="php is not installed here, so the PHP reference signer was not run against the vectors",
)
def test_the_php_reference_signer_in_the_spec_reproduces_every_vector(tmp_path: Path) -> None:
    signer_path = tmp_path / "signer.php"
    signer_path.write_text(_doc_code_block("php") + "\n", encoding="utf-8")
    driver_path = tmp_path / "driver.php"
    driver_path.write_text(PHP_DRIVER, encoding="utf-8")
    completed = subprocess.run(
        ["php", str(driver_path), str(signer_path), str(VECTORS_PATH)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    results = json.loads(completed.stdout)
    expected = [
        {"derived_key_hex": vector["derived_key_hex"], "token": vector["token"]}
        for vector in VECTORS
    ]
    assert results == expected


def test_a_fresh_statement_verifies_and_carries_its_fields() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW)
    check = verify_statement(
        token, keys=[CURRENT_KEY], now=NOW, max_age_seconds=600, page_url=PAGE_URL
    )
    assert check.accepted
    assert check.statement is not None
    assert (check.statement.product_id, check.statement.page_url) == ("SKU-7", PAGE_URL)
    assert check.statement.issued_at == NOW


def test_every_signed_statement_gets_a_fresh_16_byte_nonce() -> None:
    first, _ = _token_parts(sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW))
    second, _ = _token_parts(sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW))
    assert first["n"] != second["n"]
    assert len(_unb64(first["n"])) == 16


@pytest.mark.parametrize(
    ("field", "forged_value"),
    [("p", "SKU-8"), ("u", "https://shop.example/other"), ("t", NOW - 1), ("n", "A" * 22)],
)
def test_changing_any_field_breaks_the_signature(field: str, forged_value: Any) -> None:
    payload, mac = _token_parts(sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW, NONCE))
    payload[field] = forged_value
    assert _check(_token_with_payload(json.dumps(payload), mac)) == "bad_signature"


def test_a_changed_mac_breaks_the_signature() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW, NONCE)
    forged = token[: token.rindex(".") + 1] + _b64(bytes(32))
    assert _check(forged) == "bad_signature"


def test_a_statement_signed_with_another_key_is_refused() -> None:
    token = sign_statement(derive_statement_key("someone-else"), "SKU-7", PAGE_URL, NOW)
    assert _check(token) == "bad_signature"


def test_any_json_spelling_of_the_same_fields_verifies() -> None:
    payload, mac = _token_parts(sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW, NONCE))
    respelled = json.dumps(dict(reversed(payload.items())), indent=2)
    assert _check(_token_with_payload(respelled, mac)) is None


def test_a_newline_smuggled_into_a_field_cannot_reuse_another_statement_signature() -> None:
    # Without the line-feed rule, ("SKU-7\nhttps://a", "b") would share the canonical bytes of
    # ("SKU-7", "https://a\nb") and one signature would cover both.
    canonical = "\n".join(["v1", "SKU-7", "https://a", "b", str(NOW), NONCE]).encode()
    mac = _b64(hmac.new(CURRENT_KEY, canonical, hashlib.sha256).digest())
    smuggled = json.dumps({"n": NONCE, "p": "SKU-7\nhttps://a", "t": NOW, "u": "b"})
    assert _check(_token_with_payload(smuggled, mac)) == "malformed"


def test_a_statement_older_than_the_maximum_age_is_expired() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW - 601)
    assert _check(token) == "expired"


def test_a_statement_exactly_at_the_maximum_age_is_accepted() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW - 600)
    assert _check(token) is None


def test_the_maximum_age_is_configurable() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW - 120)
    assert _check(token, max_age_seconds=60) == "expired"
    assert _check(token, max_age_seconds=180) is None


def test_the_maximum_age_defaults_to_ten_minutes() -> None:
    fresh_enough = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW - 600)
    too_old = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW - 601)
    assert verify_statement(fresh_enough, [CURRENT_KEY], NOW).rejection is None
    assert verify_statement(too_old, [CURRENT_KEY], NOW).rejection == "expired"


def test_a_statement_more_than_a_minute_ahead_is_from_the_future() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW + 61)
    assert _check(token) == "from_future"


def test_a_minute_of_clock_skew_is_tolerated() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW + 60)
    assert _check(token) is None


def test_a_statement_signed_with_the_previous_key_verifies_during_rotation() -> None:
    token = sign_statement(PREVIOUS_KEY, "SKU-7", PAGE_URL, NOW)
    assert _check(token, keys=[CURRENT_KEY, PREVIOUS_KEY]) is None
    assert _check(token, keys=[CURRENT_KEY]) == "bad_signature"


@pytest.mark.parametrize("signing_key", [CURRENT_KEY, PREVIOUS_KEY])
def test_during_rotation_either_key_verifies_whatever_the_key_order(signing_key: bytes) -> None:
    token = sign_statement(signing_key, "SKU-7", PAGE_URL, NOW)
    assert _check(token, keys=[CURRENT_KEY, PREVIOUS_KEY]) is None
    assert _check(token, keys=[PREVIOUS_KEY, CURRENT_KEY]) is None


def test_a_statement_for_another_page_is_a_url_mismatch() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW)
    assert _check(token, page_url="https://shop.example/products/red-mug") == "url_mismatch"


def test_a_fragment_on_the_reported_page_url_is_ignored() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW)
    assert _check(token, page_url=PAGE_URL + "#reviews") is None


def test_a_rejected_statement_is_not_handed_back() -> None:
    token = sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW - 601)
    check = verify_statement(token, [CURRENT_KEY], NOW, 600)
    assert check.statement is None
    assert not check.accepted


def _valid_payload() -> dict[str, Any]:
    return {"n": NONCE, "p": "SKU-7", "t": NOW, "u": PAGE_URL}


@pytest.mark.parametrize(
    "payload_json",
    [
        json.dumps({key: value for key, value in _valid_payload().items() if key != "n"}),
        json.dumps({**_valid_payload(), "x": 1}),
        f'{{"n":"{NONCE}","p":"SKU-7","p":"SKU-8","t":{NOW},"u":"{PAGE_URL}"}}',
        json.dumps({**_valid_payload(), "t": str(NOW)}),
        json.dumps({**_valid_payload(), "t": True}),
        json.dumps({**_valid_payload(), "t": float(NOW)}),
        json.dumps({**_valid_payload(), "t": -1}),
        json.dumps({**_valid_payload(), "t": 2**63}),
        json.dumps({**_valid_payload(), "p": ""}),
        json.dumps({**_valid_payload(), "p": "x" * 129}),
        json.dumps({**_valid_payload(), "p": 7}),
        json.dumps({**_valid_payload(), "u": "x" * 4097}),
        json.dumps({**_valid_payload(), "u": "https://a\nb"}),
        json.dumps({**_valid_payload(), "p": "\ud800"}),
        json.dumps({**_valid_payload(), "n": "AAAA"}),
        json.dumps({**_valid_payload(), "n": NONCE[:-1] + "x"}),
        json.dumps({**_valid_payload(), "n": NONCE + "=="}),
        json.dumps([_valid_payload()]),
        "not json",
        "[" * 5000,
    ],
)
def test_a_payload_breaking_the_field_rules_is_malformed(payload_json: str) -> None:
    assert _check(_token_with_payload(payload_json, _b64(bytes(32)))) == "malformed"


@pytest.mark.parametrize(
    "token",
    [
        "",
        "v1",
        "v1..",
        "v2." + _b64(json.dumps(_valid_payload()).encode()) + "." + _b64(bytes(32)),
        "v1." + _b64(json.dumps(_valid_payload()).encode()) + "." + _b64(bytes(31)),
        "v1." + _b64(json.dumps(_valid_payload()).encode()) + "=." + _b64(bytes(32)),
        "v1." + _b64(json.dumps(_valid_payload()).encode()) + "." + _b64(bytes(32)) + ".x",
        "v1.!!!!." + _b64(bytes(32)),
        "v1." + "A" * 9000 + "." + _b64(bytes(32)),
    ],
)
def test_a_token_with_a_broken_envelope_is_malformed(token: str) -> None:
    assert _check(token) == "malformed"


@given(st.one_of(st.text(), st.binary().map(lambda raw: "v1." + _b64(raw) + "." + _b64(raw))))
def test_hostile_tokens_never_raise_and_are_never_accepted(token: str) -> None:
    assert _check(token) in ("malformed", "bad_signature")


def test_non_text_tokens_are_malformed_rather_than_raising() -> None:
    assert _check(None) == "malformed"  # type: ignore[arg-type]
    assert _check(b"v1.a.b") == "malformed"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("product_id", "page_url"),
    [("", PAGE_URL), ("x" * 129, PAGE_URL), ("SKU\n7", PAGE_URL), ("SKU-7", "https://a\nb")],
)
def test_signing_refuses_fields_that_break_the_rules(product_id: str, page_url: str) -> None:
    with pytest.raises(ValueError):
        sign_statement(CURRENT_KEY, product_id, page_url, NOW)


def test_signing_refuses_a_nonce_that_is_not_16_bytes() -> None:
    with pytest.raises(ValueError, match="nonce"):
        sign_statement(CURRENT_KEY, "SKU-7", PAGE_URL, NOW, nonce="AAAA")


def test_an_empty_api_key_cannot_derive_a_key() -> None:
    with pytest.raises(ValueError):
        derive_statement_key("")


def test_verifying_without_any_key_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        verify_statement("v1.a.b", keys=[], now=NOW, max_age_seconds=600)


@given(product_ids, page_urls, issued_ats, nonces)
def test_any_valid_fields_round_trip_through_sign_and_verify(
    product_id: str, page_url: str, issued_at: int, nonce: str
) -> None:
    token = sign_statement(CURRENT_KEY, product_id, page_url, issued_at, nonce)
    check = verify_statement(
        token, keys=[CURRENT_KEY], now=issued_at, max_age_seconds=600, page_url=page_url
    )
    assert check.statement == ProductStatement(product_id, page_url, issued_at, nonce)


@given(product_ids, page_urls, issued_ats, nonces)
def test_the_canonical_form_splits_back_into_exactly_its_fields(
    product_id: str, page_url: str, issued_at: int, nonce: str
) -> None:
    canonical = canonical_bytes(ProductStatement(product_id, page_url, issued_at, nonce))
    assert canonical.decode("utf-8").split("\n") == [
        "v1",
        product_id,
        page_url,
        str(issued_at),
        nonce,
    ]


@given(
    st.tuples(product_ids, page_urls, issued_ats, nonces),
    st.tuples(product_ids, page_urls, issued_ats, nonces),
)
def test_different_statements_never_share_a_canonical_form(
    first: tuple[str, str, int, str], second: tuple[str, str, int, str]
) -> None:
    assume(first != second)
    assert canonical_bytes(ProductStatement(*first)) != canonical_bytes(ProductStatement(*second))


@given(
    product_ids.filter(lambda text: len(text) < 128),
    page_urls.filter(lambda text: len(text) >= 2),
)
def test_moving_a_character_between_fields_changes_the_canonical_form(
    product_id: str, page_url: str
) -> None:
    moved = ProductStatement(product_id + page_url[0], page_url[1:], NOW, NONCE)
    original = ProductStatement(product_id, page_url, NOW, NONCE)
    assert canonical_bytes(moved) != canonical_bytes(original)
