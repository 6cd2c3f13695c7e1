"""A task field the sandbox computes is one entry of COMPUTED_FIELDS (domain/states.py): the
Task reads it as an attribute, GET /task/{taskId} (and the real Task's details) show it,
task-status-updated carries it, the document publishes it in both, and a restored snapshot
shows it again (computed from what the snapshot keeps). No such field is needed today, so
the test adds one before the app is imported, in a process of its own, and drives the real
app there."""

from __future__ import annotations

from calls import app_result

SETUP = '''
from payroll_sandbox.domain.tasks import states

def duration(task):
    if task.status not in states.FINAL:
        return None
    return round(task.history[-1].at - task.created_at, 3)

states.COMPUTED_FIELDS["durationSeconds"] = states.TaskField(
    {"type": "number", "minimum": 0}, "Seconds from its creation to its last transition.",
    compute=duration)
'''

CALLS = '''
created = (await call("POST", "/task/create", {
    "identifier": "u1", "company": WALMART, "product": "deposit"}))[1]["data"]
task_id = created["id"]
seen["running"] = (await call("GET", f"/task/{task_id}"))[1]["data"]
await call("POST", "/_sandbox/clock/run-until-idle")
seen["record"] = (await call("GET", f"/task/{task_id}"))[1]["data"]
seen["details"] = (await call("GET", f"/task/{task_id}/details"))[1]["data"]
events = (await call("GET", "/_sandbox/events?task=" + task_id))[1]["data"]
seen["events"] = {e["eventType"]: (e["body"].get("data") or {}).get("durationSeconds")
                  for e in events}
snapshot = (await call("GET", "/_sandbox/snapshot"))[1]["data"]
await call("POST", "/_sandbox/reset")
seen["restore"] = (await call("POST", "/_sandbox/snapshot", snapshot))[0]
seen["restored"] = (await call("GET", f"/task/{task_id}"))[1]["data"]
document = await (await client.get("/openapi.json")).json()
seen["documented"] = [json.dumps(document["paths"][path]["get"]["responses"]["200"])
                      for path in ("/task/{taskId}", "/task/{taskId}/details")]
seen["event_documented"] = (await call(
    "GET", "/_sandbox/schemas/events/task-status-updated"))[1]
'''


def test_a_computed_field_is_one_entry_of_the_table():
    seen = app_result(SETUP, CALLS, settings='clock="manual"')
    record = seen["record"]
    assert "durationSeconds" not in seen["running"]  # not known while the task runs
    assert record["status"] in ("completed", "failed")
    assert record["durationSeconds"] > 0
    assert seen["details"]["durationSeconds"] == record["durationSeconds"]
    assert seen["events"]["task-status-updated"] == record["durationSeconds"]
    assert seen["restore"] == 200
    assert seen["restored"]["durationSeconds"] == record["durationSeconds"]
    described = ('"durationSeconds": {"type": "number", "minimum": 0, "description": '
                 '"Seconds from its creation to its last transition."}')
    assert all(described in answer for answer in seen["documented"])
    assert "Seconds from its creation to its last transition." in str(seen["event_documented"])
