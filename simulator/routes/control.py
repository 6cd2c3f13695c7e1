"""The control plane under /_sandbox: the sandbox's console, scoped to the caller's tenant."""

from __future__ import annotations

from aiohttp import web

from ..domain import company_admin
from ..domain.companies import full_record
from ..keys import DISPATCHER, ENGINE, JOURNAL, RUNNERS, STORE, tenant_of
from ..middleware import read_json
from ..schemas.api import (CARD_TOKEN_RECREATION_REQUEST, CLOCK_ADVANCE_REQUEST, COMPANY_CREATE_REQUEST, COMPANY_STATUS_REQUEST,
                           COMPANY_UPDATE_REQUEST, EVENTS_QUERY, JOURNAL_QUERY,
                           SCENARIO_BINDING_REQUEST, TASKS_QUERY, TENANT_REQUEST)
from ..static import static_text
from ..validation import parse_query, parse_time
from .webhooks import event_record

routes = web.RouteTableDef()


@routes.post("/_sandbox/tenants")
async def create_tenant(request: web.Request) -> web.Response:
    body = await read_json(request, TENANT_REQUEST)
    tenant = request.app[STORE].create_tenant(body)
    return web.json_response({"data": tenant.describe()}, status=201)


@routes.post("/_sandbox/reset")
async def reset(request: web.Request) -> web.Response:
    tenant = request.app[STORE].reset_tenant(tenant_of(request))
    request.app[JOURNAL].clear(tenant.name)
    return web.json_response({"data": tenant.describe()})


@routes.get("/_sandbox/requests")
async def requests_journal(request: web.Request) -> web.Response:
    query = parse_query(request.query, JOURNAL_QUERY)
    entries = request.app[JOURNAL].query(tenant_of(request).name, path=query.get("path"),
                                         method=query.get("method"), status=query.get("status"),
                                         limit=query["limit"])
    return web.json_response({"data": [e.record() for e in entries]})


# -- the clock ----------------------------------------------------------------------------

@routes.get("/_sandbox/clock")
async def clock(request: web.Request) -> web.Response:
    return web.json_response({"data": _clock_record(tenant_of(request))})


@routes.post("/_sandbox/clock/advance")
async def advance_clock(request: web.Request) -> web.Response:
    body = await read_json(request, CLOCK_ADVANCE_REQUEST)
    tenant = tenant_of(request)
    ran = await request.app[RUNNERS][tenant].advance(body["seconds"])
    return web.json_response({"data": {**_clock_record(tenant), "jobsRun": ran}})


@routes.post("/_sandbox/clock/run-until-idle")
async def run_until_idle(request: web.Request) -> web.Response:
    tenant = tenant_of(request)
    ran = await request.app[RUNNERS][tenant].run_until_idle()
    return web.json_response({"data": {**_clock_record(tenant), "jobsRun": ran}})


def _clock_record(tenant) -> dict:
    timeline = tenant.timeline
    return {**tenant.clock.describe(), "pendingJobs": timeline.busy,
            "backgroundJobs": len(timeline) - timeline.busy, "idle": timeline.idle}


# -- events -------------------------------------------------------------------------------

@routes.get("/_sandbox/events")
async def list_events(request: web.Request) -> web.Response:
    query = parse_query(request.query, EVENTS_QUERY)
    since = parse_time(query["since"], "$.since") if "since" in query else None
    tenant = tenant_of(request)
    events = tenant.events.query(event_type=query.get("type"), user=query.get("user"),
                                 task=query.get("task"), since=since)
    if "delivery" in query:
        state = request.app[DISPATCHER].state(tenant)
        events = [e for e in events if state.state_of(e.id) == query["delivery"]]
    records = [event_record(request.app, tenant, e) for e in events[-query["limit"]:]]
    return web.json_response({"data": records, "total": len(events)})


@routes.get("/_sandbox/events/{eventId}")
async def get_event(request: web.Request) -> web.Response:
    tenant = tenant_of(request)
    event = tenant.events.get(request.match_info["eventId"])
    return web.json_response({"data": event_record(request.app, tenant, event)})


# -- scenarios ----------------------------------------------------------------------------

@routes.get("/_sandbox/scenarios")
async def list_scenarios(request: web.Request) -> web.Response:
    scenarios = request.app[ENGINE].scenarios
    bindings = tenant_of(request).scenario_bindings
    return web.json_response({"data": [s.describe() for s in scenarios.values()],
                              "bindings": bindings})


@routes.put("/_sandbox/users/{identifier}/scenario")
async def bind_scenario(request: web.Request) -> web.Response:
    body = await read_json(request, SCENARIO_BINDING_REQUEST)
    tenant, identifier = tenant_of(request), request.match_info["identifier"]
    if body["scenario"] is None:
        tenant.scenario_bindings.pop(identifier, None)
    else:
        request.app[ENGINE].require_scenario(body["scenario"])
        tenant.scenario_bindings[identifier] = body["scenario"]
    return web.json_response({"data": {"identifier": identifier, "scenario": body["scenario"]}})


@routes.put("/_sandbox/users/{identifier}/card-token-recreation")
async def card_token_recreation(request: web.Request) -> web.Response:
    """Card tokens are recreated automatically (spec: payment-token-expired, "Recreation is
    normally automatic"); switched off, a card older than 24 hours fails the task."""
    body = await read_json(request, CARD_TOKEN_RECREATION_REQUEST)
    tenant, identifier = tenant_of(request), request.match_info["identifier"]
    if body["enabled"]:
        tenant.card_token_recreation_off.discard(identifier)
    else:
        tenant.card_token_recreation_off.add(identifier)
    return web.json_response({"data": {"identifier": identifier, "enabled": body["enabled"]}})


# -- companies ----------------------------------------------------------------------------

@routes.post("/_sandbox/companies")
async def create_company(request: web.Request) -> web.Response:
    body = await read_json(request, COMPANY_CREATE_REQUEST)
    _check_default_scenario(request, body)
    tenant = tenant_of(request)
    company = company_admin.create_company(tenant, request.app[STORE].service, body)
    await request.app[DISPATCHER].settle(tenant)
    return web.json_response({"data": full_record(company, tenant.manual_deposits)}, status=201)


@routes.patch("/_sandbox/companies/{companyId}")
async def update_company(request: web.Request) -> web.Response:
    body = await read_json(request, COMPANY_UPDATE_REQUEST)
    _check_default_scenario(request, body)
    tenant = tenant_of(request)
    company = company_admin.update_company(tenant, request.app[STORE].service,
                                           request.match_info["companyId"], body)
    await request.app[DISPATCHER].settle(tenant)
    return web.json_response({"data": full_record(company, tenant.manual_deposits)})


def _check_default_scenario(request: web.Request, body: dict) -> None:
    if "defaultScenario" in body:
        request.app[ENGINE].require_scenario(body["defaultScenario"], "$.defaultScenario")


@routes.delete("/_sandbox/companies/{companyId}")
async def delete_company(request: web.Request) -> web.Response:
    company_admin.delete_company(tenant_of(request), request.match_info["companyId"])
    await request.app[DISPATCHER].settle(tenant_of(request))
    return web.json_response({"data": {"_id": request.match_info["companyId"], "deleted": True}})


@routes.post("/_sandbox/companies/{companyId}/status")
async def company_status(request: web.Request) -> web.Response:
    body = await read_json(request, COMPANY_STATUS_REQUEST)
    tenant = tenant_of(request)
    company = company_admin.set_company_status(tenant, request.match_info["companyId"],
                                               body["status"], body.get("products"))
    record = full_record(company, tenant.manual_deposits)
    if company.maintenance_products:
        record["maintenanceProducts"] = list(company.maintenance_products)
    await request.app[DISPATCHER].settle(tenant)
    return web.json_response({"data": record})


# -- tasks and the dashboard ----------------------------------------------------------------

@routes.get("/_sandbox/tasks")
async def list_tasks(request: web.Request) -> web.Response:
    """Every task of the tenant, newest first (`status`, `user`, `limit` filters)."""
    query = parse_query(request.query, TASKS_QUERY)
    tasks = [t for t in reversed(list(tenant_of(request).tasks.values()))
             if ("status" not in query or t.status == query["status"])
             and ("user" not in query or t.identifier == query["user"])]
    return web.json_response({"data": [t.record() for t in tasks[:query["limit"]]],
                              "total": len(tasks)})


@routes.get("/_sandbox/")
async def dashboard(request: web.Request) -> web.Response:
    return web.Response(text=static_text("dashboard.html"), content_type="text/html",
                        headers={"cache-control": "no-store"})


@routes.get("/_sandbox/{name:dashboard\\.(js|css)}")
async def dashboard_asset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    kind = "application/javascript" if name.endswith(".js") else "text/css"
    return web.Response(text=static_text(name), content_type=kind, headers={"cache-control": "no-store"})
