"""Shapes declared once, as msgspec structs: a body a request sends (`Command`) or an answer
shows (`View`) is a typed struct whose fields carry their constraints (`Meta(ge=...,
max_length=..., pattern=...)`, `choice(...)`) and whose JSON names come from the struct's
camelCase rename. The JSON Schema the server enforces and `/openapi.json` publishes is
derived from it (`schema_of`), so a field is written in one place.

What no annotation says (fields that exclude each other, `minProperties`, the names only
the running app knows) is the struct's `__schema_extra__`, merged into its object schema
(its `properties` added to the struct's fields).
"""

from __future__ import annotations

import functools
import operator
import types
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

import msgspec
from msgspec import UNSET, Meta, UnsetType, field

from ..clock import Moment
from .dates import DATE_TIME

__all__ = ["UNSET", "Answer", "Command", "Maybe", "Meta", "View", "choice", "decoder", "field",
           "given", "is_struct", "made", "of", "raw", "schema_of", "view_from", "view_of"]

T = TypeVar("T")
S = TypeVar("S", bound=msgspec.Struct)
_ORDER = "x-enum-order"  # choice's values in order, put back as `enum` (_inlined)
_PROPERTY_ORDER = "x-property-order"  # a struct's __schema_order__, applied by _inlined
_SCHEMAS: dict[Any, dict[str, Any]] = {}
_DEFS = "#/$defs/"
_NAMED: dict[str, list[type]] = {}  # every struct class by its name (msgspec names components so)
Maybe = Union[T, UnsetType]  # an optional field: absent (UNSET) or a value, never null


class View(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """An object an answer shows: fields in camelCase, other fields allowed."""

    __schema_extra__: ClassVar[dict[str, Any]] = {}
    # The order its schema lists its fields in, where the published order is not the order
    # the struct is sent in (its fields'): kept so /openapi.json does not move.
    __schema_order__: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **config: Any) -> None:
        super().__init_subclass__()
        _NAMED.setdefault(cls.__name__, []).append(cls)


class Command(View, forbid_unknown_fields=True):
    """An object a request sends: fields in camelCase and no others."""


class Answer(View, forbid_unknown_fields=True):
    """An object an answer shows whole: its fields and no others."""


def decoder(shape: Any) -> Any:
    """How a request's checked document becomes its declared type: a struct (or a list of
    them) is converted into one, in C (`msgspec.convert`: the JSON names by the struct's
    rename); a document with no struct declared is given as it is (None). Fields a struct's
    schema names past its own (`__schema_extra__`'s properties: taken, not used) are left
    out first. Not strict: a number with no fraction (1.0) is an integer to JSON Schema,
    so an integer field takes it (the schema has refused anything else already)."""
    if not is_struct(get_args(shape)[0] if get_origin(shape) is list else shape):
        return None
    unused = frozenset(shape.__schema_extra__.get("properties", {})) - {
        f.encode_name for f in msgspec.structs.fields(shape)} if is_struct(shape) else None
    if unused:
        return lambda document: msgspec.convert(
            {k: v for k, v in document.items() if k not in unused}, shape, strict=False)
    return functools.partial(msgspec.convert, type=shape, strict=False)


def view_of(view: type[S], record: Any, **differing: Any) -> S:
    """`view` made from a domain record: each field from the record's attribute of the same
    name (its JSON name comes from the view's rename), those whose name or form differs
    `differing`. A None where the view's field takes no null (an optional one, Maybe, that
    does not say `| None`) is left out (UNSET), as an absent field is."""
    return view_from(view, record, differing)


def view_from(view: type[S], record: Any, differing: dict[str, Any]) -> S:
    """`view_of`, the differing fields given as one dict (no copy made of it)."""
    return _maker(view, type(record), tuple(differing))(record, differing)


@functools.lru_cache(maxsize=1024)  # a view, a record type, a call's differing fields
def _maker(view: type, record_type: type, differing: tuple[str, ...]) -> Any:
    """`view_of` for one view, record type and set of differing fields, written out as one
    constructor call (as `dataclasses` writes `__init__`): a task's view is made on every
    GET /task/{taskId}, and this is cheaper than reading the fields into a dict first
    (docs/benchmarks.md, bench/instructions.py).
    A None is left out only where the view's field takes none and the record's may hold
    one (a struct field typed so, a differing field, any other attribute)."""
    typed = ({field.name: field.type for field in msgspec.structs.fields(record_type)}
             if is_struct(record_type) else {})
    values = []
    for name, nullable in _view_fields(view).items():
        assert name.isidentifier()  # a struct field's name: safe to write out
        value = (f"differing[{name!r}]" if name in differing else f"record.{name}"
                 if hasattr(record_type, name) else f"getattr(record, {name!r}, UNSET)")
        if not nullable and (name not in typed or name in differing or _nullable(typed[name])):
            value = f"UNSET if (value := {value}) is None else value"
        values.append(f"{name}=({value})")
    namespace = {"view": view, "UNSET": UNSET}
    exec(f"def make(record, differing):\n    return view({', '.join(values)})", namespace)
    return namespace["make"]


def made(view: type[S], **fields: Any) -> S:
    """`view` with these fields (TypeError for one it does not have, as its constructor),
    a None where the field takes no null left out (UNSET), as an absent field is."""
    nullable = _view_fields(view)
    return view(**{name: UNSET if value is None and not nullable.get(name, True) else value
                   for name, value in fields.items()})


@functools.cache
def _view_fields(view: type) -> dict[str, bool]:
    """A view's fields, each with whether it takes null (worked out once per view)."""
    return {field.name: _nullable(field.type) for field in msgspec.structs.fields(view)}


def _nullable(kind: Any) -> bool:
    """Whether a field of this type takes null: a type that says so (`X | None`), or any
    JSON value (Any); an optional one (Maybe: absent or a value) does not, unless it says
    so too."""
    if get_origin(kind) is Annotated:
        return _nullable(get_args(kind)[0])
    if get_origin(kind) in (Union, types.UnionType):
        options = get_args(kind)
        if type(None) in options:
            return True
        return UnsetType not in options and any(_nullable(option) for option in options)
    return kind is Any or kind is type(None)


def given(value: Any, default: Any = None) -> Any:
    """A struct field's value, or `default` where the request left it out (UNSET)."""
    return default if value is UNSET else value


def is_struct(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, msgspec.Struct)


def of(kind: Any, description: str | None = None, *, unique: bool = False,
       **meta: Any) -> Any:
    """`kind` with its constraints (msgspec's Meta: ge, le, min_length, pattern, ...), its
    description, and `unique` items for a list that keeps its order (a set would not)."""
    extra = {**meta.pop("extra_json_schema", {}), **({"uniqueItems": True} if unique else {})}
    if description is not None:
        meta["description"] = description
    return Annotated[kind, Meta(**meta, **({"extra_json_schema": extra} if extra else {}))]


def raw(schema: dict[str, Any]) -> Any:
    """Any JSON value, checked by a schema written by hand (a project file's, such as a
    payment method or a company, which the fixtures and scenario files share)."""
    return Annotated[Any, Meta(extra_json_schema=schema)]


def choice(*values: Any, **meta: Any) -> Any:
    """A field that takes one of `values`, published in this order (msgspec sorts a
    Literal's)."""
    extra = {**meta.pop("extra_json_schema", {}), _ORDER: list(values)}
    # null apart: msgspec below 0.19 sorts a Literal's values, and None among strings fails.
    given = tuple(value for value in values if value is not None)
    kind = Literal[given] if len(given) == len(values) else Literal[given] | None
    return Annotated[kind, Meta(extra_json_schema=extra, **meta)]




def schema_of(shape: Any) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a struct or annotated type, every object inline
    (no `$ref`), without msgspec's titles. Made once per shape: every call gives the same
    object (read it, never change it: copy it to make another)."""
    made = _SCHEMAS.get(shape)
    if made is None:
        (top,), components = msgspec.json.schema_components(
            [shape], ref_template=_DEFS + "{name}", schema_hook=_annotated)
        extras = {name: _extra(name, shape) for name in components}
        made = _SCHEMAS[shape] = _inlined(top, components, extras)
    return made


def _annotated(kind: type) -> dict[str, Any]:
    """A type of the house's own (clock.Moment): its field's annotation gives its schema."""
    if kind is Moment:
        return {}
    raise NotImplementedError(kind)


def _extra(name: str, shape: Any) -> dict[str, Any]:
    """What a component adds to msgspec's: its struct's `__schema_extra__`, and its
    docstring (msgspec's description) as one paragraph."""
    named = _NAMED.get(name, [])
    struct = named[0] if len(named) == 1 else _structs(shape).get(name)  # a name used twice
    doc = struct.__doc__ if struct is not None else None
    order = getattr(struct, "__schema_order__", ())
    return {**getattr(struct, "__schema_extra__", {}),
            **({"description": " ".join(doc.split())} if doc else {}),
            **({_PROPERTY_ORDER: order} if order else {})}


def _structs(shape: Any) -> dict[str, Any]:
    """Every struct type reachable from `shape`, by the name msgspec gives its component."""
    found: dict[str, Any] = {}
    stack = [msgspec.inspect.type_info(shape)]
    while stack:
        node = stack.pop()
        if isinstance(node, msgspec.inspect.StructType):
            if node.cls.__name__ in found:
                continue
            found[node.cls.__name__] = node.cls
            stack += [f.type for f in node.fields]
        for attr in ("type", "item_type", "key_type", "value_type"):
            inner = getattr(node, attr, None)
            if isinstance(inner, msgspec.inspect.Type):
                stack.append(inner)
        stack += [*getattr(node, "types", ()), *getattr(node, "item_types", ())]
    return found


def _inlined(schema: Any, components: dict[str, Any], extras: dict[str, Any]) -> Any:
    """`schema` with each `$ref` replaced by its component (and the struct's extras), and
    without msgspec's titles."""
    if isinstance(schema, list):
        return [_inlined(item, components, extras) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if ref is not None and ref.startswith(_DEFS):  # msgspec's; not the document's own
        name = ref.rsplit("/", 1)[1]
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        extra = dict(extras.get(name, {}))
        order = extra.pop(_PROPERTY_ORDER, ())
        target = {**components[name], **extra, **rest}
        if "properties" in extra:  # more fields, written as schemas (a table's, say)
            target["properties"] = {**components[name].get("properties", {}),
                                    **extra["properties"]}
        if order:
            target["properties"] = {key: target["properties"][key] for key in order}
        return _inlined(target, components, extras)
    if _ORDER in schema:  # one value is a `const`
        values = schema[_ORDER]
        schema = {key: value for key, value in schema.items()
                  if key not in (_ORDER, "enum", "anyOf")}
        schema.update({"const": values[0]} if len(values) == 1 else {"enum": values})
    either = schema.get("anyOf")
    if either and len(either) == 2 and {"type": "null"} in either:
        # X | None, said as JSON Schema says it: `"type": [X's type, "null"]`.
        value = either[0] if either[1] == {"type": "null"} else either[1]
        if isinstance(value.get("type"), str) and "$ref" not in value and "enum" not in value:
            rest = {k: v for k, v in schema.items() if k != "anyOf"}
            schema = {**value, **rest, "type": [value["type"], "null"]}
    inlined = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "dependentSchemas", "patternProperties"):
            inlined[key] = {name: _inlined(sub, components, extras) for name, sub in value.items()}
        elif key in ("enum", "const", "default", "examples", "dependentRequired"):
            inlined[key] = value
        elif key != "title" and not (key == "required" and value == []):
            inlined[key] = _inlined(value, components, extras)
    return inlined


# -- the vocabulary the shapes share ------------------------------------------------------------

# No C0 or C1 control character: in a user's identifier (these schemas), a path segment or
# a query value (the pipeline's check, validate.py: text_problem; the document
# states it there, openapi.py).
NO_CONTROL_CHARACTER = r"^[^\x00-\x1f\x7f-\x9f]*$"

# Names only the running app knows, marked where a request takes them (`"x-names": kind`,
# an annotation validators ignore): the document lists them (openapi.py), and the server
# refuses any other with its own code (422 unknown-scenario, unknown-event-type,
# unknown-products, invalid-processor-token).
TASK_SCENARIOS = "task-scenarios"
PROCESSOR_LINK_SCENARIOS = "processor-link-scenarios"
EVENT_TYPES = "event-types"
PRODUCTS = "products"
PROCESSOR_TOKENS = "processor-tokens"  # not a list: the pattern processor-<environment>-<uuid>

Text = of(str, min_length=1)
Count = of(int, ge=0)  # a count an answer shows (stored.Count also bounds what a restore reads)
Name = of(str, min_length=1, max_length=200)
Identifier = of(str, "The user's id in the customer's system.", min_length=1, max_length=256,
                pattern=NO_CONTROL_CHARACTER)
UserIdentifier = of(str, min_length=1, pattern=NO_CONTROL_CHARACTER)
Texts = list[Text]
Metadata = of(dict[str, Any], "Customer context, echoed in the task's events.")
DateTime = raw(DATE_TIME)  # the one form answers write (dates.py)
Instant = Annotated[Moment, Meta(extra_json_schema=DATE_TIME)]  # kept in seconds, written so
AnyDateTime = of(str, extra_json_schema={"format": "date-time"})  # any a caller sends


def text(description: str, **meta: Any) -> Any:
    return of(str, description, min_length=1, **meta)


def after_cursor(what: str) -> Any:
    """The `after` query parameter of incremental reads (domain/changes.py)."""
    return of(int, f"A revision (the envelope's `revision`): only the {what} after it, in "
              "the order of their latest change; `reset: true` when the tenant was reset or "
              "restored since (start over).", ge=0, le=2**53 - 1)  # a safe JavaScript number
