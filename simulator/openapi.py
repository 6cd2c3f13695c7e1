"""The OpenAPI 3.1 document, generated from the same schemas the handlers enforce."""

from __future__ import annotations

from typing import Any

from . import __version__
from .fixtures import ServiceProfile
from .schemas import api
from .schemas.events import event_schema, event_types
from .schemas.records import DATA_RECORDS, LINKED_ACCOUNT_LIST_RECORD
from .settings import Settings

_ERROR_RESPONSES = {
    "400": "Malformed JSON or a broken rule (e.g. `product` with `products`).",
    "401": "Missing or wrong credentials, or credentials of the other environment.",
    "403": "The state forbids it (company under maintenance or disabled).",
    "404": "Unknown id.",
    "413": "Body over 1 MiB.",
    "422": "Schema validation failed; `details` lists each failing JSON path.",
}


def _errors(*codes: str) -> dict[str, Any]:
    return {code: {"description": _ERROR_RESPONSES[code],
                   "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            for code in codes}


def _ok(schema: dict[str, Any], description: str = "OK", code: str = "200",
        **extra: Any) -> dict[str, Any]:
    body = {"type": "object", "required": ["data"], "properties": {"data": schema, **extra}}
    return {code: {"description": description, "content": {"application/json": {"schema": body}}}}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _query(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": name, "in": "query", "required": name in schema.get("required", ()),
             "schema": spec} for name, spec in schema["properties"].items()]


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _path_names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


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
        "/task/create": {"post": {
            "summary": "Create a task (or a workflow of several) driven by a scenario",
            "requestBody": _body(api.TASK_CREATE_REQUEST),
            "responses": {**_ok(api.TASK_CREATED), **_errors("400", "401", "403", "404", "413", "422")}}},
        "/task/{taskId}": {"get": {
            "summary": "A task: status, reason, flow, authenticated and its transitions",
            "parameters": [_path("taskId")],
            "responses": {**_ok({"type": "object"}), **_errors("401", "404")}}},
    }
    data_kinds = ("linked-accounts", "income", "statements", "deposit-accounts", "employment",
                  "taxes", "identity", "timesheets")
    for kind in data_kinds:
        operation = {"summary": f"{kind} of a user's linked accounts",
                     "parameters": _query(api.DATA_QUERY),
                     "responses": {**_ok({"type": "array", "items": DATA_RECORDS[kind]}),
                                   **_errors("401", "404", "422")}}
        paths[f"/{kind}"] = {"get": operation}
        paths[f"/{kind}/{{identifier}}"] = {"get": {**operation, "parameters": [
            _path("identifier"), *_query({"properties": {"linkedAccount": {"type": "string"}}})]}}
    paths["/linked-account/list/{identifier}"] = {"get": {
        "summary": "The real service's linked-account list of a user",
        "parameters": [_path("identifier")],
        "responses": {**_ok({"type": "array", "items": LINKED_ACCOUNT_LIST_RECORD}),
                      **_errors("401", "404", "422")}}}
    paths["/paystub/{statementId}"] = {"get": {
        "summary": "A pay statement's paystub (its `paystub` URL), as a PDF",
        "parameters": [_path("statementId")],
        "responses": {"200": {"description": "The paystub",
                              "content": {"application/pdf": {"schema": {"type": "string",
                                                                         "format": "binary"}}}},
                      **_errors("401", "404")}}}
    aggregator = service.aggregator
    user_header = {"name": "user-identifier", "in": "header", "required": True,
                   "schema": {"type": "string"}}
    server_side = [{"apiKey": [], "apiSecret": []}]
    paths[f"/{aggregator}/processor-links"] = {
        "post": {"summary": "Register a processor token; the pipeline runs asynchronously",
                 "security": server_side, "requestBody": _body(api.PROCESSOR_LINK_REQUEST),
                 "parameters": [{**user_header, "required": False}],
                 "responses": {**_ok({"type": "object"}, "Accepted", "202"),
                               **_errors("400", "401", "404", "422")}},
        "delete": {"summary": "Remove every processor link of the user and stop processing",
                   "security": server_side, "parameters": [user_header],
                   "responses": {**_ok({"type": "object"}), **_errors("401", "404", "422")}},
    }
    for name, summary in (("employer-matches", "Get Employer Matches"),
                          ("recurring-transactions", "Get Recurring Financial Transactions")):
        paths[f"/{aggregator}/{name}"] = {"get": {
            "summary": summary, "security": server_side, "parameters": [user_header],
            "responses": {**_ok({"type": "array", "items": {"type": "object"}},
                                status={"enum": ["processing", "completed", "error"]},
                                links={"type": "array"}),
                          **_errors("401", "404", "422")}}}
    public_token = [{"publicToken": []}]
    paths["/sdk/session"] = {"post": {
        "summary": "Client SDK: start the hosted flow (token must match the config; deeplink resolved)",
        "security": public_token, "requestBody": _body(api.SDK_SESSION_REQUEST),
        "responses": {**_ok({"type": "object"}), **_errors("401", "404", "422")}}}
    paths["/sdk/login"] = {"post": {
        "summary": "Client SDK: sign in with sandbox credentials; starts the configured tasks",
        "security": public_token, "requestBody": _body(api.SDK_LOGIN_REQUEST),
        "responses": {**_ok({"oneOf": [api.TASK_CREATED, api.SDK_MFA_CHALLENGE]}),
                      **_errors("401", "403", "404", "422")}}}
    paths["/sdk/company"] = {"post": {
        "summary": "Client SDK: the picked company, and why the configured tasks cannot start there",
        "security": public_token, "requestBody": _body(api.SDK_COMPANY_REQUEST),
        "responses": {**_ok({"type": "object"}), **_errors("401", "404", "422")}}}
    paths["/sdk/leave"] = {"post": {
        "summary": "Client SDK: the user left the flow before the outcome (user.connected false)",
        "security": public_token, "requestBody": _body(api.SDK_LEAVE_REQUEST),
        "responses": {**_ok({"type": "object"}), **_errors("401", "404", "422")}}}
    control = [
        ("get", "/_sandbox/tasks", "Every task of the tenant, newest first", None, api.TASKS_QUERY),
        ("post", f"/_sandbox/{aggregator}/processor-token", "Mint a processor token as the "
         "aggregator would", api.PROCESSOR_TOKEN_REQUEST, None),
        ("post", f"/_sandbox/{aggregator}/processor-token/{{token}}/revoke",
         "Revoke a processor token at the aggregator", None, None),
        ("post", "/_sandbox/linked-accounts/{accountId}/disconnect",
         "Disconnect a linked account (linked-account-disconnected)", api.DISCONNECT_REQUEST, None),
        ("post", "/_sandbox/linked-accounts/{accountId}/reconnect",
         "Reconnect a linked account (linked-account-connected)", None, None),
        ("post", "/_sandbox/linked-accounts/{accountId}/refresh", "A push refresh now", None, None),
        ("post", "/_sandbox/linked-accounts/{accountId}/remove-deposit-switch",
         "The deposit switch is removed (deposit-switch-removed)", None, None),
        ("post", "/_sandbox/users/{identifier}/delete-pii",
         "Delete the user's personal data now (pii-data-deleted)", None, None),
        ("get", "/_sandbox/webhooks/endpoints", "Endpoints per event type", None, None),
        ("post", "/_sandbox/tenants", "A new isolated tenant with its own keys", api.TENANT_REQUEST, None),
        ("post", "/_sandbox/reset", "This tenant back to its fixtures", None, None),
        ("get", "/_sandbox/requests", "Journal of API requests received, newest first", None,
         api.JOURNAL_QUERY),
        ("get", "/_sandbox/clock", "The tenant's virtual clock", None, None),
        ("post", "/_sandbox/clock/advance", "Move virtual time, running every due step, "
         "retry and refresh in order", api.CLOCK_ADVANCE_REQUEST, None),
        ("post", "/_sandbox/clock/run-until-idle", "Run every pending job in time order", None, None),
        ("get", "/_sandbox/events", "Every event emitted, with deliveries and attempts", None,
         api.EVENTS_QUERY),
        ("get", "/_sandbox/events/{eventId}", "One event with its deliveries", None, None),
        ("post", "/_sandbox/events/trigger", "Emit any event type with a realistic payload",
         api.TRIGGER_REQUEST, None),
        ("put", "/_sandbox/webhooks/endpoints", "Register endpoints per event type",
         api.WEBHOOK_ENDPOINTS_REQUEST, None),
        ("get", "/_sandbox/webhooks/faults", "Delivery faults on purpose", None, None),
        ("put", "/_sandbox/webhooks/faults", "Set delivery faults (duplicate, out of order, delay)",
         api.WEBHOOK_FAULTS_REQUEST, None),
        ("post", "/_sandbox/webhooks/replay", "Replay by userIdentifier, taskId or from/to",
         api.REPLAY_REQUEST, None),
        ("get", "/_sandbox/scenarios", "Every scenario and the user bindings", None, None),
        ("put", "/_sandbox/users/{identifier}/scenario", "Bind a scenario to a user's next tasks",
         api.SCENARIO_BINDING_REQUEST, None),
        ("put", "/_sandbox/users/{identifier}/card-token-recreation", "Switch automatic card "
         "token recreation off (payment-token-expired) or back on",
         api.CARD_TOKEN_RECREATION_REQUEST, None),
        ("post", "/_sandbox/companies", "Create a company (company-created)",
         api.COMPANY_CREATE_REQUEST, None),
        ("patch", "/_sandbox/companies/{companyId}", "Update a company (company-updated)",
         api.COMPANY_UPDATE_REQUEST, None),
        ("delete", "/_sandbox/companies/{companyId}", "Delete a company (company-deleted)", None, None),
        ("post", "/_sandbox/companies/{companyId}/status", "Maintenance on or off, or disabled "
         "(maintenance-mode)", api.COMPANY_STATUS_REQUEST, None),
    ]
    for method, path, summary, body, query in control:
        operation: dict[str, Any] = {
            "summary": f"Control plane: {summary}", "tags": ["control plane"],
            "security": [{"apiKey": [], "apiSecret": []}],
            "responses": {**_ok({}), **_errors("401", "404", "422")},
        }
        if body is not None:
            operation["requestBody"] = _body(body)
        parameters = [_path(name) for name in _path_names(path)]
        if query is not None:
            parameters += _query(query)
        if parameters:
            operation["parameters"] = parameters
        paths.setdefault(path, {})[method] = operation
    paths["/_sandbox/schemas/events/{eventType}"] = {"get": {
        "summary": "The JSON Schema of one event type's body", "security": [],
        "parameters": [_path("eventType")],
        "responses": {"200": {"description": "A JSON Schema"}, **_errors("404")}}}
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
            "requestBody": _body(event_schema(event_type, service.aggregator)),
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
        "servers": [{"url": "/"}],
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
