"""Webhooks reach the test machine from a sandbox that does not share its loopback, as from a
container on a bridge network (docs/ci/github-actions.yml's service container,
testcontainers).

The sandbox runs as the image runs it (the Dockerfile's command and environment: every
interface, port 8080) in a network namespace of its own, joined to the test's by a veth
pair: its 127.0.0.1 is not the test's. A customer's test suite, configured as the GitHub
job configures it (PAYROLL_SANDBOX_URL, PAYROLL_SANDBOX_RECEIVER_HOST, here the test
side's address of the pair in place of host.docker.internal), gets its webhooks; without
the receiver host a receiver's loopback URL is refused at once, naming the setting (the
deliveries would go to the sandbox's own loopback). Needs root and `ip netns` (skipped with
the reason elsewhere, failed under CI=true). tests/test_plugin_failures.py uses the same
set-up.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from conftest import REPO
from test_recipes import dockerfile, github_job, payroll_sandbox

pytest_plugins = ["pytester"]
# One test at a time on the fixed /30 below (test_plugin_failures.py's too): one xdist worker.
pytestmark = pytest.mark.xdist_group("network-namespace")

HOST_SIDE, SANDBOX_SIDE = "10.213.77.1", "10.213.77.2"  # a /30 on the veth pair only
PORT = 8080


def ip(*args: str, namespace: str | None = None) -> None:
    command = ["ip", *(("-n", namespace) if namespace else ()), *args]
    subprocess.run(command, check=True, capture_output=True, text=True, timeout=20)


@dataclass(frozen=True)
class Namespace:
    name: str
    host_side: str      # the test's address on the pair
    sandbox_side: str   # the sandbox's address on the pair


@contextmanager
def namespace() -> Iterator[Namespace]:
    """A network namespace with its loopback up and a veth pair to the test's namespace."""
    unavailable = ("needs root" if os.geteuid() != 0
                   else "needs iproute2 (`ip`)" if shutil.which("ip") is None else None)
    name = f"psb{os.getpid()}"
    outer, inner = f"psbh{os.getpid() % 100000}", f"psbn{os.getpid() % 100000}"
    if unavailable is None:
        try:
            ip("netns", "add", name)
        except subprocess.CalledProcessError as error:
            unavailable = f"network namespaces are not permitted here: {error.stderr.strip()}"
    if unavailable is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the network namespace test cannot run in CI: {unavailable}")
        pytest.skip(unavailable)
    try:
        ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        ip("link", "set", inner, "netns", name)
        ip("addr", "add", f"{HOST_SIDE}/30", "dev", outer)
        ip("link", "set", outer, "up")
        ip("addr", "add", f"{SANDBOX_SIDE}/30", "dev", inner, namespace=name)
        ip("link", "set", inner, "up", namespace=name)
        ip("link", "set", "lo", "up", namespace=name)
        yield Namespace(name, HOST_SIDE, SANDBOX_SIDE)
    finally:
        subprocess.run(["ip", "link", "del", outer], capture_output=True, timeout=20)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)


@contextmanager
def sandbox_in(ns: Namespace) -> Iterator[str]:
    """The image's command with its environment (0.0.0.0:8080) inside the namespace; its
    base URL as the test reaches it."""
    image = dockerfile()
    assert image["env"]["PAYROLL_SANDBOX_HOST"] == "0.0.0.0"
    assert image["env"]["PAYROLL_SANDBOX_PORT"] == str(PORT)
    process = subprocess.Popen(
        ["ip", "netns", "exec", ns.name, *payroll_sandbox(image["ENTRYPOINT"]), *image["CMD"]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, **image["env"]})
    try:
        line = process.stdout.readline()
        assert line.startswith("payroll-sandbox serving "), process.stderr.read()
        base_url = f"http://{ns.sandbox_side}:{PORT}"
        with urllib.request.urlopen(f"{base_url}/health", timeout=10) as answer:
            assert json.load(answer)["data"]["status"] == "ok"
        yield base_url
    finally:
        process.terminate()
        process.communicate(timeout=20)


CUSTOMER_TESTS = """
import os

def test_a_webhook_arrives(payroll_sandbox, webhook_receiver, payroll_sandbox_receiver_host):
    assert webhook_receiver.url.startswith(os.environ["EXPECTED_RECEIVER"])
    payroll_sandbox.trigger("company-updated")
    webhook_receiver.wait_for("company-updated", timeout=20)
    webhook_receiver.assert_exactly_once("company-updated")
    assert payroll_sandbox_receiver_host.listen == "0.0.0.0"


async def test_a_webhook_arrives_at_the_async_receiver(async_payroll_sandbox,
                                                       async_webhook_receiver):
    await async_payroll_sandbox.trigger("company-updated")
    await async_webhook_receiver.wait_for("company-updated", timeout=20)
"""

WITHOUT_THE_OPTION = """
import pytest
from payroll_sandbox.testing import LoopbackURLError, WebhookReceiver


def test_a_receiver_on_the_loopback_is_refused_at_once(payroll_sandbox):
    with WebhookReceiver() as receiver:
        assert receiver.url.startswith("http://127.0.0.1:")
        with pytest.raises(LoopbackURLError, match="Set payroll_sandbox_receiver_host"):
            receiver.register(payroll_sandbox)  # the sandbox's own loopback, over there
    assert payroll_sandbox.request("GET", "/_sandbox/webhooks/endpoints") == []
"""


def test_a_sandbox_in_another_network_namespace_delivers_through_the_receiver_host(
        pytester, monkeypatch):
    pytester.makeini("[pytest]\nasyncio_mode = auto\n")
    job_env, _ = github_job()
    assert set(job_env) == {"PAYROLL_SANDBOX_URL", "PAYROLL_SANDBOX_RECEIVER_HOST"}
    with namespace() as ns, sandbox_in(ns) as base_url:
        env = {"PAYROLL_SANDBOX_URL": base_url, "EXPECTED_RECEIVER": f"http://{ns.host_side}:"}
        started = time.monotonic()
        pytester.makepyfile(test_customer=CUSTOMER_TESTS)
        for how, extra in (("option", ["--payroll-sandbox-receiver-host", ns.host_side]),
                           ("variable", [])):
            variables = env | ({"PAYROLL_SANDBOX_RECEIVER_HOST": ns.host_side}
                               if how == "variable" else {})
            result = run(pytester, monkeypatch, variables, *extra)
            assert result.ret == 0 and "2 passed" in result.stdout.str(), result.stdout.str()
        pytester.makepyfile(test_customer=WITHOUT_THE_OPTION)
        result = run(pytester, monkeypatch, env)
        assert result.ret == 0 and "1 passed" in result.stdout.str(), result.stdout.str()
        assert time.monotonic() - started < 120


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        variables: dict[str, str], *args: str) -> pytest.RunResult:
    """The customer's suite in a process of its own with `variables` set."""
    with monkeypatch.context() as patched:
        patched.delenv("PAYROLL_SANDBOX_RECEIVER_HOST", raising=False)
        for name, value in variables.items():
            patched.setenv(name, value)
        # Only the plugin under test: the other plugins of this environment cost seconds
        # at each start (schemathesis brings hypothesis) and play no part here.
        return pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:hypothesispytest",
            "-p", "no:faker", "-q", *args, timeout=180)
