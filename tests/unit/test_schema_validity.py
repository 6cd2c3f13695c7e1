"""The fast validity check of validate.py (jsonschema-rs) decides exactly as
jsonschema does.

A valid request is accepted by the fast check alone; jsonschema only runs to name the
faults of a refused one. So the fast check must never accept what jsonschema refuses,
and never refuse what it accepts: each schema the API and the
files use is checked against jsonschema on seeded random documents near its edges.
"""

from __future__ import annotations

import json
import random

import pytest
from jsonschema import Draft202012Validator

import payroll_sandbox.app  # noqa: F401  (every module that declares a struct)
from payroll_sandbox.domain.shapes import View, schema_of
from payroll_sandbox.schemas import api, fixtures, scenarios
from payroll_sandbox.validate import _validity, schema_errors

ODD_VALUES = [None, True, False, 0, 1, -1, 1.0, 1.5, 2 ** 40, "", "a", " ", [], {}, ["a", "a"],
              [1, True], [0, False], [1, 1.0], {"a": 1}, [{"a": 1}, {"a": 1}]]
STRINGS = ["", "a", "A", "ab", "abc-def", "ABC_123", "#a1b2c3", "#A1B2C", "http://x.test/h",
           "https://x", "ftp://x", "1234", "12345", "123456789", " ", "a\nb", "x-anchor",
           "com.vendor", "Com.vendor", "2024-01-01T00:00:00Z", "2024-01-01t10:00:00.5z",
           "2024-13-01T00:00:00Z", "2024-01-01", "walmart", "deposit", "verify", "operational",
           "user-link", "transactions", "x" * 200, "x" * 201, "é" * 3]


def sample(schema, rng: random.Random, depth: int = 0):
    """A document near `schema`: mostly valid, often just across one of its edges."""
    if depth > 6 or rng.random() < 0.08 or not isinstance(schema, dict):
        return rng.choice(ODD_VALUES + STRINGS)
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in schema and rng.random() < 0.3:
            return sample(rng.choice(schema[combinator]), rng, depth + 1)
    if "enum" in schema and rng.random() < 0.9:
        return rng.choice(list(schema["enum"]))
    if "const" in schema and rng.random() < 0.8:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind is None:
        kind = ("object" if "properties" in schema or "required" in schema
                else "array" if "items" in schema else rng.choice(["string", "integer", "object"]))
    if kind == "object":
        properties = schema.get("properties", {})
        document = {}
        for name, sub in properties.items():
            if name in schema.get("required", ()) and rng.random() < 0.95 or rng.random() < 0.3:
                document[name] = sample(sub, rng, depth + 1)
        if rng.random() < 0.1:
            document[rng.choice(["unknown", "x-anchor", "query", "product"])] = sample({}, rng,
                                                                                       depth + 1)
        return document
    if kind == "array":
        items = schema.get("items", {})
        size = rng.choice([0, 1, 2, 3, schema.get("minItems", 0), schema.get("maxItems", 3),
                           schema.get("maxItems", 3) + 1])
        document = [sample(items, rng, depth + 1) for _ in range(min(size, 60))]
        if document and rng.random() < 0.2:
            document.append(document[0])
        return document
    if kind == "string":
        if "minLength" in schema and rng.random() < 0.2:
            return "y" * rng.choice([schema["minLength"] - 1, schema["minLength"]])
        if "maxLength" in schema and rng.random() < 0.2:
            return "y" * rng.choice([schema["maxLength"], schema["maxLength"] + 1])
        return rng.choice(STRINGS)
    if kind in ("integer", "number"):
        edges = [schema.get(k) for k in ("minimum", "maximum", "exclusiveMinimum",
                                         "exclusiveMaximum") if k in schema]
        value = rng.choice(edges) if edges and rng.random() < 0.7 else rng.choice([0, 1, 60, 90])
        return rng.choice([value, value - 1, value + 1, float(value), value + 0.5, True, str(value)])
    if kind == "boolean":
        return rng.choice([True, False, 0, 1, "true"])
    return rng.choice(ODD_VALUES)


def _structs(base: type) -> list[type]:
    found = []
    for struct in base.__subclasses__():
        found += [struct, *_structs(struct)]
    return found


def named_schemas():
    for module in (api, fixtures, scenarios):
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, dict) and ("type" in value or "enum" in value):
                yield pytest.param(value, id=f"{module.__name__.rsplit('.', 1)[-1]}.{name}")
    # Every struct of the app (each module that declares one is imported with it), derived;
    # not the answers that name the document's own components (valid only inside it).
    seen = set()
    for struct in _structs(View):
        if struct in seen or not struct.__module__.startswith("payroll_sandbox."):
            continue
        seen.add(struct)
        schema = schema_of(struct)
        if "#/components/" not in json.dumps(schema):
            yield pytest.param(schema, id=f"{struct.__module__.rsplit('.', 1)[-1]}."
                                          f"{struct.__qualname__}")
    # And the bodies as /openapi.json shows them, with the rules their operations add.
    for shape in (api.SearchRequest, api.TaskCreateRequest, api.WebhookEndpointsRequest,
                  api.WebhookEndpointRequest, api.COMPANY_CREATE_REQUEST):
        name = getattr(shape, "__name__", "COMPANY_CREATE_REQUEST")
        yield pytest.param(api.published(shape), id=f"published.{name}")


EDGE_SCHEMAS = [
    {"enum": [1, True, None, "a", [1], {"a": 1}]},
    {"const": True}, {"const": 1}, {"const": [1, {"a": False}]},
    {"type": "array", "uniqueItems": True},
    {"type": ["integer", "null"], "minimum": 1, "exclusiveMaximum": 5},
    {"type": "object", "dependentRequired": {"a": ["b"]}, "minProperties": 1, "maxProperties": 2},
    {"if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]},
     "else": {"required": ["c"]}},
    {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
    {"not": {"anyOf": [{"required": ["a", "b"]}, {"type": "array"}]}},
    {"type": "object", "patternProperties": {"^x-": {"type": "string"}},
     "additionalProperties": {"type": "integer"}},
    {"type": "string", "format": "date-time"},
    {"items": False}, {"properties": {"a": False}}, True, False,
]


@pytest.mark.parametrize("schema", [*named_schemas(), *EDGE_SCHEMAS])
def test_fast_validity_decides_as_jsonschema_does(schema):
    reference = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    decide = _validity(schema)
    rng = random.Random(1)
    documents = [sample(schema, rng) for _ in range(400)] + ODD_VALUES + STRINGS
    for document in documents:
        assert decide(document) == reference.is_valid(document), document


def test_every_draft_2020_12_keyword_is_decided_by_the_fast_check_too():
    schema = {"type": "object", "propertyNames": {"maxLength": 2}}
    assert _validity(schema)({"a": 1}) is True
    assert _validity(schema)({"abc": 1}) is False
    assert schema_errors({"a": 1}, schema) == []
    assert schema_errors({"abc": 1}, schema) != []


def test_task_request_exclusions_keep_their_error_path():
    errors = schema_errors({"company": "c", "product": "deposit", "operation": "deposit"},
                           schema_of(api.TaskCreateRequest))
    assert [path for path, _ in errors] == ["$"]
