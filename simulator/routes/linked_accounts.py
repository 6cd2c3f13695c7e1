"""Continuous access: linked accounts and their data (spec: Linked-account data endpoints;
real-service-facts 8: GET /linked-account/list/{identifier})."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ..domain.linked_accounts import LinkedAccount, day_of
from ..errors import ValidationFailed, field_detail
from ..keys import DISPATCHER, LINKED_ACCOUNTS, public_token_of, tenant_of
from ..middleware import read_json
from ..pdf import text_pdf
from ..schemas.api import DATA_QUERY, DISCONNECT_REQUEST
from ..validation import parse_query

routes = web.RouteTableDef()

RESOURCES = ("linked-accounts", "income", "statements", "deposit-accounts", "employment", "taxes",
             "identity", "timesheets")
IDENTIFIER_REQUIRED = "Name the user: ?identifier=... or /<resource>/{identifier}."
NOT_YOUR_USER = "A public token reads only its own user's data."


def _user_of(request: web.Request, named: str | None) -> str:
    """The user a data request is about: the one it names, else the public token's.
    A public token reads only its own user."""
    token = public_token_of(request)
    identifier = named or (token.identifier if token else None)
    if identifier is None:
        raise ValidationFailed(IDENTIFIER_REQUIRED, details=[
            field_detail("$.identifier", IDENTIFIER_REQUIRED, location="query")])
    if token is not None and token.identifier != identifier:
        raise ValidationFailed(NOT_YOUR_USER, code="identifier-mismatch", details=[
            field_detail("$.identifier", NOT_YOUR_USER, location="query")])
    return identifier


async def data(request: web.Request) -> web.Response:
    """GET /<resource>?identifier=... or /<resource>/{identifier}, optional linkedAccount."""
    kind = request.match_info["resource"]
    query = parse_query(request.query, DATA_QUERY)
    identifier = _user_of(request, request.match_info.get("identifier") or query.get("identifier"))
    service, tenant = request.app[LINKED_ACCOUNTS], tenant_of(request)
    accounts = service.accounts_of(tenant, identifier, query.get("linkedAccount"))
    base_url = str(request.url.origin())
    records = [record for account in accounts
               for record in service.records(tenant, kind, account, base_url=base_url)]
    return web.json_response({"data": records})


for resource in RESOURCES:
    routes.get(f"/{{resource:{resource}}}")(data)
    routes.get(f"/{{resource:{resource}}}/{{identifier}}")(data)


@routes.get("/linked-account/list/{identifier}")
async def linked_account_list(request: web.Request) -> web.Response:
    """The real service's path and record (real-service-facts 8): `{_id, valid,
    transactRequired, company, connector, lastSuccess}` per linked account of the user."""
    identifier = _user_of(request, request.match_info["identifier"])
    service, tenant = request.app[LINKED_ACCOUNTS], tenant_of(request)
    return web.json_response({"data": service.linked_account_list(tenant, identifier)})


@routes.get("/paystub/{statementId}")
async def paystub(request: web.Request) -> web.Response:
    """A statement's `paystub`: the pay statement as a one-page PDF. The same credentials
    as the data endpoints; a public token opens only its own user's paystubs."""
    token = public_token_of(request)
    account, statement = request.app[LINKED_ACCOUNTS].paystub(
        tenant_of(request), request.match_info["statementId"], token.identifier if token else None)
    disposition = f'inline; filename="paystub-{statement["_id"]}.pdf"'
    return web.Response(body=text_pdf(_paystub_lines(account, statement)),
                        content_type="application/pdf",
                        headers={"content-disposition": disposition})


def _paystub_lines(account: LinkedAccount, statement: dict[str, Any]) -> list[tuple[int, str]]:
    """The paystub's text: the statement's figures, employer and employee."""
    profile = account.profile
    taxes = round(statement["grossAmount"] - statement["netAmount"], 2)
    period = (f"{day_of(statement['payPeriodStartDate']).isoformat()} to "
              f"{day_of(statement['payPeriodEndDate']).isoformat()}")
    return [(18, "Earnings Statement"), (12, f"Employer: {profile.employer}"),
            (12, f"Employee: {profile.first_name} {profile.last_name}"),
            (12, f"Pay date: {day_of(statement['date']).isoformat()}"),
            (12, f"Pay period: {period}"), (12, ""),
            (12, f"Hours: {statement['hours']:.2f}"),
            (12, f"Gross pay: ${statement['grossAmount']:,.2f}"),
            (12, f"Taxes and deductions: ${taxes:,.2f}"),
            (12, f"Net pay: ${statement['netAmount']:,.2f}"),
            (12, f"Payment method: {statement['paymentMethod']}")]


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
    return service.record(tenant, account)


async def _reconnect(request, service, tenant, account):
    service.reconnect(tenant, account)
    return service.record(tenant, account)


async def _push_refresh(request, service, tenant, account):
    """A push refresh now, as the periodic one would do it (disconnected: nothing happens)."""
    if account.connected:
        service.refresh(tenant, account)
    return service.record(tenant, account)


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
