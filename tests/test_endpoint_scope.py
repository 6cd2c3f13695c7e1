"""Which endpoints receive a tenant's events (issue 23, Endpoints).

"`--webhook-url` is the endpoint of the fixture tenants, not of tenants made by the control
plane (the plugin's tenants get only their own); `GET /_sandbox/webhooks/endpoints` lists
every endpoint that receives the tenant's events, and `PUT` replaces exactly what `GET`
shows." Real app, real receiver.

Issue 34, point 5: "The demo stays a demo: `--webhook-url` (and its variable) no longer
applies to the `demo` tenant, which keeps its own receiver."
"""

from __future__ import annotations

import json

from calls import call, run_until_idle
from conftest import ACME, GLOBEX, HOOKS

from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.transport.policy import RECEIVER_URL

ENDPOINTS = "/_sandbox/webhooks/endpoints"
INITECH = {"x-api-key": "sandbox-key-initech-0003", "x-api-secret": "sandbox-secret-initech-0003"}
DEMO = {"x-api-key": "sandbox-key-demo-0005", "x-api-secret": "sandbox-secret-demo-0005"}


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


async def endpoint_urls(client, headers: dict) -> list[str]:
    return [e["url"] for e in (await call(client, "GET", ENDPOINTS, headers=headers))["data"]]


async def test_webhook_url_leaves_the_demo_tenant_with_its_own_receiver(sandbox, receiver):
    # The sandbox knows where it listens, as `serve` does: the demo receiver is reachable.
    sandbox.server.app[SANDBOX].dispatcher.policy.serving(sandbox.server.runner.addresses)
    for keys in (ACME, GLOBEX, INITECH):
        assert await endpoint_urls(sandbox, keys) == [receiver.url(HOOKS)]
        # The real API's listing says the same.
        listed = (await call(sandbox, "GET", "/webhooks/endpoints", headers=keys))["data"]
        assert [e["url"] for e in listed] == [receiver.url(HOOKS)]
    assert await endpoint_urls(sandbox, DEMO) == [RECEIVER_URL]

    demos = await trigger(sandbox, DEMO)
    ours = await trigger(sandbox, ACME)
    assert received_ids(receiver) == [ours]  # the demo's event never reached the team's app
    [event] = (await call(sandbox, "GET", "/_sandbox/events", headers=DEMO))["data"]
    assert event["id"] == demos and event["delivery"] == "delivered"
    assert [d["url"] for d in event["deliveries"]] == [RECEIVER_URL]
    inbox = (await call(sandbox, "GET", "/demo/webhooks",
                        headers={"sec-fetch-site": "same-origin"}))["data"]
    assert [(r["ceId"], r["signature"]) for r in inbox] == [(demos, "valid")]

    # A reset makes the demo as its account does: still its own receiver alone.
    await call(sandbox, "POST", "/_sandbox/reset", headers=DEMO)
    assert await endpoint_urls(sandbox, DEMO) == [RECEIVER_URL]
