"""Issue 33, point 12 (small forms from a fidelity trial): one date-time form everywhere a
date-time appears, plain dates only where a field is a calendar day, and
`authenticationMethod` only where the spec lists it.

Real HTTP to the real app (conftest's `sandbox`: a manual clock, every event delivered to a
real receiver). A tenant is given a bit of everything that writes a date (user-link and
pay-link tasks, a card expiry sent in another ISO 8601 form, linked accounts and their
data, a disconnect, a processor link run to its results, stored cards), then every main read
and every webhook that reached the receiver is searched for strings that start like a date:
each must be in its one form. Sources: docs/spec/service-spec.md ("spec"),
the design notes (DESIGN.md, Public API: "Dates in records are date-times in the real service's form
(`2020-06-30T12:00:00.000Z`)"), docs/api.md (Dates and times).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from calls import call, run_until_idle
from conftest import ACME, HOOKS, REPO, WALMART
from payroll_sandbox.app import load
from payroll_sandbox.clock import written_time
from payroll_sandbox.load.fixtures import ConfigError
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.schemas.scenarios import STEP
from payroll_sandbox.settings import Settings
from payroll_sandbox.edge.state_file import state_document

NETFLIX = "6410a0000000000000000060"  # a merchant: pay-link (switch, present)
AMAZON = "6410a0000000000000000002"   # an employer whose connector has true-auth

# The forms, written here rather than imported, so that a change of the code's form fails.
DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
CALENDAR_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
LIKE_A_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
# Where a calendar day is right (docs/api.md, Dates and times): processor-link results, and
# in a snapshot the stored person of a linked account and a link's transactions, as the
# aggregator writes them. Paths with list indexes written `[]`.
CALENDAR_DAY_PATHS = re.compile(
    r"(\.lastDepositDate|\.lastDate|\.nextDate"
    r"|^\$\.data\.linkedAccounts\[\]\.profile\.(dateOfBirth|startDate)"
    r"|^\$\.data\.processorLinks\[\]\.transactions\[\]\.date)$")
# The journal (GET /_sandbox/requests, a snapshot's) keeps each request as it was sent.
AS_SENT = re.compile(r"^\$\.data(\.journal)?\[\]\.(body|query)(\.|\[|$)")

SCOPES: dict[str, str] = yaml.safe_load(
    (REPO / "fixtures" / "service.yaml").read_text(encoding="utf-8"))["products"]
SPEC_METHODS = {"true-auth", "smart-auth"}  # spec: Task, authenticationMethod

# A card expiry given in another ISO 8601 form, and how every answer and event writes it.
EXPIRY_SENT, EXPIRY_WRITTEN = "2028-03-31T00:00:00+02:00", "2028-03-30T22:00:00.000Z"
CARD = {"type": "card", "_id": "card-date-forms", "title": "Visa 4242", "lastFour": "4242",
        "expiry": EXPIRY_SENT}


# -- finding the dates ---------------------------------------------------------------------------

def dates_in(value: Any, path: str = "$") -> Iterator[tuple[str, str]]:
    """(path, text) of every string in `value` that starts like a date, indexes as `[]`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from dates_in(item, f"{path}.{key}")
    elif isinstance(value, list):
        for item in value:
            yield from dates_in(item, f"{path}[]")
    elif isinstance(value, str) and LIKE_A_DATE.match(value):
        yield path, value


class Forms:
    """Every date found, checked against the form its field has; what was seen, by field."""

    def __init__(self) -> None:
        self.wrong: list[str] = []
        self.date_times: set[str] = set()      # the field names seen holding a date-time
        self.calendar_days: set[str] = set()   # ... and a calendar day

    def check(self, what: str, value: Any) -> None:
        for path, text in dates_in(value):
            if AS_SENT.match(path):
                continue
            name = path.rsplit(".", 1)[-1].removesuffix("[]")
            if CALENDAR_DAY_PATHS.search(path):
                form, seen = CALENDAR_DAY, self.calendar_days
            else:
                form, seen = DATE_TIME, self.date_times
            if form.match(text):
                seen.add(name)
            else:
                self.wrong.append(f"{what}: {path} = {text!r}")


# -- a tenant with a bit of everything that writes a date ----------------------------------------

async def task(client, **body: Any) -> str:
    created = await call(client, "POST", "/task/create", json=body)
    return created["data"]["id"]


async def world(client) -> dict[str, Any]:
    """Tasks of both scopes (one with a card in another form, one whose scenario names the
    card), linked accounts with their data (one disconnected) and an earn-user-data event,
    stored cards and a processor link run to its results. The tasks' ids."""
    made = {
        "deposit": await task(client, identifier="dates-user", company=WALMART,
                              product="deposit", scenario="happy-path"),
        "verify": await task(client, identifier="dates-sso", company=AMAZON, product="verify",
                             scenario="happy-path"),
        "switch": await task(client, identifier="dates-payer", company=NETFLIX,
                             product="switch", scenario="pay-link-switch", paymentMethod=CARD),
        "declined": await task(client, identifier="dates-declined", company=NETFLIX,
                               product="switch", scenario="payment-method-declined"),
    }
    await call(client, "PUT", "/user", json={"identifier": "dates-payer", "data": {"cards": [
        {"_id": "stored-card", "brand": "Visa", "lastFour": "4242", "expiry": EXPIRY_SENT}]}})
    token = await call(client, "POST", "/_sandbox/aggregator/processor-token", status=201,
                       json={"identifier": "dates-bank", "daysRequested": 180})
    await call(client, "POST", "/aggregator/processor-links", status=202,
               headers={**ACME, "user-identifier": "dates-bank"},
               json={"processorToken": token["data"]["processorToken"]})
    await run_until_idle(client)
    (account,) = (await call(client, "GET", "/linked-accounts/dates-sso"))["data"]
    await call(client, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect", json={})
    # A push refresh's earnings (this tenant has no refresh cadence: the control plane's).
    await call(client, "POST", "/_sandbox/events/trigger", status=201,
               json={"eventType": "earn-user-data", "identifier": "dates-user"})
    await run_until_idle(client)
    return made


async def reads(client, made: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(what, answer) of the main read operations on the world's tenant."""
    get = {}
    for name, task_id in made.items():
        for path in (f"/task/{task_id}", f"/task/{task_id}/details", f"/task/{task_id}/status",
                     f"/task/{task_id}/file/direct-deposit-form/generate-url"):
            if path.endswith("generate-url") and name != "deposit":
                continue
            get[path] = await call(client, "GET", path)
    for identifier in ("dates-user", "dates-sso"):
        get[f"/linked-account/list/{identifier}"] = await call(
            client, "GET", f"/linked-account/list/{identifier}")
        for kind in ("linked-accounts", "income", "statements", "deposit-accounts", "employment",
                     "taxes", "identity", "timesheets"):
            get[f"/{kind}/{identifier}"] = await call(client, "GET", f"/{kind}/{identifier}")
        get[f"/user/{identifier}/tasks"] = await call(client, "GET",
                                                      f"/user/{identifier}/tasks")
    bank = {**ACME, "user-identifier": "dates-bank"}
    for path in ("/aggregator/employer-matches", "/aggregator/recurring-transactions"):
        get[path] = await call(client, "GET", path, headers=bank)
    get["POST /access-token"] = await call(client, "POST", "/access-token",
                                           json={"identifier": "dates-payer"})
    payer = {"x-public-token": get["POST /access-token"]["data"]["publicToken"]}
    get["/pay-link/accounts"] = await call(client, "GET", "/pay-link/accounts", headers=payer)
    get["/_sandbox/users/dates-payer/payment-methods"] = await call(
        client, "GET", "/_sandbox/users/dates-payer/payment-methods")
    get["POST /secrets"] = await call(client, "POST", "/secrets", json={"name": "dates"})
    for path in ("/_sandbox/clock", "/_sandbox/tasks", "/_sandbox/events?limit=1000",
                 "/_sandbox/requests?limit=1000", "/_sandbox/snapshot"):
        get[path] = await call(client, "GET", path)
    return get


# -- the tests -----------------------------------------------------------------------------------

async def test_every_date_in_the_main_reads_is_in_its_one_form(sandbox):
    """DESIGN (Public API): dates are date-times in the real service's form; a field that is
    a calendar day and nothing more is `YYYY-MM-DD` (docs/api.md lists which)."""
    made = await world(sandbox)
    forms = Forms()
    for what, answer in (await reads(sandbox, made)).items():
        forms.check(what, answer)
    assert forms.wrong == []
    # Not vacuous: every kind of date field was there to check.
    assert {"createdAt", "at", "expiresAt", "expiry", "lastSuccess", "lastFailure",
            "lastRefreshedAt", "nextExpectedPayDate", "currentPayPeriodStart",
            "currentPayPeriodEnd", "date", "payPeriodStartDate", "payPeriodEndDate",
            "startDate", "dateOfBirth", "eventTime", "ce-time", "time", "wallTime", "now",
            "takenAt", "updatedAt"} <= forms.date_times
    assert {"lastDepositDate", "lastDate", "nextDate", "dateOfBirth", "startDate",
            "date"} <= forms.calendar_days


async def test_every_webhook_writes_its_dates_in_the_one_form(sandbox, receiver):
    """Spec (Events): `ce-time` an ISO 8601 timestamp, `eventTime` ISO 8601 UTC; one form for
    both, the same string, and for every date-time inside the body."""
    await world(sandbox)
    received = receiver.received(HOOKS)
    assert len(received) > 10
    forms = Forms()
    for request in received:
        body = json.loads(request.body)
        forms.check(body["eventType"], body)
        assert request.headers["ce-time"] == body["eventTime"], body["eventType"]
        assert DATE_TIME.match(request.headers["ce-time"])
    assert forms.wrong == []
    assert {"eventTime", "expiry", "currentPayPeriodStart"} <= forms.date_times
    expiries = {json.loads(r.body)["data"].get("paymentMethod", {}).get("expiry")
                for r in received} - {None}
    # The card sent at +02:00, and the scenario file's card (payment-method-declined).
    assert expiries == {EXPIRY_WRITTEN, "2026-12-31T00:00:00.000Z"}


async def test_a_card_expiry_in_any_iso_form_is_written_in_the_one_form(sandbox):
    """What a caller sends may be any ISO 8601 date-time with a zone; answers write it back
    in the one form (docs/api.md, Dates and times)."""
    made = await world(sandbox)
    switch = (await call(sandbox, "GET", f"/task/{made['switch']}"))["data"]
    assert switch["paymentMethod"]["expiry"] == EXPIRY_WRITTEN
    stored = (await call(sandbox, "GET", "/_sandbox/users/dates-payer/payment-methods"))["data"]
    assert [card["expiry"] for card in stored["cards"]] == [EXPIRY_WRITTEN]


async def test_a_state_file_says_when_it_was_saved_in_the_one_form(sandbox):
    """`--state-file`'s `savedAt` (the wall clock) is a date-time like every other."""
    document = state_document(sandbox.server.app[SANDBOX])
    assert DATE_TIME.match(document["savedAt"]), document["savedAt"]


@pytest.mark.parametrize("given, written", [
    ("2028-03-31T00:00:00Z", "2028-03-31T00:00:00.000Z"),
    ("2028-03-31t00:00:00z", "2028-03-31T00:00:00.000Z"),
    ("2028-03-31T00:00:00.5+02:00", "2028-03-30T22:00:00.500Z"),
    ("2028-03-31T00:00:00.123456789Z", "2028-03-31T00:00:00.123Z"),
    ("2028-03-31T23:59:60Z", "2028-03-31T23:59:59.999Z"),   # a leap second
    ("2028-03-31 08:30:00-0500", "2028-03-31T13:30:00.000Z"),
    ("2028-03-31T00:00:00", "2028-03-31T00:00:00.000Z"),    # no zone: UTC
    ("2028-03-31T00:00:00.000Z", "2028-03-31T00:00:00.000Z"),
    ("0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00+01:00"),  # before year 1 in UTC: kept
    ("not a time", "not a time"),
])
def test_written_time_puts_an_iso_date_time_in_the_one_form(given, written):
    assert written_time(given) == written


async def test_authentication_method_only_on_pay_link_tasks(sandbox, receiver):
    """Spec (Task): `authenticationMethod`, "For pay-link Tasks: `true-auth`, `smart-auth`";
    (Task events) "Every task event carries ... `authenticationMethod`". A user-link task has
    no value the spec lists: its record and every one of its events carry null."""
    made = await world(sandbox)
    for name, task_id in made.items():
        record = (await call(sandbox, "GET", f"/task/{task_id}"))["data"]
        details = (await call(sandbox, "GET", f"/task/{task_id}/details"))["data"]
        assert details["authentication"] == record["authenticationMethod"], name
        if SCOPES[record["product"]] == "pay-link":
            assert record["authenticationMethod"] in SPEC_METHODS, name
        else:
            assert record["authenticationMethod"] is None, name
    events = [json.loads(r.body) for r in receiver.received(HOOKS)]
    task_events = [e for e in events if "taskWorkflow" in e]
    assert {e["product"] for e in task_events} == {"deposit", "verify", "switch"}
    for event in task_events:
        assert "authenticationMethod" in event, event["eventType"]
        method = event["authenticationMethod"]
        if SCOPES[event["product"]] == "pay-link":
            assert method in SPEC_METHODS, event
        else:
            assert method is None, event
    # No other event names one.
    assert all("authenticationMethod" not in e for e in events if "taskWorkflow" not in e)


async def test_scenarios_set_authentication_method_only_for_pay_link_products(sandbox):
    """The scenario files, their schema and the spec's enum agree: a step's
    authenticationMethod has one of the spec's values, in a scenario that fits pay-link
    products only."""
    scenarios = (await call(sandbox, "GET", "/_sandbox/scenarios"))["data"]
    setting = [s for s in scenarios
               if any("authenticationMethod" in step for step in s["steps"])]
    assert setting  # the bundled pay-link scenarios set it
    for scenario in setting:
        assert scenario["products"], scenario["name"]
        assert {SCOPES[p] for p in scenario["products"]} == {"pay-link"}, scenario["name"]
        assert {step["authenticationMethod"] for step in scenario["steps"]
                if "authenticationMethod" in step} <= SPEC_METHODS
    # The scenario files' schema (what loads them) allows the spec's values and no other.
    assert set(STEP["properties"]["authenticationMethod"]["enum"]) == SPEC_METHODS


def test_a_scenario_setting_authentication_method_for_a_user_link_product_is_refused(tmp_path):
    (tmp_path / "user-link-method.yaml").write_text(
        "description: a user-link scenario that sets a pay-link field\n"
        "products: [deposit, switch]\n"
        "steps:\n  - after: 1\n    status: processing\n    authenticationMethod: true-auth\n"
        "  - after: 1\n    status: completed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load(Settings(port=0, clock="manual", scenarios=tmp_path))
    assert caught.value.path == "$.steps[0].authenticationMethod"
    assert "only a pay-link task has" in caught.value.message
    assert "deposit" in caught.value.message


# -- the documents say so ------------------------------------------------------------------------

def date_schemas(schema: Any, path: str = "$") -> Iterator[tuple[str, dict]]:
    """(path, schema) of every `format: date-time` or `format: date` schema inside."""
    if isinstance(schema, dict):
        if schema.get("format") in ("date-time", "date"):
            yield path, schema
        for key, value in schema.items():
            yield from date_schemas(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for number, value in enumerate(schema):
            yield from date_schemas(value, f"{path}[{number}]")


async def test_every_date_field_of_the_answers_and_events_documents_its_form(sandbox):
    """docs/api.md (Dates and times): each date field's schema names its form in its
    description and holds it by a pattern; requests stay as loose as ISO 8601."""
    document = await call(sandbox, "GET", "/openapi.json")
    answers = [(f"{method.upper()} {path} {status}", response)
               for path, item in document["paths"].items()
               for method, operation in item.items() if isinstance(operation, dict)
               for status, response in operation.get("responses", {}).items()]
    webhooks = [(name, item["post"]) for name, item in document.get("webhooks", {}).items()]
    found = [(f"{where} {path}", schema)
             for where, part in [*answers, ("components", document["components"]), *webhooks]
             for path, schema in date_schemas(part)
             if "requestBody.content" not in path or where in dict(webhooks)]
    # Left out: the aggregator's own API (its conventions), and the snapshot (a bundle's
    # too), whose schema is also what a restore takes (as loose as older versions wrote).
    found = [f for f in found if "/aggregator-api/" not in f[0]
             and not f[0].startswith("GET /_sandbox/snapshot ")
             and not (f[0].startswith("GET /_sandbox/bundle ")
                      and ".properties.data.properties.snapshot." in f[0])]
    assert len(found) > 30
    wrong = []
    for where, schema in found:
        if schema["format"] == "date-time":
            ok = (schema.get("pattern") == DATE_TIME.pattern
                  and "2020-06-30T12:00:00.000Z" in schema.get("description", ""))
        else:
            ok = (schema.get("pattern") == CALENDAR_DAY.pattern
                  and "YYYY-MM-DD" in schema.get("description", ""))
        if not ok:
            wrong.append(where)
    assert wrong == []
