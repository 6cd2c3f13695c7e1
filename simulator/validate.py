"""Checking input against the JSON Schemas the OpenAPI document publishes: request
bodies, query parameters and times, and the fixture, scenario and config files.

Each fault is a (JSON path, message) pair, so every error names the field at fault.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from .errors import MalformedJson, UnsupportedMediaType, ValidationFailed, field_detail


def json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


UNKNOWN_FIELD = "is not a known field"


def schema_errors(document: Any, schema: dict) -> list[tuple[str, str]]:
    """Every (JSON path, message) at which the document breaks the schema, in path order."""
    return [(json_path(parts), message) for parts, message in _schema_faults(document, schema)]


class ConfigError(Exception):
    """A configuration, fixture or scenario file is not right: the first problem (file,
    JSON path, message) and, in `problems`, every one found, that one first."""

    def __init__(self, file: str, path: str, message: str,
                 more: list[tuple[str, str, str]] | tuple = ()) -> None:
        self.problems = [(file, path, message), *more]
        super().__init__("\n".join(f"{f}: {p}: {m}" for f, p, m in self.problems))
        self.file, self.path, self.message = file, path, message

    @classmethod
    def collected(cls, problems: list[tuple[str, str, str]]) -> ConfigError:
        """One error holding every (file, path, message) found."""
        return cls(*problems[0], more=problems[1:])


def load_yaml(path: Path) -> Any:
    import yaml  # 30 ms: not on a start that reads its load from the cache (loadcache)

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "$", "file not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(str(path), "$", f"cannot read: {error}") from None
    try:
        # libyaml when present: several times faster on large fixture files
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(str(path), "$", f"not valid YAML: {where}{problem}") from None


def validate_document(document: Any, schema: dict, file: str) -> None:
    errors = schema_errors(document, schema)
    if errors:
        raise ConfigError.collected([(file, path, message) for path, message in errors])


def is_valid(document: Any, schema: dict) -> bool:
    """Whether the document is valid, by the compiled validator alone (no faults named)."""
    try:
        return _validity(schema)(document)
    except Exception:  # a document the checks cannot read: schema_errors says why
        return False


def _schema_faults(document: Any, schema: dict) -> list[tuple[list[Any], str]]:
    """schema_errors with each path as its parts (keys and indexes)."""
    if is_valid(document, schema):
        return []  # the common case, decided without jsonschema
    over = _too_many_items(document, schema, [])
    if over:  # named at once: jsonschema would check every item of them first
        return over
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
            found += [([*error.absolute_path, name], UNKNOWN_FIELD)
                      for name in error.instance if name not in allowed
                      and not any(re.search(pattern, name) for pattern in patterns)]
        else:
            found.append((list(error.absolute_path), _short_message(error)))
    return found


def _drop_unknown_fields(document: Any, schema: dict, ignored: list[str]
                         ) -> tuple[Any, list[tuple[list[Any], str]]]:
    """The document without the fields the schema does not know, each named in `ignored`,
    and the faults left. Plain object schemas (properties, no additional ones) are
    pruned in one pass that builds the objects anew (deleting 75,000 keys from a dict
    leaves its table 75,000 wide); what only jsonschema can tell is removed after, again
    and again, because a field dropped from an object may let jsonschema look inside a
    sibling it had not reached. A valid body (the common case) is left as it is."""
    if is_valid(document, schema):
        return document, []
    document = _pruned(document, schema, [], ignored)
    faults = _schema_faults(document, schema)
    removed = False
    for _ in range(8):
        unknown = [parts for parts, message in faults if message == UNKNOWN_FIELD]
        if not unknown:
            return (_compacted(document) if removed else document), faults
        removed = True
        for parts in unknown:
            holder = document
            try:
                for part in parts[:-1]:
                    holder = holder[part]
                del holder[parts[-1]]
            except (KeyError, IndexError, TypeError):
                continue  # already gone with the field that held it
            ignored.append(json_path(parts))
        faults = _schema_faults(document, schema)
    return _compacted(document), faults


def _pruned(value: Any, schema: Any, parts: list[Any], ignored: list[str]) -> Any:
    """`value` without the fields its object schemas do not know (named in `ignored`),
    its objects built anew. `additionalProperties` looks only at its sibling `properties`
    and `patternProperties`, whatever else the schema combines; with patterns (and for
    what a `$ref` or a combination holds) jsonschema decides, after."""
    if not isinstance(schema, dict) or "patternProperties" in schema:
        return value
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        properties = schema["properties"]
        if schema.get("additionalProperties") is False:
            ignored += [json_path([*parts, name]) for name in value if name not in properties]
            return {name: _pruned(item, properties[name], [*parts, name], ignored)
                    for name, item in value.items() if name in properties}
        return {name: _pruned(item, properties.get(name), [*parts, name], ignored)
                for name, item in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_pruned(item, schema["items"], [*parts, n], ignored) for n, item in enumerate(value)]
    return value


def _compacted(value: Any) -> Any:
    """`value` with its objects built anew (a dict keeps its table's width after deletes)."""
    if isinstance(value, dict):
        return {name: _compacted(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_compacted(item) for item in value]
    return value


TOO_MANY_ITEMS = "has {count} items, more than the {limit} allowed"


def _too_many_items(document: Any, schema: Any, path: list[Any]) -> list[tuple[list[Any], str]]:
    """The arrays longer than their `maxItems`, found by following `properties` and `items`
    (a 20,000-item array under a limit of 20 cost jsonschema 1.8 s of the event loop; this,
    a walk that never enters an array past its limit, a few milliseconds)."""
    if not isinstance(schema, dict):
        return []
    if isinstance(document, list):
        limit = schema.get("maxItems")
        if isinstance(limit, int) and len(document) > limit:
            return [(path, TOO_MANY_ITEMS.format(count=len(document), limit=limit))]
        items = schema.get("items")
        if not isinstance(items, dict):
            return []
        return [fault for index, item in enumerate(document)
                for fault in _too_many_items(item, items, [*path, index])]
    if isinstance(document, dict):
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return []
        return [fault for name, value in document.items() if name in properties
                for fault in _too_many_items(value, properties[name], [*path, name])]
    return []


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
    # The fields given together, else jsonschema's message, short: some repeat the instance.
    message = error.message if len(error.message) <= 300 else error.message[:297] + "..."
    return _given_together(error) or message


def _given_together(error: Any) -> str | None:
    """For `not: {anyOf: [{required: [a, b]}, ...]}` (fields that exclude each other, the
    form the request schemas use for "only one of"): which of them the body gave together."""
    if error.validator != "not" or not isinstance(error.instance, dict):
        return None
    branches = error.validator_value.get("anyOf", ()) if isinstance(error.validator_value,
                                                                    dict) else ()
    pairs = [branch["required"] for branch in branches if isinstance(branch, dict)
             and branch.keys() == {"required"} and set(branch["required"]) <= error.instance.keys()]
    return "; ".join(f"{' and '.join(pair)} cannot be given together" for pair in pairs) or None


INVALID_BODY = "The request body does not match the schema."
INVALID_QUERY = "The query parameters do not match the schema."


NOT_JSON_TYPE = ("The request body is sent as {given}; send it as application/json "
                 "(header content-type: application/json).")


_JSON_TYPES_SEEN: set[str] = {"application/json"}


def check_json_type(content_type: str | None) -> None:
    """A body's declared type must be JSON (application/json or a `+json` type); none
    declared is read as JSON. Otherwise 415: a form or text is not parsed as JSON."""
    if content_type is None or content_type in _JSON_TYPES_SEEN:
        return
    media = content_type.partition(";")[0].strip().lower()
    if media == "application/json" or (media.startswith("application/")
                                      and media.endswith("+json")):
        if len(_JSON_TYPES_SEEN) < 64:  # the few header values clients send, judged once
            _JSON_TYPES_SEEN.add(content_type)
        return
    raise UnsupportedMediaType(NOT_JSON_TYPE.format(given=media or "an empty content-type"),
                               details=[field_detail("content-type", f"{media!r} is not JSON",
                                                     location="header")])


def parse_json_body(raw: bytes | bytearray, schema: dict | None, *,
                    decode: Callable[[str], Any] | None = None,
                    ignored: list[str] | None = None) -> dict[str, Any]:
    """JSON body -> dict valid against `schema` (400 not JSON, 422 not valid; None: the
    caller checks it). `decode` parses the text (default: strict JSON in one call).
    Given an `ignored` list, fields the schema does not know are removed and their paths
    added to it, as a production API ignores them (DESIGN.md, Bodies); without one they
    are refused (422)."""
    if not raw.strip():
        document: Any = {}
    else:
        document = _fast_loads(raw) if decode is None else _SLOW
    if document is _SLOW:
        try:
            # json.loads(raw, parse_constant=_not_json), with the decoder made once
            text = raw.decode(json.detect_encoding(raw), "surrogatepass")
            document = (decode or _DECODER.decode)(text)
        except RecursionError:
            raise MalformedJson("The request body is nested too deeply.",
                                details=[field_detail("$", "nested too deeply")]) from None
        except (UnicodeDecodeError, ValueError) as error:
            raise MalformedJson(f"The request body is not valid JSON: {error}.",
                                details=[field_detail("$", str(error))]) from None
    # Only an escape (`\\u0001`, `\\r`), DEL or a C1 byte can put one in a string.
    if b"\\" in raw or b"\x7f" in raw or b"\xc2" in raw:
        faults = text_faults(document)
        if faults:
            raise ValidationFailed(INVALID_TEXT, details=bounded_details(faults))
    if schema is None:
        return document
    if ignored is None:
        faults = _schema_faults(document, schema)
    else:
        document, faults = _drop_unknown_fields(document, schema, ignored)
    if faults:
        raise ValidationFailed(INVALID_BODY, details=bounded_details(
            [(json_path(parts), message) for parts, message in faults[:DETAILS_KEPT + 1]],
            len(faults)))
    return document


# Faults named in one error body: the first ones and a count (a body of 75,000 unknown
# fields under --strict-bodies named each one).
DETAILS_KEPT = 50


def bounded_details(faults: list[tuple[str, str]], total: int | None = None,
                    location: str | None = None) -> list[dict[str, Any]]:
    """The details of an error body: the first DETAILS_KEPT faults, then how many more."""
    total = len(faults) if total is None else total
    extra = {} if location is None else {"location": location}
    details = [field_detail(path, message, **extra) for path, message in faults[:DETAILS_KEPT]]
    if total > DETAILS_KEPT:
        details.append(field_detail("$", f"and {total - DETAILS_KEPT} more faults", **extra))
    return details


INVALID_TEXT = "The request holds text that is not allowed."
IDENTIFIER_FIELDS = frozenset({"identifier", "userIdentifier"})
LONE_SURROGATE = "holds a lone surrogate (not Unicode text)"
CONTROL_CHARACTER = "holds a control character"
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def text_problem(text: str, identifier: bool = True) -> str | None:
    """Why `text` cannot be stored (None: it can): a lone surrogate anywhere; a control
    character in an identifier (a user's, a path's)."""
    if _SURROGATE.search(text):
        return LONE_SURROGATE
    if identifier and _CONTROL.search(text):
        return CONTROL_CHARACTER
    return None


def text_faults(document: Any, path: str = "$", identifier: bool = False) -> list[tuple[str, str]]:
    """Every (path, problem) of text_problem in a JSON document: lone surrogates in any key
    or string, control characters in the identifier fields."""
    if isinstance(document, str):
        problem = text_problem(document, identifier)
        return [(path, problem)] if problem else []
    faults = []
    if isinstance(document, dict):
        for key, value in document.items():
            inner = f"{path}.{key}"
            if _SURROGATE.search(key):
                shown = key.encode("utf-8", "backslashreplace").decode()
                faults.append((f"{path}.{shown}", LONE_SURROGATE))
                continue
            faults += text_faults(value, inner, key in IDENTIFIER_FIELDS)
    elif isinstance(document, list):
        for index, value in enumerate(document):
            faults += text_faults(value, f"{path}[{index}]")
    return faults


_SLOW = object()
FAST_BRACKETS = 256
# 19 digits starting a number: after what may precede a JSON number, or at the start (a
# 19-digit run inside a string, such as a company id, is no number: it parses the fast way).
_LONG_NUMBER = re.compile(rb"[\[:,\s-]\d{19}")
_LONG_FIRST = re.compile(rb"\d{19}")  # matched at the start only


def _fast_loads(raw: bytes | bytearray) -> Any:
    """The body parsed by orjson (a sixth of json's time), or _SLOW where json.loads
    would answer otherwise or name the fault: whatever orjson refuses (not UTF-8, a BOM,
    a lone surrogate, NaN, a number past a double's range), a number of 19 digits or more
    (orjson makes a float of a longer integer, json keeps it) and many brackets (orjson nests
    deeper than json, which refuses a document nested too deeply)."""
    if (raw.count(b"[") + raw.count(b"{") > FAST_BRACKETS or _LONG_NUMBER.search(raw)
            or _LONG_FIRST.match(raw)):
        return _SLOW
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _SLOW


def _not_json(constant: str) -> None:
    """NaN and Infinity are not JSON (Python's parser accepts them by default)."""
    raise ValueError(f"{constant} is not a JSON value")


_DECODER = json.JSONDecoder(parse_constant=_not_json)


def strict_json(text: str | bytes) -> Any:
    """JSON as the standard says: NaN and Infinity refused, and a document nested too
    deeply for the parser is a ValueError like any other bad JSON (not a RecursionError)."""
    if isinstance(text, bytes):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


_SPACE = re.compile(r"[ \t\n\r]*")


def json_in_pieces(text: str, walk: int = 3, *,
                   on_item: Callable[[dict[str, Any], str, int, Any], None] | None = None) -> Any:
    """strict_json for a large document, parsed a piece at a time: its objects and arrays
    down to `walk` levels are walked here, each value below them parsed by one call of the
    C scanner. The result is the same; but no single call holds the interpreter for the
    whole document, so a worker thread parsing it leaves the event loop its turns.

    `on_item(document, section, number, item)` sees each item of an array that is a
    member of the top-level object as soon as it is parsed, with the top-level members
    parsed so far: it may raise (not ValueError) to stop the parse there, before the rest
    of the document is built."""
    decode = _DECODER.raw_decode

    def skip(index: int) -> int:
        return _SPACE.match(text, index).end()

    top: dict[str, Any] = {}

    def value(index: int, depth: int, section: str | None = None) -> tuple[Any, int]:
        index = skip(index)
        opening = text[index:index + 1]
        if depth >= walk or opening not in ("{", "["):
            return decode(text, index)
        closing, container = ("}", top if depth == 0 else {}) if opening == "{" else ("]", [])
        seen = on_item if section is not None and opening == "[" else None
        index = skip(index + 1)
        if text.startswith(closing, index):
            return container, index + 1
        while True:
            if opening == "{":
                key, index = decode(text, index)
                if not isinstance(key, str):
                    raise ValueError(f"a key must be a string (char {index})")
                index = skip(index)
                if not text.startswith(":", index):
                    raise ValueError(f"expecting ':' (char {index})")
                container[key], index = value(index + 1, depth + 1,
                                              key if container is top else None)
            else:
                item, index = value(index, depth + 1)
                if seen is not None:
                    seen(top, section, len(container), item)
                container.append(item)
            index = skip(index)
            if text.startswith(",", index):
                index = skip(index + 1)
            elif text.startswith(closing, index):
                return container, index + 1
            else:
                raise ValueError(f"expecting ',' or {closing!r} (char {index})")

    try:
        document, end = value(0, 0)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except IndexError:
        raise ValueError("the document ends too soon") from None
    finally:
        # `value` calls itself through its own closure cell: a cycle that would hold the
        # whole text (up to the restore limit) until the next full collection.
        value = None  # type: ignore[assignment]
    if skip(end) != len(text):
        raise ValueError(f"extra data (char {skip(end)})")
    return document


_INTEGER = re.compile(r"-?[0-9]{1,18}")


def parse_query(query: Mapping[str, str], schema: dict, *,
                ignored: list[str] | None = None) -> dict[str, Any]:
    """Query string -> typed dict valid against `schema` (422 naming each bad parameter).
    Given an `ignored` list, parameters the schema does not know are left out and named
    in it (as parse_json_body does for body fields)."""
    properties = schema.get("properties", {})
    values: dict[str, Any] = {}
    problems = []
    for name, raw in query.items():
        problem = text_problem(raw) or text_problem(name)
        if problem:
            problems.append(field_detail(f"$.{name}", problem, location="query"))
            continue
        if ignored is not None and name not in properties:
            ignored.append(f"$.{name}")
            continue
        kind = properties.get(name, {}).get("type")
        if kind == "integer":
            # Digits only: int() would also read "1_0", " 10 " and other scripts' digits.
            if _INTEGER.fullmatch(raw):
                values[name] = int(raw)
            else:
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


def checked_url(url: str, flag: str, error: type[Exception]) -> str:
    """`url` when it is an http(s) URL a client can call (a host, a port that is a number
    from 0 to 65535); else `error` saying `<flag> '<url>'` and why (check-handler, listen
    and verify-against word their refusals so)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise error(f"{flag} {url!r} is not an http:// or https:// URL with a host")
    try:
        parts.port  # noqa: B018 -- raises on a port that is not a number from 0 to 65535
    except ValueError as problem:
        raise error(f"{flag} {url!r}: {problem}") from None
    return url


def names_of(value: Iterable[str] | str) -> set[str]:
    """Names given as one comma-separated string, or a list of them (a repeatable flag:
    --events a,b --events c)."""
    items = [value] if isinstance(value, str) else value
    return {name.strip() for item in items for name in item.split(",") if name.strip()}


def webhook_url_problem(url: str, policy: Any = None) -> str | None:
    """Why `url` cannot receive webhooks (None: it can): an absolute http(s) URL with a
    host, a port from 1 to 65535, no spaces or control characters, and a host the outbound
    `policy` (when given) does not refuse."""
    import yarl

    if any(c.isspace() or not c.isprintable() for c in url):
        return "contains spaces or control characters"
    try:
        parsed = yarl.URL(url)
        port = parsed.port
    except (ValueError, TypeError) as error:
        return f"is not a URL ({error})"
    if parsed.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parsed.host:
        return "has no host"
    if port is None or not 1 <= port <= 65535:
        return "has a port outside 1-65535"
    return None if policy is None else policy.url_problem(parsed)


def check_webhook_urls(urls: list[tuple[str, str]], policy: Any = None) -> None:
    """422 naming every (path, url) that cannot receive webhooks: not a usable URL, or a
    target the outbound `policy` refuses (webhooks/policy.py)."""
    problems = [field_detail(path, f"{url!r} {problem}") for path, url in urls
                if (problem := webhook_url_problem(url, policy)) is not None]
    if problems:
        raise ValidationFailed("A webhook URL is not usable.", details=problems)
