"""Hostile input, round four (issue 48): live work has a bound, and one tenant's large
restore never makes another tenant wait.

A tenant on a manual clock that makes tasks and never runs it is refused at --max-tasks
(and at --max-jobs, --max-events for its jobs and pending deliveries) with a 429 naming
the setting, nothing stored lost; so is a task that would link a new account past
--max-linked-accounts (a relink never); a snapshot past a bound is refused with its path; a
large restore waits only on its own tenant's, within a memory budget that refuses at once.
Real app, real HTTP, manual clock.
"""

from __future__ import annotations

import asyncio
import io
import json

import yaml
from calls import call, create_task, run_until_idle
from conftest import ACME, GLOBEX, REPO, WALMART, run_cli

from payroll_sandbox.edge import snapshot
from payroll_sandbox.edge import snapshot_document
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.settings import Settings, load_settings


def refused(error: dict, code: str, flag: str, variable: str, key: str) -> None:
    assert error["code"] == code, error
    for name in (flag, variable, key):
        assert name in error["message"], (name, error["message"])


async def stats(client, headers: dict = ACME) -> dict:
    return (await call(client, "GET", "/_sandbox/stats", headers=headers))["data"]


async def test_tasks_a_tenant_never_runs_are_refused_at_max_tasks(make_client):
    client = await make_client(clock="manual", max_tasks=6)
    made = [(await create_task(client, f"user-{n}"))["id"] for n in range(3)]
    # a workflow's tasks count whether they started or wait: 3 + 2 = 5, one left
    made.append((await call(client, "POST", "/task/create", json={
        "identifier": "two", "company": WALMART,
        "tasks": [{"product": "deposit"}, {"product": "verify"}]}))["data"]["id"])
    response = await client.post("/task/create", headers=ACME, json={
        "identifier": "two-more", "company": WALMART,
        "tasks": [{"product": "deposit"}, {"product": "verify"}]})
    assert response.status == 429, await response.text()
    assert response.headers["retry-after"]
    refused((await response.json())["error"], "task-limit-reached", "--max-tasks",
            "PAYROLL_SANDBOX_MAX_TASKS", "maxTasks")
    made.append((await create_task(client, "last"))["id"])
    error = await create_task(client, "one-too-many", status=429)
    refused(error, "task-limit-reached", "--max-tasks", "PAYROLL_SANDBOX_MAX_TASKS", "maxTasks")
    numbers = await stats(client)
    assert numbers["tasks"]["stored"] == 6 and numbers["tasks"]["evicted"] == 0
    assert numbers["users"]["stored"] == 5  # the refused ones made no user
    for task_id in made:  # nothing stored was lost
        await call(client, "GET", f"/task/{task_id}")
    await run_until_idle(client)  # they end: finished workflows may go, so there is room
    await create_task(client, "after-the-run")


async def test_jobs_a_tenant_never_runs_are_refused_at_max_jobs(make_client):
    client = await make_client(clock="manual", max_jobs=5)
    jobs = 0
    while jobs < 5:
        await create_task(client, f"user-{jobs}")
        jobs = (await stats(client))["pendingJobs"]
    error = await create_task(client, "one-too-many", status=429)
    refused(error, "job-limit-reached", "--max-jobs", "PAYROLL_SANDBOX_MAX_JOBS", "maxJobs")
    error = (await call(client, "POST", "/_sandbox/events/trigger", status=429,
                        json={"eventType": "company-updated"}))["error"]
    assert error["code"] == "job-limit-reached"
    assert (await stats(client))["pendingJobs"] == jobs
    await run_until_idle(client)
    await create_task(client, "after-the-run")


async def test_events_with_deliveries_pending_are_refused_at_max_events(make_client, receiver):
    client = await make_client(clock="manual", max_events=5, webhook_timeout=0.5)
    receiver.program("/failing", 500)
    await call(client, "PUT", "/_sandbox/webhooks/endpoints",
               json={"endpoints": [{"url": receiver.url("/failing")}]})
    ids = []
    for _ in range(5):
        ids.append((await call(client, "POST", "/_sandbox/events/trigger", status=201,
                               json={"eventType": "company-updated"}))["data"]["id"])
    error = (await call(client, "POST", "/_sandbox/events/trigger", status=429,
                        json={"eventType": "company-updated"}))["error"]
    refused(error, "event-limit-reached", "--max-events", "PAYROLL_SANDBOX_MAX_EVENTS",
            "maxEvents")
    refused(await create_task(client, "more-work", status=429), "event-limit-reached",
            "--max-events", "PAYROLL_SANDBOX_MAX_EVENTS", "maxEvents")
    for event_id in ids:  # every pending one kept
        await call(client, "GET", f"/_sandbox/events/{event_id}")
    await run_until_idle(client)  # their retries end: settled, they may go
    await call(client, "POST", "/_sandbox/events/trigger", status=201,
               json={"eventType": "company-updated"})


async def test_a_snapshot_past_a_live_bound_is_refused_with_its_path(make_client):
    client = await make_client(clock="manual", max_tasks=3, max_jobs=2)
    await create_task(client, "one")
    document = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    [task], [workflow] = document["tasks"], document["workflows"]
    many = {**document,
            "tasks": [{**task, "_id": f"{n:024x}"} for n in range(4)],
            "workflows": [{**workflow, "_id": f"{n:024x}"} for n in range(4)],
            "jobs": document["jobs"] * 3}
    for section, bound in (("tasks", "--max-tasks 3"), ("workflows", "--max-tasks 3"),
                           ("jobs", "twice --max-jobs: 4")):
        error = (await call(client, "POST", "/_sandbox/snapshot", status=422, json={
            **document, section: many[section]}))["error"]
        assert {d["path"] for d in error["details"]} == {f"$.{section}"}, error
        assert bound in error["details"][0]["message"], error
    assert (await stats(client))["tasks"]["stored"] == 1  # nothing restored


async def _stalled_restore(client, body: bytes, go_on: asyncio.Event, headers: dict):
    """A large restore whose body stops half-way until `go_on`: it runs (admitted) meanwhile."""

    async def chunks():
        yield body[: len(body) // 2]
        await go_on.wait()
        yield body[len(body) // 2:]

    return await client.post("/_sandbox/snapshot", data=chunks(),
                             headers={**headers, "content-type": "application/json",
                                      "content-length": str(len(body))})


async def test_a_large_restore_waits_only_on_its_own_tenant(make_client, monkeypatch):
    """Tenant A's large restore is running (its body half read): tenant B's large restore
    runs at once (it waited on A's before: 429 restore-busy past --request-timeout); A's
    second one waits on A's own, and runs once it ends."""
    monkeypatch.setattr(snapshot, "give_back_memory", lambda: None)
    client = await make_client(clock="manual", request_timeout=5.0)
    other = GLOBEX
    bodies = {}
    for name, headers in (("a", ACME), ("b", other)):
        document = (await call(client, "GET", "/_sandbox/snapshot", headers=headers))["data"]
        bodies[name] = json.dumps(document).encode() + b" " * (snapshot_document.LARGE_RESTORE + 1)
    go_on = asyncio.Event()
    running = asyncio.create_task(_stalled_restore(client, bodies["a"], go_on, ACME))
    admission = client.server.app[SANDBOX].large_restores
    while not admission.reserved:  # A's restore admitted (it cannot end before go_on)
        assert not running.done(), await running
        await asyncio.sleep(0.01)
    try:
        other_tenant = await client.post("/_sandbox/snapshot", data=io.BytesIO(bodies["b"]),
                                         headers={**other, "content-type": "application/json"})
        assert other_tenant.status == 200, await other_tenant.text()
        same_tenant = asyncio.create_task(client.post(
            "/_sandbox/snapshot", data=io.BytesIO(bodies["a"]),
            headers={**ACME, "content-type": "application/json"}))
        await asyncio.sleep(0.3)
        assert not same_tenant.done()  # it waits on its own tenant's, stalled until go_on
    finally:
        go_on.set()
    assert (await same_tenant).status == 200
    assert (await running).status == 200


async def test_a_restore_past_the_memory_budget_is_refused_at_once(make_client, monkeypatch):
    """No queue: past the server's budget for large restores, 429 with retry-after at once
    (within --request-timeout it would have waited before)."""
    monkeypatch.setattr(snapshot, "give_back_memory", lambda: None)
    client = await make_client(clock="manual", request_timeout=30.0)
    sandbox = client.server.app[SANDBOX]
    document = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    body = json.dumps(document).encode() + b" " * (snapshot_document.LARGE_RESTORE + 1)
    sandbox.large_restores.budget = snapshot.RESTORE_PEAK * len(body) - 1
    loop = asyncio.get_running_loop()
    started = loop.time()
    response = await client.post("/_sandbox/snapshot", data=io.BytesIO(body),
                                 headers={**ACME, "content-type": "application/json"})
    assert response.status == 429, await response.text()
    assert response.headers["retry-after"] == "5"
    assert "memory budget" in (await response.json())["error"]["message"]
    assert loop.time() - started < 30.0 / 2  # refused, not queued for --request-timeout
    sandbox.large_restores.budget = snapshot.RESTORE_PEAK * len(body)
    ok = await client.post("/_sandbox/snapshot", data=io.BytesIO(body),
                           headers={**ACME, "content-type": "application/json"})
    assert ok.status == 200, await ok.text()
    assert sandbox.large_restores.reserved == 0


async def test_processor_tokens_are_refused_at_max_tokens(make_client):
    """Minted processor tokens (each with one link at most) were kept without a bound."""
    client = await make_client(clock="manual", max_tokens=3)
    minted = [(await call(client, "POST", "/_sandbox/aggregator/processor-token", status=201,
                          json={"identifier": f"bank-{n}"}))["data"]["processorToken"]
              for n in range(3)]
    error = (await call(client, "POST", "/_sandbox/aggregator/processor-token", status=429,
                        json={"identifier": "one-too-many"}))["error"]
    refused(error, "processor-token-limit-reached", "--max-tokens",
            "PAYROLL_SANDBOX_MAX_TOKENS", "maxTokens")
    document = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    assert [t["token"] for t in document["processorTokens"]] == minted  # nothing lost
    [token] = document["processorTokens"][:1]
    error = (await call(client, "POST", "/_sandbox/snapshot", status=422, json={
        **document, "processorTokens": [{**token, "token": f"{token['token'][:-4]}{n:04d}"}
                                        for n in range(4)]}))["error"]
    assert [d["path"] for d in error["details"]] == ["$.processorTokens"], error


async def linked(client) -> list[str]:
    """The ids of the tenant's linked accounts, as its snapshot holds them."""
    return [a["id"] for a in (await call(client, "GET", "/_sandbox/snapshot"))["data"]
            ["linkedAccounts"]]


async def test_linked_accounts_are_refused_at_max_linked_accounts(make_client):
    """Linked accounts were bounded only by --max-users times the catalog's companies."""
    client = await make_client(clock="manual", max_linked_accounts=3)
    for n in range(2):
        await create_task(client, f"user-{n}")
    await run_until_idle(client)
    coming = await create_task(client, "user-2")  # links the third when it ends
    error = await create_task(client, "one-too-many", status=429)
    refused(error, "linked-account-limit-reached", "--max-linked-accounts",
            "PAYROLL_SANDBOX_MAX_LINKED_ACCOUNTS", "maxLinkedAccounts")
    error = (await call(client, "POST", "/_sandbox/events/trigger", status=429, json={
        "eventType": "income-updated", "identifier": "no-account-yet"}))["error"]
    assert error["code"] == "linked-account-limit-reached", error
    assert (await stats(client))["linkedAccounts"] == {"stored": 2, "max": 3}
    again = await create_task(client, "user-2")  # the same account as the one coming
    await run_until_idle(client)
    accounts = await linked(client)
    assert len(accounts) == 3
    for task in (coming, again):  # none failed half-way for want of room
        assert (await call(client, "GET", f"/task/{task['id']}"))["data"]["status"] == \
            "completed"
    await create_task(client, "one-too-many", status=429)
    # a relink and a refresh of accounts it holds are never refused
    relinked = await create_task(client, "user-0")
    refreshed = await create_task(client, "user-1", company=None, product=None,
                                  linkedAccount=accounts[1])
    await run_until_idle(client)
    for task in (relinked, refreshed):
        assert (await call(client, "GET", f"/task/{task['id']}"))["data"]["status"] == \
            "completed"
    assert await linked(client) == accounts  # nothing stored lost, none added


async def test_a_snapshot_past_max_linked_accounts_is_refused_with_its_path(make_client):
    client = await make_client(clock="manual", max_linked_accounts=3)
    await create_task(client, "linked")
    await run_until_idle(client)
    await create_task(client, "coming")  # its account is still to come
    document = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    [account] = document["linkedAccounts"]
    error = (await call(client, "POST", "/_sandbox/snapshot", status=422, json={
        **document, "linkedAccounts": [{**account, "id": f"{n:024x}"} for n in range(4)]}
    ))["error"]
    assert [d["path"] for d in error["details"]] == ["$.linkedAccounts"], error
    assert "--max-linked-accounts 3" in error["details"][0]["message"], error
    assert await linked(client) == [account["id"]]  # nothing restored
    # restored, the account its running task links is counted again: room for one more
    await call(client, "POST", "/_sandbox/snapshot", json=document)
    await create_task(client, "third")
    await create_task(client, "fourth", status=429)


def test_the_linked_account_bound_comes_from_the_flag_the_variable_and_the_config(tmp_path):
    config = tmp_path / "sandbox.yaml"
    config.write_text("maxLinkedAccounts: 7\nmaxCallbacks: 9\n")  # the config refused both
    assert (load_settings({"config": str(config)}, {}).max_linked_accounts,
            load_settings({"config": str(config)}, {}).max_callbacks) == (7, 9)
    assert load_settings({}, {"PAYROLL_SANDBOX_MAX_LINKED_ACCOUNTS": "8"}).max_linked_accounts == 8
    assert Settings().max_linked_accounts == 10_000
    # a fixture account seeding more than the bound stops the start, naming both
    seeded = max(len(a.get("linkedAccounts", [])) for a in
                 yaml.safe_load((REPO / "fixtures" / "accounts.yaml").read_text())["accounts"])
    result = run_cli("serve", "--port", "0", "--max-linked-accounts", str(seeded - 1))
    assert result.returncode == 2, result.stderr
    assert ".linkedAccounts" in result.stderr, result.stderr
    assert f"--max-linked-accounts {seeded - 1}" in result.stderr, result.stderr
    result = run_cli("serve", "--port", "0", env={"PAYROLL_SANDBOX_MAX_LINKED_ACCOUNTS": "0"})
    assert result.returncode == 2 and "$.max_linked_accounts" in result.stderr, result.stderr
