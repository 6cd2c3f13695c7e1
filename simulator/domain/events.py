"""Events and the ledger: every event a tenant emits, stored before anything else sees it.

An Event holds the body exactly as the service sends it (spec: Events, Body);
turning it into a CloudEvent and delivering it is the webhooks package's job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..clock import isoformat
from ..errors import EventNotFound

log = logging.getLogger("payroll_sandbox.events")

UNKNOWN_EVENT = "No event has the id {event_id!r}."

@dataclass(frozen=True, slots=True)
class Event:
    id: str                 # ce-id; kept on every delivery and replay
    type: str               # eventType
    time: float             # virtual time it was emitted
    body: dict[str, Any]    # eventType, eventTime, user, data and the task fields
    sequence: int
    user: str | None = None  # the user's identifier, for filters and replay
    task: str | None = None

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "eventType": self.type, "time": isoformat(self.time),
                "sequence": self.sequence, "userIdentifier": self.user, "task": self.task,
                "body": self.body}


@dataclass
class EventLog:
    """The tenant's ledger, in emission order, with listeners told of each new event."""

    events: list[Event] = field(default_factory=list)
    by_id: dict[str, Event] = field(default_factory=dict)
    listeners: list[Callable[[Event], None]] = field(default_factory=list)
    emitted: int = 0  # every event ever appended (also those evicted since)

    def append(self, event: Event) -> Event:
        self.emitted += 1
        self.events.append(event)
        self.by_id[event.id] = event
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # the event is stored; a listener's fault must not undo the caller
                log.exception("listener failed on event %s (%s)", event.id, event.type)
        return event

    def get(self, event_id: str) -> Event:
        event = self.by_id.get(event_id)
        if event is None:
            raise EventNotFound(UNKNOWN_EVENT.format(event_id=event_id))
        return event

    def query(self, *, event_type: str | None = None, user: str | None = None,
              task: str | None = None, since: float | None = None,
              until: float | None = None) -> list[Event]:
        """Oldest first; every filter optional."""
        return [e for e in self.events
                if (event_type is None or e.type == event_type)
                and (user is None or e.user == user)
                and (task is None or e.task == task)
                and (since is None or e.time >= since)
                and (until is None or e.time <= until)]


def event_body(event_type: str, at: float, *, user: dict[str, Any] | None = None,
               data: dict[str, Any] | None = None, **top_level: Any) -> dict[str, Any]:
    """The body every event shares, plus the fields of its kind (task events add several)."""
    body: dict[str, Any] = {"eventType": event_type, "eventTime": isoformat(at)}
    if user is not None:
        body["user"] = user
    body.update({k: v for k, v in top_level.items() if v is not None})
    if data is not None:
        body["data"] = data
    return body
