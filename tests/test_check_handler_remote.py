"""Issue 14: `check-handler --url` makes its events on a running sandbox instead of an
in-process one, so they carry that server's service profile.

The running sandbox here is a real `payroll-sandbox serve` process whose config names a
vendor and an aggregator the in-process default never produces (`acmepay`, `linkhub`):
the deliveries' `ce-source`/`ce-type` and the event names prove where the events were
made. The handlers are real local servers (tests/test_check_handler.py); the checker
runs as a function and as the real command.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from contextlib import contextmanager

import pytest
from aiohttp import web
from conftest import ACME, REPO, run_cli
from test_check_handler import (FAST, SECRET, example, example_process, example_with, naive_app,
                                serve)

from payroll_sandbox.checker import (CHECKS, DUPLICATE_DELIVERY, EVERY_EVENT_TYPE, MISSING_SIGNATURE,
                               PASS, STATE_URL, UNKNOWN_EVENT_TYPE, WRONG_SIGNATURE, CheckerError,
                               check_handler, check_handler_async)
from payroll_sandbox.domain.webhooks.event_types import event_types

__all__ = ["example_process"]  # a fixture of test_check_handler, used here too

VENDOR, AGGREGATOR = "acmepay", "linkhub"
SERVING = "payroll-sandbox serving "


@contextmanager
def running_sandbox(folder, *flags: str):
    """`payroll-sandbox serve` as a real process with the acmepay profile; (base URL, keys).
    Its log goes to a file: a pipe nobody reads would fill up and stall the server."""
    config = folder / "sandbox.yaml"
    config.write_text(f"vendor: {VENDOR}\naggregator: {AGGREGATOR}\n")
    with (folder / "serve.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0", "--config", str(config),
             *flags], stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO)
    try:
        line = process.stdout.readline().strip()
        assert line.startswith(SERVING), (folder / "serve.log").read_text()
        fields = dict(part.split("=", 1) for part in line.split()[3:])
        yield line.split()[2], {"api_key": fields["x-api-key"],
                                "api_secret": fields["x-api-secret"]}
    finally:
        process.terminate()
        process.communicate(timeout=10)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    with running_sandbox(tmp_path_factory.mktemp("sandbox")) as running:
        yield running


def stored_tenants(base: str) -> int:
    """How many tenants the server holds (GET /_sandbox/stats)."""
    request = urllib.request.Request(f"{base}/_sandbox/stats", headers=ACME)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["data"]["tenants"]["stored"]


def free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def recording(requests: list):
    """A middleware that keeps the headers of every delivery."""
    @web.middleware
    async def record(request, handler):
        if request.method == "POST":
            requests.append(dict(request.headers))
        return await handler(request)

    return record


# ---------------------------------------------------------------- the events are the server's

async def test_example_handler_passes_every_check_with_the_running_sandboxs_events(
        aiohttp_server, sandbox):
    base, keys = sandbox
    before = stored_tenants(base)
    requests: list = []
    handler = await serve(aiohttp_server, example_with(recording(requests)))
    report = await check_handler_async(f"{handler}/webhooks", SECRET, state_url=f"{handler}/state",
                                       sandbox_url=base, **keys, **FAST)
    assert report.ok, report
    assert [(c.name, c.status) for c in report.checks] == [(name, PASS) for name in CHECKS]
    # The server's vendor on every delivery, and its aggregator's event names.
    assert requests and {r["ce-source"] for r in requests} == {f"com.{VENDOR}"}
    assert all(r["ce-type"].startswith(f"com.{VENDOR}.") for r in requests)
    every = [d.event_type for d in report.check(EVERY_EVENT_TYPE).deliveries]
    assert every == event_types(AGGREGATOR) and f"{AGGREGATOR}-error" in every
    assert (report.vendor, report.sandbox_url) == (VENDOR, base)
    assert report.text().splitlines()[-1].endswith(f"with events from {base} (vendor {VENDOR})")
    assert report.to_dict()["sandboxUrl"] == base and report.cleanup_note is None
    # The temporary tenant is gone again.
    assert stored_tenants(base) == before


async def test_naive_handler_fails_the_same_checks_with_either_source(aiohttp_server, sandbox):
    base, keys = sandbox
    in_process = await check_handler_async(
        f"{await serve(aiohttp_server, naive_app())}/webhooks", SECRET, **FAST)
    remote = await check_handler_async(
        f"{await serve(aiohttp_server, naive_app(aggregator=AGGREGATOR))}/webhooks", SECRET,
        sandbox_url=base, **keys, **FAST)
    assert remote.failed_names == in_process.failed_names == {
        WRONG_SIGNATURE, MISSING_SIGNATURE, DUPLICATE_DELIVERY, UNKNOWN_EVENT_TYPE}, remote
    assert remote.skipped_names == in_process.skipped_names == {STATE_URL}
    assert f"ce-type com.{VENDOR}.sandbox-future-event" in remote.check(UNKNOWN_EVENT_TYPE).sent


async def test_the_running_sandbox_sends_nothing_itself_even_with_a_webhook_url(
        aiohttp_server, tmp_path):
    """`--webhook-url` gives the fixtures' tenants (`demo` aside) an endpoint; the temporary
    one has none."""
    delivered: list = []

    async def receive(request: web.Request) -> web.Response:
        delivered.append(await request.read())
        return web.json_response({"ok": True})

    receiver = web.Application()
    receiver.router.add_post("/hooks", receive)
    hooks = f"{await serve(aiohttp_server, receiver)}/hooks"
    handler = await serve(aiohttp_server, example.create_app(SECRET))
    with running_sandbox(tmp_path, "--webhook-url", hooks) as (base, keys):
        report = await check_handler_async(f"{handler}/webhooks", SECRET, sandbox_url=base,
                                           **keys, **FAST)
    assert report.ok, report
    assert delivered == []


# ---------------------------------------------------------------- the command

def test_cli_with_url_passes_every_check_and_names_the_running_sandbox(example_process,
                                                                      sandbox):
    base, _ = sandbox
    before = stored_tenants(base)
    # No --api-key/--api-secret: the bundled default tenant's, as for trigger and listen.
    result = run_cli("check-handler", f"{example_process}/webhooks", "--secret", SECRET,
                     "--state-url", f"{example_process}/state", "--url", base)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == [f"PASS {name}" for name in CHECKS]
    assert f"(ce-type com.{VENDOR}.sandbox-future-event)" in result.stdout
    assert lines[-1].startswith(f"{len(CHECKS)} passed, 0 failed, 0 skipped in ")
    assert lines[-1].endswith(f"with events from {base} (vendor {VENDOR})")
    assert stored_tenants(base) == before


def test_cli_json_with_url_names_the_sandbox_and_its_vendor(example_process, sandbox):
    base, _ = sandbox
    result = run_cli("check-handler", f"{example_process}/webhooks", "--secret", SECRET, "--json",
                     "--events", f"task-status-updated,{AGGREGATOR}-error", "--url", base,
                     "--api-key", ACME["x-api-key"], "--api-secret", ACME["x-api-secret"])
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert (report["sandboxUrl"], report["vendor"], report["cleanupNote"]) == (base, VENDOR, None)
    assert report["eventTypes"] == ["task-status-updated", f"{AGGREGATOR}-error"]


def test_cli_unreachable_url_is_one_line_and_exit_2(example_process):
    port = free_port()
    result = run_cli("check-handler", f"{example_process}/webhooks", "--secret", SECRET,
                     "--url", f"http://127.0.0.1:{port}")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        f"payroll-sandbox: cannot reach the sandbox at http://127.0.0.1:{port}: "
        "connection refused")
    assert "Traceback" not in result.stderr


def test_cli_refused_keys_are_one_line_and_exit_2_and_make_no_tenant(example_process, sandbox):
    base, _ = sandbox
    before = stored_tenants(base)
    # The keys come from the environment here, as for trigger and listen.
    result = run_cli("check-handler", f"{example_process}/webhooks", "--url", base,
                     env={"PAYROLL_SANDBOX_API_KEY": "sandbox-key-nobody",
                          "PAYROLL_SANDBOX_API_SECRET": "sandbox-secret-nobody"})
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        f"payroll-sandbox: the sandbox at {base} refused the keys (401 invalid-credentials")
    assert "Traceback" not in result.stderr
    assert stored_tenants(base) == before


def test_cli_refuses_keys_without_url_and_a_url_that_is_no_sandbox(example_process):
    result = run_cli("check-handler", f"{example_process}/webhooks", "--api-key", "k")
    assert result.returncode == 2
    assert "--api-key and --api-secret are keys of a running sandbox: give its --url" in \
        result.stderr
    result = run_cli("check-handler", f"{example_process}/webhooks", "--url", example_process)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"payroll-sandbox: --url {example_process} does not answer as a payroll-sandbox "
        "(GET /health: HTTP 404)")


async def test_ctrl_c_during_the_run_still_deletes_the_temporary_tenant(aiohttp_server, sandbox):
    base, _ = sandbox
    before = stored_tenants(base)
    delivered = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        delivered.set()
        await asyncio.sleep(3600)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/webhooks", hang)
    handler = await serve(aiohttp_server, app)
    # As from a terminal: SIGINT neither ignored nor blocked in the command (a signal state
    # the test's worker may have been handed is inherited across exec), then the CLI as
    # `python -m payroll_sandbox` runs it. PYTHONFAULTHANDLER: a process that does not stop
    # is made to print where it is.
    terminal = ("import runpy, signal, sys; "
                "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); "
                "signal.signal(signal.SIGINT, signal.default_int_handler); "
                "sys.argv[0] = 'payroll-sandbox'; "
                "runpy.run_module('payroll_sandbox', run_name='__main__', alter_sys=True)")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", terminal, "check-handler", f"{handler}/webhooks", "--secret",
        SECRET, "--url", base, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        # The first delivery hangs in the handler: by then the tenant exists.
        await asyncio.wait_for(delivered.wait(), 30)
        assert stored_tenants(base) == before + 1
        signals = _signal_state(process.pid)
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = await asyncio.wait_for(process.communicate(), timeout=30)
        except TimeoutError:
            process.send_signal(signal.SIGABRT)  # the faulthandler prints every thread's stack
            _, stderr = await asyncio.wait_for(process.communicate(), timeout=10)
            pytest.fail(f"check-handler did not stop on SIGINT within 30 s ({signals}):\n"
                        + stderr.decode(errors="replace")[-6000:])
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 130, stderr.decode()
    assert stderr.decode().splitlines()[-1] == "payroll-sandbox: check-handler interrupted"
    assert stored_tenants(base) == before


def _signal_state(pid: int) -> str:
    """The process's blocked and ignored signal masks (Linux), for a failure message."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return " ".join(line.strip() for line in status if line.startswith(("SigBlk", "SigIgn")))
    except OSError:
        return "signal masks unknown"


# ---------------------------------------------------------------- the Python API and the plugin

async def test_the_api_needs_both_keys_with_a_sandbox_url_and_a_url_with_keys():
    with pytest.raises(CheckerError, match="--url needs --api-key and --api-secret"):
        await check_handler_async("http://127.0.0.1:9/webhooks",
                                  sandbox_url="http://127.0.0.1:9", api_key="k")
    with pytest.raises(CheckerError, match="give its --url too"):
        await check_handler_async("http://127.0.0.1:9/webhooks", api_key="k", api_secret="s")


def test_check_handler_api_with_sandbox_url_runs_without_an_event_loop(example_process, sandbox):
    base, keys = sandbox
    report = check_handler(f"{example_process}/webhooks", secret=SECRET,
                           state_url=f"{example_process}/state", sandbox_url=base, burst=20,
                           **keys)
    assert report.ok, report
    assert report.vendor == VENDOR


def test_the_plugin_checks_a_handler_with_its_own_sandboxs_events(payroll_sandbox,
                                                                  example_process):
    report = payroll_sandbox.check_handler(
        f"{example_process}/webhooks", SECRET, sandbox_url=payroll_sandbox.base_url,
        api_key=payroll_sandbox.api_key, api_secret=payroll_sandbox.api_secret, **FAST)
    assert report.ok, report
    assert report.sandbox_url == payroll_sandbox.base_url
