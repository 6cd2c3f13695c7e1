"""Typed keys for application and request state, declared once."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .domain.linked_accounts import LinkedAccounts
from .domain.processor_links import ProcessorLinks
from .domain.store import Store
from .domain.tasks import TaskEngine
from .domain.tenants import PublicToken, Tenant
from .journal import Journal
from .scheduler import Runners
from .settings import Settings
from .webhooks.dispatcher import Dispatcher

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", Store)
JOURNAL = web.AppKey("journal", Journal)
OPENAPI = web.AppKey("openapi", dict)
ENGINE = web.AppKey("engine", TaskEngine)
RUNNERS = web.AppKey("runners", Runners)
DISPATCHER = web.AppKey("dispatcher", Dispatcher)
LINKED_ACCOUNTS = web.AppKey("linked_accounts", LinkedAccounts)
PROCESSOR_LINKS = web.AppKey("processor_links", ProcessorLinks)

# Request-scoped values.
TENANT = web.RequestKey("tenant", Tenant)
PUBLIC_TOKEN = web.RequestKey("public_token", PublicToken)
BODY = web.RequestKey("body", object)
ERROR_CODE = web.RequestKey("error_code", str)


def tenant_of(request: web.Request) -> Tenant:
    return request[TENANT]


def body_of(request: web.Request) -> Any:
    return request.get(BODY)


def public_token_of(request: web.Request) -> PublicToken | None:
    return request.get(PUBLIC_TOKEN)
