"""Webhook registration, faults, replay, triggers and the event schemas (DESIGN.md, Control
plane); the same endpoints, and signing secrets, at the real service's paths
(docs/spec/real-api-surface.md: Webhooks, Secrets)."""

from __future__ import annotations

import msgspec
from aiohttp import web

from ...clock import isoformat
from ...domain.identity.identity import unguessable
from ...domain.webhooks.triggers import trigger_event
from ...domain.shapes import UNSET, given, view_of
from ...errors import EventTypeNotFound, UnknownEventType, ValidationFailed, field_detail
from ...schemas.api import (SUCCEEDED, ReplayRequest, Secret, SecretRequest, Success, TriggerRequest,
                           WebhookEndpoint, WebhookEndpointRequest, WebhookEndpointsRequest,
                           WebhookFaultsRequest)
from ...domain.webhooks.event_types import event_schema, event_types
from ...schemas.responses import (Attempt, Delivery, EventRecord, Replayed, StoredEndpoint,
                                 WebhookFaults)
from ...validate import check_webhook_urls, parse_time
from ...domain.webhooks.outbox import FaultPlan
from ...transport.dispatcher import request_headers
from ..keys import exchange_of
from ..operations import CONTROL, Auth, Reply, operation
from ..examples import RECEIVER, USER, WALMART, Example, From

UNKNOWN_EVENT_TYPE = "No event type is named {event_type!r}."
SECRET_PREFIX = "whsec-"
_ENDPOINT = {"url": RECEIVER, "eventTypes": ["task-status-updated", "task-workflow-finished"]}
_AFTER_ENDPOINT = From("POST", "/webhooks/endpoints",
                       parameters={"id": "$response.body#/data/_id"})


@operation("GET", "/_sandbox/webhooks/endpoints", "The webhook endpoints", **CONTROL)
async def get_endpoints(tenant, sandbox) -> list[StoredEndpoint]:
    return tenant.webhooks.endpoints


@operation("PUT", "/_sandbox/webhooks/endpoints", "Replace the webhook endpoints",
           body=WebhookEndpointsRequest,
           errors=(404,), **CONTROL, example=Example({"endpoints": [_ENDPOINT]}))
async def put_endpoints(tenant, body, sandbox) -> list[StoredEndpoint]:
    """The whole list; each endpoint keeps its `_id` (the one it names, else the one its URL
    had), so /webhooks/endpoints/{id} goes on naming it."""
    _check_endpoints(body.endpoints, "$.endpoints[{n}]", sandbox)
    return tenant.webhooks.set_endpoints(msgspec.to_builtins(body.endpoints), tenant.ids.object_id)


def _check_endpoints(endpoints: list, path: str, sandbox) -> None:
    """Every event type known (422 unknown-event-type) and every URL one the outbound
    policy lets webhooks go to (422), each fault at its JSON path."""
    known = set(event_types(sandbox.registry.service.aggregator))
    problems = [field_detail(f"{path.format(n=n)}.eventTypes[{j}]", f"unknown event type {t!r}")
                for n, endpoint in enumerate(endpoints)
                for j, t in enumerate(given(endpoint.event_types, ())) if t not in known]
    if problems:
        raise UnknownEventType("Unknown event types.", details=problems)
    check_webhook_urls([(f"{path.format(n=n)}.url", endpoint.url)
                        for n, endpoint in enumerate(endpoints)], sandbox.dispatcher.policy)


def _endpoint_record(endpoint: dict, sandbox) -> WebhookEndpoint:
    """An endpoint as the real service shows it: `_id`, `url`, `eventTypes` (one registered
    for every type lists them all); `secretId` is not echoed."""
    types = endpoint.get("eventTypes") or event_types(sandbox.registry.service.aggregator)
    return WebhookEndpoint(id=endpoint["_id"], url=endpoint["url"], event_types=list(types))


@operation("GET", "/webhooks/endpoints", "List webhook endpoints")
async def list_webhook_endpoints(tenant, sandbox) -> list[WebhookEndpoint]:
    return [_endpoint_record(e, sandbox) for e in tenant.webhooks.endpoints]


@operation("POST", "/webhooks/endpoints", "Register a webhook endpoint",
           body=WebhookEndpointRequest, errors=(404,), example=Example(_ENDPOINT))
async def create_webhook_endpoint(tenant, body, sandbox, request) -> WebhookEndpoint:
    """An unknown `secretId` is ignored, named in x-sandbox-warning, and the endpoint's
    deliveries are signed with the API secret (refused, 404, under --strict-bodies)."""
    _check_endpoints([body], "$", sandbox)
    return _endpoint_record(tenant.webhooks.add_endpoint(
        msgspec.to_builtins(body), tenant.ids.object_id(), _lenient(sandbox, request)), sandbox)


@operation("PUT", "/webhooks/endpoints/{id}", "Change a webhook endpoint",
           body=WebhookEndpointRequest, errors=(404,),
           example=Example(
               {**_ENDPOINT, "eventTypes": ["task-status-updated"]}, after=_AFTER_ENDPOINT))
async def update_webhook_endpoint(tenant, params, body, sandbox, request) -> WebhookEndpoint:
    """An unknown `secretId`: as POST /webhooks/endpoints."""
    _check_endpoints([body], "$", sandbox)
    return _endpoint_record(tenant.webhooks.replace_endpoint(
        params["id"], msgspec.to_builtins(body), _lenient(sandbox, request)), sandbox)


def _lenient(sandbox, request) -> list[str] | None:
    """Where a lenient call says what it ignored (the exchange's x-sandbox-warning); None
    under --strict-bodies, which refuses it instead (DESIGN.md, Bodies)."""
    return None if sandbox.settings.strict_bodies else exchange_of(request).warnings


@operation("DELETE", "/webhooks/endpoints/{id}", "Delete a webhook endpoint", errors=(404,),
           example=Example(after=_AFTER_ENDPOINT))
async def delete_webhook_endpoint(tenant, params) -> Success:
    tenant.webhooks.remove_endpoint(params["id"])
    return SUCCEEDED


@operation("GET", "/secrets", "List signing secrets")
async def list_secrets(tenant) -> list[Secret]:
    return [msgspec.convert(secret, Secret) for secret in tenant.webhooks.secrets.values()]


@operation("POST", "/secrets", "Create a signing secret", body=SecretRequest,
           example=Example({"name": "production receiver"}))
async def create_secret(tenant, body) -> Secret:
    """The token is random (never from the seed), as the API secret is."""
    secret = Secret(id=tenant.ids.object_id(), name=body.name, token=unguessable(SECRET_PREFIX),
                    created_at=isoformat(tenant.clock.timestamp()))
    tenant.webhooks.add_secret(msgspec.to_builtins(secret))  # kept as the snapshot writes it
    return secret


@operation("DELETE", "/secrets/{id}", "Delete a signing secret no endpoint uses",
           errors=(404, 409),
           example=Example(after=From(
               "POST", "/secrets", parameters={"id": "$response.body#/data/_id"})))
async def delete_secret(tenant, params) -> Success:
    tenant.webhooks.remove_secret(params["id"])
    return SUCCEEDED


@operation("GET", "/_sandbox/webhooks/faults", "The delivery faults set", **CONTROL)
async def get_faults(tenant, sandbox) -> WebhookFaults:
    return view_of(WebhookFaults, tenant.webhooks.faults)


@operation("PUT", "/_sandbox/webhooks/faults", "Make deliveries misbehave (duplicates, "
           "out of order, delays)", body=WebhookFaultsRequest,
           **CONTROL, example=Example({"duplicate": 0.0, "outOfOrder": 0.0, "delay": 0.0}))
async def put_faults(tenant, body, sandbox) -> WebhookFaults:
    faults = msgspec.convert(msgspec.to_builtins(body), FaultPlan)  # left out: its default
    tenant.webhooks.set_faults(faults)
    return view_of(WebhookFaults, faults)


@operation("POST", "/_sandbox/webhooks/replay", "Send events again (same ce-id)",
           body=ReplayRequest, settles=True, envelope={"total": {"type": "integer"}},
           errors=(404,), example=Example({"userIdentifier": USER}), **CONTROL)
async def replay(tenant, body, sandbox) -> Reply[list[Replayed]]:
    since = until = None
    if body.since is not UNSET:
        since = parse_time(body.since, "$.from", location="body")
        until = parse_time(body.until, "$.to", location="body")
        if since > until:
            raise ValidationFailed("`from` is later than `to`.",
                                   details=[field_detail("$.from", "later than $.to")])
    if body.event_id is not UNSET:
        events = [tenant.events.get(body.event_id)]  # 404 when the ledger has no such event
    else:
        events = tenant.events.query(user=given(body.user_identifier), task=given(body.task_id),
                                     since=since, until=until)
    queued = [Replayed(event_id=event.id, event_type=event.type,
                       deliveries=[d.id for d in tenant.webhooks.deliver(event, replay=True)])
              for event in events]
    return Reply(queued, extra={"total": len(queued)})


@operation("POST", "/_sandbox/events/trigger", "Send any event now, with realistic data",
           body=TriggerRequest, status=201, settles=True, response=EventRecord,
           errors=(404, 429), **CONTROL,
           example=Example(
               {"eventType": "task-status-updated", "identifier": USER, "companyId": WALMART}))
async def trigger(tenant, body, sandbox):
    event = trigger_event(tenant, sandbox.registry.service.aggregator, body)
    # Rendered after the attempts settled, so the record shows how they went.
    return lambda: event_record(sandbox.dispatcher, tenant, event)


@operation("GET", "/_sandbox/schemas/events", "The event types",
           auth=Auth.NONE, response={"type": "array", "items": {"type": "string"}})
async def list_event_schemas(sandbox) -> list:
    return event_types(sandbox.registry.service.aggregator)


@operation("GET", "/_sandbox/schemas/events/{eventType}", "An event type's JSON Schema",
           auth=Auth.NONE, content_type="application/schema+json", errors=(404,))
async def get_event_schema(params, sandbox) -> web.Response:
    event_type = params["eventType"]
    schema = event_schema(event_type, sandbox.registry.service.aggregator)
    if schema is None:
        raise EventTypeNotFound(UNKNOWN_EVENT_TYPE.format(event_type=event_type))
    return web.json_response(schema, content_type="application/schema+json")


def event_record(dispatcher, tenant, event) -> EventRecord:
    """An event with its deliveries and every attempt (GET /_sandbox/events). Every attempt
    of a delivery sent the same headers (the event's message): made once per signing
    secret, they differ in their signature only. An aggregator webhook's attempts each
    carried a Plaid-Verification JWT of their own, made as it left: left out here."""
    state = tenant.webhooks
    deliveries = state.deliveries.get(event.id, [])
    headers: dict = {}
    for d in deliveries:
        if d.secret_id not in headers:
            headers[d.secret_id] = request_headers(tenant, event, dispatcher.vendor, d)
    return view_of(EventRecord, event, event_type=event.type, time=isoformat(event.time),
                   user_identifier=event.user, body=event.body,
                   delivery=state.state_of(event.id),
                   deliveries=[_delivery(d, headers[d.secret_id]) for d in deliveries])


def _delivery(delivery, headers: dict[str, str]) -> Delivery:
    return view_of(Delivery, delivery, faults=list(delivery.faults), attempts=[
        view_of(Attempt, attempt, time=isoformat(attempt.time),
                wall_time=isoformat(attempt.wall_time), request_headers=headers)
        for attempt in delivery.attempts])
