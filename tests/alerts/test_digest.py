"""The digest (issue 42 point 3): a real SMTP server receives one daily digest for the member who
asked for it, with yesterday's figures in the site's time zone equal to the counts worked out
by hand below, none for a member who did not ask, exactly one when evaluators meet, the HTML
part escaped; the weekly one covers only a whole past week; a site without an e-mail channel
is skipped and the skip recorded once."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from config.metrics import Metrics
from documents import digests, sites
from tasks import digests as digest_task
from tasks.alerts import AlertEvaluator
from tests.notifications.test_notifications import (
    Mailbox,
    configure,
    email_channel,
    settings_env,
    smtp_server,
)
from tests.support.app import Fetch, Tenant
from tests.support.ingest import Ingest, send_errors

__all__ = ["settings_env", "smtp_server"]

SHOP = "https://shop.example"
TOKYO = ZoneInfo("Asia/Tokyo")  # UTC+9 all year: the site's days are not UTC's
NAME = "Tom & <Jerry>"  # the site's name is the owner's text, escaped like any other
SCRIPT = "<script>alert('x')</script> & \"pay\" is undefined"


async def _site_in_tokyo(deps, tenant: Tenant) -> Any:
    await deps.store.collection(sites.COLLECTION).update_one(
        {"_id": tenant.site_id}, {"$set": {"name": NAME, "settings.timeZone": "Asia/Tokyo",
                                           "settings.reportingCurrency": "EUR",
                                           sites.TIME_ZONES: [{"from": None,
                                                               "zone": "Asia/Tokyo"}]}})
    return sites.day_clock(await sites.find_site(deps.store, tenant.site_id))


def _tokyo(day: date, hour: int, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=TOKYO).astimezone(UTC)


async def _session(ingest: Ingest, name: str, start: datetime, reached: int, *,
                   total: str = "20.00") -> None:
    """A session of its own visitor from `start`: a product view, then the first `reached`
    shop steps (cart, checkout, an order paid); 0 is a home page only."""
    context = {"visitorId": f"v-{name}", "sessionId": f"s-{name}"}

    def at(minutes: int) -> str:
        return (start + timedelta(minutes=minutes)).isoformat()

    await ingest("pageviews", {**context, "url": f"{SHOP}/product/a" if reached else f"{SHOP}/",
                               "occurredAt": at(0), "pageviewId": f"{name}-0",
                               **({"productId": "p-1"} if reached else {})})
    if reached >= 2:
        await ingest("commerce", {"eventId": f"{name}-cart", "type": "add_to_cart", **context,
                                  "productId": "p-1", "occurredAt": at(2)})
    if reached >= 3:
        await ingest("commerce", {"eventId": f"{name}-co", "type": "checkout_started",
                                  **context, "occurredAt": at(4)})
    if reached >= 4:
        await ingest("commerce", {"eventId": f"{name}-placed", "type": "order_placed",
                                  **context, "orderId": f"o-{name}", "total": total,
                                  "currency": "EUR", "occurredAt": at(6)})
        await ingest("commerce", {"eventId": f"{name}-paid", "type": "order_paid",
                                  "orderId": f"o-{name}", "occurredAt": at(7)})


def _error(name: str, message: str, at: datetime) -> dict[str, Any]:
    return {"visitorId": f"v-{name}", "sessionId": f"s-{name}", "source": "javascript",
            "type": "TypeError", "message": message, "url": f"{SHOP}/checkout",
            "stack": f"TypeError: {message}\n    at pay (https://shop.example/pay.js:1:1)",
            "occurredAt": at.isoformat()}


def _parts(mail: Any) -> tuple[str, str]:
    found = {part.get_content_type(): part.get_payload(decode=True).decode().replace("\r\n", "\n")
             for part in mail.walk() if not part.is_multipart()}
    return found["text/plain"], found["text/html"]


async def _want(fetch: Fetch, tenant: Tenant, token: str, digest: str) -> None:
    answer = await fetch(f"/api/v1/sites/{tenant.site_id}/alert-preferences", "PATCH",
                         token=token, json_body={"digest": digest})
    assert answer.code == 200, answer


def _evaluator(deps) -> AlertEvaluator:
    return AlertEvaluator(deps.store, Metrics(), deps.notifier, interval_seconds=60,
                          purge_interval_seconds=3600)


async def test_a_daily_digest_is_mailed_once_to_the_member_who_asked_with_yesterdays_figures(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, viewer_token: str,
        smtp_server: tuple[Mailbox, int]):
    """The site is in Tokyo; T is its today, Y yesterday, P the day before.

    Y 00:30 d4 a product view only (UTC: still P's date)
    Y 12:00 d1 all the way, paid 20.00 EUR; d2 to the checkout, hit three times by an error
            whose message is markup; d3 a product view only
    T 00:30 d7 all the way (UTC: still Y's date): not yesterday in Tokyo
    P 12:00 p1 all the way, paid 30.00 EUR; p2 a product view only; p1 hit by another error
    Yesterday: 4 visitors, 1 order, 20.00 EUR, 0.25 orders per visitor; the day before: 2, 1,
    30.00 EUR, 0.5. Funnel: 4, 2, 2, 1 sessions at the steps, so 2 stopped after the product
    view (before the cart), the biggest drop-off. No error has 30 sessions hit: none is
    significant, so the errors are listed by occurrences (yesterday's one, 3).
    """
    mailbox, port = smtp_server
    clock = await _site_in_tokyo(deps, tenant)
    await configure(fetch, tenant, {"email": email_channel(port)})
    await _want(fetch, tenant, tenant.token, "daily")  # the viewer did not ask
    today = clock.today()
    yesterday, before = today - timedelta(days=1), today - timedelta(days=2)
    await _session(ingest, "d4", _tokyo(yesterday, 0, 30), 1)
    await _session(ingest, "d1", _tokyo(yesterday, 12), 4)
    await _session(ingest, "d2", _tokyo(yesterday, 12), 3)
    await _session(ingest, "d3", _tokyo(yesterday, 12, 5), 1)
    await _session(ingest, "d7", _tokyo(today, 0, 30), 4)
    await _session(ingest, "p1", _tokyo(before, 12), 4, total="30.00")
    await _session(ingest, "p2", _tokyo(before, 12, 5), 1)
    await send_errors(ingest, deps, [
        *[_error("d2", SCRIPT, _tokyo(yesterday, 12, 3)) for _ in range(3)],
        _error("p1", "before is undefined", _tokyo(before, 12, 1))])
    assert clock.day_of(_tokyo(yesterday, 0, 30)) == yesterday.isoformat() != _tokyo(
        yesterday, 0, 30).date().isoformat()

    evaluators = [_evaluator(deps) for _ in range(3)]
    # Before 07:00 in Tokyo nothing is due.
    early = clock.start_of(today) + timedelta(hours=6, minutes=59)
    assert await evaluators[0].send_digests(early) == 0
    now = clock.start_of(today) + timedelta(hours=8)
    sent = await asyncio.gather(*(each.send_digests(now) for each in evaluators))
    assert sum(sent) == 1
    assert await evaluators[1].send_digests(now + timedelta(hours=3)) == 0
    assert await deps.notifier.drain(within=10)

    # The new errors were mailed to the channel's recipients as usual; one digest to the member.
    [mail] = [mail for mail in mailbox.messages if "digest" in mail["Subject"]]
    assert mail["To"] == tenant.email
    assert mail["Subject"] == f"[{NAME}] Daily digest, {yesterday.isoformat()}"
    text, html = _parts(mail)
    assert "Visitors: 4 (2)\n" in text
    assert "Orders: 1 (1)\n" in text
    assert "Revenue: 20.00 EUR (30.00 EUR)\n" in text
    assert "Conversion (orders per visitor): 25.00 % (50.00 %)\n" in text
    assert "Errors with the most occurrences:\n" in text
    assert f"- TypeError: {SCRIPT}: 3 occurrences\n\n" in text
    assert "before is undefined" not in text
    assert ("Biggest shop funnel drop-off: 2 of 4 sessions stopped after Product view "
            "(before Add to cart)") in text
    assert f"/app/sites/{tenant.site_id}/errors" in text
    # The shop's text is escaped in the HTML part, never markup.
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; " \
        "&amp; &quot;pay&quot;" in html
    assert f"for {NAME}" in text and "for Tom &amp; &lt;Jerry&gt;</h1>" in html
    assert "<td>4</td><td>2</td>" in html and "v-d1" not in text + html

    [record] = await digests.deliveries_of_site(deps.store, tenant.site_id, limit=10)
    assert (record["period"], record["outcome"]) == (f"daily:{yesterday.isoformat()}", "sent")
    log = await fetch(f"/api/v1/sites/{tenant.site_id}/notifications/deliveries",
                      token=tenant.token)
    assert [(d["event"], d["status"]) for d in log.json()["deliveries"]
            if d["event"].startswith("digest")] == [("digest.daily", "delivered")]


async def test_the_weekly_digest_covers_only_a_whole_past_week_monday_to_sunday(
        fetch: Fetch, tenant: Tenant, deps, ingest: Ingest, smtp_server: tuple[Mailbox, int]):
    mailbox, port = smtp_server
    clock = await _site_in_tokyo(deps, tenant)
    await configure(fetch, tenant, {"email": email_channel(port)})
    await _want(fetch, tenant, tenant.token, "weekly")
    real_now = datetime.now(UTC)
    today = clock.today(real_now)
    monday = today - timedelta(days=today.weekday())
    # One visitor a minute ago (this week), one eight days ago (last week, or the one before
    # when today is Monday), one six days ago (this week or last).
    moments = [real_now - timedelta(minutes=1), real_now - timedelta(days=8),
               real_now - timedelta(days=6)]
    for n, moment in enumerate(moments):
        await _session(ingest, f"w{n}", moment, 1)
    await deps.derivation.fold()

    def visitors_between(first: date, last: date) -> int:
        return sum(1 for moment in moments if first <= clock.date_of(moment) <= last)

    # Today: last week's digest, without this week's days.
    evaluator = _evaluator(deps)
    assert await evaluator.send_digests(clock.start_of(today) + timedelta(hours=8)) == 1
    assert await deps.notifier.drain(within=10)
    # Next Monday before 07:00 this week is not due yet; from 07:00 it is, once.
    next_monday = clock.start_of(monday + timedelta(days=7))
    assert await evaluator.send_digests(next_monday + timedelta(hours=6)) == 0
    assert await evaluator.send_digests(next_monday + timedelta(hours=7, minutes=30)) == 1
    assert await evaluator.send_digests(next_monday + timedelta(days=2)) == 0
    assert await deps.notifier.drain(within=10)

    last_week, this_week = mailbox.messages
    sunday = monday + timedelta(days=6)
    assert last_week["Subject"] == (f"[{NAME}] Weekly digest, {monday - timedelta(days=7)} to "
                                    f"{monday - timedelta(days=1)}")
    assert this_week["Subject"] == f"[{NAME}] Weekly digest, {monday} to {sunday}"
    this_text, _ = _parts(this_week)
    last_text, _ = _parts(last_week)
    assert this_text.count("\n") > 5 and visitors_between(monday, sunday) >= 1
    assert f"Visitors: {visitors_between(monday, sunday)} (" \
           f"{visitors_between(monday - timedelta(days=7), monday - timedelta(days=1))})" \
           in this_text
    assert f"Visitors: {visitors_between(monday - timedelta(days=7), monday - timedelta(1))} (" \
           f"{visitors_between(monday - timedelta(14), monday - timedelta(8))})" in last_text


async def test_a_site_without_an_e_mail_channel_is_skipped_and_the_skip_counted_once(
        fetch: Fetch, tenant: Tenant, deps):
    await _want(fetch, tenant, tenant.token, "daily")
    metrics = Metrics()
    evaluator = AlertEvaluator(deps.store, metrics, deps.notifier, interval_seconds=60,
                               purge_interval_seconds=3600)
    clock = await _site_in_tokyo(deps, tenant)
    now = clock.start_of(clock.today()) + timedelta(hours=9)
    assert await evaluator.send_digests(now) == 0
    assert await evaluator.send_digests(now + timedelta(hours=1)) == 0
    [record] = await digests.deliveries_of_site(deps.store, tenant.site_id, limit=10)
    assert record["outcome"] == "skipped: no e-mail channel"
    assert metrics.value(digest_task.OUTCOME_METRIC, period="daily", outcome="skipped") == 1
