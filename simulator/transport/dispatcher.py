"""The transport of every tenant's webhook outbox (domain/outbox.py): one aiohttp session
for all of them.

The outbox decides what is sent and when; this sends it. Between two jobs of a tenant's
runner, and after a request, `settle` (or `flush`) takes the attempts the tenant's outbox
queued and sends each as one task once a connection is free (until then it waits, in
order, costing nothing): up to 15 seconds, redirects never followed, only a 2xx
counts, the answer read up to a bound (spec: Events, Delivery; Limits). Each answer goes
back to the outbox, whose policy makes the delivery done, failed or retried.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import math
import random
import time
import weakref
from collections.abc import Callable
from typing import Any

import msgspec

from ..domain.webhooks.events import Event
from ..domain.webhooks.outbox import (FAILED, INTERRUPTED, INTERRUPTED_ATTEMPT,
                             RETRY_INTERVAL, Answer, Delivery, Outbox, Send)
from ..domain.tenants import Tenant
from .redact import loggable_url
from . import SHUTDOWN_GRACE
from .cloudevents import OutboundMessage, to_message, to_plain_message
from .policy import OutboundPolicy, PolicyResolver
from .sender import ANSWER_READ, new_session, post

log = logging.getLogger("payroll_sandbox.webhooks")

ATTEMPT_TIMEOUT = 15.0    # virtual seconds per attempt
CONNECTIONS = 256         # attempts in flight at once, over every tenant
TENANT_CONNECTIONS = 32   # of those, one tenant's at most: slow endpoints of one tenant
                          # never hold up another tenant's deliveries

__all__ = ["ATTEMPT_TIMEOUT", "Dispatcher", "SHUTDOWN_GRACE", "request_headers"]


class _Lane(msgspec.Struct):
    """One outbox's attempts: those in flight (their tasks, at most TENANT_CONNECTIONS) and,
    in order behind them, those waiting for a connection (not yet tasks)."""

    tasks: dict[asyncio.Task, Send] = msgspec.field(default_factory=dict)
    waiting: collections.deque[tuple[Send, Any]] = msgspec.field(default_factory=collections.deque)
    blocked: bool = False  # waiting for a connection of all tenants' (Dispatcher._blocked)


class Dispatcher:
    """Sends what every tenant's outbox queues; one aiohttp session for all of them."""

    def __init__(self, *, vendor: str, timeout: float, seed: int,
                 default_url: str | None = None, policy: OutboundPolicy | None = None,
                 grace: float = SHUTDOWN_GRACE) -> None:
        self.vendor = vendor
        self.policy = policy or OutboundPolicy()  # where webhooks may go (policy.py)
        self.timeout = timeout        # wall seconds per attempt
        self.grace = grace            # wall seconds attempts in flight get at shutdown
        self.seed = seed
        self.default_url = default_url
        self._session: Any = None
        self._in_flight: set[asyncio.Task] = set()  # every tenant's attempts in flight
        self._lanes: weakref.WeakKeyDictionary[Outbox, _Lane] = weakref.WeakKeyDictionary()
        # Lanes with attempts waiting while CONNECTIONS are in flight, first come first on.
        self._blocked: collections.deque[tuple[Outbox, _Lane]] = collections.deque()
        self.closing = False

    # -- wiring -----------------------------------------------------------------------------

    def outbox_for(self, tenant: Tenant) -> Outbox:
        """A tenant's outbox as its account makes it: its endpoints (and `--webhook-url` for
        an account of the fixtures but the demo: a tenant the control plane made gets only
        its own), no faults, a fault roll seeded by the tenant's name."""
        endpoints = [dict(e) for e in tenant.webhook_endpoints]
        if (self.default_url and tenant.takes_webhook_url
                and not any(e["url"] == self.default_url for e in endpoints)):
            endpoints.append({"url": self.default_url})
        # Stable ids, seeded: GET /webhooks/endpoints and the control plane name them.
        endpoints = [{"_id": tenant.ids.object_id(), **e} if "_id" not in e else e
                     for e in endpoints]
        return Outbox(name=tenant.name, clock=tenant.clock, timeline=tenant.timeline,
                      changes=tenant.changes, api_secret=tenant.api_secret,
                      signing=tenant.account_signing, endpoints=endpoints,
                      fault_roll=random.Random(f"{self.seed}:{tenant.name}:faults"))

    async def start(self) -> None:
        self._session = new_session(limit=CONNECTIONS, resolver=PolicyResolver(self.policy))

    def stopping(self) -> bool:
        """Whether the server is stopping: a tenant's runner then stops between two jobs."""
        return self.closing

    async def stop(self, tenants: Any = ()) -> None:
        """Stop sending: attempts in flight get `self.grace` seconds to finish; the rest, and
        every delivery of `tenants` still waiting for a retry, are recorded as interrupted."""
        if self.closing:
            return
        self.closing = True
        for outbox, lane in list(self._lanes.items()):  # never started: cut off now
            self._interrupt_waiting(outbox, lane)
        tasks = list(self._in_flight)
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=self.grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for tenant in tenants:
            for delivery in tenant.webhooks.interrupt_pending():
                log.warning("delivery %s of event %s to %s interrupted by shutdown "
                            "(tenant %s, %d attempts made)", delivery.id, delivery.event_id,
                            loggable_url(delivery.url), tenant.name, len(delivery.attempts))

    async def close(self) -> None:
        await self.stop()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def cancel(self, outbox: Outbox) -> None:
        """The tenant is reset or deleted: its attempts in flight stop (recorded as
        interrupted on the outbox that made them)."""
        lane = self._lanes.pop(outbox, None)
        if lane is not None:
            self._interrupt_waiting(outbox, lane)
            for task in list(lane.tasks):
                task.cancel()

    def _interrupt_waiting(self, outbox: Outbox, lane: _Lane) -> None:
        while lane.waiting:
            self._interrupted(outbox, lane.waiting.popleft()[0])

    def running(self, outbox: Outbox) -> list[asyncio.Task]:
        """The tasks of the outbox's attempts in flight (to wait for, or to watch)."""
        lane = self._lanes.get(outbox)
        return list(lane.tasks) if lane is not None else []

    # -- sending ----------------------------------------------------------------------------

    def flush(self, outbox: Outbox) -> None:
        """Send every attempt the outbox has queued, each as a task of its own once one of
        the tenant's connections (and one of all tenants') is free; until then it waits in
        the lane, in order, and costs nothing."""
        if not outbox.queue:
            return
        # get, not setdefault: setdefault would build a lane on every flush to throw it away
        lane = self._lanes.get(outbox)
        if lane is None:
            lane = self._lanes[outbox] = _Lane()
        for send in outbox.take():
            try:
                message = message_of(send.event, self.vendor, outbox.signing_key(send.delivery),
                                     _signed_now(outbox))
            except Exception as error:  # on the ledger, not lost: no retry can fix it
                outbox.not_built(send, f"{type(error).__name__}: {error}")
                log.error("delivery %s of event %s to %s failed: %s (tenant %s)",
                          send.delivery.id, send.event.id, send.delivery.url,
                          send.attempt.error, outbox.name)
                continue
            lane.waiting.append((send, message))
        self._start(outbox, lane)

    def _start(self, outbox: Outbox, lane: _Lane) -> None:
        """The lane's waiting attempts start while its connections and all tenants' allow."""
        loop = asyncio.get_running_loop()
        while lane.waiting and len(lane.tasks) < TENANT_CONNECTIONS:
            if len(self._in_flight) >= CONNECTIONS:
                if not lane.blocked:  # on again when any attempt lands
                    lane.blocked = True
                    self._blocked.append((outbox, lane))
                return
            send, message = lane.waiting.popleft()
            task = loop.create_task(self._send(outbox, send, message))
            lane.tasks[task] = send
            self._in_flight.add(task)
            task.add_done_callback(functools.partial(self._finished, outbox, lane))

    def _finished(self, outbox: Outbox, lane: _Lane, task: asyncio.Task) -> None:
        lane.tasks.pop(task, None)
        if not lane.tasks:
            lane.tasks = {}  # an emptied table starts over (see Outbox._landed)
        self._in_flight.discard(task)
        if lane.waiting and self._lanes.get(outbox) is lane:  # not cancelled meanwhile
            self._start(outbox, lane)
        while self._blocked and len(self._in_flight) < CONNECTIONS:
            blocked, blocked_lane = self._blocked.popleft()
            blocked_lane.blocked = False
            if self._lanes.get(blocked) is blocked_lane:
                self._start(blocked, blocked_lane)

    async def settle(self, tenant: Tenant, before: float = math.inf) -> None:
        """Send what the tenant's outbox queued, then wait, for all of them together, until
        no attempt of it is in flight or waiting that could schedule a retry at or before
        the virtual time `before` (an attempt started at t retries at t + RETRY_INTERVAL);
        by default, until none is."""
        outbox = tenant.webhooks
        while True:
            self.flush(outbox)
            lane = self._lanes.get(outbox)
            if lane is None:
                return
            # In start order (a tenant's clock only moves forward): the oldest decides.
            waiting = []
            for task, send in lane.tasks.items():  # a loop: settle runs between any two jobs
                if send.attempt.time + RETRY_INTERVAL > before:
                    break
                waiting.append(task)
            if waiting:
                await asyncio.gather(*waiting, return_exceptions=True)
            elif (lane.waiting and self._in_flight
                  and lane.waiting[0][0].attempt.time + RETRY_INTERVAL <= before):
                # Every connection is another tenant's: the first of them to land lets it on.
                await asyncio.wait(list(self._in_flight), return_when=asyncio.FIRST_COMPLETED)
            else:
                return

    async def _send(self, outbox: Outbox, send: Send, message: Any) -> None:
        delivery, event, attempt = send
        left = time.time()
        try:
            answer = await self._post(delivery.url, message, left)
        except asyncio.CancelledError:
            self._interrupted(outbox, send, left)
            raise
        outbox.answered(send, answer, stopping=self.closing)
        if attempt.fault != "duplicate" and delivery.state == INTERRUPTED:
            log.warning("delivery %s of event %s to %s interrupted by shutdown after %d attempts "
                        "(tenant %s)", delivery.id, event.id, loggable_url(delivery.url),
                        len(delivery.attempts), outbox.name)
        elif attempt.fault != "duplicate" and delivery.state == FAILED:
            log.info("delivery of %s to %s failed after %d attempts: %s", event.id,
                     loggable_url(delivery.url), len(delivery.attempts), attempt.error)
        self.flush(outbox)  # what the answer queued (the duplicate fault's extra copy)

    def _interrupted(self, outbox: Outbox, send: Send, left: float | None = None) -> None:
        """An attempt cut off in flight (it left at `left`) or before it started (reset,
        delete, shutdown)."""
        outbox.interrupted(send, left)
        delivery = send.delivery
        log.warning("delivery %s of event %s to %s interrupted by shutdown during attempt %d "
                    "(tenant %s)", delivery.id, delivery.event_id, loggable_url(delivery.url),
                    send.attempt.number, outbox.name)

    async def _post(self, url: str, message: Any, left: float) -> Answer:
        """One attempt's request sent to `url`, and what came of it, as a value: the outbox
        writes it on the attempt's record (Outbox.answered)."""
        started = time.perf_counter()

        def answer(status: int | None = None, error: str | None = None) -> Answer:
            return Answer(left, status, error, round((time.perf_counter() - started) * 1000, 3))

        if self._session is None or self.closing:
            return answer(error=INTERRUPTED_ATTEMPT)  # never sent: the sandbox is stopping
        refused = self.policy.attempt_problem(url)
        if refused is not None:
            return answer(error=refused)  # never connected: the same whatever listens there
        # The timeout bounds the whole attempt, the answer's body included; only its first
        # ANSWER_READ bytes are read (a receiver streaming without end costs nothing).
        outcome = await post(self._session, url, message.headers, message.body,
                             timeout=self.timeout, read_limit=ANSWER_READ)
        if outcome.failure is not None:
            return answer(outcome.status, str(outcome.failure))
        if outcome.redirect:
            return answer(outcome.status, f"redirect not followed ({outcome.status} to "
                                          f"{outcome.location or ''})")
        if not outcome.ok:
            return answer(outcome.status, f"non-2xx response {outcome.status}")
        return answer(outcome.status)


def message_of(event: Event, vendor: str, signing_secret: str | None = None,
               plain_signer: Callable[[bytes], dict[str, str]] | None = None) -> OutboundMessage:
    """The request that delivers `event`: its CloudEvent, or for another API's webhook (the
    aggregator's own, `event.url` set) its JSON as that API sends it, signed by
    `plain_signer` when given."""
    if event.url is None:
        return to_message(event, vendor, signing_secret)
    return to_plain_message(event, plain_signer)


def _signed_now(outbox: Outbox) -> Callable[[bytes], dict[str, str]] | None:
    """The outbox's signer of another API's webhooks, issuing its token now: each attempt
    (a retry, a replay) is signed afresh when it leaves, on the wall clock, as the receiver
    checks its age against its own clock (domain/links/aggregator_keys.py)."""
    signer = outbox.plain_signer
    if signer is None:
        return None
    return lambda body: signer(body, int(time.time()))


def request_headers(tenant: Tenant, event: Event, vendor: str,
                    delivery: Delivery | None = None) -> dict[str, str]:
    """The headers every attempt of the delivery sent (the same for each: not stored; the
    same for every delivery of the event but for a signature with an endpoint's own
    secret); none when the request could not be built (its attempt says why)."""
    try:
        return message_of(event, vendor, tenant.webhooks.signing_key(delivery)).headers
    except Exception:
        return {}
