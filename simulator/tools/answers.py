"""How verify-against compares two answers to the same probe: their statuses and the shape of
their JSON (types, fields, published enums), as differences and notes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .probes import SANDBOX, SERVICE, Probe


MAX_DEPTH = 100                 # JSON nested deeper is not read (no API nests so deep)


@dataclass(frozen=True)
class Difference:
    """One way the service's answer differs from the sandbox's. `kind`: `status`, `type`,
    `missing` (only the service answers the field), `extra` (only the sandbox does) or
    `enum`; `service` and `sandbox` are what each side had there (None: nothing)."""

    kind: str
    path: str
    service: Any
    sandbox: Any
    message: str
    probe: str = ""

    def record(self) -> dict[str, Any]:
        return {"probe": self.probe, **asdict(self)}


@dataclass(frozen=True)
class Note:
    """Something not compared, or worth knowing, that is not a difference."""

    path: str
    message: str
    probe: str = ""

    def record(self) -> dict[str, Any]:
        return {"probe": self.probe, **asdict(self)}


@dataclass(frozen=True)
class Unreadable:
    """An answer whose body could not be read as JSON, and why (`not JSON`, `nested
    deeper than 100 levels`, `larger than 10 MiB`)."""

    reason: str


NOT_JSON = Unreadable("not JSON")


def parse_answer(raw: bytes) -> Any:
    """The JSON value of an answer's body, or an Unreadable saying why not. Never raises:
    whatever a service sends is an answer to compare, not a crash of the command."""
    if not raw.strip():
        return NOT_JSON
    try:
        value = json.loads(raw)
    except RecursionError:   # the decoder's own depth limit, far below 200,000 levels
        return Unreadable(f"nested deeper than {MAX_DEPTH} levels")
    except ValueError:       # JSONDecodeError, and UnicodeDecodeError of bytes not UTF-8
        return NOT_JSON
    if depth(value) > MAX_DEPTH:
        return Unreadable(f"nested deeper than {MAX_DEPTH} levels")
    return value


def depth(value: Any) -> int:
    """How deep arrays and objects nest in a parsed JSON value (a scalar: 0), without
    recursion: one level of them at a time."""
    levels, level = 0, [value]
    while level := [v for v in level if isinstance(v, (dict, list))]:
        levels += 1
        level = [child for v in level for child in (v.values() if isinstance(v, dict) else v)]
    return levels


# JSON has one number type: 5 and 5.5 are the same shape.
JSON_TYPES = {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string",
              list: "array", dict: "object"}


def json_type(value: Any) -> str:
    """The JSON type of a value json.loads made (which makes no subclasses)."""
    return JSON_TYPES.get(type(value), "not JSON")


@dataclass
class Shape:
    """The structure of one JSON value, or the union of several (the items of an array):
    the types seen, each object field's shape, the items' shape (None: no item seen) and
    the string values seen (for enum fields)."""

    types: set[str] = field(default_factory=set)
    fields: dict[str, Shape] = field(default_factory=dict)
    items: Shape | None = None
    values: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, value: Any) -> Shape:
        return cls().add(value)

    def add(self, value: Any) -> Shape:
        self.types.add(json_type(value))
        if isinstance(value, dict):
            for name, child in value.items():
                self.fields.setdefault(name, Shape()).add(child)
        elif isinstance(value, list):
            for item in value:
                self.items = (self.items or Shape()).add(item)
        elif isinstance(value, str):
            self.values.add(value)
        return self

    def described(self) -> str:
        return "|".join(sorted(self.types - {"null"})) or "null"


_NAME = re.compile(r"^[A-Za-z_$][\w$-]*$")


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if _NAME.match(name) else f"{path}[{json.dumps(name)}]"


def _a(kind: str) -> str:
    """`a string`, `an object`, `null`."""
    if kind == "null":
        return kind
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def diff_json(service: Any, sandbox: Any,
              enums: Mapping[str, tuple[str, ...]] | None = None
              ) -> tuple[list[Difference], list[Note]]:
    """Every structural difference between two JSON answers (parsed), and notes of what
    could not be compared.

    - A field only one side has is `missing` (service only) or `extra` (sandbox only),
      once, at its own path (not again for what it holds).
    - Types are JSON's (number covers integers); `null` matches any type (a value that
      is absent in that record, not a change of shape).
    - An array's items are compared as the union of their shapes, at `path[]`. Both
      empty: nothing to compare. One empty: a note, as test data, not the API, decides
      whether a user has records.
    - At a path named in `enums`, a string value is a difference when it is neither a
      published value nor one the other side answered there.
    """
    differences: list[Difference] = []
    notes: list[Note] = []
    _compare(Shape.of(service), Shape.of(sandbox), "$", enums or {}, differences, notes)
    return differences, notes


def _compare(service: Shape, sandbox: Shape, path: str, enums: Mapping[str, tuple[str, ...]],
             differences: list[Difference], notes: list[Note]) -> None:
    ours, theirs = sandbox.types - {"null"}, service.types - {"null"}
    if ours and theirs and ours != theirs:
        differences.append(Difference(
            "type", path, service.described(), sandbox.described(),
            f"{path}: the service answers {_a(service.described())}, the sandbox "
            f"{_a(sandbox.described())}"))
    if "object" in ours and "object" in theirs:
        for name, shape in service.fields.items():
            child = _child(path, name)
            if name in sandbox.fields:
                _compare(shape, sandbox.fields[name], child, enums, differences, notes)
            else:
                differences.append(Difference(
                    "missing", child, shape.described(), None,
                    f"{child}: only the service answers this field ({_a(shape.described())}); "
                    "the sandbox has no such field"))
        for name, shape in sandbox.fields.items():
            if name not in service.fields:
                child = _child(path, name)
                differences.append(Difference(
                    "extra", child, None, shape.described(),
                    f"{child}: only the sandbox answers this field ({_a(shape.described())}); "
                    "the service has no such field"))
    if "array" in ours and "array" in theirs:
        if service.items is not None and sandbox.items is not None:
            _compare(service.items, sandbox.items, f"{path}[]", enums, differences, notes)
        elif service.items is not None or sandbox.items is not None:
            empty, full = (SERVICE, SANDBOX) if service.items is None else (SANDBOX, SERVICE)
            notes.append(Note(path, f"{path}: the {empty} answered no items, the {full} some: "
                                    "their fields were not compared"))
    published = enums.get(path)
    if published is not None:
        for side, values, other in ((SERVICE, service.values, sandbox.values),
                                    (SANDBOX, sandbox.values, service.values)):
            for value in sorted(values - set(published) - other):
                differences.append(Difference(
                    "enum", path, value if side == SERVICE else None,
                    value if side == SANDBOX else None,
                    f"{path}: the {side} answered {value!r}, which is not a published value "
                    f"({', '.join(published)}) and the "
                    f"{SANDBOX if side == SERVICE else SERVICE} never answered it"))


def _expected(status: int, expect: str) -> bool:
    if expect.endswith("xx"):
        return str(status)[:1] == expect[:1]
    return str(status) == expect


def diff_answers(probe: Probe, service: tuple[int, Any], sandbox: tuple[int, Any]
                 ) -> tuple[list[Difference], list[Note]]:
    """The differences of one probe's two answers, `(status, parsed body or Unreadable)`.
    Statuses first: when they differ, that is the one difference (the bodies of a 200 and
    a 404 have nothing in common). Bodies are compared only when both are 2xx: the real
    service's error body is not published (real-service-facts.md, fact 3)."""
    (service_status, service_body), (sandbox_status, sandbox_body) = service, sandbox
    if service_status != sandbox_status:
        return [Difference("status", "status", service_status, sandbox_status,
                           f"status: the service answered {service_status}, the sandbox "
                           f"{sandbox_status}", probe.name)], []
    notes = []
    if not _expected(service_status, probe.expect):
        notes.append(Note("status", f"status: both answered {service_status}; the "
                                    f"documentation says {probe.expect}", probe.name))
    if not 200 <= service_status < 300:
        return [], notes
    unreadable = _unreadable(probe, service_body, sandbox_body)
    if unreadable is not None:
        return unreadable, notes
    differences, body_notes = diff_json(service_body, sandbox_body, probe.enums)
    return ([replace(d, probe=probe.name) for d in differences],
            notes + [replace(n, probe=probe.name) for n in body_notes])


def _unreadable(probe: Probe, service: Any, sandbox: Any) -> list[Difference] | None:
    """When a side's 2xx body could not be read: one difference at `$` saying why (none
    when neither side's could, for the same reason); None when both were read."""
    if not isinstance(service, Unreadable) and not isinstance(sandbox, Unreadable):
        return None
    if service == sandbox:
        return []

    def said(side: str, body: Any) -> str:
        if isinstance(body, Unreadable):
            return f"the {side}'s answer could not be read ({body.reason})"
        return f"the {side}'s is {_a(json_type(body))}"

    return [Difference("type", "$", json_type(service), json_type(sandbox),
                       f"$: {said(SERVICE, service)}; {said(SANDBOX, sandbox)}", probe.name)]
