"""The spec's event rules, statement by statement, over every bundled task scenario.

Each test quotes the sentence of docs/spec/service-spec.md it checks. Every
scenario file runs twice on the engine (tests/engine.py: the domain, no HTTP) with a
manual clock: once as a task created by the API (what POST /task/create calls), once as
a task started in the hosted flow (what POST /sdk/login calls, with the user's public
token: the page open). The events are read off the tenant's ledger, and each validates
against its published schema. Two end-to-end tests prove that the ledger is what a
customer reads: a real webhook receiver gets the same events, in the same order, parsed
with the official CloudEvents SDK, for a task of each kind. The rules hold by
construction (the engine applies them), so they hold for any scenario file a user writes
too; the loader refuses the steps that would break them (the last tests here).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import ACME, JOES_DINER, REPO, WALMART
from engine import DAY, Engine, engine  # noqa: F401  (engine: a fixture)
from receiver import Receiver, assert_events_valid
from payroll_sandbox.tools.cli import main
from payroll_sandbox.domain.flow import sdk
from payroll_sandbox.domain.companies.company_admin import set_company_status
from payroll_sandbox.errors import ApiError, CompanyManualDeposits, CompanyUnderMaintenance
from payroll_sandbox.load.fixtures import ConfigError
from payroll_sandbox.load.scenarios.loader import load_scenario

NETFLIX = "6410a0000000000000000060"
HOOKS = "/hooks"
FINAL = ("completed", "failed")
TASK_STATE_EVENTS = ("task-status-updated", "task-authentication-status-updated")


@dataclass(frozen=True)
class ScenarioFile:
    name: str
    steps: list[dict[str, Any]]

    @property
    def pay_link(self) -> bool:
        return any("flow" in step or step.get("product") == "switch" for step in self.steps)

    @property
    def user_leaves(self) -> bool:
        """A step says the user left the flow (connected: false) before the task resolved."""
        for step in self.steps:
            if step.get("connected") is False:
                return True
            if step.get("status") in FINAL:
                return False
        return False


def task_scenarios() -> list[ScenarioFile]:
    found = []
    for path in sorted((REPO / "scenarios").glob("*.yaml")):
        document = yaml.safe_load(path.read_text())
        if document.get("kind", "task") == "task":
            found.append(ScenarioFile(path.stem, document["steps"]))
    return found


SCENARIOS = task_scenarios()
SCENARIO_IDS = [s.name for s in SCENARIOS]
HAPPY = next(s for s in SCENARIOS if s.name == "happy-path")


def target(scenario: ScenarioFile) -> dict[str, str]:
    return {"company": NETFLIX, "product": "switch"} if scenario.pay_link else \
        {"company": WALMART, "product": "deposit"}


# -- the two ways a task starts, on the engine -------------------------------------------------

def api_task(engine: Engine, scenario: ScenarioFile, identifier: str) -> str:
    _, [task] = engine.api_task({"identifier": identifier, "scenario": scenario.name,
                                 **target(scenario)})
    assert task.scenario == scenario.name and not task.watched
    return task.id


def sdk_task(engine: Engine, scenario: ScenarioFile, identifier: str) -> str:
    """A task started in the hosted flow: the user signs in with the sandbox username
    `test-good`; the scenario is bound to the user (the binding wins over the username)."""
    engine.tenant.tasks.bind(identifier, scenario.name)
    where = target(scenario)
    outcome = engine.sdk_login(identifier, {
        "companyId": where["company"], "username": "test-good", "password": "any",
        "tasks": [{"operation": where["product"]}]})
    [task] = outcome.tasks
    assert task.scenario == scenario.name and task.watched
    return task.id


def run_both(engine: Engine, scenario: ScenarioFile) -> dict[str, list[dict]]:
    """The scenario as an API task and as a hosted-flow task; their task events' bodies
    from the ledger, every event of which matches its schema."""
    tasks = {"api": api_task(engine, scenario, f"api-{scenario.name}"),
             "sdk": sdk_task(engine, scenario, f"sdk-{scenario.name}")}
    engine.run_until_idle()
    engine.advance(DAY)  # anything a scenario could still emit would come now
    engine.assert_events_valid()
    return {kind: engine.task_events(task_id) for kind, task_id in tasks.items()}


@pytest.fixture(params=SCENARIOS, ids=SCENARIO_IDS)
def scenario(request) -> ScenarioFile:
    return request.param


@pytest.fixture
def runs(engine, scenario) -> dict[str, list[dict]]:
    return run_both(engine, scenario)


# -- the rules ---------------------------------------------------------------------------------

def test_authentication_event_only_when_authentication_changed(runs):
    """Spec, Task events: task-authentication-status-updated, "Authentication status of a
    Task changed." A task starts unauthenticated; each event states a new value."""
    for kind, events in runs.items():
        values = [e["data"]["authenticated"] for e in events
                  if e["eventType"] == "task-authentication-status-updated"]
        assert all(new != old for old, new in zip([False, *values], values)), (kind, values)


def test_task_status_updated_only_when_the_task_resolves(runs):
    """Spec, Task events: task-status-updated is "Emitted when a Task resolves", and Task
    status: "`failed` and `completed` are final. No further `task-status-updated` follows
    them." One per task, to a final status, from processing (or queued when it failed
    before it ever started processing)."""
    for kind, events in runs.items():
        updates = [e["data"] for e in events if e["eventType"] == "task-status-updated"]
        assert len(updates) == 1, (kind, updates)
        [update] = updates
        assert update["status"] in FINAL
        assert update["previousStatus"] in ("processing", "queued")
        if update["previousStatus"] == "queued":
            assert update["status"] == "failed" and update["authenticated"] is False


def test_nothing_moves_a_task_after_its_final_status_but_a_patch(runs):
    """Spec, Task status: "`failed` and `completed` are final" and only a "Correction
    (audit or bug fix, rare)" moves failed to completed (task-status-patched). After the
    final task-status-updated only the patch, the workflow's end and the pay-link accounts
    of the same step may follow: no authentication or status update."""
    for kind, events in runs.items():
        final = next(i for i, e in enumerate(events) if e["eventType"] == "task-status-updated")
        after = events[final + 1:]
        assert [e["eventType"] for e in after if e["eventType"] in TASK_STATE_EVENTS] == [], kind
        patches = [e["data"] for e in after if e["eventType"] == "task-status-patched"]
        assert [(p["previousStatus"], p["status"]) for p in patches] in ([], [("failed",
                                                                                "completed")])
        if patches:
            assert events[final]["data"]["status"] == "failed"


def test_user_connected_only_for_a_watched_hosted_flow_task(runs, scenario):
    """Spec, User object: connected is "True when the user was present to see confirmation
    of the Task's final outcome." A task created by the API has no user present; a task
    started in the hosted flow whose page is open has, unless the scenario's user left
    before the end (connected: false)."""
    assert [e["user"]["connected"] for e in runs["api"]] == [False] * len(runs["api"])
    final = next(e for e in runs["sdk"] if e["eventType"] == "task-status-updated")
    assert final["user"]["connected"] is not scenario.user_leaves
    outcome = [e["user"]["connected"] for e in runs["sdk"]
               if e["eventType"] in ("task-status-patched", "task-workflow-finished")]
    assert outcome == [final["user"]["connected"]] * len(outcome)


def test_a_hosted_flow_task_whose_page_closed_is_not_connected(engine):
    """Spec, User object: connected is "True when the user was present to see confirmation
    of the Task's final outcome": a user who closed the flow before the end was not."""
    task_id = sdk_task(engine, HAPPY, "closer")
    engine.advance(4)  # signed in (authenticated at 3 s), still processing
    sdk.leave(engine.tenant, engine.public_token("closer"), task_id)  # POST /sdk/leave
    engine.run_until_idle()
    assert [(e["eventType"], e["user"]["connected"]) for e in engine.task_events(task_id)] == [
        ("task-authentication-status-updated", True), ("task-status-updated", False),
        ("task-workflow-finished", False)]


def test_pull_and_push_refreshes_are_not_connected(engine):
    """Spec, Pull refresh flow: "Pass its linkedAccountId to the task creation endpoint to
    refresh its data" - a server-side task, no user present (User object, connected)."""
    task_id = sdk_task(engine, HAPPY, "refresher")
    engine.run_until_idle()
    accounts = engine.tenant.accounts
    [account] = accounts.accounts_of("refresher")
    _, [refresh] = engine.api_task({"identifier": "refresher", "linkedAccountId": account.id})
    accounts.refresh(account)  # POST /_sandbox/linked-accounts/{id}/refresh: a push refresh
    engine.run_until_idle()
    first = engine.task_events(task_id)
    assert first[-1]["user"]["connected"] is True  # the hosted-flow task that linked it
    events = engine.task_events(refresh.id)
    assert events and [e["user"]["connected"] for e in events] == [False] * len(events)
    pushed = [b for b in engine.bodies() if "user" in b and b.get("task") != task_id]
    assert pushed and all(b["user"].get("connected", False) is False for b in pushed)
    assert {b["eventType"] for b in pushed} > {"task-status-updated", "income-synced"}


# -- refusals: manual deposits, maintenance --------------------------------------------------

def refused(error: type[ApiError], call, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(error) as caught:
        call(*args, **kwargs)
    return caught.value


def test_a_manual_deposits_company_is_refused_by_api_and_sdk(engine):
    """Spec, Company tags: manual-deposits, "The company has no programmatic
    authentication. Users get manual instructions to update direct deposit." No task,
    no event, no linked account."""
    api = refused(CompanyManualDeposits, engine.api_task,
                  {"identifier": "manual", "company": JOES_DINER, "product": "deposit"})
    assert (api.status, api.code) == (403, "company-manual-deposits")
    assert [d["path"] for d in api.details] == ["$.company"]
    flow = refused(CompanyManualDeposits, engine.sdk_login, "manual",
                   {"companyId": JOES_DINER, "username": "test-good", "password": "any"})
    assert flow.code == "company-manual-deposits"
    engine.run_until_idle()
    assert len(engine.tenant.tasks) == 0
    assert engine.tenant.accounts.accounts_of("manual") == []
    assert engine.events() == []


def test_maintenance_refuses_the_listed_product_by_api_and_sdk_alike(engine):
    """Spec, Company status: maintenance is "enabled for listed products" and then "Users
    cannot start an authentication flow"; API and SDK errors 2: "Starting an
    authentication flow against an under-maintenance ... company is not possible." The
    same reason from the API and the hosted flow; an unlisted product still starts."""
    set_company_status(engine.tenant.companies, engine.tenant.emit, WALMART, "under-maintenance",
                       ["deposit"])
    api = refused(CompanyUnderMaintenance, engine.api_task,
                  {"identifier": "m", "company": WALMART, "product": "deposit"})
    flow = refused(CompanyUnderMaintenance, engine.sdk_login, "m", {
        "companyId": WALMART, "username": "test-good", "password": "any",
        "tasks": [{"operation": "deposit"}]})
    assert api.status == flow.status == 403
    assert api.code == flow.code == "company-under-maintenance"
    assert len(engine.tenant.tasks) == 0

    engine.api_task({"identifier": "m", "company": WALMART, "product": "verify"})
    engine.sdk_login("m", {"companyId": WALMART, "username": "test-good", "password": "any",
                           "tasks": [{"operation": "verify"}]})
    engine.run_until_idle()
    finals = [b["data"]["status"] for b in engine.bodies(event_type="task-status-updated")]
    assert finals == ["completed", "completed"]


# -- card tokens ------------------------------------------------------------------------------

def test_card_token_recreation_is_automatic(engine):
    """Spec, payment-token-expired: "Tokens expire 24 hours after creation. Recreation is
    normally automatic." The same card a day later still switches."""
    card = {"type": "card", "_id": "card-9", "title": "Visa 4242", "lastFour": "4242"}
    body = {"identifier": "payer", "company": NETFLIX, "product": "switch",
            "paymentMethod": card}
    _, [first] = engine.api_task(body)
    engine.advance(2 * DAY)
    _, [again] = engine.api_task(body)
    engine.run_until_idle()
    for task in (first, again):
        [update] = [e for e in engine.task_events(task.id)
                    if e["eventType"] == "task-status-updated"]
        assert update["data"]["status"] == "completed", update


# -- the loader refuses what would break the rules ---------------------------------------------

BROKEN_STEPS = [
    ([{"after": 1, "status": "processing"}, {"connected": True}, {"status": "completed"}],
     "$.steps[1].connected", "a scenario can only say the user left"),
    ([{"after": 1, "status": "failed", "reason": "user-abandon", "authenticated": True}],
     "$.steps[0].authenticated", "authenticates only while processing"),
    ([{"status": "processing"}, {"status": "completed"}, {"authenticated": True}],
     "$.steps[2]", "nothing but a patch may follow a final status"),
    ([{"status": "processing"}, {"status": "completed"}, {"status": "failed",
                                                          "reason": "unknown-failure"}],
     "$.steps[2].status", "completed is final"),
]


def scenario_file(folder: Path, name: str, steps: list[dict]) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"description": "x", "steps": steps}))
    return path


@pytest.mark.parametrize("steps, path, words", BROKEN_STEPS)
def test_the_loader_rejects_a_step_that_would_break_an_event_rule(tmp_path: Path, steps,
                                                                   path, words):
    """DESIGN.md, Scenarios: "Event rules hold by construction, whatever a scenario says";
    the loader names the file and the step."""
    file = scenario_file(tmp_path / "scenarios", "broken", steps)
    with pytest.raises(ConfigError) as caught:
        load_scenario(file)
    assert (caught.value.file, caught.value.path) == (str(file), path)
    assert words in caught.value.message


def test_scenarios_validate_rejects_a_step_that_would_break_an_event_rule(tmp_path: Path,
                                                                          capsys):
    """`scenarios validate` names the file and the step (exit 2; the CLI's main, in-process)."""
    steps, path, words = BROKEN_STEPS[0]
    folder = tmp_path / "scenarios"
    scenario_file(folder, "broken", steps)
    assert main(["scenarios", "validate", str(folder)]) == 2
    stderr = capsys.readouterr().err
    assert "broken.yaml" in stderr and path in stderr and words in stderr


def test_a_step_stating_the_same_authentication_is_valid_and_silent(tmp_path: Path):
    """Spec: "Authentication status of a Task changed": a step that states the value the
    task already has is not a change. The file loads (a server takes it), and the engine
    emits nothing for that step: the ledger has only the resolution."""
    steps = [{"status": "processing"}, {"after": 1, "authenticated": False},
             {"after": 1, "authenticated": True}, {"after": 1, "authenticated": True},
             {"after": 1, "status": "failed", "reason": "auth-expired"}]
    folder = tmp_path / "scenarios"
    scenario_file(folder, "quiet", steps)
    engine = Engine(scenarios=folder)  # loads and checks the folder, as `serve` does
    task_id = api_task(engine, ScenarioFile("quiet", steps), "quiet-user")
    engine.run_until_idle()
    assert [(e["eventType"], e["data"].get("authenticated"))
            for e in engine.task_events(task_id)] == [
        ("task-authentication-status-updated", True), ("task-status-updated", True),
        ("task-workflow-finished", None)]


# -- end to end: what a receiver gets is the ledger --------------------------------------------

async def call(client, method: str, path: str, *, status: int = 200, headers: dict = ACME,
               **kwargs: Any) -> dict:
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status == status, (method, path, response.status, await response.text())
    return await response.json()


def delivered(receiver: Receiver) -> list[tuple[str, dict[str, Any]]]:
    """Every request the receiver got, in arrival order, parsed by the CloudEvents SDK:
    (ce-id, body)."""
    found = []
    for request in receiver.received(HOOKS):
        event = request.cloud_event()
        body = event.get_data()
        body = json.loads(body) if isinstance(body, (bytes, str)) else body
        assert event.get_type() == f"com.example.{body['eventType']}"
        assert event.get_source() == "com.example" and event.get_specversion() == "1.0"
        found.append((event.get_id(), body))
    return found


async def assert_delivered_as_the_ledger(sandbox, receiver: Receiver, task_id: str) -> list:
    """Every ledger event reached the receiver once, with its id, type and exact body (and
    each matches its schema as served over HTTP); the task's events, in ledger order.
    Attempts of one step go out together, so arrival order is not compared."""
    records = await assert_events_valid(sandbox, receiver)
    received = delivered(receiver)
    assert sorted(ce_id for ce_id, _ in received) == sorted(r["id"] for r in records)
    assert dict(received) == {r["id"]: r["body"] for r in records}
    return [r["body"] for r in records if r["task"] == task_id and "taskWorkflow" in r["body"]]


async def test_an_api_tasks_delivered_webhooks_are_its_ledger(sandbox, receiver):
    """POST /task/create, the clock run over HTTP: the receiver gets the ledger."""
    body = {"identifier": "e2e-api", "scenario": "pay-link-switch", "company": NETFLIX,
            "product": "switch"}
    task_id = (await call(sandbox, "POST", "/task/create", json=body))["data"]["id"]
    await call(sandbox, "POST", "/_sandbox/clock/run-until-idle")
    events = await assert_delivered_as_the_ledger(sandbox, receiver, task_id)
    assert [e["eventType"] for e in events] == [
        "task-authentication-status-updated", "task-status-updated",
        "pay-link-accounts-updated", "task-workflow-finished"]
    assert {e["user"]["connected"] for e in events} == {False}


async def test_a_hosted_flow_tasks_delivered_webhooks_are_its_ledger(sandbox, receiver):
    """PUT the user's scenario, POST /access-token and /sdk/login (the page open), the
    clock run over HTTP: the receiver gets the ledger, the user connected throughout."""
    await call(sandbox, "PUT", "/_sandbox/users/e2e-sdk/scenario",
               json={"scenario": "task-status-patched"})
    token = (await call(sandbox, "POST", "/access-token",
                        json={"identifier": "e2e-sdk"}))["data"]["publicToken"]
    login = await call(sandbox, "POST", "/sdk/login", headers={"x-public-token": token},
                       json={"companyId": WALMART, "username": "test-good", "password": "any",
                             "tasks": [{"operation": "deposit"}]})
    task_id = login["data"]["id"]
    await call(sandbox, "POST", "/_sandbox/clock/run-until-idle")
    events = await assert_delivered_as_the_ledger(sandbox, receiver, task_id)
    assert [e["eventType"] for e in events] == [
        "task-authentication-status-updated", "task-status-updated",
        "task-workflow-finished", "task-status-patched"]
    assert {e["user"]["connected"] for e in events} == {True}
    assert {e["publicToken"] for e in events} == {token}
