"""The real service's user and token operations (docs/spec/real-api-surface.md: Access
tokens, Users): revoking a public token, the payment methods a workflow can offer a user,
and the end of a user's continuous access.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...errors import Conflict, field_detail
from ..shapes import given
from ..tasks.states import written_payment_method
from ..tenants import Tenant

# Why continuous access ended, as linked-account-disconnected says it: its published reasons
# are timeout, credentials-changed and system-update; the service stopping the monitoring
# is the nearest (README: Fidelity).
END_OF_MONITORING = "system-update"


UNREMOVABLE_USER = ("The user {identifier!r} has tasks, linked accounts or processor links: "
                    "delete their personal data (delete-pii) or reset the tenant instead.")


UserHasRecords = Conflict.coded("user-has-records")


def put_user(tenant: Tenant, identifier: str, data: Any) -> dict[str, Any]:
    """PUT /user: the user (created if new) with the destination bank accounts and cards
    a task workflow can offer them (`data`: the request's OwnMethods, or UNSET), stored as
    the spec's payment method objects (replacing what was stored; a bank account keeps the
    last four digits of its number only)."""
    user = tenant.identity.user(identifier)
    banks, cards = (given(data.bank_accounts, ()), given(data.cards, ())) if data else ((), ())
    user.payment_methods = {"bankAccounts": [_bank_account(tenant, own) for own in banks],
                            "cards": [_card(tenant, own) for own in cards]}
    return payment_methods(tenant, identifier)


def payment_methods(tenant: Tenant, identifier: str) -> dict[str, Any]:
    """What PUT /user stored for the user: `{identifier, bankAccounts, cards}`."""
    user = tenant.identity.require(identifier)
    stored = user.payment_methods or {"bankAccounts": [], "cards": []}
    # A card's expiry as answers write it, whatever form PUT /user (or an older snapshot) had.
    return {"identifier": identifier, "bankAccounts": stored["bankAccounts"],
            "cards": [written_payment_method(card) for card in stored["cards"]]}


def _bank_account(tenant: Tenant, own: Any) -> dict[str, Any]:
    number = given(own.account_number)
    account_type = given(own.account_type, "checking")
    method: dict[str, Any] = {
        "type": "bank", "_id": given(own.id) or tenant.ids.object_id(),
        "title": given(own.title) or (f"{account_type.title()} ending in {number[-4:]}"
                                      if number else f"{account_type.title()} account"),
        "accountType": account_type,
    }
    if number:
        method["accountNumber"] = number[-4:]
    return {**method, **_given(own, "routingNumber", "externalId")}


def _card(tenant: Tenant, own: Any) -> dict[str, Any]:
    brand, last_four = given(own.brand), given(own.last_four)
    title = given(own.title) or " ".join(
        part for part in (brand or "Card", f"ending in {last_four}" if last_four else "") if part)
    method: dict[str, Any] = {"type": "card", "_id": given(own.id) or tenant.ids.object_id(),
                              "title": title}
    return written_payment_method(
        {**method, **_given(own, "brand", "lastFour", "expiry", "externalId")})


def _given(own: Any, *names: str) -> dict[str, Any]:
    """These fields of a request's struct, by their JSON names, where the request gave them."""
    written = msgspec.to_builtins(own)
    return {name: written[name] for name in names if name in written}


def end_monitoring(tenant: Tenant, identifier: str) -> list[Any]:
    """PUT /user/{identifier}/end-monitoring: continuous access ends for every linked
    account of the user. Each connected one is disconnected (linked-account-disconnected,
    reason END_OF_MONITORING): push refreshes stop (they run only while connected) and a
    refresh task fails with auth-expired, until the user signs in again through the SDK's
    `linkedAccount` flow. The accounts it disconnected."""
    tenant.identity.require(identifier)
    accounts = tenant.accounts.accounts_of(identifier)
    ended = [account for account in accounts if account.connected]
    for account in ended:
        tenant.accounts.disconnect(account, END_OF_MONITORING)
    return ended


def remove_user(tenant: Tenant, identifier: str) -> bool:
    """DELETE /_sandbox/users/{identifier}: a user who has only what POST /access-token and
    PUT /user make (public tokens, stored payment methods) and the control plane's bindings
    is forgotten whole, as if never made (404 for them afterwards); True. A user who does
    not exist is gone already: False (a repeated removal, or a clean-up after a run that
    never made its user, succeeds). A user with tasks, linked accounts or processor links
    has history the ledger and other records name: 409, and they stay. The real service
    publishes no such operation; `verify-against` removes the user it made for its run with
    it (docs/verify-against.md)."""
    if identifier not in tenant.identity.users:
        return False
    parts = (tenant.tasks.values(), tenant.accounts.values(), tenant.links.values())
    if any(record.identifier == identifier for part in parts for record in part):
        raise UserHasRecords(UNREMOVABLE_USER.format(identifier=identifier),
                             details=[field_detail("$.identifier", "has records",
                                                   location="path")])
    tenant.tasks.bind(identifier, None)
    tenant.autopilots.unbind(identifier)
    tenant.accounts.unbind_profile(identifier)
    tenant.tasks.recreate_card_tokens(identifier, True)
    tenant.identity.forget(identifier)
    return True
