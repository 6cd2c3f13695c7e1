"""Delivering events to the customer's endpoints with the spec's retry policy.

Up to 3 attempts in total, 30 seconds apart on the tenant's clock, each with a
15-second timeout; redirects are never followed and only a 2xx counts (spec:
Events, Delivery; Limits). Every delivery and attempt is recorded before and
after it happens, so nothing is lost without a record.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from ..clock import isoformat
from ..domain.changes import EVENT
from ..errors import Conflict, NotFound, ValidationFailed, field_detail
from ..domain.events import Event
from ..domain.tenants import Tenant
from ..domain.timeline import action_kind
from ..redact import loggable_url
from .cloudevents import to_message
from .policy import OutboundPolicy, OutboundRefused, PolicyResolver

log = logging.getLogger("payroll_sandbox.webhooks")

MAX_ATTEMPTS = 3          # the first plus two retries
RETRY_INTERVAL = 30.0     # virtual seconds between attempts
ATTEMPT_TIMEOUT = 15.0    # virtual seconds per attempt
CONNECTIONS = 256         # attempts in flight at once, over every tenant
TENANT_CONNECTIONS = 32   # of those, one tenant's at most: slow endpoints of one tenant
                          # never hold up another tenant's deliveries
SHUTDOWN_GRACE = 5.0      # wall seconds attempts in flight get to finish at shutdown
ANSWER_READ = 4096        # bytes of a receiver's answer read; past them the connection closes

PENDING, DELIVERED, FAILED, INTERRUPTED = "pending", "delivered", "failed", "interrupted"
MAX_ENDPOINTS = 50        # a tenant's webhook endpoints (the control plane's list too)
MAX_SECRETS = 50          # a tenant's signing secrets

UNKNOWN_ENDPOINT = "No webhook endpoint has the id {endpoint_id!r}."
UNKNOWN_SECRET = "No signing secret has the id {secret_id!r} (GET /secrets lists them)."
TOO_MANY_ENDPOINTS = f"A tenant has at most {MAX_ENDPOINTS} webhook endpoints; delete one first."
TOO_MANY_SECRETS = f"A tenant has at most {MAX_SECRETS} signing secrets; delete one first."
SECRET_IN_USE = ("The signing secret {secret_id!r} signs the webhooks of endpoints {endpoints}; "
                 "point them elsewhere first.")
DUPLICATE_ID = "Two endpoints have the id {endpoint_id!r}."


class WebhookEndpointNotFound(NotFound):
    code = "webhook-endpoint-not-found"


class SecretNotFound(NotFound):
    code = "secret-not-found"


class SecretInUse(Conflict):
    code = "secret-in-use"
INTERRUPTED_ATTEMPT = "interrupted: the sandbox stopped during the attempt"


def dns_failure(error: Exception) -> bool:
    """Whether a failure to connect was a failed DNS lookup: aiohttp >= 3.10.10 raises
    ClientConnectorDNSError; before it, a ClientConnectorError over socket.gaierror."""
    import aiohttp

    dns_error = getattr(aiohttp, "ClientConnectorDNSError", None)
    return ((dns_error is not None and isinstance(error, dns_error))
            or isinstance(getattr(error, "os_error", None), socket.gaierror))


@dataclass(slots=True)
class Attempt:
    number: int
    time: float          # virtual, when it started
    wall_time: float     # wall clock, when it left (after waiting for a connection)
    status: int | None = None
    latency_ms: float | None = None
    error: str | None = None
    fault: str | None = None   # a delivery fault injected on purpose (duplicate, ...)

    def record(self, request_headers: dict[str, str]) -> dict[str, Any]:
        return {"number": self.number, "time": isoformat(self.time),
                "wallTime": isoformat(self.wall_time),
                "requestHeaders": request_headers, "status": self.status,
                "latencyMs": self.latency_ms, "error": self.error, "fault": self.fault}


@dataclass(slots=True, weakref_slot=True)
class Delivery:
    event_id: str
    number: int          # 1, 2, ... among the event's deliveries (endpoints, replays)
    url: str
    state: str = PENDING
    replay: bool = False
    attempts: list[Attempt] = field(default_factory=list)
    next_attempt_at: str | None = None
    faults: tuple[str, ...] = ()  # the faults injected on purpose (most deliveries: none)
    secret_id: str | None = None  # the endpoint's signing secret (None: the API secret)

    @property
    def id(self) -> str:
        """`<event id>.<number>`: unique, and made only when asked for (not stored)."""
        return f"{self.event_id}.{self.number}"

    def record(self, request_headers: dict[str, str]) -> dict[str, Any]:
        """The delivery as GET /_sandbox/events shows it (camelCase, as the API writes).
        Every attempt sent the same headers (the event's message): kept once, by the caller."""
        return {"id": self.id, "eventId": self.event_id, "url": self.url, "state": self.state,
                "replay": self.replay,
                "attempts": [a.record(request_headers) for a in self.attempts],
                "nextAttemptAt": self.next_attempt_at, "faults": list(self.faults)}


@dataclass(frozen=True)
class FaultPlan:
    """Delivery faults on purpose, per tenant, deterministic from the seed."""

    duplicate: float = 0.0      # probability that a delivered event is sent once more
    out_of_order: float = 0.0   # probability that an event is held back behind the next one
    delay: float = 0.0          # probability that the first attempt waits `delay_seconds`
    delay_seconds: float = 60.0

    def record(self) -> dict[str, float]:
        return {"duplicate": self.duplicate, "outOfOrder": self.out_of_order, "delay": self.delay,
                "delaySeconds": self.delay_seconds}


@dataclass
class TenantWebhooks:
    """One tenant's webhook state: endpoints, deliveries by event, faults, work in flight.

    Each endpoint is `{_id, url, eventTypes?, secretId?}` (no eventTypes: every type); the
    control plane's list and the API's /webhooks/endpoints are the same endpoints. A
    signing secret (`secrets`, GET /secrets) is `{_id, name, token, createdAt}`."""

    endpoints: list[dict[str, Any]]
    deliveries: dict[str, list[Delivery]] = field(default_factory=dict)
    faults: FaultPlan = FaultPlan()
    random: random.Random = field(default_factory=random.Random)
    in_flight: dict[asyncio.Task, float] = field(default_factory=dict)  # -> virtual start
    slots: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(TENANT_CONNECTIONS))
    held: list[tuple[Delivery, Event]] = field(default_factory=list)
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> secret

    def endpoints_for(self, event_type: str) -> list[str]:
        return list(self.targets_for(event_type))

    def targets_for(self, event_type: str) -> dict[str, str | None]:
        """URL -> the signing secret's id (None: the API secret) of every endpoint the
        event type goes to; a URL registered twice gets one delivery (the first's)."""
        targets: dict[str, str | None] = {}
        for endpoint in self.endpoints:
            types = endpoint.get("eventTypes")
            if (types is None or event_type in types) and endpoint["url"] not in targets:
                targets[endpoint["url"]] = endpoint.get("secretId")
        return targets

    # -- endpoints and secrets (GET/PUT /_sandbox/webhooks/endpoints, /webhooks/endpoints,
    #    /secrets); URLs and event types are checked by the caller ----------------------------

    def set_endpoints(self, endpoints: list[dict[str, Any]], new_id: Any) -> list[dict[str, Any]]:
        """The control plane's PUT: the whole list. An endpoint keeps the `_id` it names,
        else the id of the endpoint that had its URL, else gets a new one (`new_id()`)."""
        self._check_secrets(endpoints, "$.endpoints[{n}].secretId")
        named = {e["_id"] for e in endpoints if "_id" in e}
        old = {e["url"]: e["_id"] for e in reversed(self.endpoints) if e["_id"] not in named}
        made, seen = [], set()
        for n, endpoint in enumerate(endpoints):
            endpoint_id = endpoint.get("_id") or old.pop(endpoint["url"], None) or new_id()
            if endpoint_id in seen:
                raise ValidationFailed(DUPLICATE_ID.format(endpoint_id=endpoint_id), details=[
                    field_detail(f"$.endpoints[{n}]._id", "appears twice")])
            seen.add(endpoint_id)
            made.append({**endpoint, "_id": endpoint_id})
        self.endpoints = made
        return made

    def add_endpoint(self, endpoint: dict[str, Any], endpoint_id: str) -> dict[str, Any]:
        if len(self.endpoints) >= MAX_ENDPOINTS:
            raise ValidationFailed(TOO_MANY_ENDPOINTS, details=[field_detail("$", "too many")])
        self._check_secrets([endpoint], "$.secretId")
        made = {"_id": endpoint_id, **endpoint}
        self.endpoints = [*self.endpoints, made]
        return made

    def replace_endpoint(self, endpoint_id: str, endpoint: dict[str, Any]) -> dict[str, Any]:
        number = self._endpoint_number(endpoint_id)
        self._check_secrets([endpoint], "$.secretId")
        made = {"_id": endpoint_id, **endpoint}
        self.endpoints = [made if n == number else e for n, e in enumerate(self.endpoints)]
        return made

    def remove_endpoint(self, endpoint_id: str) -> None:
        number = self._endpoint_number(endpoint_id)
        self.endpoints = [e for n, e in enumerate(self.endpoints) if n != number]

    def _endpoint_number(self, endpoint_id: str) -> int:
        for number, endpoint in enumerate(self.endpoints):
            if endpoint.get("_id") == endpoint_id:
                return number
        raise WebhookEndpointNotFound(UNKNOWN_ENDPOINT.format(endpoint_id=endpoint_id),
                                      details=[field_detail("$.id", "unknown", location="path")])

    def _check_secrets(self, endpoints: list[dict[str, Any]], path: str) -> None:
        for n, endpoint in enumerate(endpoints):
            secret_id = endpoint.get("secretId")
            if secret_id is not None and secret_id not in self.secrets:
                raise SecretNotFound(UNKNOWN_SECRET.format(secret_id=secret_id),
                                     details=[field_detail(path.format(n=n), "unknown secret")])

    def add_secret(self, secret: dict[str, Any]) -> dict[str, Any]:
        if len(self.secrets) >= MAX_SECRETS:
            raise ValidationFailed(TOO_MANY_SECRETS, details=[field_detail("$", "too many")])
        self.secrets[secret["_id"]] = secret
        return secret

    def remove_secret(self, secret_id: str) -> None:
        if secret_id not in self.secrets:
            raise SecretNotFound(UNKNOWN_SECRET.format(secret_id=secret_id),
                                 details=[field_detail("$.id", "unknown", location="path")])
        users = [e["_id"] for e in self.endpoints if e.get("secretId") == secret_id]
        if users:
            raise SecretInUse(SECRET_IN_USE.format(secret_id=secret_id, endpoints=", ".join(users)),
                              details=[field_detail("$.id", "in use", location="path")])
        del self.secrets[secret_id]

    def signing_key(self, tenant: Tenant, delivery: Delivery) -> str | None:
        """What a delivery is signed with (real-service facts 5: the API secret): the
        endpoint's signing secret where it names one that still exists; None when the
        tenant signs nothing."""
        if not tenant.signing:
            return None
        secret = self.secrets.get(delivery.secret_id) if delivery.secret_id else None
        return secret["token"] if secret is not None else tenant.api_secret

    def cancel(self) -> None:
        """The tenant is reset or deleted: attempts in flight stop (recorded as
        interrupted), nothing held waits any longer."""
        for task in list(self.in_flight):
            task.cancel()
        self.held.clear()

    def settled(self, event_id: str) -> bool:
        """No delivery of the event is still pending: the ledger may evict it."""
        return all(d.state != PENDING for d in self.deliveries.get(event_id, ()))

    def forget(self, event_id: str) -> None:
        """The ledger evicted the event: its deliveries and attempts go with it."""
        self.deliveries.pop(event_id, None)

    def state_of(self, event_id: str) -> str:
        """`none` (no endpoint), `pending`, `failed` (any failed) or `delivered` (all)."""
        deliveries = self.deliveries.get(event_id, [])
        if not deliveries:
            return "none"
        states = {d.state for d in deliveries}
        for state in (PENDING, FAILED, INTERRUPTED):
            if state in states:
                return state
        return DELIVERED


class Dispatcher:
    """Sends every event of every tenant; one aiohttp session for all of them."""

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
        self.closing = False

    # -- wiring -----------------------------------------------------------------------------

    def webhooks_for(self, tenant: Tenant) -> TenantWebhooks:
        """A tenant's webhook state as its account makes it: its endpoints (and, for an
        account of the fixtures, `--webhook-url`: a tenant the control plane made gets only
        its own), no faults, a fault roll seeded by the tenant's name."""
        endpoints = [dict(e) for e in tenant.webhook_endpoints]
        if (self.default_url and tenant.from_fixtures
                and not any(e["url"] == self.default_url for e in endpoints)):
            endpoints.append({"url": self.default_url})
        # Stable ids, seeded: GET /webhooks/endpoints and the control plane name them.
        endpoints = [{"_id": tenant.ids.object_id(), **e} if "_id" not in e else e
                     for e in endpoints]
        return TenantWebhooks(endpoints=endpoints,
                              random=random.Random(f"{self.seed}:{tenant.name}:faults"))

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
            for deliveries in tenant.webhooks.deliveries.values():
                for delivery in deliveries:
                    if delivery.state == PENDING:
                        delivery.state = INTERRUPTED
                        tenant.changes.touch(EVENT, delivery.event_id)
                        log.warning("delivery %s of event %s to %s interrupted by shutdown "
                                    "(tenant %s, %d attempts made)", delivery.id, delivery.event_id,
                                    loggable_url(delivery.url), tenant.name, len(delivery.attempts))

    async def close(self) -> None:
        await self.stop()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def settle(self, tenant: Tenant, before: float = math.inf) -> None:
        """Wait, for all of them together, until no attempt of this tenant is in flight
        that could schedule a retry at or before the virtual time `before` (an attempt
        started at t retries at t + RETRY_INTERVAL); by default, until none is in flight."""
        state = tenant.webhooks
        while state.in_flight:
            # In start order (a tenant's clock only moves forward): the oldest decides.
            waiting = []
            for task, started in state.in_flight.items():
                if started + RETRY_INTERVAL > before:
                    break
                waiting.append(task)
            if not waiting:
                return
            await asyncio.gather(*waiting, return_exceptions=True)

    # -- delivery ---------------------------------------------------------------------------

    def deliver_new(self, tenant: Tenant, event: Event) -> None:
        """A tenant's ledger has a new event: deliver it (the ledger's listener)."""
        self.deliver(tenant, event)

    def deliver(self, tenant: Tenant, event: Event, *, replay: bool = False) -> list[Delivery]:
        """New deliveries of `event` to every endpoint registered for its type."""
        state = tenant.webhooks
        made = []
        for url, secret_id in state.targets_for(event.type).items():
            deliveries = state.deliveries.setdefault(event.id, [])
            delivery = Delivery(event_id=event.id, number=len(deliveries) + 1, url=url,
                                replay=replay, secret_id=secret_id)
            deliveries.append(delivery)
            made.append(delivery)
            self._first_attempt(tenant, state, delivery, event)
        if made:
            tenant.changes.touch(EVENT, event.id)
        return made

    def _first_attempt(self, tenant: Tenant, state: TenantWebhooks, delivery: Delivery,
                       event: Event) -> None:
        faults, roll = state.faults, state.random
        # Held deliveries go out behind the next *event*, not this event's other endpoints.
        held = [pair for pair in state.held if pair[1].id != event.id]
        state.held = [pair for pair in state.held if pair[1].id == event.id]
        if faults.delay and roll.random() < faults.delay:
            delivery.faults += (f"delayed {faults.delay_seconds:g}s",)
            self._schedule_attempt(tenant, delivery, event, tenant.clock.timestamp() + faults.delay_seconds)
        elif faults.out_of_order and not held and roll.random() < faults.out_of_order:
            # Held back until the next event has gone out: that one overtakes it.
            delivery.faults += ("out-of-order",)
            state.held.append((delivery, event))
            # Released behind the next event, or after a second if none comes.
            self._schedule_release(tenant, state)
        else:
            self._start_attempt(tenant, delivery, event)
        for held_delivery, held_event in held:
            if held_delivery.state == PENDING and not held_delivery.attempts:
                self._start_attempt(tenant, held_delivery, held_event)

    def _schedule_release(self, tenant: Tenant, state: TenantWebhooks) -> None:
        tenant.timeline.schedule(tenant.clock.timestamp() + 1, _ReleaseHeld(self, tenant),
                                 label="release held event")

    def release_held(self, tenant: Tenant) -> None:
        """Held deliveries go out (behind the event that overtook them, or a second later)."""
        state = tenant.webhooks
        held, state.held = state.held, []
        for delivery, event in held:
            if delivery.state == PENDING and not delivery.attempts:
                self._start_attempt(tenant, delivery, event)

    def _schedule_attempt(self, tenant: Tenant, delivery: Delivery, event: Event, due: float) -> None:
        delivery.next_attempt_at = isoformat(due)
        tenant.timeline.schedule(due, _AttemptAction(self, tenant, delivery, event),
                                 label=f"webhook attempt {len(delivery.attempts) + 1} of {event.id}",
                                 owner=f"delivery:{delivery.id}")

    def start_attempt(self, tenant: Tenant, delivery: Delivery, event: Event) -> None:
        """The next attempt of a delivery, now (a scheduled retry or delayed first attempt)."""
        self._start_attempt(tenant, delivery, event)

    def _start_attempt(self, tenant: Tenant, delivery: Delivery, event: Event,
                       fault: str | None = None) -> None:
        state = tenant.webhooks
        delivery.next_attempt_at = None
        secret = state.signing_key(tenant, delivery)
        started_at = tenant.clock.timestamp()
        attempt = Attempt(number=len(delivery.attempts) + 1, time=started_at,
                          wall_time=time.time(), fault=fault)
        delivery.attempts.append(attempt)
        tenant.changes.touch(EVENT, event.id)
        try:
            message = to_message(event, self.vendor, secret)
        except Exception as error:  # recorded on the ledger, not lost: no retry can fix it
            attempt.error = f"the request could not be built: {type(error).__name__}: {error}"
            delivery.state = FAILED
            log.error("delivery %s of event %s to %s failed: %s (tenant %s)", delivery.id,
                      event.id, delivery.url, attempt.error, tenant.name)
            return
        task = asyncio.get_running_loop().create_task(
            self._send(tenant, delivery, event, attempt, message, started_at))
        state.in_flight[task] = started_at
        self._in_flight.add(task)
        task.add_done_callback(lambda done: (state.in_flight.pop(done, None),
                                             self._in_flight.discard(done)))

    async def _send(self, tenant: Tenant, delivery: Delivery, event: Event, attempt: Attempt,
                    message: Any, started_at: float) -> None:
        # The tenant's change window as the attempt started: a reset or restore that
        # cancels the attempt replaces the tenant's, which must not hear of this event.
        changes = tenant.changes
        try:
            async with tenant.webhooks.slots, self._slots:
                attempt.wall_time = time.time()
                await self._post(delivery, attempt, message)
        except asyncio.CancelledError:
            changes.touch(EVENT, event.id)
            attempt.error = attempt.error or INTERRUPTED_ATTEMPT
            delivery.state = INTERRUPTED
            log.warning("delivery %s of event %s to %s interrupted by shutdown during attempt %d "
                        "(tenant %s)", delivery.id, delivery.event_id, loggable_url(delivery.url),
                        attempt.number, tenant.name)
            raise
        self._after_attempt(tenant, delivery, event, attempt, started_at)
        changes.touch(EVENT, event.id)

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

    def _after_attempt(self, tenant: Tenant, delivery: Delivery, event: Event, attempt: Attempt,
                       started_at: float) -> None:
        if attempt.fault == "duplicate":
            return  # the extra copy never changes the delivery's outcome
        state = tenant.webhooks
        if attempt.error is None:
            delivery.state = DELIVERED
            faults = state.faults
            if faults.duplicate and state.random.random() < faults.duplicate:
                delivery.faults += ("duplicate",)
                self._start_attempt(tenant, delivery, event, fault="duplicate")
            return
        if self.closing:
            delivery.state = INTERRUPTED
            log.warning("delivery %s of event %s to %s interrupted by shutdown after %d attempts "
                        "(tenant %s)", delivery.id, event.id, loggable_url(delivery.url),
                        len(delivery.attempts), tenant.name)
            return
        failures = sum(1 for a in delivery.attempts if a.fault != "duplicate")
        if failures >= MAX_ATTEMPTS:
            delivery.state = FAILED
            log.info("delivery of %s to %s failed after %d attempts: %s", event.id,
                     loggable_url(delivery.url),
                     failures, attempt.error)
            return
        self._schedule_attempt(tenant, delivery, event, started_at + RETRY_INTERVAL)


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


@action_kind("webhook-attempt")
@dataclass(frozen=True, slots=True)
class _AttemptAction:
    """A scheduled attempt of a delivery: a retry, or a first attempt delayed by a fault."""

    dispatcher: Dispatcher
    tenant: Tenant
    delivery: Delivery
    event: Event

    # In a snapshot: the delivery, by its event and its number among the event's deliveries.
    schema = {"type": "object", "additionalProperties": False,
              "required": ["kind", "event", "delivery"],
              "properties": {"kind": {"const": "webhook-attempt"}, "event": {"type": "string"},
                             "delivery": {"type": "integer", "minimum": 1}}}

    def __call__(self) -> None:
        self.dispatcher.start_attempt(self.tenant, self.delivery, self.event)

    def describe(self) -> dict[str, Any]:
        return {"kind": "webhook-attempt", "event": self.event.id, "delivery": self.delivery.number}

    @classmethod
    def rebuild(cls, data: dict[str, Any], context: Any) -> _AttemptAction:
        return cls(context.dispatcher, context.tenant,
                   context.delivery(data["event"], data["delivery"]), context.event(data["event"]))


@action_kind("release-held")
@dataclass(frozen=True, slots=True)
class _ReleaseHeld:
    """Held (out-of-order) deliveries go out if no later event released them first."""

    dispatcher: Dispatcher
    tenant: Tenant

    schema = {"type": "object", "additionalProperties": False, "required": ["kind"],
              "properties": {"kind": {"const": "release-held"}}}

    def __call__(self) -> None:
        self.dispatcher.release_held(self.tenant)

    def describe(self) -> dict[str, Any]:
        return {"kind": "release-held"}

    @classmethod
    def rebuild(cls, data: dict[str, Any], context: Any) -> _ReleaseHeld:
        return cls(context.dispatcher, context.tenant)


def request_headers(tenant: Tenant, event: Event, vendor: str,
                    delivery: Delivery | None = None) -> dict[str, str]:
    """The headers every attempt of the delivery sent (the same for each: not stored; the
    same for every delivery of the event but for a signature with an endpoint's own
    secret); none when the request could not be built (its attempt says why)."""
    secret = (tenant.webhooks.signing_key(tenant, delivery) if delivery is not None
              else tenant.api_secret if tenant.signing else None)
    try:
        return to_message(event, vendor, secret).headers
    except Exception:
        return {}
