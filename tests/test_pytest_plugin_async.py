"""The plugin's async fixtures: the customer's own aiohttp app on `aiohttp_server` and the
AsyncWebhookReceiver receive deliveries on the test's loop while the test awaits the sandbox."""

from __future__ import annotations

import asyncio
import hashlib
import hmac

import pytest
from aiohttp import web

from payroll_sandbox.testing import AsyncSandbox, SandboxError
from payroll_sandbox.testing import AsyncWebhookReceiver
from payroll_sandbox.kit.loops import BlockingCallError

WALMART = "6410a0000000000000000001"
HAPPY_PATH = ["task-authentication-status-updated", "task-status-updated",
              "task-workflow-finished"]


def customer_app(secret: str, received: list, advancing: dict) -> web.Application:
    """A customer's webhook endpoint: checks the signature, keeps the body and whether the
    test was awaiting the sandbox when it arrived."""

    async def webhooks(request: web.Request) -> web.Response:
        raw = await request.read()
        expected = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
        if request.headers.get("x-hmac-signature-sha-256") != expected:
            return web.Response(status=401)
        received.append((advancing["now"], await request.json()))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/webhooks", webhooks)
    return app


async def test_customer_app_receives_a_delivery_while_the_test_awaits_advance(
        async_payroll_sandbox, aiohttp_server):
    sandbox = async_payroll_sandbox
    received: list = []
    advancing = {"now": False}
    server = await aiohttp_server(customer_app(sandbox.api_secret, received, advancing))
    url = str(server.make_url("/webhooks"))
    await sandbox.use_webhook_url(url)
    task = await sandbox.post("/task/create", {"identifier": "u1", "company": WALMART,
                                               "product": "deposit"})
    advancing["now"] = True
    clock = await sandbox.advance(60)
    advancing["now"] = False
    assert clock["complete"] is True
    assert [(during, body["eventType"]) for during, body in received
            if body.get("task") == task["id"]] == [(True, t) for t in HAPPY_PATH]
    # Every attempt reached the app at once: had the loop been blocked, they would have
    # timed out (15 s) and been retried instead.
    for record in await sandbox.events(task=task["id"]):
        assert [(d["url"], [a["status"] for a in d["attempts"]])
                for d in record["deliveries"]] == [(url, [204])]


async def test_async_receiver_sees_the_task_events_beside_the_customer_app(
        async_payroll_sandbox, async_webhook_receiver, aiohttp_server):
    received: list = []
    server = await aiohttp_server(customer_app(async_payroll_sandbox.api_secret, received,
                                               {"now": None}))
    await async_payroll_sandbox.use_webhook_url(str(server.make_url("/webhooks")))
    task = await async_payroll_sandbox.post("/task/create", {
        "identifier": "u1", "company": WALMART, "product": "deposit", "scenario": "auth-expired"})
    await async_payroll_sandbox.run_until_idle()
    receiver = async_webhook_receiver
    status = await receiver.wait_for("task-status-updated", task=task["id"], user="u1")
    assert status["data"]["reason"] == "auth-expired"
    receiver.assert_order(["task-status-updated", "task-workflow-finished"], task=task["id"])
    receiver.assert_exactly_once("task-workflow-finished", company=WALMART)
    assert receiver.events == [body for _, body in received]


async def test_async_receiver_wait_for_wakes_when_the_delivery_arrives(async_payroll_sandbox,
                                                                       async_webhook_receiver):
    waiting = asyncio.create_task(async_webhook_receiver.wait_for("company-deleted", timeout=30))
    await asyncio.sleep(0)  # the wait has begun and found nothing
    assert not waiting.done()
    event = await async_payroll_sandbox.trigger("company-deleted")
    body = await asyncio.wait_for(waiting, 5)
    assert body["eventType"] == "company-deleted"
    assert async_webhook_receiver.deliveries[0].event_id == event["id"]


async def test_async_receiver_fail_next_and_the_timeout_message(async_payroll_sandbox,
                                                                async_webhook_receiver):
    receiver = async_webhook_receiver
    receiver.fail_next(1, status=500)
    event = await async_payroll_sandbox.trigger("company-updated")
    with pytest.raises(AssertionError) as raised:
        await receiver.wait_for("company-updated", timeout=0.05)
    assert (f"no company-updated delivery was accepted within 0.05 s; received 1: "
            f"#1 company-updated {event['id']} -> 500") in str(raised.value)
    await async_payroll_sandbox.advance(30)
    assert (await receiver.wait_for("company-updated"))["eventType"] == "company-updated"
    assert [d.status for d in receiver.deliveries] == [500, 200]


async def test_async_and_sync_fixtures_are_one_tenant(payroll_sandbox, async_payroll_sandbox,
                                                      webhook_receiver, async_webhook_receiver):
    assert async_payroll_sandbox.name == payroll_sandbox.name
    await async_payroll_sandbox.trigger("company-updated")
    # The sync receiver is served by the sandbox's thread, the async one by this loop.
    webhook_receiver.assert_exactly_once("company-updated")
    async_webhook_receiver.assert_exactly_once("company-updated")


async def test_a_sync_call_from_an_async_test_raises_at_once_naming_the_async_twin(
        payroll_sandbox, webhook_receiver, async_payroll_sandbox, aiohttp_server):
    """Called on the test's running loop, a blocking call would stall the customer's app on
    that loop for the whole webhook timeout (47 s seen) and the test still passed."""
    received: list = []
    server = await aiohttp_server(customer_app(payroll_sandbox.api_secret, received,
                                               {"now": False}))
    await async_payroll_sandbox.use_webhook_url(str(server.make_url("/webhooks")))
    started = asyncio.get_running_loop().time()
    for call in (lambda: payroll_sandbox.post("/task/create", {"identifier": "u1"}),
                 lambda: payroll_sandbox.advance(60),
                 lambda: payroll_sandbox.trigger("company-updated"),
                 lambda: webhook_receiver.wait_for("company-updated", timeout=30)):
        with pytest.raises(BlockingCallError, match="async_payroll_sandbox|async_webhook_receiver"):
            call()
    assert asyncio.get_running_loop().time() - started < 1  # at once, not after a timeout
    assert await async_payroll_sandbox.get("/_sandbox/tasks") == []  # nothing was sent
    assert received == []
    with pytest.raises(BlockingCallError) as raised:
        payroll_sandbox.get("/_sandbox/clock")
    assert "async_payroll_sandbox" in str(raised.value) and "GET /_sandbox/clock" in str(raised.value)


async def test_async_sandbox_control_plane(async_payroll_sandbox):
    sandbox = async_payroll_sandbox
    with pytest.raises(SandboxError) as raised:
        await sandbox.post("/company/search", {"query": "x", "product": "a", "products": ["b"]})
    assert raised.value.body["error"]["code"] == "product-and-products"
    await sandbox.bind_scenario("u2", "connection-error")
    task = await sandbox.post("/task/create", {"identifier": "u2", "company": WALMART,
                                               "product": "deposit"})
    await sandbox.run_until_idle()
    assert (await sandbox.get(f"/task/{task['id']}"))["reason"] == "connection-error"
    assert (await sandbox.public_token("u2")).startswith("public-sandbox-")
    other = await sandbox.new_tenant()
    assert isinstance(other, AsyncSandbox) and other.name != sandbox.name
    assert await other.events() == [] and await sandbox.events(user="u2")
    await other.request("DELETE", f"/_sandbox/tenants/{other.name}")


async def test_async_sandbox_snapshot_restores_the_tenant(async_payroll_sandbox):
    sandbox = async_payroll_sandbox
    await sandbox.trigger("company-updated")
    document = await sandbox.snapshot()
    await sandbox.trigger("company-deleted")
    await sandbox.restore(document)
    assert [e["eventType"] for e in await sandbox.events()] == ["company-updated"]


async def test_async_receiver_used_without_the_fixture(payroll_sandbox_server):
    """AsyncWebhookReceiver and AsyncSandbox on their own, as a customer's conftest might."""
    server = payroll_sandbox_server
    async with AsyncSandbox(server.base_url, server.api_key, server.api_secret) as default:
        tenant = await default.new_tenant()
        try:
            async with AsyncWebhookReceiver() as receiver:
                await receiver.register(tenant, ["company-deleted"])
                await tenant.trigger("company-updated")
                await tenant.trigger("company-deleted")
                assert [b["eventType"] for b in receiver.events] == ["company-deleted"]
        finally:
            await tenant.request("DELETE", f"/_sandbox/tenants/{tenant.name}")


async def test_an_async_receiver_registers_a_blocking_sandbox_without_blocking(
        payroll_sandbox, async_payroll_sandbox):
    """`register` takes the sync fixture's Sandbox too (its awaitable twin makes the call), so
    an async test that holds only the blocking client is not refused with BlockingCallError."""
    async with AsyncWebhookReceiver() as receiver:
        await receiver.register(payroll_sandbox, ["company-updated"])
        await async_payroll_sandbox.trigger("company-updated")
        assert [b["eventType"] for b in receiver.events] == ["company-updated"]
