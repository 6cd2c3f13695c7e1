"""The client SDK end to end in headless Chromium (DESIGN.md, Client SDK).

A host page on another origin (http://localhost:<port>) loads the sandbox's
/sdk/transact.js (http://127.0.0.1:<port>), opens the hosted flow and records every
callback in `window.events`. The sandbox runs in-process on a manual clock: once
the flow has started its task, the test runs the clock until idle over the control
plane and the page's own polling sees the outcome. No test sleeps for the simulator.
"""

from __future__ import annotations

import secrets

import pytest
from aiohttp import web
from calls import call, run_until_idle
from conftest import CHROMIUM_ARGS, FEDEX, WALMART
from playwright.async_api import async_playwright

from simulator.app import build_store, create_app
from simulator.settings import Settings

NETFLIX = "6410a0000000000000000060"
UNKNOWN_COMPANY = "6410a00000000000000fffff"
TIMEOUT_MS = 5_000
FLOW = "iframe[data-transact]"

HOST_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Customer page</title></head>
<body>
<h1>Customer page</h1>
<script src="__SANDBOX__/sdk/transact.js"></script>
<script>
window.events = [];
window.received = [];  // every message the page hears, before transact.js judges it
window.addEventListener("message", function (e) { window.received.push(e.data); });
window.openFlow = function (config) {
  window.flow = Transact.transact({
    config: config,
    onInteraction: function (e) { window.events.push(["interaction", e]); },
    onFinish: function (e) { window.events.push(["finish", e]); },
    onClose: function (e) { window.events.push(["close", e]); }
  });
  return window.flow.handshakeId;
};
</script>
</body></html>
"""


# -- fixtures ---------------------------------------------------------------------------------

@pytest.fixture
async def sandbox(aiohttp_server, aiohttp_client, loaded, clock):
    """The sandbox on 127.0.0.1, manual clock; a client of it for the control plane."""
    settings = Settings(port=0, clock="manual")
    store = build_store(settings, clock=clock, loaded=loaded)
    server = await aiohttp_server(create_app(settings, store=store), host="127.0.0.1")
    return await aiohttp_client(server)


@pytest.fixture
async def host_url(aiohttp_server, sandbox):
    """The customer's page on another origin: localhost instead of 127.0.0.1."""
    origin = str(sandbox.server.make_url("/")).rstrip("/")
    text = HOST_PAGE.replace("__SANDBOX__", origin)

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    server = await aiohttp_server(app, host="127.0.0.1")
    return f"http://localhost:{server.port}/"


@pytest.fixture
async def page(chromium, host_url):
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            logs: list[str] = []
            page.on("console", lambda message: logs.append(f"console: {message.text}"))
            page.on("pageerror", lambda error: logs.append(f"pageerror: {error}"))
            await page.goto(host_url)
            yield page
            print("\n".join(logs))  # shown when the test fails
        finally:
            await browser.close()


# -- helpers ----------------------------------------------------------------------------------

async def token_of(sandbox, identifier: str) -> str:
    body = await call(sandbox, "POST", "/access-token", json={"identifier": identifier})
    return body["data"]["publicToken"]


async def open_flow(page, config: dict):
    await page.evaluate("config => window.openFlow(config)", config)
    return page.frame_locator(FLOW)


async def on_screen(flow, name: str) -> None:
    await flow.locator(f"#app[data-screen='{name}']").wait_for()


async def sign_in(flow, username: str, password: str = "secret") -> None:
    await on_screen(flow, "login")
    await flow.get_by_test_id("username").fill(username)
    await flow.get_by_test_id("password").fill(password)
    await flow.get_by_test_id("submit").click()
    await on_screen(flow, "progress")  # /sdk/login answered: the task exists


async def events(page, kind: str) -> list[dict]:
    return await page.evaluate("kind => window.events.filter(e => e[0] === kind).map(e => e[1])", kind)


async def wait_for_event(page, kind: str) -> dict:
    await page.wait_for_function("kind => window.events.some(e => e[0] === kind)", arg=kind)
    return (await events(page, kind))[0]


async def get_task(sandbox, task_id: str) -> dict:
    return (await call(sandbox, "GET", f"/task/{task_id}"))["data"]


async def tasks_of(sandbox, identifier: str) -> list[dict]:
    return (await call(sandbox, "GET", "/_sandbox/tasks", params={"user": identifier}))["data"]


async def finish_task(page, sandbox, flow) -> dict:
    """Run the scenario to its end; the page sees it on its next poll and finishes."""
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    return await wait_for_event(page, "finish")


# -- the flows --------------------------------------------------------------------------------

async def test_sdk_browser_happy_path_search_login_finish_and_close(page, sandbox):
    token = await token_of(sandbox, "browser-happy")
    flow = await open_flow(page, {"publicToken": token, "scope": "user-link",
                                  "tasks": [{"operation": "deposit"}]})
    await on_screen(flow, "search")
    await flow.get_by_test_id("search").fill("walmart")
    await flow.locator(f"[data-company='{WALMART}']").click()
    assert await flow.get_by_test_id("company-name").text_content() == "Walmart"
    await sign_in(flow, "test-good")

    finished = await finish_task(page, sandbox, flow)
    assert set(finished) == {"taskId", "handoff"}
    assert await flow.get_by_test_id("outcome").text_content() == "You're all set"
    task = await get_task(sandbox, finished["taskId"])
    assert task["status"] == "completed"
    assert task["company"] == WALMART
    assert task["user"]["identifier"] == "browser-happy"
    assert task["scenario"] == "happy-path"
    await page.screenshot(path="/tmp/sdk-browser-happy-path.png")

    names = [e["name"] for e in await events(page, "interaction")]
    assert "Selected Company" in names and "Task Completed" in names
    await flow.get_by_test_id("done").dispatch_event("click")  # the frame goes away: no wait after
    assert await wait_for_event(page, "close") == {"reason": "completed"}
    assert await page.locator(FLOW).count() == 0
    assert await events(page, "close") == [{"reason": "completed"}]


async def test_sdk_browser_test_bad_fails_the_task_and_still_finishes(page, sandbox):
    token = await token_of(sandbox, "browser-bad")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": WALMART}})
    await sign_in(flow, "test-bad")

    finished = await finish_task(page, sandbox, flow)
    assert await flow.get_by_test_id("outcome").text_content() == "We couldn't finish"
    assert await flow.locator("#title").text_content() == "Task Failed"
    task = await get_task(sandbox, finished["taskId"])
    assert task["status"] == "failed"
    assert task["scenario"] == "bad-credentials"
    assert task["reason"] == "user-abandon"
    await flow.get_by_test_id("done").dispatch_event("click")  # the frame goes away: no wait after
    assert await wait_for_event(page, "close") == {"reason": "task-failed"}


async def test_sdk_browser_deeplink_login_company_without_back_button(page, sandbox):
    token = await token_of(sandbox, "browser-deeplink")
    flow = await open_flow(page, {
        "publicToken": token, "deeplink": {"step": "login-company", "companyId": WALMART},
        "theme": {"navigationOptions": {"showBackButton": False}}})
    await on_screen(flow, "login")
    assert await flow.get_by_test_id("company-name").text_content() == "Walmart"
    assert await flow.get_by_test_id("back").count() == 0
    assert await flow.get_by_test_id("close").count() == 1


async def test_sdk_browser_deeplink_login_company_back_button_returns_to_search(page, sandbox):
    token = await token_of(sandbox, "browser-deeplink")
    flow = await open_flow(page, {
        "publicToken": token, "deeplink": {"step": "login-company", "companyId": WALMART},
        "theme": {"navigationOptions": {"showBackButton": True}}})
    await on_screen(flow, "login")
    # Spec, theme.navigationOptions: true shows a back button that returns to company search.
    back = flow.get_by_test_id("back")
    await back.wait_for(timeout=2_000)
    await back.click()
    await on_screen(flow, "search")


async def test_sdk_browser_show_close_button_false_hides_the_close_button(page, sandbox):
    token = await token_of(sandbox, "browser-deeplink")
    flow = await open_flow(page, {
        "publicToken": token, "deeplink": {"step": "login-company", "companyId": WALMART},
        "theme": {"navigationOptions": {"showCloseButton": False}}})
    await on_screen(flow, "login")
    assert await flow.get_by_test_id("close").count() == 0


async def test_sdk_browser_deeplink_unknown_company_shows_error_and_closes_invalid_company_id(page, sandbox):
    token = await token_of(sandbox, "browser-unknown")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": UNKNOWN_COMPANY}})
    await flow.get_by_test_id("error").wait_for()
    await flow.get_by_role("button", name="Close").first.dispatch_event("click")  # the frame goes away: no wait after
    assert await wait_for_event(page, "close") == {"reason": "invalid-company-id"}
    assert await page.locator(FLOW).count() == 0
    assert await tasks_of(sandbox, "browser-unknown") == []


async def test_sdk_browser_search_payroll_lists_only_payroll_providers(page, sandbox):
    token = await token_of(sandbox, "browser-payroll")
    flow = await open_flow(page, {"publicToken": token, "deeplink": {"step": "search-payroll"}})
    await on_screen(flow, "search")
    await flow.get_by_test_id("search").fill("pay")
    results = flow.locator("[data-company]")
    await results.first.wait_for()
    ids = await results.evaluate_all("nodes => nodes.map(n => n.getAttribute('data-company'))")
    assert ids
    for company_id in ids:
        company = (await call(sandbox, "GET", f"/company/{company_id}"))["data"]
        assert "payroll-provider" in company["tags"], company


async def test_sdk_browser_under_maintenance_company_is_unavailable_and_creates_no_task(page, sandbox):
    token = await token_of(sandbox, "browser-maintenance")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": FEDEX}})
    await flow.get_by_test_id("unavailable").wait_for()
    assert "under maintenance" in await flow.get_by_test_id("unavailable").text_content()
    assert await flow.get_by_test_id("username").count() == 0
    await flow.get_by_role("button", name="Close").first.dispatch_event("click")  # the frame goes away: no wait after
    assert await wait_for_event(page, "close") == {"reason": "company-unavailable"}
    assert await tasks_of(sandbox, "browser-maintenance") == []


async def test_sdk_browser_unknown_public_token_shows_error(page, sandbox):
    flow = await open_flow(page, {"publicToken": "public-sandbox-" + secrets.token_hex(16)})
    await flow.get_by_test_id("error").wait_for()
    await flow.get_by_role("button", name="Close").first.dispatch_event("click")  # the frame goes away: no wait after
    assert await wait_for_event(page, "close") == {"reason": "invalid-public-token"}


async def test_sdk_browser_messages_not_from_the_flow_iframe_are_ignored(page, sandbox):
    token = await token_of(sandbox, "browser-foreign")
    flow = await open_flow(page, {"publicToken": token})
    await on_screen(flow, "search")
    sandbox_origin = str(sandbox.server.make_url("/")).rstrip("/")
    # The host page itself (wrong origin, wrong source).
    await page.evaluate("""() => {
        window.postMessage({event: 'example-transact-close', payload: {reason: 'fake-host'},
                            fake: true}, '*');
        window.postMessage({event: 'example-transact-finish', payload: {taskId: 'fake'},
                            fake: true}, '*');
    }""")
    # Another frame of the sandbox's own origin (right origin, wrong source).
    await page.evaluate("""url => new Promise(resolve => {
        const other = document.createElement('iframe');
        other.id = 'other'; other.src = url; other.onload = resolve;
        document.body.appendChild(other);
    })""", sandbox_origin + "/health")
    other = next(f for f in page.frames if f.url.startswith(sandbox_origin + "/health"))
    await other.evaluate("""() => parent.postMessage(
        {event: 'example-transact-close', payload: {reason: 'fake-frame'}, fake: true}, '*')""")
    # All three fakes reached the page (its recorder runs before transact.js's listener,
    # in the same dispatch), and none of them closed or finished the flow.
    await page.wait_for_function(
        "() => window.received.filter(m => m && m.fake).length === 3")
    assert await events(page, "close") == []
    assert await page.locator(FLOW).count() == 1
    await flow.get_by_test_id("close").dispatch_event("click")  # the frame goes away: no wait after
    assert await wait_for_event(page, "close") == {"reason": "user-closed"}
    assert await events(page, "close") == [{"reason": "user-closed"}]
    assert await events(page, "finish") == []


async def test_sdk_browser_linked_account_reconnect(page, sandbox):
    identifier = "browser-reconnect"
    await call(sandbox, "POST", "/task/create",
               json={"identifier": identifier, "company": WALMART, "product": "deposit"})
    await run_until_idle(sandbox)
    [account] = (await call(sandbox, "GET", "/linked-accounts",
                            params={"identifier": identifier}))["data"]
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect", json={})
    [disconnected] = (await call(sandbox, "GET", "/linked-accounts",
                                 params={"identifier": identifier}))["data"]
    assert disconnected["connected"] is False

    token = await token_of(sandbox, identifier)
    flow = await open_flow(page, {"publicToken": token, "linkedAccount": account["_id"]})
    await on_screen(flow, "login")
    assert await flow.get_by_test_id("company-name").text_content() == "Walmart"
    await sign_in(flow, "test-good")
    finished = await finish_task(page, sandbox, flow)
    assert (await get_task(sandbox, finished["taskId"]))["status"] == "completed"

    [reconnected] = (await call(sandbox, "GET", "/linked-accounts",
                                params={"identifier": identifier}))["data"]
    assert reconnected["_id"] == account["_id"] and reconnected["connected"] is True
    ledger = (await call(sandbox, "GET", "/_sandbox/events", params={"user": identifier}))["data"]
    types = [e["eventType"] for e in ledger if e["eventType"].startswith("linked-account-")]
    assert types == ["linked-account-connected", "linked-account-disconnected",
                     "linked-account-connected"]


async def test_sdk_browser_add_card_then_login_switches_with_that_card(page, sandbox):
    token = await token_of(sandbox, "browser-card")
    flow = await open_flow(page, {"publicToken": token, "scope": "pay-link",
                                  "tasks": [{"operation": "switch"}],
                                  "deeplink": {"step": "add-card", "companyId": NETFLIX}})
    await on_screen(flow, "add-card")
    await flow.get_by_test_id("card-number").fill("4242 4242 4242 4242")
    await flow.get_by_test_id("card-expiry").fill("12/30")
    await flow.get_by_test_id("continue").click()
    assert await flow.get_by_test_id("company-name").text_content() == "Netflix"
    await sign_in(flow, "test-good")
    finished = await finish_task(page, sandbox, flow)
    task = await get_task(sandbox, finished["taskId"])
    assert task["product"] == "switch"
    assert task["paymentMethod"]["lastFour"] == "4242"
    assert task["paymentMethod"]["type"] == "card"


async def test_sdk_browser_deposit_pdf_opens_through_the_host_page(page, sandbox):
    token = await token_of(sandbox, "browser-pdf")
    flow = await open_flow(page, {"publicToken": token, "deeplink": {
        "step": "generate-deposit-pdf", "companyId": WALMART}})
    await on_screen(flow, "generate-deposit-pdf")
    async with page.expect_popup() as popup_info:
        await flow.get_by_test_id("deposit-pdf").click()  # asks the host page: -open-url
    popup = await popup_info.value
    assert "/sdk/deposit-form.pdf?companyId=" + WALMART in popup.url
    response = await sandbox.get(popup.url.split(str(sandbox.server.make_url("/")).rstrip("/"), 1)[1])
    assert response.status == 200 and (await response.read()).startswith(b"%PDF-")


async def test_sdk_browser_manual_deposits_company_gets_manual_instructions(page, sandbox):
    token = await token_of(sandbox, "browser-manual")
    flow = await open_flow(page, {"publicToken": token})
    await on_screen(flow, "search")
    await flow.get_by_test_id("search").fill("Joe's Family Diner")
    await flow.locator("[data-company='6410a000000000000000000f']").click()
    await on_screen(flow, "manual-fallback")
    assert "Joe's Family Diner" in await flow.get_by_test_id("manual-instructions").text_content()
