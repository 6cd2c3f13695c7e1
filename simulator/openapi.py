"""The OpenAPI 3.1 document, generated from the same schemas the handlers enforce."""

from __future__ import annotations

from typing import Any

from . import __version__
from .fixtures import ServiceProfile
from .schemas import api
from .settings import Settings

_ERROR_RESPONSES = {
    "400": "Malformed JSON or a broken rule (e.g. `product` with `products`).",
    "401": "Missing or wrong credentials, or credentials of the other environment.",
    "404": "Unknown id.",
    "413": "Body over 1 MiB.",
    "422": "Schema validation failed; `details` lists each failing JSON path.",
}


def _errors(*codes: str) -> dict[str, Any]:
    return {code: {"description": _ERROR_RESPONSES[code],
                   "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            for code in codes}


def _ok(schema: dict[str, Any], description: str = "OK", status: str = "200",
        **extra: Any) -> dict[str, Any]:
    body = {"type": "object", "required": ["data"], "properties": {"data": schema, **extra}}
    return {status: {"description": description, "content": {"application/json": {"schema": body}}}}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _query(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": name, "in": "query", "required": name in schema.get("required", ()),
             "schema": spec} for name, spec in schema["properties"].items()]


def build_openapi(service: ServiceProfile, settings: Settings) -> dict[str, Any]:
    company_list = {"type": "array", "items": {"$ref": "#/components/schemas/Company"}}
    paths: dict[str, Any] = {
        "/health": {"get": {"summary": "Liveness", "security": [],
                            "responses": _ok({"type": "object"})}},
        "/access-token": {"post": {
            "summary": "Create a public token for a user (creates the user if new)",
            "security": [{"apiKey": [], "apiSecret": []}],
            "requestBody": _body(api.ACCESS_TOKEN_REQUEST),
            "responses": {**_ok(api.ACCESS_TOKEN), **_errors("400", "401", "413", "422")}}},
        "/company/search": {"post": {
            "summary": "Fuzzy company search, most relevant first",
            "requestBody": _body(api.SEARCH_REQUEST),
            "responses": {**_ok({"type": "array", "items": {"$ref": "#/components/schemas/SearchCompany"}}),
                          **_errors("400", "401", "404", "413", "422")}}},
        "/company/list": {"get": {
            "summary": "The full catalog for the account",
            "parameters": _query(api.COMPANY_LIST_QUERY),
            "responses": {**_ok(company_list, total={"type": "integer"}), **_errors("401", "422")}}},
        "/company/{companyId}": {"get": {
            "summary": "Company Details with full connector capabilities",
            "parameters": [{"name": "companyId", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "responses": {**_ok({"$ref": "#/components/schemas/Company"}), **_errors("401", "404")}}},
        "/_sandbox/tenants": {"post": {
            "summary": "Control plane: a new isolated tenant with its own keys",
            "security": [{"apiKey": [], "apiSecret": []}],
            "requestBody": {"required": False,
                            "content": {"application/json": {"schema": api.TENANT_REQUEST}}},
            "responses": {**_ok({"type": "object"}, "Created", "201"), **_errors("401", "422")}}},
        "/_sandbox/reset": {"post": {
            "summary": "Control plane: this tenant back to its fixtures",
            "security": [{"apiKey": [], "apiSecret": []}],
            "responses": {**_ok({"type": "object"}), **_errors("401")}}},
        "/_sandbox/requests": {"get": {
            "summary": "Control plane: journal of API requests received, newest first",
            "security": [{"apiKey": [], "apiSecret": []}],
            "parameters": _query(api.JOURNAL_QUERY),
            "responses": {**_ok({"type": "array", "items": {"type": "object"}}),
                          **_errors("401", "422")}}},
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "payroll-sandbox", "version": __version__,
                 "description": f"Local sandbox of the payroll-connectivity service "
                                f"(vendor {service.vendor}, {settings.environment} environment)."},
        "servers": [{"url": "/"}],
        "security": [{"apiKey": [], "apiSecret": []}, {"publicToken": []}],
        "paths": paths,
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
