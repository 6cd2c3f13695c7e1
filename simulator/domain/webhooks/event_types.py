"""Every event type of the spec (spec: Events), each declared once as an `EventType`: its
name, its family (what the body carries beside `data`) and the JSON Schema of its `data`.

The declaration's struct is both the value and the schema. The emitting code calls the
declaration with the data's fields (`COMPANY_CREATED(company_id=...)`), which makes its
struct (an unknown field is a TypeError, as the struct's constructor says), and hands the
draft to `tenant.emit`, whose body carries the struct as JSON. The whole body's JSON Schema
is derived from the same declaration (`EventType.schema`). A trigger
(POST /_sandbox/events/trigger) asks the struct for an example (`EventData.example`), so a
new event type triggers with no code of its own. It is published in the OpenAPI document's
`webhooks` section and at GET /_sandbox/schemas/events/{eventType}, so customers can
check their handlers; the tests check every emitted event against it.

Where the spec shows a payload, the schema follows it exactly; where it says "not
shown", the sandbox's choice is documented in each schema's description.
"""

from __future__ import annotations

from enum import Enum
from functools import cache, cached_property, lru_cache
from typing import Any, NamedTuple

import msgspec

from ..dates import date_time_field
from ..companies.companies import CompanySummary
from ..accounts.data_records import payroll_day
from ..identity.identity import UserView
from ..shapes import UNSET, Maybe, View, choice, field, made, of, raw, schema_of
from ..tasks.states import (AUTHENTICATION_METHODS, CHANGED_FIELDS, COMPLETED, FAILED, FAILURE_REASONS,
                     FINAL, PROCESSING, REQUEST_FIELDS, STEP_FIELDS, UPDATE_TYPES,
                     WRITTEN_PAYMENT_METHOD, field_schemas)


class Family(Enum):
    """What an event's body carries beside eventType, eventTime and `data`."""

    TASK = "task"          # the user (with `connected`), public token, product, task, ...
    COMPANY = "company"    # nothing: company events have no user
    USER = "user"          # the user
    PRIVACY = "privacy"    # the user and the task, and no data (pii-data-deleted)


class Draft(NamedTuple):
    """An event made by its type, not emitted yet: `tenant.emit(draft, ...)` stores it. Its
    data is the type's struct (a trigger's, with overrides merged: the checked JSON)."""

    type: EventType
    data: Any


class EventType(msgspec.Struct, frozen=True, eq=False, dict=True):
    """One event type: the builder of its `data` and the JSON Schema of its body."""

    name: str
    family: Family
    shape: type | None  # the struct that declares `data` (domain/shapes.py); None: no data

    @cached_property
    def data(self) -> dict[str, Any] | None:
        """The JSON Schema of `data` (derived on first use, not at import)."""
        return None if self.shape is None else schema_of(self.shape)

    def __call__(self, **fields: Any) -> Draft:
        """The event with its `data` struct made of these fields (their struct names; one
        given as None is left out where the field takes no null). A field the struct does not
        have, or a required one missing, is a mistake of the emitting code: TypeError,
        before anything is stored."""
        if self.shape is None:
            if fields:
                raise TypeError(f"{self.name} has no data, given {sorted(fields)}")
            return Draft(self, None)
        return Draft(self, made(self.shape, **fields))

    def from_json(self, document: dict[str, Any]) -> Draft:
        """The event with its `data` struct read from JSON data in its JSON names (a scenario
        file's, say; a field it does not declare is dropped)."""
        return Draft(self, msgspec.convert(document, self.shape))

    def draft(self, data: dict[str, Any] | None) -> Draft:
        """A draft of data made elsewhere (a trigger's overrides, a checker's body), which
        its maker checks against `schema()` as a whole."""
        return Draft(self, data)

    @cached_property
    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the whole body (the same object each time: validators are
        cached by identity)."""
        base: dict[str, Any] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": self.name,
            "type": "object",
            "properties": {"eventType": {"const": self.name}, "eventTime": _TIME},
            "required": ["eventType", "eventTime"],
        }
        properties, required = base["properties"], base["required"]
        user = schema_of(UserView)
        if self.family is Family.TASK:
            properties.update(user={**user, "required": ["_id", "identifier", "connected"]},
                              data=self.data, **_task_fields())
            required += ["user", "data", "publicToken", "product", "task", "taskWorkflow",
                         "authenticationMethod", "company"]
        elif self.family is Family.COMPANY:
            properties["data"] = self.data
            required.append("data")
            base["not"] = {"required": ["user"]}  # company events have no user
        elif self.family is Family.PRIVACY:
            properties.update(user=user, task=_ID)
            required += ["user", "task"]
            base["not"] = {"required": ["data"]}  # the spec: it has no data
        else:
            properties.update(user=user, data=self.data)
            required += ["user", "data"]
        return base


_TIME = date_time_field("When it happened, on the tenant's clock (the ce-time header too).")
_ID = {"type": "string", "minLength": 1}


@cache
def _task_fields() -> dict[str, Any]:
    return {
        "publicToken": {"type": "string"},
        "product": {"type": "string"},
        "task": _ID,
        "taskWorkflow": _ID,
        # Spec: every task event carries it (Task events), with the values the Task table
        # lists for pay-link tasks; a task of another scope has none of them: null.
        "authenticationMethod": {"enum": [*AUTHENTICATION_METHODS, None],
                                 "description": "A pay-link task's: true-auth or smart-auth. "
                                                "Any other task's: null."},
        "company": schema_of(CompanySummary),
        "metadata": {"type": "object"},
        **field_schemas(REQUEST_FIELDS),  # given by the task's create request (states.py)
    }


Id = of(str, min_length=1)
Status = choice("queued", "processing", "completed", "failed")


def _declare(family: Family, data: dict[str, Any]) -> dict[str, EventType]:
    return {name: EventType(name, family, shape) for name, shape in data.items()}


def example_of(shape: type[msgspec.Struct], context: Any) -> Any:
    """Realistic data of a struct for a trigger (domain/triggers.py: Example): each field the
    context knows from the tenant's records (the user's linked account and its records, the
    processor link, the task), each other required field made from its type; an optional
    field it does not know is left out."""
    fields = {}
    for info in msgspec.structs.fields(shape):
        value = context.known(info.encode_name)
        fields[info.name] = context.made(info.type) if value is UNSET and info.required \
            else value
    return made(shape, **fields)


class EventData(View, kw_only=True):
    # An event type's `data`: the struct its emitter makes and its webhook carries.

    @classmethod
    def example(cls, context: Any) -> EventData:
        """Realistic data for a trigger (example_of); a struct whose fields say more than
        their types overrides it."""
        return example_of(cls, context)


class _TaskStatusUpdated(EventData, kw_only=True):
    previous_status: choice("queued", "processing")
    status: choice("completed", "failed")
    authenticated: bool
    payment_method: Maybe[raw(WRITTEN_PAYMENT_METHOD)] = UNSET
    reason: Maybe[choice(*FAILURE_REASONS)] = UNSET


def _resolving(cls: type, context: Any) -> _TaskStatusUpdated:
    """"Emitted when a Task resolves": a triggered one about a task not final yet shows it
    completing now."""
    task = context.task
    final = task.status in FINAL
    return cls(previous_status=task.previous_status if final and task.previous_status
               else PROCESSING, status=task.status if final else COMPLETED,
               authenticated=task.authenticated, reason=task.reason or UNSET)


# The fields a scenario step sets (domain/states.py: STEP_FIELDS, one entry each; flow, meta,
# ...) after the task's own.
TaskStatusUpdated = msgspec.defstruct(
    "TaskStatusUpdated", [(name, Maybe[raw(schema)], UNSET)
                          for name, schema in field_schemas(STEP_FIELDS).items()],
    bases=(_TaskStatusUpdated,), kw_only=True, module=__name__, namespace={
        "__doc__": "Emitted when a Task resolves (spec: Task events): the status is final; "
                   "previousStatus is processing, or queued for a task that failed before it "
                   "ever started processing. A failure carries its reason.",
        "__schema_extra__": {"allOf": [
            {"if": {"properties": {"status": {"const": "failed"}}},
             "then": {"required": ["reason"]}},
            {"if": {"properties": {"previousStatus": {"const": "queued"}}},
             "then": {"properties": {"status": {"const": "failed"}}}}]},
        "example": classmethod(_resolving)})


class Authenticated(EventData, kw_only=True):
    authenticated: bool


class TaskStatusPatched(Authenticated, kw_only=True):
    status: Status
    previous_status: Status
    payment_method: Maybe[raw(WRITTEN_PAYMENT_METHOD)] = UNSET

    @classmethod
    def example(cls, context: Any) -> TaskStatusPatched:
        """A failure corrected to completed, the patch the spec describes."""
        return cls(authenticated=context.task.authenticated, status=COMPLETED,
                   previous_status=FAILED)


# Declared in the order the bodies have always been sent in, published in their own.
class WorkflowTask(View, kw_only=True):
    __schema_order__ = ("task", "status", "product", "reason")

    task: Id
    product: Maybe[str] = UNSET
    status: Status
    reason: Maybe[str] = UNSET


class WorkflowFinished(EventData, kw_only=True):
    """The spec shows only a failure reason; the sandbox adds the outcome and the workflow's
    tasks."""

    __schema_order__ = ("status", "failureReason", "tasks")

    status: choice("completed", "failed")
    tasks: Maybe[list[WorkflowTask]] = UNSET
    failure_reason: Maybe[str] = UNSET

    @classmethod
    def example(cls, context: Any) -> WorkflowFinished:
        """The workflow of the trigger's task, ended as that task did."""
        task = context.task
        return made(cls, status=FAILED if task.status == FAILED else COMPLETED,
                    failure_reason=task.reason,
                    tasks=[WorkflowTask(task=task.id, product=task.product, status=task.status)])


TASK_EVENTS = _declare(Family.TASK, {
    "task-status-updated": TaskStatusUpdated,
    "task-authentication-status-updated": Authenticated,
    "task-status-patched": TaskStatusPatched,
    "task-workflow-finished": WorkflowFinished,
})
TASK_STATUS_UPDATED = TASK_EVENTS["task-status-updated"]
TASK_AUTHENTICATION_STATUS_UPDATED = TASK_EVENTS["task-authentication-status-updated"]
TASK_STATUS_PATCHED = TASK_EVENTS["task-status-patched"]
TASK_WORKFLOW_FINISHED = TASK_EVENTS["task-workflow-finished"]


class CompanyId(EventData, kw_only=True):
    company_id: Id


class MaintenanceMode(CompanyId, kw_only=True):
    __schema_extra__ = {"if": {"properties": {"status": {"const": "operational"}}},
                        "then": {"properties": {"products": {"maxItems": 0}}}}

    status: choice("maintenance", "operational")
    products: list[str]

    @classmethod
    def example(cls, context: Any) -> MaintenanceMode:
        """The company under maintenance for every product it offers."""
        company = context.company
        return cls(company_id=company.id, status="maintenance",
                   products=list(company.available_products))


COMPANY_EVENTS = _declare(Family.COMPANY, {
    "company-created": CompanyId,
    "company-updated": CompanyId,
    "company-deleted": CompanyId,
    "maintenance-mode": MaintenanceMode,
})
COMPANY_CREATED = COMPANY_EVENTS["company-created"]
COMPANY_UPDATED = COMPANY_EVENTS["company-updated"]
COMPANY_DELETED = COMPANY_EVENTS["company-deleted"]
MAINTENANCE_MODE = COMPANY_EVENTS["maintenance-mode"]


class Bill(View, kw_only=True):
    id: Id = field(name="_id")
    changed_fields: Maybe[list[choice(*CHANGED_FIELDS)]] = UNSET


class PayLinkAccount(View, kw_only=True):
    id: Id = field(name="_id")
    update_type: choice(*UPDATE_TYPES)
    bills: list[Bill]


class PayLinkAccounts(EventData, kw_only=True):
    accounts: list[PayLinkAccount]

    @classmethod
    def example(cls, context: Any) -> PayLinkAccounts:
        """One account whose bill's amount and due date changed."""
        return cls(accounts=[PayLinkAccount(id=context.new_id(), update_type="updated", bills=[
            Bill(id=context.new_id(), changed_fields=["amount", "dueDate"])])])


# A pay-link task's event: it carries the task's fields too, though its schema asks only
# for the user and the data.
PAY_LINK_ACCOUNTS_UPDATED = EventType("pay-link-accounts-updated", Family.USER, PayLinkAccounts)
PII_DATA_DELETED = EventType("pii-data-deleted", Family.PRIVACY, None)


class Linked(EventData, kw_only=True):
    linked_account: Id
    company_id: Id
    task: Maybe[of(Id, "The refresh task whose completion synced the data (a pull refresh, "
                   "or a sign-in again); absent for a push refresh.")] = UNSET


class Synced(Linked, kw_only=True):
    """Not shown by the spec: the sandbox names the linked account and company, and the task
    of a pull refresh."""


class Changed(Linked, kw_only=True):
    """Not shown by the spec: the sandbox names the linked account, company and the changed
    records; fetch them from the data endpoints."""

    records: of(list[Id], "Ids of the records that changed.")


class DepositSwitchRemoved(Linked, kw_only=True):
    deposit_account: Id


class Disconnected(Linked, kw_only=True):
    reason: choice("timeout", "credentials-changed", "system-update")


class EarnUserData(Linked, kw_only=True):
    net_hourly_rate: float
    unpaid_hours_in_pay_period: float
    # Dates in payroll data are date-times (real-service-facts).
    current_pay_period_start: raw(payroll_day("The first day of the current pay period"))
    linked_account: Maybe[Id] = UNSET
    company_id: Maybe[Id] = UNSET


CONTINUOUS_ACCESS = _declare(Family.USER, {
    **{f"{kind}-synced": Synced for kind in
       ("statements", "income", "timesheets", "employment", "identity", "taxes", "deposit-accounts")},
    **{name: Changed for name in
       ("statements-added", "income-updated", "timesheets-added", "employment-updated",
        "identity-updated", "taxes-added", "deposit-accounts-added", "deposit-accounts-updated",
        "deposit-accounts-removed")},
    "deposit-switch-removed": DepositSwitchRemoved,
    "linked-account-connected": Synced,
    "linked-account-disconnected": Disconnected,
    "earn-user-data": EarnUserData,
})


class LinkEvent(EventData, kw_only=True):
    processor_link: Id


class ClassificationCompleted(LinkEvent, kw_only=True):
    """Not shown by the spec: fetch results from employer-matches."""

    matches: of(int, ge=0)


class DetectionCompleted(LinkEvent, kw_only=True):
    """Not shown by the spec: fetch results from recurring-transactions."""

    recurring_transactions: of(int, ge=0)


class AggregatorError(LinkEvent, kw_only=True):
    error_type: str
    error_code: str
    error_message: Maybe[str] = UNSET

    @classmethod
    def example(cls, context: Any) -> AggregatorError:
        """The aggregator's most common item error: the user must log in again."""
        return cls(processor_link=context.known("processorLink"), error_type="ITEM_ERROR",
                   error_code="ITEM_LOGIN_REQUIRED",
                   error_message="the login details of this item have changed")


@lru_cache(maxsize=64)
def processor_link_events(aggregator: str) -> dict[str, EventType]:
    """The processor-link events, the aggregator's error named after it."""
    return _declare(Family.USER, {
        "employer-classification-completed": ClassificationCompleted,
        "recurring-transaction-detection-completed": DetectionCompleted,
        f"{aggregator}-error": AggregatorError,
    })


@lru_cache(maxsize=64)
def declared(aggregator: str) -> dict[str, EventType]:
    """Every event type of the spec by name, in the spec's order, with the aggregator's
    name filled in."""
    return {**TASK_EVENTS, **COMPANY_EVENTS, PAY_LINK_ACCOUNTS_UPDATED.name: PAY_LINK_ACCOUNTS_UPDATED,
            PII_DATA_DELETED.name: PII_DATA_DELETED, **CONTINUOUS_ACCESS,
            **processor_link_events(aggregator)}


def event_types(aggregator: str) -> list[str]:
    """Every event type's name, with the aggregator's name filled in."""
    return list(declared(aggregator))


def event_schema(event_type: str, aggregator: str) -> dict[str, Any] | None:
    """The JSON Schema of one event type's body, or None if the spec has no such type."""
    declaration = declared(aggregator).get(event_type)
    return declaration.schema if declaration is not None else None
