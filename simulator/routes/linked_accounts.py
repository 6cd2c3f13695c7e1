"""Continuous access: linked accounts and their data (spec: Linked-account data endpoints)."""

from __future__ import annotations

from aiohttp import web

from ..errors import ValidationFailed, field_detail
from ..keys import DISPATCHER, LINKED_ACCOUNTS, public_token_of, tenant_of
from ..middleware import read_json
from ..schemas.api import DATA_QUERY, DISCONNECT_REQUEST
from ..validation import parse_query

routes = web.RouteTableDef()

RESOURCES = ("linked-accounts", "income", "statements", "deposit-accounts", "employment", "taxes",
             "identity", "timesheets")
IDENTIFIER_REQUIRED = "Name the user: ?identifier=... or /<resource>/{identifier}."
NOT_YOUR_USER = "A public token reads only its own user's data."


async def data(request: web.Request) -> web.Response:
    """GET /<resource>?identifier=... or /<resource>/{identifier}, optional linkedAccount."""
    kind = request.match_info["resource"]
    query = parse_query(request.query, DATA_QUERY)
    token = public_token_of(request)
    identifier = request.match_info.get("identifier") or query.get("identifier") or (
        token.identifier if token else None)
    if identifier is None:
        raise ValidationFailed(IDENTIFIER_REQUIRED, details=[
            field_detail("$.identifier", IDENTIFIER_REQUIRED, location="query")])
    if token is not None and token.identifier != identifier:
        raise ValidationFailed(NOT_YOUR_USER, code="identifier-mismatch", details=[
            field_detail("$.identifier", NOT_YOUR_USER, location="query")])
    service, tenant = request.app[LINKED_ACCOUNTS], tenant_of(request)
    accounts = service.accounts_of(tenant, identifier, query.get("linkedAccount"))
    records = [record for account in accounts for record in service.records(tenant, kind, account)]
    return web.json_response({"data": records})


for resource in RESOURCES:
    routes.get(f"/{{resource:{resource}}}")(data)
    routes.get(f"/{{resource:{resource}}}/{{identifier}}")(data)


def _on_account(change):
    """A control-plane change to one linked account: find it, change it, let the events go."""

    async def handler(request: web.Request) -> web.Response:
        service, tenant = request.app[LINKED_ACCOUNTS], tenant_of(request)
        account = service.require(tenant, request.match_info["accountId"], "$.accountId")
        result = await change(request, service, tenant, account)
        await request.app[DISPATCHER].settle(tenant)
        return web.json_response({"data": result})

    return handler


async def _disconnect(request, service, tenant, account):
    body = await read_json(request, DISCONNECT_REQUEST)
    service.disconnect(tenant, account, body.get("reason", "timeout"))
    return account.record()


async def _reconnect(request, service, tenant, account):
    service.reconnect(tenant, account)
    return account.record()


async def _push_refresh(request, service, tenant, account):
    """A push refresh now, as the periodic one would do it (disconnected: nothing happens)."""
    if account.connected:
        service.refresh(tenant, account)
    return account.record()


async def _remove_deposit_switch(request, service, tenant, account):
    removed = service.remove_deposit_switch(tenant, account)
    return {"linkedAccount": account.id, "removed": removed["_id"]}


for action, change in (("disconnect", _disconnect), ("reconnect", _reconnect),
                       ("refresh", _push_refresh), ("remove-deposit-switch", _remove_deposit_switch)):
    routes.post(f"/_sandbox/linked-accounts/{{accountId}}/{action}")(_on_account(change))


@routes.post("/_sandbox/users/{identifier}/delete-pii")
async def delete_pii(request: web.Request) -> web.Response:
    """The PII deletion cadence, now."""
    service, tenant = request.app[LINKED_ACCOUNTS], tenant_of(request)
    identifier = request.match_info["identifier"]
    service.accounts_of(tenant, identifier)  # 404 for an unknown user
    service.delete_pii(tenant, identifier)
    await request.app[DISPATCHER].settle(tenant)
    return web.json_response({"data": {"identifier": identifier, "deleted": True}})
