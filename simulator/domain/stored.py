"""A record a snapshot keeps (a task, a delivery, ...) is a `Stored` struct, and the struct is
its stored form: msgspec writes and reads it (`stored`, `loaded`), its JSON Schema comes
from the same annotations (`schema`), each number's range declared on its field (`Time`,
`Count`, `Amount`). The document's other sections and each part's `Sections`: sections.py;
the header, migrations and order of the parts: edge/snapshot.py."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from functools import cache
from typing import Annotated, Any, ClassVar, get_args, get_origin

import msgspec
from msgspec import Meta

from ..clock import moment_text, read_moment
from .dates import calendar_day_field
from .shapes import schema_of

# Every restored number in a range no later read or run trips over (issue 22): a record's
# field says which (`created_at: Time`), and its schema and its load hold it there.
MAX_TIME = 253_402_300_799.0 - 4 * 31_536_000  # 9995-12-31: isoformat's year 9999, a margin
MAX_COUNT = 2**53 - 1                          # a JavaScript-safe integer
Time = Annotated[float, Meta(ge=0, le=MAX_TIME)]  # seconds since the epoch (virtual or wall)
Count = Annotated[int, Meta(ge=0, le=MAX_COUNT)]
Amount = Annotated[float, Meta(ge=0, le=1e12)]
Day = Annotated[date, Meta(extra_json_schema=calendar_day_field())]  # written YYYY-MM-DD


class LoadError(Exception):
    """What a load found wrong: the JSON path and why (more than one when it checks several)."""

    def __init__(self, path: str, message: str, more: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__(f"{path}: {message}")
        self.problems = [(path, message), *more]


class Stored(msgspec.Struct, rename="camel", forbid_unknown_fields=True):
    """A record a snapshot keeps, as its fields say: a field with a default may be missing
    (a snapshot written before it existed) and loads as its default; `SPARSE` fields are
    left out while at their defaults (so a record that never set one is written as before)."""

    SPARSE: ClassVar[tuple[str, ...]] = ()


class _Given(msgspec.Struct, frozen=True):  # a field's JSON Schema, given whole (described)
    schema: dict[str, Any]


def described(kind: Any, schema: dict[str, Any]) -> Any:
    """`kind` with its JSON Schema given where the type says too little (a payment method)."""
    return Annotated[kind, _Given(schema)]


def stored(record: Stored) -> dict[str, Any]:
    """A record as a snapshot writes it: msgspec's builtins, less what `_changes` says."""
    return _changed(type(record), msgspec.to_builtins(record, enc_hook=moment_text))


def loaded(data: Any, kind: Any, path: str) -> Any:
    """Checked data (the document's schema) as `kind` (a record, a list of them), or a
    LoadError at its path where msgspec finds more (the schema and the struct agree)."""
    try:  # strict=False: 2.0 is an integer, as in JSON Schema
        return msgspec.convert(data, kind, strict=False, dec_hook=read_moment)
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


def _is_stored(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, Stored)


def _field_schema(kind: Any) -> dict[str, Any]:
    given = [meta for meta in getattr(kind, "__metadata__", ()) if isinstance(meta, _Given)]
    if given:
        return given[0].schema
    if get_origin(kind) is list and _is_stored(get_args(kind)[0]):
        return array(get_args(kind)[0])
    return schema(kind) if _is_stored(kind) else schema_of(kind)


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
