"""Pay-link accounts and actions (docs/spec/real-api-surface.md, Pay-link; spec: Account
and bill (pay-link), Task `flow`).

An action is a flow a pay-link task runs (the spec's Task `flow` values). A company offers
the flows of its pay-link products: `switch` changes the payment method (flow `switch`),
`present` shows the account and pays a bill (`view-account`, `pay-now`), `manage` changes
the plan (`pause-plan`, `change-plan`); every pay-link company also has `connect-account`
and `refresh`. A user has an account at each company where one of their pay-link tasks
completed; its actions are the company's (less `connect-account`: it is connected), and
it has one bill, whose actions are the flows that act on a bill (`switch`, `pay-now`).
Ids are derived from the account, so they are the same on every read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from hashlib import sha256
from typing import Any

from ...clock import isoformat
from ..companies.companies import Company, CompanyDirectory
from .states import COMPLETED, FLOWS

PAY_LINK = "pay-link"
FLOWS_OF_PRODUCT = {"switch": ("switch",), "present": ("view-account", "pay-now"),
                    "manage": ("pause-plan", "change-plan")}
EVERY_COMPANY = ("connect-account", "refresh")
CONNECTED_ONLY = "connect-account"  # what an account that exists no longer needs
BILL_FLOWS = ("switch", "pay-now")

ScopeOf = Callable[[str], "str | None"]


def actions_for_company(company: Company, scope_of: ScopeOf) -> list[dict[str, str]]:
    """GET /pay-link/actions-for-company/{companyId}: the flows the company's pay-link
    products run, in the spec's order of flows, each with the product a task runs it
    with; none for a company without pay-link products."""
    products = [p for p in company.available_products if scope_of(p) == PAY_LINK]
    if not products:
        return []
    offered = {flow: products[0] for flow in EVERY_COMPANY}
    for product in products:
        for flow in FLOWS_OF_PRODUCT.get(product, ()):
            offered.setdefault(flow, product)
    return [{"type": flow, "product": offered[flow]} for flow in FLOWS if flow in offered]


def pay_link_accounts(tasks: Iterable[Any], companies: CompanyDirectory, identifier: str,
                      scope_of: ScopeOf) -> dict[str, Any]:
    """GET /pay-link/accounts: `{accounts: [...]}`, the user's account at each company where
    one of their pay-link tasks (of the tenant's `tasks`) completed, in the order they were
    first made."""
    latest: dict[str, Any] = {}  # company id -> the latest completed pay-link task there
    for task in tasks:
        if (task.identifier == identifier and task.status == COMPLETED
                and scope_of(task.product) == PAY_LINK):
            latest[task.company_id] = task
    accounts = []
    for company_id, task in latest.items():
        company = companies.get(company_id)
        if company is not None:  # a deleted company takes its accounts with it
            accounts.append(_account(company, task, scope_of))
    return {"accounts": accounts}


def _account(company: Company, task: Any, scope_of: ScopeOf) -> dict[str, Any]:
    # The account's id is the one the task's pay-link-accounts-updated events name.
    account_id = f"{company.id}-{task.user_id}"
    actions = [{**a, "actionId": _id(account_id, a["type"])}
               for a in actions_for_company(company, scope_of) if a["type"] != CONNECTED_ONLY]
    bill_id = _id(account_id, "bill")
    bill = {"_id": bill_id, "name": f"{company.name} subscription",
            "actions": [{**a, "actionId": _id(bill_id, a["type"])}
                        for a in actions if a["type"] in BILL_FLOWS]}
    account: dict[str, Any] = {"_id": account_id, "company": company.branding_summary(),
                               "actions": actions, "bills": [bill],
                               "updatedAt": isoformat(task.history[-1].at)}
    if task.payment_method:
        account["paymentMethod"] = task.payment_method
    return account


def _id(*parts: str) -> str:
    """A 24-hex id derived from what it names: the same on every read."""
    return sha256(":".join(parts).encode()).hexdigest()[:24]
