"""End to end, one test per scenario file: create a task, run the clock, read the ledger.

Everything goes through real HTTP on a manual clock. The expected events are written
out by hand from each file in `scenarios/` (not derived from the YAML at test time), so
a change to a scenario or to the engine shows up here as a diff of the event list.
The spec's event rules shape every list: no task-status-updated before a task resolves,
no authentication event without a change, user.connected false for API-created tasks
(tests/test_spec_rules.py checks them on a real receiver).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from conftest import ACME, REPO, WALMART

NETFLIX = "6410a0000000000000000060"
DAY = 24 * 3600

# Which company and product a scenario's task is created against: user-link scenarios on
# Walmart (deposit), pay-link ones on Netflix (switch). `maintenance` changes the company's
# status, so it runs on Walmart too.
USER_LINK = {"company": WALMART, "product": "deposit", "name": "Walmart",
             "authenticationMethod": "smart-auth"}
PAY_LINK = {"company": NETFLIX, "product": "switch", "name": "Netflix",
            "authenticationMethod": "true-auth"}


# -- the expected events, as the spec names their fields (spec: Task events) ----------------

def updated(previous: str, status: str, *, authenticated: bool, reason: str | None = None,
            flow: str | None = None, meta: dict | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"eventType": "task-status-updated", "previousStatus": previous,
                             "status": status, "authenticated": authenticated}
    optional = {"reason": reason, "flow": flow, "meta": meta}
    event.update({k: v for k, v in optional.items() if v is not None})
    return event


def authentication(authenticated: bool) -> dict[str, Any]:
    return {"eventType": "task-authentication-status-updated", "authenticated": authenticated}


def patched(previous: str, status: str, *, authenticated: bool) -> dict[str, Any]:
    return {"eventType": "task-status-patched", "previousStatus": previous, "status": status,
            "authenticated": authenticated}


def accounts_updated(*accounts: tuple[str, list[list[str]]]) -> dict[str, Any]:
    """Each account as (updateType, the changedFields of each of its bills)."""
    return {"eventType": "pay-link-accounts-updated",
            "accounts": [{"updateType": kind, "bills": bills} for kind, bills in accounts]}


def workflow_finished(status: str, failure_reason: str | None = None) -> dict[str, Any]:
    event = {"eventType": "task-workflow-finished", "status": status}
    if failure_reason is not None:
        event["failureReason"] = failure_reason
    return event


@dataclass(frozen=True)
class Expected:
    """A scenario's task: where it runs, how it ends, and its events as (offset s, event)."""

    target: dict[str, str]
    status: str
    reason: str | None
    events: tuple[tuple[float, dict[str, Any]], ...]
    history: tuple[str, ...] = ("queued", "processing")  # statuses before the final one


def failing_pay_link(reason: str, flow: str, final_at: float,
                     meta: dict | None = None) -> Expected:
    """The pay-link failure shape most pay-link files share: processing at 1.5 s with a flow,
    logged in at 5.5 s, failed at `final_at`."""
    return Expected(PAY_LINK, "failed", reason, (
        (5.5, authentication(True)),
        (final_at, updated("processing", "failed", authenticated=True, reason=reason, flow=flow,
                           meta=meta)),
        (final_at, workflow_finished("failed", reason)),
    ))


def failing_user_link(reason: str, *, final_at: float, auth_at: float | None = None) -> Expected:
    """processing at 1.5 s (no event), logged in at `auth_at` if given, failed at `final_at`."""
    return Expected(USER_LINK, "failed", reason, (
        *([(auth_at, authentication(True))] if auth_at is not None else []),
        (final_at, updated("processing", "failed", authenticated=auth_at is not None,
                           reason=reason)),
        (final_at, workflow_finished("failed", reason)),
    ))


def failing_before_processing(reason: str, final_at: float) -> Expected:
    """The task never starts processing: failed from queued at `final_at`."""
    return Expected(USER_LINK, "failed", reason, (
        (final_at, updated("queued", "failed", authenticated=False, reason=reason)),
        (final_at, workflow_finished("failed", reason)),
    ), history=("queued",))


# One entry per file in scenarios/, read off the file by hand. Offsets are the running
# sum of the steps' `after`.
EXPECTED: dict[str, Expected] = {
    "action-failed": Expected(PAY_LINK, "failed", "action-failed", (
        (5.5, authentication(True)),
        (17.5, updated("processing", "failed", authenticated=True, reason="action-failed",
                       flow="change-plan")),
        (17.5, workflow_finished("failed", "action-failed")),
    )),
    "auth-expired": failing_user_link("auth-expired", final_at=9.5),
    "bad-credentials": failing_user_link("user-abandon", final_at=17.5),
    "connection-error": failing_user_link("connection-error", final_at=13.5),
    "device-disconnected": failing_before_processing("device-disconnected", 6),
    "distribution-not-supported": failing_user_link("product-not-supported", auth_at=4.5,
                                                    final_at=10.5),
    # A fresh user has no linked account to disconnect: the task events only (the
    # disconnection itself is tested in test_continuous_access.py).
    "linked-account-disconnected": Expected(USER_LINK, "failed", "auth-expired", (
        (6, updated("processing", "failed", authenticated=False, reason="auth-expired")),
        (6, workflow_finished("failed", "auth-expired")),
    )),
    "pii-data-deleted": Expected(USER_LINK, "completed", None, (
        (3, authentication(True)),
        (8, updated("processing", "completed", authenticated=True)),
        (8, workflow_finished("completed")),
        (86408, {"eventType": "pii-data-deleted"}),
    )),
    "happy-path": Expected(USER_LINK, "completed", None, (
        (3, authentication(True)),
        (8, updated("processing", "completed", authenticated=True)),
        (8, workflow_finished("completed")),
    )),
    # The company steps (3.5 s into maintenance, 66.5 s operational) emit company events,
    # not task events: see test_maintenance_scenario_emits_company_events_without_user.
    "maintenance": Expected(USER_LINK, "failed", "system-unavailable", (
        (6.5, updated("processing", "failed", authenticated=False, reason="system-unavailable")),
        (6.5, workflow_finished("failed", "system-unavailable")),
    )),
    "managed-by-partner": failing_pay_link(
        "subscription-managed-by-partner-provider", "switch", 11.5,
        meta={"managedBy": {"companyId": "6410a0000000000000000067", "name": "Comcast Xfinity"}}),
    "mfa-then-success": Expected(USER_LINK, "completed", None, (
        (34.5, authentication(True)),
        (40.5, updated("processing", "completed", authenticated=True)),
        (40.5, workflow_finished("completed")),
    )),
    "pay-link-switch": Expected(PAY_LINK, "completed", None, (
        (5.5, authentication(True)),
        (14.5, updated("processing", "completed", authenticated=True, flow="switch")),
        (14.5, accounts_updated(("updated", [["paymentMethod"]]))),
        (14.5, workflow_finished("completed")),
    )),
    "payment-method-declined": failing_pay_link("payment-method-declined", "switch", 15.5),
    "payment-method-insufficient-funds": failing_pay_link("payment-method-insufficient-funds",
                                                          "pay-now", 16.5),
    "payment-method-limit-reached": failing_pay_link("payment-method-limit-reached", "switch",
                                                     12.5),
    "payment-method-locked": failing_pay_link("payment-method-locked", "switch", 13.5),
    "payment-method-not-supported": failing_pay_link("payment-method-not-supported", "switch",
                                                     11.5),
    "payment-switch-unsuccessful": failing_pay_link("payment-switch-unsuccessful", "switch", 18.5),
    "payment-token-expired": failing_pay_link("payment-token-expired", "switch", 10.5),
    "plan-selection-required": failing_pay_link("plan-selection-required", "change-plan", 12.5),
    "product-not-supported": failing_pay_link("product-not-supported", "pause-plan", 11.5),
    # The user leaves at 60 s (connected false): no event of its own.
    "slow-processing": Expected(USER_LINK, "completed", None, (
        (5, authentication(True)),
        (600, updated("processing", "completed", authenticated=True)),
        (600, workflow_finished("completed")),
    )),
    "subscription-inactive": failing_pay_link("subscription-inactive", "change-plan", 11.5),
    "subscription-managed-by-partner-provider": failing_pay_link(
        "subscription-managed-by-partner-provider", "switch", 11.5,
        meta={"managedBy": {"companyId": "6410a0000000000000000064", "name": "Verizon"}}),
    "subscription-not-found": failing_pay_link("subscription-not-found", "pause-plan", 12.5),
    "system-unavailable": failing_user_link("system-unavailable", final_at=9.5),
    # The engine finishes the workflow when the task first becomes final (failed); the
    # patch an hour later emits task-status-patched only.
    "task-status-patched": Expected(USER_LINK, "completed", None, (
        (4.5, authentication(True)),
        (12.5, updated("processing", "failed", authenticated=True, reason="unknown-failure")),
        (12.5, workflow_finished("failed", "unknown-failure")),
        (3612.5, patched("failed", "completed", authenticated=True)),
    )),
    "unexpected-response": failing_user_link("unexpected-response", auth_at=4.5,
                                             final_at=13.5),
    "unknown-failure": failing_user_link("unknown-failure", auth_at=4.5, final_at=14.5),
    "user-abandon": failing_before_processing("user-abandon", 15),
}

# Task scenarios; processor-link pipelines have tests of their own (test_processor_links.py).
SCENARIO_FILES = sorted(path.stem for path in (REPO / "scenarios").glob("*.yaml")
                        if "kind: processor-link" not in path.read_text())


# -- helpers ---------------------------------------------------------------------------------

def project(body: dict[str, Any]) -> dict[str, Any]:
    """The part of an event body the table states: its type and the data fields that matter."""
    data = body.get("data", {})
    kind = body["eventType"]
    event: dict[str, Any] = {"eventType": kind}
    if kind == "task-status-updated":
        names = ("previousStatus", "status", "authenticated", "reason", "flow", "meta")
    elif kind == "task-authentication-status-updated":
        names = ("authenticated",)
    elif kind == "task-status-patched":
        names = ("previousStatus", "status", "authenticated")
    elif kind == "task-workflow-finished":
        names = ("status", "failureReason")
    elif kind == "pay-link-accounts-updated":
        event["accounts"] = [{"updateType": account["updateType"],
                              "bills": [bill.get("changedFields", []) for bill in account["bills"]]}
                             for account in data["accounts"]]
        names = ()
    else:
        names = tuple(data)
    event.update({name: data[name] for name in names if name in data})
    return event


def timestamp(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


async def clock_now(client) -> float:
    response = await client.get("/_sandbox/clock", headers=ACME)
    assert response.status == 200
    return (await response.json())["data"]["timestamp"]


async def create_task(client, scenario: str, *, identifier: str = "e2e-user",
                      target: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    target = target or EXPECTED[scenario].target
    body = {"identifier": identifier, "company": target["company"], "product": target["product"],
            "scenario": scenario, **extra}
    response = await client.post("/task/create", json=body, headers=ACME)
    assert response.status == 200, await response.text()
    created = (await response.json())["data"]
    assert created["status"] == "queued"
    assert [t["scenario"] for t in created["tasks"]] == [scenario]
    return created


async def run_until_idle(client) -> None:
    response = await client.post("/_sandbox/clock/run-until-idle", headers=ACME)
    assert response.status == 200
    assert (await response.json())["data"]["idle"] is True


async def advance(client, seconds: float) -> None:
    response = await client.post("/_sandbox/clock/advance", json={"seconds": seconds},
                                 headers=ACME)
    assert response.status == 200


async def task_events(client, task_id: str) -> list[dict[str, Any]]:
    """The ledger's records of one task's events, oldest first."""
    response = await client.get(f"/_sandbox/events?task={task_id}", headers=ACME)
    assert response.status == 200
    return (await response.json())["data"]


async def get_task(client, task_id: str) -> dict[str, Any]:
    response = await client.get(f"/task/{task_id}", headers=ACME)
    assert response.status == 200
    return (await response.json())["data"]


# -- every scenario file ---------------------------------------------------------------------

def test_every_scenario_file_has_expected_events():
    assert SCENARIO_FILES, "no scenario files found"
    assert set(SCENARIO_FILES) == set(EXPECTED)


@pytest.mark.parametrize("scenario", SCENARIO_FILES)
async def test_scenario_emits_exact_events(client, scenario):
    expected = EXPECTED[scenario]
    start = await clock_now(client)
    task_id = (await create_task(client, scenario))["id"]
    await run_until_idle(client)

    records = await task_events(client, task_id)
    assert [project(r["body"]) for r in records] == [event for _, event in expected.events]
    assert [timestamp(r["body"]["eventTime"]) - start for r in records] == \
        [at for at, _ in expected.events]
    assert [r["sequence"] for r in records] == sorted(r["sequence"] for r in records)


@pytest.mark.parametrize("scenario", SCENARIO_FILES)
async def test_scenario_task_events_carry_the_spec_fields(client, scenario):
    expected = EXPECTED[scenario]
    target = expected.target
    created = await create_task(client, scenario, identifier="fields-user")
    task_id = created["id"]
    await run_until_idle(client)
    task = await get_task(client, task_id)
    records = await task_events(client, task_id)
    assert records

    records = [r for r in records if r["eventType"] != "pii-data-deleted"]  # not a task event
    for record in records:
        body = record["body"]
        assert record["task"] == task_id and record["userIdentifier"] == "fields-user"
        assert record["eventType"] == body["eventType"]
        assert isinstance(body["eventType"], str)
        assert timestamp(body["eventTime"]) == timestamp(record["time"])
        assert body["eventTime"].endswith("Z")
        assert set(body["user"]) == {"_id", "identifier", "connected"}
        assert body["user"]["_id"] == task["user"]["_id"]
        assert body["user"]["identifier"] == "fields-user"
        assert isinstance(body["user"]["connected"], bool)
        assert isinstance(body["publicToken"], str)
        assert body["product"] == target["product"]
        assert body["task"] == task_id
        assert body["taskWorkflow"] == created["taskWorkflow"]
        assert body["authenticationMethod"] == target["authenticationMethod"]
        assert set(body["company"]) == {"_id", "name", "branding"}
        assert body["company"]["_id"] == target["company"]
        assert body["company"]["name"] == target["name"]
        assert isinstance(body["company"]["branding"], dict)
        assert "metadata" not in body  # none was given at creation
        assert isinstance(body["data"], dict)

    # An API-created task has no user present in the hosted flow (spec: User object).
    assert [r["body"]["user"]["connected"] for r in records] == [False] * len(records)

    # GET /task ends where the scenario ends, and its history walks the spec's transitions.
    assert task["status"] == expected.status
    assert task.get("reason") == expected.reason
    assert task["user"]["connected"] is False
    finals = ["completed"] if expected.status == "completed" else ["failed"]
    if scenario == "task-status-patched":
        finals = ["failed", "completed"]
    statuses = [*expected.history, *finals]
    assert [entry["status"] for entry in task["history"]] == statuses
    assert [entry.get("previousStatus") for entry in task["history"]] == [None, *statuses[:-1]]
    assert [entry.get("patch", False) for entry in task["history"]] == \
        [False] * (len(statuses) - 1) + [len(finals) == 2]


@pytest.mark.parametrize("scenario", SCENARIO_FILES)
async def test_scenario_emits_nothing_after_it_is_idle(client, scenario):
    task_id = (await create_task(client, scenario))["id"]
    await run_until_idle(client)
    before = await task_events(client, task_id)
    await advance(client, DAY)
    assert await task_events(client, task_id) == before

    # No task-status-updated follows the first final one (spec: Task status).
    updates = [r["body"]["data"]["status"] for r in before if r["eventType"] == "task-status-updated"]
    assert updates[-1] in ("completed", "failed")
    assert [s for s in updates if s in ("completed", "failed")] == [updates[-1]]


# -- single scenarios in depth ---------------------------------------------------------------

async def test_happy_path_events_appear_at_their_step_times(client):
    expected = EXPECTED["happy-path"].events
    start = await clock_now(client)
    task_id = (await create_task(client, "happy-path"))["id"]
    assert await task_events(client, task_id) == []  # nothing before the first step

    for elapsed in range(1, 11):
        await advance(client, 1)
        assert await clock_now(client) == start + elapsed
        records = await task_events(client, task_id)
        due = [(at, event) for at, event in expected if at <= elapsed]
        assert [project(r["body"]) for r in records] == [event for _, event in due], elapsed
        assert [timestamp(r["body"]["eventTime"]) for r in records] == \
            [start + at for at, _ in due], elapsed
    assert (await get_task(client, task_id))["status"] == "completed"


async def test_task_status_patched_follows_failed_and_workflow_finished_only(client):
    task_id = (await create_task(client, "task-status-patched"))["id"]
    await run_until_idle(client)
    await advance(client, DAY)
    records = await task_events(client, task_id)
    types = [r["eventType"] for r in records]
    statuses = [r["body"]["data"].get("status") for r in records]
    failed_at = list(zip(types, statuses)).index(("task-status-updated", "failed"))
    # The engine finishes the workflow in the same step as the failure; the patch comes
    # an hour later and is the only status event after the failure.
    assert types[failed_at + 1:] == ["task-workflow-finished", "task-status-patched"]
    task = await get_task(client, task_id)
    assert (task["status"], task["previousStatus"]) == ("completed", "failed")
    assert "reason" not in task


async def test_maintenance_scenario_emits_company_events_without_user(client):
    start = await clock_now(client)
    task_id = (await create_task(client, "maintenance"))["id"]
    await run_until_idle(client)

    response = await client.get("/_sandbox/events?type=maintenance-mode", headers=ACME)
    assert response.status == 200
    records = (await response.json())["data"]
    assert [r["body"]["data"] for r in records] == [
        {"companyId": WALMART, "status": "maintenance", "products": ["deposit", "verify"]},
        {"companyId": WALMART, "status": "operational", "products": []},
    ]
    assert [timestamp(r["body"]["eventTime"]) - start for r in records] == [3.5, 66.5]
    for record in records:
        assert "user" not in record["body"]
        assert record["userIdentifier"] is None and record["task"] is None
        assert set(record["body"]) == {"eventType", "eventTime", "data"}
    company = await (await client.get(f"/company/{WALMART}", headers=ACME)).json()
    assert company["data"]["status"] == "operational"
    assert (await get_task(client, task_id))["reason"] == "system-unavailable"


# -- what the customer gives at creation comes back in the events ---------------------------

async def test_metadata_given_at_creation_is_in_every_task_event(client):
    metadata = {"orderId": "A-17", "context": {"source": "e2e", "attempt": 2}}
    task_id = (await create_task(client, "pay-link-switch", metadata=metadata))["id"]
    await run_until_idle(client)
    records = await task_events(client, task_id)
    assert len(records) == len(EXPECTED["pay-link-switch"].events)
    assert [r["body"]["metadata"] for r in records] == [metadata] * len(records)
    assert (await get_task(client, task_id))["metadata"] == metadata


async def test_a_task_carries_its_users_public_token_in_its_events(client):
    response = await client.post("/access-token", json={"identifier": "token-user"}, headers=ACME)
    assert response.status == 200
    public_token = (await response.json())["data"]["publicToken"]
    response = await client.post("/task/create", headers=ACME,
                                 json={"identifier": "token-user", "company": WALMART,
                                       "product": "deposit", "scenario": "happy-path"})
    assert response.status == 200, await response.text()
    task_id = (await response.json())["data"]["id"]
    await run_until_idle(client)

    records = await task_events(client, task_id)
    assert [project(r["body"]) for r in records] == \
        [event for _, event in EXPECTED["happy-path"].events]
    assert {r["body"]["publicToken"] for r in records} == {public_token}
    assert {r["body"]["user"]["identifier"] for r in records} == {"token-user"}
    assert {r["userIdentifier"] for r in records} == {"token-user"}
