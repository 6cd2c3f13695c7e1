"""Every operation's example request for /docs ("Try it out"), one that succeeds with the
bundled default tenant, and what it takes from an earlier answer (published as OpenAPI
links by openapi.py). The order of EXAMPLES is an order in which they all work
(tests/test_docs_examples.py runs them so)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..domain.accounts.linked_accounts import DATA_KINDS
from ..domain.tasks.records import DEPOSIT_FORM
from .operations import AGGREGATOR

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
    ("POST", "/aggregator-api/transactions/get"): Example(
        {**_ITEM_ACCESS_TOKEN, "start_date": "2026-01-01", "end_date": "2026-12-31",
         "options": {"count": 50, "offset": 0}}, after=_AFTER_EXCHANGE),
    ("POST", "/aggregator-api/transactions/refresh"): Example(_ITEM_ACCESS_TOKEN,
                                                              after=_AFTER_EXCHANGE),
    ("POST", "/aggregator-api/accounts/balance/get"): Example(_ITEM_ACCESS_TOKEN,
                                                              after=_AFTER_EXCHANGE),
    ("POST", "/aggregator-api/auth/get"): Example(_ITEM_ACCESS_TOKEN, after=_AFTER_EXCHANGE),
    ("GET", f"/_sandbox/{AGGREGATOR}/webhook-verification-key"): Example(),
    ("POST", "/aggregator-api/webhook_verification_key/get"): Example(
        {"key_id": "6c5516e1-92dc-479e-a8ff-5a51992e0001"},
        after=From("GET", f"/_sandbox/{AGGREGATOR}/webhook-verification-key",
                   fields={"/key_id": "$response.body#/data/keyId"})),
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
    ("GET", "/_sandbox/bundle"): Example(parameters={"test": "tests/test_app.py::test_refund"}),
    ("POST", "/_sandbox/requests/verify"): Example(
        {"method": "POST", "path": "/task/create", "body": {"identifier": USER}}),
    ("POST", "/_sandbox/snapshot"): Example(after=From("GET", "/_sandbox/snapshot",
                                                       body="$response.body#/data")),
    ("POST", "/_sandbox/clock/advance"): Example({"seconds": 60}),
    ("GET", "/_sandbox/events"): Example(parameters={"user": USER, "limit": 10}),
    ("GET", "/_sandbox/events/{eventId}"): Example(after=From(
        "POST", "/_sandbox/events/trigger", parameters={"eventId": "$response.body#/data/id"})),
    ("PUT", "/_sandbox/users/{identifier}/scenario"): Example({"scenario": "happy-path"}),
    ("PUT", "/_sandbox/scenario"): Example({"scenario": None}),  # every user unbound
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
