"""The OpenAPI 3.1 document, generated from the same schemas the handlers enforce."""

from __future__ import annotations

import re
from typing import Any

from . import __version__
from .fixtures import ServiceProfile
from .routes.pipeline import Auth, Operation
from .schemas import api
from .schemas.events import event_schema, event_types
from .settings import Settings

_ERROR_RESPONSES = {
    "400": "Malformed JSON or a broken rule (e.g. `product` with `products`).",
    "401": "Missing or wrong credentials, or credentials of the other environment.",
    "403": "The state forbids it (company under maintenance or disabled, manual deposits).",
    "404": "Unknown id.",
    "409": "A conflict: the id exists, or the token was revoked or registered already.",
    "413": "Body over 1 MiB.",
    "422": "Schema validation failed; `details` lists each failing JSON path.",
}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(code): {"description": _ERROR_RESPONSES[str(code)], "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            for code in sorted(set(codes))}


def _ok(schema: dict[str, Any], code: int, envelope: dict[str, Any]) -> dict[str, Any]:
    body = {"type": "object", "required": ["data"], "properties": {"data": schema, **envelope}}
    return {str(code): {"description": "OK", "content": {"application/json": {"schema": body}}}}


_SECURITY = {
    Auth.API_KEYS: [{"apiKey": [], "apiSecret": []}],
    Auth.EITHER: [{"apiKey": [], "apiSecret": []}, {"publicToken": []}],
    Auth.PUBLIC_TOKEN: [{"publicToken": []}],
    Auth.NONE: [],
}


def describe(op: Operation) -> dict[str, Any]:
    """One operation's OpenAPI description, from its declaration."""
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                  for name in _path_names(op.path)]
    if op.query is not None:
        parameters += [{"name": name, "in": "query",
                        "required": name in op.query.get("required", ()), "schema": spec}
                       for name, spec in op.query["properties"].items()]
    parameters += [{"name": name, "in": "header", "required": required,
                    "schema": {"type": "string"}} for name, required in op.headers]
    errors = list(op.errors)
    if op.auth is not Auth.NONE:
        errors.append(401)
    if op.body is not None:
        errors += [400, 413, 422]
    if op.query is not None:
        errors.append(422)
    if op.content_type is None:
        responses = _ok(op.response or {}, op.status, op.envelope)
    else:
        responses = {str(op.status): {"description": "OK", "content": {
            op.content_type: {"schema": {"type": "string"} if "json" not in op.content_type
                              else {"type": "object"}}}}}
    document: dict[str, Any] = {"summary": op.summary, "security": _SECURITY[op.auth],
                                "responses": {**responses, **_errors(*errors)}}
    if op.description:
        document["description"] = op.description
    if op.tags:
        document["tags"] = list(op.tags)
    if parameters:
        document["parameters"] = parameters
    if op.body is not None:
        document["requestBody"] = _json_body(op.body)
    return document


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


PATH_PARAMETER = re.compile(r"\{([^}:]+)")  # {name} or {name:regex}


def _path_names(path: str) -> list[str]:
    return PATH_PARAMETER.findall(path)


def build_openapi(operations: list[Operation], service: ServiceProfile,
                  settings: Settings) -> dict[str, Any]:
    """The document of every operation the app serves, and of every webhook it sends."""
    paths: dict[str, Any] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = describe(op)
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
                 "description": f"Local sandbox of the payroll-connectivity service "
                                f"(vendor {service.vendor}, {settings.environment} environment)."},
        "security": [{"apiKey": [], "apiSecret": []}, {"publicToken": []}],
        "paths": paths,
        "webhooks": webhooks,
        "components": {
            "securitySchemes": {
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "apiSecret": {"type": "apiKey", "in": "header", "name": "x-api-secret"},
                "publicToken": {"type": "apiKey", "in": "header", "name": "x-public-token"},
            },
            "schemas": {"Error": api.ERROR, "SearchCompany": api.SEARCH_COMPANY,
                        "Company": api.FULL_COMPANY},
        },
    }
