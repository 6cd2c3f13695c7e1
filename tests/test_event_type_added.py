"""A new event type is its struct, declared by `@event(...)` (domain/event_types.py):
POST /_sandbox/events/trigger makes realistic data for it from the struct alone (the records
its fields name resolve, the rest is made from their types), with no code of its own. No
such type is needed today, so the test declares one before the app is imported, in a
process of its own, and drives the real app there."""

from __future__ import annotations

from calls import app_result

SETUP = '''
from jsonschema import Draft202012Validator
from payroll_sandbox.domain.webhooks import event_types as types
from payroll_sandbox.domain.shapes import choice, of

@types.event("payslip-ready")
class PayslipReady(types.Linked, kw_only=True):
    """A pay slip the employer published."""

    records: of(list[types.Id], "The statements it covers.")
    pages: of(int, ge=1, le=4)
    channel: choice("email", "portal")
'''

CALLS = '''
seen["trigger"] = await call("POST", "/_sandbox/events/trigger",
                             {"eventType": "payslip-ready", "identifier": "u1"})
body = seen["trigger"][1]["data"]["body"]
schema = (await call("GET", "/_sandbox/schemas/events/payslip-ready"))[1]
seen["errors"] = [e.message for e in Draft202012Validator(schema).iter_errors(body)]
seen["accounts"] = [a["_id"] for a in
                    (await call("GET", "/linked-accounts?identifier=u1"))[1]["data"]]
seen["statements"] = [s["_id"] for s in
                      (await call("GET", "/statements?identifier=u1"))[1]["data"]]
seen["overridden"] = await call("POST", "/_sandbox/events/trigger", {
    "eventType": "payslip-ready", "identifier": "u1", "data": {"pages": 9}})
seen["body"] = body
'''


def test_a_new_event_type_triggers_from_its_struct_alone():
    seen = app_result(SETUP, CALLS, settings='clock="manual"')
    assert seen["trigger"][0] == 201, seen["trigger"]
    assert seen["errors"] == []  # the body matches the schema derived from the same struct
    data = seen["body"]["data"]
    # The fields that name records name the user's own: its linked account (made now, as a
    # trigger makes one for a user who has none) and statements it holds.
    assert data["linkedAccount"] in seen["accounts"] and len(seen["accounts"]) == 1
    assert data["records"] and set(data["records"]) <= set(seen["statements"])
    # The others are made from their types: within their bounds, one of their choices.
    assert 1 <= data["pages"] <= 4 and data["channel"] in ("email", "portal")
    assert "task" not in data  # optional, and no record names it
    # An override is checked against the same schema: out of range, a 422 at its path.
    status, refused = seen["overridden"]
    assert status == 422
    assert [d["path"] for d in refused["error"]["details"]] == ["$.body.data.pages"]
