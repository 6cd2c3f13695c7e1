"""The simulated client SDK: the script, the hosted flow and the flow's own calls."""

from __future__ import annotations

import hashlib
import json

from aiohttp import web

from ...domain.flow import sdk
from ...domain.companies.companies import full_record, search_record
from ...domain.flow.flow_words import flow_language, flow_page
from ...errors import ApiError, CompanyNotFound, InvalidConfig, LinkedAccountNotYours, field_detail
from ...domain.shapes import UNSET, Command, Maybe, View, given, of, raw, schema_of, view_of
from ...domain.tasks.tasks import TaskCreated, TaskRecord
from ...schemas.api import (FlowTasks, SdkCompanyRequest, SdkConfig, SdkLeaveRequest,
                           SdkLoginRequest, SdkMfaChallenge, SdkSessionRequest)
from ...validate import schema_errors
from ...domain.accounts.data_records import LinkedAccountRecord
from ...schemas.responses import (LeftTask, Refusal, SdkCompany, SdkLeft, SdkSession, SdkWorkflow,
                                 SessionAccount, SessionUser)
from ...static import static_text
from ..operations import NO_STORE, Auth, operation, serve_file

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


for _name, _type in (("flow.js", "application/javascript"), ("flow.css", "text/css")):
    serve_file(f"/sdk/{_name}",
               f"The hosted flow's {'script' if _name.endswith('.js') else 'styles'}", _type)


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
           auth=Auth.PUBLIC_TOKEN,
           body=SdkSessionRequest, response=SdkSession, errors=(404,))
async def session(tenant, token, body, sandbox) -> dict:
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
    step = (config.get("deeplink") or {}).get("step", "search-company")
    return SdkSession(step=step, user=SessionUser(identifier=token.identifier),
                      company=full_record(company, tenant.manual_deposits) if company else None,
                      refusal=_refusal(sdk.refusal(tenant, company, config.get("tasks"))),
                      linked_account=linked)


@operation("POST", "/sdk/company", "The company the user picked, and "
           "whether the tasks can start there", auth=Auth.PUBLIC_TOKEN, body=SdkCompanyRequest,
           response=SdkCompany, errors=(404,))
async def company(tenant, body) -> dict:
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
           body=SdkPopularRequest, response=SdkPopular)
async def popular(tenant, body) -> dict:
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
           errors=(403, 404, 429))
async def login(tenant, token, body, sandbox) -> dict:
    """Sign in with sandbox credentials: starts the configured tasks, or answers an MFA
    challenge (`{mfa: {type, prompt}}`, no task yet) that the page re-submits with
    `mfaAnswer`."""
    outcome = sdk.login(tenant, token, body)
    if outcome.mfa is not None:
        return SdkMfaChallenge(mfa=outcome.mfa)
    return TaskCreated.of(outcome.workflow, outcome.tasks)


@operation("POST", "/sdk/leave", "The user leaves the flow before the outcome",
           auth=Auth.PUBLIC_TOKEN, body=SdkLeaveRequest,
           response=SdkLeft, errors=(404,))
async def leave(tenant, token, body, sandbox) -> dict:
    """The user left the hosted flow before its task resolved (close button, page gone):
    the tasks' events carry user.connected false from now on."""
    tasks = sdk.leave(tenant, token, body.task_id)
    return SdkLeft(task_workflow=tasks[0].workflow,
                   tasks=[view_of(LeftTask, task) for task in tasks])


@operation("GET", "/sdk/task/{taskId}", "The progress of a task the flow started",
           auth=Auth.PUBLIC_TOKEN, response=TaskRecord,
           errors=(404,))
async def flow_task(tenant, token, params, sandbox) -> dict:
    """The hosted flow polls its task here with the user's public token: the real API's
    task reads need API keys (real-service-facts 1), which a browser never holds."""
    return TaskRecord.of(tenant.tasks.get_task(params["taskId"], identifier=token.identifier))


@operation("GET", "/sdk/workflow/{taskWorkflow}", "Every task the flow's sign-in started",
           auth=Auth.PUBLIC_TOKEN, response=SdkWorkflow, errors=(404,))
async def flow_workflow(tenant, token, params, sandbox) -> dict:
    """The hosted flow follows its workflow here: each task as GET /task/{taskId} shows it,
    with `highLatency` once it has signed in for longer than the flow waits quietly; a
    task a `finish` option holds back is `pending` until it starts."""
    return SdkWorkflow(**sdk.flow_workflow(tenant, token, params["taskWorkflow"]))


@operation("GET", "/sdk/linked-accounts", "The user's linked accounts (the account step)",
           auth=Auth.PUBLIC_TOKEN, response=list[LinkedAccountRecord])
async def flow_linked_accounts(tenant, token, sandbox) -> list:
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
    return web.Response(body=pdf, content_type="application/pdf", headers={
        "content-disposition": f'inline; filename="direct-deposit-{company.id}.pdf"'})
