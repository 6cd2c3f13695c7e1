"""The task fields a scenario step sets and the task's events carry, and those a create
request gives, declared once.

Each entry here is all it takes (beside the Task attribute of the same name in tasks.py)
for such a field: the scenario files' schema lets a step set it (schemas/scenarios.py),
the engine copies it onto the task (Tasks.apply_step), GET /task/{taskId} shows it and its
schema says so (Task.record, schemas/api.py), task-status-updated carries it and its
schema says so (Tasks._move, domain/event_types.py), and snapshots keep it (the Task record).
"""

from __future__ import annotations

from typing import Any

import msgspec

from .states import FLOWS


class StepField(msgspec.Struct, frozen=True):
    """A task field scenario steps may set and task events carry: its schema and when it is sent."""

    schema: dict[str, Any]
    # The resolving event carries it only when the task failed (else on every outcome).
    on_failure_only: bool = False
    description: str = ""


MANAGED_BY = {"type": "object", "additionalProperties": False, "required": ["companyId", "name"],
              "properties": {"companyId": {"type": "string"}, "name": {"type": "string"}}}

# Data only the app holds (real-service-facts 14: a data request {taskId, fields}).
DATA_REQUEST = {"type": "object", "additionalProperties": False, "required": ["fields"],
                "properties": {"fields": {"type": "array", "minItems": 1, "uniqueItems": True,
                                          "items": {"enum": ["card", "bankAccount"]}}}}

STEP_FIELDS: dict[str, StepField] = {
    "flow": StepField({"enum": list(FLOWS)},
                      description="The hosted flow's kind of work (spec: Task, flow)."),
    "meta": StepField({"type": "object", "additionalProperties": False,
                       "properties": {"managedBy": MANAGED_BY, "dataRequest": DATA_REQUEST}},
                      on_failure_only=True,
                      description="Why a task failed, e.g. the partner that manages the "
                                  "account (spec: task-status-updated, meta); `dataRequest`: "
                                  "data the task needs from the app (the SDK's onDataRequest)."),
}


class RequestField(msgspec.Struct, frozen=True):
    """A task field a create request gives (at the top for every task, or in one of
    `tasks`), which GET /task/{taskId} shows, snapshots keep and every event of the task
    carries, as it was given: its schema (checked with the request) and what it is."""

    schema: dict[str, Any]
    description: str = ""


# Each entry is all it takes for such a field (tasks.py carries `Task.fields` through;
# the request, task and event schemas add these): none is needed today.
REQUEST_FIELDS: dict[str, RequestField] = {}


def request_field_schemas() -> dict[str, dict[str, Any]]:
    """Each request field's JSON Schema, with its description."""
    return {name: {**field.schema, "description": field.description} if field.description
            else field.schema for name, field in REQUEST_FIELDS.items()}


def given_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The request fields a body (or one of its `tasks`) gives."""
    return {name: body[name] for name in REQUEST_FIELDS if name in body}


def step_field_schemas() -> dict[str, dict[str, Any]]:
    """Each field's JSON Schema, with its description (for the schemas that list them)."""
    return {name: {**field.schema, "description": field.description} if field.description
            else field.schema for name, field in STEP_FIELDS.items()}
