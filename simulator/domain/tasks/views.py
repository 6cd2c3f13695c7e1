"""The tasks part's answers as the API shows them: a task, its details, its status, the
created workflow and a prescreen, each made from the records (`.of`)."""

from __future__ import annotations

from typing import Any

import msgspec

from ...clock import isoformat
from ..companies.companies import COMPANY_STATUSES, Branding, SearchCompany, SearchConnector, Tag
from ..identity.identity import UserView
from ..shapes import (UNSET, Command, DateTime, Maybe, Metadata, Name, View, choice, field, of,
                      raw, view_from, view_of)
from .records import (CONTINUE, Distribution, Task, TaskFile, TaskTransition,
                      Workflow, next_step)
from .requests import ON_COMPLETE, ON_FAIL, RequestFields
from .states import (COMPUTED_FIELDS, FAILED, FAILURE_REASONS, STEP_FIELDS, TASK_AUTHENTICATION,
                     TASK_STATUSES, WRITTEN_PAYMENT_METHOD,
                     AUTHENTICATION_METHODS as TASK_AUTHENTICATION_METHODS, field_schemas)


TaskStatus = choice(*TASK_STATUSES)


class TaskFileView(View, kw_only=True):
    id: str = field(name="_id")
    name: str
    content_type: str

Reason = choice(*FAILURE_REASONS)


_STEP_FIELDS = field_schemas(STEP_FIELDS)  # flow, meta, ... (domain/states.py)


TaskScenario = of(str, "The scenario that drives it (`trigger`: a task made for POST "
                  "/_sandbox/events/trigger).")


class TaskUser(UserView, kw_only=True):
    connected: bool


class _TaskFields(RequestFields, kw_only=True):
    # A task's fields as GET /task/{taskId} shows them (TaskRecord), but `id` and
    # `company`: the real Task (TaskDetails) takes its own. Most are the Task's own, by
    # name; `shown` gives the rest. The request fields it was given are shown too, and
    # the computed ones (TaskFields) after the rest.
    task_workflow: str
    status: TaskStatus
    previous_status: choice(None, "queued", "processing", "failed")
    product: str
    user: TaskUser
    authenticated: bool
    authentication_method: choice(*TASK_AUTHENTICATION_METHODS, None,
                                  description=TASK_AUTHENTICATION)
    scenario: TaskScenario
    created_at: DateTime
    history: of(list[TaskTransition], "Every transition, oldest first.", min_length=1)
    reason: Maybe[of(Reason, "The failure reason, when failed.")] = UNSET
    flow: Maybe[raw(_STEP_FIELDS["flow"])] = UNSET
    meta: Maybe[raw(_STEP_FIELDS["meta"])] = UNSET
    metadata: Maybe[Metadata] = UNSET
    payment_method: Maybe[raw(WRITTEN_PAYMENT_METHOD)] = UNSET
    linked_account: Maybe[of(str, "The linked account a refresh acts on.")] = UNSET
    distribution: Maybe[Distribution] = UNSET
    on_complete: Maybe[of(next_step(ON_COMPLETE), extra_json_schema={"default": CONTINUE})] = UNSET
    on_fail: Maybe[of(next_step(ON_FAIL), extra_json_schema={"default": CONTINUE})] = UNSET


    @staticmethod
    def shown(task: Task, **more: Any) -> dict[str, Any]:
        """The fields of a task's view whose names or forms are not the Task's own (and
        those of a view that adds fields: `more`)."""
        options = task.on_complete != CONTINUE or task.on_fail != CONTINUE
        return {"task_workflow": task.workflow, "created_at": isoformat(task.created_at),
                "user": TaskUser(id=task.user_id, identifier=task.identifier,
                                 connected=task.connected),
                "on_complete": task.on_complete if options else UNSET,
                "on_fail": task.on_fail if options else UNSET, **task.fields, **more}


# The fields the sandbox computes (domain/states.py: COMPUTED_FIELDS), each read from the
# Task by name.
TaskFields = msgspec.defstruct("TaskFields", [
    (name, Maybe[raw(schema)], UNSET) for name, schema in field_schemas(COMPUTED_FIELDS).items()],
    bases=(_TaskFields,), kw_only=True, module=__name__)


class TaskRecord(TaskFields, kw_only=True):
    """A task: its outcome and every transition it made (`onComplete` and `onFail` only when
    one of them is not `continue`)."""

    id: str
    company: of(str, "The company's `_id`.")

    @classmethod
    def of(cls, task: Task, **more: Any) -> TaskRecord:
        """GET /task/{id} (and a view that adds fields: `more`)."""
        return view_from(cls, task, cls.shown(task, company=task.company_id, **more))


class StartedTask(Command, kw_only=True):
    id: str
    product: str
    status: TaskStatus
    scenario: TaskScenario


class TaskCreated(View, kw_only=True):
    id: str
    status: choice("queued")
    task_workflow: str
    tasks: of(list[StartedTask], "Every task started (one after a task whose onComplete or "
              "onFail is `finish` starts when that one ends).", min_length=1)

    @classmethod
    def of(cls, workflow: Workflow, tasks: list[Task]) -> TaskCreated:
        """What task creation answers: the first task, its workflow and every task started."""
        return cls(id=tasks[0].id, status=tasks[0].status, task_workflow=workflow.id,
                   tasks=[view_of(StartedTask, task) for task in tasks])


class TaskCompany(SearchCompany, kw_only=True):
    """The Company (a company deleted since: its `_id` only)."""

    name: Maybe[Name] = UNSET
    status: Maybe[choice(*COMPANY_STATUSES)] = UNSET
    branding: Maybe[Branding] = UNSET
    tags: Maybe[list[Tag]] = UNSET
    connector: Maybe[SearchConnector] = UNSET


class TaskDetails(TaskFields, kw_only=True):
    """The real service's Task, with the sandbox's fields (GET /task/{taskId}) beside it."""

    id: str = field(name="_id")
    product: str
    authentication: choice(*TASK_AUTHENTICATION_METHODS, None, description="The task's "
                           "authenticationMethod, by the real Task's name (null: not a "
                           "pay-link task).")
    company: TaskCompany
    payroll_data_available: of(bool, "The task completed and left payroll data to read: a "
                               "completed deposit or verify task (or a refresh) whose linked "
                               "account holds data (not deleted as PII).")
    fail_reason: Maybe[of(Reason, "The failure reason, when failed.")] = UNSET
    files: of(list[TaskFileView], "The task's files "
              "(GET /task/{taskId}/file/{fileId}/generate-url).")

    @classmethod
    def of(cls, task: Task, *, company: Any, payroll_data_available: bool,
           files: list[TaskFile]) -> TaskDetails:
        """GET /task/{taskId}/details."""
        return view_from(cls, task, cls.shown(
            task, authentication=task.authentication_method, company=company,
            payroll_data_available=payroll_data_available,
            fail_reason=task.reason if task.status == FAILED else None,
            files=[view_of(TaskFileView, file) for file in files]))


class StatusOfTask(View, kw_only=True):
    created_at: DateTime
    status: TaskStatus
    payroll_data_available: bool
    fail_reason: Maybe[of(str, "Present when failed.")] = UNSET

    @classmethod
    def of(cls, task: Task, payroll_data_available: bool) -> StatusOfTask:
        return cls(created_at=isoformat(task.created_at), status=task.status,
                   payroll_data_available=payroll_data_available,
                   fail_reason=task.reason or "unknown-failure" if task.status == FAILED
                   else UNSET)


class TaskStatusAnswer(View, kw_only=True):
    task: StatusOfTask


class Prescreen(View, kw_only=True):
    """HIGH when the company is known, operational, offers the product, has headless
    (username and password) authentication, and the account's manual-deposit rule does not
    cover it; LOW otherwise."""

    confidence: choice("HIGH", "LOW")
    company_id: Maybe[of(str | None, "The company the request named, if the catalog has it.")
                      ] = UNSET
