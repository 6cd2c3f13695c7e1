"""The customer app's own suite (examples/app.py), as a customer writes it with the plugin.

Each test runs the app on pytest-aiohttp's `aiohttp_server`, points the sandbox tenant's
webhooks at it and moves the sandbox clock: the app receives every delivery on the test's
own event loop while the test awaits. Runs with the repository's `pytest`, and in
parallel: `pytest -n 2 examples`.
"""

from __future__ import annotations

from app import STATE, create_app

WALMART = "6410a0000000000000000001"


async def start(sandbox, aiohttp_server):
    """The app against this test's tenant, receiving its webhooks; (its server, its state)."""
    app = create_app(sandbox.base_url, sandbox.api_key, sandbox.api_secret)
    server = await aiohttp_server(app)
    await sandbox.use_webhook_url(str(server.make_url("/webhooks")))
    return server, app[STATE]  # what the app learnt, read directly


async def post(server, path: str, body: dict):
    from aiohttp import ClientSession

    async with ClientSession() as session:
        async with session.post(server.make_url(path), json=body) as response:
            return response.status, await response.json()


async def test_a_deposit_fails_when_the_session_expired(async_payroll_sandbox, aiohttp_server):
    server, state = await start(async_payroll_sandbox, aiohttp_server)
    status, started = await post(server, "/deposits", {"user": "user-1", "company": WALMART,
                                                      "scenario": "auth-expired"})
    assert status == 201
    await async_payroll_sandbox.advance(60)
    assert state["deposits"]["user-1"] == {"task": started["task"], "status": "failed",
                                           "reason": "auth-expired"}


async def test_a_maintenance_window_pauses_deposits_until_it_ends(async_payroll_sandbox,
                                                                  aiohttp_server):
    sandbox = async_payroll_sandbox
    server, state = await start(sandbox, aiohttp_server)
    await sandbox.post(f"/_sandbox/companies/{WALMART}/status", {"status": "under-maintenance"})
    assert WALMART in state["maintenance"]  # the maintenance-mode event reached the app
    status, answer = await post(server, "/deposits", {"user": "user-2", "company": WALMART})
    assert (status, answer) == (409, {"error": "company-under-maintenance", "retryLater": True})

    await sandbox.post(f"/_sandbox/companies/{WALMART}/status", {"status": "operational"})
    assert WALMART not in state["maintenance"]
    status, started = await post(server, "/deposits", {"user": "user-2", "company": WALMART})
    assert status == 201
    await sandbox.run_until_idle()
    assert state["deposits"]["user-2"]["status"] == "completed"


async def test_item_login_required_asks_for_a_relink_and_a_new_token_recovers(
        async_payroll_sandbox, aiohttp_server):
    sandbox = async_payroll_sandbox
    server, state = await start(sandbox, aiohttp_server)
    broken = await sandbox.post("/_sandbox/aggregator/processor-token",
                                {"identifier": "user-3", "scenario": "item-login-required"})
    status, _ = await post(server, "/processor-links", {"user": "user-3",
                                                        "processorToken": broken["processorToken"]})
    assert status == 201
    await sandbox.run_until_idle()
    assert state["links"]["user-3"]["state"] == "relink-required"

    fresh = await sandbox.post("/_sandbox/aggregator/processor-token", {"identifier": "user-3"})
    status, _ = await post(server, "/processor-links", {"user": "user-3",
                                                        "processorToken": fresh["processorToken"]})
    assert status == 201
    await sandbox.run_until_idle()
    assert state["links"]["user-3"]["state"] == "ready"


async def test_events_missed_during_an_outage_arrive_by_replay(async_payroll_sandbox,
                                                               aiohttp_server):
    sandbox = async_payroll_sandbox
    server, state = await start(sandbox, aiohttp_server)
    state["outage"] = True  # the handler answers 503 to everything
    status, started = await post(server, "/deposits", {"user": "user-4", "company": WALMART})
    assert status == 201
    await sandbox.run_until_idle()  # three attempts, 30 s apart, all refused
    assert state["deposits"]["user-4"]["status"] == "queued"
    failed = await sandbox.events(user="user-4", delivery="failed")
    assert failed, "the sandbox gave up after its retries"

    state["outage"] = False
    await sandbox.post("/_sandbox/webhooks/replay", {"userIdentifier": "user-4"})
    assert state["deposits"]["user-4"] == {"task": started["task"], "status": "completed",
                                           "reason": None}
