"""The demo organization, owner and site the embedded default starts with."""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass
from typing import Any

from auth.passwords import hash_password
from documents import accounts
from documents.sites import SiteKeyring


@dataclass(frozen=True)
class DemoCredentials:
    """What `make run` prints and writes to the demo file."""

    email: str
    password: str
    siteId: str  # noqa: N815 - the demo file's keys are fixed by the issue
    apiKey: str  # noqa: N815
    publicKey: str  # noqa: N815

    def as_dict(self) -> dict[str, Any]:
        """The demo file's JSON object."""
        return asdict(self)


async def seed_demo(store: Any, keyring: SiteKeyring, *, email: str, password: str,
                    public_url: str) -> DemoCredentials:
    """Create the demo account, owner and site; generated credentials unless given."""
    email = email or f"demo-{secrets.token_hex(3)}@example.com"
    password = password or secrets.token_urlsafe(12)
    created = await accounts.create_account(
        store, email=email, password_hash=await hash_password(password),
        display_name="Demo Owner", account_name="Demo Account",
        organization_name="Demo Shop Ltd",
    )
    owner = await accounts.load_authenticated_user(store, created["userId"], "")
    assert owner is not None
    site, keys = await keyring.create_site(
        owner, created["organizationId"], "Demo Shop",
        [public_url, "http://localhost:8888", "http://127.0.0.1:8888"], {},
    )
    return DemoCredentials(email, password, site["_id"], keys.api_key, keys.public_key)
