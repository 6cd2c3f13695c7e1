"""A tenant's webhook outbox: its endpoints and signing secrets, the deliveries of its
events with every attempt, the delivery faults it asked for, and the retry policy.

Nothing here sends anything. A new event makes deliveries and queues their first
attempts; the transport (webhooks/dispatcher.py) takes the queued attempts between two
jobs of the runner (or after a request), sends them, and hands each answer back to
`answered`, which decides (`after_answer`, a pure function of the delivery and the
answer) whether the delivery is done, failed, or retried 30 seconds of the tenant's clock
after the attempt started (spec: Events, Delivery; Limits). Every delivery and attempt is
recorded before it is queued, so nothing is lost without a record.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable
from itertools import chain
from functools import cache
from typing import Any

import msgspec

from ...clock import Clock, isoformat
from ...errors import Conflict, NotFound, ValidationFailed, field_detail
from ..changes import EVENT, Changes
from .events import Event
from ..shapes import Command, of
from ..stored import Amount, Count, LoadError, Stored, Time, array, loaded, schema, stored
from ..sections import (COUNT, RANDOM_STATE, STRING, STRINGS, Sections,
                        checked_random_state, obj, random_state)
from ..timeline import Timeline, action_kind

MAX_ATTEMPTS = 3          # the first plus two retries
RETRY_INTERVAL = 30.0     # virtual seconds between attempts
HOLD_SECONDS = 1.0        # an out-of-order delivery waits at most this for the next event
PENDING, DELIVERED, FAILED, INTERRUPTED = "pending", "delivered", "failed", "interrupted"
MAX_ENDPOINTS = 50        # a tenant's webhook endpoints (the control plane's list too)
MAX_SECRETS = 50          # a tenant's signing secrets
INTERRUPTED_ATTEMPT = "interrupted: the sandbox stopped during the attempt"

UNKNOWN_ENDPOINT = "No webhook endpoint has the id {endpoint_id!r}."
UNKNOWN_SECRET = "No signing secret has the id {secret_id!r} (GET /secrets lists them)."
IGNORED_SECRET = ("secretId {secret_id!r} names no signing secret: ignored, deliveries are "
                  "signed with the API secret")
TOO_MANY_ENDPOINTS = f"A tenant has at most {MAX_ENDPOINTS} webhook endpoints; delete one first."
TOO_MANY_SECRETS = f"A tenant has at most {MAX_SECRETS} signing secrets; delete one first."
SECRET_IN_USE = ("The signing secret {secret_id!r} signs the webhooks of endpoints {endpoints}; "
                 "point them elsewhere first.")
DUPLICATE_ID = "Two endpoints have the id {endpoint_id!r}."


WebhookEndpointNotFound = NotFound.coded("webhook-endpoint-not-found")
SecretNotFound = NotFound.coded("secret-not-found")
SecretInUse = Conflict.coded("secret-in-use")


class Attempt(Stored):
    """One attempt to deliver a webhook: when, and what the receiver answered."""

    number: Count
    time: Time           # virtual, when it started
    wall_time: Time      # wall clock, when it left (after waiting for a connection)
    status: Count | None = None
    latency_ms: Amount | None = None
    error: str | None = None
    fault: str | None = None   # a delivery fault injected on purpose (duplicate, ...)

    @property
    def answered(self) -> bool:
        return self.latency_ms is not None or self.error is not None


class Answer(msgspec.Struct, frozen=True):
    """What the transport tells the outbox of one attempt (it writes no record itself):
    when the request left (wall clock), the receiver's status, why the attempt failed
    (None: a 2xx), and how long it took."""

    left: float
    status: int | None = None
    error: str | None = None
    latency_ms: float | None = None


class Delivery(Stored, weakref=True):  # weakref: a deleted tenant's are followed
    """One event on its way to one endpoint: its attempts and its state."""

    event_id: str
    number: Count        # 1, 2, ... among the event's deliveries (endpoints, replays)
    url: str
    state: str = PENDING
    replay: bool = False
    attempts: list[Attempt] = msgspec.field(default_factory=list)
    next_attempt_at: str | None = None
    faults: tuple[str, ...] = ()  # the faults injected on purpose (most deliveries: none)
    secret_id: str | None = None  # the endpoint's signing secret (None: the API secret)

    @property
    def id(self) -> str:
        """`<event id>.<number>`: unique, and made only when asked for (not stored)."""
        return f"{self.event_id}.{self.number}"

    @property
    def in_flight(self) -> Attempt | None:
        """Its attempt a snapshot leaves out and a restore sends again: the last, unanswered,
        while the delivery is pending (an extra copy, the duplicate fault's, is not sent)."""
        last = self.attempts[-1] if self.attempts else None
        if last is None or last.answered or last.fault == "duplicate" or self.state != PENDING:
            return None
        return last



Share = of(float, ge=0, le=1)


class FaultPlan(Stored, frozen=True):
    """Delivery faults on purpose, per tenant, deterministic from the seed."""

    duplicate: Share = 0.0      # probability that a delivered event is sent once more
    out_of_order: Share = 0.0   # probability that an event is held back behind the next one
    delay: Share = 0.0          # probability that the first attempt waits `delay_seconds`
    delay_seconds: of(float, ge=0, le=86_400) = 60.0


class Send(msgspec.Struct, frozen=True, eq=False):
    """One attempt queued for the transport: the delivery, its event and the attempt's
    record (already on the delivery, unanswered). Each is itself (compared by identity)."""

    delivery: Delivery
    event: Event
    attempt: Attempt
    # The duplicate fault's draw for this attempt, made as it started (in the tenant's
    # order, not in the order answers arrive): a 2xx sends the event once more.
    duplicate: bool = False

    def __iter__(self):
        return iter((self.delivery, self.event, self.attempt))


# -- the retry policy ---------------------------------------------------------------------------

RETRY = "retry"


def after_answer(delivery: Delivery, attempt: Attempt, *, stopping: bool = False) -> str:
    """What an answered attempt makes of its delivery: DELIVERED (a 2xx), RETRY (a second
    or third attempt, RETRY_INTERVAL after this one started), FAILED (the last attempt
    failed) or INTERRUPTED (the sandbox is stopping: no retry is made). An extra copy
    (the duplicate fault) never changes the outcome: the delivery's state stays."""
    if attempt.fault == "duplicate":
        return delivery.state
    if attempt.error is None:
        return DELIVERED
    if stopping:
        return INTERRUPTED
    failures = sum(1 for a in delivery.attempts if a.fault != "duplicate")
    return FAILED if failures >= MAX_ATTEMPTS else RETRY


class Outbox:
    """One tenant's webhook state. Each endpoint is `{_id, url, eventTypes?, secretId?}` (no
    eventTypes: every type); the control plane's list and the API's /webhooks/endpoints are
    the same endpoints. A signing secret (`secrets`, GET /secrets) is `{_id, name, token,
    createdAt}`. It is given what it uses, not the tenant: the tenant's name (for the
    logs), its clock and timeline (retries, held and delayed attempts), its change window,
    its API secret and whether it signs (the tenant's setting, kept here)."""

    def __init__(self, *, name: str, clock: Clock, timeline: Timeline, changes: Changes,
                 api_secret: str, signing: bool, endpoints: list[dict[str, Any]],
                 fault_roll: random.Random) -> None:
        self.name, self.clock, self.timeline = name, clock, timeline
        self.api_secret, self.signing = api_secret, signing
        # The change window of the tenant as this outbox began: an answer arriving after a
        # reset or restore (which replace both) tells the old window, not the new one.
        self._changes = changes
        self.endpoints = endpoints
        self.deliveries: dict[str, list[Delivery]] = {}
        self.faults = FaultPlan()
        self.random = fault_roll
        self.held: list[tuple[Delivery, Event]] = []
        self.secrets: dict[str, dict[str, Any]] = {}  # id -> secret
        self.queue: list[Send] = []        # attempts started, not yet taken by the transport
        # Attempts the transport took and has not answered: -> the virtual time they started.
        self.in_flight: dict[Send, float] = {}
        # How another API signs its own webhooks (the aggregator's Plaid-Verification JWT,
        # Aggregator.verification_header): body, issue time -> headers; set by the tenant.
        self.plain_signer: Callable[[bytes, int], dict[str, str]] | None = None
        self.landed = 0  # attempts that ended (EventLog.full looks again after one)

    def itself(self) -> Outbox:
        """The outbox a scheduled action of it runs on (`_AttemptAction.outbox`)."""
        return self

    @property
    def busy(self) -> bool:
        """An attempt is queued or in flight (its answer may still schedule a retry)."""
        return bool(self.queue or self.in_flight)

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

    def add_endpoint(self, endpoint: dict[str, Any], endpoint_id: str,
                     ignored: list[str] | None = None) -> dict[str, Any]:
        """A new endpoint (POST /webhooks/endpoints). `ignored` (a lenient call): an unknown
        `secretId` is left out and said there, rather than refused (SecretNotFound)."""
        if len(self.endpoints) >= MAX_ENDPOINTS:
            raise ValidationFailed(TOO_MANY_ENDPOINTS, details=[field_detail("$", "too many")])
        made = {"_id": endpoint_id, **self._known_secret(endpoint, ignored)}
        self.endpoints = [*self.endpoints, made]
        return made

    def replace_endpoint(self, endpoint_id: str, endpoint: dict[str, Any],
                         ignored: list[str] | None = None) -> dict[str, Any]:
        number = self._endpoint_number(endpoint_id)
        made = {"_id": endpoint_id, **self._known_secret(endpoint, ignored)}
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

    def _known_secret(self, endpoint: dict[str, Any],
                      ignored: list[str] | None) -> dict[str, Any]:
        """The endpoint, its `secretId` checked: an unknown one refused, or with `ignored`
        given (the surface makes it an optional override at most) left out, its deliveries
        signed with the API secret, and the warning added to `ignored`."""
        secret_id = endpoint.get("secretId")
        if ignored is None or secret_id is None or secret_id in self.secrets:
            self._check_secrets([endpoint], "$.secretId")
            return endpoint
        ignored.append(IGNORED_SECRET.format(secret_id=secret_id))
        return {key: value for key, value in endpoint.items() if key != "secretId"}

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

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({
            "webhooks": obj({
                "endpoints": {"type": "array", "items": obj(
                    {"url": STRING}, {"_id": STRING, "eventTypes": STRINGS, "secretId": STRING})},
                "faults": obj(schema(FaultPlan)["properties"]),
                "deliveries": array(Delivery),
                "held": {"type": "array", "items": obj({"event": STRING, "delivery": COUNT})}}, {
                "secrets": {"type": "array", "items": obj(
                    {"_id": STRING, "name": STRING, "token": STRING, "createdAt": STRING})}}),
            "rng": obj({"webhookFaults": RANDOM_STATE})})

    def dump(self) -> dict[str, Any]:
        """The outbox as it is now. An attempt still in flight is left out of its delivery
        (in_flight_jobs makes it a job due at its start, so a restore sends it again); an
        extra copy in flight (the duplicate fault) is recorded as interrupted."""
        deliveries = []
        for delivery in chain.from_iterable(self.deliveries.values()):
            record = stored(delivery)
            deliveries.append(record)
            for number, attempt in enumerate(delivery.attempts):
                if not attempt.answered and attempt.fault == "duplicate":
                    record["attempts"][number]["error"] = INTERRUPTED_ATTEMPT
            if (in_flight := delivery.in_flight) is not None:
                del record["attempts"][-1]
                record["nextAttemptAt"] = isoformat(in_flight.time)
        return {"webhooks": {"endpoints": [dict(e) for e in self.endpoints],
                             "faults": stored(self.faults), "deliveries": deliveries,
                             "held": [{"event": event.id, "delivery": delivery.number}
                                      for delivery, event in self.held],
                             "secrets": [dict(secret) for secret in self.secrets.values()]},
                "rng": {"webhookFaults": random_state(self.random)}}

    def in_flight_jobs(self) -> list[dict[str, Any]]:
        """The attempts dump leaves out, as jobs of the timeline (without their sequence):
        each sends its delivery's attempt again, due when the attempt started."""
        return [{"due": last.time, "background": False, "owner": f"delivery:{delivery.id}",
                 "label": f"webhook attempt {last.number} of {delivery.event_id}",
                 "action": {"kind": "webhook-attempt", "event": delivery.event_id,
                            "delivery": delivery.number}}
                for delivery in chain.from_iterable(self.deliveries.values())
                if (last := delivery.in_flight) is not None]

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        """Endpoints the outbound policy allows, each naming a secret of the snapshot;
        deliveries of the snapshot's events, numbered 1, 2, ... per event; held ones among
        them; the fault roll a generator's state."""
        webhooks = document["webhooks"]
        roll = checked_random_state(document["rng"]["webhookFaults"], "$.rng.webhookFaults")
        for number, endpoint in enumerate(webhooks["endpoints"]):
            problem = loading.url_problem(endpoint["url"])
            if problem is not None:
                raise LoadError(f"$.webhooks.endpoints[{number}].url", problem)
        deliveries: dict[str, list[Delivery]] = {}
        loading.deliveries = deliveries
        for number, delivery in enumerate(loaded(webhooks["deliveries"], list[Delivery],
                                                 "$.webhooks.deliveries")):
            of_event = deliveries.setdefault(delivery.event_id, [])
            if delivery.event_id not in loading.events:
                raise LoadError(f"$.webhooks.deliveries[{number}].eventId", "no such event")
            if delivery.number != len(of_event) + 1:
                raise LoadError(f"$.webhooks.deliveries[{number}].number",
                                f"must be {len(of_event) + 1}: the event's deliveries are "
                                "numbered 1, 2, ... in order")
            of_event.append(delivery)
        held = []
        for number, pair in enumerate(webhooks["held"]):
            try:
                held.append((loading.delivery(pair["event"], pair["delivery"]),
                             loading.event(pair["event"])))
            except LookupError as error:
                raise LoadError(f"$.webhooks.held[{number}]", str(error)) from None
        # An endpoint without an `_id` (a snapshot from before endpoints had one) gets one
        # derived from its place and URL: the same on every restore, no seeded id spent.
        endpoints = [e if "_id" in e else
                     {"_id": hashlib.sha256(f"{n}:{e['url']}".encode()).hexdigest()[:24], **e}
                     for n, e in enumerate(map(dict, webhooks["endpoints"]))]
        secrets: dict[str, dict[str, Any]] = {}
        for number, raw in enumerate(webhooks.get("secrets", [])):
            if raw["_id"] in secrets:
                raise LoadError(f"$.webhooks.secrets[{number}]._id", "appears twice")
            secrets[raw["_id"]] = dict(raw)
        for number, endpoint in enumerate(endpoints):
            if endpoint.get("secretId") is not None and endpoint["secretId"] not in secrets:
                raise LoadError(f"$.webhooks.endpoints[{number}].secretId", "no such secret")
        return {"endpoints": endpoints, "secrets": secrets,
                "faults": loaded(webhooks["faults"], FaultPlan, "$.webhooks.faults"),
                "deliveries": deliveries, "held": held, "roll": roll}

    def restore(self, *, endpoints: list[dict[str, Any]], secrets: dict[str, dict[str, Any]],
                faults: FaultPlan, deliveries: dict[str, list[Delivery]],
                held: list[tuple[Delivery, Event]], roll: tuple[Any, ...]) -> None:
        """A snapshot's outbox (as load checked it); its attempts in flight come back as
        jobs of the timeline."""
        self.endpoints, self.secrets, self.faults = endpoints, secrets, faults
        self.deliveries, self.held = deliveries, held
        self.random.setstate(roll)

    def set_faults(self, faults: FaultPlan) -> None:
        self.faults = faults

    def signing_key(self, delivery: Delivery | None) -> str | None:
        """What a delivery is signed with (real-service facts 5: the API secret): the
        endpoint's signing secret where it names one that still exists; None when the
        tenant signs nothing."""
        if not self.signing:
            return None
        secret = (self.secrets.get(delivery.secret_id)
                  if delivery is not None and delivery.secret_id else None)
        return secret["token"] if secret is not None else self.api_secret

    # -- reading ------------------------------------------------------------------------------

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
        return next((state for state in (PENDING, FAILED, INTERRUPTED) if state in states),
                    DELIVERED)

    # -- delivering ---------------------------------------------------------------------------

    def deliver(self, event: Event, *, replay: bool = False) -> list[Delivery]:
        """New deliveries of `event` to every endpoint registered for its type (another
        API's webhook: to its one URL), their first attempts queued (or held, or delayed,
        as the faults say)."""
        made = []
        targets = self.targets_for(event.type) if event.url is None else {event.url: None}
        for url, secret_id in targets.items():
            deliveries = self.deliveries.setdefault(event.id, [])
            delivery = Delivery(event_id=event.id, number=len(deliveries) + 1, url=url,
                                replay=replay, secret_id=secret_id)
            deliveries.append(delivery)
            made.append(delivery)
            self._first_attempt(delivery, event)
        if made:
            self._changes.touch(EVENT, event.id)
        return made

    def _first_attempt(self, delivery: Delivery, event: Event) -> None:
        faults, roll, clock = self.faults, self.random, self.clock
        # Held deliveries go out behind the next *event*, not this event's other endpoints.
        held = [pair for pair in self.held if pair[1].id != event.id]
        self.held = [pair for pair in self.held if pair[1].id == event.id]
        if faults.delay and roll.random() < faults.delay:
            delivery.faults += (f"delayed {faults.delay_seconds:g}s",)
            self._schedule_attempt(delivery, event, clock.timestamp() + faults.delay_seconds)
        elif faults.out_of_order and not held and roll.random() < faults.out_of_order:
            # Held back until the next event has gone out: that one overtakes it.
            delivery.faults += ("out-of-order",)
            self.held.append((delivery, event))
            # Released behind the next event, or a second later if none comes.
            self.timeline.schedule(clock.timestamp() + HOLD_SECONDS,
                                   _ReleaseHeld(self.itself), label="release held event")
        else:
            self.start_attempt(delivery, event)
        self._start_held(held)

    def release_held(self) -> None:
        """Held deliveries go out (behind the event that overtook them, or a second later)."""
        held, self.held = self.held, []
        self._start_held(held)

    def _start_held(self, held: list[tuple[Delivery, Event]]) -> None:
        for delivery, event in held:
            if delivery.state == PENDING and not delivery.attempts:
                self.start_attempt(delivery, event)

    def _schedule_attempt(self, delivery: Delivery, event: Event, due: float) -> None:
        delivery.next_attempt_at = isoformat(due)
        self.timeline.schedule(
            due, _AttemptAction(self.itself, delivery, event),
            label=f"webhook attempt {len(delivery.attempts) + 1} of {event.id}",
            owner=f"delivery:{delivery.id}")

    def start_attempt(self, delivery: Delivery, event: Event, fault: str | None = None,
                      at: float | None = None) -> None:
        """The next attempt of a delivery, now (or at the virtual time `at`): recorded,
        and queued for the transport."""
        delivery.next_attempt_at = None
        attempt = Attempt(number=len(delivery.attempts) + 1,
                          time=self.clock.timestamp() if at is None else at,
                          wall_time=time.time(), fault=fault)
        delivery.attempts.append(attempt)
        self._changes.touch(EVENT, event.id)
        duplicate = (fault is None and bool(self.faults.duplicate)
                     and self.random.random() < self.faults.duplicate)
        self.queue.append(Send(delivery, event, attempt, duplicate))

    def take(self) -> list[Send]:
        """The queued attempts, for the transport to send (in flight from now on)."""
        taken, self.queue = self.queue, []
        for send in taken:
            self.in_flight[send] = send.attempt.time
        return taken

    def answered(self, send: Send, answer: Answer, *, stopping: bool = False) -> None:
        """The transport's answer to an attempt, written on its record; the policy decides
        what comes next."""
        self._landed(send)
        delivery, event, attempt = send
        attempt.wall_time, attempt.status = answer.left, answer.status
        attempt.error, attempt.latency_ms = answer.error, answer.latency_ms
        self._changes.touch(EVENT, event.id)
        outcome = after_answer(delivery, attempt, stopping=stopping)
        if outcome == RETRY:
            self._schedule_attempt(delivery, event, attempt.time + RETRY_INTERVAL)
            return
        first_success = outcome == DELIVERED and delivery.state != DELIVERED
        delivery.state = outcome
        if first_success and send.duplicate:  # the copy leaves as the attempt did
            delivery.faults += ("duplicate",)
            self.start_attempt(delivery, event, fault="duplicate", at=attempt.time)

    def _landed(self, send: Send) -> None:
        """The attempt is no longer in flight. An emptied table starts over: a dict keeps
        the room a burst of attempts made (tens of KB) after they are gone."""
        self.landed += 1
        self.in_flight.pop(send, None)
        if not self.in_flight:
            self.in_flight = {}

    def interrupted(self, send: Send, left: float | None = None) -> None:
        """The attempt was cut off (reset, delete, shutdown), in flight since `left` (wall
        clock) or before it left: recorded as interrupted."""
        self._landed(send)
        if left is not None:
            send.attempt.wall_time = left
        send.attempt.error = send.attempt.error or INTERRUPTED_ATTEMPT
        send.delivery.state = INTERRUPTED
        self._changes.touch(EVENT, send.event.id)

    def not_built(self, send: Send, why: str) -> None:
        """The request could not be built: recorded on the ledger, not lost (no retry can
        fix it)."""
        self._landed(send)
        send.attempt.error = f"the request could not be built: {why}"
        send.delivery.state = FAILED
        self._changes.touch(EVENT, send.event.id)

    def interrupt_pending(self) -> list[Delivery]:
        """The sandbox stops: every delivery still waiting for an attempt is interrupted."""
        stopped = []
        for delivery in chain.from_iterable(self.deliveries.values()):
            if delivery.state == PENDING:
                delivery.state = INTERRUPTED
                self._changes.touch(EVENT, delivery.event_id)
                stopped.append(delivery)
        return stopped

    def cancel(self) -> None:
        """The tenant is reset or deleted: nothing queued or held waits any longer (the
        transport cancels what it has in flight)."""
        self.queue.clear()
        self.held.clear()


@action_kind("webhook-attempt")
class _AttemptAction(msgspec.Struct, frozen=True):
    """A scheduled attempt of a delivery: a retry, or a first attempt delayed by a fault."""

    # The outbox, found when the action runs: a restored action is rebuilt before the
    # restored tenant has its new outbox, so it finds it through the tenant.
    outbox: Callable[[], Outbox]
    delivery: Delivery
    event: Event

    # In a snapshot: the delivery, by its event and its number among the event's deliveries.
    class Stored(Command, kw_only=True):
        event: str
        delivery: of(int, ge=1)

    def __call__(self) -> None:
        self.outbox().start_attempt(self.delivery, self.event)

    def stored(self) -> Stored:
        return self.Stored(event=self.event.id, delivery=self.delivery.number)

    @classmethod
    def rebuild(cls, data: Stored, context: Any) -> _AttemptAction:
        return cls(context.part("webhooks"), context.delivery(data.event, data.delivery),
                   context.event(data.event))


@action_kind("release-held")
class _ReleaseHeld(msgspec.Struct, frozen=True):
    """Held (out-of-order) deliveries go out if no later event released them first."""

    outbox: Callable[[], Outbox]  # as _AttemptAction's

    class Stored(Command, kw_only=True):
        pass  # nothing: the outbox's held deliveries are its own

    def __call__(self) -> None:
        self.outbox().release_held()

    def stored(self) -> Stored:
        return self.Stored()

    @classmethod
    def rebuild(cls, data: Stored, context: Any) -> _ReleaseHeld:
        return cls(context.part("webhooks"))
