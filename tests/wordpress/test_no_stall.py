"""No visitor waits on the service (issue 33): with the service hung, on `php -S` (no PHP-FPM,
so nothing can release a response early), a lead, a survey answer and a checkout answer at once,
are kept in the outbox, and are delivered by a request of their own. Nor does the owner: "Check
connection" answers within 3 s (issue 40)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.support.browser import eventually
from tests.support.processes import free_port
from tests.wordpress.conftest import Shop, ShopFactory, documents

JSON = {"Content-Type": "application/json"}


class HungService:
    """A port that accepts connections, reads what it is sent, and never answers."""

    def __init__(self) -> None:
        self.accepted = 0
        #: Connections the client gave up on (closed its end): a client that waited for us.
        self.finished = 0
        self.received = b""
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.url = ""

    async def start(self) -> HungService:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.writers.append(writer)
        while chunk := await reader.read(65536):
            self.received += chunk
        self.finished += 1

    async def close(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.server is not None:
            self.server.close()


async def _backlog(shop: Shop) -> list[dict[str, Any]]:
    return await shop.wp.php("""global $wpdb; return $wpdb->get_results('SELECT path, attempts
        FROM ' . \\VisitorService\\Outbox::table() . ' ORDER BY id', ARRAY_A);""")


async def test_with_the_service_hung_leads_surveys_and_checkouts_answer_without_waiting(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    hung = await HungService().start()
    try:
        await shop.wp.php(f"update_option('visitor_service_url', '{hung.url}'); return true;")
        lead = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON, body=json.dumps(
            {"visitorId": "visitor-hung-1", "email": "hung@example.com", "url": shop.url + "/"}))
        # Answered while no connection to the service had ended: nobody waited for its answer.
        assert (lead.code, hung.finished) == (202, 0)
        survey = await shop.http("/wp-json/service/v1/surveys", "POST", headers=JSON,
                                 body=json.dumps({"visitorId": "visitor-hung-1", "surveyId": "nps",
                                                  "answers": [{"question": "Q?", "score": 7}]}))
        assert (survey.code, hung.finished) == (202, 0)
        cart = "%7B%22" + str(shop.wp.product_id) + "%22%3A1%7D"
        checkout = await shop.http("/?fake_wc_checkout=1&email=hung@example.com", headers={
            "Cookie": f"svc_vid=visitor-hung-1; fake_wc_cart={cart}"})
        assert checkout.code == 200 and b"received" in checkout.body
        assert hung.finished == 0
        # All are kept: the lead, the survey answer, and the checkout's order and lead.
        assert [row["path"] for row in await _backlog(shop)] == [
            "/ingest/leads", "/ingest/surveys", "/ingest/commerce", "/ingest/leads"]

        # The delivery ran in a request of its own (the loopback to the deliver route): it
        # reached the hung service and gave up after its own timeout. Only one was started: the
        # others waited for it, and it tried each kind once (a failure pauses only its kind), so
        # the checkout's lead, behind the lead that failed, was not sent to the hung service.
        await eventually(lambda: _true(hung.finished >= 3), within=30,
                         message="the delivery gave up on each kind")
        assert b"POST /ingest/leads" in hung.received and b"hung@example.com" in hung.received
        await asyncio.sleep(1)
        assert hung.accepted == 3
        assert [row["attempts"] for row in await _backlog(shop)] == ["1", "1", "1", "0"]
    finally:
        await hung.close()

    # The service is back: the owner's "Retry now" delivers everything kept, once.
    await shop.wp.php(f"""update_option('visitor_service_url', '{shop.service.url}');
        \\VisitorService\\Outbox::retryNow(); return true;""")
    leads = await documents(deps, "leads", shop.tenant.site_id)
    assert sorted(lead["kind"] for lead in leads) == ["checkout", "form"]
    assert len(await documents(deps, "survey_responses", shop.tenant.site_id)) == 1
    orders = await documents(deps, "orders", shop.tenant.site_id)
    assert [order["status"] for order in orders] == ["placed"]
    assert await _backlog(shop) == []


async def _true(value: bool) -> bool:
    return value


async def test_check_connection_answers_within_three_seconds_with_the_service_hung_or_gone(
        open_shop: ShopFactory):
    shop = await open_shop({"recordings": False})
    hung = await HungService().start()
    try:
        hung_check = await _check_connection(shop, hung.url)
    finally:
        await hung.close()
    assert hung_check["ok"] is False
    assert 2.5 <= hung_check["took"] <= 3.3, hung_check  # it waited its 3 s, and no longer
    assert hung_check["messages"] == [f"The service at {hung.url} did not answer within 3 "
                                      "seconds: it may be stopped or overloaded."]
    gone = f"http://127.0.0.1:{free_port()}"  # nothing listens: refused at once
    gone_check = await _check_connection(shop, gone)
    assert gone_check["took"] < 1, gone_check
    assert len(gone_check["messages"]) == 1
    assert gone_check["messages"][0].startswith(f"The service at {gone} could not be reached (")


async def _check_connection(shop: Shop, url: str) -> dict[str, Any]:
    """Settings → "Check connection" against `url`, with the time it took inside PHP."""
    return await shop.wp.php(f"""update_option('visitor_service_url', '{url}');
        $started = microtime(true);
        $check = \\VisitorService\\Settings::checkConnection();
        return $check + ['took' => microtime(true) - $started];""")


# Delivery a shop's cron cannot starve (issue 40 point 3): with WooCommerce, the outbox is
# delivered by Action Scheduler's actions (the stand-in: mu-plugins/fake-action-scheduler.php);
# a failure pauses only its kind, which is probed again seconds later, and a new item is tried at
# once.

MU_PLUGINS = ("wp-content", "mu-plugins")


async def _lead(shop: Shop, visitor: str) -> None:
    answer = await shop.http("/wp-json/service/v1/leads", "POST", headers=JSON, body=json.dumps(
        {"visitorId": visitor, "email": f"{visitor}@example.com", "url": shop.url + "/"}))
    assert answer.code == 202


async def _tried(shop: Shop, path: str) -> bool:
    """Whether a delivery tried (and failed) an item of `path`."""
    return bool(await shop.wp.php(f"""global $wpdb; return (int) $wpdb->get_var(
        "SELECT MAX(attempts) FROM {{$wpdb->prefix}}visitor_service_outbox
         WHERE path = '{path}'");"""))


async def _probe_in(shop: Shop) -> int:
    """Seconds until the delivery Action Scheduler holds for the plugin (-1: none)."""
    return await shop.wp.php("""$next = as_next_scheduled_action('visitor_service_deliver', [],
        'visitor-service'); return is_int($next) ? $next - time() : -1;""")


async def test_a_cron_job_that_exits_before_the_plugins_does_not_hold_back_the_backlog(
        open_shop: ShopFactory, deps):
    """WooCommerce's privacy cleanup ends WP-Cron's run with exit(), before the plugin's hook,
    and keeps the cron lock 60 s; before, the plugin's hook sent 50 items a run. The job here
    is due first on every run. Action Scheduler's queue runs apart from that run (its own
    runner: here the stand-in's, as `wp action-scheduler run` would) and drains everything."""
    shop = await open_shop({"recordings": False})
    await shop.service.stop()
    await _lead(shop, "visitor-exit-0")
    await eventually(lambda: _tried(shop, "/ingest/leads"), message="the failed delivery")
    # 120 leads wait: more than two batches.
    await shop.wp.php("""global $wpdb; $table = \\VisitorService\\Outbox::table();
        $wpdb->query("INSERT INTO $table (path, body, attempts, next_attempt_at, created_at)
            SELECT path, JSON_SET(body, '$.leadId', CONCAT('lead-exit-', seq),
                '$.email', CONCAT('exit', seq, '@example.com')), 0, 0, created_at
            FROM $table, seq_1_to_119");
        delete_option('fake_exiting_cron_runs'); return true;""")
    assert 0 <= await _probe_in(shop) <= 5  # Action Scheduler probes the service within seconds
    flag = shop.wp.site.joinpath(*MU_PLUGINS, "exiting-cron-job.txt")
    flag.write_text("on")
    try:
        shop.service.start()
        await shop.wp.php("""wp_clear_scheduled_hook('visitor_service_retry');
            wp_schedule_event(time() - 1, 'visitor_service_five_minutes', 'visitor_service_retry');
            return true;""")
        assert (await shop.http("/wp-cron.php")).code == 200
        # The run ended in the other job's exit(): no hook after it was called.
        assert await shop.wp.php("return (int) get_option('fake_exiting_cron_runs');") == 1
        assert await shop.wp.php("return \\VisitorService\\Outbox::backlog();") == 120

        await asyncio.sleep(max(0, await _probe_in(shop)) + 1)
        assert await shop.wp.php("return fake_as_run_queue();") == 1  # one action, every batch
        assert await shop.wp.php("return \\VisitorService\\Outbox::backlog();") == 0
        leads = await documents(deps, "leads", shop.tenant.site_id)
        assert len({lead["email"] for lead in leads}) == 120
    finally:
        flag.unlink()
        await shop.wp.php("""delete_transient('doing_cron');
            wp_clear_scheduled_hook('fake_exiting_cron_job'); return true;""")


async def test_an_item_queued_after_the_service_is_back_goes_out_at_once_with_the_backlog(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    await shop.service.stop()
    await _lead(shop, "visitor-back-1")
    await eventually(lambda: _tried(shop, "/ingest/leads"), message="the failed delivery")
    shop.service.start()
    # Within the leads' pause, with no queue runner and no cron: the new lead is a probe of its
    # own, and once it is taken, the lead that waited goes with it.
    await _lead(shop, "visitor-back-2")
    leads = await eventually(lambda: _leads_of(deps, shop, 2), within=4, message="both leads")
    assert sorted(lead["visitorId"] for lead in leads) == ["visitor-back-1", "visitor-back-2"]
    assert await shop.wp.php("return \\VisitorService\\Outbox::backlog();") == 0
    assert await shop.wp.php("return get_option('visitor_service_paused', []);") == []


async def test_a_failing_kind_is_paused_alone_and_probed_again_within_seconds(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    flag = shop.wp.site.joinpath(*MU_PLUGINS, "failing-ingest.txt")
    flag.write_text("/ingest/surveys")  # the service answers 503 there, and only there
    try:
        survey = await shop.http("/wp-json/service/v1/surveys", "POST", headers=JSON,
                                 body=json.dumps({"visitorId": "visitor-kind-1", "surveyId": "nps",
                                                  "answers": [{"question": "Q?", "score": 9}]}))
        assert survey.code == 202
        await eventually(lambda: _tried(shop, "/ingest/surveys"), message="the failed survey")
        await _lead(shop, "visitor-kind-1")  # leads are not held back by the surveys' failure
        await eventually(lambda: _leads_of(deps, shop, 1), message="the lead")
        paused = await shop.wp.php("return get_option('visitor_service_paused');")
        assert list(paused) == ["/ingest/surveys"]
        probe = await _probe_in(shop)
        assert 0 <= probe <= 5
    finally:
        flag.unlink()
    await asyncio.sleep(probe + 1)
    assert await shop.wp.php("return fake_as_run_queue();") == 1
    assert len(await documents(deps, "survey_responses", shop.tenant.site_id)) == 1
    assert await shop.wp.php("return \\VisitorService\\Outbox::backlog();") == 0


async def test_without_action_scheduler_the_probe_is_a_wp_cron_event(
        open_shop: ShopFactory, deps):
    shop = await open_shop({"recordings": False})
    without = shop.wp.site.joinpath(*MU_PLUGINS, "no-action-scheduler.txt")
    without.write_text("a shop without WooCommerce's queue")
    try:
        await shop.service.stop()
        await _lead(shop, "visitor-cron-1")
        await eventually(lambda: _tried(shop, "/ingest/leads"), message="the failed delivery")
        probe = await shop.wp.php("""return [function_exists('as_next_scheduled_action'),
            wp_next_scheduled('visitor_service_deliver') - time()];""")
        assert probe[0] is False and 0 <= probe[1] <= 5, probe
        shop.service.start()
        await asyncio.sleep(probe[1] + 1)
        assert (await shop.http("/wp-cron.php")).code == 200
        await eventually(lambda: _leads_of(deps, shop, 1), message="the lead, by WP-Cron")
    finally:
        without.unlink()


async def _leads_of(deps, shop: Shop, count: int) -> list[dict[str, Any]] | None:
    found = await documents(deps, "leads", shop.tenant.site_id)
    return found if len(found) >= count else None
