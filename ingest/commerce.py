"""Commerce events a shop's server sends (`POST /ingest/commerce`, issue 31): carts, checkouts
and each step of an order's life, for the WordPress plugin and for shops on other platforms.

The schema (docs/openapi.yaml, `CommerceIngest`) checks the shape; `commerce_event` checks what
it cannot (which fields each type needs, money the currency can hold) and raises InvalidInput
before anything is stored. One transaction stores the event, the order's new summary and the
unfolded fact of what that changes in the figures (documents/commerce.py), and moves the
visitor's last seen, which retention reads, as a pageview does. A later step is its order's
visitor's: it may name no other, is held with them, and is dropped with its placing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from derived import daily_figures, derivation
from documents import commerce, visitors
from errors import InvalidInput
from ingest.intake import Outcome, VisitorIntake, parse_time

#: What each type needs beyond `eventId` and `type`.
REQUIRED: dict[str, tuple[str, ...]] = {
    commerce.ADD_TO_CART: ("visitorId", "productId"),
    commerce.CHECKOUT_STARTED: ("visitorId",),
    commerce.PLACED: ("orderId", "total", "currency"),
    commerce.PAID: ("orderId",),
    commerce.REFUNDED: ("orderId", "amount", "currency"),
    commerce.CANCELLED: ("orderId",),
    commerce.FAILED: ("orderId",),
}
#: The money fields and the stored field each becomes (minor units of `currency`).
MONEY = ("price", "total", "amount")


def commerce_event(site_id: str, payload: dict[str, Any], *, now: datetime) -> dict[str, Any]:
    """The event document to store, or InvalidInput naming the first field that is wrong."""
    kind = payload["type"]
    for name in REQUIRED[kind]:
        if payload.get(name) in (None, ""):
            raise InvalidInput(f"{kind} needs {name}", field=name)
    if kind not in commerce.ORDER_EVENT_TYPES and payload.get("orderId") is not None \
            and kind != commerce.CHECKOUT_STARTED:
        raise InvalidInput(f"{kind} takes no orderId", field="orderId")
    currency = payload.get("currency")
    if currency:
        try:
            commerce.known_currency(currency)
        except commerce.InvalidMoney as exc:
            raise InvalidInput(str(exc), field="currency") from exc
    event: dict[str, Any] = {
        "_id": commerce.event_id(site_id, payload["eventId"]),
        "siteId": site_id, "eventId": payload["eventId"], "type": kind,
        "visitorId": payload.get("visitorId"), "sessionId": payload.get("sessionId"),
        "occurredAt": parse_time(payload.get("occurredAt"), now), "recordedAt": now,
    }
    for name in ("orderId", "productId"):
        if payload.get(name) is not None:
            event[name] = str(payload[name])
    if payload.get("quantity") is not None:
        event["quantity"] = payload["quantity"]
    for name in MONEY:
        if payload.get(name) is None:
            continue
        if not currency:
            raise InvalidInput(f"{name} needs currency", field="currency")
        try:
            event[name] = commerce.minor_units(payload[name], currency)
        except commerce.InvalidMoney as exc:
            raise InvalidInput(f"{name}: {exc}", field=name) from exc
    if currency:
        event["currency"] = currency
    return event


async def record_commerce(intake: VisitorIntake, site: dict[str, Any], payload: dict[str, Any]
                          ) -> Outcome:
    """Admit and store one commerce event; its figures are folded in later."""
    now = datetime.now(UTC)
    event = commerce_event(site["_id"], payload, now=now)
    admitted = payload
    if event["type"] in commerce.ORDER_EVENT_TYPES:
        # A later step of an order (a payment confirmed by the payment provider, a refund made
        # in the shop's back office) often has no visitor at hand: it is the order's visitor's,
        # was consented to when the order was placed, and is held when that visitor is. It
        # may not name another visitor, who would carry a held visitor's order past the gate.
        known = await commerce.known_order(intake.store, site["_id"], event["orderId"])
        if known.dropped is not None:
            # Its placing was dropped, or its visitor erased: the rest of it goes the same way.
            return _dropped(intake, known.dropped)
        if known.visitor_id is not None:
            if payload.get("visitorId") not in (None, "", known.visitor_id):
                raise InvalidInput("the order was placed by another visitor", field="visitorId")
            admitted = {**payload, "visitorId": known.visitor_id, "consent": "granted"}
    decision = await intake.admit(site, "commerce", admitted, held_refused_by_write=True)
    if not decision.allowed:
        reason = decision.reason or "unknown"
        if event["type"] == commerce.PLACED:
            await _drop_order(intake, site["_id"], event, reason)
        return Outcome.dropped(reason)
    visitor_id = admitted.get("visitorId") or None

    async def write(session: Any) -> None:
        if visitor_id is not None:
            # Shopping is activity: a payment or refund weeks after the visit keeps the
            # visitor's profile, and with it their orders, from expiring as a pageview does.
            # The same write refuses a restricted or objecting visitor.
            await visitors.keep_seen(intake.store, site["_id"], visitor_id,
                                     seen_at=event["occurredAt"], session=session)
        recorded = await commerce.record_event(intake.store, site["_id"], event, session=session)
        if recorded.figure_change:
            await _order_fact(intake, site["_id"], event["orderId"], recorded.order,
                              recorded.figure_change, session=session)
        elif event["type"] in (commerce.ADD_TO_CART, commerce.CHECKOUT_STARTED) and visitor_id:
            # A step of the session's journey (derived/journeys.py), folded in later.
            await derivation.add_fact(intake.store, site["_id"], visitor_id, daily_figures.STEP, [
                {"at": event["occurredAt"], "kind": event["type"]}],
                sessionId=event.get("sessionId"), session=session)

    try:
        stored = await intake.store.write_once(write)
    except commerce.TooManyOrderEvents as exc:
        raise InvalidInput("the order has too many events", field="orderId") from exc
    except commerce.NotTheOrders as exc:
        raise InvalidInput(str(exc), field=exc.field) from exc
    except commerce.OrderDropped as dropped:
        # Marked between the look above and this write.
        return _dropped(intake, dropped.reason)
    except visitors.VisitorHeld as held:
        if event["type"] == commerce.PLACED:
            await _drop_order(intake, site["_id"], event, held.reason)
        return intake.refused_held("commerce", held)
    intake.count("commerce", "stored" if stored else "duplicate")
    return Outcome(True, None, payload["eventId"])


async def _order_fact(intake: VisitorIntake, site_id: str, shop_order_id: str,
                      order: dict[str, Any] | None, change: list[dict[str, Any]], *,
                      session: Any) -> None:
    """The fact that moves the figures, and the order's session journey, by `change`."""
    order = order or {}
    await derivation.add_fact(intake.store, site_id, order.get("visitorId"), daily_figures.ORDER,
                              change, orderId=commerce.order_id(site_id, shop_order_id),
                              sessionId=order.get("sessionId"), session=session)


def _dropped(intake: VisitorIntake, reason: str) -> Outcome:
    """Count and answer a step of an order whose steps are dropped, under the order's reason."""
    intake.count("commerce", "dropped", reason)
    return Outcome.dropped(reason)


async def _drop_order(intake: VisitorIntake, site_id: str, event: dict[str, Any],
                      reason: str) -> None:
    """Mark an order whose placing was dropped, so that its later steps are dropped too, and
    take out any steps of it stored before the placing came, with what they counted."""

    async def work(session: Any) -> None:
        removed = await commerce.drop_unplaced_order(intake.store, site_id, event["orderId"],
                                                     reason, at=event["recordedAt"],
                                                     session=session)
        if removed is not None and removed.figure_change:
            await _order_fact(intake, site_id, event["orderId"], removed.order,
                              removed.figure_change, session=session)

    await intake.store.transaction(work)
