"""`payroll-sandbox verify-against`: the drift check reports exactly what differs.

The "service" is a second sandbox (the real app on a free port), alone or behind a small
proxy that changes exactly one field's JSON type and one status code; the command runs
as a real process against it. Its test user has a linked account at the company the
in-process sandbox links that user to (the catalog's first operational company with
deposit), with the same seed and tenant, so both sides generate the same person and the
record probes compare real records.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys

import aiohttp
import pytest
from aiohttp import web
from conftest import ACME, REPO

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.tools.cli import main
from payroll_sandbox.settings import Settings
from payroll_sandbox.tools.probes import PROBES, UNKNOWN_ID

IDENTIFIER = "verify-test-user"
KEYS = ["--key", ACME["x-api-key"], "--secret", ACME["x-api-secret"]]
RECORD_PROBES = ("linked-account-list", "income", "employment", "identity", "deposit-accounts",
                 "statements", "user-tasks")


async def verify_against(url: str, *args: str) -> tuple[int, str, str]:
    """`python -m payroll_sandbox verify-against URL ...` as a real process, awaited (the
    servers it talks to run on this test's loop)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "payroll_sandbox", "verify-against", url, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO)
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode, out.decode(), err.decode()


async def start_sandbox(aiohttp_server, loaded, clock, **overrides) -> str:
    settings = Settings(port=0, clock="manual").with_overrides(**overrides)
    app = create_app(settings, registry=build_registry(settings, clock=clock, loaded=loaded))
    server = await aiohttp_server(app, host="127.0.0.1")
    return str(server.make_url("")).rstrip("/")


@pytest.fixture
async def second_sandbox(aiohttp_server, loaded, clock) -> str:
    """A sandbox whose test user has a linked account, made by a real task."""
    base = await start_sandbox(aiohttp_server, loaded, clock)
    async with aiohttp.ClientSession(headers=ACME) as session:
        async with session.get(f"{base}/company/list", params={"product": "deposit"}) as answer:
            companies = (await answer.json())["data"]
        company = next(c["_id"] for c in companies if c["status"] == "operational")
        async with session.post(f"{base}/task/create", json={
                "identifier": IDENTIFIER, "company": company, "product": "deposit"}) as answer:
            assert answer.status == 200, await answer.text()
        async with session.post(f"{base}/_sandbox/clock/run-until-idle") as answer:
            assert answer.status == 200
        async with session.get(f"{base}/linked-account/list/{IDENTIFIER}") as answer:
            assert len((await answer.json())["data"]) == 1
    return base


def proxy_app(upstream: str, change=None, seen: list[str] | None = None) -> web.Application:
    """Forwards every request to `upstream`; `change(request, status, body)` may alter the
    answer; `seen` records each request as `METHOD /path?query`."""

    async def forward(request: web.Request) -> web.Response:
        if seen is not None:
            seen.append(f"{request.method} {request.path_qs}")
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() in FORWARDED}
        async with request.app[SESSION].request(
                request.method, upstream + request.path_qs, headers=headers,
                data=await request.read() or None, allow_redirects=False) as answer:
            status, body = answer.status, await answer.read()
            content_type = answer.content_type
        if change is not None:
            status, body = change(request, status, body)
        return web.Response(status=status, body=body, content_type=content_type)

    return forwarding_app(forward)


def forwarding_app(forward) -> web.Application:
    """An app that answers every path with `forward`, which finds a client session at
    request.app[SESSION]."""

    async def session_context(app: web.Application):
        async with aiohttp.ClientSession() as session:
            app[SESSION] = session
            yield

    app = web.Application()
    app.cleanup_ctx.append(session_context)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


SESSION = web.AppKey("session", aiohttp.ClientSession)
FORWARDED = ("x-api-key", "x-api-secret", "x-public-token", "x-api-version", "content-type",
             "accept", "plaid-client-id", "plaid-secret")  # the last two: the aggregator's


def drift(request: web.Request, status: int, body: bytes) -> tuple[int, bytes]:
    """Exactly two changes: the public token becomes a number, and an unknown company's
    404 a 400."""
    if request.method == "POST" and request.path == "/access-token" and status == 200:
        answer = json.loads(body)
        answer["data"]["publicToken"] = 12345
        return status, json.dumps(answer).encode()
    if request.path == f"/company/{UNKNOWN_ID}/details" and status == 404:
        return 400, body
    return status, body


async def test_verify_against_an_unmodified_sandbox_finds_no_difference(second_sandbox):
    code, out, err = await verify_against(second_sandbox, *KEYS, "--identifier", IDENTIFIER,
                                          "--json")
    assert code == 0, err + out
    report = json.loads(out)
    assert report["ok"] is True and report["differences"] == []
    assert [p["name"] for p in report["probes"]] == [p.name for p in PROBES]
    assert report["identifier"] == IDENTIFIER and report["url"] == second_sandbox
    # The records were there on both sides, so their fields were compared.
    not_compared = {n["probe"] for n in report["notes"] if "no items" in n["message"]}
    assert not not_compared & set(RECORD_PROBES), report["notes"]
    # Every probe went to both sides: what one probe captured (a task, its file, the run's
    # endpoint and secret, the run user's token) named the next ones' requests on each.
    assert [p["name"] for p in report["probes"] if not (p["service"] and p["sandbox"])] == []
    assert "x-api-secret" not in out and ACME["x-api-secret"] not in out


async def test_verify_against_reports_exactly_the_changed_type_and_status(
        aiohttp_server, second_sandbox):
    proxy = await aiohttp_server(proxy_app(second_sandbox, drift), host="127.0.0.1")
    url = str(proxy.make_url("")).rstrip("/")
    code, out, err = await verify_against(url, *KEYS, "--identifier", IDENTIFIER, "--json")
    assert code == 1, err + out
    report = json.loads(out)
    assert report["ok"] is False
    assert [(d["probe"], d["kind"], d["path"], d["service"], d["sandbox"])
            for d in report["differences"]] == [
        ("access-token", "type", "$.data.publicToken", "number", "string"),
        ("company-details-unknown", "status", "status", 400, 404)]
    by_name = {p["name"]: p for p in report["probes"]}
    assert by_name["company-details-unknown"]["service"]["status"] == 400
    assert by_name["company-details-unknown"]["differences"] == 1

    code, out, err = await verify_against(url, *KEYS, "--identifier", IDENTIFIER)
    assert code == 1, err + out
    lines = out.splitlines()
    assert lines[-1] == f"2 differences in 2 of {len(PROBES)} probes" or \
        lines[-1].startswith(f"2 differences in 2 of {len(PROBES)} probes (")
    assert any(line.startswith("DIFF  access-token ") for line in lines)
    assert "      type: $.data.publicToken: the service answers a number, the sandbox a " \
           "string" in lines
    assert "      status: status: the service answered 400, the sandbox 404" in lines
    assert sum(line.startswith("DIFF") for line in lines) == 2


async def test_verify_against_refuses_a_service_whose_health_says_production(
        aiohttp_server, loaded, clock):
    """A payroll-sandbox started with --environment production: only GET /health is sent."""
    production = await start_sandbox(aiohttp_server, loaded, clock, environment="production")
    seen: list[str] = []
    proxy = await aiohttp_server(proxy_app(production, seen=seen), host="127.0.0.1")
    code, out, err = await verify_against(str(proxy.make_url("")).rstrip("/"),
                                          "--key", "key-0001", "--secret", "secret-0001")
    assert code == 2 and out == ""
    assert "says environment production" in err and "Traceback" not in err
    assert seen == ["GET /health"]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_verify_against_refuses_production_keys_before_sending_anything(capsys):
    url = f"http://127.0.0.1:{closed_port()}"   # nothing listens: a request would fail
    assert main(["verify-against", url, "--key", "production-key-acme-0001",
                 "--secret", "production-secret-acme-0001"]) == 2
    err = capsys.readouterr().err
    assert "the API key or secret says production" in err and "cannot reach" not in err


def test_verify_against_refuses_a_host_that_does_not_look_like_a_sandbox(capsys):
    assert main(["verify-against", "https://api.payroll.example.com", *KEYS]) == 2
    err = capsys.readouterr().err
    assert "api.payroll.example.com does not look like a sandbox host" in err
    assert "--i-know-this-is-sandbox" in err


def test_verify_against_an_unreachable_url_exits_2(capsys):
    url = f"http://127.0.0.1:{closed_port()}"
    assert main(["verify-against", url, *KEYS]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the service at {url} (GET /health)" in err


@pytest.mark.parametrize(("args", "message"), [
    (["ftp://sandbox.example", *KEYS], "is not an http:// or https:// URL"),
    (["http://127.0.0.1:1?x=1", *KEYS], "without a query"),
    (["http://127.0.0.1:1", "--key", " ", "--secret", "s"], "must not be empty"),
    (["http://127.0.0.1:1", *KEYS, "--identifier", ""], "--identifier must be"),
])
def test_verify_against_bad_arguments_exit_2_with_one_line(capsys, args, message):
    assert main(["verify-against", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_verify_against_without_keys_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["verify-against", "http://127.0.0.1:8080"])
    assert exit_info.value.code == 2
    assert "--key" in capsys.readouterr().err


def test_docs_probe_table_is_the_probe_list():
    """docs/verify-against.md lists every probe, in the order they run, with the
    documented answer and the enum fields each one checks."""
    text = (REPO / "docs" / "verify-against.md").read_text()
    table = text.split("## The probes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w-]+)` \|[^|]+\| ([^|]+) \|([^|]*)\|$", table, re.M)
    assert [name for name, *_ in rows] == [p.name for p in PROBES]
    for (name, expect, enums), probe in zip(rows, PROBES):
        assert expect.split()[0] == probe.expect, name
        assert re.findall(r"`([^`]+)`", enums) == list(probe.enums), name
