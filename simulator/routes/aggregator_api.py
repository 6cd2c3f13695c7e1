"""The aggregator's own API under /aggregator-api/: the part of it the customer's
processor-token flow uses (DESIGN.md, The aggregator's own API; real-service facts 10).

In the aggregator's conventions, so that its official client, configured with
`host=<sandbox>/aggregator-api` and the tenant's API key and secret as its client id and
secret, runs unchanged: snake_case bodies, answers as they are (no `{"data": ...}`) with a
`request_id`, and errors in its error body `{error_type, error_code, error_message,
display_message, request_id}` with HTTP 400. The client id and secret come in the headers
the client sends (PLAID-CLIENT-ID, PLAID-SECRET) or in the body (`client_id`, `secret`):
Auth.AGGREGATOR in the pipeline. The path prefix is fixed by DESIGN.md; the service
profile's aggregator name appears only where the spec writes its placeholder (the
processor-link paths and the `<aggregator>-error` event).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from ..domain import aggregator
from ..errors import ApiError, Forbidden, MissingCredentials, Unauthorized, ValidationFailed
from ..schemas.api import NO_CONTROL_CHARACTER
from ..operations import Auth, Dialect, operation

PREFIX = "/aggregator-api"
TAGS = ("aggregator",)

MISSING_FIELDS = "the following required fields are missing: {fields}"
INVALID_API_KEYS = "invalid client_id or secret provided"
_REQUIRED = re.compile(r"^'(.+)' is a required property$")


# -- the aggregator's error body --------------------------------------------------------------

def render_error(error: ApiError, status: int) -> tuple[int, dict[str, Any]]:
    """Any error of an operation here as the aggregator's error body: its own errors as they
    are, the pipeline's (credentials, malformed or invalid bodies) in its terms, all with
    HTTP 400 but for limits (429), refusals of the sandbox itself (403) and its failures."""
    if isinstance(error, aggregator.AggregatorError):
        fields = error.aggregator_error()
    elif isinstance(error, MissingCredentials):
        fields = _fields("INVALID_REQUEST", "MISSING_FIELDS",
                         MISSING_FIELDS.format(fields="client_id, secret"))
    elif isinstance(error, Unauthorized):  # a wrong key or secret, or the other environment's
        message = error.message if error.code == "wrong-environment" else INVALID_API_KEYS
        fields = _fields("INVALID_INPUT", "INVALID_API_KEYS", message)
    elif isinstance(error, ValidationFailed):
        fields = _invalid_body(error)
    elif status == 429:
        fields = _fields("RATE_LIMIT_EXCEEDED", "RATE_LIMIT", error.message)
    elif status >= 500:
        fields = _fields("API_ERROR", "INTERNAL_SERVER_ERROR", error.message)
    else:  # malformed JSON, an undecodable or too large body, a body that came too slowly
        fields = _fields("INVALID_REQUEST", "INVALID_BODY", error.message)
    if not (status == 429 or status >= 500 or isinstance(error, Forbidden)):
        status = 400
    return status, {**fields, "request_id": uuid.uuid4().hex[:15]}


def _fields(error_type: str, error_code: str, message: str) -> dict[str, Any]:
    return {"error_type": error_type, "error_code": error_code, "error_message": message,
            "display_message": None}


def _invalid_body(error: ApiError) -> dict[str, Any]:
    """A body its schema refuses: the required fields it lacks (MISSING_FIELDS), or what is
    wrong with the others (INVALID_FIELD), named by their dotted paths."""
    missing, invalid = [], []
    for detail in error.details:
        path = detail.get("path", "$").removeprefix("$").lstrip(".")
        found = _REQUIRED.match(detail.get("message", ""))
        if found:
            missing.append(f"{path}.{found[1]}" if path else found[1])
        else:
            invalid.append(f"{path or 'body'}: {detail.get('message', '')}")
    if missing:
        return _fields("INVALID_REQUEST", "MISSING_FIELDS",
                       MISSING_FIELDS.format(fields=", ".join(missing)))
    return _fields("INVALID_REQUEST", "INVALID_FIELD", "; ".join(invalid) or error.message)


ERROR = {
    "type": "object",
    "required": ["error_type", "error_code", "error_message", "display_message", "request_id"],
    "properties": {
        "error_type": {"type": "string", "description": "e.g. INVALID_REQUEST, INVALID_INPUT, "
                                                        "ITEM_ERROR"},
        "error_code": {"type": "string",
                       "description": "e.g. MISSING_FIELDS, INVALID_API_KEYS, "
                                      "INVALID_ACCESS_TOKEN, ITEM_LOGIN_REQUIRED"},
        "error_message": {"type": "string"},
        "display_message": {"type": ["string", "null"]},
        "request_id": {"type": "string"},
    },
}

AGGREGATOR_API = Dialect(
    name="aggregator", render_error=render_error, error_schema=ERROR,
    errors={400: "The aggregator's error body, as it answers: MISSING_FIELDS or INVALID_FIELD "
                 "(INVALID_REQUEST) for a body its schema refuses, INVALID_API_KEYS "
                 "(INVALID_INPUT) for a wrong client id or secret, INVALID_PUBLIC_TOKEN, "
                 "INVALID_ACCESS_TOKEN or INVALID_ACCOUNT_ID (INVALID_INPUT), "
                 "ITEM_LOGIN_REQUIRED (ITEM_ERROR)."})


# -- request and answer shapes ----------------------------------------------------------------

_TEXT = {"type": "string", "minLength": 1, "maxLength": 512, "pattern": NO_CONTROL_CHARACTER}
_CREDENTIALS = {
    "client_id": {**_TEXT,
                  "description": "The tenant's API key (else the PLAID-CLIENT-ID header)."},
    "secret": {**_TEXT, "description": "The tenant's API secret (else the PLAID-SECRET header)."},
}
_ACCESS_TOKEN = {**_TEXT, "description": "An access token of /item/public_token/exchange."}


def _request(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": list(required),
            "properties": {**required, **(optional or {}), **_CREDENTIALS}}


def _answer(**properties: Any) -> dict[str, Any]:
    properties["request_id"] = {"type": "string"}
    return {"type": "object", "required": list(properties), "properties": properties}


PUBLIC_TOKEN_CREATE = _request({
    "institution_id": {**_TEXT, "description": "A sandbox institution, e.g. ins_109508."},
    "initial_products": {"type": "array", "minItems": 1, "maxItems": 50,
                         "items": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$"},
                         "description": "The products the link asks for: `transactions` is "
                                        "what the service needs (only `auth`: its pipeline "
                                        "fails with PRODUCTS_NOT_SUPPORTED)."},
}, {
    "options": {"type": "object", "properties": {
        "webhook": {"type": "string", "maxLength": 2048},
        "override_username": {"type": ["string", "null"]},
        "override_password": {"type": ["string", "null"]},
        "transactions": {"type": "object", "properties": {
            "days_requested": {"type": "integer", "minimum": 1, "maximum": 730,
                               "default": aggregator.DEFAULT_DAYS_REQUESTED,
                               "description": "How much history the service can pull "
                                              "(spec: Limits, transaction history length)."},
            "start_date": {"type": "string", "format": "date"},
            "end_date": {"type": "string", "format": "date"}}},
    }},
    "user_token": _TEXT,
    "user_id": _TEXT,
})
PUBLIC_TOKEN_EXCHANGE = _request({"public_token": {
    **_TEXT, "description": "The public token of /sandbox/public_token/create (one exchange, "
                            "within 30 minutes)."}})
ACCOUNTS_GET = _request({"access_token": _ACCESS_TOKEN}, {
    "options": {"type": "object", "properties": {
        "account_ids": {"type": "array", "maxItems": 100, "items": _TEXT}}}})
PROCESSOR_TOKEN_CREATE = _request({
    "access_token": _ACCESS_TOKEN,
    "account_id": {**_TEXT, "description": "One account of the item (/accounts/get)."},
    "processor": {**_TEXT, "description": "The service's processor key at the aggregator "
                                          "(any name: not checked)."}})
ITEM_REMOVE = _request({"access_token": _ACCESS_TOKEN}, {
    "reason_code": _TEXT, "reason_note": {"type": ["string", "null"], "maxLength": 512}})
RESET_LOGIN = _request({"access_token": _ACCESS_TOKEN})

_BALANCES = {"type": "object", "required": ["available", "current", "limit",
                                            "iso_currency_code", "unofficial_currency_code"],
             "properties": {"available": {"type": ["number", "null"]},
                            "current": {"type": ["number", "null"]},
                            "limit": {"type": ["number", "null"]},
                            "iso_currency_code": {"type": ["string", "null"]},
                            "unofficial_currency_code": {"type": ["string", "null"]}}}
_ACCOUNT = {"type": "object",
            "required": ["account_id", "balances", "mask", "name", "official_name", "type",
                         "subtype"],
            "properties": {"account_id": {"type": "string"}, "balances": _BALANCES,
                           "mask": {"type": ["string", "null"]}, "name": {"type": "string"},
                           "official_name": {"type": ["string", "null"]},
                           "type": {"type": "string"}, "subtype": {"type": ["string", "null"]}}}
_ITEM = {"type": "object",
         "required": ["item_id", "webhook", "error", "available_products", "billed_products",
                      "consent_expiration_time", "update_type"],
         "properties": {"item_id": {"type": "string"}, "webhook": {"type": ["string", "null"]},
                        "error": {"type": "null", "description": "Always null here: an item "
                                  "whose user must log in again answers the "
                                  "ITEM_LOGIN_REQUIRED error (400) instead."},
                        "available_products": {"type": "array", "items": {"type": "string"}},
                        "billed_products": {"type": "array", "items": {"type": "string"}},
                        "products": {"type": "array", "items": {"type": "string"}},
                        "consent_expiration_time": {"type": ["string", "null"]},
                        "update_type": {"enum": ["background", "user_present_required"]},
                        "institution_id": {"type": ["string", "null"]}}}


def _declare(path: str, summary: str, **declared: Any):
    return operation("POST", f"{PREFIX}{path}", summary, auth=Auth.AGGREGATOR,
                     dialect=AGGREGATOR_API, tags=TAGS, **declared)


# -- the operations ---------------------------------------------------------------------------

@_declare("/sandbox/public_token/create", "Create a public token for a sandbox item",
          body=PUBLIC_TOKEN_CREATE, response=_answer(public_token={"type": "string"}))
async def sandbox_public_token_create(tenant, body) -> dict:
    """What the aggregator's link flow returns, without the flow: a new item at the
    institution with the products asked for (`options.transactions.days_requested` sets how
    much history the service gets, default 90)."""
    return aggregator.create_sandbox_public_token(tenant, body)


@_declare("/item/public_token/exchange", "Exchange a public token for an access token",
          body=PUBLIC_TOKEN_EXCHANGE,
          response=_answer(access_token={"type": "string"}, item_id={"type": "string"}))
async def item_public_token_exchange(tenant, body) -> dict:
    """The spec's step 2 at the aggregator: the access token stays on the customer's server."""
    return aggregator.exchange_public_token(tenant, body["public_token"])


@_declare("/accounts/get", "An item's accounts", body=ACCOUNTS_GET,
          response=_answer(accounts={"type": "array", "items": _ACCOUNT}, item=_ITEM))
async def accounts_get(tenant, body) -> dict:
    """The accounts to choose one from for the processor token; ITEM_LOGIN_REQUIRED after
    /sandbox/item/reset_login."""
    return aggregator.get_accounts(tenant, body["access_token"],
                                   (body.get("options") or {}).get("account_ids"))


@_declare("/processor/token/create", "Create a processor token for the service",
          body=PROCESSOR_TOKEN_CREATE, response=_answer(processor_token={"type": "string"}))
async def processor_token_create(tenant, body, sandbox) -> dict:
    """The spec's step 3: `processor-<environment>-<uuid>`, which POST
    /<aggregator>/processor-links takes (step 4)."""
    return aggregator.create_processor_token(tenant, body)


@_declare("/item/remove", "Remove an item", body=ITEM_REMOVE, response=_answer())
async def item_remove(tenant, body) -> dict:
    """The access token stops working; processor tokens of the item are revoked."""
    return aggregator.remove_item(tenant, body["access_token"])


@_declare("/sandbox/item/reset_login", "Make a sandbox item need its user to log in again",
          body=RESET_LOGIN, response=_answer(reset_login={"type": "boolean"}))
async def sandbox_item_reset_login(tenant, body) -> dict:
    """Processing of the item's processor links then ends in `<aggregator>-error` with
    ITEM_ERROR / ITEM_LOGIN_REQUIRED when it pulls transactions; a new item recovers."""
    return aggregator.reset_login(tenant, body["access_token"])
