"""Issue 11: what a hostile user or neighbour tried, each refused clearly and changing nothing.

Every test here failed on the main of issue 10 and passes now.
"""

from __future__ import annotations

import base64
import json
import logging
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from conftest import ACME, REPO, WALMART
from receiver import HANG

from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.edge.logs import TextLogFormatter
from payroll_sandbox.transport import dispatcher

JSON = {"content-type": "application/json"}
DEPOSIT = {"identifier": "user-1", "company": WALMART, "product": "deposit"}


class Deep:
    """JSON text of an object nested `levels` deep (json.dumps would overflow the stack)."""

    def __init__(self, levels: int) -> None:
        self.text = '{"a": ' * levels + "{}" + "}" * levels


def deep(levels: int) -> Deep:
    return Deep(levels)


def with_metadata(body: dict, metadata, inside: str = "") -> bytes:
    """The body as JSON text, with `metadata` (a Deep or a plain value) at the end."""
    text = metadata.text if isinstance(metadata, Deep) else json.dumps(metadata)
    return (json.dumps(body)[:-1] + f', "metadata": {text}}}').encode()


async def error_of(response, status: int, code: str | None = None) -> dict:
    body = await response.json()
    assert response.status == status, body
    assert set(body) == {"error"} and "Traceback" not in json.dumps(body)
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


async def task_count(client) -> int:
    response = await client.get("/_sandbox/stats", headers=ACME)
    return (await response.json())["data"]["tasks"]["stored"]


# ---------------------------------------------------------------- secrets


async def test_public_and_processor_tokens_are_not_derived_from_the_seed(make_client):
    """Two servers with the same seed made the same tokens: one could be computed offline."""
    tokens = []
    for _ in range(2):
        client = await make_client(seed=1)
        response = await client.post("/access-token", json={"identifier": "victim"}, headers=ACME)
        public = (await response.json())["data"]["publicToken"]
        response = await client.post("/_sandbox/aggregator/processor-token",
                                     json={"identifier": "victim"}, headers=ACME)
        processor = (await response.json())["data"]
        tokens.append((public, json.dumps(processor, sort_keys=True)))
    assert tokens[0][0] != tokens[1][0]
    assert tokens[0][1] != tokens[1][1]


# ---------------------------------------------------------------- the hosted flow's page


@pytest.mark.parametrize("config", [b"[" * 1500 + b"]" * 1500, b'{"publicToken": NaN}'],
                         ids=["1500-deep", "NaN"])
async def test_an_unreadable_sdk_configuration_is_a_400_page(client, config):
    encoded = base64.urlsafe_b64encode(config).decode().rstrip("=")
    response = await client.get(f"/initialize/{encoded}")
    assert response.status == 400
    page = await response.text()
    assert "not base64 of a JSON object" in page and "NaN" not in page


# ---------------------------------------------------------------- metadata and the ledger


async def test_metadata_960_deep_is_refused_and_changes_nothing(client):
    response = await client.post("/task/create", data=with_metadata(DEPOSIT, deep(960)),
                                 headers={**ACME, **JSON})
    assert response.status in (400, 422)  # too deep to parse here, or to keep
    assert await task_count(client) == 0


@pytest.mark.parametrize("metadata, problem", [
    (deep(100), "nested deeper"), ({f"k{n}": n for n in range(300)}, "keys and elements"),
    ({"note": "x" * 9000}, "bytes as JSON")], ids=["100-deep", "300-keys", "9000-bytes"])
async def test_task_metadata_past_its_bounds_is_422_naming_it(client, metadata, problem):
    before = await task_count(client)
    response = await client.post("/task/create", data=with_metadata(DEPOSIT, metadata),
                                 headers={**ACME, **JSON})
    error = await error_of(response, 422, "validation-failed")
    assert error["details"][0]["path"] == "$.metadata"
    assert problem in error["details"][0]["message"]
    assert await task_count(client) == before


async def test_metadata_of_one_task_of_a_workflow_is_named_by_its_index(client):
    raw = ('{"identifier": "user-1", "company": "%s", "tasks": [{"product": "deposit"}, '
           '{"product": "deposit", "metadata": %s}]}' % (WALMART, deep(20).text))
    response = await client.post("/task/create", data=raw.encode(), headers={**ACME, **JSON})
    error = await error_of(response, 422)
    assert error["details"][0]["path"] == "$.tasks[1].metadata"


async def test_a_delivery_that_cannot_be_built_is_recorded_failed_with_the_reason(
        sandbox, monkeypatch):
    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(dispatcher, "to_message", broken)
    await sandbox.post("/task/create", json=DEPOSIT, headers=ACME)
    await sandbox.post("/_sandbox/clock/run-until-idle", headers=ACME)
    response = await sandbox.get("/_sandbox/events", headers=ACME)
    deliveries = [d for event in (await response.json())["data"] for d in event["deliveries"]]
    assert deliveries, "every event has a delivery on the ledger"
    for delivery in deliveries:
        assert delivery["state"] == "failed", delivery
        assert delivery["attempts"][0]["error"].startswith("the request could not be built: "
                                                           "RecursionError")


# ---------------------------------------------------------------- stricter parsing


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "application/octet-stream"])
async def test_a_body_that_is_not_sent_as_json_is_415_with_strict_bodies(make_client,
                                                                          content_type):
    client = await make_client(strict_bodies=True)
    response = await client.post("/task/create", data=json.dumps(DEPOSIT),
                                 headers={**ACME, "content-type": content_type})
    error = await error_of(response, 415, "unsupported-media-type")
    assert error["details"][0]["location"] == "header"
    assert await task_count(client) == 0


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
async def test_a_json_body_sent_as_another_type_is_read_and_warned_about(client, content_type):
    """Issue 20, point 9: "A body sent without a JSON content type stays 415 only where the
    real service's behaviour is known to be that; otherwise parse it and warn." It is known
    nowhere, so the service's operations read it; the control plane still refuses it."""
    response = await client.post("/task/create", data=json.dumps(DEPOSIT),
                                 headers={**ACME, "content-type": content_type})
    assert response.status == 200, await response.text()
    assert response.headers["x-sandbox-warning"] == f"content-type {content_type} read as JSON"
    assert await task_count(client) == 1
    response = await client.post("/_sandbox/clock/advance", data=json.dumps({"seconds": 1}),
                                 headers={**ACME, "content-type": content_type})
    await error_of(response, 415, "unsupported-media-type")


async def test_json_types_with_a_charset_or_a_suffix_are_read(client):
    for content_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
        response = await client.post("/company/search", data=json.dumps({"query": "walmart"}),
                                     headers={**ACME, "content-type": content_type})
        assert response.status == 200, content_type


@pytest.mark.parametrize("query", ["limit=1_0", "skip=%D9%A3", "limit=%2010%20", "limit=+5"])
async def test_query_integers_are_ascii_digits_only(client, query):
    response = await client.get(f"/company/list?{query}", headers=ACME)
    error = await error_of(response, 422, "validation-failed")
    assert error["details"][0]["location"] == "query"


@pytest.mark.parametrize("url", ["http://[::1/x", "http://127.0.0.1:99999/hook", "ftp://x/hook",
                                 "http:///hook", "http://exa mple.com/", "http://127.0.0.1:0/"])
async def test_an_unusable_webhook_url_is_refused_at_registration(client, url):
    response = await client.put("/_sandbox/webhooks/endpoints",
                                json={"endpoints": [{"url": url}]}, headers=ACME)
    error = await error_of(response, 422, "validation-failed")
    assert error["details"][0]["path"] == "$.endpoints[0].url"
    response = await client.get("/_sandbox/webhooks/endpoints", headers=ACME)
    assert all(e["url"] != url for e in (await response.json())["data"])


async def test_a_dns_failure_is_recorded_as_one(sandbox):
    await sandbox.put("/_sandbox/webhooks/endpoints",
                      json={"endpoints": [{"url": "http://hook.sandbox-test.invalid/x"}]},
                      headers=ACME)
    await sandbox.post("/_sandbox/events/trigger", json={"eventType": "task-status-updated"},
                       headers=ACME)
    await sandbox.post("/_sandbox/clock/run-until-idle", headers=ACME)
    response = await sandbox.get("/_sandbox/events", headers=ACME)
    errors = [a["error"] for event in (await response.json())["data"]
              for d in event["deliveries"] if "invalid" in d["url"] for a in d["attempts"]]
    assert errors and all(e.startswith("DNS lookup failed for hook.sandbox-test.invalid")
                          for e in errors), errors


@pytest.mark.parametrize("identifier", ["user\r\nforged", "bell\u0007", "del\u007f", "c1\u0085"])
async def test_control_characters_in_an_identifier_are_422(client, identifier):
    response = await client.post("/access-token", json={"identifier": identifier}, headers=ACME)
    error = await error_of(response, 422)
    assert error["details"][0]["path"] == "$.identifier"


async def test_lone_surrogates_are_422_anywhere_in_a_body(client):
    raw = b'{"identifier": "u", "company": "%s", "product": "deposit", "metadata": {"n": "\\ud800"}}'
    response = await client.post("/task/create", data=raw % WALMART.encode(),
                                 headers={**ACME, **JSON})
    error = await error_of(response, 422)
    assert error["details"][0]["path"] == "$.metadata.n"
    assert await task_count(client) == 0


async def test_control_characters_in_a_path_identifier_are_422(client):
    response = await client.get("/linked-account/list/user%0d%0a1", headers=ACME)
    error = await error_of(response, 422)
    assert error["details"][0]["location"] == "path"


# ---------------------------------------------------------------- methods


async def test_a_405_says_which_methods_are_allowed(client):
    response = await client.delete("/access-token", headers=ACME)
    await error_of(response, 405, "method-not-allowed")
    assert response.headers["allow"] == "POST"


@pytest.mark.parametrize("path", ["/access-token", "/task/create", "/company/search"])
async def test_head_and_get_on_a_post_only_path_are_405(client, path):
    """/task/create and /company/search once fell to GET /task/{taskId} and
    GET /company/{companyId}: a 404 for a task or company named "create" or "search"."""
    for method in ("HEAD", "GET"):
        response = await client.request(method, path, headers=ACME)
        assert response.status == 405, (method, path)
        assert response.headers["allow"] == "POST"


# ---------------------------------------------------------------- the browser's view


async def test_pages_carry_a_content_security_policy(make_client):
    client = await make_client(frame_ancestors="https://app.example.com")
    dashboard = await client.get("/_sandbox/")
    policy = dashboard.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy
    assert dashboard.headers["x-frame-options"] == "DENY"
    assert dashboard.headers["referrer-policy"] == "no-referrer"
    config = base64.urlsafe_b64encode(b'{"publicToken": "p"}').decode()
    flow = await client.get(f"/initialize/{config}")
    assert "frame-ancestors https://app.example.com" in flow.headers["content-security-policy"]
    assert "x-frame-options" not in flow.headers
    for response in (dashboard, flow, await client.get("/health")):
        assert response.headers["x-content-type-options"] == "nosniff"


async def test_cors_only_for_what_a_browser_app_calls_with_a_public_token(client):
    preflight = {"origin": "https://app.example.com", "access-control-request-method": "POST",
                 "access-control-request-headers": "content-type, x-public-token"}
    allowed = await client.options("/company/search", headers=preflight)
    assert allowed.status == 204 and allowed.headers["access-control-allow-origin"] == "*"
    refused = await client.options("/_sandbox/reset", headers=preflight)
    assert "access-control-allow-origin" not in refused.headers
    search = await client.post("/company/search", json={"query": "walmart"}, headers=ACME)
    assert search.headers["access-control-allow-origin"] == "*"
    control = await client.get("/_sandbox/events", headers=ACME)
    assert "access-control-allow-origin" not in control.headers


async def test_a_host_name_the_server_was_not_told_is_refused(make_client):
    client = await make_client()
    rebound = await client.get("/_sandbox/events", headers={**ACME, "host": "evil.example:8080"})
    error = await error_of(rebound, 403, "host-not-allowed")
    assert "--allowed-host" in error["message"]
    for host in ("localhost:8080", "127.0.0.1:8080", "[::1]:8080", "sandbox.localhost"):
        response = await client.get("/health", headers={"host": host})
        assert response.status == 200, host
    named = await make_client(allowed_hosts="sandbox,ci-sandbox.internal")
    response = await named.get("/health", headers={"host": "ci-sandbox.internal:8080"})
    assert response.status == 200


def test_control_characters_in_logged_text_cannot_forge_a_line():
    record = logging.LogRecord("payroll_sandbox.access", logging.INFO, __file__, 1,
                               "%s %s", ("GET", "/nope\r\n2026-01-01 INFO forged"), None)
    line = TextLogFormatter().format(record)
    assert "\n" not in line and "\r" not in line and "\\x0d\\x0a" in line


# ---------------------------------------------------------------- tenants


async def test_tenants_idle_past_the_expiry_are_deleted_with_everything(make_client):
    client = await make_client(tenant_idle_expiry=600)
    response = await client.post("/_sandbox/tenants", json={}, headers=ACME)
    made = (await response.json())["data"]
    keys = {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}
    assert (await client.get("/_sandbox/tenant", headers=keys)).status == 200
    registry = client.server.app[SANDBOX].registry
    assert registry.expire_idle(600, now=time.monotonic() + 60) == []  # used a minute ago
    assert registry.expire_idle(600, now=time.monotonic() + 601) == [made["name"]]
    assert (await client.get("/_sandbox/tenant", headers=keys)).status == 401
    assert (await client.get("/_sandbox/tenant", headers=ACME)).status == 200  # fixtures stay
    stats = await client.get("/_sandbox/stats", headers=ACME)
    assert (await stats.json())["data"]["tenants"]["expiredIdle"] == 1


# ---------------------------------------------------------------- shutdown


def test_sigterm_during_run_until_idle_answers_503_and_runs_nothing_more(receiver_process):
    hook = receiver_process
    process = subprocess.Popen(
        [sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0", "--clock", "manual",
         "--webhook-url", hook, "--webhook-timeout", "60", "--shutdown-grace", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        line = process.stdout.readline().split()
        base = line[2]

        def call(method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
            data = json.dumps(body).encode() if body is not None else None
            request = urllib.request.Request(base + path, data=data, method=method,
                                             headers={**ACME, **JSON})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return response.status, json.load(response)
            except urllib.error.HTTPError as error:
                return error.code, json.load(error)

        for n in range(3):
            assert call("POST", "/task/create", {**DEPOSIT, "identifier": f"u{n}"})[0] == 200
        answer: list = []
        runner = threading.Thread(target=lambda: answer.append(
            call("POST", "/_sandbox/clock/run-until-idle")))
        runner.start()
        time.sleep(1.0)  # the run is waiting on the hanging receiver's first attempts
        process.send_signal(signal.SIGTERM)
        runner.join(timeout=30)
        status, body = answer[0]
        assert status == 503 and body["error"]["code"] == "shutting-down", body
        _, log = process.communicate(timeout=30)
        assert process.returncode == 0, log
        assert "interrupted" in log and "failed after" not in log
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.fixture
def receiver_process():
    """A receiver in a thread of its own that never answers (a hanging endpoint)."""
    import asyncio

    from receiver import Receiver

    loop = asyncio.new_event_loop()
    receiver = loop.run_until_complete(Receiver().start())
    receiver.program("/hooks", *([HANG] * 50))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield receiver.url("/hooks")
    asyncio.run_coroutine_threadsafe(receiver.stop(), loop).result(timeout=10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()


# ---------------------------------------------------------------- what aiohttp's parser refuses


@pytest.mark.parametrize("raw, status, code", [
    (b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 431, "request-too-large"),
    (b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 20_000 + b"\r\n\r\n", 431,
     "request-too-large"),
    (b"POST /company/search HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
     b"content-encoding: zstd\r\ncontent-length: 2\r\n\r\n{}", 415, "unsupported-content-encoding"),
    (b"GARBAGE\r\n\r\n", 400, "malformed-request"),
], ids=["10KB-url", "20KB-header", "content-encoding", "not-http"])
def test_what_the_http_parser_refuses_is_answered_in_the_error_shape(raw, status, code):
    import socket

    process = subprocess.Popen([sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        host, port = process.stdout.readline().split()[2].removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            connection.sendall(raw)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.split()[1] == str(status).encode(), head
        assert b"application/json" in head
        assert json.loads(body)["error"]["code"] == code
    finally:
        process.terminate()
        _, log = process.communicate(timeout=10)
    refusals = [line for line in log.splitlines() if "refused a malformed request" in line]
    assert len(refusals) == 1 and "Traceback" not in log, log


def test_allowed_hosts_come_from_repeated_flags_or_the_variable():
    import os

    for args, env in ((["--allowed-host", "ci-a", "--allowed-host", "ci-b"], {}),
                      ([], {"PAYROLL_SANDBOX_ALLOWED_HOSTS": "ci-a,ci-b"})):
        process = subprocess.Popen(
            [sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
            env={**os.environ, **env})
        try:
            base = process.stdout.readline().split()[2]
            statuses = {}
            for host in ("ci-b:8080", "other:8080"):
                request = urllib.request.Request(base + "/health", headers={"host": host})
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        statuses[host] = response.status
                except urllib.error.HTTPError as error:
                    statuses[host] = error.code
            assert statuses == {"ci-b:8080": 200, "other:8080": 403}, (args, env)
        finally:
            process.terminate()
            process.communicate(timeout=10)


async def test_short_json_escapes_cannot_slip_a_control_character_into_an_identifier(client):
    raw = b'{"identifier": "a\\r\\nb"}'
    response = await client.post("/access-token", data=raw, headers={**ACME, **JSON})
    error = await error_of(response, 422)
    assert error["details"][0]["path"] == "$.identifier"


@pytest.mark.parametrize("method", ["OPTIONS", "DELETE", "PUT"])
async def test_a_fixed_path_allows_only_its_own_methods(client, method):
    """/task/create also matches GET /task/{taskId}; its Allow is still POST alone."""
    for path in ("/task/create", "/company/search", "/_sandbox/events/trigger"):
        response = await client.request(method, path, headers=ACME)
        assert response.status == 405, (method, path)
        assert response.headers["allow"] == "POST", (method, path)


async def test_a_franchise_parent_that_names_no_company_is_404(client):
    body = {"_id": "6410a00000000000000fffff", "name": "Lone Burger",
            "tags": ["franchise-child"], "franchiseParent": "nope"}
    response = await client.post("/_sandbox/companies", json=body, headers=ACME)
    error = await error_of(response, 404, "company-not-found")
    assert error["details"][0]["path"] == "$.franchiseParent"
    walmart = await client.post("/_sandbox/companies", headers=ACME, json={
        **body, "franchiseParent": WALMART})  # exists, but is no franchise parent
    await error_of(walmart, 422)
