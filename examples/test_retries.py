"""The customer app's retries (examples/app.py, `call_service`), tested with the sandbox's API
faults: the plugin's `fail_next` and `reset_next` make the service answer the app's own
calls with a 429 and `retry-after`, or drop the connection, as a production API sometimes
does. The app's waits are recorded instead of slept, so the tests take no wall time."""

from __future__ import annotations

from app import ATTEMPTS, BACKOFF, STATE, create_app
from test_app import WALMART, post


async def start(sandbox, aiohttp_server):
    """The app against this test's tenant, receiving its webhooks, its waits recorded;
    (its server, its state, its waits)."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    app = create_app(sandbox.base_url, sandbox.api_key, sandbox.api_secret, sleep=sleep)
    server = await aiohttp_server(app)
    await sandbox.use_webhook_url(str(server.make_url("/webhooks")))
    return server, app[STATE], waits


async def test_a_deposit_rides_out_a_429_and_a_reset_connection(async_payroll_sandbox,
                                                                aiohttp_server):
    sandbox = async_payroll_sandbox
    server, state, waits = await start(sandbox, aiohttp_server)
    await sandbox.fail_next("POST /task/create", status=429, retry_after=1)
    await sandbox.reset_next("POST /task/create")

    status, started = await post(server, "/deposits", {"user": "user-5", "company": WALMART})
    assert status == 201
    assert waits == [1.0, BACKOFF * 2]  # retry-after, then the backoff of the second retry
    calls = await sandbox.get("/_sandbox/requests?path=/task/create")
    assert [c["status"] for c in reversed(calls)] == [429, 0, 200]  # 0: no answer, reset
    assert len(await sandbox.get("/_sandbox/tasks")) == 1  # the faulted calls made none

    await sandbox.run_until_idle()
    assert state["deposits"]["user-5"] == {"task": started["task"], "status": "completed",
                                           "reason": None}


async def test_a_service_that_stays_unavailable_is_reported_after_the_last_attempt(
        async_payroll_sandbox, aiohttp_server):
    sandbox = async_payroll_sandbox
    server, state, waits = await start(sandbox, aiohttp_server)
    await sandbox.fail_next("POST /task/create", status=503, count=None)  # every call

    status, answer = await post(server, "/deposits", {"user": "user-6", "company": WALMART})
    assert status == 502 and answer["error"]["code"] == "service-unavailable"
    assert waits == [BACKOFF * 2 ** n for n in range(ATTEMPTS - 1)]
    assert "user-6" not in state["deposits"]

    await sandbox.clear_api_faults()
    status, _ = await post(server, "/deposits", {"user": "user-6", "company": WALMART})
    assert status == 201
