"""SIGTERM on a real process: requests stop, attempts in flight get --shutdown-grace and are
recorded, the process exits."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import pytest
from aiohttp import ClientSession, web
from conftest import ACME, REPO

from payroll_sandbox.load.fixtures import ConfigError
from payroll_sandbox.settings import load_settings
from payroll_sandbox.transport.dispatcher import SHUTDOWN_GRACE

GRACE = 0.5  # --shutdown-grace of the run below, wall seconds


async def test_sigterm_records_an_attempt_in_flight_and_exits(aiohttp_server):
    arrived = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        arrived.set()
        await asyncio.sleep(60)
        return web.Response()

    receiver = web.Application()
    receiver.router.add_post("/hook", hang)
    server = await aiohttp_server(receiver)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0", "--clock", "manual",
        "--webhook-url", str(server.make_url("/hook")), "--webhook-timeout", "60",
        "--shutdown-grace", str(GRACE), cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        base_url = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().split()[2]
        async with ClientSession() as session:
            trigger = asyncio.ensure_future(session.post(
                f"{base_url}/_sandbox/events/trigger", json={"eventType": "company-updated"},
                headers=ACME))
            await asyncio.wait_for(arrived.wait(), 10)  # the attempt is in flight, hanging
            process.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            response = await asyncio.wait_for(trigger, 20)
            # Cut off after the run's grace, well before the default one had passed.
            assert time.monotonic() - stopped < SHUTDOWN_GRACE - 1
            body = await response.json()
            assert response.status == 201  # the request in progress still got its answer
            attempt = body["data"]["deliveries"][0]["attempts"][0]
            assert body["data"]["delivery"] == "interrupted"
            assert attempt["error"].startswith("interrupted")
        returncode = await asyncio.wait_for(process.wait(), 20)
        stderr = (await process.stderr.read()).decode()
        assert returncode == 0
        assert "interrupted by shutdown" in stderr and "Traceback" not in stderr
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize("source", ["flag", "environment", "config"])
def test_a_negative_shutdown_grace_is_refused_naming_it(tmp_path, source):
    flags, environ = {}, {}
    if source == "flag":
        flags["shutdown_grace"] = "-1"
    elif source == "environment":
        environ["PAYROLL_SANDBOX_SHUTDOWN_GRACE"] = "-1"
    else:
        config = tmp_path / "sandbox.yaml"
        config.write_text("shutdownGrace: -1\n")
        flags["config"] = str(config)
    with pytest.raises(ConfigError) as refused:
        load_settings(flags, environ)
    assert "shutdown" in str(refused.value).lower()
    assert load_settings({"shutdown_grace": "0"}, {}).shutdown_grace == 0
    assert load_settings({}, {}).shutdown_grace == SHUTDOWN_GRACE
