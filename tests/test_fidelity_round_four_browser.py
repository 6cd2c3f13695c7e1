"""Fidelity, round four (issue 47) in headless Chromium: `Product` as a global of its own
beside the SDK's (facts 11), and the flow's end before the final outcome (facts 13, spec:
User object), each test quoting its source.

Host pages written from the facts alone (no vendor code): one calls the sandbox's
/sdk/transact.js as the SDK's type declarations export it, one speaks the protocol itself
(test_sdk_protocol_browser.py's). The sandbox runs in-process on a manual clock.
"""

from __future__ import annotations

import pytest
import pytest_asyncio
from calls import call, run_until_idle
from conftest import WALMART
from test_sdk_browser import events, finish_task, on_screen, started_task, token_of
from test_sdk_protocol_browser import (_host, finished_at_sign_in, flow_of, open_raw,  # noqa: F401
                                       page, pick_walmart, sandbox, sign_in, vendor_sandbox)

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Facts 11: "The type declarations export the two as separate names (`export { ... as
# Product, ... as Atomic }`): frontend code writes `Atomic.transact(...)` beside
# `Product.DEPOSIT`". `window.pageProduct` is set when the page has a Product of its own.
DECLARATIONS_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Customer page</title></head>
<body><h1>Customer page</h1>
<script>__OWN__</script>
<script src="__SANDBOX__/sdk/transact.js"></script>
<script>
window.events = [];
window.openDeclared = function (publicToken) {
  window.flow = Atomic.transact({
    config: { publicToken: publicToken, tasks: [{ product: Product.DEPOSIT }] },
    environmentOverride: "__SANDBOX__",
    onInteraction: function (e) { window.events.push(["interaction", e]); },
    onFinish: function (e) { window.events.push(["finish", e]); },
    onClose: function (e) { window.events.push(["close", e]); }
  });
};
</script></body></html>
"""
OWN_PRODUCT = "var Product = { mine: true };"


async def declared_page(live_server, browser_context, vendor_sandbox, own: str = ""):
    template = DECLARATIONS_PAGE.replace("__OWN__", own)
    return await _host(live_server, browser_context, vendor_sandbox, template, "atomic-transact")


async def test_product_is_a_global_beside_the_sdks_and_a_deposit_runs_with_it(
        live_server, browser_context, vendor_sandbox):
    """Facts 11 (above): a script that stands in for the SDK's "defines both names,
    `Atomic` and `Product`, as globals". The page written from the declarations runs a
    deposit to onFinish with `Product.DEPOSIT`."""
    page = await declared_page(live_server, browser_context, vendor_sandbox)
    assert await page.evaluate("() => Object.keys(Product)") == [
        "DEPOSIT", "VERIFY", "IDENTIFY", "WITHHOLD", "TAX", "SWITCH", "PRESENT", "MANAGE"]
    assert await page.evaluate("() => Product === Atomic.Product") is True
    token = await token_of(vendor_sandbox, "declared-user")
    await page.evaluate("t => window.openDeclared(t)", token)
    flow = flow_of(page)
    await pick_walmart(flow)
    await sign_in(flow, "test-good")
    task_id = await started_task(page)
    finish = await finish_task(page, vendor_sandbox, flow)
    assert finish["taskId"] == task_id
    task = (await call(vendor_sandbox, "GET", f"/task/{task_id}"))["data"]
    assert (task["product"], task["status"]) == ("deposit", "completed")


async def test_a_pages_own_product_is_left_as_it_is(live_server, browser_context,
                                                    vendor_sandbox):
    """The issue: "`/sdk/transact.js` defines `Product` as a global of its own beside the
    SDK global (without overwriting a `Product` the page already has)"."""
    page = await declared_page(live_server, browser_context, vendor_sandbox, OWN_PRODUCT)
    assert await page.evaluate("() => Product") == {"mine": True}
    assert await page.evaluate("() => Atomic.Product.DEPOSIT") == "deposit"


async def test_the_authentication_success_handoff_leaves_the_task_not_connected(page, sandbox):
    """Facts 13: "`authentication-success` (no success view: the finish event fires with
    `{handoff: "authentication-success"}`)"; the spec (User object): `connected` is true
    only when the user saw the final outcome; the issue: "`connected` false whenever the
    flow ended before the final outcome (every handoff and close)". The task resolves
    after the flow finished at sign-in: its events say connected false."""
    started, finish = await finished_at_sign_in(page, sandbox, "handoff-user")
    assert (finish["handoff"], finish["taskId"]) == ("authentication-success", started["taskId"])
    # The flow told the sandbox before it finished; it sent no "Left Flow": the host took over.
    assert [e for e in await events(page, "interaction") if e["name"] == "Left Flow"] == []
    await run_until_idle(sandbox)
    task = (await call(sandbox, "GET", f"/task/{started['taskId']}"))["data"]
    assert task["status"] == "completed"
    updates = [e for e in (await call(sandbox, "GET", "/_sandbox/events",
                                      params={"task": started["taskId"]}))["data"]
               if e["eventType"] == "task-status-updated"]
    assert updates and updates[-1]["body"]["data"]["status"] == "completed"
    assert {e["body"]["user"]["connected"] for e in updates
            if e["body"]["data"]["status"] == "completed"} == {False}


async def test_a_reconnects_initialized_step_is_the_step_the_flow_opens_at(page, sandbox):
    """The issue: "the reconnect's `Initialized.step` the step the flow opens at" (it said
    `search-company` on a linked-account reconnect that opens straight at progress). Facts
    14: the interaction payload `{name, value, ...}`."""
    await call(sandbox, "POST", "/task/create", json={
        "identifier": "reconnect-user", "company": WALMART, "product": "deposit"})
    await run_until_idle(sandbox)
    [account] = (await call(sandbox, "GET", "/linked-accounts/reconnect-user"))["data"]
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect",
               json={"reason": "timeout"})
    token = await token_of(sandbox, "reconnect-user")
    await open_raw(page, {"tasks": [{"product": "deposit"}], "linkedAccount": account["_id"]},
                   token)
    await on_screen(flow_of(page), "progress")
    [initialized] = [e for e in await events(page, "interaction") if e["name"] == "Initialized"]
    assert initialized["value"]["step"] == "task-progress"
