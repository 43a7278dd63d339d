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
        # reached the hung service and gave up after its own timeout. Only one was started:
        # the others waited for the hold instead of piling up on the hung service.
        await eventually(lambda: _true(hung.finished >= 1), within=20,
                         message="the delivery gave up on the hung service")
        assert b"POST /ingest/leads" in hung.received and b"hung@example.com" in hung.received
        await asyncio.sleep(1)
        assert hung.accepted == 1
        assert [row["attempts"] for row in await _backlog(shop)] == ["1", "0", "0", "0"]
    finally:
        await hung.close()

    # The service is back: WP-Cron delivers everything kept, once.
    await shop.wp.php(f"""update_option('visitor_service_url', '{shop.service.url}');
        global $wpdb;
        $wpdb->query('UPDATE ' . \\VisitorService\\Outbox::table() . ' SET next_attempt_at = 0');
        \\VisitorService\\Outbox::retry(); return true;""")
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
