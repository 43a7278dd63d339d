"""Shared test helpers: the test password, HTTP answers, signed-in tenants, and reading back
what landed in the store."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tornado.httpclient import HTTPResponse

TEST_PASSWORD = "correct horse battery staple"


class Answer:
    """An HTTP answer with its JSON body at hand."""

    def __init__(self, response: HTTPResponse) -> None:
        self.response = response
        self.code = response.code
        self.headers = response.headers
        self.body = response.body or b""

    def json(self) -> Any:
        """The parsed JSON body."""
        return json.loads(self.body)

    @property
    def error_code(self) -> str | None:
        """`error.code` of an error answer."""
        return self.json()["error"]["code"]

    def __repr__(self) -> str:
        return f"<Answer {self.code} {self.body[:200]!r}>"



Fetch = Callable[..., Awaitable[Answer]]


@dataclass
class Tenant:
    """An account with an owner, an organization and one site, signed in."""

    email: str
    user_id: str
    account_id: str
    organization_id: str
    token: str
    refresh_token: str
    site_id: str
    api_key: str
    public_key: str


async def all_documents_text(store: Any) -> str:
    """Every document of every collection, as text, for "this value is nowhere" checks."""
    dump: list[str] = []
    for name in await store.collection_names():
        dump.extend([repr(doc) async for doc in store.collection(name).find({})])
    return "\n".join(dump)


async def pageviews(deps: Any, site_id: str) -> list[dict[str, Any]]:
    """Every stored pageview of a site, oldest first, with its visitor id."""
    events = []
    async for bucket in deps.store.collection("pageview_buckets").find({"siteId": site_id}):
        events.extend({**event, "visitorId": bucket["visitorId"]} for event in bucket["events"])
    return sorted(events, key=lambda event: event["at"])
