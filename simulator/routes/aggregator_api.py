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

from ..domain import aggregator
from ..errors import (ApiError, Forbidden, MethodNotAllowed, MissingCredentials, RouteNotFound,
                      Unauthorized, ValidationFailed)
from ..schemas.api import NO_CONTROL_CHARACTER
from ..validate import UNKNOWN_FIELD, check_webhook_urls
from ..operations import Auth, Dialect, operation

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
        fields = _fields("INVALID_REQUEST", "NOT_FOUND", NOT_FOUND.format(why=_clause(error)))
    elif isinstance(error, MethodNotAllowed):
        fields = _fields("INVALID_REQUEST", "METHOD_NOT_ALLOWED",
                         ONLY_POST.format(why=_clause(error)))
    elif isinstance(error, aggregator.AggregatorError):
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
    if not (status == 429 or status >= 500 or isinstance(
            error, (Forbidden, RouteNotFound, MethodNotAllowed))):
        status = 400
    return status, {**fields, "request_id": uuid.uuid4().hex[:15]}


def _clause(error: ApiError) -> str:
    """The sandbox's sentence as a clause of the aggregator's lower-case messages."""
    message = error.message.rstrip(".")
    return message[:1].lower() + message[1:] if message[1:2].islower() else message


def _fields(error_type: str, error_code: str, message: str) -> dict[str, Any]:
    return {"error_type": error_type, "error_code": error_code, "error_message": message,
            "display_message": None}


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
        return _fields("INVALID_REQUEST", "MISSING_FIELDS",
                       MISSING_FIELDS.format(fields=", ".join(missing)))
    if unknown:
        return _fields("INVALID_REQUEST", "UNKNOWN_FIELDS",
                       UNKNOWN_FIELDS.format(fields=", ".join(unknown)))
    return _fields("INVALID_REQUEST", "INVALID_FIELD", "; ".join(invalid) or error.message)


ERROR = {
    "type": "object",
    "required": ["error_type", "error_code", "error_message", "display_message", "request_id"],
    "properties": {
        "error_type": {"type": "string", "description": "e.g. INVALID_REQUEST, INVALID_INPUT, "
                                                        "ITEM_ERROR, SANDBOX_ERROR"},
        "error_code": {"type": "string",
                       "description": "e.g. MISSING_FIELDS, UNKNOWN_FIELDS, INVALID_API_KEYS, "
                                      "INVALID_ACCESS_TOKEN, ITEM_LOGIN_REQUIRED, NOT_FOUND"},
        "error_message": {"type": "string"},
        "display_message": {"type": ["string", "null"]},
        "request_id": {"type": "string"},
    },
}

AGGREGATOR_API = Dialect(
    name="aggregator", render_error=render_error, error_schema=ERROR, prefix=PREFIX,
    errors={400: "The aggregator's error body, as it answers: MISSING_FIELDS, UNKNOWN_FIELDS "
                 "or INVALID_FIELD (INVALID_REQUEST) for a body its schema refuses, "
                 "INVALID_API_KEYS (INVALID_INPUT) for a wrong client id or secret, "
                 "INVALID_PUBLIC_TOKEN, INVALID_ACCESS_TOKEN, INVALID_ACCOUNT_ID or "
                 "INVALID_INSTITUTION (INVALID_INPUT), ITEM_LOGIN_REQUIRED or "
                 "PRODUCTS_NOT_SUPPORTED (ITEM_ERROR), SANDBOX_WEBHOOK_INVALID or "
                 "SANDBOX_PRODUCT_NOT_ENABLED (SANDBOX_ERROR)."})


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
        "webhook": {"type": "string", "maxLength": 2048,
                    "description": "Where the item's webhooks go (/sandbox/item/fire_webhook); "
                                   "a URL the sandbox may send webhooks to."},
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
ITEM_GET = _request({"access_token": _ACCESS_TOKEN})
ITEM_WEBHOOK_UPDATE = _request({"access_token": _ACCESS_TOKEN}, {
    "webhook": {"type": ["string", "null"], "maxLength": 2048,
                "description": "The item's new webhook URL (null or empty: none)."}})

_COUNTRY_CODES = {"type": "array", "minItems": 1, "maxItems": 20, "uniqueItems": True,
                  "items": {"enum": ["US", "GB", "ES", "NL", "FR", "IE", "CA", "DE", "IT",
                                     "PL", "DK", "NO", "SE", "EE", "LT", "LV", "PT", "BE", "AT",
                                     "FI"]}}
_PRODUCT_NAMES = {"type": "array", "maxItems": 50,
                  "items": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$"}}
_ACCEPTED = "Accepted as the aggregator takes it; the sandbox's link tokens do not use it."
LINK_TOKEN_CREATE = _request({
    "client_name": {**_TEXT, "maxLength": 30, "description": "Your app's name, as the link "
                                                               "flow shows it (30 characters)."},
    "language": {"type": "string", "pattern": "^[a-z]{2}$", "description": "e.g. en, es, fr."},
    "country_codes": _COUNTRY_CODES,
}, {
    "user": {"type": "object", "required": ["client_user_id"], "properties": {
        "client_user_id": {**_TEXT, "description": "Your id of the user."},
        "legal_name": _TEXT, "phone_number": _TEXT, "email_address": _TEXT,
        "date_of_birth": {"type": "string", "format": "date"}}},
    "user_id": _TEXT, "user_token": _TEXT,
    "products": _PRODUCT_NAMES, "required_if_supported_products": _PRODUCT_NAMES,
    "optional_products": _PRODUCT_NAMES, "additional_consented_products": _PRODUCT_NAMES,
    "webhook": {"type": "string", "maxLength": 2048},
    "access_token": {**_ACCESS_TOKEN, "description": "Update mode: the item to relink."},
    "access_tokens": {"type": "array", "maxItems": 100, "items": _TEXT},
    "transactions": {"type": "object", "properties": {
        "days_requested": {"type": "integer", "minimum": 1, "maximum": 730}}},
    "redirect_uri": {"type": "string", "maxLength": 2048},
    **{name: {**_TEXT, "description": _ACCEPTED}
       for name in ("link_customization_name", "android_package_name", "institution_id",
                    "appearance_mode", "consumer_report_permissible_purpose")},
    **{name: {"type": "boolean", "description": _ACCEPTED}
       for name in ("enable_multi_item_link", "cra_enabled", "financekit_supported")},
    **{name: {"type": "object", "description": _ACCEPTED}
       for name in ("institution_data", "account_filters", "eu_config",
                    "payment_configuration", "payment_initiation", "employment",
                    "income_verification", "base_report", "credit_partner_insights",
                    "cra_options", "cra_report_parameter", "auth", "transfer", "update",
                    "identity_verification", "statements", "investments", "investments_auth",
                    "hosted_link", "card_switch", "cashflow_report", "identity")},
})
INSTITUTIONS_GET_BY_ID = _request({
    "institution_id": {**_TEXT, "description": "A sandbox institution, e.g. ins_109508."},
    "country_codes": _COUNTRY_CODES,
}, {"options": {"type": "object", "properties": {
    name: {"type": "boolean"} for name in ("include_optional_metadata", "include_status",
                                           "include_auth_metadata",
                                           "include_payment_initiation_metadata")}}})
TRANSACTIONS_SYNC = _request({"access_token": _ACCESS_TOKEN}, {
    "cursor": {"type": "string", "maxLength": 1024, "pattern": NO_CONTROL_CHARACTER,
               "description": "The `next_cursor` of the previous answer (none or empty: "
                              "from the start)."},
    "count": {"type": "integer", "minimum": 1, "maximum": 500,
              "default": aggregator.SYNC_COUNT},
    "options": {"type": "object", "properties": {
        "account_id": {**_TEXT, "description": "Only this account's transactions."},
        "days_requested": {"type": "integer", "minimum": 1, "maximum": 730},
        "include_original_description": {"type": ["boolean", "null"]},
        "include_personal_finance_category": {"type": "boolean"},
        "include_logo_and_counterparty_beta": {"type": "boolean"},
        "personal_finance_category_version": {"type": "string", "maxLength": 16}}},
})
FIRE_WEBHOOK = _request({
    "access_token": _ACCESS_TOKEN,
    "webhook_code": {"enum": list(aggregator.WEBHOOK_CODES)},
}, {
    "webhook_type": {"enum": list(aggregator.WEBHOOK_TYPES),
                     "description": "By default the code's own (DEFAULT_UPDATE: TRANSACTIONS)."},
    "options": {"type": "object", "properties": {
        "new_transactions": {"type": "integer", "minimum": 0, "maximum": 100000,
                             "description": "DEFAULT_UPDATE's `new_transactions`."}}},
})

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
_ITEM_ERROR = {
    "type": "object",
    "description": "ITEM_LOGIN_REQUIRED once the item's login was reset (/item/get; "
                   "/accounts/get answers that error, 400, instead).",
    "required": ["error_type", "error_code", "error_message", "display_message"],
    "properties": {**{name: ERROR["properties"][name] for name in (
        "error_type", "error_code", "error_message", "display_message")},
        "status": {"type": "integer"}}}
_ITEM = {"type": "object",
         "required": ["item_id", "webhook", "error", "available_products", "billed_products",
                      "consent_expiration_time", "update_type"],
         "properties": {"item_id": {"type": "string"}, "webhook": {"type": ["string", "null"]},
                        "error": {"anyOf": [{"type": "null"}, _ITEM_ERROR]},
                        "institution_name": {"type": ["string", "null"]},
                        "consented_products": {"type": "array", "items": {"type": "string"}},
                        "available_products": {"type": "array", "items": {"type": "string"}},
                        "billed_products": {"type": "array", "items": {"type": "string"}},
                        "products": {"type": "array", "items": {"type": "string"}},
                        "consent_expiration_time": {"type": ["string", "null"]},
                        "update_type": {"enum": ["background", "user_present_required"]},
                        "institution_id": {"type": ["string", "null"]}}}


_DATE_TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}
_ITEM_STATUS = {
    "type": "object", "required": ["investments", "transactions", "last_webhook"],
    "properties": {
        "investments": {"type": "null", "description": "No investments in the sandbox."},
        "transactions": {"type": "object",
                         "required": ["last_successful_update", "last_failed_update"],
                         "properties": {"last_successful_update": _DATE_TIME_OR_NULL,
                                        "last_failed_update": _DATE_TIME_OR_NULL}},
        "last_webhook": {"anyOf": [{"type": "null"}, {
            "type": "object", "required": ["sent_at", "code_sent"],
            "properties": {"sent_at": _DATE_TIME_OR_NULL, "code_sent": {"type": "string"}}}]}}}

_PRODUCT_STATUS = {
    "type": "object", "required": ["status", "last_status_change", "breakdown"],
    "properties": {
        "status": {"enum": ["HEALTHY", "DEGRADED", "DOWN"]},
        "last_status_change": {"type": "string", "format": "date-time"},
        "breakdown": {"type": "object",
                      "required": ["success", "error_plaid", "error_institution"],
                      "properties": {
                          **{name: {"type": "number", "minimum": 0, "maximum": 1}
                             for name in ("success", "error_plaid", "error_institution")},
                          "refresh_interval": {"enum": ["NORMAL", "DELAYED", "STOPPED"]}}}}}
_INSTITUTION = {
    "type": "object",
    "required": ["institution_id", "name", "products", "country_codes", "routing_numbers",
                 "dtc_numbers", "oauth", "connection_availability"],
    "properties": {
        "institution_id": {"type": "string"}, "name": {"type": "string"},
        "products": {"type": "array", "items": {"type": "string"}},
        "country_codes": {"type": "array", "items": {"type": "string"}},
        "routing_numbers": {"type": "array", "items": {"type": "string"}},
        "dtc_numbers": {"type": "array", "items": {"type": "string"}},
        "oauth": {"type": "boolean"},
        "connection_availability": {"enum": ["SUPPORTED", "NOT_SUPPORTED"]},
        "url": {"type": ["string", "null"], "description": "With include_optional_metadata."},
        "primary_color": {"type": ["string", "null"]},
        "logo": {"type": ["string", "null"], "description": "Base64 PNG; none here."},
        "status": {"type": "object", "description": "With include_status.",
                   "properties": {**{name: _PRODUCT_STATUS for name in (
                       "item_logins", "transactions_updates", "auth", "identity",
                       "investments_updates", "liabilities_updates", "liabilities",
                       "investments")},
                       "health_incidents": {"type": "array", "items": {
                           "type": "object", "properties": {
                               "start_date": {"type": "string"},
                               "end_date": {"type": ["string", "null"]},
                               "title": {"type": "string"}}}}}}}}

_NULLABLE_TEXT = {"type": ["string", "null"]}
_TRANSACTION = {
    "type": "object",
    "required": ["transaction_id", "account_id", "amount", "iso_currency_code",
                 "unofficial_currency_code", "date", "authorized_date", "datetime",
                 "authorized_datetime", "name", "merchant_name", "payment_channel",
                 "pending", "pending_transaction_id", "personal_finance_category",
                 "category", "category_id", "location", "payment_meta", "account_owner",
                 "transaction_code", "counterparties"],
    "properties": {
        "transaction_id": {"type": "string"}, "account_id": {"type": "string"},
        "amount": {"type": "number", "description": "Positive: money out of the account; "
                                                    "negative: money in (a pay deposit)."},
        "iso_currency_code": _NULLABLE_TEXT, "unofficial_currency_code": _NULLABLE_TEXT,
        "date": {"type": "string", "format": "date"},
        "authorized_date": {"type": ["string", "null"], "format": "date"},
        "datetime": _DATE_TIME_OR_NULL, "authorized_datetime": _DATE_TIME_OR_NULL,
        "name": {"type": "string"}, "merchant_name": _NULLABLE_TEXT,
        "merchant_entity_id": _NULLABLE_TEXT, "original_description": _NULLABLE_TEXT,
        "logo_url": _NULLABLE_TEXT, "website": _NULLABLE_TEXT,
        "payment_channel": {"enum": ["online", "in store", "other"]},
        "transaction_type": {"enum": ["digital", "place", "special", "unresolved"]},
        "transaction_code": _NULLABLE_TEXT, "pending": {"type": "boolean"},
        "pending_transaction_id": _NULLABLE_TEXT, "account_owner": _NULLABLE_TEXT,
        "check_number": _NULLABLE_TEXT,
        "category": {"type": ["array", "null"], "items": {"type": "string"}},
        "category_id": _NULLABLE_TEXT,
        "personal_finance_category": {
            "type": "object", "required": ["primary", "detailed"],
            "properties": {"primary": {"type": "string"}, "detailed": {"type": "string"},
                           "confidence_level": _NULLABLE_TEXT}},
        "counterparties": {"type": "array", "items": {
            "type": "object", "required": ["name", "type"],
            "properties": {"name": {"type": "string"}, "type": {"type": "string"},
                           **{name: _NULLABLE_TEXT for name in (
                               "website", "logo_url", "phone_number", "entity_id",
                               "confidence_level")}}}},
        "location": {"type": "object", "properties": {
            **{name: _NULLABLE_TEXT for name in ("address", "city", "region", "postal_code",
                                                 "country", "store_number")},
            "lat": {"type": ["number", "null"]}, "lon": {"type": ["number", "null"]}}},
        "payment_meta": {"type": "object", "properties": {
            name: _NULLABLE_TEXT for name in ("reference_number", "ppd_id", "payee",
                                              "by_order_of", "payer", "payment_method",
                                              "payment_processor", "reason")}},
    }}


def _declare(path: str, summary: str, **declared: Any):
    return operation("POST", f"{PREFIX}{path}", summary, auth=Auth.AGGREGATOR,
                     dialect=AGGREGATOR_API, tags=TAGS, **declared)


# -- the operations ---------------------------------------------------------------------------

@_declare("/sandbox/public_token/create", "Create a public token for a sandbox item",
          body=PUBLIC_TOKEN_CREATE, response=_answer(public_token={"type": "string"}))
async def sandbox_public_token_create(tenant, body, sandbox) -> dict:
    """What the aggregator's link flow returns, without the flow: a new item at one of the
    sandbox's institutions with the products asked for (`options.transactions.days_requested`
    sets how much history the service gets, default 90; `options.webhook` where the item's
    webhooks go)."""
    _check_webhook(((body.get("options") or {}).get("webhook"), "$.options.webhook"), sandbox)
    return tenant.aggregator.create_sandbox_public_token(body)


@_declare("/item/public_token/exchange", "Exchange a public token for an access token",
          body=PUBLIC_TOKEN_EXCHANGE,
          response=_answer(access_token={"type": "string"}, item_id={"type": "string"}))
async def item_public_token_exchange(tenant, body) -> dict:
    """The spec's step 2 at the aggregator: the access token stays on the customer's server."""
    return tenant.aggregator.exchange_public_token(body["public_token"])


@_declare("/accounts/get", "An item's accounts", body=ACCOUNTS_GET,
          response=_answer(accounts={"type": "array", "items": _ACCOUNT}, item=_ITEM))
async def accounts_get(tenant, body) -> dict:
    """The accounts to choose one from for the processor token; ITEM_LOGIN_REQUIRED after
    /sandbox/item/reset_login."""
    return tenant.aggregator.get_accounts(body["access_token"],
                                   (body.get("options") or {}).get("account_ids"))


@_declare("/processor/token/create", "Create a processor token for the service",
          body=PROCESSOR_TOKEN_CREATE, response=_answer(processor_token={"type": "string"}))
async def processor_token_create(tenant, body, sandbox) -> dict:
    """The spec's step 3: `processor-<environment>-<uuid>`, which POST
    /<aggregator>/processor-links takes (step 4)."""
    return tenant.aggregator.create_processor_token(body)


@_declare("/item/remove", "Remove an item", body=ITEM_REMOVE, response=_answer())
async def item_remove(tenant, body) -> dict:
    """The access token stops working; processor tokens of the item are revoked."""
    return tenant.aggregator.remove_item(body["access_token"])


@_declare("/sandbox/item/reset_login", "Make a sandbox item need its user to log in again",
          body=RESET_LOGIN, response=_answer(reset_login={"type": "boolean"}))
async def sandbox_item_reset_login(tenant, body) -> dict:
    """Processing of the item's processor links then ends in `<aggregator>-error` with
    ITEM_ERROR / ITEM_LOGIN_REQUIRED when it pulls transactions; a new item recovers."""
    return tenant.aggregator.reset_login(body["access_token"])


@_declare("/item/get", "An item and its status", body=ITEM_GET,
          response=_answer(item=_ITEM, status=_ITEM_STATUS))
async def item_get(tenant, body) -> dict:
    """The item: its products, webhook URL and `error` (ITEM_LOGIN_REQUIRED after
    /sandbox/item/reset_login, which this call reports rather than refuses), and when its
    transactions last updated and which webhook it last fired."""
    return tenant.aggregator.get_item(body["access_token"])


@_declare("/item/webhook/update", "Change where an item's webhooks go",
          body=ITEM_WEBHOOK_UPDATE, response=_answer(item=_ITEM), settles=True)
async def item_webhook_update(tenant, body, sandbox) -> dict:
    """The item's webhooks go to `webhook` from now on; the aggregator's
    WEBHOOK_UPDATE_ACKNOWLEDGED goes there first (answered once its first attempt is)."""
    _check_webhook((body.get("webhook"), "$.webhook"), sandbox)
    return tenant.aggregator.update_webhook(body["access_token"], body.get("webhook"))


@_declare("/link/token/create", "Create a link token", body=LINK_TOKEN_CREATE,
          response=_answer(link_token={"type": "string"},
                           expiration={"type": "string", "format": "date-time"}))
async def link_token_create(tenant, body, sandbox) -> dict:
    """`link-<environment>-<uuid>`, for 4 hours, as the customer's server makes one before
    opening the aggregator's link flow. The sandbox has no link flow:
    /sandbox/public_token/create stands in for it. `access_token` (update mode) must be
    an item's, `webhook` a URL the sandbox may send to."""
    _check_webhook((body.get("webhook"), "$.webhook"), sandbox)
    return tenant.aggregator.create_link_token(body)


@_declare("/institutions/get_by_id", "An institution", body=INSTITUTIONS_GET_BY_ID,
          response=_answer(institution=_INSTITUTION))
async def institutions_get_by_id(tenant, body) -> dict:
    """One of the sandbox's institutions (First Platypus Bank, ins_109508, and its
    siblings up to ins_109512; Platypus OAuth Bank, ins_127287), in a country asked for;
    `options.include_optional_metadata` adds its url, colour and logo,
    `options.include_status` its health. Another id is INVALID_INSTITUTION."""
    return tenant.aggregator.get_institution(body)


@_declare("/transactions/sync", "An item's transactions, page by page",
          body=TRANSACTIONS_SYNC, response=_answer(
              transactions_update_status={"enum": ["TRANSACTIONS_UPDATE_STATUS_UNKNOWN",
                                                   "NOT_READY", "INITIAL_UPDATE_COMPLETE",
                                                   "HISTORICAL_UPDATE_COMPLETE"]},
              accounts={"type": "array", "items": _ACCOUNT},
              added={"type": "array", "items": _TRANSACTION},
              modified={"type": "array", "items": _TRANSACTION},
              removed={"type": "array", "items": {
                  "type": "object", "required": ["transaction_id", "account_id"],
                  "properties": {"transaction_id": {"type": "string"},
                                 "account_id": {"type": "string"}}}},
              next_cursor={"type": "string"}, has_more={"type": "boolean"}))
async def transactions_sync(tenant, body) -> dict:
    """The item's transactions from `cursor` on, `count` at a time (100 by default), of
    `options.account_id` only when given: the `days_requested` days up to the day the item
    was linked, complete from the start. They are the transactions the service's pipeline
    pulls through a processor token of the item, so its employer matches and recurring
    transactions are made of these. ITEM_LOGIN_REQUIRED after a reset login;
    PRODUCTS_NOT_SUPPORTED for an item linked without `transactions`."""
    return tenant.aggregator.sync_transactions(body)


@_declare("/sandbox/item/fire_webhook", "Fire one of the aggregator's webhooks for an item",
          body=FIRE_WEBHOOK, response=_answer(webhook_fired={"type": "boolean"}), settles=True)
async def sandbox_item_fire_webhook(tenant, body) -> dict:
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


def _check_webhook(given: tuple[str | None, str], sandbox) -> None:
    """A webhook URL the sandbox may send to (the outbound policy), as an endpoint's must
    be; none (or empty) is none. Refused: INVALID_FIELD naming the field."""
    url, path = given
    if url:
        check_webhook_urls([(path, url)], sandbox.dispatcher.policy)
