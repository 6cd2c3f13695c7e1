"""The sections of a snapshot's document that a part writes (domain/stored.py has the records):
the JSON Schemas of the sections that are no records (counters, generator states, ...),
each part's `Sections` and their bounds, and the records of a section by key."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import msgspec

from .stored import MAX_COUNT, MAX_TIME, LoadError, loaded

# The sections that are no records (counters, the pay-link state, ...), written as schemas.
STRING = {"type": "string"}
STRINGS = {"type": "array", "items": STRING}
COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
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


def unique(document: dict[str, Any], section: str, cls: type, key: str) -> dict[str, Any]:
    """The records of a section (a list), by their `key` field; twice the same is refused."""
    found: dict[str, Any] = {}
    for number, item in enumerate(loaded(document[section], list[cls], f"$.{section}")):
        if getattr(item, key) in found:
            name = next(f.encode_name for f in msgspec.structs.fields(cls) if f.name == key)
            raise LoadError(f"$.{section}[{number}].{name}", "appears twice")
        found[getattr(item, key)] = item
    return found
