"""The tasks part's records as snapshots keep them: a task, a workflow, a task's distribution,
a task waiting for its turn in its workflow, a task's file and the errors of its URL."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from ...errors import NotFound, Unauthorized
from ..shapes import UNSET, Command, Instant, Maybe, View, choice, of, raw, schema_of
from ..stored import Stored, Time, described
from .states import (COMPLETED, COMPUTED_FIELDS, FAILED, FAILURE_REASONS, PAYMENT_METHOD, QUEUED,
                     REQUEST_FIELDS, TASK_STATUSES, field_schemas)


# A workflow's next step after a task ends (the task options onComplete / onFail).
CONTINUE, FINISH = "continue", "finish"
DEPOSIT = "deposit"


UNKNOWN_TASK = "No task has the id {task_id!r}."


class Task(Stored, weakref=True):  # weakref: a deleted tenant's are followed
    """A task of a workflow: its status, scenario and the fields its steps set. A snapshot
    keeps it as its fields say, so a restored one is one the engine can run and the reads
    can render: a task moves only along the spec's transitions, from the statuses it has."""

    id: str
    workflow: str
    identifier: str
    user_id: str
    company_id: str
    product: str
    scenario: str
    created_at: Time
    authentication_method: str | None  # a pay-link task's only (Tasks.authentication_method)
    public_token: str
    status: choice(*TASK_STATUSES) = QUEUED
    previous_status: choice(*TASK_STATUSES, None) = None
    authenticated: bool = False
    # user.connected (spec: User object): only a task started in the hosted flow can have
    # its user present; the page closing (or a scenario's `connected: false`) means the
    # user left. Frozen when the task resolves: later events (a patch, the workflow's
    # end) tell whether the user saw the final outcome.
    watched: bool = False
    user_left: bool = False
    saw_outcome: bool | None = None
    reason: str | None = None
    flow: str | None = None
    meta: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    payment_method: dict[str, Any] | None = None
    linked_account: str | None = None
    payment_method_given: bool = False
    history: described(list[TaskTransition], {"type": "array", "items": {"type": "object"}}
                       ) = msgspec.field(default_factory=list)
    # {type, amount}: the deposit's split
    distribution: described(dict[str, Any] | None, schema_of(Distribution | None)) = None
    on_complete: choice(CONTINUE, FINISH) = CONTINUE
    on_fail: choice(CONTINUE, FINISH) = CONTINUE
    fields: described(dict[str, Any], {  # the request's (REQUEST_FIELDS)
        "type": "object", "additionalProperties": False,
        "properties": field_schemas(REQUEST_FIELDS)}) = msgspec.field(default_factory=dict)
    SPARSE: ClassVar[tuple[str, ...]] = ("fields",)  # a snapshot's, when given

    @property
    def ends_workflow(self) -> bool:
        """The task ended in a way its options say finishes the workflow."""
        return ((self.status == COMPLETED and self.on_complete == FINISH)
                or (self.status == FAILED and self.on_fail == FINISH))

    @property
    def connected(self) -> bool:
        """True while the user is present in the hosted flow; after resolution, whether
        they were present to see the final outcome."""
        if self.saw_outcome is not None:
            return self.saw_outcome
        return self.watched and not self.user_left


# A computed field (states.COMPUTED_FIELDS) reads as a property of the task, so its views and
# events take it by name as they take the stored ones (one not yet known reads as absent).
# A property, not a `__getattr__`: that would slow every attribute a task is read by.
for _name, _field in COMPUTED_FIELDS.items():
    if _field.compute is not None:
        setattr(Task, _name, property(_field.compute))


# gc=False: texts and a moment only, never in a cycle, so the collector need not track it.
class TaskTransition(View, kw_only=True, gc=False):
    """One move of a task; the first is its creation (`queued`, no previousStatus)."""

    status: choice(*TASK_STATUSES)
    previous_status: Maybe[choice(*TASK_STATUSES)] = UNSET
    at: Instant
    patch: Maybe[of(bool, "A correction of a final status (task-status-patched).")] = UNSET
    reason: Maybe[choice(*FAILURE_REASONS)] = UNSET


class Workflow(Stored):
    """The tasks one POST /task/create made, run one after another."""

    id: str
    identifier: str
    tasks: list[str]
    finished: bool = False
    # Tasks not started yet: those after a task whose onComplete or onFail is `finish`,
    # started when it ends the way that goes on (TaskRequest.pending form).
    pending: described(list[dict[str, Any]], schema_of(list[PendingTask])) = msgspec.field(
        default_factory=list)


class Distribution(Command, kw_only=True):
    """How the deposit is split (a deposit task; the deposit accounts' distributionType and
    distributionAmount). A type the company's connector cannot set up
    (capabilities.distributionTypes) fails the task."""

    __schema_extra__ = {"allOf": [
        {"if": {"properties": {"type": {"const": "percent"}}},
         "then": {"required": ["amount"], "properties": {"amount": {"maximum": 100}}}},
        {"if": {"properties": {"type": {"const": "fixed"}}}, "then": {"required": ["amount"]}}]}

    type: choice("total", "fixed", "percent", description="total: the entire paycheck; fixed: "
                 "`amount` dollars; percent: `amount` per cent of it.")
    amount: Maybe[of(float, gt=0, le=1_000_000)] = UNSET


class PendingTask(Command, kw_only=True):
    """A task a workflow holds until the one before it ends (TaskRequest.pending)."""

    __schema_extra__ = {"properties": field_schemas(REQUEST_FIELDS)}

    product: of(str, min_length=1)
    metadata: Maybe[dict[str, Any] | None] = UNSET
    payment_method: Maybe[raw({"anyOf": [PAYMENT_METHOD, {"type": "null"}]})] = UNSET
    distribution: Maybe[Distribution | None] = UNSET
    on_complete: choice(CONTINUE, FINISH)
    on_fail: choice(CONTINUE, FINISH)
    scenario: of(str, min_length=1)


def next_step(description: str) -> Any:
    return choice(CONTINUE, FINISH, description=description)


DEPOSIT_FORM = "direct-deposit-form"  # the file id of a deposit task's authorization form
FILE_URL_LIFETIME = 3600              # virtual seconds a generated file URL works
UNKNOWN_FILE = "Task {task_id!r} has no file {file_id!r} (its details list its `files`)."
INVALID_FILE_URL = "This file URL is not one the sandbox made, or it was changed."
EXPIRED_FILE_URL = ("This file URL expired at {expires}; ask for a new one "
                    "(GET /task/{{taskId}}/file/{{fileId}}/generate-url).")


FileNotFound = NotFound.coded("file-not-found")
InvalidFileUrl = Unauthorized.coded("invalid-file-url")
FileUrlExpired = Unauthorized.coded("file-url-expired")


class TaskFile(msgspec.Struct, frozen=True):
    """A file of a task: a deposit task's direct deposit authorization form, or a paystub
    of the payroll data a task left (`statement` of the linked account `account`)."""

    id: str
    name: str
    content_type: str = "application/pdf"
    statement: dict[str, Any] | None = None
    account: Any = None
