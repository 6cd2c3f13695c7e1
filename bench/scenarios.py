"""Scenario engine at scale: 10,000 tasks over every task scenario, run to idle.

What it measures, through the real app and real HTTP in one process (server
and client share the event loop, on 127.0.0.1, manual clock):

  1. creating N tasks (`--tasks`, default 10,000) with POST /task/create, spread
     evenly over every scenario of kind "task", sent `--concurrency` (default 50)
     at a time; beside it, the same number of GET /health requests with the
     same session and concurrency, i.e. the HTTP/aiohttp share of creation time;
  2. one POST /_sandbox/clock/run-until-idle that plays every scenario step;
  3. events emitted (against the count the scenario files predict), the final
     status of every task per scenario (every task must end completed/failed);
  4. peak RSS of the process (ru_maxrss).

Targets: run-until-idle < 10 s, peak RSS < 300 MB, and with a receiver at most 1.3 x the
floor of a bare aiohttp client sending the same POSTs. One PASS/FAIL line per
target; the exit status is 0 unless `--strict` is given and a target failed.
`--profile FILE` writes a cProfile of the whole run (pstats format) and prints
the top functions.

    python bench/scenarios.py [--tasks 10000] [--concurrency 50] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import collections
import contextlib
import socket
import subprocess
import sys
import time
from typing import Any

import aiohttp

from common import peak_rss_mb, print_profile, serve

from payroll_sandbox.app import create_app
from payroll_sandbox.transport.dispatcher import TENANT_CONNECTIONS
from payroll_sandbox.domain.tasks.states import FINAL
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.settings import Settings

API_KEY = "sandbox-key-acme-0001"
API_SECRET = "sandbox-secret-acme-0001"
HEADERS = {"x-api-key": API_KEY, "x-api-secret": API_SECRET}
WALMART = "6410a0000000000000000001"   # employer: product deposit
NETFLIX = "6410a0000000000000000060"   # merchant: product switch

TARGET_RUN_SECONDS = 10.0
TARGET_RSS_MB = 300.0
# Run-until-idle with every event delivered, against the floor the code controls: the run
# without a receiver plus the same POSTs sent alone by a bare aiohttp client (issue 21: a
# ratio to the run without a receiver was a target no aiohttp sender meets on two cores).
TARGET_FLOOR_RATIO = 1.3



def company_for(scenario: dict[str, Any]) -> tuple[str, str]:
    """Netflix/switch for a scenario that does not fit a deposit (its `products`, as
    GET /_sandbox/scenarios lists them), else Walmart/deposit."""
    if "deposit" not in scenario["products"]:
        return NETFLIX, "switch"
    return WALMART, "deposit"


def expected_events(scenarios: dict[str, dict[str, Any]], plan: list[tuple[str, str]]) -> int:
    """The events the scenario files predict for `plan` (scenario, company) per task.

    Per step, by the spec's event rules: `authenticated` that changes the value ->
    task-authentication-status-updated; a final `status` -> task-status-updated (or
    task-status-patched), the move to processing emits nothing; `accounts` ->
    pay-link-accounts-updated; a final, unpatched status -> task-workflow-finished (one
    task per workflow).
    Company steps emit maintenance-mode into maintenance every time, back to
    operational only when the company is under maintenance at that moment, so
    they are replayed in timeline order (every task was created at the same
    virtual time: the manual clock does not move during creation).
    """
    total = 0
    company_steps = []  # (due, scheduling order, company, status)
    order = 0
    for name, company_id in plan:
        authenticated = False
        for step in scenarios[name]["steps"]:
            order += 1
            if "authenticated" in step and step["authenticated"] != authenticated:
                total += 1
                authenticated = step["authenticated"]
            total += step.get("status") in FINAL
            # A completed user-link task links the account (every bench user is new), and
            # a privacy step emits pii-data-deleted.
            total += (step.get("status") == "completed" and not step.get("patch", False)
                      and company_id == WALMART)
            total += "piiDataDeleted" in step
            total += "accounts" in step
            total += step.get("status") in FINAL and not step.get("patch", False)
            if "company" in step:
                company_steps.append((step["at"], order, company_id, step["company"]["status"]))
    status: dict[str, str] = collections.defaultdict(lambda: "operational")
    for _, _, company_id, new in sorted(company_steps):
        if new == "under-maintenance":
            total += 1
        elif new == "operational" and status[company_id] == "under-maintenance":
            total += 1
        status[company_id] = new
    return total


async def batched(count: int, concurrency: int, call) -> float:
    """`count` calls of `call(n)`, `concurrency` at a time; returns the wall seconds."""
    started = time.perf_counter()
    for first in range(0, count, concurrency):
        await asyncio.gather(*(call(n) for n in range(first, min(first + concurrency, count))))
    return time.perf_counter() - started


RECEIVER = """
import sys
from aiohttp import web
async def hook(request):
    await request.read()
    return web.Response(status=200)
app = web.Application()
app.router.add_post("/hook", hook)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


@contextlib.contextmanager
def receiver_process():
    """A webhook receiver in a process of its own (answers 200); its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port)])
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def bench(tasks: int, concurrency: int, webhook_url: str | None = None) -> dict[str, Any]:
    rss_start = peak_rss_mb()
    # The bench measures run time: the ledger and the task table keep everything.
    app = create_app(Settings(port=0, clock="manual", webhook_url=webhook_url,
                              max_events=10**8, max_tasks=10**8))
    runner, base = await serve(app)
    rss_app = peak_rss_mb()
    result: dict[str, Any] = {"tasks": tasks, "concurrency": concurrency, "base": base,
                              "rss_start": rss_start, "rss_app": rss_app}
    try:
        timeout = aiohttp.ClientTimeout(total=None)
        async with aiohttp.ClientSession(base, headers=HEADERS, timeout=timeout) as session:
            async with session.get("/_sandbox/scenarios") as response:
                assert response.status == 200, response.status
                listed = (await response.json())["data"]
            scenarios = {s["name"]: s for s in listed if s["kind"] == "task"}
            names = sorted(scenarios)
            assignment = [names[n % len(names)] for n in range(tasks)]
            routing = {name: company_for(scenarios[name]) for name in names}

            # Warm-up (connections opened, routes resolved), then the HTTP baseline.
            health_status: collections.Counter[int] = collections.Counter()

            async def health(n: int) -> None:
                async with session.get("/health") as response:
                    await response.read()
                    health_status[response.status] += 1

            await batched(concurrency, concurrency, health)
            health_status.clear()
            result["health_seconds"] = await batched(tasks, concurrency, health)
            result["health_status"] = dict(health_status)

            # Creation: every task queued, nothing runs (the manual clock stands still).
            create_status: collections.Counter[int] = collections.Counter()
            wrong_scenario: list[str] = []
            task_ids: list[str | None] = [None] * tasks

            async def create(n: int) -> None:
                name = assignment[n]
                company, product = routing[name]
                body = {"identifier": f"bench-{n}", "company": company, "product": product,
                        "scenario": name}
                async with session.post("/task/create", json=body) as response:
                    payload = await response.json()
                    create_status[response.status] += 1
                    if response.status == 200:
                        task_ids[n] = payload["data"]["id"]
                        if payload["data"]["tasks"][0]["scenario"] != name:
                            wrong_scenario.append(f"bench-{n}")
                    elif sum(create_status.values()) - create_status[200] <= 3:
                        print(f"  create bench-{n} ({name}): {response.status} {payload}",
                              file=sys.stderr)

            result["create_seconds"] = await batched(tasks, concurrency, create)
            result["create_status"] = dict(create_status)
            result["wrong_scenario"] = wrong_scenario
            result["rss_created"] = peak_rss_mb()

            async with session.get("/_sandbox/clock") as response:
                clock_before = (await response.json())["data"]
            result["pending_before"] = clock_before["pendingJobs"]

            started = time.perf_counter()
            async with session.post("/_sandbox/clock/run-until-idle") as response:
                assert response.status == 200, (response.status, await response.text())
                ran = (await response.json())["data"]
            result["run_seconds"] = time.perf_counter() - started
            result["jobs_run"] = ran["jobsRun"]
            result["idle"] = ran["idle"]
            result["pending_after"] = ran["pendingJobs"]
            result["virtual_seconds"] = ran["timestamp"] - clock_before["timestamp"]
            result["rss_run"] = peak_rss_mb()

            async with session.get("/_sandbox/events", params={"limit": "1"}) as response:
                assert response.status == 200, response.status
                result["events_total"] = (await response.json())["total"]

        # Final state, read in-process (10,000 GET /task/{id} would only add noise).
        tenant = app[SANDBOX].registry.tenants.default()
        per_scenario: dict[str, collections.Counter[str]] = {
            name: collections.Counter() for name in names}
        not_final = []
        for n, task_id in enumerate(task_ids):
            if task_id is None:
                continue
            task = tenant.tasks[task_id]
            per_scenario[task.scenario][task.status] += 1
            if task.status not in FINAL:
                not_final.append((f"bench-{n}", task.scenario, task.status))
        result["per_scenario"] = per_scenario
        result["not_final"] = not_final
        result["event_types"] = collections.Counter(e.type for e in tenant.events.events)
        result["events_ledger"] = len(tenant.events.events)
        created_plan = [(assignment[n], routing[assignment[n]][0])
                        for n in range(tasks) if task_ids[n] is not None]
        result["events_expected"] = expected_events(scenarios, created_plan)
        result["scenario_count"] = len(names)
        result["routing"] = routing
    finally:
        await runner.cleanup()
    result["rss_peak"] = peak_rss_mb()
    return result


def report(r: dict[str, Any]) -> bool:
    tasks, conc = r["tasks"], r["concurrency"]
    switch = sorted(n for n, (c, _) in r["routing"].items() if c == NETFLIX)
    print(f"payroll-sandbox scenario bench: {tasks} tasks over {r['scenario_count']} task "
          f"scenarios, manual clock, {r['base']}, concurrency {conc}")
    print(f"  companies: Netflix/switch for {len(switch)} scenarios, Walmart/deposit for "
          f"{r['scenario_count'] - len(switch)}")
    print()
    per_req = lambda seconds: 1e3 * seconds / tasks  # noqa: E731
    print(f"GET /health x{tasks} (HTTP baseline) {r['health_seconds']:8.3f} s  "
          f"{per_req(r['health_seconds']):6.3f} ms/req  {tasks / r['health_seconds']:8.0f} req/s  "
          f"statuses {r['health_status']}")
    print(f"POST /task/create x{tasks}          {r['create_seconds']:8.3f} s  "
          f"{per_req(r['create_seconds']):6.3f} ms/req  {tasks / r['create_seconds']:8.0f} req/s  "
          f"statuses {r['create_status']}")
    print(f"  creation beyond the HTTP baseline: "
          f"{r['create_seconds'] - r['health_seconds']:.3f} s "
          f"({per_req(r['create_seconds'] - r['health_seconds']):.3f} ms/task)")
    if r["wrong_scenario"]:
        print(f"  WARNING: {len(r['wrong_scenario'])} tasks got another scenario than requested")
    print(f"POST /_sandbox/clock/run-until-idle   {r['run_seconds']:8.3f} s  "
          f"jobs run {r['jobs_run']} (pending before {r['pending_before']}, after "
          f"{r['pending_after']}, idle {r['idle']}), virtual time +{r['virtual_seconds']:.1f} s")
    if r["jobs_run"]:
        print(f"  {1e6 * r['run_seconds'] / r['jobs_run']:.1f} us/job")
    print()
    match = r["events_total"] == r["events_expected"] == r["events_ledger"]
    print(f"events emitted {r['events_total']} (GET /_sandbox/events total; ledger "
          f"{r['events_ledger']}), expected from the scenario files {r['events_expected']}: "
          f"{'MATCH' if match else 'MISMATCH'}")
    for event_type, count in sorted(r["event_types"].items()):
        print(f"  {event_type:36s} {count:7d}")
    print()
    print("final status per scenario:")
    width = max(len(n) for n in r["per_scenario"])
    for name, counts in sorted(r["per_scenario"].items()):
        statuses = ", ".join(f"{s} {c}" for s, c in sorted(counts.items()))
        print(f"  {name:{width}s}  {sum(counts.values()):5d}  {statuses}")
    print()
    print(f"RSS peak (ru_maxrss): start {r['rss_start']:.1f} MB, app built {r['rss_app']:.1f} MB, "
          f"tasks created {r['rss_created']:.1f} MB, after run {r['rss_run']:.1f} MB, "
          f"end {r['rss_peak']:.1f} MB")
    print()
    run_ok = r["run_seconds"] < TARGET_RUN_SECONDS
    rss_ok = r["rss_peak"] < TARGET_RSS_MB
    print(f"{'PASS' if run_ok else 'FAIL'}  run-until-idle {r['run_seconds']:.3f} s "
          f"(target < {TARGET_RUN_SECONDS:g} s)")
    print(f"{'PASS' if rss_ok else 'FAIL'}  peak RSS {r['rss_peak']:.1f} MB "
          f"(target < {TARGET_RSS_MB:g} MB)")
    return run_ok and rss_ok


async def bare_posts(url: str, count: int) -> float:
    """Wall seconds for `count` POSTs of an event-sized CloudEvent from a bare aiohttp
    client, as many in flight as one tenant's deliveries may be."""
    body = b'{"eventType":"task.status_updated","data":{"x":"' + b"x" * 400 + b'"}}'
    headers = {"content-type": "application/json", "ce-id": "0" * 36, "ce-specversion": "1.0",
               "ce-source": "com.vendor", "ce-type": "com.vendor.task.status_updated",
               "ce-time": "2026-01-01T00:00:00.000Z", "x-hmac-signature-sha-256": "0" * 64}
    gate = asyncio.Semaphore(TENANT_CONNECTIONS)
    async with aiohttp.ClientSession() as session:
        async def post() -> None:
            async with gate, session.post(url, data=body, headers=headers) as response:
                await response.read()

        started = time.perf_counter()
        await asyncio.gather(*(post() for _ in range(count)))
        return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks to create (20000)")
    parser.add_argument("--concurrency", type=int, default=50,
                        help="requests in flight per batch (50)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    parser.add_argument("--no-receiver", action="store_true",
                        help="skip the second run, with every event delivered to a receiver")
    parser.add_argument("--profile", metavar="FILE",
                        help="cProfile the whole run into FILE and print the top functions")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.concurrency < 1:
        parser.error("--tasks and --concurrency must be at least 1")

    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    result = asyncio.run(bench(args.tasks, args.concurrency))
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)

    ok = report(result)
    if not args.no_receiver:
        with receiver_process() as url:
            delivered = asyncio.run(bench(args.tasks, args.concurrency, webhook_url=url))
            bare = asyncio.run(bare_posts(url, delivered["events_total"]))
        ratio = delivered["run_seconds"] / result["run_seconds"]
        floor = (result["run_seconds"] + bare) / result["run_seconds"]
        over_floor = delivered["run_seconds"] / (result["run_seconds"] + bare)
        ratio_ok = over_floor <= TARGET_FLOOR_RATIO
        print(f"\nwith a webhook receiver (another process): run-until-idle "
              f"{delivered['run_seconds']:.3f} s, {delivered['events_total']} events delivered "
              f"({(delivered['run_seconds'] - result['run_seconds']) / delivered['events_total'] * 1e6:.0f} "
              f"us of wall time per delivery)")
        print(f"the same number of POSTs of the same size from a bare aiohttp client, "
              f"{TENANT_CONNECTIONS} in flight, to the same receiver: {bare:.3f} s "
              f"({bare / delivered['events_total'] * 1e6:.0f} us each); run without a receiver plus "
              f"those alone = {floor:.2f} x the run without one: the floor of any sandbox sending "
              f"with aiohttp on this machine")
        print(f"{'PASS' if ratio_ok else 'FAIL'}  run-until-idle with a receiver = "
              f"{over_floor:.2f} x the aiohttp floor (target <= {TARGET_FLOOR_RATIO:g}; with / "
              f"without a receiver {ratio:.2f}, floor {floor:.2f})")
        ok = ok and ratio_ok
    failures = result["create_status"].get(200, 0) != args.tasks
    assert not failures, f"task creation failed: statuses {result['create_status']}"
    assert not result["not_final"], (
        f"{len(result['not_final'])} tasks did not reach a final status, "
        f"e.g. {result['not_final'][:5]}")
    print("every task reached a final status (completed or failed)")
    if profiler:
        print_profile(args.profile)
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
