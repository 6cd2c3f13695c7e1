"""The spec's state machines and enumerations, as data (spec: States and transitions, Errors).

Scenario files are checked against these tables at load, and the engine moves
tasks only along them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec


# What a scenario drives, and the statuses its steps may set (schemas/scenarios.py).
SCENARIO_KINDS = ("task", "processor-link")
STEP_STATUSES = ("processing", "completed", "failed")
QUEUED = "queued"
PROCESSING = "processing"
COMPLETED = "completed"
FAILED = "failed"
FINAL = frozenset({COMPLETED, FAILED})

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
UPDATE_TYPES = ("created", "updated", "deleted", "processing", "disconnected")
CHANGED_FIELDS = ("amount", "autopayStatus", "billingCycle", "dueDate", "items", "name",
                  "paymentHistory", "paymentMethod", "plans", "profiles", "usage")
PAYMENT_METHOD_TYPES = ("card", "bank")
# Spec: Client SDK configuration, deeplink.step.
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

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "kind": self.kind,
                "products": None if self.products is None else list(self.products),
                "outcome": self.outcome, "duration": self.duration,
                "steps": [{"at": s.at, **s.changes} for s in self.steps]}
