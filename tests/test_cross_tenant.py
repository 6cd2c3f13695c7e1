"""Tenant isolation through HTTP only (DESIGN.md: one object owns one tenant's state;
README: Control plane, "scoped to that tenant").

Tenant A (ACME) makes real objects on the manual clock: a webhook endpoint at the real
receiver, a public token, a company, a scenario binding, a task run to completion (events,
deliveries, a linked account with its data), a processor link and a tenant of its own.
Tenant B (GLOBEX) then names A's ids on every route that takes one and reads its own lists:
each answer is a refusal (401, 403, 404) or B's own data, and none holds A's ids, tokens
or keys, and nothing B does changes A.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from calls import call, run_until_idle
from conftest import ACME, GLOBEX, HOOKS, WALMART
from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

A, B = ACME, GLOBEX
A_USER, B_USER = "acme-isolated-user", "globex-own-user"
A_HOOKS, B_HOOKS = "/acme-only-hooks", "/globex-only-hooks"
A_COMPANY = {"name": "Acme Isolation Works",
             "connector": {"availableProducts": ["deposit", "verify"]}}
A_CHILD = "acme-child-tenant"
DATA_KINDS = ("statements", "income", "timesheets", "employment", "identity", "taxes",
              "deposit-accounts")
RESOURCES = ("linked-accounts", *DATA_KINDS)
LINKS, MINT = "/aggregator/processor-links", "/_sandbox/aggregator/processor-token"
REFUSED = frozenset({401, 403, 404})


@dataclass(frozen=True)
class Probe:
    """One call B makes. `listed`: B's own (maybe empty) answer is fine; otherwise only a
    refusal is. No answer may hold any of A's secrets the request did not itself name."""

    method: str
    path: str
    kwargs: dict = field(default_factory=dict)
    headers: dict = field(default_factory=lambda: B)
    listed: bool = False
    refusals: frozenset = REFUSED

    @property
    def route(self) -> str:
        return f"{self.method} {self.path} {self.kwargs or ''}".strip()


def refused(method: str, path: str, *, headers: dict = B, refusals: frozenset = REFUSED,
            **kwargs: Any) -> Probe:
    """A call on one of A's objects: only a refusal will do."""
    return Probe(method, path, kwargs, headers, refusals=refusals)


def listing(method: str, path: str, **kwargs: Any) -> Probe:
    """A call whose answer is B's own, maybe empty, data."""
    return Probe(method, path, kwargs, listed=True)


async def _mint(client, identifier: str = A_USER) -> str:
    body = await call(client, "POST", MINT, status=201, headers=A, json={"identifier": identifier})
    return body["data"]["processorToken"]


@pytest.fixture
async def sandbox(aiohttp_client, loaded, receiver):
    """conftest's `sandbox` (manual clock, every event to the receiver at /hooks), but with
    a clock per tenant, as the server makes them: conftest's shares one between tenants."""
    settings = Settings(port=0, clock="manual", webhook_url=receiver.url(HOOKS),
                        webhook_timeout=0.5)
    return await aiohttp_client(create_app(settings, registry=build_registry(settings,
                                                                             loaded=loaded)))


@pytest.fixture
async def world(sandbox, receiver, loaded) -> dict[str, Any]:
    """A's objects, made through HTTP and run to the end on A's clock; B has one user."""
    w: dict[str, Any] = {"endpoint": receiver.url(A_HOOKS), "catalog": len(loaded.catalog)}
    await call(sandbox, "PUT", "/_sandbox/webhooks/endpoints", headers=A,
               json={"endpoints": [{"url": w["endpoint"]}]})
    token = (await call(sandbox, "POST", "/access-token", headers=A,
                        json={"identifier": A_USER}))["data"]
    w["public_token"], w["access_token"] = token["publicToken"], token["token"]
    w["company"] = (await call(sandbox, "POST", "/_sandbox/companies", status=201, headers=A,
                               json=A_COMPANY))["data"]["_id"]
    await call(sandbox, "PUT", f"/_sandbox/users/{A_USER}/scenario", headers=A,
               json={"scenario": "happy-path"})
    created = (await call(sandbox, "POST", "/task/create", headers=A, json={
        "identifier": A_USER, "company": WALMART, "product": "deposit"}))["data"]
    w["task"], w["workflow"] = created["id"], created["taskWorkflow"]
    w["link_token"], w["spare_token"] = await _mint(sandbox), await _mint(sandbox)
    w["processor_link"] = (await call(sandbox, "POST", LINKS, status=202,
                                      headers={**A, "user-identifier": A_USER},
                                      json={"processorToken": w["link_token"]}))["data"]["_id"]
    child = (await call(sandbox, "POST", "/_sandbox/tenants", status=201, headers=A,
                        json={"name": A_CHILD}))["data"]
    w["child"] = {"x-api-key": child["apiKey"], "x-api-secret": child["apiSecret"]}
    await run_until_idle(sandbox, headers=A)

    assert (await call(sandbox, "GET", f"/task/{w['task']}", headers=A))["data"]["status"] \
        == "completed"
    events = (await call(sandbox, "GET", "/_sandbox/events", headers=A,
                         params={"limit": "1000"}))["data"]
    w["events"] = [e["id"] for e in events]
    status_event = next(e for e in events if e["eventType"] == "task-status-updated")
    w["user_id"] = status_event["body"]["user"]["_id"]
    ours = [d for e in events for d in e["deliveries"] if d["url"] == w["endpoint"]]
    assert ours and {d["state"] for d in ours} == {"delivered"}, "A's deliveries to its endpoint"
    assert receiver.received(A_HOOKS), "A's endpoint received nothing"
    w["times"] = (events[0]["time"], events[-1]["time"])
    [account] = (await call(sandbox, "GET", "/linked-accounts", headers=A,
                            params={"identifier": A_USER}))["data"]
    w["account"] = account["_id"]
    w["records"] = []
    for kind in DATA_KINDS:
        records = (await call(sandbox, "GET", f"/{kind}/{A_USER}", headers=A))["data"]
        w["records"] += [r["_id"] for r in records if "_id" in r]
        if kind == "statements":
            assert records, "A's linked account has no statements"
            w["statement"] = records[0]["_id"]
    await call(sandbox, "POST", "/access-token", headers=B, json={"identifier": B_USER})
    return w


def secrets_of(w: dict[str, Any]) -> dict[str, str]:
    """Every value of A that B must never be shown, by a name for the report."""
    found = {"A user": A_USER, "A company name": A_COMPANY["name"], "A api key": A["x-api-key"],
             "A api secret": A["x-api-secret"], "A endpoint": A_HOOKS,
             "A child api key": w["child"]["x-api-key"]}
    for name in ("public_token", "access_token", "company", "task", "workflow", "link_token",
                 "spare_token", "processor_link", "user_id", "account", "statement"):
        found[f"A {name}"] = w[name]
    found |= {f"A event {i}": e for i, e in enumerate(w["events"])}
    found |= {f"A record {i}": r for i, r in enumerate(w["records"])}
    return found


async def problems_of(client, w: dict[str, Any], probes: list[Probe]) -> list[str]:
    """Each probe answered by B; what is wrong with each answer, naming its route."""
    secrets, problems = secrets_of(w), []
    for probe in probes:
        response = await client.request(probe.method, probe.path, headers=probe.headers,
                                        **probe.kwargs)
        text = (await response.read()).decode("utf-8", "replace")
        asked = f"{probe.path} {probe.kwargs} {probe.headers}"
        leaked = [name for name, value in secrets.items() if value in text and value not in asked]
        if leaked:
            problems.append(f"{probe.route}: {response.status} shows {leaked}: {text[:300]}")
        elif response.status not in probe.refusals and not (probe.listed and response.ok):
            problems.append(f"{probe.route}: {response.status} is not a refusal: {text[:300]}")
    return problems


def tasks_and_events(w) -> list[Probe]:
    start, end = w["times"]
    return [refused("GET", f"/task/{w['task']}"), refused("GET", f"/task/{w['workflow']}"),
            *[refused("GET", f"/_sandbox/events/{e}") for e in w["events"]],
            listing("GET", "/_sandbox/events", params={"task": w["task"], "limit": "1000"}),
            listing("GET", "/_sandbox/events", params={"user": A_USER, "limit": "1000"}),
            listing("GET", "/_sandbox/events", params={"delivery": "delivered", "limit": "1000"}),
            listing("GET", "/_sandbox/tasks", params={"user": A_USER}),
            listing("POST", "/_sandbox/webhooks/replay", json={"taskId": w["task"]}),
            listing("POST", "/_sandbox/webhooks/replay", json={"userIdentifier": A_USER}),
            listing("POST", "/_sandbox/webhooks/replay", json={"from": start, "to": end}),
            refused("POST", "/_sandbox/events/trigger",
                    json={"eventType": "task-status-updated", "taskId": w["task"]})]


def linked_accounts(w) -> list[Probe]:
    account = w["account"]
    return [refused("GET", f"/linked-account/list/{A_USER}"),
            *[refused("GET", f"/{kind}", params={"identifier": A_USER}) for kind in RESOURCES],
            *[refused("GET", f"/{kind}/{A_USER}") for kind in RESOURCES],
            *[refused("GET", f"/{kind}", params={"identifier": B_USER, "linkedAccount": account})
              for kind in RESOURCES],
            refused("GET", f"/paystub/{w['statement']}"),
            *[refused("POST", f"/_sandbox/linked-accounts/{account}/{action}")
              for action in ("disconnect", "reconnect", "refresh", "remove-deposit-switch")],
            refused("POST", "/task/create", json={"linkedAccount": account}),
            refused("POST", "/task/create", json={"linkedAccount": account, "identifier": A_USER}),
            refused("POST", f"/_sandbox/users/{A_USER}/delete-pii")]


def processor_links(w) -> list[Probe]:
    user = {**B, "user-identifier": A_USER}
    return [refused("GET", "/aggregator/employer-matches", headers=user),
            refused("GET", "/aggregator/recurring-transactions", headers=user),
            refused("POST", LINKS, json={"processorToken": w["link_token"]}, headers=user),
            refused("POST", LINKS, json={"processorToken": w["spare_token"]}, headers=user),
            refused("POST", f"{MINT}/{w['spare_token']}/revoke"),
            refused("POST", f"{MINT}/{w['link_token']}/revoke"),
            refused("DELETE", LINKS, headers=user)]


def companies(w) -> list[Probe]:
    company = w["company"]
    return [refused("GET", f"/company/{company}"),
            refused("PATCH", f"/_sandbox/companies/{company}", json={"name": "Globex Took It"}),
            refused("POST", f"/_sandbox/companies/{company}/status", json={"status": "disabled"}),
            refused("POST", "/task/create",
                    json={"identifier": B_USER, "company": company, "product": "deposit"}),
            refused("POST", "/_sandbox/events/trigger",
                    json={"eventType": "company-updated", "companyId": company}),
            listing("POST", "/company/search", json={"query": A_COMPANY["name"], "limit": 100}),
            *[listing("GET", "/company/list", params={"limit": "1000", "skip": str(skip)})
              for skip in range(0, w["catalog"] + 1, 1000)],  # every page of B's list
            refused("DELETE", f"/_sandbox/companies/{company}")]


def control_plane(w) -> list[Probe]:
    # The journal first: B's later calls here name A's ids, and B's journal rightly shows them.
    return [listing("GET", "/_sandbox/requests", params={"limit": "1000"}),
            listing("GET", "/_sandbox/clock"), listing("GET", "/_sandbox/stats"),
            listing("GET", "/_sandbox/tenant"), listing("GET", "/_sandbox/scenarios"),
            listing("GET", "/_sandbox/webhooks/endpoints"),
            listing("POST", "/_sandbox/clock/run-until-idle"),
            listing("PUT", f"/_sandbox/users/{A_USER}/scenario", json={"scenario": None}),
            listing("PUT", f"/_sandbox/users/{A_USER}/card-token-recreation",
                    json={"enabled": False}),
            refused("DELETE", f"/_sandbox/tenants/{A_CHILD}")]


def tokens_and_keys(w) -> list[Probe]:
    with_token = {**B, "x-public-token": w["public_token"]}
    return [refused("GET", f"/task/{w['task']}", headers=with_token),
            refused("GET", f"/linked-account/list/{A_USER}", headers=with_token),
            refused("GET", "/statements", params={"identifier": A_USER}, headers=with_token),
            refused("GET", f"/paystub/{w['statement']}", headers=with_token),
            refused("POST", "/task/create", json={"linkedAccount": w["account"]},
                    headers=with_token),
            refused("POST", "/sdk/session", json={"config": {}}, headers=with_token),
            refused("GET", f"/task/{w['task']}",
                    headers={"x-api-key": A["x-api-key"], "x-api-secret": B["x-api-secret"]}),
            refused("GET", f"/task/{w['task']}",
                    headers={"x-api-key": B["x-api-key"], "x-api-secret": A["x-api-secret"]})]


GROUPS = {"tasks-events-deliveries": tasks_and_events, "linked-accounts": linked_accounts,
          "processor-links": processor_links, "companies": companies,
          "control-plane": control_plane, "public-token-and-keys": tokens_and_keys}


@pytest.mark.parametrize("group", GROUPS)
async def test_b_naming_a_ids_is_refused_and_shows_nothing_of_a(sandbox, world, group):
    problems = await problems_of(sandbox, world, GROUPS[group](world))
    assert problems == [], "\n".join(problems)


async def test_b_lists_show_b_objects_and_none_of_a(sandbox, world, receiver):
    await call(sandbox, "PUT", "/_sandbox/webhooks/endpoints", headers=B,
               json={"endpoints": [{"url": receiver.url(B_HOOKS)}]})
    own = (await call(sandbox, "POST", "/task/create", headers=B, json={
        "identifier": B_USER, "company": WALMART, "product": "deposit",
        "scenario": "happy-path"}))["data"]["id"]
    await run_until_idle(sandbox, headers=B)
    events = (await call(sandbox, "GET", "/_sandbox/events", headers=B,
                         params={"limit": "1000"}))["data"]
    assert events and all(e["task"] in (own, None) for e in events), "GET /_sandbox/events"
    tasks = (await call(sandbox, "GET", "/_sandbox/tasks", headers=B))["data"]
    assert [t["id"] for t in tasks] == [own], "GET /_sandbox/tasks"
    [account] = (await call(sandbox, "GET", "/linked-accounts", headers=B,
                            params={"identifier": B_USER}))["data"]
    assert account["_id"] != world["account"], "GET /linked-accounts"
    stats = (await call(sandbox, "GET", "/_sandbox/stats", headers=B))["data"]
    assert (stats["tasks"]["stored"], stats["events"]["stored"]) == (1, len(events)), \
        "GET /_sandbox/stats counts A's objects"
    probes = [listing("GET", path, params={"limit": "1000"}) for path in (
        "/_sandbox/events", "/_sandbox/tasks", "/_sandbox/requests")]
    probes += [listing("GET", "/_sandbox/events", params={"delivery": state, "limit": "1000"})
               for state in ("delivered", "failed", "pending", "none")]
    probes += [listing("GET", f"/{kind}/{B_USER}") for kind in RESOURCES]
    probes += [listing("GET", f"/linked-account/list/{B_USER}"),
               listing("GET", "/_sandbox/webhooks/endpoints"),
               listing("GET", "/_sandbox/scenarios"), listing("GET", "/_sandbox/clock")]
    problems = await problems_of(sandbox, world, probes)
    assert problems == [], "\n".join(problems)
    b_ids = {e["id"] for e in events}
    at_a = receiver.received(A_HOOKS)
    assert [r.ce_id for r in at_a if r.ce_id in b_ids] == [], f"B's events reached A's {A_HOOKS}"
    assert all(r.signature_matches(A["x-api-secret"]) for r in at_a), f"{A_HOOKS} signatures"
    assert {r.ce_id for r in receiver.received(B_HOOKS)} == b_ids, f"B's endpoint {B_HOOKS}"


async def test_b_calls_on_a_ids_leave_a_unchanged(sandbox, world, receiver):
    before = len(receiver.requests)
    for build in GROUPS.values():
        for probe in build(world):
            await sandbox.request(probe.method, probe.path, headers=probe.headers, **probe.kwargs)
    await run_until_idle(sandbox, headers=B)

    assert (await call(sandbox, "GET", "/_sandbox/events", headers=B))["data"] == [], \
        "B's ledger after B's calls on A's ids"
    assert len(receiver.requests) == before, "webhooks sent because of B's calls on A's ids"
    events = (await call(sandbox, "GET", "/_sandbox/events", headers=A,
                         params={"limit": "1000"}))["data"]
    assert [e["id"] for e in events] == world["events"], "A's ledger changed"
    assert (await call(sandbox, "GET", f"/task/{world['task']}", headers=A))["data"]["status"] \
        == "completed", "GET /task/{id} (A)"
    [account] = (await call(sandbox, "GET", f"/linked-accounts/{A_USER}", headers=A))["data"]
    assert account["connected"] is True, "A's linked account after B's disconnect"
    statements = (await call(sandbox, "GET", f"/statements/{A_USER}", headers=A))["data"]
    assert world["statement"] in [s["_id"] for s in statements], \
        "A's statements after B's delete-pii"
    company = (await call(sandbox, "GET", f"/company/{world['company']}", headers=A))["data"]
    assert (company["name"], company["status"]) == (A_COMPANY["name"], "operational"), \
        "A's company after B's PATCH/status/DELETE"
    scenarios = await call(sandbox, "GET", "/_sandbox/scenarios", headers=A)
    assert scenarios["bindings"].get(A_USER) == "happy-path", "A's scenario binding"
    endpoints = (await call(sandbox, "GET", "/_sandbox/webhooks/endpoints", headers=A))["data"]
    assert [e["url"] for e in endpoints] == [world["endpoint"]], "A's webhook endpoints"
    found = await call(sandbox, "GET", "/aggregator/employer-matches",
                       headers={**A, "user-identifier": A_USER})
    assert found["status"] == "completed", "A's processor link after B's DELETE"
    await call(sandbox, "POST", LINKS, status=202, headers={**A, "user-identifier": A_USER},
               json={"processorToken": world["spare_token"]})  # B's revoke did not reach it
    await call(sandbox, "GET", "/_sandbox/clock", headers=world["child"])  # A's child tenant lives


async def test_b_clock_runs_only_b_jobs(sandbox, world):
    queued = (await call(sandbox, "POST", "/task/create", headers=A, json={
        "identifier": A_USER, "company": WALMART, "product": "deposit"}))["data"]["id"]
    a_clock = (await call(sandbox, "GET", "/_sandbox/clock", headers=A))["data"]
    assert a_clock["pendingJobs"] >= 1, "A's clock has A's task pending"
    b_clock = (await call(sandbox, "GET", "/_sandbox/clock", headers=B))["data"]
    assert b_clock["pendingJobs"] == 0, "GET /_sandbox/clock (B) counts A's jobs"
    await run_until_idle(sandbox, headers=B)
    await call(sandbox, "POST", "/_sandbox/clock/advance", headers=B, json={"seconds": 3600})
    assert (await call(sandbox, "GET", f"/task/{queued}", headers=A))["data"]["status"] \
        == "queued", "B's run-until-idle/advance ran A's task"
    after = (await call(sandbox, "GET", "/_sandbox/clock", headers=A))["data"]
    assert after["now"] == a_clock["now"], "B's advance moved A's clock"
    await run_until_idle(sandbox, headers=A)
    assert (await call(sandbox, "GET", f"/task/{queued}", headers=A))["data"]["status"] \
        == "completed", "A's own clock runs A's task"
