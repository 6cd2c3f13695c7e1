"""The simulated client SDK: the script, the hosted flow and the flow's own calls."""

from __future__ import annotations

import json
from aiohttp import web

from ..domain import sdk
from ..domain.companies import full_record
from ..errors import Unauthorized
from ..keys import ENGINE, STORE, public_token_of, tenant_of
from ..middleware import read_json
from ..schemas.api import (SDK_COMPANY_REQUEST, SDK_LEAVE_REQUEST, SDK_LOGIN_REQUEST,
                           SDK_SESSION_REQUEST)
from ..static import static_text

routes = web.RouteTableDef()

TOKEN_MISMATCH = "The configuration's publicToken does not match the token issued for this user."
TOKEN_REQUIRED = "The hosted flow authenticates with the user's public token (x-public-token)."
STATIC_TYPES = {"flow.js": "application/javascript", "flow.css": "text/css"}


@routes.get("/sdk/transact.js")
async def transact_js(request: web.Request) -> web.Response:
    prefix = request.app[STORE].service.sdk_prefix
    return web.Response(text=static_text("transact.js").replace("__PREFIX__", prefix),
                        content_type="application/javascript", headers=_no_store())


@routes.get("/sdk/{name:flow\\.(js|css)}")
async def flow_asset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    return web.Response(text=static_text(name), content_type=STATIC_TYPES[name], headers=_no_store())


@routes.get("/initialize/{config}")
async def initialize(request: web.Request) -> web.Response:
    """The hosted flow's page for a configuration (base64 of JSON in the path)."""
    bootstrap: dict = {"prefix": request.app[STORE].service.sdk_prefix,
                       "messages": sdk.user_messages()}
    status = 200
    try:
        bootstrap["config"] = sdk.decode_config(request.match_info["config"])
    except sdk.ApiError as error:
        bootstrap["error"] = {"code": error.code, "message": error.message}
        status = error.status
    # Inside <script type="application/json">: nothing may close the element.
    embedded = json.dumps(bootstrap).replace("<", "\\u003c").replace(">", "\\u003e")
    page = static_text("flow.html").replace("__BOOTSTRAP__", embedded)
    return web.Response(text=page, content_type="text/html", status=status, headers=_no_store())


@routes.post("/sdk/session")
async def session(request: web.Request) -> web.Response:
    """Where the flow starts: the token must match the configuration's; the deeplink is
    resolved (invalid-company-id) and a linkedAccount opens its reconnect flow."""
    token = _token(request)
    config = (await read_json(request, SDK_SESSION_REQUEST))["config"]
    if config["publicToken"] != token.public_token:
        raise Unauthorized(TOKEN_MISMATCH, code="public-token-mismatch")
    tenant = tenant_of(request)
    engine = request.app[ENGINE]
    company = sdk.deeplink_company(tenant, config)
    linked = None
    if config.get("linkedAccount"):
        account = engine.linked_accounts.require(tenant, config["linkedAccount"], "$.config.linkedAccount")
        if account.identifier != token.identifier:
            raise Unauthorized("The linked account is not this user's.", code="linked-account-not-yours")
        linked, company = account.record(), tenant.companies.require(account.company_id)
    step = (config.get("deeplink") or {}).get("step", "search-company")
    return web.json_response({"data": {
        "step": step, "user": {"identifier": token.identifier},
        "company": full_record(company, tenant.manual_deposits) if company else None,
        "refusal": sdk.refusal(tenant, company, config.get("tasks")),
        "linkedAccount": linked}})


@routes.post("/sdk/company")
async def company(request: web.Request) -> web.Response:
    """The company the user picked in the flow, with `refusal` (the API's error code and
    message) when the configured tasks cannot start there, e.g. a product under
    maintenance (spec: Company status)."""
    _token(request)
    body = await read_json(request, SDK_COMPANY_REQUEST)
    tenant = tenant_of(request)
    chosen, refusal = sdk.company_for_flow(tenant, body["companyId"], body.get("tasks"))
    return web.json_response({"data": {"company": full_record(chosen, tenant.manual_deposits),
                                       "refusal": refusal}})


@routes.post("/sdk/login")
async def login(request: web.Request) -> web.Response:
    """Sign in with sandbox credentials: starts the configured tasks, or answers an MFA
    challenge (`{mfa: {type, prompt}}`, no task yet) that the page re-submits with
    `mfaAnswer`."""
    token = _token(request)
    body = await read_json(request, SDK_LOGIN_REQUEST)
    outcome = sdk.login(request.app[ENGINE], tenant_of(request), token, body)
    if outcome.mfa is not None:
        return web.json_response({"data": {"mfa": outcome.mfa.record()}})
    tasks = outcome.tasks
    return web.json_response({"data": {"id": tasks[0].id, "status": tasks[0].status,
                                       "taskWorkflow": outcome.workflow.id,
                                       "tasks": [{"id": t.id, "product": t.product,
                                                  "scenario": t.scenario} for t in tasks]}})


@routes.post("/sdk/leave")
async def leave(request: web.Request) -> web.Response:
    """The user left the hosted flow before its task resolved (close button, page gone):
    the tasks' events carry user.connected false from now on."""
    token = _token(request)
    body = await read_json(request, SDK_LEAVE_REQUEST)
    tasks = sdk.leave(request.app[ENGINE], tenant_of(request), token, body["taskId"])
    return web.json_response({"data": {"taskWorkflow": tasks[0].workflow, "tasks": [
        {"id": t.id, "status": t.status, "connected": t.connected} for t in tasks]}})


@routes.get("/sdk/deposit-form.pdf")
async def deposit_form(request: web.Request) -> web.Response:
    """generate-deposit-pdf: a direct deposit authorization form for the user's employer.
    Opened in a new tab, so the public token comes in the query."""
    tenants = request.app[STORE].tenants
    tenant, token = tenants.authenticate_public_token(request.query.get("publicToken", ""))
    company = tenant.companies.require(request.query.get("companyId", ""))
    pdf = sdk.deposit_form_pdf(company.name, token.identifier, tenant.clock.now().date())
    return web.Response(body=pdf, content_type="application/pdf", headers={
        "content-disposition": f'inline; filename="direct-deposit-{company.id}.pdf"'})


def _token(request: web.Request):
    token = public_token_of(request)
    if token is None:
        raise Unauthorized(TOKEN_REQUIRED, code="public-token-required")
    return token


def _no_store() -> dict[str, str]:
    return {"cache-control": "no-store"}
