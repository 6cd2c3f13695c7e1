"""Snapshots: one tenant's whole state as one JSON document, and back (issue 12).

`GET /_sandbox/snapshot` writes the caller's tenant as a document; `POST /_sandbox/snapshot`
restores one into the caller's tenant, exactly, or refuses it (422 naming the field, 409
for another environment, seed or format version) and changes nothing. `serve --state-file`
keeps every tenant (the fixtures' and those the control plane made, with their keys) in
one file: restored at start, saved on shutdown and periodically, written atomically.

Nothing is pickled. Records are dataclasses written field by field (camelCase), their
JSON Schema derived from the field annotations, so the document and the classes cannot
drift apart; every scheduled job is data too: each kind of action describes itself and is
rebuilt by the class registered for its kind (domain/timeline.py ACTION_KINDS), and jobs
keep their (due, sequence), so the timeline runs in exactly the saved order. The seeded
generators' states and the counters travel with it: a restored tenant makes the same ids
and events as the one it was taken from.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import logging
import os
import random
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import MISSING, fields
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from .clock import MANUAL, Clock, isoformat
from .domain.aggregator import Account, Item, token_index
from .domain.companies import Company, ManualDepositRule
from .domain.events import Event
from .domain.faults import MAX_RULES, RULE_FIELDS, FaultRule, target_problems
from .domain.linked_accounts import LinkedAccount, Profile
from .domain.processor_links import TRANSACTION, ProcessorLink, ProcessorToken
from .domain.tasks import Task, Workflow
from .domain.identity import PublicToken, User
from .domain.tenants import Tenant
from .domain.timeline import ACTION_KINDS, Job
from .errors import ApiError, Conflict, PayloadTooLarge, ValidationFailed, field_detail
from .fixtures import ConfigError
from .journal import MAX_ENTRIES as JOURNAL_MAX_ENTRIES
from .journal import JournalEntry
from .middleware import read_within_time
from .schemas.api import TASK_SNAPSHOT_SHAPES, USER_SNAPSHOT_SHAPES, WORKFLOW_SNAPSHOT_SHAPES
from .schemas.fixtures import ACCOUNT_SCHEMA
from .schemas.records import DATA_RECORDS
from .schemas.validate import (check_json_type, json_in_pieces, parse_json_body, schema_errors,
                               webhook_url_problem)
from .domain.outbox import INTERRUPTED_ATTEMPT, PENDING, Attempt, Delivery, FaultPlan
from .webhooks.dispatcher import SHUTDOWN_GRACE

log = logging.getLogger("payroll_sandbox.snapshot")

FORMAT = "payroll-sandbox-snapshot"
STATE_FORMAT = "payroll-sandbox-state"
VERSION = 1
# A restore's body (the 1 MiB of other bodies is too little). The largest snapshot a full
# tenant makes at the default bounds (10,000 completed tasks with their linked accounts,
# 10,000 tokens, its events with failed deliveries) measured 121.5 MiB (bench/hostile.py):
# twice that, rounded, leaves room for longer histories. A restore peaks at about 6 times
# its body in memory.
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024

NOT_A_SNAPSHOT = (f"This is not a snapshot: its `format` must be {FORMAT!r} "
                  "(GET /_sandbox/snapshot).")
A_STATE_FILE = (f"This is a --state-file document ({STATE_FORMAT!r}), not one tenant's snapshot: "
                f"restore it with serve --state-file.")
OTHER_VERSION = ("This snapshot has format version {theirs}; this server reads version {ours} "
                 "only.")
OTHER_ENVIRONMENT = ("This snapshot was taken in the {theirs} environment; this server is the "
                     "{ours} environment.")
OTHER_SEED = ("This snapshot was taken on a server started with --seed {theirs}; this one has "
              "--seed {ours}, so its catalog and generated data are not the snapshot's.")
INVALID = "The snapshot does not match its schema."
TOKEN_ELSEWHERE = ("The public token of this snapshot belongs to the tenant {owner!r} of this "
                   "server: a public token finds one tenant only. Delete or reset that tenant "
                   "first, or restore into it.")
TOO_LARGE = "A snapshot to restore is at most {limit} bytes."
TORN_FILE = ("not valid JSON ({error}): the state file is torn or corrupt; remove it (the "
             "sandbox then starts from the fixtures) or put back a good copy")


class InvalidSnapshot(ValidationFailed):
    code = "invalid-snapshot"


class SnapshotIncompatible(Conflict):
    code = "snapshot-incompatible"


class SnapshotConflict(Conflict):
    code = "snapshot-conflict"


class Fault(Exception):
    """What is wrong with a document: the error class (422 or 409) and every (JSON path,
    message). The API answers it as that error; the state file as a configuration error."""

    def __init__(self, error: type[ApiError], message: str,
                 problems: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.error, self.message, self.problems = error, message, problems

    def api_error(self) -> ApiError:
        return self.error(self.message, details=[field_detail(p, m) for p, m in self.problems])

    def config_error(self, file: str, prefix: str = "") -> ConfigError:
        return ConfigError.collected([(file, prefix + path[1:], message)
                                      for path, message in self.problems])


def _invalid(path: str, message: str) -> Fault:
    return Fault(InvalidSnapshot, INVALID, [(path, message)])


# -- records: a dataclass as a JSON object ----------------------------------------------------

_PLAIN = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
          "None": "null"}
# Every restored number in a range that no later read or run can trip over (issue 22):
# times within the clock's range, other numbers finite, not negative and bounded.
MAX_TIME = 253_402_300_799.0 - 4 * 31_536_000  # 9995-12-31: isoformat's year 9999, a margin
MAX_COUNT = 2**53 - 1                          # a JavaScript-safe integer
MAX_AMOUNT = 1e12
_RANGES = {"integer": {"minimum": 0, "maximum": MAX_COUNT},
           "number": {"minimum": 0, "maximum": MAX_AMOUNT}}


def _is_time(camel: str) -> bool:
    """A record field that holds a virtual time (createdAt, expiresAt, time, lastRefresh...)."""
    return camel.endswith(("At", "Time")) or camel in ("time", "lastRefresh", "due")
_SEQUENCES = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


def _split(text: str, separator: str) -> list[str]:
    """`text` split at `separator` outside brackets: "dict[str, Any] | None" -> two parts."""
    depth, part, parts = 0, "", []
    for char in text:
        depth += (char == "[") - (char == "]")
        if char == separator and depth == 0:
            parts.append(part.strip())
            part = ""
        else:
            part += char
    return [*parts, part.strip()]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _ranged(camel: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A field's schema with the range of its numbers: a time's, or a count's or amount's."""
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "number" in kinds and _is_time(camel):
        return {**schema, "minimum": 0, "maximum": MAX_TIME}
    for kind in ("integer", "number"):
        if kind in kinds:
            return {**schema, **_RANGES[kind]}
    return schema


class Record:
    """A dataclass as a JSON object: every field, named in camelCase, with the JSON Schema
    its annotations give (`nested` names the record of a field whose type is a dataclass).
    A field with a default may be missing (a snapshot written before the field existed):
    it loads as its default."""

    def __init__(self, cls: type, nested: dict[str, Record] | None = None,
                 shapes: dict[str, dict[str, Any]] | None = None) -> None:
        self.cls = cls
        self.nested = nested or {}
        self.fields = [(f.name, _camel(f.name), str(f.type)) for f in fields(cls)]
        optional = {_camel(f.name) for f in fields(cls)
                    if f.default is not MISSING or f.default_factory is not MISSING}
        shapes = shapes or {}  # a field's schema where its annotation says too little
        self.schema = {"type": "object", "additionalProperties": False,
                       "required": [camel for _, camel, _ in self.fields if camel not in optional],
                       "properties": {camel: shapes.get(camel) or _ranged(camel, self._schema(kind))
                                      for _, camel, kind in self.fields}}

    def dump(self, obj: Any) -> dict[str, Any]:
        return {camel: self._dump(kind, getattr(obj, name)) for name, camel, kind in self.fields}

    def load(self, data: dict[str, Any]) -> Any:
        return self.cls(**{name: self._load(kind, data[camel])
                           for name, camel, kind in self.fields if camel in data})

    def _schema(self, kind: str) -> dict[str, Any]:
        options = _split(kind, "|")
        if len(options) > 1:
            schemas = [self._schema(option) for option in options]
            if all(set(s) == {"type"} for s in schemas):
                return {"type": [s["type"] for s in schemas]}
            return {"anyOf": schemas}
        if kind in _PLAIN:
            return {"type": _PLAIN[kind]}
        if kind == "Any":
            return {}
        if kind == "date":
            return {"type": "string", "format": "date"}
        if kind in self.nested:
            return self.nested[kind].schema
        head, _, inner = kind.partition("[")
        if head in _SEQUENCES:
            return {"type": "array", "items": self._schema(_split(inner[:-1], ",")[0])}
        if head == "dict":
            return {"type": "object"}
        raise TypeError(f"{self.cls.__name__}: no JSON form for {kind!r}")

    def _dump(self, kind: str, value: Any) -> Any:
        if value is None:
            return None
        kind = next(k for k in _split(kind, "|") if k != "None")
        if kind == "date":
            return value.isoformat()
        if kind in self.nested:
            return self.nested[kind].dump(value)
        head, _, inner = kind.partition("[")
        if head in _SEQUENCES:
            items = [self._dump(_split(inner[:-1], ",")[0], item) for item in value]
            return sorted(items) if head in ("set", "frozenset") else items
        return value

    def _load(self, kind: str, value: Any) -> Any:
        if value is None:
            return None
        kind = next(k for k in _split(kind, "|") if k != "None")
        if kind == "float":
            return float(value)
        if kind == "int":
            return int(value)
        if kind == "date":
            return date.fromisoformat(value)
        if kind in self.nested:
            return self.nested[kind].load(value)
        head, _, inner = kind.partition("[")
        if head in _SEQUENCES:
            item = _split(inner[:-1], ",")[0]
            return _SEQUENCES[head](self._load(item, v) for v in value)
        return value


COMPANY = Record(Company)
PROFILE = Record(Profile)
USER = Record(User, shapes=USER_SNAPSHOT_SHAPES)
PUBLIC_TOKEN = Record(PublicToken)
TASK = Record(Task, shapes=TASK_SNAPSHOT_SHAPES)
WORKFLOW = Record(Workflow, shapes=WORKFLOW_SNAPSHOT_SHAPES)


# What the reads add to a stored data record as they render it.
_RENDERED = {"linkedAccount", "paystub"}


def _stored(kind: str) -> dict[str, Any]:
    """A list of a linked account's stored data records (statements, ...): the API's record
    shape (schemas/records.py), which the reads render, less the fields they add."""
    record = DATA_RECORDS[kind]
    return {"type": "array", "items": {
        **record, "required": [name for name in record["required"] if name not in _RENDERED]}}


LINKED_ACCOUNT = Record(LinkedAccount, {"Profile": PROFILE, "Company": COMPANY}, shapes={
    "statements": _stored("statements"), "timesheets": _stored("timesheets"),
    "taxes": _stored("taxes"), "depositAccounts": _stored("deposit-accounts")})
PROCESSOR_TOKEN = Record(ProcessorToken)
PROCESSOR_LINK = Record(ProcessorLink, shapes={
    "transactions": {"type": "array", "items": TRANSACTION}})
AGGREGATOR_ITEM = Record(Item, {"Account": Record(Account)}, shapes={
    "daysRequested": {"type": "integer", "minimum": 1, "maximum": 730}})
DELIVERY = Record(Delivery, {"Attempt": Record(Attempt)})
JOURNAL_ENTRY = Record(JournalEntry)


def _fault_rule_shapes() -> dict[str, dict[str, Any]]:
    """A rule's fields as the request takes them (domain/faults.py), null where a rule may
    go without one."""
    shapes = {name: {k: v for k, v in spec.items() if k != "description"}
              for name, spec in RULE_FIELDS.items()}
    for name in ("status", "retryAfter", "latencyMs", "count"):
        shapes[name]["type"] = [shapes[name]["type"], "null"]
    shapes["reset"] = {"type": "boolean"}
    return shapes


API_FAULT_RULE = Record(FaultRule, shapes=_fault_rule_shapes())

_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
_PROBABILITY = {"type": "number", "minimum": 0, "maximum": 1}
_TIME = {"type": "number", "minimum": 0, "maximum": MAX_TIME,
         "description": "Virtual seconds since the epoch, within the clock's range."}
# Fixtures' continuousAccess: at least a minute; at most a year here (a restore cannot make
# a refresh cadence that floods the ledger or one that never comes).
_INTERVAL = {"type": ["number", "null"], "minimum": 60, "maximum": 31_536_000}


def _object(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": list(required),
            "properties": {**required, **(optional or {})}}


_EVENT = _object({"id": _STRING, "type": _STRING, "time": _TIME,
                  "sequence": _COUNT, "user": {"type": ["string", "null"]},
                  "task": {"type": ["string", "null"]}, "body": {"type": "object"}})
# random.Random.getstate(): version 3, 624 words and the position, a gauss pending or none.
_RANDOM_STATE = _object({
    "version": {"const": 3},
    "state": {"type": "array", "minItems": 625, "maxItems": 625,
              "items": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}},
    "gauss": {"type": ["number", "null"], "minimum": -1e6, "maximum": 1e6}})
_JOB = _object({"due": _TIME, "sequence": _COUNT, "background": {"type": "boolean"},
                "owner": {"type": ["string", "null"]}, "label": _STRING,
                "action": {"type": "object", "required": ["kind"],
                           "properties": {"kind": {"enum": sorted(ACTION_KINDS)}}}})

SNAPSHOT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "A tenant's snapshot (GET and POST /_sandbox/snapshot)",
    **_object({
        "format": {"const": FORMAT},
        "version": {"const": VERSION},
        "environment": {"enum": ["sandbox", "production"]},
        "seed": {"type": "integer"},
        "takenAt": {"type": "string", "description": "The tenant's virtual time (informative)."},
        "tenant": _object({
            "name": {**_STRING, "description": "The tenant it was taken from (informative: a "
                                               "restore keeps the caller's name and keys)."},
            "products": _STRINGS,
            "manualDeposits": _object({"enabled": {"type": "boolean"}, "companies": _STRINGS,
                                       "withoutProgrammaticAuthentication": {"type": "boolean"}}),
            "signing": {"type": "boolean"},
            "refreshInterval": _INTERVAL,
            "piiDeletionInterval": _INTERVAL}),
        "clock": _object({"timestamp": _TIME}, {"now": _STRING}),
        "rng": _object({"ids": _RANDOM_STATE, "webhookFaults": _RANDOM_STATE}),
        "counters": _object({name: _COUNT for name in (
            "eventsEmitted", "eventsEvicted", "tasksEvicted", "tokensEvicted",
            "nextTaskEviction", "nextJobSequence", "journalNextId", "journalEvicted")} | {
            "eventsNextEviction": {"type": ["integer", "null"], "minimum": 0}}),
        "users": {"type": "array", "items": USER.schema},
        "tokens": {"type": "array", "items": PUBLIC_TOKEN.schema},
        "latestTokens": {"type": "object", "additionalProperties": _STRING},
        "companies": {"type": "array", "items": _object(
            {"id": _STRING, "company": {"anyOf": [COMPANY.schema, {"type": "null"}]}})},
        "tasks": {"type": "array", "items": TASK.schema},
        "workflows": {"type": "array", "items": WORKFLOW.schema},
        "scenarioBindings": {"type": "object", "additionalProperties": _STRING},
        "payLink": _object({
            "paymentTokens": {"type": "array", "items": _object(
                {"identifier": _STRING, "paymentMethod": _STRING, "createdAt": _TIME})},
            "merchantPaymentMethods": {"type": "array", "items": _object(
                {"identifier": _STRING, "company": _STRING, "paymentMethods": _STRINGS})},
            "cardTokenRecreationOff": _STRINGS}),
        "linkedAccounts": {"type": "array", "items": LINKED_ACCOUNT.schema},
        "processorTokens": {"type": "array", "items": PROCESSOR_TOKEN.schema},
        "processorLinks": {"type": "array", "items": PROCESSOR_LINK.schema},
        "events": {"type": "array", "items": _EVENT},
        "webhooks": _object({
            "endpoints": {"type": "array", "items": _object(
                {"url": _STRING}, {"_id": _STRING, "eventTypes": _STRINGS, "secretId": _STRING})},
            "faults": _object({"duplicate": _PROBABILITY, "outOfOrder": _PROBABILITY,
                               "delay": _PROBABILITY,
                               "delaySeconds": {"type": "number", "minimum": 0,
                                                "maximum": 86400}}),
            "deliveries": {"type": "array", "items": DELIVERY.schema},
            "held": {"type": "array", "items": _object({"event": _STRING,
                                                        "delivery": _COUNT})}},
            {"secrets": {"type": "array", "items": _object(
                {"_id": _STRING, "name": _STRING, "token": _STRING, "createdAt": _STRING})}}),
        "journal": {"type": "array", "items": JOURNAL_ENTRY.schema},
        "jobs": {"type": "array", "items": _JOB,
                 "description": "Pending jobs of the timeline (scenario cursors, retries, "
                                "refreshes), each with its action as data."},
    }, {
        # Added later: a snapshot without it has no items at the aggregator's API.
        "aggregatorItems": {"type": "array", "items": AGGREGATOR_ITEM.schema},
        # Added later (issue 23): a snapshot without it has no API fault rules.
        "apiFaults": _object({"rules": {"type": "array", "items": API_FAULT_RULE.schema,
                                        "maxItems": MAX_RULES},
                              "fired": {"type": "array", "items": _COUNT,
                                        "maxItems": MAX_RULES},
                              "random": _RANDOM_STATE}),
    }),
}
STATE_SCHEMA: dict[str, Any] = _object({
    "format": {"const": STATE_FORMAT}, "version": {"const": VERSION},
    "environment": {"enum": ["sandbox", "production"]}, "seed": {"type": "integer"},
    "savedAt": _STRING,
    "tenants": {"type": "array", "items": _object({
        "account": {"type": "object"}, "createdBy": {"type": ["string", "null"]},
        "snapshot": {"type": "object"}})}})


# -- taking a snapshot --------------------------------------------------------------------------

def take(tenant: Tenant, sandbox: Any) -> dict[str, Any]:
    """The tenant as one JSON document, as it is now (synchronous, so at a job boundary).

    The document shares lists and dicts with the tenant: write it out before anything
    else runs. An attempt still in flight is left out of its delivery and becomes a job
    due at its start, so a restore sends it again."""
    webhooks, timeline = tenant.webhooks, tenant.timeline
    jobs = [job.describe() for job in timeline.pending()]
    next_sequence = timeline.next_sequence()
    deliveries = []
    for event_id, event_deliveries in webhooks.deliveries.items():
        for delivery in event_deliveries:
            record = DELIVERY.dump(delivery)
            deliveries.append(record)
            in_flight = [n for n, a in enumerate(delivery.attempts)
                         if a.latency_ms is None and a.error is None]
            for number in in_flight:
                if delivery.attempts[number].fault == "duplicate":
                    # An extra copy: it never changes the outcome, and is not sent again.
                    record["attempts"][number]["error"] = INTERRUPTED_ATTEMPT
                elif delivery.state == PENDING and number == len(delivery.attempts) - 1:
                    last = delivery.attempts[number]
                    del record["attempts"][number]
                    record["nextAttemptAt"] = isoformat(last.time)
                    jobs.append({"due": last.time, "sequence": next_sequence,
                                 "background": False, "owner": f"delivery:{delivery.id}",
                                 "label": f"webhook attempt {last.number} of {event_id}",
                                 "action": {"kind": "webhook-attempt", "event": event_id,
                                            "delivery": delivery.number}})
                    next_sequence += 1
    jobs.sort(key=lambda job: (job["due"], job["sequence"]))
    events = tenant.events
    journal = tenant.journal
    rule = tenant.manual_deposits
    now = tenant.clock.timestamp()
    return {
        "format": FORMAT, "version": VERSION, "environment": tenant.environment,
        "seed": sandbox.registry.seed, "takenAt": isoformat(now),
        "tenant": {"name": tenant.name, "products": list(tenant.products),
                   "manualDeposits": {
                       "enabled": rule.enabled, "companies": sorted(rule.companies),
                       "withoutProgrammaticAuthentication":
                           rule.without_programmatic_authentication},
                   "signing": tenant.signing, "refreshInterval": tenant.refresh_interval,
                   "piiDeletionInterval": tenant.pii_deletion_interval},
        "clock": {"timestamp": now, "now": isoformat(now)},
        "rng": {"ids": tenant.ids.state(), "webhookFaults": _random_state(webhooks.random)},
        "counters": {
            "eventsEmitted": events.emitted, "eventsEvicted": events.evicted,
            "eventsNextEviction": events.next_eviction,
            "tasksEvicted": tenant.tasks.evicted, "tokensEvicted": tenant.evicted_tokens,
            "nextTaskEviction": tenant.tasks.next_eviction, "nextJobSequence": next_sequence,
            "journalNextId": journal._next_id,
            "journalEvicted": journal.evicted},
        "users": [USER.dump(user) for user in tenant.users.values()],
        "tokens": [PUBLIC_TOKEN.dump(token) for token in tenant.tokens.values()],
        "latestTokens": dict(tenant.latest_token),
        "companies": [{"id": company_id,
                       "company": None if company is None else COMPANY.dump(company)}
                      for company_id, company in tenant.companies.changed.items()],
        "tasks": [TASK.dump(task) for task in tenant.tasks.values()],
        "workflows": [WORKFLOW.dump(workflow) for workflow in tenant.tasks.workflows.values()],
        "scenarioBindings": dict(tenant.tasks.bindings),
        "payLink": {
            "paymentTokens": [{"identifier": identifier, "paymentMethod": method, "createdAt": at}
                              for (identifier, method), at in tenant.tasks.payment_tokens.items()],
            "merchantPaymentMethods": [
                {"identifier": identifier, "company": company, "paymentMethods": sorted(methods)}
                for (identifier, company), methods in tenant.tasks.merchant_payment_methods.items()],
            "cardTokenRecreationOff": sorted(tenant.tasks.card_token_recreation_off)},
        "linkedAccounts": [LINKED_ACCOUNT.dump(a) for a in tenant.accounts.values()],
        "processorTokens": [PROCESSOR_TOKEN.dump(t) for t in tenant.links.tokens.values()],
        "processorLinks": [PROCESSOR_LINK.dump(link) for link in tenant.links.values()],
        "aggregatorItems": [AGGREGATOR_ITEM.dump(item) for item in tenant.aggregator_items.values()],
        "events": [{"id": e.id, "type": e.type, "time": e.time, "sequence": e.sequence,
                    "user": e.user, "task": e.task, "body": e.body} for e in events.by_id.values()],
        "webhooks": {"endpoints": [dict(e) for e in webhooks.endpoints],
                     "faults": webhooks.faults.record(), "deliveries": deliveries,
                     "held": [{"event": event.id, "delivery": delivery.number}
                              for delivery, event in webhooks.held],
                     "secrets": [dict(secret) for secret in webhooks.secrets.values()]},
        # The journal's entries and counter are its own (journal.py has no snapshot API).
        "journal": [JOURNAL_ENTRY.dump(entry) for entry in journal._entries],
        "apiFaults": {"rules": [API_FAULT_RULE.dump(rule) for rule in tenant.api_faults.rules],
                      "fired": list(tenant.api_faults.fired),
                      "random": _random_state(tenant.api_faults.random)},
        "jobs": jobs,
    }


async def take_settled(tenant: Tenant, sandbox: Any) -> dict[str, Any]:
    """GET /_sandbox/snapshot: between two runs of the clock, once the tenant's webhook
    attempts in flight have finished (so the ledger shows how they went)."""
    async with tenant.runner.lock:
        await sandbox.dispatcher.settle(tenant)
        return take(tenant, sandbox)


def _random_state(generator: random.Random) -> dict[str, Any]:
    version, internal, gauss = generator.getstate()
    return {"version": version, "state": list(internal), "gauss": gauss}


# -- checking and restoring ---------------------------------------------------------------------

def check_header(document: Any, sandbox: Any, expected: str = FORMAT,
                 environment: str | None = None) -> None:
    """The document's kind, format version, environment (the tenant's; by default the
    server's) and seed, before its schema: a document of another version need not match
    this version's schema to be named so."""
    if not isinstance(document, dict):
        raise _invalid("$", "a snapshot is a JSON object")
    if document.get("format") != expected:
        hint = A_STATE_FILE if document.get("format") == STATE_FORMAT else NOT_A_SNAPSHOT
        raise Fault(InvalidSnapshot, hint, [("$.format", f"must be {expected!r}")])
    version = document.get("version")
    if version != VERSION:
        raise Fault(SnapshotIncompatible, OTHER_VERSION.format(theirs=version, ours=VERSION),
                    [("$.version", f"this server reads version {VERSION}")])
    environment = environment or sandbox.registry.tenants.environment
    if document.get("environment") != environment:
        message = OTHER_ENVIRONMENT.format(theirs=document.get("environment"), ours=environment)
        raise Fault(SnapshotIncompatible, message, [("$.environment", f"must be {environment!r}")])
    seed = sandbox.registry.seed
    if document.get("seed") != seed:
        raise Fault(SnapshotIncompatible, OTHER_SEED.format(theirs=document.get("seed"), ours=seed),
                    [("$.seed", f"this server has --seed {seed}")])


def plan(tenant: Tenant, sandbox: Any, document: Any) -> _Builder:
    """Checks a whole document and builds every object of it, touching nothing of the
    tenant and reading no other tenant (it may run off the event loop); put_in_place
    then puts them in place. Raises Fault."""
    check_header(document, sandbox, environment=tenant.environment)
    problems = _schema_errors_in_pieces(document, SNAPSHOT_SCHEMA)
    for number, job in enumerate(document.get("jobs", []) if not problems else ()):
        kind = ACTION_KINDS[job["action"]["kind"]]
        problems += [(f"$.jobs[{number}].action{path[1:]}", message)
                     for path, message in schema_errors(job["action"], kind.schema)]
    if problems:
        raise Fault(InvalidSnapshot, INVALID, problems)
    builder = _Builder(tenant, sandbox, document)
    builder.check_counts()
    builder.fill = builder.build()
    return builder


SPLIT_AT = 64  # items of an array checked one by one past this many


def _schema_errors_in_pieces(document: Any, schema: dict[str, Any],
                             path: str = "$") -> list[tuple[str, str]]:
    """schema_errors, with each long array of records checked item by item: the same
    findings, but no single call into the compiled validator holds the interpreter for
    the whole document (a restore runs in a worker thread; the event loop gets its turn
    between items)."""
    properties = schema.get("properties", {})
    if not isinstance(document, dict) or schema.get("type") != "object":
        return _prefixed(schema_errors(document, schema), path)
    split = {}
    for name, sub in properties.items():
        value = document.get(name)
        if set(sub) == {"type", "items"} and isinstance(value, list) and len(value) > SPLIT_AT:
            split[name] = (sub["items"], value)
        elif sub.get("type") == "object" and isinstance(value, dict) and any(
                isinstance(v, list) and len(v) > SPLIT_AT for v in value.values()):
            split[name] = (sub, value)
    problems = _prefixed(schema_errors(document, _without(schema, frozenset(split))), path)
    for name, (sub, value) in split.items():
        if isinstance(value, dict):
            problems += _schema_errors_in_pieces(value, sub, f"{path}.{name}")
            continue
        for number, item in enumerate(value):
            problems += _prefixed(schema_errors(item, sub), f"{path}.{name}[{number}]")
    return problems


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


def put_in_place(tenant: Tenant, sandbox: Any, planned: _Builder) -> None:
    """A plan's state in place of the tenant's (on the event loop), or a Fault and nothing
    changed: its public tokens may not be another tenant's."""
    planned.check_public_tokens()
    sandbox.registry.tenants.forget_tokens(tenant)
    tenant.restore(planned.fill)
    if tenant.runner.on_moved is not None:  # the real-mode timer: the next job moved
        tenant.runner.on_moved()


def restore(tenant: Tenant, sandbox: Any, document: Any) -> None:
    """The document's state in place of the tenant's, or a Fault and nothing changed."""
    put_in_place(tenant, sandbox, plan(tenant, sandbox, document))


def _plan_body(tenant: Tenant, sandbox: Any, body: list[bytearray]) -> _Builder:
    """A restore's body parsed, checked and built, off the event loop. The body is taken
    out of `body` and dropped once parsed, so its bytes do not outlive the parse."""
    with _no_full_collections():
        document = _parse(body.pop())
        return plan(tenant, sandbox, document)


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


def _parse(raw: bytearray) -> Any:
    """The body as JSON (400 when it is not; empty: `{}`, then refused as no snapshot),
    parsed a piece at a time (json_in_pieces), so the worker thread parsing it never holds
    the interpreter for long; checked by plan, piece by piece too."""
    return parse_json_body(raw, None, decode=json_in_pieces)


async def restore_settled(tenant: Tenant, sandbox: Any, request: web.Request) -> dict[str, Any]:
    """POST /_sandbox/snapshot: the body read (bounded in size and time), then parsed,
    checked and built in a worker thread, so the event loop serves every other tenant
    meanwhile; put in place between two runs of the tenant's clock. What it restored."""
    body = [await read_document(request)]
    async with tenant.runner.lock:
        try:
            planned = await asyncio.to_thread(_plan_body, tenant, sandbox, body)
            put_in_place(tenant, sandbox, planned)
        except Fault as fault:
            raise fault.api_error() from None
    return {"tenant": tenant.name, "restored": True, "clock": tenant.clock.describe(),
            "users": len(tenant.users), "tasks": len(tenant.tasks), "events": len(tenant.events),
            "deliveries": sum(len(d) for d in tenant.webhooks.deliveries.values()),
            "linkedAccounts": len(tenant.accounts),
            "processorLinks": len(tenant.links), "pendingJobs": len(tenant.timeline)}


async def read_document(request: web.Request) -> bytearray:
    """A restore's body (415 when not sent as JSON), up to MAX_DOCUMENT_BYTES (413), read
    here because other bodies stop at 1 MiB; within --request-timeout."""
    check_json_type(request.headers.get("content-type"))

    async def read() -> bytearray:
        raw = bytearray()
        while chunk := await request.content.read(1 << 20):
            raw += chunk
            if len(raw) > MAX_DOCUMENT_BYTES:
                raise PayloadTooLarge(TOO_LARGE.format(limit=MAX_DOCUMENT_BYTES))
        return raw

    return await read_within_time(request, read())


class _Builder:
    """Builds the objects of a checked document (schema-valid) and checks what the schema
    cannot say: references between them, scenarios and steps this server has."""

    def __init__(self, tenant: Tenant, sandbox: Any, document: dict[str, Any]) -> None:
        self.tenant, self.sandbox, self.document = tenant, sandbox, document
        self.dispatcher = sandbox.dispatcher
        self.tasks: dict[str, Task] = {}
        self.accounts: dict[str, LinkedAccount] = {}
        self.tokens: dict[str, ProcessorToken] = {}
        self.links: dict[str, ProcessorLink] = {}
        self.events: dict[str, Event] = {}
        self.deliveries: dict[str, list[Delivery]] = {}

    # Lookups for the actions' rebuild (domain/timeline.py ACTION_KINDS): LookupError names
    # what is missing; the caller adds the job's path.

    def task(self, task_id: str) -> Task:
        return self._find(self.tasks, task_id, "task")

    def linked_account(self, account_id: str) -> LinkedAccount:
        return self._find(self.accounts, account_id, "linked account")

    def processor_link(self, link_id: str) -> ProcessorLink:
        return self._find(self.links, link_id, "processor link")

    def processor_token(self, token: str) -> ProcessorToken:
        return self._find(self.tokens, token, "processor token")

    def event(self, event_id: str) -> Event:
        return self._find(self.events, event_id, "event")

    def delivery(self, event_id: str, number: int) -> Delivery:
        deliveries = self.deliveries.get(event_id, [])
        if not 1 <= number <= len(deliveries):
            raise LookupError(f"the event {event_id!r} has no delivery {number}")
        return deliveries[number - 1]

    def step(self, scenario_name: str, index: int, kind: str) -> Any:
        scenario = self.tenant.rules.scenarios.get(scenario_name)
        if scenario is None or scenario.kind != kind:
            raise LookupError(f"this server has no {kind} scenario named {scenario_name!r}")
        if index >= len(scenario.steps):
            raise LookupError(f"the scenario {scenario_name!r} has {len(scenario.steps)} steps")
        return scenario.steps[index]

    @staticmethod
    def _find(found: dict[str, Any], key: str, what: str) -> Any:
        if key not in found:
            raise LookupError(f"the snapshot has no {what} {key!r}")
        return found[key]

    # -- building ---------------------------------------------------------------------------

    def build(self) -> Callable[[Tenant], None]:
        d = self.document
        settings = d["tenant"]
        clock = self._clock(d["clock"]["timestamp"])
        rng = {name: self._random_state(d["rng"][name], f"$.rng.{name}")
               for name in ("ids", "webhookFaults")}
        users = self._unique("users", USER, "identifier")
        tokens = self._unique("tokens", PUBLIC_TOKEN, "public_token")
        for identifier, public_token in d["latestTokens"].items():
            if public_token not in tokens:
                raise _invalid(f"$.latestTokens[{json.dumps(identifier)}]", "no such token")
        companies = self._companies()
        self.tasks = self._unique("tasks", TASK, "id")
        workflows = self._unique("workflows", WORKFLOW, "id")
        for workflow_id, workflow in workflows.items():
            for number, task_id in enumerate(workflow.tasks):
                if task_id not in self.tasks:
                    number_of = list(workflows).index(workflow_id)
                    raise _invalid(f"$.workflows[{number_of}].tasks[{number}]", "no such task")
        pay_link = d["payLink"]
        payment_tokens = {(t["identifier"], t["paymentMethod"]): float(t["createdAt"])
                          for t in pay_link["paymentTokens"]}
        merchant_methods = {(m["identifier"], m["company"]): set(m["paymentMethods"])
                            for m in pay_link["merchantPaymentMethods"]}
        self.accounts = self._linked_accounts()
        self.tokens = self._unique("processorTokens", PROCESSOR_TOKEN, "token")
        self.links = self._unique("processorLinks", PROCESSOR_LINK, "id")
        for number, link in enumerate(self.links.values()):
            if link.token not in self.tokens:
                raise _invalid(f"$.processorLinks[{number}].token", "no such processor token")
        aggregator_items = (self._unique("aggregatorItems", AGGREGATOR_ITEM, "item_id")
                            if "aggregatorItems" in d else {})
        self.events = self._events()
        endpoints, faults, held = self._webhooks()
        secrets = self._secrets(endpoints)
        journal = [JOURNAL_ENTRY.load(entry) for entry in d["journal"]]
        api_faults = self._api_faults()
        counters = d["counters"]
        jobs = self._jobs(counters["nextJobSequence"])
        self.public_tokens = tokens
        deliveries = self.deliveries
        accounts, processor_tokens, links = self.accounts, self.tokens, self.links
        tasks, events = self.tasks, list(self.events.values())

        def fill(tenant: Tenant) -> None:
            tenant.products = tuple(settings["products"])
            tenant.manual_deposits = ManualDepositRule.from_fixture(settings["manualDeposits"])
            tenant.signing = settings["signing"]
            tenant.refresh_interval = settings["refreshInterval"]
            tenant.pii_deletion_interval = settings["piiDeletionInterval"]
            tenant.clock = clock
            tenant.ids.set_state(rng["ids"])
            for company_id, company in companies:
                if company is None:
                    tenant.companies.delete(company_id)
                else:
                    tenant.companies.put(company)
            tenant.users, tenant.tokens = users, tokens
            tenant.latest_token = dict(d["latestTokens"])
            tenant.tasks.restore(tasks, workflows, bindings=d["scenarioBindings"],
                                 payment_tokens=payment_tokens,
                                 merchant_payment_methods=merchant_methods,
                                 card_token_recreation_off=pay_link["cardTokenRecreationOff"],
                                 evicted=counters["tasksEvicted"],
                                 next_eviction=counters["nextTaskEviction"])
            tenant.accounts.restore(accounts)
            tenant.links.restore(processor_tokens, links)
            tenant.aggregator_items = aggregator_items
            tenant.aggregator_tokens = token_index(aggregator_items)
            tenant.events.restore(events, emitted=counters["eventsEmitted"],
                                  evicted=counters["eventsEvicted"],
                                  next_eviction=counters["eventsNextEviction"])
            faults_state = rng["webhookFaults"]
            tenant.webhooks.restore(endpoints=endpoints, secrets=secrets, faults=faults,
                                    deliveries=deliveries, held=held,
                                    roll=(faults_state["version"], tuple(faults_state["state"]),
                                          faults_state["gauss"]))
            # The journal keeps its newest entries; its counter goes on from the snapshot's.
            tenant.journal._entries.extend(journal)
            tenant.journal._next_id = counters["journalNextId"]
            tenant.journal.evicted = counters["journalEvicted"]
            if api_faults is not None:
                rules, fired, state = api_faults
                tenant.api_faults.restore(rules, fired)
                tenant.api_faults.random.setstate((state["version"], tuple(state["state"]),
                                                   state["gauss"]))
            tenant.evicted_tokens = counters["tokensEvicted"]
            tenant.timeline.restore(jobs, counters["nextJobSequence"])

        return fill

    def _clock(self, timestamp: float) -> Clock:
        """The tenant's clock mode and scale, at the snapshot's time (a real clock goes on
        from there: the time the server was down does not count)."""
        current = self.tenant.clock
        whole = int(timestamp)
        clock = Clock(mode=current.mode, time_scale=current.time_scale, start=whole)
        clock.advance(timestamp - whole)
        return clock

    @staticmethod
    def _random_state(state: dict[str, Any], path: str) -> dict[str, Any]:
        try:
            random.Random().setstate((state["version"], tuple(state["state"]), state["gauss"]))
        except (TypeError, ValueError) as error:
            raise _invalid(path, f"not a generator state: {error}") from None
        return state

    def _unique(self, section: str, record: Record, key: str) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for number, raw in enumerate(self.document[section]):
            item = record.load(raw)
            if getattr(item, key) in found:
                raise _invalid(f"$.{section}[{number}].{_camel(key)}", "appears twice")
            found[getattr(item, key)] = item
        return found

    def _companies(self) -> list[tuple[str, Company | None]]:
        companies = []
        for number, entry in enumerate(self.document["companies"]):
            company = None if entry["company"] is None else COMPANY.load(entry["company"])
            if company is not None and company.id != entry["id"]:
                raise _invalid(f"$.companies[{number}].company.id", "is not the entry's id")
            companies.append((entry["id"], company))
        return companies

    def _linked_accounts(self) -> dict[str, LinkedAccount]:
        accounts = self._unique("linkedAccounts", LINKED_ACCOUNT, "id")
        catalog = self.sandbox.registry.catalog
        for account in accounts.values():
            shared = catalog.get(account.company_at_link.id)
            if shared == account.company_at_link:  # the catalog's own record: keep one copy
                account.company_at_link = shared
        return accounts

    def _events(self) -> dict[str, Event]:
        events: dict[str, Event] = {}
        for number, raw in enumerate(self.document["events"]):
            if raw["id"] in events:
                raise _invalid(f"$.events[{number}].id", "appears twice")
            events[raw["id"]] = Event(id=raw["id"], type=raw["type"], time=float(raw["time"]),
                                      body=raw["body"], sequence=raw["sequence"],
                                      user=raw["user"], task=raw["task"])
        return events

    def _webhooks(self) -> tuple[list[dict[str, Any]], FaultPlan, list[tuple[Delivery, Event]]]:
        webhooks = self.document["webhooks"]
        for number, endpoint in enumerate(webhooks["endpoints"]):
            problem = webhook_url_problem(endpoint["url"], self.sandbox.dispatcher.policy)
            if problem is not None:
                raise _invalid(f"$.webhooks.endpoints[{number}].url", problem)
        for number, raw in enumerate(webhooks["deliveries"]):
            delivery = DELIVERY.load(raw)
            deliveries = self.deliveries.setdefault(delivery.event_id, [])
            if delivery.event_id not in self.events:
                raise _invalid(f"$.webhooks.deliveries[{number}].eventId", "no such event")
            if delivery.number != len(deliveries) + 1:
                raise _invalid(f"$.webhooks.deliveries[{number}].number",
                               f"must be {len(deliveries) + 1}: the event's deliveries are "
                               "numbered 1, 2, ... in order")
            deliveries.append(delivery)
        faults = webhooks["faults"]
        fault_plan = FaultPlan(duplicate=faults["duplicate"], out_of_order=faults["outOfOrder"],
                               delay=faults["delay"], delay_seconds=faults["delaySeconds"])
        held = []
        for number, pair in enumerate(webhooks["held"]):
            try:
                held.append((self.delivery(pair["event"], pair["delivery"]),
                             self.event(pair["event"])))
            except LookupError as error:
                raise _invalid(f"$.webhooks.held[{number}]", str(error)) from None
        # An endpoint without an `_id` (a snapshot from before endpoints had one) gets one
        # derived from its place and URL: the same on every restore, no seeded id spent.
        endpoints = [e if "_id" in e else
                     {"_id": hashlib.sha256(f"{n}:{e['url']}".encode()).hexdigest()[:24], **e}
                     for n, e in enumerate(map(dict, webhooks["endpoints"]))]
        return endpoints, fault_plan, held

    def _secrets(self, endpoints: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The signing secrets, by id; every endpoint's `secretId` names one of them."""
        secrets: dict[str, dict[str, Any]] = {}
        for number, raw in enumerate(self.document["webhooks"].get("secrets", [])):
            if raw["_id"] in secrets:
                raise _invalid(f"$.webhooks.secrets[{number}]._id", "appears twice")
            secrets[raw["_id"]] = dict(raw)
        for number, endpoint in enumerate(endpoints):
            if endpoint.get("secretId") is not None and endpoint["secretId"] not in secrets:
                raise _invalid(f"$.webhooks.endpoints[{number}].secretId", "no such secret")
        return secrets

    def _api_faults(self) -> tuple[list[FaultRule], list[int], dict[str, Any]] | None:
        """The API fault rules, their counts and generator (None: a snapshot from before
        they existed), checked as PUT /_sandbox/faults/api checks rules."""
        section = self.document.get("apiFaults")
        if section is None:
            return None
        from .routes.faults import targets  # here: the routes import this module

        path = "$.apiFaults"
        rules = [API_FAULT_RULE.load(raw) for raw in section["rules"]]
        if len(section["fired"]) != len(rules):
            raise _invalid(f"{path}.fired", "must count each rule once")
        for number, (rule, fired) in enumerate(zip(rules, section["fired"])):
            if len(rule.kinds) != 1:
                raise _invalid(f"{path}.rules[{number}]", "names exactly one of status, "
                               f"latencyMs, reset (it names {', '.join(rule.kinds) or 'none'})")
            if rule.retry_after is not None and rule.status is None:
                raise _invalid(f"{path}.rules[{number}].retryAfter", "only with status")
            if rule.count is not None and fired > rule.count:
                raise _invalid(f"{path}.fired[{number}]", f"more than its count {rule.count}")
        for number, problem in target_problems(rules, targets(self.sandbox.operations)):
            raise _invalid(f"{path}.rules[{number}].path", problem)
        return rules, list(section["fired"]), self._random_state(section["random"],
                                                                 f"{path}.random")

    def _jobs(self, next_sequence: int) -> list[Job]:
        jobs, sequences = [], set()
        for number, raw in enumerate(self.document["jobs"]):
            path = f"$.jobs[{number}]"
            if raw["sequence"] in sequences:
                raise _invalid(f"{path}.sequence", "appears twice")
            if raw["sequence"] >= next_sequence:
                raise _invalid(f"{path}.sequence", "must be below counters.nextJobSequence")
            sequences.add(raw["sequence"])
            try:
                # The builder is the rebuild's context: the app's collaborators, the
                # tenant, and the snapshot's objects by id.
                action = ACTION_KINDS[raw["action"]["kind"]].rebuild(raw["action"], self)
            except LookupError as error:
                raise _invalid(f"{path}.action", str(error).strip("'\"")) from None
            jobs.append(Job(float(raw["due"]), raw["sequence"], action, raw["label"],
                            raw["background"], raw["owner"]))
        return jobs

    def check_counts(self) -> None:
        """No more records than this server ever keeps of each kind it bounds hard (events
        and tasks may pass their bounds while deliveries or workflows are pending, so a
        snapshot of a real tenant can hold more: the body's size bounds those)."""
        limits = self.tenant.rules.limits
        for key, limit, flag in (("tokens", limits.max_tokens, "--max-tokens"),
                                 ("users", limits.max_users, "--max-users"),
                                 ("journal", JOURNAL_MAX_ENTRIES, "the journal's bound"),
                                 ("aggregatorItems", limits.max_aggregator_items,
                                  "the aggregator's items bound")):
            count = len(self.document.get(key, ()))
            if count > limit:
                raise _invalid(f"$.{key}", f"{count} items: more than this server keeps "
                               f"({flag} {limit})")

    def check_public_tokens(self) -> None:
        """A public token finds its tenant by itself: it may not be another tenant's too
        (reads every tenant: on the event loop)."""
        tokens = self.public_tokens
        for other in self.sandbox.registry.tenants:
            if other is self.tenant or not other.tokens:
                continue
            for number, public_token in enumerate(tokens):
                if public_token in other.tokens:
                    raise Fault(SnapshotConflict, TOKEN_ELSEWHERE.format(owner=other.name),
                                [(f"$.tokens[{number}].publicToken", "held by another tenant")])


# -- --state-file ---------------------------------------------------------------------------------

def state_document(sandbox: Any) -> dict[str, Any]:
    """Every tenant of the server: its account (name, keys, settings), who made it (None for
    the fixtures' accounts) and its snapshot."""
    registry = sandbox.registry
    return {"format": STATE_FORMAT, "version": VERSION,
            "environment": registry.tenants.environment, "seed": registry.seed,
            "savedAt": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
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

    def restore(self) -> None:
        if self.path is None or not self.path.exists():
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
            await asyncio.wait(settling, timeout=SHUTDOWN_GRACE)
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
