"""Checking input against the JSON Schemas the OpenAPI document publishes: request
bodies, query parameters and times, and the fixture, scenario and config files.

Each fault is a (JSON path, message) pair, so every error names the field at fault.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import MalformedJson, ValidationFailed, field_detail


def json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def schema_errors(document: Any, schema: dict) -> list[tuple[str, str]]:
    """Every (JSON path, message) at which the document breaks the schema, in path order."""
    try:
        if _validity(schema)(document):
            return []  # the common case, decided without jsonschema
    except Exception:  # a document the checks cannot read (a YAML key that is no string)
        pass
    from jsonschema import Draft202012Validator  # loaded on first use: it is slow to import

    entry = _validators.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = _validators[id(schema)] = (schema, Draft202012Validator(
            schema, format_checker=Draft202012Validator.FORMAT_CHECKER))
    errors = sorted(entry[1].iter_errors(document), key=lambda e: [str(p) for p in e.path])
    found = []
    for error in errors:
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            # Name the field at fault, not the object that holds it.
            allowed = error.schema.get("properties", {})
            patterns = error.schema.get("patternProperties", {})
            found += [(json_path([*error.absolute_path, name]), "is not a known field")
                      for name in error.instance if name not in allowed
                      and not any(re.search(pattern, name) for pattern in patterns)]
        else:
            found.append((json_path(error.absolute_path), _short_message(error)))
    return found


# Keyed by id(schema); each entry keeps its schema, so a reused id is noticed.
_validators: dict[int, tuple[dict, Any]] = {}
_fast: dict[int, tuple[dict, Any]] = {}


def _validity(schema: dict) -> Callable[[Any], bool]:
    """Whether a document is valid, decided by jsonschema-rs (a compiled Draft 2020-12
    validator, formats checked as jsonschema's format checker does): a valid request
    costs well under a microsecond. Only a refusal needs jsonschema's errors (paths and
    messages), so the error bodies are the same as before."""
    entry = _fast.get(id(schema))
    if entry is None or entry[0] is not schema:
        import jsonschema_rs

        entry = _fast[id(schema)] = (schema, jsonschema_rs.Draft202012Validator(
            schema, validate_formats=True).is_valid)
    return entry[1]


def _short_message(error: Any) -> str:
    # jsonschema repeats the whole instance in some messages; keep them short.
    message = error.message
    if len(message) > 300:
        message = message[:297] + "..."
    return message


INVALID_BODY = "The request body does not match the schema."
INVALID_QUERY = "The query parameters do not match the schema."


def parse_json_body(raw: bytes, schema: dict) -> dict[str, Any]:
    """JSON body -> dict valid against `schema` (400 not JSON, 422 not valid)."""
    if not raw.strip():
        document: Any = {}
    else:
        try:
            # json.loads(raw, parse_constant=_not_json), with the decoder made once
            document = _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
        except RecursionError:
            raise MalformedJson("The request body is nested too deeply.",
                                details=[field_detail("$", "nested too deeply")]) from None
        except (UnicodeDecodeError, ValueError) as error:
            raise MalformedJson(f"The request body is not valid JSON: {error}.",
                                details=[field_detail("$", str(error))]) from None
    errors = schema_errors(document, schema)
    if errors:
        raise ValidationFailed(INVALID_BODY, details=[field_detail(p, m) for p, m in errors])
    return document


def _not_json(constant: str) -> None:
    """NaN and Infinity are not JSON (Python's parser accepts them by default)."""
    raise ValueError(f"{constant} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_not_json)


def parse_query(query: Mapping[str, str], schema: dict) -> dict[str, Any]:
    """Query string -> typed dict valid against `schema` (422 naming each bad parameter)."""
    properties = schema.get("properties", {})
    values: dict[str, Any] = {}
    problems = []
    for name, raw in query.items():
        kind = properties.get(name, {}).get("type")
        if kind == "integer":
            try:
                values[name] = int(raw)
            except ValueError:
                problems.append(field_detail(f"$.{name}", f"{raw!r} is not an integer",
                                             location="query"))
        else:
            values[name] = raw
    if not problems:
        problems = [field_detail(p, m, location="query") for p, m in schema_errors(values, schema)]
    if problems:
        raise ValidationFailed(INVALID_QUERY, details=problems)
    for name, spec in properties.items():
        if name not in values and "default" in spec:
            values[name] = spec["default"]
    return values


def parse_time(value: str, path: str, *, location: str = "query") -> float:
    """An ISO 8601 time (a `Z` or an offset) -> seconds since the epoch."""
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationFailed(f"{value!r} is not an ISO 8601 time.",
                               details=[field_detail(path, "not an ISO 8601 time",
                                                     location=location)]) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()
