"""The OpenAPI 3.1 document, generated from the same schemas the handlers enforce.

Besides what each operation declares (`errors=`), the document derives the answers the
pipeline gives by itself (routes/pipeline.py): 401 for an operation with auth, 400
(malformed JSON), 413, 415 and 422 for one with a JSON body, 422 for one with query
parameters, path parameters (text that is not allowed) or request headers.

For people reading it at /docs, it also groups the operations (TAGS: a group per resource,
derived from the path unless an operation declares its own) and gives each one an example
request that succeeds with the bundled default tenant (EXAMPLES); an id the sandbox makes
(a task's, a linked account's) comes from an earlier answer, stated as an OpenAPI link on
that answer. tests/test_docs_examples.py runs every example against a real server.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .. import __version__
from ..domain.companies.companies import FullCompany, SearchCompany
from ..domain.accounts.linked_accounts import DATA_KINDS
from ..domain.links.processor_links import TOKEN_PATTERN
from ..domain.tasks.tasks import DEPOSIT_FORM
from ..domain.rules import ServiceProfile
from .operations import AGGREGATOR, CLIENT_ID, CLIENT_SECRET, Auth, Operation
from ..load.scenarios.loader import load_all_scenarios, scenario_folders
from ..schemas import api
from ..domain.dates import date_time_field
from ..domain.webhooks.event_types import event_schema, event_types
from ..domain.shapes import NO_CONTROL_CHARACTER, PROCESSOR_LINK_SCENARIOS, schema_of
from ..validate import schema_errors
from ..settings import Settings, bundled_dir

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
# Path segments and query values: what `text_problem` lets through (validate.py).
_PATH_SEGMENT = {"type": "string", "minLength": 1, "pattern": NO_CONTROL_CHARACTER}


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


# OpenAPI's security schemes are headers, queries or cookies; the aggregator's client may
# send its two in the body instead (aggregator_api.py), which each of its operations says.
AGGREGATOR_CREDENTIALS = (
    f"**Credentials**: the tenant's API key and secret, in the `{CLIENT_ID[0]}` and "
    f"`{CLIENT_SECRET[0]}` headers (aggregatorClientId, aggregatorSecret) or as `client_id` and "
    "`secret` in the body; the headers win when both are sent. Neither is a 400 "
    "INVALID_REQUEST/MISSING_FIELDS; a wrong pair is a 400 INVALID_INPUT/INVALID_API_KEYS.")


# -- for people: groups, examples and the order they work in ------------------------------

# The groups /docs shows, in this order, each with what it is for. An operation's group is
# the one it declares (`tags=`), else the one its path prefix gives (_GROUP_OF_PREFIX).
TAGS = (
    ("companies", "The catalog of employers, payroll providers and merchants: search it as "
                  "the hosted flow does, list it, read one company's connector capabilities."),
    ("users and tokens", "A user is an `identifier` of yours. `POST /access-token` creates "
                         "the user and answers the public token the end-user calls take."),
    ("tasks", "Direct deposit switches, verifications and refreshes. A task follows its "
              "scenario on the clock (queued, processing, completed or failed) and sends a "
              "webhook at each change."),
    ("linked accounts and data", "What a completed task leaves: the user's linked accounts "
                                 "and their payroll data (income, statements, employment, "
                                 "identity, taxes, timesheets, deposit accounts), and "
                                 "pay-link accounts."),
    ("aggregator", "Processor links: a bank-data aggregator's processor token in, employer "
                   "matches and recurring transactions out; and the aggregator's own API "
                   "under `/aggregator-api/`, which mints those tokens as the aggregator "
                   "would (its conventions: snake_case, its error body)."),
    ("webhooks", "Where the events go: endpoints per event type and the secrets that sign "
                 "them, at the real service's paths."),
    ("control plane", "The sandbox's own console under `/_sandbox/` (the real service has "
                      "none): tenants, the virtual clock, events and their deliveries, "
                      "scenarios, faults on purpose, companies and linked accounts on demand, "
                      "snapshots."),
    ("SDK", "The simulated client SDK: the script that opens the hosted flow, the flow's page "
            "and the calls it makes with the user's public token."),
    ("demo", "A host page that opens the hosted flow for a visitor of the `demo` tenant, "
             "with a receiver that plays the customer's backend."),
    ("reference", "Liveness, this document, this page and the webhooks' JSON Schemas."),
)
TAG_ORDER = {name: n for n, (name, _) in enumerate(TAGS)}

# Path prefix -> group; the longest prefix that matches wins. AGGREGATOR stands for the
# service profile's aggregator name.
_GROUP_OF_PREFIX = (
    ("/company/", "companies"),
    ("/access-token", "users and tokens"), ("/user", "users and tokens"),
    ("/task/", "tasks"), ("/task-workflow/", "tasks"),
    ("/linked-account", "linked accounts and data"), ("/paystub/", "linked accounts and data"),
    ("/pay-link/", "linked accounts and data"),
    *((f"/{kind}", "linked accounts and data") for kind in DATA_KINDS),
    (f"/{AGGREGATOR}/", "aggregator"), ("/aggregator-api/", "aggregator"),
    ("/webhooks/", "webhooks"), ("/secrets", "webhooks"),
    ("/_sandbox/schemas/", "reference"), ("/_sandbox/", "control plane"),
    ("/sdk/", "SDK"), ("/initialize/", "SDK"),
    ("/demo", "demo"),
    ("/health", "reference"), ("/openapi.json", "reference"), ("/docs", "reference"),
)


def group_of(path: str, aggregator: str) -> str:
    """The group of an operation that declares none, from its path."""
    if path == "/":
        return "reference"
    matches = [(len(prefix), group) for prefix, group in
               ((p.replace(AGGREGATOR, aggregator), g) for p, g in _GROUP_OF_PREFIX)
               if path == prefix.rstrip("/") or path.startswith(prefix)]
    if not matches:
        raise LookupError(f"{path}: no group; add its prefix to openapi._GROUP_OF_PREFIX")
    return max(matches)[1]


def operation_id(method: str, path: str) -> str:
    """A stable id from the method and path (deep links of /docs, the links between
    answers): `GET /task/{taskId}/details` -> `get-task-taskId-details`."""
    words = re.findall(r"[A-Za-z0-9_]+", path.replace("_sandbox", "sandbox"))
    return "-".join([method.lower(), *(words or ["root"])])


# What the examples name: the bundled default tenant's companies and a user of yours.
WALMART = "6410a0000000000000000001"
USER = "user-1"
RECEIVER = "http://127.0.0.1:9000/webhooks"  # a local receiver of yours (any URL it allows)
DOCS_COMPANY = "6410a0000000000000000d0c"   # made by POST /_sandbox/companies's example
DOCS_TENANT = "docs-example"                # made by POST /_sandbox/tenants's example


def _flow_config() -> str:
    """A hosted flow's configuration as /initialize/{config} takes it (base64 of JSON)."""
    config = {"publicToken": "public-token-of-POST-access-token",
              "tasks": [{"operation": "deposit"}],
              "deeplink": {"step": "login-company", "companyId": WALMART}}
    return base64.urlsafe_b64encode(json.dumps(config).encode()).decode().rstrip("=")


# A parameter's example wherever an operation takes it (an operation's own come first).
PARAMETER_EXAMPLES: dict[str, Any] = {
    "companyId": WALMART, "identifier": USER, "user-identifier": USER, "x-api-version": "v2",
    "eventType": "task-status-updated", "fileId": DEPOSIT_FORM, "config": _flow_config(),
}


@dataclass(frozen=True)
class From:
    """What a request takes from an earlier answer, published as an OpenAPI link on the
    success answer of `method path`: `parameters` (name -> runtime expression), `fields`
    (JSON pointer into the example body -> runtime expression) or the whole `body`."""

    method: str
    path: str
    parameters: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None


@dataclass(frozen=True)
class Example:
    """An operation's example request: its body, its own parameter values, and what comes
    from an earlier answer (`after`)."""

    body: Any = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    after: From | None = None


_TOKEN = "$response.body#/data/publicToken"
_TASK_ID = {"taskId": "$response.body#/data/id"}
_AFTER_TASK = From("POST", "/task/create", parameters=_TASK_ID)
_FIRST_ID = "$response.body#/data/0/_id"
_AFTER_ACCOUNT = From("GET", "/linked-account/list/{identifier}",
                      parameters={"accountId": _FIRST_ID})
_AFTER_ENDPOINT = From("POST", "/webhooks/endpoints", parameters={"id": "$response.body#/data/_id"})
_AFTER_LINK = From("POST", f"/{AGGREGATOR}/processor-links",
                   parameters={"user-identifier": "$request.header.user-identifier"})
_ACCESS_TOKEN = {"/access_token": "$response.body#/access_token"}
_AFTER_EXCHANGE = From("POST", "/aggregator-api/item/public_token/exchange", fields=_ACCESS_TOKEN)
_ITEM_ACCESS_TOKEN = {"access_token": "access-sandbox-9f0c7d0e-3c4b-4f1e-9a51-2d6f0c1b7a42"}
_PROCESSOR_TOKEN = "processor-sandbox-0b5b3d5e-6a3f-4d7e-8f1a-3c2b1a0d9e8f"
_DEPOSIT = {"identifier": USER, "company": WALMART, "product": "deposit"}
_ENDPOINT = {"url": RECEIVER, "eventTypes": ["task-status-updated", "task-workflow-finished"]}
_FLOW_TASKS = [{"operation": "deposit"}]

# Every operation's example, by its declared method and path. The order of /docs is an
# order in which they all work (tests/test_docs_examples.py): POST /access-token makes the
# user `user-1` the later ones name, POST /task/create its task, whose end (the clock run
# out, or a few seconds of real time) leaves the linked account the data examples read.
EXAMPLES: dict[tuple[str, str], Example] = {
    # companies
    ("POST", "/company/search"): Example({"query": "walmart", "product": "deposit"}),
    ("GET", "/company/list"): Example(parameters={"product": "deposit", "limit": 10}),
    # users and tokens
    ("POST", "/access-token"): Example({"identifier": USER}),
    ("PUT", "/access-token/{publicToken}/revoke"): Example(after=From(
        "POST", "/access-token", parameters={"publicToken": _TOKEN})),
    ("PUT", "/user"): Example({"identifier": USER, "data": {"bankAccounts": [{
        "_id": "checking-1", "title": "Everyday checking", "accountNumber": "000123456789",
        "routingNumber": "021000021", "accountType": "checking"}]}}),
    ("GET", "/user/{identifier}/tasks"): Example(),
    ("PUT", "/user/{identifier}/end-monitoring"): Example(),
    # tasks
    ("POST", "/task/create"): Example({**_DEPOSIT, "scenario": "happy-path",
                                       "metadata": {"orderId": "A-1001"}}),
    ("GET", "/task/{taskId}"): Example(after=_AFTER_TASK),
    ("GET", "/task/{taskId}/details"): Example(after=_AFTER_TASK),
    ("GET", "/task/{taskId}/status"): Example(after=_AFTER_TASK),
    ("POST", "/task/prescreen"): Example({"company": {"id": WALMART}, "product": "deposit"}),
    ("POST", "/task-workflow/from-linked-account"): Example(
        {"linkedAccount": "6410b1c2d3e4f5a6b7c8d9e0", "tasks": [{"operation": "verify"}]},
        after=From("GET", "/linked-account/list/{identifier}",
                   fields={"/linkedAccount": _FIRST_ID})),
    ("GET", "/task/{taskId}/file/{fileId}/generate-url"): Example(after=_AFTER_TASK),
    # linked accounts and data
    **{("GET", f"/{kind}"): Example(parameters={"identifier": USER})
       for kind in ("linked-accounts", *DATA_KINDS)},
    **{("GET", f"/{kind}/{{identifier}}"): Example() for kind in ("linked-accounts", *DATA_KINDS)},
    ("GET", "/statements"): Example(parameters={"identifier": USER, "limit": 3}),
    ("GET", "/linked-account/list/{identifier}"): Example(),
    ("GET", "/paystub/{statementId}"): Example(after=From(
        "GET", "/statements/{identifier}", parameters={"statementId": _FIRST_ID})),
    ("GET", "/pay-link/accounts"): Example(),
    ("GET", "/pay-link/actions-for-company/{companyId}"): Example(
        parameters={"companyId": "6410a0000000000000000060"}),  # Netflix
    # aggregator
    ("POST", "/aggregator-api/sandbox/public_token/create"): Example(
        {"institution_id": "ins_109508", "initial_products": ["transactions"]}),
    ("POST", "/aggregator-api/item/public_token/exchange"): Example(
        {"public_token": "public-sandbox-5c4e6f2a-7d1b-4e8a-9c3f-1a2b3c4d5e6f"},
        after=From("POST", "/aggregator-api/sandbox/public_token/create",
                   fields={"/public_token": "$response.body#/public_token"})),
    ("POST", "/aggregator-api/accounts/get"): Example(_ITEM_ACCESS_TOKEN, after=_AFTER_EXCHANGE),
    ("POST", "/aggregator-api/processor/token/create"): Example(
        {**_ITEM_ACCESS_TOKEN, "account_id": "vzeNDwK7KQIm4yEog683uElbp9GRLEFXGK98D",
         "processor": "example"},
        after=From("POST", "/aggregator-api/accounts/get", fields={
            "/access_token": "$request.body#/access_token",
            "/account_id": "$response.body#/accounts/0/account_id"})),
    ("POST", "/aggregator-api/item/remove"): Example(_ITEM_ACCESS_TOKEN, after=_AFTER_EXCHANGE),
    ("POST", "/aggregator-api/sandbox/item/reset_login"): Example(_ITEM_ACCESS_TOKEN,
                                                                   after=_AFTER_EXCHANGE),
    ("POST", "/aggregator-api/item/get"): Example(_ITEM_ACCESS_TOKEN, after=_AFTER_EXCHANGE),
    ("POST", "/aggregator-api/item/webhook/update"): Example(
        {**_ITEM_ACCESS_TOKEN, "webhook": RECEIVER}, after=_AFTER_EXCHANGE),
    ("POST", "/aggregator-api/link/token/create"): Example(
        {"client_name": "Your app", "language": "en", "country_codes": ["US"],
         "user": {"client_user_id": USER}, "products": ["transactions"]}),
    ("POST", "/aggregator-api/institutions/get_by_id"): Example(
        {"institution_id": "ins_109508", "country_codes": ["US"],
         "options": {"include_optional_metadata": True}}),
    ("POST", "/aggregator-api/transactions/sync"): Example(
        {**_ITEM_ACCESS_TOKEN, "count": 100}, after=_AFTER_EXCHANGE),
    ("POST", "/aggregator-api/sandbox/item/fire_webhook"): Example(
        {**_ITEM_ACCESS_TOKEN, "webhook_code": "SYNC_UPDATES_AVAILABLE"},
        after=From("POST", "/aggregator-api/item/webhook/update",
                   fields={"/access_token": "$request.body#/access_token"})),
    ("POST", f"/{AGGREGATOR}/processor-links"): Example(
        {"processorToken": _PROCESSOR_TOKEN},
        after=From("POST", f"/_sandbox/{AGGREGATOR}/processor-token",
                   fields={"/processorToken": "$response.body#/data/processorToken"})),
    **{(method, f"/{AGGREGATOR}/{path}"): Example(parameters={"user-identifier": USER},
                                                  after=_AFTER_LINK)
       for method, path in (("DELETE", "processor-links"), ("GET", "employer-matches"),
                            ("GET", "recurring-transactions"))},
    # webhooks
    ("GET", "/webhooks/endpoints"): Example(),
    ("POST", "/webhooks/endpoints"): Example(_ENDPOINT),
    ("PUT", "/webhooks/endpoints/{id}"): Example(
        {**_ENDPOINT, "eventTypes": ["task-status-updated"]}, after=_AFTER_ENDPOINT),
    ("DELETE", "/webhooks/endpoints/{id}"): Example(after=_AFTER_ENDPOINT),
    ("GET", "/secrets"): Example(),
    ("POST", "/secrets"): Example({"name": "production receiver"}),
    ("DELETE", "/secrets/{id}"): Example(after=From(
        "POST", "/secrets", parameters={"id": "$response.body#/data/_id"})),
    # control plane
    ("POST", "/_sandbox/tenants"): Example({"name": DOCS_TENANT,
                                           "products": ["deposit", "verify"]}),
    ("DELETE", "/_sandbox/tenants/{name}"): Example(parameters={"name": DOCS_TENANT}),
    ("GET", "/_sandbox/requests"): Example(parameters={"limit": 10}),
    ("POST", "/_sandbox/snapshot"): Example(after=From("GET", "/_sandbox/snapshot",
                                                       body="$response.body#/data")),
    ("POST", "/_sandbox/clock/advance"): Example({"seconds": 60}),
    ("GET", "/_sandbox/events"): Example(parameters={"user": USER, "limit": 10}),
    ("GET", "/_sandbox/events/{eventId}"): Example(after=From(
        "POST", "/_sandbox/events/trigger", parameters={"eventId": "$response.body#/data/id"})),
    ("PUT", "/_sandbox/users/{identifier}/scenario"): Example({"scenario": "happy-path"}),
    ("PUT", "/_sandbox/users/{identifier}/profile"): Example(
        {"profile": "salaried", "data": {"income": {"income": 85000, "incomeType": "yearly",
                                                     "payCycle": "biweekly"}}}),
    ("GET", "/_sandbox/users/{identifier}/profile"): Example(),
    ("DELETE", "/_sandbox/users/{identifier}/profile"): Example(),
    ("GET", "/_sandbox/profiles"): Example(),
    ("PUT", "/_sandbox/users/{identifier}/autopilot"): Example(
        {"company": WALMART, "username": "test-auth-expired"}),
    ("GET", "/_sandbox/users/{identifier}/autopilot"): Example(),
    ("DELETE", "/_sandbox/users/{identifier}/autopilot"): Example(),
    ("GET", "/_sandbox/sdk/callbacks"): Example(parameters={"identifier": USER}),
    ("PUT", "/demo/profile"): Example({"profile": "gig-worker"}),
    ("PUT", "/_sandbox/users/{identifier}/card-token-recreation"): Example({"enabled": True}),
    ("POST", "/_sandbox/companies"): Example({"_id": DOCS_COMPANY, "name": "Docs Example Co",
                                             "tags": ["gig-economy"]}),
    ("PATCH", "/_sandbox/companies/{companyId}"): Example(
        {"name": "Docs Example Company"}, parameters={"companyId": DOCS_COMPANY}),
    ("DELETE", "/_sandbox/companies/{companyId}"): Example(parameters={"companyId": DOCS_COMPANY}),
    ("POST", "/_sandbox/companies/{companyId}/status"): Example({"status": "operational"}),
    ("GET", "/_sandbox/tasks"): Example(parameters={"user": USER, "limit": 10}),
    ("GET", "/_sandbox/webhooks/endpoints"): Example(),
    ("PUT", "/_sandbox/webhooks/endpoints"): Example({"endpoints": [_ENDPOINT]}),
    ("PUT", "/_sandbox/faults/api"): Example({"rules": [{
        "method": "POST", "path": "/task/create", "status": 429, "retryAfter": 5, "count": 1}]}),
    ("PUT", "/_sandbox/webhooks/faults"): Example({"duplicate": 0.0, "outOfOrder": 0.0,
                                                   "delay": 0.0}),
    ("POST", "/_sandbox/webhooks/replay"): Example({"userIdentifier": USER}),
    ("POST", "/_sandbox/events/trigger"): Example({"eventType": "task-status-updated",
                                                   "identifier": USER, "companyId": WALMART}),
    **{("POST", f"/_sandbox/linked-accounts/{{accountId}}/{action}"): Example(
        {"reason": "credentials-changed"} if action == "disconnect" else None,
        after=_AFTER_ACCOUNT)
       for action in ("disconnect", "reconnect", "refresh", "remove-deposit-switch")},
    ("POST", "/_sandbox/users/{identifier}/delete-pii"): Example(),
    # user-1 has tasks (409): this one never had any.
    ("DELETE", "/_sandbox/users/{identifier}"): Example(parameters={"identifier": "user-2"}),
    ("POST", f"/_sandbox/{AGGREGATOR}/processor-token"): Example({"identifier": USER}),
    ("POST", f"/_sandbox/{AGGREGATOR}/processor-token/{{token}}/revoke"): Example(after=From(
        "POST", f"/_sandbox/{AGGREGATOR}/processor-token",
        parameters={"token": "$response.body#/data/processorToken"})),
    # SDK
    ("POST", "/sdk/session"): Example(
        {"config": {"publicToken": "public-token-of-POST-access-token", "tasks": _FLOW_TASKS,
                    "deeplink": {"step": "login-company", "companyId": WALMART}}},
        after=From("POST", "/access-token", fields={"/config/publicToken": _TOKEN})),
    ("POST", "/sdk/company"): Example({"companyId": WALMART, "tasks": _FLOW_TASKS}),
    ("POST", "/sdk/popular"): Example({"scope": "user-link"}),
    ("POST", "/sdk/login"): Example({"companyId": WALMART, "username": "test-good",
                                     "password": "any password", "tasks": _FLOW_TASKS}),
    ("POST", "/sdk/leave"): Example({"taskId": "6410c0ffee0000000000a001"}, after=From(
        "POST", "/task/create", fields={"/taskId": "$response.body#/data/id"})),
    ("GET", "/sdk/task/{taskId}"): Example(after=_AFTER_TASK),
    ("GET", "/sdk/workflow/{taskWorkflow}"): Example(after=From(
        "POST", "/task/create", parameters={"taskWorkflow": "$response.body#/data/taskWorkflow"})),
    ("GET", "/sdk/deposit-form.pdf"): Example(after=From(
        "POST", "/access-token", parameters={"publicToken": _TOKEN})),
    ("GET", "/sdk/autopilot"): Example(),
    ("POST", "/sdk/callbacks"): Example({"flow": "3f2a9c1b", "messages": [
        {"event": "interaction", "payload": {"name": "Initialized", "value": {"step": "search-company"},
                                             "language": "en", "product": "deposit"}}]}),
}


def _source(expression: str, after: From) -> str:
    """Where a runtime expression takes its value, as people say it:
    `$response.body#/data/id` of POST /task/create -> the `data.id` POST /task/create answers."""
    source, _, pointer = expression.partition("#")
    where = pointer.strip("/").replace("/", ".")
    operation = f"{after.method} {after.path}"
    if source == "$response.body":
        return f"the `{where}` that {operation} answers" if where else f"what {operation} answers"
    if source == "$request.body":
        return f"the `{where}` sent to {operation}"
    return f"the `{source.rpartition('.')[2]}` header sent to {operation}"


def _link(consumer: str, op: Operation, after: From, body: Any) -> dict[str, Any]:
    """The OpenAPI link from the answer of `after`'s operation to `op`."""
    link: dict[str, Any] = {"operationId": consumer}
    if after.parameters:
        link["parameters"] = dict(after.parameters)
    if after.body is not None:
        link["requestBody"] = after.body
    elif after.fields:
        filled = copy.deepcopy(body)
        for pointer, expression in after.fields.items():
            *parents, last = pointer.strip("/").split("/")
            target = filled
            for key in parents:
                target = target[key]
            target[last] = "{" + expression + "}"
        link["requestBody"] = filled
    what = [f"`{name}`: {_source(expression, after)}" for name, expression in
            (*after.parameters.items(), *((p.strip("/").replace("/", "."), e)
                                          for p, e in after.fields.items()))]
    if after.body is not None:
        what = [f"the body: {_source(after.body, after)}"]
    link["description"] = f"{op.method} {op.path} takes " + "; ".join(what) + "."
    return link


def _with_examples(document: dict[str, Any], op: Operation, example: Example | None) -> None:
    """The example values of `op`'s description; a value an earlier answer gives has none,
    and its description names that answer (whose Links name this operation)."""
    example = example or Example()
    after = example.after
    linked = after.parameters if after is not None else {}
    for parameter in document.get("parameters", ()):
        name = parameter["name"]
        if name in linked:
            text = _source(linked[name], after)
            parameter["description"] = f"{text[0].upper()}{text[1:]} (see its Links)."
            if name in example.parameters:  # the value it always is
                parameter["example"] = example.parameters[name]
        elif name in example.parameters or name in PARAMETER_EXAMPLES:
            parameter["example"] = example.parameters.get(name, PARAMETER_EXAMPLES.get(name))
    if example.body is not None and "requestBody" in document:
        document["requestBody"]["content"]["application/json"]["example"] = example.body
        if after is not None and after.fields:
            named = "; ".join(f"`{p.strip('/').replace('/', '.')}`: {_source(e, after)}"
                              for p, e in after.fields.items())
            document["requestBody"]["description"] = (
                f"{named} (see its Links); in the example, a placeholder.")


def _open(schema: Any) -> Any:
    """A request schema as a lenient operation takes it: what the sandbox checks, less the
    `additionalProperties: false` it drops unknown fields by (they are ignored and named in
    x-sandbox-warning, not refused)."""
    if isinstance(schema, dict):
        return {key: _open(value) for key, value in schema.items()
                if not (key == "additionalProperties" and value is False)}
    if isinstance(schema, list):
        return [_open(item) for item in schema]
    return schema


def describe(op: Operation, names: dict[str, dict[str, Any]] | None = None,
             example: Example | None = None, group: str | None = None,
             strict: bool = False) -> dict[str, Any]:
    """One operation's OpenAPI description, from its declaration; `names` (profile_names)
    fills in the names only the running app knows, `example` its example request and
    `group` its tag where it declares none."""
    path_names = _path_names(op.path)
    parameters = [{"name": name, "in": "path", "required": True, "schema": _PATH_SEGMENT}
                  for name in path_names]
    if op.query is not None:
        parameters += [{"name": name, "in": "query",
                        "required": name in op.query.get("required", ()),
                        "schema": _text_value(spec)}
                       for name, spec in op.query["properties"].items()]
    # An optional header sent empty is read as absent; a required one must have a value.
    parameters += [{"name": name, "in": "header", "required": required,
                    "schema": {"type": "string", **({"minLength": 1} if required else {})}}
                   for name, required in op.headers]
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
    document: dict[str, Any] = {"operationId": operation_id(op.method, op.path),
                                "summary": op.summary, "security": _SECURITY[op.auth],
                                "responses": {**responses, **_errors(errors, op.content_type)}}
    if op.description:
        document["description"] = op.description
    if op.auth is Auth.AGGREGATOR:  # the second way, which a security scheme cannot say
        document["description"] = "\n\n".join(filter(None, [op.description,
                                                             AGGREGATOR_CREDENTIALS]))
    if op.tags or group:
        document["tags"] = list(op.tags or (group,))
    if parameters:
        document["parameters"] = parameters
    if op.body is not None:
        schema = api.published(op.body_shape)
        shown = schema if strict or op.strict else _open(schema)
        document["requestBody"] = _json_body(_named(shown, names or {}),
                                             required=bool(schema_errors({}, schema)))
    _with_examples(document, op, example)
    return document


def profile_names(service: ServiceProfile, settings: Settings) -> dict[str, dict[str, Any]]:
    """The keywords each `x-names` kind of the request schemas stands for in this app: its
    scenarios (the folders serve loads), event types, products and processor tokens."""
    scenarios = load_all_scenarios(scenario_folders(settings.scenarios, bundled_dir("scenarios")))

    def named(kind: str) -> list[str]:
        return sorted(name for name, scenario in scenarios.items() if scenario.kind == kind)

    return {
        api.TASK_SCENARIOS: {"enum": named("task")},
        PROCESSOR_LINK_SCENARIOS: {"enum": named("processor-link")},
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
    schema says (validate.py: text_problem)."""
    if spec.get("type") == "string" and "pattern" not in spec and "format" not in spec:
        return {**spec, "pattern": NO_CONTROL_CHARACTER}
    return spec


def _json_body(schema: dict[str, Any], *, required: bool = True) -> dict[str, Any]:
    """A JSON request body. `required` only where an empty body is refused: the pipeline
    reads an empty body as `{}`, so an operation whose schema `{}` satisfies takes none."""
    return {"required": required, "content": {"application/json": {"schema": schema}}}


PATH_PARAMETER = re.compile(r"\{([^}:]+)")  # {name} or {name:regex}


def _path_names(path: str) -> list[str]:
    return PATH_PARAMETER.findall(path)


DESCRIPTION = """\
A local stand-in for the payroll-connectivity service (vendor `{vendor}`, {environment} \
environment): its API at the real paths, and the sandbox's own console under `/_sandbox/`. \
Tasks follow scripted scenarios on a virtual clock, webhooks go to the endpoints you \
register, and each tenant (customer account) is isolated.

**Authorize** with a tenant's keys. The bundled default tenant, `acme`: \
apiKey `{environment}-key-acme-0001`, apiSecret `{environment}-secret-acme-0001` \
(`payroll-sandbox serve` prints the default tenant's keys on its first line; the \
aggregator's API takes the same two as aggregatorClientId and aggregatorSecret). The end \
user's calls (the hosted flow's, `/pay-link/accounts`) take a publicToken instead: the \
`data.publicToken` that `POST /access-token` answers.

**Try it out** in the order of this page: the examples work with `acme`. \
`POST /access-token` makes the user `user-1` whom the others name; `POST /task/create` \
starts a deposit switch for `user-1` at Walmart, which ends a few seconds later (with \
`--clock manual`: `POST /_sandbox/clock/run-until-idle`) and leaves a linked account with \
payroll data. An id the sandbox makes (a task's, a linked account's) comes from an earlier \
answer: the **Links** of that answer say which; in an example body, such a value is a \
placeholder. `POST /_sandbox/reset` forgets what the examples made.

**Rules.** Success bodies are `{{"data": ...}}`; errors are \
`{{"error": {{"code", "message", "details"}}}}`. A field the API does not know is ignored \
and named in `x-sandbox-warning` (422 on the control plane, and with `--strict-bodies`). \
401: missing or wrong credentials. 413: a body over 1 MiB. 415: a body that is not JSON. \
422: a schema violation, each failing JSON path in `details`. 429: a limit, with \
`retry-after`. 405 with `Allow`: a method the path does not take.
"""


# What each webhook says, for people (the event types the spec names; a kind of record
# ends in -synced, -added, -updated or -removed).
_WEBHOOK_SUMMARIES = {
    "task-status-updated": "A task's status changed",
    "task-authentication-status-updated": "A task's sign-in succeeded or failed",
    "task-status-patched": "A finished task's status was corrected",
    "task-workflow-finished": "A task workflow finished",
    "company-created": "A company was added", "company-updated": "A company changed",
    "company-deleted": "A company was removed",
    "maintenance-mode": "A company went under maintenance, or came back",
    "pay-link-accounts-updated": "A user's pay-link accounts changed",
    "pii-data-deleted": "A user's personal data was deleted",
    "deposit-switch-removed": "A deposit switch was removed",
    "linked-account-connected": "A linked account connected",
    "linked-account-disconnected": "A linked account disconnected",
    "earn-user-data": "A user's earnings so far in the pay period",
    "employer-classification-completed": "A processor link's employer matches are ready",
    "recurring-transaction-detection-completed": "A processor link's recurring transactions "
                                                 "are ready",
}
_RECORD_CHANGES = {"synced": "A linked account's {kind} synced after a refresh",
                   "added": "New {kind} on a linked account",
                   "updated": "A linked account's {kind} changed",
                   "removed": "{kind} removed from a linked account"}


def webhook_summary(event_type: str, aggregator: str) -> str:
    """A webhook's summary: what happened, in plain words."""
    if event_type == f"{aggregator}-error":
        return "A processor link failed at the aggregator"
    if event_type in _WEBHOOK_SUMMARIES:
        return _WEBHOOK_SUMMARIES[event_type]
    kind, _, change = event_type.rpartition("-")
    if kind in DATA_KINDS and change in _RECORD_CHANGES:
        text = _RECORD_CHANGES[change].format(kind=kind.replace("-", " "))
        return text[0].upper() + text[1:]
    return event_type


def build_openapi(operations: list[Operation], service: ServiceProfile,
                  settings: Settings) -> dict[str, Any]:
    """The document of every operation the app serves, and of every webhook it sends."""
    paths: dict[str, Any] = {}
    names = profile_names(service, settings)
    aggregator = service.aggregator
    examples = {(method, path.replace(AGGREGATOR, aggregator)): _at(example, aggregator)
                for (method, path), example in EXAMPLES.items()}
    groups = {id(op): group_of(op.path, aggregator) for op in operations}
    # By group in the order of TAGS, each in declaration order.
    ordered = sorted(operations, key=lambda op: TAG_ORDER.get((op.tags or (groups[id(op)],))[0],
                                                               len(TAGS)))
    for op in ordered:
        paths.setdefault(op.path, {})[op.method.lower()] = describe(
            op, names, examples.get((op.method, op.path)), groups[id(op)],
            strict=settings.strict_bodies)
    _add_links(paths, ordered, examples)
    webhooks = {
        event_type: {"post": {
            "summary": webhook_summary(event_type, service.aggregator),
            "description": "A CloudEvent in binary content mode: the `ce-*` headers below, "
                           "the event's JSON body.",
            "parameters": [
                {"name": "ce-specversion", "in": "header", "required": True,
                 "schema": {"const": "1.0"}},
                {"name": "ce-source", "in": "header", "required": True,
                 "schema": {"const": f"com.{service.vendor}"}},
                {"name": "ce-type", "in": "header", "required": True,
                 "schema": {"const": f"com.{service.vendor}.{event_type}"}},
                {"name": "ce-time", "in": "header", "required": True,
                 "schema": date_time_field("The body's eventTime.")},
                {"name": "ce-id", "in": "header", "required": True, "schema": {"type": "string"}},
            ],
            "requestBody": _json_body(event_schema(event_type, service.aggregator)),
            "responses": {"200": {"description": "Any 2xx acknowledges; anything else is "
                                                 "retried (3 attempts, 30 s apart)."}},
        }}
        for event_type in event_types(service.aggregator)
    }
    used = {tag for item in paths.values() for op in item.values() for tag in op["tags"]}
    return {
        "openapi": "3.1.0",
        "info": {"title": "payroll-sandbox", "version": __version__,
                 "description": DESCRIPTION.format(vendor=service.vendor,
                                                   environment=settings.environment)},
        "tags": [{"name": name, "description": text} for name, text in TAGS if name in used],
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
            "schemas": {"Error": schema_of(api.Error), "SearchCompany": schema_of(SearchCompany),
                        "Company": schema_of(FullCompany)},
            "responses": {"MethodNotAllowed": _METHOD_NOT_ALLOWED},
        },
    }


def _at(example: Example, aggregator: str) -> Example:
    """`example` with the service profile's aggregator name in the paths it names."""
    after = example.after
    if after is None or AGGREGATOR not in after.path:
        return example
    return replace(example, after=replace(after, path=after.path.replace(AGGREGATOR, aggregator)))


def _add_links(paths: dict[str, Any], operations: list[Operation],
               examples: dict[tuple[str, str], Example]) -> None:
    """Each link on the success answer of the operation that gives the values."""
    for op in operations:
        example = examples.get((op.method, op.path))
        if example is None or example.after is None:
            continue
        after = example.after
        producer = paths[after.path][after.method.lower()]
        success = next(iter(producer["responses"].values()))
        consumer = operation_id(op.method, op.path)
        success.setdefault("links", {})[consumer] = _link(consumer, op, after, example.body)
