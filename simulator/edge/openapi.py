"""The OpenAPI 3.1 document, generated from the same schemas the handlers enforce.

Besides what each operation declares (`errors=`), the document derives the answers the
pipeline gives by itself (edge/pipeline.py): 401 for an operation with auth, 400
(malformed JSON), 413, 415 and 422 for one with a JSON body, 422 for one with query
parameters, path parameters (text that is not allowed) or request headers.

For people reading it at /docs, it also groups the operations (TAGS: a group per resource,
derived from the path unless an operation declares its own) and gives each one an example
request that succeeds with the bundled default tenant (its declared `example=`, else one
examples.py derives); an id the sandbox makes (a task's, a linked account's) comes from an
earlier answer, stated as an OpenAPI link on that answer. tests/test_docs_examples.py runs
every example against a real server.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

from .. import __version__
from ..domain.accounts.data_records import DATA_KINDS
from ..domain.companies.companies import FullCompany, SearchCompany
from ..domain.dates import date_time_field
from ..domain.links.processor_links import TOKEN_PATTERN
from ..domain.rules import ServiceProfile
from ..domain.shapes import NO_CONTROL_CHARACTER, PROCESSOR_LINK_SCENARIOS, schema_of
from ..domain.webhooks.event_types import event_schema, event_types
from ..load.scenarios.loader import load_all_scenarios, scenario_folders
from ..schemas import api
from ..settings import Settings, bundled_dir
from ..validate import schema_errors
from .examples import PARAMETER_EXAMPLES, Example, From, example_of
from .operations import (AGGREGATOR, CLIENT_ID, CLIENT_SECRET, PATH_PARAMETER, Auth,
                         Operation)

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
    path_names = PATH_PARAMETER.findall(op.path)
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
    examples = {(op.method, op.path): _at(example_of(op), aggregator) for op in operations}
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
            "parameters": [{"name": f"ce-{name}", "in": "header", "required": True,
                            "schema": schema} for name, schema in (
                ("specversion", {"const": "1.0"}), ("source", {"const": f"com.{service.vendor}"}),
                ("type", {"const": f"com.{service.vendor}.{event_type}"}),
                ("time", date_time_field("The body's eventTime.")), ("id", {"type": "string"}))],
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
