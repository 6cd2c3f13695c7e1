"""Processor links through HTTP only (spec: Processor link, Steps at the third-party
aggregator, Result retrieval endpoints, Processor-link events, Limits: transaction history
length; DESIGN.md: Public API rows for processor links, Control plane processor-token).

The aggregator's side (minting and revoking processor tokens) is the control plane's
/_sandbox/aggregator/processor-token. The sandbox runs on a manual clock and delivers to
a real local receiver; the pipeline moves only through /_sandbox/clock/advance and
/run-until-idle. Every test checks each event of its ledger against the schema published
at /_sandbox/schemas/events/{type}.
"""

from __future__ import annotations

import re
import uuid
from datetime import date, timedelta
from typing import Any

import pytest

from calls import advance, call, error_of, run_until_idle, today
from conftest import ACME, GLOBEX
from receiver import assert_events_valid

INITECH = {"x-api-key": "sandbox-key-initech-0003", "x-api-secret": "sandbox-secret-initech-0003"}
START = 1_780_000_000
HOOKS = "/hooks"
LINKS = "/aggregator/processor-links"
MATCHES = "/aggregator/employer-matches"
RECURRING = "/aggregator/recurring-transactions"
MINT = "/_sandbox/aggregator/processor-token"
CLASSIFIED = "employer-classification-completed"
DETECTED = "recurring-transaction-detection-completed"
AGGREGATOR_ERROR = "aggregator-error"
TOKEN = re.compile(r"^processor-sandbox-"
                   r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# -- fixtures ---------------------------------------------------------------------------------

# -- helpers ----------------------------------------------------------------------------------


def as_user(identifier: str, headers: dict = ACME) -> dict:
    return {**headers, "user-identifier": identifier}


async def mint(client, *, headers: dict = ACME, **request: Any) -> str:
    body = await call(client, "POST", MINT, json=request, status=201, headers=headers)
    return body["data"]["processorToken"]


async def register(client, token: str, identifier: str | None = None, *,
                   headers: dict = ACME) -> dict:
    """POST /aggregator/processor-links; the 202 body's data."""
    headers = as_user(identifier, headers) if identifier else headers
    body = await call(client, "POST", LINKS, json={"processorToken": token}, status=202,
                      headers=headers)
    return body["data"]


async def results(client, path: str, identifier: str, *, headers: dict = ACME) -> dict:
    return await call(client, "GET", path, headers=as_user(identifier, headers))


async def ledger(client, *, headers: dict = ACME, **query: str) -> list[dict]:
    body = await call(client, "GET", "/_sandbox/events", params={"limit": "10000", **query},
                      headers=headers)
    return body["data"]


def types_of(records: list[dict]) -> list[str]:
    return [r["eventType"] for r in records]


# -- minting and registering -----------------------------------------------------------------

async def test_mint_processor_token_has_the_sandbox_format(sandbox):
    body = await call(sandbox, "POST", MINT, json={"identifier": "minted", "daysRequested": 30},
                      status=201)
    token = body["data"]
    assert TOKEN.match(token["processorToken"]), token
    assert token["identifier"] == "minted"
    assert token["daysRequested"] == 30
    assert token["products"] == ["transactions"]
    assert token["revoked"] is False
    assert token["requestId"] and token["accountId"]
    assert await mint(sandbox) != token["processorToken"]
    assert await ledger(sandbox) == []   # minting happens at the aggregator: no event


async def test_register_processor_link_is_accepted_and_processing(sandbox, receiver):
    token = await mint(sandbox, identifier="registered")
    link = await register(sandbox, token)
    assert set(link) == {"_id", "status"}
    assert link["status"] == "processing"
    assert link["_id"]
    # Without an identifier in the token, the user-identifier header names the user.
    other = await register(sandbox, await mint(sandbox), "by-header")
    assert other["status"] == "processing" and other["_id"] != link["_id"]
    matches = await results(sandbox, MATCHES, "by-header")
    assert [l["_id"] for l in matches["links"]] == [other["_id"]]
    await run_until_idle(sandbox)
    await assert_events_valid(sandbox, receiver)


async def _malformed(client) -> tuple[dict, dict]:
    return {"processorToken": "not-a-processor-token"}, as_user("err-user")


async def _production(client) -> tuple[dict, dict]:
    return {"processorToken": f"processor-production-{uuid.uuid4()}"}, as_user("err-user")


async def _unknown(client) -> tuple[dict, dict]:
    return {"processorToken": f"processor-sandbox-{uuid.uuid4()}"}, as_user("err-user")


async def _revoked(client) -> tuple[dict, dict]:
    token = await mint(client, identifier="err-user")
    body = await call(client, "POST", f"{MINT}/{token}/revoke")
    assert body["data"]["revoked"] is True
    return {"processorToken": token}, ACME


async def _no_user(client) -> tuple[dict, dict]:
    return {"processorToken": await mint(client)}, ACME


async def _other_user(client) -> tuple[dict, dict]:
    return {"processorToken": await mint(client, identifier="someone")}, as_user("err-user")


async def _missing_field(client) -> tuple[dict, dict]:
    return {}, as_user("err-user")


async def _public_token(client) -> tuple[dict, dict]:
    token = await mint(client, identifier="err-user")
    public = (await call(client, "POST", "/access-token",
                         json={"identifier": "err-user"}))["data"]["publicToken"]
    return {"processorToken": token}, {"x-public-token": public, "user-identifier": "err-user"}


@pytest.mark.parametrize("setup, status, code", [
    (_malformed, 422, "invalid-processor-token"),
    (_production, 400, "wrong-environment"),
    (_unknown, 404, "processor-token-not-found"),
    (_revoked, 409, "processor-token-revoked"),
    (_no_user, 422, "validation-failed"),
    (_other_user, 422, "identifier-mismatch"),
    (_missing_field, 422, "validation-failed"),
    (_public_token, 401, "api-keys-required"),
], ids=lambda v: v.__name__.strip("_") if callable(v) else None)
async def test_register_processor_link_error_changes_nothing(sandbox, receiver, setup, status, code):
    body, headers = await setup(sandbox)
    error = await error_of(sandbox, "POST", LINKS, status, json=body, headers=headers)
    assert error["code"] == code
    assert error["message"]

    await advance(sandbox, 600)
    await run_until_idle(sandbox)
    assert await ledger(sandbox) == []
    for identifier in ("err-user", "someone"):
        for path in (MATCHES, RECURRING):
            missing = await error_of(sandbox, "GET", path, 404, headers=as_user(identifier))
            assert missing["code"] == "processor-links-not-found"


async def test_register_processor_link_twice_is_a_conflict(sandbox, receiver):
    token = await mint(sandbox, identifier="twice")
    link = await register(sandbox, token)
    error = await error_of(sandbox, "POST", LINKS, 409, json={"processorToken": token})
    assert error["code"] == "processor-token-already-registered"
    assert link["_id"] in error["message"]

    await run_until_idle(sandbox)
    assert types_of(await ledger(sandbox)) == [CLASSIFIED, DETECTED]   # one pipeline only
    assert [l["_id"] for l in (await results(sandbox, MATCHES, "twice"))["links"]] == [link["_id"]]
    await assert_events_valid(sandbox, receiver)


async def test_a_failed_registration_leaves_the_token_usable(sandbox, receiver):
    token = await mint(sandbox)
    await error_of(sandbox, "POST", LINKS, 422, json={"processorToken": token})   # no user
    link = await register(sandbox, token, "late-user")
    assert link["status"] == "processing"
    await run_until_idle(sandbox)
    assert types_of(await ledger(sandbox)) == [CLASSIFIED, DETECTED]
    await assert_events_valid(sandbox, receiver)


async def test_revoke_unknown_processor_token_is_404(sandbox):
    error = await error_of(sandbox, "POST", f"{MINT}/processor-sandbox-{uuid.uuid4()}/revoke", 404)
    assert error["code"] == "processor-token-not-found"


# -- the pipeline per enabled products (spec: Processor link, item 6) ------------------------

async def _tenant(client, name: str) -> dict:
    if name == "acme":
        return ACME
    if name == "globex":
        return GLOBEX
    if name == "initech":
        return INITECH
    body = await call(client, "POST", "/_sandbox/tenants", json={"products": ["deposit"]},
                      status=201)
    return {"x-api-key": body["data"]["apiKey"], "x-api-secret": body["data"]["apiSecret"]}


@pytest.mark.parametrize("tenant, expected", [
    ("acme", [CLASSIFIED, DETECTED]),
    ("globex", [CLASSIFIED]),
    ("initech", [DETECTED]),
    ("no-processor-products", []),
])
async def test_pipeline_runs_the_enabled_products(sandbox, receiver, tenant, expected):
    headers = await _tenant(sandbox, tenant)
    token = await mint(sandbox, identifier="pipeline-user", headers=headers)
    link = await register(sandbox, token, headers=headers)

    for path in (MATCHES, RECURRING):
        before = await results(sandbox, path, "pipeline-user", headers=headers)
        assert before["status"] == "processing"
        assert before["data"] == []
        assert [l["status"] for l in before["links"]] == ["processing"]
    assert await ledger(sandbox, headers=headers) == []

    await run_until_idle(sandbox, headers=headers)
    records = await ledger(sandbox, headers=headers)
    assert types_of(records) == expected
    for record in records:
        assert record["body"]["user"]["identifier"] == "pipeline-user"
        assert record["body"]["data"]["processorLink"] == link["_id"]

    matches = await results(sandbox, MATCHES, "pipeline-user", headers=headers)
    recurring = await results(sandbox, RECURRING, "pipeline-user", headers=headers)
    for found in (matches, recurring):
        assert found["status"] == "completed"
        assert [l["status"] for l in found["links"]] == ["completed"]
        assert all(item["processorLink"] == link["_id"] for item in found["data"])

    if CLASSIFIED in expected:
        (event,) = [r for r in records if r["eventType"] == CLASSIFIED]
        assert event["body"]["data"]["matches"] == len(matches["data"])
        assert matches["data"], "the generated history holds at least one payroll deposit"
        for match in matches["data"]:
            company = await call(sandbox, "GET", f"/company/{match['companyId']}", headers=headers)
            assert company["data"]["name"] == match["name"]
            assert 0 <= match["confidence"] <= 1
    else:
        assert matches["data"] == []
    if DETECTED in expected:
        (event,) = [r for r in records if r["eventType"] == DETECTED]
        assert event["body"]["data"]["recurringTransactions"] == len(recurring["data"])
        assert recurring["data"], "the generated history holds recurring charges"
        for item in recurring["data"]:
            assert item["cadence"] in ("weekly", "biweekly", "monthly")
            assert item["amount"] > 0
            assert date.fromisoformat(item["nextDate"]) > date.fromisoformat(item["lastDate"])
            assert 0 <= item["confidence"] <= 1
            if item["companyId"] is not None:
                await call(sandbox, "GET", f"/company/{item['companyId']}", headers=headers)
    else:
        assert recurring["data"] == []
    await assert_events_valid(sandbox, receiver, headers=headers)


async def test_days_requested_bounds_the_transaction_history(sandbox, receiver):
    for identifier, days in (("short-history", 30), ("long-history", 365)):
        await register(sandbox, await mint(sandbox, identifier=identifier, daysRequested=days))
    await run_until_idle(sandbox)
    now = await today(sandbox)

    counts = {}
    for identifier, days in (("short-history", 30), ("long-history", 365)):
        first = now - timedelta(days=days - 1)
        matches = await results(sandbox, MATCHES, identifier)
        recurring = await results(sandbox, RECURRING, identifier)
        (counts[identifier],) = [l["transactions"] for l in matches["links"]]
        for match in matches["data"]:
            assert first <= date.fromisoformat(match["lastDepositDate"]) <= now, (days, match)
        for item in recurring["data"]:
            assert first <= date.fromisoformat(item["lastDate"]) <= now, (days, item)
            # Every occurrence lies in the window: their span fits in it.
            interval = (date.fromisoformat(item["nextDate"]) - date.fromisoformat(item["lastDate"]))
            assert interval * (item["transactions"] - 1) <= timedelta(days=days - 1), (days, item)
    assert counts["long-history"] > counts["short-history"] > 0
    await assert_events_valid(sandbox, receiver)


# -- aggregator errors (spec: Processor-link events, aggregator-error) -----------------------

async def test_only_auth_token_ends_in_an_aggregator_error(sandbox, receiver):
    token = await mint(sandbox, identifier="auth-only", products=["auth"])
    link = await register(sandbox, token)
    await run_until_idle(sandbox)

    records = await ledger(sandbox)
    assert types_of(records) == [AGGREGATOR_ERROR]
    data = records[0]["body"]["data"]
    assert data["processorLink"] == link["_id"]
    assert data["errorType"] and data["errorCode"]
    for path in (MATCHES, RECURRING):
        found = await results(sandbox, path, "auth-only")
        assert found["status"] == "error"
        assert found["data"] == []
        (record,) = found["links"]
        assert record["status"] == "error"
        assert record["error"]["errorCode"] == data["errorCode"]
    await assert_events_valid(sandbox, receiver)


async def test_item_login_required_then_relink_completes(sandbox, receiver):
    token = await mint(sandbox, identifier="relink-user", scenario="item-login-required")
    failed = await register(sandbox, token)
    await run_until_idle(sandbox)

    records = await ledger(sandbox)
    assert types_of(records) == [AGGREGATOR_ERROR]
    data = records[0]["body"]["data"]
    assert data["errorType"] == "ITEM_ERROR"
    assert data["errorCode"] == "ITEM_LOGIN_REQUIRED"
    assert data["processorLink"] == failed["_id"]
    for path in (MATCHES, RECURRING):
        found = await results(sandbox, path, "relink-user")
        assert found["status"] == "error"
        assert found["data"] == []

    # Advancing further does not complete the failed link.
    await advance(sandbox, 3600)
    assert types_of(await ledger(sandbox)) == [AGGREGATOR_ERROR]

    # The user relinks at the aggregator: a new token, registered, completes.
    relinked = await register(sandbox, await mint(sandbox, identifier="relink-user"))
    await run_until_idle(sandbox)
    records = await ledger(sandbox)
    assert types_of(records) == [AGGREGATOR_ERROR, CLASSIFIED, DETECTED]
    assert {r["body"]["data"]["processorLink"] for r in records[1:]} == {relinked["_id"]}
    for path in (MATCHES, RECURRING):
        found = await results(sandbox, path, "relink-user")
        assert found["status"] == "completed"
        assert {l["_id"]: l["status"] for l in found["links"]} == {
            failed["_id"]: "error", relinked["_id"]: "completed"}
        assert {item["processorLink"] for item in found["data"]} <= {relinked["_id"]}
    await assert_events_valid(sandbox, receiver)


async def test_results_report_processing_while_the_relinked_token_processes(sandbox, receiver):
    """After an aggregator error the customer registers a new token; until it completes the
    result endpoints must not say `error` (a poller would give up) but `processing`."""
    await register(sandbox, await mint(sandbox, identifier="poller", scenario="item-login-required"))
    await run_until_idle(sandbox)
    assert (await results(sandbox, MATCHES, "poller"))["status"] == "error"

    await register(sandbox, await mint(sandbox, identifier="poller"))
    for path in (MATCHES, RECURRING):
        found = await results(sandbox, path, "poller")
        assert sorted(l["status"] for l in found["links"]) == ["error", "processing"]
        assert found["status"] == "processing", path
    await run_until_idle(sandbox)
    assert (await results(sandbox, MATCHES, "poller"))["status"] == "completed"
    await assert_events_valid(sandbox, receiver)


async def test_processor_links_do_not_cross_tenants(sandbox, receiver):
    token = await mint(sandbox, identifier="acme-user")
    error = await error_of(sandbox, "POST", LINKS, 404, json={"processorToken": token},
                           headers=GLOBEX)
    assert error["code"] == "processor-token-not-found"
    await register(sandbox, token)
    await run_until_idle(sandbox)
    for path in (MATCHES, RECURRING):
        error = await error_of(sandbox, "GET", path, 404, headers=as_user("acme-user", GLOBEX))
        assert error["code"] == "processor-links-not-found"
    error = await error_of(sandbox, "DELETE", LINKS, 404, headers=as_user("acme-user", GLOBEX))
    assert error["code"] == "processor-links-not-found"
    assert await ledger(sandbox, headers=GLOBEX) == []
    assert (await results(sandbox, MATCHES, "acme-user"))["status"] == "completed"
    await assert_events_valid(sandbox, receiver)


async def test_mint_with_an_unknown_scenario_is_422(sandbox):
    for scenario in ("no-such-scenario", "happy-path"):   # happy-path is a task scenario
        error = await error_of(sandbox, "POST", MINT, 422, json={"scenario": scenario})
        assert error["code"] == "unknown-scenario"


# -- removing links (spec: DELETE /aggregator/processor-links) -------------------------------

async def test_delete_processor_links_during_processing_stops_the_pipeline(sandbox, receiver):
    first = await register(sandbox, await mint(sandbox, identifier="leaver"))
    second = await register(sandbox, await mint(sandbox, identifier="leaver"))
    stayer = await register(sandbox, await mint(sandbox, identifier="stayer"))
    await advance(sandbox, 3)   # transactions pulled, classification not yet due

    body = await call(sandbox, "DELETE", LINKS, headers=as_user("leaver"))
    assert sorted(body["data"]["removed"]) == sorted([first["_id"], second["_id"]])

    await advance(sandbox, 3600)
    await run_until_idle(sandbox)
    records = await ledger(sandbox)
    assert {r["body"]["data"]["processorLink"] for r in records} == {stayer["_id"]}
    assert types_of(records) == [CLASSIFIED, DETECTED]
    for path in (MATCHES, RECURRING):
        error = await error_of(sandbox, "GET", path, 404, headers=as_user("leaver"))
        assert error["code"] == "processor-links-not-found"
        assert (await results(sandbox, path, "stayer"))["status"] == "completed"

    error = await error_of(sandbox, "DELETE", LINKS, 404, headers=as_user("leaver"))
    assert error["code"] == "processor-links-not-found"
    error = await error_of(sandbox, "DELETE", LINKS, 404, headers=as_user("never-linked"))
    assert error["code"] == "processor-links-not-found"
    error = await error_of(sandbox, "DELETE", LINKS, 422)
    assert error["code"] == "validation-failed"
    assert [d["path"] for d in error["details"]] == ["user-identifier"]
    await assert_events_valid(sandbox, receiver)


async def test_result_endpoints_need_the_user_identifier_header(sandbox):
    for path in (MATCHES, RECURRING):
        error = await error_of(sandbox, "GET", path, 422)
        assert error["code"] == "validation-failed"
