"""/demo: a host page, as a customer's web app would be, that opens the hosted flow, and the
sandbox's own demo receiver, which plays the customer's backend.

The page holds no keys: it asks its own server for a public token (POST /demo/token, same
origin only), minted on the fixtures' `demo` tenant for a demo visitor. It shows the SDK's
callbacks as they arrive and, beside them, the webhooks the customer's backend receives:
the `demo` tenant's endpoint is the sandbox's built-in receiver (POST /demo/webhooks; the
outbound policy allows exactly that target on the sandbox itself, webhooks/policy.py),
which checks each delivery's signature with the demo tenant's secret, as a backend must,
and keeps the last RECEIVED_KEPT for the page (GET /demo/webhooks). POST /demo/reset puts
the demo tenant back to its fixtures, and GET /demo/profiles with PUT /demo/profile choose
whose payroll the demo visitor has (a data profile, DESIGN.md: Payroll data you choose), so
the page never needs its keys.
"""

from __future__ import annotations

import hmac
import itertools
import json
import weakref
from collections import deque
from typing import Any

import msgspec
from aiohttp import web

from ...clock import isoformat
from ...domain.tenants import DEMO_TENANT, Tenant
from ...errors import Forbidden, MalformedJson, TenantNotFound, Unauthorized
from ..render import origin, read_body
from ...domain.dates import date_time_field
from ...domain.shapes import UNSET, Answer, Command, Maybe, View, choice, given, of, raw
from ...schemas.responses import DemoReset, ProfileSummary
from ...transport.cloudevents import SIGNATURE_HEADER, sign
from ...transport.policy import RECEIVER_PATH
from ..operations import Auth, Reply, operation, serve_file, serve_script_and_styles
from ..examples import Example

DEMO_VISITOR = "demo-visitor"
DEMO = {"auth": Auth.NONE, "tags": ("demo",)}
RECEIVED_KEPT = 50  # the demo receiver keeps the last 50 deliveries (the oldest go first)

NO_DEMO = ("These fixtures have no `demo` account, which the demo page uses; add one to "
           "accounts.yaml or use the bundled fixtures.")
CROSS_ORIGIN = "The demo page's operations are for the demo page only (same origin)."
BAD_SIGNATURE = ("The demo receiver takes only webhooks signed by the `demo` tenant "
                 f"({SIGNATURE_HEADER}: HMAC-SHA256 of the body with its secret).")
NOT_JSON = "The demo receiver takes CloudEvents whose body is a JSON object."

class DemoToken(View, kw_only=True):
    public_token: str
    identifier: str


Sequence = of(int, "1, 2, ... in arrival order.")
CeId = str
Signature = choice("valid", "unsigned", description="`unsigned`: the tenant signs nothing.")


class Received(View, kw_only=True):
    sequence: Sequence
    received_at: Maybe[raw(date_time_field("On the demo tenant's clock."))] = UNSET
    event_type: str
    ce_id: CeId
    user: Maybe[str | None] = UNSET
    summary: of(str, "What happened, in plain words.")
    signature: Signature
    repeat: Maybe[of(bool, "An earlier delivery had this ce-id (a retry that arrived after "
                     "all, a resend, a duplicate).")] = UNSET
    headers: dict[str, str]
    body: dict[str, Any]


ProfileName = of(of(str, min_length=1, max_length=64) | None, "One of GET /demo/profiles; "
                 "null: generated from the seed (no profile).")


class ProfileChoice(Command, kw_only=True):
    profile: ProfileName


class ProfileChosen(Answer, kw_only=True):
    """The profile the demo visitor's next linked accounts take."""

    identifier: str
    profile: ProfileName


class Kept(Answer, kw_only=True):
    """The delivery kept: its ce-id, place and signature."""

    received: CeId
    sequence: Sequence
    signature: Signature


class InboxQuery(Command, kw_only=True):
    after: Maybe[of(int, "Only the deliveries after this `sequence`.", ge=0,
                    le=2**53 - 1)] = UNSET


INBOX_ENVELOPE = {"inbox": {"type": "integer", "description": "Changes when the demo is reset: "
                                                              "start over."},
                  "last": {"type": "integer", "description": "The newest `sequence`."}}


InvalidSignature = Unauthorized.coded("invalid-signature")


# -- pages ------------------------------------------------------------------------------

serve_file("/demo", "A host page that opens the hosted flow (no keys in it)", "text/html",
           "demo.html", tags=DEMO["tags"])
serve_script_and_styles("/demo/demo", "demo page's", tags=DEMO["tags"])


@operation("POST", "/demo/token", "A public token for the demo visitor of the `demo` tenant "
           "(the demo page's own origin only)", errors=(403, 404), **DEMO)
async def demo_token(request, sandbox) -> DemoToken:
    tenant = _demo_tenant(request, sandbox)
    token = tenant.identity.create_access_token(DEMO_VISITOR)
    return DemoToken(public_token=token.public_token, identifier=DEMO_VISITOR)


@operation("POST", "/demo/reset", "The `demo` tenant back to its fixtures, and the demo "
           "receiver emptied (the demo page's own origin only)", errors=(403, 404), **DEMO)
async def demo_reset(request, sandbox) -> DemoReset:
    """What the demo page's reset button calls, so the page never holds the tenant's keys."""
    tenant = _demo_tenant(request, sandbox)
    sandbox.registry.reset(tenant)  # a new webhook state: a new, empty inbox
    return DemoReset(tenant=tenant.name, reset=True)


@operation("GET", "/demo/profiles", "The named data profiles the demo page offers, and the one "
           "bound to the demo visitor (the demo page's own origin only)",
           envelope={"bound": {"type": ["string", "null"],
                               "description": "The demo visitor's profile (null: none)."}},
           errors=(403, 404), **DEMO)
async def demo_profiles(request, sandbox) -> Reply[list[ProfileSummary]]:
    tenant = _demo_tenant(request, sandbox)
    bound = tenant.accounts.profile_binding(DEMO_VISITOR)["profile"]
    return Reply(tenant.accounts.profile_names(), extra={"bound": bound})


@operation("PUT", "/demo/profile", "Whose payroll the demo visitor has: a data profile bound "
           "to their next linked accounts, or none (the demo page's own origin only)",
           body=ProfileChoice, errors=(403, 404), **DEMO,
           example=Example({"profile": "gig-worker"}))
async def choose_demo_profile(request, body, sandbox) -> ProfileChosen:
    """What the demo page's "Whose payroll" select sends before it opens the flow, so the
    linked account the flow makes takes the profile (PUT /_sandbox/users/{identifier}/profile
    without the tenant's keys); an unknown name is a 422 at $.profile."""
    tenant = _demo_tenant(request, sandbox)
    if body.profile is None:
        tenant.accounts.unbind_profile(DEMO_VISITOR)
    else:
        tenant.accounts.bind_profile(DEMO_VISITOR, body.profile, None)
    return ProfileChosen(identifier=DEMO_VISITOR, profile=body.profile)


# -- the built-in receiver ----------------------------------------------------------------

@operation("POST", RECEIVER_PATH, "The demo's built-in webhook receiver: takes the `demo` "
           "tenant's signed CloudEvents and keeps the last ones for the demo page",
           errors=(400, 401, 404), **DEMO)
async def receive_demo_webhook(request, sandbox) -> Kept:
    """Plays the customer's backend: the signature is checked with the demo tenant's secret
    (a delivery that fails the check is refused with 401 and not kept), then the
    delivery is kept with what it means in plain words."""
    tenant = _demo_tenant(request, sandbox, page=False)
    raw = await read_body(request)
    signature = _signature(tenant, raw, request.headers.get(SIGNATURE_HEADER))
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise MalformedJson(NOT_JSON)
    received = inbox_of(tenant).add(
        ce_id=request.headers.get("ce-id", ""), body=body, signature=signature,
        headers={name: value for name, value in request.headers.items()
                 if name.lower().startswith("ce-") or name.lower() in KEPT_HEADERS},
        summary=summary(body, tenant, sandbox.registry.service.aggregator),
        received_at=isoformat(tenant.clock.timestamp()))
    return Kept(received=received.ce_id, sequence=received.sequence, signature=signature)


@operation("GET", RECEIVER_PATH, "What the demo receiver received, oldest first (the demo "
           "page's own origin only)", query=InboxQuery, envelope=INBOX_ENVELOPE,
           errors=(403, 404), **DEMO)
async def demo_webhooks(request, query, sandbox) -> Reply[list[Received]]:
    tenant = _demo_tenant(request, sandbox)
    inbox = inbox_of(tenant)
    return Reply(inbox.since(given(query.after, 0)),
                 extra={"inbox": inbox.generation, "last": inbox.count})


KEPT_HEADERS = ("content-type", SIGNATURE_HEADER)


def _signature(tenant: Tenant, raw: bytes, given: str | None) -> str:
    """`valid` (signed with the tenant's API secret or one of its signing secrets) or
    `unsigned` (the tenant signs nothing); anything else is refused."""
    if not tenant.signing and given is None:
        return "unsigned"
    keys = [tenant.api_secret, *(s["token"] for s in tenant.webhooks.secrets.values())]
    if given and any(hmac.compare_digest(given, sign(raw, key)) for key in keys):
        return "valid"
    raise InvalidSignature(BAD_SIGNATURE)


class Inbox(msgspec.Struct):
    """What the demo receiver received: the last RECEIVED_KEPT deliveries."""

    generation: int
    webhooks: Any  # the tenant's webhook state it belongs to
    received: deque = msgspec.field(default_factory=lambda: deque(maxlen=RECEIVED_KEPT))
    count: int = 0

    def add(self, *, ce_id: str, body: dict[str, Any], signature: str, headers: dict[str, str],
            summary: str, received_at: str) -> Received:
        self.count += 1
        # A repeat of the deliveries kept beside it (the oldest goes as this one comes).
        kept = itertools.islice(self.received, len(self.received) == RECEIVED_KEPT, None)
        user = body.get("user")
        record = Received(sequence=self.count, received_at=received_at,
                          event_type=str(body.get("eventType", "")), ce_id=ce_id,
                          user=user.get("identifier") if isinstance(user, dict) else None,
                          summary=summary, signature=signature,
                          repeat=any(r.ce_id == ce_id for r in kept), headers=headers, body=body)
        self.received.append(record)
        return record

    def since(self, after: int) -> list[Received]:
        return [r for r in self.received if r.sequence > after]


_GENERATIONS = itertools.count(1)
# The demo tenant's inbox, for as long as its webhook state lasts: a reset or restore makes
# a new state, and with it an empty inbox.
_INBOXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Tenant -> Inbox


def inbox_of(tenant: Tenant) -> Inbox:
    inbox = _INBOXES.get(tenant)
    if inbox is None or inbox.webhooks is not tenant.webhooks:
        inbox = _INBOXES[tenant] = Inbox(generation=next(_GENERATIONS), webhooks=tenant.webhooks)
    return inbox


def _demo_tenant(request: web.Request, sandbox: Any, *, page: bool = True) -> Tenant:
    """The `demo` tenant, for a call of the demo page (same origin only) or its receiver's."""
    if page and not _same_origin(request):
        raise Forbidden(CROSS_ORIGIN)
    tenant = sandbox.registry.tenants.get(DEMO_TENANT)
    if tenant is None:
        raise TenantNotFound(NO_DEMO)
    return tenant


def _same_origin(request: web.Request) -> bool:
    """A browser says where a request comes from: Sec-Fetch-Site, and Origin on a POST (with
    no default port, which a Host header may carry)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return False
    sent = request.headers.get("origin")
    return sent is None or sent == origin(request)


# -- plain words ----------------------------------------------------------------------------

PRODUCTS = {"deposit": "Deposit switch", "verify": "Income and employment verification",
            "switch": "Payment method switch", "present": "Account details",
            "identify": "Identity check", "tax": "Tax documents", "pay-link": "Pay link"}
DATA = {"statements": "pay statements", "income": "income", "timesheets": "timesheets",
        "employment": "employment", "identity": "identity", "taxes": "tax forms",
        "deposit-accounts": "deposit accounts"}
CHANGES = {"statements-added": "New pay statements from {company}",
           "income-updated": "Income updated at {company}",
           "timesheets-added": "New timesheets from {company}",
           "employment-updated": "Employment updated at {company}",
           "identity-updated": "Identity updated at {company}",
           "taxes-added": "New tax forms from {company}",
           "deposit-accounts-added": "New deposit account at {company}",
           "deposit-accounts-updated": "Deposit account updated at {company}",
           "deposit-accounts-removed": "Deposit account removed at {company}",
           "deposit-switch-removed": "Deposit switch removed at {company}",
           "linked-account-connected": "Payroll account at {company} connected",
           "earn-user-data": "Earnings of this pay period from {company}",
           "company-created": "{company} added to the catalog",
           "company-updated": "{company} updated in the catalog",
           "company-deleted": "{company} removed from the catalog",
           "pii-data-deleted": "Personal data deleted, as the retention rule asks"}


def summary(body: dict[str, Any], tenant: Tenant, aggregator: str) -> str:
    """What an event says, as a product manager would put it: "Deposit switch completed
    at Walmart", "Signed in to Walmart", "Payroll data synced: income from Walmart"."""
    kind = str(body.get("eventType", ""))
    data = body.get("data") if isinstance(body.get("data"), dict) else {}
    company = _company_name(body, data, tenant)
    given = str(body.get("product") or "task")
    product = PRODUCTS.get(given, given.capitalize())
    reason = _words(data.get("reason") or data.get("failureReason") or "")
    if kind == "task-status-updated":
        if data.get("status") == "completed":
            return f"{product} completed at {company}"
        return f"{product} failed at {company}" + (f" ({reason})" if reason else "")
    if kind == "task-authentication-status-updated":
        return (f"Signed in to {company}" if data.get("authenticated")
                else f"No longer signed in to {company}")
    if kind == "task-status-patched":
        return f"{product} at {company} changed to {data.get('status')}"
    if kind == "task-workflow-finished":
        if data.get("status") == "completed":
            return f"Connection to {company} finished"
        return f"Connection to {company} failed" + (f" ({reason})" if reason else "")
    if kind.endswith("-synced") and kind.removesuffix("-synced") in DATA:
        return f"Payroll data synced: {DATA[kind.removesuffix('-synced')]} from {company}"
    if kind in CHANGES:
        return CHANGES[kind].format(company=company)
    if kind == "linked-account-disconnected":
        return f"Payroll account at {company} disconnected" + (f" ({reason})" if reason else "")
    if kind == "maintenance-mode":
        if data.get("status") == "operational":
            return f"{company} is back from maintenance"
        products = ", ".join(str(p) for p in data.get("products") or ())
        return f"{company} is under maintenance" + (f" for {products}" if products else "")
    if kind == "pay-link-accounts-updated":
        return f"Bill accounts updated ({len(data.get('accounts') or ())})"
    if kind == "employer-classification-completed":
        return f"Employer matches ready ({data.get('matches', 0)})"
    if kind == "recurring-transaction-detection-completed":
        return f"Recurring transactions found ({data.get('recurringTransactions', 0)})"
    if kind == f"{aggregator}-error":
        return f"Bank link error: {data.get('errorCode') or 'unknown'}"
    return _words(kind).capitalize() or "An event"


def _company_name(body: dict[str, Any], data: dict[str, Any], tenant: Tenant) -> str:
    company = body.get("company")
    if isinstance(company, dict) and company.get("name"):
        return str(company["name"])
    found = tenant.companies.get(data["companyId"]) if isinstance(data.get("companyId"), str) \
        else None
    return found.name if found is not None else "the company"


def _words(code: Any) -> str:
    return str(code).replace("-", " ")
