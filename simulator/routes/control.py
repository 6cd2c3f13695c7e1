"""The control plane under /_sandbox: the sandbox's console, scoped to the caller's tenant."""

from __future__ import annotations

from aiohttp import web

from ..keys import JOURNAL, STORE, tenant_of
from ..middleware import read_json, require_api_keys
from ..schemas.api import JOURNAL_QUERY, TENANT_REQUEST
from ..validation import parse_query

routes = web.RouteTableDef()


@routes.post("/_sandbox/tenants")
async def create_tenant(request: web.Request) -> web.Response:
    require_api_keys(request)
    body = await read_json(request, TENANT_REQUEST)
    tenant = request.app[STORE].create_tenant(body)
    return web.json_response({"data": tenant.describe()}, status=201)


@routes.post("/_sandbox/reset")
async def reset(request: web.Request) -> web.Response:
    require_api_keys(request)
    tenant = request.app[STORE].reset_tenant(tenant_of(request))
    request.app[JOURNAL].clear(tenant.name)
    return web.json_response({"data": tenant.describe()})


@routes.get("/_sandbox/requests")
async def requests_journal(request: web.Request) -> web.Response:
    require_api_keys(request)
    query = parse_query(request.query, JOURNAL_QUERY)
    entries = request.app[JOURNAL].query(tenant_of(request).name, path=query.get("path"),
                                         method=query.get("method"), status=query.get("status"),
                                         limit=query["limit"])
    return web.json_response({"data": [e.record() for e in entries]})
