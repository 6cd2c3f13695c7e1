"""Snapshots: one tenant's whole state as one JSON document, and back (issue 12).

`GET /_sandbox/snapshot` writes the caller's tenant as a document; `POST /_sandbox/snapshot`
restores one into the caller's tenant, exactly, or refuses it (422 naming the field, 409
for another environment, seed or a newer format version) and changes nothing. `serve
--state-file` keeps every tenant (the fixtures' and those the control plane made, with
their keys) in one file: restored at start, saved on shutdown and periodically, written
atomically.

Nothing is pickled, and this module describes no record: each part of the tenant saves and
loads itself (domain/stored.py), its records declared once next to their structs, and
its scheduled jobs as data (domain/timeline.py ACTION_KINDS). Here are the document's
header, the order of the parts, the migrations of older versions, the reading of a body
and the state file. The seeded generators' states and the counters travel with it: a
restored tenant makes the same ids and events as the one it was taken from.
"""

from __future__ import annotations

import asyncio
import gc
import glob
import json
import logging
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import orjson
from aiohttp import web

from ..clock import MANUAL, Clock, isoformat
from ..domain.identity.identity import Identity
from ..domain.links.aggregator import Aggregator
from ..domain.companies.companies import CompanyDirectory
from ..domain.webhooks.events import EventLog
from ..domain.faults import ApiFaults
from ..domain.accounts.linked_accounts import LinkedAccounts
from ..domain.webhooks.outbox import Outbox
from ..domain.links.processor_links import ProcessorLinks
from ..domain.registry import give_back_memory
from ..domain.stored import LoadError
from ..domain.sections import STRING, Sections, obj
from ..domain.tasks.tasks import Tasks
from ..domain.tenants import Tenant
from ..domain.timeline import Timeline
from ..errors import ApiError, Conflict, LimitReached, PayloadTooLarge, ValidationFailed
from ..load.fixtures import ConfigError
from ..domain.journal import Journal
from ..domain.flow.autopilot import Autopilots
from ..domain.flow.callbacks import Callbacks
from .render import read_within_time
from ..schemas.fixtures import ACCOUNT_SCHEMA
from ..validate import (DETAILS_KEPT, bounded_details, check_json_type, is_valid,
                               json_in_pieces, parse_json_body, schema_errors,
                               webhook_url_problem)

log = logging.getLogger("payroll_sandbox.snapshot")

FORMAT = "payroll-sandbox-snapshot"
STATE_FORMAT = "payroll-sandbox-state"
# The format version this server writes; it reads every one from 1 up, migrating older
# documents (MIGRATIONS).
VERSION = 2
# A restore's body (the 1 MiB of other bodies is too little) is bounded by the largest
# snapshot a tenant of this server can make: a full tenant at the default bounds (10,000
# completed tasks with their linked accounts, 10,000 tokens, 5,000 events with failed
# deliveries) measured 121.5 MiB (bench/hostile.py). The limit is that, scaled with the
# server's --max-tasks, --max-events and --max-tokens, plus a quarter for longer
# histories; never under 16 MiB nor over 256 MiB. A restore peaks at about 6 times its
# body in memory, so large restores are admitted within a memory budget (RestoreAdmission).
FULL_TENANT_BYTES = 122 * 1024 * 1024
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
MIN_DOCUMENT_BYTES = 16 * 1024 * 1024
LARGE_RESTORE = 8 * 1024 * 1024  # a body larger (or of unknown length) is admitted first
RESTORE_PEAK = 6  # a restore's peak memory, in times its body (RestoreAdmission)


def max_document_bytes(limits: Any) -> int:
    """The largest restore body this server reads, from its bounds (rules.Limits)."""
    scale = max(limits.max_tasks / 10_000, limits.max_events / 5_000, limits.max_tokens / 10_000)
    return min(MAX_DOCUMENT_BYTES, max(MIN_DOCUMENT_BYTES, int(FULL_TENANT_BYTES * scale * 1.25)))


NOT_A_SNAPSHOT = (f"This is not a snapshot: its `format` must be {FORMAT!r} "
                  "(GET /_sandbox/snapshot).")
A_STATE_FILE = (f"This is a --state-file document ({STATE_FORMAT!r}), not one tenant's snapshot: "
                f"restore it with serve --state-file.")
OTHER_VERSION = ("This snapshot has format version {theirs}; this server reads versions 1 to "
                 "{ours} (older ones are migrated).")
OTHER_ENVIRONMENT = ("This snapshot was taken in the {theirs} environment; this server is the "
                     "{ours} environment.")
OTHER_SEED = ("This snapshot was taken on a server started with --seed {theirs}; this one has "
              "--seed {ours}, so its catalog and generated data are not the snapshot's.")
INVALID = "The snapshot does not match its schema."
NOT_AN_OBJECT = "a snapshot is a JSON object"
# Which other tenant holds it is not said: a name is one more thing of another tenant's.
TOKEN_ELSEWHERE = ("A public token of this snapshot is held by another tenant of this server: "
                   "a public token finds one tenant only. Delete or reset the tenant the "
                   "snapshot was taken from (or the one it was restored into) first, or restore "
                   "into that tenant.")
TOO_LARGE = ("A snapshot to restore is at most {limit} bytes on this server (the largest "
             "a tenant of it can make, with room to spare: it grows with --max-tasks, "
             "--max-events and --max-tokens).")
RESTORE_BUSY = ("Another large restore of this tenant is running; a tenant's large restores run "
                "one at a time. Try again in a moment.")
RESTORE_OVER_BUDGET = ("Large restores running on this server hold its memory budget for them "
                       "({budget} MiB); this one needs about {need} MiB. Try again in a "
                       "moment.")
TORN_FILE = ("not valid JSON ({error}): the state file is torn or corrupt; remove it (the "
             "sandbox then starts from the fixtures) or put back a good copy")


class InvalidSnapshot(ValidationFailed):
    code = "invalid-snapshot"


class SnapshotIncompatible(Conflict):
    code = "snapshot-incompatible"


class SnapshotConflict(Conflict):
    code = "snapshot-conflict"


class RestoreBusy(LimitReached):
    code = "restore-busy"
    retry_after = 5


class Fault(Exception):
    """What is wrong with a document: the error class (422 or 409) and every (JSON path,
    message). The API answers it as that error; the state file as a configuration error."""

    def __init__(self, error: type[ApiError], message: str,
                 problems: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.error, self.message, self.problems = error, message, problems

    def api_error(self) -> ApiError:
        return self.error(self.message, details=bounded_details(self.problems))

    def config_error(self, file: str, prefix: str = "") -> ConfigError:
        return ConfigError.collected([(file, prefix + path[1:], message)
                                      for path, message in self.problems])


# -- the parts ------------------------------------------------------------------------------------

class Part(msgspec.Struct, frozen=True):
    """One part of a tenant as a snapshot keeps it: its sections (their schema, made when
    first needed), how it writes them, how it loads them from a checked document (off the
    event loop, touching nothing) and how it restores what it loaded into the fresh
    tenant (on the loop)."""

    sections: Callable[[], Sections]
    dump: Callable[[Tenant], dict[str, Any]]
    load: Callable[[dict[str, Any], Loading], dict[str, Any]]
    restore: Callable[[Tenant, dict[str, Any]], None]


def _held(attribute: str, cls: Any,
          dump: Callable[[Tenant], dict[str, Any]] | None = None) -> Part:
    """A part the tenant holds as `attribute`: its class's sections() and load, the part's
    own dump() and restore(**loaded)."""
    return Part(cls.sections, dump or (lambda t: getattr(t, attribute).dump()),
                cls.load, lambda t, loaded: getattr(t, attribute).restore(**loaded))


# The parts of a tenant, in the order they load and restore: a part's references are to
# the parts before it (workflows name tasks, deliveries events, jobs any of them).
PARTS: tuple[Part, ...] = (
    Part(Tenant.sections, Tenant.dump_settings, Tenant.load_settings,
         lambda t, loaded: t.restore_settings(**loaded)),
    _held("identity", Identity),
    _held("companies", CompanyDirectory),
    _held("tasks", Tasks),
    _held("accounts", LinkedAccounts),
    _held("links", ProcessorLinks),
    _held("aggregator", Aggregator),
    _held("events", EventLog),
    _held("webhooks", Outbox),
    _held("journal", Journal),
    _held("api_faults", ApiFaults),
    _held("autopilots", Autopilots),
    _held("callbacks", Callbacks),
    # The outbox's attempts in flight become jobs: a restore sends them again.
    _held("timeline", Timeline,
          dump=lambda t: t.timeline.dump(t.webhooks.in_flight_jobs())),
)


def _sections(optional: bool) -> dict[str, Any]:
    """Every part's sections, required or optional; an object section two parts share
    (counters, rng) holds the fields of both."""
    found: dict[str, Any] = {}
    for part in PARTS:
        sections = part.sections().optional if optional else part.sections().required
        for name, schema in sections.items():
            if name in found:
                schema = {**found[name], "required": found[name]["required"] + schema["required"],
                          "properties": {**found[name]["properties"], **schema["properties"]}}
            found[name] = schema
    return found


@cache
def snapshot_schema() -> dict[str, Any]:
    """The whole document's schema (GET /_sandbox/snapshot's answer), made when first
    needed: every part's records' schemas are worked out then, not at import."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "A tenant's snapshot (GET and POST /_sandbox/snapshot)",
        **obj({"format": {"const": FORMAT},
               "version": {"const": VERSION},
               "environment": {"enum": ["sandbox", "production"]},
               "seed": {"type": "integer"},
               "takenAt": {**STRING, "description": "The tenant's virtual time (informative)."},
               **_sections(optional=False)}, _sections(optional=True)),
    }


STATE_SCHEMA: dict[str, Any] = obj({
    "format": {"const": STATE_FORMAT}, "version": {"const": VERSION},
    "environment": {"enum": ["sandbox", "production"]}, "seed": {"type": "integer"},
    "savedAt": STRING,
    "tenants": {"type": "array", "items": obj({
        "account": {"type": "object"}, "createdBy": {"type": ["string", "null"]},
        "snapshot": {"type": "object"}})}})


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


async def take_settled(tenant: Tenant, sandbox: Any) -> dict[str, Any]:
    """GET /_sandbox/snapshot: between two runs of the clock, once the tenant's webhook
    attempts in flight have finished (so the ledger shows how they went)."""
    async with tenant.runner.lock:
        await sandbox.dispatcher.settle(tenant)
        return take(tenant, sandbox)


# -- versions -------------------------------------------------------------------------------------

def _v1_to_v2(document: dict[str, Any]) -> dict[str, Any]:
    """Version 2 keeps version 1's layout, section for section (each now written by the
    part of the tenant that owns it), so a version 1 document needs its version only. What
    a version 1 document may lack (sections and fields added after it was first written:
    `aggregatorItems`, `apiFaults`, endpoint ids, signing secrets, record fields with a
    default) a version 2 document may lack too: each part loads it as before. A state
    file's layout is the same too; its snapshots migrate as each is restored."""
    return {**document, "version": 2}


# Each older version's step to the next: a document is brought up one version at a time.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}
STATE_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def migrated(document: dict[str, Any],
             migrations: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = MIGRATIONS
             ) -> dict[str, Any]:
    """A document of an older version (check_header accepted it) as this version writes
    it; one of this version as it is. The caller's document is not changed."""
    while document["version"] < VERSION:
        document = migrations[document["version"]](document)
    return document


# -- checking and restoring ---------------------------------------------------------------------

def check_header(document: Any, sandbox: Any, expected: str = FORMAT,
                 environment: str | None = None) -> None:
    """The document's kind, format version (this one or an older one, which is migrated),
    environment (the tenant's; by default the server's) and seed, before its schema: a
    document of another version need not match this version's schema to be named so."""
    if not isinstance(document, dict):
        raise Fault(InvalidSnapshot, INVALID, [("$", NOT_AN_OBJECT)])
    if document.get("format") != expected:
        hint = A_STATE_FILE if document.get("format") == STATE_FORMAT else NOT_A_SNAPSHOT
        raise Fault(InvalidSnapshot, hint, [("$.format", f"must be {expected!r}")])
    version = document.get("version")
    if type(version) is not int or not 1 <= version <= VERSION:
        raise Fault(SnapshotIncompatible, OTHER_VERSION.format(theirs=version, ours=VERSION),
                    [("$.version", f"this server reads versions 1 to {VERSION}")])
    environment = environment or sandbox.registry.tenants.environment
    if document.get("environment") != environment:
        message = OTHER_ENVIRONMENT.format(theirs=document.get("environment"), ours=environment)
        raise Fault(SnapshotIncompatible, message, [("$.environment", f"must be {environment!r}")])
    seed = sandbox.registry.seed
    if document.get("seed") != seed:
        raise Fault(SnapshotIncompatible, OTHER_SEED.format(theirs=document.get("seed"), ours=seed),
                    [("$.seed", f"this server has --seed {seed}")])


class Loading:
    """What the parts' loads of one document share: the tenant it goes into (read, never
    changed: a load may run off the event loop), what the server checks it against, and
    the objects loaded so far, by id, for the references of the parts after them and the
    rebuild of the timeline's actions (domain/timeline.py ACTION_KINDS). A lookup raises
    LookupError naming what is missing; the caller adds the path."""

    def __init__(self, tenant: Any, *, url_problem: Callable[[str], str | None],
                 fault_targets: Callable[[], Iterable[Any]]) -> None:
        self.tenant = tenant
        self.rules = tenant.rules
        self.url_problem = url_problem        # a webhook URL's fault under the outbound policy
        self.fault_targets = fault_targets    # the operations an API fault rule may name
        self.public_tokens: dict[str, Any] = {}
        self.tasks: dict[str, Any] = {}
        self.accounts: dict[str, Any] = {}
        self.processor_tokens: dict[str, Any] = {}
        self.links: dict[str, Any] = {}
        self.events: dict[str, Any] = {}
        self.deliveries: dict[str, list[Any]] = {}  # event id -> its deliveries, in order

    def task(self, task_id: str) -> Any:
        return _find(self.tasks, task_id, "task")

    def linked_account(self, account_id: str) -> Any:
        return _find(self.accounts, account_id, "linked account")

    def processor_link(self, link_id: str) -> Any:
        return _find(self.links, link_id, "processor link")

    def processor_token(self, token: str) -> Any:
        return _find(self.processor_tokens, token, "processor token")

    def event(self, event_id: str) -> Any:
        return _find(self.events, event_id, "event")

    def delivery(self, event_id: str, number: int) -> Any:
        deliveries = self.deliveries.get(event_id, [])
        if not 1 <= number <= len(deliveries):
            raise LookupError(f"the event {event_id!r} has no delivery {number}")
        return deliveries[number - 1]

    def part(self, attribute: str) -> Callable[[], Any]:
        """How a restored scheduled action finds its part when it runs: through the tenant,
        whose parts are made afresh after the jobs are rebuilt."""
        tenant = self.tenant
        return lambda: getattr(tenant, attribute)

    def step(self, scenario_name: str, index: int, kind: str) -> Any:
        scenario = self.rules.scenarios.get(scenario_name)
        if scenario is None or scenario.kind != kind:
            raise LookupError(f"this server has no {kind} scenario named {scenario_name!r}")
        if index >= len(scenario.steps):
            raise LookupError(f"the scenario {scenario_name!r} has {len(scenario.steps)} steps")
        return scenario.steps[index]


def _find(found: dict[str, Any], key: str, what: str) -> Any:
    if key not in found:
        raise LookupError(f"the snapshot has no {what} {key!r}")
    return found[key]


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


_SCREENED: dict[frozenset[str], dict[str, Any]] = {}


def _screened_schema(sections: frozenset[str]) -> dict[str, Any]:
    """snapshot_schema() with the records of `sections` taking anything (the screen checked
    them); made once per set."""
    whole = snapshot_schema()
    if not sections:
        return whole
    if sections not in _SCREENED:
        properties = whole["properties"]
        _SCREENED[sections] = {**whole, "properties": {
            name: {**schema, "items": {}} if name in sections else schema
            for name, schema in properties.items()}}
    return _SCREENED[sections]


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


_ARRAYS: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}


def _array_itself(schema: dict[str, Any]) -> dict[str, Any]:
    """An array's schema without its items' (its length and the like), made once."""
    entry = _ARRAYS.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = _ARRAYS[id(schema)] = (schema, {k: v for k, v in schema.items() if k != "items"})
    return entry[1]


_WITHOUT: dict[tuple[int, frozenset[str]], dict[str, Any]] = {}


def _without(schema: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """The schema with the properties `names` taking anything (they are checked apart);
    made once per set of names, so its compiled validator is reused."""
    if not names:
        return schema
    key = (id(schema), names)
    if key not in _WITHOUT:
        _WITHOUT[key] = {**schema, "properties": {
            name: ({} if name in names else sub) for name, sub in schema["properties"].items()}}
    return _WITHOUT[key]


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


_FIRST = re.compile(rb"[ \t\r\n]*")


def _parse(raw: bytearray, screen: Screen) -> Any:
    """The body as JSON (400 when it is not; empty: `{}`, then refused as no snapshot),
    parsed a piece at a time (json_in_pieces), so the worker thread parsing it never holds
    the interpreter for long, and each record shown to `screen` as it is made. A body
    that opens with anything but an object is refused unread."""
    start = _FIRST.match(raw).end()
    if raw[start:start + 1] in (b"[", b'"', b"-", b"t", b"f", b"n", *_DIGITS):
        raise Fault(InvalidSnapshot, INVALID, [("$", NOT_AN_OBJECT)])
    return parse_json_body(raw, None, decode=lambda text: json_in_pieces(text, on_item=screen))


_DIGITS = tuple(bytes([digit]) for digit in b"0123456789")


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

    A large body (or one of unknown length) is admitted by RestoreAdmission: it waits
    only on a large restore of its own tenant (for --request-timeout at most, then 429),
    and one the server's memory budget cannot hold now is refused at once (429 with
    `retry-after`). Once it ends, refused or not, the memory it took goes back to the
    system."""
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


# -- --state-file ---------------------------------------------------------------------------------

def state_document(sandbox: Any) -> dict[str, Any]:
    """Every tenant of the server: its account (name, keys, settings), who made it (None for
    the fixtures' accounts) and its snapshot."""
    registry = sandbox.registry
    return {"format": STATE_FORMAT, "version": VERSION,
            "environment": registry.tenants.environment, "seed": registry.seed,
            "savedAt": isoformat(time.time()),  # the wall clock: when the file was written
            "tenants": [{"account": tenant.account, "createdBy": registry.creator_of(tenant.name),
                         "snapshot": take(tenant, sandbox)} for tenant in registry.tenants]}


def encode(document: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(document)
    except TypeError:  # an integer past 64 bits (a journal body): json writes it
        return json.dumps(document, ensure_ascii=False).encode()


def _decode(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        try:  # integers past 64 bits, which orjson refuses
            return json.loads(raw, parse_constant=_refuse_constant)
        except ValueError:
            raise error from None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def saved_seed(path: Path) -> int | None:
    """The seed a state file was saved with (None: no file, or none readable in it), so
    that `serve --state-file` without `--seed` goes on with the saved run's ids and
    records; load_state reports a torn file with its own message."""
    try:
        seed = _decode(path.read_bytes()).get("seed")
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        return None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def load_state(sandbox: Any, path: Path) -> int:
    """Every tenant of the state file, restored (ConfigError naming the file and the JSON
    path when it is torn, corrupt or of another server). The number of tenants."""
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ConfigError(file, "$", f"cannot read: {error.strerror or error}") from None
    try:
        document = _decode(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise ConfigError(file, "$", TORN_FILE.format(error=error)) from None
    try:
        check_header(document, sandbox, STATE_FORMAT)
    except Fault as fault:
        raise ConfigError(file, fault.problems[0][0], f"{fault.message} Remove the file to "
                          "start from the fixtures.") from None
    document = migrated(document, STATE_MIGRATIONS)
    problems = schema_errors(document, STATE_SCHEMA)
    if problems:
        raise ConfigError.collected([(file, path, message) for path, message in problems])
    registry = sandbox.registry
    for number, entry in enumerate(document["tenants"]):
        where = f"$.tenants[{number}]"
        account, creator = entry["account"], entry["createdBy"]
        faults = [(file, f"{where}.account{p[1:]}", m)
                  for p, m in schema_errors(account, ACCOUNT_SCHEMA)]
        if faults:
            raise ConfigError.collected(faults)
        tenant = registry.tenants.get(account["name"])
        if creator is None:
            if tenant is None or registry.creator_of(tenant.name) is not None:
                raise ConfigError(file, f"{where}.account.name", f"the fixtures have no account "
                                  f"named {account['name']!r} any more; remove the file to start "
                                  "from the fixtures")
        else:
            if tenant is not None:
                raise ConfigError(file, f"{where}.account.name",
                                  f"a tenant named {account['name']!r} exists already")
            tenant = registry.restore_tenant(account, creator)
        try:
            restore(tenant, sandbox, entry["snapshot"])
        except Fault as fault:
            raise fault.config_error(file, f"{where}.snapshot") from None
    return len(document["tenants"])


def write_atomically(path: Path, data: bytes) -> None:
    """A temporary file in the same folder, written and fsynced, then os.replace and an
    fsync of the folder: a crash leaves the old file or the new one, never a torn one.
    The file holds API keys: only its owner may read it (mkstemp's 0600). A symlink is
    followed: its target is what is replaced (in the target's folder), the link stays."""
    path = path.resolve()
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                             suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    with suppress(OSError):  # not every file system can sync a folder
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def remove_leftovers(path: Path, *, before: float) -> list[Path]:
    """The temporary files write_atomically left beside `path` when a process was killed
    mid-write (`.state.json.<random>.tmp`): removed at start, so a crash loop does not fill
    the volume. Only this user's regular files made before `before` (this start): another
    process writing the same file now keeps its own."""
    path = path.resolve()
    removed = []
    with suppress(OSError):
        for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
            with suppress(OSError):
                facts = leftover.lstat()
                if (stat.S_ISREG(facts.st_mode) and facts.st_uid == os.getuid()
                        and facts.st_mtime < before):
                    leftover.unlink()
                    removed.append(leftover)
    if removed:
        log.info("removed %d temporary files a crash left beside %s", len(removed), path)
    return removed


class StateFile:
    """`serve --state-file`: restored at start (if the file exists), saved every
    `--state-interval` seconds when something changed and once more on shutdown, before
    webhook deliveries stop. Without the setting it does nothing."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.path: Path | None = sandbox.settings.state_file
        self.interval: float = sandbox.settings.state_interval
        self._lock = asyncio.Lock()
        self._closed = False
        self._saved: Any = None  # what the state looked like at the last save
        self._task: asyncio.Task | None = None
        self._started = time.time()  # temporary files older than this are a crash's

    def restore(self) -> None:
        if self.path is None:
            return
        remove_leftovers(self.path, before=self._started)
        if not self.path.exists():
            return
        count = load_state(self.sandbox, self.path)
        self._saved = self._fingerprint()
        log.info("restored %d tenants from %s", count, self.path)

    def start(self) -> None:
        if self.path is not None and self.interval > 0:
            self._task = asyncio.get_running_loop().create_task(self._every_interval())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def on_shutdown(self, app: web.Application) -> None:
        """The last save, before deliveries stop (SIGTERM): attempts in flight get the
        dispatcher's grace to finish first, so the file shows how they went."""
        if self.path is None:
            return
        tenants = [t for t in self.sandbox.registry.tenants if t.webhooks.busy]
        if tenants:
            settling = [asyncio.ensure_future(self.sandbox.dispatcher.settle(t)) for t in tenants]
            await asyncio.wait(settling, timeout=self.sandbox.dispatcher.grace)
        try:
            await self.save(final=True)
        except Exception:  # the shutdown goes on (deliveries still stop and are recorded)
            log.exception("could not save the state file %s on shutdown", self.path)

    async def save(self, *, final: bool = False, only_if_changed: bool = False) -> bool:
        """Writes the file (in a worker thread; the document is made here, between two
        jobs). After the final save no other is written. Whether it wrote."""
        if self.path is None:
            return False
        async with self._lock:
            if self._closed:
                return False
            self._closed = final
            fingerprint = self._fingerprint()
            if only_if_changed and fingerprint == self._saved:
                return False
            data = encode(state_document(self.sandbox))
            try:
                await asyncio.to_thread(write_atomically, self.path, data)
            except OSError as error:
                log.error("could not save the state file %s: %s", self.path, error)
                return False
            self._saved = fingerprint
            return True

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.save(only_if_changed=True)
            except Exception:  # the server goes on; the next save may work
                log.exception("could not save the state file %s", self.path)

    def _fingerprint(self) -> tuple[Any, ...]:
        """Cheap signs of change: requests journaled, events, jobs scheduled and pending,
        attempts in flight, the manual clock (a real clock moves by itself: the final save
        keeps its time)."""
        manual = self.sandbox.settings.clock == MANUAL
        return tuple((t.name, len(t.journal) + t.journal.evicted, t.events.emitted,
                      len(t.timeline), t.timeline.next_sequence(), len(t.webhooks.in_flight),
                      sum(len(d) for d in t.webhooks.deliveries.values()),
                      t.clock.timestamp() if manual else None)
                     for t in self.sandbox.registry.tenants)


STATE_FILE = web.AppKey("state_file", StateFile)


async def save_on_shutdown(app: web.Application) -> None:
    """on_shutdown: the state file's last save (before the deliveries stop)."""
    await app[STATE_FILE].on_shutdown(app)

