"""GET /_sandbox/coverage and PUT /_sandbox/scenario over HTTP: every count of a tenant's
tally equals a recount from GET /_sandbox/events, /_sandbox/requests and /_sandbox/tasks
(0 differences), the catalog it is measured against is the scenarios' own, and a scenario
bound to every user runs their tasks."""

from __future__ import annotations

from collections import Counter

from calls import call, create_task, run_until_idle
from conftest import ACME, WALMART

NETFLIX = "6410a0000000000000000060"


async def data(client, method: str, path: str, **kwargs) -> dict:
    return (await call(client, method, path, **kwargs))["data"]


async def recount(client) -> dict[str, dict[str, int]]:
    """The tally, counted again from the public reads alone."""
    events = await data(client, "GET", "/_sandbox/events", params={"limit": "10000"})
    requests = await data(client, "GET", "/_sandbox/requests", params={"limit": "1000"})
    tasks = await data(client, "GET", "/_sandbox/tasks", params={"limit": "1000"})
    counted: dict[str, Counter] = {key: Counter() for key in (
        "scenarios", "products", "reasons", "eventTypes", "apiFaults", "webhookFaults",
        "profiles")}
    for task in tasks:
        counted["products"][task["product"]] += 1
        if task["status"] in ("completed", "failed"):
            counted["scenarios"][task["scenario"]] += 1
    for event in events:
        body = event["body"]
        if event["eventType"] == "task-status-updated" and body["data"]["status"] == "failed":
            counted["reasons"][body["data"]["reason"]] += 1
        attempts = [a for d in event["deliveries"] for a in d["attempts"]]
        if any(a["status"] is not None and 200 <= a["status"] < 300 for a in attempts):
            counted["eventTypes"][event["eventType"]] += 1
        for delivery in event["deliveries"]:
            counted["webhookFaults"].update(f.split()[0] for f in delivery["faults"])
    for entry in requests:
        if entry["fault"]:
            counted["apiFaults"].update(k for k in ("status", "latencyMs", "reset")
                                        if k in entry["fault"])
        elif (entry["method"] == "PUT" and entry["path"].endswith("/profile")
              and entry["status"] == 200 and "profile" in (entry["body"] or {})):
            counted["profiles"][entry["body"]["profile"]] += 1
    return {key: dict(counts) for key, counts in counted.items()}


async def test_every_count_of_the_tally_equals_a_recount_from_the_public_reads(sandbox):
    await call(sandbox, "PUT", "/_sandbox/webhooks/faults",
               json={"duplicate": 0.5, "outOfOrder": 0.3, "delay": 0.2, "delaySeconds": 5})
    for number, scenario in enumerate(["auth-expired", "connection-error", "happy-path",
                                       "auth-expired", "task-status-patched"]):
        await create_task(sandbox, f"user-{number}", scenario=scenario)
    await call(sandbox, "POST", "/task/create", json={
        "identifier": "payer", "company": NETFLIX, "product": "switch",
        "scenario": "payment-method-declined"})
    await call(sandbox, "PUT", "/_sandbox/users/user-1/profile", json={"profile": "salaried"})
    await call(sandbox, "PUT", "/_sandbox/users/user-2/profile", json={"profile": "nope"},
               status=422)
    await call(sandbox, "PUT", "/_sandbox/faults/api", json={"rules": [
        {"method": "GET", "path": "/task/{taskId}", "status": 503, "count": 2},
        {"method": "POST", "path": "/company/search", "latencyMs": 1, "count": 1}]})
    for _ in range(3):
        await sandbox.get("/task/nope", headers=ACME)
    await call(sandbox, "POST", "/company/search", json={"query": "Walmart"})
    await run_until_idle(sandbox)
    await call(sandbox, "POST", "/_sandbox/clock/advance", json={"seconds": 3600})

    tally = (await data(sandbox, "GET", "/_sandbox/coverage"))["tally"]
    counted = await recount(sandbox)
    differences = {key: (tally[key], counted[key]) for key in counted if tally[key] != counted[key]}
    assert differences == {}
    # What the run did shows in it (so the recount is of something).
    assert tally["reasons"] == {"auth-expired": 2, "connection-error": 1, "unknown-failure": 1,
                                "payment-method-declined": 1}
    assert tally["scenarios"]["auth-expired"] == 2 and tally["products"] == {"deposit": 5,
                                                                              "switch": 1}
    assert tally["apiFaults"] == {"status": 2, "latencyMs": 1}
    assert tally["profiles"] == {"salaried": 1}
    assert "task-status-updated" in tally["eventTypes"] and tally["webhookFaults"]


async def test_the_catalog_is_the_scenarios_with_their_products_and_reasons(client):
    answer = await data(client, "GET", "/_sandbox/coverage", params={"catalog": "true"})
    scenarios = await data(client, "GET", "/_sandbox/scenarios")
    catalog = answer["catalog"]
    tasks = {s["name"]: s for s in scenarios if s["kind"] == "task"}
    assert set(catalog["scenarios"]) == set(tasks)
    for name, entry in catalog["scenarios"].items():
        assert entry["products"] == tasks[name]["products"]
        assert entry["outcome"] == tasks[name]["outcome"]
        failing = [s for s in tasks[name]["steps"] if s.get("status") == "failed"]
        assert entry["reason"] == (failing[-1]["reason"] if entry["outcome"] == "failed"
                                   else None)
    assert catalog["apiFaults"] == ["status", "latencyMs", "reset"]
    assert catalog["webhookFaults"] == ["duplicate", "out-of-order", "delayed"]
    profiles = await data(client, "GET", "/_sandbox/profiles")
    assert catalog["profiles"] == [p["name"] for p in profiles]
    assert (await data(client, "GET", "/_sandbox/coverage"))["catalog"] is None
    problem = await call(client, "GET", "/_sandbox/coverage", params={"catalog": "yes"},
                         status=422)
    assert problem["error"]["details"][0]["path"] == "$.catalog"


async def test_a_scenario_bound_to_every_user_runs_their_tasks_below_their_own(client):
    bound = await data(client, "PUT", "/_sandbox/scenario", json={"scenario": "auth-expired"})
    assert bound == {"scenario": "auth-expired"}
    await call(client, "PUT", "/_sandbox/users/own/scenario", json={"scenario": "happy-path"})
    for identifier in ("anyone", "someone-else", "own"):
        await call(client, "POST", "/task/create", json={
            "identifier": identifier, "company": WALMART, "product": "deposit"})
    tasks = {t["user"]["identifier"] if isinstance(t.get("user"), dict) else t.get("identifier"):
             t["scenario"] for t in await data(client, "GET", "/_sandbox/tasks")}
    assert sorted(tasks.values()) == ["auth-expired", "auth-expired", "happy-path"]
    listed = await call(client, "GET", "/_sandbox/scenarios")
    assert listed["everyone"] == "auth-expired"
    unknown = await call(client, "PUT", "/_sandbox/scenario", json={"scenario": "nope"},
                         status=422)
    assert unknown["error"]["details"][0]["path"] == "$.scenario"
    assert (await call(client, "GET", "/_sandbox/scenarios"))["everyone"] == "auth-expired"
    await call(client, "PUT", "/_sandbox/scenario", json={"scenario": None})
    assert (await call(client, "GET", "/_sandbox/scenarios"))["everyone"] is None
