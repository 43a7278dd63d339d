"""Settings: validated at start, one line naming the variable, no default secrets on Mongo."""

from __future__ import annotations

from pathlib import Path

import pytest

import server
from config import SettingsError, configuration_table, load_settings, setting_fields


@pytest.mark.parametrize(("variable", "value"), [
    ("PORT", "eighty"),
    ("PORT", "70000"),
    ("MONGODB_URI", "postgres://x"),
    ("REDIS_URL", "http://redis"),
    ("TRUSTED_PROXIES", "10.0.0.0/8, not-a-network"),
    ("SECRET_KEY", "short"),
    ("MASTER_KEY", "c2hvcnQ="),
    ("MAX_EVENT_BODY_BYTES", "-1"),
    ("PUBLIC_URL", "shop.example"),
    ("LOG_LEVEL", "LOUD"),
    ("BCRYPT_ROUNDS", "4"),
    ("BCRYPT_ROUNDS", "9"),
    ("BCRYPT_ROUNDS", "32"),
])
def test_a_malformed_value_stops_the_start_naming_the_variable(variable: str, value: str):
    with pytest.raises(SettingsError) as raised:
        load_settings({variable: value})
    message = str(raised.value)
    assert message.startswith(f"{variable}:")
    assert "\n" not in message


@pytest.mark.parametrize("missing", ["SECRET_KEY", "MASTER_KEY"])
def test_a_real_database_needs_every_secret(missing: str):
    env = {"MONGODB_URI": "mongodb://db:27017/?replicaSet=rs0",
           "SECRET_KEY": "a" * 64, "MASTER_KEY": "b" * 64}
    del env[missing]
    with pytest.raises(SettingsError, match=f"^{missing}: required"):
        load_settings(env)


def test_the_embedded_default_generates_its_secrets_and_says_so():
    settings = load_settings({})
    assert settings.embedded
    assert len(settings.master_key) == 32 and len(settings.secret_key) >= 32
    assert set(settings.generated_secrets) == {"SECRET_KEY", "MASTER_KEY"}
    assert load_settings({}).secret_key != settings.secret_key


def test_a_bcrypt_cost_below_10_is_refused_and_10_is_the_lowest_accepted():
    with pytest.raises(SettingsError, match="^BCRYPT_ROUNDS: must be between 10 and 31"):
        load_settings({"BCRYPT_ROUNDS": "9"})
    assert load_settings({"BCRYPT_ROUNDS": "10"}).bcrypt_rounds == 10
    assert load_settings({}).bcrypt_rounds == 12


async def test_production_hashes_passwords_at_bcrypt_cost_12():
    # The suite's own hasher runs at bcrypt's lowest cost for speed (tests/conftest.py builds it;
    # the settings refuse it); what a deployment gets unless told otherwise is 12, both for new
    # hashes and for the unknown-user check that keeps logins uniform.
    deps = await server.build_deps(load_settings({}))
    try:
        assert deps.auth.passwords.rounds == 12
        assert (await deps.auth.passwords.hash("correct horse battery")).startswith("$2b$12$")
    finally:
        await deps.close()


def test_tls_needs_both_certificate_and_key():
    with pytest.raises(SettingsError, match="^TLS_CERT_FILE"):
        load_settings({"TLS_CERT_FILE": "/x.pem"})


def test_the_readme_lists_every_setting_as_the_code_declares_it():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert configuration_table() in readme
    for f in setting_fields():
        assert f"`{f.metadata['env']}`" in readme
