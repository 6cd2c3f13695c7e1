"""API faults on purpose (issue 23): PUT /_sandbox/faults/api makes the calls a customer's app
makes fail (a status with retry-after, a slow answer, a reset connection), so its retry and
backoff code is tested. Each fault is ridden out here by a customer-style retrying client
on the real app; a faulted request changes nothing, is journaled with its rule, and the
control plane can never be faulted. The plugin's fail_next, slow_next and reset_next."""

from __future__ import annotations

import random
import time
import urllib.error

import aiohttp
import pytest

from conftest import ACME, GLOBEX, WALMART
from payroll_sandbox.domain.faults import (MAX_LATENCY_MS, MAX_RULES, ApiFaults, FaultRule,
                                           FaultsRecord,
                                           Target, UnknownOperation)
from payroll_sandbox.testing import SandboxError

FAULTS = "/_sandbox/faults/api"
DEPOSIT = {"identifier": "user-1", "company": WALMART, "product": "deposit"}
RETRIED = {429, 500, 502, 503, 504}


class RetryingClient:
    """A client as customers write one: retries 429 and 5xx (waiting `retry-after` when the
    answer has one, else an exponential backoff) and dropped connections, up to `attempts`
    calls. `sleep` is injectable, so a test sees the waits without waiting them."""

    def __init__(self, session: aiohttp.ClientSession, headers: dict, *, attempts: int = 4,
                 backoff: float = 0.5, timeout: float | None = None, sleep=None) -> None:
        self.session, self.headers = session, headers
        self.attempts, self.backoff = attempts, backoff
        self.timeout = aiohttp.ClientTimeout(total=timeout) if timeout else None
        self.waits: list[float] = []
        self.failures: list[str] = []  # what each retried attempt met
        self._sleep = sleep or self._record

    async def _record(self, seconds: float) -> None:
        self.waits.append(seconds)

    async def call(self, method: str, url, body: dict | None = None) -> tuple[int, dict]:
        for attempt in range(self.attempts):
            last = attempt == self.attempts - 1
            delay = self.backoff * 2 ** attempt
            try:
                async with self.session.request(method, url, json=body, headers=self.headers,
                                                timeout=self.timeout) as response:
                    answer = await response.json()
                    if response.status not in RETRIED or last:
                        return response.status, answer
                    self.failures.append(f"{response.status} {answer['error']['code']}")
                    if "retry-after" in response.headers:
                        delay = float(response.headers["retry-after"])
            except (aiohttp.ClientConnectionError, TimeoutError) as error:
                if last:
                    raise
                self.failures.append(type(error).__name__)
            await self._sleep(delay)
        raise AssertionError("unreachable")


async def put_rules(client, *rules: dict, headers: dict = ACME, status: int = 200) -> dict:
    response = await client.put(FAULTS, json={"rules": list(rules)}, headers=headers)
    answer = await response.json()
    assert response.status == status, answer
    return answer


async def faults_of(client, headers: dict = ACME) -> list[dict]:
    return (await (await client.get(FAULTS, headers=headers)).json())["data"]["rules"]


async def journal(client, path: str, headers: dict = ACME) -> list[dict]:
    """The journal's entries for `path`, oldest first."""
    response = await client.get("/_sandbox/requests", params={"path": path}, headers=headers)
    return list(reversed((await response.json())["data"]))


async def tasks_of(client, headers: dict = ACME) -> list[dict]:
    return (await (await client.get("/_sandbox/tasks", headers=headers)).json())["data"]


def retrying(client, headers: dict = ACME, **options) -> RetryingClient:
    return RetryingClient(client.session, headers, **options)


# -- the rules, without HTTP (domain/faults.py) ----------------------------------------------

TARGETS = [Target("POST", "/task/create", True), Target("GET", "/task/{taskId}", True),
           Target("GET", "/health", False), Target("GET", "/_sandbox/clock", True)]


def test_fire_takes_the_first_live_rule_of_the_operation_and_counts_it():
    faults = ApiFaults(random.Random(1))
    faults.put_rules([FaultRule("POST", "/task/create", status=429, count=1),
                      FaultRule("GET", "/task/{taskId}", reset=True),
                      FaultRule("POST", "/task/create", latency_ms=5, count=2)], TARGETS)
    fired = [faults.fire("POST", "/task/create") for _ in range(4)]
    assert [f and (f.number, f.rule.kinds) for f in fired] == \
        [(0, ["status"]), (2, ["latencyMs"]), (2, ["latencyMs"]), None]
    assert faults.fire("GET", "/task/{taskId}").number == 1
    assert faults.fire("GET", "/task/abc") is None  # the declared path, not the request's
    assert [(r.fired, r.remaining) for r in FaultsRecord.of(faults).rules] == \
        [(1, 0), (1, None), (2, 0)]


def test_probability_draws_repeat_with_the_generators_seed():
    def draws(seed: str) -> list[bool]:
        faults = ApiFaults(random.Random(seed))
        faults.put_rules([FaultRule("POST", "/task/create", status=503, probability=0.3)],
                         TARGETS)
        return [faults.fire("POST", "/task/create") is not None for _ in range(50)]

    assert draws("1:acme:api-faults") == draws("1:acme:api-faults")
    assert draws("1:acme:api-faults") != draws("2:acme:api-faults")
    assert 5 < sum(draws("1:acme:api-faults")) < 30


def test_put_rules_refuses_each_operation_that_cannot_be_faulted_and_keeps_the_rules():
    faults = ApiFaults(random.Random(1))
    kept = faults.put_rules([FaultRule("POST", "/task/create", status=500)], TARGETS)
    with pytest.raises(UnknownOperation) as raised:
        faults.put_rules([FaultRule("GET", "/health", status=500),
                          FaultRule("POST", "/task/create", status=500),
                          FaultRule("GET", "/_sandbox/clock", reset=True),
                          FaultRule("DELETE", "/task/create", reset=True),
                          FaultRule("GET", "/nowhere", reset=True)], TARGETS)
    assert [(d["path"], d["message"]) for d in raised.value.details] == [
        ("$.rules[0].path", "GET /health takes no credentials, so no tenant's rule applies to it"),
        ("$.rules[2].path", ("the control plane cannot be faulted (so a test can always take its "
                             "rules back)")),
        ("$.rules[3].path", "/task/create takes POST, not DELETE"),
        ("$.rules[4].path", ("no operation has the path '/nowhere': name it as GET /openapi.json "
                             "does, e.g. /task/{taskId}"))]
    assert FaultsRecord.of(faults) == kept


# -- each fault kind, ridden out by a retrying client -------------------------------------------

async def test_a_429_with_retry_after_is_waited_out_and_the_retry_creates_the_task(client):
    await put_rules(client, {"method": "POST", "path": "/task/create", "status": 429,
                             "retryAfter": 1, "count": 1})
    app = retrying(client)
    status, answer = await app.call("POST", client.make_url("/task/create"), DEPOSIT)
    assert status == 200 and answer["data"]["status"] == "queued"
    assert app.failures == ["429 rate-limited"] and app.waits == [1.0]  # retry-after honoured
    assert [t["id"] for t in await tasks_of(client)] == [answer["data"]["id"]]  # one task only

    faulted, served = await journal(client, "/task/create")
    assert (faulted["status"], faulted["errorCode"]) == (429, "rate-limited")
    assert faulted["fault"] == {"rule": 0, "method": "POST", "path": "/task/create",
                                "status": 429, "retryAfter": 1, "count": 1, "probability": 1.0}
    assert faulted["body"] == DEPOSIT  # what the app sent, though nothing was done with it
    assert (served["status"], served["fault"]) == (200, None)


async def test_an_injected_error_has_the_error_body_and_says_the_sandbox_injected_it(client):
    await put_rules(client, {"method": "POST", "path": "/task/create", "status": 429,
                             "retryAfter": 0},
                    {"method": "POST", "path": "/company/search", "status": 503},
                    {"method": "GET", "path": "/task/{taskId}", "status": 418})
    response = await client.post("/task/create", json=DEPOSIT, headers=ACME)
    assert response.status == 429 and response.headers["retry-after"] == "0"
    error = (await response.json())["error"]
    assert error["code"] == "rate-limited" and error["details"] == []
    assert "sandbox injected this 429 on purpose" in error["message"]
    assert "$.rules[0]" in error["message"] and "POST /task/create" in error["message"]

    response = await client.post("/company/search", json={"query": "walmart"}, headers=ACME)
    assert response.status == 503 and "retry-after" not in response.headers
    assert (await response.json())["error"]["code"] == "service-unavailable"
    response = await client.get("/task/any-id", headers=ACME)  # before the 404 it would be
    assert response.status == 418
    assert (await response.json())["error"]["code"] == "injected-fault"


async def test_a_503_on_search_is_retried_with_backoff_until_the_rule_is_spent(client):
    await put_rules(client, {"method": "POST", "path": "/company/search", "status": 503,
                             "count": 2})
    app = retrying(client)
    status, answer = await app.call("POST", client.make_url("/company/search"),
                                    {"query": "walmart"})
    assert status == 200 and answer["data"][0]["name"] == "Walmart"
    assert app.failures == ["503 service-unavailable"] * 2 and app.waits == [0.5, 1.0]
    [rule] = await faults_of(client)
    assert (rule["fired"], rule["remaining"]) == (2, 0)


async def test_a_reset_connection_answers_nothing_creates_nothing_and_a_retry_goes_through(
        client):
    await put_rules(client, {"method": "POST", "path": "/task/create", "reset": True,
                             "count": 1})
    with pytest.raises(aiohttp.ClientConnectionError):
        await client.post("/task/create", json=DEPOSIT, headers=ACME)
    assert await tasks_of(client) == []  # the faulted request changed nothing
    [entry] = await journal(client, "/task/create")
    assert entry["status"] == 0 and entry["errorCode"] is None  # no answer at all
    assert entry["fault"]["reset"] is True and entry["body"] == DEPOSIT

    await put_rules(client, {"method": "POST", "path": "/task/create", "reset": True,
                             "count": 1})
    app = retrying(client)
    status, answer = await app.call("POST", client.make_url("/task/create"), DEPOSIT)
    assert status == 200 and len(app.failures) == 1 and app.waits == [0.5]
    assert [t["id"] for t in await tasks_of(client)] == [answer["data"]["id"]]


async def test_a_slow_answer_waits_then_is_served_as_usual(client):
    await put_rules(client, {"method": "GET", "path": "/company/list", "latencyMs": 150,
                             "count": 1})
    started = time.monotonic()
    response = await client.get("/company/list", headers=ACME)
    assert response.status == 200 and (await response.json())["data"]
    assert time.monotonic() - started >= 0.15
    [entry] = await journal(client, "/company/list")
    assert entry["status"] == 200 and entry["durationMs"] >= 150
    assert entry["fault"]["latencyMs"] == 150


async def test_a_client_timeout_on_a_slow_answer_is_retried(client):
    await put_rules(client, {"method": "GET", "path": "/company/list", "latencyMs": 300,
                             "count": 1})
    app = retrying(client, timeout=0.1)
    status, answer = await app.call("GET", client.make_url("/company/list"))
    assert status == 200 and answer["data"]
    assert app.failures == ["TimeoutError"] and app.waits == [0.5]
    [rule] = await faults_of(client)
    assert rule["fired"] == 1


# -- count, probability, order, tenants -----------------------------------------------------------

async def test_rules_fire_in_order_each_until_its_count_is_spent(client):
    await put_rules(client, {"method": "GET", "path": "/company/list", "status": 500, "count": 1},
                    {"method": "GET", "path": "/company/list", "status": 502, "count": 2})
    statuses = [(await client.get("/company/list", headers=ACME)).status for _ in range(5)]
    assert statuses == [500, 502, 502, 200, 200]
    assert [(r["fired"], r["remaining"]) for r in await faults_of(client)] == [(1, 0), (2, 0)]


async def test_a_rule_without_count_fires_every_time(client):
    await put_rules(client, {"method": "GET", "path": "/company/list", "status": 503})
    statuses = [(await client.get("/company/list", headers=ACME)).status for _ in range(3)]
    assert statuses == [503, 503, 503]
    [rule] = await faults_of(client)
    assert (rule["count"], rule["fired"], rule["remaining"]) == (None, 3, None)


async def test_probability_draws_from_the_seed_so_a_run_repeats(client, make_client):
    rule = {"method": "GET", "path": "/company/list", "status": 503, "probability": 0.5}

    async def run(client) -> list[int]:
        await put_rules(client, rule)
        return [(await client.get("/company/list", headers=ACME)).status for _ in range(24)]

    first = await run(client)
    assert {200, 503} == set(first)
    assert (await faults_of(client))[0]["fired"] == first.count(503)
    await client.post("/_sandbox/reset", headers=ACME)  # a reset starts the draws afresh
    assert await run(client) == first
    assert await run(await make_client()) == first  # another server, the same seed


async def test_rules_are_the_tenants_whose_credentials_the_request_carries(client):
    await put_rules(client, {"method": "POST", "path": "/company/search", "status": 503})
    search = {"query": "walmart"}
    assert (await client.post("/company/search", json=search, headers=GLOBEX)).status == 200
    assert await journal(client, "/company/search", headers=GLOBEX) != []
    assert await faults_of(client, headers=GLOBEX) == []
    # A user's public token is its tenant's: the rule applies to the hosted flow's calls too.
    token = (await (await client.post("/access-token", json={"identifier": "user-1"},
                                      headers=ACME)).json())["data"]["publicToken"]
    response = await client.post("/company/search", json=search,
                                 headers={"x-public-token": token})
    assert response.status == 503
    assert (await journal(client, "/company/search"))[-1]["fault"]["rule"] == 0


async def test_a_rule_names_a_path_with_its_params_and_a_get_rule_faults_head(client):
    task = (await (await client.post("/task/create", json=DEPOSIT,
                                     headers=ACME)).json())["data"]
    await put_rules(client, {"method": "GET", "path": "/task/{taskId}", "status": 500,
                             "count": 2})
    assert (await client.get(f"/task/{task['id']}", headers=ACME)).status == 500
    assert (await client.head(f"/task/{task['id']}", headers=ACME)).status == 500
    assert (await client.get(f"/task/{task['id']}", headers=ACME)).status == 200
    assert (await client.get(f"/task/{task['id']}/status", headers=ACME)).status == 200


async def test_the_aggregators_own_api_is_faulted_in_its_own_terms(client):
    await put_rules(client, {"method": "POST", "path": "/aggregator-api/accounts/get",
                             "status": 429, "retryAfter": 2})
    response = await client.post("/aggregator-api/accounts/get", headers={
        "PLAID-CLIENT-ID": ACME["x-api-key"], "PLAID-SECRET": ACME["x-api-secret"]},
        json={"access_token": "access-sandbox-x"})
    assert response.status == 429 and response.headers["retry-after"] == "2"
    assert (await response.json())["error_code"] == "RATE_LIMIT"


# -- GET, DELETE, reset and snapshots ------------------------------------------------------------

async def test_get_shows_the_rules_and_delete_clears_them(client):
    answer = await put_rules(client, {"method": "POST", "path": "/task/create", "status": 429,
                                      "retryAfter": 1, "count": 3, "probability": 0.25},
                             {"method": "GET", "path": "/company/list", "latencyMs": 10},
                             {"method": "GET", "path": "/task/{taskId}", "reset": True})
    rules = await faults_of(client)
    assert answer["data"]["rules"] == rules
    assert rules == [
        {"method": "POST", "path": "/task/create", "status": 429, "retryAfter": 1, "count": 3,
         "probability": 0.25, "fired": 0, "remaining": 3},
        {"method": "GET", "path": "/company/list", "latencyMs": 10, "count": None,
         "probability": 1.0, "fired": 0, "remaining": None},
        {"method": "GET", "path": "/task/{taskId}", "reset": True, "count": None,
         "probability": 1.0, "fired": 0, "remaining": None}]
    response = await client.delete(FAULTS, headers=ACME)
    assert response.status == 200 and (await response.json())["data"] == {"rules": []}
    assert await faults_of(client) == []
    assert (await client.post("/task/create", json=DEPOSIT, headers=ACME)).status == 200
    await put_rules(client, {"method": "GET", "path": "/company/list", "status": 500})
    await put_rules(client)  # an empty list clears them too
    assert (await client.get("/company/list", headers=ACME)).status == 200


async def test_a_reset_of_the_tenant_clears_its_rules(client):
    await put_rules(client, {"method": "GET", "path": "/company/list", "status": 500})
    assert (await client.post("/_sandbox/reset", headers=ACME)).status == 200
    assert await faults_of(client) == []


async def test_a_snapshot_keeps_the_rules_their_counts_and_draws(client, make_client):
    await put_rules(client, {"method": "GET", "path": "/company/list", "status": 503,
                             "count": 3},
                    {"method": "GET", "path": "/company/list", "status": 500,
                     "probability": 0.5})
    await client.get("/company/list", headers=ACME)
    document = (await (await client.get("/_sandbox/snapshot", headers=ACME)).json())["data"]
    assert document["apiFaults"]["fired"] == [1, 0]
    later = [(await client.get("/company/list", headers=ACME)).status for _ in range(8)]

    other = await make_client()
    response = await other.post("/_sandbox/snapshot", json=document, headers=ACME)
    assert response.status == 200, await response.text()
    assert [(r["fired"], r["remaining"]) for r in await faults_of(other)] == \
        [(1, 2), (0, None)]
    assert [(await other.get("/company/list", headers=ACME)).status for _ in range(8)] == later

    # A snapshot from before API faults restores, without rules.
    del document["apiFaults"]
    assert (await client.post("/_sandbox/snapshot", json=document, headers=ACME)).status == 200
    assert await faults_of(client) == []


@pytest.mark.parametrize(("change", "field", "says"), [
    (lambda rule: rule.update(reset=True), "$.apiFaults.rules[0]", "exactly one"),
    (lambda rule: rule.update(path="/_sandbox/clock"), "$.apiFaults.rules[0].path",
     "control plane"),
    (lambda rule: rule.update(status=302), "$.apiFaults.rules[0].status", "302"),
])
async def test_a_snapshot_with_a_broken_rule_is_refused_naming_it(client, change, field, says):
    await put_rules(client, {"method": "GET", "path": "/company/list", "status": 503})
    document = (await (await client.get("/_sandbox/snapshot", headers=ACME)).json())["data"]
    change(document["apiFaults"]["rules"][0])
    response = await client.post("/_sandbox/snapshot", json=document, headers=ACME)
    assert response.status == 422
    [detail] = [d for d in (await response.json())["error"]["details"] if d["path"] == field]
    assert says in detail["message"]
    assert (await faults_of(client))[0]["status"] == 503  # nothing changed


# -- bad rules: 422 naming the rule, nothing changed ----------------------------------------------

@pytest.mark.parametrize(("rule", "code", "field", "says"), [
    ({"method": "POST", "path": "/task/nothing", "status": 500}, "unknown-operation",
     "$.rules[0].path", "no operation has the path '/task/nothing'"),
    ({"method": "POST", "path": "/task/abc123", "status": 500}, "unknown-operation",
     "$.rules[0].path", "as GET /openapi.json does"),
    ({"method": "GET", "path": "/task/create", "status": 500}, "unknown-operation",
     "$.rules[0].path", "/task/create takes POST, not GET"),
    ({"method": "GET", "path": "/_sandbox/clock", "status": 500}, "unknown-operation",
     "$.rules[0].path", "the control plane cannot be faulted"),
    ({"method": "PUT", "path": "/_sandbox/faults/api", "reset": True}, "unknown-operation",
     "$.rules[0].path", "the control plane cannot be faulted"),
    ({"method": "GET", "path": "/health", "status": 500}, "unknown-operation",
     "$.rules[0].path", "takes no credentials"),
    ({"method": "GET", "path": "/company/list", "status": 500, "reset": True},
     "validation-failed", "$.rules[0]", "is valid under each of"),
    ({"method": "GET", "path": "/company/list", "count": 1}, "validation-failed",
     "$.rules[0]", "is not valid under any of"),
    ({"method": "GET", "path": "/company/list", "latencyMs": 10, "retryAfter": 1},
     "validation-failed", "$.rules[0]", "'status' is a dependency of 'retryAfter'"),
    ({"method": "GET", "path": "/company/list", "status": 302}, "validation-failed",
     "$.rules[0].status", "less than the minimum of 400"),
    ({"method": "GET", "path": "/company/list", "latencyMs": MAX_LATENCY_MS + 1},
     "validation-failed", "$.rules[0].latencyMs", "greater than the maximum"),
    ({"method": "GET", "path": "/company/list", "reset": False}, "validation-failed",
     "$.rules[0].reset", "True was expected"),
    ({"method": "GET", "path": "/company/list", "status": 500, "probability": 1.5},
     "validation-failed", "$.rules[0].probability", "greater than the maximum"),
    ({"method": "GET", "path": "/company/list", "status": 500, "count": 0},
     "validation-failed", "$.rules[0].count", "less than the minimum"),
    ({"method": "HEAD", "path": "/company/list", "status": 500}, "validation-failed",
     "$.rules[0].method", "is not one of"),
    ({"method": "GET", "path": "company/list", "status": 500}, "validation-failed",
     "$.rules[0].path", "does not match"),
    ({"method": "GET", "path": "/company/list", "status": 500, "latency": 5},
     "validation-failed", "$.rules[0].latency", "is not a known field"),
])
async def test_a_bad_rule_is_422_naming_it_and_changes_nothing(client, rule, code, field, says):
    kept = {"method": "GET", "path": "/company/list", "status": 503, "count": 1}
    await put_rules(client, kept)
    response = await client.put(FAULTS, json={"rules": [rule, kept]}, headers=ACME)
    assert response.status == 422
    error = (await response.json())["error"]
    assert error["code"] == code
    assert any(d["path"] == field and says in d["message"] for d in error["details"]), error
    assert [r["path"] for r in await faults_of(client)] == ["/company/list"]
    assert (await faults_of(client))[0]["fired"] == 0


async def test_rules_are_bounded_per_tenant(client):
    rule = {"method": "GET", "path": "/company/list", "status": 500, "count": 1}
    await put_rules(client, *[rule] * MAX_RULES)
    answer = await put_rules(client, *[rule] * (MAX_RULES + 1), status=422)
    assert answer["error"]["details"][0]["path"] == "$.rules"
    assert len(await faults_of(client)) == MAX_RULES


@pytest.mark.parametrize("body", [{}, {"rules": {}}, {"rules": [], "extra": 1}, []])
async def test_a_body_that_is_not_a_rule_list_is_422(client, body):
    response = await client.put(FAULTS, json=body, headers=ACME)
    assert response.status == 422
    assert (await response.json())["error"]["code"] == "validation-failed"


async def test_the_control_plane_answers_whatever_the_rules(client):
    every = [{"method": "GET", "path": "/company/list", "reset": True},
             {"method": "POST", "path": "/task/create", "status": 503}]
    await put_rules(client, *every)
    for method, path in (("GET", FAULTS), ("GET", "/_sandbox/requests"),
                         ("POST", "/_sandbox/clock/run-until-idle")):
        assert (await client.request(method, path, headers=ACME)).status == 200
    assert (await client.delete(FAULTS, headers=ACME)).status == 200


async def test_faults_need_the_tenants_keys(client):
    assert (await client.get(FAULTS)).status == 401
    response = await client.put(FAULTS, json={"rules": []}, headers={"x-public-token": "x"})
    assert response.status == 401


# -- the plugin ----------------------------------------------------------------------------------

def test_plugin_fail_next_answers_the_status_then_lets_the_call_through(payroll_sandbox):
    payroll_sandbox.fail_next("POST /task/create", status=429, retry_after=1)
    with pytest.raises(SandboxError) as raised:
        payroll_sandbox.post("/task/create", DEPOSIT)
    assert raised.value.status == 429
    assert raised.value.body["error"]["code"] == "rate-limited"
    assert payroll_sandbox.post("/task/create", DEPOSIT)["status"] == "queued"
    [rule] = payroll_sandbox.api_faults()
    assert (rule["status"], rule["retryAfter"], rule["fired"], rule["remaining"]) == \
        (429, 1, 1, 0)


def test_plugin_rules_add_up_and_keep_what_they_have_left(payroll_sandbox):
    payroll_sandbox.fail_next("POST /task/create", count=2)
    with pytest.raises(SandboxError):
        payroll_sandbox.post("/task/create", DEPOSIT)
    payroll_sandbox.fail_next("/company/list", status=500, count=None)  # a path alone: GET
    rules = payroll_sandbox.slow_next("GET /company/{companyId}", 5)
    assert [(r["method"], r["path"], r.get("status"), r.get("latencyMs"), r["remaining"])
            for r in rules] == [("POST", "/task/create", 503, None, 1),
                                ("GET", "/company/list", 500, None, None),
                                ("GET", "/company/{companyId}", None, 5, 1)]
    with pytest.raises(SandboxError) as raised:
        payroll_sandbox.post("/task/create", DEPOSIT)
    assert raised.value.status == 503
    assert payroll_sandbox.post("/task/create", DEPOSIT)  # spent: through
    payroll_sandbox.clear_api_faults()
    assert payroll_sandbox.api_faults() == []
    assert payroll_sandbox.get("/company/list")


def test_plugin_reset_next_drops_the_connection_and_slow_next_waits(payroll_sandbox):
    payroll_sandbox.reset_next("POST /task/create")
    with pytest.raises((ConnectionError, urllib.error.URLError)):
        payroll_sandbox.post("/task/create", DEPOSIT)
    assert payroll_sandbox.get("/_sandbox/tasks") == []
    payroll_sandbox.slow_next("GET /company/list", latency_ms=100)
    started = time.monotonic()
    assert payroll_sandbox.get("/company/list")
    assert time.monotonic() - started >= 0.1


@pytest.mark.parametrize("operation", ["POST", "POST task/create", ""])
def test_plugin_refuses_what_is_no_operation(payroll_sandbox, operation):
    with pytest.raises(ValueError, match="is no operation"):
        payroll_sandbox.fail_next(operation)


def test_plugin_passes_on_the_sandboxs_refusal_of_an_unknown_operation(payroll_sandbox):
    with pytest.raises(SandboxError) as raised:
        payroll_sandbox.reset_next("GET /task/create")
    assert raised.value.status == 422
    assert raised.value.body["error"]["details"][0]["message"] == \
        "/task/create takes POST, not GET"


async def test_async_plugin_twins(async_payroll_sandbox):
    sandbox = async_payroll_sandbox
    await sandbox.fail_next("POST /task/create", status=503, retry_after=0)
    await sandbox.reset_next("POST /task/create")
    await sandbox.slow_next("POST /task/create", 20)
    with pytest.raises(SandboxError) as raised:
        await sandbox.post("/task/create", DEPOSIT)
    assert raised.value.status == 503
    with pytest.raises(aiohttp.ClientConnectionError):
        await sandbox.post("/task/create", DEPOSIT)
    assert (await sandbox.post("/task/create", DEPOSIT))["status"] == "queued"
    assert [r["fired"] for r in await sandbox.api_faults()] == [1, 1, 1]
    await sandbox.clear_api_faults()
    assert await sandbox.api_faults() == []
