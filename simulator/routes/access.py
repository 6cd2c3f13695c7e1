"""POST /access-token: public tokens for a user (DESIGN.md, Public API)."""

from __future__ import annotations

from aiohttp import web

from ..domain.tenants import DEFAULT_TOKEN_LIFETIME, create_access_token, token_record
from ..keys import tenant_of
from ..middleware import read_json
from ..schemas.api import ACCESS_TOKEN_REQUEST

routes = web.RouteTableDef()


@routes.post("/access-token")
async def access_token(request: web.Request) -> web.Response:
    body = await read_json(request, ACCESS_TOKEN_REQUEST)
    token = create_access_token(tenant_of(request), body["identifier"],
                                body.get("tokenLifetime", DEFAULT_TOKEN_LIFETIME))
    return web.json_response({"data": token_record(token)})
