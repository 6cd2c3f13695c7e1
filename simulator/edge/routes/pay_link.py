"""Pay-link accounts and actions at the real service's paths
(docs/spec/real-api-surface.md, Pay-link; domain/pay_link.py says how they are made)."""

from __future__ import annotations

from ...domain.tasks.pay_link import actions_for_company, pay_link_accounts
from ...schemas.api import PayLinkAccounts, PayLinkAction
from ..operations import Auth, operation
from ..examples import Example


@operation("GET", "/pay-link/accounts", "A user's pay-link accounts, with actions and bills",
           auth=Auth.PUBLIC_TOKEN, headers=(("x-api-version", False),))
async def list_pay_link_accounts(tenant, token, sandbox) -> PayLinkAccounts:
    """The user is the public token's. The vendor's client sends `x-api-version: v2`; the
    sandbox knows that version's shape only and answers it whatever the header says."""
    return pay_link_accounts(tenant.tasks.values(), tenant.companies, token.identifier,
                             tenant.rules.scope_of)


@operation("GET", "/pay-link/actions-for-company/{companyId}", "The pay-link actions a company "
           "supports", auth=Auth.API_KEYS, errors=(404,),
           example=Example(parameters={"companyId": "6410a0000000000000000060"}))  # Netflix
async def list_company_actions(tenant, params, sandbox) -> list[PayLinkAction]:
    return actions_for_company(tenant.companies.require(params["companyId"]),
                               tenant.rules.scope_of)
