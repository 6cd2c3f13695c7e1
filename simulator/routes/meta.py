"""Liveness and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from ..keys import OPENAPI, SETTINGS, STORE

routes = web.RouteTableDef()


@routes.get("/health")
async def health(request: web.Request) -> web.Response:
    store = request.app[STORE]
    return web.json_response({"data": {"status": "ok", "environment": store.tenants.environment,
                                       "companies": len(store.catalog)}})


@routes.get("/openapi.json")
async def openapi(request: web.Request) -> web.Response:
    cache = request.app[OPENAPI]
    if "document" not in cache:
        from ..openapi import build_openapi

        cache["document"] = build_openapi(request.app[STORE].service, request.app[SETTINGS])
    return web.json_response(cache["document"])


@routes.get("/")
async def index(request: web.Request) -> web.Response:
    """Where to go from here."""
    return web.json_response({"data": {"dashboard": "/_sandbox/", "openapi": "/openapi.json",
                                       "health": "/health", "sdk": "/sdk/transact.js"}})
