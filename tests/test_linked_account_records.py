"""The real service's linked-account records and date forms, through HTTP only
(real-service-facts 8 and "Record fields published"; issue 8, points 9 and 10).

The sandbox runs on a manual clock (time moves only through /_sandbox/clock/advance and
/_sandbox/clock/run-until-idle) and delivers every event to a real local receiver
(tests/receiver.py). Records are checked against the schemas GET /openapi.json publishes,
events against GET /_sandbox/schemas/events/{type}. Each test's docstring quotes the
sentence of docs/spec/real-service-facts.md (or of the issue quoting it) that it checks.
"""

from __future__ import annotations

import json
import re
from datetime import date, timedelta

from jsonschema import Draft202012Validator
from yarl import URL

from calls import advance, call, error_of, run_until_idle, today
from conftest import ACME, WALMART
from receiver import assert_events_valid
from payroll_sandbox.load.datagen import ProfileFactory

START = 1_780_000_000
DAY = 86_400
HOOKS = "/hooks"
# facts 8, and real-api-surface (Linked accounts) adds `lastFailure`.
REAL_FIELDS = {"_id", "valid", "transactRequired", "company", "connector", "lastSuccess"}
FAILED_ONCE = "lastFailure"  # there once the connection failed
SANDBOX_FIELDS = {"_id", "identifier", "companyId", "product", "connected", "status",
                  "createdAt", "lastRefreshedAt"}
# The real form of a date-time, e.g. 2020-06-30T12:00:00.000Z.
REAL_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
DATA_RESOURCES = ("income", "statements", "deposit-accounts", "employment", "taxes", "identity",
                  "timesheets")
# Every date field of the data records.
DATE_FIELDS = {"income": ("nextExpectedPayDate", "currentPayPeriodStart", "currentPayPeriodEnd"),
               "statements": ("date", "payPeriodStartDate", "payPeriodEndDate"),
               "timesheets": ("date",), "employment": ("startDate",),
               "identity": ("dateOfBirth",)}


# -- helpers ----------------------------------------------------------------------------------

async def link(client, identifier: str, *, company: str = WALMART) -> dict:
    """A completed deposit task leaves a linked account; its GET /linked-accounts record."""
    await call(client, "POST", "/task/create", json={
        "identifier": identifier, "company": company, "product": "deposit",
        "scenario": "happy-path"})
    await run_until_idle(client)
    (account,) = (await call(client, "GET", f"/linked-accounts/{identifier}"))["data"]
    return account


async def listed(client, identifier: str, *, headers: dict = ACME) -> list[dict]:
    body = await call(client, "GET", f"/linked-account/list/{identifier}", headers=headers)
    return body["data"]


async def ledger(client, **query: str) -> list[dict]:
    return (await call(client, "GET", "/_sandbox/events",
                       params={"limit": "10000", **query}))["data"]


async def public_token(client, identifier: str) -> dict:
    body = await call(client, "POST", "/access-token", json={"identifier": identifier})
    return {"x-public-token": body["data"]["publicToken"]}


def delivered(receiver, event_type: str) -> list[dict]:
    """The bodies of the webhooks of one type that reached the receiver."""
    return [json.loads(r.body) for r in receiver.received(HOOKS)
            if r.headers["ce-type"] == f"com.example.{event_type}"]


async def published_item_schema(client, path: str) -> Draft202012Validator:
    """The validator of one item of `data` in the 200 answer GET /openapi.json publishes."""
    document = await (await client.get("/openapi.json")).json()
    answer = document["paths"][path]["get"]["responses"]["200"]
    schema = answer["content"]["application/json"]["schema"]["properties"]["data"]["items"]
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def problems(validator: Draft202012Validator, record: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(record)]


def user_of_kind(kind: str, prefix: str) -> str:
    """A user whose job at Walmart is paid `kind` (hourly | salaried) with seed 1."""
    for number in range(60):
        user = f"{prefix}-{number}"
        if ProfileFactory(1).profile("acme", user, WALMART, "Walmart",
                                     date.today()).employee_type == kind:
            return user
    raise AssertionError(f"no {kind} user among 60")


# -- point 9: GET /linked-account/list/{identifier} --------------------------------------------

async def test_linked_account_list_serves_the_real_record(sandbox, receiver):
    """real-service-facts 8: "Legacy paths: `GET /linked-account/list/{identifier}` ({_id,
    valid, transactRequired, company, connector, lastSuccess})"."""
    account = await link(sandbox, "real-list-user")
    (record,) = await listed(sandbox, "real-list-user")

    assert set(record) == REAL_FIELDS
    assert record["_id"] == account["_id"]
    assert record["valid"] is True and record["transactRequired"] is False
    company = await call(sandbox, "GET", f"/company/{WALMART}")
    # real-api-surface: `company`: Company, the shape search answers.
    [searched] = [c for c in (await call(sandbox, "POST", "/company/search",
                                         json={"query": "Walmart"}))["data"] if c["_id"] == WALMART]
    assert record["company"] == searched
    assert FAILED_ONCE not in record
    assert record["connector"] == {"_id": company["data"]["connector"]["_id"], "name": "Walmart"}
    # The link was the first successful sync: when linked-account-connected went out.
    (connected,) = delivered(receiver, "linked-account-connected")
    assert connected["data"]["linkedAccount"] == record["_id"]
    assert record["lastSuccess"] == connected["eventTime"]
    assert REAL_DATE_TIME.match(record["lastSuccess"])

    validator = await published_item_schema(sandbox, "/linked-account/list/{identifier}")
    assert problems(validator, record) == []
    assert await listed(sandbox, "real-list-user") == [record]   # stable between reads
    await assert_events_valid(sandbox, receiver)


async def test_linked_account_list_follows_the_connection_and_the_last_success(sandbox, receiver):
    """real-service-facts 8: "`GET /linked-account/list/{identifier}` ({_id, valid,
    transactRequired, company, connector, lastSuccess})": `valid` is the connection,
    `transactRequired` says the user must go through the SDK again, `lastSuccess` moves only
    with a successful sync."""
    account = await link(sandbox, "flaky-real-user")
    (linked,) = await listed(sandbox, "flaky-real-user")

    await advance(sandbox, DAY)   # the daily push refresh
    (after_push,) = await listed(sandbox, "flaky-real-user")
    pushed = [e for e in delivered(receiver, "earn-user-data")
              if e["data"]["linkedAccount"] == account["_id"]]
    assert after_push["lastSuccess"] == pushed[-1]["eventTime"] > linked["lastSuccess"]

    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect",
               json={"reason": "credentials-changed"})
    (disconnected,) = delivered(receiver, "linked-account-disconnected")
    assert disconnected["data"]["linkedAccount"] == account["_id"]
    (record,) = await listed(sandbox, "flaky-real-user")
    assert record["valid"] is False and record["transactRequired"] is True
    assert record["lastSuccess"] == after_push["lastSuccess"]

    # No push refresh while disconnected, and a pull refresh fails: no new success.
    await advance(sandbox, 2 * DAY)
    task = await call(sandbox, "POST", "/task/create", json={"linkedAccount": account["_id"]})
    await run_until_idle(sandbox)
    failed = await call(sandbox, "GET", f"/task/{task['data']['id']}")
    assert failed["data"]["status"] == "failed"
    (record,) = await listed(sandbox, "flaky-real-user")
    assert record["lastSuccess"] == after_push["lastSuccess"]

    # Reconnected: valid again; the next refresh is the new last success.
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/reconnect")
    (record,) = await listed(sandbox, "flaky-real-user")
    assert record["valid"] is True and record["transactRequired"] is False
    await advance(sandbox, DAY)
    (record,) = await listed(sandbox, "flaky-real-user")
    refreshed = [e for e in delivered(receiver, "earn-user-data")
                 if e["data"]["linkedAccount"] == account["_id"]]
    assert len(refreshed) == 2
    assert record["lastSuccess"] == refreshed[-1]["eventTime"] > after_push["lastSuccess"]
    await assert_events_valid(sandbox, receiver)


async def test_linked_accounts_keep_their_fields_beside_the_real_ones(sandbox, receiver):
    """real-service-facts 8: "({_id, valid, transactRequired, company, connector,
    lastSuccess})": GET /linked-accounts carries these too, the same (one shape of
    `company`, issue 20 point 1), beside its own fields."""
    await link(sandbox, "both-forms")
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/"
               f"{(await listed(sandbox, 'both-forms'))[0]['_id']}/disconnect")
    (sandbox_record,) = (await call(sandbox, "GET", "/linked-accounts",
                                    params={"identifier": "both-forms"}))["data"]
    (real,) = await listed(sandbox, "both-forms")

    assert set(sandbox_record) == SANDBOX_FIELDS | REAL_FIELDS | {FAILED_ONCE}
    assert sandbox_record["companyId"] == WALMART == real["company"]["_id"]
    for name in REAL_FIELDS | {FAILED_ONCE}:
        assert sandbox_record[name] == real[name], name
    assert REAL_DATE_TIME.match(real[FAILED_ONCE])  # the disconnect
    assert sandbox_record["valid"] is sandbox_record["connected"] is False
    assert sandbox_record["lastSuccess"] == sandbox_record["lastRefreshedAt"]

    validator = await published_item_schema(sandbox, "/linked-accounts")
    assert problems(validator, sandbox_record) == []
    await assert_events_valid(sandbox, receiver)


async def test_linked_account_list_shows_the_company_as_it_is_now(sandbox, receiver):
    """real-service-facts 8: "company" in `{_id, valid, transactRequired, company, connector,
    lastSuccess}` is the company's `{_id, name, branding}`: renamed, it shows the new name;
    removed from the catalog, the linked account still names the company it was made at."""
    await link(sandbox, "renamed-employer")
    await call(sandbox, "PATCH", f"/_sandbox/companies/{WALMART}", json={"name": "Walmart Inc."})
    (record,) = await listed(sandbox, "renamed-employer")
    assert record["company"]["name"] == "Walmart Inc." == record["connector"]["name"]

    await call(sandbox, "DELETE", f"/_sandbox/companies/{WALMART}")
    (record,) = await listed(sandbox, "renamed-employer")
    assert record["company"]["_id"] == WALMART and record["company"]["name"] == "Walmart"
    assert [json.loads(r.body)["eventType"] for r in receiver.received(HOOKS)
            if r.headers["ce-type"].startswith("com.example.company-")] \
        == ["company-updated", "company-deleted"]
    await assert_events_valid(sandbox, receiver)


async def test_linked_account_list_auth_is_that_of_the_data_endpoints(sandbox, receiver):
    """real-service-facts 1: "Server calls use `x-api-key` + `x-api-secret`; end-user calls
    use `x-public-token`." and 8: "data endpoints keyed by identifier in the path": the list
    is a server call: a public token is refused (401, naming the keys)."""
    await link(sandbox, "owner")
    own = await public_token(sandbox, "owner")
    error = await error_of(sandbox, "GET", "/linked-account/list/owner", 401, headers=own)
    assert error["code"] == "api-keys-required" and "x-api-key" in error["message"]
    error = await error_of(sandbox, "GET", "/linked-account/list/nobody", 404)
    assert error["code"] == "user-not-found"
    response = await sandbox.get("/linked-account/list/owner")
    assert response.status == 401
    await call(sandbox, "POST", "/access-token", json={"identifier": "no-accounts-yet"})
    assert await listed(sandbox, "no-accounts-yet") == []
    await assert_events_valid(sandbox, receiver)


async def test_openapi_lists_the_real_linked_account_path(client):
    """real-service-facts 8: "Legacy paths: `GET /linked-account/list/{identifier}`": the
    published document lists it (and the paystub URL statements point at); the document's
    validity is tests/test_openapi.py's (validating it costs seconds: once is enough)."""
    document = await (await client.get("/openapi.json")).json()
    operation = document["paths"]["/linked-account/list/{identifier}"]["get"]
    assert [p["name"] for p in operation["parameters"]] == ["identifier"]
    item = operation["responses"]["200"]["content"]["application/json"]["schema"]["properties"][
        "data"]["items"]
    assert set(item["required"]) == REAL_FIELDS and item["additionalProperties"] is False
    assert "application/pdf" in document["paths"]["/paystub/{statementId}"]["get"]["responses"][
        "200"]["content"]


# -- point 10: dates and paystubs ---------------------------------------------------------------

async def test_data_records_write_dates_as_the_real_service(sandbox, receiver):
    """real-service-facts, "Record fields published": "income (... nextExpectedPayDate,
    currentPayPeriodStart/End ...); statements (date, payPeriodStart/EndDate, ... paystub,
    hours); ... employment (... startDate ...); identity (... dateOfBirth ...)" — written,
    as the real service writes dates, like `2020-06-30T12:00:00.000Z`; earn-user-data's
    `currentPayPeriodStart` too."""
    users = [user_of_kind("hourly", "dated"), user_of_kind("salaried", "dated")]
    for user in users:
        await link(sandbox, user)
    await advance(sandbox, DAY)   # a push refresh: earn-user-data
    for user in users:
        for resource in DATA_RESOURCES:
            records = (await call(sandbox, "GET", f"/{resource}/{user}"))["data"]
            validator = await published_item_schema(sandbox, f"/{resource}/{{identifier}}")
            for record in records:
                assert problems(validator, record) == [], (resource, record)
                for name in DATE_FIELDS.get(resource, ()):
                    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T12:00:00\.000Z", record[name]), \
                        (resource, name, record[name])
        (income,) = (await call(sandbox, "GET", f"/income/{user}"))["data"]
        (earn,) = [e for e in delivered(receiver, "earn-user-data")
                   if e["user"]["identifier"] == user]
        assert earn["data"]["currentPayPeriodStart"] == income["currentPayPeriodStart"]
        assert REAL_DATE_TIME.match(earn["data"]["currentPayPeriodStart"])

    # A triggered earn-user-data is written the same way.
    response = await sandbox.post("/_sandbox/events/trigger", headers=ACME,
                                  json={"eventType": "earn-user-data", "identifier": users[0]})
    assert response.status == 201, await response.text()
    triggered = delivered(receiver, "earn-user-data")[-1]
    assert REAL_DATE_TIME.match(triggered["data"]["currentPayPeriodStart"])
    await assert_events_valid(sandbox, receiver)


async def test_records_still_agree_with_each_other_in_the_real_date_form(sandbox, receiver):
    """real-service-facts, "Record fields published": "statements (date, payPeriodStart/EndDate,
    grossAmount, netAmount, paymentMethod, paystub, hours)" beside "income (income, ...)" and
    timesheets: a salaried statement pays the income of a period, an hourly one the hours of
    the period's timesheets at the hourly rate."""
    hourly, salaried = user_of_kind("hourly", "agree"), user_of_kind("salaried", "agree")
    for user in (hourly, salaried):
        await link(sandbox, user)
    (income,) = (await call(sandbox, "GET", f"/income/{salaried}"))["data"]
    statements = (await call(sandbox, "GET", f"/statements/{salaried}"))["data"]
    # `income` is yearly for a salary (incomeType): a statement pays a period's share.
    periods = {"weekly": 52, "biweekly": 26, "semimonthly": 24, "monthly": 12}[income["payCycle"]]
    assert income["incomeType"] == "yearly" and income["income"] == income["annualIncome"]
    assert statements and all(s["grossAmount"] == round(income["income"] / periods, 2)
                              for s in statements)

    await advance(sandbox, 35 * DAY)   # statements whose periods the timesheets cover
    (income,) = (await call(sandbox, "GET", f"/income/{hourly}"))["data"]
    raised = [e for e in delivered(receiver, "income-updated") if e["user"]["identifier"] == hourly]
    sheets = (await call(sandbox, "GET", f"/timesheets/{hourly}"))["data"]
    hours_on = {date.fromisoformat(t["date"][:10]): t["hours"] for t in sheets}
    covered = [s for s in (await call(sandbox, "GET", f"/statements/{hourly}"))["data"]
               if date.fromisoformat(s["payPeriodStartDate"][:10]) >= min(hours_on)]
    assert covered, "no statement period lies within the timesheets: advance further"
    for statement in covered:
        first = date.fromisoformat(statement["payPeriodStartDate"][:10])
        last = date.fromisoformat(statement["payPeriodEndDate"][:10])
        days = [first + timedelta(days=n) for n in range((last - first).days + 1)]
        worked = round(sum(hours_on.get(d, 0) for d in days), 2)
        assert statement["hours"] == worked, statement
        if not raised:   # a raise changes the rate of later statements only
            assert statement["grossAmount"] == round(worked * income["hourlyIncome"], 2)
    now = await today(sandbox)
    assert all(date.fromisoformat(s["date"][:10]) <= now
               for s in (await call(sandbox, "GET", f"/statements/{hourly}"))["data"])
    await assert_events_valid(sandbox, receiver)


async def test_statement_paystub_url_serves_the_pay_statement(sandbox, receiver):
    """real-service-facts, "Record fields published": "statements (date, payPeriodStart/EndDate,
    grossAmount, netAmount, paymentMethod, paystub, hours)": `paystub` is a URL that works,
    with the credentials of the data endpoints."""
    await link(sandbox, "paid-user")
    await link(sandbox, "other-paid-user")
    statements = (await call(sandbox, "GET", "/statements/paid-user"))["data"]
    assert statements
    origin = str(sandbox.make_url("/").origin())
    statement = statements[-1]
    url = URL(statement["paystub"])
    assert str(url.origin()) == origin and url.path == f"/paystub/{statement['_id']}"

    # Fetched at the absolute URL, as a customer's server would, with the API keys.
    for headers in (ACME,):
        async with sandbox.session.get(statement["paystub"], headers=headers) as response:
            assert response.status == 200
            assert response.content_type == "application/pdf"
            pdf = await response.read()
        assert pdf.startswith(b"%PDF-1.4") and pdf.rstrip().endswith(b"%%EOF")
        assert f"Net pay: ${statement['netAmount']:,.2f}".encode() in pdf
        assert f"Gross pay: ${statement['grossAmount']:,.2f}".encode() in pdf
        assert b"Employer: Walmart" in pdf
        assert f"Pay date: {statement['date'][:10]}".encode() in pdf

    other = await public_token(sandbox, "other-paid-user")
    error = await error_of(sandbox, "GET", url.path, 401, headers=other)
    assert error["code"] == "api-keys-required"
    error = await error_of(sandbox, "GET", "/paystub/6410ffffffffffffffffffff", 404)
    assert error["code"] == "statement-not-found"
    assert (await sandbox.get(url.path)).status == 401

    # Personal data deleted: the statement and its paystub are gone.
    await call(sandbox, "POST", "/_sandbox/users/paid-user/delete-pii")
    error = await error_of(sandbox, "GET", url.path, 404)
    assert error["code"] == "statement-not-found"
    (deleted,) = delivered(receiver, "pii-data-deleted")
    assert deleted["user"]["identifier"] == "paid-user"
    await assert_events_valid(sandbox, receiver)
