"""Typed keys for application and request state, declared once, and the one object the
app keeps: the sandbox's collaborators, which handlers receive as `sandbox`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web

from .domain.identity import PublicToken
from .domain.registry import TenantRegistry
from .domain.tenants import Tenant
from .operations import Operation
from .security import HostPolicy
from .settings import Settings
from .webhooks.dispatcher import Dispatcher


@dataclass
class Sandbox:
    """Everything a handler may need besides its request: built once by create_app."""

    settings: Settings
    registry: TenantRegistry
    dispatcher: Dispatcher
    operations: list[Operation] = field(default_factory=list)
    host_policy: HostPolicy | None = None  # None: every Host (an app built in a test)
    _openapi: dict[str, Any] | None = None

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document of this app's operations, built on first use."""
        if self._openapi is None:
            # Imported on first use: a start-up (bench/startup.py) pays nothing for it.
            from .openapi import build_openapi

            self._openapi = build_openapi(self.operations, self.registry.service, self.settings)
        return self._openapi


SANDBOX = web.AppKey("sandbox", Sandbox)
# A path without parameters -> the methods it takes ("POST"), for a 405's Allow: aiohttp
# would also list those of a parameter route matching it (GET /task/{taskId}).
FIXED_PATHS = web.AppKey("fixed_paths", dict)

T = TypeVar("T")


def _request_key(name: str, kind: type[T]) -> Any:
    """A typed request key (aiohttp >= 3.14's web.RequestKey); under aiohttp 3.9-3.13, which
    has none, the plain string key a request's state takes there."""
    make = getattr(web, "RequestKey", None)
    return make(name, kind) if make is not None else name


# Request-scoped values.
TENANT = _request_key("tenant", Tenant)
PUBLIC_TOKEN = _request_key("public_token", PublicToken)
BODY = _request_key("body", object)
ERROR_CODE = _request_key("error_code", str)
WARNINGS = _request_key("warnings", list)  # what the API ignored of the request
FAULT = _request_key("fault", dict)  # the API fault rule that fired on it (domain/faults.py)
