"""The spec's state machines and enumerations, as data (spec: States and transitions, Errors).

Scenario files are checked against these tables at load, and the engine moves
tasks only along them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ...clock import written_time
from ..dates import date_time_field


# What a scenario drives, and the statuses its steps may set (schemas/scenarios.py).
SCENARIO_KINDS = ("task", "processor-link")
STEP_STATUSES = ("processing", "completed", "failed")
QUEUED = "queued"
PROCESSING = "processing"
COMPLETED = "completed"
FAILED = "failed"
FINAL = frozenset({COMPLETED, FAILED})
TASK_STATUSES = (QUEUED, PROCESSING, COMPLETED, FAILED)

# status -> statuses it may move to by an ordinary update. A task fails from queued when
# it never started processing (the spec's previousStatus `queued`, e.g. device-disconnected).
TASK_TRANSITIONS: dict[str, frozenset[str]] = {
    QUEUED: frozenset({PROCESSING, FAILED}),
    PROCESSING: frozenset({COMPLETED, FAILED}),
    FAILED: frozenset(),
    COMPLETED: frozenset(),
}
# Corrections of a final status (task-status-patched): the spec shows failed -> completed.
TASK_PATCHES: dict[str, frozenset[str]] = {
    FAILED: frozenset({COMPLETED}),
}

FAILURE_REASONS = (
    "auth-expired", "connection-error", "device-disconnected", "action-failed",
    "plan-selection-required", "product-not-supported", "subscription-inactive",
    "subscription-managed-by-partner-provider", "subscription-not-found",
    "payment-method-locked", "payment-method-not-supported", "payment-method-insufficient-funds",
    "payment-method-limit-reached", "payment-method-declined", "user-abandon",
    "payment-token-expired", "payment-switch-unsuccessful", "system-unavailable",
    "unexpected-response", "unknown-failure",
)
FLOWS = ("connect-account", "refresh", "view-account", "pause-plan", "change-plan", "switch",
         "pay-now")
AUTHENTICATION_METHODS = ("true-auth", "smart-auth")  # spec: Task, authenticationMethod
# The spec's Task table gives them "For pay-link Tasks"; a task of another scope has none of
# them: null (on the task and in every event of it).
TASK_AUTHENTICATION = "A pay-link task's: true-auth or smart-auth. Any other task's: null."
UPDATE_TYPES = ("created", "updated", "deleted", "processing", "disconnected")
CHANGED_FIELDS = ("amount", "autopayStatus", "billingCycle", "dueDate", "items", "name",
                  "paymentHistory", "paymentMethod", "plans", "profiles", "usage")
PAYMENT_METHOD_TYPES = ("card", "bank")
# Spec: Client SDK configuration, deeplink.step.
# An account number, as a user gives one (PUT /user) or a fixture's deposit account has it:
# any string of 1 to 34 digits. The surface publishes no bound; 34 is the longest account
# identifier a bank standard allows (the IBAN, ISO 13616), so no number a real bank issues
# (a US account's ACH field holds 17) is refused, and the field stays bounded.
ACCOUNT_NUMBER = r"^[0-9]{1,34}$"

DEEPLINK_STEPS = ("login-company", "search-company", "search-payroll", "welcome", "account",
                  "direct-deposit-setup", "manual-fallback", "generate-deposit-pdf", "add-card")


def emits_status_update(current: str, new: str, *, patch: bool) -> str | None:
    """The event a legal move emits: task-status-updated only when a task resolves
    ("Emitted when a Task resolves"), task-status-patched for a correction, else nothing
    (queued -> processing is not announced; GET /task/{id} shows it)."""
    if patch:
        return "task-status-patched"
    return "task-status-updated" if new in FINAL else None


def transition_error(current: str, new: str, *, patch: bool) -> str | None:
    """Why moving `current` -> `new` breaks the spec, or None when it is allowed."""
    if patch:
        if new in TASK_PATCHES.get(current, ()):
            return None
        return (f"illegal patch {current} -> {new}: only a final status can be corrected "
                f"(failed -> completed)")
    if new in TASK_TRANSITIONS[current]:
        return None
    if current in FINAL:
        return (f"illegal transition {current} -> {new}: {current} is final; only a patch "
                f"(failed -> completed) may follow")
    allowed = ", ".join(sorted(TASK_TRANSITIONS[current]))
    return f"illegal transition {current} -> {new}: from {current} only {allowed}"


# -- the task fields a step sets or a create request gives, and the payment method they name

# A payment method (spec: Payment method object), as requests, scenario files and PUT /user
# give it and as answers and events write it.
PAYMENT_METHOD = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "_id", "title"],
    "properties": {
        "type": {"enum": list(PAYMENT_METHOD_TYPES)},
        "_id": {"type": "string", "minLength": 1},
        "title": {"type": "string"},
        "expiry": {"type": "string", "format": "date-time",
                   "description": "Card expiry: any ISO 8601 date-time with a zone; answers "
                                  "and events write it 2020-06-30T12:00:00.000Z."},
        "brand": {"type": "string"},
        "lastFour": {"type": "string", "pattern": r"^[0-9]{4}$"},
        "accountNumber": {"type": "string", "pattern": r"^[0-9]{1,4}$"},  # its last four, kept
        "routingNumber": {"type": "string", "pattern": r"^[0-9]{9}$"},
        "accountType": {"enum": ["checking", "savings"]},
        "cardStatus": {"enum": ["frozen"]},
        "externalId": {"type": "string"},
    },
}
# A payment method as answers and events write it: its expiry in the one date-time form.
WRITTEN_PAYMENT_METHOD = {**PAYMENT_METHOD, "properties": {
    **PAYMENT_METHOD["properties"],
    "expiry": date_time_field("Card expiry (spec: Payment method object)."),
}}


def written_payment_method(method: dict[str, Any] | None) -> dict[str, Any] | None:
    """A payment method as answers and events write it: its `expiry`, given in any ISO 8601
    form (a request, a scenario file, PUT /user), in the one date-time form."""
    if method is None or not isinstance(method.get("expiry"), str):
        return method
    return {**method, "expiry": written_time(method["expiry"])}


class TaskField(msgspec.Struct, frozen=True):
    """A task field declared once (STEP_FIELDS, REQUEST_FIELDS, COMPUTED_FIELDS): its JSON
    Schema, what it is, for a step's field whether only a failure's event carries it, and
    for a computed one how it is computed from the Task record (None: not yet known)."""

    schema: dict[str, Any]
    description: str = ""
    on_failure_only: bool = False
    compute: Callable[[Any], Any] | None = None


MANAGED_BY = {"type": "object", "additionalProperties": False, "required": ["companyId", "name"],
              "properties": {"companyId": {"type": "string"}, "name": {"type": "string"}}}

# Data only the app holds (real-service-facts 14: a data request {taskId, fields}).
DATA_REQUEST = {"type": "object", "additionalProperties": False, "required": ["fields"],
                "properties": {"fields": {"type": "array", "minItems": 1, "uniqueItems": True,
                                          "items": {"enum": ["card", "bankAccount"]}}}}

# The fields a scenario step sets and the task's events carry. An entry (and the Task
# attribute of the same name) is all such a field takes: the scenario files' schema lets a
# step set it, the engine copies it onto the task, GET /task/{taskId} and
# task-status-updated show it, and snapshots keep it.
STEP_FIELDS: dict[str, TaskField] = {
    "flow": TaskField({"enum": list(FLOWS)},
                      "The hosted flow's kind of work (spec: Task, flow)."),
    "meta": TaskField({"type": "object", "additionalProperties": False,
                       "properties": {"managedBy": MANAGED_BY, "dataRequest": DATA_REQUEST}},
                      "Why a task failed, e.g. the partner that manages the account (spec: "
                      "task-status-updated, meta); `dataRequest`: data the task needs from the "
                      "app (the SDK's onDataRequest).", on_failure_only=True),
}

# The fields a create request gives (at the top, or in one of `tasks`), which GET
# /task/{taskId} shows, snapshots keep and every event of the task carries as given
# (Task.fields). An entry is all such a field takes: none is needed today.
REQUEST_FIELDS: dict[str, TaskField] = {}


# The fields the sandbox computes from a task's record (`compute`). An entry is all such a
# field takes: the Task reads it as an attribute, GET /task/{taskId} and task-status-updated
# show it, and snapshots keep what it is computed from. None is needed today.
COMPUTED_FIELDS: dict[str, TaskField] = {}


def field_schemas(fields: dict[str, TaskField]) -> dict[str, dict[str, Any]]:
    """Each field's JSON Schema, with its description."""
    return {name: {**field.schema, "description": field.description} if field.description
            else field.schema for name, field in fields.items()}


def given_fields(given: Any) -> dict[str, Any]:
    """The request fields a request's struct (or one of its `tasks`) gives, or a task a
    workflow holds (JSON data) names."""
    if isinstance(given, dict):
        return {name: given[name] for name in REQUEST_FIELDS if name in given}
    return {name: value for name in REQUEST_FIELDS
            if (value := getattr(given, name)) is not msgspec.UNSET}


# transactions.days_requested of a link token, as POST /_sandbox/{aggregator}/processor-token
# takes it and a snapshot may hold it (a huge one restored made a link's job raise).
DAYS_REQUESTED = {"type": "integer", "minimum": 1, "maximum": 730}


# -- scenarios: a task's or a processor link's steps in time (scenarios/loader.py reads them)

class Step(msgspec.Struct, frozen=True):
    """One step of a scenario: when it fires and what it changes."""

    at: float           # seconds after the task was created
    changes: dict[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        return self.changes.get(name, default)


class Scenario(msgspec.Struct, frozen=True):
    """A checked scenario file: its kind, steps and the products it fits."""

    name: str
    description: str
    kind: str
    steps: tuple[Step, ...]
    # The products it fits: named by the file (`products`, or an older file's step
    # `product`), else None and `scope` decides; concrete once resolved (resolve_products).
    products: tuple[str, ...] | None = None
    scope: str | None = None   # with no products named: pay-link, user-link or None (any)
    file: str = ""             # where it was read, for errors found after loading
    products_at: str = "$.products"   # the JSON path that named the products

    def fits(self, product: str, scope_of: Callable[[str], str | None] | None = None) -> bool:
        """Whether a task of `product` may run this scenario."""
        if self.kind != "task":
            return False
        if self.products is not None:
            return product in self.products
        return self.scope is None or (scope_of is not None and scope_of(product) == self.scope)

    @property
    def duration(self) -> float:
        return self.steps[-1].at if self.steps else 0.0

    @property
    def outcome(self) -> str:
        statuses = [s.get("status") for s in self.steps if s.get("status")]
        return statuses[-1] if statuses else "n/a"
