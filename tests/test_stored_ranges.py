"""A record's numbers keep the ranges declared on its fields (issue 44: domain/stored.py
`Time`, `Count`, `Amount` in the record structs' annotations, no longer guessed from a
field's name). POST /_sandbox/snapshot refuses a value outside them with its JSON path and
changes nothing; every number a record stores has a declared range."""

from __future__ import annotations

import msgspec
import pytest
from conftest import ACME, WALMART

from payroll_sandbox.app import create_app  # noqa: F401  (every part, so every record)
from payroll_sandbox.domain.stored import MAX_TIME, Stored


async def call(client, method: str, path: str, **kwargs) -> dict:
    response = await client.request(method, path, headers=ACME, **kwargs)
    assert response.status == 200, (method, path, response.status, await response.text())
    return (await response.json())["data"]


def without_journal(document: dict) -> dict:
    """The document but for the journal, which records the requests made after it."""
    counters = {k: v for k, v in document["counters"].items() if not k.startswith("journal")}
    return {**{k: v for k, v in document.items() if k != "journal"}, "counters": counters}


def replaced(document: dict, section: str, path: tuple[str, ...], value) -> dict:
    """The document with the first record of `section` holding `value` at `path`."""
    record = node = {**document[section][0]}
    for key in path[:-1]:
        node[key] = {**node[key]}
        node = node[key]
    node[path[-1]] = value
    return {**document, section: [record, *document[section][1:]]}


# (section, the field's path in its first record, a value outside the field's range)
OUT_OF_RANGE = [
    ("tasks", ("createdAt",), MAX_TIME + 1),                   # Time: within the clock's
    ("tokens", ("expiresAt",), -1),                            # Time: not before the epoch
    ("linkedAccounts", ("refreshes",), -1),                    # Count
    ("linkedAccounts", ("profile", "annualIncome"), -0.5),     # Amount, in a nested record
    ("linkedAccounts", ("profile", "weeklyHours"), 2**53),     # Count: JavaScript-safe
    # A time whose name says no time: guessed an amount (up to 1e12, the year 33658),
    # accepted, and the account's reads failed writing it as a date-time.
    ("linkedAccounts", ("lastFailure",), 1e12),
]


@pytest.mark.parametrize(("section", "path", "value"), OUT_OF_RANGE,
                         ids=[".".join((s, *p)) for s, p, _ in OUT_OF_RANGE])
async def test_a_restore_refuses_a_number_outside_its_fields_declared_range(
        make_client, section, path, value):
    client = await make_client(clock="manual")
    await call(client, "POST", "/task/create",
               json={"identifier": "ranged", "company": WALMART, "product": "deposit"})
    await call(client, "POST", "/_sandbox/clock/run-until-idle")  # the task links an account
    document = await call(client, "GET", "/_sandbox/snapshot")
    response = await client.post("/_sandbox/snapshot", headers=ACME,
                                 json=replaced(document, section, path, value))
    body = await response.json()
    assert response.status == 422, body
    assert body["error"]["code"] == "invalid-snapshot"
    [detail] = body["error"]["details"]
    assert detail["path"] == f"$.{section}[0]." + ".".join(path), detail
    assert ("minimum" in detail["message"]) if value < 0 else ("maximum" in detail["message"])
    assert without_journal(await call(client, "GET", "/_sandbox/snapshot")) == \
        without_journal(document)


def _records(cls: type = Stored) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_records(sub))]


def _numbers(node: msgspec.inspect.Type) -> list[msgspec.inspect.Type]:
    """The int and float types a field's type holds (in a union, a list, ...)."""
    if isinstance(node, (msgspec.inspect.IntType, msgspec.inspect.FloatType)):
        return [node]
    inner = [getattr(node, attr) for attr in ("item_type", "key_type", "value_type")
             if isinstance(getattr(node, attr, None), msgspec.inspect.Type)]
    return [n for sub in (*inner, *getattr(node, "types", ())) for n in _numbers(sub)]


def test_every_number_a_record_stores_has_a_declared_range():
    """Nothing guesses a range any more: a record field's int or float says its bounds."""
    records = _records()
    assert {"Task", "LinkedAccount", "Profile", "Delivery", "Attempt", "Item"} <= {
        r.__name__ for r in records}
    unranged = [f"{record.__name__}.{field.name}" for record in records
                for field in msgspec.inspect.type_info(record).fields
                for number in _numbers(field.type)
                if (number.ge, number.gt) == (None, None) or (number.le, number.lt) == (None, None)]
    assert unranged == []
