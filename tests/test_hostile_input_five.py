"""Hostile input, round five (issue 48): the surfaces added this turn under attack.

Clock start (`POST /_sandbox/tenants {"clock": {"start"}}`), profile timelines, the scenario
binding for everyone and the coverage tally, autopilots and the callbacks ledger, request
verification, bundles (`GET /_sandbox/bundle`, `read_bundle`), and the aggregator's key,
transactions, balance and auth endpoints: another tenant's ids, tokens, access tokens and
key ids are neither seen nor changed; huge and deeply nested bodies get a bounded 4xx (never
a 5xx) and the server answers after; a coverage report outside the working folder is
refused. Real app, real HTTP, manual clock. The browser half (XSS) and the process half
(exec, pytester) are in test_hostile_input_five_browser.py.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from calls import call, create_task, run_until_idle
from conftest import ACME, GLOBEX, WALMART

from payroll_sandbox.edge.bundles import read_bundle
from payroll_sandbox.validate import ConfigError
from payroll_sandbox.kit import coverage

A, B = ACME, GLOBEX
AGGREGATOR = "/aggregator-api"
INSTITUTION = "ins_109508"
KEY_PATH = "/_sandbox/aggregator/webhook-verification-key"
A_USER = "acme-hostile-five"
MARKERS = (A_USER, "Acme Life Works")  # what only A's objects hold


def aggregator_keys(tenant: dict) -> dict:
    return {"PLAID-CLIENT-ID": tenant["x-api-key"], "PLAID-SECRET": tenant["x-api-secret"]}


async def aggregator(client, path: str, body: dict, tenant: dict = A) -> tuple[int, dict]:
    response = await client.post(f"{AGGREGATOR}{path}", json=body, headers=aggregator_keys(tenant))
    return response.status, await response.json()


async def access_token_of(client, tenant: dict = A) -> str:
    status, made = await aggregator(client, "/sandbox/public_token/create", {
        "institution_id": INSTITUTION, "initial_products": ["transactions", "auth"]}, tenant)
    assert status == 200, made
    status, exchanged = await aggregator(client, "/item/public_token/exchange",
                                         {"public_token": made["public_token"]}, tenant)
    assert status == 200, exchanged
    return exchanged["access_token"]


async def public_token(client, identifier: str, tenant: dict = A) -> dict:
    body = await call(client, "POST", "/access-token", headers=tenant,
                      json={"identifier": identifier})
    return {"x-public-token": body["data"]["publicToken"]}


TIMELINE = {"timeline": [{"at": "+30d", "income": {"income": 90_000}}]}
CALLBACK = {"event": "interaction", "payload": {"name": "Acme Life Works", "value": {}}}


async def a_state(client, access: str, child: dict) -> dict:
    """What A has on the new surfaces, read through A's own keys (and its child's)."""
    balance = await aggregator(client, "/accounts/balance/get", {"access_token": access})
    return {
        "autopilot": (await call(client, "GET", f"/_sandbox/users/{A_USER}/autopilot"))["data"],
        "profile": (await call(client, "GET", f"/_sandbox/users/{A_USER}/profile"))["data"],
        "everyone": (await call(client, "GET", "/_sandbox/scenarios"))["everyone"],
        "callbacks": (await call(client, "GET", "/_sandbox/sdk/callbacks"))["data"],
        "key": (await call(client, "GET", KEY_PATH))["data"],
        "balance": (balance[0], [a["account_id"] for a in balance[1].get("accounts", [])]),
        "child": (await call(client, "GET", "/_sandbox/tenant",
                             headers=child))["data"]["name"],
    }


async def test_another_tenant_neither_sees_nor_changes_what_the_new_surfaces_hold(client):
    """B names A's user ids, public token, access token, key id and child tenant on every
    new surface: each answer is a refusal or B's own (empty) data holding none of A's
    markers, and A's state read afterwards is what it was."""
    await call(client, "PUT", f"/_sandbox/users/{A_USER}/autopilot",
               json={"company": WALMART, "username": "test-good"})
    await call(client, "PUT", f"/_sandbox/users/{A_USER}/profile", json={"data": TIMELINE})
    await call(client, "PUT", "/_sandbox/scenario", json={"scenario": "auth-expired"})
    token = await public_token(client, A_USER)
    await call(client, "POST", "/sdk/callbacks", headers=token,
               json={"flow": "acme-flow", "messages": [CALLBACK]})
    access = await access_token_of(client)
    key_id = (await call(client, "GET", KEY_PATH))["data"]["keyId"]
    child = await call(client, "POST", "/_sandbox/tenants", status=201, json={
        "name": "acme-clock-child", "clock": {"start": "2026-01-05T09:00:00Z"}})
    child_keys = {"x-api-key": child["data"]["apiKey"], "x-api-secret": child["data"]["apiSecret"]}
    await create_task(client, A_USER)
    await run_until_idle(client)
    before = await a_state(client, access, child_keys)
    secrets = [*MARKERS, access, key_id, token["x-public-token"], child_keys["x-api-key"]]

    answers: list[tuple[str, int, str]] = []

    async def b(method: str, path: str, headers: dict = B, **kwargs) -> None:
        response = await client.request(method, path, headers=headers, **kwargs)
        named = f"{path} {json.dumps(kwargs.get('json'))}"  # what B itself named may echo
        answers.append((f"{method} {path}", response.status, await response.text(), named))

    # B's own journal holds what B names: the reads of whole state come first
    await b("GET", "/_sandbox/bundle")
    await b("GET", "/_sandbox/coverage")
    await b("GET", "/_sandbox/sdk/callbacks")
    await b("GET", f"/_sandbox/users/{A_USER}/autopilot")
    await b("DELETE", f"/_sandbox/users/{A_USER}/autopilot")
    await b("GET", f"/_sandbox/users/{A_USER}/profile")
    await b("DELETE", f"/_sandbox/users/{A_USER}/profile")
    await b("PUT", "/_sandbox/scenario", json={"scenario": "connection-error"})
    await b("GET", f"/_sandbox/sdk/callbacks?identifier={A_USER}")
    await b("POST", "/_sandbox/requests/verify", json={"method": "POST", "path": "/task/create",
                                                      "body": {"identifier": A_USER}})
    await b("GET", KEY_PATH)
    await b("DELETE", "/_sandbox/tenants/acme-clock-child")
    await b("POST", "/_sandbox/tenants", json={"name": "acme-clock-child",
                                               "clock": {"start": "2020-01-01T00:00:00Z"}})
    for path in ("/transactions/get", "/transactions/refresh", "/accounts/balance/get",
                 "/auth/get"):
        body = {"access_token": access, "start_date": "2026-01-01",
                "end_date": "2026-02-01"} if path == "/transactions/get" else {
                    "access_token": access}
        await b("POST", f"{AGGREGATOR}{path}", headers=aggregator_keys(B), json=body)
    await b("POST", f"{AGGREGATOR}/webhook_verification_key/get",
            headers=aggregator_keys(B), json={"key_id": key_id})
    await b("POST", f"{AGGREGATOR}/webhook_verification_key/get",
            headers=aggregator_keys(B), json={"key_id": key_id, "client_id": B["x-api-key"],
                                              "secret": B["x-api-secret"]})

    for route, status, text, named in answers:
        assert status < 500, (route, status, text)
        for secret in secrets:
            assert secret in named or secret not in text, (route, status, secret, text[:400])
    by_route = {route: (status, text) for route, status, text, _ in answers}
    assert json.loads(by_route[f"GET /_sandbox/users/{A_USER}/autopilot"][1])["data"][
        "autopilot"] is None
    assert json.loads(by_route[f"DELETE /_sandbox/users/{A_USER}/autopilot"][1])["data"][
        "removed"] is False
    assert json.loads(by_route["GET /_sandbox/sdk/callbacks"][1])["data"] == []
    assert by_route["DELETE /_sandbox/tenants/acme-clock-child"][0] == 404
    for path in ("/transactions/get", "/transactions/refresh", "/accounts/balance/get",
                 "/auth/get", "/webhook_verification_key/get"):
        status, text = by_route[f"POST {AGGREGATOR}{path}"]
        assert status in (400, 401, 404), (path, status, text)
    assert await a_state(client, access, child_keys) == before
    assert before["autopilot"]["autopilot"]["username"] == "test-good"
    assert before["everyone"] == "auth-expired" and len(before["callbacks"]) == 1
    assert before["balance"][0] == 200 and before["child"] == "acme-clock-child"


# -- huge and deeply nested bodies ---------------------------------------------------------------

def nested_text(depth: int) -> str:
    """{"a": {"a": ... {}}} `depth` deep, as text (Python's own encoder stops near 1,000)."""
    return '{"a":' * depth + "{}" + "}" * depth


DEEP = 10_000


def hostile_bodies(token: dict) -> list[tuple[str, str, dict, bytes]]:
    """(name, method + path, headers, body) for each new surface taking a body."""
    big_timeline = [{"at": f"+{n % 300 + 1}d", "income": {"income": 90_000}}
                    for n in range(120_000)]
    deep_payload = ('{"flow":"f","messages":[{"event":"interaction","payload":'
                    + nested_text(DEEP) + "}]}")
    return [
        ("callbacks nested 10,000 deep", "POST /sdk/callbacks", token, deep_payload.encode()),
        ("callbacks nested 1,000 deep", "POST /sdk/callbacks", token,
         ('{"flow":"f","messages":[{"event":"interaction","payload":' + nested_text(1000)
          + "}]}").encode()),
        ("callbacks, 100,000 messages", "POST /sdk/callbacks", token, json.dumps(
            {"flow": "f", "messages": [CALLBACK] * 100_000}).encode()),
        ("a 5 MB timeline", f"PUT /_sandbox/users/{A_USER}/profile", A,
         json.dumps({"data": {"timeline": big_timeline}}).encode()),
        ("a timeline of 20,000 events under 1 MiB", f"PUT /_sandbox/users/{A_USER}/profile", A,
         json.dumps({"data": {"timeline": big_timeline[:20_000]}}).encode()),
        ("callbacks, 1,000 messages under 1 MiB", "POST /sdk/callbacks", token, json.dumps(
            {"flow": "f", "messages": [CALLBACK] * 1_000}).encode()),
        ("verify with 40,000 items under 1 MiB", "POST /_sandbox/requests/verify", A, json.dumps({
            "method": "POST", "path": "/task/create",
            "body": {"tasks": [{"product": "deposit"}] * 40_000}}).encode()),
        ("a timeline nested 10,000 deep", f"PUT /_sandbox/users/{A_USER}/profile", A,
         ('{"data":{"timeline":[{"at":"+1d","income":' + nested_text(DEEP) + "}]}}").encode()),
        ("a timeline nested 1,000 deep", f"PUT /_sandbox/users/{A_USER}/profile", A,
         ('{"data":{"timeline":[{"at":"+1d","income":' + nested_text(1000) + "}]}}").encode()),
        ("verify with huge arrays", "POST /_sandbox/requests/verify", A, json.dumps({
            "method": "POST", "path": "/task/create",
            "body": {"tasks": [{"product": "deposit"}] * 60_000}}).encode()),
        ("verify nested 10,000 deep", "POST /_sandbox/requests/verify", A,
         ('{"method":"POST","path":"/task/create","body":' + nested_text(DEEP) + "}").encode()),
        ("verify nested 1,000 deep", "POST /_sandbox/requests/verify", A,
         ('{"method":"POST","path":"/task/create","body":' + nested_text(1000) + "}").encode()),
        ("autopilot nested 10,000 deep", f"PUT /_sandbox/users/{A_USER}/autopilot", A,
         ('{"company":' + nested_text(DEEP) + "}").encode()),
        ("scenario nested 10,000 deep", "PUT /_sandbox/scenario", A,
         ('{"scenario":' + nested_text(DEEP) + "}").encode()),
        ("a tenant whose clock start is nested", "POST /_sandbox/tenants", A,
         ('{"name":"deep","clock":{"start":' + nested_text(DEEP) + "}}").encode()),
        ("a tenant whose clock start is huge", "POST /_sandbox/tenants", A,
         json.dumps({"name": "huge", "clock": {"start": "2026" + "9" * 900_000}}).encode()),
    ]


AGGREGATOR_PATHS = ("/transactions/get", "/transactions/refresh", "/accounts/balance/get",
                    "/auth/get", "/webhook_verification_key/get")


@pytest.mark.filterwarnings("ignore:Sending a large body:ResourceWarning")
async def test_huge_and_deeply_nested_bodies_get_a_bounded_4xx_and_change_nothing(client):
    """Each hostile body is refused with a 4xx in the house's error shape, within 50 times
    a well-formed call's time on the same route (the larger of it and 20 ms); nothing the
    tenant had changed, and the server answers after. Times are this process's CPU time
    (client and server both run in it): what the refusal costs, which other processes on a
    loaded machine do not inflate as they do the wall clock."""
    token = await public_token(client, A_USER)
    access = await access_token_of(client)
    before = {"profile": (await call(client, "GET", f"/_sandbox/users/{A_USER}/profile"))["data"],
              "callbacks": (await call(client, "GET", "/_sandbox/sdk/callbacks"))["data"],
              "everyone": (await call(client, "GET", "/_sandbox/scenarios"))["everyone"]}
    bodies = hostile_bodies(token)
    for path in AGGREGATOR_PATHS:
        keys = aggregator_keys(A)
        bodies.append((f"{path} nested 10,000 deep", f"POST {AGGREGATOR}{path}", keys,
                       ('{"access_token":' + nested_text(DEEP) + "}").encode()))
        bodies.append((f"{path} with a 900 kB access token", f"POST {AGGREGATOR}{path}", keys,
                       json.dumps({"access_token": "access-sandbox-" + "x" * 900_000,
                                   "key_id": "k" * 900_000}).encode()))
        bodies.append((f"{path} with 100,000 account ids", f"POST {AGGREGATOR}{path}", keys,
                       json.dumps({"access_token": access, "options": {
                           "account_ids": ["a" * 8] * 100_000}}).encode()))
    ratios, sizes = [], []
    for name, route, headers, body in bodies:
        method, path = route.split(" ", 1)
        started = time.process_time()
        baseline = await client.request(method, path, headers={
            **headers, "content-type": "application/json"}, data=b"{}")
        base = max(time.process_time() - started, 0.02)
        await baseline.read()
        started = time.process_time()
        response = await client.request(method, path, headers={
            **headers, "content-type": "application/json"}, data=body)
        text = await response.text()
        took = time.process_time() - started
        ratios.append((round(took / base, 2), name, response.status))
        assert 400 <= response.status < 500, (name, response.status, text[:500])
        assert "Traceback" not in text, name
        assert len(text) < 256 * 1024, (name, len(text))  # the refusal itself is bounded
        sizes.append(len(text))
        assert took < 50 * base, (name, took, base)
    assert (await call(client, "GET", "/_sandbox/tenant"))["data"]["name"]
    after = {"profile": (await call(client, "GET", f"/_sandbox/users/{A_USER}/profile"))["data"],
             "callbacks": (await call(client, "GET", "/_sandbox/sdk/callbacks"))["data"],
             "everyone": (await call(client, "GET", "/_sandbox/scenarios"))["everyone"]}
    assert after == before
    print("ratios:", sorted(ratios, reverse=True), "largest answer:", max(sizes))


# -- bundles that are hostile ----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    '{"a":' * DEEP + "{}" + "}" * DEEP,
    "[" * DEEP + "]" * DEEP,
    '{"format": "payroll-sandbox-bundle", "version": 1, "snapshot": ' + "[" * DEEP + "]" * DEEP
    + "}",
], ids=["object-10000-deep", "array-10000-deep", "snapshot-10000-deep"])
def test_a_bundle_nested_10000_deep_is_refused_as_not_a_bundle(tmp_path, text):
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        read_bundle(path)
    assert str(path) in str(refused.value)


# -- the coverage report's path ------------------------------------------------------------------

def test_a_coverage_path_outside_the_working_folder_is_refused(tmp_path, monkeypatch):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / "link").symlink_to(elsewhere, target_is_directory=True)
    (work / "report.json").symlink_to(elsewhere / "planted.json")
    monkeypatch.chdir(work)
    for path in (elsewhere / "report.json", "../elsewhere/report.json", "link/report.json",
                 "report.json"):
        with pytest.raises(coverage.CoverageError) as refused:
            coverage.check_writable(path)
        assert "outside the working folder" in str(refused.value), path
        with pytest.raises(coverage.CoverageError):
            coverage.write({"percent": 0}, path)
    assert list(elsewhere.iterdir()) == []
    coverage.check_writable("inside.json")
    (work / "sub").mkdir()
    coverage.write({"percent": 0}, work / "sub" / "inside.json")
    assert json.loads((work / "sub" / "inside.json").read_text()) == {"percent": 0}
    coverage.write({"percent": 1}, "inside.json")
    assert Path("inside.json").exists() and os.path.realpath("inside.json").startswith(str(work))


# -- verification against a full journal ----------------------------------------------------------

async def test_a_verification_costs_a_bounded_time_against_a_full_journal(client):
    """Each journaled request is compared with the expected body and query, so both are
    bounded by what the journal keeps of a body (16 KiB of JSON, a longer one is kept
    truncated and could never match): past it 422 at once, the field named; at it, a full
    journal (1,000 requests) is compared within 100 times a check without a body (in this
    process's CPU time, which a loaded machine's other processes do not inflate)."""
    from payroll_sandbox.domain.journal import MAX_BODY_BYTES, MAX_ENTRIES

    items = [0] * (MAX_BODY_BYTES // 3 - 64)  # "0, " each: just under the bound
    for name, value in (("body", {"tasks": [0] * MAX_BODY_BYTES}),
                        ("query", {f"k{n}": "v" for n in range(MAX_BODY_BYTES // 4)})):
        started = time.perf_counter()
        response = await client.post("/_sandbox/requests/verify", headers=A, json={
            "method": "POST", "path": "/task/create", name: value})
        assert response.status == 422, name
        error = (await response.json())["error"]
        assert error["details"][0]["path"] == f"$.{name}", error
        assert f"{MAX_BODY_BYTES} bytes" in error["message"]
    for _ in range(MAX_ENTRIES):  # a full journal
        response = await client.post("/task/create", headers=A, json={  # unknown: ignored
            "identifier": "nobody", "company": "0" * 24, "product": "deposit", "extra": items})
        assert response.status == 404, await response.text()
    started = time.process_time()
    await call(client, "POST", "/_sandbox/requests/verify", json={
        "method": "POST", "path": "/task/create", "times": MAX_ENTRIES})
    small = max(time.process_time() - started, 0.005)
    started = time.process_time()
    response = await client.post("/_sandbox/requests/verify", headers=A, json={
        "method": "POST", "path": "/task/create", "body": {"identifier": "nobody", "extra": items}})
    took = time.process_time() - started
    answer = await response.text()
    assert response.status == 422 and len(answer) < 256 * 1024, (response.status, len(answer))
    print(f"full journal: {took:.3f}s, {took / small:.1f} times a check without a body, "
          f"{len(answer)} bytes")
    assert took < 100 * small, (took, small)


async def test_a_timeline_past_its_bound_is_named_at_once_without_checking_each_event(client):
    """20,000 life events under a bound of 20 (900 kB): the array is named with its count,
    refused within 8 times the time of a body as large refused for its type (a string where
    the timeline goes): its events are never checked one by one."""
    from payroll_sandbox.domain.accounts.data_profiles import TIMELINE

    limit, path = TIMELINE["maxItems"], f"/_sandbox/users/{A_USER}/profile"
    events = [{"at": "+30d", "income": {"income": 90_000}}] * 20_000
    text = "x" * len(json.dumps(events))
    # Each body encoded once, beforehand, and each timed at its best of three: the server's
    # time, not the client's encoding or a neighbour's burst on a shared machine.
    bodies = {name: json.dumps({"data": {"timeline": timeline}}).encode()
              for name, timeline in (("text", text), ("events", events))}
    times = {"text": [], "events": []}
    for _ in range(3):
        for name in ("events", "text"):  # the last detail read: the string's
            started = time.perf_counter()
            response = await client.put(path, headers={**A, "content-type": "application/json"},
                                        data=bodies[name])
            times[name].append(time.perf_counter() - started)
            assert response.status == 422
            detail = (await response.json())["error"]["details"][0]
            assert detail["path"] == "$.data.timeline", detail
    times = {name: min(taken) for name, taken in times.items()}
    assert detail["message"] != f"has {len(events)} items, more than the {limit} allowed"
    response = await client.put(path, headers=A, json={"data": {"timeline": events}})
    assert (await response.json())["error"]["details"] == [{
        "location": "body", "path": "$.data.timeline",
        "message": f"has {len(events)} items, more than the {limit} allowed"}]
    print(f"timeline of 20,000: {times['events']:.3f}s, a string as large: {times['text']:.3f}s")
    assert times["events"] < 8 * times["text"], times


async def test_a_near_miss_shows_fifty_differences_and_how_many_more(client):
    from payroll_sandbox.domain.journal import DIFFERENCES_SHOWN

    await client.post("/task/create", headers=A, json={
        "identifier": "x", "company": "0" * 24, "tasks": [{"product": "deposit"}] * 10})
    error = await call(client, "POST", "/_sandbox/requests/verify", status=422, json={
        "method": "POST", "path": "/task/create", "body": {"tasks": [{"product": "verify"}] * 200}})
    miss = error["error"]["nearMisses"][0]
    assert len(miss["differences"]) == DIFFERENCES_SHOWN
    assert miss["moreDifferences"] == 200 - DIFFERENCES_SHOWN
