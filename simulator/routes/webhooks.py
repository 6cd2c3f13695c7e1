"""Webhook registration, faults, replay, triggers and the event schemas (DESIGN.md, Control plane)."""

from __future__ import annotations

from aiohttp import web

from ..domain.triggers import trigger_event
from ..errors import NotFound, ValidationFailed, field_detail
from ..keys import DISPATCHER, ENGINE, STORE, tenant_of
from ..middleware import read_json
from ..schemas.api import (REPLAY_REQUEST, TRIGGER_REQUEST, WEBHOOK_ENDPOINTS_REQUEST,
                           WEBHOOK_FAULTS_REQUEST)
from ..schemas.events import event_schema, event_types
from ..validation import parse_time
from ..webhooks.dispatcher import FaultPlan

routes = web.RouteTableDef()


@routes.get("/_sandbox/webhooks/endpoints")
async def get_endpoints(request: web.Request) -> web.Response:
    state = request.app[DISPATCHER].state(tenant_of(request))
    return web.json_response({"data": state.endpoints})


@routes.put("/_sandbox/webhooks/endpoints")
async def put_endpoints(request: web.Request) -> web.Response:
    body = await read_json(request, WEBHOOK_ENDPOINTS_REQUEST)
    known = set(event_types(request.app[STORE].service.aggregator))
    problems = [field_detail(f"$.endpoints[{i}].eventTypes[{j}]", f"unknown event type {t!r}")
                for i, endpoint in enumerate(body["endpoints"])
                for j, t in enumerate(endpoint.get("eventTypes", [])) if t not in known]
    if problems:
        raise ValidationFailed("Unknown event types.", code="unknown-event-type", details=problems)
    state = request.app[DISPATCHER].state(tenant_of(request))
    state.endpoints = body["endpoints"]
    return web.json_response({"data": state.endpoints})


@routes.get("/_sandbox/webhooks/faults")
async def get_faults(request: web.Request) -> web.Response:
    return web.json_response({"data": request.app[DISPATCHER].state(tenant_of(request)).faults.record()})


@routes.put("/_sandbox/webhooks/faults")
async def put_faults(request: web.Request) -> web.Response:
    body = await read_json(request, WEBHOOK_FAULTS_REQUEST)
    state = request.app[DISPATCHER].state(tenant_of(request))
    state.faults = FaultPlan(duplicate=body.get("duplicate", 0.0),
                             out_of_order=body.get("outOfOrder", 0.0), delay=body.get("delay", 0.0),
                             delay_seconds=body.get("delaySeconds", 60.0))
    return web.json_response({"data": state.faults.record()})


@routes.post("/_sandbox/webhooks/replay")
async def replay(request: web.Request) -> web.Response:
    body = await read_json(request, REPLAY_REQUEST)
    tenant, dispatcher = tenant_of(request), request.app[DISPATCHER]
    since = until = None
    if "from" in body:
        since = parse_time(body["from"], "$.from", location="body")
        until = parse_time(body["to"], "$.to", location="body")
        if since > until:
            raise ValidationFailed("`from` is later than `to`.",
                                   details=[field_detail("$.from", "later than $.to")])
    events = tenant.events.query(user=body.get("userIdentifier"), task=body.get("taskId"),
                                 since=since, until=until)
    queued = [{"eventId": event.id, "eventType": event.type,
               "deliveries": [d.id for d in dispatcher.deliver(tenant, event, replay=True)]}
              for event in events]
    await dispatcher.settle(tenant)
    return web.json_response({"data": queued, "total": len(queued)})


@routes.post("/_sandbox/events/trigger")
async def trigger(request: web.Request) -> web.Response:
    body = await read_json(request, TRIGGER_REQUEST)
    tenant = tenant_of(request)
    event = trigger_event(tenant, request.app[ENGINE], request.app[STORE].service.aggregator, body)
    await request.app[DISPATCHER].settle(tenant)
    return web.json_response({"data": event_record(request.app, tenant, event)}, status=201)


@routes.get("/_sandbox/schemas/events")
async def list_event_schemas(request: web.Request) -> web.Response:
    return web.json_response({"data": event_types(request.app[STORE].service.aggregator)})


@routes.get("/_sandbox/schemas/events/{eventType}")
async def get_event_schema(request: web.Request) -> web.Response:
    event_type = request.match_info["eventType"]
    schema = event_schema(event_type, request.app[STORE].service.aggregator)
    if schema is None:
        raise NotFound(f"No event type is named {event_type!r}.", code="unknown-event-type")
    return web.json_response(schema)


def event_record(app: web.Application, tenant, event) -> dict:
    """An event with its deliveries and every attempt (GET /_sandbox/events)."""
    state = app[DISPATCHER].state(tenant)
    return {**event.record(), "delivery": state.state_of(event.id),
            "deliveries": [d.record() for d in state.deliveries.get(event.id, [])]}
