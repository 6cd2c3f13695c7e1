"""The aggregator's own API under /aggregator-api/: the part of it the customer's
processor-token flow uses (DESIGN.md, The aggregator's own API; real-service facts 10).

In the aggregator's conventions, so that its official client, configured with
`host=<sandbox>/aggregator-api` and the tenant's API key and secret as its client id and
secret, runs unchanged: snake_case bodies, answers as they are (no `{"data": ...}`) with a
`request_id`, and errors in its error body `{error_type, error_code, error_message,
display_message, request_id}` with HTTP 400, every path under the prefix included (an
unknown one is its 404 NOT_FOUND, another method than POST a 405). The client id and
secret come in the headers the client sends (PLAID-CLIENT-ID, PLAID-SECRET) or in the body
(`client_id`, `secret`): Auth.AGGREGATOR in the pipeline. The path prefix is fixed by
DESIGN.md; the service profile's aggregator name appears only where the spec writes its
placeholder (the processor-link paths and the `<aggregator>-error` event).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from ...domain.links import aggregator
from ...domain.links.aggregator import error_object
from ...errors import (ApiError, Forbidden, MethodNotAllowed, MissingCredentials, RouteNotFound,
                      Unauthorized, ValidationFailed)
from ...domain.shapes import given, schema_of
from ...schemas import aggregator as shapes
from ...validate import UNKNOWN_FIELD, check_webhook_urls
from ..operations import AGGREGATOR, Auth, Dialect, operation
from ..examples import RECEIVER, USER, Example, From

PREFIX = "/aggregator-api"
TAGS = ("aggregator",)

MISSING_FIELDS = "the following required fields are missing: {fields}"
UNKNOWN_FIELDS = "the following fields are not recognized by this endpoint: {fields}"
INVALID_API_KEYS = "invalid client_id or secret provided"
NOT_FOUND = "not found: {why}"
ONLY_POST = "{why} (every endpoint of the aggregator's API takes POST only)"
_REQUIRED = re.compile(r"^'(.+)' is a required property$")


# -- the aggregator's error body --------------------------------------------------------------

def render_error(error: ApiError, status: int) -> tuple[int, dict[str, Any]]:
    """Any error of a path here as the aggregator's error body: its own errors as they
    are, the pipeline's (credentials, malformed or invalid bodies) in its terms, all with
    HTTP 400 but for a path it does not have (404, NOT_FOUND as the aggregator answers it),
    another method than POST (405 with Allow: the aggregator publishes no answer for it),
    limits (429), refusals of the sandbox itself (403) and its failures."""
    if isinstance(error, RouteNotFound):
        fields = error_object("INVALID_REQUEST", "NOT_FOUND", NOT_FOUND.format(why=_clause(error)))
    elif isinstance(error, MethodNotAllowed):
        fields = error_object("INVALID_REQUEST", "METHOD_NOT_ALLOWED",
                               ONLY_POST.format(why=_clause(error)))
    elif isinstance(error, aggregator.AggregatorError):
        fields = error.aggregator_error()
    elif isinstance(error, MissingCredentials):
        fields = error_object("INVALID_REQUEST", "MISSING_FIELDS",
                               MISSING_FIELDS.format(fields="client_id, secret"))
    elif isinstance(error, Unauthorized):  # a wrong key or secret, or the other environment's
        message = error.message if error.code == "wrong-environment" else INVALID_API_KEYS
        fields = error_object("INVALID_INPUT", "INVALID_API_KEYS", message)
    elif isinstance(error, ValidationFailed):
        fields = _invalid_body(error)
    elif status == 429:
        fields = error_object("RATE_LIMIT_EXCEEDED", "RATE_LIMIT", error.message)
    elif status >= 500:
        fields = error_object("API_ERROR", "INTERNAL_SERVER_ERROR", error.message)
    else:  # malformed JSON, an undecodable or too large body, a body that came too slowly
        fields = error_object("INVALID_REQUEST", "INVALID_BODY", error.message)
    if not (status == 429 or status >= 500 or isinstance(
            error, (Forbidden, RouteNotFound, MethodNotAllowed))):
        status = 400
    return status, {**fields, "request_id": uuid.uuid4().hex[:15]}


def _clause(error: ApiError) -> str:
    """The sandbox's sentence as a clause of the aggregator's lower-case messages."""
    message = error.message.rstrip(".")
    return message[:1].lower() + message[1:] if message[1:2].islower() else message


def _invalid_body(error: ApiError) -> dict[str, Any]:
    """A body its schema refuses: the required fields it lacks (MISSING_FIELDS), fields it
    does not know (UNKNOWN_FIELDS), or what is wrong with the others (INVALID_FIELD), named
    by their dotted paths."""
    missing, unknown, invalid = [], [], []
    for detail in error.details:
        path = detail.get("path", "$").removeprefix("$").lstrip(".")
        message = detail.get("message", "")
        found = _REQUIRED.match(message)
        if found:
            missing.append(f"{path}.{found[1]}" if path else found[1])
        elif message == UNKNOWN_FIELD:
            unknown.append(path)
        else:
            invalid.append(f"{path or 'body'}: {message}")
    if missing:
        return error_object("INVALID_REQUEST", "MISSING_FIELDS",
                             MISSING_FIELDS.format(fields=", ".join(missing)))
    if unknown:
        return error_object("INVALID_REQUEST", "UNKNOWN_FIELDS",
                             UNKNOWN_FIELDS.format(fields=", ".join(unknown)))
    return error_object("INVALID_REQUEST", "INVALID_FIELD", "; ".join(invalid) or error.message)


AGGREGATOR_API = Dialect(
    render_error=render_error, error_schema=schema_of(shapes.Error), prefix=PREFIX,
    errors={400: "The aggregator's error body, as it answers: MISSING_FIELDS, UNKNOWN_FIELDS "
                 "or INVALID_FIELD (INVALID_REQUEST) for a body its schema refuses, "
                 "INVALID_API_KEYS (INVALID_INPUT) for a wrong client id or secret, "
                 "INVALID_PUBLIC_TOKEN, INVALID_ACCESS_TOKEN, INVALID_ACCOUNT_ID, "
                 "INVALID_INSTITUTION or INVALID_WEBHOOK_VERIFICATION_KEY_ID (INVALID_INPUT), "
                 "ITEM_LOGIN_REQUIRED or PRODUCTS_NOT_SUPPORTED (ITEM_ERROR), "
                 "SANDBOX_WEBHOOK_INVALID or SANDBOX_PRODUCT_NOT_ENABLED (SANDBOX_ERROR)."})


def _declare(path: str, summary: str, **declared: Any):
    return operation("POST", f"{PREFIX}{path}", summary, auth=Auth.AGGREGATOR,
                     dialect=AGGREGATOR_API, tags=TAGS, **declared)


# The examples' item (/docs): the access token /item/public_token/exchange's example answers.
_ACCESS_TOKEN = {"access_token": "access-sandbox-9f0c7d0e-3c4b-4f1e-9a51-2d6f0c1b7a42"}
_AFTER_EXCHANGE = From("POST", f"{PREFIX}/item/public_token/exchange",
                       fields={"/access_token": "$response.body#/access_token"})
_ITEM = Example(_ACCESS_TOKEN, after=_AFTER_EXCHANGE)


# -- the operations ---------------------------------------------------------------------------

@_declare("/sandbox/public_token/create", "Create a public token for a sandbox item",
          body=shapes.PublicTokenCreate,
          example=Example({"institution_id": "ins_109508", "initial_products": ["transactions"]}))
async def sandbox_public_token_create(tenant, body, sandbox) -> shapes.PublicTokenCreated:
    """What the aggregator's link flow returns, without the flow: a new item at one of the
    sandbox's institutions with the products asked for (`options.transactions.days_requested`
    sets how much history the service gets, default 90; `options.webhook` where the item's
    webhooks go)."""
    _check_webhook(aggregator.option(body, "webhook"), "$.options.webhook", sandbox)
    return tenant.aggregator.create_sandbox_public_token(body)


@_declare("/item/public_token/exchange", "Exchange a public token for an access token",
          body=shapes.PublicTokenExchange,
          example=Example(
              {"public_token": "public-sandbox-5c4e6f2a-7d1b-4e8a-9c3f-1a2b3c4d5e6f"},
              after=From("POST", f"{PREFIX}/sandbox/public_token/create",
                         fields={"/public_token": "$response.body#/public_token"})))
async def item_public_token_exchange(tenant, body) -> shapes.PublicTokenExchanged:
    """The spec's step 2 at the aggregator: the access token stays on the customer's server."""
    return tenant.aggregator.exchange_public_token(body.public_token)


@_declare("/accounts/get", "An item's accounts", body=shapes.AccountsGet, example=_ITEM)
async def accounts_get(tenant, body) -> shapes.Accounts:
    """The accounts to choose one from for the processor token; ITEM_LOGIN_REQUIRED after
    /sandbox/item/reset_login."""
    return tenant.aggregator.get_accounts(body)


@_declare("/processor/token/create", "Create a processor token for the service",
          body=shapes.ProcessorTokenCreate,
          example=Example(
              {**_ACCESS_TOKEN, "account_id": "vzeNDwK7KQIm4yEog683uElbp9GRLEFXGK98D",
               "processor": "example"},
              after=From("POST", f"{PREFIX}/accounts/get", fields={
                  "/access_token": "$request.body#/access_token",
                  "/account_id": "$response.body#/accounts/0/account_id"})))
async def processor_token_create(tenant, body, sandbox) -> shapes.ProcessorTokenCreated:
    """The spec's step 3: `processor-<environment>-<uuid>`, which POST
    /<aggregator>/processor-links takes (step 4)."""
    return tenant.aggregator.create_processor_token(body)


@_declare("/item/remove", "Remove an item", body=shapes.ItemRemove, example=_ITEM)
async def item_remove(tenant, body) -> shapes.Answer:
    """The access token stops working; processor tokens of the item are revoked."""
    return tenant.aggregator.remove_item(body.access_token)


@_declare("/sandbox/item/reset_login", "Make a sandbox item need its user to log in again",
          body=shapes.ItemRequest, example=_ITEM)
async def sandbox_item_reset_login(tenant, body) -> shapes.LoginReset:
    """Processing of the item's processor links then ends in `<aggregator>-error` with
    ITEM_ERROR / ITEM_LOGIN_REQUIRED when it pulls transactions; a new item recovers."""
    return tenant.aggregator.reset_login(body.access_token)


@_declare("/item/get", "An item and its status", body=shapes.ItemRequest, example=_ITEM)
async def item_get(tenant, body) -> shapes.ItemWithStatus:
    """The item: its products, webhook URL and `error` (ITEM_LOGIN_REQUIRED after
    /sandbox/item/reset_login, which this call reports rather than refuses), and when its
    transactions last updated and which webhook it last fired."""
    return tenant.aggregator.get_item(body.access_token)


@_declare("/item/webhook/update", "Change where an item's webhooks go",
          body=shapes.ItemWebhookUpdate, settles=True,
          example=Example({**_ACCESS_TOKEN, "webhook": RECEIVER}, after=_AFTER_EXCHANGE))
async def item_webhook_update(tenant, body, sandbox) -> shapes.ItemAnswer:
    """The item's webhooks go to `webhook` from now on; the aggregator's
    WEBHOOK_UPDATE_ACKNOWLEDGED goes there first (answered once its first attempt is)."""
    _check_webhook(given(body.webhook), "$.webhook", sandbox)
    return tenant.aggregator.update_webhook(body.access_token, given(body.webhook))


@_declare("/link/token/create", "Create a link token", body=shapes.LinkTokenCreate,
          example=Example(
              {"client_name": "Your app", "language": "en", "country_codes": ["US"],
               "user": {"client_user_id": USER}, "products": ["transactions"]}))
async def link_token_create(tenant, body, sandbox) -> shapes.LinkTokenCreated:
    """`link-<environment>-<uuid>`, for 4 hours, as the customer's server makes one before
    opening the aggregator's link flow. The sandbox has no link flow:
    /sandbox/public_token/create stands in for it. `access_token` (update mode) must be
    an item's, `webhook` a URL the sandbox may send to."""
    _check_webhook(given(body.webhook), "$.webhook", sandbox)
    return tenant.aggregator.create_link_token(body)


@_declare("/institutions/get_by_id", "An institution", body=shapes.InstitutionsGetById,
          example=Example(
              {"institution_id": "ins_109508", "country_codes": ["US"],
               "options": {"include_optional_metadata": True}}))
async def institutions_get_by_id(tenant, body) -> shapes.InstitutionAnswer:
    """One of the sandbox's institutions (First Platypus Bank, ins_109508, and its
    siblings up to ins_109512; Platypus OAuth Bank, ins_127287), in a country asked for;
    `options.include_optional_metadata` adds its url, colour and logo,
    `options.include_status` its health. Another id is INVALID_INSTITUTION."""
    return tenant.aggregator.get_institution(body)


@_declare("/transactions/sync", "An item's transactions, page by page",
          body=shapes.TransactionsSync,
          example=Example({**_ACCESS_TOKEN, "count": 100}, after=_AFTER_EXCHANGE))
async def transactions_sync(tenant, body) -> shapes.TransactionsPage:
    """The item's transactions from `cursor` on, `count` at a time (100 by default), of
    `options.account_id` only when given: the `days_requested` days up to the day the item
    was linked, complete from the start. They are the transactions the service's pipeline
    pulls through a processor token of the item, so its employer matches and recurring
    transactions are made of these. ITEM_LOGIN_REQUIRED after a reset login;
    PRODUCTS_NOT_SUPPORTED for an item linked without `transactions`."""
    return tenant.aggregator.sync_transactions(body)


@_declare("/transactions/get", "An item's transactions between two dates",
          body=shapes.TransactionsGet,
          example=Example(
              {**_ACCESS_TOKEN, "start_date": "2026-01-01", "end_date": "2026-12-31",
               "options": {"count": 50, "offset": 0}}, after=_AFTER_EXCHANGE))
async def transactions_get(tenant, body) -> shapes.TransactionsGot:
    """The item's transactions dated `start_date` to `end_date` (both included), newest
    first, `options.count` (100 by default, at most 500) from `options.offset`, of
    `options.account_ids` only when given; `total_transactions` counts them all. The same
    history /transactions/sync pages through and the service's pipeline pulls (real-service
    facts 16). ITEM_LOGIN_REQUIRED after a reset login; PRODUCTS_NOT_SUPPORTED for an item
    linked without `transactions`; INVALID_FIELD when `start_date` is after `end_date`."""
    return tenant.aggregator.get_transactions(body)


@_declare("/transactions/refresh", "Ask for an item's newest transactions",
          body=shapes.ItemRequest, settles=True, example=_ITEM)
async def transactions_refresh(tenant, body) -> shapes.Answer:
    """The item's webhook URL then gets TRANSACTIONS / SYNC_UPDATES_AVAILABLE and
    DEFAULT_UPDATE (`new_transactions` 0: the sandbox's history is whole from the link on),
    as the aggregator sends after a refresh (real-service facts 16); answered once their
    first attempts are. Nothing is sent for an item without a webhook URL."""
    return tenant.aggregator.refresh_transactions(body.access_token)


@_declare("/accounts/balance/get", "An item's accounts with their current balances",
          body=shapes.BalanceGet, example=_ITEM)
async def accounts_balance_get(tenant, body) -> shapes.Accounts:
    """The item's accounts (of `options.account_ids` when given) with their balances, as
    /accounts/get gives them; ITEM_LOGIN_REQUIRED after a reset login."""
    return tenant.aggregator.get_accounts(body)


@_declare("/auth/get", "An item's accounts with their account and routing numbers",
          body=shapes.AccountsGet, example=_ITEM)
async def auth_get(tenant, body) -> shapes.AuthAnswer:
    """The item's accounts and their ACH numbers (`numbers.ach`): the account number ends
    with the account's mask, the routing number is the institution's; what a user gives as
    a deposit account in the payroll flow. ITEM_LOGIN_REQUIRED after a reset login."""
    return tenant.aggregator.get_auth(body)


@_declare("/webhook_verification_key/get", "The public key that verifies the aggregator's webhooks",
          body=shapes.VerificationKeyGet,
          example=Example(
              {"key_id": "6c5516e1-92dc-479e-a8ff-5a51992e0001"},
              after=From("GET", f"/_sandbox/{AGGREGATOR}/webhook-verification-key",
                         fields={"/key_id": "$response.body#/data/keyId"})))
async def webhook_verification_key_get(tenant, body) -> shapes.VerificationKey:
    """The JWK (ES256, P-256) whose id is the `kid` in the header of a webhook's
    Plaid-Verification JWT (real-service facts 15). Every webhook of the aggregator carries
    one, signed for its attempt: `iat` and `request_body_sha256`, the SHA-256 hex of the raw
    body. Another key id: INVALID_INPUT / INVALID_WEBHOOK_VERIFICATION_KEY_ID."""
    return tenant.aggregator.get_verification_key(body.key_id)


@_declare("/sandbox/item/fire_webhook", "Fire one of the aggregator's webhooks for an item",
          body=shapes.FireWebhook, settles=True,
          example=Example(
              {**_ACCESS_TOKEN, "webhook_code": "SYNC_UPDATES_AVAILABLE"},
              after=From("POST", f"{PREFIX}/item/webhook/update",
                         fields={"/access_token": "$request.body#/access_token"})))
async def sandbox_item_fire_webhook(tenant, body) -> shapes.WebhookFired:
    """The aggregator's webhook `webhook_code` goes to the item's webhook URL as the
    aggregator sends it: a JSON body `{webhook_type, webhook_code, item_id, ...,
    environment}` (SYNC_UPDATES_AVAILABLE, DEFAULT_UPDATE, RECURRING_TRANSACTIONS_UPDATE for
    an item with transactions; NEW_ACCOUNTS_AVAILABLE, LOGIN_REPAIRED, which also repairs a
    reset login, PENDING_DISCONNECT, USER_PERMISSION_REVOKED, USER_ACCOUNT_REVOKED for any).
    It is on the tenant's ledger (GET /_sandbox/events, eventType
    `<webhook_type>.<webhook_code>`) with its deliveries, retried as every delivery; the
    answer comes once its first attempt is answered. No webhook URL on the item:
    SANDBOX_WEBHOOK_INVALID."""
    return tenant.aggregator.fire_webhook(body)


def _check_webhook(url: str | None, path: str, sandbox) -> None:
    """A webhook URL the sandbox may send to (the outbound policy), as an endpoint's must
    be; none (or empty) is none. Refused: INVALID_FIELD naming the field at `path`."""
    if url:
        check_webhook_urls([(path, url)], sandbox.dispatcher.policy)
