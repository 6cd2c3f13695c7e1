"""The journal of API requests received, per tenant, for assertions in tests.

Bounded: each tenant keeps its newest entries only. Requests whose credentials
matched no tenant are in no journal (the access log has them).
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable
from itertools import islice
from functools import cache
from typing import Any

import msgspec

from ..errors import NotCalled, ValidationFailed, field_detail
from .shapes import UNSET, Command, Maybe, View, of
from .stored import Amount, Count, Stored, array, loaded, stored
from .sections import COUNT, Sections, obj

MAX_ENTRIES = 1000
VERIFY_PATH = "/_sandbox/requests/verify"  # a verification's own calls are never matched
NEAR_MISSES = 3  # the nearest entries a failed verification shows
TOO_LARGE_TO_MATCH = ("The {name} to match is over the {limit} bytes of JSON the journal keeps "
                      "of a request (a longer one is kept truncated), so no request can "
                      "match it.")
DIFFERENCES_SHOWN = 50  # a near miss's differing paths shown (a 40,000-item array: 2.6 MB)
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

    def verify(self, wanted: RequestsVerification) -> list[JournalEntry]:
        """The journal's entries that match `wanted` (oldest first), when as many came as it
        asks (at least one, or `times` exactly); else NotCalled with how many matched and the
        nearest entries that did not (NEAR_MISSES at most, nearest first, each with every
        differing JSON path). The verification calls themselves are never looked at."""
        for name in ("body", "query"):  # each entry is compared with them: a bound on both
            given = getattr(wanted, name)
            if given is not UNSET and journal_body(given, MAX_BODY_BYTES) is not given:
                message = TOO_LARGE_TO_MATCH.format(name=name, limit=MAX_BODY_BYTES)
                raise ValidationFailed(message, details=[field_detail(
                    f"$.{name}", f"over {MAX_BODY_BYTES} bytes of JSON")])
        expectation = Expectation(wanted)
        matched: list[JournalEntry] = []
        missed: list[tuple[int, int, JournalEntry, list[Difference]]] = []
        for entry in self._entries:
            if entry.path == VERIFY_PATH:
                continue
            differences = expectation.differences(entry)
            if differences:
                missed.append((sum(d.weight for d in differences), -entry.id, entry, differences))
            else:
                matched.append(entry)
        times = wanted.times
        if (len(matched) >= 1) if times is UNSET else len(matched) == times:
            return matched
        near = sorted(missed, key=lambda miss: miss[:2])[:NEAR_MISSES]
        if times is UNSET or len(matched) < times:
            count = f"{len(matched) or 'no'} request{'' if len(matched) == 1 else 's'}"
            wanted_times = "" if times is UNSET else f" ({times} expected)"
            message = (f"{count} matched {_described(wanted)}{wanted_times}; the nearest "
                       f"{len(near)} of the {len(missed)} others in the journal are in nearMisses.")
        else:
            message = (f"{len(matched)} requests matched {_described(wanted)}; {times} expected "
                       f"(requests {', '.join(str(e.id) for e in matched[:20])}).")
            near = []
        if self.evicted:
            message += (f" The journal keeps the newest {self.max_entries} requests: "
                        f"{self.evicted} older ones were dropped.")
        raise NotCalled(message, matched=[e.id for e in matched], near_misses=msgspec.to_builtins(
            [NearMiss.of(entry, differences) for _, _, entry, differences in near]))

    def query(self, *, path: str | None = None, method: str | None = None,
              status: int | None = None, limit: int = 100) -> list[JournalEntry]:
        """Newest first, filtered by path prefix, method and status."""
        method = method and method.upper()
        return list(islice((e for e in reversed(self._entries)
                            if (path is None or e.path.startswith(path))
                            and (method is None or e.method == method)
                            and (status is None or e.status == status)), limit))


# -- verification (POST /_sandbox/requests/verify, the plugin's assert_called) ------------------

class RequestsVerification(Command, kw_only=True):
    """What a request should have been: its method and path, and what is given of its
    body, its query and how often it came (README: Verifying the requests your app made)."""

    method: of(str, "The HTTP method (any case).", pattern=r"^[A-Za-z]{1,16}$")
    path: of(str, "The path, exactly; a `{name}` segment matches any one segment "
             "(`/task/{taskId}`).", pattern=r"^/", max_length=2048)
    body: Maybe[of(Any, "The body's JSON: an object matches when each field it names "
                   "matches (fields it does not name are not looked at), an array item for "
                   "item; absent: the body is not looked at.")] = UNSET
    query: Maybe[of(dict[str, str], "Query parameters that must have these values (others "
                    "are not looked at).")] = UNSET
    times: Maybe[of(int, "How many requests must match, exactly; absent: at least one.",
                    ge=0, le=MAX_ENTRIES)] = UNSET


class Difference(msgspec.Struct, frozen=True):
    """One JSON path of a request (as `{method, path, query, body}`) that differs from what
    was expected: `actual` is absent when the request has nothing there. `weight`: the
    expected values it stands for (a missing object stands for each of its fields)."""

    path: str
    expected: Any
    actual: Any = UNSET
    weight: int = 1


class DifferingPath(View, kw_only=True):
    """A JSON path of the request where it differs: what was expected there and what the
    request had (`actual` absent: nothing; `expected` absent: an item not expected)."""

    path: of(str, "`$.method`, `$.path`, `$.query.<name>` or `$.body...`")
    expected: Maybe[Any] = UNSET
    actual: Maybe[Any] = UNSET


class NearMiss(View, kw_only=True):
    """A journaled request that did not match, with every JSON path where it differs."""

    id: of(int, ge=1)
    time: str
    method: str
    path: str
    query: dict[str, str]
    status: int
    body: Any
    differences: list[DifferingPath]
    more_differences: Maybe[of(int, f"How many differing paths past the first "
                                    f"{DIFFERENCES_SHOWN} are not shown.", ge=1)] = UNSET

    @classmethod
    def of(cls, entry: JournalEntry, differences: list[Difference]) -> NearMiss:
        """Its first DIFFERENCES_SHOWN differences, each expected value as the journal keeps
        a body (over MAX_BODY_BYTES of JSON: `{"truncated": ...}`), and how many more."""
        more = len(differences) - DIFFERENCES_SHOWN
        return cls(id=entry.id, time=entry.time, method=entry.method, path=entry.path,
                   query=entry.query, status=entry.status, body=entry.body,
                   differences=[DifferingPath(path=d.path, expected=d.expected if
                                              d.expected is UNSET else
                                              journal_body(d.expected, MAX_BODY_BYTES),
                                              actual=d.actual)
                                for d in differences[:DIFFERENCES_SHOWN]],
                   more_differences=more if more > 0 else UNSET)


_SEGMENT = re.compile(r"\{[^/{}]+\}")
_NAME = re.compile(r"^[A-Za-z_$][\w$-]*$")


def _path_pattern(path: str) -> re.Pattern[str] | None:
    """A path with `{name}` segments as a pattern (one segment each); None for a plain path."""
    if not _SEGMENT.search(path):
        return None
    parts = _SEGMENT.split(path)
    return re.compile("[^/]+".join(re.escape(part) for part in parts) + r"\Z")


def child_path(path: str, key: str | int) -> str:
    """`$.body.name`, `$.body["a key"]`, `$.body.items[0]`."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if _NAME.match(key) else f"{path}[{json.dumps(key)}]"


def _leaves(value: Any) -> int:
    if isinstance(value, (dict, list)):
        return sum(map(_leaves, value.values() if isinstance(value, dict) else value)) or 1
    return 1


def _same(expected: Any, actual: Any) -> bool:
    """JSON equality of two scalars: 1 and 1.0 are one number, true is no number."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return expected == actual


def json_differences(expected: Any, actual: Any, path: str,
                     leaves: Callable[[Any], int] = _leaves) -> list[Difference]:
    """Where `actual` differs from `expected`: an object matches when each field `expected`
    names matches (its other fields are not looked at), an array item for item (and an
    item past those expected differs)."""
    if not isinstance(expected, (dict, list)):
        return [] if _same(expected, actual) else [Difference(path, expected, actual)]
    if not isinstance(actual, type(expected)):
        return [Difference(path, expected, actual, leaves(expected))]
    keyed = isinstance(expected, dict)
    found: list[Difference] = []
    for key, value in expected.items() if keyed else enumerate(expected):
        child = child_path(path, key)
        if key in actual if keyed else key < len(actual):
            found += json_differences(value, actual[key], child, leaves)
        else:
            found.append(Difference(child, value, weight=leaves(value)))
    if not keyed:
        found += [Difference(child_path(path, number), UNSET, item)
                  for number, item in enumerate(actual[len(expected):], len(expected))]
    return found


class Expectation:
    """A RequestsVerification, ready to compare each journal entry with."""

    def __init__(self, wanted: RequestsVerification) -> None:
        self.wanted = wanted
        self.method = wanted.method.upper()
        self.pattern = _path_pattern(wanted.path)
        counted: dict[int, int] = {}  # a part of `wanted` counted once, not once an entry

        def leaves(value: Any) -> int:
            if not isinstance(value, (dict, list)):
                return 1
            if id(value) not in counted:
                counted[id(value)] = _leaves(value)
            return counted[id(value)]

        self.leaves = leaves

    def differences(self, entry: JournalEntry) -> list[Difference]:
        wanted, found = self.wanted, []
        if entry.method != self.method:
            found.append(Difference("$.method", self.method, entry.method))
        if not (self.pattern.match(entry.path) if self.pattern is not None
                else entry.path == wanted.path):
            found.append(Difference("$.path", wanted.path, entry.path))
        if wanted.query is not UNSET:
            found += json_differences(wanted.query, entry.query, "$.query", self.leaves)
        if wanted.body is not UNSET:
            found += (json_differences(wanted.body, entry.body, "$.body", self.leaves)
                      if entry.body is not None or wanted.body is None
                      else [Difference("$.body", wanted.body, weight=self.leaves(wanted.body))])
        return found


def _described(wanted: RequestsVerification) -> str:
    given = [name for name in ("body", "query") if getattr(wanted, name) is not UNSET]
    return f"{wanted.method.upper()} {wanted.path}" + (f" (with its {' and '.join(given)} as "
                                                       "given)" if given else "")
