"""Every scenario file on the engine (tests/engine.py, no HTTP): create a task, run the
clock, read the ledger.

The expected events are written out by hand from each file in `scenarios/` (not derived
from the YAML at test time), so a change to a scenario or to the engine shows up here as
a diff of the event list. The spec's event rules shape every list: no task-status-updated
before a task resolves, no authentication event without a change, user.connected false
for API-created tasks (tests/test_spec_rules.py checks the rules themselves). The same
walk over HTTP, for a scenario or two, is tests/test_scenarios_e2e.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
import pytest

from conftest import REPO, WALMART
from engine import DAY, Engine, engine  # noqa: F401  (engine: a fixture)
from payroll_sandbox.clock import isoformat, moment_text
from payroll_sandbox.domain.webhooks.events import Event
from payroll_sandbox.domain.tasks.views import TaskRecord
from payroll_sandbox.domain.tasks.records import Task

NETFLIX = "6410a0000000000000000060"

# Which company and product a scenario's task is created against: user-link scenarios on
# Walmart (deposit), pay-link ones on Netflix (switch). `maintenance` changes the company's
# status, so it runs on Walmart too.
# authenticationMethod: the spec gives values for pay-link tasks only (Task); a user-link
# task's events carry it as null (Task events: every task event carries it).
USER_LINK = {"company": WALMART, "product": "deposit", "name": "Walmart",
             "authenticationMethod": None}
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
    "data-request": Expected(PAY_LINK, "completed", None, (
        (5.5, authentication(True)),
        (35.5, updated("processing", "completed", authenticated=True, flow="switch")),
        (35.5, accounts_updated(("updated", [["paymentMethod"]]))),
        (35.5, workflow_finished("completed")),
    )),
    "high-latency": Expected(USER_LINK, "completed", None, (
        (121.5, authentication(True)),
        (130, updated("processing", "completed", authenticated=True)),
        (130, workflow_finished("completed")),
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


def scenario_task(engine: Engine, scenario: str, *, identifier: str = "e2e-user",
                  **extra: Any) -> tuple[str, Task]:
    """A task of `scenario` at its expected target (Engine.create_task, as the route calls
    it): the workflow's id and the task, queued."""
    target = EXPECTED[scenario].target
    workflow, tasks = engine.create_task(identifier, company=target["company"],
                                         product=target["product"], scenario=scenario, **extra)
    assert [(t.scenario, t.status) for t in tasks] == [(scenario, "queued")]
    return workflow.id, tasks[0]


def task_events(engine: Engine, task_id: str) -> list[Event]:
    """The ledger's events of one task, oldest first (GET /_sandbox/events?task=)."""
    return engine.events(task=task_id)


# -- every scenario file ---------------------------------------------------------------------

def test_every_scenario_file_has_expected_events():
    assert SCENARIO_FILES, "no scenario files found"
    assert set(SCENARIO_FILES) == set(EXPECTED)


@pytest.mark.parametrize("scenario", SCENARIO_FILES)
def test_scenario_emits_exact_events(engine, scenario):
    expected = EXPECTED[scenario]
    start = engine.now()
    _, task = scenario_task(engine, scenario)
    engine.run_until_idle()

    events = task_events(engine, task.id)
    assert [project(e.body) for e in events] == [event for _, event in expected.events]
    assert [timestamp(e.body["eventTime"]) - start for e in events] == \
        [at for at, _ in expected.events]
    assert [e.sequence for e in events] == sorted(e.sequence for e in events)
    engine.assert_events_valid()


@pytest.mark.parametrize("scenario", SCENARIO_FILES)
def test_scenario_task_events_carry_the_spec_fields(engine, scenario):
    expected = EXPECTED[scenario]
    target = expected.target
    workflow_id, created = scenario_task(engine, scenario, identifier="fields-user")
    engine.run_until_idle()
    task = msgspec.to_builtins(TaskRecord.of(created), enc_hook=moment_text)  # GET /task/{id}
    events = task_events(engine, created.id)
    assert events

    events = [e for e in events if e.type != "pii-data-deleted"]  # not a task event
    for event in events:
        body = event.body
        assert event.task == created.id and event.user == "fields-user"
        assert event.type == body["eventType"]
        assert isinstance(body["eventType"], str)
        assert body["eventTime"] == isoformat(event.time) and body["eventTime"].endswith("Z")
        assert set(body["user"]) == {"_id", "identifier", "connected"}
        assert body["user"]["_id"] == task["user"]["_id"]
        assert body["user"]["identifier"] == "fields-user"
        assert isinstance(body["user"]["connected"], bool)
        assert isinstance(body["publicToken"], str)
        assert body["product"] == target["product"]
        assert body["task"] == created.id
        assert body["taskWorkflow"] == workflow_id
        assert body["authenticationMethod"] == target["authenticationMethod"]
        assert set(body["company"]) == {"_id", "name", "branding"}
        assert body["company"]["_id"] == target["company"]
        assert body["company"]["name"] == target["name"]
        assert isinstance(body["company"]["branding"], dict)
        assert "metadata" not in body  # none was given at creation
        assert isinstance(body["data"], dict)

    # An API-created task has no user present in the hosted flow (spec: User object).
    assert [e.body["user"]["connected"] for e in events] == [False] * len(events)

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
def test_scenario_emits_nothing_after_it_is_idle(engine, scenario):
    _, task = scenario_task(engine, scenario)
    engine.run_until_idle()
    before = [e.id for e in task_events(engine, task.id)]
    engine.advance(DAY)
    after = task_events(engine, task.id)
    assert [e.id for e in after] == before

    # No task-status-updated follows the first final one (spec: Task status).
    updates = [e.body["data"]["status"] for e in after if e.type == "task-status-updated"]
    assert updates[-1] in ("completed", "failed")
    assert [s for s in updates if s in ("completed", "failed")] == [updates[-1]]


# -- single scenarios in depth ---------------------------------------------------------------

def test_happy_path_events_appear_at_their_step_times(engine):
    expected = EXPECTED["happy-path"].events
    start = engine.now()
    _, task = scenario_task(engine, "happy-path")
    assert task_events(engine, task.id) == []  # nothing before the first step

    for elapsed in range(1, 11):
        engine.advance(1)
        assert engine.now() == start + elapsed
        events = task_events(engine, task.id)
        due = [(at, event) for at, event in expected if at <= elapsed]
        assert [project(e.body) for e in events] == [event for _, event in due], elapsed
        assert [timestamp(e.body["eventTime"]) for e in events] == \
            [start + at for at, _ in due], elapsed
    assert task.status == "completed"


def test_task_status_patched_follows_failed_and_workflow_finished_only(engine):
    _, task = scenario_task(engine, "task-status-patched")
    engine.run_until_idle()
    engine.advance(DAY)
    events = task_events(engine, task.id)
    types = [e.type for e in events]
    statuses = [e.body["data"].get("status") for e in events]
    failed_at = list(zip(types, statuses)).index(("task-status-updated", "failed"))
    # The engine finishes the workflow in the same step as the failure; the patch comes
    # an hour later and is the only status event after the failure.
    assert types[failed_at + 1:] == ["task-workflow-finished", "task-status-patched"]
    record = msgspec.to_builtins(TaskRecord.of(task), enc_hook=moment_text)
    assert (record["status"], record["previousStatus"]) == ("completed", "failed")
    assert "reason" not in record


def test_maintenance_scenario_emits_company_events_without_user(engine):
    start = engine.now()
    _, task = scenario_task(engine, "maintenance")
    engine.run_until_idle()

    events = engine.events(event_type="maintenance-mode")
    assert [e.body["data"] for e in events] == [
        {"companyId": WALMART, "status": "maintenance", "products": ["deposit", "verify"]},
        {"companyId": WALMART, "status": "operational", "products": []},
    ]
    assert [timestamp(e.body["eventTime"]) - start for e in events] == [3.5, 66.5]
    for event in events:
        assert event.user is None and event.task is None
        assert set(event.body) == {"eventType", "eventTime", "data"}
    assert engine.tenant.companies.get(WALMART).status == "operational"
    assert task.reason == "system-unavailable"
    engine.assert_events_valid()


# -- what the customer gives at creation comes back in the events ---------------------------

def test_metadata_given_at_creation_is_in_every_task_event(engine):
    metadata = {"orderId": "A-17", "context": {"source": "e2e", "attempt": 2}}
    _, task = scenario_task(engine, "pay-link-switch", metadata=metadata)
    engine.run_until_idle()
    events = task_events(engine, task.id)
    assert len(events) == len(EXPECTED["pay-link-switch"].events)
    assert [e.body["metadata"] for e in events] == [metadata] * len(events)
    assert TaskRecord.of(task).metadata == metadata


def test_a_task_carries_its_users_public_token_in_its_events(engine):
    token = engine.tenant.identity.create_access_token("token-user")  # POST /access-token
    _, task = scenario_task(engine, "happy-path", identifier="token-user")
    engine.run_until_idle()

    events = task_events(engine, task.id)
    assert [project(e.body) for e in events] == \
        [event for _, event in EXPECTED["happy-path"].events]
    assert {e.body["publicToken"] for e in events} == {token.public_token}
    assert {e.body["user"]["identifier"] for e in events} == {"token-user"}
    assert {e.user for e in events} == {"token-user"}
