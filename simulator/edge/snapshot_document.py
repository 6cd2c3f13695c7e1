"""A snapshot as a document: its header and versions (with the migrations from older ones),
the tenant's parts in the order they load, the schema they make together, the references
a part's load checks (Loading), and the ways a document is refused."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

import msgspec

from ..domain.accounts.linked_accounts import LinkedAccounts
from ..domain.companies.companies import CompanyDirectory
from ..domain.faults import ApiFaults
from ..domain.flow.autopilot import Autopilots
from ..domain.flow.callbacks import Callbacks
from ..domain.identity.identity import Identity
from ..domain.journal import Journal
from ..domain.links.aggregator import Aggregator
from ..domain.links.processor_links import ProcessorLinks
from ..domain.sections import STRING, Sections, obj
from ..domain.tasks.tasks import Tasks
from ..domain.tenants import Tenant
from ..domain.timeline import Timeline
from ..domain.webhooks.events import EventLog
from ..domain.webhooks.outbox import Outbox
from ..errors import ApiError, Conflict, LimitReached, ValidationFailed
from ..load.fixtures import ConfigError
from ..validate import bounded_details


FORMAT = "payroll-sandbox-snapshot"
STATE_FORMAT = "payroll-sandbox-state"
# The format version this server writes; it reads every one from 1 up, migrating older
# documents (MIGRATIONS).
VERSION = 2
# A restore's body (the 1 MiB of other bodies is too little) is bounded by the largest
# snapshot a tenant of this server can make: a full tenant at the default bounds (10,000
# completed tasks with their linked accounts, 10,000 tokens, 5,000 events with failed
# deliveries) measured 121.5 MiB (bench/hostile.py). The limit is that, scaled with the
# server's --max-tasks, --max-linked-accounts, --max-events and --max-tokens, plus a
# quarter for longer histories; never under 16 MiB nor over 256 MiB. A restore peaks at
# about 6 times its body in memory, so large restores are admitted within a memory budget
# (RestoreAdmission).
FULL_TENANT_BYTES = 122 * 1024 * 1024
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
MIN_DOCUMENT_BYTES = 16 * 1024 * 1024
LARGE_RESTORE = 8 * 1024 * 1024  # a body larger (or of unknown length) is admitted first


def max_document_bytes(limits: Any) -> int:
    """The largest restore body this server reads, from its bounds (rules.Limits)."""
    scale = max(limits.max_tasks / 10_000, limits.max_linked_accounts / 10_000,
                limits.max_events / 5_000, limits.max_tokens / 10_000)
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
             "--max-linked-accounts, --max-events and --max-tokens).")
RESTORE_BUSY = ("Another large restore of this tenant is running; a tenant's large restores run "
                "one at a time. Try again in a moment.")


InvalidSnapshot = ValidationFailed.coded("invalid-snapshot")
SnapshotIncompatible = Conflict.coded("snapshot-incompatible")
SnapshotConflict = Conflict.coded("snapshot-conflict")


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


def _v1_to_v2(document: dict[str, Any]) -> dict[str, Any]:
    """Version 2 keeps version 1's layout, section for section (each now written by the
    part of the tenant that owns it), so a version 1 document needs its version only. What
    a version 1 document may lack (sections and fields added after it was first written:
    `aggregatorItems`, `apiFaults`, endpoint ids, signing secrets, record fields with a
    default) a version 2 document may lack too: each part loads it as before. A state
    file's layout is the same too; its snapshots migrate as each is restored."""
    return {**document, "version": 2}


# Each older version's step to the next, of a snapshot and a state file alike (both are
# at VERSION): a document is brought up one version at a time.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def migrated(document: dict[str, Any]) -> dict[str, Any]:
    """A document of an older version (check_header accepted it) as this version writes
    it; one of this version as it is. The caller's document is not changed."""
    while document["version"] < VERSION:
        document = MIGRATIONS[document["version"]](document)
    return document


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


def _finder(found: str, what: str) -> Callable[[Any, str], Any]:
    """A lookup of Loading's objects `found` by id: LookupError naming `what` when missing."""

    def find(self: Any, key: str) -> Any:
        objects = getattr(self, found)
        if key not in objects:
            raise LookupError(f"the snapshot has no {what} {key!r}")
        return objects[key]

    return find


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

    # The objects loaded so far, by id (a miss names what is missing).
    task = _finder("tasks", "task")
    linked_account = _finder("accounts", "linked account")
    processor_link = _finder("links", "processor link")
    processor_token = _finder("processor_tokens", "processor token")
    event = _finder("events", "event")

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

