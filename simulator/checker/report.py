"""What a check-handler run found: each delivery, each check, the whole report, and the
words they are written in (`Report.text()` for the terminal, `Report.to_dict()` for
`--json`; the fields are a contract: README, docs/check-handler.md, tests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..transport.sender import is_ok, is_redirect

PASS, FAIL, SKIP = "pass", "fail", "skip"
SHOWN_PROBLEMS = 4          # problems named in a check's line (the JSON has them all)


@dataclass(frozen=True)
class Delivery:
    """One request to the handler and what came back (or why nothing did)."""

    event_type: str
    ce_id: str
    signature: str                  # valid | wrong | none
    status: int | None = None
    latency_ms: float | None = None
    error: str | None = None        # timeout, connection refused, not sent: ...
    location: str | None = None     # a redirect's target
    answer: str = ""                # the start of the answer's body
    sent: bool = True

    @property
    def ok(self) -> bool:
        return is_ok(self.status)

    @property
    def redirect(self) -> bool:
        return is_redirect(self.status)

    def outcome(self) -> str:
        """`200 in 3 ms`, `302 to https://... in 2 ms`, `timeout after 15s`, ..."""
        if self.status is None:
            return str(self.error)
        text = f"{self.status}"
        if self.redirect:
            text += f" to {self.location or '(no location)'}"
        text += f" in {ms(self.latency_ms)}"
        if not self.ok and self.answer:
            text += f" ({excerpt(self.answer, 60)})"
        return text

    def record(self) -> dict[str, Any]:
        return {"eventType": self.event_type, "ceId": self.ce_id, "signature": self.signature,
                "sent": self.sent, "status": self.status, "latencyMs": self.latency_ms,
                "error": self.error, "location": self.location, "answer": self.answer}


@dataclass(frozen=True)
class CheckResult:
    """One check: pass, fail or skip, what was sent, what came back, and what a correct
    handler does."""

    name: str
    status: str
    sent: str
    received: str
    expected: str
    note: str | None = None
    deliveries: tuple[Delivery, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        if self.status == SKIP:
            return f"SKIP {self.name}: not run, {self.note}; a correct handler {self.expected}"
        text = (f"{self.status.upper():<4} {self.name}: sent {self.sent}; got {self.received}; "
                f"a correct handler {self.expected}")
        return text + (f" ({self.note})" if self.note else "")

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "sent": self.sent,
                "received": self.received, "expected": self.expected, "note": self.note,
                **self.details, "deliveries": [d.record() for d in self.deliveries]}


@dataclass(frozen=True)
class Report:
    """The whole run. `ok` when no check failed (skipped ones do not fail a run);
    `str(report)` is its text, so `assert report.ok, report` reads well."""

    url: str
    checks: tuple[CheckResult, ...]
    secret_given: bool                 # False: signed with the bundled default tenant's
    signing_note: str | None
    event_types: tuple[str, ...]
    state_url: str | None
    seed: int
    elapsed_s: float
    vendor: str = ""
    sandbox_url: str | None = None     # the running sandbox the events came from (--url)
    cleanup_note: str | None = None    # what that run left behind there, if anything
    products: tuple[str, ...] = ()     # the products whose tasks the events name
    products_named: bool = False       # chosen by `products` (--products), not all

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.status == FAIL)

    @property
    def failed_names(self) -> set[str]:
        return {c.name for c in self.failed}

    @property
    def skipped_names(self) -> set[str]:
        return {c.name for c in self.checks if c.status == SKIP}

    def check(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    def summary(self) -> str:
        counts = {s: sum(1 for c in self.checks if c.status == s) for s in (PASS, FAIL, SKIP)}
        text = (f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped in "
                f"{self.elapsed_s:.1f}s against {self.url}")
        if self.products_named:
            text += f" for {', '.join(self.products)} tasks"
        if self.sandbox_url:
            text += f" with events from {self.sandbox_url} (vendor {self.vendor})"
        return text + (f"; failed: {', '.join(c.name for c in self.failed)}" if self.failed
                       else "")

    def text(self) -> str:
        """The signing note first (what the handler must verify with), a line per check,
        notes, the summary."""
        lines = [self.signing_note] if self.signing_note else []
        lines += [c.line() for c in self.checks]
        lines += [f"note: {self.cleanup_note}"] if self.cleanup_note else []
        lines.append(self.summary())
        return "\n".join(lines)

    __str__ = text

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "ok": self.ok, "summary": self.summary(),
                "secret": "given" if self.secret_given else "default",
                "signingNote": self.signing_note, "eventTypes": list(self.event_types),
                "products": list(self.products),
                "stateUrl": self.state_url, "sandboxUrl": self.sandbox_url,
                "vendor": self.vendor, "cleanupNote": self.cleanup_note, "seed": self.seed,
                "elapsedSeconds": round(self.elapsed_s, 3),
                "failed": [c.name for c in self.failed],
                "checks": [c.record() for c in self.checks]}


# -- words ------------------------------------------------------------------------------------

def ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def excerpt(text: str, size: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[:size - 3] + "..."


def grouped(deliveries: list[Delivery]) -> str:
    """What came back, each answer once with the event types that got it:
    `401 ({"error": ...}) for task-status-updated, ... and 29 more`."""
    groups: dict[str, list[str]] = {}
    for d in deliveries:
        if d.status is None:
            key = str(d.error)
        else:
            key = str(d.status) + (f" to {d.location}" if d.redirect else "")
            key += f" ({excerpt(d.answer, 60)})" if d.answer and not d.ok else ""
        types = groups.setdefault(key, [])
        if d.event_type not in types:
            types.append(d.event_type)
    return "; ".join(f"{key} for {listed(types, ', ')}" for key, types in groups.items())


def listed(items: list[str], separator: str = "; ") -> str:
    shown = separator.join(items[:SHOWN_PROBLEMS])
    more = len(items) - SHOWN_PROBLEMS
    return shown + (f"; and {more} more" if more > 0 else "")
