"""Continuous access through HTTP only (spec: Continuous access, Linked account, Data records,
Linked account connection, Pull refresh flow, Continuous-access events, Privacy event;
DESIGN.md: Public API rows for linked accounts and data, Control plane).

The sandbox runs on a manual clock and delivers every event to a real local receiver
(tests/receiver.py). Time moves only through /_sandbox/clock/advance and
/_sandbox/clock/run-until-idle, which answer once due jobs and their deliveries are done,
so nothing here sleeps. Every test ends by checking each event of its ledger against the
schema the sandbox publishes at /_sandbox/schemas/events/{type}.
"""

from __future__ import annotations

import re
import shutil
from datetime import date, timedelta
from typing import Any

import pytest
import yaml

from calls import advance, call, create_task, error_of, run_until_idle, today
from conftest import ACME, REPO, WALMART
from receiver import assert_events_valid
from payroll_sandbox.load.datagen import ProfileFactory
from payroll_sandbox.app import build_registry, create_app, load
from payroll_sandbox.clock import Clock
from payroll_sandbox.settings import Settings

START = 1_780_000_000
DAY = 86_400
HOOKS = "/hooks"
TARGET = "6410a0000000000000000003"    # a second employer (deposit, verify)
NETFLIX = "6410a0000000000000000060"   # a merchant: product switch
DATA_RESOURCES = ("income", "statements", "deposit-accounts", "employment", "taxes", "identity",
                  "timesheets")
RESOURCES = ("linked-accounts", *DATA_RESOURCES)
SYNCED_KINDS = ("statements", "income", "timesheets", "employment", "identity", "taxes",
                "deposit-accounts")


# -- fixtures ---------------------------------------------------------------------------------

@pytest.fixture
def make_sandbox(aiohttp_client, loaded, receiver):
    """A client of a fresh app with its own manual clock, delivering to the receiver."""

    async def make(fixtures_loaded=None):
        settings = Settings(port=0, clock="manual", seed=1, webhook_url=receiver.url(HOOKS),
                            webhook_timeout=0.5)
        store = build_registry(settings, clock=Clock(mode="manual", start=START),
                            loaded=fixtures_loaded or loaded)
        return await aiohttp_client(create_app(settings, registry=store))

    return make


@pytest.fixture
async def sandbox(make_sandbox):
    return await make_sandbox()


# -- helpers ----------------------------------------------------------------------------------


async def new_tenant(client, receiver, **request: Any) -> dict:
    """POST /_sandbox/tenants; the headers of the new tenant, whose events go to the
    receiver too (a tenant the control plane makes gets no --webhook-url)."""
    body = await call(client, "POST", "/_sandbox/tenants", json=request, status=201)
    headers = {"x-api-key": body["data"]["apiKey"], "x-api-secret": body["data"]["apiSecret"]}
    await call(client, "PUT", "/_sandbox/webhooks/endpoints", headers=headers,
               json={"endpoints": [{"url": receiver.url(HOOKS)}]})
    return headers


async def task(client, task_id: str, *, headers: dict = ACME) -> dict:
    return (await call(client, "GET", f"/task/{task_id}", headers=headers))["data"]


async def get_data(client, resource: str, identifier: str | None = None, *,
                   headers: dict = ACME, **params: str) -> list[dict]:
    if identifier is not None:
        params["identifier"] = identifier
    if resource == "statements":
        params.setdefault("limit", "1000")  # every statement (the published default is 10)
    return (await call(client, "GET", f"/{resource}", params=params, headers=headers))["data"]


async def link(client, identifier: str, *, company: str = WALMART, product: str = "deposit",
               headers: dict = ACME) -> dict:
    """A completed user-link task; the linked account it left."""
    await create_task(client, identifier, company=company, product=product,
                      scenario="happy-path", headers=headers)
    await run_until_idle(client, headers=headers)
    accounts = [a for a in await get_data(client, "linked-accounts", identifier, headers=headers)
                if a["companyId"] == company]
    assert len(accounts) == 1, accounts
    return accounts[0]


async def ledger(client, *, headers: dict = ACME, **query: str) -> list[dict]:
    body = await call(client, "GET", "/_sandbox/events", params={"limit": "10000", **query},
                      headers=headers)
    assert body["total"] <= 10_000, "the ledger outgrew one page"
    return body["data"]


def of_type(records: list[dict], *event_types: str) -> list[dict]:
    return [r for r in records if r["eventType"] in event_types]


def since(records: list[dict], sequence: int) -> list[dict]:
    return [r for r in records if r["sequence"] > sequence]


async def changes_since(client, revision: int) -> tuple[list[dict], int]:
    """The events emitted or delivered since `revision` (docs/api.md: `after`), and the
    revision to read from next: a day's read costs that day's events, not the ledger."""
    body = await call(client, "GET", "/_sandbox/events",
                      params={"after": str(revision), "limit": "10000"})
    assert revision == 0 or not body["reset"], "the ledger's change window was overrun"
    return body["data"], body["revision"]


# -- linked accounts from tasks (DESIGN.md: a completed user-link task leaves one) -----------

@pytest.mark.parametrize("product", ["deposit", "verify"])
async def test_completed_user_link_task_creates_one_linked_account(sandbox, receiver, product):
    task_id = (await create_task(sandbox, "link-user", product=product,
                                 scenario="happy-path"))["id"]
    await run_until_idle(sandbox)
    assert (await task(sandbox, task_id))["status"] == "completed"

    accounts = await get_data(sandbox, "linked-accounts", "link-user")
    assert len(accounts) == 1
    account = accounts[0]
    assert account["companyId"] == account["company"]["_id"] == WALMART
    assert account["product"] == product
    assert account["connected"] is True
    assert account["identifier"] == "link-user"

    records = await ledger(sandbox)
    connected = of_type(records, "linked-account-connected")
    assert len(connected) == 1
    assert connected[0]["body"]["data"] == {"linkedAccount": account["_id"], "companyId": WALMART}
    assert connected[0]["body"]["user"]["identifier"] == "link-user"
    completed = [r for r in of_type(records, "task-status-updated")
                 if r["body"]["data"]["status"] == "completed"]
    assert connected[0]["sequence"] > completed[0]["sequence"]

    # A second completed task for the same user and company keeps the one account.
    await create_task(sandbox, "link-user", product=product, scenario="happy-path")
    await run_until_idle(sandbox)
    assert [a["_id"] for a in await get_data(sandbox, "linked-accounts", "link-user")] \
        == [account["_id"]]
    assert len(of_type(await ledger(sandbox), "linked-account-connected")) == 1
    await assert_events_valid(sandbox, receiver)


async def test_failed_user_link_task_creates_no_linked_account(sandbox, receiver):
    task_id = (await create_task(sandbox, "failed-user", scenario="connection-error"))["id"]
    await run_until_idle(sandbox)
    assert (await task(sandbox, task_id))["status"] == "failed"
    assert await get_data(sandbox, "linked-accounts", "failed-user") == []
    assert of_type(await ledger(sandbox), "linked-account-connected") == []
    await assert_events_valid(sandbox, receiver)


async def test_switch_task_creates_no_linked_account(sandbox, receiver):
    task_id = (await create_task(sandbox, "switch-user", company=NETFLIX, product="switch",
                                 scenario="happy-path"))["id"]
    await run_until_idle(sandbox)
    assert (await task(sandbox, task_id))["status"] == "completed"
    assert await get_data(sandbox, "linked-accounts", "switch-user") == []
    assert of_type(await ledger(sandbox), "linked-account-connected") == []
    await assert_events_valid(sandbox, receiver)


# -- the data endpoints (DESIGN.md: identifier in the query or the path) --------------------

async def test_data_endpoints_query_and_path_forms_agree(sandbox, receiver):
    account = await link(sandbox, "data-user")
    for resource in RESOURCES:
        by_query = await call(sandbox, "GET", f"/{resource}", params={"identifier": "data-user"})
        by_path = await call(sandbox, "GET", f"/{resource}/data-user")
        assert by_query == by_path, resource
        assert set(by_query) == {"data"}
        assert isinstance(by_query["data"], list)
        if resource not in ("linked-accounts", "timesheets"):   # timesheets: hourly only
            assert by_query["data"], resource
        if resource != "linked-accounts":
            assert {r["linkedAccount"] for r in by_query["data"]} <= {account["_id"]}
    await assert_events_valid(sandbox, receiver)


@pytest.mark.parametrize("resource", RESOURCES)
async def test_data_endpoint_unknown_identifier_is_404(client, resource):
    for path, params in ((f"/{resource}", {"identifier": "nobody"}), (f"/{resource}/nobody", {})):
        error = await error_of(client, "GET", path, 404, params=params)
        assert error["code"] == "user-not-found"


async def test_data_endpoints_user_without_linked_accounts_is_empty(client):
    await call(client, "POST", "/access-token", json={"identifier": "no-accounts"})
    for resource in RESOURCES:
        assert await get_data(client, resource, "no-accounts") == [], resource
        assert (await call(client, "GET", f"/{resource}/no-accounts"))["data"] == [], resource


async def test_data_endpoints_linked_account_filter(sandbox, receiver):
    walmart = await link(sandbox, "two-jobs")
    target = await link(sandbox, "two-jobs", company=TARGET)
    other = await link(sandbox, "someone-else")
    assert len(await get_data(sandbox, "linked-accounts", "two-jobs")) == 2

    for resource in RESOURCES:
        everything = await get_data(sandbox, resource, "two-jobs")
        parts = []
        for account in (walmart, target):
            part = await get_data(sandbox, resource, "two-jobs", linkedAccount=account["_id"])
            key = "_id" if resource == "linked-accounts" else "linkedAccount"
            assert {r[key] for r in part} <= {account["_id"]}, resource
            parts += part
        assert sorted(map(repr, parts)) == sorted(map(repr, everything)), resource

        for unknown in ("6410ffffffffffffffffffff", other["_id"]):
            error = await error_of(sandbox, "GET", f"/{resource}", 404,
                                   params={"identifier": "two-jobs", "linkedAccount": unknown})
            assert error["code"] == "linked-account-not-found"
    await assert_events_valid(sandbox, receiver)


@pytest.mark.parametrize("resource", RESOURCES)
async def test_data_endpoint_without_identifier_under_api_keys_is_422(client, resource):
    error = await error_of(client, "GET", f"/{resource}", 422)
    assert error["code"] == "validation-failed"
    assert [d["path"] for d in error["details"]] == ["$.identifier"]


async def test_data_endpoints_refuse_a_public_token(sandbox, receiver):
    """real-service-facts 1: "Server calls use `x-api-key` + `x-api-secret`; end-user calls
    use `x-public-token`": the data endpoints are server calls (401, naming the keys)."""
    await link(sandbox, "token-user")
    token = (await call(sandbox, "POST", "/access-token",
                        json={"identifier": "token-user"}))["data"]["publicToken"]
    as_user = {"x-public-token": token}
    for resource in RESOURCES:
        for path, params in ((f"/{resource}", {"identifier": "token-user"}),
                             (f"/{resource}/token-user", {})):
            error = await error_of(sandbox, "GET", path, 401, headers=as_user, params=params)
            assert error["code"] == "api-keys-required", resource
            assert "x-api-key" in error["message"]
    await assert_events_valid(sandbox, receiver)


# -- record shapes and consistency (DESIGN.md field lists) -----------------------------------

# real-service-facts: dates are date-times such as `2020-06-30T12:00:00.000Z`; the sandbox
# writes a calendar day as that day at noon UTC.
SERVICE_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}T12:00:00\.000Z$")


def calendar_day(text: str) -> date:
    """The calendar day of a date in a record, which must be in the real service's form."""
    assert SERVICE_DATE.match(text), text
    return date.fromisoformat(text[:10])


FIELDS = {
    "income": {"income", "incomeType", "annualIncome", "hourlyIncome", "netHourlyRate", "payCycle",
               "nextExpectedPayDate", "currentPayPeriodStart", "currentPayPeriodEnd",
               "unpaidHoursInPayPeriod"},
    "statements": {"date", "payPeriodStartDate", "payPeriodEndDate", "grossAmount", "netAmount",
                   "paymentMethod", "paystub", "hours"},
    "deposit-accounts": {"accountNumber", "routingNumber", "type", "bankName", "distributionType",
                         "distributionAmount"},
    "employment": {"employeeType", "employmentStatus", "jobTitle", "startDate", "weeklyHours",
                   "employer"},
    "identity": {"firstName", "lastName", "dateOfBirth", "email", "phone", "ssn", "address", "city",
                 "state", "postalCode"},
    "taxes": {"year", "totalWages", "form"},
    "timesheets": {"date", "hours", "rate"},
}


def assert_pay_calendar(records: dict[str, list[dict]], now: date) -> None:
    """Statements are paid on or before today, one per pay period, the periods follow each
    other without gaps, and the income's current period is the one after the last paid
    period (or that very period on a pay day)."""
    statements = sorted(records["statements"], key=lambda s: s["date"])
    assert all(calendar_day(s["date"]) <= now for s in statements)
    for previous, current in zip(statements, statements[1:]):
        assert calendar_day(current["payPeriodStartDate"]) == \
            calendar_day(previous["payPeriodEndDate"]) + timedelta(days=1), (previous, current)
    (income,) = records["income"]
    start = calendar_day(income["currentPayPeriodStart"])
    end = calendar_day(income["currentPayPeriodEnd"])
    assert start <= now <= end
    assert calendar_day(income["nextExpectedPayDate"]) > now
    if statements:
        last_end = calendar_day(statements[-1]["payPeriodEndDate"])
        assert start == last_end + timedelta(days=1) or end == last_end == now, \
            (statements[-1], income)


def assert_record_shapes(records: dict[str, list[dict]]) -> None:
    for resource, fields in FIELDS.items():
        for record in records[resource]:
            assert fields <= set(record), (resource, fields - set(record))
            assert isinstance(record["_id"], str) and record["_id"], resource
    (income,) = records["income"]
    assert income["incomeType"] in ("hourly", "yearly")
    assert income["payCycle"] in ("weekly", "biweekly", "semimonthly", "monthly")
    for name in ("nextExpectedPayDate", "currentPayPeriodStart", "currentPayPeriodEnd"):
        assert SERVICE_DATE.match(income[name]), name
    assert income["currentPayPeriodStart"] <= income["currentPayPeriodEnd"]
    for number in ("income", "annualIncome", "hourlyIncome", "netHourlyRate"):
        assert income[number] > 0, number
    assert income["netHourlyRate"] < income["hourlyIncome"]
    for statement in records["statements"]:
        for name in ("date", "payPeriodStartDate", "payPeriodEndDate"):
            assert SERVICE_DATE.match(statement[name]), name
        assert statement["payPeriodStartDate"] <= statement["payPeriodEndDate"]
        assert 0 < statement["netAmount"] < statement["grossAmount"]
        assert statement["hours"] > 0
    assert sum(a["distributionType"] == "total" for a in records["deposit-accounts"]) <= 1
    for account in records["deposit-accounts"]:
        assert account["type"] in ("checking", "savings", "paycard")
        assert account["distributionType"] in ("total", "percent", "fixed")
        assert re.fullmatch(r"\*+\d{4}", account["accountNumber"]), account["accountNumber"]
        assert re.fullmatch(r"\d{9}", account["routingNumber"])
    (employment,) = records["employment"]
    assert set(employment["employer"]) >= {"_id", "name"}
    assert SERVICE_DATE.match(employment["startDate"]), employment["startDate"]
    (identity,) = records["identity"]
    assert SERVICE_DATE.match(identity["dateOfBirth"]), identity["dateOfBirth"]
    assert re.fullmatch(r"\*\*\*-\*\*-\d{4}", identity["ssn"]), identity["ssn"]
    for form in records["taxes"]:
        assert isinstance(form["year"], int) and form["totalWages"] > 0
    for sheet in records["timesheets"]:
        assert SERVICE_DATE.match(sheet["date"]) and sheet["hours"] > 0 and sheet["rate"] > 0


async def test_records_follow_the_design_fields_and_agree_with_each_other(sandbox, receiver):
    kinds = set()
    for number in range(8):
        identifier = f"record-user-{number}"
        account = await link(sandbox, identifier)
        records = {r: await get_data(sandbox, r, identifier) for r in RESOURCES}
        assert_record_shapes(records)
        for resource in DATA_RESOURCES:
            assert all(r["linkedAccount"] == account["_id"] for r in records[resource]), resource

        assert_pay_calendar(records, await today(sandbox))
        (employment,) = records["employment"]
        assert employment["employer"]["_id"] == WALMART
        assert employment["employer"]["name"] == "Walmart"
        (income,) = records["income"]
        assert records["statements"], identifier
        kinds.add(income["incomeType"])
        if income["incomeType"] == "yearly":
            periods = {"weekly": 52, "biweekly": 26, "semimonthly": 24, "monthly": 12}
            per_period = round(income["income"] / periods[income["payCycle"]], 2)
            assert all(s["grossAmount"] == per_period for s in records["statements"])
            assert records["timesheets"] == []
        else:
            for statement in records["statements"]:
                gross = round(statement["hours"] * income["hourlyIncome"], 2)
                assert statement["grossAmount"] == gross
            assert records["timesheets"]
            assert all(t["rate"] == income["hourlyIncome"] for t in records["timesheets"])

        # Stable between two reads.
        for resource in RESOURCES:
            assert await get_data(sandbox, resource, identifier) == records[resource], resource
    assert kinds == {"hourly", "yearly"}, "the users should include both kinds of pay"
    await assert_events_valid(sandbox, receiver)


# -- push cadence (spec: Continuous access, push; Continuous-access events) -------------------

async def test_push_refresh_emits_synced_events_daily_and_events_agree_with_data(sandbox, receiver):
    # Eight users holding both kinds of pay: the seed decides who is hourly, so pick them.
    def kind(user: str) -> str:
        return ProfileFactory(1).profile("acme", user, WALMART, "Walmart", date.today()).employee_type

    candidates = [f"push-user-{n}" for n in range(40)]
    users = ([u for u in candidates if kind(u) == "hourly"][:4]
             + [u for u in candidates if kind(u) == "salaried"][:4])
    accounts = {u: await link(sandbox, u) for u in users}
    hourly = {u for u in users
              if (await get_data(sandbox, "income", u))[0]["incomeType"] == "hourly"}
    assert len(hourly) == 4, "the picked users hold both kinds of pay"
    statement_ids = {u: {s["_id"] for s in await get_data(sandbox, "statements", u)} for u in users}
    timesheet_ids = {u: {t["_id"] for t in await get_data(sandbox, "timesheets", u)} for u in users}
    deposit_ids = {u: {d["_id"] for d in await get_data(sandbox, "deposit-accounts", u)}
                   for u in users}
    annual = {u: (await get_data(sandbox, "income", u))[0]["annualIncome"] for u in users}
    deposit_records = {u: {d["_id"]: d for d in await get_data(sandbox, "deposit-accounts", u)}
                       for u in users}
    next_pay = {u: (await get_data(sandbox, "income", u))[0]["nextExpectedPayDate"] for u in users}
    seen: dict[str, int] = {}
    emitted, revision = await changes_since(sandbox, 0)
    last = max(r["sequence"] for r in emitted)

    for day in range(1, 31):
        await advance(sandbox, DAY)
        emitted, revision = await changes_since(sandbox, revision)
        records = sorted(since(emitted, last), key=lambda r: r["sequence"])
        last = max((r["sequence"] for r in records), default=last)
        for user in users:
            mine = [r for r in records if r["userIdentifier"] == user]
            assert all(r["body"]["data"]["linkedAccount"] == accounts[user]["_id"] for r in mine)
            assert all(r["task"] is None for r in mine)
            synced = sorted(r["eventType"] for r in mine if r["eventType"].endswith("-synced"))
            expected = sorted(f"{k}-synced" for k in SYNCED_KINDS
                              if k != "timesheets" or user in hourly)
            assert synced == expected, (day, user)

            (earn,) = of_type(mine, "earn-user-data")
            (income,) = await get_data(sandbox, "income", user)
            assert earn["body"]["data"]["netHourlyRate"] == income["netHourlyRate"]
            assert earn["body"]["data"]["currentPayPeriodStart"] == income["currentPayPeriodStart"]
            assert earn["body"]["data"]["unpaidHoursInPayPeriod"] == income["unpaidHoursInPayPeriod"]

            for event_type, resource, known in (("statements-added", "statements", statement_ids),
                                                ("timesheets-added", "timesheets", timesheet_ids),
                                                ("deposit-accounts-added", "deposit-accounts",
                                                 deposit_ids)):
                added = [i for r in of_type(mine, event_type) for i in r["body"]["data"]["records"]]
                now = {r["_id"] for r in await get_data(sandbox, resource, user)}
                assert set(added) <= now, (day, user, event_type)
                assert len(now) == len(known[user]) + len(added), (day, user, event_type)
                assert now == known[user] | set(added)
                known[user] = now
                seen[event_type] = seen.get(event_type, 0) + len(added)

            # deposit-accounts-updated names exactly the accounts whose record changed.
            deposits = {d["_id"]: d for d in await get_data(sandbox, "deposit-accounts", user)}
            updated = {i for r in of_type(mine, "deposit-accounts-updated")
                       for i in r["body"]["data"]["records"]}
            changed = {i for i, d in deposits.items()
                       if i in deposit_records[user] and d != deposit_records[user][i]}
            assert updated == changed, (day, user)
            deposit_records[user] = deposits
            seen["deposit-accounts-updated"] = seen.get("deposit-accounts-updated", 0) + len(updated)

            if of_type(mine, "income-updated"):
                (updated_income,) = of_type(mine, "income-updated")
                assert updated_income["body"]["data"]["records"] == [income["_id"]]
                assert income["annualIncome"] > annual[user], (day, user)
                seen["income-updated"] = seen.get("income-updated", 0) + 1
            else:
                assert income["annualIncome"] == annual[user], (day, user)
            annual[user] = income["annualIncome"]
            current = {r: await get_data(sandbox, r, user) for r in DATA_RESOURCES}
            assert_record_shapes(current)
            assert_pay_calendar(current, await today(sandbox))
            added = [i for r in of_type(mine, "statements-added")
                     for i in r["body"]["data"]["records"]]
            paid = {s["date"] for s in current["statements"] if s["_id"] in added}
            if calendar_day(next_pay[user]) <= await today(sandbox):
                assert next_pay[user] in paid, (day, user, next_pay[user], paid)
            else:
                assert paid == set(), (day, user)
            next_pay[user] = income["nextExpectedPayDate"]
            (listed,) = await get_data(sandbox, "linked-accounts", user)
            assert listed["lastRefreshedAt"] == earn["time"]

            # A change event follows its own synced event.
            order = [r["eventType"] for r in mine]
            for change, synced_type in (("statements-added", "statements-synced"),
                                        ("timesheets-added", "timesheets-synced"),
                                        ("income-updated", "income-synced")):
                if change in order:
                    assert order.index(change) == order.index(synced_type) + 1

    assert seen.get("statements-added"), seen
    assert seen.get("timesheets-added"), seen
    assert seen.get("deposit-accounts-added"), seen
    assert seen.get("deposit-accounts-updated"), seen
    assert seen.get("income-updated"), \
        f"no raise in 30 days for {len(users)} users: pick more users or days ({seen})"
    await assert_events_valid(sandbox, receiver)


async def test_deposit_account_split_stays_within_the_paycheck_across_refreshes(sandbox, receiver):
    """A deposit account added at the employer takes its share from the others: the shares
    of one paycheck always add up to the whole of it (100 percent, or less with a `total`
    account taking the rest)."""
    users = [f"split-user-{n}" for n in range(8)]
    for user in users:
        await link(sandbox, user)
    await advance(sandbox, 40 * DAY)
    added = of_type(await ledger(sandbox), "deposit-accounts-added")
    assert added, "no deposit account was added in 40 days: pick more users or days"

    wrong = {}
    for user in users:
        accounts = await get_data(sandbox, "deposit-accounts", user)
        percent = sum(a["distributionAmount"] for a in accounts
                      if a["distributionType"] == "percent")
        with_total = any(a["distributionType"] == "total" for a in accounts)
        if (percent >= 100) if with_total else (percent != 100):
            wrong[user] = [(a["distributionType"], a["distributionAmount"]) for a in accounts]
    assert wrong == {}
    await assert_events_valid(sandbox, receiver)


# -- pull refresh (spec: Pull refresh flow) --------------------------------------------------

async def test_pull_refresh_task_syncs_with_the_task_id(sandbox, receiver):
    headers = await new_tenant(sandbox, receiver, continuousAccess={"refreshInterval": None})
    account = await link(sandbox, "pull-user", headers=headers)
    before = {s["_id"] for s in await get_data(sandbox, "statements", "pull-user", headers=headers)}
    await advance(sandbox, 35 * DAY, headers=headers)   # more than a month: a pay date passed
    assert [r for r in await ledger(sandbox, headers=headers)
            if r["eventType"].endswith("-synced")] == []  # no push on this tenant

    task_id = (await create_task(sandbox, None, company=None, product=None,
                                 linkedAccount=account["_id"], headers=headers))["id"]
    record = await task(sandbox, task_id, headers=headers)
    assert record["linkedAccount"] == account["_id"]
    assert record["company"] == WALMART
    await run_until_idle(sandbox, headers=headers)
    assert (await task(sandbox, task_id, headers=headers))["status"] == "completed"

    records = await ledger(sandbox, headers=headers, task=task_id)
    (completed,) = [r for r in of_type(records, "task-status-updated")
                    if r["body"]["data"]["status"] == "completed"]
    after = [r for r in records if r["sequence"] > completed["sequence"]]
    synced = sorted(r["eventType"] for r in after if r["eventType"].endswith("-synced"))
    (income,) = await get_data(sandbox, "income", "pull-user", headers=headers)
    hourly = income["incomeType"] == "hourly"
    assert synced == sorted(f"{k}-synced" for k in SYNCED_KINDS if k != "timesheets" or hourly)
    assert all(r["task"] == task_id for r in after)
    assert of_type(after, "earn-user-data")

    (added,) = of_type(after, "statements-added")
    new_ids = added["body"]["data"]["records"]
    assert new_ids
    now = {s["_id"] for s in await get_data(sandbox, "statements", "pull-user", headers=headers)}
    assert now == before | set(new_ids)
    assert len(now) == len(before) + len(new_ids)

    # The identifier is optional; a wrong one is refused.
    second = (await create_task(sandbox, "pull-user", company=None, product=None,
                                linkedAccount=account["_id"], headers=headers))["id"]
    await run_until_idle(sandbox, headers=headers)
    assert (await task(sandbox, second, headers=headers))["status"] == "completed"
    assert of_type(await ledger(sandbox, headers=headers, task=second), "statements-synced")
    error = await error_of(sandbox, "POST", "/task/create", 404, headers=headers,
                           json={"linkedAccount": account["_id"], "identifier": "someone-else"})
    assert error["code"] == "linked-account-not-found"
    error = await error_of(sandbox, "POST", "/task/create", 404, headers=headers,
                           json={"linkedAccount": "6410ffffffffffffffffffff"})
    assert error["code"] == "linked-account-not-found"
    await assert_events_valid(sandbox, receiver, headers=headers)


# -- connection (spec: Linked account connection) --------------------------------------------

async def test_disconnect_stops_refreshes_until_reconnect(sandbox, receiver):
    account = await link(sandbox, "flaky-user")
    account_id = account["_id"]
    await advance(sandbox, DAY)
    assert of_type(await ledger(sandbox), "statements-synced")

    body = await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account_id}/disconnect",
                      json={"reason": "credentials-changed"})
    assert body["data"]["connected"] is False
    (disconnected,) = of_type(await ledger(sandbox), "linked-account-disconnected")
    assert disconnected["body"]["data"] == {"linkedAccount": account_id, "companyId": WALMART,
                                            "reason": "credentials-changed"}
    (listed,) = await get_data(sandbox, "linked-accounts", "flaky-user")
    assert listed["connected"] is False

    # Disconnecting twice emits once.
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account_id}/disconnect")
    assert len(of_type(await ledger(sandbox), "linked-account-disconnected")) == 1

    # No push refresh while disconnected.
    last = (await ledger(sandbox))[-1]["sequence"]
    await advance(sandbox, 3 * DAY)
    assert since(await ledger(sandbox), last) == []

    # A refresh does not recover it: the task fails with auth-expired.
    task_id = (await create_task(sandbox, None, company=None, product=None,
                                 linkedAccount=account_id))["id"]
    await run_until_idle(sandbox)
    record = await task(sandbox, task_id)
    assert record["status"] == "failed"
    assert record["reason"] == "auth-expired"
    assert [r["eventType"] for r in since(await ledger(sandbox), last)
            if r["eventType"].endswith("-synced")] == []
    assert (await get_data(sandbox, "linked-accounts", "flaky-user"))[0]["connected"] is False

    # Reconnect: linked-account-connected, and the push refreshes resume.
    body = await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account_id}/reconnect")
    assert body["data"]["connected"] is True
    records = since(await ledger(sandbox), last)
    (connected,) = of_type(records, "linked-account-connected")
    assert connected["body"]["data"] == {"linkedAccount": account_id, "companyId": WALMART}
    assert (await get_data(sandbox, "linked-accounts", "flaky-user"))[0]["connected"] is True
    last = records[-1]["sequence"]
    await advance(sandbox, DAY)
    assert of_type(since(await ledger(sandbox), last), "statements-synced", "income-synced")

    error = await error_of(sandbox, "POST",
                           "/_sandbox/linked-accounts/6410ffffffffffffffffffff/disconnect", 404)
    assert error["code"] == "linked-account-not-found"
    await assert_events_valid(sandbox, receiver)


async def test_completed_user_link_task_reconnects_a_disconnected_account(sandbox, receiver):
    """The SDK reconnect flow ends in a completed task for the same user and company."""
    account = await link(sandbox, "relinker")
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect")
    last = (await ledger(sandbox))[-1]["sequence"]

    await create_task(sandbox, "relinker", scenario="happy-path")
    await run_until_idle(sandbox)
    (listed,) = await get_data(sandbox, "linked-accounts", "relinker")
    assert listed["_id"] == account["_id"] and listed["connected"] is True
    (connected,) = of_type(since(await ledger(sandbox), last), "linked-account-connected")
    assert connected["body"]["data"]["linkedAccount"] == account["_id"]
    await assert_events_valid(sandbox, receiver)


async def test_pull_refresh_needs_api_keys(sandbox, receiver):
    """real-api-surface: task creation (the pull refresh) is a key operation."""
    account = await link(sandbox, "sdk-user")
    token = (await call(sandbox, "POST", "/access-token",
                        json={"identifier": "sdk-user"}))["data"]["publicToken"]
    error = await error_of(sandbox, "POST", "/task/create", 401,
                           headers={"x-public-token": token},
                           json={"linkedAccount": account["_id"]})
    assert error["code"] == "api-keys-required"
    tasks = (await call(sandbox, "GET", "/_sandbox/tasks", params={"user": "sdk-user"}))["data"]
    assert len(tasks) == 1  # only the task that linked the account: nothing was created
    await assert_events_valid(sandbox, receiver)


async def test_disconnect_with_an_unknown_reason_is_422(sandbox, receiver):
    account = await link(sandbox, "odd-reason")
    error = await error_of(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect",
                           422, json={"reason": "solar-flare"})
    assert error["code"] == "validation-failed"
    assert (await get_data(sandbox, "linked-accounts", "odd-reason"))[0]["connected"] is True
    assert of_type(await ledger(sandbox), "linked-account-disconnected") == []


# DESIGN.md, Scenarios: besides one per failure reason, "at least ... linked-account-disconnected
# ... pii-data-deleted".

async def test_linked_account_disconnected_scenario_disconnects_the_account(sandbox, receiver):
    account = await link(sandbox, "scripted-disconnect")
    await call(sandbox, "POST", "/task/create",
               json={"linkedAccount": account["_id"], "scenario": "linked-account-disconnected"})
    await run_until_idle(sandbox)
    (listed,) = await get_data(sandbox, "linked-accounts", "scripted-disconnect")
    assert listed["connected"] is False
    (event,) = of_type(await ledger(sandbox), "linked-account-disconnected")
    assert event["body"]["data"]["linkedAccount"] == account["_id"]
    await assert_events_valid(sandbox, receiver)


async def test_pii_data_deleted_scenario_deletes_the_users_data(sandbox, receiver):
    await link(sandbox, "scripted-erase")
    task_id = (await create_task(sandbox, "scripted-erase", scenario="pii-data-deleted"))["id"]
    await run_until_idle(sandbox)
    (event,) = of_type(await ledger(sandbox), "pii-data-deleted")
    assert event["body"]["task"] == task_id
    assert event["body"]["user"]["identifier"] == "scripted-erase"
    for resource in DATA_RESOURCES:
        assert await get_data(sandbox, resource, "scripted-erase") == [], resource
    await assert_events_valid(sandbox, receiver)


# -- privacy (spec: Privacy event) -----------------------------------------------------------

async def test_pii_is_deleted_after_the_tenant_interval(sandbox, receiver):
    headers = await new_tenant(sandbox, receiver,
                               continuousAccess={"piiDeletionInterval": 7 * DAY})
    account = await link(sandbox, "private-user", headers=headers)
    (link_task,) = [t for t in {r["task"] for r in await ledger(sandbox, headers=headers)} if t]

    await advance(sandbox, 6 * DAY, headers=headers)
    assert of_type(await ledger(sandbox, headers=headers), "pii-data-deleted") == []
    assert await get_data(sandbox, "statements", "private-user", headers=headers)

    await advance(sandbox, DAY + 60, headers=headers)
    (deleted,) = of_type(await ledger(sandbox, headers=headers), "pii-data-deleted")
    assert deleted["body"]["user"]["identifier"] == "private-user"
    assert deleted["body"]["task"] == link_task
    assert "data" not in deleted["body"]
    for resource in DATA_RESOURCES:
        assert await get_data(sandbox, resource, "private-user", headers=headers) == [], resource
    assert [a["_id"] for a in await get_data(sandbox, "linked-accounts", "private-user",
                                             headers=headers)] == [account["_id"]]

    # Later refreshes do not bring the data back, and the deletion is not repeated.
    await advance(sandbox, 40 * DAY, headers=headers)   # past at least one pay date
    for resource in DATA_RESOURCES:
        assert await get_data(sandbox, resource, "private-user", headers=headers) == [], resource
    assert len(of_type(await ledger(sandbox, headers=headers), "pii-data-deleted")) == 1
    await assert_events_valid(sandbox, receiver, headers=headers)


async def test_refreshes_after_pii_deletion_announce_no_records_the_endpoints_hide(sandbox,
                                                                                  receiver):
    account = await link(sandbox, "erased-user")
    await call(sandbox, "POST", "/_sandbox/users/erased-user/delete-pii")
    (deleted,) = of_type(await ledger(sandbox), "pii-data-deleted")
    await advance(sandbox, 40 * DAY)   # daily push refreshes, past at least one pay date

    records = since(await ledger(sandbox), deleted["sequence"])
    # Issue 20, 13: no `*-synced` event announces data that is not there (README: Fidelity).
    assert [r for r in records if r["eventType"].endswith("-synced")] == []
    # Events and data agree: a change event names only records the data endpoints show.
    for event_type, resource in (("statements-added", "statements"),
                                 ("timesheets-added", "timesheets"), ("taxes-added", "taxes"),
                                 ("deposit-accounts-added", "deposit-accounts")):
        shown = {r["_id"] for r in await get_data(sandbox, resource, "erased-user",
                                                  linkedAccount=account["_id"])}
        hidden = [(r["time"], i) for r in of_type(records, event_type)
                  for i in r["body"]["data"]["records"] if i not in shown]
        assert hidden == [], f"{event_type} names records GET /{resource} does not show"
    await assert_events_valid(sandbox, receiver)


async def test_delete_pii_on_demand(sandbox, receiver):
    account = await link(sandbox, "forget-me")
    await link(sandbox, "keep-me")
    body = await call(sandbox, "POST", "/_sandbox/users/forget-me/delete-pii")
    assert body["data"] == {"identifier": "forget-me", "deleted": True}

    (deleted,) = of_type(await ledger(sandbox), "pii-data-deleted")
    assert deleted["body"]["user"]["identifier"] == "forget-me"
    assert deleted["body"]["task"]
    assert "data" not in deleted["body"]
    for resource in DATA_RESOURCES:
        assert await get_data(sandbox, resource, "forget-me") == [], resource
    assert [a["_id"] for a in await get_data(sandbox, "linked-accounts", "forget-me")] \
        == [account["_id"]]
    assert await get_data(sandbox, "statements", "keep-me")   # another user keeps hers

    error = await error_of(sandbox, "POST", "/_sandbox/users/nobody/delete-pii", 404)
    assert error["code"] == "user-not-found"
    await assert_events_valid(sandbox, receiver)


# -- deposit switch removed (spec: Continuous-access events) ---------------------------------

async def test_remove_deposit_switch_emits_removed_events_and_drops_the_account(sandbox, receiver):
    account = await link(sandbox, "switch-removed")
    before = await get_data(sandbox, "deposit-accounts", "switch-removed")
    assert before
    last = (await ledger(sandbox))[-1]["sequence"]

    body = await call(sandbox, "POST",
                      f"/_sandbox/linked-accounts/{account['_id']}/remove-deposit-switch")
    removed = body["data"]["removed"]
    assert removed in {d["_id"] for d in before}

    records = since(await ledger(sandbox), last)
    assert [r["eventType"] for r in records] == ["deposit-switch-removed", "deposit-accounts-removed"]
    assert records[0]["body"]["data"]["depositAccount"] == removed
    assert records[1]["body"]["data"]["records"] == [removed]
    after = await get_data(sandbox, "deposit-accounts", "switch-removed")
    assert {d["_id"] for d in after} == {d["_id"] for d in before} - {removed}
    await assert_events_valid(sandbox, receiver)


# -- ready-made linked accounts (DESIGN.md: accounts.yaml `linkedAccounts`) ------------------

@pytest.fixture
def ready_made_fixtures(tmp_path):
    """The bundled fixtures with two ready-made linked accounts on acme."""
    directory = tmp_path / "fixtures"
    shutil.copytree(REPO / "fixtures", directory)
    path = directory / "accounts.yaml"
    document = yaml.safe_load(path.read_text())
    (acme,) = [a for a in document["accounts"] if a["name"] == "acme"]
    acme["linkedAccounts"] = [{"identifier": "demo-user", "company": WALMART},
                              {"identifier": "demo-away", "company": TARGET, "product": "verify",
                               "connected": False}]
    path.write_text(yaml.safe_dump(document))
    return load(Settings(fixtures=directory))


async def test_ready_made_linked_accounts_from_fixtures(make_sandbox, receiver, ready_made_fixtures):
    sandbox = await make_sandbox(ready_made_fixtures)
    (demo,) = await get_data(sandbox, "linked-accounts", "demo-user")
    assert demo["companyId"] == WALMART and demo["connected"] is True
    assert demo["product"] == "deposit"
    (away,) = await get_data(sandbox, "linked-accounts", "demo-away")
    assert away["companyId"] == TARGET and away["connected"] is False
    assert away["product"] == "verify"
    for resource in ("income", "statements", "employment", "identity", "deposit-accounts"):
        assert await get_data(sandbox, resource, "demo-user"), resource
    assert await ledger(sandbox) == []   # made by the fixtures, not announced

    await advance(sandbox, DAY)
    records = await ledger(sandbox)
    assert of_type(records, "statements-synced")
    assert {r["userIdentifier"] for r in records} == {"demo-user"}
    await assert_events_valid(sandbox, receiver)
