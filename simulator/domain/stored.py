"""How a tenant's parts are stored (snapshots, --state-file): one declaration per shape.

A record (a task, a delivery, ...) is a `Stored` struct, and the struct is its stored form:
msgspec writes and reads it (`stored`, `loaded`), and its JSON Schema comes from the same
annotations (`schema`), each number's range declared on its field (`Time`, `Count`,
`Amount`). Each part saves and loads itself: `dump()` gives its sections of the document,
`load(document, loading)` builds its objects from a checked document and checks what a
schema cannot (references: snapshot.py `Loading`), raising LoadError with the JSON path,
and the fresh part's `restore(...)` takes what it built. snapshot.py adds the header, the
migrations and the order of the parts."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from datetime import date
from functools import cache
from typing import Annotated, Any, ClassVar, get_args, get_origin

import msgspec
from msgspec import Meta

from .dates import calendar_day_field
from .shapes import schema_of

# Every restored number in a range that no later read or run can trip over (issue 22):
# times within the clock's range, other numbers finite, not negative and bounded. A record
# field says which it is (`created_at: Time`): its schema and its load hold it there.
MAX_TIME = 253_402_300_799.0 - 4 * 31_536_000  # 9995-12-31: isoformat's year 9999, a margin
MAX_COUNT = 2**53 - 1                          # a JavaScript-safe integer
MAX_AMOUNT = 1e12
Time = Annotated[float, Meta(ge=0, le=MAX_TIME)]  # seconds since the epoch (virtual or wall)
Count = Annotated[int, Meta(ge=0, le=MAX_COUNT)]
Amount = Annotated[float, Meta(ge=0, le=MAX_AMOUNT)]
Day = Annotated[date, Meta(extra_json_schema=calendar_day_field())]  # written YYYY-MM-DD

# The sections that are no records (counters, the pay-link state, ...), written as schemas.
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


# -- records --------------------------------------------------------------------------------------

class Stored(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """A record a snapshot keeps, as its fields say: a field with a default may be missing
    (a snapshot written before it existed) and loads as its default; `SPARSE` fields are
    left out while at their defaults (so a record that never set one is written as before)."""

    SPARSE: ClassVar[tuple[str, ...]] = ()


class _Given:
    """A field's JSON Schema, given whole (described)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema


def described(kind: Any, schema: dict[str, Any]) -> Any:
    """`kind`, whose JSON Schema is `schema` where the type says too little (a dict that
    is a payment method, a list of data records)."""
    return Annotated[kind, _Given(schema)]


def stored(record: Stored) -> dict[str, Any]:
    """A record as a snapshot writes it: msgspec's builtins, less what `_changes` says."""
    return _changed(type(record), msgspec.to_builtins(record))


def loaded(data: Any, kind: Any, path: str) -> Any:
    """Checked data (the document's schema) as `kind` (a record, a list of them), or a
    LoadError at its path where msgspec finds more (the schema and the struct agree)."""
    try:
        return msgspec.convert(data, kind, strict=False)  # 2.0 is an integer, as in JSON Schema
    except msgspec.ValidationError as error:
        message, _, where = str(error).partition(" - at `$")
        raise LoadError(path + where.rstrip("`"), message) from None


@cache
def schema(cls: type) -> dict[str, Any]:
    """A record's JSON Schema: its fields and no others, each as its annotation says
    (shapes.schema_of; a nested record's as this, a described field's as given)."""
    fields = msgspec.structs.fields(cls)
    return {"type": "object", "additionalProperties": False,
            "required": [f.encode_name for f in fields if f.required],
            "properties": {f.encode_name: _field_schema(f.type) for f in fields}}


def array(cls: type) -> dict[str, Any]:
    return {"type": "array", "items": schema(cls)}


def unique(document: dict[str, Any], section: str, cls: type, key: str) -> dict[str, Any]:
    """The records of a section (a list), by their `key` field; twice the same is refused."""
    found: dict[str, Any] = {}
    for number, item in enumerate(loaded(document[section], list[cls], f"$.{section}")):
        if getattr(item, key) in found:
            name = next(f.encode_name for f in msgspec.structs.fields(cls) if f.name == key)
            raise LoadError(f"$.{section}[{number}].{name}", "appears twice")
        found[getattr(item, key)] = item
    return found


def _field_schema(kind: Any) -> dict[str, Any]:
    given = [meta for meta in getattr(kind, "__metadata__", ()) if isinstance(meta, _Given)]
    if given:
        return given[0].schema
    if get_origin(kind) is list and _is_stored(get_args(kind)[0]):
        return array(get_args(kind)[0])
    return schema(kind) if _is_stored(kind) else schema_of(kind)


def _is_stored(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, Stored)


@cache
def _changes(cls: type) -> tuple[dict[str, Any], list[str], dict[str, type]]:
    """What a dump changes of msgspec's form of a `cls`: the SPARSE fields left out at
    their defaults (JSON name -> default), the sets written sorted (the same on every
    dump) and the nested records with changes of their own."""
    fields = msgspec.structs.fields(cls)
    return ({f.encode_name: msgspec.to_builtins(f.default_factory() if f.default is
                                                msgspec.NODEFAULT else f.default)
             for f in fields if f.name in cls.SPARSE},
            [f.encode_name for f in fields if get_origin(f.type) in (set, frozenset)],
            {f.encode_name: f.type for f in fields if _is_stored(f.type) and any(_changes(f.type))})


def _changed(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    defaults, sets, nested = _changes(cls)
    for key, default in defaults.items():
        if data[key] == default:
            del data[key]
    for key in sets:
        data[key].sort()
    for key, kind in nested.items():
        _changed(kind, data[key])
    return data
