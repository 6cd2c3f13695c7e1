"""Liveness, the OpenAPI document and where to go from the root."""

from __future__ import annotations

from aiohttp import web

from ... import SPEC_REVISION, __version__
from ...domain.shapes import UNSET, Maybe, View, choice, of
from ...schemas.responses import Index
from ..operations import Auth, operation



class Health(View, kw_only=True):
    status: choice("ok")
    environment: Maybe[str] = UNSET
    vendor: Maybe[of(str, "The service profile's vendor: webhooks carry ce-source "
                     "com.<vendor>.")] = UNSET
    companies: Maybe[int] = UNSET
    version: Maybe[of(str, "payroll-sandbox's version.")] = UNSET
    spec: Maybe[of(str, "The revision of the service spec it follows: the first 12 hex digits "
                   "of the SHA-256 of service-spec.md.")] = UNSET


@operation("GET", "/health", "Health check", auth=Auth.NONE)
async def health(sandbox) -> Health:
    registry = sandbox.registry
    return Health(status="ok", environment=registry.tenants.environment,
                  vendor=registry.service.vendor, companies=len(registry.catalog),
                  version=__version__, spec=SPEC_REVISION)


@operation("GET", "/openapi.json", "The OpenAPI document (what this page shows)", auth=Auth.NONE,
           content_type="application/json")
async def openapi(sandbox) -> web.Response:
    return web.json_response(sandbox.openapi())


INDEX = Index(dashboard="/_sandbox/", openapi="/openapi.json", docs="/docs", demo="/demo",
              health="/health", sdk="/sdk/transact.js")


@operation("GET", "/", "Where to go: the dashboard, the docs, the demo, the SDK", auth=Auth.NONE)
async def index() -> Index:
    return INDEX
