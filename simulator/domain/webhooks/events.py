"""Events and the ledger: every event a tenant emits, stored before anything else sees it.

An Event holds the body exactly as the service sends it (spec: Events, Body);
turning it into a CloudEvent and delivering it is the webhooks package's job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

import msgspec
import orjson

from ...clock import isoformat
from ...errors import EventNotFound
from ..stored import LoadError
from ..sections import COUNT, STRING, TIME, Sections, obj

log = logging.getLogger("payroll_sandbox.events")

UNKNOWN_EVENT = "No event has the id {event_id!r}."

def compact_json(body: dict[str, Any]) -> bytes:
    """The body as compact JSON (its `data` a struct: its JSON fields), orjson's output
    copied to bytes of its own size (the bytes it returns hold ~4 KB however short); json
    for what orjson refuses (integers past 64 bits)."""
    try:
        return memoryview(orjson.dumps(body, default=msgspec.to_builtins)).tobytes()
    except TypeError:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False,
                          default=msgspec.to_builtins).encode()


class Event:
    """One event. Its body (eventType, eventTime, user, data and the task fields) is kept
    as the compact JSON the webhook sends: written once, a third of a dict's memory.

    An event with a `url` is another API's webhook kept in the same ledger: the aggregator's
    own (domain/aggregator.py), its body as that API writes it, delivered to that one URL
    as plain JSON (webhooks/cloudevents.py: message_of) rather than as a CloudEvent to the
    tenant's endpoints."""

    __slots__ = ("id", "type", "time", "body_json", "sequence", "user", "task", "url")

    def __init__(self, id: str, type: str, time: float, body: dict[str, Any], sequence: int,
                 user: str | None = None, task: str | None = None,
                 url: str | None = None) -> None:
        self.id = id              # ce-id; kept on every delivery and replay
        self.type = type          # eventType
        self.time = time          # virtual time it was emitted
        self.body_json: bytes = compact_json(body)
        self.sequence = sequence
        self.user = user          # the user's identifier, for filters and replay
        self.task = task
        self.url = url            # another API's webhook: the one URL it goes to

    @property
    def body(self) -> dict[str, Any]:
        return orjson.loads(self.body_json)

    def stored(self) -> dict[str, Any]:
        """The event as a snapshot keeps it (STORED_EVENT; `url` only where there is one)."""
        stored = {"id": self.id, "type": self.type, "time": self.time,
                  "sequence": self.sequence, "user": self.user, "task": self.task,
                  "body": self.body}
        if self.url is not None:
            stored["url"] = self.url
        return stored

    @classmethod
    def from_stored(cls, raw: dict[str, Any]) -> Event:
        return cls(id=raw["id"], type=raw["type"], time=float(raw["time"]), body=raw["body"],
                   sequence=raw["sequence"], user=raw["user"], task=raw["task"],
                   url=raw.get("url"))


STORED_EVENT = obj({"id": STRING, "type": STRING, "time": TIME, "sequence": COUNT,
                    "user": {"type": ["string", "null"]}, "task": {"type": ["string", "null"]},
                    "body": {"type": "object"}}, {"url": STRING})


class EventLog:
    """The tenant's ledger, in emission order, with listeners told of each new event.

    Bounded (README: Limits): past `max_events` the oldest *settled* events go, a tenth
    of the bound at a time, with their deliveries (`on_evict`); an event whose delivery
    is still pending (`settled` says no) is never evicted. `emitted` and `evicted` count
    every event ever appended and every one evicted.
    """

    def __init__(self, max_events: int | None = None,
                 settled: Callable[[str], bool] = lambda event_id: True,
                 on_evict: Callable[[str], None] = lambda event_id: None) -> None:
        self.by_id: dict[str, Event] = {}  # oldest first
        self.listeners: list[Callable[[Event], None]] = []
        self.max_events = max_events
        self.settled = settled
        self.on_evict = on_evict
        self.emitted = 0
        self.evicted = 0
        self._next_eviction = max_events  # size at which to try evicting again
        self._fruitless: tuple[int, int, int] | None = None  # the ledger at a vain scan (full)
        self.settled_count: Callable[[], int] = lambda: 0  # deliveries settled so far

    @property
    def events(self) -> list[Event]:
        return list(self.by_id.values())

    def __len__(self) -> int:
        return len(self.by_id)

    def append(self, event: Event) -> Event:
        self.emitted += 1
        self.by_id[event.id] = event
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # the event is stored; a listener's fault must not undo the caller
                log.exception("listener failed on event %s (%s)", event.id, event.type)
        if self._next_eviction is not None and len(self.by_id) > self._next_eviction:
            self.trim()
        return event

    def full(self) -> bool:
        """Whether the ledger holds `max_events` events that cannot go (their deliveries
        pending), once the settled ones went. A scan that freed nothing is not made again
        until the ledger changes or a delivery settles (Tenant.admit_work)."""
        if self.max_events is None or len(self.by_id) < self.max_events:
            return False
        key = (len(self.by_id), self.evicted, self.settled_count())
        if key != self._fruitless:
            self._evict(self.max_events - max(1, self.max_events // 10))
            self._fruitless = (len(self.by_id), self.evicted, self.settled_count())
        return len(self.by_id) >= self.max_events

    def trim(self) -> None:
        """Past the bound, the oldest settled events go, a tenth of the bound at a time.
        Called on each append past the bound and after each run of the clock, so a burst of
        events whose deliveries were pending does not stay once they settle."""
        if self.max_events is None or len(self.by_id) <= self.max_events:
            return
        batch = max(1, self.max_events // 10)
        self._evict(self.max_events - batch)
        # Events still pending stay; try again only a batch later, so a burst of
        # pending events costs one scan per batch, not one per event.
        self._next_eviction = max(self.max_events, len(self.by_id) + batch)

    def _evict(self, keep: int) -> None:
        """Oldest settled events first, until `keep` are left (pending ones stay)."""
        excess = len(self.by_id) - keep
        gone = []
        for event_id in self.by_id:
            if len(gone) == excess:
                break
            if self.settled(event_id):
                gone.append(event_id)
        for event_id in gone:
            del self.by_id[event_id]
            self.on_evict(event_id)
        self.evicted += len(gone)

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({"events": {"type": "array", "items": STORED_EVENT},
                         "counters": obj({"eventsEmitted": COUNT, "eventsEvicted": COUNT,
                                          "eventsNextEviction": {"type": ["integer", "null"],
                                                                 "minimum": 0}})},
                        # Work admitted before the bound filled may still emit past it.
                        bounds={"events": lambda limits: (2 * limits.max_events,
                                                          "twice --max-events:")})

    def dump(self) -> dict[str, Any]:
        return {"events": [event.stored() for event in self.by_id.values()],
                "counters": {"eventsEmitted": self.emitted, "eventsEvicted": self.evicted,
                             "eventsNextEviction": self._next_eviction}}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        """The events in order, each once."""
        events: dict[str, Event] = {}
        for number, raw in enumerate(document["events"]):
            if raw["id"] in events:
                raise LoadError(f"$.events[{number}].id", "appears twice")
            events[raw["id"]] = Event.from_stored(raw)
        loading.events = events
        counters = document["counters"]
        return {"events": list(events.values()), "emitted": counters["eventsEmitted"],
                "evicted": counters["eventsEvicted"],
                "next_eviction": counters["eventsNextEviction"]}

    def restore(self, events: list[Event], *, emitted: int, evicted: int,
                next_eviction: int | None) -> None:
        """A snapshot's ledger (as load checked it): its events in order and its counters.
        The listeners are not told: the events were delivered (or are pending) already."""
        self.by_id = {event.id: event for event in events}
        self.emitted, self.evicted = emitted, evicted
        self._next_eviction = next_eviction

    def get(self, event_id: str) -> Event:
        event = self.by_id.get(event_id)
        if event is None:
            raise EventNotFound(UNKNOWN_EVENT.format(event_id=event_id))
        return event

    def query(self, *, event_type: str | None = None, user: str | None = None,
              task: str | None = None, since: float | None = None,
              until: float | None = None, among: Iterable[Event] | None = None) -> list[Event]:
        """Oldest first (or in the order of `among`, some of the ledger's events); every
        filter optional."""
        return [e for e in (self.by_id.values() if among is None else among)
                if (event_type is None or e.type == event_type)
                and (user is None or e.user == user)
                and (task is None or e.task == task)
                and (since is None or e.time >= since)
                and (until is None or e.time <= until)]


# Spec (Task events): every task event carries `authenticationMethod`, whose values the Task
# table gives for pay-link tasks only; another task's event carries it as null.
CARRIED_WHEN_NULL = frozenset({"authenticationMethod"})


def event_body(event_type: str, at: float, *, user: dict[str, Any] | None = None,
               data: dict[str, Any] | None = None, **top_level: Any) -> dict[str, Any]:
    """The body every event shares, plus the fields of its kind (task events add several);
    a field of its kind that is None is left out, but for CARRIED_WHEN_NULL."""
    body: dict[str, Any] = {"eventType": event_type, "eventTime": isoformat(at)}
    if user is not None:
        body["user"] = user
    body.update({k: v for k, v in top_level.items() if v is not None or k in CARRIED_WHEN_NULL})
    if data is not None:
        body["data"] = data
    return body
