"""What verify-against sends: every probe of the real service's published operations (the
published enums each answer is held to), and the targets it refuses (a production URL,
credentials or answer)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..kit.testing import is_loopback
from ..validate import checked_url as checked_http_url

COMPANY_STATUS = ("operational", "under-maintenance", "disabled")
TASK_STATUS = ("queued", "processing", "completed", "failed")
DEPOSIT_TYPE = ("checking", "savings", "paycard")
DISTRIBUTION_TYPE = ("total", "percent", "fixed")
INCOME_TYPE = ("yearly", "monthly", "weekly", "daily", "hourly")
PAY_CYCLE = ("monthly", "semimonthly", "biweekly", "weekly")
CONFIDENCE = ("HIGH", "LOW")

UNKNOWN_ID = "000000000000000000000000"   # a well-formed id that names nothing
UNKNOWN_TOKEN = "verify-against-unknown-public-token"
WRONG_SECRET = "verify-against-wrong-secret"
SEARCH_QUERY = "a"
# The run's webhook endpoint: a reserved name (RFC 2606) that no event it names reaches
# while it exists (company-deleted: the run deletes no company).
HOOK_URL = "https://example.com/payroll-sandbox-verify-against"
HOOK_EVENTS = ["company-deleted"]
SECRET_NAME = "payroll-sandbox-verify-against"
# What PUT /user stores for the run's user: a published test routing number, made-up digits.
PAYMENT_METHODS = {"bankAccounts": [{"accountNumber": "000123456789",
                                     "routingNumber": "021000021", "accountType": "checking"}],
                   "cards": [{"brand": "Visa", "lastFour": "4242"}]}
NO_PAYMENT_METHODS = {"bankAccounts": [], "cards": []}

# The credentials a probe sends: the API key and secret, a wrong secret, none, the run
# user's public token (captured as `publicToken`), or the aggregator's client id and
# secret (its PLAID-CLIENT-ID and PLAID-SECRET headers: a probe of the aggregator's API).
KEYS, BAD_SECRET, NO_KEYS, TOKEN = "keys", "wrong-secret", "none", "public-token"
AGGREGATOR_KEYS = "aggregator-keys"
AGGREGATOR_PREFIX = "/aggregator-api"  # where a payroll-sandbox serves the aggregator's API
# The aggregator's sandbox institution the run links its own item at, and its published
# enums (the aggregator's API reference).
INSTITUTION = "ins_109508"
UPDATE_STATUS = ("TRANSACTIONS_UPDATE_STATUS_UNKNOWN", "NOT_READY", "INITIAL_UPDATE_COMPLETE",
                 "HISTORICAL_UPDATE_COMPLETE")
ACCOUNT_TYPE = ("investment", "credit", "depository", "loan", "brokerage", "other")
SERVICE, SANDBOX = "service", "sandbox"


@dataclass(frozen=True)
class Probe:
    """One request sent to both sides.

    `path`, string values of `body` and the public token of `credentials=TOKEN` may name
    `{identifier}` (the test user), `{runUser}` (the run's own user) and what an earlier
    probe of the same side captured (`captures`: name -> JSON path in its 2xx answer,
    `$.data[0]._id`; read bare too, as the real service may answer without `data`). A
    probe whose names a side has not captured is not sent to that side (a note says so).
    `expect` is what the documentation says it answers (a status or a class like `4xx`);
    `enums` maps JSON paths of its answer to the published values of that field."""

    name: str
    method: str
    path: str
    expect: str
    body: Any = None
    credentials: str = KEYS
    enums: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    what: str = ""
    captures: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def names(self) -> set[str]:
        """The names its request needs."""
        text = self.path + json.dumps(self.body) + ("{publicToken}" if self.credentials == TOKEN
                                                    else "")
        return set(re.findall(r"\{(\w+)\}", text))


def _data_probe(kind: str, query: str = "", enums: Mapping[str, tuple[str, ...]] | None = None
                ) -> Probe:
    return Probe(kind, "GET", f"/{kind}/{{identifier}}{query}", "200", enums=enums or {},
                 what=f"the test user's {kind} records")


def _aggregator(name: str, path: str, expect: str, body: dict[str, Any], what: str,
                **more: Any) -> Probe:
    """A probe of the aggregator's API: POST, its client id and secret, the run's item."""
    return Probe(f"aggregator-{name}", "POST", path, expect, body,
                 credentials=AGGREGATOR_KEYS, what=what, **more)


def _aggregator_probes() -> tuple[Probe, ...]:
    item = {"access_token": "{aggregatorAccessToken}"}
    accounts = {"$.accounts[].type": ACCOUNT_TYPE}
    return (
        _aggregator("sandbox-public-token-create", "/sandbox/public_token/create", "200",
                    {"institution_id": INSTITUTION, "initial_products": ["transactions"]},
                    "an item of the run's own at the first sandbox institution",
                    captures={"aggregatorPublicToken": "$.public_token"}),
        _aggregator("public-token-exchange", "/item/public_token/exchange", "200",
                    {"public_token": "{aggregatorPublicToken}"}, "its access token",
                    captures={"aggregatorAccessToken": "$.access_token"}),
        _aggregator("accounts-get", "/accounts/get", "200", item, "its accounts",
                    enums=accounts, captures={"aggregatorAccountId": "$.accounts[0].account_id"}),
        _aggregator("accounts-balance-get", "/accounts/balance/get", "200", item,
                    "its accounts' balances", enums=accounts),
        _aggregator("auth-get", "/auth/get", "200", item, "its account and routing numbers",
                    enums=accounts),
        _aggregator("item-get", "/item/get", "200", item, "the item and its status"),
        _aggregator("institutions-get-by-id", "/institutions/get_by_id", "200",
                    {"institution_id": INSTITUTION, "country_codes": ["US"]},
                    "the sandbox institution"),
        _aggregator("link-token-create", "/link/token/create", "200",
                    {"client_name": "verify-against", "language": "en", "country_codes": ["US"],
                     "user": {"client_user_id": "{runUser}"}, "products": ["transactions"]},
                    "a link token for the run's user"),
        _aggregator("transactions-sync", "/transactions/sync", "200", {**item, "count": 100},
                    "its transactions, the first page",
                    enums={"$.transactions_update_status": UPDATE_STATUS}),
        _aggregator("transactions-get", "/transactions/get", "200",
                    {**item, "start_date": "2000-01-01", "end_date": "2099-12-31",
                     "options": {"count": 100}}, "its transactions between two dates"),
        _aggregator("transactions-refresh", "/transactions/refresh", "200", item,
                    "a refresh (the item has no webhook URL)"),
        _aggregator("processor-token-create", "/processor/token/create", "200",
                    {**item, "account_id": "{aggregatorAccountId}", "processor": "atomic"},
                    "a processor token for its first account"),
        _aggregator("webhook-verification-key-get-unknown", "/webhook_verification_key/get",
                    "400", {"key_id": "verify-against-unknown-key"},
                    "a key id no webhook named"),
        _aggregator("item-webhook-update", "/item/webhook/update", "200",
                    {**item, "webhook": None}, "the item left without a webhook URL"),
        _aggregator("sandbox-item-fire-webhook", "/sandbox/item/fire_webhook", "400",
                    {**item, "webhook_code": "DEFAULT_UPDATE"},
                    "a webhook of an item without a webhook URL"),
        _aggregator("sandbox-item-reset-login", "/sandbox/item/reset_login", "200", item,
                    "the item needs its user to log in again"),
        _aggregator("item-remove", "/item/remove", "200", item, "the run's item removed"),
    )


COMPANY_ENUMS = {"$.data[].status": COMPANY_STATUS}
HOOK = {"url": HOOK_URL, "eventTypes": HOOK_EVENTS}

# The probes, in the order they run; the names are a contract (docs, --json, tests).
PROBES: tuple[Probe, ...] = (
    # The run's user (made here) and its public token.
    Probe("access-token", "POST", "/access-token", "200", {"identifier": "{runUser}"},
          captures={"publicToken": "$.data.publicToken"},
          what="a public token for the run's user (creates the user)"),
    Probe("access-token-without-identifier", "POST", "/access-token", "4xx", {},
          what="the required identifier left out"),
    Probe("access-token-lifetime-out-of-range", "POST", "/access-token", "4xx",
          {"identifier": "{runUser}", "tokenLifetime": 60},
          what="tokenLifetime under the published 30 minutes"),
    Probe("access-token-wrong-secret", "POST", "/access-token", "401",
          {"identifier": "{runUser}"}, credentials=BAD_SECRET, what="a wrong API secret"),
    # The catalog.
    Probe("company-search", "POST", "/company/search", "200", {"query": SEARCH_QUERY},
          enums=COMPANY_ENUMS, what="a fuzzy search",
          captures={"companyId": "$.data[0]._id", "companyName": "$.data[0].name"}),
    Probe("company-search-product-and-products", "POST", "/company/search", "400",
          {"query": SEARCH_QUERY, "product": "deposit", "products": ["deposit"]},
          what="both product and products"),
    Probe("company-search-without-query", "POST", "/company/search", "4xx", {},
          what="the required query left out"),
    Probe("company-search-pay-link", "POST", "/company/search", "200",
          {"query": SEARCH_QUERY, "scopes": ["pay-link"]}, enums=COMPANY_ENUMS,
          captures={"payLinkCompanyId": "$.data[0]._id"}, what="a search of pay-link companies"),
    Probe("company-list", "GET", "/company/list?limit=5", "200", enums=COMPANY_ENUMS,
          what="the catalog's first five"),
    Probe("company-list-without-keys", "GET", "/company/list?limit=5", "401",
          credentials=NO_KEYS, what="no credentials"),
    Probe("company-details", "GET", "/company/{companyId}/details", "200",
          enums={"$.data.status": COMPANY_STATUS}, what="the first search hit's details"),
    Probe("company-details-unknown", "GET", f"/company/{UNKNOWN_ID}/details", "404",
          what="an id no company has"),
    # The test user's linked accounts and records.
    Probe("linked-account-list", "GET", "/linked-account/list/{identifier}", "200",
          enums={"$.data[].company.status": COMPANY_STATUS},
          what="the test user's linked accounts"),
    _data_probe("income", enums={"$.data[].incomeType": INCOME_TYPE,
                                 "$.data[].payCycle": PAY_CYCLE}),
    _data_probe("employment"),
    _data_probe("identity"),
    _data_probe("deposit-accounts", enums={"$.data[].type": DEPOSIT_TYPE,
                                           "$.data[].distributionType": DISTRIBUTION_TYPE}),
    _data_probe("statements", "?limit=5"),
    _data_probe("taxes"),
    _data_probe("timesheets"),
    # The test user's tasks.
    Probe("user-tasks", "GET", "/user/{identifier}/tasks", "200",
          enums={"$.data[].status": TASK_STATUS}, captures={"taskId": "$.data[0]._id"},
          what="the test user's tasks"),
    Probe("task-details", "GET", "/task/{taskId}/details", "200",
          enums={"$.data.status": TASK_STATUS}, captures={"fileId": "$.data.files[0]._id"},
          what="the test user's first task"),
    Probe("task-status", "GET", "/task/{taskId}/status", "200",
          enums={"$.data.task.status": TASK_STATUS}, what="the test user's first task"),
    Probe("task-file-generate-url", "GET", "/task/{taskId}/file/{fileId}/generate-url", "200",
          what="a signed URL for that task's first file"),
    Probe("task-details-unknown", "GET", f"/task/{UNKNOWN_ID}/details", "404",
          what="an id no task has"),
    Probe("task-status-unknown", "GET", f"/task/{UNKNOWN_ID}/status", "404",
          enums={"$.data.task.status": TASK_STATUS}, what="an id no task has"),
    Probe("task-prescreen", "POST", "/task/prescreen", "200",
          {"company": {"name": "{companyName}", "id": "{companyId}"}, "product": "deposit"},
          enums={"$.data.confidence": CONFIDENCE}, what="the first search hit, for deposit"),
    # Pay-link.
    Probe("pay-link-actions-for-company", "GET", "/pay-link/actions-for-company/"
          "{payLinkCompanyId}", "200", what="the first pay-link search hit's actions"),
    Probe("pay-link-accounts", "GET", "/pay-link/accounts", "200", credentials=TOKEN,
          headers={"x-api-version": "v2"},
          what="the run user's pay-link accounts (its public token, as the vendor's client)"),
    # Writes on the run's user; writes that would reach anything else, refused.
    Probe("user-put", "PUT", "/user", "200",
          {"identifier": "{runUser}", "data": PAYMENT_METHODS},
          what="a bank account and a card for the run's user"),
    Probe("user-end-monitoring", "PUT", "/user/{runUser}/end-monitoring", "200",
          what="the run user's continuous access ended"),
    Probe("task-workflow-unknown-linked-account", "POST", "/task-workflow/from-linked-account",
          "4xx", {"linkedAccount": UNKNOWN_ID, "tasks": [{"operation": "deposit"}]},
          what="a refresh of a linked account nobody has"),
    Probe("task-create-unknown-linked-account", "POST", "/task/create", "4xx",
          {"product": "deposit", "linkedAccount": UNKNOWN_ID},
          what="the legacy task creation, on a linked account nobody has"),
    # The run's own webhook endpoint and signing secret, made and deleted.
    Probe("webhook-endpoint-create", "POST", "/webhooks/endpoints", "200", HOOK,
          captures={"endpointId": "$.data._id"}, what=f"an endpoint at {HOOK_URL}"),
    Probe("webhook-endpoint-update", "PUT", "/webhooks/endpoints/{endpointId}", "200",
          {**HOOK, "eventTypes": [*HOOK_EVENTS, "company-updated"]},
          what="the run's endpoint, with another event type"),
    Probe("webhook-endpoints", "GET", "/webhooks/endpoints", "200",
          what="the endpoints (the run's among them)"),
    Probe("webhook-endpoint-delete", "DELETE", "/webhooks/endpoints/{endpointId}", "200",
          what="the run's endpoint deleted"),
    Probe("secret-create", "POST", "/secrets", "200", {"name": SECRET_NAME},
          captures={"secretId": "$.data._id"}, what=f"a signing secret named {SECRET_NAME}"),
    Probe("secrets", "GET", "/secrets", "200", what="the signing secrets (the run's among them)"),
    Probe("secret-delete", "DELETE", "/secrets/{secretId}", "200",
          what="the run's signing secret deleted"),
    Probe("access-token-revoke", "PUT", "/access-token/{publicToken}/revoke", "200",
          what="the run user's public token revoked"),
    Probe("access-token-revoke-unknown", "PUT", f"/access-token/{UNKNOWN_TOKEN}/revoke", "4xx",
          what="a token nobody was given"),
    # The aggregator's API (docs/aggregator.md): an item of the run's own, made, read and
    # removed; its webhooks have no URL to go to, so firing one is compared as a refusal.
    *_aggregator_probes(),
)

# Which probe captures each name (for the notes of a probe that could not be sent).
CAPTURED_BY = {name: probe.name for probe in PROBES for name in probe.captures}


class VerifyError(ValueError):
    """The run cannot be made: bad arguments, a production target, an unreachable URL."""


PRODUCTION_WORDS = ("production", "prod", "live")


def checked_url(url: str) -> str:
    parts = urlsplit(checked_http_url(url, "URL", VerifyError))
    if parts.query or parts.fragment:
        raise VerifyError(f"URL {url!r}: give the service's base URL, without a query or "
                          "fragment")
    return url.rstrip("/")


def _words(text: str) -> list[str]:
    return re.split(r"[-_.:]", text.strip().lower())


def says_production(credential: str) -> bool:
    """A key or secret shaped like a production one, whatever its case: its first word
    is production, prod or live (`production-key-acme-0001`, `PROD_...`, `live:...`), or
    a short kind prefix comes first and then one of them, as live keys of many APIs are
    written (`sk_live_...`, `sk_prod_...`, `pk_live_...`)."""
    words = _words(credential)
    return words[0] in PRODUCTION_WORDS or (
        len(words) > 1 and len(words[0]) <= 3 and words[1] in PRODUCTION_WORDS)


def says_production_host(host: str) -> bool:
    """A host name with production, prod or live as one of its words
    (`api.production.vendor.example`, `sandbox-live.vendor.example`), whatever its case."""
    return any(word in PRODUCTION_WORDS for word in _words(host))


def refusal(url: str, key: str, secret: str, *, trust_host: bool = False) -> str | None:
    """Why a run against `url` with these keys is refused before anything is sent (None:
    it is not). Keys or a host name that say production are always refused; a host that is
    neither loopback nor named `*sandbox*` is refused unless `trust_host`
    (--i-know-this-is-sandbox)."""
    if says_production(key) or says_production(secret):
        return ("the API key or secret says production (it starts with production, prod or "
                "live, or with a prefix such as sk_ and then one of them): verify-against runs "
                "only against a sandbox")
    host = urlsplit(url).hostname or ""
    if says_production_host(host):
        return (f"the host {host} says production (production, prod or live is one of its "
                "words): verify-against runs only against a sandbox")
    if not trust_host and not is_loopback(host) and "sandbox" not in host.lower():
        return (f"{host} does not look like a sandbox host (neither loopback nor a name with "
                "'sandbox' in it); if it is a sandbox, add --i-know-this-is-sandbox")
    return None


def production_signal(status: int, headers: Mapping[str, str], body: Any) -> str | None:
    """What, in the answer to `GET /health` (asked before anything else), says production,
    whatever its case: an `x-environment` header, or an `environment` field (a
    payroll-sandbox started with --environment production answers `{"data":
    {"environment": "production"}}`), of production, prod or live."""
    header = headers.get("x-environment", "")
    if header.strip().lower() in PRODUCTION_WORDS:
        return f"its GET /health answered x-environment: {header.strip()}"
    if 200 <= status < 300 and isinstance(body, dict):
        for holder in (body, body.get("data")):
            environment = holder.get("environment") if isinstance(holder, dict) else None
            if isinstance(environment, str) and environment.strip().lower() in PRODUCTION_WORDS:
                return f"its GET /health says environment {environment.strip()}"
    return None


def is_payroll_sandbox(status: int, body: Any) -> bool:
    """Whether the answer to `GET /health` is a payroll-sandbox's (`{"data": {status,
    environment, vendor, version, spec, ...}}`): its control plane can remove the run's
    user (the real service publishes no operation that does)."""
    data = body.get("data") if 200 <= status < 300 and isinstance(body, dict) else None
    return isinstance(data, dict) and {"environment", "vendor", "version", "spec"} <= set(data)
