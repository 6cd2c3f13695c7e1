"""The aggregator's side of the processor-token flow: items, their public and access tokens,
accounts, and the processor tokens minted from them (DESIGN.md, The aggregator's own API).

The customer's server does at the aggregator what the spec's "Steps at the third-party
aggregator" list: a public token for a linked item (here the aggregator's sandbox call
`/sandbox/public_token/create`), its exchange for an access token, the item's accounts,
and a processor token for one account (real-service facts 10). That token is the one
`POST /<aggregator>/processor-links` takes: it records its item, the item's products and
`transactions.days_requested`, so the service's pipeline pulls what the item allows (the
item's own transactions, which /transactions/sync answers too: aggregator_data.py), and
fails with the aggregator's error once the item needs its user to log in again
(`/sandbox/item/reset_login`).

Around that flow, what a customer's own code calls next: the item (/item/get), a link
token, an institution, the item's transactions, and its webhooks. An item may carry a
webhook URL (`options.webhook`, /item/webhook/update); /sandbox/item/fire_webhook sends the
aggregator's own webhook there, a JSON body in its conventions, through the tenant's
ledger and outbox like every delivery (Tenant.emit_webhook; facts 10).

Every function is one operation of the aggregator's API and returns its answer (snake_case,
with `request_id`, as the aggregator answers); errors are AggregatorError, rendered in the
aggregator's error body by routes/aggregator_api.py. Ids are seeded (tenant.ids); tokens
come from `unguessable`.
"""

from __future__ import annotations

import base64
import binascii
import random
from collections.abc import Callable
from functools import cache
from typing import Any

from ...clock import Clock, isoformat
from ...errors import ApiError
from .aggregator_keys import WebhookKey, new_webhook_key, public_jwk, verification_header
from .aggregator_data import (INSTITUTIONS, Institution, institution_status, item_history,
                              transaction_record)
from ..identity.identity import unguessable
from ..webhooks.events import EventLog
from .processor_links import DaysRequested, ProcessorLinks, ProcessorTokenRequest
from ..shapes import given
from ..stored import Amount, LoadError, Stored, Time, array, loaded, schema, stored
from ..sections import Sections, unique

PUBLIC_TOKEN_LIFETIME = 1800   # the aggregator's public tokens live 30 minutes, one exchange
LINK_TOKEN_LIFETIME = 4 * 3600  # its link tokens, 4 hours
DEFAULT_DAYS_REQUESTED = 90    # transactions.days_requested when the link does not say
TRANSACTIONS = "transactions"  # the product the service needs (spec: Steps at the aggregator)
SYNC_COUNT = 100               # /transactions/sync: transactions a page, unless `count` says
GET_COUNT = 100                # /transactions/get: transactions an answer, unless `count` says

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
UNKNOWN_INSTITUTION = ("invalid institution_id provided: {institution_id!r} is no institution "
                       "of this sandbox (ins_109508 to ins_109512, ins_127287)")
OTHER_COUNTRY = "institution {institution_id!r} is not in the country_codes asked for ({codes})"
NO_TRANSACTIONS = ("this item was linked without the transactions product (initial_products); "
                   "link a new item with it")
BAD_CURSOR = "cursor is not a cursor /transactions/sync gave for this item (and account_id)"
NO_WEBHOOK = ("the item has no webhook URL: give one as options.webhook to "
              "/sandbox/public_token/create, or with /item/webhook/update")
WRONG_WEBHOOK_TYPE = "webhook_code {code} is not a webhook of webhook_type {given} (it is {type})"
PRODUCT_NOT_ENABLED = ("the item has no {product} product (its products: {products}), so it "
                       "fires no {type} {code} webhook")
NOT_SERVED = ("{code} is a webhook of a product the sandbox's items do not have ({what}); "
              "it fires: {fired}")
UNKNOWN_KEY = ("key_id {key_id!r} is not a webhook verification key of this client: take the "
               "kid of the Plaid-Verification JWT's header")
DATES_REVERSED = "start_date {start} is after end_date {end}"
USER_PERMISSION_REVOKED = ("the user has revoked access to this item at the institution; "
                           "the item cannot be updated until they link it again")


# -- errors, in the aggregator's terms ------------------------------------------------------------

def error_object(error_type: str, error_code: str, message: str) -> dict[str, Any]:
    """The aggregator's error object: its error body without request_id (the `errorType`/
    `errorCode` of an aggregator-error event come from the same fields)."""
    return {"error_type": error_type, "error_code": error_code, "error_message": message,
            "display_message": None}


class AggregatorError(ApiError):
    """An error of the aggregator's API: its `error_type` and `error_code` (HTTP 400, as the
    aggregator answers item and input errors). `code` (the journal's) follows from them."""

    status = 400
    error_type = "INVALID_INPUT"
    error_code = "INVALID_INPUT"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.code = cls.error_code.lower().replace("_", "-")

    def aggregator_error(self) -> dict[str, Any]:
        """The error as the aggregator reports it (error_object)."""
        return error_object(self.error_type, self.error_code, self.message)


def _coded(error_code: str, error_type: str = "INVALID_INPUT") -> type[AggregatorError]:
    """The AggregatorError of `error_code` (of `error_type`), named after its code:
    INVALID_PUBLIC_TOKEN is InvalidPublicToken (as ApiError.coded names the sandbox's)."""
    return type(error_code.title().replace("_", ""), (AggregatorError,),
                {"error_type": error_type, "error_code": error_code, "__module__": __name__})


InvalidPublicToken = _coded("INVALID_PUBLIC_TOKEN")
InvalidAccessToken = _coded("INVALID_ACCESS_TOKEN")
InvalidAccountId = _coded("INVALID_ACCOUNT_ID")
ItemLoginRequired = _coded("ITEM_LOGIN_REQUIRED", "ITEM_ERROR")
# The item lacks the product asked for (the pipeline's aggregator-error says the same of an
# item linked for `auth` only).
ProductsNotSupported = _coded("PRODUCTS_NOT_SUPPORTED", "ITEM_ERROR")
InvalidInstitution = _coded("INVALID_INSTITUTION")
InvalidField = _coded("INVALID_FIELD", "INVALID_REQUEST")
InvalidWebhookVerificationKeyId = _coded("INVALID_WEBHOOK_VERIFICATION_KEY_ID")
SandboxWebhookInvalid = _coded("SANDBOX_WEBHOOK_INVALID", "SANDBOX_ERROR")
SandboxProductNotEnabled = _coded("SANDBOX_PRODUCT_NOT_ENABLED", "SANDBOX_ERROR")


# -- records ----------------------------------------------------------------------------------

class Account(Stored):
    """One account of an item, with its balances (the aggregator's AccountBase)."""

    account_id: str
    name: str
    official_name: str
    mask: str
    type: str
    subtype: str
    available: Amount
    current: Amount

    def record(self) -> dict[str, Any]:
        return {"account_id": self.account_id, "name": self.name,
                "official_name": self.official_name, "mask": self.mask, "type": self.type,
                "subtype": self.subtype,
                "balances": {"available": self.available, "current": self.current,
                             "limit": None, "iso_currency_code": "USD",
                             "unofficial_currency_code": None}}


class Item(Stored):
    """A user's login at an institution, as the aggregator keeps it: the products its link
    asked for, its accounts, and its tokens (the public token until it is exchanged, then
    the access token)."""

    item_id: str
    institution_id: str
    products: list[str]
    days_requested: DaysRequested
    webhook: str | None
    accounts: list[Account]
    created_at: Time
    public_token: str | None
    public_token_expires_at: Time
    access_token: str | None = None
    login_required: bool = False   # /sandbox/item/reset_login: the user must log in again

    def record(self) -> dict[str, Any]:
        """The aggregator's Item object (/accounts/get, /item/get): its `error` is the one
        its calls answer, ITEM_LOGIN_REQUIRED once its login was reset."""
        institution = INSTITUTIONS.get(self.institution_id)
        error = None
        if self.login_required:
            error = {**ItemLoginRequired(LOGIN_REQUIRED).aggregator_error(),
                     "status": ItemLoginRequired.status}
        return {"item_id": self.item_id, "institution_id": self.institution_id,
                "institution_name": institution.name if institution else None,
                "webhook": self.webhook, "error": error,
                "available_products": [], "billed_products": list(self.products),
                "products": list(self.products), "consented_products": list(self.products),
                "consent_expiration_time": None, "update_type": "background"}


# The two accounts every sandbox item has, as the aggregator's sandbox institutions give.
_ACCOUNTS = (("Checking", "Standard Checking", "0000", "checking", (50, 5000)),
             ("Saving", "Silver Standard 0.1% Interest Saving", "1111", "savings", (200, 20000)))


# -- institutions and cursors ------------------------------------------------------------------

def institution(institution_id: str) -> Institution:
    """A sandbox institution (aggregator_data.INSTITUTIONS), or the aggregator's error."""
    found = INSTITUTIONS.get(institution_id)
    if found is None:
        raise InvalidInstitution(UNKNOWN_INSTITUTION.format(institution_id=institution_id))
    return found


def option(request: Any, name: str, default: Any = None) -> Any:
    """`request.options.<name>`, or `default` where the request leaves it (or its options) out."""
    options = given(request.options)
    return default if options is None else given(getattr(options, name), default)


def _cursor(item: Item, account_id: str | None, offset: int) -> str:
    """An opaque cursor, as the aggregator's are: the item, the account asked for, and how
    far into their history the reader is."""
    text = f"{item.item_id}:{account_id or ''}:{offset}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _cursor_offset(cursor: str, item: Item, account_id: str | None, total: int) -> int:
    """Where a cursor `_cursor` made for this item and account left off (none: the start);
    any other is the aggregator's INVALID_FIELD."""
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        item_id, account, offset = text.rsplit(":", 2)
        if (item_id, account or None) == (item.item_id, account_id) and 0 <= int(offset) <= total:
            return int(offset)
    except (ValueError, UnicodeDecodeError, binascii.Error):
        pass
    raise InvalidField(BAD_CURSOR)


# -- the aggregator's webhooks ----------------------------------------------------------------

# Each webhook /sandbox/item/fire_webhook fires: its webhook_type, and the product the item
# needs for it (None: any item). DEFAULT_UPDATE goes with any of DEFAULT_UPDATE_TYPES.
FIRED = {"DEFAULT_UPDATE": ("TRANSACTIONS", TRANSACTIONS),
         "SYNC_UPDATES_AVAILABLE": ("TRANSACTIONS", TRANSACTIONS),
         "RECURRING_TRANSACTIONS_UPDATE": ("TRANSACTIONS", TRANSACTIONS),
         "NEW_ACCOUNTS_AVAILABLE": ("ITEM", None), "LOGIN_REPAIRED": ("ITEM", None),
         "PENDING_DISCONNECT": ("ITEM", None), "USER_PERMISSION_REVOKED": ("ITEM", None),
         "USER_ACCOUNT_REVOKED": ("ITEM", None)}
DEFAULT_UPDATE_TYPES = {"TRANSACTIONS": TRANSACTIONS, "AUTH": "auth", "IDENTITY": "identity",
                        "INVESTMENTS_TRANSACTIONS": "investments", "HOLDINGS": "investments",
                        "LIABILITIES": "liabilities"}
# What DEFAULT_UPDATE says of a product other than transactions (nothing changed here).
DEFAULT_UPDATE_FIELDS: dict[str, dict[str, Any]] = {
    "AUTH": {"account_ids_with_new_auth": [], "account_ids_with_updated_auth": {}},
    "IDENTITY": {"account_ids_with_updated_identity": {}},
    "INVESTMENTS_TRANSACTIONS": {"new_investments_transactions": 0,
                                 "canceled_investments_transactions": 0},
    "HOLDINGS": {"new_holdings": 0, "updated_holdings": 0},
    "LIABILITIES": {"account_ids_with_new_liabilities": [],
                    "account_ids_with_updated_liabilities": {}}}
# The codes the aggregator's endpoint takes for products the sandbox's items never have.
NOT_FIRED = {"SMS_MICRODEPOSITS_VERIFICATION": "same-day micro-deposits (AUTH)",
             "AUTHORIZATION_GRANTED": "income verification (INCOME)",
             "PRODUCT_READY": "asset reports (ASSETS)", "ERROR": "asset reports (ASSETS)"}
WEBHOOK_CODES = (*FIRED, *NOT_FIRED)
WEBHOOK_TYPES = ("AUTH", "HOLDINGS", "INVESTMENTS_TRANSACTIONS", "ITEM", "LIABILITIES",
                 "TRANSACTIONS", "ASSETS", "IDENTITY", "INCOME")


class Aggregator:
    """The aggregator's side of one tenant (its own API under /aggregator-api/): the items
    its sandbox linked, with their accounts and tokens. The one writer of its state, given
    what it uses, not the tenant (`events`: the ledger of the webhooks it sent; `links`:
    the processor links, whose tokens its items mint)."""

    def __init__(self, *, ids: Any, clock: Clock, environment: str, rules: Any,
                 events: EventLog, emit_webhook: Callable[[str, str, dict[str, Any]], Any],
                 links: ProcessorLinks) -> None:
        self.ids, self.clock, self.environment, self.rules = ids, clock, environment, rules
        self.events, self.emit_webhook, self.links = events, emit_webhook, links
        self.items: dict[str, Item] = {}    # item id -> item
        self.tokens: dict[str, str] = {}    # a live public or access token -> its item id
        # The key pair that signs the aggregator's webhooks (facts 15): made on first use (a
        # tenant that never meets the aggregator pays nothing at start) and kept in the
        # tenant's snapshots (a snapshot without one keeps this one).
        self._webhook_key: WebhookKey | None = None

    @property
    def webhook_key(self) -> WebhookKey:
        if self._webhook_key is None:
            self._webhook_key = new_webhook_key(self.clock.timestamp())
        return self._webhook_key

    # -- the aggregator's API ---------------------------------------------------------------

    def _answer(self, **fields: Any) -> dict[str, Any]:
        """An answer of the aggregator's: its fields, then its `request_id`."""
        return {**fields, "request_id": self.ids.secret("")[:15]}

    def create_sandbox_public_token(self, request: dict[str, Any]) -> dict[str, Any]:
        """/sandbox/public_token/create: a linked item at `institution_id` (one of the
        sandbox's institutions) with `initial_products`, and the public token its link flow
        would return; `options.webhook` is the URL its webhooks go to."""
        institution(request.institution_id)
        transactions = option(request, "transactions")
        item_id = self.ids.secret("")
        rng = random.Random(f"{item_id}:balances")
        accounts = []
        for name, official, mask, subtype, (low, high) in _ACCOUNTS:
            current = round(rng.uniform(low, high), 2)
            accounts.append(Account(account_id=self.ids.secret(""), name=f"Sandbox {name}",
                                    official_name=f"Sandbox {official}", mask=mask,
                                    type="depository", subtype=subtype,
                                    available=round(current * rng.uniform(0.9, 1.0), 2),
                                    current=current))
        now = self.clock.timestamp()
        item = Item(item_id=item_id, institution_id=request.institution_id,
                    products=list(dict.fromkeys(request.initial_products)),
                    days_requested=transactions.days_requested if transactions
                    else DEFAULT_DAYS_REQUESTED,
                    webhook=option(request, "webhook") or None, accounts=accounts, created_at=now,
                    public_token=unguessable(f"public-{self.environment}-"),
                    public_token_expires_at=now + PUBLIC_TOKEN_LIFETIME)
        self.items[item.item_id] = item
        self.tokens[item.public_token] = item.item_id
        self.keep_items_bounded()
        return self._answer(public_token=item.public_token)

    def exchange_public_token(self, public_token: str) -> dict[str, Any]:
        """/item/public_token/exchange: the item's access token for its public token (once)."""
        item = self._token_item(public_token, "public", InvalidPublicToken, UNKNOWN_PUBLIC_TOKEN)
        if self.clock.timestamp() >= item.public_token_expires_at:
            raise InvalidPublicToken(EXPIRED_PUBLIC_TOKEN)
        del self.tokens[public_token]
        item.public_token = None
        item.access_token = unguessable(f"access-{self.environment}-")
        self.tokens[item.access_token] = item.item_id
        return self._answer(access_token=item.access_token, item_id=item.item_id)

    def get_accounts(self, request: Any) -> dict[str, Any]:
        """/accounts/get and /accounts/balance/get (the sandbox's balances do not move): the
        item's accounts (those of `options.account_ids` when given) and the item; an item
        whose login was reset answers ITEM_LOGIN_REQUIRED until it is relinked."""
        item = self._live_item(request.access_token)
        accounts = self._accounts(item, option(request, "account_ids"))
        return self._answer(accounts=[a.record() for a in accounts], item=item.record())

    def create_processor_token(self, request: dict[str, Any]) -> dict[str, Any]:
        """/processor/token/create: a processor token for one account of the item, for the
        processor named (the service's key at the aggregator). The token carries the item,
        its products and days_requested to the service's pipeline."""
        item = self.item_of(request.access_token)
        account = self._accounts(item, [request.account_id])[0]
        token = self.links.mint_token(ProcessorTokenRequest(days_requested=item.days_requested,
                                                            products=list(item.products)),
                                      item_id=item.item_id, account_id=account.account_id)
        return self._answer(processor_token=token.token)

    def remove_item(self, access_token: str) -> dict[str, Any]:
        """/item/remove: the item and its access token are gone; the processor tokens made from
        it are revoked (registering one is refused), and a link still to pull transactions
        through one fails with ITEM_NOT_FOUND (`pull_error`)."""
        item = self.item_of(access_token)
        self._forget(item)
        self.links.revoke_item_tokens(item.item_id)
        return self._answer()

    def reset_login(self, access_token: str) -> dict[str, Any]:
        """/sandbox/item/reset_login: the item needs its user to log in again; pulling
        transactions through its processor tokens fails with ITEM_LOGIN_REQUIRED from now on.
        A new item (a new link) is what recovers here."""
        item = self.item_of(access_token)
        item.login_required = True
        return self._answer(reset_login=True)

    def get_item(self, access_token: str) -> dict[str, Any]:
        """/item/get: the item, its `error` (ITEM_LOGIN_REQUIRED once its login was reset: the
        call itself succeeds, as the aggregator's does) and its status: when its transactions
        last updated, and the last webhook it fired."""
        item = self.item_of(access_token)
        last = self._last_webhook(item)
        last_webhook = None if last is None else {"sent_at": isoformat(last.time),
                                                  "code_sent": last.body["webhook_code"]}
        return self._answer(item=item.record(), status={
            "investments": None,
            "transactions": {"last_successful_update": isoformat(item.created_at),
                             "last_failed_update": None},
            "last_webhook": last_webhook})

    def create_link_token(self, request: dict[str, Any]) -> dict[str, Any]:
        """/link/token/create: a link token for the aggregator's link flow (4 hours). The
        sandbox has no link flow of its own (/sandbox/public_token/create stands in for it), so
        the token only answers; an `access_token` (update mode) must be one of the tenant's."""
        if given(request.access_token) is not None:
            self.item_of(request.access_token)
        return self._answer(link_token=unguessable(f"link-{self.environment}-"),
                            expiration=isoformat(self.clock.timestamp() + LINK_TOKEN_LIFETIME))

    def get_institution(self, request: dict[str, Any]) -> dict[str, Any]:
        """/institutions/get_by_id: one of the sandbox's institutions, in one of the countries
        asked for; its url, colour and logo, and its status, when the options ask."""
        found = institution(request.institution_id)
        if not set(request.country_codes) & set(found.country_codes):
            raise InvalidInstitution(OTHER_COUNTRY.format(
                institution_id=found.institution_id, codes=", ".join(request.country_codes)))
        status = (institution_status(isoformat(self.clock.timestamp() - 86_400))
                  if option(request, "include_status") else None)
        return self._answer(institution=found.record(
            optional_metadata=bool(option(request, "include_optional_metadata")), status=status))

    def sync_transactions(self, request: dict[str, Any]) -> dict[str, Any]:
        """/transactions/sync: the item's transactions (of `options.account_id` only, when
        given), `count` at a time, from where `cursor` left off (none: the start). The
        history is whole as soon as the item is linked (HISTORICAL_UPDATE_COMPLETE) and does
        not grow, so once a cursor has reached its end the answer is empty, with that cursor
        again. They are the transactions the service's pipeline pulls through a processor
        token of the item (pulled_transactions)."""
        item = self._live_item(request.access_token, transactions=True)
        account_id = option(request, "account_id")
        accounts = self._accounts(item, None if account_id is None else [account_id])
        history = [t for t in item_history(item, self.rules.catalog)
                   if account_id is None or t["account_id"] == account_id]
        start = _cursor_offset(given(request.cursor) or "", item, account_id, len(history))
        end = min(len(history), start + request.count)
        return self._answer(transactions_update_status="HISTORICAL_UPDATE_COMPLETE",
                            accounts=[a.record() for a in accounts],
                            added=[transaction_record(t) for t in history[start:end]],
                            modified=[], removed=[], next_cursor=_cursor(item, account_id, end),
                            has_more=end < len(history))

    def get_transactions(self, request: Any) -> dict[str, Any]:
        """/transactions/get (facts 16): a page of the item's transactions dated `start_date`
        to `end_date` (both included), newest first, and how many there are in all: the
        history /transactions/sync pages through and the service's pipeline pulls."""
        item = self._live_item(request.access_token, transactions=True)
        if request.start_date > request.end_date:
            raise InvalidField(DATES_REVERSED.format(start=request.start_date,
                                                     end=request.end_date))
        account_ids = option(request, "account_ids")
        accounts = self._accounts(item, account_ids)
        found = [t for t in item_history(item, self.rules.catalog)
                 if request.start_date <= t["date"] <= request.end_date
                 and (account_ids is None or t["account_id"] in account_ids)]
        found.reverse()  # newest first, as the aggregator answers
        offset, count = option(request, "offset", 0), option(request, "count", GET_COUNT)
        return self._answer(
            accounts=[a.record() for a in accounts],
            transactions=[transaction_record(t) for t in found[offset:offset + count]],
            total_transactions=len(found), item=item.record())

    def refresh_transactions(self, access_token: str) -> dict[str, Any]:
        """/transactions/refresh (facts 16): the item's webhook gets what the aggregator sends
        after a refresh, TRANSACTIONS / SYNC_UPDATES_AVAILABLE for a reader of
        /transactions/sync and DEFAULT_UPDATE for one of /transactions/get; both go, as the
        item's history does not say which it has. The history is whole and does not grow,
        so DEFAULT_UPDATE counts no new transaction. No webhook URL: nothing is sent."""
        item = self._live_item(access_token, transactions=True)
        if item.webhook:
            self._send_webhook(item, "TRANSACTIONS", "SYNC_UPDATES_AVAILABLE",
                               self._webhook_fields(item, "TRANSACTIONS",
                                                    "SYNC_UPDATES_AVAILABLE", None))
            self._send_webhook(item, "TRANSACTIONS", "DEFAULT_UPDATE",
                               {"error": None, "new_transactions": 0})
        return self._answer()

    def get_auth(self, request: Any) -> dict[str, Any]:
        """/auth/get: the accounts and their ACH numbers: the account number is 16 digits
        ending with the account's mask (/accounts/get), as the aggregator's sandbox numbers
        (1111222233330000) are; the routing number is the institution's. The item gains the
        `auth` product if its link did not ask for it, as the aggregator adds a product whose
        call an item gets."""
        answer = self.get_accounts(request)
        item = self.item_of(request.access_token)
        if "auth" not in item.products:
            item.products.append("auth")
            answer["item"] = item.record()
        routing = institution(item.institution_id).routing_numbers[0]
        answer["numbers"] = {
            "ach": [{"account_id": a.account_id, "account": f"111122223333{a.mask}",
                     "routing": routing, "wire_routing": routing,
                     "is_tokenized_account_number": False, "can_transfer_in": None,
                     "can_transfer_out": None}
                    for a in self._accounts(item, option(request, "account_ids"))],
            "eft": [], "international": [], "bacs": []}
        return answer

    def get_verification_key(self, key_id: str) -> dict[str, Any]:
        """/webhook_verification_key/get (facts 15): the public key, as a JWK, whose id is
        the `kid` of a webhook's Plaid-Verification JWT; any other id is refused."""
        if key_id != self.webhook_key.kid:
            raise InvalidWebhookVerificationKeyId(UNKNOWN_KEY.format(key_id=key_id))
        return self._answer(key=public_jwk(self.webhook_key))

    def verification_header(self, body: bytes, issued_at: int) -> dict[str, str]:
        """The Plaid-Verification header of one attempt of a webhook of the aggregator's
        (the outbox's plain_signer)."""
        return verification_header(self.webhook_key, body, issued_at)

    @staticmethod
    def _accounts(item: Item, account_ids: list[str] | None) -> list[Account]:
        """The item's accounts, those of `account_ids` when given: every id asked for is the
        item's, else INVALID_ACCOUNT_ID."""
        known = {account.account_id for account in item.accounts}
        for account_id in account_ids or ():
            if account_id not in known:
                raise InvalidAccountId(UNKNOWN_ACCOUNT.format(account_id=account_id))
        return [a for a in item.accounts if account_ids is None or a.account_id in account_ids]

    def _live_item(self, access_token: str, *, transactions: bool = False) -> Item:
        """The item of an access token whose accounts (and `transactions`) can be read: as the
        pipeline's pull, not once its login was reset, nor when it was linked without them."""
        item = self.item_of(access_token)
        if item.login_required:
            raise ItemLoginRequired(LOGIN_REQUIRED)
        if transactions and TRANSACTIONS not in item.products:
            raise ProductsNotSupported(NO_TRANSACTIONS)
        return item

    def fire_webhook(self, request: dict[str, Any]) -> dict[str, Any]:
        """/sandbox/item/fire_webhook: the aggregator's webhook `webhook_code` (of
        `webhook_type`, by default the code's own) goes to the item's webhook URL, with the
        fields the aggregator sends for it. LOGIN_REPAIRED also repairs the item (a reset
        login no longer fails its calls or the service's pull)."""
        item = self.item_of(request.access_token)
        code = request.webhook_code
        if code in NOT_FIRED:
            raise SandboxProductNotEnabled(NOT_SERVED.format(code=code, what=NOT_FIRED[code],
                                                             fired=", ".join(FIRED)))
        webhook_type, product = FIRED[code]
        asked = given(request.webhook_type)
        if code == "DEFAULT_UPDATE" and asked is not None:
            if asked not in DEFAULT_UPDATE_TYPES:
                raise InvalidField(WRONG_WEBHOOK_TYPE.format(
                    code=code, given=asked, type=" or ".join(DEFAULT_UPDATE_TYPES)))
            webhook_type, product = asked, DEFAULT_UPDATE_TYPES[asked]
        elif asked is not None and asked != webhook_type:
            raise InvalidField(WRONG_WEBHOOK_TYPE.format(code=code, given=asked, type=webhook_type))
        if product is not None and product not in item.products:
            raise SandboxProductNotEnabled(PRODUCT_NOT_ENABLED.format(
                product=product, products=", ".join(item.products), type=webhook_type, code=code))
        if not item.webhook:
            raise SandboxWebhookInvalid(NO_WEBHOOK)
        fields = self._webhook_fields(item, webhook_type, code, request)
        if code == "LOGIN_REPAIRED":
            item.login_required = False
        self._send_webhook(item, webhook_type, code, fields)
        return self._answer(webhook_fired=True)

    def update_webhook(self, access_token: str, webhook: str | None) -> dict[str, Any]:
        """/item/webhook/update: the item's webhooks go to `webhook` from now on (none: no
        webhooks); the new URL gets the aggregator's WEBHOOK_UPDATE_ACKNOWLEDGED."""
        item = self.item_of(access_token)
        item.webhook = webhook or None
        if item.webhook is not None:
            self._send_webhook(item, "ITEM", "WEBHOOK_UPDATE_ACKNOWLEDGED",
                               {"error": None, "new_webhook_url": item.webhook})
        return self._answer(item=item.record())

    def _webhook_fields(self, item: Item, webhook_type: str, code: str,
                        request: Any) -> dict[str, Any]:
        """What the aggregator's webhook says beyond its type, code, item and environment
        (`request`: /sandbox/item/fire_webhook's, whose options may say more)."""
        account_ids = [a.account_id for a in item.accounts]
        if code == "DEFAULT_UPDATE" and webhook_type == "TRANSACTIONS":
            asked = option(request, "new_transactions")
            return {"error": None, "new_transactions": asked if asked is not None
                    else len(item_history(item, self.rules.catalog))}
        if code == "DEFAULT_UPDATE":
            return {"error": None, **DEFAULT_UPDATE_FIELDS[webhook_type]}
        if code == "SYNC_UPDATES_AVAILABLE":
            return {"initial_update_complete": True, "historical_update_complete": True}
        if code == "RECURRING_TRANSACTIONS_UPDATE":
            return {"account_ids": account_ids}
        if code == "PENDING_DISCONNECT":
            return {"reason": "INSTITUTION_MIGRATION"}
        if code == "USER_PERMISSION_REVOKED":
            return {"error": error_object("ITEM_ERROR", code, USER_PERMISSION_REVOKED)}
        if code == "USER_ACCOUNT_REVOKED":
            return {"account_id": account_ids[0]}
        return {"error": None} if code == "NEW_ACCOUNTS_AVAILABLE" else {}

    def _send_webhook(self, item: Item, webhook_type: str, code: str,
                      fields: dict[str, Any]) -> None:
        """The webhook in the tenant's ledger (eventType `<webhook_type>.<webhook_code>`), to
        the item's URL: the outbox delivers it as every delivery, its attempts on the ledger."""
        body = {"webhook_type": webhook_type, "webhook_code": code, "item_id": item.item_id,
                **fields, "environment": self.environment}
        self.emit_webhook(item.webhook, f"{webhook_type}.{code}", body)

    def _last_webhook(self, item: Item) -> Any:
        """The latest webhook of the item still in the ledger (None: none)."""
        return next((event for event in reversed(self.events.by_id.values())
                     if event.url is not None and event.body.get("item_id") == item.item_id), None)

    def pulled_transactions(self, item_id: str, account_id: str) -> list[dict[str, Any]]:
        """What the service pulls through a processor token of an item (`pull_error` said it
        may): the account's transactions of the item's history, the ones /transactions/sync
        answers for it."""
        item = self.items[item_id]
        return [t for t in item_history(item, self.rules.catalog) if t["account_id"] == account_id]

    def pull_error(self, item_id: str | None) -> dict[str, str] | None:
        """What the aggregator answers when the service pulls transactions through a processor
        token of this item, as an aggregator-error event's data (`errorType`, `errorCode`,
        `errorMessage`); None when the pull succeeds (or the token came from the control
        plane's shortcut, which has no item)."""
        if item_id is None:
            return None
        item = self.items.get(item_id)
        if item is None:
            return {"errorType": "ITEM_ERROR", "errorCode": "ITEM_NOT_FOUND",
                    "errorMessage": ITEM_REMOVED}
        if item.login_required:
            return {"errorType": ItemLoginRequired.error_type,
                    "errorCode": ItemLoginRequired.error_code, "errorMessage": LOGIN_REQUIRED}
        return None

    def item_of(self, access_token: str) -> Item:
        """The item of an access token of this tenant (another tenant's is unknown here)."""
        return self._token_item(access_token, "access", InvalidAccessToken, UNKNOWN_ACCESS_TOKEN)

    # -- snapshot (domain/stored.py): a section added later; a snapshot without it has no
    # items at the aggregator's API.

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({}, {"aggregatorItems": array(Item),
                             "aggregatorWebhookKey": schema(WebhookKey)}, bounds={
        "aggregatorItems": lambda limits: (limits.max_aggregator_items,
                                           "the aggregator's items bound")})

    def dump(self) -> dict[str, Any]:
        return {"aggregatorItems": [stored(item) for item in self.items.values()],
                "aggregatorWebhookKey": stored(self.webhook_key)}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        key = document.get("aggregatorWebhookKey")
        if key is not None:
            key = loaded(key, WebhookKey, "$.aggregatorWebhookKey")
            try:
                public_jwk(key)
            except ValueError:
                raise LoadError("$.aggregatorWebhookKey.privateKey",
                                "is no PEM-encoded P-256 private key") from None
        items = (unique(document, "aggregatorItems", Item, "item_id")
                 if "aggregatorItems" in document else {})
        return {"items": items, "webhook_key": key}

    def restore(self, items: dict[str, Item], webhook_key: WebhookKey | None = None) -> None:
        self.items = items
        self.tokens = {token: item.item_id for item in items.values()
                       for token in (item.public_token, item.access_token) if token is not None}
        if webhook_key is not None:
            self._webhook_key = webhook_key

    def keep_items_bounded(self) -> None:
        """Past the bound (Limits.max_aggregator_items), a tenth of it goes: first items whose
        public token expired unexchanged (nothing can reach them), then the oldest."""
        limit = self.rules.limits.max_aggregator_items
        items = self.items
        if len(items) <= limit:
            return
        keep = limit - max(1, limit // 10)
        now = self.clock.timestamp()

        def unreachable(item: Item) -> bool:
            return item.access_token is None and item.public_token_expires_at <= now

        # A stable sort: the unreachable first, each group oldest first (insertion order).
        for item in sorted(items.values(), key=lambda item: not unreachable(item))[:len(items) - keep]:
            self._forget(item)

    def _forget(self, item: Item) -> None:
        del self.items[item.item_id]
        for token in (item.public_token, item.access_token):
            self.tokens.pop(token, None)

    def _token_item(self, token: str, kind: str, error: type[AggregatorError],
                    unknown: str) -> Item:
        """The item whose live `kind` token (public, access) `token` is; a token of the other
        environment is named as such (the aggregator's own wording)."""
        for environment in ("sandbox", "production"):
            if token.startswith(f"{kind}-{environment}-") and environment != self.environment:
                raise error(OTHER_ENVIRONMENT.format(kind=kind, theirs=environment,
                                                     ours=self.environment))
        if not token.startswith(f"{kind}-"):
            raise error(f"provided {kind} token is in an invalid format. "
                        + EXPECTED_FORMAT.format(kind=kind))
        item = self.items.get(self.tokens.get(token, ""))
        if item is None or getattr(item, f"{kind}_token") != token:
            raise error(unknown)
        return item
