"""The simulated client SDK: the script, the hosted flow and the flow's own calls."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from aiohttp import web

from ...clock import isoformat
from ...domain.flow import sdk
from ...domain.flow.autopilot import Autopilot
from ...domain.flow.callbacks import CALLBACK_EVENTS
from ...domain.companies.companies import full_record, search_record
from ...domain.flow.flow_words import flow_language, flow_page
from ...errors import ApiError, CompanyNotFound, InvalidConfig, LinkedAccountNotYours, field_detail
from ...domain.shapes import (UNSET, Command, Maybe, View, choice, given, of, raw, schema_of,
                             view_of)
from ...domain.tasks.views import TaskCreated, TaskRecord
from ...schemas.api import FlowTasks
from ...schemas.sdk import SdkCompanyRequest, SdkConfig, SdkLeaveRequest, SdkLoginRequest, SdkMfaChallenge, SdkSessionRequest
from ...validate import schema_errors
from ...domain.accounts.data_records import LinkedAccountRecord
from ...schemas.responses import (LeftTask, Refusal, SdkCompany, SdkLeft, SdkSession, SdkWorkflow,
                                 SessionAccount, SessionUser)
from ...static import static_text
from ..operations import CONTROL, NO_STORE, Auth, operation, serve_script_and_styles
from ..examples import WALMART, Example, From
from ..render import pdf_response

class DepositFormQuery(Command, kw_only=True):
    company_id: of(str, min_length=1)
    public_token: Maybe[of(str, "The user's public token (the form opens in a new tab, so it "
                           "comes in the query).")] = UNSET


class SdkPopularRequest(Command, kw_only=True):
    scope: Maybe[of(str, "The configuration's scope (as the flow's search sends it).",
                    min_length=1)] = UNSET
    tasks: Maybe[FlowTasks] = UNSET
    payroll_only: of(bool, "Payroll providers only (deeplink step search-payroll).") = False


SearchCompanies = list[raw({"$ref": "#/components/schemas/SearchCompany"})]


class SdkPopular(View, kw_only=True):
    companies: SearchCompanies
    payroll_providers: SearchCompanies
_FLOW_TASKS = [{"operation": "deposit"}]  # the examples' (/docs)
UNKNOWN_LOGO = ("No company of the shared catalog has the id {company_id!r} (a tenant's own "
                "companies have no generated logo).")
# A logo is a pure function of the catalog, which does not change while the server runs.
LOGO_HEADERS = {"cache-control": "public, max-age=3600",
                "content-security-policy": "default-src 'none'"}


@operation("GET", "/sdk/transact.js", "The SDK's script (it opens the hosted flow)",
           auth=Auth.NONE, content_type="application/javascript")
async def transact_js(sandbox) -> web.Response:
    """Defines the service profile's `sdkGlobal` (`Transact`; the vendor's name in a profile
    with the vendor's names, docs/sdk.md) with `transact(...)` and `Product`."""
    service = sandbox.registry.service
    script = (static_text("transact.js").replace("__PREFIX__", service.sdk_prefix)
              .replace("__GLOBAL__", service.sdk_global))
    return web.Response(text=script, content_type="application/javascript", headers=NO_STORE)


serve_script_and_styles("/sdk/flow", "hosted flow's")


@operation("GET", "/initialize/{config}", "The hosted flow's page for a "
           "configuration (base64 of JSON, standard or URL-safe alphabet)", auth=Auth.NONE,
           content_type="text/html", errors=(400,), rest="config")
async def initialize(params, sandbox) -> web.Response:
    """A configuration the page cannot read (not base64 of a JSON object, or a field of the
    wrong type) opens the flow's error screen, whose close tells the host `invalid-config`
    (never a bare error body). `config` takes the rest of the path: a browser's `btoa`
    writes `/`."""
    bootstrap: dict = {"prefix": sandbox.registry.service.sdk_prefix, "flow": sdk.flow_hints()}
    status, config = 200, None
    try:
        config = sdk.decode_config(params["config"])
        bootstrap["config"] = sdk.flow_config(checked_config(config))
    except ApiError as error:
        bootstrap["error"] = {"code": error.code, "message": error.message}
        status = error.status
    # The config's language even when another field is wrong (its error screen speaks it).
    language = flow_language(config)
    bootstrap["messages"] = sdk.user_messages(language)
    # Inside <script type="application/json">: nothing may close the element.
    embedded = json.dumps(bootstrap, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e")
    page = flow_page(static_text("flow.html"), language).replace("__BOOTSTRAP__", embedded)
    return web.Response(text=page, content_type="text/html", status=status, headers=NO_STORE)


def checked_config(config: dict) -> dict:
    """The configuration of /initialize/{config}, checked against the published fields."""
    faults = schema_errors(config, schema_of(SdkConfig))
    if faults:
        raise InvalidConfig(sdk.INVALID_CONFIG_FIELDS,
                            details=[field_detail(path, message, location="path")
                                     for path, message in faults])
    return config


@operation("POST", "/sdk/session", "Start the hosted flow (its deeplink resolved)",
           auth=Auth.PUBLIC_TOKEN, body=SdkSessionRequest, errors=(404,),
           example=Example(
               {"config": {"publicToken": "public-token-of-POST-access-token",
                           "tasks": _FLOW_TASKS,
                           "deeplink": {"step": "login-company", "companyId": WALMART}}},
               after=From("POST", "/access-token",
                          fields={"/config/publicToken": "$response.body#/data/publicToken"})))
async def session(tenant, token, body, sandbox) -> SdkSession:
    """Where the flow starts, with the token of the handshake (a configuration that still
    carries one must carry the same); the deeplink is resolved (invalid-company-id) and a
    linkedAccount opens its reconnect flow."""
    config = body.config
    sdk.check_token(config, token)
    company = sdk.deeplink_company(tenant, config)
    linked = None
    if config.get("linkedAccount"):
        account = tenant.accounts.require(config["linkedAccount"],
                                                  "$.config.linkedAccount")
        if account.identifier != token.identifier:
            raise LinkedAccountNotYours("The linked account is not this user's.")
        linked = tenant.accounts.record(
            account, SessionAccount,
            credentials_required=tenant.accounts.needs_credentials(account))
        company = tenant.companies.require(account.company_id)
    refused = _refusal(sdk.refusal(tenant, company, config.get("tasks")))
    step = (config.get("deeplink") or {}).get("step", "search-company")
    if linked is not None:  # a reconnect opens at its company: the sign-in, or at once the
        # task's progress when the account resumes without credentials (flow.js: start)
        step = (RESUMED_STEP if refused is None and linked.credentials_required is False
                else "login-company")
    return SdkSession(step=step, user=SessionUser(identifier=token.identifier),
                      company=full_record(company, tenant.manual_deposits) if company else None,
                      refusal=refused, linked_account=linked)


# The step a linked account's reconnect opens at when it needs no credentials: the task's
# progress (no deeplink step names it: Initialized.step says where the flow opened).
RESUMED_STEP = "task-progress"


@operation("POST", "/sdk/company", "The company the user picked, and "
           "whether the tasks can start there", auth=Auth.PUBLIC_TOKEN, body=SdkCompanyRequest,
           errors=(404,), example=Example({"companyId": WALMART, "tasks": _FLOW_TASKS}))
async def company(tenant, body) -> SdkCompany:
    """The company the user picked in the flow, with `refusal` (the API's error code and
    message) when the configured tasks cannot start there, e.g. a product under
    maintenance (spec: Company status)."""
    chosen, refusal = sdk.company_for_flow(tenant, body.company_id, given(body.tasks))
    return SdkCompany(company=full_record(chosen, tenant.manual_deposits),
                      refusal=_refusal(refusal))


def _refusal(refusal: dict | None) -> Refusal | None:
    """Why the flow cannot start (the API's error code and message), or None."""
    return None if refusal is None else Refusal(**refusal)


@operation("POST", "/sdk/popular", "Popular employers and payroll providers, before the user types",
           auth=Auth.PUBLIC_TOKEN,
           body=SdkPopularRequest, example=Example({"scope": "user-link"}))
async def popular(tenant, body) -> SdkPopular:
    """Filtered as the flow's own search: the configured scope and operations, never a
    disabled company. `payrollOnly` (the search-payroll step) leaves `companies` empty."""
    found = sdk.popular_companies(tenant.companies, tenant.manual_deposits,
                                  scope=given(body.scope), tasks=given(body.tasks),
                                  payroll_only=body.payroll_only)
    return {key: [search_record(c, tenant.manual_deposits) for c in companies]
            for key, companies in found.items()}


@operation("GET", "/sdk/logo/{companyId}.svg", "A company's logo (its monogram on its "
           "brand colour)", auth=Auth.NONE, content_type="image/svg+xml",
           errors=(404,))
async def logo(params, request, sandbox) -> web.Response:
    """Drawn from the shared catalog's name and `branding.color` (the catalog's logo URLs
    point at hosts that do not exist, and the hosted flow fetches nothing from outside).
    Public, for an <img>, so a tenant's own companies are not drawn: nothing of a tenant
    leaves it without its credentials."""
    company = sandbox.registry.catalog.get(params["companyId"])
    if company is None:
        raise CompanyNotFound(UNKNOWN_LOGO.format(company_id=params["companyId"]))
    from ...domain.companies.logos import company_logo_svg  # loaded on the first logo, not at start

    svg = company_logo_svg(company.name, (company.branding or {}).get("color"), company.id)
    etag = '"' + hashlib.sha256(svg.encode()).hexdigest()[:20] + '"'
    if request.headers.get("if-none-match") == etag:
        return web.Response(status=304, headers={**LOGO_HEADERS, "etag": etag})
    return web.Response(text=svg, content_type="image/svg+xml",
                        headers={**LOGO_HEADERS, "etag": etag})


@operation("POST", "/sdk/login", "Sign in at the company (the tasks start)",
           auth=Auth.PUBLIC_TOKEN, body=SdkLoginRequest,
           response=lambda: {"oneOf": [schema_of(TaskCreated), schema_of(SdkMfaChallenge)]},
           errors=(403, 404, 429),
           example=Example({"companyId": WALMART, "username": "test-good",
                            "password": "any password", "tasks": _FLOW_TASKS}))
async def login(tenant, token, body, sandbox) -> dict:
    """Sign in with sandbox credentials: starts the configured tasks, or answers an MFA
    challenge (`{mfa: {type, prompt}}`, no task yet) that the page re-submits with
    `mfaAnswer`."""
    outcome = sdk.login(tenant, token, body)
    if outcome.mfa is not None:
        return SdkMfaChallenge(mfa=outcome.mfa)
    return TaskCreated.of(outcome.workflow, outcome.tasks)


@operation("POST", "/sdk/leave", "The user leaves the flow before the outcome",
           auth=Auth.PUBLIC_TOKEN, body=SdkLeaveRequest, errors=(404,),
           example=Example({"taskId": "6410c0ffee0000000000a001"}, after=From(
               "POST", "/task/create", fields={"/taskId": "$response.body#/data/id"})))
async def leave(tenant, token, body, sandbox) -> SdkLeft:
    """The user left the hosted flow before its task resolved (close button, page gone):
    the tasks' events carry user.connected false from now on."""
    tasks = sdk.leave(tenant, token, body.task_id)
    return SdkLeft(task_workflow=tasks[0].workflow,
                   tasks=[view_of(LeftTask, task) for task in tasks])


@operation("GET", "/sdk/task/{taskId}", "The progress of a task the flow started",
           auth=Auth.PUBLIC_TOKEN, errors=(404,))
async def flow_task(tenant, token, params, sandbox) -> TaskRecord:
    """The hosted flow polls its task here with the user's public token: the real API's
    task reads need API keys (real-service-facts 1), which a browser never holds."""
    return TaskRecord.of(tenant.tasks.get_task(params["taskId"], identifier=token.identifier))


@operation("GET", "/sdk/workflow/{taskWorkflow}", "Every task the flow's sign-in started",
           auth=Auth.PUBLIC_TOKEN, errors=(404,))
async def flow_workflow(tenant, token, params, sandbox) -> SdkWorkflow:
    """The hosted flow follows its workflow here: each task as GET /task/{taskId} shows it,
    with `highLatency` once it has signed in for longer than the flow waits quietly; a
    task a `finish` option holds back is `pending` until it starts."""
    return SdkWorkflow(**sdk.flow_workflow(tenant, token, params["taskWorkflow"]))


@operation("GET", "/sdk/linked-accounts", "The user's linked accounts (the account step)",
           auth=Auth.PUBLIC_TOKEN)
async def flow_linked_accounts(tenant, token, sandbox) -> list[LinkedAccountRecord]:
    """The accounts the `account` deeplink step lists, for the token's own user (an unknown
    user has none yet)."""
    if token.identifier not in tenant.identity.users:
        return []
    service = tenant.accounts
    return [service.record(account)
            for account in service.accounts_of(token.identifier)]


@operation("GET", "/sdk/deposit-form.pdf", "A direct deposit form for the user's employer (PDF)",
           auth=Auth.NONE,
           query=DepositFormQuery, content_type="application/pdf", errors=(401, 404))
async def deposit_form(query, sandbox) -> web.Response:
    """Opened in a new tab, so the public token comes in the query."""
    tenant, token = sandbox.registry.tenants.authenticate_public_token(
        given(query.public_token, ""))
    company = tenant.companies.require(query.company_id)
    pdf = sdk.deposit_form_pdf(company.name, token.identifier, tenant.clock.now().date())
    return pdf_response(pdf, f"direct-deposit-{company.id}.pdf")


# -- the autopilot (domain/autopilot.py) and what the flow told the host (domain/callbacks.py)


class AutopilotBinding(View, kw_only=True):
    identifier: of(str, min_length=1)
    autopilot: of(Autopilot | None, "What the user does in the hosted flow (null: nothing "
                  "bound; the user clicks).")


class AutopilotUnbound(View, kw_only=True):
    identifier: of(str, min_length=1)
    removed: of(bool, "False: no autopilot was bound.")


@operation("PUT", "/_sandbox/users/{identifier}/autopilot", "Bind what the user does in the "
           "hosted flow: it plays the steps itself", body=Autopilot, errors=(422, 429), **CONTROL,
           example=Example({"company": WALMART, "username": "test-auth-expired"}))
async def bind_autopilot(tenant, params, body) -> AutopilotBinding:
    """When the customer's frontend opens the hosted flow for this user, the page searches
    for and picks `company`, signs in with `username`, answers an MFA challenge with `mfa`,
    chooses `distribution` where asked, and ends on the success or failure screen as the
    user would (Done, or Close), each after `pause` seconds of the tenant's clock. A company
    the tenant lacks, a product it or the account does not offer, or a username whose
    scenario does not fit the product is refused (422, the field at fault) and nothing
    changes."""
    sdk.bind_autopilot(tenant, params["identifier"], body)
    return AutopilotBinding(identifier=params["identifier"], autopilot=body)


@operation("GET", "/_sandbox/users/{identifier}/autopilot", "The user's autopilot", **CONTROL)
async def read_autopilot(tenant, params) -> AutopilotBinding:
    identifier = params["identifier"]
    return AutopilotBinding(identifier=identifier, autopilot=tenant.autopilots.get(identifier))


@operation("DELETE", "/_sandbox/users/{identifier}/autopilot", "Unbind the user's autopilot "
           "(the flow waits for clicks again)", **CONTROL)
async def unbind_autopilot(tenant, params) -> AutopilotUnbound:
    identifier = params["identifier"]
    return AutopilotUnbound(identifier=identifier, removed=tenant.autopilots.unbind(identifier))


_SENTENCES = {"type": "object", "additionalProperties": {"type": "string"}}
# The sentences the hosted page shows (sdk.user_messages), in a language.
USER_MESSAGES = {"type": "object", "description": "The flow's sentences in the autopilot's "
                 "language: failure reasons and errors by code, the fallback, the page's words.",
                 "properties": {"reasons": _SENTENCES, "errors": _SENTENCES,
                                "fallback": {"type": "string"}, "words": _SENTENCES}}


class SdkAutopilot(View, kw_only=True):
    autopilot: of(Autopilot | None, "The user's autopilot (null: none).")
    now: of(float, "The tenant's clock, in seconds: the page's pauses follow it.")
    company_name: Maybe[of(str, "The autopilot's company's name (what it searches for).")] = UNSET
    messages: Maybe[raw(USER_MESSAGES)] = UNSET


@operation("GET", "/sdk/autopilot", "What the flow's user does, if an autopilot is bound",
           auth=Auth.PUBLIC_TOKEN)
async def flow_autopilot(tenant, token) -> SdkAutopilot:
    """The hosted page asks once the handshake gave it the token, then again for the
    tenant's clock while it pauses."""
    return SdkAutopilot(**sdk.flow_autopilot(tenant, token))


class CallbackMessage(Command, kw_only=True):
    event: choice(*CALLBACK_EVENTS)
    payload: of(dict[str, Any], "What the host page's callback received.")


class SdkCallbacksRequest(Command, kw_only=True):
    flow: of(str, "The flow's run (its handshake id).", min_length=1, max_length=64)
    messages: of(list[CallbackMessage], "In the order the page posted them.", min_length=1,
                 max_length=100)


class SdkCallbacksRecorded(View, kw_only=True):
    recorded: of(int, ge=0)


@operation("POST", "/sdk/callbacks", "What the hosted flow posted to the host page",
           auth=Auth.PUBLIC_TOKEN, body=SdkCallbacksRequest,
           example=Example({"flow": "3f2a9c1b", "messages": [{"event": "interaction", "payload": {
               "name": "Initialized", "value": {"step": "search-company"}, "language": "en",
               "product": "deposit"}}]}))
async def record_callbacks(tenant, token, body) -> SdkCallbacksRecorded:
    """The flow's page sends each message it posts to the host here too (in order, a few
    at a time), for GET /_sandbox/sdk/callbacks."""
    added = tenant.callbacks.record(isoformat(tenant.clock.timestamp()), token.identifier,
                                    body.flow, [(m.event, m.payload) for m in body.messages])
    return SdkCallbacksRecorded(recorded=len(added))


class CallbacksQuery(Command, kw_only=True):
    identifier: Maybe[of(str, "Only this user's flows.", min_length=1)] = UNSET
    after: of(int, "Only those after this id (the last one read).", ge=0) = 0
    limit: of(int, ge=1, le=500) = 500


# What a host page's callback receives (real-service-facts 14): an interaction's name and
# value with the flow's language, products, customer and company; the end's task, reason,
# handoff and data.tasks; a data request's fields; an open-url's url.
_SCALAR = {"type": ["string", "number", "boolean", "null"]}
CALLBACK_PAYLOAD = {
    "type": "object", "description": "What the host page's callback received, as it received it.",
    "properties": {
        "name": {"type": "string", "description": "An interaction's name."},
        "value": {"type": "object", "description": "An interaction's details.",
                  "additionalProperties": _SCALAR},
        **{name: {"type": "string"} for name in (
            "language", "product", "additionalProduct", "customer", "company", "url")},
        "taskId": {"type": ["string", "null"]},
        "reason": {"type": "string", "description": "Why the flow closed."},
        "handoff": {"type": ["string", "null"], "description": "The view the host shows itself."},
        "fields": {"type": "array", "items": {"type": "string"},
                   "description": "What a data request asks the host for."},
        "data": {"type": "object", "properties": {"tasks": {"type": "array", "items": {
            "type": "object", "properties": {
                "taskId": {"type": "string"}, "product": {"type": "string"},
                "status": {"type": "string"}, "reason": {"type": "string"}}}}}}}}


class CallbackRecord(View, kw_only=True):
    id: of(int, ge=1)
    time: of(str, "The tenant's clock when the sandbox heard of it.")
    identifier: str
    flow: of(str, "The flow's run (its handshake id): one opening of the flow.")
    event: choice(*CALLBACK_EVENTS)
    payload: raw(CALLBACK_PAYLOAD)


@operation("GET", "/_sandbox/sdk/callbacks", "What the hosted flow told the host page, oldest "
           "first", query=CallbacksQuery, **CONTROL)
async def list_callbacks(tenant, query) -> list[CallbackRecord]:
    """Every message the hosted flow posted to the customer's page (onInteraction,
    onFinish, onClose, onDataRequest, onOpenUrl: `event` and `payload`), in the order the
    page posted them; `after` the last id read gives the new ones."""
    return [view_of(CallbackRecord, entry) for entry in tenant.callbacks.query(
        identifier=given(query.identifier), after=query.after, limit=query.limit)]
