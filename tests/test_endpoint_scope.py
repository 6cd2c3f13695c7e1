"""Which endpoints receive a tenant's events (issue 23, Endpoints).

"`--webhook-url` is the endpoint of the fixture tenants, not of tenants made by the control
plane (the plugin's tenants get only their own); `GET /_sandbox/webhooks/endpoints` lists
every endpoint that receives the tenant's events, and `PUT` replaces exactly what `GET`
shows." Real app, real receiver.
"""

from __future__ import annotations

import json

from calls import call, run_until_idle
from conftest import ACME, HOOKS

ENDPOINTS = "/_sandbox/webhooks/endpoints"


async def trigger(client, headers: dict) -> str:
    event = (await call(client, "POST", "/_sandbox/events/trigger", status=201, headers=headers,
                        json={"eventType": "company-updated"}))["data"]
    await run_until_idle(client, headers=headers)
    return event["id"]


def received_ids(receiver) -> list[str]:
    return [r.headers["ce-id"] for r in receiver.received(HOOKS)]


async def test_webhook_url_is_an_endpoint_of_the_fixture_tenants_only(sandbox, receiver):
    made = (await call(sandbox, "POST", "/_sandbox/tenants", status=201,
                       json={"name": "made-here"}))["data"]
    keys = {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}
    assert (await call(sandbox, "GET", ENDPOINTS, headers=keys))["data"] == []
    theirs = await trigger(sandbox, keys)
    ours = await trigger(sandbox, ACME)
    assert received_ids(receiver) == [ours]  # the made tenant's event went nowhere
    [event] = (await call(sandbox, "GET", "/_sandbox/events", headers=keys))["data"]
    assert event["id"] == theirs and event["deliveries"] == []


async def test_get_lists_the_webhook_url_endpoint_and_put_replaces_exactly_that(sandbox,
                                                                                receiver):
    shown = (await call(sandbox, "GET", ENDPOINTS))["data"]
    assert [e["url"] for e in shown] == [receiver.url(HOOKS)]
    # PUT what GET shows: nothing changes, the endpoint keeps its id and still receives.
    again = (await call(sandbox, "PUT", ENDPOINTS, json={"endpoints": shown}))["data"]
    assert again == shown
    first = await trigger(sandbox, ACME)
    assert received_ids(receiver) == [first]
    # PUT an empty list: the --webhook-url endpoint is gone as well, as GET says.
    assert (await call(sandbox, "PUT", ENDPOINTS, json={"endpoints": []}))["data"] == []
    assert (await call(sandbox, "GET", ENDPOINTS))["data"] == []
    await trigger(sandbox, ACME)
    assert received_ids(receiver) == [first]
    bodies = [json.loads(r.body) for r in receiver.received(HOOKS)]
    assert [b["eventType"] for b in bodies] == ["company-updated"]
