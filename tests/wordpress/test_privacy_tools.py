"""WordPress's own privacy tools reach the service (issue 20, point 4).

Tools → Export Personal Data and Tools → Erase Personal Data are driven in real Chromium as the
shop's administrator, for a customer whose lead the plugin sent to the service: the archive
WordPress builds holds a "Visitor Service" section, the erasure empties the service's store of
that person and WordPress shows the receipt counts, and the dashboard's request log lists both.
"""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from playwright.async_api import Browser, Locator, Page

from tests.support.app import Fetch, all_documents_text
from tests.support.browser import eventually
from tests.support.wordpress import ADMIN
from tests.wordpress.conftest import Shop, ShopFactory, documents, log_in

CUSTOMER_EMAIL = "customer@shop.example"  # the test WordPress's customer account
VISITOR_ID = "carla-browser-1"


async def _customer_with_a_lead(shop: Shop, deps) -> None:
    """The customer's visit and newsletter lead, sent by the plugin's own client."""
    sent = await shop.wp.php(f"""
        $view = \\VisitorService\\Client::post('/ingest/pageviews', [
            'visitorId' => '{VISITOR_ID}', 'url' => home_url('/mugs/'), 'title' => 'Mugs']);
        $lead = \\VisitorService\\Client::post('/ingest/leads', [
            'visitorId' => '{VISITOR_ID}', 'email' => '{CUSTOMER_EMAIL}', 'name' => 'Carla',
            'kind' => 'form', 'formId' => 'newsletter', 'fields' => ['topic' => 'blue mugs']]);
        return [$view['status'], $lead['status']];
    """)
    assert sent == [200, 200]
    leads = await documents(deps, "leads", shop.tenant.site_id)
    assert [lead["email"] for lead in leads] == [CUSTOMER_EMAIL]


async def _confirmed_request(shop: Shop, action: str) -> int:
    """A data-subject request the customer has confirmed, as WordPress records one."""
    return await shop.wp.php(f"""
        $id = wp_create_user_request('{CUSTOMER_EMAIL}', '{action}', [], 'confirmed');
        return is_wp_error($id) ? $id->get_error_message() : $id;
    """)


def _request_row(page: Page, request_id: int) -> Locator:
    return page.locator(f"tr:has(input[value='{request_id}'])")


async def _request_log(fetch: Fetch, shop: Shop) -> list[dict[str, Any]]:
    answer = await fetch("/api/v1/requests", token=shop.tenant.token)
    assert answer.code == 200, answer
    return answer.json()


async def test_tools_export_and_erase_personal_data_cover_what_the_service_holds(
        browser: Browser, open_shop: ShopFactory, deps, fetch: Fetch):
    shop = await open_shop()
    await _customer_with_a_lead(shop, deps)
    admin = await browser.new_context(accept_downloads=True)
    await log_in(admin, shop, ADMIN)
    page = await admin.new_page()

    # Tools → Export Personal Data → "Download personal data".
    export_id = await _confirmed_request(shop, "export_personal_data")
    await page.goto(shop.url + "/wp-admin/export-personal-data.php")
    row = _request_row(page, export_id)
    async with page.expect_download(timeout=60_000) as download_info:
        await row.hover()
        await row.get_by_role("button", name="Download personal data", exact=True).click()
    download = await download_info.value
    archive = zipfile.ZipFile(io.BytesIO((await download.path()).read_bytes()))
    names = archive.namelist()
    html = archive.read(next(n for n in names if n.endswith(".html"))).decode()
    assert "Visitor Service" in html and "blue mugs" in html and VISITOR_ID in html
    report = json.loads(archive.read(next(n for n in names if n.endswith(".json"))))
    [groups] = report.values()  # {"Personal Data Export for <e-mail>": {group id: group}}
    section = groups["visitor-service"]
    assert section["group_label"] == "Visitor Service"
    items = [{pair["name"]: pair["value"] for pair in item}
             for item in section["items"].values()]
    leads = [item for item in items if item.get("Category") == "Leads"]
    assert len(leads) == 1 and leads[0]["Email"] == CUSTOMER_EMAIL
    assert leads[0]["Form id"] == "newsletter" and "blue mugs" in leads[0]["Fields"]
    assert any(item.get("Category") == "Pageviews" for item in items)
    assert shop.tenant.api_key not in html

    # Tools → Erase Personal Data → "Erase personal data": WordPress shows the receipt counts.
    erase_id = await _confirmed_request(shop, "remove_personal_data")
    await page.goto(shop.url + "/wp-admin/erase-personal-data.php")
    row = _request_row(page, erase_id)
    page.on("dialog", lambda dialog: dialog.accept())
    await row.get_by_role("button", name="Erase personal data", exact=True).click()
    results = page.locator(".request-results")
    await results.wait_for(timeout=60_000)
    shown = await results.inner_text()
    assert "Visitor Service erased 1 visitor." in shown, shown
    assert "were removed." in shown or "1 item was removed." in shown

    text = await all_documents_text(deps.store)
    for value in (VISITOR_ID, CUSTOMER_EMAIL, "blue mugs"):
        assert value not in text, value

    log = await _request_log(fetch, shop)
    assert sorted((e["type"], e["status"], e["actorUserId"]) for e in log) == [
        ("access", "completed", "site-api-key"), ("erasure", "completed", "site-api-key")]
    assert all(e["dueAt"] > e["receivedAt"] for e in log)
    await admin.close()


async def test_the_privacy_tools_say_so_when_the_service_is_unreachable(
        open_shop: ShopFactory, deps):
    shop = await open_shop()
    await _customer_with_a_lead(shop, deps)
    await shop.service.stop()
    try:
        answers = await shop.wp.php(f"""
            $export = \\VisitorService\\Privacy::export('{CUSTOMER_EMAIL}', 1);
            $erase = \\VisitorService\\Privacy::erase('{CUSTOMER_EMAIL}', 1);
            return ['export' => is_wp_error($export) ? $export->get_error_message() : $export,
                    'erase' => $erase];
        """)
    finally:
        shop.service.start()
    assert "could not be reached" in answers["export"]
    assert answers["erase"]["items_retained"] is True
    assert answers["erase"]["items_removed"] is False
    assert "could not be reached" in answers["erase"]["messages"][0]
    assert shop.tenant.api_key not in json.dumps(answers)
    assert await eventually(lambda: documents(deps, "leads", shop.tenant.site_id),
                            message="the lead is still held")
