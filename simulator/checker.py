"""`payroll-sandbox check-handler`: judge a customer's webhook handler the way the real
service will treat it (spec: Events, Delivery; Limits).

A sandbox makes realistic events: every type by the trigger, and real tasks run through
their scenarios. By default it is an in-process one (manual clock, a fresh random seed
per run, so no `ce-id` repeats between runs); with `sandbox_url` (`--url`) it is a running
server, in a temporary tenant deleted at the end, so the events carry that server's
service profile, companies and scenarios. Both are an `EventSource`; the suite is the
same. The checker sends the events itself, as the dispatcher sends an attempt
(binary-mode CloudEvent, the body byte for byte, 15 s timeout, redirects not followed,
only a 2xx counts, through the one webhook sender of webhooks/sender.py), because some checks need what the sandbox never sends on its own: a
wrong signature, none at all, a future event type, extra fields.

Task events are of the products the handler deals with (`products`, `--products`; by
default every product a task can be made for there): each names a real task of one of
them, in turn, at a company that offers it, with a failure reason a scenario fitting that
product ends with; the real tasks of `out-of-order` run scenarios that fit their product;
`state-url` judges the outcomes of those tasks only.

`check_handler(url, secret=..., events=..., state_url=..., products=..., sandbox_url=...)`
runs the fixed suite below and returns a `Report`; the CLI prints it (`Report.text()`, or
`Report.to_dict()` as JSON) and exits 0 only when no check failed. The pytest plugin can
call the same function (or `check_handler_async` from a running event loop). Without a
secret, deliveries are signed with the bundled default tenant's API secret, the one its
webhooks are signed with (`listen` and `trigger` default to its keys too).
"""

from __future__ import annotations

import asyncio
import math
import random
import secrets
import statistics
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from .client import CannotReach, NotASandbox, SandboxClient, SandboxError, default_credentials
from .domain.companies import OPERATIONAL
from .domain.events import Event, event_body
from .domain.states import FAILURE_REASONS
from .schemas.events import TASK_EVENT_DATA, event_types
from .schemas.validate import http_url_problem, parse_time
from .webhooks.cloudevents import SIGNATURE_HEADER, sign, to_message
from .webhooks.dispatcher import ATTEMPT_TIMEOUT
from .webhooks.sender import TIMEOUT, new_session, post

# The checks, in the order they run; the names are a contract (README, --json, tests).
EVERY_EVENT_TYPE = "every-event-type"
WRONG_SIGNATURE = "wrong-signature"
MISSING_SIGNATURE = "missing-signature"
DUPLICATE_DELIVERY = "duplicate-delivery"
OUT_OF_ORDER = "out-of-order"
UNKNOWN_EVENT_TYPE = "unknown-event-type"
EXTRA_FIELDS = "extra-fields"
BURST = "burst"
NO_REDIRECT = "no-redirect"
STATE_URL = "state-url"
CHECKS = (EVERY_EVENT_TYPE, WRONG_SIGNATURE, MISSING_SIGNATURE, DUPLICATE_DELIVERY, OUT_OF_ORDER,
          UNKNOWN_EVENT_TYPE, EXTRA_FIELDS, BURST, NO_REDIRECT, STATE_URL)

PASS, FAIL, SKIP = "pass", "fail", "skip"

BURST_DELIVERIES = 200      # the burst: this many deliveries ...
BURST_CONCURRENCY = 20      # ... this many at a time
RUN_TIMEOUT = 300.0         # wall seconds for the whole run; later deliveries are not sent
MAX_TIMEOUTS = 3            # after this many timed-out deliveries, nothing more is sent
STATE_SETTLE = 5.0          # wall seconds the state URL gets to show what was accepted
STATE_POLL = 0.25
CONTROL_TIMEOUT = 60.0      # wall seconds for one call to a running sandbox (--url)
ANSWER_EXCERPT = 200        # characters of an answer's body kept for the report
SHOWN_PROBLEMS = 4          # problems named in a check's line (the JSON has them all)

FUTURE_EVENT_TYPE = "sandbox-future-event"   # a type the spec does not have (yet)
EXTENSION_HEADER = "ce-sandboxcheck"          # a CloudEvents extension attribute nobody knows
PREFERRED_TYPE = "task-status-updated"        # carries an outcome the state URL can show
OUTCOME_TYPES = ("task-status-updated", "task-status-patched")
# The real tasks of out-of-order, per product: a success, a failure after the login (a
# pay-link change-plan where it fits, else an unreadable answer) and a patched failure.
ORDER_SCENARIOS = ("happy-path", ("action-failed", "unexpected-response"), "task-status-patched")
CARRIER_SCENARIO = "happy-path"   # the real task a triggered task event names (fits every product)

VALID, WRONG, NONE = "valid", "wrong", "none"   # how a delivery was signed
ENDPOINTS = "/_sandbox/webhooks/endpoints"


class CheckerError(ValueError):
    """The arguments cannot make a run (a bad URL, an unknown event type)."""


# -- what the report holds --------------------------------------------------------------------

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
        return self.status is not None and 200 <= self.status < 300

    @property
    def redirect(self) -> bool:
        return self.status is not None and 300 <= self.status < 400

    def outcome(self) -> str:
        """`200 in 3 ms`, `302 to https://... in 2 ms`, `timeout after 15s`, ..."""
        if self.status is None:
            return str(self.error)
        text = f"{self.status}"
        if self.redirect:
            text += f" to {self.location or '(no location)'}"
        text += f" in {_ms(self.latency_ms)}"
        if not self.ok and self.answer:
            text += f" ({_excerpt(self.answer, 60)})"
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
        return {c.name for c in self.checks if c.status == FAIL}

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


# -- entry points ------------------------------------------------------------------------------

def check_handler(url: str, secret: str | None = None, events: Iterable[str] | str | None = None,
                  state_url: str | None = None, **options: Any) -> Report:
    """Run every check against the webhook handler at `url` and return the report.

    `secret`: what the handler verifies `x-hmac-signature-sha-256` with; without it, the
    bundled default tenant's API secret (`default_secret()`), and the report says so first.
    `events`: only these event types (names or one comma-separated string).
    `state_url`: a URL answering `{"outcomes": [{"task", "status", "reason"}, ...]}`.
    `products`: the products whose tasks the handler deals with (names or one
    comma-separated string; default every one a task can be made for): task events name
    tasks of these only, and the state URL is judged on their outcomes only.
    `sandbox_url`, `api_key`, `api_secret`: make the events on that running sandbox, in a
    temporary tenant made with these keys (its vendor, event names, companies and
    scenarios), instead of an in-process one.
    `options`: `timeout` (per delivery, 15 s), `burst` (200), `concurrency` (20),
    `run_timeout` (300 s), `state_settle` (how long the state URL may take to show what
    it accepted, 5 s), `seed` (random). From a running event loop, await
    `check_handler_async` instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(check_handler_async(url, secret, events, state_url, **options))
    raise RuntimeError("check_handler() blocks: inside a running event loop, "
                       "await check_handler_async() instead")


async def check_handler_async(url: str, secret: str | None = None,
                              events: Iterable[str] | str | None = None,
                              state_url: str | None = None, *,
                              products: Iterable[str] | str | None = None,
                              sandbox_url: str | None = None, api_key: str | None = None,
                              api_secret: str | None = None,
                              timeout: float = ATTEMPT_TIMEOUT, burst: int = BURST_DELIVERIES,
                              concurrency: int = BURST_CONCURRENCY,
                              run_timeout: float = RUN_TIMEOUT,
                              state_settle: float = STATE_SETTLE,
                              seed: int | None = None) -> Report:
    """`check_handler`, awaitable."""
    url = checked_url(url, "URL")
    state_url = checked_url(state_url, "--state-url") if state_url else None
    if sandbox_url is not None:
        sandbox_url = checked_url(sandbox_url, "--url")
        if not (api_key and api_secret):
            raise CheckerError("--url needs --api-key and --api-secret: the keys of a tenant "
                               "of that sandbox")
    elif api_key is not None or api_secret is not None:
        raise CheckerError("--api-key and --api-secret are keys of a running sandbox: give "
                           "its --url too")
    if not (timeout > 0 and run_timeout > 0 and burst >= 1 and concurrency >= 1):
        raise CheckerError("timeout, run_timeout, burst and concurrency must be positive")
    started = time.monotonic()
    seed = secrets.randbits(31) if seed is None else seed
    signing = secret if secret is not None else default_secret()
    async with new_session(limit=concurrency) as session:
        source = (InProcessSource(seed) if sandbox_url is None
                  else RemoteSource(session, sandbox_url, api_key, api_secret, seed))
        async with source:
            selected = select_types(events, source.types)
            chosen = await source.select_products(products)
            sender = Sender(session, url, source.vendor, signing, timeout,
                            deadline=started + run_timeout, run_timeout=run_timeout)
            run = Run(source, sender, selected, chosen, secret_given=secret is not None,
                      burst=burst, concurrency=concurrency, state_settle=state_settle)
            checks = [await run.every_event_type(), await run.wrong_signature(),
                      await run.missing_signature(), await run.duplicate_delivery(),
                      await run.out_of_order(), await run.unknown_event_type(),
                      await run.extra_fields(), await run.burst(), run.no_redirect(),
                      await run.state(state_url)]
    note = None
    if secret is None:
        note = (f"signing with the bundled default tenant's secret ({signing}), as its "
                "webhooks are signed; pass --secret with the one your handler verifies "
                "x-hmac-signature-sha-256 with if it is another")
    return Report(url=url, checks=tuple(checks), secret_given=secret is not None,
                  signing_note=note, event_types=tuple(selected), state_url=state_url,
                  seed=seed, elapsed_s=time.monotonic() - started, vendor=source.vendor,
                  sandbox_url=source.sandbox_url, cleanup_note=source.cleanup_note,
                  products=tuple(chosen), products_named=products is not None)


def default_secret() -> str:
    """The bundled default tenant's API secret: what that tenant's webhooks are signed
    with, as `listen` and `trigger` default to its keys."""
    return default_credentials()[1]


def checked_url(url: str, flag: str) -> str:
    problem = http_url_problem(url)
    if problem is not None:
        raise CheckerError(f"{flag} {url!r} {problem}" if problem.startswith("is ")
                           else f"{flag} {url!r}: {problem}")
    return url


def names_of(value: Iterable[str] | str) -> set[str]:
    """Names given as a list or as one comma-separated string."""
    names = value.split(",") if isinstance(value, str) else list(value)
    return {n.strip() for n in names if n.strip()}


def select_types(events: Iterable[str] | str | None, known: list[str]) -> list[str]:
    """The event types to check: all, or the named ones in the spec's order."""
    if events is None:
        return list(known)
    wanted = names_of(events)
    unknown = sorted(wanted - set(known))
    if unknown:
        raise CheckerError(f"--events: no event type is named {', '.join(unknown)} "
                           f"(known: {', '.join(known)})")
    if not wanted:
        raise CheckerError("--events names no event type")
    return [t for t in known if t in wanted]


# -- the events --------------------------------------------------------------------------------

class EventSource(ABC):
    """Where the suite's events come from: an in-process sandbox (`InProcessSource`) or a
    running one (`RemoteSource`, `--url`). Either way each event is a `domain.events.Event`
    as that sandbox made it; the checks see only this interface. Used as `async with`:
    a remote source makes its temporary tenant on entry and deletes it on exit."""

    vendor: str            # ce-source com.<vendor>, ce-type com.<vendor>.<eventType>
    types: list[str]       # every event type, in the spec's order, as that sandbox names them
    products: list[str]    # every product of its service profile, in the profile's order
    scenarios: list[dict[str, Any]]   # its scenarios as GET /_sandbox/scenarios lists them
    sandbox_url: str | None = None
    cleanup_note: str | None = None   # what was left behind on the sandbox, if anything

    def __init__(self) -> None:
        self._reasons: dict[str, int] = {}         # product -> failure reasons used so far
        self._companies: dict[str, str | None] = {}  # product -> a company taking its tasks

    async def __aenter__(self) -> EventSource:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        return None

    async def select_products(self, products: Iterable[str] | str | None) -> list[str]:
        """The products to check, in the profile's order: the named ones, or every one
        some company of the sandbox takes a task of."""
        wanted = set(self.products) if products is None else names_of(products)
        unknown = sorted(wanted - set(self.products))
        if unknown:
            raise CheckerError(f"--products: no product is named {', '.join(unknown)} "
                               f"(known: {', '.join(self.products)})")
        if not wanted:
            raise CheckerError("--products names no product")
        chosen = []
        for product in (p for p in self.products if p in wanted):
            if await self.company_for(product) is not None:
                chosen.append(product)
            elif products is not None:
                raise CheckerError(f"--products: no company of the sandbox takes a {product} "
                                   "task (none that offers it is operational and open to it)")
        if not chosen:
            raise CheckerError("no company of the sandbox takes a task of any product")
        return chosen

    def fits(self, scenario: str, product: str) -> bool:
        """Whether the sandbox runs `scenario` for a task of `product` (its scenario files)."""
        return any(s["name"] == scenario and product in (s.get("products") or ())
                   for s in self.scenarios)

    def reasons(self, product: str) -> list[str]:
        """The failure reasons a task of `product` can end with: those of the scenarios that
        fit it, in the spec's order."""
        found = {step["reason"] for s in self.scenarios if product in (s.get("products") or ())
                 for step in s["steps"] if step.get("reason")}
        return [r for r in FAILURE_REASONS if r in found]

    async def company_for(self, product: str) -> str | None:
        """An operational company that takes a task of `product` (found once)."""
        if product not in self._companies:
            self._companies[product] = await self._company_for(product)
        return self._companies[product]

    async def trigger(self, event_type: str, *, product: str | None = None,
                      failed: bool = False) -> Event:
        """A new event of this type, as POST /_sandbox/events/trigger makes it. A task
        event names a real task of `product` (run through happy-path); `failed`: a
        task-status-updated with a failure reason of that product's scenarios, each in turn."""
        request: dict[str, Any] = {"eventType": event_type}
        if event_type in TASK_EVENT_DATA:
            product = product or self.products[0]
            request["taskId"] = (await self.run_task(CARRIER_SCENARIO, product))[0]
            reasons = self.reasons(product)
            if failed and event_type == "task-status-updated" and reasons:
                turn = self._reasons.get(product, 0)
                self._reasons[product] = turn + 1
                request["data"] = {"status": "failed", "reason": reasons[turn % len(reasons)]}
        return await self._trigger(request)

    async def task_events(self, scenario: str, product: str) -> list[Event]:
        """The task events of one real task of `product` run through `scenario`, in
        emission order."""
        task_id, events = await self.run_task(scenario, product)
        return [e for e in events if e.type in TASK_EVENT_DATA and e.task == task_id]

    @abstractmethod
    async def _company_for(self, product: str) -> str | None:
        """An operational company that takes a task of `product`, or None."""

    @abstractmethod
    async def run_task(self, scenario: str, product: str) -> tuple[str, list[Event]]:
        """A task of `product` at `company_for(product)` run through `scenario` to its
        end: its id and its events."""

    @abstractmethod
    async def _trigger(self, request: dict[str, Any]) -> Event:
        """What POST /_sandbox/events/trigger makes of `request`."""

    @abstractmethod
    def emit(self, event_type: str, body: dict[str, Any]) -> Event:
        """An event with this body, not checked against any schema (a future type, or
        fields the spec does not have): the trigger refuses those."""

    @abstractmethod
    def user(self, identifier: str) -> dict[str, str]:
        """A user's `{"_id", "identifier"}` for an event `emit` makes."""

    @abstractmethod
    def object_id(self) -> str:
        """A new id in the sandbox's format (24 hex digits)."""


class InProcessSource(EventSource):
    """Realistic events from an in-process sandbox: its default tenant on a manual clock,
    with no endpoint (the checker sends, the sandbox only makes and records)."""

    def __init__(self, seed: int) -> None:
        from .app import create_app
        from .keys import SANDBOX
        from .settings import Settings

        super().__init__()
        sandbox = create_app(Settings(clock="manual", seed=seed))[SANDBOX]
        self.tenant = sandbox.registry.tenants.default()
        self.tenant.webhooks.set_endpoints([], new_id=None)  # the checker sends its events itself
        self.vendor = sandbox.registry.service.vendor
        self.aggregator = sandbox.registry.service.aggregator
        self.types = event_types(self.aggregator)
        self.products = list(sandbox.registry.service.products)
        self.scenarios = [s.describe() for s in self.tenant.rules.scenarios.values()]

    async def _trigger(self, request: dict[str, Any]) -> Event:
        from .domain.triggers import trigger_event

        return trigger_event(self.tenant, self.aggregator, request)

    def emit(self, event_type: str, body: dict[str, Any]) -> Event:
        fields = {k: v for k, v in body.items() if k not in ("eventType", "eventTime")}
        return self.tenant.emit(event_type, **fields)

    def user(self, identifier: str) -> dict[str, str]:
        return {"_id": self.tenant.user(identifier).id, "identifier": identifier}

    def object_id(self) -> str:
        return self.tenant.ids.object_id()

    async def _company_for(self, product: str) -> str | None:
        from .errors import ApiError

        for company in self.tenant.companies.ordered():
            if company.status != OPERATIONAL or product not in company.available_products:
                continue
            try:  # maintenance for this product, manual deposits: the next one
                self.tenant.tasks.check_company_accepts(company, product, "$.product")
            except ApiError:
                continue
            return company.id
        return None

    async def run_task(self, scenario: str, product: str) -> tuple[str, list[Event]]:
        _, tasks = self.tenant.tasks.create_task(
            {"identifier": f"check-{product}", "product": product,
             "company": await self.company_for(product), "scenario": scenario})
        await self.tenant.runner.run_until_idle()
        return tasks[0].id, list(self.tenant.events.query(task=tasks[0].id))


class SandboxAnswer(CheckerError):
    """A running sandbox answered a call with an error `status`."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class RemoteSource(EventSource):
    """Realistic events from a running sandbox (`--url`), so they carry its service profile
    (vendor, the aggregator's event names), its companies and its scenarios.

    The caller's keys make a temporary tenant there (POST /_sandbox/tenants), named from
    the run's seed: a tenant's ids are seeded by the server's seed and the tenant's name,
    so no `ce-id` repeats between runs. It has no endpoint at all (not even
    `--webhook-url`): the server makes and records, the checker sends. Events come from
    its control plane (trigger; real tasks through /task/create and run-until-idle, read
    back from GET /_sandbox/events) and the tenant is deleted on exit, whatever ended the
    run. Anything the server refuses or cannot answer is a CheckerError of one line."""

    def __init__(self, session: Any, base_url: str, api_key: str, api_secret: str,
                 seed: int) -> None:
        super().__init__()
        self.session = session
        self.sandbox_url = self.base = base_url.rstrip("/")
        self.name = f"check-handler-{seed}"
        self.sandbox = self._client(api_key, api_secret)  # the caller's keys
        self.created = False
        self._ids = random.Random(seed)
        self._users: dict[str, dict[str, str]] = {}
        self._now = 0.0   # the latest virtual time seen there: when events made here happen

    async def __aenter__(self) -> RemoteSource:
        health = await self._call("GET", "/health")
        vendor = health.get("vendor") if isinstance(health, dict) else None
        if not isinstance(vendor, str) or not vendor:
            raise CheckerError(f"--url {self.base}: GET /health does not name the vendor (a "
                               "payroll-sandbox older than this checker?)")
        self.vendor = vendor
        self.types = await self._call("GET", "/_sandbox/schemas/events")
        tenant = await self._call("POST", "/_sandbox/tenants", {"name": self.name})
        self.name, self.created = tenant["name"], True
        self.sandbox = self._client(tenant["apiKey"], tenant["apiSecret"])
        try:
            await self._call("PUT", ENDPOINTS, {"endpoints": []})
            self._now = (await self._call("GET", "/_sandbox/clock"))["timestamp"]
            self.scenarios = await self._call("GET", "/_sandbox/scenarios")
            # The default scenario fits every product of the service profile, in its order.
            default = next((s for s in self.scenarios if s.get("name") == CARRIER_SCENARIO), {})
            if not isinstance(default.get("products"), list):
                raise CheckerError(f"--url {self.base}: GET /_sandbox/scenarios does not say "
                                   "which products a scenario fits (a payroll-sandbox older "
                                   "than this checker?)")
            self.products = default["products"]
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        """Deletes the temporary tenant. When that fails the run's outcome stands (or the
        error that ended it goes on): the report names the tenant left behind."""
        if not self.created:
            return
        try:
            await self._call("DELETE", f"/_sandbox/tenants/{quote(self.name, safe='')}")
            self.created = False
        except CheckerError as error:
            self.cleanup_note = (f"the temporary tenant {self.name} was not deleted ({error}); "
                                 f"DELETE /_sandbox/tenants/{self.name} removes it")

    async def _trigger(self, request: dict[str, Any]) -> Event:
        return self._event(await self._call("POST", "/_sandbox/events/trigger", request))

    def emit(self, event_type: str, body: dict[str, Any]) -> Event:
        fields = {k: v for k, v in body.items() if k not in ("eventType", "eventTime")}
        return Event(id=str(uuid.UUID(int=self._ids.getrandbits(128), version=4)),
                     type=event_type, time=self._now,
                     body=event_body(event_type, self._now, **fields), sequence=0)

    def user(self, identifier: str) -> dict[str, str]:
        if identifier not in self._users:
            self._users[identifier] = {"_id": self.object_id(), "identifier": identifier}
        return self._users[identifier]

    def object_id(self) -> str:
        return f"{self._ids.getrandbits(96):024x}"

    async def _company_for(self, product: str) -> str | None:
        skip = 0
        while True:
            page = await self._call("GET", "/company/list",
                                    query={"product": product, "limit": 1000, "skip": skip})
            for company in page:
                if company["status"] != OPERATIONAL:
                    continue
                try:  # the one way to know that this account takes the task there
                    await self._create_task(CARRIER_SCENARIO, product, company["_id"])
                except SandboxAnswer as refused:
                    if 400 <= refused.status < 500 and refused.status not in (401, 429):
                        continue  # maintenance for this product, manual deposits: next
                    raise
                return company["_id"]
            if len(page) < 1000:
                return None
            skip += len(page)

    async def run_task(self, scenario: str, product: str) -> tuple[str, list[Event]]:
        task_id = await self._create_task(scenario, product, await self.company_for(product))
        clock = await self._call("POST", "/_sandbox/clock/run-until-idle")
        while not clock["complete"]:  # stopped at the server's work limit: go on
            clock = await self._call("POST", "/_sandbox/clock/run-until-idle")
        records = await self._call("GET", "/_sandbox/events",
                                   query={"task": task_id, "limit": 10000})
        return task_id, [self._event(r) for r in records]

    async def _create_task(self, scenario: str, product: str, company: str | None) -> str:
        created = await self._call("POST", "/task/create", {
            "identifier": f"check-{product}", "company": company, "product": product,
            "scenario": scenario})
        return created["id"]

    def _event(self, record: dict[str, Any]) -> Event:
        """A record of GET /_sandbox/events as the Event the server keeps: the same id,
        type and time, and the body as the same compact JSON (sent byte for byte)."""
        at = round(parse_time(record["time"], "$.time"), 3)
        self._now = max(self._now, at)
        return Event(id=record["id"], type=record["eventType"], time=at, body=record["body"],
                     sequence=record["sequence"], user=record.get("userIdentifier"),
                     task=record.get("task"))

    def _client(self, api_key: str, api_secret: str) -> SandboxClient:
        return SandboxClient(self.base, api_key, api_secret, session=self.session,
                             timeout=CONTROL_TIMEOUT)

    async def _call(self, method: str, path: str, body: Any = None, *,
                    query: dict[str, Any] | None = None) -> Any:
        """One control-plane (or API) call with the current keys; its `data`."""
        where = f"the sandbox at {self.base}"
        try:
            answer = await self.sandbox.answer(method, path, body, query=query, strict=True)
        except CannotReach as error:
            raise CheckerError(str(error).replace(self.base, where, 1)) from None
        except NotASandbox as error:
            raise CheckerError(f"--url {error}") from None
        except SandboxError as error:
            if error.status == 401:
                raise SandboxAnswer(f"{where} refused the keys ({error.line}); --api-key and "
                                    "--api-secret are a tenant's keys there", 401) from None
            raise SandboxAnswer(f"{where} answered {method} {path} with {error.line}",
                                error.status) from None
        return answer.data


# -- sending -----------------------------------------------------------------------------------

class Sender:
    """Sends one event as an attempt of the dispatcher would, within the run's bounds:
    each delivery times out after `timeout`; past the run's deadline, or after
    MAX_TIMEOUTS timed-out deliveries, nothing more is sent (and the report says so)."""

    def __init__(self, session: Any, url: str, vendor: str, secret: str, timeout: float, *,
                 deadline: float, run_timeout: float) -> None:
        self.session = session
        self.url = url
        self.vendor = vendor
        self.secret = secret
        self.timeout = timeout
        self.deadline = deadline
        self.run_timeout = run_timeout
        self.timeouts = 0
        self.log: list[Delivery] = []   # every delivery of the run, for no-redirect

    def message(self, event: Any, signature: str = VALID,
                extra_headers: dict[str, str] | None = None) -> tuple[dict[str, str], bytes]:
        message = to_message(event, self.vendor, self.secret)
        headers = dict(message.headers)
        if signature == WRONG:
            headers[SIGNATURE_HEADER] = sign(message.body, f"not-{self.secret}")
        elif signature == NONE:
            del headers[SIGNATURE_HEADER]
        headers.update(extra_headers or {})
        return headers, message.body

    def stopped(self) -> str | None:
        """Why nothing more is sent, if so."""
        if self.timeouts >= MAX_TIMEOUTS:
            return (f"not sent: {self.timeouts} deliveries timed out already, the run stopped "
                    "sending")
        if time.monotonic() >= self.deadline:
            return f"not sent: the run's bound of {self.run_timeout:g}s was reached"
        return None

    async def send(self, event: Any, signature: str = VALID,
                   extra_headers: dict[str, str] | None = None,
                   message: tuple[dict[str, str], bytes] | None = None) -> Delivery:
        headers, body = message or self.message(event, signature, extra_headers)
        delivery = await self._post(event.type, headers["ce-id"], signature, headers, body)
        self.log.append(delivery)
        return delivery

    async def _post(self, event_type: str, ce_id: str, signature: str, headers: dict[str, str],
                    body: bytes) -> Delivery:
        why = self.stopped()
        if why:
            return Delivery(event_type, ce_id, signature, error=why, sent=False)
        limit = min(self.timeout, self.deadline - time.monotonic())
        outcome = await post(self.session, self.url, headers, body, timeout=limit)
        error = None if outcome.failure is None else outcome.failure.reason
        if outcome.failure is not None and outcome.failure.kind == TIMEOUT:
            if limit < self.timeout:
                error = f"not answered when the run's bound of {self.run_timeout:g}s was reached"
            else:
                self.timeouts += 1
        return Delivery(event_type, ce_id, signature, status=outcome.status,
                        latency_ms=outcome.latency_ms, error=error, location=outcome.location,
                        answer=outcome.excerpt.decode("utf-8", "replace")[:ANSWER_EXCERPT])


# -- the checks --------------------------------------------------------------------------------

@dataclass
class Outcome:
    """A task outcome the handler accepted: what its state should show."""

    status: str
    reason: str | None
    time: str           # eventTime: the latest one is the task's outcome
    check: str


class Run:
    """One run of the suite: the checks in order, and the task outcomes they sent."""

    def __init__(self, source: EventSource, sender: Sender, selected: list[str],
                 products: list[str], *, secret_given: bool, burst: int, concurrency: int,
                 state_settle: float = STATE_SETTLE) -> None:
        self.source = source
        self.sender = sender
        self.selected = selected
        self.products = products
        self._turn = 0                             # the product of the next task event
        self.burst_size = burst
        self.concurrency = concurrency
        self.state_settle = state_settle
        self.timeout = sender.timeout
        self.outcomes: dict[str, Outcome] = {}     # task -> the outcome it should show
        self.forged: dict[str, str] = {}           # task -> the check that forged it
        self.preferred = PREFERRED_TYPE if PREFERRED_TYPE in selected else selected[0]
        self.signed_with = ("--secret" if secret_given
                            else "the bundled default tenant's secret")

    async def trigger(self, event_type: str, *, failed: bool = False) -> Event:
        """A new event of this type; a task event names a task of the next product in turn."""
        product = None
        if event_type in TASK_EVENT_DATA:
            product = self.products[self._turn % len(self.products)]
            self._turn += 1
        return await self.source.trigger(event_type, product=product, failed=failed)

    async def deliver(self, check: str, event: Any, signature: str = VALID,
                      **options: Any) -> Delivery:
        delivery = await self.sender.send(event, signature, **options)
        self._remember(check, event, delivery)
        return delivery

    def _remember(self, check: str, event: Any, delivery: Delivery) -> None:
        body = event.body
        if event.type not in OUTCOME_TYPES or body.get("product") not in self.products:
            return  # only the outcomes of the products the handler deals with are judged
        task, data = body["task"], body["data"]
        if delivery.signature != VALID:
            self.forged[task] = check
        elif delivery.ok:
            known = self.outcomes.get(task)
            if known is None or body["eventTime"] >= known.time:
                self.outcomes[task] = Outcome(data["status"], data.get("reason"),
                                              body["eventTime"], check)

    # every-event-type

    async def every_event_type(self) -> CheckResult:
        deliveries = []
        for event_type in self.selected:
            event = await self.trigger(event_type)
            deliveries.append(await self.deliver(EVERY_EVENT_TYPE, event))
        bad = [d for d in deliveries if not d.ok]
        answered = [d for d in deliveries if d.latency_ms is not None and d.status is not None]
        received = f"2xx from {len(deliveries) - len(bad)} of {len(deliveries)}"
        if answered:
            slowest = max(answered, key=lambda d: d.latency_ms or 0)
            received += (f" (median {_ms(statistics.median(d.latency_ms for d in answered))}, "
                         f"slowest {_ms(slowest.latency_ms)}: {slowest.event_type})")
        if bad:
            received += "; " + _grouped(bad)
        return CheckResult(
            EVERY_EVENT_TYPE, FAIL if bad else PASS,
            f"{len(deliveries)} deliveries, one per event type (task events of "
            f"{', '.join(self.products)} tasks in turn), signed with {self.signed_with}",
            received, f"answers each with a 2xx within {self.timeout:g}s",
            deliveries=tuple(deliveries))

    # wrong-signature, missing-signature

    async def wrong_signature(self) -> CheckResult:
        return await self._forged(
            WRONG_SIGNATURE, WRONG, f"signed with a secret other than {self.signed_with}",
            "a forged delivery",
            "refuses a signature that does not match with a 4xx (401 or 403), unprocessed")

    async def missing_signature(self) -> CheckResult:
        return await self._forged(
            MISSING_SIGNATURE, NONE, f"with no {SIGNATURE_HEADER} header", "an unsigned delivery",
            "refuses an unsigned delivery with a 4xx (401 or 403), unprocessed")

    async def _forged(self, name: str, signature: str, how: str, what: str,
                      expected: str) -> CheckResult:
        event = await self.trigger(self.preferred, failed=True)
        delivery = await self.deliver(name, event, signature)
        passed = delivery.status is not None and 400 <= delivery.status < 500
        received = delivery.outcome()
        if delivery.ok:
            received += f": {what} was accepted"
        return CheckResult(name, PASS if passed else FAIL,
                           f"{event.type} (ce-id {delivery.ce_id}) {how}", received, expected,
                           deliveries=(delivery,))

    # duplicate-delivery

    async def duplicate_delivery(self) -> CheckResult:
        event = await self.trigger(self.preferred, failed=True)
        message = self.sender.message(event)
        first = await self.deliver(DUPLICATE_DELIVERY, event, message=message)
        second = await self.deliver(DUPLICATE_DELIVERY, event, message=message)
        passed = first.ok and second.ok
        return CheckResult(
            DUPLICATE_DELIVERY, PASS if passed else FAIL,
            f"{event.type} (ce-id {first.ce_id}) twice, the same headers and body",
            f"{first.outcome()}, then {second.outcome()}",
            "answers 2xx both times and processes it once (it remembers the ce-ids it handled)",
            deliveries=(first, second))

    # out-of-order

    async def out_of_order(self) -> CheckResult:
        expected = ("answers 2xx whatever the order, and keeps each task's latest state by "
                    "eventTime")
        tasks = []
        for product in self.products:
            for choice in ORDER_SCENARIOS:  # the first that fits the product
                scenario = next((n for n in (choice if isinstance(choice, tuple) else (choice,))
                                 if self.source.fits(n, product)), None)
                if scenario is None:
                    continue
                events = [e for e in await self.source.task_events(scenario, product)
                          if e.type in self.selected]
                if len(events) >= 2:
                    tasks.append(events)
        if not tasks:
            return CheckResult(OUT_OF_ORDER, SKIP, "nothing", "nothing", expected,
                               note="--events selects fewer than two event types of one task")
        deliveries = []
        for events in tasks:
            for event in reversed(events):   # newest first: the final status overtakes the rest
                deliveries.append(await self.deliver(OUT_OF_ORDER, event))
        bad = [d for d in deliveries if not d.ok]
        received = f"2xx to {len(deliveries) - len(bad)} of {len(deliveries)}"
        if bad:
            received += "; " + _grouped(bad)
        return CheckResult(
            OUT_OF_ORDER, FAIL if bad else PASS,
            f"{len(deliveries)} events of {len(tasks)} real {', '.join(self.products)} tasks, "
            "each task's newest first (the final status before the authentication, a patch "
            "before the status it corrects)",
            received, expected, deliveries=tuple(deliveries))

    # unknown-event-type

    async def unknown_event_type(self) -> CheckResult:
        identifier = "check-future"
        event = self.source.emit(FUTURE_EVENT_TYPE, {
            "user": self.source.user(identifier),
            "data": {"linkedAccount": self.source.object_id(),
                     "note": "an event type this handler was written before"}})
        delivery = await self.deliver(UNKNOWN_EVENT_TYPE, event)
        return CheckResult(
            UNKNOWN_EVENT_TYPE, PASS if delivery.ok else FAIL,
            f"{FUTURE_EVENT_TYPE} (ce-type com.{self.source.vendor}.{FUTURE_EVENT_TYPE}), a type "
            "the spec does not have yet", delivery.outcome(),
            "answers 2xx and ignores a type it does not know (a 4xx or 5xx fails every attempt "
            "of every such event)", deliveries=(delivery,))

    # extra-fields

    async def extra_fields(self) -> CheckResult:
        body = (await self.trigger(self.preferred)).body
        body["sandboxCheckAddedField"] = {"added": "later"}
        for part in ("data", "user", "company"):
            if isinstance(body.get(part), dict):
                body[part]["sandboxCheckAddedField"] = "later"
        event = self.source.emit(body["eventType"], body)
        delivery = await self.deliver(EXTRA_FIELDS, event,
                                      extra_headers={EXTENSION_HEADER: "added-later"})
        places = ", ".join(p for p in ("data", "user", "company") if isinstance(body.get(p), dict))
        return CheckResult(
            EXTRA_FIELDS, PASS if delivery.ok else FAIL,
            f"{event.type} (ce-id {delivery.ce_id}) with an unknown field at the top level"
            f"{f' and in {places}' if places else ''}, and an "
            f"unknown CloudEvents extension header {EXTENSION_HEADER}", delivery.outcome(),
            "answers 2xx and ignores fields it does not know (forward compatibility)",
            deliveries=(delivery,))

    # burst

    async def burst(self) -> CheckResult:
        types = self.selected
        events = [await self.trigger(types[i % len(types)], failed=i % 2 == 1)
                  for i in range(self.burst_size)]
        slots = asyncio.Semaphore(self.concurrency)

        async def one(event: Any) -> Delivery:
            async with slots:
                return await self.deliver(BURST, event)

        deliveries = await asyncio.gather(*(one(e) for e in events))
        latencies = sorted(d.latency_ms for d in deliveries if d.sent and d.latency_ms is not None)
        p99 = _percentile(latencies, 0.99)
        counts: dict[str, int] = {}
        for d in deliveries:
            kind = (f"{d.status // 100}xx" if d.status is not None
                    else "not sent" if not d.sent else _error_kind(d.error))
            counts[kind] = counts.get(kind, 0) + 1
        passed = all(d.ok for d in deliveries) and p99 is not None and p99 < self.timeout * 1000
        received = (f"2xx to all {len(deliveries)}" if counts.get("2xx") == len(deliveries)
                    else ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())))
        if latencies:
            received += (f"; p50 {_ms(_percentile(latencies, 0.5))}, p99 {_ms(p99)}, "
                         f"max {_ms(latencies[-1])}")
        fivexx = counts.get("5xx", 0)
        return CheckResult(
            BURST, PASS if passed else FAIL,
            f"{len(deliveries)} deliveries of {len(types)} event types, {self.concurrency} at a "
            "time", received,
            f"answers every one 2xx (no 5xx) with p99 latency under the {self.timeout:g}s "
            "timeout: acknowledge first, work after",
            deliveries=tuple(deliveries),
            details={"p99Ms": p99, "fiveXx": fivexx, "counts": counts})

    # no-redirect

    def no_redirect(self) -> CheckResult:
        log = self.sender.log
        answered = [d for d in log if d.status is not None]
        redirects = [d for d in answered if d.redirect]
        expected = ("answers directly: the service never follows a redirect, so a 3xx fails "
                    "the delivery")
        sent = (f"every delivery of this run ({sum(1 for d in log if d.sent)}), redirects not "
                "followed")
        if not answered:
            return CheckResult(NO_REDIRECT, FAIL, sent, "no HTTP answer at all", expected)
        if redirects:
            received = f"{len(redirects)} redirects: " + _grouped(redirects)
        else:
            received = f"no 3xx among {len(answered)} answers"
        return CheckResult(NO_REDIRECT, FAIL if redirects else PASS, sent, received, expected,
                           deliveries=tuple(redirects))

    # state-url

    async def state(self, state_url: str | None) -> CheckResult:
        expected = ("stores each task's final status and reason exactly once, from correctly "
                    "signed deliveries only")
        if state_url is None:
            return CheckResult(STATE_URL, SKIP, "nothing", "nothing", expected,
                               note="no --state-url")
        sent = (f"GET {state_url} after the run, to compare with the {len(self.outcomes)} task "
                f"outcomes it accepted" + (f" and the {len(self.forged)} forged ones"
                                          if self.forged else ""))
        problems, error = await self._read_state(state_url)
        if error:
            return CheckResult(STATE_URL, FAIL, sent, error, expected)
        received = (f"each of the {len(self.outcomes)} tasks stored once, with the status and "
                    "reason sent" if not problems else _problems(problems))
        return CheckResult(STATE_URL, FAIL if problems else PASS, sent, received, expected,
                           details={"problems": problems})

    async def _read_state(self, state_url: str) -> tuple[list[str], str | None]:
        """Problems of the state, read again until it has none or STATE_SETTLE has passed
        (a handler may store in the background after it answered)."""
        import aiohttp

        settle_until = min(time.monotonic() + self.state_settle, self.sender.deadline)
        while True:
            limit = min(self.timeout, self.sender.deadline - time.monotonic())
            if limit <= 0:
                return [], f"not read: the run's bound of {self.sender.run_timeout:g}s was reached"
            try:
                async with self.sender.session.get(
                        state_url, allow_redirects=False,
                        timeout=aiohttp.ClientTimeout(total=limit)) as response:
                    status, raw = response.status, await response.read()
            except asyncio.TimeoutError:
                return [], f"no answer within {limit:g}s"
            except (aiohttp.ClientError, OSError, ValueError) as error:
                return [], f"{type(error).__name__}: {error}"
            if status != 200:
                return [], f"{status} ({_excerpt(raw.decode('utf-8', 'replace'), 60)})"
            try:
                import orjson

                outcomes = orjson.loads(raw)["outcomes"]
                rows = [(o["task"], o.get("status"), o.get("reason")) for o in outcomes]
            except (ValueError, KeyError, TypeError):
                return [], ('not {"outcomes": [{"task", "status", "reason"}, ...]}: '
                            + _excerpt(raw.decode("utf-8", "replace"), 60))
            problems = self._compare(rows)
            if not problems or time.monotonic() >= settle_until:
                return problems, None
            await asyncio.sleep(STATE_POLL)

    def _compare(self, rows: list[tuple[Any, Any, Any]]) -> list[str]:
        stored: dict[str, list[tuple[Any, Any]]] = {}
        for task, status, reason in rows:
            stored.setdefault(task, []).append((status, reason))
        # A forged outcome stored first: what a handler must never do comes first.
        problems = [f"task {task} stored from a forged delivery ({check})"
                    for task, check in self.forged.items() if task in stored]
        for task, outcome in self.outcomes.items():
            found = stored.get(task, [])
            sent = outcome.status + (f"/{outcome.reason}" if outcome.reason else "")
            if not found:
                problems.append(f"task {task} ({outcome.check}) missing, sent {sent}")
            elif len(found) > 1:
                problems.append(f"task {task} ({outcome.check}) stored {len(found)} times")
            elif found[0] != (outcome.status, outcome.reason):
                status, reason = found[0]
                problems.append(f"task {task} ({outcome.check}) stored "
                                f"{status}{f'/{reason}' if reason else ''}, sent {sent}")
        return problems


# -- small helpers -----------------------------------------------------------------------------

def _percentile(values: list[float], fraction: float) -> float | None:
    """Nearest rank of sorted `values`."""
    if not values:
        return None
    return values[max(0, math.ceil(fraction * len(values)) - 1)]


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def _excerpt(text: str, size: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[:size - 3] + "..."


def _grouped(deliveries: list[Delivery]) -> str:
    """What came back, each answer once with the event types that got it:
    `401 ({"error": ...}) for task-status-updated, ... and 29 more`."""
    groups: dict[str, list[str]] = {}
    for d in deliveries:
        if d.status is None:
            key = str(d.error)
        else:
            key = str(d.status) + (f" to {d.location}" if d.redirect else "")
            key += f" ({_excerpt(d.answer, 60)})" if d.answer and not d.ok else ""
        types = groups.setdefault(key, [])
        if d.event_type not in types:
            types.append(d.event_type)
    return "; ".join(f"{key} for {_problems(types, ', ')}" for key, types in groups.items())


def _problems(items: list[str], separator: str = "; ") -> str:
    shown = separator.join(items[:SHOWN_PROBLEMS])
    more = len(items) - SHOWN_PROBLEMS
    return shown + (f"; and {more} more" if more > 0 else "")


def _error_kind(error: str | None) -> str:
    if error and error.startswith("timeout"):
        return "timeouts"
    if error and error.startswith("not answered"):
        return "cut by the run's bound"
    return "connection errors"

