"""Continuous access: linked accounts and their data (spec: Linked-account data endpoints;
real-service-facts 8: GET /linked-account/list/{identifier})."""

from __future__ import annotations


from aiohttp import web

from ...domain.accounts.data_records import DATA_KINDS
from ...domain.accounts.payroll_records import paystub_lines
from ...errors import ValidationFailed, field_detail
from ...domain.pdf import text_pdf
from ...domain.shapes import UNSET, Command, Maybe, given, of
from ...schemas.api import DisconnectRequest, DataQuery
from ...domain.accounts.data_records import DATA_RECORDS, LinkedAccountListRecord
from ...schemas.responses import LINKED_ACCOUNT_ACTIONS, PiiDeleted
from ..operations import CONTROL, operation
from ..render import origin, pdf_response
from ..examples import MADE_BY, USER, Example

IDENTIFIER_REQUIRED = "Name the user: ?identifier=... or /<resource>/{identifier}."
RESOURCES = ("linked-accounts", *DATA_KINDS)  # spec: Linked-account data endpoints


def _data_of(kind: str):
    """GET /<kind>?identifier=... or /<kind>/{identifier}, optional linkedAccount (and for
    statements `limit`: the newest that many, in date order)."""

    async def data(tenant, query, params, request, sandbox) -> list:
        # The user in the path, or (DataQuery) in the query (server side: API keys,
        # real-service-facts 1).
        identifier = params.get("identifier") or given(getattr(query, "identifier", UNSET))
        if identifier is None:
            raise ValidationFailed(IDENTIFIER_REQUIRED, details=[
                field_detail("$.identifier", IDENTIFIER_REQUIRED, location="query")])
        service = tenant.accounts
        accounts = service.accounts_of(identifier, given(query.linked_account))
        base_url = origin(request)
        records = [record for account in accounts
                   for record in service.records(kind, account, base_url=base_url)]
        limit = getattr(query, "limit", None)
        if limit is not None:
            records = sorted(records, key=lambda r: (r["date"], r["_id"]))[-limit:]
        return records

    data.__name__ = f"{kind.replace('-', '_')}_data"
    return data


class AccountQuery(Command, kw_only=True):  # the user in the path
    linked_account: Maybe[of(str, "Only this linked account.", min_length=1)] = UNSET


class StatementsQuery(DataQuery, kw_only=True):
    # Real-api-surface (Data): `GET /statements/{identifier}` takes `limit` (default 10).
    limit: of(int, "The newest this many statements, in date order.", ge=1, le=1000) = 10


class AccountStatementsQuery(AccountQuery, kw_only=True):
    limit: of(int, "The newest this many statements, in date order.", ge=1, le=1000) = 10


for _kind in RESOURCES:
    _records = list[DATA_RECORDS[_kind]]
    _statements = _kind == "statements"
    operation("GET", f"/{_kind}", f"A user's {_kind.replace('-', ' ')}",
              query=StatementsQuery if _statements else DataQuery, response=_records,
              errors=(404,), example=Example(parameters={"identifier": USER, "limit": 3})
              if _statements else None)(_data_of(_kind))
    operation("GET", f"/{_kind}/{{identifier}}", f"A user's {_kind.replace('-', ' ')}",
              query=AccountStatementsQuery if _statements else AccountQuery,
              response=_records, errors=(404,))(_data_of(_kind))


@operation("GET", "/linked-account/list/{identifier}", "A user's linked accounts (the real "
           "service's list)", errors=(404,))
async def linked_account_list(tenant, params, sandbox) -> list[LinkedAccountListRecord]:
    """The real service's path and record (real-service-facts 8, real-api-surface):
    `{_id, valid, transactRequired, company, connector, lastSuccess, lastFailure}` per
    linked account of the user."""
    return tenant.accounts.linked_account_list(params["identifier"])


@operation("GET", "/paystub/{statementId}", "A statement's paystub, as a PDF",
           content_type="application/pdf", errors=(404,))
async def paystub(tenant, params, sandbox) -> web.Response:
    """A statement's `paystub`: the pay statement as a one-page PDF, with the same
    credentials as the data endpoints (API keys)."""
    account, statement = tenant.accounts.paystub(params["statementId"])
    return pdf_response(text_pdf(paystub_lines(account, statement)),
                        f"paystub-{statement['_id']}.pdf")


def _on_account(action: str, summary: str, change, body: dict | None = None,
                example: Example | None = None) -> None:
    """A control-plane change to one linked account: find it, change it, let the events go."""

    async def handler(tenant, params, sandbox, body):
        accounts = tenant.accounts
        return change(accounts, accounts.require(params["accountId"], "$.accountId"), body)

    handler.__name__ = action.replace("-", "_")
    operation("POST", f"/_sandbox/linked-accounts/{{accountId}}/{action}", summary,
              body=body, settles=True, response=LINKED_ACCOUNT_ACTIONS[action], errors=(404,),
              example=example, **CONTROL)(handler)


def _disconnect(accounts, account, body):
    accounts.disconnect(account, body.reason)
    return accounts.record(account)


def _reconnect(accounts, account, body):
    accounts.reconnect(account)
    return accounts.record(account)


def _push_refresh(accounts, account, body):
    """A push refresh now, as the periodic one would do it (disconnected: nothing happens)."""
    if account.connected:
        accounts.refresh(account)
    return accounts.record(account)


def _remove_deposit_switch(accounts, account, body):
    removed = accounts.remove_deposit_switch(account)
    return {"linkedAccount": account.id, "removed": removed["_id"]}


_on_account("disconnect", "Disconnect a linked account (linked-account-disconnected)",
            _disconnect, DisconnectRequest,
            Example({"reason": "credentials-changed"}, after=MADE_BY["accountId"]))
_on_account("reconnect", "Reconnect a linked account (linked-account-connected)", _reconnect)
_on_account("refresh", "Refresh a linked account now (a push refresh)", _push_refresh)
_on_account("remove-deposit-switch", "Remove the deposit switch (deposit-switch-removed)",
            _remove_deposit_switch)


@operation("POST", "/_sandbox/users/{identifier}/delete-pii", "Delete the user's personal data "
           "now (pii-data-deleted)", settles=True, errors=(404,), **CONTROL)
async def delete_pii(tenant, params, sandbox) -> PiiDeleted:
    """The PII deletion cadence, now."""
    identifier = params["identifier"]
    tenant.accounts.accounts_of(identifier)  # 404 for an unknown user
    tenant.accounts.delete_pii(identifier)
    return {"identifier": identifier, "deleted": True}
