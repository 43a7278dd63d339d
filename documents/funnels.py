"""Funnels: the shop funnel built in and the ones a site's owner defines.

Definitions (`funnels`, one document per owner-defined funnel) have 2 to MAX_STEPS steps; a
step is a page pattern in the excluded-URL syntax (privacy/exclusion.py; the pattern check is
passed in, as documents/ imports nothing of privacy/) or an event: a product view (a pageview
attributed to a product), an add to cart, a checkout started or a paid order
(documents/commerce.py). How the sessions of a date range go through a funnel is
derived/funnel_reports.py.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from documents import commerce
from documents.accounts import new_id
from documents.store import ASCENDING, Index, Store
from errors import InvalidInput, NotFound

COLLECTION = "funnels"
MIN_STEPS, MAX_STEPS = 2, 8
#: A site's own funnels: each report reads the range's visits, so the list stays short.
MAX_FUNNELS_PER_SITE = 50
#: A pageview attributed to a product: the step before the shop's own events.
PRODUCT_VIEW = "product_view"
#: The events a step can be, in the shop funnel's order.
STEP_EVENTS = (PRODUCT_VIEW, commerce.ADD_TO_CART, commerce.CHECKOUT_STARTED, commerce.PAID)
EVENT_LABELS = {PRODUCT_VIEW: "Product view", commerce.ADD_TO_CART: "Add to cart",
                commerce.CHECKOUT_STARTED: "Checkout", commerce.PAID: "Order"}
SHOP_FUNNEL_ID = "shop"

INDEXES = [
    Index(COLLECTION, (("siteId", ASCENDING), ("createdAt", ASCENDING))),
]

PatternCheck = Callable[[str], str]


def shop_funnel() -> dict[str, Any]:
    """The built-in funnel: product view, add to cart, checkout, order."""
    return {"_id": SHOP_FUNNEL_ID, "name": "Shop", "builtIn": True, "createdAt": None,
            "updatedAt": None,
            "steps": [{"kind": "event", "event": event, "label": EVENT_LABELS[event]}
                      for event in STEP_EVENTS]}


def view(funnel: dict[str, Any]) -> dict[str, Any]:
    """A definition as the API shows it."""
    return {"id": funnel["_id"], "name": funnel["name"], "builtIn": bool(funnel.get("builtIn")),
            "steps": [step_view(step) for step in funnel["steps"]],
            "createdAt": funnel.get("createdAt"), "updatedAt": funnel.get("updatedAt")}


def step_view(step: dict[str, Any]) -> dict[str, Any]:
    shown = {"kind": step["kind"], "label": step_label(step)}
    if step["kind"] == "page":
        shown["pattern"] = step["pattern"]
    else:
        shown["event"] = step["event"]
    return shown


def step_label(step: dict[str, Any]) -> str:
    """The step's name: the owner's label, else the event's name or the pattern."""
    if step.get("label"):
        return str(step["label"])
    return EVENT_LABELS[step["event"]] if step["kind"] == "event" else step["pattern"]


def checked_name(name: str) -> str:
    """The name without its outer spaces; InvalidInput when nothing is left."""
    if not name.strip():
        raise InvalidInput("a funnel has a name", field="name")
    return name.strip()


def checked_steps(steps: list[dict[str, Any]], check_pattern: PatternCheck
                  ) -> list[dict[str, Any]]:
    """The steps with their patterns normalised; InvalidInput names what does not fit."""
    if not MIN_STEPS <= len(steps) <= MAX_STEPS:
        raise InvalidInput(f"a funnel has {MIN_STEPS} to {MAX_STEPS} steps", field="steps")
    checked = []
    for index, step in enumerate(steps):
        label = (step.get("label") or "").strip() or None
        if step.get("kind") == "page":
            try:
                checked.append({"kind": "page", "pattern": check_pattern(step["pattern"]),
                                "label": label})
            except (KeyError, ValueError) as exc:
                raise InvalidInput(str(exc) if isinstance(exc, ValueError)
                                   else "a page step has a pattern",
                                   field=f"steps.{index}.pattern") from None
        elif step.get("kind") == "event" and step.get("event") in STEP_EVENTS:
            checked.append({"kind": "event", "event": step["event"], "label": label})
        else:
            raise InvalidInput(f"a step is a page pattern or one of the events "
                               f"{', '.join(STEP_EVENTS)}", field=f"steps.{index}")
    return checked


# Definitions ----------------------------------------------------------------------------------


async def list_funnels(store: Store, site_id: str) -> list[dict[str, Any]]:
    """The shop funnel, then the site's own funnels, oldest first."""
    cursor = store.collection(COLLECTION).find({"siteId": site_id}).sort(
        [("createdAt", ASCENDING), ("_id", ASCENDING)]).limit(MAX_FUNNELS_PER_SITE)
    return [shop_funnel(), *[funnel async for funnel in cursor]]


async def find_funnel(store: Store, site_id: str, funnel_id: str) -> dict[str, Any]:
    """One funnel of the site (the shop funnel by its id "shop"); NotFound otherwise."""
    if funnel_id == SHOP_FUNNEL_ID:
        return shop_funnel()
    funnel = await store.collection(COLLECTION).find_one({"_id": funnel_id, "siteId": site_id})
    if funnel is None:
        raise NotFound("funnel not found")
    return funnel


async def create_funnel(store: Store, site_id: str, body: dict[str, Any],
                        check_pattern: PatternCheck, *, session: Any) -> dict[str, Any]:
    """Store a new funnel of the site."""
    if await store.collection(COLLECTION).count_documents(
            {"siteId": site_id}, session=session) >= MAX_FUNNELS_PER_SITE:
        raise InvalidInput(f"a site has at most {MAX_FUNNELS_PER_SITE} funnels of its own")
    now = datetime.now(UTC)
    funnel = {"_id": new_id(), "siteId": site_id, "name": checked_name(body["name"]),
              "steps": checked_steps(body["steps"], check_pattern), "createdAt": now,
              "updatedAt": now}
    await store.collection(COLLECTION).insert_one(funnel, session=session)
    return funnel


def _own(funnel_id: str) -> None:
    if funnel_id == SHOP_FUNNEL_ID:
        raise InvalidInput("the shop funnel is built in and cannot be changed", field="id")


async def update_funnel(store: Store, site_id: str, funnel_id: str, body: dict[str, Any],
                        check_pattern: PatternCheck, *, session: Any
                        ) -> tuple[dict[str, Any], list[str]]:
    """Change a funnel's name or steps; returns it and the fields that changed."""
    _own(funnel_id)
    funnel = await store.collection(COLLECTION).find_one({"_id": funnel_id, "siteId": site_id},
                                                         session=session)
    if funnel is None:
        raise NotFound("funnel not found")
    changes: dict[str, Any] = {}
    if "name" in body:
        name = checked_name(body["name"])
        if name != funnel["name"]:
            changes["name"] = name
    if "steps" in body:
        steps = checked_steps(body["steps"], check_pattern)
        if steps != funnel["steps"]:
            changes["steps"] = steps
    if not changes:
        return funnel, []
    await store.collection(COLLECTION).update_one(
        {"_id": funnel_id, "siteId": site_id},
        {"$set": {**changes, "updatedAt": datetime.now(UTC)}}, session=session)
    return {**funnel, **changes}, sorted(changes)


async def delete_funnel(store: Store, site_id: str, funnel_id: str, *, session: Any) -> None:
    _own(funnel_id)
    deleted = await store.collection(COLLECTION).delete_one(
        {"_id": funnel_id, "siteId": site_id}, session=session)
    if not deleted.deleted_count:
        raise NotFound("funnel not found")
