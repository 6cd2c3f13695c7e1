"""Liveness, the OpenAPI document and where to go from the root."""

from __future__ import annotations

from aiohttp import web

from .. import SPEC_REVISION, __version__
from ..schemas.responses import Index
from ..operations import Auth, operation

HEALTH = {"type": "object", "required": ["status"],
          "properties": {"status": {"const": "ok"}, "environment": {"type": "string"},
                         "vendor": {"type": "string",
                                    "description": "The service profile's vendor: webhooks "
                                                   "carry ce-source com.<vendor>."},
                         "companies": {"type": "integer"},
                         "version": {"type": "string", "description": "payroll-sandbox's version."},
                         "spec": {"type": "string",
                                  "description": "The revision of the service spec it follows: "
                                                 "the first 12 hex digits of the SHA-256 of "
                                                 "service-spec.md."}}}


@operation("GET", "/health", "Health check", auth=Auth.NONE, response=HEALTH)
async def health(sandbox) -> dict:
    registry = sandbox.registry
    return {"status": "ok", "environment": registry.tenants.environment,
            "vendor": registry.service.vendor, "companies": len(registry.catalog),
            "version": __version__, "spec": SPEC_REVISION}


@operation("GET", "/openapi.json", "The OpenAPI document (what this page shows)", auth=Auth.NONE,
           content_type="application/json")
async def openapi(sandbox) -> web.Response:
    return web.json_response(sandbox.openapi())


@operation("GET", "/", "Where to go: the dashboard, the docs, the demo, the SDK",
           auth=Auth.NONE, response=Index)
async def index() -> dict:
    return {"dashboard": "/_sandbox/", "openapi": "/openapi.json", "docs": "/docs",
            "demo": "/demo", "health": "/health", "sdk": "/sdk/transact.js"}
