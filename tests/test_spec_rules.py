"""The spec's event rules, statement by statement, over every bundled task scenario.

Each test quotes the sentence of ../shared/spec/service-spec.md it checks. Every
scenario file runs twice on a real app with a manual clock: once as a task created by
the API, once as a task started in the hosted flow (POST /sdk/login with the user's
public token, the page open). The events are read where a customer reads them: on a
real webhook receiver, parsed with the official CloudEvents SDK, and each validates
against its published schema. The rules hold by construction (the engine applies
them), so they hold for any scenario file a user writes too; the loader refuses the
steps that would break them (the last tests here).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import ACME, JOES_DINER, REPO, WALMART, run_cli
from receiver import Receiver, assert_events_valid
from payroll_sandbox.app import create_app
from payroll_sandbox.clock import Clock
from payroll_sandbox.settings import Settings

NETFLIX = "6410a0000000000000000060"
START = 1_780_000_000
DAY = 86_400
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


# -- the sandbox, the receiver and the two ways a task starts ---------------------------------

async def call(client, method: str, path: str, *, status: int = 200, headers: dict = ACME,
               **kwargs: Any) -> dict:
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status == status, (method, path, response.status, await response.text())
    return await response.json()


def target(scenario: ScenarioFile) -> dict[str, str]:
    return {"company": NETFLIX, "product": "switch"} if scenario.pay_link else \
        {"company": WALMART, "product": "deposit"}


async def api_task(client, scenario: ScenarioFile, identifier: str) -> str:
    body = {"identifier": identifier, "scenario": scenario.name, **target(scenario)}
    return (await call(client, "POST", "/task/create", json=body))["data"]["id"]


async def public_token(client, identifier: str) -> str:
    body = await call(client, "POST", "/access-token", json={"identifier": identifier})
    return body["data"]["publicToken"]


async def sdk_task(client, scenario: ScenarioFile, identifier: str) -> str:
    """A task started in the hosted flow: the user signs in with the sandbox username
    `test-good`; the scenario is bound to the user (the binding wins over the username)."""
    await call(client, "PUT", f"/_sandbox/users/{identifier}/scenario",
               json={"scenario": scenario.name})
    token = await public_token(client, identifier)
    where = target(scenario)
    body = await call(client, "POST", "/sdk/login", headers={"x-public-token": token},
                      json={"companyId": where["company"], "username": "test-good",
                            "password": "any", "tasks": [{"operation": where["product"]}]})
    return body["data"]["id"]


async def run_until_idle(client) -> None:
    body = await call(client, "POST", "/_sandbox/clock/run-until-idle")
    assert body["data"]["idle"] is True


async def advance(client, seconds: float) -> None:
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": seconds})


def delivered(receiver: Receiver, task_id: str) -> list[dict[str, Any]]:
    """The bodies of one task's task events as delivered, in arrival order, parsed by the
    CloudEvents SDK."""
    bodies = []
    for request in receiver.received(HOOKS):
        event = request.cloud_event()
        body = event.get_data()
        body = json.loads(body) if isinstance(body, (bytes, str)) else body
        # Task events carry `taskWorkflow` (spec: Task events); pii-data-deleted names the
        # task too but is a privacy event.
        if body.get("task") == task_id and "taskWorkflow" in body:
            assert event.get_type() == f"com.example.{body['eventType']}"
            bodies.append(body)
    return bodies


async def run_both(client, receiver, scenario: ScenarioFile) -> dict[str, list[dict]]:
    """The scenario as an API task and as a hosted-flow task; their delivered events."""
    tasks = {"api": await api_task(client, scenario, f"api-{scenario.name}"),
             "sdk": await sdk_task(client, scenario, f"sdk-{scenario.name}")}
    await run_until_idle(client)
    await advance(client, DAY)  # anything a scenario could still emit would come now
    await assert_events_valid(client, receiver)
    return {kind: delivered(receiver, task_id) for kind, task_id in tasks.items()}


# -- the rules ---------------------------------------------------------------------------------

@pytest.mark.parametrize("scenario", SCENARIOS, ids=SCENARIO_IDS)
async def test_authentication_event_only_when_authentication_changed(sandbox, receiver, scenario):
    """Spec, Task events: task-authentication-status-updated, "Authentication status of a
    Task changed." A task starts unauthenticated; each event states a new value."""
    for kind, events in (await run_both(sandbox, receiver, scenario)).items():
        values = [e["data"]["authenticated"] for e in events
                  if e["eventType"] == "task-authentication-status-updated"]
        assert all(new != old for old, new in zip([False, *values], values)), (kind, values)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=SCENARIO_IDS)
async def test_task_status_updated_only_when_the_task_resolves(sandbox, receiver, scenario):
    """Spec, Task events: task-status-updated is "Emitted when a Task resolves", and Task
    status: "`failed` and `completed` are final. No further `task-status-updated` follows
    them." One per task, to a final status, from processing (or queued when it failed
    before it ever started processing)."""
    for kind, events in (await run_both(sandbox, receiver, scenario)).items():
        updates = [e["data"] for e in events if e["eventType"] == "task-status-updated"]
        assert len(updates) == 1, (kind, updates)
        [update] = updates
        assert update["status"] in FINAL
        assert update["previousStatus"] in ("processing", "queued")
        if update["previousStatus"] == "queued":
            assert update["status"] == "failed" and update["authenticated"] is False


@pytest.mark.parametrize("scenario", SCENARIOS, ids=SCENARIO_IDS)
async def test_nothing_moves_a_task_after_its_final_status_but_a_patch(sandbox, receiver,
                                                                      scenario):
    """Spec, Task status: "`failed` and `completed` are final" and only a "Correction
    (audit or bug fix, rare)" moves failed to completed (task-status-patched). After the
    final task-status-updated only the patch, the workflow's end and the pay-link accounts
    of the same step may follow: no authentication or status update."""
    for kind, events in (await run_both(sandbox, receiver, scenario)).items():
        final = next(i for i, e in enumerate(events) if e["eventType"] == "task-status-updated")
        after = events[final + 1:]
        assert [e["eventType"] for e in after if e["eventType"] in TASK_STATE_EVENTS] == [], kind
        patches = [e["data"] for e in after if e["eventType"] == "task-status-patched"]
        assert [(p["previousStatus"], p["status"]) for p in patches] in ([], [("failed",
                                                                                "completed")])
        if patches:
            assert events[final]["data"]["status"] == "failed"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=SCENARIO_IDS)
async def test_user_connected_only_for_a_watched_hosted_flow_task(sandbox, receiver, scenario):
    """Spec, User object: connected is "True when the user was present to see confirmation
    of the Task's final outcome." A task created by the API has no user present; a task
    started in the hosted flow whose page is open has, unless the scenario's user left
    before the end (connected: false)."""
    runs = await run_both(sandbox, receiver, scenario)
    assert [e["user"]["connected"] for e in runs["api"]] == [False] * len(runs["api"])
    final = next(e for e in runs["sdk"] if e["eventType"] == "task-status-updated")
    assert final["user"]["connected"] is not scenario.user_leaves
    outcome = [e["user"]["connected"] for e in runs["sdk"]
               if e["eventType"] in ("task-status-patched", "task-workflow-finished")]
    assert outcome == [final["user"]["connected"]] * len(outcome)


async def test_a_hosted_flow_task_whose_page_closed_is_not_connected(sandbox, receiver):
    """Spec, User object: connected is "True when the user was present to see confirmation
    of the Task's final outcome": a user who closed the flow before the end was not."""
    happy = next(s for s in SCENARIOS if s.name == "happy-path")
    task_id = await sdk_task(sandbox, happy, "closer")
    token = await public_token(sandbox, "closer")
    await advance(sandbox, 4)  # signed in (authenticated at 3 s), still processing
    await call(sandbox, "POST", "/sdk/leave", headers={"x-public-token": token},
               json={"taskId": task_id})
    await run_until_idle(sandbox)
    events = delivered(receiver, task_id)
    assert [(e["eventType"], e["user"]["connected"]) for e in events] == [
        ("task-authentication-status-updated", True), ("task-status-updated", False),
        ("task-workflow-finished", False)]


async def test_pull_and_push_refreshes_are_not_connected(sandbox, receiver):
    """Spec, Pull refresh flow: "Pass its linkedAccountId to the task creation endpoint to
    refresh its data" - a server-side task, no user present (User object, connected)."""
    task_id = await sdk_task(sandbox, next(s for s in SCENARIOS if s.name == "happy-path"),
                             "refresher")
    await run_until_idle(sandbox)
    [account] = (await call(sandbox, "GET", "/linked-accounts?identifier=refresher"))["data"]
    refresh = (await call(sandbox, "POST", "/task/create", json={
        "identifier": "refresher", "linkedAccountId": account["_id"]}))["data"]["id"]
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/refresh")
    await run_until_idle(sandbox)
    first = delivered(receiver, task_id)
    assert first[-1]["user"]["connected"] is True  # the hosted-flow task that linked it
    events = delivered(receiver, refresh)
    assert events and [e["user"]["connected"] for e in events] == [False] * len(events)
    pushed = [json.loads(r.body) for r in receiver.received(HOOKS)]
    assert all(body["user"].get("connected", False) is False for body in pushed
               if "user" in body and body.get("task") not in (task_id,))


# -- refusals: manual deposits, maintenance --------------------------------------------------

async def test_a_manual_deposits_company_is_refused_by_api_and_sdk(sandbox, receiver):
    """Spec, Company tags: manual-deposits, "The company has no programmatic
    authentication. Users get manual instructions to update direct deposit." No task,
    no event, no linked account."""
    error = (await call(sandbox, "POST", "/task/create", status=403, json={
        "identifier": "manual", "company": JOES_DINER, "product": "deposit"}))["error"]
    assert error["code"] == "company-manual-deposits"
    assert [d["path"] for d in error["details"]] == ["$.company"]
    token = await public_token(sandbox, "manual")
    error = (await call(sandbox, "POST", "/sdk/login", status=403,
                        headers={"x-public-token": token},
                        json={"companyId": JOES_DINER, "username": "test-good",
                              "password": "any"}))["error"]
    assert error["code"] == "company-manual-deposits"
    await run_until_idle(sandbox)
    assert (await call(sandbox, "GET", "/_sandbox/tasks"))["data"] == []
    assert (await call(sandbox, "GET", "/linked-accounts?identifier=manual"))["data"] == []
    assert receiver.received(HOOKS) == []


async def test_maintenance_refuses_the_listed_product_by_api_and_sdk_alike(sandbox, receiver):
    """Spec, Company status: maintenance is "enabled for listed products" and then "Users
    cannot start an authentication flow"; API and SDK errors 2: "Starting an
    authentication flow against an under-maintenance ... company is not possible." The
    same reason from the API and the hosted flow; an unlisted product still starts."""
    await call(sandbox, "POST", f"/_sandbox/companies/{WALMART}/status",
               json={"status": "under-maintenance", "products": ["deposit"]})
    receiver.clear()
    api = (await call(sandbox, "POST", "/task/create", status=403, json={
        "identifier": "m", "company": WALMART, "product": "deposit"}))["error"]
    token = await public_token(sandbox, "m")
    sdk = (await call(sandbox, "POST", "/sdk/login", status=403,
                      headers={"x-public-token": token},
                      json={"companyId": WALMART, "username": "test-good", "password": "any",
                            "tasks": [{"operation": "deposit"}]}))["error"]
    assert api["code"] == sdk["code"] == "company-under-maintenance"
    assert (await call(sandbox, "GET", "/_sandbox/tasks"))["data"] == []

    await call(sandbox, "POST", "/task/create", json={
        "identifier": "m", "company": WALMART, "product": "verify"})
    await call(sandbox, "POST", "/sdk/login", headers={"x-public-token": token},
               json={"companyId": WALMART, "username": "test-good", "password": "any",
                     "tasks": [{"operation": "verify"}]})
    await run_until_idle(sandbox)
    finals = [json.loads(r.body)["data"]["status"] for r in receiver.received(HOOKS)
              if json.loads(r.body)["eventType"] == "task-status-updated"]
    assert finals == ["completed", "completed"]


# -- card tokens ------------------------------------------------------------------------------

async def test_card_token_recreation_is_automatic(sandbox, receiver):
    """Spec, payment-token-expired: "Tokens expire 24 hours after creation. Recreation is
    normally automatic." The same card a day later still switches."""
    card = {"type": "card", "_id": "card-9", "title": "Visa 4242", "lastFour": "4242"}
    body = {"identifier": "payer", "company": NETFLIX, "product": "switch",
            "paymentMethod": card}
    first = (await call(sandbox, "POST", "/task/create", json=body))["data"]["id"]
    await advance(sandbox, 2 * DAY)
    again = (await call(sandbox, "POST", "/task/create", json=body))["data"]["id"]
    await run_until_idle(sandbox)
    for task_id in (first, again):
        [update] = [e for e in delivered(receiver, task_id)
                    if e["eventType"] == "task-status-updated"]
        assert update["data"]["status"] == "completed", update


# -- the loader refuses what would break the rules ---------------------------------------------

@pytest.mark.parametrize("steps, path, words", [
    ([{"after": 1, "status": "processing"}, {"connected": True}, {"status": "completed"}],
     "$.steps[1].connected", "a scenario can only say the user left"),
    ([{"after": 1, "status": "failed", "reason": "user-abandon", "authenticated": True}],
     "$.steps[0].authenticated", "authenticates only while processing"),
    ([{"status": "processing"}, {"status": "completed"}, {"authenticated": True}],
     "$.steps[2]", "nothing but a patch may follow a final status"),
    ([{"status": "processing"}, {"status": "completed"}, {"status": "failed",
                                                          "reason": "unknown-failure"}],
     "$.steps[2].status", "completed is final"),
])
def test_scenarios_validate_rejects_a_step_that_would_break_an_event_rule(tmp_path: Path, steps,
                                                                          path, words):
    """DESIGN.md, Scenarios: "Event rules hold by construction, whatever a scenario says";
    `scenarios validate` names the file and the step (exit 2)."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "broken.yaml").write_text(yaml.safe_dump({"description": "x", "steps": steps}))
    result = run_cli("scenarios", "validate", str(folder))
    assert result.returncode == 2, result
    assert "broken.yaml" in result.stderr and path in result.stderr and words in result.stderr


async def test_a_step_stating_the_same_authentication_is_valid_and_silent(
        tmp_path: Path, aiohttp_client, receiver):
    """Spec: "Authentication status of a Task changed": a step that states the value the
    task already has is not a change. The file is valid, and the engine emits nothing
    for that step: the receiver gets only the resolution."""
    folder = tmp_path / "scenarios"
    shutil.copytree(REPO / "scenarios", folder)
    steps = [{"status": "processing"}, {"after": 1, "authenticated": False},
             {"after": 1, "authenticated": True}, {"after": 1, "authenticated": True},
             {"after": 1, "status": "failed", "reason": "auth-expired"}]
    (folder / "quiet.yaml").write_text(yaml.safe_dump({"description": "x", "steps": steps}))
    result = run_cli("scenarios", "validate", str(folder))
    assert result.returncode == 0, result.stderr

    settings = Settings(port=0, clock="manual", scenarios=folder, webhook_url=receiver.url(HOOKS),
                        webhook_timeout=0.5)
    client = await aiohttp_client(create_app(settings, clock=Clock(mode="manual", start=START)))
    task_id = await api_task(client, ScenarioFile("quiet", steps), "quiet-user")
    await run_until_idle(client)
    assert [(e["eventType"], e["data"].get("authenticated")) for e in delivered(receiver, task_id)
            ] == [("task-authentication-status-updated", True), ("task-status-updated", True),
                  ("task-workflow-finished", None)]
