"""The spec's state machines and enumerations, as data (spec: States and transitions, Errors).

Scenario files are checked against these tables at load, and the engine moves
tasks only along them.
"""

from __future__ import annotations

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
