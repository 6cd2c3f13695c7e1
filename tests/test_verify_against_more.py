"""`payroll-sandbox verify-against`, continued: whole answers, unreadable answers, what it
refuses, what it probes, and the run's own user.

The "service" is a real sandbox on a free port (tests/test_verify_against.py's
`second_sandbox`), alone or behind a proxy on 127.0.0.1 that changes how it answers (in
two pieces; nothing it does not know), or a small server that answers what no sandbox
would (JSON nested 200,000 deep, a body that is not JSON, production). The command runs
as a real process (or through the CLI's entry point when nothing may be sent).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from conftest import ACME
from test_real_api_surface import ROWS
from test_verify_against import (FORWARDED, IDENTIFIER, KEYS, SESSION, closed_port,  # noqa: F401
                                 forwarding_app, second_sandbox, verify_against)

from payroll_sandbox.tools.cli import main
from payroll_sandbox.edge.routes import OPERATIONS
from payroll_sandbox.tools.verify import RECORD_KINDS, in_process_sandbox
from payroll_sandbox.tools.answers import MAX_DEPTH, parse_answer
from payroll_sandbox.tools.probes import AGGREGATOR_KEYS, CAPTURED_BY, HOOK_URL, PROBES, SECRET_NAME

DEEP = 200_000
PIECE_PAUSE = 0.02  # seconds between an answer's two pieces: they reach the client apart


def url_of(server) -> str:
    return str(server.make_url("")).rstrip("/")


def piecemeal_proxy(upstream: str, pieces: list[int], seen: list[dict] | None = None,
                    health: dict | None = None, drop: str | None = None) -> web.Application:
    """Forwards every request to `upstream` and sends each answer back chunked, in two
    pieces with a drain and a pause between them (`pieces` counts the writes of each
    answer); `seen` records each request (method, path with query, JSON body);
    `health`, when given, is the answer to GET /health instead of upstream's; a request
    `METHOD /path` equal to `drop` gets its connection closed, no answer."""

    async def forward(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if seen is not None:
            seen.append({"method": request.method, "path": request.path_qs,
                         "body": json.loads(raw) if raw else None})
        if f"{request.method} {request.path}" == drop:
            request.transport.close()
            raise asyncio.CancelledError  # the handler ends with the connection
        if health is not None and request.path == "/health":
            status, body, content_type = 200, json.dumps(health).encode(), "application/json"
        else:
            headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED}
            async with request.app[SESSION].request(
                    request.method, upstream + request.path_qs, headers=headers,
                    data=raw or None, allow_redirects=False) as answer:
                status, body = answer.status, await answer.read()
                content_type = answer.headers.get("content-type", "application/json")
        response = web.StreamResponse(status=status, headers={"content-type": content_type})
        response.enable_chunked_encoding()
        await response.prepare(request)
        half = max(1, len(body) // 2)
        written = 0
        for piece in (body[:half], body[half:]):
            if piece:
                await response.write(piece)   # write() drains: the piece is on the wire
                written += 1
                await asyncio.sleep(PIECE_PAUSE)
        pieces.append(written)
        await response.write_eof()
        return response

    return forwarding_app(forward)


# -- whole answers ---------------------------------------------------------------------------

async def test_answers_sent_in_two_pieces_are_read_whole_and_show_no_difference(
        aiohttp_server, second_sandbox):
    pieces: list[int] = []
    proxy = await aiohttp_server(piecemeal_proxy(second_sandbox, pieces), host="127.0.0.1")
    code, out, err = await verify_against(url_of(proxy), *KEYS, "--identifier", IDENTIFIER,
                                          "--json")
    assert code == 0, err + out
    report = json.loads(out)
    assert report["ok"] is True and report["differences"] == [], report["differences"]
    # Every answer with a body of two bytes or more came in two pieces, and was read as JSON.
    assert pieces.count(2) >= len(PROBES), pieces
    answered = [p["service"] for p in report["probes"] if p["service"]]
    assert answered and all(a["json"] and a["unreadable"] is None for a in answered), answered
    assert "not JSON" not in out


# -- answers that cannot be read -------------------------------------------------------------

def deep_json() -> bytes:
    return b"[" * DEEP + b"]" * DEEP


def unreadable_service(body: bytes, content_type: str) -> web.Application:
    """Answers every request, /health too, 200 with `body`."""

    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type=content_type)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


@pytest.mark.parametrize(("body", "content_type", "reason"), [
    (deep_json(), "application/json", f"nested deeper than {MAX_DEPTH} levels"),
    (b"<html><body>maintenance</body></html>", "text/html", "not JSON"),
], ids=["nested-200000-deep", "html"])
async def test_a_service_whose_answers_cannot_be_read_is_a_difference_per_probe_not_a_traceback(
        aiohttp_server, body, content_type, reason):
    service = await aiohttp_server(unreadable_service(body, content_type), host="127.0.0.1")
    code, out, err = await verify_against(url_of(service), *KEYS)
    assert code == 1, err + out
    assert "Traceback" not in err + out and "RecursionError" not in err + out
    lines = out.splitlines()
    # Each probe the sandbox answers with a 2xx JSON body: one line saying why the
    # service's answer was not compared; the others: their statuses differ.
    unreadable = [line for line in lines if line.startswith("      type: $: the service's answer "
                                                              f"could not be read ({reason})")]
    assert unreadable, out
    assert all(len(line) < 300 for line in lines), "one clear line each"
    assert "status: status: the service answered 200, the sandbox 404" in out
    assert re.search(r"^\d+ differences in \d+ of \d+ probes", lines[-1]), lines[-1]


def test_parse_answer_never_raises_and_says_why_it_could_not_read():
    assert parse_answer(deep_json()).reason == f"nested deeper than {MAX_DEPTH} levels"
    # Within the decoder's limit but deeper than any API nests: not compared either.
    assert parse_answer(b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)).reason == \
        f"nested deeper than {MAX_DEPTH} levels"
    assert parse_answer(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) == \
        json.loads(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH)
    for raw in (b"", b"  ", b"{", b"\xff\xfe\x00", b"<html>", b"NaN-ish"):
        assert parse_answer(raw).reason == "not JSON", raw


# -- production, whatever its case -----------------------------------------------------------

def health_service(answer: dict, headers: dict, seen: list[str]) -> web.Application:
    """A service whose GET /health answers `answer` with `headers`; `seen` records every
    request it gets."""

    async def handle(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path_qs}")
        if request.path == "/health":
            return web.json_response(answer, headers=headers)
        return web.json_response({"data": []})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


@pytest.mark.parametrize(("answer", "headers", "said"), [
    ({"data": {"status": "ok", "environment": "Production"}}, {}, "environment Production"),
    ({"data": {"status": "ok", "environment": "PRODUCTION"}}, {}, "environment PRODUCTION"),
    ({"environment": "Live"}, {}, "environment Live"),
    ({"status": "ok"}, {"x-environment": "Production"}, "x-environment: Production"),
], ids=["Production", "PRODUCTION", "Live-bare", "header-Production"])
async def test_a_health_that_says_production_in_any_case_is_refused_after_health_alone(
        aiohttp_server, answer, headers, said):
    seen: list[str] = []
    service = await aiohttp_server(health_service(answer, headers, seen), host="127.0.0.1")
    code, out, err = await verify_against(url_of(service), *KEYS)
    assert code == 2 and out == "", out
    refusals = [line for line in err.splitlines() if "refused" in line]
    assert len(refusals) == 1 and said in refusals[0], err
    assert "Traceback" not in err
    assert seen == ["GET /health"]


@pytest.mark.parametrize(("key", "secret"), [
    ("Production-key-acme-0001", "sandbox-secret"),
    ("PRODUCTION-KEY-ACME-0001", "sandbox-secret"),
    ("sandbox-key", "sk_prod_4eC39HqLyjWDarjtT1zdp7dc"),
    ("sandbox-key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sandbox-secret"),
    ("sandbox-key", "SK_PROD_4EC39HQLYJWDARJTT1ZDP7DC"),
    ("pk_live_abc", "sandbox-secret"),
], ids=["Production-key", "PRODUCTION-key", "sk_prod-secret", "sk_live-secret", "sk_live-key",
        "SK_PROD-secret", "pk_live-key"])
async def test_keys_shaped_like_production_or_live_ones_are_refused_before_anything_is_sent(
        aiohttp_server, key, secret):
    seen: list[str] = []
    service = await aiohttp_server(health_service({"data": {}}, {}, seen), host="127.0.0.1")
    code, out, err = await verify_against(url_of(service), "--key", key, "--secret", secret)
    assert code == 2 and out == ""
    assert "the API key or secret says production" in err and "Traceback" not in err
    assert key not in err and secret not in err
    assert seen == []


@pytest.mark.parametrize("secret", ["sk_test_4eC39HqLyjWDarjtT1zdp7dc", "liverpool-secret",
                                    "a1b2-live"])
def test_keys_that_only_contain_the_words_are_not_refused_for_them(capsys, secret):
    url = f"http://127.0.0.1:{closed_port()}"
    assert main(["verify-against", url, "--key", "sandbox-key", "--secret", secret]) == 2
    err = capsys.readouterr().err
    assert "says production" not in err and f"cannot reach the service at {url}" in err


@pytest.mark.parametrize("host", ["production.sandbox.vendor.example",
                                  "api.Sandbox-PROD.vendor.example", "LIVE.sandbox.example"])
def test_a_host_named_production_is_refused_even_with_i_know_this_is_sandbox(capsys, host):
    assert main(["verify-against", f"https://{host}", *KEYS, "--i-know-this-is-sandbox"]) == 2
    err = capsys.readouterr().err
    assert f"the host {host.lower()} says production" in err


# -- what is probed --------------------------------------------------------------------------

READS = {("POST", "/company/search"), ("POST", "/task/prescreen")}  # reads sent as POST


def is_read(row) -> bool:
    return row.method == "GET" or (row.method, row.path) in READS


def matches(template: str, path: str) -> bool:
    """A probe's path (its query aside; `{name}` where an earlier answer fills it in, or an
    unknown id) is the row's path, each `{parameter}` one segment."""
    pattern = re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template))
    return re.fullmatch(pattern, path.split("?", 1)[0]) is not None


def probes_of(row) -> list:
    return [p for p in PROBES if p.method == row.method and matches(row.path, p.path)]


def test_the_probes_cover_every_operation_of_the_real_surface():
    """Every operation of real-api-surface.md (as tests/test_real_api_surface.py reads it),
    each one the sandbox declares at its real path, is probed: a read with a request the
    documentation answers with a 2xx (its fields compared), a write at least once."""
    declared = {(op.method, op.path) for op in OPERATIONS}
    assert len(ROWS) >= 30
    reads = [row for row in ROWS if is_read(row)]
    assert len(reads) >= 17, [r.id for r in reads]
    for row in ROWS:
        assert (row.method, row.path) in declared, f"the sandbox does not declare {row.id}"
        probes = probes_of(row)
        assert probes, f"no probe sends {row.id}"
        if is_read(row):
            assert any(p.expect.startswith("2") for p in probes), \
                f"{row.id} is probed only with inputs it refuses"


def test_every_probe_sends_a_published_operation_and_names_only_what_came_before_it():
    published = list(ROWS)
    # Issue 47: the aggregator's probes cover the operations docs/aggregator.md lists, which
    # the sandbox declares under /aggregator-api.
    text = (Path(__file__).resolve().parent.parent / "docs" / "aggregator.md").read_text()
    aggregator = set(re.findall(r"^\| `(/[\w/]+)` \|",
                                text.split("| Path (POST) |", 1)[1].split("\n\n", 1)[0], re.M))
    declared = {(op.method, op.path) for op in OPERATIONS}
    captured = {"identifier", "runUser"}
    for probe in PROBES:
        if probe.credentials == AGGREGATOR_KEYS:
            assert probe.method == "POST" and probe.path in aggregator, probe.name
            assert ("POST", f"/aggregator-api{probe.path}") in declared, probe.name
        else:
            assert any(probe.method == row.method and matches(row.path, probe.path)
                       for row in published), f"{probe.name}: {probe.method} {probe.path}"
        assert probe.names <= captured, (probe.name, probe.names - captured)
        captured |= set(probe.captures)
    assert set(CAPTURED_BY) == captured - {"identifier", "runUser"}


# With the in-process sandbox's seed, u1's and u7's first job is salaried (no timesheets) and
# u6's began too recently for a tax form (in 2026).
@pytest.mark.parametrize("identifier", ["verify-test-user", "u1", "u6", "u7"])
async def test_the_in_process_test_user_has_a_task_and_records_of_every_kind_it_compares(
        identifier):
    """Whatever the generated person (a salaried job has no timesheets, a job started this
    year no tax form yet), the sandbox side has something to compare with each record probe."""
    assert set(RECORD_KINDS) == {p.name for p in PROBES if p.path.endswith(
        ("/{identifier}", "/{identifier}?limit=5")) and p.name != "linked-account-list"}
    async with in_process_sandbox(identifier) as sandbox:
        keys = {"x-api-key": sandbox.key, "x-api-secret": sandbox.secret}
        async with aiohttp.ClientSession(headers=keys) as session:
            for kind in (*RECORD_KINDS, "linked-account/list"):
                async with session.get(f"{sandbox.base_url}/{kind}/{identifier}") as answer:
                    assert answer.status == 200
                    assert (await answer.json())["data"], f"{identifier} has no {kind}"
            async with session.get(f"{sandbox.base_url}/user/{identifier}/tasks") as answer:
                tasks = (await answer.json())["data"]
    assert tasks and {t["status"] for t in tasks} == {"completed"}
    assert tasks[0]["files"], "task-file-generate-url has a file to ask for"


def writes(seen: list[dict]) -> list[dict]:
    return [r for r in seen if r["method"] != "GET" and
            (r["method"], r["path"].split("?")[0]) not in READS and r["path"] != "/health"]


async def test_writes_go_to_the_run_user_alone_and_the_run_user_is_gone_after(
        aiohttp_server, second_sandbox):
    seen: list[dict] = []
    proxy = await aiohttp_server(piecemeal_proxy(second_sandbox, [], seen), host="127.0.0.1")
    code, out, err = await verify_against(url_of(proxy), *KEYS, "--identifier", IDENTIFIER,
                                          "--json")
    assert code == 0, err + out
    report = json.loads(out)
    run_user = report["runUser"]
    assert re.fullmatch(r"verify-[0-9a-f]{12}", run_user) and run_user != IDENTIFIER

    # Every write names the run's user, its endpoint, secret or token, or nothing at all
    # (a refused input); none names the test user.
    sent = writes(seen)
    assert {(r["method"], re.sub(r"/[^/]+/revoke$", "/{t}/revoke", r["path"])) for r in sent} >= {
        ("POST", "/access-token"), ("PUT", "/user"), ("PUT", f"/user/{run_user}/end-monitoring"),
        ("POST", "/webhooks/endpoints"), ("POST", "/secrets"), ("PUT", "/access-token/{t}/revoke"),
        ("DELETE", f"/_sandbox/users/{run_user}")}
    for request in sent:
        text = request["path"] + json.dumps(request["body"])
        assert IDENTIFIER not in text, request
        identifier = (request["body"] or {}).get("identifier")
        assert identifier in (None, run_user), request
    assert [r for r in sent if r["path"] == "/user"][0]["body"]["identifier"] == run_user

    # The clean-up: the run's user removed (its endpoint, secret and token went with the
    # probes that delete them).
    assert report["cleanup"] == [{"what": "the run's user", "method": "DELETE",
                                  "path": f"/_sandbox/users/{run_user}", "status": 200,
                                  "ok": True, "error": None}]
    token = next(p for p in report["probes"] if p["name"] == "access-token-revoke")
    assert token["service"]["status"] == 200
    async with aiohttp.ClientSession(headers=ACME) as session:
        async with session.get(f"{second_sandbox}/user/{run_user}/tasks") as answer:
            assert answer.status == 404
            assert (await answer.json())["error"]["code"] == "user-not-found"
        async with session.get(f"{second_sandbox}/_sandbox/users/{run_user}/payment-methods"
                               ) as answer:
            assert answer.status == 404
        async with session.get(f"{second_sandbox}/webhooks/endpoints") as answer:
            assert HOOK_URL not in json.dumps(await answer.json())
        async with session.get(f"{second_sandbox}/secrets") as answer:
            assert SECRET_NAME not in json.dumps(await answer.json())
        # The test user is as it was: its linked account still connected and valid.
        async with session.get(f"{second_sandbox}/linked-account/list/{IDENTIFIER}") as answer:
            [account] = (await answer.json())["data"]
            assert account["valid"] is True


async def test_on_a_service_that_cannot_remove_users_the_run_user_is_emptied_and_named(
        aiohttp_server, second_sandbox):
    """A /health that is not a payroll-sandbox's (the real service's, say): the clean-up
    uses the published operations only, and a note names the user that stays."""
    seen: list[dict] = []
    proxy = await aiohttp_server(piecemeal_proxy(second_sandbox, [], seen,
                                                 health={"status": "ok"}), host="127.0.0.1")
    code, out, err = await verify_against(url_of(proxy), *KEYS, "--identifier", IDENTIFIER,
                                          "--json")
    assert code == 0, err + out
    report = json.loads(out)
    run_user = report["runUser"]
    assert [(c["method"], c["path"], c["status"]) for c in report["cleanup"]] == [
        ("PUT", "/user", 200)]
    assert not [r for r in seen if r["path"].startswith("/_sandbox")]
    assert any(n["probe"] == "clean-up" and run_user in n["message"]
               and "publishes no operation that removes a user" in n["message"]
               for n in report["notes"]), report["notes"]
    async with aiohttp.ClientSession(headers=ACME) as session:
        async with session.get(f"{second_sandbox}/_sandbox/users/{run_user}/payment-methods"
                               ) as answer:
            assert (await answer.json())["data"] == {"identifier": run_user,
                                                     "bankAccounts": [], "cards": []}


async def test_a_service_that_stops_answering_midway_is_exit_2_and_the_run_user_still_goes(
        aiohttp_server, second_sandbox):
    seen: list[dict] = []
    proxy = await aiohttp_server(piecemeal_proxy(second_sandbox, [], seen,
                                                 drop="POST /secrets"), host="127.0.0.1")
    code, out, err = await verify_against(url_of(proxy), *KEYS, "--identifier", IDENTIFIER)
    assert code == 2 and out == "", out
    [line] = [line for line in err.splitlines() if "cannot reach" in line]
    assert "(POST /secrets)" in line
    assert line.endswith("(the clean-up removed what the run had made on the service)"), line
    assert "Traceback" not in err
    run_user = next(r["body"]["identifier"] for r in seen if r["path"] == "/access-token"
                    and r["body"] and "identifier" in r["body"])
    after = [f"{r['method']} {re.sub(r'public-[^/]+', '{t}', r['path'])}"
             for r in seen[[r["path"] for r in seen].index("/secrets") + 1:]]
    assert after == ["PUT /access-token/{t}/revoke", f"DELETE /_sandbox/users/{run_user}"]
    async with aiohttp.ClientSession(headers=ACME) as session:
        async with session.get(f"{second_sandbox}/user/{run_user}/tasks") as answer:
            assert answer.status == 404


# -- the control plane's removal of a user ---------------------------------------------------

async def test_removing_a_user_with_only_tokens_forgets_them_and_a_user_with_tasks_stays(client):
    async def call(method, path, **kwargs):
        response = await client.request(method, path, headers=ACME, **kwargs)
        return response.status, await response.json()

    status, answer = await call("POST", "/access-token", json={"identifier": "only-tokens"})
    token = answer["data"]["publicToken"]
    await call("PUT", "/user", json={"identifier": "only-tokens", "data": {"cards": [
        {"brand": "Visa", "lastFour": "4242"}]}})
    assert await call("DELETE", "/_sandbox/users/only-tokens") == (
        200, {"data": {"identifier": "only-tokens", "removed": True}})
    status, answer = await call("GET", "/user/only-tokens/tasks")
    assert status == 404 and answer["error"]["code"] == "user-not-found"
    response = await client.post("/company/search", json={"query": "a"},
                                 headers={"x-public-token": token})
    assert response.status == 401
    # Gone already: nothing to remove, and no error (a clean-up may run twice).
    assert await call("DELETE", "/_sandbox/users/only-tokens") == (
        200, {"data": {"identifier": "only-tokens", "removed": False}})

    companies = (await call("GET", "/company/list?product=deposit"))[1]["data"]
    company = next(c["_id"] for c in companies if c["status"] == "operational")
    status, _ = await call("POST", "/task/create", json={
        "identifier": "with-a-task", "company": company, "product": "deposit"})
    assert status == 200
    status, answer = await call("DELETE", "/_sandbox/users/with-a-task")
    assert status == 409 and answer["error"]["code"] == "user-has-records"
    status, answer = await call("GET", "/user/with-a-task/tasks")
    assert status == 200 and len(answer["data"]) == 1
