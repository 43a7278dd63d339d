"""Secrets in URLs: the query parameters the service never stores (issue 40 point 4).

An order-received address carries WooCommerce's order key (`?key=wc_order_…`), a password-reset
link its reset key and login, an OAuth callback its code or token: whoever holds one can open the
order or the account. Ingest strips them from every URL it is sent, once and before anything is
stored or folded (`VisitorIntake.admit`, the error job's texts); a site adds its own names in
`settings.secretUrlParameters`. See docs/decisions.md, "Issue 40: no secret in a stored URL".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote_plus

#: Parameter names (compared case-insensitively) whose value is a secret wherever they appear.
DEFAULT_SECRET_PARAMETERS: frozenset[str] = frozenset({
    # WooCommerce's order-received and order-pay key; WordPress's password-reset key.
    "key", "order_key", "rp_key",
    # Tokens and OAuth callbacks.
    "token", "auth", "access_token", "id_token", "refresh_token", "code",
    # Credentials, signatures and nonces.
    "password", "pass", "pwd", "secret", "signature", "sig", "_wpnonce", "nonce",
    "apikey", "api_key",
    # Session identifiers.
    "session", "sessionid", "phpsessid",
})

#: WordPress's password-reset link (`wp-login.php?action=rp&key=…&login=…`) names the account
#: beside its key; `login` is stripped only there, where it completes the secret.
PASSWORD_RESET_ACTIONS = frozenset({"rp", "resetpass"})
PASSWORD_RESET_LOGIN = "login"

#: A WooCommerce order key, under whatever name a theme or plugin passes it on.
ORDER_KEY_PREFIX = "wc_order_"
_ORDER_KEY = re.compile(r"wc_order_[A-Za-z0-9_]+", re.I)
ORDER_KEY_PLACEHOLDER = "wc_order_[removed]"

#: A run of URL characters holding a query or a fragment, inside free text (an error's message,
#: stack or context).
_URL_IN_TEXT = re.compile(r"[^\s\"'<>()\[\]{}`]*[?#][^\s\"'<>()\[\]{}`]*")


def secret_parameters(site: dict[str, Any]) -> frozenset[str]:
    """The default names and the ones the site added (`settings.secretUrlParameters`)."""
    added: Iterable[str] = site.get("settings", {}).get("secretUrlParameters") or ()
    if not added:
        return DEFAULT_SECRET_PARAMETERS
    return DEFAULT_SECRET_PARAMETERS | {name.strip().lower() for name in added}


def strip_secrets(url: str, names: frozenset[str] = DEFAULT_SECRET_PARAMETERS) -> str:
    """The URL without its secret parameters (name and value), in its query and in a fragment
    written as parameters (`#access_token=…`); everything else stays as sent, in order."""
    if "?" not in url and "#" not in url:
        return url
    base, hashed, fragment = url.partition("#")
    path, asked, query = base.partition("?")
    if asked and (kept := _kept_parameters(query, names)) != query:
        base = f"{path}?{kept}" if kept else path
    if not hashed:
        return base
    if "?" in fragment:
        # A single-page app's route with its own query: `#/order?key=…`.
        kept = strip_secrets(fragment, names)
    else:
        kept = _kept_parameters(fragment, names) if "=" in fragment else fragment
    if kept == fragment:
        return f"{base}#{fragment}"
    return f"{base}#{kept}" if kept else base


def strip_secrets_in_text(text: str, names: frozenset[str] = DEFAULT_SECRET_PARAMETERS) -> str:
    """Free text with the secret parameters stripped from every URL in it, and any WooCommerce
    order key left outside one replaced by a placeholder."""
    if "?" in text or "#" in text:
        text = _URL_IN_TEXT.sub(lambda found: strip_secrets(found.group(0), names), text)
    if ORDER_KEY_PREFIX in text.lower():
        text = _ORDER_KEY.sub(ORDER_KEY_PLACEHOLDER, text)
    return text


def _kept_parameters(query: str, names: frozenset[str]) -> str:
    parts = query.split("&")
    split = [_name_and_value(part) for part in parts]
    secret = names
    if any(name == "action" and value.lower() in PASSWORD_RESET_ACTIONS for name, value in split):
        secret = names | {PASSWORD_RESET_LOGIN}
    return "&".join(
        part for part, (name, value) in zip(parts, split, strict=True)
        if name not in secret and ORDER_KEY_PREFIX not in value.lower())


def _name_and_value(part: str) -> tuple[str, str]:
    name, _, value = part.partition("=")
    return unquote_plus(name).strip().lower(), unquote_plus(value)


#: The fields of an ingested item that hold a URL (the page, where it was reached from).
URL_FIELDS = ("url", "referrer", "pageUrl")


def strip_item_urls(item: dict[str, Any], names: frozenset[str]) -> None:
    """Strip the secret parameters from the item's URL fields, in place."""
    for field in URL_FIELDS:
        value = item.get(field)
        if isinstance(value, str) and value:
            item[field] = strip_secrets(value, names)
