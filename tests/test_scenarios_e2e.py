"""End to end over real HTTP on a manual clock: create a task, run the clock, read the
ledger, for two scenario files.

Every scenario file runs on the engine (tests/test_engine_scenarios.py, with the table of
expected events written out by hand from each file); here the same walk goes through the
routes, so task creation, the clock routes, GET /_sandbox/events with its filters and
GET /task show what the engine did, field for field.
"""

from __future__ import annotations

from typing import Any

from calls import create_task
from conftest import ACME, WALMART
from engine import DAY
from test_engine_scenarios import EXPECTED, project, timestamp


async def call(client, method: str, path: str, **kwargs: Any) -> Any:
    response = await client.request(method, path, headers=ACME, **kwargs)
    assert response.status == 200, (method, path, response.status, await response.text())
    return (await response.json())["data"]


async def scenario_task(client, scenario: str, identifier: str) -> dict[str, Any]:
    """A task of `scenario` at its expected target, queued; the created workflow."""
    target = EXPECTED[scenario].target
    created = await create_task(client, identifier, company=target["company"],
                                product=target["product"], scenario=scenario)
    assert created["status"] == "queued"
    assert [t["scenario"] for t in created["tasks"]] == [scenario]
    return created


async def test_happy_path_over_http_emits_its_events_with_the_spec_fields(client):
    expected = EXPECTED["happy-path"]
    start = (await call(client, "GET", "/_sandbox/clock"))["timestamp"]
    created = await scenario_task(client, "happy-path", "e2e-user")
    task_id = created["id"]
    assert (await call(client, "POST", "/_sandbox/clock/run-until-idle"))["idle"] is True

    records = await call(client, "GET", f"/_sandbox/events?task={task_id}")
    assert [project(r["body"]) for r in records] == [event for _, event in expected.events]
    assert [timestamp(r["body"]["eventTime"]) - start for r in records] == \
        [at for at, _ in expected.events]
    assert [r["sequence"] for r in records] == sorted(r["sequence"] for r in records)
    task = await call(client, "GET", f"/task/{task_id}")
    for record in records:
        body = record["body"]
        assert record["task"] == task_id and record["userIdentifier"] == "e2e-user"
        assert record["eventType"] == body["eventType"]
        assert timestamp(body["eventTime"]) == timestamp(record["time"])
        assert body["user"] == {"_id": task["user"]["_id"], "identifier": "e2e-user",
                                "connected": False}
        assert (body["task"], body["taskWorkflow"]) == (task_id, created["taskWorkflow"])
        assert body["company"]["_id"] == WALMART and body["product"] == "deposit"

    assert (task["status"], task["user"]["connected"]) == ("completed", False)
    assert [entry["status"] for entry in task["history"]] == ["queued", "processing",
                                                               "completed"]
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": DAY})
    assert await call(client, "GET", f"/_sandbox/events?task={task_id}") == records


async def test_maintenance_scenario_over_http_emits_company_events_without_user(client):
    start = (await call(client, "GET", "/_sandbox/clock"))["timestamp"]
    task_id = (await scenario_task(client, "maintenance", "e2e-user"))["id"]
    await call(client, "POST", "/_sandbox/clock/run-until-idle")

    records = await call(client, "GET", "/_sandbox/events?type=maintenance-mode")
    assert [r["body"]["data"] for r in records] == [
        {"companyId": WALMART, "status": "maintenance", "products": ["deposit", "verify"]},
        {"companyId": WALMART, "status": "operational", "products": []},
    ]
    assert [timestamp(r["body"]["eventTime"]) - start for r in records] == [3.5, 66.5]
    for record in records:
        assert record["userIdentifier"] is None and record["task"] is None
        assert set(record["body"]) == {"eventType", "eventTime", "data"}
    assert (await call(client, "GET", f"/company/{WALMART}"))["status"] == "operational"
    assert (await call(client, "GET", f"/task/{task_id}"))["reason"] == "system-unavailable"
