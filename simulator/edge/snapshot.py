"""Snapshots: one tenant's whole state as one JSON document, and back (issue 12).

`GET /_sandbox/snapshot` writes the caller's tenant as a document; `POST /_sandbox/snapshot`
restores one into the caller's tenant, exactly, or refuses it (422 naming the field, 409
for another environment, seed or a newer format version) and changes nothing. `serve
--state-file` keeps every tenant (the fixtures' and those the control plane made, with
their keys) in one file: restored at start, saved on shutdown and periodically, written
atomically.

Nothing is pickled, and this module describes no record: each part of the tenant saves and
loads itself (domain/stored.py), its records declared once next to their structs, and
its scheduled jobs as data (domain/timeline.py ACTION_KINDS). Here are taking a snapshot
and checking, reading and restoring one; the document itself (its header, versions, parts
and schema) is snapshot_document.py's, --state-file state_file.py's. The seeded generators'
states and the counters travel with it: a restored tenant makes the same ids and events as
the one it was taken from.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import cache
from typing import Any

import msgspec
import orjson
from aiohttp import web

from ..clock import Clock, isoformat
from ..domain.registry import give_back_memory
from ..domain.stored import LoadError
from ..domain.tenants import Tenant
from ..errors import PayloadTooLarge
from .render import read_within_time
from ..validate import (DETAILS_KEPT, check_json_type, is_valid,
                               json_in_pieces, parse_json_body, schema_errors,
                               webhook_url_problem)
from .snapshot_document import (FORMAT, INVALID, LARGE_RESTORE, NOT_AN_OBJECT, PARTS, RESTORE_BUSY,
                                TOKEN_ELSEWHERE, TOO_LARGE, VERSION, Fault, InvalidSnapshot,
                                Loading, RestoreBusy, SnapshotConflict, check_header,
                                max_document_bytes, migrated, snapshot_schema)

log = logging.getLogger("payroll_sandbox.snapshot")

RESTORE_PEAK = 6  # a restore's peak memory, in times its body (RestoreAdmission)


RESTORE_OVER_BUDGET = ("Large restores running on this server hold its memory budget for them "
                       "({budget} MiB); this one needs about {need} MiB. Try again in a "
                       "moment.")


# -- taking a snapshot --------------------------------------------------------------------------

def take(tenant: Tenant, sandbox: Any) -> dict[str, Any]:
    """The tenant as one JSON document, as it is now (synchronous, so at a job boundary).

    The document shares lists and dicts with the tenant: write it out before anything
    else runs."""
    sections: dict[str, Any] = {}
    for part in PARTS:
        for name, section in part.dump(tenant).items():
            sections[name] = {**sections[name], **section} if name in sections else section
    return {"format": FORMAT, "version": VERSION, "environment": tenant.environment,
            "seed": sandbox.registry.seed, "takenAt": sections["clock"]["now"], **sections}


async def take_settled(tenant: Tenant, sandbox: Any,
                       taking: Callable[[Tenant, Any], dict[str, Any]] = take) -> dict[str, Any]:
    """GET /_sandbox/snapshot (and /_sandbox/bundle, `taking` its bundle): between two runs
    of the clock, once the tenant's webhook attempts in flight have finished (so the ledger
    shows how they went)."""
    async with tenant.runner.lock:
        await sandbox.dispatcher.settle(tenant)
        return taking(tenant, sandbox)


# -- checking and restoring ---------------------------------------------------------------------


class Planned(msgspec.Struct, frozen=True):
    """A checked document's objects, as each part loaded them, ready to go in place."""

    public_tokens: dict[str, Any]
    loaded: list[dict[str, Any]]  # one per part of PARTS

    @property
    def clock(self) -> Clock:
        """The snapshot's clock (its settings part made it): the restored tenant runs on it
        from the start, so every part is given it."""
        return next(loaded["clock"] for loaded in self.loaded if "clock" in loaded)

    def fill(self, tenant: Tenant) -> None:
        """Each part's state into the fresh tenant (Tenant.restore): it cannot fail."""
        for part, loaded in zip(PARTS, self.loaded):
            part.restore(tenant, loaded)


def plan(tenant: Tenant, sandbox: Any, document: Any, screen: Screen | None = None) -> Planned:
    """Checks a whole document (migrated to this version first) and builds every object
    of it, touching nothing of the tenant and reading no other tenant (it may run off the
    event loop); put_in_place then puts them in place. Raises Fault. What `screen` saw
    as the document was parsed is not checked twice."""
    check_header(document, sandbox, environment=tenant.environment)
    document = migrated(document)
    screened = frozenset(screen.screened) if screen is not None else frozenset()
    problems = [*(screen.problems if screen is not None else ()),
                *_schema_errors_in_pieces(document, _screened_schema(screened))]
    if problems:
        raise Fault(InvalidSnapshot, INVALID, problems)
    _check_counts(document, section_bounds(tenant.rules.limits))
    _check_clock(document)

    loading = Loading(tenant, fault_targets=sandbox.fault_targets,
                      url_problem=lambda url: webhook_url_problem(url, sandbox.dispatcher.policy))
    try:
        loaded = [part.load(document, loading) for part in PARTS]
    except LoadError as error:
        raise Fault(InvalidSnapshot, INVALID, error.problems) from None
    return Planned(loading.public_tokens, loaded)


# -- refusing early: what cannot be a snapshot, before the rest of it is built -------------------

HEADER = ("format", "version", "environment", "seed")


def section_bounds(limits: Any) -> dict[str, tuple[int, str]]:
    """Every part's bounded sections: name -> (the most records this server keeps, the
    setting that says so)."""
    return {name: bound(limits) for part in PARTS for name, bound in part.sections().bounds.items()}


def too_many(limit: int, bound: str) -> str:
    """Why a section holds more records than this server ever keeps of its kind (`bound`
    names the setting or bound that says so)."""
    return f"more than {limit} items: more than this server keeps ({bound} {limit})"


def _check_counts(document: dict[str, Any], bounds: dict[str, tuple[int, str]]) -> None:
    problems = [(f"$.{name}", too_many(*bound)) for name, bound in bounds.items()
                if len(document.get(name, ())) > bound[0]]
    if problems:
        raise Fault(InvalidSnapshot, INVALID, problems)


@cache
def _items() -> dict[str, Any]:
    """The schema of each record of an array section."""
    return {name: schema["items"] for name, schema in snapshot_schema()["properties"].items()
            if schema.get("type") == "array" and isinstance(schema.get("items"), dict)}


class Screen:
    """What a restore's parse checks of each record of a top-level section as soon as the
    record is parsed (json_in_pieces' `on_item`), so that a document that cannot be a
    snapshot is refused before the rest of it is built: one record more than its
    section's bound (section_bounds); and, once the header has been read and is this
    server's (check_header, this version), a record that does not match its schema: the
    first DETAILS_KEPT of them stop the parse. plan() checks the rest, not these again."""

    def __init__(self, tenant: Tenant, sandbox: Any) -> None:
        self.tenant, self.sandbox = tenant, sandbox
        self.bounds = section_bounds(tenant.rules.limits)
        self.header: bool | None = None  # None: not read in full yet
        self.screened: set[str] = set()  # the sections whose every record was checked
        self.problems: list[tuple[str, str]] = []

    def __call__(self, document: dict[str, Any], section: str, number: int, item: Any) -> None:
        bound = self.bounds.get(section)
        if bound is not None and number >= bound[0]:
            raise Fault(InvalidSnapshot, INVALID, [(f"$.{section}", too_many(*bound))])
        if number == 0:
            if self.header is None and all(name in document for name in HEADER):
                check_header(document, self.sandbox, environment=self.tenant.environment)
                self.header = document["version"] == VERSION
            if self.header and section in _items():
                self.screened.add(section)
            else:
                self.screened.discard(section)  # a section named twice: the last one counts
        if section in self.screened and not is_valid(item, schema := _items()[section]):
            self.problems += _prefixed(schema_errors(item, schema), f"$.{section}[{number}]")
            if len(self.problems) >= DETAILS_KEPT:
                raise Fault(InvalidSnapshot, INVALID, self.problems)


def _screened_schema(sections: frozenset[str]) -> dict[str, Any]:
    """snapshot_schema() with the records of `sections` taking anything (the screen checked
    them)."""
    whole = snapshot_schema()
    if not sections:
        return whole
    return _derived(whole, ("screened", sections), lambda: {**whole, "properties": {
        name: {**schema, "items": {}} if name in sections else schema
        for name, schema in whole["properties"].items()}})


CLOCK_BEHIND = ("earlier than what the snapshot stores (an event or task of {latest}): every "
                "job between would come due at once")


def _check_clock(document: dict[str, Any]) -> None:
    """The clock may not stand before the times the snapshot stores: `timestamp: 0` behind
    its events started a catch-up of every job between that never ended (45,345 events)."""
    times = [record[name] for records in document.values() if isinstance(records, list)
             for record in records if isinstance(record, dict)
             for name in ("time", "createdAt") if isinstance(record.get(name), (int, float))]
    latest = max(times, default=None)
    if latest is not None and document["clock"]["timestamp"] < latest:
        raise Fault(InvalidSnapshot, INVALID, [
            ("$.clock.timestamp", CLOCK_BEHIND.format(latest=isoformat(latest)))])


def _schema_errors_in_pieces(document: Any, schema: dict[str, Any],
                             path: str = "$") -> list[tuple[str, str]]:
    """schema_errors, found piece by piece: a valid piece costs one call of the compiled
    validator; in an invalid object each property is looked at apart (the object's own
    keywords checked with its properties taking anything), in an invalid array each item,
    so jsonschema (which names the faults, and is slow) reads only the records at fault,
    never the whole document. Between pieces the interpreter is free (a restore runs in a
    worker thread; the event loop gets its turn). Past DETAILS_KEPT faults it looks no
    further (a document of a million records at fault took minutes to name them all)."""
    if is_valid(document, schema):
        return []
    properties = schema.get("properties")
    if isinstance(document, dict) and schema.get("type") == "object" and properties:
        present = frozenset(name for name in properties if name in document)
        problems = _prefixed(schema_errors(document, _without(schema, present)), path)
        for name in properties:
            if name in present and len(problems) <= DETAILS_KEPT:
                problems += _schema_errors_in_pieces(document[name], properties[name],
                                                     f"{path}.{name}")
        return problems
    items = schema.get("items")
    if isinstance(document, list) and schema.get("type") == "array" and isinstance(items, dict):
        problems = _prefixed(schema_errors(document, _array_itself(schema)), path)
        for number, item in enumerate(document):
            if len(problems) > DETAILS_KEPT:
                break
            problems += _prefixed(schema_errors(item, items), f"{path}[{number}]")
        return problems
    return _prefixed(schema_errors(document, schema), path)


def _array_itself(schema: dict[str, Any]) -> dict[str, Any]:
    """An array's schema without its items' (its length and the like)."""
    return _derived(schema, "array", lambda: {k: v for k, v in schema.items() if k != "items"})


def _without(schema: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """The schema with the properties `names` taking anything (they are checked apart)."""
    if not names:
        return schema
    return _derived(schema, ("without", names), lambda: {**schema, "properties": {
        name: ({} if name in names else sub) for name, sub in schema["properties"].items()}})


_DERIVED: dict[tuple[int, Any], tuple[dict[str, Any], dict[str, Any]]] = {}


def _derived(schema: dict[str, Any], how: Any, make: Callable[[], dict[str, Any]]
             ) -> dict[str, Any]:
    """What `make` derives from `schema` (`how` says what), made once per schema and `how`,
    so that its compiled validator is reused; `schema` is kept with it, so its id is never
    another schema's."""
    key = (id(schema), how)
    if key not in _DERIVED:
        _DERIVED[key] = (schema, make())
    return _DERIVED[key][1]


def _prefixed(problems: list[tuple[str, str]], path: str) -> list[tuple[str, str]]:
    return problems if path == "$" else [(path + p[1:], m) for p, m in problems]


def put_in_place(tenant: Tenant, sandbox: Any, planned: Planned) -> None:
    """A plan's state in place of the tenant's (on the event loop), or a Fault and nothing
    changed: its public tokens may not be another tenant's."""
    _check_public_tokens(tenant, sandbox, planned.public_tokens)
    sandbox.registry.tenants.forget_tokens(tenant)
    tenant.restore(planned.fill, planned.clock)
    if tenant.runner.on_moved is not None:  # the real-mode timer: the next job moved
        tenant.runner.on_moved()


def restore(tenant: Tenant, sandbox: Any, document: Any) -> None:
    """The document's state in place of the tenant's, or a Fault and nothing changed."""
    put_in_place(tenant, sandbox, plan(tenant, sandbox, document))


def _check_public_tokens(tenant: Tenant, sandbox: Any, tokens: dict[str, Any]) -> None:
    """A public token finds its tenant by itself: it may not be another tenant's too
    (reads every tenant: on the event loop)."""
    for other in sandbox.registry.tenants:
        if other is tenant or not other.identity.tokens:
            continue
        for number, public_token in enumerate(tokens):
            if public_token in other.identity.tokens:
                raise Fault(SnapshotConflict, TOKEN_ELSEWHERE,
                            [(f"$.tokens[{number}].publicToken", "held by another tenant")])


def _plan_body(tenant: Tenant, sandbox: Any, body: list[bytearray]) -> Planned:
    """A restore's body parsed, checked and built, off the event loop. The body is taken
    out of `body` and dropped once parsed, so its bytes do not outlive the parse."""
    screen = Screen(tenant, sandbox)
    with _no_full_collections():
        document = _parse(body.pop(), screen)
        return plan(tenant, sandbox, document, screen)


_COLLECTOR = threading.Lock()
_quiet: list[tuple[int, int, int]] = []  # the thresholds to put back, one per restore running


@contextmanager
def _no_full_collections() -> Iterator[None]:
    """No full collection while a restore builds millions of objects: each would walk the
    whole heap holding the interpreter, a stall of the event loop of about a second, again
    and again as the heap grows (measured: longest loop wait 0.92 s -> 0.04 s on a 121 MiB
    snapshot). Young collections go on; the thresholds come back when the last restore
    running ends."""
    with _COLLECTOR:
        _quiet.append(gc.get_threshold())
        first, second, _ = _quiet[0]
        gc.set_threshold(first, second, 1_000_000)
    try:
        yield
    finally:
        with _COLLECTOR:
            saved = _quiet.pop()
            if not _quiet:
                gc.set_threshold(*saved)


# A body that opens (after white space) as an array, a string, a number, true, false or null.
_NOT_AN_OBJECT_START = re.compile(rb'[ \t\r\n]*[\["0-9tfn-]')


def _parse(raw: bytearray, screen: Screen) -> Any:
    """The body as JSON (400 when it is not; empty: `{}`, then refused as no snapshot),
    parsed a piece at a time (json_in_pieces), so the worker thread parsing it never holds
    the interpreter for long, and each record shown to `screen` as it is made. A body
    that opens with anything but an object is refused unread."""
    if _NOT_AN_OBJECT_START.match(raw):
        raise Fault(InvalidSnapshot, INVALID, [("$", NOT_AN_OBJECT)])
    return parse_json_body(raw, None, decode=lambda text: json_in_pieces(text, on_item=screen))


class RestoreAdmission:
    """Who may run a large restore now (restore_settled): each tenant one at a time (a
    tenant waits only on its own, for --request-timeout at most), and all of them within
    a server-wide memory budget: a restore reserves RESTORE_PEAK times its body (the
    limit when its length is unknown) and one that does not fit is refused at once (429
    with `retry-after`), never queued behind another tenant's."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.reserved = 0
        self._turns: dict[str, asyncio.Lock] = {}  # tenant -> its turn (while one waits or runs)

    @asynccontextmanager
    async def admit(self, tenant: str, size: int, timeout: float) -> AsyncIterator[None]:
        turn = self._turns.setdefault(tenant, asyncio.Lock())
        try:
            await asyncio.wait_for(turn.acquire(), timeout)
        except TimeoutError:
            self._forget(tenant, turn)
            raise RestoreBusy(RESTORE_BUSY) from None
        need = RESTORE_PEAK * size
        if self.reserved + need > self.budget:
            turn.release()
            self._forget(tenant, turn)
            raise RestoreBusy(RESTORE_OVER_BUDGET.format(budget=self.budget // 2**20,
                                                          need=need // 2**20))
        self.reserved += need
        try:
            yield
        finally:
            self.reserved -= need
            turn.release()
            self._forget(tenant, turn)

    def _forget(self, tenant: str, turn: asyncio.Lock) -> None:
        """A tenant's turn goes once no restore of it waits or runs (bounded by tenants)."""
        if not turn.locked() and self._turns.get(tenant) is turn:
            del self._turns[tenant]


def restore_budget(limits: Any) -> int:
    """The server's memory budget for large restores running at once: two of the largest
    restore it reads (max_document_bytes), at their peak."""
    return 2 * RESTORE_PEAK * max_document_bytes(limits)


async def restore_settled(tenant: Tenant, sandbox: Any, request: web.Request) -> dict[str, Any]:
    """POST /_sandbox/snapshot: the body read (bounded in size and time), then parsed,
    checked and built in a worker thread, so the event loop serves every other tenant
    meanwhile; put in place between two runs of the tenant's clock. What it restored.
    A large body (or one of unknown length) is admitted first (RestoreAdmission); once it
    ends, refused or not, the memory it took goes back to the system."""
    limit = max_document_bytes(tenant.rules.limits)
    length = request.content_length
    if length is not None and length > limit:
        raise PayloadTooLarge(TOO_LARGE.format(limit=limit))
    if length is not None and length <= LARGE_RESTORE:
        return await _restore(tenant, sandbox, request, limit)
    async with sandbox.large_restores.admit(tenant.name, limit if length is None else length,
                                            sandbox.settings.request_timeout):
        try:
            return await _restore(tenant, sandbox, request, limit)
        finally:
            await asyncio.to_thread(give_back_memory)


async def _restore(tenant: Tenant, sandbox: Any, request: web.Request,
                   limit: int) -> dict[str, Any]:
    body = [await read_document(request, limit)]
    async with tenant.runner.lock:
        try:
            planned = await asyncio.to_thread(_plan_body, tenant, sandbox, body)
            put_in_place(tenant, sandbox, planned)
        except Fault as fault:
            fault.__traceback__ = None  # its frames hold the parsed text and what it built
            raise fault.api_error() from None
    return {"tenant": tenant.name, "restored": True, "clock": tenant.clock.describe(),
            "users": len(tenant.identity.users), "tasks": len(tenant.tasks), "events": len(tenant.events),
            "deliveries": sum(len(d) for d in tenant.webhooks.deliveries.values()),
            "linkedAccounts": len(tenant.accounts),
            "processorLinks": len(tenant.links), "pendingJobs": len(tenant.timeline)}


async def read_document(request: web.Request, limit: int) -> bytearray:
    """A restore's body (415 when not sent as JSON), up to `limit` bytes (413), read here
    because other bodies stop at 1 MiB; within --request-timeout."""
    check_json_type(request.headers.get("content-type"))

    async def read() -> bytearray:
        raw = bytearray()
        while chunk := await request.content.read(1 << 20):
            raw += chunk
            if len(raw) > limit:
                raise PayloadTooLarge(TOO_LARGE.format(limit=limit))
        return raw

    return await read_within_time(request, read())


def encode(document: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(document)
    except TypeError:  # an integer past 64 bits (a journal body): json writes it
        return json.dumps(document, ensure_ascii=False).encode()


def decode(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        try:  # integers past 64 bits, which orjson refuses
            return json.loads(raw, parse_constant=_refuse_constant)
        except ValueError:
            raise error from None
        except RecursionError:  # past orjson's 1024 levels, and past Python's own
            raise ValueError("nested too deeply") from None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


