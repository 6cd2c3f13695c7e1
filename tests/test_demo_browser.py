"""/demo, the host page, in headless Chromium: no keys in it, a public token from its own
server, the hosted flow opened with the SDK, and the callbacks listed as they arrive."""

from __future__ import annotations

from axe_playwright_python.async_playwright import Axe
from conftest import page_errors
from playwright.async_api import expect

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

TIMEOUT_MS = 15_000
FLOW = "iframe[src*='/initialize/']"


async def test_demo_opens_the_flow_with_a_token_from_its_server_and_lists_callbacks(
        aiohttp_server, aiohttp_client, loaded, clock, browser_context, tmp_path):
    settings = Settings(port=0, clock="manual")
    server = await aiohttp_server(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(page)
    response = await page.goto(str(server.make_url("/demo")))
    html = await response.text()
    assert "sandbox-key" not in html and "secret" not in html.lower()
    assert not (await Axe().run(page)).response["violations"]

    await page.get_by_role("button", name="Connect payroll").click()
    flow = page.frame_locator(FLOW)
    await flow.locator("#app[data-screen='search']").wait_for()
    await flow.get_by_test_id("search").fill("walmart")
    await flow.locator("[data-company='6410a0000000000000000001']").click()
    await flow.get_by_test_id("username").fill("test-good")
    await flow.get_by_test_id("password").fill("any")
    await flow.get_by_test_id("submit").click()
    await expect(page.locator("#callbacks")).to_contain_text("onInteraction")

    client = await aiohttp_client(server)
    demo = {"x-api-key": "sandbox-key-demo-0005", "x-api-secret": "sandbox-secret-demo-0005"}
    await client.post("/_sandbox/clock/run-until-idle", headers=demo)
    await flow.locator("#app[data-screen='done']").wait_for()
    await flow.get_by_test_id("done").dispatch_event("click")
    await expect(page.locator("#callbacks")).to_contain_text("onFinish")
    tasks = (await (await client.get("/_sandbox/tasks", headers=demo)).json())["data"]
    finished = [t for t in tasks if t["user"]["identifier"] == "demo-visitor"]
    assert finished and finished[-1]["status"] == "completed"
    await expect(page.locator("#status")).to_contain_text(finished[-1]["id"])
    await page.screenshot(path=str(tmp_path / "demo-done.png"))
    assert not errors, errors


async def test_the_demo_token_is_for_the_demo_page_only(client):
    for headers in ({"origin": "https://evil.example"}, {"sec-fetch-site": "cross-site"}):
        response = await client.post("/demo/token", headers=headers)
        assert response.status == 403, headers
    response = await client.post("/demo/token", headers={"sec-fetch-site": "same-origin"})
    assert response.status == 200
    assert (await response.json())["data"]["identifier"] == "demo-visitor"
