"""POST /task/create and GET /task/{id} through real HTTP, on the manual clock.

Covers the create contract and its errors, workflows, scenario selection (DESIGN.md,
Scenarios), public-token users and the pay-link rules of the spec's Limits table.
"""

from __future__ import annotations

import pytest
from calls import advance, run_until_idle
from conftest import ACME, FEDEX, SEARS, WALMART

FLAKY_FREIGHT = "6410a0000000000000000012"  # defaultScenario: connection-error
NETFLIX = "6410a0000000000000000060"        # product switch, maxPaymentMethods: 2
DAY = 86_400
HOUR = 3_600

VISA = {"type": "card", "_id": "card-1", "title": "Visa 4242", "lastFour": "4242"}


async def create(client, body, headers=ACME):
    return await client.post("/task/create", json=body, headers=headers)


async def create_ok(client, body, headers=ACME) -> dict:
    response = await create(client, body, headers)
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def get_task(client, task_id) -> dict:
    response = await client.get(f"/task/{task_id}", headers=ACME)
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def events(client, **query) -> list[dict]:
    response = await client.get("/_sandbox/events", params=query, headers=ACME)
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def bind(client, identifier, scenario):
    return await client.put(f"/_sandbox/users/{identifier}/scenario", json={"scenario": scenario},
                            headers=ACME)


def walmart(identifier="user-1", **body) -> dict:
    return {"identifier": identifier, "company": WALMART, "product": "deposit", **body}


def switch(identifier="payer-1", method=VISA, **body) -> dict:
    return {"identifier": identifier, "company": NETFLIX, "product": "switch",
            "paymentMethod": method, **body}


# -- create and read ------------------------------------------------------------------------

async def test_task_create_returns_one_queued_task_in_a_workflow(client):
    data = await create_ok(client, walmart())
    assert set(data) == {"id", "status", "taskWorkflow", "tasks"}
    assert data["status"] == "queued"
    assert data["id"] and data["taskWorkflow"] and data["id"] != data["taskWorkflow"]
    assert data["tasks"] == [{"id": data["id"], "product": "deposit", "status": "queued",
                              "scenario": "happy-path"}]


async def test_task_get_shows_status_and_history_before_and_after_the_scenario(client):
    created = await create_ok(client, walmart())
    task = await get_task(client, created["id"])
    assert task["id"] == created["id"] and task["taskWorkflow"] == created["taskWorkflow"]
    assert task["status"] == "queued" and task["product"] == "deposit"
    assert task["company"] == WALMART and task["user"]["identifier"] == "user-1"
    assert [h["status"] for h in task["history"]] == ["queued"]

    await run_until_idle(client)
    task = await get_task(client, created["id"])
    assert task["status"] == "completed" and task["previousStatus"] == "processing"
    assert task["authenticated"] is True
    assert "reason" not in task
    assert [h["status"] for h in task["history"]] == ["queued", "processing", "completed"]
    assert task["history"][2]["previousStatus"] == "processing"


async def test_task_get_unknown_id_is_404_task_not_found(client):
    response = await client.get("/task/6410ffffffffffffffffffff", headers=ACME)
    assert response.status == 404
    body = await response.json()
    assert body["error"]["code"] == "task-not-found"
    assert "6410ffffffffffffffffffff" in body["error"]["message"]


# -- refused requests ---------------------------------------------------------------------

@pytest.mark.parametrize("body, status, code, path", [
    ({"company": WALMART, "product": "deposit"}, 422, "validation-failed", "$.identifier"),
    (walmart(company="6410afffffffffffffffffff"), 404, "company-not-found", "$.company"),
    (walmart(product="switch"), 400, "product-not-offered", "$.product"),
    ({"identifier": "user-1", "company": WALMART, "operation": "switch"}, 400,
     "product-not-offered", "$.operation"),
    ({"identifier": "user-1", "company": WALMART, "tasks": [{"operation": "deposit"},
                                                            {"operation": "switch"}]},
     400, "product-not-offered", "$.tasks[1].operation"),
    (walmart(operation="deposit"), 422, "validation-failed", "$"),
    (walmart(scenario="no-such-scenario"), 422, "unknown-scenario", "$.scenario"),
    (walmart(company=SEARS), 403, "company-disabled", "$.company"),
    (walmart(company=FEDEX), 403, "company-under-maintenance", "$.company"),
], ids=["identifier-missing", "company-unknown", "product-not-offered",
        "operation-not-offered", "tasks-item-not-offered", "product-and-operation",
        "scenario-unknown", "company-disabled", "company-under-maintenance"])
async def test_task_create_refused_names_the_field_and_leaves_no_trace(client, body, status,
                                                                       code, path):
    response = await create(client, body)
    assert response.status == status
    error = (await response.json())["error"]
    assert error["code"] == code and error["message"]
    assert path in [d["path"] for d in error["details"]]
    assert await events(client) == []
    clock = await (await client.get("/_sandbox/clock", headers=ACME)).json()
    assert clock["data"]["pendingJobs"] == 0  # no task was scheduled


async def test_task_create_malformed_json_is_400_and_leaves_no_trace(client):
    response = await client.post("/task/create", data=b'{"identifier": "user-1", "company": ',
                                 headers={**ACME, "content-type": "application/json"})
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] == "malformed-json" and error["details"][0]["path"] == "$"
    assert await events(client) == []


# -- operation, tasks and workflows --------------------------------------------------------

async def test_task_create_accepts_operation_as_an_alias_of_product(client):
    data = await create_ok(client, {"identifier": "user-1", "company": WALMART,
                                    "operation": "verify"})
    assert data["tasks"][0]["product"] == "verify"
    assert (await get_task(client, data["id"]))["product"] == "verify"


async def test_task_create_with_tasks_makes_several_tasks_in_one_workflow(client):
    data = await create_ok(client, {"identifier": "user-1", "company": WALMART,
                                    "tasks": [{"operation": "deposit"}, {"product": "verify"}]})
    assert [t["product"] for t in data["tasks"]] == ["deposit", "verify"]
    assert data["id"] == data["tasks"][0]["id"]
    assert len({t["id"] for t in data["tasks"]}) == 2
    for summary in data["tasks"]:
        task = await get_task(client, summary["id"])
        assert task["taskWorkflow"] == data["taskWorkflow"] and task["status"] == "queued"


def final_updates(ledger, task_ids):
    return [e for e in ledger if e["eventType"] == "task-status-updated" and e["task"] in task_ids
            and e["body"]["data"]["status"] in ("completed", "failed")]


async def test_workflow_all_completed_emits_one_finished_event_after_the_last_task(client):
    data = await create_ok(client, {"identifier": "user-1", "company": WALMART,
                                    "tasks": [{"operation": "deposit"}, {"operation": "verify"}]})
    await run_until_idle(client)
    ledger = await events(client)
    finished = [e for e in ledger if e["eventType"] == "task-workflow-finished"]
    assert len(finished) == 1
    body = finished[0]["body"]
    assert body["taskWorkflow"] == data["taskWorkflow"]
    assert body["data"]["status"] == "completed" and "failureReason" not in body["data"]
    finals = final_updates(ledger, {t["id"] for t in data["tasks"]})
    assert len(finals) == 2
    assert finished[0]["sequence"] > max(e["sequence"] for e in finals)


async def test_workflow_all_failed_reports_failed_with_the_failure_reason(client):
    data = await create_ok(client, {"identifier": "user-1", "company": WALMART,
                                    "scenario": "connection-error",
                                    "tasks": [{"operation": "deposit"}, {"operation": "verify"}]})
    assert [t["scenario"] for t in data["tasks"]] == ["connection-error", "connection-error"]
    await run_until_idle(client)
    ledger = await events(client)
    finished = [e for e in ledger if e["eventType"] == "task-workflow-finished"]
    assert len(finished) == 1
    assert finished[0]["body"]["data"]["status"] == "failed"
    assert finished[0]["body"]["data"]["failureReason"] == "connection-error"
    finals = final_updates(ledger, {t["id"] for t in data["tasks"]})
    assert finished[0]["sequence"] > max(e["sequence"] for e in finals)


async def test_workflow_with_one_failed_task_finishes_failed_once_after_the_last_task(client):
    # A third distinct payment method at Netflix (maximum 2) fails; the other two complete.
    methods = [{"type": "card", "_id": f"card-{n}", "title": f"Card {n}"} for n in (1, 2, 3)]
    data = await create_ok(client, {"identifier": "payer-1", "company": NETFLIX,
                                    "tasks": [{"product": "switch", "paymentMethod": m}
                                              for m in methods]})
    await run_until_idle(client)
    statuses = [(await get_task(client, t["id"]))["status"] for t in data["tasks"]]
    assert statuses == ["completed", "completed", "failed"]
    ledger = await events(client)
    finished = [e for e in ledger if e["eventType"] == "task-workflow-finished"]
    assert len(finished) == 1
    assert finished[0]["body"]["data"]["status"] == "failed"
    assert finished[0]["body"]["data"]["failureReason"] == "payment-method-limit-reached"
    finals = final_updates(ledger, {t["id"] for t in data["tasks"]})
    assert len(finals) == 3
    assert finished[0]["sequence"] > max(e["sequence"] for e in finals)


# -- scenario selection -------------------------------------------------------------------

async def outcome(client, task_id) -> tuple[str, str | None]:
    await run_until_idle(client)
    task = await get_task(client, task_id)
    return task["status"], task.get("reason")


async def test_scenario_in_the_request_beats_the_users_binding(client):
    assert (await bind(client, "user-1", "auth-expired")).status == 200
    data = await create_ok(client, walmart(scenario="device-disconnected"))
    assert data["tasks"][0]["scenario"] == "device-disconnected"
    assert await outcome(client, data["id"]) == ("failed", "device-disconnected")


async def test_scenario_binding_beats_the_company_default(client):
    assert (await bind(client, "user-1", "auth-expired")).status == 200
    data = await create_ok(client, walmart(company=FLAKY_FREIGHT))
    assert data["tasks"][0]["scenario"] == "auth-expired"
    assert await outcome(client, data["id"]) == ("failed", "auth-expired")


async def test_scenario_binding_applies_to_that_user_only(client):
    assert (await bind(client, "user-1", "auth-expired")).status == 200
    data = await create_ok(client, walmart(identifier="user-2"))
    assert data["tasks"][0]["scenario"] == "happy-path"


async def test_scenario_company_default_beats_happy_path(client):
    data = await create_ok(client, walmart(company=FLAKY_FREIGHT))
    assert data["tasks"][0]["scenario"] == "connection-error"
    assert await outcome(client, data["id"]) == ("failed", "connection-error")


async def test_scenario_is_happy_path_without_request_binding_or_default(client):
    data = await create_ok(client, walmart())
    assert data["tasks"][0]["scenario"] == "happy-path"
    assert await outcome(client, data["id"]) == ("completed", None)


async def test_scenario_binding_null_removes_it(client):
    assert (await bind(client, "user-1", "auth-expired")).status == 200
    response = await bind(client, "user-1", None)
    assert response.status == 200
    assert (await response.json())["data"] == {"identifier": "user-1", "scenario": None}
    data = await create_ok(client, walmart(company=FLAKY_FREIGHT))
    assert data["tasks"][0]["scenario"] == "connection-error"


async def test_scenario_binding_to_an_unknown_scenario_is_422(client):
    response = await bind(client, "user-1", "no-such-scenario")
    assert response.status == 422
    error = (await response.json())["error"]
    assert error["code"] == "unknown-scenario"
    assert [d["path"] for d in error["details"]] == ["$.scenario"]
    data = await create_ok(client, walmart())
    assert data["tasks"][0]["scenario"] == "happy-path"


# -- a scenario fits its task's product (issue 23) --------------------------------------------

COSTCO_MEMBERSHIP = "6410a000000000000000006b"  # deposit and switch


@pytest.mark.parametrize("body, product, path, fits", [
    (walmart(scenario="payment-method-declined"), "deposit", "$.product", "switch"),
    ({"identifier": "user-1", "company": NETFLIX, "operation": "present",
      "scenario": "pay-link-switch"}, "present", "$.operation", "switch"),
    ({"identifier": "user-1", "company": COSTCO_MEMBERSHIP, "scenario": "pay-link-switch",
      "tasks": [{"product": "switch"}, {"product": "deposit"}]}, "deposit",
     "$.tasks[1].product", "switch"),
    ({"identifier": "user-1", "company": NETFLIX, "product": "switch",
      "scenario": "distribution-not-supported"}, "switch", "$.product", "deposit"),
], ids=["deposit-with-a-switch-scenario", "present-with-a-switch-scenario",
        "one-task-of-several", "switch-with-a-deposit-scenario"])
async def test_task_create_with_a_scenario_that_does_not_fit_the_product_is_422(
        client, body, product, path, fits):
    """A payment-method-declined deposit used to become a switch task silently."""
    response = await create(client, body)
    assert response.status == 422
    error = (await response.json())["error"]
    assert error["code"] == "scenario-does-not-fit"
    assert error["message"].startswith(
        f"The scenario {body['scenario']!r} does not fit a {product} task ({path}): it fits "
        f"{fits}.")
    assert error["details"] == [{"location": "body", "path": "$.scenario",
                                 "message": f"fits {fits}, not {product} ({path})"}]
    assert await events(client) == []
    clock = await (await client.get("/_sandbox/clock", headers=ACME)).json()
    assert clock["data"]["pendingJobs"] == 0  # nothing was started


async def test_a_pay_link_scenario_keeps_the_switch_task_a_switch_task(client):
    data = await create_ok(client, switch(scenario="payment-method-declined"))
    assert await outcome(client, data["id"]) == ("failed", "payment-method-declined")
    task = await get_task(client, data["id"])
    assert (task["product"], task["scenario"]) == ("switch", "payment-method-declined")
    [final] = await events(client, type="task-status-updated", task=data["id"])
    assert final["body"]["product"] == "switch"


async def test_a_binding_that_does_not_fit_the_product_is_passed_over(client):
    """DESIGN.md, Scenarios: the selection order, with only what fits the task counting."""
    assert (await bind(client, "user-1", "payment-method-declined")).status == 200
    deposit = await create_ok(client, walmart(company=FLAKY_FREIGHT))
    assert deposit["tasks"][0]["scenario"] == "connection-error"  # the company's default next
    payer = await create_ok(client, switch(identifier="user-1"))
    assert payer["tasks"][0]["scenario"] == "payment-method-declined"
    both = await create_ok(client, {"identifier": "user-1", "company": COSTCO_MEMBERSHIP,
                                    "tasks": [{"product": "deposit"}, {"product": "switch"}]})
    assert [(t["product"], t["scenario"]) for t in both["tasks"]] == [
        ("deposit", "happy-path"), ("switch", "payment-method-declined")]
    await run_until_idle(client)
    assert [(t["product"], t["status"]) for t in
            [await get_task(client, t["id"]) for t in both["tasks"]]] == [
        ("deposit", "completed"), ("switch", "failed")]


async def test_a_login_username_that_does_not_fit_the_flow_is_passed_over(client):
    """`test-<scenario>` in a deposit flow names a switch story: the deposit runs happy-path."""
    token = await public_token(client, "flow-user")
    response = await client.post("/sdk/login", headers={"x-public-token": token}, json={
        "companyId": WALMART, "username": "test-payment-method-declined", "password": "x"})
    assert response.status == 200, await response.text()
    [task] = (await response.json())["data"]["tasks"]
    assert (task["product"], task["scenario"]) == ("deposit", "happy-path")


# -- public token -------------------------------------------------------------------------

async def public_token(client, identifier) -> str:
    response = await client.post("/access-token", json={"identifier": identifier}, headers=ACME)
    assert response.status == 200
    return (await response.json())["data"]["publicToken"]


async def test_task_create_refuses_a_public_token(client):
    """real-service-facts 1: "Server calls use `x-api-key` + `x-api-secret`": task creation
    is a server call (real-api-surface: key), so a public token is 401 and nothing starts."""
    token = await public_token(client, "token-user")
    response = await create(client, {"company": WALMART, "product": "deposit"},
                            headers={"x-public-token": token})
    assert response.status == 401
    error = (await response.json())["error"]
    assert error["code"] == "api-keys-required" and "x-api-secret" in error["message"]
    assert await events(client) == []


async def test_task_events_carry_the_users_public_token(client):
    token = await public_token(client, "token-user")
    data = await create_ok(client, walmart(identifier="token-user"))
    await run_until_idle(client)
    updates = await events(client, type="task-status-updated", task=data["id"])
    assert updates and all(e["body"]["publicToken"] == token for e in updates)
    assert all(e["body"]["user"]["identifier"] == "token-user" for e in updates)


# -- pay-link rules (spec: Limits) ---------------------------------------------------------

async def test_pay_link_card_token_is_recreated_automatically_after_24_hours(client):
    """Spec: payment-token-expired, "Tokens expire 24 hours after creation. Recreation is
    normally automatic": a card used again a day later works."""
    first = await create_ok(client, switch())
    await advance(client, DAY)  # runs the first task to its end on the way
    again = await create_ok(client, switch())
    assert again["tasks"][0]["scenario"] == "happy-path"
    await run_until_idle(client)
    assert (await get_task(client, first["id"]))["status"] == "completed"
    assert (await get_task(client, again["id"]))["status"] == "completed"


async def test_pay_link_card_token_expires_only_when_recreation_is_switched_off(client):
    """The control plane's switch on the user stands in for a failed recreation: a card
    older than 24 hours then fails payment-token-expired; younger cards still work."""
    response = await client.put("/_sandbox/users/payer-1/card-token-recreation",
                                json={"enabled": False}, headers=ACME)
    assert response.status == 200, await response.text()
    first = await create_ok(client, switch())
    await advance(client, 23 * HOUR)
    within_a_day = await create_ok(client, switch())
    await advance(client, HOUR)
    expired = await create_ok(client, switch())
    assert expired["tasks"][0]["scenario"] == "payment-token-expired"
    response = await client.put("/_sandbox/users/payer-1/card-token-recreation",
                                json={"enabled": True}, headers=ACME)
    assert response.status == 200
    recreated = await create_ok(client, switch())
    await run_until_idle(client)

    assert (await get_task(client, first["id"]))["status"] == "completed"
    assert (await get_task(client, within_a_day["id"]))["status"] == "completed"
    task = await get_task(client, expired["id"])
    assert (task["status"], task["reason"]) == ("failed", "payment-token-expired")
    assert (await get_task(client, recreated["id"]))["status"] == "completed"


async def test_recreate_payment_token_is_not_part_of_the_api(client):
    """The spec has no such field; recreation is automatic. Sending it changes nothing: it
    is ignored as an unknown field and named in x-sandbox-warning."""
    response = await create(client, switch(recreatePaymentToken=True))
    assert response.status == 200
    assert response.headers["x-sandbox-warning"] == "unknown field $.recreatePaymentToken ignored"
    response = await client.put("/_sandbox/users/payer-1/card-token-recreation",
                                json={"enabled": "no"}, headers=ACME)
    assert response.status == 422


async def test_pay_link_card_token_is_valid_just_before_24_hours(client):
    await create_ok(client, switch())
    await advance(client, DAY - 1)
    data = await create_ok(client, switch())
    assert await outcome(client, data["id"]) == ("completed", None)


async def test_pay_link_task_reports_the_payment_method_it_was_given(client):
    completed = await create_ok(client, switch())
    await advance(client, DAY)
    expired = await create_ok(client, switch())
    await run_until_idle(client)
    ids = (completed["id"], expired["id"])
    assert [(await get_task(client, t))["paymentMethod"]["_id"] for t in ids] == ["card-1"] * 2
    finals = [(await events(client, type="task-status-updated", task=t))[-1] for t in ids]
    assert [e["body"]["data"]["paymentMethod"] for e in finals] == [VISA, VISA]


async def test_pay_link_third_payment_method_at_a_merchant_hits_the_limit_per_user(client):
    bank = {"type": "bank", "_id": "bank-2", "title": "Checking 6789", "accountNumber": "6789"}
    third = {"type": "card", "_id": "card-3", "title": "Amex 0005", "lastFour": "0005"}
    first = await create_ok(client, switch(method=VISA))
    second = await create_ok(client, switch(method=bank))
    again = await create_ok(client, switch(method=VISA))  # not a new method
    over = await create_ok(client, switch(method=third))
    other_user = await create_ok(client, switch(identifier="payer-2", method=third))
    assert over["tasks"][0]["scenario"] == "payment-method-limit-reached"
    await run_until_idle(client)

    for data in (first, second, again, other_user):
        assert (await get_task(client, data["id"]))["status"] == "completed"
    task = await get_task(client, over["id"])
    assert (task["status"], task["reason"]) == ("failed", "payment-method-limit-reached")


# -- metadata -----------------------------------------------------------------------------

async def test_task_metadata_is_echoed_in_the_task_and_its_events(client):
    metadata = {"orderId": "order-77", "nested": {"attempt": 2, "tags": ["a", "b"]}}
    data = await create_ok(client, walmart(metadata=metadata))
    assert (await get_task(client, data["id"]))["metadata"] == metadata
    await run_until_idle(client)
    task_events = await events(client, task=data["id"])
    assert task_events and all(e["body"]["metadata"] == metadata for e in task_events)


async def test_task_without_metadata_has_none(client):
    data = await create_ok(client, walmart())
    assert "metadata" not in await get_task(client, data["id"])
