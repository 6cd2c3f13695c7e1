"""How the golden fixtures are made and checked: one driving code for both.

`tests/golden/make.py` runs these functions against today's code and writes what they
read; `tests/test_compat_golden.py` runs the same functions against the code under test
and compares. Everything goes through real HTTP on a manual clock with a fixed seed.

What the seed does not decide is left out of what is compared, never guessed: the
credentials that come from the operating system's randomness on purpose (public, access
and processor tokens: each replaced by a numbered placeholder, so that "the same token"
still shows), the wall clock (an attempt's `wallTime` and `latencyMs`, a journal entry's
`durationMs`), the HMAC signature (keyed by a control-plane tenant's random secret) and
the receiver's and the server's ports (written as `{receiver}` and `{server}`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from aiohttp import web

from payroll_sandbox.app import LoadedFixtures, build_registry, create_app, load
from payroll_sandbox.clock import Clock
from payroll_sandbox.settings import Settings, bundled_dir

SEED = 4242  # not the library's default (1), so a seed that stops being passed on shows
START = 1_780_000_000  # the manual clock's start (2026-05-28T20:26:40Z)
ENVIRONMENT = "sandbox"

ACME = {"x-api-key": "sandbox-key-acme-0001", "x-api-secret": "sandbox-secret-acme-0001"}
WALMART = "6410a0000000000000000001"
NETFLIX = "6410a0000000000000000060"
VISA = {"type": "card", "_id": "card-1", "title": "Visa 4242", "lastFour": "4242"}

# Where a scenario's task runs, by the first product the scenario fits (GET
# /_sandbox/scenarios): user-link products on Walmart, pay-link ones on Netflix.
COMPANY_FOR = {"deposit": WALMART, "verify": WALMART, "switch": NETFLIX, "present": NETFLIX}
SCENARIO_USER = "golden-user"

# The tenant of the snapshot: made by the control plane (a fixture account has no
# continuous access), restored into a tenant of the same name (its linked-account data is
# seeded by the name: docs/api.md, Snapshots).
GOLDEN_TENANT = {"name": "golden", "continuousAccess": {"refreshInterval": 3600,
                                                        "piiDeletionInterval": 86400}}
RECEIVER = "{receiver}"  # the receiver's base URL in the golden files
SERVER = "{server}"      # the sandbox's own base URL (paystub links) in the golden files
ADVANCE_AFTER_RESTORE = 3700  # past the patch (1 h), a refresh round, the retries, a slow task

_TOKEN = re.compile(r"\b(public|access|processor)-(sandbox|production)-"
                    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_WALL_CLOCK = ("wallTime", "latencyMs", "durationMs")
_SIGNATURE = "x-hmac-signature-sha-256"


# -- the app --------------------------------------------------------------------------------

def settings() -> Settings:
    # 5 wall seconds per webhook attempt: the receiver answers at once, the bound only
    # matters if it is gone.
    return Settings(port=0, clock="manual", seed=SEED, environment=ENVIRONMENT,
                    webhook_timeout=5.0)


def fixtures() -> LoadedFixtures:
    """The bundled fixtures and scenarios, loaded once and shared by the apps."""
    return load(settings())


def new_app(loaded: LoadedFixtures) -> web.Application:
    """A fresh server: the fixtures' tenants, every one on a manual clock at START."""
    registry = build_registry(settings(), clock=Clock(mode="manual", start=START), loaded=loaded)
    return create_app(settings(), registry=registry)


class Receiver:
    """A webhook receiver on 127.0.0.1: POST /ok answers 200, POST /fail answers 500 (by
    path, not by arrival order, so attempts in flight together get the same answers on
    every run)."""

    def __init__(self) -> None:
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/ok", self._ok)
        app.router.add_post("/fail", self._fail)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        host, port = self.runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self

    @staticmethod
    async def _ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    @staticmethod
    async def _fail(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=500, text="failing on purpose")

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


# -- calls ----------------------------------------------------------------------------------

async def call(client, method: str, path: str, *, headers: dict[str, str] = ACME,
               status: int | tuple[int, ...] = (200, 201, 202), **kwargs: Any) -> Any:
    """One request; its `data` (or the error body when an error status was expected)."""
    response = await client.request(method, path, headers=headers, **kwargs)
    text = await response.text()
    expected = status if isinstance(status, tuple) else (status,)
    assert response.status in expected, (method, path, response.status, text)
    body = json.loads(text)
    return body["data"] if "data" in body else body


async def advance(client, seconds: float, headers: dict[str, str] = ACME) -> dict[str, Any]:
    """Moves the clock (the answer comes once the attempts it started are done)."""
    return await call(client, "POST", "/_sandbox/clock/advance", headers=headers,
                      json={"seconds": seconds})


async def run_until_idle(client, headers: dict[str, str] = ACME) -> dict[str, Any]:
    done = await call(client, "POST", "/_sandbox/clock/run-until-idle", headers=headers)
    assert done["idle"] is True, done
    return done


# -- what is not the seed's ------------------------------------------------------------------

def masked(value: Any) -> Any:
    """`value` with every unguessable token replaced by `<kind-token-N>`, numbered in the
    order of first appearance (keys sorted, so the numbering does not depend on key order)."""
    text = json.dumps(value, sort_keys=True)
    names: dict[str, str] = {}

    def name(match: re.Match) -> str:
        token = match.group(0)
        if token not in names:
            names[token] = f"<{match.group(1)}-token-{len(names) + 1}>"
        return names[token]

    return json.loads(_TOKEN.sub(name, text))


def without_wall_clock(value: Any) -> Any:
    """A copy without what the wall clock decides (attempts' wallTime and latencyMs, the
    journal's durationMs) and without HMAC signatures."""
    if isinstance(value, dict):
        return {k: without_wall_clock(v) for k, v in value.items()
                if k not in _WALL_CLOCK and k != _SIGNATURE}
    if isinstance(value, list):
        return [without_wall_clock(v) for v in value]
    return value


def headers_once(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Event records with the request headers written once, on the event, when every
    attempt of every delivery sent the same ones (they do: the event's message, the
    signature aside; kept per attempt otherwise, so a difference still shows). Only to
    keep the golden file small."""
    shown = []
    for event in events:
        attempts = [a for d in event.get("deliveries", []) for a in d.get("attempts", [])]
        headers = [a.get("requestHeaders") for a in attempts]
        if attempts and all(h == headers[0] for h in headers):
            event = {**event, "requestHeaders": headers[0], "deliveries": [
                {**d, "attempts": [{k: v for k, v in a.items() if k != "requestHeaders"}
                                   for a in d["attempts"]]} for d in event["deliveries"]]}
        shown.append(event)
    return shown


def replaced(value: Any, replacements: dict[str, str]) -> Any:
    """`value` with each string of `replacements` replaced in its JSON text."""
    text = json.dumps(value)
    for old, new in replacements.items():
        text = text.replace(old, new)
    return json.loads(text)


def comparable(value: Any) -> Any:
    """What two runs of the same seed must agree on."""
    return masked(without_wall_clock(value))


def differences(first: Any, second: Any, path: str = "$", limit: int = 20) -> list[str]:
    """Where two JSON values differ, as JSON paths with both values (the first `limit`)."""
    if isinstance(first, dict) and isinstance(second, dict):
        found = [f"{path}.{key}: only in the {'first' if key in first else 'second'}"
                 for key in sorted(first.keys() ^ second.keys())]
        for key in sorted(first.keys() & second.keys()):
            found += differences(first[key], second[key], f"{path}.{key}", limit)
        return found[:limit]
    if isinstance(first, list) and isinstance(second, list):
        found = [] if len(first) == len(second) else [
            f"{path}: {len(first)} items != {len(second)} items"]
        for number, (one, other) in enumerate(zip(first, second)):
            found += differences(one, other, f"{path}[{number}]", limit)
            if len(found) >= limit:
                break
        return found[:limit]
    return [] if first == second else [f"{path}: {first!r:.200} != {second!r:.200}"]


def base_url(client) -> str:
    return str(client.make_url("")).rstrip("/")


# -- one scenario, fresh tenant --------------------------------------------------------------

def bundled_scenarios() -> list[str]:
    """The names of the scenario files the package bundles (scenarios/ of the repository)."""
    return sorted(path.stem for path in bundled_dir("scenarios").glob("*.yaml"))


async def scenarios(client) -> dict[str, dict[str, Any]]:
    """The scenarios the server has, by name (GET /_sandbox/scenarios)."""
    return {s["name"]: s for s in await call(client, "GET", "/_sandbox/scenarios")}


async def run_scenario(client, name: str) -> dict[str, Any]:
    """Runs one task (a processor link for a processor-link scenario) of scenario `name` in
    the fixtures' `acme` tenant of a fresh server, to the end; what it made and emitted."""
    described = (await scenarios(client))[name]
    start = (await call(client, "GET", "/_sandbox/clock"))["timestamp"]
    if described["kind"] == "processor-link":
        record = await _run_processor_link(client, name)
    else:
        record = await _run_task(client, name, described["products"][0])
    events = await call(client, "GET", "/_sandbox/events", params={"limit": "1000"})
    record["ids"]["events"] = [e["id"] for e in events]
    record["events"] = [{k: e[k] for k in ("eventType", "time", "sequence", "userIdentifier",
                                           "task", "body")} for e in events]
    record["elapsed"] = (await call(client, "GET", "/_sandbox/clock"))["timestamp"] - start
    return masked(record)


async def _run_task(client, name: str, product: str) -> dict[str, Any]:
    target = {"company": COMPANY_FOR[product], "product": product}
    body = {"identifier": SCENARIO_USER, **target, "scenario": name}
    if product == "switch":
        body["paymentMethod"] = VISA
    created = await call(client, "POST", "/task/create", json=body)
    await run_until_idle(client)
    task = await call(client, "GET", f"/task/{created['id']}")
    accounts = await call(client, "GET", f"/linked-account/list/{SCENARIO_USER}")
    return {"kind": "task", "target": target, "created": created, "task": task,
            "linkedAccounts": accounts,
            "ids": {"task": created["id"], "taskWorkflow": created["taskWorkflow"],
                    "user": task["user"]["_id"], "linkedAccounts": [a["_id"] for a in accounts]}}


async def _run_processor_link(client, name: str) -> dict[str, Any]:
    token = await call(client, "POST", "/_sandbox/aggregator/processor-token", status=201,
                       json={"identifier": SCENARIO_USER, "scenario": name})
    as_user = {**ACME, "user-identifier": SCENARIO_USER}
    link = await call(client, "POST", "/aggregator/processor-links", headers=as_user,
                      status=202, json={"processorToken": token["processorToken"]})
    await run_until_idle(client)
    matches = await call(client, "GET", "/aggregator/employer-matches", headers=as_user)
    recurring = await call(client, "GET", "/aggregator/recurring-transactions", headers=as_user)
    return {"kind": "processor-link", "target": {"identifier": SCENARIO_USER},
            "processorToken": token, "link": link, "employerMatches": matches,
            "recurringTransactions": recurring,
            "ids": {"processorLink": link["_id"], "accountId": token["accountId"],
                    "requestId": token["requestId"]}}


# -- the tenant of the version-1 snapshot ----------------------------------------------------
#
# snapshot-v1.json is a tenant with a bit of everything, made through the API by the code of
# 2745e81 (`populate` in `git show 2b48603:tests/golden/drive.py`) and never made again.
# Its users, whose records the reads below read:

USERS = ("done-user", "verify-user", "failed-user", "abandon-user", "payer-1", "payer-2",
         "multi-user", "bound-user", "patched-user", "slow-user", "down-user")
BANK_USERS = ("bank-done", "bank-error", "bank-pending")


async def snapshot(client, keys: dict[str, str]) -> dict[str, Any]:
    return await call(client, "GET", "/_sandbox/snapshot", headers=keys)


async def restore(client, keys: dict[str, str], document: dict[str, Any]) -> dict[str, Any]:
    return await call(client, "POST", "/_sandbox/snapshot", headers=keys, json=document)


async def make_golden_tenant(client) -> dict[str, str]:
    """An empty `golden` tenant (to restore into); its keys."""
    made = await call(client, "POST", "/_sandbox/tenants", status=201, json=GOLDEN_TENANT)
    return {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}


async def restore_golden(client, document: dict[str, Any], receiver_url: str) -> dict[str, str]:
    """A fresh `golden` tenant with `document` (a golden snapshot, `{receiver}` in it)
    restored, its webhooks going to `receiver_url`; the tenant's keys."""
    keys = await make_golden_tenant(client)
    answer = await restore(client, keys, replaced(document, {RECEIVER: receiver_url}))
    assert answer["restored"] is True, answer
    return keys


async def golden_reads(client, keys: dict[str, str], document: dict[str, Any],
                       receiver_url: str) -> dict[str, Any]:
    """The restored `document`'s tenant as its API reads it, as the golden file keeps it."""
    restored = replaced(document, {RECEIVER: receiver_url})
    return normalized_reads(await reads(client, keys, restored), client, receiver_url)


async def reads(client, keys: dict[str, str], document: dict[str, Any]) -> dict[str, Any]:
    """The tenant as its API shows it: tasks, linked accounts and their data, pay-link
    accounts, processor-link results, the event ledger with deliveries and attempts, the
    endpoints, faults, bindings and the clock. `document` (the snapshot) gives the public
    tokens. Only reads: nothing here changes the tenant but its journal."""

    async def on(path: str, **kwargs: Any) -> Any:
        return await call(client, "GET", path, headers=kwargs.pop("headers", keys), **kwargs)

    tasks = await on("/_sandbox/tasks", params={"limit": "1000"})
    result: dict[str, Any] = {
        "clock": await on("/_sandbox/clock"),
        "tasks": tasks,
        "taskDetails": {t["id"]: await on(f"/task/{t['id']}") for t in tasks},
        "taskStatuses": {t["id"]: await on(f"/task/{t['id']}/status") for t in tasks},
        "linkedAccountList": {u: await on(f"/linked-account/list/{u}") for u in USERS},
        "linkedAccounts": {u: await on("/linked-accounts", params={"identifier": u})
                           for u in USERS},
        "data": {kind: await on(f"/{kind}", params={"identifier": "done-user"})
                 for kind in ("statements", "income", "employment", "identity",
                              "deposit-accounts")},
        "payLinkAccounts": await on("/pay-link/accounts", headers={
            "x-public-token": document["latestTokens"]["payer-1"]}),
        "employerMatches": {u: await on("/aggregator/employer-matches",
                                        headers={**keys, "user-identifier": u})
                            for u in BANK_USERS},
        "recurringTransactions": {u: await on("/aggregator/recurring-transactions",
                                              headers={**keys, "user-identifier": u})
                                  for u in BANK_USERS},
        "events": await on("/_sandbox/events", params={"limit": "1000"}),
        "endpoints": await on("/_sandbox/webhooks/endpoints"),
        "webhookFaults": await on("/_sandbox/webhooks/faults"),
        "apiFaults": await on("/_sandbox/faults/api"),
        "scenarioBindings": await _bindings(client, keys),
    }
    return result


async def _bindings(client, keys: dict[str, str]) -> dict[str, str]:
    response = await client.get("/_sandbox/scenarios", headers=keys)
    assert response.status == 200, await response.text()
    return (await response.json())["bindings"]


def normalized_reads(value: dict[str, Any], client, receiver_url: str) -> dict[str, Any]:
    """Reads as the golden file keeps them: ports as placeholders, nothing of the wall
    clock, tokens numbered."""
    value = comparable(replaced(value, {base_url(client): SERVER, receiver_url: RECEIVER}))
    return {**value, "events": headers_once(value["events"])}


def without_journal(document: dict[str, Any]) -> dict[str, Any]:
    """The snapshot but for its journal and the journal's next id: a restored tenant's
    journal goes on with the requests made since (the restore itself among them), so only
    the saved entries, as a prefix, are compared."""
    counters = {k: v for k, v in document["counters"].items() if k != "journalNextId"}
    return {**{k: v for k, v in document.items() if k != "journal"}, "counters": counters}
