"""The client SDK end to end in headless Chromium (DESIGN.md, Client SDK).

A host page on another origin (http://localhost:<port>) loads the sandbox's
/sdk/transact.js (http://127.0.0.1:<port>), opens the hosted flow and records every
callback in `window.events`. The sandbox runs in-process on a manual clock and delivers
its webhooks to a real receiver (tests/receiver.py): once the flow has started its task,
the test runs the clock until idle over the control plane and the page's own polling
sees the outcome. No test sleeps for the simulator. Screenshots of the screens land in
/tmp/shots/.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web
from calls import call, run_until_idle
from conftest import FEDEX, WALMART

from payroll_sandbox.app import build_registry, create_app, load
from payroll_sandbox.domain.tasks.states import FAILURE_REASONS
from payroll_sandbox.settings import Settings

NETFLIX = "6410a0000000000000000060"
UNKNOWN_COMPANY = "6410a00000000000000fffff"
TIMEOUT_MS = 5_000
FLOW = "iframe[data-transact]"
HOOKS = "/hooks"
SHOTS = Path("/tmp/shots")
# Codes and developer words a user must never read (issue 8, point 12).
JARGON = re.compile(r"x-public-token|header|token|deeplink|companyId|_id|\(|\)|"
                    r"invalid-company-id|company-under-maintenance|credentials-refused|"
                    r"<scenario>", re.IGNORECASE)

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

pytestmark = pytest.mark.asyncio(loop_scope="session")  # the browser's (conftest.browser)


@pytest.fixture
def receiver(live_receiver):
    """The real webhook receiver, in the browser tests' loop."""
    return live_receiver


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox(live_server, live_client, loaded, clock, receiver):
    """The sandbox on 127.0.0.1, manual clock, webhooks to the real receiver at /hooks;
    a client of it for the control plane."""
    settings = Settings(port=0, clock="manual", webhook_url=receiver.url(HOOKS))
    store = build_registry(settings, clock=clock, loaded=loaded)
    server = await live_server(create_app(settings, registry=store))
    return await live_client(server)


@pytest_asyncio.fixture(loop_scope="session")
async def host_url(live_server, sandbox):
    """The customer's page on another origin: localhost instead of 127.0.0.1."""
    origin = str(sandbox.server.make_url("/")).rstrip("/")
    text = HOST_PAGE.replace("__SANDBOX__", origin)

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    server = await live_server(app)
    return f"http://localhost:{server.port}/"


@pytest_asyncio.fixture(loop_scope="session")
async def page(host_url, browser_context):
    """The customer's page in a fresh context of the session's chromium (requested after the
    servers, so it closes before them)."""
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    logs: list[str] = []
    page.on("console", lambda message: logs.append(f"console: {message.text}"))
    page.on("pageerror", lambda error: logs.append(f"pageerror: {error}"))
    await page.goto(host_url)
    yield page
    print("\n".join(logs))  # shown when the test fails


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


async def started_task(page) -> str:
    """The id of the task the flow started (its "Started Task" interaction)."""
    await page.wait_for_function(
        "() => window.events.some(e => e[0] === 'interaction' && e[1].name === 'Started Task')")
    return await page.evaluate("""() => window.events.filter(e => e[0] === 'interaction'
        && e[1].name === 'Started Task').map(e => e[1].value.taskId).pop()""")


async def finish_task(page, sandbox, flow) -> dict:
    """Run the scenario to its end; the page sees it on its next poll and shows the end
    screen; the user presses Done and the flow finishes (the iframe goes away)."""
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    await flow.get_by_test_id("done").dispatch_event("click")  # the frame goes away: no wait after
    return await wait_for_event(page, "finish")


def final_event(receiver, task_id: str) -> dict:
    """The task's task-status-updated as the receiver got it."""
    [event] = [body for body in (json.loads(r.body) for r in receiver.received(HOOKS))
               if body.get("task") == task_id and body["eventType"] == "task-status-updated"]
    return event


async def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"))


async def under_maintenance(sandbox, company_id: str, products: list[str]) -> None:
    await call(sandbox, "POST", f"/_sandbox/companies/{company_id}/status",
               json={"status": "under-maintenance", "products": products})


async def visible_text(flow) -> str:
    return await flow.locator("body").inner_text()


# -- the flows --------------------------------------------------------------------------------

async def test_sdk_browser_happy_path_search_login_and_finish_removes_the_flow(page, sandbox, receiver):
    """Spec, Client SDK configuration: `onFinish` "Receives an object with `taskId` and
    `handoff`"; the real SDK removes its iframe when the flow finishes (issue 8, point 12).
    The page stayed open: spec, User object, `connected` is "True when the user was
    present to see confirmation of the Task's final outcome."
    """
    token = await token_of(sandbox, "browser-happy")
    flow = await open_flow(page, {"publicToken": token, "scope": "user-link",
                                  "tasks": [{"operation": "deposit"}]})
    await on_screen(flow, "search")
    await flow.get_by_test_id("search").fill("walmart")
    await flow.locator(f"[data-company='{WALMART}']").click()
    assert await flow.get_by_test_id("company-name").text_content() == "Walmart"
    await sign_in(flow, "test-good")
    task_id = await started_task(page)

    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    assert await flow.get_by_test_id("outcome").text_content() == "You're all set"
    await shot(page, "sdk-happy-path-done")
    assert await events(page, "finish") == []  # the user has not left the end screen yet
    await flow.get_by_test_id("done").dispatch_event("click")  # the frame goes away: no wait after
    finished = await wait_for_event(page, "finish")
    assert finished == {"taskId": task_id, "handoff": None, "data": {"tasks": [
        {"taskId": task_id, "product": "deposit", "status": "completed"}]}}
    assert await page.locator(FLOW).count() == 0
    assert await events(page, "close") == []

    task = await get_task(sandbox, task_id)
    assert task["status"] == "completed"
    assert task["company"] == WALMART
    assert task["user"]["identifier"] == "browser-happy"
    assert task["scenario"] == "happy-path"
    final = final_event(receiver, task_id)
    assert final["data"]["status"] == "completed"
    assert final["user"]["connected"] is True
    names = [e["name"] for e in await events(page, "interaction")]
    assert "Selected Company" in names and "Task Completed" in names


async def test_sdk_browser_test_bad_is_refused_on_the_form_and_the_user_tries_again(page, sandbox):
    """real-service-facts 7: "Sandbox usernames: test-good, test-bad, ...; any password".
    test-bad is refused on the login form (no task); the user can try again."""
    token = await token_of(sandbox, "browser-bad")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": WALMART}})
    await on_screen(flow, "login")
    await flow.get_by_label("Username").fill("test-bad@test.com")
    await flow.get_by_label("Password").fill("hunter2")
    await flow.get_by_label("Password").press("Enter")  # the keyboard submits the form
    message = flow.get_by_role("alert")
    await message.filter(has_text="username or password").wait_for()
    text = await message.text_content()
    assert text == "That username or password isn't right. Check them and try again."
    assert not JARGON.search(text)
    assert await flow.locator("#app").get_attribute("data-screen") == "login"
    assert await flow.get_by_label("Password").input_value() == ""
    assert await tasks_of(sandbox, "browser-bad") == []
    refused = [e["value"] for e in await events(page, "interaction") if e["name"] == "Login Refused"]
    assert refused == [{"code": "credentials-refused"}]  # the code goes to the host page only
    await shot(page, "sdk-test-bad-inline-message")

    await sign_in(flow, "test-good")
    finished = await finish_task(page, sandbox, flow)
    assert (await get_task(sandbox, finished["taskId"]))["status"] == "completed"


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
    text = await flow.get_by_test_id("error").text_content()
    assert text == ("We couldn't find the employer this link points to. Close this window and "
                    "try again from the app.")
    assert not JARGON.search(await visible_text(flow))
    await flow.get_by_role("button", name="Close").first.dispatch_event("click")  # the frame goes away: no wait after
    assert (await wait_for_event(page, "close"))["reason"] == "invalid-company-id"
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
    """Spec, API and SDK errors 2: "Starting an authentication flow against an
    `under-maintenance` or `disabled` company is not possible." The flow closes with the
    code the API gives."""
    token = await token_of(sandbox, "browser-maintenance")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": FEDEX}})
    await flow.get_by_test_id("unavailable").wait_for()
    text = await flow.get_by_test_id("unavailable").text_content()
    assert text == "FedEx is under maintenance right now, so you can't sign in. Try again later."
    assert await flow.get_by_test_id("username").count() == 0
    await flow.get_by_role("button", name="Close").first.dispatch_event("click")  # the frame goes away: no wait after
    assert (await wait_for_event(page, "close"))["reason"] == "company-under-maintenance"
    assert await tasks_of(sandbox, "browser-maintenance") == []


async def test_sdk_browser_unknown_public_token_shows_error(page, sandbox):
    flow = await open_flow(page, {"publicToken": "public-sandbox-" + secrets.token_hex(16)})
    await flow.get_by_test_id("error").wait_for()
    assert "session has expired" in await flow.get_by_test_id("error").text_content()
    assert not JARGON.search(await visible_text(flow))
    await shot(page, "sdk-error-invalid-public-token")
    await flow.get_by_role("button", name="Close").first.dispatch_event("click")  # the frame goes away: no wait after
    assert (await wait_for_event(page, "close"))["reason"] == "invalid-public-token"


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
    await flow.get_by_test_id("close").dispatch_event("click")
    await flow.get_by_test_id("exit-confirm").dispatch_event("click")  # the frame goes away
    # Fact 14: a user who closes the flow for no reason it knows closes it as `unknown`.
    await wait_for_event(page, "close")
    assert await events(page, "close") == [{"reason": "unknown", "data": {"tasks": []}}]
    assert await events(page, "finish") == []


async def disconnected_account(sandbox, identifier: str, reason: str) -> dict:
    """A user's linked account at Walmart (a completed deposit task), then disconnected."""
    await call(sandbox, "POST", "/task/create",
               json={"identifier": identifier, "company": WALMART, "product": "deposit"})
    await run_until_idle(sandbox)
    [account] = (await call(sandbox, "GET", "/linked-accounts",
                            params={"identifier": identifier}))["data"]
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect",
               json={"reason": reason})
    return account


async def test_sdk_browser_linked_account_reconnect(page, sandbox):
    identifier = "browser-reconnect"
    # The credentials changed at the company: the reconnect asks for them again.
    account = await disconnected_account(sandbox, identifier, "credentials-changed")
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


async def test_sdk_browser_reconnect_after_an_expired_session_needs_no_credentials(page,
                                                                                    sandbox):
    """Spec (Client SDK configuration): `linkedAccount` "Opens the authentication flow
    directly for an existing linked account, to reconnect it. It often does not require
    re-entering credentials": after an expired session the flow goes straight to the
    progress of the reconnect, with no login form."""
    identifier = "browser-resume"
    account = await disconnected_account(sandbox, identifier, "timeout")
    token = await token_of(sandbox, identifier)
    flow = await open_flow(page, {"publicToken": token, "linkedAccount": account["_id"]})
    await on_screen(flow, "progress")
    assert await flow.locator("[data-testid='username']").count() == 0
    finished = await finish_task(page, sandbox, flow)
    assert (await get_task(sandbox, finished["taskId"]))["status"] == "completed"
    [reconnected] = (await call(sandbox, "GET", "/linked-account/list/" + identifier))["data"]
    assert reconnected["valid"] is True
    assert reconnected["lastSuccess"] > account["lastSuccess"]


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
    # The new window asks for the PDF (a browser without a PDF viewer downloads it, so the
    # window's own address may stay blank: its request is what it opened).
    opened = page.context.expect_event(
        "request", predicate=lambda request: "/sdk/deposit-form.pdf" in request.url)
    async with page.expect_popup() as popup_info, opened as request_info:
        await flow.get_by_test_id("deposit-pdf").click()  # asks the host page: -open-url
    popup = await popup_info.value
    request = await request_info.value
    assert request.frame.page == popup
    assert "/sdk/deposit-form.pdf?companyId=" + WALMART in request.url
    response = await sandbox.get(request.url.split(str(sandbox.server.make_url("/")).rstrip("/"), 1)[1])
    assert response.status == 200 and (await response.read()).startswith(b"%PDF-")


async def test_sdk_browser_manual_deposits_company_gets_manual_instructions(page, sandbox):
    token = await token_of(sandbox, "browser-manual")
    flow = await open_flow(page, {"publicToken": token})
    await on_screen(flow, "search")
    await flow.get_by_test_id("search").fill("Joe's Family Diner")
    await flow.locator("[data-company='6410a000000000000000000f']").click()
    await on_screen(flow, "manual-fallback")
    assert "Joe's Family Diner" in await flow.get_by_test_id("manual-instructions").text_content()


# -- issue 8: fidelity of the hosted flow -------------------------------------------------------

async def eventually(check, timeout: float = 5.0):
    """Wait for the browser (not the simulator): a keepalive request after the page went away."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result or time.monotonic() > deadline:
            return result
        await asyncio.sleep(0.05)


async def test_sdk_browser_close_button_during_progress_makes_the_task_not_connected(page, sandbox, receiver):
    """Spec, User object: `connected` is "True when the user was present to see
    confirmation of the Task's final outcome." The user closed the flow while the task
    ran; onClose gets the real SDK's reason for it, task-pending."""
    token = await token_of(sandbox, "browser-closer")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": WALMART}})
    await sign_in(flow, "test-good")
    task_id = await started_task(page)
    await flow.get_by_test_id("close").dispatch_event("click")
    await flow.get_by_test_id("exit-prompt").wait_for()  # are you sure?
    await flow.get_by_test_id("exit-confirm").dispatch_event("click")  # the frame goes away
    closed = await wait_for_event(page, "close")
    assert (closed["reason"], closed["taskId"]) == ("task-pending", task_id)
    assert await page.locator(FLOW).count() == 0
    # The page told the sandbox before it closed.
    assert (await get_task(sandbox, task_id))["user"]["connected"] is False

    await run_until_idle(sandbox)
    final = final_event(receiver, task_id)
    assert final["data"]["status"] == "completed"
    assert final["user"]["connected"] is False


async def test_sdk_browser_flow_removed_during_progress_tells_the_sandbox_on_pagehide(page, sandbox, receiver):
    """Spec, User object: `connected` is "True when the user was present to see
    confirmation of the Task's final outcome." The host page removed the flow (its
    handle's close()) while the task ran: pagehide sends the leave with keepalive."""
    token = await token_of(sandbox, "browser-gone")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": WALMART}})
    await sign_in(flow, "test-good")
    task_id = await started_task(page)
    await page.evaluate("() => window.flow.close()")
    assert await page.locator(FLOW).count() == 0

    async def left() -> bool:
        return (await get_task(sandbox, task_id))["user"]["connected"] is False

    assert await eventually(left)
    await run_until_idle(sandbox)
    assert final_event(receiver, task_id)["user"]["connected"] is False


async def test_sdk_browser_maintenance_for_deposit_refuses_deposit_but_signs_in_verify(page, sandbox):
    """Spec, Company status: maintenance is "enabled for listed products" and then "Users
    cannot start an authentication flow"; Walmart is under maintenance for deposit only."""
    await under_maintenance(sandbox, WALMART, ["deposit"])
    token = await token_of(sandbox, "browser-maint-product")
    flow = await open_flow(page, {"publicToken": token, "tasks": [{"operation": "verify"}],
                                  "deeplink": {"step": "login-company", "companyId": WALMART}})
    await sign_in(flow, "test-good")
    finished = await finish_task(page, sandbox, flow)
    assert (await get_task(sandbox, finished["taskId"]))["product"] == "verify"

    # The same company picked in search by a deposit flow is refused before any sign-in.
    flow = await open_flow(page, {"publicToken": token, "tasks": [{"operation": "deposit"}]})
    await on_screen(flow, "search")
    await flow.get_by_test_id("search").fill("walmart")
    await flow.locator(f"[data-company='{WALMART}']").click()
    await on_screen(flow, "unavailable")
    assert await flow.get_by_test_id("username").count() == 0
    await shot(page, "sdk-unavailable-maintenance")
    await flow.get_by_role("button", name="Close").first.dispatch_event("click")  # the frame goes away: no wait after
    # An empty list is truthy in JavaScript: wait until a close has arrived, not for the list.
    closes = await page.wait_for_function(
        "() => { const c = window.events.filter(e => e[0] === 'close'); return c.length && c; }")
    assert (await closes.json_value())[-1][1]["reason"] == "company-under-maintenance"
    assert len(await tasks_of(sandbox, "browser-maint-product")) == 1


@pytest.mark.parametrize(("step", "screen_name"), [
    ("direct-deposit-setup", "direct-deposit-setup"),
    ("manual-fallback", "manual-fallback"),
    ("generate-deposit-pdf", "generate-deposit-pdf"),
])
async def test_sdk_browser_company_steps_without_company_id_pick_the_company_first(
        page, sandbox, step, screen_name):
    """Spec, Client SDK configuration: `deeplink.step` lists "`login-company` (requires
    `companyId`)"; the other company steps work without one: the user picks the company."""
    token = await token_of(sandbox, "browser-steps")
    flow = await open_flow(page, {"publicToken": token, "deeplink": {"step": step}})
    await on_screen(flow, "search")
    await flow.get_by_test_id("search").fill("walmart")
    await flow.locator(f"[data-company='{WALMART}']").click()
    await on_screen(flow, screen_name)
    assert await flow.get_by_test_id("company-name").text_content() == "Walmart"
    if step == "direct-deposit-setup":
        await flow.get_by_test_id("continue").click()  # the entire paycheck
        await sign_in(flow, "test-good")
        finished = await finish_task(page, sandbox, flow)
        assert (await get_task(sandbox, finished["taskId"]))["company"] == WALMART


@pytest.mark.parametrize(("username", "screen_name", "label", "shot_name"), [
    ("test-code-mfa", "mfa-code", "Verification code", "sdk-mfa-code"),
    ("test-question-mfa", "security-question", "What was the name of your first pet?",
     "sdk-security-question"),
])
async def test_sdk_browser_mfa_usernames_ask_then_any_answer_succeeds(
        page, sandbox, receiver, username, screen_name, label, shot_name):
    """real-service-facts 7: "Sandbox usernames: ..., test-code-mfa, test-question-mfa;
    any password; any MFA answer"."""
    token = await token_of(sandbox, f"browser-{screen_name}")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": WALMART}})
    await on_screen(flow, "login")
    await flow.get_by_label("Username").fill(username)
    await flow.get_by_label("Password").fill("anything")
    await flow.get_by_test_id("submit").click()
    await on_screen(flow, screen_name)
    assert await tasks_of(sandbox, f"browser-{screen_name}") == []
    answer = flow.get_by_label(label)
    assert await answer.evaluate("node => node === document.activeElement")  # focus is there
    await flow.get_by_test_id("mfa-submit").click()  # empty: asked again, nothing sent
    await flow.get_by_role("alert").filter(has_text="Enter").wait_for()
    await shot(page, shot_name)
    await answer.fill("42 whatever")
    await answer.press("Enter")
    await on_screen(flow, "progress")
    finished = await finish_task(page, sandbox, flow)
    assert final_event(receiver, finished["taskId"])["data"]["status"] == "completed"


async def test_sdk_browser_test_failure_shows_a_plain_sentence_and_closes_with_the_reason(page, sandbox):
    """real-service-facts 7: the sandbox username test-failure fails the task; spec,
    Errors: `unknown-failure` is the "Fallback when no other reason matches". The user
    reads a sentence with a next step; the reason code goes to onClose only."""
    token = await token_of(sandbox, "browser-failure")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": WALMART}})
    await sign_in(flow, "test-failure")
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    assert await flow.get_by_test_id("outcome").text_content() == "We couldn't finish"
    detail = await flow.get_by_test_id("outcome-detail").text_content()
    assert detail == "Something went wrong and we couldn't finish. Try again in a few minutes."
    text = await visible_text(flow)
    assert "unknown-failure" not in text and "Reason" not in text
    await shot(page, "sdk-failure-screen")
    failed = [e["value"] for e in await events(page, "interaction") if e["name"] == "Task Failed"]
    assert failed[0]["reason"] == "unknown-failure"
    assert await events(page, "finish") == []
    await flow.get_by_test_id("done").dispatch_event("click")  # the frame goes away: no wait after
    assert (await wait_for_event(page, "close"))["reason"] == "unknown-failure"
    assert await page.locator(FLOW).count() == 0


async def test_sdk_browser_failure_try_again_returns_to_the_login_form(page, sandbox):
    """Spec, Errors: `connection-error` ("The merchant could not be reached"): the
    sentence's next step is to try again, and the screen offers it."""
    token = await token_of(sandbox, "browser-retry")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": WALMART}})
    await sign_in(flow, "test-connection-error")
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    assert (await flow.get_by_test_id("outcome-detail").text_content()).startswith(
        "We couldn't reach Walmart.")
    await flow.get_by_test_id("retry").click()
    await sign_in(flow, "test-good")
    finished = await finish_task(page, sandbox, flow)
    assert (await get_task(sandbox, finished["taskId"]))["status"] == "completed"


@pytest.mark.parametrize(("choice", "amount", "status"), [
    ("percent", "40", "failed"), ("fixed", "250", "failed"), ("total", None, "failed"),
])
async def test_sdk_browser_distribution_not_supported_fails_any_deposit(
        page, sandbox, receiver, choice, amount, status):
    """real-service-facts 7: the sandbox username test-distribution-not-supported. A
    deposit fails, whatever split is chosen on direct-deposit-setup (issue 20, 6), with the
    spec's nearest reason, product-not-supported ("The merchant does not permit the Task
    for this account")."""
    token = await token_of(sandbox, f"browser-distribution-{choice}")
    flow = await open_flow(page, {"publicToken": token, "deeplink": {
        "step": "direct-deposit-setup", "companyId": WALMART}})
    await on_screen(flow, "direct-deposit-setup")
    await flow.get_by_label("How much of your pay should go to this account?").select_option(choice)
    if amount:
        await flow.get_by_label("Percentage (1 to 100)" if choice == "percent" else
                                "Amount in dollars").fill(amount)
        await shot(page, f"sdk-direct-deposit-setup-{choice}")
    await flow.get_by_test_id("continue").click()
    await sign_in(flow, "test-distribution-not-supported@test.com")
    task_id = await started_task(page)
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    final = final_event(receiver, task_id)
    assert final["data"]["status"] == status
    assert "metadata" not in final  # the customer gave none; the split is not put there
    if status == "failed":
        assert final["data"]["reason"] == "product-not-supported"
        detail = await flow.get_by_test_id("outcome-detail").text_content()
        assert detail.startswith("Walmart doesn't allow this change for your account.")


@pytest.mark.long  # twenty flows, one after the other
async def test_sdk_browser_every_failure_reason_reads_as_a_plain_sentence(page, sandbox):
    """Spec, Errors, Task failure reasons: all twenty reasons. Each reaches the user as a
    plain sentence with a next step; the code reaches the host page in onClose only."""
    token = await token_of(sandbox, "browser-reasons")
    sentences = {}
    scenarios = load(Settings()).scenarios
    for n, reason in enumerate(FAILURE_REASONS):
        # Each reason's scenario fits some products: a pay-link one runs a switch at a
        # merchant, the others the default deposit at an employer.
        if "switch" in scenarios[reason].products and "deposit" not in scenarios[reason].products:
            config = {"scope": "pay-link", "tasks": [{"operation": "switch"}],
                      "deeplink": {"step": "login-company", "companyId": NETFLIX}}
        else:
            config = {"deeplink": {"step": "login-company", "companyId": WALMART}}
        flow = await open_flow(page, {"publicToken": token, **config})
        await sign_in(flow, f"test-{reason}")
        await run_until_idle(sandbox)
        await on_screen(flow, "done")
        detail = await flow.get_by_test_id("outcome-detail").text_content()
        text = await visible_text(flow)
        assert not [code for code in FAILURE_REASONS if code in text], (reason, text)
        assert not JARGON.search(text), (reason, text)
        sentences[reason] = detail
        await flow.get_by_test_id("done").dispatch_event("click")  # the frame goes away
        await page.wait_for_function(
            "n => window.events.filter(e => e[0] === 'close').length === n", arg=n + 1)
        assert (await events(page, "close"))[-1]["reason"] == reason
    assert len(set(sentences.values())) == len(FAILURE_REASONS)  # one sentence each
    assert "Make the change with" in sentences["subscription-managed-by-partner-provider"]


async def test_sdk_browser_login_form_is_labelled_and_its_hint_names_the_sandbox_usernames(page, sandbox):
    """real-service-facts 7: "Sandbox usernames: test-good, test-bad, test-failure,
    test-distribution-not-supported, test-code-mfa, test-question-mfa; any password; any
    MFA answer; append @test.com where an email is needed." The hint says so plainly."""
    token = await token_of(sandbox, "browser-hint")
    flow = await open_flow(page, {"publicToken": token,
                                  "deeplink": {"step": "login-company", "companyId": WALMART}})
    await on_screen(flow, "login")
    assert await flow.get_by_label("Username").evaluate("node => node === document.activeElement")
    await flow.get_by_text("Testing? Use a sandbox username").click()
    hint = await flow.get_by_test_id("login-hint").inner_text()
    for username in ("test-good", "test-bad", "test-failure", "test-distribution-not-supported",
                     "test-code-mfa", "test-question-mfa", "@test.com"):
        assert username in hint
    assert not JARGON.search(hint), hint
    await shot(page, "sdk-login-hint")
