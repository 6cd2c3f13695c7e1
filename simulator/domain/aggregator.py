"""The aggregator's side of the processor-token flow: items, their public and access tokens,
accounts, and the processor tokens minted from them (DESIGN.md, The aggregator's own API).

The customer's server does at the aggregator what the spec's "Steps at the third-party
aggregator" list: a public token for a linked item (here the aggregator's sandbox call
`/sandbox/public_token/create`), its exchange for an access token, the item's accounts,
and a processor token for one account (real-service facts 10). That token is the one
`POST /<aggregator>/processor-links` takes: it records its item, the item's products and
`transactions.days_requested`, so the service's pipeline pulls what the item allows, and
fails with the aggregator's error once the item needs its user to log in again
(`/sandbox/item/reset_login`).

Every function is one operation of the aggregator's API and returns its answer (snake_case,
with `request_id`, as the aggregator answers); errors are AggregatorError, rendered in the
aggregator's error body by routes/aggregator_api.py. Ids are seeded (tenant.ids); tokens
come from `unguessable`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..errors import ApiError
from .identity import unguessable
from .owner import Owner
from .stored import Record, Sections, array, check_count, unique

PUBLIC_TOKEN_LIFETIME = 1800   # the aggregator's public tokens live 30 minutes, one exchange
DEFAULT_DAYS_REQUESTED = 90    # transactions.days_requested when the link does not say
TRANSACTIONS = "transactions"  # the product the service needs (spec: Steps at the aggregator)

EXPECTED_FORMAT = "expected format: {kind}-<environment>-<identifier>"
UNKNOWN_PUBLIC_TOKEN = "provided public token is not valid: it is unknown or already exchanged"
EXPIRED_PUBLIC_TOKEN = ("provided public token is expired. Public tokens expire 30 minutes after "
                        "creation at which point they can no longer be exchanged")
UNKNOWN_ACCESS_TOKEN = ("provided access token is not valid: it is unknown, or its item was "
                        "removed")
OTHER_ENVIRONMENT = "provided {kind} token is for the {theirs} environment; this is {ours}"
UNKNOWN_ACCOUNT = "account_id {account_id!r} is not an account of this item"
LOGIN_REQUIRED = ("the login details of this item have changed (credentials, MFA, or required "
                  "user action) and a user login is required to update this information. "
                  "use Link's update mode to restore the item to a good state")
ITEM_REMOVED = "the item this processor token was created for was removed at the aggregator"


# -- errors, in the aggregator's terms ------------------------------------------------------------

class AggregatorError(ApiError):
    """An error of the aggregator's API: its `error_type` and `error_code` (HTTP 400, as the
    aggregator answers item and input errors). `code` (the journal's) follows from them."""

    status = 400
    error_type = "INVALID_INPUT"
    error_code = "INVALID_INPUT"
    display_message: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.code = cls.error_code.lower().replace("_", "-")

    def aggregator_error(self) -> dict[str, Any]:
        """The error as the aggregator reports it (its error body without request_id; the
        `errorType`/`errorCode` of an aggregator-error event come from the same fields)."""
        return {"error_type": self.error_type, "error_code": self.error_code,
                "error_message": self.message, "display_message": self.display_message}


class InvalidPublicToken(AggregatorError):
    error_code = "INVALID_PUBLIC_TOKEN"


class InvalidAccessToken(AggregatorError):
    error_code = "INVALID_ACCESS_TOKEN"


class InvalidAccountId(AggregatorError):
    error_code = "INVALID_ACCOUNT_ID"


class ItemLoginRequired(AggregatorError):
    error_type = "ITEM_ERROR"
    error_code = "ITEM_LOGIN_REQUIRED"


# -- records ----------------------------------------------------------------------------------

@dataclass
class Account:
    """One account of an item, with its balances (the aggregator's AccountBase)."""

    account_id: str
    name: str
    official_name: str
    mask: str
    type: str
    subtype: str
    available: float
    current: float

    def record(self) -> dict[str, Any]:
        return {"account_id": self.account_id, "name": self.name,
                "official_name": self.official_name, "mask": self.mask, "type": self.type,
                "subtype": self.subtype,
                "balances": {"available": self.available, "current": self.current,
                             "limit": None, "iso_currency_code": "USD",
                             "unofficial_currency_code": None}}


@dataclass
class Item:
    """A user's login at an institution, as the aggregator keeps it: the products its link
    asked for, its accounts, and its tokens (the public token until it is exchanged, then
    the access token)."""

    item_id: str
    institution_id: str
    products: list[str]
    days_requested: int
    webhook: str | None
    accounts: list[Account]
    created_at: float
    public_token: str | None
    public_token_expires_at: float
    access_token: str | None = None
    login_required: bool = False   # /sandbox/item/reset_login: the user must log in again

    def record(self) -> dict[str, Any]:
        """The aggregator's Item object (in /accounts/get)."""
        return {"item_id": self.item_id, "institution_id": self.institution_id,
                "institution_name": None, "webhook": self.webhook, "error": None,
                "available_products": [], "billed_products": list(self.products),
                "products": list(self.products), "consented_products": list(self.products),
                "consent_expiration_time": None, "update_type": "background"}


STORED_ITEM = Record(Item, shapes={"daysRequested": {"type": "integer", "minimum": 1,
                                                     "maximum": 730}})


# The two accounts every sandbox item has, as the aggregator's sandbox institutions give.
_ACCOUNTS = (("Checking", "Standard Checking", "0000", "checking", (50, 5000)),
             ("Saving", "Silver Standard 0.1% Interest Saving", "1111", "savings", (200, 20000)))


def _request_id(tenant: Owner) -> str:
    return tenant.ids.secret("")[:15]


# -- the aggregator's API ---------------------------------------------------------------------

def create_sandbox_public_token(tenant: Owner, request: dict[str, Any]) -> dict[str, Any]:
    """/sandbox/public_token/create: a linked item at `institution_id` with
    `initial_products`, and the public token its link flow would return."""
    options = request.get("options") or {}
    transactions = options.get("transactions") or {}
    item_id = tenant.ids.secret("")
    rng = random.Random(f"{item_id}:balances")
    accounts = []
    for name, official, mask, subtype, (low, high) in _ACCOUNTS:
        current = round(rng.uniform(low, high), 2)
        accounts.append(Account(account_id=tenant.ids.secret(""), name=f"Sandbox {name}",
                                official_name=f"Sandbox {official}", mask=mask,
                                type="depository", subtype=subtype,
                                available=round(current * rng.uniform(0.9, 1.0), 2),
                                current=current))
    now = tenant.clock.timestamp()
    item = Item(item_id=item_id, institution_id=request["institution_id"],
                products=list(dict.fromkeys(request["initial_products"])),
                days_requested=transactions.get("days_requested", DEFAULT_DAYS_REQUESTED),
                webhook=options.get("webhook"), accounts=accounts, created_at=now,
                public_token=unguessable(f"public-{tenant.environment}-"),
                public_token_expires_at=now + PUBLIC_TOKEN_LIFETIME)
    tenant.aggregator_items[item.item_id] = item
    tenant.aggregator_tokens[item.public_token] = item.item_id
    keep_items_bounded(tenant)
    return {"public_token": item.public_token, "request_id": _request_id(tenant)}


def exchange_public_token(tenant: Owner, public_token: str) -> dict[str, Any]:
    """/item/public_token/exchange: the item's access token for its public token (once)."""
    _check_environment(tenant, public_token, "public", InvalidPublicToken)
    item = tenant.aggregator_items.get(tenant.aggregator_tokens.get(public_token, ""))
    if item is None or item.public_token != public_token:
        raise InvalidPublicToken(UNKNOWN_PUBLIC_TOKEN)
    if tenant.clock.timestamp() >= item.public_token_expires_at:
        raise InvalidPublicToken(EXPIRED_PUBLIC_TOKEN)
    del tenant.aggregator_tokens[public_token]
    item.public_token = None
    item.access_token = unguessable(f"access-{tenant.environment}-")
    tenant.aggregator_tokens[item.access_token] = item.item_id
    return {"access_token": item.access_token, "item_id": item.item_id,
            "request_id": _request_id(tenant)}


def get_accounts(tenant: Owner, access_token: str,
                 account_ids: list[str] | None = None) -> dict[str, Any]:
    """/accounts/get: the item's accounts (those of `account_ids` when given) and the item;
    an item whose login was reset answers ITEM_LOGIN_REQUIRED until it is relinked."""
    item = item_of(tenant, access_token)
    if item.login_required:
        raise ItemLoginRequired(LOGIN_REQUIRED)
    known = {account.account_id for account in item.accounts}
    for account_id in account_ids or ():
        if account_id not in known:
            raise InvalidAccountId(UNKNOWN_ACCOUNT.format(account_id=account_id))
    return {"accounts": [a.record() for a in item.accounts
                         if account_ids is None or a.account_id in account_ids],
            "item": item.record(), "request_id": _request_id(tenant)}


def create_processor_token(tenant: Owner, request: dict[str, Any]) -> dict[str, Any]:
    """/processor/token/create: a processor token for one account of the item, for the
    processor named (the service's key at the aggregator). The token carries the item,
    its products and days_requested to the service's pipeline."""
    item = item_of(tenant, request["access_token"])
    account = next((a for a in item.accounts if a.account_id == request["account_id"]), None)
    if account is None:
        raise InvalidAccountId(UNKNOWN_ACCOUNT.format(account_id=request["account_id"]))
    token = tenant.links.mint_token({"daysRequested": item.days_requested,
                                     "products": item.products},
                                    item_id=item.item_id, account_id=account.account_id)
    return {"processor_token": token.token, "request_id": _request_id(tenant)}


def remove_item(tenant: Owner, access_token: str) -> dict[str, Any]:
    """/item/remove: the item and its access token are gone; the processor tokens made from
    it are revoked (registering one is refused), and a link still to pull transactions
    through one fails with ITEM_NOT_FOUND (`pull_error`)."""
    item = item_of(tenant, access_token)
    _forget(tenant, item)
    tenant.links.revoke_item_tokens(item.item_id)
    return {"request_id": _request_id(tenant)}


def reset_login(tenant: Owner, access_token: str) -> dict[str, Any]:
    """/sandbox/item/reset_login: the item needs its user to log in again; pulling
    transactions through its processor tokens fails with ITEM_LOGIN_REQUIRED from now on.
    A new item (a new link) is what recovers here."""
    item = item_of(tenant, access_token)
    item.login_required = True
    return {"reset_login": True, "request_id": _request_id(tenant)}


# -- for the service's pipeline -----------------------------------------------------------

def pull_error(tenant: Owner, item_id: str | None) -> dict[str, str] | None:
    """What the aggregator answers when the service pulls transactions through a processor
    token of this item, as an aggregator-error event's data (`errorType`, `errorCode`,
    `errorMessage`); None when the pull succeeds (or the token came from the control
    plane's shortcut, which has no item)."""
    if item_id is None:
        return None
    item = tenant.aggregator_items.get(item_id)
    if item is None:
        return {"errorType": "ITEM_ERROR", "errorCode": "ITEM_NOT_FOUND",
                "errorMessage": ITEM_REMOVED}
    if item.login_required:
        return {"errorType": ItemLoginRequired.error_type,
                "errorCode": ItemLoginRequired.error_code, "errorMessage": LOGIN_REQUIRED}
    return None


# -- lookups and bounds ---------------------------------------------------------------------

def item_of(tenant: Owner, access_token: str) -> Item:
    """The item of an access token of this tenant (another tenant's is unknown here)."""
    _check_environment(tenant, access_token, "access", InvalidAccessToken)
    item = tenant.aggregator_items.get(tenant.aggregator_tokens.get(access_token, ""))
    if item is None or item.access_token != access_token:
        raise InvalidAccessToken(UNKNOWN_ACCESS_TOKEN)
    return item


def token_index(items: dict[str, Item]) -> dict[str, str]:
    """Every live token of these items -> its item id (a restore rebuilds it)."""
    index = {}
    for item in items.values():
        for token in (item.public_token, item.access_token):
            if token is not None:
                index[token] = item.item_id
    return index


# -- snapshot (domain/stored.py) ------------------------------------------------------------

# Added later: a snapshot without it has no items at the aggregator's API.
SECTIONS = Sections({}, {"aggregatorItems": array(STORED_ITEM)})


def dump_items(tenant: Owner) -> dict[str, Any]:
    return {"aggregatorItems": [STORED_ITEM.dump(item)
                                for item in tenant.aggregator_items.values()]}


def load_items(document: dict[str, Any], loading: Any) -> dict[str, Any]:
    check_count(document, "aggregatorItems", loading.rules.limits.max_aggregator_items,
                "the aggregator's items bound")
    if "aggregatorItems" not in document:
        return {"items": {}}
    return {"items": unique(document, "aggregatorItems", STORED_ITEM, "item_id")}


def restore_items(tenant: Any, items: dict[str, Item]) -> None:
    tenant.aggregator_items = items
    tenant.aggregator_tokens = token_index(items)


def keep_items_bounded(tenant: Owner) -> None:
    """Past the bound (Limits.max_aggregator_items), a tenth of it goes: first items whose
    public token expired unexchanged (nothing can reach them), then the oldest."""
    limit = tenant.rules.limits.max_aggregator_items
    items = tenant.aggregator_items
    if len(items) <= limit:
        return
    keep = limit - max(1, limit // 10)
    now = tenant.clock.timestamp()

    def unreachable(item: Item) -> bool:
        return item.access_token is None and item.public_token_expires_at <= now

    # A stable sort: the unreachable first, each group oldest first (insertion order).
    for item in sorted(items.values(), key=lambda item: not unreachable(item))[:len(items) - keep]:
        _forget(tenant, item)


def _forget(tenant: Owner, item: Item) -> None:
    del tenant.aggregator_items[item.item_id]
    for token in (item.public_token, item.access_token):
        tenant.aggregator_tokens.pop(token, None)


def _check_environment(tenant: Owner, token: str, kind: str, error: type[AggregatorError]) -> None:
    """A token of the other environment is named as such (the aggregator's own wording)."""
    for environment in ("sandbox", "production"):
        if token.startswith(f"{kind}-{environment}-") and environment != tenant.environment:
            raise error(OTHER_ENVIRONMENT.format(kind=kind, theirs=environment,
                                                 ours=tenant.environment))
    if not token.startswith(f"{kind}-"):
        raise error(f"provided {kind} token is in an invalid format. "
                    + EXPECTED_FORMAT.format(kind=kind))
