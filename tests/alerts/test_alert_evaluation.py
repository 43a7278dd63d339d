"""Each kind of alert rule over crafted figures: it fires once per episode, says nothing on too
little data, and sends "resolved" when the figure recovers; two evaluators send each alert
once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from config.metrics import Metrics
from derived import daily_figures
from documents import retention, sites
from tasks.alerts import AlertEvaluator
from tests.alerts import figures
from tests.alerts.conftest import Outbox
from tests.support.app import Fetch, Tenant

HOUR = timedelta(hours=1)


async def test_errors_on_checkout_pages_fire_at_the_threshold_once_and_resolve(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    rule = await figures.rule(fetch, tenant, "checkoutErrors", {"sessions": 5})
    now = datetime.now(UTC)
    # Four sessions on checkout, many on a product page: under the threshold.
    await figures.occurrences(deps.store, tenant.site_id, "e1", now - timedelta(minutes=10), 4,
                              page="/checkout/pay")
    await figures.occurrences(deps.store, tenant.site_id, "e1", now - HOUR / 2, 20)
    await evaluator.evaluate_site(tenant.site_id, now)
    assert outbox.events == []
    assert (await figures.rule_state(fetch, tenant, rule["id"]))["figures"]["sessions"] == 4

    # A fifth session on the cart, two occurrences in it; one more two hours ago does not count.
    await figures.occurrences(deps.store, tenant.site_id, "e2", now - HOUR / 4, 2,
                              page="/cart", sessions=1)
    await figures.occurrences(deps.store, tenant.site_id, "e2", now - 2 * HOUR, 3, page="/cart")
    await evaluator.evaluate_site(tenant.site_id, now)
    await evaluator.evaluate_site(tenant.site_id, now + timedelta(minutes=1))
    [fired] = outbox.of("fired")
    assert fired["figures"] == {"sessions": 5, "threshold": 5}
    assert fired["page"] == "errors" and fired["rule"]["id"] == rule["id"]
    state = await figures.rule_state(fetch, tenant, rule["id"])
    assert (state["state"], state["firing"]) == ("firing", ["rule"])

    await evaluator.evaluate_site(tenant.site_id, now + 2 * HOUR)
    [resolved] = outbox.of("resolved")
    assert resolved["id"] == fired["id"]
    assert (await figures.rule_state(fetch, tenant, rule["id"]))["state"] == "ok"


async def test_an_error_spike_fires_against_the_same_hour_of_the_week_before(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    await figures.rule(fetch, tenant, "errorSpike")
    # The site is new today: eight days on, its baseline week is complete.
    now = datetime.now(UTC) + timedelta(days=8)
    for days in range(1, 8):
        await figures.occurrences(deps.store, tenant.site_id, "e1",
                                  now - timedelta(days=days) - HOUR / 2, 2)
    await figures.occurrences(deps.store, tenant.site_id, "e1", now - HOUR / 2, 30)
    # Another error at its usual rate: 10 an hour, every day.
    for days in range(0, 8):
        await figures.occurrences(deps.store, tenant.site_id, "e2",
                                  now - timedelta(days=days) - HOUR / 3, 10)

    await evaluator.evaluate_site(tenant.site_id, now)
    await evaluator.evaluate_site(tenant.site_id, now + timedelta(minutes=5))
    [fired] = outbox.of("fired")
    assert fired["subject"] == "e1" and fired["page"] == "errors/e1"
    assert (fired["figures"]["lastHour"], fired["figures"]["baseline"]) == (30, 14)

    # An hour later the error is quiet: the episode is resolved, and said so once.
    await evaluator.evaluate_site(tenant.site_id, now + 2 * HOUR)
    await evaluator.evaluate_site(tenant.site_id, now + 3 * HOUR)
    [resolved] = outbox.of("resolved")
    assert resolved["id"] == fired["id"] and resolved["page"] == "errors/e1"


async def test_an_error_spike_is_not_judged_before_the_site_has_its_baseline(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    rule = await figures.rule(fetch, tenant, "errorSpike")
    now = datetime.now(UTC)
    await figures.occurrences(deps.store, tenant.site_id, "e1", now - HOUR / 2, 500)
    await evaluator.evaluate_site(tenant.site_id, now)
    assert outbox.events == []
    assert (await figures.rule_state(fetch, tenant, rule["id"]))["state"] == "notEnoughData"


async def test_conversion_falling_fires_against_the_same_weekdays_and_recovers(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    rule = await figures.rule(fetch, tenant, "conversionDrop")
    now = datetime.now(UTC)
    today = now.date()
    for weeks in range(1, 5):
        await figures.stage_sessions(deps.store, tenant.site_id,
                                     (today - timedelta(weeks=weeks)).isoformat(), 1000, 50)
    # Too few sessions today to say anything, however low.
    await figures.stage_sessions(deps.store, tenant.site_id, today.isoformat(), 150, 0)
    await evaluator.evaluate_site(tenant.site_id, now)
    state = await figures.rule_state(fetch, tenant, rule["id"])
    assert (state["state"], outbox.events) == ("notEnoughData", [])

    await figures.stage_sessions(deps.store, tenant.site_id, today.isoformat(), 400, 4)
    await evaluator.evaluate_site(tenant.site_id, now)
    await evaluator.evaluate_site(tenant.site_id, now + timedelta(minutes=1))
    [fired] = outbox.of("fired")
    # By hand: 4 / 400 today, 200 / 4,000 on the four Mondays (or whichever day) before.
    assert fired["figures"]["conversion"] == 0.01
    assert fired["figures"]["baselineConversion"] == 0.05
    assert fired["figures"]["baselineSessions"] == 4000

    await figures.stage_sessions(deps.store, tenant.site_id, today.isoformat(), 400, 19)
    await evaluator.evaluate_site(tenant.site_id, now + 2 * HOUR)
    [resolved] = outbox.of("resolved")
    assert resolved["figures"]["converted"] == 19


async def test_order_silence_fires_for_a_busy_shop_only_and_resolves_with_the_next_order(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    rule = await figures.rule(fetch, tenant, "orderSilence")
    now = datetime.now(UTC)
    # 60 orders, one an hour, ending two days ago: too few to know the shop's usual.
    for hours in range(48, 108):
        await figures.paid_order(deps.store, tenant.site_id, now - hours * HOUR)
    await evaluator.evaluate_site(tenant.site_id, now)
    assert (await figures.rule_state(fetch, tenant, rule["id"]))["state"] == "notEnoughData"

    # 144 orders: one an hour for six days, then nothing for 48 hours.
    for hours in range(108, 192):
        await figures.paid_order(deps.store, tenant.site_id, now - hours * HOUR)
    await evaluator.evaluate_site(tenant.site_id, now)
    [fired] = outbox.of("fired")
    # By hand: each clock hour had 6 orders in 28 days, so 48 hours expect 48 x 6 / 28.
    assert fired["figures"]["expectedOrders"] == round(48 * 6 / 28, 2)
    assert fired["figures"]["minutesSinceLastOrder"] == 48 * 60
    assert fired["page"] == "orders"

    await figures.paid_order(deps.store, tenant.site_id, now + timedelta(minutes=1))
    await evaluator.evaluate_site(tenant.site_id, now + timedelta(minutes=2))
    assert len(outbox.of("resolved")) == 1


async def test_a_lead_and_a_low_survey_answer_fire_once_each_without_personal_data(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    await figures.rule(fetch, tenant, "lead")
    await figures.rule(fetch, tenant, "surveyScore", {"below": 5})
    now = datetime.now(UTC)
    lead_id = await figures.lead(deps.store, tenant.site_id, now - HOUR)
    low = await figures.survey_answer(deps.store, tenant.site_id, now - HOUR, 2)
    await figures.survey_answer(deps.store, tenant.site_id, now - HOUR, 9)
    await evaluator.evaluate_site(tenant.site_id, now)
    await evaluator.evaluate_site(tenant.site_id, now + HOUR)
    assert sorted(event["subject"] for event in outbox.of("fired")) == sorted([lead_id, low])
    assert outbox.of("resolved") == []
    sent = str(outbox.events)
    assert "Ada" not in sent and "ada@example.com" not in sent and "v-lead" not in sent


async def test_an_error_newly_significant_for_revenue_at_risk_fires_with_its_interval(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    await deps.store.collection(sites.COLLECTION).update_one(
        {"_id": tenant.site_id}, {"$set": {"settings.reportingCurrency": "EUR"}})
    await figures.rule(fetch, tenant, "errorRevenueAtRisk")
    now = datetime.now(UTC)
    day = now.date().isoformat()
    # 2,000 sessions, 200 paid; 100 of those not paid were hit by the error.
    await figures.stage_sessions(deps.store, tenant.site_id, day, 2000, 200)
    await figures.error_hits(deps.store, tenant.site_id, day, "e1", 100)
    await deps.store.collection(daily_figures.SITE_DAYS).insert_one({
        "_id": daily_figures.site_day_id(tenant.site_id, day, 0), "siteId": tenant.site_id,
        "day": day, "slot": 0, "orders": {"EUR": 200}, "revenue": {"EUR": 200 * 5000}})
    await evaluator.evaluate_site(tenant.site_id, now)
    await evaluator.evaluate_site(tenant.site_id, now + timedelta(minutes=1))
    [fired] = outbox.of("fired")
    assert fired["subject"] == "e1" and fired["page"] == "errors/e1"
    found = fired["figures"]
    assert found["affectedSessions"] == 100 and found["currency"] == "EUR"
    assert found["revenueAtRiskLow"] <= found["revenueAtRisk"] <= found["revenueAtRiskHigh"]
    assert "at risk (90 % interval" in fired["title"]


async def test_two_evaluators_together_send_each_alert_once(
        fetch: Fetch, tenant: Tenant, deps, outbox: Outbox):
    await figures.rule(fetch, tenant, "checkoutErrors", {"sessions": 1})
    await figures.rule(fetch, tenant, "lead")
    now = datetime.now(UTC)
    await figures.occurrences(deps.store, tenant.site_id, "e1", now - HOUR / 2, 3,
                              page="/checkout")
    await figures.lead(deps.store, tenant.site_id, now - HOUR / 2)
    evaluators = [AlertEvaluator(deps.store, Metrics(), outbox, interval_seconds=60,
                                 purge_interval_seconds=3600) for _ in range(3)]
    # Leases bypassed: every evaluator evaluates the site at the same moment.
    await asyncio.gather(*(each.evaluate_site(tenant.site_id, now) for each in evaluators))
    await asyncio.gather(*(each.evaluate_all() for each in evaluators))
    assert sorted(event["rule"]["kind"] for event in outbox.of("fired")) == [
        "checkoutErrors", "lead"]
    await asyncio.gather(*(each.evaluate_site(tenant.site_id, now + 2 * HOUR)
                           for each in evaluators))
    assert [event["rule"]["kind"] for event in outbox.of("resolved")] == ["checkoutErrors"]


async def test_a_muted_rule_is_not_evaluated_and_a_cool_down_holds_a_second_episode(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    rule = await figures.rule(fetch, tenant, "checkoutErrors", {"sessions": 1},
                              cooldownMinutes=180)
    now = datetime.now(UTC)
    await figures.occurrences(deps.store, tenant.site_id, "e1", now - HOUR / 2, 1,
                              page="/checkout")
    await evaluator.evaluate_site(tenant.site_id, now)
    await evaluator.evaluate_site(tenant.site_id, now + 2 * HOUR)  # resolved
    await figures.occurrences(deps.store, tenant.site_id, "e1", now + 2 * HOUR, 1,
                              page="/checkout")
    await evaluator.evaluate_site(tenant.site_id, now + 2.5 * HOUR)  # within the cool-down
    assert (len(outbox.of("fired")), len(outbox.of("resolved"))) == (1, 1)
    await figures.occurrences(deps.store, tenant.site_id, "e1", now + 3.5 * HOUR, 1,
                              page="/checkout")
    await evaluator.evaluate_site(tenant.site_id, now + 3.6 * HOUR)
    assert len(outbox.of("fired")) == 2

    await fetch(f"/api/v1/sites/{tenant.site_id}/alert-rules/{rule['id']}", "PATCH",
                token=tenant.token, json_body={"muted": True})
    before = len(outbox.events)
    await evaluator.evaluate_site(tenant.site_id, now + 10 * HOUR)
    assert len(outbox.events) == before


async def test_the_purge_overdue_fires_once_and_resolves_when_a_run_is_on_time_again(
        fetch: Fetch, tenant: Tenant, deps, evaluator: AlertEvaluator, outbox: Outbox):
    await figures.rule(fetch, tenant, "purgeOverdue")
    now = datetime.now(UTC)
    # Watched for five hours and no run finished: hourly runs are overdue after three.
    await retention.watch(deps.store, now - 5 * HOUR)
    await evaluator.evaluate_site(tenant.site_id, now)
    await evaluator.evaluate_site(tenant.site_id, now + timedelta(minutes=1))
    [fired] = outbox.of("fired")
    assert fired["page"] == "privacy"
    assert fired["figures"]["overdueSince"] is not None
    daily = AlertEvaluator(deps.store, Metrics(), outbox, interval_seconds=60,
                           purge_interval_seconds=24 * 3600)
    await daily.evaluate_site(tenant.site_id, now + timedelta(minutes=2))
    assert len(outbox.of("resolved")) == 1
