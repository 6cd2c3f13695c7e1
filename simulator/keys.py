"""Typed keys for application and request state, declared once."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .domain.store import Store
from .domain.tenants import Tenant
from .journal import Journal
from .settings import Settings

SETTINGS = web.AppKey("settings", Settings)
STORE = web.AppKey("store", Store)
JOURNAL = web.AppKey("journal", Journal)
OPENAPI = web.AppKey("openapi", dict)

# Request-scoped values (aiohttp requests are plain mappings).
TENANT = "payroll_sandbox.tenant"
PUBLIC_TOKEN = "payroll_sandbox.public_token"
BODY = "payroll_sandbox.body"
ERROR_CODE = "payroll_sandbox.error_code"


def tenant_of(request: web.Request) -> Tenant:
    return request[TENANT]


def body_of(request: web.Request) -> Any:
    return request.get(BODY)
