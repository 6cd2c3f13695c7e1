"""Incremental reads (`after=<revision>` on /_sandbox/events and /_sandbox/tasks) and the
resend of one event: what the dashboard's live updates and its resend button stand on."""

from __future__ import annotations

import asyncio
import json

from conftest import ACME, HOOKS, WALMART
from receiver import HANG

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.domain.changes import WINDOW
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.settings import Settings


async def read(client, path: str) -> dict:
    response = await client.get(path, headers=ACME)
    assert response.status == 200, await response.text()
    return await response.json()


async def post(client, path: str, body: dict | None = None) -> dict:
    response = await client.post(path, json=body or {}, headers=ACME)
    assert response.status in (200, 201), await response.text()
    return await response.json()


async def test_a_read_after_a_revision_returns_only_what_changed_since(sandbox, receiver):
    first = await read(sandbox, "/_sandbox/events?after=0")
    assert first["reset"] is True, "0 predates every tenant: a full read, and a cursor"
    cursor = first["revision"]
    assert (await read(sandbox, f"/_sandbox/events?after={cursor}")) == {
        "data": [], "total": 0, "revision": cursor, "reset": False}

    await post(sandbox, "/task/create", {"identifier": "live-1", "company": WALMART,
                                         "product": "deposit", "scenario": "happy-path"})
    tasks = await read(sandbox, f"/_sandbox/tasks?after={cursor}")
    assert [t["user"]["identifier"] for t in tasks["data"]] == ["live-1"]
    assert tasks["data"][0]["status"] == "queued"
    await post(sandbox, "/_sandbox/clock/run-until-idle")

    changed = await read(sandbox, f"/_sandbox/events?after={cursor}")
    everything = await read(sandbox, "/_sandbox/events?user=live-1")
    assert sorted(e["id"] for e in changed["data"]) == sorted(e["id"] for e in everything["data"])
    assert all(e["delivery"] == "delivered" for e in changed["data"])
    assert changed["revision"] > cursor and changed["reset"] is False
    moved = await read(sandbox, f"/_sandbox/tasks?after={tasks['revision']}")
    assert [t["status"] for t in moved["data"]] == ["completed"]
    assert (await read(sandbox, f"/_sandbox/events?after={changed['revision']}"))["data"] == []
    assert len(receiver.received(HOOKS)) == len(everything["data"])


async def test_a_retry_brings_an_old_event_back_with_its_new_attempt(sandbox, receiver):
    receiver.program(HOOKS, 500)
    event = (await post(sandbox, "/_sandbox/events/trigger",
                        {"eventType": "company-updated"}))["data"]
    cursor = (await read(sandbox, "/_sandbox/events?after=0"))["revision"]
    for expected in (2, 3):
        await post(sandbox, "/_sandbox/clock/advance", {"seconds": 30})
        changed = await read(sandbox, f"/_sandbox/events?after={cursor}")
        assert [e["id"] for e in changed["data"]] == [event["id"]]
        attempts = changed["data"][0]["deliveries"][0]["attempts"]
        assert [a["status"] for a in attempts] == [500] * expected
        cursor = changed["revision"]
    assert changed["data"][0]["delivery"] == "failed"


async def test_past_the_limit_the_cursor_goes_on_from_the_last_change_shown(sandbox):
    cursor = (await read(sandbox, "/_sandbox/events?after=0"))["revision"]
    made = [(await post(sandbox, "/_sandbox/events/trigger",
                        {"eventType": "company-updated"}))["data"]["id"] for _ in range(5)]
    seen = []
    for _ in range(3):
        page = await read(sandbox, f"/_sandbox/events?after={cursor}&limit=2")
        seen += [e["id"] for e in page["data"]]
        cursor = page["revision"]
    assert seen == made
    assert page["total"] == 1


async def test_a_reset_makes_every_older_cursor_stale(sandbox):
    await post(sandbox, "/_sandbox/events/trigger", {"eventType": "company-updated"})
    cursor = (await read(sandbox, "/_sandbox/events?after=0"))["revision"]
    await post(sandbox, "/_sandbox/reset")
    stale = await read(sandbox, f"/_sandbox/events?after={cursor}")
    assert stale["reset"] is True and stale["data"] == []
    tasks = await read(sandbox, f"/_sandbox/tasks?after={cursor}")
    assert tasks["reset"] is True
    ahead = await read(sandbox, f"/_sandbox/events?after={stale['revision'] + 10**9}")
    assert ahead["reset"] is True, "a cursor from another process (restarted server) is stale too"


async def test_a_bad_cursor_is_refused_naming_it(sandbox):
    for bad in ("-1", "abc", "1.5"):
        response = await sandbox.get(f"/_sandbox/events?after={bad}", headers=ACME)
        assert response.status == 422, bad
        problem = await response.json()
        assert "after" in json.dumps(problem["error"]), problem


async def test_a_filter_on_what_a_change_moves_is_refused_with_a_cursor(sandbox):
    """A reader of `delivery=pending` (or `status=processing`) after a cursor would never
    hear that an item left the filter: refused, naming the filter; nothing else changes."""
    for path, field in (("/_sandbox/events?after=0&delivery=pending", "$.delivery"),
                        ("/_sandbox/tasks?after=0&status=processing", "$.status")):
        response = await sandbox.get(path, headers=ACME)
        assert response.status == 422, path
        details = (await response.json())["error"]["details"]
        assert [(d["location"], d["path"]) for d in details] == [("query", field)]
    assert (await read(sandbox, "/_sandbox/events?after=0&type=company-updated"))["reset"]


async def test_a_user_leaving_the_hosted_flow_is_a_change_of_their_task(sandbox):
    token = (await post(sandbox, "/access-token", {"identifier": "leaver"}))["data"]["publicToken"]
    task = (await post(sandbox, "/task/create", {"identifier": "leaver", "company": WALMART,
                                                 "product": "deposit",
                                                 "scenario": "slow-processing"}))["data"]
    cursor = (await read(sandbox, "/_sandbox/tasks?after=0"))["revision"]
    left = await sandbox.post("/sdk/leave", json={"taskId": task["id"]},
                              headers={"x-public-token": token})
    assert left.status == 200, await left.text()
    changed = await read(sandbox, f"/_sandbox/tasks?after={cursor}")
    assert [t["id"] for t in changed["data"]] == [task["id"]]


async def test_an_attempt_cut_short_by_a_reset_is_no_change_of_the_new_tenant(sandbox, receiver):
    receiver.program(HOOKS, HANG)
    tenant = sandbox.server.app[SANDBOX].registry.tenants.get("acme")
    dispatcher = sandbox.server.app[SANDBOX].dispatcher
    tenant.emit("company-updated", data={"companyId": "hanging"})  # queued on its outbox
    dispatcher.flush(tenant.webhooks)  # no settling: in flight
    await asyncio.sleep(0)  # the attempt's task starts
    in_flight = dispatcher.running(tenant.webhooks)
    assert in_flight, "the attempt hangs"
    await post(sandbox, "/_sandbox/reset")
    await asyncio.gather(*in_flight, return_exceptions=True)
    assert len(tenant.changes) == len(tenant.events) + len(tenant.tasks) == 0
    assert (await read(sandbox, "/_sandbox/events?after=0"))["data"] == []


async def test_resend_replays_one_event_with_its_ce_id(sandbox, receiver):
    event = (await post(sandbox, "/_sandbox/events/trigger",
                        {"eventType": "company-updated"}))["data"]
    other = (await post(sandbox, "/_sandbox/events/trigger",
                        {"eventType": "company-updated"}))["data"]
    replayed = await post(sandbox, "/_sandbox/webhooks/replay", {"eventId": event["id"]})
    assert [r["eventId"] for r in replayed["data"]] == [event["id"]]
    ids = [r.ce_id for r in receiver.received(HOOKS)]
    assert ids == [event["id"], other["id"], event["id"]]
    record = await read(sandbox, f"/_sandbox/events/{event['id']}")
    assert [d["replay"] for d in record["data"]["deliveries"]] == [False, True]

    missing = await sandbox.post("/_sandbox/webhooks/replay", json={"eventId": "nope"},
                                 headers=ACME)
    assert missing.status == 404
    assert len(receiver.received(HOOKS)) == 3, "a refused resend sends nothing"


async def test_with_ten_thousand_stored_events_a_tick_costs_only_the_new_ones(
        aiohttp_client, loaded, clock):
    """The dashboard's tick (events and tasks after its cursor) stays small however long
    the ledger: its size follows the new events, not the 10,000 stored."""
    settings = Settings(port=0, clock="manual", max_events=20_000)
    client = await aiohttp_client(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))
    tenant = client.server.app[SANDBOX].registry.tenants.get("acme")
    for number in range(10_000):
        tenant.emit("company-updated", data={"companyId": f"company-{number}"})
    assert (await read(client, "/_sandbox/stats"))["data"]["events"]["stored"] == 10_000
    full = await client.get("/_sandbox/events?limit=10000", headers=ACME)
    full_size = len(await full.read())

    cursor = (await read(client, "/_sandbox/events?after=0&limit=100"))["revision"]
    quiet = await client.get(f"/_sandbox/events?after={cursor}", headers=ACME)
    quiet_size = len(await quiet.read())
    assert quiet_size < 100, quiet_size

    for number in range(3):
        tenant.emit("company-updated", data={"companyId": f"new-{number}"})
    tick = await client.get(f"/_sandbox/events?after={cursor}", headers=ACME)
    body = await tick.read()
    assert [e["body"]["data"]["companyId"] for e in json.loads(body)["data"]] == [
        "new-0", "new-1", "new-2"]
    one_event = full_size / 10_000
    assert len(body) < 3 * one_event + 200, (len(body), one_event)
    assert full_size > 1_000 * len(body)


async def test_the_change_window_is_bounded_and_a_reader_behind_it_starts_over(
        aiohttp_client, loaded, clock):
    settings = Settings(port=0, clock="manual", max_events=20_000, max_tasks=20)
    client = await aiohttp_client(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))
    tenant = client.server.app[SANDBOX].registry.tenants.get("acme")
    behind = (await read(client, "/_sandbox/events?after=0"))["revision"]
    for number in range(60):
        await post(client, "/task/create", {"identifier": f"bounded-{number}",
                                            "company": WALMART, "product": "deposit"})
        await post(client, "/_sandbox/clock/run-until-idle")
    assert (await read(client, "/_sandbox/stats"))["data"]["tasks"]["evicted"] > 0
    for number in range(WINDOW):
        tenant.emit("company-updated", data={"companyId": f"company-{number}"})
    within = (await read(client, "/_sandbox/events?after=0"))["revision"]
    for number in range(WINDOW + 500):
        tenant.emit("company-updated", data={"companyId": f"more-{number}"})
    assert len(tenant.changes) <= WINDOW + len(tenant.tasks) <= WINDOW + 20

    stale = await read(client, f"/_sandbox/events?after={within}&limit=10")
    assert stale["reset"] is True, "1,500 changed events later: past the window"
    assert [e["body"]["data"]["companyId"] for e in stale["data"]][-1] == f"more-{WINDOW + 499}"
    recent = (await read(client, "/_sandbox/events?after=0"))["revision"]
    tenant.emit("company-updated", data={"companyId": "last"})
    fresh = await read(client, f"/_sandbox/events?after={recent}")
    assert fresh["reset"] is False and len(fresh["data"]) == 1
    tasks = await read(client, f"/_sandbox/tasks?after={behind}")
    assert tasks["reset"] is False, "60 changed tasks: within the tasks' window"
    assert {t["id"] for t in tasks["data"]} == set(tenant.tasks), "the evicted ones are gone"
