"""The hosted flow's HTTP side behaves as the real service does (issue 8, SDK side).

Real HTTP to the real app on a manual clock, webhooks read on a real receiver
(tests/receiver.py). Each test's docstring quotes the sentence of
docs/spec/service-spec.md or docs/spec/real-service-facts.md it checks.
The same points in the browser: tests/test_sdk_browser.py.
"""

from __future__ import annotations

import base64
import json
import re

import pytest
from calls import advance, call, error_of, run_until_idle
from conftest import ACME, FEDEX, WALMART

from payroll_sandbox.domain.tasks.states import FAILURE_REASONS

HOOKS = "/hooks"
# Every error code the hosted flow can meet on its own calls (/sdk/*, search, GET /task).
FLOW_ERROR_CODES = (
    "invalid-config", "public-token-mismatch", "public-token-required", "public-token-expired",
    "invalid-public-token", "identifier-mismatch", "invalid-credentials", "missing-credentials",
    "wrong-environment", "unauthorized", "invalid-company-id", "company-not-found",
    "company-under-maintenance", "company-disabled", "company-manual-deposits",
    "product-not-offered", "credentials-refused", "linked-account-not-found",
    "linked-account-not-yours", "task-not-found", "validation-failed", "network",
)
# Developer words a user must never read (issue 8, point 12).
JARGON = re.compile(r"x-public-token|x-api|header|token|config|deeplink|companyId|_id|"
                    r"\bAPI\b|HTTP|\b[45]\d\d\b|scenario|\(|\)", re.IGNORECASE)


# -- fixtures and helpers ---------------------------------------------------------------------

async def token_of(client, identifier: str) -> str:
    return (await call(client, "POST", "/access-token", json={"identifier": identifier}))["data"]["publicToken"]


def as_user(token: str) -> dict:
    return {"x-public-token": token}


async def login(client, token: str, status: int = 200, **body) -> dict:
    body = {"companyId": WALMART, "username": "test-good", "password": "any", **body}
    return await call(client, "POST", "/sdk/login", status=status, headers=as_user(token), json=body)


async def session(client, token: str, status: int = 200, **config) -> dict:
    return await call(client, "POST", "/sdk/session", status=status, headers=as_user(token),
                      json={"config": {"publicToken": token, **config}})


async def get_task(client, task_id: str) -> dict:
    return (await call(client, "GET", f"/task/{task_id}"))["data"]


async def tasks_of(client, identifier: str) -> list[dict]:
    return (await call(client, "GET", "/_sandbox/tasks", params={"user": identifier}))["data"]


def encode(config: dict) -> str:
    """What transact.js puts in the path: URL-safe base64 of the JSON, unpadded."""
    return base64.urlsafe_b64encode(json.dumps(config).encode()).decode().rstrip("=")


BOOTSTRAP = re.compile(r'<script id="bootstrap" type="application/json">(.*?)</script>', re.DOTALL)


def delivered(receiver, task_id: str, event_type: str | None = None) -> list[dict]:
    """Bodies of the task's events as the receiver got them, in arrival order."""
    bodies = [json.loads(r.body) for r in receiver.received(HOOKS)]
    return [b for b in bodies if b.get("task") == task_id
            and (event_type is None or b["eventType"] == event_type)]


def final_event(receiver, task_id: str) -> dict:
    [event] = delivered(receiver, task_id, "task-status-updated")
    return event


async def under_maintenance(client, company_id: str, products: list[str]) -> None:
    await call(client, "POST", f"/_sandbox/companies/{company_id}/status",
               json={"status": "under-maintenance", "products": products})


# -- point 3: user.connected -------------------------------------------------------------------

async def test_sdk_login_task_resolved_while_the_page_is_open_is_connected(sandbox, receiver):
    """Spec, User object: `connected` is "True when the user was present to see
    confirmation of the Task's final outcome." An SDK login whose page stayed open."""
    token = await token_of(sandbox, "fid-open")
    task_id = (await login(sandbox, token))["data"]["id"]
    await run_until_idle(sandbox)

    final = final_event(receiver, task_id)
    assert final["data"]["status"] == "completed"
    assert final["user"]["connected"] is True
    assert final["user"]["identifier"] == "fid-open"
    assert (await get_task(sandbox, task_id))["user"]["connected"] is True


async def test_sdk_leave_before_the_outcome_makes_its_events_not_connected(sandbox, receiver):
    """Spec, User object: `connected` is "True when the user was present to see
    confirmation of the Task's final outcome." The user closed the flow while the task
    was processing: the final event says they were not there."""
    token = await token_of(sandbox, "fid-left")
    task_id = (await login(sandbox, token))["data"]["id"]
    await advance(sandbox, 1.5)  # processing, not resolved
    assert (await get_task(sandbox, task_id))["status"] == "processing"

    left = (await call(sandbox, "POST", "/sdk/leave", headers=as_user(token),
                       json={"taskId": task_id}))["data"]
    assert left["tasks"] == [{"id": task_id, "status": "processing", "connected": False}]
    await run_until_idle(sandbox)

    events = delivered(receiver, task_id)
    assert [e["eventType"] for e in events] == ["task-authentication-status-updated",
                                                "task-status-updated", "task-workflow-finished"]
    assert [e["user"]["connected"] for e in events] == [False, False, False]
    assert final_event(receiver, task_id)["data"]["status"] == "completed"


async def test_sdk_leave_after_the_outcome_keeps_connected_true(sandbox, receiver):
    """Spec, User object: connected is about the user seeing "the Task's final outcome":
    closing the flow after seeing it does not change that."""
    token = await token_of(sandbox, "fid-after")
    task_id = (await login(sandbox, token))["data"]["id"]
    await run_until_idle(sandbox)
    left = (await call(sandbox, "POST", "/sdk/leave", headers=as_user(token),
                       json={"taskId": task_id}))["data"]
    assert left["tasks"][0]["connected"] is True
    assert final_event(receiver, task_id)["user"]["connected"] is True


async def test_sdk_leave_of_another_users_task_is_404_and_changes_nothing(sandbox, receiver):
    """Spec, Authentication: "Header `x-public-token` can be used instead when
    authenticating with a public token"; a user's token reaches only that user's tasks."""
    owner, intruder = await token_of(sandbox, "fid-owner"), await token_of(sandbox, "fid-intruder")
    task_id = (await login(sandbox, owner))["data"]["id"]
    error = await error_of(sandbox, "POST", "/sdk/leave", 404, headers=as_user(intruder),
                           json={"taskId": task_id})
    assert error["code"] == "task-not-found"
    error = await error_of(sandbox, "POST", "/sdk/leave", 401, headers=ACME, json={"taskId": task_id})
    assert error["code"] == "public-token-required"
    await run_until_idle(sandbox)
    assert final_event(receiver, task_id)["user"]["connected"] is True


async def test_api_created_task_is_never_connected(sandbox, receiver):
    """Spec, User object: connected is true "when the user was present to see
    confirmation": nobody watches a task created with the API keys."""
    body = await call(sandbox, "POST", "/task/create",
                      json={"identifier": "fid-api", "company": WALMART, "product": "deposit"})
    await run_until_idle(sandbox)
    assert final_event(receiver, body["data"]["id"])["user"]["connected"] is False


# -- point 6: one maintenance rule for the API and the SDK -------------------------------------

@pytest.mark.parametrize(("tasks", "refused"), [
    ([{"operation": "verify"}], False),
    ([{"operation": "deposit"}], True),
    ([{"operation": "verify"}, {"operation": "deposit"}], True),
    (None, True),  # no tasks: the default operation, deposit
], ids=["verify", "deposit", "verify-and-deposit", "default-operation"])
async def test_sdk_refuses_exactly_when_the_api_refuses_a_product_under_maintenance(
        sandbox, tasks, refused):
    """Spec, Company status: maintenance "enabled for listed products" means "Users
    cannot start an authentication flow", and API and SDK errors 2: "Starting an
    authentication flow against an `under-maintenance` or `disabled` company is not
    possible." Walmart is under maintenance for deposit only."""
    await under_maintenance(sandbox, WALMART, ["deposit"])
    token = await token_of(sandbox, "fid-maint")
    configured = {"tasks": tasks} if tasks else {}
    api_status = 403 if refused else 200
    products = [t["operation"] for t in tasks or [{"operation": "deposit"}]]
    api = await call(sandbox, "POST", "/task/create", status=api_status, json={
        "identifier": "fid-maint-api", "company": WALMART,
        "tasks": [{"product": p} for p in products]})

    data = (await session(sandbox, token, deeplink={"step": "login-company", "companyId": WALMART},
                          **configured))["data"]
    picked = (await call(sandbox, "POST", "/sdk/company", headers=as_user(token),
                         json={"companyId": WALMART, **configured}))["data"]
    sdk_login = await login(sandbox, token, status=api_status, **configured)
    if refused:
        code = api["error"]["code"]
        assert code == "company-under-maintenance"
        assert data["refusal"] == {"code": code, "message": api["error"]["message"]}
        assert picked["refusal"]["code"] == code
        assert sdk_login["error"]["code"] == code
        assert await tasks_of(sandbox, "fid-maint") == []
    else:
        assert data["refusal"] is None and picked["refusal"] is None
        assert (await get_task(sandbox, sdk_login["data"]["id"]))["product"] == "verify"


async def test_sdk_company_under_maintenance_for_every_product_refuses_verify_too(sandbox):
    """Spec, Company status: "Users cannot start an authentication flow" while under
    maintenance; FedEx lists no product, so every product is under maintenance."""
    token = await token_of(sandbox, "fid-fedex")
    picked = (await call(sandbox, "POST", "/sdk/company", headers=as_user(token),
                         json={"companyId": FEDEX, "tasks": [{"operation": "verify"}]}))["data"]
    assert picked["company"]["_id"] == FEDEX
    assert picked["refusal"]["code"] == "company-under-maintenance"
    error = (await login(sandbox, token, status=403, companyId=FEDEX,
                         tasks=[{"operation": "verify"}]))["error"]
    assert error["code"] == "company-under-maintenance"


async def test_sdk_company_unknown_id_is_404_invalid_company_id(sandbox):
    """Spec, API and SDK errors 3: "A deeplink with an empty or wrong company `_id`
    produces an invalid-company-id condition." The same for a picked company."""
    token = await token_of(sandbox, "fid-unknown")
    error = await error_of(sandbox, "POST", "/sdk/company", 404, headers=as_user(token),
                           json={"companyId": "6410a00000000000000fffff"})
    assert error["code"] == "invalid-company-id"


# -- point 7: only login-company requires companyId --------------------------------------------

@pytest.mark.parametrize("step", ["direct-deposit-setup", "manual-fallback", "generate-deposit-pdf"])
async def test_sdk_session_company_steps_other_than_login_company_work_without_company_id(
        sandbox, step):
    """Spec, Client SDK configuration: `deeplink.step` lists "`login-company` (requires
    `companyId`)" and these steps without that requirement: the user picks the company."""
    token = await token_of(sandbox, "fid-steps")
    data = (await session(sandbox, token, deeplink={"step": step}))["data"]
    assert data["step"] == step
    assert data["company"] is None and data["refusal"] is None


@pytest.mark.parametrize("step", ["direct-deposit-setup", "manual-fallback", "generate-deposit-pdf",
                                  "login-company"])
@pytest.mark.parametrize("company_id", ["", "6410a00000000000000fffff"], ids=["empty", "wrong"])
async def test_sdk_session_given_but_bad_company_id_is_still_invalid_company_id(
        sandbox, step, company_id):
    """Spec, API and SDK errors 3: "A deeplink with an empty or wrong company `_id`
    produces an invalid-company-id condition.\""""
    token = await token_of(sandbox, "fid-steps")
    error = (await session(sandbox, token, status=404,
                           deeplink={"step": step, "companyId": company_id}))["error"]
    assert error["code"] == "invalid-company-id"


async def test_sdk_session_company_step_with_a_company_id_returns_it(sandbox):
    """Spec, Client SDK configuration: "A deeplink starts the flow at a chosen step"."""
    token = await token_of(sandbox, "fid-steps")
    data = (await session(sandbox, token,
                          deeplink={"step": "direct-deposit-setup", "companyId": WALMART}))["data"]
    assert data["company"]["_id"] == WALMART and data["refusal"] is None


# -- point 8: the real sandbox usernames --------------------------------------------------------

@pytest.mark.parametrize("username", ["test-bad", "test-bad@test.com", "Test-Bad@Test.com"])
async def test_sdk_login_test_bad_is_refused_without_a_task_and_the_user_can_retry(
        sandbox, receiver, username):
    """real-service-facts 7: "Sandbox usernames: test-good, test-bad, ...; any password;
    ... append @test.com where an email is needed." test-bad's credentials are refused."""
    token = await token_of(sandbox, "fid-bad")
    error = (await login(sandbox, token, status=401, username=username))["error"]
    assert error["code"] == "credentials-refused"
    assert [d["path"] for d in error["details"]] == ["$.username"]
    assert await tasks_of(sandbox, "fid-bad") == []
    await run_until_idle(sandbox)
    assert receiver.received(HOOKS) == []

    task_id = (await login(sandbox, token, username="test-good"))["data"]["id"]
    await run_until_idle(sandbox)
    assert final_event(receiver, task_id)["data"]["status"] == "completed"


@pytest.mark.parametrize("username", ["test-failure", "test-failure@test.com"])
async def test_sdk_login_test_failure_fails_the_task(sandbox, receiver, username):
    """real-service-facts 7: the sandbox username test-failure; the task fails (spec,
    Task status: "Task resolves with a problem" -> failed, with a `reason`)."""
    token = await token_of(sandbox, "fid-failure")
    task_id = (await login(sandbox, token, username=username, password="whatever"))["data"]["id"]
    await run_until_idle(sandbox)
    final = final_event(receiver, task_id)
    assert final["data"]["status"] == "failed"
    assert final["data"]["reason"] == "unknown-failure"
    assert (await get_task(sandbox, task_id))["scenario"] == "unknown-failure"


@pytest.mark.parametrize(("distribution", "status"), [
    ({"type": "percent", "amount": 40}, "failed"),
    ({"type": "fixed", "amount": 250}, "failed"),
    ({"type": "total"}, "failed"),
    (None, "failed"),
], ids=["percent", "fixed", "total", "none"])
async def test_sdk_login_test_distribution_not_supported_fails_any_deposit(
        sandbox, receiver, distribution, status):
    """real-service-facts 7: the sandbox username test-distribution-not-supported; it fails
    the way its name says in the default flow too (issue 20, 6), with the spec's nearest
    reason, product-not-supported: "The merchant does not permit the Task for this
    account". The customer's `metadata` stays the customer's."""
    token = await token_of(sandbox, "fid-distribution")
    body = {"username": "test-distribution-not-supported", "metadata": {"orderId": "A-1"}}
    if distribution:
        body["distribution"] = distribution
    task_id = (await login(sandbox, token, **body))["data"]["id"]
    await run_until_idle(sandbox)
    final = final_event(receiver, task_id)
    assert final["data"]["status"] == status
    assert final["metadata"] == {"orderId": "A-1"}
    if status == "failed":
        assert final["data"]["reason"] == "product-not-supported"
        assert (await get_task(sandbox, task_id))["scenario"] == "distribution-not-supported"


@pytest.mark.parametrize(("username", "kind"), [
    ("test-code-mfa", "code"), ("test-question-mfa", "question"),
    ("test-code-mfa@test.com", "code"),
])
async def test_sdk_login_mfa_usernames_challenge_first_then_any_answer_succeeds(
        sandbox, receiver, username, kind):
    """real-service-facts 7: "Sandbox usernames: ..., test-code-mfa, test-question-mfa;
    any password; any MFA answer"."""
    token = await token_of(sandbox, "fid-mfa")
    challenge = (await login(sandbox, token, username=username))["data"]
    assert set(challenge) == {"mfa"}
    assert challenge["mfa"]["type"] == kind and challenge["mfa"]["prompt"]
    assert await tasks_of(sandbox, "fid-mfa") == []

    task_id = (await login(sandbox, token, username=username,
                           mfaAnswer="anything at all"))["data"]["id"]
    await run_until_idle(sandbox)
    final = final_event(receiver, task_id)
    assert final["data"]["status"] == "completed"
    assert final["user"]["connected"] is True


async def test_sdk_login_with_an_empty_mfa_answer_is_422(sandbox):
    """real-service-facts 7: "any MFA answer" (an answer, so not an empty one)."""
    token = await token_of(sandbox, "fid-mfa")
    error = (await login(sandbox, token, status=422, username="test-code-mfa", mfaAnswer=""))["error"]
    assert "$.mfaAnswer" in [d["path"] for d in error["details"]]


# -- point 12: what the user reads ---------------------------------------------------------------

async def test_sdk_page_has_a_plain_sentence_for_every_failure_reason_and_flow_error(sandbox):
    """Spec, Errors: the task failure reasons (all 20) and the API and SDK errors; each
    one reaches the user as a plain sentence, never as its code or developer wording."""
    response = await sandbox.get(f"/initialize/{encode({'publicToken': 'x'})}")
    messages = json.loads(BOOTSTRAP.search(await response.text()).group(1))["messages"]
    assert set(messages["reasons"]) == set(FAILURE_REASONS)
    assert set(FLOW_ERROR_CODES) <= set(messages["errors"])
    codes = set(FAILURE_REASONS) | set(messages["errors"])
    sentences = [*messages["reasons"].values(), *messages["errors"].values(), messages["fallback"]]
    for sentence in sentences:
        assert sentence.endswith("."), sentence
        assert not JARGON.search(sentence), sentence
        assert not [code for code in codes if code in sentence], sentence
        # A next step: every sentence says what to do.
        assert re.search(r"\b(try|sign in|close|go back|check|start|make|add|remove|use|"
                         r"reactivate|update|contact|choose)\b", sentence, re.IGNORECASE), sentence
