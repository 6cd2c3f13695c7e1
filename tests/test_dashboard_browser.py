"""The dashboard in headless Chromium: it shows a tenant's tasks and events and drives the clock."""

from __future__ import annotations

import re

import pytest
from conftest import ACME
from playwright.async_api import expect

from simulator.app import build_registry, create_app
from simulator.settings import Settings

TIMEOUT_MS = 5_000


@pytest.fixture
async def dashboard(aiohttp_server, aiohttp_client, loaded, clock, browser_context):
    """The dashboard of tenant acme, on a sandbox with a manual clock; and a client of it.
    The browser context comes after the server, so it closes before it."""
    settings = Settings(port=0, clock="manual")
    server = await aiohttp_server(create_app(settings, registry=build_registry(settings, clock=clock,
                                                                          loaded=loaded)))
    client = await aiohttp_client(server)
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    await page.goto(str(server.make_url("/_sandbox/"))
                    + f"#key={ACME['x-api-key']}&secret={ACME['x-api-secret']}")
    await page.locator("#task-scenario option[value='auth-expired']").wait_for(state="attached")
    assert "secret" not in page.url, "the keys leave the address (and the history) at once"
    return page, client


async def test_dashboard_creates_a_task_and_runs_it_to_its_events(dashboard):
    page, client = dashboard
    await page.fill("#task-user", "dash-user")
    await page.select_option("#task-scenario", "auth-expired")
    await page.click("#task-form button")
    await page.locator("#tasks tr").first.wait_for()
    assert "queued" in await page.locator("#tasks tr").first.inner_text()

    await page.click("#run-until-idle")
    await page.locator("#tasks tr", has_text="failed").wait_for()
    row = await page.locator("#tasks tr").first.inner_text()
    assert "auth-expired" in row and "dash-user" in row
    events = (await (await client.get("/_sandbox/events?user=dash-user", headers=ACME)).json())["data"]
    await page.locator("#events tr", has_text="task-workflow-finished").wait_for()
    assert await page.locator("#events tr").count() == len(events)

    await page.locator("#events tr", has_text="task-workflow-finished").click()
    detail = await page.locator("#event-detail").inner_text()
    assert '"failureReason": "auth-expired"' in detail and '"deliveries"' in detail


async def test_dashboard_moves_the_clock_and_sets_a_company_status(dashboard):
    page, client = dashboard
    before = (await (await client.get("/_sandbox/clock", headers=ACME)).json())["data"]["timestamp"]
    # Locator expectations, not wait_for_function: the page's CSP (no 'unsafe-eval')
    # refuses the string predicates Playwright evaluates there.
    await expect(page.locator("#clock")).not_to_have_text("-", timeout=TIMEOUT_MS)
    shown = await page.locator("#clock").inner_text()
    await page.click("[data-advance='3600']")
    await expect(page.locator("#clock")).not_to_have_text(shown, timeout=TIMEOUT_MS)
    after = (await (await client.get("/_sandbox/clock", headers=ACME)).json())["data"]["timestamp"]
    assert after == before + 3600

    await page.fill("#company-id", "6410a0000000000000000001")
    await page.select_option("#company-status", "under-maintenance")
    await page.click("#company-form button")
    await page.locator("#events tr", has_text="maintenance-mode").wait_for()
    company = (await (await client.get("/company/6410a0000000000000000001", headers=ACME)).json())
    assert company["data"]["status"] == "under-maintenance"


async def test_dashboard_reports_wrong_keys(aiohttp_server, loaded, clock, browser_context):
    settings = Settings(port=0, clock="manual")
    server = await aiohttp_server(create_app(settings, registry=build_registry(settings, clock=clock,
                                                                          loaded=loaded)))
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    await page.goto(str(server.make_url("/_sandbox/")) + "#key=wrong-key&secret=wrong-secret")
    await expect(page.locator("#message")).to_have_text(re.compile(".+"), timeout=TIMEOUT_MS)
    assert "do not match" in await page.locator("#message").inner_text()
