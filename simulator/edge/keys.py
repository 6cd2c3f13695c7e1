"""Typed keys for application and request state, declared once, and the one object the
app keeps: the sandbox's collaborators, which handlers receive as `sandbox`, with the Host
names it answers (SECURITY.md)."""

from __future__ import annotations

import ipaddress
from typing import Any, TypeVar

import msgspec
from aiohttp import web

from ..domain.registry import TenantRegistry
from ..domain.tenants import Tenant
from ..domain.faults import Target
from .operations import Auth, Operation
from ..settings import Settings
from ..transport.dispatcher import Dispatcher


# -- which Host names the app answers (SECURITY.md: DNS rebinding)

LOOPBACK_NAMES = ("localhost",)
WILDCARD = "*"


class HostPolicy:
    """The Host names a request may carry (a DNS-rebinding page carries its own name).

    Always allowed: IP literals (rebinding needs a name) and localhost (`*.localhost`
    resolves to loopback only). Besides those: `--allowed-host` names; `*` allows any.
    Every request asks, so the answer for each Host header seen is kept (CACHE of them).
    """

    CACHE = 256

    def __init__(self, names: frozenset[str], any_name: bool) -> None:
        self.names = names
        self.any_name = any_name
        self._seen: dict[str, bool] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> HostPolicy:
        names = {n.strip().lower().rstrip(".") for n in settings.allowed_hosts.split(",")}
        return cls(names=frozenset(names - {WILDCARD, ""}), any_name=WILDCARD in names)

    def allows(self, host_header: str | None) -> bool:
        if self.any_name:
            return True
        if not host_header:
            return False  # HTTP/1.1 requires one; a browser always sends it
        known = self._seen.get(host_header)
        if known is None:
            known = self._judge(_host_name(host_header))
            if len(self._seen) < self.CACHE:
                self._seen[host_header] = known
        return known

    def _judge(self, name: str) -> bool:
        if name in self.names or name in LOOPBACK_NAMES or name.endswith(".localhost"):
            return True
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True


def _host_name(host_header: str) -> str:
    """`Host: name:port` or `[v6]:port` -> the name, lower case, without a final dot."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


class Sandbox(msgspec.Struct):
    """Everything a handler may need besides its request: built once by create_app."""

    settings: Settings
    registry: TenantRegistry
    dispatcher: Dispatcher
    operations: list[Operation] = msgspec.field(default_factory=list)
    host_policy: HostPolicy | None = None  # None: every Host (an app built in a test)
    # Who may run a large snapshot restore now (snapshot.RestoreAdmission); create_app
    # makes it with the server's memory budget.
    large_restores: Any = None
    _openapi: dict[str, Any] | None = None

    def fault_targets(self) -> list[Target]:
        """The app's operations as API fault rules name them (the control plane's among
        them, so a rule naming one is told why it cannot be faulted)."""
        return [Target(op.method, op.path, op.auth is not Auth.NONE) for op in self.operations]

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
# A parameter route's path segments -> the fixed paths of its shape by a method they take
# and it does not (POST: /task/create, /task/prescreen beside GET /task/{taskId}): that
# method on another path of the shape is a 404, not a 405 (edge/pipeline.py).
FIXED_SIBLINGS = web.AppKey("fixed_siblings", list)
# A path prefix -> the dialect (operations.Dialect) every path under it answers in, those no
# operation takes included (render.py).
DIALECTS = web.AppKey("dialects", dict)

T = TypeVar("T")


def _request_key(name: str, kind: type[T]) -> Any:
    """A typed request key (aiohttp >= 3.14's web.RequestKey); under aiohttp 3.9-3.13, which
    has none, the plain string key a request's state takes there."""
    make = getattr(web, "RequestKey", None)
    return make(name, kind) if make is not None else name


class Exchange:
    """What the edge and the pipeline learn of one request, for its journal entry and its
    headers: the tenant (None: a request of no tenant's), the error code answered, the
    body as the journal keeps it, what the API ignored (x-sandbox-warning), the API fault
    rule that fired (domain/faults.py) and the body as read (render.read_body: a second
    reader gets it again). One object read by attribute: six request keys, each a mapping
    lookup, cost every request a few microseconds."""

    __slots__ = ("tenant", "error_code", "body", "warnings", "fault", "raw")

    def __init__(self) -> None:
        self.tenant: Tenant | None = None
        self.error_code: str | None = None
        self.body: Any = None
        self.warnings: list[str] = []
        self.fault: dict[str, Any] | None = None
        self.raw: bytes | None = None


# Request-scoped values: the edge puts one Exchange on every request.
EXCHANGE = _request_key("exchange", Exchange)


def exchange_of(request: web.Request) -> Exchange:
    """The request's Exchange (one is made for a request the edge did not see)."""
    try:
        return request[EXCHANGE]
    except KeyError:
        exchange = request[EXCHANGE] = Exchange()
        return exchange
