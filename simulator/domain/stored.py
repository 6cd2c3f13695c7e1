"""How a tenant's parts are stored (snapshots, --state-file): one declaration per shape.

A record's stored form is declared once, next to its struct (STORED_TASK beside Task,
STORED_DELIVERY beside Delivery, ...): `Record` writes every field in camelCase and
derives the JSON Schema from the field annotations, with the range of every number (a
time within the clock's, a count or amount finite and bounded), and `shapes` where an
annotation says too little. Each part saves and loads itself: `dump()` gives its sections
of the document, `load(document, loading)` builds its objects from a checked document and
checks what a schema cannot (references to tasks, events, scenarios, ...), raising
LoadError with the JSON path, and the fresh part's `restore(...)` takes what it built.
snapshot.py adds the header, the migrations and the order of the parts.
"""

from __future__ import annotations

import random
import types
from collections.abc import Callable, Iterable
from datetime import date
from functools import cached_property
from typing import Any, Union, get_args, get_origin

import msgspec

from ..dates import calendar_day_field

# Every restored number in a range that no later read or run can trip over (issue 22):
# times within the clock's range, other numbers finite, not negative and bounded.
MAX_TIME = 253_402_300_799.0 - 4 * 31_536_000  # 9995-12-31: isoformat's year 9999, a margin
MAX_COUNT = 2**53 - 1                          # a JavaScript-safe integer
MAX_AMOUNT = 1e12
_RANGES = {"integer": {"minimum": 0, "maximum": MAX_COUNT},
           "number": {"minimum": 0, "maximum": MAX_AMOUNT}}

STRING = {"type": "string"}
STRINGS = {"type": "array", "items": STRING}
COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
PROBABILITY = {"type": "number", "minimum": 0, "maximum": 1}
TIME = {"type": "number", "minimum": 0, "maximum": MAX_TIME,
        "description": "Virtual seconds since the epoch, within the clock's range."}


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """An object schema: these properties and no others, `required` ones required."""
    return {"type": "object", "additionalProperties": False, "required": list(required),
            "properties": {**required, **(optional or {})}}


def array(record: Record) -> dict[str, Any]:
    return {"type": "array", "items": record.schema}


# random.Random.getstate(): version 3, 624 words and the position, a gauss pending or none.
RANDOM_STATE = obj({
    "version": {"const": 3},
    "state": {"type": "array", "minItems": 625, "maxItems": 625,
              "items": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}},
    "gauss": {"type": ["number", "null"], "minimum": -1e6, "maximum": 1e6}})


def random_state(generator: random.Random) -> dict[str, Any]:
    """A seeded generator's state as JSON data: the next draws follow from it."""
    version, internal, gauss = generator.getstate()
    return {"version": version, "state": list(internal), "gauss": gauss}


def checked_random_state(state: dict[str, Any], path: str) -> tuple[Any, ...]:
    """A stored generator state (schema-valid) as random.Random.setstate takes it, or a
    LoadError when the generator refuses it."""
    checked = (state["version"], tuple(state["state"]), state["gauss"])
    try:
        random.Random().setstate(checked)
    except (TypeError, ValueError) as error:
        raise LoadError(path, f"not a generator state: {error}") from None
    return checked


class Sections(msgspec.Struct, frozen=True):
    """The top-level sections of the document a part writes, as JSON Schema. `optional`
    ones a document may lack (written before they existed). Parts may share an object
    section (`counters`, `rng`): each declares its own fields of it."""

    required: dict[str, Any]
    optional: dict[str, Any] = msgspec.field(default_factory=dict)
    # An array section's bound, from the server's limits (rules.Limits): the most records
    # of it this server ever keeps and the setting that says so. A restore counts them as
    # it parses, and refuses one more before building the rest (snapshot.py).
    bounds: dict[str, Callable[[Any], tuple[int, str]]] = msgspec.field(default_factory=dict)


class LoadError(Exception):
    """What a part's load found wrong: the JSON path in the document and why (more than
    one when it checks several at once). snapshot.py refuses the document with them."""

    def __init__(self, path: str, message: str, more: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(f"{path}: {message}")
        self.problems = [(path, message), *more]


# -- records: a struct as a JSON object --------------------------------------------------------

_JSON = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_SEQUENCES: dict[Any, type] = {list: list, tuple: tuple, set: set, frozenset: frozenset}
_Convert = Callable[[Any], Any] | None  # None: the value as it is


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _is_time(camel_name: str) -> bool:
    """A record field that holds a virtual time (createdAt, expiresAt, time, lastRefresh...)."""
    return camel_name.endswith(("At", "Time")) or camel_name in ("time", "lastRefresh", "due")


def _ranged(camel_name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A field's schema with the range of its numbers: a time's, or a count's or amount's."""
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "number" in kinds and _is_time(camel_name):
        return {**schema, "minimum": 0, "maximum": MAX_TIME}
    for kind in ("integer", "number"):
        if kind in kinds:
            return {**schema, **_RANGES[kind]}
    return schema


def _options(kind: Any) -> tuple[Any, ...] | None:
    """The types of a union (`X | None`), None for any other annotation."""
    return get_args(kind) if get_origin(kind) in (Union, types.UnionType) else None


def _is_struct(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, msgspec.Struct)


class Record:
    """A record (a struct) as a JSON object: every field, named in camelCase, with the JSON
    Schema its annotation gives (a field whose type is a struct nests that struct's record;
    `shapes` gives a field's schema where its annotation says too little, or a function
    that makes them). A field with a default may be missing (a snapshot written before the
    field existed): it loads as its default."""

    def __init__(self, cls: type, shapes: dict[str, dict[str, Any]]
                 | Callable[[], dict[str, dict[str, Any]]] | None = None) -> None:
        # What the class's annotations give is worked out on first use (a snapshot, a
        # restore, the document's schemas), not when the module is imported: reading the
        # type hints of every stored class was a fifth of the package's import.
        self.cls = cls
        self._given = shapes or {}

    @cached_property
    def _shapes(self) -> dict[str, dict[str, Any]]:
        return self._given() if callable(self._given) else self._given

    @cached_property
    def _fields(self) -> list[tuple[str, str, Any, bool]]:
        """(attribute, JSON key, annotation, optional) of each field."""
        return [(f.name, camel(f.name), f.type, not f.required)
                for f in msgspec.structs.fields(self.cls)]

    @cached_property
    def schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": False,
                "required": [key for _, key, _, optional in self._fields if not optional],
                "properties": {key: self._shapes.get(key) or _ranged(key, self._schema(kind))
                               for _, key, kind, _ in self._fields}}

    @cached_property
    def _dumps(self) -> list[tuple[str, str, _Convert]]:
        return [(name, key, self._dumper(kind)) for name, key, kind, _ in self._fields]

    @cached_property
    def _loads(self) -> list[tuple[str, str, _Convert]]:
        return [(name, key, self._loader(kind)) for name, key, kind, _ in self._fields]

    @cached_property
    def _sparse(self) -> dict[str, Any]:
        """The fields a dump leaves out while at their defaults (the class's SPARSE)."""
        return {f.name: f.default if f.default_factory is msgspec.NODEFAULT
                else f.default_factory() for f in msgspec.structs.fields(self.cls)
                if f.name in getattr(self.cls, "SPARSE", ())}

    def dump(self, obj: Any) -> dict[str, Any]:
        sparse = self._sparse
        return {key: getattr(obj, name) if convert is None else convert(getattr(obj, name))
                for name, key, convert in self._dumps
                if name not in sparse or getattr(obj, name) != sparse[name]}

    def load(self, data: dict[str, Any]) -> Any:
        return self.cls(**{name: data[key] if convert is None else convert(data[key])
                           for name, key, convert in self._loads if key in data})

    def _schema(self, kind: Any) -> dict[str, Any]:
        options = _options(kind)
        if options is not None:
            schemas = [self._schema(option) for option in options]
            if all(set(s) == {"type"} for s in schemas):
                return {"type": [s["type"] for s in schemas]}
            return {"anyOf": schemas}
        if kind in _JSON:
            return {"type": _JSON[kind]}
        if kind is Any:
            return {}
        if kind is date:  # a profile's date of birth, a job's start
            return calendar_day_field()
        if _is_struct(kind):
            return Record(kind).schema
        origin = get_origin(kind)
        if origin in _SEQUENCES:
            return {"type": "array", "items": self._schema(get_args(kind)[0])}
        if dict in (kind, origin):
            return {"type": "object"}
        raise TypeError(f"{self.cls.__name__}: no JSON form for {kind!r}")

    def _dumper(self, kind: Any) -> _Convert:
        options = _options(kind)
        if options is not None:
            kind = next(k for k in options if k is not type(None))
        if kind is date:
            convert: _Convert = date.isoformat
        elif _is_struct(kind):
            convert = Record(kind).dump
        elif get_origin(kind) in _SEQUENCES:
            item = self._dumper(get_args(kind)[0])
            ordered = get_origin(kind) in (set, frozenset)  # sorted: the same on every dump
            if item is None:
                convert = sorted if ordered else list
            else:
                convert = ((lambda values: sorted(map(item, values))) if ordered
                           else (lambda values: [item(v) for v in values]))
        else:
            return None
        return _or_none(convert)

    def _loader(self, kind: Any) -> _Convert:
        options = _options(kind)
        if options is not None:
            kind = next(k for k in options if k is not type(None))
        if kind in (float, int):
            convert: _Convert = kind
        elif kind is date:
            convert = date.fromisoformat
        elif _is_struct(kind):
            convert = Record(kind).load
        elif get_origin(kind) in _SEQUENCES:
            container = _SEQUENCES[get_origin(kind)]
            item = self._loader(get_args(kind)[0])
            convert = container if item is None else (
                lambda values: container(item(v) for v in values))
        else:
            return None
        return _or_none(convert)


def _or_none(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`convert`, with None written and read as None."""
    return lambda value: None if value is None else convert(value)


def unique(document: dict[str, Any], section: str, record: Record, key: str) -> dict[str, Any]:
    """The records of a section (a list), by their `key` field; twice the same is refused."""
    found: dict[str, Any] = {}
    for number, raw in enumerate(document[section]):
        item = record.load(raw)
        if getattr(item, key) in found:
            raise LoadError(f"$.{section}[{number}].{camel(key)}", "appears twice")
        found[getattr(item, key)] = item
    return found


def too_many(limit: int, bound: str) -> str:
    """Why a section holds more records than this server ever keeps of its kind (`bound`
    names the setting or bound that says so)."""
    return f"more than {limit} items: more than this server keeps ({bound} {limit})"


# -- loading one document -------------------------------------------------------------------------

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
