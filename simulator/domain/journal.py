"""The journal of API requests received, per tenant, for assertions in tests.

Bounded: each tenant keeps its newest entries only. Requests whose credentials
matched no tenant are in no journal (the access log has them).
"""

from __future__ import annotations

import json
from collections import deque
from functools import cache
from typing import Any

import msgspec

from .stored import Amount, Count, Stored, array, loaded, stored
from .sections import COUNT, Sections, obj

MAX_ENTRIES = 1000
MAX_BODY_BYTES = 16 * 1024
# Re-serialised, a JSON body (or the text of a refused one) is at most this many times
# its raw bytes (`1e15` becomes `1000000000000000.0`, a control byte `\u0001`), so a body
# whose raw size is under MAX_BODY_BYTES / this is kept as it is, without serialising it.
_GROWTH = 8


def journal_body(body: Any, raw_size: int) -> Any:
    """What the journal keeps of a request body of `raw_size` bytes: the body itself, or
    when its JSON is longer than MAX_BODY_BYTES, `{"truncated": <its first characters>}`."""
    if body is None or raw_size * _GROWTH <= MAX_BODY_BYTES:
        return body
    text = json.dumps(body)
    return body if len(text) <= MAX_BODY_BYTES else {"truncated": text[:MAX_BODY_BYTES]}


class JournalEntry(Stored):
    """One request in a tenant's journal (GET /_sandbox/requests)."""

    id: Count
    time: str
    method: str
    path: str
    query: dict[str, str]
    status: Count
    duration_ms: Amount
    error_code: str | None
    body: Any
    # What the API ignored of the request (x-sandbox-warning): unknown fields, parameters.
    warnings: list[str] = msgspec.field(default_factory=list)
    # The API fault rule that fired on it (PUT /_sandbox/faults/api): its place and the rule.
    fault: dict[str, Any] | None = None



class Journal:
    """One tenant's journal: its newest requests, oldest dropped first."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: deque[JournalEntry] = deque(maxlen=max_entries)
        self._next_id = 1
        self.evicted = 0

    def add(self, time: str, method: str, path: str, query: dict[str, str], status: int,
            duration_ms: float, error_code: str | None, body: Any,
            warnings: list[str] | None = None, fault: dict[str, Any] | None = None
            ) -> JournalEntry:
        """One request, as the edge saw it (every request of a tenant: the edge passes
        them by position, which costs 3 us less than by keyword)."""
        entry = JournalEntry(self._next_id, time, method, path, query, status, duration_ms,
                             error_code, body, [] if warnings is None else warnings, fault)
        self._next_id += 1
        if len(self._entries) == self.max_entries:
            self.evicted += 1
        self._entries.append(entry)
        return entry

    def __len__(self) -> int:
        return len(self._entries)

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({"journal": array(JournalEntry),
                         "counters": obj({"journalNextId": COUNT, "journalEvicted": COUNT})},
                        bounds={"journal": lambda limits: (MAX_ENTRIES, "the journal's bound")})

    def dump(self) -> dict[str, Any]:
        return {"journal": [stored(entry) for entry in self._entries],
                "counters": {"journalNextId": self._next_id, "journalEvicted": self.evicted}}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        counters = document["counters"]
        return {"entries": loaded(document["journal"], list[JournalEntry], "$.journal"),
                "next_id": counters["journalNextId"], "evicted": counters["journalEvicted"]}

    def restore(self, entries: list[JournalEntry], next_id: int, evicted: int) -> None:
        """A snapshot's entries (the newest kept) and counters: ids go on from its."""
        self._entries.extend(entries)
        self._next_id, self.evicted = next_id, evicted

    def query(self, *, path: str | None = None, method: str | None = None,
              status: int | None = None, limit: int = 100) -> list[JournalEntry]:
        """Newest first, filtered by path prefix, method and status."""
        found = []
        for entry in reversed(self._entries):
            if path is not None and not entry.path.startswith(path):
                continue
            if method is not None and entry.method != method.upper():
                continue
            if status is not None and entry.status != status:
                continue
            found.append(entry)
            if len(found) == limit:
                break
        return found
