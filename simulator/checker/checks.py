"""The check-handler suite: ten checks in a fixed order, each sending what a correct handler
must cope with and judging what came back (README: Checking your webhook handler).

Task events are of the products the handler deals with (`products`, `--products`; by
default every product a task can be made for there): each names a real task of one of
them, in turn, at a company that offers it, with a failure reason a scenario fitting that
product ends with; the real tasks of `out-of-order` run scenarios that fit their product;
`state-url` judges the outcomes of those tasks only.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..domain.webhooks.events import Event
from ..domain.webhooks.event_types import TASK_EVENTS
from ..transport.cloudevents import SIGNATURE_HEADER
from .delivering import NONE, VALID, WRONG, Deliverer
from .report import FAIL, PASS, SKIP, CheckResult, Delivery, excerpt, grouped, listed, ms
from .sources import EventSource
from .state import Row, StateShapeError, state_rows

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

BURST_DELIVERIES = 200      # the burst: this many deliveries ...
BURST_CONCURRENCY = 20      # ... this many at a time
STATE_SETTLE = 5.0          # wall seconds the state URL gets to show what was accepted
STATE_POLL = 0.25

FUTURE_EVENT_TYPE = "sandbox-future-event"   # a type the spec does not have (yet)
EXTENSION_HEADER = "ce-sandboxcheck"          # a CloudEvents extension attribute nobody knows
PREFERRED_TYPE = "task-status-updated"        # carries an outcome the state URL can show
OUTCOME_TYPES = ("task-status-updated", "task-status-patched")
# The real tasks of out-of-order, per product: a success, a failure after the login (a
# pay-link change-plan where it fits, else an unreadable answer) and a patched failure.
ORDER_SCENARIOS = ("happy-path", ("action-failed", "unexpected-response"), "task-status-patched")


@dataclass
class Outcome:
    """A task outcome the handler accepted: what its state should show."""

    status: str
    reason: str | None
    time: str           # eventTime: the latest one is the task's outcome
    check: str


class Suite:
    """One run of the suite: the checks in order, and the task outcomes they sent."""

    def __init__(self, source: EventSource, deliverer: Deliverer, selected: list[str],
                 products: list[str], *, secret_given: bool, burst: int, concurrency: int,
                 state_settle: float = STATE_SETTLE) -> None:
        self.source = source
        self.deliverer = deliverer
        self.selected = selected
        self.products = products
        self._turn = 0                             # the product of the next task event
        self.burst_size = burst
        self.concurrency = concurrency
        self.state_settle = state_settle
        self.timeout = deliverer.timeout
        self.outcomes: dict[str, Outcome] = {}     # task -> the outcome it should show
        self.forged: dict[str, str] = {}           # task -> the check that forged it
        self.preferred = PREFERRED_TYPE if PREFERRED_TYPE in selected else selected[0]
        self.signed_with = ("--secret" if secret_given
                            else "the bundled default tenant's secret")

    async def trigger(self, event_type: str, *, failed: bool = False) -> Event:
        """A new event of this type; a task event names a task of the next product in turn."""
        product = None
        if event_type in TASK_EVENTS:
            product = self.products[self._turn % len(self.products)]
            self._turn += 1
        return await self.source.trigger(event_type, product=product, failed=failed)

    async def deliver(self, check: str, event: Any, signature: str = VALID,
                      **options: Any) -> Delivery:
        delivery = await self.deliverer.send(event, signature, **options)
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
        deliveries = [await self.deliver(EVERY_EVENT_TYPE, await self.trigger(event_type))
                      for event_type in self.selected]
        bad = [d for d in deliveries if not d.ok]
        answered = [d for d in deliveries if d.latency_ms is not None and d.status is not None]
        received = f"2xx from {len(deliveries) - len(bad)} of {len(deliveries)}"
        if answered:
            slowest = max(answered, key=lambda d: d.latency_ms or 0)
            received += (f" (median {ms(statistics.median(d.latency_ms for d in answered))}, "
                         f"slowest {ms(slowest.latency_ms)}: {slowest.event_type})")
        if bad:
            received += "; " + grouped(bad)
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
        message = self.deliverer.message(event)
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
        # Each task's newest first: the final status overtakes the rest.
        deliveries = [await self.deliver(OUT_OF_ORDER, event)
                      for events in tasks for event in reversed(events)]
        bad = [d for d in deliveries if not d.ok]
        received = f"2xx to {len(deliveries) - len(bad)} of {len(deliveries)}"
        if bad:
            received += "; " + grouped(bad)
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
        counts = dict(Counter(f"{d.status // 100}xx" if d.status is not None
                              else "not sent" if not d.sent else _error_kind(d.error)
                              for d in deliveries))
        passed = all(d.ok for d in deliveries) and p99 is not None and p99 < self.timeout * 1000
        received = (f"2xx to all {len(deliveries)}" if counts.get("2xx") == len(deliveries)
                    else ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())))
        if latencies:
            received += (f"; p50 {ms(_percentile(latencies, 0.5))}, p99 {ms(p99)}, "
                         f"max {ms(latencies[-1])}")
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
        log = self.deliverer.log
        answered = [d for d in log if d.status is not None]
        redirects = [d for d in answered if d.redirect]
        expected = ("answers directly: the service never follows a redirect, so a 3xx fails "
                    "the delivery")
        sent = (f"every delivery of this run ({sum(1 for d in log if d.sent)}), redirects not "
                "followed")
        if not answered:
            return CheckResult(NO_REDIRECT, FAIL, sent, "no HTTP answer at all", expected)
        if redirects:
            received = f"{len(redirects)} redirects: " + grouped(redirects)
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
                    "reason sent" if not problems else listed(problems))
        return CheckResult(STATE_URL, FAIL if problems else PASS, sent, received, expected,
                           details={"problems": problems})

    async def _read_state(self, state_url: str) -> tuple[list[str], str | None]:
        """Problems of the state, read again until it has none or STATE_SETTLE has passed
        (a handler may store in the background after it answered)."""
        import aiohttp

        settle_until = min(time.monotonic() + self.state_settle, self.deliverer.deadline)
        while True:
            limit = min(self.timeout, self.deliverer.deadline - time.monotonic())
            if limit <= 0:
                return [], f"not read: the run's bound of {self.deliverer.run_timeout:g}s was reached"
            try:
                async with self.deliverer.session.get(
                        state_url, allow_redirects=False,
                        timeout=aiohttp.ClientTimeout(total=limit)) as response:
                    status, raw = response.status, await response.read()
            except asyncio.TimeoutError:
                return [], f"no answer within {limit:g}s"
            except (aiohttp.ClientError, OSError, ValueError) as error:
                return [], f"{type(error).__name__}: {error}"
            if status != 200:
                return [], f"{status} ({excerpt(raw.decode('utf-8', 'replace'), 60)})"
            try:
                import orjson

                rows = state_rows(orjson.loads(raw))
            except StateShapeError as error:
                return [], f"{error}: {excerpt(raw.decode('utf-8', 'replace'), 60)}"
            except ValueError:
                return [], f"not JSON: {excerpt(raw.decode('utf-8', 'replace'), 60)}"
            problems = self._compare(rows)
            if not problems or time.monotonic() >= settle_until:
                return problems, None
            await asyncio.sleep(STATE_POLL)

    def _compare(self, rows: list[Row]) -> list[str]:
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


def _percentile(values: list[float], fraction: float) -> float | None:
    """Nearest rank of sorted `values`."""
    if not values:
        return None
    return values[max(0, math.ceil(fraction * len(values)) - 1)]


def _error_kind(error: str | None) -> str:
    if error and error.startswith("timeout"):
        return "timeouts"
    if error and error.startswith("not answered"):
        return "cut by the run's bound"
    return "connection errors"
