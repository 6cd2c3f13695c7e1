"""Hostile input, round three (issue 37): each point ends with a test that would have
caught it."""

from __future__ import annotations

import base64
import io
import json
import logging
import re

import pytest
from calls import call
from conftest import ACME, WALMART

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.edge.operations import AGGREGATOR, OPERATIONS, Auth
from payroll_sandbox.edge.logs import SECRET_PARAMETERS, loggable_path
from payroll_sandbox.transport.redact import REDACTED
from payroll_sandbox.settings import Settings

# -- 7. secrets in logs ---------------------------------------------------------------------------

SECRET = "s3cr3t-V4LUE-0123456789"


def _with_values(path: str) -> str:
    """An operation's path with its parameters filled: the secret ones with SECRET (a
    config with a slash in it, as btoa writes one), the others with `x`."""
    path = path.replace(AGGREGATOR, "aggregator")
    return re.sub(r"\{(\w+)\}", lambda m: (f"{SECRET}/{SECRET}" if m.group(1) == "config"
                                          else SECRET if m.group(1) in SECRET_PARAMETERS
                                          else "x"), path)


@pytest.mark.parametrize("path", sorted({op.path for op in OPERATIONS
                                         if set(re.findall(r"\{(\w+)\}", op.path))
                                         & SECRET_PARAMETERS}))
def test_every_path_parameter_that_is_a_secret_is_redacted_in_logs(path):
    """Point 7: the one list of secret path parameters covers every operation that has one
    (a processor token's revocation wrote the token whole); a typo after the secret hides
    it as well, and a config's `/` hides nothing of it."""
    for shown in (loggable_path(_with_values(path)), loggable_path(_with_values(path) + "x")):
        assert SECRET not in shown and REDACTED in shown, shown


def test_the_three_secret_paths_are_the_ones_redacted():
    secret_paths = sorted(op.path for op in OPERATIONS
                          if set(re.findall(r"\{(\w+)\}", op.path)) & SECRET_PARAMETERS)
    assert secret_paths == ["/_sandbox/<aggregator>/processor-token/{token}/revoke",
                            "/access-token/{publicToken}/revoke", "/initialize/{config}"]
    assert loggable_path("/task/abc/details") == "/task/abc/details"


async def test_a_revoked_processor_token_stays_out_of_the_access_log(client, caplog):
    """Point 7 end to end: the access line of a processor token's revocation."""
    token = (await call(client, "POST", "/_sandbox/aggregator/processor-token",
                        json={"identifier": "logged"}, status=201))["data"]["processorToken"]
    config = base64.b64encode(json.dumps({"publicToken": token, "x": "??>"}).encode()).decode()
    with caplog.at_level(logging.INFO):
        await call(client, "POST", f"/_sandbox/aggregator/processor-token/{token}/revoke")
        await client.get(f"/initialize/{config}")
    lines = "\n".join(record.getMessage() for record in caplog.records)
    assert f"/_sandbox/aggregator/processor-token/{REDACTED}/revoke" in lines, lines
    assert token not in lines and config not in lines


# -- 6. crash leftovers -----------------------------------------------------------------------

async def test_a_start_removes_the_temporary_files_a_killed_write_left_beside_its_state_file(
        make_client, tmp_path):
    """Point 6: a kill -9 during a state write leaves `.state.json.<random>.tmp`; each later
    start removes those it finds (a crash loop filled the volume). A file another process
    is writing now (younger than this start), a link and another file's are left alone."""
    import os
    import time

    state = tmp_path / "state.json"
    old = time.time() - 3600
    leftovers = [tmp_path / f".state.json.{name}.tmp" for name in ("k1x9", "p0q2")]
    for leftover in leftovers:
        leftover.write_bytes(b"{" * 1000)
        os.utime(leftover, (old, old))
    writing_now = tmp_path / ".state.json.now1.tmp"
    writing_now.write_bytes(b"{")
    os.utime(writing_now, (time.time() + 60, time.time() + 60))
    elsewhere = tmp_path / "keep.txt"
    elsewhere.write_text("keep")
    link = tmp_path / ".state.json.link.tmp"
    link.symlink_to(elsewhere)
    os.utime(link, (old, old), follow_symlinks=False)
    other = tmp_path / ".other.json.k1x9.tmp"
    other.write_bytes(b"{")
    os.utime(other, (old, old))

    client = await make_client(state_file=state)
    assert (await client.get("/health")).status == 200
    assert [p.exists() for p in leftovers] == [False, False]
    assert writing_now.exists() and link.is_symlink() and elsewhere.read_text() == "keep"
    assert other.exists()


# -- 1. "this host" addresses -------------------------------------------------------------------

def test_this_host_addresses_of_the_sandbox_are_refused_at_registration():
    """Point 1, end to end on a real process: http://0.0.0.0:<its port> and the mapped
    forms reached the sandbox's own control plane (/demo/reset answered 200)."""
    from test_hostile_input_two import call_at, serving

    with serving() as (host, port, _):
        for target in ("0.0.0.0", "[::ffff:0.0.0.0]", "[::ffff:127.0.0.1]", "[::]"):
            url = f"http://{target}:{port}/demo/reset"
            status, body = call_at(host, port, "PUT", "/_sandbox/webhooks/endpoints",
                                   {"endpoints": [{"url": url}]})
            assert status == 422, (url, body)
            assert "own address" in body["error"]["details"][0]["message"], body


async def test_a_loopback_deny_rule_refuses_this_host_addresses(make_client):
    """Point 1: --webhook-deny 127.0.0.0/8 let http://0.0.0.0:<port> through to a loopback
    receiver (it answered 200)."""
    client = await make_client(webhook_deny="127.0.0.0/8")
    for target in ("0.0.0.0", "0.1.2.3", "[::ffff:0.0.0.0]", "[::ffff:127.0.0.1]"):
        response = await client.put("/_sandbox/webhooks/endpoints", headers=ACME,
                                    json={"endpoints": [{"url": f"http://{target}:9/hooks"}]})
        body = await response.json()
        assert response.status == 422 and "--webhook-deny" in json.dumps(body), (target, body)


# -- 5. the cache folder ------------------------------------------------------------------------

def _pool_files(cache):
    return sorted(cache.glob("*-faker*.json"))


def test_word_pools_planted_by_another_user_or_of_the_wrong_shape_are_drawn_again(
        tmp_path, monkeypatch):
    """Point 5: the word-pool files were read with no ownership check (a planted file
    turned company names into markup) and no shape check (an empty list crashed the
    start); the start-up cache's key left them out, so a removed hostile file lived on in
    the cached load."""
    import os

    from payroll_sandbox.load import loading
    from payroll_sandbox.settings import Settings

    cache = tmp_path / "cache"
    monkeypatch.setenv("PAYROLL_SANDBOX_CACHE_DIR", str(cache))

    def names() -> list[str]:
        return [company.name for company in loading.load(Settings()).catalog.ordered]

    honest = names()
    pools = {path: json.loads(path.read_text()) for path in _pool_files(cache)}
    assert pools
    cases = [(planting, mode, fresh) for planting, mode in (
        ("markup", 0o666), ("markup", 0o600), ("empty", 0o600), ("shape", 0o600))
        for fresh in (True, False)]
    for planting, mode, fresh in cases:
        if fresh:  # no cached load: the pools themselves are read
            for load in cache.glob("load-*.pickle"):
                load.unlink()
        for path, good in pools.items():
            planted = {"markup": {key: [f"<img src=x onerror=alert({n})>" for n in range(len(w))]
                                  for key, w in good.items()},
                       "empty": {key: [] for key in good}, "shape": {"not": "pools"}}[planting]
            path.write_text(json.dumps(planted))
            os.chmod(path, mode)
        assert names() == honest, (planting, mode, fresh)  # drawn again, never planted words
        for path, good in pools.items():  # and written anew, this user's own
            assert json.loads(path.read_text()) == good, (planting, mode)


# -- 3. huge snapshots: refused before they are built, one large restore at a time -----------------

def _with_section(document: dict, section: str, items: list, tail: bytes = b"") -> bytes:
    """The document with `section` replaced by `items`, written last; `tail` after the
    items (say, broken JSON: a parse that went on would answer 400)."""
    head = json.dumps({k: v for k, v in document.items() if k != section})[:-1]
    body = json.dumps(items)[:-1].encode()
    return head.encode() + f', "{section}": '.encode() + body + tail + (b"]}" if not tail else b"")


@pytest.mark.parametrize("opening", [b"[0,0,0]", b'"x"', b"0", b"-1", b"true", b"null",
                                     b"  \n [" + b"0," * 600_000 + b"0]"])
async def test_a_snapshot_whose_top_level_is_not_an_object_is_refused_unread(client, opening):
    """Point 3: a 64 MiB `[0,0,...]` was parsed whole (6 x its size in memory, 116 s)."""
    response = await client.post("/_sandbox/snapshot", data=io.BytesIO(opening + b"!not json"),
                                 headers={**ACME, "content-type": "application/json"})
    body = await response.json()
    assert response.status == 422, body
    assert body["error"]["details"] == [{"location": "body", "path": "$",
                                         "message": "a snapshot is a JSON object"}]


async def test_more_records_than_the_bound_stop_the_parse_there(make_client):
    """Point 3: one user more than --max-users is refused as it is parsed: what follows
    it (broken JSON here) is never read, so the document is never built whole."""
    client = await make_client(clock="manual", max_users=5)
    document = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    users = [{**document["users"][0], "identifier": f"u{n}"} for n in range(6)] \
        if document["users"] else [{"identifier": f"u{n}", "createdAt": 0} for n in range(6)]
    body = _with_section(document, "users", users, tail=b", !broken")
    response = await client.post("/_sandbox/snapshot", data=body,
                                 headers={**ACME, "content-type": "application/json"})
    answer = await response.json()
    assert response.status == 422, answer
    assert answer["error"]["details"] == [{"location": "body", "path": "$.users", "message":
                                           "more than 5 items: more than this server keeps "
                                           "(--max-users 5)"}]


async def test_records_at_fault_stop_the_parse_after_the_first_fifty(client):
    """Point 3: a document of 64 MiB of tasks, each at fault, took 312 s and 5.9 GB to name
    every fault; the first 50 stop the parse (what follows is never read) and are named."""
    document = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    tasks = [{"id": f"t{n}", "status": "nowhere"} for n in range(60)]
    body = _with_section(document, "tasks", tasks, tail=b", !broken")
    response = await client.post("/_sandbox/snapshot", data=body,
                                 headers={**ACME, "content-type": "application/json"})
    answer = await response.json()
    assert response.status == 422, answer
    paths = [d["path"] for d in answer["error"]["details"]]
    assert len(paths) <= 51 and paths[0].startswith("$.tasks[0]"), paths
    assert {p.split("]")[0] for p in paths} <= {f"$.tasks[{n}" for n in range(50)}


async def test_every_fault_of_a_smaller_document_is_still_named(client):
    """The screen stops only past 50 faults: a task at fault and a clock at fault are
    both named, as before."""
    document = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    bad = {**document, "tasks": [{"id": "t", "status": "nowhere"}],
           "clock": {**document["clock"], "timestamp": "soon"}}
    response = await client.post("/_sandbox/snapshot", json=bad, headers=ACME)
    paths = {d["path"].split(".")[1].split("[")[0] for d in (await response.json())["error"]["details"]}
    assert response.status == 422 and paths == {"tasks", "clock"}, paths


def test_the_byte_limit_is_the_largest_snapshot_the_bounds_allow():
    """Point 3: the limit was 256 MiB whatever the bounds; it is the largest snapshot a
    tenant of the server can make (measured at the default bounds), with a quarter more."""
    from payroll_sandbox.domain.rules import Limits
    from payroll_sandbox.edge.snapshot_document import FULL_TENANT_BYTES, max_document_bytes

    assert max_document_bytes(Limits()) == int(FULL_TENANT_BYTES * 1.25) < 160 * 2**20
    assert max_document_bytes(Limits(max_tasks=100, max_events=50, max_tokens=100,
                                     max_linked_accounts=100)) == 16 * 2**20
    assert max_document_bytes(Limits(max_tasks=1_000_000)) == 256 * 2**20
    assert max_document_bytes(Limits(max_linked_accounts=1_000_000)) == 256 * 2**20


async def test_a_body_over_the_limit_is_refused_before_it_is_read(make_client):
    client = await make_client(clock="manual", max_tasks=100, max_events=50, max_tokens=100,
                               max_linked_accounts=100)

    async def endless():
        yield b"{"
        for _ in range(17):
            yield b" " * 2**20

    response = await client.post("/_sandbox/snapshot", data=io.BytesIO(b" " * (16 * 2**20 + 1)),
                                 headers={**ACME, "content-type": "application/json"})
    assert response.status == 413
    assert str(16 * 2**20) in (await response.json())["error"]["message"]
    response = await client.post("/_sandbox/snapshot", data=endless(),  # no content-length
                                 headers={**ACME, "content-type": "application/json"})
    assert response.status == 413


async def test_one_large_restore_runs_at_a_time(make_client, monkeypatch):
    """Point 3: several tenants restoring large documents at once each peaked at several
    times their body; a large one past the server's memory budget for them is refused
    (429 `restore-busy`; round four: at once, per tenant otherwise), a small one is not,
    and each large one hands its memory back when it ends."""
    from payroll_sandbox.edge import snapshot
    from payroll_sandbox.edge import snapshot_document
    from payroll_sandbox.edge.keys import SANDBOX

    given_back = []
    monkeypatch.setattr(snapshot, "give_back_memory", lambda: given_back.append(1))
    client = await make_client(clock="manual", request_timeout=0.5)
    document = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    large = json.dumps(document).encode() + b" " * (snapshot_document.LARGE_RESTORE + 1)
    sandbox = client.server.app[SANDBOX]
    budget = sandbox.large_restores.budget
    sandbox.large_restores.reserved = budget  # the budget held by restores running
    try:
        busy = await client.post("/_sandbox/snapshot", data=io.BytesIO(large),
                                 headers={**ACME, "content-type": "application/json"})
        assert busy.status == 429, await busy.text()
        assert (await busy.json())["error"]["code"] == "restore-busy"
        assert busy.headers["retry-after"] == "5"
        small = await client.post("/_sandbox/snapshot", json=document, headers=ACME)
        assert small.status == 200
    finally:
        sandbox.large_restores.reserved = 0
    assert given_back == []
    ok = await client.post("/_sandbox/snapshot", data=io.BytesIO(large),
                           headers={**ACME, "content-type": "application/json"})
    assert ok.status == 200, await ok.text()
    refused = await client.post("/_sandbox/snapshot", data=io.BytesIO(b"[" + large[1:]),
                                headers={**ACME, "content-type": "application/json"})
    assert refused.status == 422
    assert given_back == [1, 1] and sandbox.large_restores.reserved == 0


# -- 4. out-of-range snapshots (the clock and the stored ranges) ---------------------------------

async def _snapshot_with_a_link(client) -> dict:
    await call(client, "POST", "/task/create", json={"identifier": "ranged", "company": WALMART,
                                                     "product": "deposit"})
    await call(client, "POST", "/_sandbox/aggregator/processor-token",
               json={"identifier": "ranged"}, status=201)
    return (await call(client, "GET", "/_sandbox/snapshot"))["data"]


async def test_a_snapshot_whose_clock_stands_before_its_stored_times_is_refused(make_client):
    """Point 4: `clock.timestamp = 0` behind stored times was accepted and started a
    catch-up storm that did not end; it is a 422 naming the clock, and nothing changes."""
    client = await make_client(clock="manual")
    document = await _snapshot_with_a_link(client)
    before = (await call(client, "GET", "/_sandbox/clock"))["data"]
    for timestamp in (0, document["clock"]["timestamp"] - 3600):
        behind = {**document, "clock": {**document["clock"], "timestamp": timestamp}}
        response = await client.post("/_sandbox/snapshot", json=behind, headers=ACME)
        body = await response.json()
        assert response.status == 422, body
        assert [d["path"] for d in body["error"]["details"]] == ["$.clock.timestamp"]
    assert (await call(client, "GET", "/_sandbox/clock"))["data"] == before


async def test_a_snapshot_outside_the_ranges_the_api_allows_is_refused(make_client):
    """Point 4: a huge daysRequested was accepted and then crashed its link's jobs."""
    client = await make_client(clock="manual")
    document = await _snapshot_with_a_link(client)
    [token] = document["processorTokens"]
    for days in (0, 731, 10**9):
        bad = {**document, "processorTokens": [{**token, "daysRequested": days}]}
        response = await client.post("/_sandbox/snapshot", json=bad, headers=ACME)
        body = await response.json()
        assert response.status == 422, (days, body)
        assert any("daysRequested" in d["path"] for d in body["error"]["details"]), body
    response = await client.post("/_sandbox/snapshot", json=document, headers=ACME)
    assert response.status == 200


async def _app_and_acme(aiohttp_client, loaded, clock):
    """A client of a fresh app and its acme tenant, to break one of its jobs."""
    settings = Settings(port=0, clock="manual")
    store = build_registry(settings, clock=clock, loaded=loaded)
    client = await aiohttp_client(create_app(settings, registry=store))
    return client, store.tenants.get("acme")


def _raise(*args, **kwargs):
    raise RuntimeError("a job that raises")


async def test_a_task_whose_step_raises_fails_visibly(aiohttp_client, loaded, clock, caplog):
    """Point 4: a job that raised left its task where it was, with only a log line; the task
    now fails (unknown-failure) with its task-status-updated event, its later steps dropped."""
    client, acme = await _app_and_acme(aiohttp_client, loaded, clock)
    task = (await call(client, "POST", "/task/create",
                       json={"identifier": "broken", "company": WALMART, "product": "deposit"}))
    task_id = task["data"]["id"]
    acme.tasks.apply_step = _raise
    with caplog.at_level(logging.ERROR, "payroll_sandbox.scheduler"):
        await call(client, "POST", "/_sandbox/clock/run-until-idle")
    assert "a job that raises" in caplog.text
    data = (await call(client, "GET", f"/task/{task_id}"))["data"]
    assert (data["status"], data["reason"]) == ("failed", "unknown-failure")
    events = (await call(client, "GET", "/_sandbox/events"))["data"]
    updates = [e for e in events if e["eventType"] == "task-status-updated"]
    assert [(u["task"], u["body"]["data"]["status"], u["body"]["data"]["reason"])
            for u in updates] == [
        (task_id, "failed", "unknown-failure")], events
    assert [job for job in acme.timeline.pending() if job.owner == task_id] == []


async def test_a_processor_link_whose_stage_raises_ends_in_error(aiohttp_client, loaded, clock):
    """Point 4: the link's stage raised and the link stayed `processing` for ever."""
    client, acme = await _app_and_acme(aiohttp_client, loaded, clock)
    token = (await call(client, "POST", "/_sandbox/aggregator/processor-token",
                        json={"identifier": "broken-link"}, status=201))["data"]["processorToken"]
    link = (await call(client, "POST", "/aggregator/processor-links",
                       json={"processorToken": token},
                       headers={**ACME, "user-identifier": "broken-link"}, status=202))["data"]
    acme.links.run_step = _raise
    await call(client, "POST", "/_sandbox/clock/run-until-idle")
    found = (await call(client, "GET", "/_sandbox/events", params={"limit": "100"}))["data"]
    errors = [e for e in found if e["eventType"].endswith("-error")]
    assert [e["body"]["data"]["processorLink"] for e in errors] == [link["_id"]], found
    assert errors[0]["body"]["data"]["errorCode"] == "INTERNAL_SERVER_ERROR"
    document = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    assert [(l["id"], l["status"]) for l in document["processorLinks"]] == [(link["_id"], "error")]


async def test_a_snapshot_whose_job_steps_outside_its_scenario_is_refused(make_client):
    """Point 4: a job step outside its scenario was accepted and crashed its job later."""
    client = await make_client(clock="manual")
    document = await _snapshot_with_a_link(client)
    jobs = document["jobs"]
    [n] = [n for n, job in enumerate(jobs) if job["action"]["kind"] == "task-step"][:1]
    outside = [*jobs[:n], {**jobs[n], "action": {**jobs[n]["action"], "step": 99}}, *jobs[n + 1:]]
    response = await client.post("/_sandbox/snapshot", json={**document, "jobs": outside},
                                 headers=ACME)
    body = await response.json()
    assert response.status == 422, body
    assert [d["path"] for d in body["error"]["details"]] == [f"$.jobs[{n}].action"], body
    assert "steps" in body["error"]["details"][0]["message"]


# -- 9. the document and the server agree -------------------------------------------------------

_LINK_TOKEN = {"client_name": "App", "language": "en", "country_codes": ["US"],
               "user": {"client_user_id": "u1"}, "products": ["transactions"]}
_PAIR = {"client_id": ACME["x-api-key"], "secret": ACME["x-api-secret"]}


async def test_the_aggregators_operations_say_both_ways_their_credentials_come(client):
    """Point 9: the document named only the two headers, while the server takes the pair
    in the body too; every aggregator operation now says both, and the server does both."""
    from payroll_sandbox.edge.openapi import AGGREGATOR_CREDENTIALS

    document = await (await client.get("/openapi.json")).json()
    aggregator_ops = [(path, op) for path, item in document["paths"].items()
                      for op in item.values()
                      if {"aggregatorClientId": [], "aggregatorSecret": []} in op["security"]]
    assert len(aggregator_ops) == len([op for op in OPERATIONS if op.auth is Auth.AGGREGATOR])
    for path, op in aggregator_ops:
        assert op["description"].endswith(AGGREGATOR_CREDENTIALS), path
        body = op["requestBody"]["content"]["application/json"]["schema"]["properties"]
        assert {"client_id", "secret"} <= set(body), path
    path = "/aggregator-api/link/token/create"
    in_body = await client.post(path, json={**_LINK_TOKEN, **_PAIR})
    assert in_body.status == 200, await in_body.text()
    in_headers = await client.post(path, json=_LINK_TOKEN, headers={
        "PLAID-CLIENT-ID": _PAIR["client_id"], "PLAID-SECRET": _PAIR["secret"]})
    assert in_headers.status == 200, await in_headers.text()
    headers_win = await client.post(path, json={**_LINK_TOKEN, **_PAIR}, headers={
        "PLAID-CLIENT-ID": _PAIR["client_id"], "PLAID-SECRET": "wrong"})
    assert (await headers_win.json())["error_code"] == "INVALID_API_KEYS"
    neither = await client.post(path, json=_LINK_TOKEN)
    assert (neither.status, (await neither.json())["error_code"]) == (400, "MISSING_FIELDS")


async def test_credentials_in_a_body_that_trickles_in_are_read_with_the_body(client):
    """The edge reads a body once and keeps it: an aggregator operation whose credentials are
    in its body reads it for them, then for the operation, whether it came whole with its
    headers or in chunks after them (chunked, the slow path)."""
    body = json.dumps({**_LINK_TOKEN, **_PAIR}).encode()

    async def chunks():
        for start in range(0, len(body), 16):
            yield body[start:start + 16]

    path = "/aggregator-api/link/token/create"
    for data in (body, chunks()):
        answer = await client.post(path, data=data, headers={"content-type": "application/json"})
        assert answer.status == 200, await answer.text()
        assert (await answer.json())["link_token"].startswith("link-sandbox-")


# -- 2. unknown fields in bulk ------------------------------------------------------------------

async def test_a_body_of_many_unknown_fields_keeps_a_bounded_number_of_warnings(make_client):
    """Point 2: a 1 MiB body of 75,000 unknown fields kept every warning in the journal
    (8.9 MB a request). The first few are named, then a count; the header stays short."""
    from payroll_sandbox.edge.pipeline import WARNINGS_KEPT

    client = await make_client()
    fields = {f"f{n:05d}": n for n in range(40_000)}
    response = await client.post("/access-token", headers=ACME,
                                 json={"identifier": "bulk", **fields})
    assert response.status == 200
    header = response.headers["x-sandbox-warning"]
    assert header.startswith("unknown field $.f00000 ignored") and len(header) <= 1000
    [entry] = (await call(client, "GET", "/_sandbox/requests",
                          params={"path": "/access-token"}))["data"][-1:]
    assert len(entry["warnings"]) == WARNINGS_KEPT + 1
    assert entry["warnings"][-1] == f"and {40_000 - WARNINGS_KEPT} more ignored"
    assert entry["body"] == {"identifier": "bulk"}


async def test_strict_bodies_name_a_bounded_number_of_unknown_fields(make_client):
    """Point 2 under --strict-bodies: the 422 names the first faults and how many more."""
    from payroll_sandbox.validate import DETAILS_KEPT

    client = await make_client(strict_bodies=True)
    response = await client.post("/access-token", headers=ACME,
                                 json={"identifier": "bulk", **{f"f{n}": n for n in range(5000)}})
    body = await response.json()
    assert response.status == 422
    details = body["error"]["details"]
    assert len(details) == DETAILS_KEPT + 1
    assert details[-1]["message"] == f"and {5000 - DETAILS_KEPT} more faults"


# -- 8. the tenant cap counts a tree against its root -------------------------------------------

async def test_a_tree_of_tenants_counts_against_its_root(make_client):
    """Point 8: one maker was capped, but each child could make its own share, so a tree
    filled --max-tenants. Children's children count against the root: the whole tree,
    whoever asks, stops at --max-tenants-per-maker, and another root still can make."""
    from test_hostile_input_two import keys, make_tenant

    from conftest import GLOBEX

    client = await make_client(max_tenants=20, max_tenants_per_maker=4)
    child = await make_tenant(client, ACME, "child")
    grandchild = await make_tenant(client, keys(child), "grandchild")
    await make_tenant(client, keys(grandchild), "great-grandchild")
    await make_tenant(client, ACME, "second-child")  # 4 in acme's tree
    for asker in (ACME, keys(child), keys(grandchild)):
        response = await client.post("/_sandbox/tenants", json={}, headers=asker)
        body = await response.json()
        assert response.status == 429 and "tree" in body["error"]["message"], body
    await make_tenant(client, GLOBEX, "globex-child")
    # Deleting part of the tree gives its room back.
    assert (await client.delete("/_sandbox/tenants/grandchild", headers=keys(child))).status == 200
    await make_tenant(client, keys(child), "again")


# -- 9. the document and the server agree (round three's first tests) ---------------------------

def _closed(schema) -> bool:
    """Whether a schema says additionalProperties: false anywhere."""
    if isinstance(schema, dict):
        return schema.get("additionalProperties") is False or any(map(_closed, schema.values()))
    if isinstance(schema, list):
        return any(map(_closed, schema))
    return False


@pytest.mark.parametrize("strict_bodies", [False, True])
def test_request_schemas_say_additional_properties_false_only_where_the_server_refuses(
        strict_bodies):
    """Point 9: the document said additionalProperties: false where the server (by
    default) accepts an unknown field and names it in x-sandbox-warning."""
    from conftest import openapi_document

    document = openapi_document(strict_bodies=strict_bodies)
    by_key = {(op.method, op.path.replace(AGGREGATOR, "aggregator")): op for op in OPERATIONS}
    seen = 0
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            if "requestBody" not in operation:
                continue
            op = by_key[(method.upper(), path)]
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            refused = strict_bodies or op.strict
            if not refused:
                seen += 1
                assert not _closed(schema), (method, path)
            elif schema.get("type") == "object" and "properties" in schema:
                assert schema.get("additionalProperties") is False, (method, path)
    assert seen > 10 or strict_bodies


async def test_a_snapshot_conflict_names_no_other_tenant(make_client):
    """Point 9: the conflict's message named the tenant that holds the token."""
    client = await make_client()
    await call(client, "POST", "/access-token", json={"identifier": "someone"})
    taken = await call(client, "GET", "/_sandbox/snapshot")
    made = (await call(client, "POST", "/_sandbox/tenants", json={"name": "neighbour"},
                       status=201))["data"]
    response = await client.post("/_sandbox/snapshot", json=taken["data"], headers={
        "x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]})
    body = await response.json()
    assert response.status == 409 and body["error"]["code"] == "snapshot-conflict"
    assert "acme" not in json.dumps(body).lower()


def test_a_body_of_many_unknown_fields_is_pruned_in_one_pass_into_a_small_object():
    """Point 2: 75,000 unknown fields were deleted one by one from the parsed body, whose
    table stayed 75,000 wide (about 2 MB kept with each task: RSS +406 MB over 200
    requests) after jsonschema named each in turn (0.4 s of the event loop a request)."""
    import sys

    import payroll_sandbox.app  # noqa: F401 (the operations)
    from payroll_sandbox.validate import parse_json_body

    op = next(op for op in OPERATIONS if (op.method, op.path) == ("POST", "/task/create"))
    body = {"identifier": "bulk", "company": WALMART, "product": "deposit",
            "metadata": {"kept": True}, **{f"u{n:x}": 0 for n in range(75_000)}}
    ignored: list[str] = []
    document = parse_json_body(json.dumps(body).encode(), op.body, ignored=ignored)
    assert document == {"identifier": "bulk", "company": WALMART, "product": "deposit",
                        "metadata": {"kept": True}}
    assert sys.getsizeof(document) < 1024
    assert len(ignored) == 75_000 and ignored[0] == "$.u0"
