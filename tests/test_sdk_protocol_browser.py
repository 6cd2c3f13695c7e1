"""The SDK's protocol as the vendor's SDK speaks it (real-service-facts 9, 11-14), in
headless Chromium: a host page of its own that builds the iframe URL with the browser's
`btoa` and answers the handshake itself (no /sdk/transact.js); the sandbox's script under
a service profile with the vendor's names, called as the vendor's SDK is called; the
published configuration (tasks[].product, a two-task workflow, handoff, data requests)
and a configuration the page cannot read. The sandbox runs in-process on a manual clock:
a test moves it over the control plane and the page's own polling sees the task move.
"""

from __future__ import annotations

import base64
import json

import pytest
import pytest_asyncio
from aiohttp import web
from calls import advance, call, run_until_idle
from conftest import WALMART
from test_flow_look_browser import axe_blocking
from test_sdk_browser import (FLOW, HOOKS, TIMEOUT_MS, events, on_screen, started_task, token_of,
                              wait_for_event)

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

NETFLIX = "6410a0000000000000000060"
# The vendor's names (real-service-facts 11), as docs/sdk.md's profile sets them.
VENDOR_NAMES = {"sdk_global": "Atomic", "sdk_prefix": "atomic-transact"}

# A host page written from the protocol alone: the config is base64 of its JSON as the
# browser's btoa writes it (standard alphabet, padded), the public token goes only through
# the handshake, and every message the flow sends is recorded.
PROTOCOL_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Customer page</title></head>
<body><h1>Customer page</h1>
<script>
window.events = [];
window.SANDBOX = "__SANDBOX__";
window.PREFIX = "__PREFIX__";
window.encode = function (config) {
  var bytes = new TextEncoder().encode(JSON.stringify(config));
  var binary = "";
  bytes.forEach(function (b) { binary += String.fromCharCode(b); });
  return btoa(binary);
};
window.openRaw = function (encoded, token) {
  var hId = "h" + Math.random().toString(16).slice(2);
  var iframe = document.createElement("iframe");
  iframe.src = SANDBOX + "/initialize/" + encoded + "#hId=" + hId;
  iframe.setAttribute("data-transact", hId);
  iframe.style.width = "420px"; iframe.style.height = "700px";
  window.addEventListener("message", function (event) {
    if (event.origin !== SANDBOX || event.source !== iframe.contentWindow) { return; }
    var message = event.data || {};
    var kind = message.event.slice(PREFIX.length + 1);
    window.events.push([kind, message.payload]);
    if (kind === "request-public-token") {
      iframe.contentWindow.postMessage({ event: "sdk-" + PREFIX + "-public-token",
        payload: { publicToken: token, handshakeId: hId } }, SANDBOX);
    }
    if (kind === "finish" || kind === "close") { iframe.remove(); }
  });
  document.body.appendChild(iframe);
  return iframe.src;
};
</script></body></html>
"""

# The vendor's SDK as its customers call it: one script tag, the global, Product.
VENDOR_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Customer page</title></head>
<body><h1>Customer page</h1>
<script src="__SANDBOX__/sdk/transact.js"></script>
<script>
window.events = [];
window.openVendor = function (publicToken, extra) {
  var config = Object.assign({ publicToken: publicToken,
                               tasks: [{ product: Atomic.Product.DEPOSIT }] }, extra || {});
  window.flow = Atomic.transact({
    config: config,
    environmentOverride: "__SANDBOX__",
    onInteraction: function (e) { window.events.push(["interaction", e]); },
    onDataRequest: function (e) { window.events.push(["data-request", e]); },
    onFinish: function (e) { window.events.push(["finish", e]); },
    onClose: function (e) { window.events.push(["close", e]); }
  });
  return document.querySelector("iframe[data-transact]").src;
};
</script></body></html>
"""

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _sandbox(live_server, live_client, loaded, clock, receiver, **profile):
    settings = Settings(port=0, clock="manual", webhook_url=receiver.url(HOOKS), **profile)
    server = await live_server(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=None if profile else loaded)))
    return await live_client(server)


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox(live_server, live_client, loaded, clock, live_receiver):
    return await _sandbox(live_server, live_client, loaded, clock, live_receiver)


@pytest_asyncio.fixture(loop_scope="session")
async def vendor_sandbox(live_server, live_client, loaded, clock, live_receiver):
    """A sandbox whose service profile carries the vendor's names."""
    return await _sandbox(live_server, live_client, loaded, clock, live_receiver, **VENDOR_NAMES)


async def _host(live_server, browser_context, sandbox, template: str, prefix: str):
    origin = str(sandbox.server.make_url("/")).rstrip("/")
    text = template.replace("__SANDBOX__", origin).replace("__PREFIX__", prefix)

    async def serve(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", serve)
    server = await live_server(app)  # another origin: localhost, not 127.0.0.1
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    await page.goto(f"http://localhost:{server.port}/")
    return page


@pytest_asyncio.fixture(loop_scope="session")
async def page(live_server, browser_context, sandbox):
    """The host page that speaks the protocol itself."""
    return await _host(live_server, browser_context, sandbox, PROTOCOL_PAGE, "example-transact")


@pytest_asyncio.fixture(loop_scope="session")
async def vendor_page(live_server, browser_context, vendor_sandbox):
    return await _host(live_server, browser_context, vendor_sandbox, VENDOR_PAGE, "atomic-transact")


def flow_of(page):
    return page.frame_locator(FLOW)


async def open_raw(page, config: dict | None, token: str, encoded: str | None = None) -> str:
    if encoded is None:
        encoded = await page.evaluate("config => window.encode(config)", config)
    return await page.evaluate("([e, t]) => window.openRaw(e, t)", [encoded, token])


async def pick_walmart(flow) -> None:
    await on_screen(flow, "search")
    await flow.get_by_test_id("search").fill("Walmart")
    await flow.locator(f"[data-company='{WALMART}']").click()


async def sign_in(flow, username: str) -> None:
    await on_screen(flow, "login")
    await flow.get_by_test_id("username").fill(username)
    await flow.get_by_test_id("password").fill("any password")
    await flow.get_by_test_id("submit").click()
    await on_screen(flow, "progress")


async def started_tasks(page, n: int) -> list[dict]:
    await page.wait_for_function("""n => window.events.filter(e => e[0] === 'interaction'
        && e[1].name === 'Started Task').length >= n""", arg=n)
    return [e["value"] for e in await events(page, "interaction") if e["name"] == "Started Task"]


# -- the protocol (facts 9, 11) -----------------------------------------------------------------

async def test_protocol_page_with_a_slash_in_base64_and_no_token_in_the_config_finishes_a_deposit(
        page, sandbox):
    """Issue 33, points 1 and 2: the browser's btoa writes `/` (a `?` in the JSON at one
    byte offset in three, any non-ASCII character); the flow reads it, asks the host for
    the token, and a deposit runs to onFinish with its completed task."""
    token = await token_of(sandbox, "protocol-user")
    config = {"tasks": [{"operation": "deposit"}], "customer": {"name": "Caf\u00e9 Cr\u00e9dit"},
              "metadata": {"returnUrl": "https://app.example/return?from=sdk"}}
    encoded = await page.evaluate("config => window.encode(config)", config)
    for pad in range(3):  # a `?` at each byte offset: one of them encodes to `/`
        if "/" in encoded:
            break
        config["metadata"]["pad"] = "x" * (pad + 1)
        encoded = await page.evaluate("config => window.encode(config)", config)
    assert "/" in encoded and "=" in encoded or "/" in encoded
    assert json.loads(base64.b64decode(encoded)) == config  # standard alphabet, as btoa
    src = await open_raw(page, None, token, encoded)
    assert token not in src
    flow = flow_of(page)
    await pick_walmart(flow)
    await sign_in(flow, "test-good")
    [started] = await started_tasks(page, 1)
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    await flow.get_by_test_id("done").dispatch_event("click")
    finish = await wait_for_event(page, "finish")
    assert finish["taskId"] == started["taskId"]
    assert finish["handoff"] is None
    assert finish["data"]["tasks"] == [{"taskId": started["taskId"], "product": "deposit",
                                        "status": "completed"}]
    task = (await call(sandbox, "GET", f"/task/{finish['taskId']}"))["data"]
    assert task["status"] == "completed" and task["product"] == "deposit"
    # The customer's name and the language go with each interaction (facts 14).
    [initialized] = [e for e in await events(page, "interaction") if e["name"] == "Initialized"]
    assert initialized["customer"] == "Caf\u00e9 Cr\u00e9dit" and initialized["language"] == "en"


async def test_protocol_a_config_token_that_is_not_the_handshakes_is_refused(page, sandbox):
    """Point 2: a config that still carries a token keeps working only when it is the
    handshake's."""
    token = await token_of(sandbox, "protocol-both")
    other = await token_of(sandbox, "protocol-other")
    await open_raw(page, {"publicToken": other, "tasks": [{"operation": "deposit"}]}, token)
    flow = flow_of(page)
    await on_screen(flow, "error")
    await flow.get_by_test_id("close").dispatch_event("click")
    assert (await wait_for_event(page, "close"))["reason"] == "public-token-mismatch"


@pytest.mark.parametrize("encoded, why", [
    ("%%%not-base64%%%", "not base64"),
    (base64.b64encode(b"{not json").decode(), "not JSON"),
    (base64.b64encode(b"[1, 2]").decode(), "not an object"),
    (base64.b64encode(json.dumps({"tasks": "deposit"}).encode()).decode(), "a wrong type"),
    (base64.b64encode(json.dumps({"language": "fr"}).encode()).decode(), "an unknown language"),
])
async def test_protocol_an_unreadable_config_shows_the_error_screen_and_closes_with_a_reason(
        page, sandbox, encoded, why):
    """Point 4: never a bare error body, never silence: the flow's error screen, and the
    host hears the reason when the user closes it."""
    token = await token_of(sandbox, "protocol-unreadable")
    await open_raw(page, None, token, encoded)
    flow = flow_of(page)
    await on_screen(flow, "error")
    assert await flow.get_by_test_id("error").is_visible(), why
    await flow.get_by_test_id("done").dispatch_event("click")
    assert await wait_for_event(page, "close") == {"reason": "invalid-config", "data": {"tasks": []}}
    assert await page.locator(FLOW).count() == 0


async def test_protocol_unknown_config_keys_are_the_sdks_own_and_ignored(page, sandbox):
    """Facts 11: keys the flow does not know are the SDK's own."""
    token = await token_of(sandbox, "protocol-unknown-keys")
    await open_raw(page, {"tasks": [{"product": "deposit"}], "sdkVersion": "3.1.0",
                          "experiments": {"fractionalDeposits": True}, "theme": {"dark": True}},
                   token)
    flow = flow_of(page)
    await on_screen(flow, "search")
    assert await flow.locator("html").get_attribute("data-theme") == "dark"
    assert await axe_blocking(page) == []  # the dark theme's contrast too


# -- the vendor's names and calls (point 3) ---------------------------------------------------------

async def test_vendor_global_product_constants_and_no_token_in_the_iframe_url(
        vendor_page, vendor_sandbox):
    """Point 3: under a profile with the vendor's names, /sdk/transact.js defines the
    vendor's global; called as the vendor's SDK is called (`tasks: [{product:
    Product.DEPOSIT}]`), the flow runs to onFinish and the iframe URL holds no token."""
    page = vendor_page
    token = await token_of(vendor_sandbox, "vendor-user")
    src = await page.evaluate("t => window.openVendor(t)", token)
    assert token not in src
    assert "publicToken" not in json.loads(base64.b64decode(src.split("/initialize/")[1]
                                                            .split("#")[0]))
    assert await page.evaluate("() => typeof window.Transact") == "undefined"
    assert await page.evaluate("() => Object.keys(Atomic.Product)") == [
        "DEPOSIT", "VERIFY", "IDENTIFY", "WITHHOLD", "TAX", "SWITCH", "PRESENT", "MANAGE"]
    flow = flow_of(page)
    await pick_walmart(flow)
    await sign_in(flow, "test-good")
    task_id = await started_task(page)
    await run_until_idle(vendor_sandbox)
    await on_screen(flow, "done")
    await flow.get_by_test_id("done").dispatch_event("click")
    finish = await wait_for_event(page, "finish")
    assert finish["taskId"] == task_id
    assert (await call(vendor_sandbox, "GET", f"/task/{task_id}"))["data"]["status"] == "completed"
    # The messages carry the vendor's prefix (the page's recorder saw them by name).
    assert await page.evaluate("() => window.flow.close === undefined") is False


# -- the published configuration (points 5, 7, 8, 9) ---------------------------------------------

async def test_two_task_workflow_tells_the_host_of_every_task(page, sandbox):
    """Point 8: in a two-task workflow the second task's id reaches the host: a Started
    Task each, and onFinish's data.tasks; onFinish.taskId is the first task's."""
    token = await token_of(sandbox, "protocol-two-tasks")
    await open_raw(page, {"tasks": [{"product": "deposit"}, {"product": "verify"}],
                          "deeplink": {"step": "login-company", "companyId": WALMART}}, token)
    flow = flow_of(page)
    await sign_in(flow, "test-good")
    first, second = await started_tasks(page, 2)
    assert first["taskId"] != second["taskId"]
    assert (first["product"], second["product"]) == ("deposit", "verify")
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    await flow.get_by_test_id("done").dispatch_event("click")
    finish = await wait_for_event(page, "finish")
    assert finish["taskId"] == first["taskId"]
    assert [(t["taskId"], t["status"]) for t in finish["data"]["tasks"]] == [
        (first["taskId"], "completed"), (second["taskId"], "completed")]


async def test_on_complete_finish_holds_the_second_task_back_until_the_first_ends(page, sandbox):
    """Point 5: onComplete/onFail honoured in the flow's workflow: `onFail: finish` on a
    failing first task, and the second never starts; the host hears the failed one."""
    token = await token_of(sandbox, "protocol-on-fail")
    await open_raw(page, {"tasks": [{"product": "deposit", "onFail": "finish"},
                                    {"product": "verify"}],
                          "deeplink": {"step": "login-company", "companyId": WALMART}}, token)
    flow = flow_of(page)
    await sign_in(flow, "test-failure")
    [first] = await started_tasks(page, 1)
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    assert len(await started_tasks(page, 1)) == 1
    await flow.get_by_test_id("done").dispatch_event("click")
    close = await wait_for_event(page, "close")
    assert close["reason"] == "unknown-failure" and close["taskId"] == first["taskId"]
    assert [t["status"] for t in close["data"]["tasks"]] == ["failed"]


async def test_deprecated_product_and_additional_product_make_the_workflow(page, sandbox):
    """Point 5: the deprecated top-level `product` is one task, `additionalProduct` one
    more after it."""
    token = await token_of(sandbox, "protocol-deprecated")
    await open_raw(page, {"product": "deposit", "additionalProduct": "verify",
                          "deeplink": {"step": "login-company", "companyId": WALMART}}, token)
    flow = flow_of(page)
    await sign_in(flow, "test-good")
    tasks = await started_tasks(page, 2)
    assert [t["product"] for t in tasks] == ["deposit", "verify"]


async def test_exit_prompt_asks_first_and_the_handoff_leaves_it_to_the_host(page, sandbox):
    """Point 7, exit-prompt: without the handoff the close button asks "are you sure";
    with it the close event fires at once with {handoff: "exit-prompt"}. Fact 14: closing
    after a search that found nothing is zero-search-results."""
    token = await token_of(sandbox, "protocol-exit")
    await open_raw(page, {"tasks": [{"product": "deposit"}]}, token)
    flow = flow_of(page)
    await on_screen(flow, "search")
    await flow.get_by_test_id("search").fill("zzqqxxyy no such employer")
    await flow.locator(".results .empty").wait_for()
    await flow.get_by_test_id("close").click()
    await flow.get_by_test_id("exit-prompt").wait_for()
    assert await axe_blocking(page) == []
    await flow.get_by_test_id("exit-stay").click()
    assert await flow.get_by_test_id("exit-prompt").count() == 0
    assert await events(page, "close") == []
    await flow.get_by_test_id("close").click()
    await flow.get_by_test_id("exit-confirm").dispatch_event("click")
    assert await wait_for_event(page, "close") == {"reason": "zero-search-results",
                                                   "data": {"tasks": []}}

    await page.evaluate("() => { window.events = []; }")
    await open_raw(page, {"tasks": [{"product": "deposit"}], "handoff": ["exit-prompt"]}, token)
    await on_screen(flow, "search")
    await flow.get_by_test_id("close").dispatch_event("click")
    assert await wait_for_event(page, "close") == {"reason": "unknown", "handoff": "exit-prompt",
                                                   "data": {"tasks": []}}


async def finished_at_sign_in(page, sandbox, identifier: str) -> tuple[dict, dict]:
    """A deposit with the authentication-success handoff, signed in and authenticated:
    (its Started Task value, the finish event)."""
    token = await token_of(sandbox, identifier)
    await open_raw(page, {"tasks": [{"product": "deposit"}], "handoff": ["authentication-success"],
                          "deeplink": {"step": "login-company", "companyId": WALMART}}, token)
    await sign_in(flow_of(page), "test-good")
    [started] = await started_tasks(page, 1)
    await advance(sandbox, 6)  # happy-path authenticates at 4.5 s
    return started, await wait_for_event(page, "finish")


async def test_authentication_success_handoff_finishes_at_sign_in(page, sandbox):
    """Point 7, authentication-success: no success view; the finish event fires with the
    handoff once the task has authenticated, and the task goes on in the background."""
    started, finish = await finished_at_sign_in(page, sandbox, "protocol-auth-success")
    assert finish["handoff"] == "authentication-success"
    assert finish["taskId"] == started["taskId"]
    task = (await call(sandbox, "GET", f"/task/{started['taskId']}"))["data"]
    assert task["authenticated"] is True and task["status"] == "processing"


async def test_high_latency_view_and_its_handoff(page, sandbox):
    """Point 7, high-latency: username test-high-latency signs in for two minutes. After
    30 virtual seconds the flow shows its high-latency view; with the handoff it closes
    with {handoff: "high-latency"} instead."""
    token = await token_of(sandbox, "protocol-latency")
    login = {"step": "login-company", "companyId": WALMART}
    await open_raw(page, {"tasks": [{"product": "deposit"}], "deeplink": login}, token)
    flow = flow_of(page)
    await sign_in(flow, "test-high-latency")
    await started_tasks(page, 1)
    latency = flow.get_by_test_id("high-latency")
    await advance(sandbox, 20)
    await page.wait_for_timeout(700)  # two polls of the page: still quiet
    assert await latency.is_hidden()
    await advance(sandbox, 20)
    await latency.wait_for()
    assert await events(page, "close") == []
    assert await axe_blocking(page) == []

    await page.evaluate("() => { document.querySelector('iframe').remove(); window.events = []; }")
    await open_raw(page, {"tasks": [{"product": "deposit"}], "deeplink": login,
                          "handoff": ["high-latency"]}, token)
    await sign_in(flow, "test-high-latency")
    [started] = await started_tasks(page, 1)
    await advance(sandbox, 40)
    close = await wait_for_event(page, "close")
    assert close["handoff"] == "high-latency" and close["taskId"] == started["taskId"]
    assert close["reason"] == "task-pending"


async def test_data_request_reaches_the_host_for_a_card(page, sandbox):
    """Point 9: a pay-link switch whose scenario needs the user's card (username
    test-data-request): the flow sends the data request {taskId, fields}."""
    token = await token_of(sandbox, "protocol-data-request")
    await open_raw(page, {"scope": "pay-link", "tasks": [{"product": "switch"}],
                          "deeplink": {"step": "login-company", "companyId": NETFLIX}}, token)
    flow = flow_of(page)
    await sign_in(flow, "test-data-request")
    [started] = await started_tasks(page, 1)
    await advance(sandbox, 6)
    request = await wait_for_event(page, "data-request")
    assert request == {"taskId": started["taskId"], "fields": ["card"]}
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    assert len(await events(page, "data-request")) == 1
