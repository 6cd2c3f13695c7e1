"""A task field a create request gives is one entry of REQUEST_FIELDS (domain/states.py):
the request schema takes it (at the top or per task), GET /task/{taskId} shows it, a
snapshot keeps it and every event of the task carries it. No such field is needed today,
so each test adds one before the app is imported, in a process of its own, and drives the
real app there."""

from __future__ import annotations

from calls import app_result

SETUP = '''
from payroll_sandbox.domain.tasks import states
states.REQUEST_FIELDS["costCenter"] = states.TaskField(
    {"type": "string", "minLength": 1, "maxLength": 20}, "The customer's cost center.")
'''

CALLS = '''
seen["one"] = await call("POST", "/task/create", {
    "identifier": "u1", "company": WALMART, "product": "deposit",
    "costCenter": "CC-7"})
seen["several"] = await call("POST", "/task/create", {
    "identifier": "u2", "company": WALMART, "costCenter": "TOP",
    "tasks": [{"product": "deposit"}, {"product": "verify", "costCenter": "OWN"}]})
seen["wrong"] = await call("POST", "/task/create", {
    "identifier": "u3", "company": WALMART, "product": "deposit", "costCenter": ""})
task_id = seen["one"][1]["data"]["id"]
seen["record"] = await call("GET", f"/task/{task_id}")
seen["several_records"] = [
    (await call("GET", f"/task/{t['id']}"))[1]["data"].get("costCenter")
    for t in seen["several"][1]["data"]["tasks"]]
await call("POST", "/_sandbox/clock/run-until-idle")
events = (await call("GET", "/_sandbox/events?task=" + task_id))[1]["data"]
seen["events"] = [e["body"].get("costCenter") for e in events]
# A task held back by a `finish` option keeps its field until it starts.
gated = (await call("POST", "/task/create", {
    "identifier": "u4", "company": WALMART, "tasks": [
        {"product": "deposit", "onFail": "finish"},
        {"product": "verify", "costCenter": "LATER"}]}))[1]["data"]
snapshot = (await call("GET", "/_sandbox/snapshot"))[1]["data"]
seen["stored"] = [t.get("fields") for t in snapshot["tasks"]]
await call("POST", "/_sandbox/reset")
seen["restore"] = (await call("POST", "/_sandbox/snapshot", snapshot))[0]
seen["restored"] = (await call("GET", f"/task/{task_id}"))[1]["data"].get("costCenter")
await call("POST", "/_sandbox/clock/run-until-idle")
workflow = (await call("GET", "/_sandbox/tasks?user=u4"))[1]["data"]
seen["held"] = [t.get("costCenter") for t in workflow]
seen["gated"] = len(gated["tasks"])
document = await (await client.get("/openapi.json")).json()
create = document["paths"]["/task/create"]["post"]["requestBody"]["content"]
seen["documented"] = create["application/json"]["schema"]["properties"]["costCenter"]
'''


def test_a_request_field_is_one_entry_of_the_table():
    seen = app_result(SETUP, CALLS)
    assert seen["one"][0] == 200
    assert seen["record"][1]["data"]["costCenter"] == "CC-7"
    # A task of `tasks` takes the top-level value unless it gives its own.
    assert seen["several_records"] == ["TOP", "OWN"]
    # Checked with the request, by its schema: the field at fault is named.
    status, body = seen["wrong"]
    assert status == 422
    assert [d["path"] for d in body["error"]["details"]] == ["$.costCenter"]
    assert seen["events"] and set(seen["events"]) == {"CC-7"}
    assert sorted(filter(None, (f and f.get("costCenter") for f in seen["stored"]))) == [
        "CC-7", "OWN", "TOP"]
    assert seen["restore"] == 200 and seen["restored"] == "CC-7"
    # Held back when the snapshot was taken (one task started), started after the restore.
    assert seen["gated"] == 1 and sorted(seen["held"], key=str) == ["LATER", None]
    assert seen["documented"] == {"type": "string", "minLength": 1, "maxLength": 20,
                                  "description": "The customer's cost center."}
