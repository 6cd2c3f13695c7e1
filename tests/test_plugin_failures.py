"""Failures that say why (issue 34, point 3): a failed test's report lists its tenant's
webhook deliveries that never got a 2xx, from the in-process server and from one reached
through PAYROLL_SANDBOX_URL in another network namespace (as a container); a loopback
webhook URL such a sandbox cannot reach raises at once, naming
payroll_sandbox_receiver_host; what the sandbox ignored (x-sandbox-warning) is a
`payroll_sandbox.SandboxWarning`."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from test_pytest_plugin import INNER_INI  # the settings customers are told to use

from payroll_sandbox import SandboxWarning
from payroll_sandbox.kit.pytest_plugin import LEDGER_STATES, REPORT_SECTION
from payroll_sandbox.testing import LoopbackCheck, LoopbackURLError, on_loopback
from payroll_sandbox.testing import Sandbox


pytest_plugins = ["pytester"]

WALMART = "6410a0000000000000000001"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The customer's suite in a pytest process of its own, only the plugins it uses."""
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:hypothesispytest",
        "-p", "no:faker", *args, timeout=180)


def sections(output: str) -> dict[str, str]:
    """Each failure's or error's report (pytest's `____ name ____` headers) -> the text of
    its REPORT_SECTION ("" when it has none)."""
    found = {}
    parts = re.split(r"^_{3,} (.+?) _{3,}$", output, flags=re.M)
    for name, body in zip(parts[1::2], parts[2::2]):
        body = re.split(r"^=+ .* =+$", body, flags=re.M)[0]
        _, _, section = body.partition(f" {REPORT_SECTION} ")
        found[name] = section.split("\n", 1)[1] if section else ""
    return found


# -- the report, from the in-process server -------------------------------------------------

CUSTOMER_TESTS = f"""
import pytest


def test_nobody_listens_there(payroll_sandbox):
    payroll_sandbox.use_webhook_url("http://127.0.0.1:1/webhooks")
    payroll_sandbox.trigger("company-updated")
    payroll_sandbox.advance(60)  # all three attempts
    assert False, "the app never heard of it"


def test_a_retry_is_still_due(payroll_sandbox, webhook_receiver):
    webhook_receiver.fail_next(1, status=503)
    task = payroll_sandbox.post("/task/create", {{
        "identifier": "u1", "company": "{WALMART}", "product": "deposit",
        "scenario": "auth-expired"}})
    payroll_sandbox.advance(10)
    assert webhook_receiver.events == [], "a first attempt was refused, the rest came"
    assert payroll_sandbox.get(f"/task/{{task['id']}}")["status"] == "completed"


async def test_async_too(async_payroll_sandbox, async_webhook_receiver):
    async_webhook_receiver.fail_next(3, status=500)
    await async_payroll_sandbox.trigger("company-updated")
    await async_payroll_sandbox.advance(60)
    await async_webhook_receiver.wait_for("company-updated", timeout=0)


def test_a_refused_signature_fails_the_teardown(payroll_sandbox, webhook_receiver):
    # The receiver's endpoint signed with a secret of its own, which the receiver does not
    # trust: answered 401, and the test goes on without looking.
    secret = payroll_sandbox.post("/secrets", {{"name": "rotated"}})
    payroll_sandbox.request("PUT", "/_sandbox/webhooks/endpoints", {{"endpoints": [
        {{"url": webhook_receiver.url, "secretId": secret["_id"]}}]}})
    payroll_sandbox.trigger("company-updated")


def test_every_delivery_arrived(payroll_sandbox, webhook_receiver):
    payroll_sandbox.trigger("company-updated")
    assert webhook_receiver.events == ["not this"]


def test_passes(payroll_sandbox, webhook_receiver):
    payroll_sandbox.use_webhook_url("http://127.0.0.1:1/webhooks")
    payroll_sandbox.trigger("company-updated")
"""


def test_a_failed_tests_report_lists_its_deliveries_that_never_got_a_2xx(pytester):
    pytester.makeini(INNER_INI.format(extra=""))
    pytester.makepyfile(test_customer=CUSTOMER_TESTS)
    result = run(pytester, "-q")
    output = result.stdout.str()
    assert result.parseoutcomes() == {"failed": 4, "passed": 2, "errors": 1}, output
    found = sections(output)

    nobody = found["test_nobody_listens_there"]
    assert nobody.startswith("1 webhook delivery of tenant "), nobody
    first, *attempts = nobody.splitlines()[1:]
    assert re.fullmatch(r"company-updated \(event [0-9a-f-]{36}\) to "
                        r"http://127\.0\.0\.1:1/webhooks: failed after 3 attempts", first)
    assert len(attempts) == 3
    for number, line in enumerate(attempts, 1):
        assert re.fullmatch(rf"  attempt {number} at \S+Z: connection refused: .+", line), line

    due = found["test_a_retry_is_still_due"]
    assert re.search(r"task-status-updated \(event \S+\) to http://127\.0\.0\.1:\d+/webhooks: "
                     r"pending after 1 attempt, the next attempt due at \S+Z on the tenant's "
                     r"clock \(advance it to send it\)\n  attempt 1 at \S+Z: HTTP 503", due), due
    assert "task-workflow-finished" not in due  # delivered: not listed

    async_report = found["test_async_too"]
    assert async_report.count("HTTP 500") == 3 and "failed after 3 attempts" in async_report

    # The teardown's check fails it once the tenant is being deleted: read before it goes.
    teardown = found["ERROR at teardown of test_a_refused_signature_fails_the_teardown"]
    assert "the webhook receiver refused 1 delivery" in output
    assert re.search(r"company-updated .*: pending after 1 attempt.*\n  attempt 1 at \S+Z: "
                     r"HTTP 401$", teardown), teardown

    assert found["test_every_delivery_arrived"] == ""  # nothing undelivered: no section
    # Each failed test left its bundle, the one failed at teardown read before its tenant went.
    from payroll_sandbox.edge.bundles import file_name

    bundles = pytester.path / "payroll-sandbox-bundles"
    assert sorted(p.name for p in bundles.iterdir()) == sorted(file_name(
        f"test_customer.py::{name}") for name in (
        "test_nobody_listens_there", "test_a_retry_is_still_due", "test_async_too",
        "test_a_refused_signature_fails_the_teardown", "test_every_delivery_arrived"))
    assert output.count(REPORT_SECTION) == 4


def test_show_capture_no_leaves_the_section_out(pytester):
    pytester.makeini(INNER_INI.format(extra=""))
    pytester.makepyfile(test_customer="""
def test_nobody_listens_there(payroll_sandbox):
    payroll_sandbox.use_webhook_url("http://127.0.0.1:1/webhooks")
    payroll_sandbox.trigger("company-updated")
    assert False
""")
    result = run(pytester, "-q", "--show-capture=no")
    assert result.parseoutcomes() == {"failed": 1}
    assert REPORT_SECTION not in result.stdout.str()


# -- SandboxWarning --------------------------------------------------------------------------

def test_an_unknown_body_field_is_a_sandbox_warning_at_the_tests_line(payroll_sandbox):
    with pytest.warns(SandboxWarning) as caught:
        task = payroll_sandbox.post("/task/create", {
            "identifier": "u1", "company": WALMART, "product": "deposit", "metdata": {}})
    [warning] = caught
    assert str(warning.message).startswith(
        "POST /task/create: unknown field $.metdata ignored (the sandbox's x-sandbox-warning")
    assert warning.filename == __file__  # the test's call, not the client's
    assert task["status"] == "queued"  # accepted, as production APIs do


def test_an_unknown_query_parameter_is_a_sandbox_warning(payroll_sandbox):
    with pytest.warns(SandboxWarning, match=r"^GET /company/list: unknown query parameter "
                                            r"limt ignored"):
        payroll_sandbox.get("/company/list", limt=5)


async def test_the_async_sandbox_warns_too(async_payroll_sandbox):
    with pytest.warns(SandboxWarning, match=r"unknown field \$\.metdata ignored") as caught:
        await async_payroll_sandbox.post("/access-token", {"identifier": "u1", "metdata": 1})
    assert caught[0].filename == __file__


def test_a_call_without_anything_ignored_warns_nothing(payroll_sandbox, recwarn):
    payroll_sandbox.post("/access-token", {"identifier": "u1"})
    payroll_sandbox.get("/company/list", limit=5)
    assert not [w for w in recwarn if issubclass(w.category, SandboxWarning)]


TYPO = f"""
def test_typo(payroll_sandbox):
    payroll_sandbox.post("/task/create", {{"identifier": "u1", "company": "{WALMART}",
                                          "product": "deposit", "metdata": {{"order": 7}}}})
"""


def test_pytests_summary_shows_the_typo_and_strict_settings_fail_it(pytester, monkeypatch):
    pytester.makepyfile(test_customer=TYPO)
    pytester.makeini("[pytest]\n")
    shown = run(pytester, "-q")
    assert shown.parseoutcomes() == {"passed": 1, "warnings": 1}, shown.stdout.str()
    shown.stdout.fnmatch_lines([
        "*warnings summary*",
        "test_customer.py::test_typo",
        "*test_customer.py:2: SandboxWarning: POST /task/create: unknown field $.metdata "
        "ignored (the sandbox's x-sandbox-warning: a typo? *--strict-bodies*"])

    pytester.makeini("[pytest]\nfilterwarnings = error::payroll_sandbox.SandboxWarning\n")
    failed = run(pytester, "-q")
    assert failed.parseoutcomes() == {"failed": 1}, failed.stdout.str()
    failed.stdout.fnmatch_lines(["*SandboxWarning: POST /task/create: unknown field $.metdata*"])

    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("PAYROLL_SANDBOX_STRICT_BODIES", "1")
    strict = run(pytester, "-q")
    assert strict.parseoutcomes() == {"failed": 1}, strict.stdout.str()
    strict.stdout.fnmatch_lines(["*SandboxError: 422 *metdata*"])


# -- the loopback check ----------------------------------------------------------------------

def test_loopback_urls_are_told_from_the_others():
    for url in ("http://127.0.0.1:8000/w", "http://127.9.8.7/w", "http://[::1]:80/w",
                "http://localhost:3000/w", "http://LocalHost/w", "http://app.localhost/w"):
        assert on_loopback(url), url
    for url in ("http://10.0.0.2:8000/w", "http://host.docker.internal:3000/w",
                "http://[fe80::1]/w", "http://example.com/w"):
        assert not on_loopback(url), url


def test_a_sandbox_on_this_machines_loopback_takes_a_loopback_url(payroll_sandbox_server):
    """The probe, against a sandbox that shares the loopback: its event arrives, the URL is
    taken, and the answer is kept for the tenants made after."""
    server = payroll_sandbox_server
    check = LoopbackCheck(server.base_url, server.api_key, server.api_secret)
    tenant = Sandbox(server.base_url, server.api_key, server.api_secret,
                     loopback=check).new_tenant()
    assert tenant.loopback is check
    try:
        tenant.use_webhook_url("http://127.0.0.1:1/webhooks")
        assert check.reaches is True
        assert [e["url"] for e in tenant.request("GET", "/_sandbox/webhooks/endpoints")] == \
            ["http://127.0.0.1:1/webhooks"]
    finally:
        tenant.request("DELETE", f"/_sandbox/tenants/{tenant.name}")


async def test_a_sandbox_known_not_to_reach_the_loopback_refuses_it_naming_the_setting(
        async_payroll_sandbox):
    async_payroll_sandbox.loopback = LoopbackCheck(async_payroll_sandbox.base_url,
                                                   reaches=False)
    with pytest.raises(LoopbackURLError, match="payroll_sandbox_receiver_host"):
        await async_payroll_sandbox.use_webhook_url("http://localhost:3000/webhooks")
    await async_payroll_sandbox.use_webhook_url("http://10.0.0.2:3000/webhooks")  # not loopback


# -- through PAYROLL_SANDBOX_URL, the sandbox in another network namespace -------------------

REMOTE_TESTS = """
import pytest


def test_the_app_answers_503_to_every_attempt(payroll_sandbox, webhook_receiver):
    webhook_receiver.fail_next(3, status=503)
    payroll_sandbox.trigger("company-updated")
    payroll_sandbox.advance(60)
    assert webhook_receiver.events, "the app got nothing"


def test_nobody_listens_there(payroll_sandbox, payroll_sandbox_receiver_host):
    payroll_sandbox.use_webhook_url(payroll_sandbox_receiver_host.url(1, "/webhooks"))
    payroll_sandbox.trigger("company-updated")
    assert False, "the app never heard of it"


def test_a_loopback_url_raises_at_once(payroll_sandbox):
    payroll_sandbox.use_webhook_url("http://127.0.0.1:8000/webhooks")


def test_passes(payroll_sandbox, webhook_receiver):
    payroll_sandbox.trigger("company-updated")
    webhook_receiver.assert_exactly_once("company-updated")
"""

RECEIVER_ON_THE_LOOPBACK = """
def test_the_receiver_fixture(payroll_sandbox, webhook_receiver):
    pass


async def test_the_async_receiver_fixture(async_payroll_sandbox, async_webhook_receiver):
    pass
"""


@pytest.mark.xdist_group("network-namespace")  # one /30 on the veth pair: one at a time
def test_a_sandbox_in_another_network_namespace_reports_and_refuses_the_loopback(
        pytester, monkeypatch):
    from test_container_network import namespace, run as run_remote, sandbox_in

    pytester.makeini(INNER_INI.format(extra=""))
    with namespace() as ns, sandbox_in(ns) as base_url:
        env = {"PAYROLL_SANDBOX_URL": base_url}
        pytester.makepyfile(test_customer=REMOTE_TESTS)
        result = run_remote(pytester, monkeypatch, env,
                            "--payroll-sandbox-receiver-host", ns.host_side)
        output = result.stdout.str()
        assert result.parseoutcomes() == {"failed": 3, "passed": 1}, output
        found = sections(output)
        refused = found["test_the_app_answers_503_to_every_attempt"]
        assert re.search(rf"company-updated \(event \S+\) to http://{ns.host_side}:\d+/webhooks: "
                         r"failed after 3 attempts\n(  attempt \d at \S+Z: HTTP 503\n?){3}$",
                         refused), refused
        nobody = found["test_nobody_listens_there"]
        assert re.search(rf"to http://{ns.host_side}:1/webhooks: failed after 1 attempt|"
                         rf"to http://{ns.host_side}:1/webhooks: pending after 1 attempt",
                         nobody), nobody
        assert "connection refused" in nobody
        assert "LoopbackURLError: http://127.0.0.1:8000/webhooks is on this machine's " \
               f"loopback, which the sandbox at {base_url} does not reach" in output
        assert "Set payroll_sandbox_receiver_host" in output

        # As Docker publishes a port: the sandbox reached at 127.0.0.1 through a forwarder,
        # still not sharing this machine's loopback. The receivers, left on the loopback
        # without a receiver host, raise at once instead of waiting for what cannot come.
        with forwarding(ns.sandbox_side, int(base_url.rsplit(":", 1)[1])) as port:
            local = f"http://127.0.0.1:{port}"
            pytester.makepyfile(test_customer=RECEIVER_ON_THE_LOOPBACK)
            result = run_remote(pytester, monkeypatch, {"PAYROLL_SANDBOX_URL": local})
        output = result.stdout.str()
        assert result.parseoutcomes() == {"errors": 2}, output
        # Each receiver's setup error names it (the summary may name it once more, cut to
        # the terminal's width or not).
        for test in ("test_the_receiver_fixture", "test_the_async_receiver_fixture"):
            error = output.split(f"ERROR at setup of {test} ", 1)[1].split("\n____", 1)[0]
            assert f"which the sandbox at {local} does not reach" in error, output
        assert REPORT_SECTION not in output  # nothing was sent


@contextmanager
def forwarding(host: str, port: int) -> Iterator[int]:
    """A TCP forwarder on 127.0.0.1 to host:port, as Docker's published port: the port it
    listens on."""
    loop = asyncio.new_event_loop()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    server = loop.run_until_complete(asyncio.start_server(connect, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        async def stop() -> None:
            server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


# -- bundles: a failed test's tenant, written for `serve --open-bundle` (issue 46, point 4) ---

BUNDLE_SUITE = f"""
import json
import pytest

LAST = {{}}


@pytest.fixture
def counted(payroll_sandbox, request):
    '''After the test, before its tenant goes: how many requests came after the test's own
    last one (its failure's bundle among them), written to counts.json.'''
    yield
    newest = payroll_sandbox.get("/_sandbox/requests", limit=1)[0]["id"]
    with open("counts.jsonl", "a") as file:
        file.write(json.dumps([request.node.name, newest - LAST[request.node.name]]) + "\\n")


def last_request(sandbox, name):
    LAST[name] = sandbox.get("/_sandbox/requests", limit=1)[0]["id"] + 1  # this read's id


@pytest.mark.parametrize("number", range(20))
def test_fails(payroll_sandbox, counted, request, number):
    payroll_sandbox.post("/task/create", {{"identifier": f"u{{number}}", "company": "{WALMART}",
                                          "product": "deposit"}})
    payroll_sandbox.advance(20)
    last_request(payroll_sandbox, request.node.name)
    assert number < 0, "deliberately"


@pytest.mark.parametrize("number", range(3))
def test_passes(payroll_sandbox, counted, request, number):
    payroll_sandbox.post("/task/create", {{"identifier": f"p{{number}}", "company": "{WALMART}",
                                          "product": "deposit"}})
    payroll_sandbox.advance(20)
    last_request(payroll_sandbox, request.node.name)
"""


def reopened_snapshot(path) -> tuple[str, dict]:
    """`payroll-sandbox serve --open-bundle FILE` as a process: the line it printed after
    its ready line, and GET /_sandbox/snapshot of the tenant it opened."""
    import json
    import subprocess
    import sys
    import urllib.request

    with subprocess.Popen([sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0",
                           "--open-bundle", str(path)], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as process:
        try:
            ready = process.stdout.readline()
            assert ready.startswith("payroll-sandbox serving "), ready
            opened = process.stdout.readline().strip()
            found = re.search(r"dashboard: (\S+)/_sandbox/#key=(\S+)&secret=(\S+)$", opened)
            request = urllib.request.Request(found.group(1) + "/_sandbox/snapshot", headers={
                "x-api-key": found.group(2), "x-api-secret": found.group(3)})
            with urllib.request.urlopen(request, timeout=30) as response:
                return opened, json.load(response)["data"]
        finally:
            process.terminate()
            process.wait(timeout=30)


def test_twenty_failing_tests_leave_twenty_bundles_that_reopen(pytester):
    import json

    from payroll_sandbox.edge.bundles import FORMAT, file_name

    pytester.makeini(INNER_INI.format(extra=""))
    pytester.makepyfile(test_customer=BUNDLE_SUITE)
    result = run(pytester, "-q", "-p", "no:randomly")
    output = result.stdout.str()
    assert result.parseoutcomes() == {"failed": 20, "passed": 3}, output
    folder = pytester.path / "payroll-sandbox-bundles"
    failed = [f"test_customer.py::test_fails[{number}]" for number in range(20)]
    assert sorted(p.name for p in folder.iterdir()) == sorted(map(file_name, failed))
    for test in failed:
        path = folder / file_name(test)
        assert path.stat().st_size <= 1024 * 1024  # a one-task test: at most 1 MB
        bundle = json.loads(path.read_text())
        assert (bundle["format"], bundle["test"]) == (FORMAT, test)
        assert len(bundle["snapshot"]["tasks"]) == 1
        assert "payroll-sandbox: bundle" in output and f"--open-bundle {path}" in output
    # The journal counts what came after each test's last request: a passing test's
    # tenant got none; a failed one's, the read of its bundle and the 3 of its report's
    # undelivered webhooks (one per delivery state, as before bundles; 3 with them off).
    counts = dict(json.loads(line) for line in
                  (pytester.path / "counts.jsonl").read_text().splitlines())
    assert counts == {**{f"test_fails[{n}]": 1 + len(LEDGER_STATES) for n in range(20)},
                      **{f"test_passes[{n}]": 0 for n in range(3)}}

    path = folder / file_name(failed[7])
    bundle = json.loads(path.read_text())
    opened, snapshot = reopened_snapshot(path)
    assert snapshot == bundle["snapshot"]
    assert opened.startswith(f"payroll-sandbox opened {path} (test {failed[7]}) as tenant "
                             f"{bundle['tenant']} at {bundle['clock']['now']}; its dashboard: "
                             "http://127.0.0.1:")
    assert bundle["tenant"].startswith("test_fails_7_")


def test_bundles_go_where_the_ini_says_and_off_writes_none(pytester):
    pytester.makeini(INNER_INI.format(extra="payroll_sandbox_bundles = ci/bundles"))
    pytester.makepyfile(test_customer=BUNDLE_SUITE.replace("range(20)", "range(2)"))
    result = run(pytester, "-q", "-p", "no:randomly")
    assert result.parseoutcomes() == {"failed": 2, "passed": 3}, result.stdout.str()
    assert len(list((pytester.path / "ci" / "bundles").iterdir())) == 2
    assert not (pytester.path / "payroll-sandbox-bundles").exists()

    (pytester.path / "counts.jsonl").unlink()
    result = run(pytester, "-q", "-p", "no:randomly", "--payroll-sandbox-bundles=off")
    assert result.parseoutcomes() == {"failed": 2, "passed": 3}, result.stdout.str()
    assert "payroll-sandbox: bundle" not in result.stdout.str()
    assert not (pytester.path / "payroll-sandbox-bundles").exists()
    assert len(list((pytester.path / "ci" / "bundles").iterdir())) == 2  # the first run's
    import json

    counts = dict(json.loads(line) for line in
                  (pytester.path / "counts.jsonl").read_text().splitlines())
    assert counts == {**{f"test_fails[{n}]": len(LEDGER_STATES) for n in range(2)},
                      **{f"test_passes[{n}]": 0 for n in range(3)}}  # off: no bundle read
