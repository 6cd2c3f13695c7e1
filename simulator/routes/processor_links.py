"""Processor links at /{aggregator}/... and the aggregator's token minting (control plane).

The aggregator's name comes from the service profile, so the routes are made per app.
"""

from __future__ import annotations

from aiohttp import web

from ..domain.processor_links import CLASSIFY, DETECT
from ..errors import ValidationFailed, field_detail
from ..keys import DISPATCHER, PROCESSOR_LINKS, tenant_of
from ..middleware import read_json
from ..schemas.api import PROCESSOR_LINK_REQUEST, PROCESSOR_TOKEN_REQUEST

IDENTIFIER_HEADER = "user-identifier"
IDENTIFIER_REQUIRED = "Send the user-identifier header."


def routes(aggregator: str) -> web.RouteTableDef:
    table = web.RouteTableDef()

    @table.post(f"/{aggregator}/processor-links")
    async def register(request: web.Request) -> web.Response:
        body = await read_json(request, PROCESSOR_LINK_REQUEST)
        link = request.app[PROCESSOR_LINKS].register(
            tenant_of(request), body["processorToken"], request.headers.get(IDENTIFIER_HEADER))
        return web.json_response({"data": {"_id": link.id, "status": link.status}}, status=202)

    @table.delete(f"/{aggregator}/processor-links")
    async def remove(request: web.Request) -> web.Response:
        links = request.app[PROCESSOR_LINKS].remove_links(tenant_of(request), _identifier(request))
        return web.json_response({"data": {"removed": [link.id for link in links]}})

    @table.get(f"/{aggregator}/employer-matches")
    async def employer_matches(request: web.Request) -> web.Response:
        return web.json_response(request.app[PROCESSOR_LINKS].results(
            tenant_of(request), _identifier(request), CLASSIFY))

    @table.get(f"/{aggregator}/recurring-transactions")
    async def recurring_transactions(request: web.Request) -> web.Response:
        return web.json_response(request.app[PROCESSOR_LINKS].results(
            tenant_of(request), _identifier(request), DETECT))

    @table.post(f"/_sandbox/{aggregator}/processor-token")
    async def mint(request: web.Request) -> web.Response:
        """What the aggregator's processor-token creation answers."""
        body = await read_json(request, PROCESSOR_TOKEN_REQUEST)
        token = request.app[PROCESSOR_LINKS].mint_token(tenant_of(request), body)
        return web.json_response({"data": token.record()}, status=201)

    @table.post(f"/_sandbox/{aggregator}/processor-token/{{token}}/revoke")
    async def revoke(request: web.Request) -> web.Response:
        token = request.app[PROCESSOR_LINKS].revoke_token(tenant_of(request),
                                                          request.match_info["token"])
        await request.app[DISPATCHER].settle(tenant_of(request))
        return web.json_response({"data": token.record()})

    return table


def _identifier(request: web.Request) -> str:
    identifier = request.headers.get(IDENTIFIER_HEADER)
    if not identifier:
        raise ValidationFailed(IDENTIFIER_REQUIRED, details=[
            field_detail(IDENTIFIER_HEADER, IDENTIFIER_REQUIRED, location="header")])
    return identifier
