"""The transport of every tenant's webhook outbox (domain/outbox.py): one aiohttp session
for all of them.

The outbox decides what is sent and when; this sends it. Between two jobs of a tenant's
runner, and after a request, `settle` (or `flush`) takes the attempts the tenant's outbox
queued and sends each as one task: up to 15 seconds, redirects never followed, only a 2xx
counts, the answer read up to a bound (spec: Events, Delivery; Limits). Each answer goes
back to the outbox, whose policy makes the delivery done, failed or retried.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import socket
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from ..domain.events import Event
from ..domain.outbox import (FAILED, INTERRUPTED, INTERRUPTED_ATTEMPT, PENDING,
                             RETRY_INTERVAL, Attempt, Delivery, FaultPlan, Outbox, Send)
from ..domain.tenants import Tenant
from ..redact import loggable_url
from .cloudevents import to_message
from .policy import OutboundPolicy, OutboundRefused, PolicyResolver

log = logging.getLogger("payroll_sandbox.webhooks")

ATTEMPT_TIMEOUT = 15.0    # virtual seconds per attempt
CONNECTIONS = 256         # attempts in flight at once, over every tenant
TENANT_CONNECTIONS = 32   # of those, one tenant's at most: slow endpoints of one tenant
                          # never hold up another tenant's deliveries
SHUTDOWN_GRACE = 5.0      # wall seconds attempts in flight get to finish at shutdown
ANSWER_READ = 4096        # bytes of a receiver's answer read; past them the connection closes

__all__ = ["ATTEMPT_TIMEOUT", "Attempt", "Delivery", "Dispatcher", "FaultPlan",
           "INTERRUPTED_ATTEMPT", "PENDING", "SHUTDOWN_GRACE", "dns_failure", "request_headers"]


def dns_failure(error: Exception) -> bool:
    """Whether a failure to connect was a failed DNS lookup: aiohttp >= 3.10.10 raises
    ClientConnectorDNSError; before it, a ClientConnectorError over socket.gaierror."""
    import aiohttp

    dns_error = getattr(aiohttp, "ClientConnectorDNSError", None)
    return ((dns_error is not None and isinstance(error, dns_error))
            or isinstance(getattr(error, "os_error", None), socket.gaierror))


@dataclass
class _Lane:
    """One outbox's attempts in flight (their tasks) and its share of the connections."""

    tasks: dict[asyncio.Task, Send] = field(default_factory=dict)
    slots: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(TENANT_CONNECTIONS))


class Dispatcher:
    """Sends what every tenant's outbox queues; one aiohttp session for all of them."""

    def __init__(self, *, vendor: str, timeout: float, seed: int,
                 default_url: str | None = None, policy: OutboundPolicy | None = None) -> None:
        self.vendor = vendor
        self.policy = policy or OutboundPolicy()  # where webhooks may go (policy.py)
        self.timeout = timeout        # wall seconds per attempt
        self.seed = seed
        self.default_url = default_url
        self._session: Any = None
        # Attempts wait here for a connection, so the timeout counts only the attempt.
        self._slots = asyncio.Semaphore(CONNECTIONS)
        self._in_flight: set[asyncio.Task] = set()  # every tenant's attempts in flight
        self._lanes: weakref.WeakKeyDictionary[Outbox, _Lane] = weakref.WeakKeyDictionary()
        self.closing = False

    # -- wiring -----------------------------------------------------------------------------

    def outbox_for(self, tenant: Tenant) -> Outbox:
        """A tenant's outbox as its account makes it: its endpoints (and, for an account of
        the fixtures, `--webhook-url`: a tenant the control plane made gets only its own),
        no faults, a fault roll seeded by the tenant's name."""
        endpoints = [dict(e) for e in tenant.webhook_endpoints]
        if (self.default_url and tenant.from_fixtures
                and not any(e["url"] == self.default_url for e in endpoints)):
            endpoints.append({"url": self.default_url})
        # Stable ids, seeded: GET /webhooks/endpoints and the control plane name them.
        endpoints = [{"_id": tenant.ids.object_id(), **e} if "_id" not in e else e
                     for e in endpoints]
        return Outbox(tenant, endpoints, random.Random(f"{self.seed}:{tenant.name}:faults"))

    async def start(self) -> None:
        import aiohttp

        self._attempt_timeout = aiohttp.ClientTimeout(total=self.timeout)
        # No cookie jar: a webhook sender does not carry cookies from one delivery to the next.
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None), cookie_jar=aiohttp.DummyCookieJar(),
            connector=aiohttp.TCPConnector(limit=CONNECTIONS, force_close=False,
                                           resolver=PolicyResolver(self.policy)))

    async def stop(self, tenants: Any = (), grace: float = SHUTDOWN_GRACE) -> None:
        """Stop sending: attempts in flight get `grace` seconds to finish; the rest, and
        every delivery of `tenants` still waiting for a retry, are recorded as interrupted."""
        if self.closing:
            return
        self.closing = True
        tasks = list(self._in_flight)
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=grace)
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
            for task in list(lane.tasks):
                task.cancel()

    def running(self, outbox: Outbox) -> list[asyncio.Task]:
        """The tasks of the outbox's attempts in flight (to wait for, or to watch)."""
        lane = self._lanes.get(outbox)
        return list(lane.tasks) if lane is not None else []

    # -- sending ----------------------------------------------------------------------------

    def flush(self, outbox: Outbox) -> None:
        """Send every attempt the outbox has queued, each as a task of its own."""
        if not outbox.queue:
            return
        lane = self._lanes.get(outbox)
        if lane is None:
            lane = self._lanes[outbox] = _Lane()
        loop = asyncio.get_running_loop()
        for send in outbox.take():
            try:
                message = to_message(send.event, self.vendor, outbox.signing_key(send.delivery))
            except Exception as error:  # on the ledger, not lost: no retry can fix it
                outbox.not_built(send, f"{type(error).__name__}: {error}")
                log.error("delivery %s of event %s to %s failed: %s (tenant %s)",
                          send.delivery.id, send.event.id, send.delivery.url,
                          send.attempt.error, outbox.tenant.name)
                continue
            task = loop.create_task(self._send(outbox, lane, send, message))
            lane.tasks[task] = send
            self._in_flight.add(task)
            task.add_done_callback(lambda done: (lane.tasks.pop(done, None),
                                                 self._in_flight.discard(done)))

    async def settle(self, tenant: Tenant, before: float = math.inf) -> None:
        """Send what the tenant's outbox queued, then wait, for all of them together, until
        no attempt of it is in flight that could schedule a retry at or before the virtual
        time `before` (an attempt started at t retries at t + RETRY_INTERVAL); by default,
        until none is in flight."""
        outbox = tenant.webhooks
        while True:
            self.flush(outbox)
            lane = self._lanes.get(outbox)
            if lane is None:
                return
            # In start order (a tenant's clock only moves forward): the oldest decides.
            waiting = []
            for task, send in lane.tasks.items():
                if send.attempt.time + RETRY_INTERVAL > before:
                    break
                waiting.append(task)
            if not waiting:
                return
            await asyncio.gather(*waiting, return_exceptions=True)

    async def _send(self, outbox: Outbox, lane: _Lane, send: Send, message: Any) -> None:
        delivery, event, attempt = send
        try:
            async with lane.slots, self._slots:
                attempt.wall_time = time.time()
                await self._post(delivery, attempt, message)
        except asyncio.CancelledError:
            outbox.interrupted(send)
            log.warning("delivery %s of event %s to %s interrupted by shutdown during attempt %d "
                        "(tenant %s)", delivery.id, delivery.event_id, loggable_url(delivery.url),
                        attempt.number, outbox.tenant.name)
            raise
        outbox.answered(send, stopping=self.closing)
        if attempt.fault != "duplicate" and delivery.state == INTERRUPTED:
            log.warning("delivery %s of event %s to %s interrupted by shutdown after %d attempts "
                        "(tenant %s)", delivery.id, event.id, loggable_url(delivery.url),
                        len(delivery.attempts), outbox.tenant.name)
        elif attempt.fault != "duplicate" and delivery.state == FAILED:
            log.info("delivery of %s to %s failed after %d attempts: %s", event.id,
                     loggable_url(delivery.url), len(delivery.attempts), attempt.error)
        self.flush(outbox)  # what the answer queued (the duplicate fault's extra copy)

    async def _post(self, delivery: Delivery, attempt: Attempt, message: Any) -> None:
        import aiohttp

        started = time.perf_counter()
        try:
            if self._session is None or self.closing:
                attempt.error = INTERRUPTED_ATTEMPT  # never sent: the sandbox is stopping
                return
            refused = self._refused(delivery.url)
            if refused is not None:
                attempt.error = refused  # never connected: the same whatever listens there
                return
            # The timeout bounds the whole attempt, the answer's body included; only its first
            # ANSWER_READ bytes are read (a receiver streaming without end costs nothing).
            async with asyncio.timeout(self.timeout), self._session.post(
                    delivery.url, data=message.body, headers=message.headers,
                    allow_redirects=False, timeout=self._attempt_timeout) as response:
                await _read_some(response)
                attempt.status = response.status
                if 300 <= response.status < 400:
                    location = response.headers.get("location", "")
                    attempt.error = f"redirect not followed ({response.status} to {location})"
                elif not 200 <= response.status < 300:
                    attempt.error = f"non-2xx response {response.status}"
        except asyncio.TimeoutError:
            attempt.error = f"timeout after {self.timeout:g}s"
        except aiohttp.ClientConnectorError as error:
            if isinstance(error.os_error, OutboundRefused):
                attempt.error = str(error.os_error)  # every address the name has is refused
            elif dns_failure(error):
                attempt.error = f"DNS lookup failed for {error.host}: {error.os_error}"
            else:
                # Refused, or another failure to connect (unreachable, TLS): what the OS said.
                what = ("connection refused" if isinstance(error.os_error, ConnectionRefusedError)
                        else f"cannot connect to {error.host}:{error.port}")
                attempt.error = f"{what}: {error.os_error}"
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError,
                aiohttp.ClientPayloadError) as error:
            attempt.error = f"connection reset: {error}"
        except (aiohttp.ClientError, OSError, ValueError) as error:
            attempt.error = f"{type(error).__name__}: {error}"
        finally:
            attempt.latency_ms = round((time.perf_counter() - started) * 1000, 3)

    def _refused(self, url: str) -> str | None:
        """The policy's refusal of a URL (a literal address, a denied name, the sandbox
        itself but for its demo receiver)."""
        import yarl

        return self.policy.url_problem(yarl.URL(url))

async def _read_some(response: Any) -> None:
    """Reads at most ANSWER_READ bytes of an answer and drops them; a longer answer closes
    the connection instead of being read to its end (nothing of it is kept)."""
    left = ANSWER_READ
    while left > 0:
        chunk = await response.content.read(left)
        if not chunk:
            return
        left -= len(chunk)
    if not response.content.at_eof():
        response.close()


def request_headers(tenant: Tenant, event: Event, vendor: str,
                    delivery: Delivery | None = None) -> dict[str, str]:
    """The headers every attempt of the delivery sent (the same for each: not stored; the
    same for every delivery of the event but for a signature with an endpoint's own
    secret); none when the request could not be built (its attempt says why)."""
    try:
        return to_message(event, vendor, tenant.webhooks.signing_key(delivery)).headers
    except Exception:
        return {}
