"""Every event type of the spec (spec: Events), each declared once as an `EventType`: its
name, its family (what the body carries beside `data`) and the JSON Schema of its `data`.

The declaration is the struct's: `@event("maintenance-mode", family=Family.COMPANY)` on its
`data` struct declares the type (several names: one type each, in the catalog in the order
declared). The struct is both the value and the schema: the emitting code makes it
(`MaintenanceMode(company_id=...)`) and hands it to `tenant.emit`, whose body carries it as
JSON (a struct of several types is drafted by name: `DECLARED[name](**fields)`, an unknown
field a TypeError). The whole body's JSON Schema is derived from the same declaration
(`EventType.schema`). A trigger (POST /_sandbox/events/trigger) asks the struct for an
example (`EventData.example`), so a new event type triggers with no code of its own. It is published in the OpenAPI document's
`webhooks` section and at GET /_sandbox/schemas/events/{eventType}, so customers can
check their handlers; the tests check every emitted event against it.

Where the spec shows a payload, the schema follows it exactly; where it says "not
shown", the sandbox's choice is documented in each schema's description.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from functools import cache, cached_property, lru_cache
from typing import Any, ClassVar, NamedTuple

import msgspec

from ..dates import date_time_field
from ..companies.companies import CompanySummary
from ..accounts.data_records import DATA_KINDS, payroll_day
from ..identity.identity import UserView
from ..shapes import UNSET, Maybe, View, choice, field, made, of, raw, schema_of
from ..tasks.states import (AUTHENTICATION_METHODS, CHANGED_FIELDS, COMPLETED, COMPUTED_FIELDS,
                            FAILED, FAILURE_REASONS, FINAL, PROCESSING, REQUEST_FIELDS,
                            STEP_FIELDS, TASK_AUTHENTICATION, TASK_STATUSES, UPDATE_TYPES,
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
    shape: type  # the struct that declares `data` (domain/shapes.py; a privacy event's: none)

    @cached_property
    def data(self) -> dict[str, Any]:
        """The JSON Schema of `data` (derived on first use, not at import)."""
        return schema_of(self.shape)

    def __call__(self, **fields: Any) -> Draft:
        """The event with its `data` struct made of these fields (their struct names; one
        given as None is left out where the field takes no null). A field the struct does not
        have, or a required one missing, is a mistake of the emitting code: TypeError,
        before anything is stored."""
        return self.draft(made(self.shape, **fields))

    def from_json(self, document: dict[str, Any]) -> Draft:
        """The event with its `data` struct read from JSON data in its JSON names (a scenario
        file's, say; a field it does not declare is dropped)."""
        return Draft(self, msgspec.convert(document, self.shape))

    def draft(self, data: Any) -> Draft:
        """A draft of data made elsewhere (a struct, a trigger's overrides, a checker's
        body), which its maker checks against `schema()` as a whole (a privacy event's
        body has no data)."""
        return Draft(self, None if self.family is Family.PRIVACY else data)

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
        "authenticationMethod": {"enum": [*AUTHENTICATION_METHODS, None],  # spec: Task events
                                 "description": TASK_AUTHENTICATION},
        "company": schema_of(CompanySummary),
        "metadata": {"type": "object"},
        **field_schemas(REQUEST_FIELDS),  # given by the task's create request (states.py)
    }


Id = of(str, min_length=1)
Status = choice(*TASK_STATUSES)


DECLARED: dict[str, EventType] = {}  # every type by name, as declared (`{aggregator}` unfilled)


def event(*names: str, family: Family = Family.USER) -> Callable[[type], type]:
    """Declares the struct below the `data` of these event types (in the catalog in this
    order); a struct of one type is emitted as it is (`tenant.emit(TaskNote(...))`)."""
    def declare(shape: type) -> type:
        types = [EventType(name, family, shape) for name in names]
        DECLARED.update((declared.name, declared) for declared in types)
        shape.event_type = types[0] if len(types) == 1 else None
        return shape
    return declare


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
    event_type: ClassVar[EventType | None] = None  # its one type (`@event`), if one

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


# The fields a scenario step sets and those the sandbox computes (domain/states.py:
# STEP_FIELDS, COMPUTED_FIELDS, one entry each; flow, meta, ...) after the task's own.
TaskStatusUpdated = event("task-status-updated", family=Family.TASK)(msgspec.defstruct(
    "TaskStatusUpdated", [(name, Maybe[raw(schema)], UNSET) for name, schema in
                          field_schemas({**STEP_FIELDS, **COMPUTED_FIELDS}).items()],
    bases=(_TaskStatusUpdated,), kw_only=True, module=__name__, namespace={
        "__doc__": "Emitted when a Task resolves (spec: Task events): the status is final; "
                   "previousStatus is processing, or queued for a task that failed before it "
                   "ever started processing. A failure carries its reason.",
        "__schema_extra__": {"allOf": [
            {"if": {"properties": {"status": {"const": "failed"}}},
             "then": {"required": ["reason"]}},
            {"if": {"properties": {"previousStatus": {"const": "queued"}}},
             "then": {"properties": {"status": {"const": "failed"}}}}]},
        "example": classmethod(_resolving)}))


@event("task-authentication-status-updated", family=Family.TASK)
class Authenticated(EventData, kw_only=True):
    authenticated: bool


@event("task-status-patched", family=Family.TASK)
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


@event("task-workflow-finished", family=Family.TASK)
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


@event("company-created", "company-updated", "company-deleted", family=Family.COMPANY)
class CompanyId(EventData, kw_only=True):
    company_id: Id


@event("maintenance-mode", family=Family.COMPANY)
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


class Bill(View, kw_only=True):
    id: Id = field(name="_id")
    changed_fields: Maybe[list[choice(*CHANGED_FIELDS)]] = UNSET


class PayLinkAccount(View, kw_only=True):
    id: Id = field(name="_id")
    update_type: choice(*UPDATE_TYPES)
    bills: list[Bill]


# A pay-link task's event: it carries the task's fields too, though its schema asks only
# for the user and the data.
@event("pay-link-accounts-updated")
class PayLinkAccounts(EventData, kw_only=True):
    accounts: list[PayLinkAccount]

    @classmethod
    def example(cls, context: Any) -> PayLinkAccounts:
        """One account whose bill's amount and due date changed."""
        return cls(accounts=[PayLinkAccount(id=context.new_id(), update_type="updated", bills=[
            Bill(id=context.new_id(), changed_fields=["amount", "dueDate"])])])


@event("pii-data-deleted", family=Family.PRIVACY)
class PiiDataDeleted(EventData, kw_only=True):
    """No data (spec: Privacy event): the body names the user and the task."""


class Linked(EventData, kw_only=True):
    linked_account: Id
    company_id: Id
    task: Maybe[of(Id, "The refresh task whose completion synced the data (a pull refresh, "
                   "or a sign-in again); absent for a push refresh.")] = UNSET


@event(*(f"{kind}-synced" for kind in DATA_KINDS))
class Synced(Linked, kw_only=True):
    """Not shown by the spec: the sandbox names the linked account and company, and the task
    of a pull refresh."""


@event("statements-added", "income-updated", "timesheets-added", "employment-updated",
       "identity-updated", "taxes-added", "deposit-accounts-added", "deposit-accounts-updated",
       "deposit-accounts-removed")
class Changed(Linked, kw_only=True):
    """Not shown by the spec: the sandbox names the linked account, company and the changed
    records; fetch them from the data endpoints."""

    records: of(list[Id], "Ids of the records that changed.")


@event("deposit-switch-removed")
class DepositSwitchRemoved(Linked, kw_only=True):
    deposit_account: Id


@event("linked-account-connected")
class Connected(Synced, kw_only=True):
    __doc__ = Synced.__doc__


@event("linked-account-disconnected")
class Disconnected(Linked, kw_only=True):
    reason: choice("timeout", "credentials-changed", "system-update")


@event("earn-user-data")
class EarnUserData(Linked, kw_only=True):
    net_hourly_rate: float
    unpaid_hours_in_pay_period: float
    # Dates in payroll data are date-times (real-service-facts).
    current_pay_period_start: raw(payroll_day("The first day of the current pay period"))
    linked_account: Maybe[Id] = UNSET
    company_id: Maybe[Id] = UNSET


class LinkEvent(EventData, kw_only=True):
    processor_link: Id


@event("employer-classification-completed")
class ClassificationCompleted(LinkEvent, kw_only=True):
    """Not shown by the spec: fetch results from employer-matches."""

    matches: of(int, ge=0)


@event("recurring-transaction-detection-completed")
class DetectionCompleted(LinkEvent, kw_only=True):
    """Not shown by the spec: fetch results from recurring-transactions."""

    recurring_transactions: of(int, ge=0)


@event("{aggregator}-error")  # named after the aggregator
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
def declared(aggregator: str) -> dict[str, EventType]:
    """Every event type of the spec by name, in the spec's order, with the aggregator's
    name filled in."""
    return {(named := name.format(aggregator=aggregator)): declaration if named == name
            else EventType(named, declaration.family, declaration.shape)
            for name, declaration in DECLARED.items()}


TASK_EVENTS = frozenset(name for name, declaration in DECLARED.items()
                        if declaration.family is Family.TASK)


def event_types(aggregator: str) -> list[str]:
    """Every event type's name, with the aggregator's name filled in."""
    return list(declared(aggregator))


def event_schema(event_type: str, aggregator: str) -> dict[str, Any] | None:
    """The JSON Schema of one event type's body, or None if the spec has no such type."""
    declaration = declared(aggregator).get(event_type)
    return declaration.schema if declaration is not None else None
