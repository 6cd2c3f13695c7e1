"""The service profile's names (vendor, aggregator) change paths, event names and headers."""

from __future__ import annotations

from aiohttp import web
from conftest import ACME

from payroll_sandbox.app import build_registry, create_app, load
from payroll_sandbox.settings import Settings


async def test_vendor_and_aggregator_names_change_everything(aiohttp_client, aiohttp_server, clock):
    received = []

    async def hook(request: web.Request) -> web.Response:
        received.append(dict(request.headers))
        return web.Response()

    receiver = web.Application()
    receiver.router.add_post("/hook", hook)
    server = await aiohttp_server(receiver)
    settings = Settings(port=0, clock="manual", vendor="acme.pay", aggregator="plaid",
                        webhook_url=str(server.make_url("/hook")))
    client = await aiohttp_client(create_app(
        settings, registry=build_registry(settings, clock=clock, loaded=load(settings))))

    token = await (await client.post("/_sandbox/plaid/processor-token",
                                     json={"identifier": "u1", "scenario": "item-login-required"},
                                     headers=ACME)).json()
    response = await client.post("/plaid/processor-links", headers=ACME,
                                 json={"processorToken": token["data"]["processorToken"]})
    assert response.status == 202
    assert (await client.post("/aggregator/processor-links", headers=ACME,
                              json={"processorToken": "x"})).status == 404
    await client.post("/_sandbox/clock/run-until-idle", headers=ACME)
    events = (await (await client.get("/_sandbox/events", headers=ACME)).json())["data"]
    assert [e["eventType"] for e in events] == ["plaid-error"]
    assert received[-1]["ce-type"] == "com.acme.pay.plaid-error"
    assert received[-1]["ce-source"] == "com.acme.pay"
    schema = await client.get("/_sandbox/schemas/events/plaid-error")
    assert schema.status == 200
    assert (await client.get("/_sandbox/schemas/events/aggregator-error")).status == 404
    document = await (await client.get("/openapi.json")).json()
    assert "/plaid/processor-links" in document["paths"]
    assert "/_sandbox/plaid/processor-token" in document["paths"]
    # /aggregator-api/ is fixed (DESIGN.md, The aggregator's own API); nothing else names it.
    assert not any("aggregator" in path for path in document["paths"]
                   if not path.startswith("/aggregator-api/"))
    assert "plaid-error" in document["webhooks"]
