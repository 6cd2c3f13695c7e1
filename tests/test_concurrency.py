"""Bounded and fair under load: deliveries settle together, one tenant never holds up
another, and one advance does a bounded amount of work and then continues.

Real app, real receiver, manual clock. Nothing here sleeps to wait for the sandbox; the
only wall-clock figures are generous bounds on what hanging receivers may cost.
"""

from __future__ import annotations

import asyncio
import time

from conftest import ACME, GLOBEX, HOOKS, WALMART
from receiver import HANG, parse_time
from payroll_sandbox.transport import scheduler
from payroll_sandbox.transport import dispatcher
from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

TIMEOUT = 1.0  # --webhook-timeout for these tests, wall seconds per attempt
HANGING_TIMEOUT = 60.0  # longer than any wait of a loaded machine


async def call(client, method: str, path: str, *, headers: dict = ACME, **kwargs) -> dict:
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status < 300, (method, path, response.status, await response.text())
    return await response.json()


async def make(aiohttp_client, loaded, clock, receiver, **overrides):
    settings = Settings(port=0, clock="manual", **{"webhook_timeout": TIMEOUT, **overrides})
    registry = build_registry(settings, clock=clock, loaded=loaded)
    return await aiohttp_client(create_app(settings, registry=registry))


async def acme_hanging_beside_globex(client, receiver, hanging: int) -> asyncio.Future:
    """acme with `hanging` endpoints that never answer, globex with one that does; acme's
    event triggered (its request settles once every attempt timed out)."""
    for n in range(hanging):
        receiver.program(f"/hang/{n}", HANG)
    await call(client, "PUT", "/_sandbox/webhooks/endpoints", json={"endpoints": [
        {"url": receiver.url(f"/hang/{n}")} for n in range(hanging)]})
    await call(client, "PUT", "/_sandbox/webhooks/endpoints", headers=GLOBEX,
               json={"endpoints": [{"url": receiver.url("/globex")}]})
    return asyncio.ensure_future(call(client, "POST", "/_sandbox/events/trigger",
                                      json={"eventType": "company-created"}))


async def test_hanging_endpoints_cost_one_timeout_per_retry_round(aiohttp_client, loaded, clock,
                                                                  receiver):
    """20 hanging endpoints, three attempts each: the attempts of a round run together,
    so run-until-idle costs about three timeouts, not sixty."""
    client = await make(aiohttp_client, loaded, clock, receiver)
    endpoints = [{"url": receiver.url(f"/hang/{n}"), "eventTypes": ["company-created"]}
                 for n in range(20)]
    for n in range(20):
        receiver.program(f"/hang/{n}", HANG)
    await call(client, "PUT", "/_sandbox/webhooks/endpoints", json={"endpoints": endpoints})
    await call(client, "PUT", "/_sandbox/webhooks/faults", json={"delay": 1, "delaySeconds": 1})
    await call(client, "POST", "/_sandbox/events/trigger", json={"eventType": "company-created"})

    started = time.monotonic()
    data = (await call(client, "POST", "/_sandbox/clock/run-until-idle"))["data"]
    elapsed = time.monotonic() - started

    assert data["complete"] is True and data["idle"] is True
    assert elapsed < 10 * TIMEOUT, elapsed
    [event] = (await call(client, "GET", "/_sandbox/events"))["data"]
    assert len(event["deliveries"]) == 20
    for delivery in event["deliveries"]:
        assert delivery["state"] == "failed"
        assert [a["error"] for a in delivery["attempts"]] == [f"timeout after {TIMEOUT:g}s"] * 3


async def test_concurrent_attempts_keep_their_exact_virtual_times(aiohttp_client, loaded, clock,
                                                                   receiver):
    """Spec, Delivery: "Up to three attempts in total ... 30 seconds apart". Many failing
    deliveries settle together, and every retry still happens exactly 30 virtual seconds
    after the attempt before it, whatever the wall clock did meanwhile."""
    client = await make(aiohttp_client, loaded, clock, receiver, webhook_url=receiver.url(HOOKS))
    receiver.program(HOOKS, 500)
    for n in range(5):
        await call(client, "POST", "/task/create", json={
            "identifier": f"user-{n}", "company": WALMART, "product": "deposit",
            "scenario": "happy-path"})
        await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 0.5})
    await call(client, "POST", "/_sandbox/clock/run-until-idle")

    events = (await call(client, "GET", "/_sandbox/events", params={"limit": "1000"}))["data"]
    assert len(events) >= 15
    for event in events:
        [delivery] = event["deliveries"]
        times = [parse_time(a["time"]).timestamp() for a in delivery["attempts"]]
        emitted = parse_time(event["time"]).timestamp()
        assert times == [emitted, emitted + 30, emitted + 60], event["eventType"]
        assert delivery["state"] == "failed"


async def test_one_tenants_hanging_endpoints_do_not_hold_up_another(aiohttp_client, loaded,
                                                                    clock, receiver, monkeypatch):
    """Webhook connections are shared fairly: while acme's 50 endpoints hang, globex's
    delivery goes out at once. (The shared pool is made smaller than acme's demand, so
    only the per-tenant share keeps a connection free for globex.) Told by order, not wall
    seconds: acme's attempts hold their connections for HANGING_TIMEOUT, so globex's
    delivery got one of its own if it arrived while none of them had ended."""
    monkeypatch.setattr(dispatcher, "CONNECTIONS", 40)
    client = await make(aiohttp_client, loaded, clock, receiver, webhook_timeout=HANGING_TIMEOUT)
    stuck = await acme_hanging_beside_globex(client, receiver, 50)
    while len(receiver.received()) < 32:  # acme's share of the connections is taken
        await asyncio.sleep(0.01)
    await call(client, "POST", "/_sandbox/events/trigger", headers=GLOBEX,
               json={"eventType": "company-created"})
    assert [r.path for r in receiver.received("/globex")] == ["/globex"]
    acme = (await call(client, "GET", "/_sandbox/events"))["data"]
    ended = [a for e in acme for d in e["deliveries"] for a in d["attempts"] if a["error"]]
    assert ended == [] and not stuck.done(), "globex waited for acme's attempts to time out"
    receiver.release()  # acme's attempts answered: its trigger settles now
    await stuck


async def test_an_advance_stops_at_its_work_limit_and_the_next_call_continues(
        client, monkeypatch):
    """README, Limits: one advance stops once it emitted MAX_EVENTS_PER_RUN events; it answers
    `complete: false` with the clock at the last job run and `remainingSeconds`, and the
    next call goes on from there with nothing skipped."""
    monkeypatch.setattr(scheduler, "MAX_EVENTS_PER_RUN", 5)
    for n in range(4):
        await call(client, "POST", "/task/create", json={
            "identifier": f"limit-{n}", "company": WALMART, "product": "deposit",
            "scenario": "unknown-failure"})
    start = parse_time((await call(client, "GET", "/_sandbox/clock"))["data"]["now"])

    first = (await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 100}))["data"]
    # It stops after the job that reaches the limit (a job emits at most a few events).
    assert first["complete"] is False and 5 <= first["eventsEmitted"] <= 7
    moved = (parse_time(first["now"]) - start).total_seconds()
    assert 0 < moved < 100 and first["remainingSeconds"] == 100 - moved
    rest = (await call(client, "POST", "/_sandbox/clock/advance",
                       json={"seconds": first["remainingSeconds"]}))["data"]
    assert rest["complete"] is True and rest["remainingSeconds"] == 0
    assert (parse_time(rest["now"]) - start).total_seconds() == 100

    events = (await call(client, "GET", "/_sandbox/events"))["data"]
    assert len(events) == first["eventsEmitted"] + rest["eventsEmitted"] == 12
    finals = [e for e in events if e["eventType"] == "task-status-updated"]
    assert len(finals) == 4  # every task resolved, none twice


async def test_a_long_advance_lets_other_tenants_in(client, monkeypatch):
    """Tenants are isolated in time: while acme's clock runs many jobs, globex's search is
    answered before that advance ends (the runner yields to the event loop)."""
    monkeypatch.setattr(scheduler, "YIELD_SECONDS", 0)
    for n in range(300):
        await call(client, "POST", "/task/create", json={
            "identifier": f"busy-{n}", "company": WALMART, "product": "deposit",
            "scenario": "happy-path"})
    advance = asyncio.ensure_future(call(client, "POST", "/_sandbox/clock/advance",
                                         json={"seconds": 60}))
    await asyncio.sleep(0)  # the advance has started
    await call(client, "POST", "/company/search", headers=GLOBEX, json={"query": "walmart"})
    assert not advance.done()
    assert (await advance)["data"]["jobsRun"] >= 900


async def test_attempts_past_a_tenants_connections_wait_their_turn_and_keep_their_times(
        aiohttp_client, loaded, clock, receiver, monkeypatch):
    """Past TENANT_CONNECTIONS, an outbox's attempts wait in order (not yet sent) and go
    out as connections free up; run-until-idle waits for them too, so every retry still
    comes exactly 30 virtual seconds after the attempt before it."""
    monkeypatch.setattr(dispatcher, "TENANT_CONNECTIONS", 2)
    client = await make(aiohttp_client, loaded, clock, receiver)
    for n in range(7):
        receiver.program(f"/failing/{n}", 500, 500, 500)
    await call(client, "PUT", "/_sandbox/webhooks/endpoints", json={"endpoints": [
        {"url": receiver.url(f"/failing/{n}"), "eventTypes": ["company-created"]}
        for n in range(7)]})
    await call(client, "POST", "/_sandbox/events/trigger", json={"eventType": "company-created"})
    data = (await call(client, "POST", "/_sandbox/clock/run-until-idle"))["data"]

    assert data["idle"] is True
    assert len(receiver.received()) == 21  # every attempt, none twice
    [event] = (await call(client, "GET", "/_sandbox/events"))["data"]
    emitted = parse_time(event["time"]).timestamp()
    assert [d["url"] for d in event["deliveries"]] == [receiver.url(f"/failing/{n}")
                                                       for n in range(7)]
    for delivery in event["deliveries"]:
        times = [parse_time(a["time"]).timestamp() for a in delivery["attempts"]]
        assert times == [emitted, emitted + 30, emitted + 60]
        assert delivery["state"] == "failed"


async def test_a_tenant_waiting_for_the_shared_connections_goes_on_when_one_frees(
        aiohttp_client, loaded, clock, receiver, monkeypatch):
    """All of CONNECTIONS taken by acme's hanging endpoints: globex's delivery waits (it is
    not dropped) and goes out as soon as one of acme's attempts ends."""
    monkeypatch.setattr(dispatcher, "CONNECTIONS", 3)
    client = await make(aiohttp_client, loaded, clock, receiver)
    stuck = await acme_hanging_beside_globex(client, receiver, 3)
    while len(receiver.received()) < 3:  # every shared connection is acme's
        await asyncio.sleep(0.01)
    await call(client, "POST", "/_sandbox/events/trigger", headers=GLOBEX,
               json={"eventType": "company-created"})
    # The trigger settles globex's delivery: it waited for acme's first attempt to time out.
    assert [r.path for r in receiver.received("/globex")] == ["/globex"]
    [event] = (await call(client, "GET", "/_sandbox/events", headers=GLOBEX))["data"]
    assert event["deliveries"][0]["state"] == "delivered"
    await stuck


async def test_a_reset_interrupts_the_attempts_still_waiting_and_sends_none_of_them(
        aiohttp_client, loaded, clock, receiver, monkeypatch):
    """A reset cuts off the tenant's attempts in flight and those waiting for a connection:
    none of the waiting ones is sent afterwards."""
    monkeypatch.setattr(dispatcher, "TENANT_CONNECTIONS", 1)
    client = await make(aiohttp_client, loaded, clock, receiver)
    for n in range(4):
        receiver.program(f"/hang/{n}", HANG)
    await call(client, "PUT", "/_sandbox/webhooks/endpoints", json={"endpoints": [
        {"url": receiver.url(f"/hang/{n}")} for n in range(4)]})
    stuck = asyncio.ensure_future(client.post("/_sandbox/events/trigger", headers=ACME,
                                              json={"eventType": "company-created"}))
    while len(receiver.received()) < 1:
        await asyncio.sleep(0.01)
    await call(client, "POST", "/_sandbox/reset")
    await stuck
    assert [r.path for r in receiver.received()] == ["/hang/0"]  # the other three never left
