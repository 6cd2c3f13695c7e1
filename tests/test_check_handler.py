"""Issue 14: `payroll-sandbox check-handler` judges a webhook handler the way the service
treats it, and each check catches what it claims.

Every handler here is a real local server: the example handler (examples/handler.py)
passes every check; a deliberately naive one fails exactly the signature, duplicate and
unknown-type checks; one handler per remaining fault fails the check made for it; a
correct deposit-only handler passes when the run is scoped to deposit tasks (issue 23).
The burst is smaller than the CLI's 200 (the CLI tests run the real default).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest
from aiohttp import web
from conftest import REPO, run_cli

from payroll_sandbox import checker
from payroll_sandbox.checker import (BURST, CHECKS, DUPLICATE_DELIVERY, EVERY_EVENT_TYPE, EXTRA_FIELDS,
                               MISSING_SIGNATURE, NO_REDIRECT, OUT_OF_ORDER, PASS, SKIP,
                               STATE_URL, UNKNOWN_EVENT_TYPE, WRONG_SIGNATURE, CheckerError,
                               check_handler, check_handler_async)
from payroll_sandbox.checker.checks import BURST_CONCURRENCY, BURST_DELIVERIES
from payroll_sandbox.client import default_credentials
from payroll_sandbox.tools.cli import main
from payroll_sandbox.domain.webhooks.event_types import event_types

SECRET = "handler-secret-0001"
RECEIVED = web.AppKey("received", list)
DEFAULT_SECRET = "sandbox-secret-acme-0001"   # the bundled default tenant's API secret
TASK_EVENTS = ("task-status-updated", "task-authentication-status-updated", "task-status-patched",
               "task-workflow-finished")
FAST = {"burst": 40, "concurrency": 20}
SIGNATURE = "x-hmac-signature-sha-256"


def load_example():
    spec = importlib.util.spec_from_file_location("example_handler",
                                                  REPO / "examples" / "handler.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = load_example()


async def serve(aiohttp_server, app: web.Application) -> str:
    """The app on a real local server; its base URL."""
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


def verifies(request_body: bytes, headers, secret: str = SECRET) -> bool:
    expected = hmac.new(secret.encode(), request_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers.get(SIGNATURE, "").encode(), expected.encode())


# ---------------------------------------------------------------- handlers with one fault each

def naive_app(requests: list | None = None, aggregator: str = "aggregator") -> web.Application:
    """A first integration as it is often written: no signature check, the ce-id as a
    primary key that a redelivery violates (500), a closed list of event types (400): the
    service's, with its aggregator's name."""
    known = set(event_types(aggregator))
    seen: set[str] = set()

    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        if requests is not None:
            requests.append((dict(request.headers), body))
        event = json.loads(body)
        if event["eventType"] not in known:
            return web.json_response({"error": f"unknown event type {event['eventType']}"},
                                     status=400)
        if request.headers["ce-id"] in seen:
            return web.json_response(
                {"error": "duplicate key value violates unique constraint"}, status=500)
        seen.add(request.headers["ce-id"])
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/webhooks", receive)
    return app


def example_with(middleware) -> web.Application:
    """The example handler behind one middleware that adds a fault."""
    app = example.create_app(SECRET)
    app.middlewares.append(middleware)
    return app


REDIRECTED: list[str] = []  # the ce-ids redirects_one_type redirected, in order


@web.middleware
async def redirects_one_type(request, handler):
    """company-updated moved to a new path, and the old one redirects there."""
    body = await request.read()
    if json.loads(body).get("eventType") == "company-updated":
        REDIRECTED.append(request.headers.get("ce-id", ""))
        raise web.HTTPPermanentRedirect("/v2/webhooks")
    return await handler(request)


@web.middleware
async def refuses_unknown_fields(request, handler):
    """Validates bodies against the fields it was written for: 422 for anything else."""
    if request.method != "POST":
        return await handler(request)
    known = {"eventType", "eventTime", "user", "data", "publicToken", "product", "task",
             "taskWorkflow", "authenticationMethod", "company", "metadata"}
    extra = set(json.loads(await request.read())) - known
    if extra:
        return web.json_response({"error": f"unexpected fields {sorted(extra)}"}, status=422)
    return await handler(request)


STAGES = {"task-authentication-status-updated": 1, "task-status-updated": 2,
          "task-status-patched": 3, "task-workflow-finished": 4}


def order_dependent_app() -> web.Application:
    """Refuses (409) a task event that arrives after a later stage of the same task."""
    stage: dict[str, int] = {}

    @web.middleware
    async def in_order_only(request, handler):
        if request.method != "POST":
            return await handler(request)
        event = json.loads(await request.read())
        number = STAGES.get(event.get("eventType"))
        if number is not None:
            task = event["task"]
            if stage.get(task, 0) > number:
                return web.json_response({"error": "event out of order"}, status=409)
            stage[task] = max(stage.get(task, 0), number)
        return await handler(request)

    return example_with(in_order_only)


def thrashing_app() -> web.Application:
    """Fast alone, slower with every request in flight (each waits 4 ms times the square
    of the requests in flight): 4 ms for one, 1.6 s for twenty."""
    in_flight = 0

    @web.middleware
    async def thrashing(request, handler):
        nonlocal in_flight
        await request.read()  # before the wait: a request timed out meanwhile is complete
        in_flight += 1
        try:
            await asyncio.sleep(0.004 * in_flight ** 2)
            return await handler(request)
        finally:
            in_flight -= 1

    return example_with(thrashing)


def hanging_app(seconds: float = 3600, requests: list | None = None) -> web.Application:
    """Answers each delivery after `seconds` (wall), noting its arrival in `requests`."""
    async def hang(request: web.Request) -> web.Response:
        if requests is not None:
            requests.append(request.headers["ce-id"])
        await asyncio.sleep(seconds)
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/webhooks", hang)
    return app


def storing_app(*, dedupe: bool, verify_first: bool, latest_wins: bool) -> web.Application:
    """Stores task outcomes as rows, with one of the mistakes the state URL shows."""
    rows: list[dict] = []
    seen: set[str] = set()

    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        valid = verifies(body, request.headers)
        if verify_first and not valid:
            return web.json_response({"error": "bad signature"}, status=401)
        event = json.loads(body)
        ce_id = request.headers["ce-id"]
        if event["eventType"] in ("task-status-updated", "task-status-patched") and not (
                dedupe and ce_id in seen):
            row = {"task": event["task"], "status": event["data"]["status"],
                   "reason": event["data"].get("reason")}
            if latest_wins:
                rows[:] = [r for r in rows if r["task"] != row["task"]]
            rows.append(row)  # last write wins, whatever its eventTime
        seen.add(ce_id)
        if not valid:
            return web.json_response({"error": "bad signature"}, status=401)
        return web.json_response({"ok": True})

    async def state(request: web.Request) -> web.Response:
        return web.json_response({"outcomes": rows})

    app = web.Application()
    app.router.add_post("/webhooks", receive)
    app.router.add_get("/state", state)
    return app


def deposit_only_app(secret: str = SECRET) -> web.Application:
    """A correct handler of an integration that uses only the deposit product: it verifies
    the signature first, handles each ce-id once, acknowledges everything it does not need,
    and stores the outcome (latest eventTime) of deposit tasks only; switch and other
    products' task events are acknowledged and ignored, as it never starts such tasks."""
    seen: set[str] = set()
    outcomes: dict[str, dict] = {}
    received: list[dict] = []

    async def receive(request: web.Request) -> web.Response:
        body = await request.read()
        if not verifies(body, request.headers, secret):
            return web.json_response({"error": "bad signature"}, status=401)
        if request.headers["ce-id"] in seen:
            return web.json_response({"duplicate": True})
        seen.add(request.headers["ce-id"])
        event = json.loads(body)
        received.append(event)
        if (event.get("eventType") in ("task-status-updated", "task-status-patched")
                and event.get("product") == "deposit"):
            known = outcomes.get(event["task"])
            if known is None or known["at"] <= event["eventTime"]:
                outcomes[event["task"]] = {"status": event["data"]["status"],
                                           "reason": event["data"].get("reason"),
                                           "at": event["eventTime"]}
        return web.json_response({"ok": True})

    async def state(request: web.Request) -> web.Response:
        return web.json_response({"outcomes": [
            {"task": task, "status": o["status"], "reason": o["reason"]}
            for task, o in outcomes.items()]})

    app = web.Application()
    app.router.add_post("/webhooks", receive)
    app.router.add_get("/state", state)
    app[RECEIVED] = received
    return app


# ---------------------------------------------------------------- the good and the naive handler

async def test_example_handler_passes_every_check(aiohttp_server):
    base = await serve(aiohttp_server, example.create_app(SECRET))
    report = await check_handler_async(f"{base}/webhooks", SECRET, state_url=f"{base}/state",
                                       **FAST)
    assert report.ok, report
    assert [(c.name, c.status) for c in report.checks] == [(name, PASS) for name in CHECKS]
    every = report.check(EVERY_EVENT_TYPE)
    assert [d.event_type for d in every.deliveries] == event_types("aggregator")
    assert all(d.latency_ms is not None and d.latency_ms < 15_000 for d in every.deliveries)
    assert report.check(STATE_URL).received.startswith("each of the ")


async def test_naive_handler_fails_exactly_the_signature_duplicate_and_unknown_type_checks(
        aiohttp_server):
    base = await serve(aiohttp_server, naive_app())
    report = await check_handler_async(f"{base}/webhooks", SECRET, **FAST)
    assert report.failed_names == {WRONG_SIGNATURE, MISSING_SIGNATURE, DUPLICATE_DELIVERY,
                                   UNKNOWN_EVENT_TYPE}, report
    assert report.skipped_names == {STATE_URL}
    assert "a forged delivery was accepted" in report.check(WRONG_SIGNATURE).received
    assert "then 500" in report.check(DUPLICATE_DELIVERY).received
    assert "duplicate key value" in report.check(DUPLICATE_DELIVERY).line()
    assert "400" in report.check(UNKNOWN_EVENT_TYPE).received
    # The report reads as an assertion message: one line per check, then the summary.
    text = str(report)
    assert text.splitlines()[0].startswith(
        f"PASS every-event-type: sent {len(event_types('aggregator'))} deliveries")
    assert text.splitlines()[-1].endswith(
        "failed: wrong-signature, missing-signature, duplicate-delivery, unknown-event-type")


async def test_without_a_secret_deliveries_are_signed_with_the_bundled_default_tenants(
        aiohttp_server):
    """Issue 23: without --secret, the secret `listen` and `trigger` default to (the bundled
    default tenant's), said first; a handler set up with it passes every check."""
    assert default_credentials()[1] == DEFAULT_SECRET
    base = await serve(aiohttp_server, example.create_app(DEFAULT_SECRET))
    report = await check_handler_async(f"{base}/webhooks", state_url=f"{base}/state", **FAST)
    assert report.ok, report
    assert [(c.name, c.status) for c in report.checks] == [(name, PASS) for name in CHECKS]
    assert str(report).splitlines()[0] == (
        f"signing with the bundled default tenant's secret ({DEFAULT_SECRET}), as its webhooks "
        "are signed; pass --secret with the one your handler verifies x-hmac-signature-sha-256 "
        "with if it is another")
    assert report.to_dict()["secret"] == "default"
    assert "signed with the bundled default tenant's secret" in report.check(EVERY_EVENT_TYPE).sent


async def test_without_a_secret_a_handler_with_another_secret_fails_and_is_told_which(
        aiohttp_server):
    requests: list = []
    base = await serve(aiohttp_server, naive_app(requests))
    report = await check_handler_async(f"{base}/webhooks", **FAST)
    # Every delivery but the forged and the unsigned one is signed with that secret.
    signed = [body for headers, body in requests if verifies(body, headers, DEFAULT_SECRET)]
    assert requests and len(signed) == len(requests) - 2
    assert report.failed_names == {WRONG_SIGNATURE, MISSING_SIGNATURE, DUPLICATE_DELIVERY,
                                   UNKNOWN_EVENT_TYPE}, report
    base = await serve(aiohttp_server, example.create_app(SECRET))
    report = await check_handler_async(f"{base}/webhooks", **FAST)
    assert not report.ok and EVERY_EVENT_TYPE in report.failed_names
    assert DEFAULT_SECRET in str(report).splitlines()[0]


# ---------------------------------------------------------------- products (issue 23)

async def test_products_deposit_passes_a_deposit_only_handler_that_stores_outcomes(
        aiohttp_server):
    """The acceptance of issue 23: `check-handler --products deposit` passes a correct
    deposit-only handler, and every task event it sent names a deposit task."""
    app = deposit_only_app()
    base = await serve(aiohttp_server, app)
    report = await check_handler_async(f"{base}/webhooks", SECRET, state_url=f"{base}/state",
                                       products="deposit", **FAST)
    assert report.ok, report
    assert [(c.name, c.status) for c in report.checks] == [(name, PASS) for name in CHECKS]
    assert report.products == ("deposit",) and report.to_dict()["products"] == ["deposit"]
    assert report.summary().endswith(f"against {base}/webhooks for deposit tasks")
    tasks = [e for e in app[RECEIVED] if e["eventType"] in TASK_EVENTS]
    assert tasks and {e["product"] for e in tasks} == {"deposit"}
    # Failure reasons of deposit scenarios only (no payment-method-declined on a deposit).
    reasons = {e["data"].get("reason") for e in tasks if e["eventType"] == "task-status-updated"}
    assert reasons - {None} and not {r for r in reasons if r and r.startswith("payment-")}
    state = report.check(STATE_URL).received
    assert state.startswith("each of the ") and "tasks stored once" in state
    assert "3 real deposit tasks" in report.check(OUT_OF_ORDER).sent


async def test_without_products_the_deposit_only_handler_fails_the_other_products_outcomes(
        aiohttp_server):
    """The option matters: unscoped, the run also sends switch (and verify, ...) tasks,
    whose outcomes this handler rightly does not store, so the state URL fails (this
    handler stores as it answers: what is missing after 0.3 s never comes)."""
    app = deposit_only_app()
    base = await serve(aiohttp_server, app)
    report = await check_handler_async(f"{base}/webhooks", SECRET, state_url=f"{base}/state",
                                       state_settle=0.3, **FAST)
    assert report.failed_names == {STATE_URL}, report
    assert report.products == ("deposit", "verify", "identify", "tax", "switch", "present")
    problems = report.check(STATE_URL).details["problems"]
    assert problems and all(p.endswith(")") or " missing, sent " in p for p in problems)
    products = {e["product"] for e in app[RECEIVED] if e["eventType"] in TASK_EVENTS}
    assert {"deposit", "switch"} <= products
    missing = {e["task"] for e in app[RECEIVED]
               if e["eventType"] == "task-status-updated" and e["product"] == "switch"}
    assert any(task in p for p in problems for task in missing)
    # The switch tasks of out-of-order ran a switch scenario (and stayed switch tasks).
    assert "action-failed" in {e["data"].get("reason") for e in app[RECEIVED]
                               if e["eventType"] == "task-status-updated"
                               and e["product"] == "switch"}


async def test_products_several_and_repeated_are_taken_in_the_profiles_order(aiohttp_server):
    base = await serve(aiohttp_server, example.create_app(SECRET))
    report = await check_handler_async(f"{base}/webhooks", SECRET, products=["switch", "deposit"],
                                       events="task-status-updated", **FAST)
    assert report.ok, report
    assert report.products == ("deposit", "switch")
    assert {d.event_type for d in report.check(BURST).deliveries} == {"task-status-updated"}


@pytest.mark.parametrize("products, message", [
    ("deposit,payroll", ("--products: no product is named payroll (known: deposit, verify, "
                         "identify, tax, switch, present, manage)")),
    ("manage", "--products: no company of the sandbox takes a manage task"),
    (" , ", "--products names no product"),
], ids=["unknown", "no-company-offers-it", "empty"])
async def test_products_that_cannot_make_a_run_are_refused(products, message):
    with pytest.raises(CheckerError) as caught:
        await check_handler_async("http://127.0.0.1:9/webhooks", SECRET, products=products)
    assert str(caught.value).startswith(message)


def test_cli_products_unknown_is_exit_2_with_one_line(capsys):
    assert main(["check-handler", "http://127.0.0.1:9/webhooks", "--products", "deposit",
                 "--products", "bills"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == ("payroll-sandbox: --products: no product is named bills (known: "
                       "deposit, verify, identify, tax, switch, present, manage)")


# ---------------------------------------------------------------- each other check, proven

async def test_a_redirect_fails_no_redirect_and_the_deliveries_it_met(aiohttp_server):
    REDIRECTED.clear()
    base = await serve(aiohttp_server, example_with(redirects_one_type))
    report = await check_handler_async(f"{base}/webhooks", SECRET, **FAST)
    assert report.failed_names == {EVERY_EVENT_TYPE, BURST, NO_REDIRECT}, report
    # As many as the run sent company-updated (which depends on the catalog's event types).
    assert REDIRECTED, "the run sent no company-updated"
    assert report.check(NO_REDIRECT).received.startswith(
        f"{len(REDIRECTED)} redirects: 308 to /v2/webhooks")
    assert report.check(NO_REDIRECT).received.endswith("for company-updated")
    assert "company-updated" in report.check(EVERY_EVENT_TYPE).received


async def test_refusing_unknown_fields_fails_extra_fields_only(aiohttp_server):
    base = await serve(aiohttp_server, example_with(refuses_unknown_fields))
    report = await check_handler_async(f"{base}/webhooks", SECRET, state_url=f"{base}/state",
                                       **FAST)
    assert report.failed_names == {EXTRA_FIELDS}, report
    assert "422" in report.check(EXTRA_FIELDS).received


async def test_depending_on_order_fails_out_of_order_only(aiohttp_server):
    base = await serve(aiohttp_server, order_dependent_app())
    report = await check_handler_async(f"{base}/webhooks", SECRET, state_url=f"{base}/state",
                                       **FAST)
    assert report.failed_names == {OUT_OF_ORDER}, report
    assert "409" in report.check(OUT_OF_ORDER).received


@pytest.mark.parametrize("mistake, stored", [
    ({"dedupe": False, "verify_first": True, "latest_wins": False}, "stored 2 times"),
    ({"dedupe": True, "verify_first": True, "latest_wins": True}, "stored failed/"),
    ({"dedupe": True, "verify_first": False, "latest_wins": True}, "from a forged delivery"),
], ids=["duplicate-stored-twice", "older-status-overwrites-the-patch", "forged-outcome-stored"])
async def test_a_state_that_differs_from_what_was_sent_fails_state_url_only(
        aiohttp_server, mistake, stored):
    base = await serve(aiohttp_server, storing_app(**mistake))
    report = await check_handler_async(f"{base}/webhooks", SECRET, state_url=f"{base}/state",
                                       state_settle=0.3, **FAST)
    assert report.failed_names == {STATE_URL}, report
    assert stored in report.check(STATE_URL).received


async def test_a_handler_slow_under_load_fails_the_burst_only(aiohttp_server):
    base = await serve(aiohttp_server, thrashing_app())
    report = await check_handler_async(f"{base}/webhooks", SECRET, timeout=0.5, **FAST)
    assert report.failed_names == {BURST}, report
    burst = report.check(BURST)
    assert "timeouts" in burst.received and burst.details["p99Ms"] >= 500


async def test_a_hanging_handler_stops_the_run_after_three_timeouts(aiohttp_server):
    requests: list[str] = []
    base = await serve(aiohttp_server, hanging_app(requests=requests))
    report = await check_handler_async(f"{base}/webhooks", SECRET, timeout=0.2, **FAST)
    assert len(requests) == 3  # the three that timed out, and nothing after them
    assert report.failed_names == set(CHECKS) - {STATE_URL}, report
    received = report.check(EVERY_EVENT_TYPE).received
    assert "timeout after 0.2s for task-status-updated" in received
    assert "not sent: 3 deliveries timed out already" in received
    assert report.check(NO_REDIRECT).received == "no HTTP answer at all"


HANG = 0.1        # wall seconds the handler of the bounded run takes over each answer
RUN_BOUND = 0.5   # that run's run_timeout


async def test_the_whole_run_is_bounded(aiohttp_server):
    """Past run_timeout nothing more is sent, and every delivery not sent says why. Counted
    in requests, not wall seconds: the deliveries before the burst go one at a time, each
    holding the handler HANG seconds at least, so at most RUN_BOUND / HANG + 1 of them can
    reach it within the bound, however loaded the machine (a slow start-up, which counts
    against the bound too, only leaves fewer); without the bound every one of them would."""
    requests: list[str] = []
    base = await serve(aiohttp_server, hanging_app(seconds=HANG, requests=requests))
    report = await check_handler_async(f"{base}/webhooks", SECRET, run_timeout=RUN_BOUND,
                                       **FAST)
    assert len(requests) <= RUN_BOUND / HANG + 1, len(requests)
    every = report.check(EVERY_EVENT_TYPE).received
    assert f"not sent: the run's bound of {RUN_BOUND:g}s was reached" in every
    assert report.check(BURST).received == f"{FAST['burst']} not sent"
    # no-redirect judges the answers that came before the bound, however many that was.
    assert report.failed_names - {NO_REDIRECT} == set(CHECKS) - {NO_REDIRECT, STATE_URL}, report
    assert re.fullmatch(r"no HTTP answer at all|no 3xx among \d+ answers",
                        report.check(NO_REDIRECT).received), report


async def test_events_narrow_the_types_and_unknown_ones_are_refused(aiohttp_server):
    base = await serve(aiohttp_server, example.create_app(SECRET))
    report = await check_handler_async(f"{base}/webhooks", SECRET,
                                       events="task-status-updated,company-created", **FAST)
    assert report.ok, report
    assert report.skipped_names == {OUT_OF_ORDER, STATE_URL}
    assert {d.event_type for d in report.check(BURST).deliveries} == {"task-status-updated",
                                                                       "company-created"}
    with pytest.raises(CheckerError, match="no event type is named task-exploded"):
        await check_handler_async(f"{base}/webhooks", events=["task-exploded"])
    with pytest.raises(CheckerError, match="not an http"):
        await check_handler_async("ftp://example.com/hooks")


async def test_check_handler_in_a_running_loop_says_to_await_the_async_one():
    with pytest.raises(RuntimeError, match="await check_handler_async"):
        check_handler("http://127.0.0.1:9/webhooks")


def test_readme_documents_every_check_in_order():
    text = (REPO / "README.md").read_text()
    section = text.split("## Checking your webhook handler\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| `([a-z][a-z-]+)` \|", section, re.M) == list(CHECKS)


def test_cli_refuses_bad_arguments_with_exit_2(capsys):
    assert main(["check-handler", "http://127.0.0.1:9/webhooks", "--events", "nope"]) == 2
    assert "--events: no event type is named nope" in capsys.readouterr().err
    assert main(["check-handler", "ftp://x"]) == 2
    assert "is not an http:// or https:// URL" in capsys.readouterr().err


# ---------------------------------------------------------------- real processes

@pytest.fixture(scope="module")
def example_process():
    """examples/handler.py as a real process, its secret from WEBHOOK_SECRET."""
    process = subprocess.Popen([sys.executable, "examples/handler.py", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=REPO, env={**os.environ, "WEBHOOK_SECRET": SECRET})
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("handler listening on http://"), process.stderr.read()
        yield line.split()[-1].removesuffix("/webhooks")
    finally:
        process.terminate()
        process.communicate(timeout=10)
    assert process.returncode == 0


def test_cli_against_the_example_handler_prints_every_check_passing_and_exits_0(
        example_process):
    result = run_cli("check-handler", f"{example_process}/webhooks", "--secret", SECRET,
                     "--state-url", f"{example_process}/state")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:-1]] == [f"PASS {name}" for name in CHECKS]
    burst = next(line for line in lines if line.startswith("PASS burst:"))
    assert (f"sent {BURST_DELIVERIES} deliveries of {len(event_types('aggregator'))} event "
            f"types, {BURST_CONCURRENCY} at a time; got 2xx to all {BURST_DELIVERIES}") in burst
    assert lines[-1].startswith(f"{len(CHECKS)} passed, 0 failed, 0 skipped in ")


def test_cli_json_parses_and_exits_0_with_only_the_secret(example_process):
    result = run_cli("check-handler", f"{example_process}/webhooks", "--secret", SECRET, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["failed"] == [] and report["secret"] == "given"
    assert {c["name"]: c["status"] for c in report["checks"]} == {
        **{name: PASS for name in CHECKS}, STATE_URL: SKIP}
    burst = next(c for c in report["checks"] if c["name"] == BURST)
    assert len(burst["deliveries"]) == BURST_DELIVERIES and burst["p99Ms"] < 15_000


def test_cli_without_secret_says_first_it_signs_with_the_default_tenants_and_exits_1(
        example_process):
    """The example process verifies with SECRET, not the default tenant's: every correctly
    signed delivery is refused, and the first line says which secret was used."""
    result = run_cli("check-handler", f"{example_process}/webhooks")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"signing with the bundled default tenant's secret "
                               f"({DEFAULT_SECRET}); pass --secret") or lines[0].startswith(
        f"signing with the bundled default tenant's secret ({DEFAULT_SECRET}), as its")
    assert lines[1].startswith("FAIL every-event-type")


def test_cli_products_scopes_the_run_and_exits_0(example_process):
    result = run_cli("check-handler", f"{example_process}/webhooks", "--secret", SECRET,
                     "--state-url", f"{example_process}/state", "--products", "deposit", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["products"] == ["deposit"] and report["ok"] is True
    assert report["summary"].endswith("for deposit tasks")


def test_check_handler_api_runs_without_an_event_loop(example_process):
    report = check_handler(f"{example_process}/webhooks", secret=SECRET,
                           state_url=f"{example_process}/state", burst=20)
    assert report.ok, report
    assert checker.Report is type(report)


# ---------------------------------------------------------------- from the pytest plugin

def test_the_plugin_checks_a_handler_and_its_report_reads_as_an_assertion(payroll_sandbox,
                                                                         example_process):
    report = payroll_sandbox.check_handler(f"{example_process}/webhooks", SECRET,
                                           state_url=f"{example_process}/state", **FAST)
    assert report.ok, report


async def test_the_async_plugin_checks_a_handler_on_the_tests_own_loop(async_payroll_sandbox,
                                                                      aiohttp_server):
    base = await serve(aiohttp_server, naive_app())
    report = await async_payroll_sandbox.check_handler(f"{base}/webhooks", SECRET, **FAST)
    assert not report.ok
    assert str(report).splitlines()[-1].endswith(
        "failed: wrong-signature, missing-signature, duplicate-delivery, unknown-event-type")
