"""The pytest plugin as a customer uses it: a shared server, a fresh tenant per test, a real
webhook receiver; its configuration and the failures it must report, through pytester."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request

import pytest
# pytester's in-process runs (runpytest) take out of sys.modules what each imported first:
# PyYAML imported inside one would be imported again by the next, whose loader then cannot
# construct what the C parser (loaded once) builds ("could not determine a constructor for
# the tag None"), and the sandbox in every later run finds its fixture files "not valid
# YAML". Imported here, before any run, it stays.
import yaml  # noqa: F401

from conftest import REPO
from payroll_sandbox.kit.pytest_plugin import SandboxError
from payroll_sandbox.testing import WebhookReceiver

pytest_plugins = ["pytester"]

WALMART = "6410a0000000000000000001"
TASK_END = ["task-status-updated", "task-workflow-finished"]
HAPPY_PATH = ["task-authentication-status-updated", *TASK_END]

# What the inner sessions (pytester) run with: the settings customers are told to use.
INNER_INI = """\
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
filterwarnings = error
{extra}
"""


def deposit(sandbox, identifier: str = "u1", scenario: str = "auth-expired") -> dict:
    return sandbox.post("/task/create", {"identifier": identifier, "company": WALMART,
                                         "product": "deposit", "scenario": scenario})


def post_raw(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


# -- the sandbox client ------------------------------------------------------------------

def test_plugin_runs_a_task_on_the_manual_clock(payroll_sandbox):
    task = deposit(payroll_sandbox)
    assert payroll_sandbox.get(f"/task/{task['id']}")["status"] == "queued"
    payroll_sandbox.run_until_idle()
    events = payroll_sandbox.events(task=task["id"])
    assert [e["eventType"] for e in events][-2:] == TASK_END
    assert events[-2]["body"]["data"]["reason"] == "auth-expired"


def test_plugin_gives_each_test_its_own_tenant(payroll_sandbox, payroll_sandbox_server):
    other = payroll_sandbox_server.new_tenant()
    payroll_sandbox.trigger("company-updated")
    assert len(payroll_sandbox.events()) == 1
    assert other.events() == []
    assert payroll_sandbox.name != other.name


def test_plugin_reports_errors_with_the_error_body(payroll_sandbox):
    with pytest.raises(SandboxError) as raised:
        payroll_sandbox.post("/company/search", {"query": "x", "product": "a", "products": ["b"]})
    assert raised.value.status == 400
    assert raised.value.body["error"]["code"] == "product-and-products"


def test_sandbox_bind_scenario_and_public_token(payroll_sandbox):
    payroll_sandbox.bind_scenario("user/7", "connection-error")
    task = payroll_sandbox.post("/task/create", {"identifier": "user/7", "company": WALMART,
                                                 "product": "deposit"})
    payroll_sandbox.advance(3600)
    assert payroll_sandbox.get(f"/task/{task['id']}")["reason"] == "connection-error"
    token = payroll_sandbox.public_token("user/7")
    assert token.startswith("public-sandbox-")
    assert payroll_sandbox.get("/_sandbox/scenarios") and payroll_sandbox.request(
        "GET", "/linked-accounts?identifier=user%2F7") == []


def test_sandbox_snapshot_restores_the_tenant(payroll_sandbox):
    payroll_sandbox.trigger("company-updated")
    document = payroll_sandbox.snapshot()
    payroll_sandbox.trigger("company-deleted")
    assert len(payroll_sandbox.events()) == 2
    payroll_sandbox.restore(document)
    assert [e["eventType"] for e in payroll_sandbox.events()] == ["company-updated"]


# -- the webhook receiver ----------------------------------------------------------------

def test_webhook_receiver_gets_the_task_events_while_the_test_advances(payroll_sandbox,
                                                                      webhook_receiver):
    """The sync twin of the async acceptance test (test_pytest_plugin_async.py)."""
    task = deposit(payroll_sandbox, scenario="happy-path")
    assert webhook_receiver.events == []
    payroll_sandbox.advance(60)
    assert webhook_receiver.assert_order(HAPPY_PATH, task=task["id"], user="u1")
    finished = webhook_receiver.wait_for("task-workflow-finished", task=task["id"], timeout=0)
    assert finished["data"]["status"] == "completed"
    assert webhook_receiver.assert_exactly_once("task-status-updated", company=WALMART)[
        "data"]["status"] == "completed"
    # The sandbox's ledger agrees: one accepted attempt per event, to the receiver.
    for record in payroll_sandbox.events(task=task["id"]):
        assert [(d["url"], [a["status"] for a in d["attempts"]])
                for d in record["deliveries"]] == [(webhook_receiver.url, [200])]
    assert [d.event_id for d in webhook_receiver.deliveries] == [
        r["id"] for r in payroll_sandbox.events()]
    # Read by the installed SDK: 2.x's event (get_type) or 1.x's (a mapping).
    event = webhook_receiver.deliveries[0].cloud_event
    ce_type = event.get_type() if hasattr(event, "get_type") else event["type"]
    assert ce_type.endswith(".task-authentication-status-updated")


def test_webhook_receiver_wait_for_times_out_naming_what_arrived(payroll_sandbox,
                                                                 webhook_receiver):
    event = payroll_sandbox.trigger("company-updated")
    with pytest.raises(AssertionError) as raised:
        webhook_receiver.wait_for("company-deleted", timeout=0.05)
    message = str(raised.value)
    assert "no company-deleted delivery was accepted within 0.05 s" in message
    assert f"#1 company-updated {event['id']} -> 200" in message
    with pytest.raises(AssertionError, match=r"task='nope'"):
        webhook_receiver.wait_for("company-updated", timeout=0, task="nope")


def test_webhook_receiver_wait_for_wakes_when_the_delivery_arrives(payroll_sandbox,
                                                                   webhook_receiver):
    """Another thread triggers while the test waits: wait_for returns on the arrival."""
    trigger = threading.Thread(target=payroll_sandbox.trigger, args=("company-deleted",))
    trigger.start()
    try:
        body = webhook_receiver.wait_for("company-deleted", timeout=30)
    finally:
        trigger.join()
    assert body["eventType"] == "company-deleted"


def test_webhook_receiver_fail_next_is_retried_30_virtual_seconds_later(payroll_sandbox,
                                                                        webhook_receiver):
    webhook_receiver.fail_next(2, status=503)
    event = payroll_sandbox.trigger("company-updated")
    assert [a["status"] for a in event["deliveries"][0]["attempts"]] == [503]
    assert webhook_receiver.events == []
    with pytest.raises(AssertionError, match=r"company-updated .* -> 503"):
        webhook_receiver.assert_exactly_once("company-updated")
    payroll_sandbox.advance(29.9)
    assert [d.status for d in webhook_receiver.deliveries] == [503]
    payroll_sandbox.advance(0.1)
    payroll_sandbox.advance(30)
    assert [d.status for d in webhook_receiver.deliveries] == [503, 503, 200]
    assert {d.event_id for d in webhook_receiver.deliveries} == {event["id"]}
    webhook_receiver.assert_exactly_once("company-updated")


def test_webhook_receiver_assert_exactly_once_catches_a_replay(payroll_sandbox,
                                                               webhook_receiver):
    task = deposit(payroll_sandbox)
    payroll_sandbox.run_until_idle()
    webhook_receiver.assert_exactly_once("task-status-updated", task=task["id"])
    payroll_sandbox.post("/_sandbox/webhooks/replay", {"taskId": task["id"]})
    assert len(webhook_receiver.events) == 4
    with pytest.raises(AssertionError, match="expected exactly one task-status-updated "
                                             rf"\(task='{task['id']}'\) delivery, got 2"):
        webhook_receiver.assert_exactly_once("task-status-updated", task=task["id"])


def test_webhook_receiver_assert_order_catches_a_retry_that_arrives_late(payroll_sandbox,
                                                                         webhook_receiver):
    task = deposit(payroll_sandbox)
    webhook_receiver.fail_next(1)  # task-status-updated: retried after the workflow event
    payroll_sandbox.advance(60)
    assert webhook_receiver.assert_order(list(reversed(TASK_END)), task=task["id"])
    with pytest.raises(AssertionError) as raised:
        webhook_receiver.assert_order(TASK_END, task=task["id"])
    assert ("got ['task-workflow-finished', 'task-status-updated']" in str(raised.value))
    assert "task-status-updated" in str(raised.value) and "-> 500" in str(raised.value)


def test_webhook_receiver_can_listen_to_chosen_event_types(payroll_sandbox, webhook_receiver):
    webhook_receiver.register(payroll_sandbox, ["task-workflow-finished"])
    deposit(payroll_sandbox)
    payroll_sandbox.run_until_idle()
    assert [b["eventType"] for b in webhook_receiver.events] == ["task-workflow-finished"]


def test_use_webhook_url_keeps_the_receiver_registered(payroll_sandbox, webhook_receiver):
    with WebhookReceiver() as second:
        payroll_sandbox.use_webhook_url(second.url, ["company-deleted"])
        payroll_sandbox.use_webhook_url(second.url)  # the same URL again: replaced, all types
        endpoints = payroll_sandbox.get("/_sandbox/webhooks/endpoints")
        assert [{k: v for k, v in e.items() if k != "_id"} for e in endpoints] == [
            {"url": webhook_receiver.url}, {"url": second.url}]
        payroll_sandbox.trigger("company-updated")
        assert [d.status for d in second.deliveries] == [200]
    webhook_receiver.assert_exactly_once("company-updated")


def test_receiver_refuses_what_a_customer_endpoint_must_refuse():
    """Unsigned, wrongly signed, not a CloudEvent, a ce-type that is not the body's:
    each is answered 4xx and recorded as a problem; a well-signed one is accepted."""
    body = json.dumps({"eventType": "company-updated", "data": {}}).encode()
    headers = {"ce-id": "e-1", "ce-source": "com.example", "ce-specversion": "1.0",
               "ce-type": "com.example.company-updated", "content-type": "application/json"}
    signed = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    with WebhookReceiver(secret="s3cret") as receiver:
        statuses = [
            post_raw(receiver.url, body, {**headers, "x-hmac-signature-sha-256": signed}),
            post_raw(receiver.url, body, headers),
            post_raw(receiver.url, body, {**headers, "x-hmac-signature-sha-256": "0" * 64}),
            post_raw(receiver.url, b"{not json", {**headers, "content-type": "text/plain"}),
            post_raw(receiver.url, body, {"content-type": "application/json"}),
            post_raw(receiver.url, body, {**headers, "ce-type": "com.example.company-deleted",
                                          "x-hmac-signature-sha-256": signed}),
        ]
        assert statuses == [200, 401, 401, 400, 400, 400]
        assert receiver.events == [json.loads(body)]
        problems = receiver.problems
        assert len(problems) == 5
        assert "unsigned" in problems[0] and "does not match the body" in problems[1]
        assert "not a JSON object" in problems[2] and "not a binary-mode CloudEvent" in problems[3]
        assert "does not name eventType 'company-updated'" in problems[4]
        with pytest.raises(AssertionError, match="refused 5 deliveries"):
            receiver.check()
        with pytest.raises(AssertionError, match="refused 5 deliveries"):
            receiver.wait_for("company-updated")


# -- what the fixtures report, and their configuration (inner sessions) --------------------

def test_fixture_fails_the_test_when_a_delivery_is_wrongly_signed(pytester):
    """Another tenant (another secret) delivering to the test's receiver: a signature
    mismatch. wait_for says so at once; the test that never looks fails in teardown."""
    pytester.makeini(INNER_INI.format(extra=""))
    pytester.makepyfile("""
        import pytest

        def send_from_another_tenant(payroll_sandbox, receiver):
            other = payroll_sandbox.new_tenant()
            other.use_webhook_url(receiver.url)
            other.trigger("company-updated")

        def test_never_looks(payroll_sandbox, webhook_receiver):
            send_from_another_tenant(payroll_sandbox, webhook_receiver)
            assert webhook_receiver.events == []

        def test_waits(payroll_sandbox, webhook_receiver):
            send_from_another_tenant(payroll_sandbox, webhook_receiver)
            with pytest.raises(AssertionError, match="does not match the body"):
                webhook_receiver.wait_for("company-updated", timeout=30)

        def test_well_signed(payroll_sandbox, webhook_receiver):
            payroll_sandbox.trigger("company-updated")
            webhook_receiver.assert_exactly_once("company-updated")
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of test_never_looks*",
        "*the webhook receiver refused 1 delivery: #1 company-updated * -> 401 refused: "
        "x-hmac-signature-sha-256 does not match the body*"])


def test_fixture_hang_next_holds_the_attempt_until_it_times_out(pytester, monkeypatch):
    """hang_next, sync and async, with a 0.3 s attempt timeout from PAYROLL_SANDBOX_*."""
    monkeypatch.setenv("PAYROLL_SANDBOX_WEBHOOK_TIMEOUT", "0.3")
    pytester.makeini(INNER_INI.format(extra=""))
    pytester.makepyfile("""
        def check(event, receiver):
            attempts = event["deliveries"][0]["attempts"]
            assert [a["error"] for a in attempts] == ["timeout after 0.3s"]
            assert attempts[0]["latencyMs"] >= 250
            assert [d.status for d in receiver.deliveries] == [None]
            assert receiver.events == []

        def test_sync(payroll_sandbox, webhook_receiver):
            webhook_receiver.hang_next(1)
            check(payroll_sandbox.trigger("company-updated"), webhook_receiver)
            payroll_sandbox.advance(30)
            webhook_receiver.assert_exactly_once("company-updated")
            assert [d.status for d in webhook_receiver.deliveries] == [None, 200]

        async def test_async(async_payroll_sandbox, async_webhook_receiver):
            async_webhook_receiver.hang_next(1)
            check(await async_payroll_sandbox.trigger("company-updated"), async_webhook_receiver)
            await async_payroll_sandbox.advance(30)
            await async_webhook_receiver.wait_for("company-updated", timeout=0)
            assert [d.status for d in async_webhook_receiver.deliveries] == [None, 200]
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


SCENARIO = """\
description: "Only the ini file knows this one."
steps:
  - after: 1
    status: processing
  - after: 2
    status: failed
    reason: system-unavailable
"""

SEEN_CATALOG = """
import json, os

def test_catalog(payroll_sandbox):
    page = payroll_sandbox.get("/company/list", limit=100, skip=100)
    task = payroll_sandbox.post("/task/create", {"identifier": "u1", "product": "deposit",
                                                 "company": "6410a0000000000000000001"})
    with open(os.environ["CATALOG_OUT"], "w") as out:
        json.dump({"catalog": [c["_id"] for c in page], "task": task["id"]}, out)
"""


def test_plugin_takes_a_scenarios_folder_only_the_ini_names(pytester, payroll_sandbox):
    pytester.makeini(INNER_INI.format(extra="payroll_sandbox_scenarios = my-scenarios"))
    pytester.mkdir("my-scenarios")
    (pytester.path / "my-scenarios" / "ini-only.yaml").write_text(SCENARIO)
    pytester.makepyfile(f"""
        def test_ini_scenario(payroll_sandbox, webhook_receiver):
            task = payroll_sandbox.post("/task/create", {{
                "identifier": "u1", "company": "{WALMART}", "product": "deposit",
                "scenario": "ini-only"}})
            payroll_sandbox.advance(10)
            body = webhook_receiver.wait_for("task-status-updated", task=task["id"])
            assert body["data"]["reason"] == "system-unavailable"
            assert webhook_receiver.events[-1]["eventType"] == "task-workflow-finished"
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    # The session of this suite never heard of it.
    with pytest.raises(SandboxError) as raised:
        deposit(payroll_sandbox, scenario="ini-only")
    assert raised.value.status == 422 and "ini-only" in str(raised.value)


def test_plugin_seed_comes_from_option_then_ini_then_environment(pytester, monkeypatch):
    """The seed fixes each test's ids (the same run twice, the same task id); the catalog
    is the same whatever the seed."""
    pytester.makepyfile(SEEN_CATALOG)

    def seen(*args: str, ini: str = "", env_seed: str | None = None) -> dict:
        pytester.makeini(INNER_INI.format(extra=ini))
        if env_seed is None:
            monkeypatch.delenv("PAYROLL_SANDBOX_SEED", raising=False)
        else:
            monkeypatch.setenv("PAYROLL_SANDBOX_SEED", env_seed)
        out = pytester.path / "catalog.json"
        monkeypatch.setenv("CATALOG_OUT", str(out))
        pytester.runpytest("-p", "no:cacheprovider", *args).assert_outcomes(passed=1)
        return json.loads(out.read_text())

    default, seed_5, seed_7 = seen(), seen(env_seed="5"), seen(env_seed="7")
    assert len({default["task"], seed_5["task"], seed_7["task"]}) == 3
    assert default["catalog"] == seed_5["catalog"] == seed_7["catalog"]
    assert seen() == default  # deterministic per test
    assert seen(ini="payroll_sandbox_seed = 7", env_seed="5") == seed_7
    assert seen("--payroll-sandbox-seed", "5", ini="payroll_sandbox_seed = 7") == seed_5


def test_plugin_service_profile_comes_from_a_config_file(pytester):
    """The in-process server speaks as the configured vendor: its webhooks' ce-source."""
    (pytester.path / "profile.yaml").write_text("vendor: acme-payroll\n")
    pytester.makeini(INNER_INI.format(extra="payroll_sandbox_config = profile.yaml"))
    pytester.makepyfile("""
        def test_vendor(payroll_sandbox, webhook_receiver):
            payroll_sandbox.trigger("company-updated")
            webhook_receiver.wait_for("company-updated")
            [delivery] = webhook_receiver.deliveries
            assert delivery.headers["ce-source"] == "com.acme-payroll"
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.parametrize(("ini", "says"), [
    ("payroll_sandbox_fixtures = missing-folder", "*missing-folder*"),
    ("payroll_sandbox_seed = seven", "ini key payroll_sandbox_seed: $.seed: 'seven' is not a "
                                     "whole number"),
])
def test_plugin_reports_a_configuration_error_clearly(pytester, ini, says):
    pytester.makeini(INNER_INI.format(extra=ini))
    pytester.makepyfile("""
        def test_one(payroll_sandbox):
            pass

        def test_not_using_it():
            pass
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([f"*payroll-sandbox configuration error: {says}"])


def test_plugin_uses_a_running_server_named_by_the_url_variable(pytester, monkeypatch,
                                                                payroll_sandbox_server):
    """PAYROLL_SANDBOX_URL: the inner session starts no server of its own; its tenants and
    receivers work against this session's server."""
    monkeypatch.setenv("PAYROLL_SANDBOX_URL", payroll_sandbox_server.base_url)
    monkeypatch.setenv("PAYROLL_SANDBOX_API_KEY", payroll_sandbox_server.api_key)
    monkeypatch.setenv("PAYROLL_SANDBOX_API_SECRET", payroll_sandbox_server.api_secret)
    stored = payroll_sandbox_server.get("/_sandbox/stats")["tenants"]["stored"]
    pytester.makeini(INNER_INI.format(extra=""))
    pytester.makepyfile(f"""
        def test_remote(payroll_sandbox, webhook_receiver):
            assert payroll_sandbox.base_url == "{payroll_sandbox_server.base_url}"
            payroll_sandbox.trigger("company-updated")
            webhook_receiver.assert_exactly_once("company-updated")

        async def test_remote_async(async_payroll_sandbox, async_webhook_receiver):
            await async_payroll_sandbox.trigger("company-updated")
            await async_webhook_receiver.wait_for("company-updated", timeout=0)
    """)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)
    assert payroll_sandbox_server.get("/_sandbox/stats")["tenants"]["stored"] == stored


def test_plugin_loads_without_pytest_asyncio(pytester):
    """The sync fixtures work; the async ones are simply absent. A package of that name
    that refuses to import stands first on the path (pytest's own import hook finds
    plugins' modules itself, so only the path can hide the real one)."""
    shadow = pytester.mkdir("shadow") / "pytest_asyncio"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise ImportError("not installed here")\n')
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile("""
        import sys

        import pytest

        def test_sync(payroll_sandbox, webhook_receiver):
            payroll_sandbox.trigger("company-updated")
            webhook_receiver.assert_exactly_once("company-updated")

        def test_async_fixtures_absent(request):
            assert "pytest_asyncio" not in sys.modules
            for name in ("async_payroll_sandbox", "async_webhook_receiver"):
                with pytest.raises(pytest.FixtureLookupError):
                    request.getfixturevalue(name)
    """)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio",
         "-p", "no:aiohttp"], cwd=pytester.path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(pytester.path / "shadow")})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def readme_examples() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## The pytest plugin\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_plugin_examples_pass_as_written(pytester):
    examples = readme_examples()
    assert len(examples) >= 2
    pytester.makeini(INNER_INI.format(extra=""))
    for number, example in enumerate(examples, 1):
        pytester.makepyfile(**{f"test_readme_{number}": example})
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    tests = sum(len(re.findall(r"^(?:async )?def test_", e, re.M)) for e in examples)
    # A scenario matrix's test is an item per fitting scenario of the catalog.
    from payroll_sandbox.kit import matrix
    from payroll_sandbox.settings import Settings

    for marked in re.findall(r"payroll_sandbox_each_scenario\((.*?)\)", "".join(examples)):
        tests += len(matrix.cases(Settings(clock="manual"), eval(f"dict({marked})"))) - 1
    assert result.parseoutcomes() == {"passed": tests}, result.stdout.str()


def test_importing_the_plugin_leaves_the_server_out_of_a_customers_pytest_start():
    """Every pytest start of an environment with the package imports the plugin: the
    server's libraries load only when a fixture asks for the sandbox (bench/plugin_import.py
    measures the time)."""
    import subprocess
    import sys

    loaded = json.loads(subprocess.run(
        [sys.executable, "-c", "import sys, json, pytest; import payroll_sandbox.kit.pytest_plugin; "
         "print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, timeout=60).stdout)
    heavy = [m for m in loaded if m.split(".")[0] in
             ("aiohttp", "jsonschema", "jsonschema_rs", "faker", "yaml", "orjson", "rapidfuzz",
              "apscheduler", "cloudevents")
             or m in ("payroll_sandbox.app", "payroll_sandbox.load.catalog", "urllib.request")]
    assert heavy == []
