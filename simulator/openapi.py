"""The OpenAPI 3.1 document, generated from the same schemas the handlers enforce.

Besides what each operation declares (`errors=`), the document derives the answers the
pipeline gives by itself (routes/pipeline.py): 401 for an operation with auth, 400
(malformed JSON), 413, 415 and 422 for one with a JSON body, 422 for one with query
parameters, path parameters (text that is not allowed) or request headers.
"""

from __future__ import annotations

import re
from typing import Any

from . import __version__
from .domain.processor_links import TOKEN_PATTERN
from .fixtures import ServiceProfile
from .routes.pipeline import CLIENT_ID, CLIENT_SECRET, Auth, Operation
from .scenarios.loader import load_all_scenarios, scenario_folders
from .schemas import api
from .schemas.events import event_schema, event_types
from .schemas.validate import schema_errors
from .settings import Settings, bundled_dir

_ERROR_RESPONSES = {
    "400": "Malformed JSON or a broken rule (e.g. `product` with `products`).",
    "401": "Missing or wrong credentials, or credentials of the other environment.",
    "403": "The state forbids it (company under maintenance or disabled, manual deposits).",
    "404": "Unknown id.",
    "409": "A conflict: the id exists, or the token was revoked or registered already.",
    "413": "Body over 1 MiB.",
    "415": "A body sent with a content-type that is not JSON (`application/json` or a "
           "`+json` type), on the control plane or with `--strict-bodies`; elsewhere it is "
           "read as JSON and `x-sandbox-warning` says so. A body without a content-type is "
           "read as JSON.",
    "422": "Schema validation failed, or text that cannot be stored (a control character in "
           "an identifier, a path segment or a query parameter); `details` lists each "
           "failing JSON path. A field or query parameter the API does not know is ignored "
           "and named in `x-sandbox-warning` (refused here on the control plane or with "
           "`--strict-bodies`).",
    "429": "A bound of the sandbox is reached (README: Limits); `retry-after` says when "
           "trying again makes sense.",
}
_ERROR_HEADERS = {
    "429": {"retry-after": {"description": "Seconds to wait before trying again.",
                            "required": True,
                            "schema": {"type": "string", "pattern": "^[0-9]+$"}}},
}
# Any method a path does not take: aiohttp's refusal, rendered as the error body with the
# methods it takes. It belongs to no operation (an operation is a method the path takes),
# so the document states it once, here and in its description.
_METHOD_NOT_ALLOWED = {
    "description": "The path does not take this method; `Allow` lists those it takes.",
    "headers": {"allow": {"description": "The methods the path takes, e.g. `GET, HEAD`.",
                          "required": True, "schema": {"type": "string"}}},
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}
# Path segments and query values: what `text_problem` lets through (schemas/validate.py).
_PATH_SEGMENT = {"type": "string", "minLength": 1, "pattern": api.NO_CONTROL_CHARACTER}


def _errors(codes: list[int], page: str | None = None) -> dict[str, Any]:
    """The error answers of these codes; a page (`text/html`) shows its own refusals as
    the page (GET /initialize/{config}), the pipeline's as the error body."""
    responses = {}
    for code in sorted({str(c) for c in codes}):
        content = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        if page == "text/html":
            content[page] = {"schema": {"type": "string"}}
        responses[code] = {"description": _ERROR_RESPONSES[code], "content": content}
        if code in _ERROR_HEADERS:
            responses[code]["headers"] = _ERROR_HEADERS[code]
    return responses


def _ok(schema: dict[str, Any], code: int, envelope: dict[str, Any]) -> dict[str, Any]:
    body = {"type": "object", "required": ["data"], "properties": {"data": schema, **envelope}}
    return {str(code): {"description": "OK", "content": {"application/json": {"schema": body}}}}


_SECURITY = {
    Auth.API_KEYS: [{"apiKey": [], "apiSecret": []}],
    Auth.EITHER: [{"apiKey": [], "apiSecret": []}, {"publicToken": []}],
    Auth.PUBLIC_TOKEN: [{"publicToken": []}],
    Auth.NONE: [],
    Auth.AGGREGATOR: [{"aggregatorClientId": [], "aggregatorSecret": []}],
}


def describe(op: Operation, names: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One operation's OpenAPI description, from its declaration; `names` (profile_names)
    fills in the names only the running app knows."""
    path_names = _path_names(op.path)
    parameters = [{"name": name, "in": "path", "required": True, "schema": _PATH_SEGMENT}
                  for name in path_names]
    if op.query is not None:
        parameters += [{"name": name, "in": "query",
                        "required": name in op.query.get("required", ()),
                        "schema": _text_value(spec)}
                       for name, spec in op.query["properties"].items()]
    parameters += [{"name": name, "in": "header", "required": required,
                    "schema": {"type": "string", "minLength": 1}} for name, required in op.headers]
    errors = list(op.errors)
    if op.auth is not Auth.NONE:
        errors.append(401)
    if op.body is not None:
        errors += [400, 413, 415, 422]
    if op.query is not None or path_names or op.headers:
        errors.append(422)
    if op.dialect is not None:  # another API's answers, as they are, and its error body
        responses = {str(op.status): {"description": "OK", "content": {
            "application/json": {"schema": op.response or {}}}}}
        errors = []
        responses.update({str(status): {"description": text, "content": {
            "application/json": {"schema": op.dialect.error_schema}}}
            for status, text in op.dialect.errors.items()})
    elif op.content_type is None:
        responses = _ok(op.response or {}, op.status, op.envelope)
    else:
        responses = {str(op.status): {"description": "OK", "content": {
            op.content_type: {"schema": {"type": "string"} if "json" not in op.content_type
                              else {"type": "object"}}}}}
    document: dict[str, Any] = {"summary": op.summary, "security": _SECURITY[op.auth],
                                "responses": {**responses, **_errors(errors, op.content_type)}}
    if op.description:
        document["description"] = op.description
    if op.tags:
        document["tags"] = list(op.tags)
    if parameters:
        document["parameters"] = parameters
    if op.body is not None:
        schema = api.published(op.body)
        document["requestBody"] = _json_body(_named(schema, names or {}),
                                             required=bool(schema_errors({}, schema)))
    return document


def profile_names(service: ServiceProfile, settings: Settings) -> dict[str, dict[str, Any]]:
    """The keywords each `x-names` kind of the request schemas stands for in this app: its
    scenarios (the folders serve loads), event types, products and processor tokens."""
    scenarios = load_all_scenarios(scenario_folders(settings.scenarios, bundled_dir("scenarios")))

    def named(kind: str) -> list[str]:
        return sorted(name for name, scenario in scenarios.items() if scenario.kind == kind)

    return {
        api.TASK_SCENARIOS: {"enum": named("task")},
        api.PROCESSOR_LINK_SCENARIOS: {"enum": named("processor-link")},
        api.EVENT_TYPES: {"enum": event_types(service.aggregator)},
        api.PRODUCTS: {"enum": list(service.products)},
        # A token of this environment: one of the other is 400 wrong-environment.
        api.PROCESSOR_TOKENS: {"pattern": TOKEN_PATTERN.pattern.replace(
            "(sandbox|production)", settings.environment)},
    }


def _named(schema: Any, names: dict[str, dict[str, Any]]) -> Any:
    """`schema` with each `x-names` subschema given the keywords its kind stands for (an
    enum of a nullable one takes null too)."""
    if isinstance(schema, list):
        return [_named(item, names) for item in schema]
    if not isinstance(schema, dict):
        return schema
    filled = {key: _named(value, names) for key, value in schema.items()}
    keywords = names.get(schema.get("x-names"))
    if keywords is not None:
        filled.update(keywords)
        if "enum" in keywords and "null" in schema.get("type", ()):
            filled["enum"] = [*keywords["enum"], None]
    return filled


def _text_value(spec: dict[str, Any]) -> dict[str, Any]:
    """A query value's schema as the pipeline reads it: no control character, whatever the
    schema says (schemas/validate.py: text_problem)."""
    if spec.get("type") == "string" and "pattern" not in spec and "format" not in spec:
        return {**spec, "pattern": api.NO_CONTROL_CHARACTER}
    return spec


def _json_body(schema: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    """A JSON request body. `required` only where an empty body is refused: the pipeline
    reads an empty body as `{}`, so an operation whose schema `{}` satisfies takes none."""
    return {"required": required, "content": {"application/json": {"schema": schema}}}


PATH_PARAMETER = re.compile(r"\{([^}:]+)")  # {name} or {name:regex}


def _path_names(path: str) -> list[str]:
    return PATH_PARAMETER.findall(path)


DESCRIPTION = ("Local sandbox of the payroll-connectivity service (vendor {vendor}, {environment} "
               "environment). Any method a path does not take answers 405 with `Allow` "
               "(components/responses/MethodNotAllowed).")


def build_openapi(operations: list[Operation], service: ServiceProfile,
                  settings: Settings) -> dict[str, Any]:
    """The document of every operation the app serves, and of every webhook it sends."""
    paths: dict[str, Any] = {}
    names = profile_names(service, settings)
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = describe(op, names)
    webhooks = {
        event_type: {"post": {
            "summary": f"{event_type}, as a CloudEvent in binary content mode",
            "parameters": [
                {"name": "ce-specversion", "in": "header", "required": True,
                 "schema": {"const": "1.0"}},
                {"name": "ce-source", "in": "header", "required": True,
                 "schema": {"const": f"com.{service.vendor}"}},
                {"name": "ce-type", "in": "header", "required": True,
                 "schema": {"const": f"com.{service.vendor}.{event_type}"}},
                {"name": "ce-time", "in": "header", "required": True,
                 "schema": {"type": "string", "format": "date-time"}},
                {"name": "ce-id", "in": "header", "required": True, "schema": {"type": "string"}},
            ],
            "requestBody": _json_body(event_schema(event_type, service.aggregator)),
            "responses": {"200": {"description": "Any 2xx acknowledges; anything else is "
                                                 "retried (3 attempts, 30 s apart)."}},
        }}
        for event_type in event_types(service.aggregator)
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "payroll-sandbox", "version": __version__,
                 "description": DESCRIPTION.format(vendor=service.vendor,
                                                   environment=settings.environment)},
        "security": [{"apiKey": [], "apiSecret": []}, {"publicToken": []}],
        "paths": paths,
        "webhooks": webhooks,
        "components": {
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "apiSecret": {"type": "apiKey", "in": "header", "name": "x-api-secret"},
                "publicToken": {"type": "apiKey", "in": "header", "name": "x-public-token"},
                # The aggregator's own API (/aggregator-api/): the same key and secret, as
                # its client sends them (or as `client_id` and `secret` in the body).
                "aggregatorClientId": {"type": "apiKey", "in": "header", "name": CLIENT_ID[0]},
                "aggregatorSecret": {"type": "apiKey", "in": "header", "name": CLIENT_SECRET[0]},
            },
            "schemas": {"Error": api.ERROR, "SearchCompany": api.SEARCH_COMPANY,
                        "Company": api.FULL_COMPANY},
            "responses": {"MethodNotAllowed": _METHOD_NOT_ALLOWED},
        },
    }
