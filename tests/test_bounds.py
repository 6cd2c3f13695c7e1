"""Everything a long-running server keeps has a bound (README: Limits).

Past a bound the oldest settled items go first and nothing still pending is evicted;
each eviction is counted in GET /_sandbox/stats. Where nothing can be evicted (users,
tenants) the request is refused with 429 and `retry-after`. Real app, real receiver,
manual clock; the bounds are set small through the same settings the CLI has.
"""

from __future__ import annotations

from conftest import ACME, WALMART
from receiver import Receiver
from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

HOOKS = "/hooks"


async def call(client, method: str, path: str, *, status: int = 200, headers: dict = ACME,
               **kwargs) -> dict:
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status == status, (method, path, response.status, await response.text())
    return await response.json()


async def bounded(aiohttp_client, loaded, clock, receiver: Receiver, **limits):
    settings = Settings(port=0, clock="manual", webhook_url=receiver.url(HOOKS),
                        webhook_timeout=0.5, **limits)
    registry = build_registry(settings, clock=clock, loaded=loaded)
    return await aiohttp_client(create_app(settings, registry=registry))


async def stats(client, headers: dict = ACME) -> dict:
    return (await call(client, "GET", "/_sandbox/stats", headers=headers))["data"]


async def test_the_ledger_evicts_the_oldest_settled_events_and_keeps_pending_ones(
        aiohttp_client, loaded, clock, receiver):
    client = await bounded(aiohttp_client, loaded, clock, receiver, max_events=20)
    receiver.program("/failing", 500)
    await call(client, "PUT", "/_sandbox/webhooks/endpoints", json={"endpoints": [
        {"url": receiver.url(HOOKS), "eventTypes": ["company-updated"]},
        {"url": receiver.url("/failing"), "eventTypes": ["company-created"]}]})
    pending = (await call(client, "POST", "/_sandbox/events/trigger", status=201,
                          json={"eventType": "company-created"}))["data"]
    assert pending["delivery"] == "pending"  # its retries wait on the clock
    for _ in range(100):
        await call(client, "POST", "/_sandbox/events/trigger", status=201,
                   json={"eventType": "company-updated"})

    numbers = await stats(client)
    assert numbers["events"]["stored"] <= 20
    assert numbers["events"]["emitted"] == 101
    assert numbers["events"]["evicted"] == 101 - numbers["events"]["stored"]
    kept = (await call(client, "GET", f"/_sandbox/events/{pending['id']}"))["data"]
    assert kept["delivery"] == "pending" and len(kept["deliveries"][0]["attempts"]) == 1
    assert len(receiver.received(HOOKS)) == 100  # evicted after delivery, never before

    await call(client, "POST", "/_sandbox/clock/run-until-idle")
    kept = (await call(client, "GET", f"/_sandbox/events/{pending['id']}"))["data"]
    assert kept["delivery"] == "failed" and len(kept["deliveries"][0]["attempts"]) == 3
    assert numbers["deliveries"]["stored"] <= 20


async def test_tasks_past_the_bound_go_by_finished_workflow_and_running_ones_stay(
        aiohttp_client, loaded, clock, receiver):
    client = await bounded(aiohttp_client, loaded, clock, receiver, max_tasks=10)
    running = (await call(client, "POST", "/task/create", json={
        "identifier": "slow", "company": WALMART, "product": "deposit",
        "scenario": "slow-processing"}))["data"]["id"]
    patched = (await call(client, "POST", "/task/create", json={
        "identifier": "patched", "company": WALMART, "product": "deposit",
        "scenario": "task-status-patched"}))["data"]["id"]
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 20})
    for n in range(30):
        await call(client, "POST", "/task/create", json={
            "identifier": f"quick-{n}", "company": WALMART, "product": "deposit",
            "scenario": "auth-expired"})  # ends at 9.5 s
        await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 15})

    numbers = (await stats(client))["tasks"]
    assert numbers["stored"] <= 10 and numbers["evicted"] == 32 - numbers["stored"]
    assert (await call(client, "GET", f"/task/{running}"))["data"]["status"] == "processing"
    # failed, with its correction still to come: not evicted
    assert (await call(client, "GET", f"/task/{patched}"))["data"]["status"] == "failed"
    await call(client, "POST", "/_sandbox/clock/run-until-idle")
    assert (await call(client, "GET", f"/task/{patched}"))["data"]["status"] == "completed"


async def test_tokens_past_the_bound_go_expired_first(aiohttp_client, loaded, clock, receiver):
    client = await bounded(aiohttp_client, loaded, clock, receiver, max_tokens=10)
    short = [(await call(client, "POST", "/access-token",
                         json={"identifier": f"short-{n}", "tokenLifetime": 1800}))
             ["data"]["publicToken"] for n in range(5)]
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 3600})
    live = [(await call(client, "POST", "/access-token", json={"identifier": f"live-{n}"}))
            ["data"]["publicToken"] for n in range(8)]

    numbers = (await stats(client))["tokens"]
    assert numbers["stored"] <= 10 and numbers["evicted"] == 13 - numbers["stored"]
    for token in live:  # every expired one went before any live one
        await call(client, "POST", "/company/search", headers={"x-public-token": token},
                   json={"query": "walmart", "limit": 1})
    error = (await call(client, "POST", "/company/search", status=401,
                        headers={"x-public-token": short[0]}, json={"query": "walmart"}))["error"]
    assert error["code"] == "invalid-public-token"


async def test_users_and_tenants_past_their_bound_are_refused_with_429(aiohttp_client, loaded,
                                                                        clock, receiver):
    client = await bounded(aiohttp_client, loaded, clock, receiver, max_users=3,
                           max_tenants=2)
    for n in range(3):
        await call(client, "POST", "/access-token", json={"identifier": f"user-{n}"})
    response = await client.post("/access-token", json={"identifier": "one-more"}, headers=ACME)
    assert response.status == 429 and response.headers["retry-after"]
    assert (await response.json())["error"]["code"] == "user-limit-reached"
    await call(client, "POST", "/access-token", json={"identifier": "user-0"})  # known: fine

    made = [(await call(client, "POST", "/_sandbox/tenants", status=201, json={}))["data"]
            for _ in range(2)]
    response = await client.post("/_sandbox/tenants", json={}, headers=ACME)
    assert response.status == 429 and response.headers["retry-after"]
    assert (await response.json())["error"]["code"] == "tenant-limit-reached"
    await call(client, "DELETE", f"/_sandbox/tenants/{made[0]['name']}")
    await call(client, "POST", "/_sandbox/tenants", status=201, json={})
    assert (await stats(client))["tenants"]["maxCreated"] == 2


async def test_the_journal_keeps_its_newest_entries_and_counts_the_rest(client):
    for _ in range(1005):
        await client.get("/_sandbox/clock", headers=ACME)
    numbers = (await stats(client))["journal"]
    assert numbers["stored"] == numbers["max"] == 1000
    assert numbers["evicted"] >= 5


async def test_a_burst_of_pending_events_goes_back_within_the_bound_once_they_settle(
        aiohttp_client, loaded, clock, receiver):
    """Events are kept while a delivery is pending, and more work is refused (429) while
    they fill --max-events (round four; the ledger grew without limit before); once a run
    of the clock settles them, the ledger is back within the bound and takes more."""
    client = await bounded(aiohttp_client, loaded, clock, receiver, max_events=20)
    receiver.program("/failing", 500)
    await call(client, "PUT", "/_sandbox/webhooks/endpoints",
               json={"endpoints": [{"url": receiver.url("/failing")}]})
    for _ in range(20):
        await call(client, "POST", "/_sandbox/events/trigger", status=201,
                   json={"eventType": "company-updated"})
    await call(client, "POST", "/_sandbox/events/trigger", status=429,
               json={"eventType": "company-updated"})
    assert (await stats(client))["events"]["stored"] == 20  # every delivery still pending
    await call(client, "POST", "/_sandbox/clock/run-until-idle")
    for _ in range(20):
        await call(client, "POST", "/_sandbox/events/trigger", status=201,
                   json={"eventType": "company-updated"})
    await call(client, "POST", "/_sandbox/clock/run-until-idle")
    numbers = await stats(client)
    assert numbers["events"]["stored"] <= 20
    assert numbers["events"]["evicted"] == 40 - numbers["events"]["stored"]
