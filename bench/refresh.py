"""Continuous access at scale: 1,000 linked accounts, 30 virtual days of push refreshes.

What it measures, through the real app in one process (server and client share
the event loop, on 127.0.0.1, manual clock, the default tenant `acme`, which has
no webhook endpoint, so events are stored in the ledger and not delivered):

  1. creating N linked accounts (`--accounts`, default 1,000), one user each
     (`refresh-<n>`), spread evenly over the catalog's companies that are
     operational and offer `deposit`. Two ways (`--create`):
       * `http` (default, the faithful one): POST /task/create with product
         deposit and scenario happy-path, `--concurrency` (default 50) at a time,
         then POST /_sandbox/clock/run-until-idle: each completed task leaves a
         linked account through the task engine's hook, as for a real user;
       * `domain`: `LinkedAccounts.create(tenant, identifier, company, "deposit")`
         called in-process (no task, no task events; faster, less faithful).
     Its wall time is printed apart from the run;
  2. the run: `--days` (default 30) x POST /_sandbox/clock/advance {"seconds": 86400},
     each timed, and the total wall time. Every linked account is due for one
     push refresh a day (the tenant's refresh interval, 86,400 s);
  3. events emitted by the run (ledger length before/after, cross-checked with
     GET /_sandbox/events), per event type, and the checks: every account got
     exactly `--days` push refreshes, `statements-synced` == accounts x days,
     every `*-synced` and `earn-user-data` count is the one the accounts predict
     (`timesheets-synced` only for hourly jobs), the records named by the
     `statements-added`/`timesheets-added` events are the ones the accounts
     gained, and the clock jobs run == accounts x days;
  4. peak RSS of the process (ru_maxrss) after each phase; beside the run's wall
     time, its process CPU time (the machine may be shared) and the time spent
     in the garbage collector (gc.callbacks), per generation.

Target: the 30-day run (the advances only, not account creation) < 10 s wall.
One PASS/FAIL line; the exit status is 0 unless `--strict` is given and the
target failed (a failed check raises, as in bench/scenarios.py).
`--profile FILE` writes a cProfile of the run phase only (pstats format) and
prints the top functions.

    python bench/refresh.py [--accounts 1000] [--days 30] [--create http|domain]
                            [--concurrency 50] [--strict] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import gc
import statistics
import sys
import time
from typing import Any

import aiohttp
from aiohttp import web

from common import peak_rss_mb, print_profile, serve

from payroll_sandbox.app import create_app
from payroll_sandbox.domain.companies.companies import OPERATIONAL
from payroll_sandbox.domain.accounts.linked_accounts import DATA_KINDS
from payroll_sandbox.domain.tasks.states import COMPLETED
from payroll_sandbox.domain.tasks.choosing import HAPPY_PATH
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.settings import Settings

API_KEY = "sandbox-key-acme-0001"
API_SECRET = "sandbox-secret-acme-0001"
HEADERS = {"x-api-key": API_KEY, "x-api-secret": API_SECRET}
PRODUCT = "deposit"
DAY = 86_400

TARGET_RUN_SECONDS = 10.0


class GcTimer:
    """Collections and their wall time per generation while installed (gc.callbacks)."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._began = 0.0

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.counts[info["generation"]] += 1
            self.seconds[info["generation"]] += time.perf_counter() - self._began



async def batched(count: int, concurrency: int, call) -> float:
    """`count` calls of `call(n)`, `concurrency` at a time; returns the wall seconds."""
    started = time.perf_counter()
    for first in range(0, count, concurrency):
        await asyncio.gather(*(call(n) for n in range(first, min(first + concurrency, count))))
    return time.perf_counter() - started


def pick_companies(tenant, count: int) -> tuple[list[Any], int]:
    """`count` companies spread evenly over the operational ones that offer deposit and
    take a programmatic login (manual-deposits companies refuse tasks)."""
    eligible = [c for c in tenant.companies.ordered()
                if c.status == OPERATIONAL and PRODUCT in c.available_products
                and not tenant.manual_deposits.applies_to(c)]
    if not eligible:
        raise SystemExit("no operational company offers deposit")
    if count <= len(eligible):
        return [eligible[n * len(eligible) // count] for n in range(count)], len(eligible)
    return [eligible[n % len(eligible)] for n in range(count)], len(eligible)


async def create_http(session: aiohttp.ClientSession, tenant, companies: list[Any],
                      concurrency: int, result: dict[str, Any]) -> None:
    """POST /task/create (deposit, happy-path) per account, then run-until-idle."""
    status: collections.Counter[int] = collections.Counter()
    task_ids: list[str | None] = [None] * len(companies)

    async def create(n: int) -> None:
        body = {"identifier": f"refresh-{n}", "company": companies[n].id, "product": PRODUCT,
                "scenario": HAPPY_PATH}
        async with session.post("/task/create", json=body) as response:
            payload = await response.json()
            status[response.status] += 1
            if response.status == 200:
                task_ids[n] = payload["data"]["id"]
            elif sum(status.values()) - status[200] <= 3:
                print(f"  create refresh-{n} ({companies[n].id}): {response.status} {payload}",
                      file=sys.stderr)

    result["create_tasks_seconds"] = await batched(len(companies), concurrency, create)
    result["create_status"] = dict(status)
    started = time.perf_counter()
    async with session.post("/_sandbox/clock/run-until-idle") as response:
        assert response.status == 200, (response.status, await response.text())
        ran = (await response.json())["data"]
    result["create_idle_seconds"] = time.perf_counter() - started
    result["create_idle_jobs"] = ran["jobsRun"]
    not_completed = [t for t in task_ids if t is None or tenant.tasks[t].status != COMPLETED]
    assert not not_completed, f"{len(not_completed)} account tasks did not complete"


def create_domain(app: web.Application, tenant, companies: list[Any]) -> None:
    linked = app[SANDBOX].linked_accounts
    for n, company in enumerate(companies):
        linked.create(tenant, f"refresh-{n}", company, PRODUCT)


async def bench(accounts: int, days: int, how: str, concurrency: int,
                profile: str | None) -> dict[str, Any]:
    rss_start = peak_rss_mb()
    # The bench reads the ledger's events back: it keeps all of them (no eviction).
    app = create_app(Settings(port=0, clock="manual", max_events=10**8, max_tasks=10**8))
    runner, base = await serve(app)
    tenant = app[SANDBOX].registry.tenants.default()
    result: dict[str, Any] = {"accounts": accounts, "days": days, "how": how,
                              "concurrency": concurrency, "base": base, "tenant": tenant.name,
                              "rss_start": rss_start, "rss_app": peak_rss_mb()}
    try:
        timeout = aiohttp.ClientTimeout(total=None)
        async with aiohttp.ClientSession(base, headers=HEADERS, timeout=timeout) as session:
            # Warm-up: connections opened, routes resolved.
            async with session.get("/_sandbox/clock") as response:
                assert response.status == 200, response.status
                await response.read()

            companies, eligible = pick_companies(tenant, accounts)
            result["eligible"] = eligible
            result["distinct_companies"] = len({c.id for c in companies})
            preexisting = set(tenant.accounts)
            events_start = len(tenant.events.events)
            started = time.perf_counter()
            if how == "http":
                await create_http(session, tenant, companies, concurrency, result)
            else:
                create_domain(app, tenant, companies)
            result["create_seconds"] = time.perf_counter() - started
            ours = [a for i, a in tenant.accounts.items() if i not in preexisting]
            assert len(ours) == accounts, f"{len(ours)} linked accounts made, not {accounts}"
            result["create_events"] = collections.Counter(
                e.type for e in tenant.events.events[events_start:])
            result["rss_created"] = peak_rss_mb()
            result["preexisting"] = len(preexisting)

            # The run: every linked account of the tenant refreshes daily (ours and any
            # ready-made ones from the fixtures), so the checks below count them all.
            everyone = list(tenant.accounts.values())
            refreshes_before = {a.id: a.refreshes for a in everyone}
            statements_before = sum(len(a.statements) for a in everyone)
            timesheets_before = sum(len(a.timesheets) for a in everyone)
            events_before = len(tenant.events.events)
            clock_before = tenant.clock.timestamp()
            per_day: list[tuple[float, int]] = []
            profiler = cProfile.Profile() if profile else None
            if profiler:
                profiler.enable()
            cpu_started, started = time.process_time(), time.perf_counter()
            with GcTimer() as collections_seen:
                for _ in range(days):
                    began = time.perf_counter()
                    async with session.post("/_sandbox/clock/advance",
                                            json={"seconds": DAY}) as response:
                        assert response.status == 200, (response.status, await response.text())
                        ran = (await response.json())["data"]
                    per_day.append((time.perf_counter() - began, ran["jobsRun"]))
            result["run_seconds"] = time.perf_counter() - started
            result["run_cpu_seconds"] = time.process_time() - cpu_started
            result["gc"] = collections_seen
            if profiler:
                profiler.disable()
                profiler.dump_stats(profile)
            result["per_day"] = per_day
            result["virtual_seconds"] = tenant.clock.timestamp() - clock_before
            result["rss_run"] = peak_rss_mb()

            events_after = len(tenant.events.events)
            result["events_before"], result["events_after"] = events_before, events_after
            async with session.get("/_sandbox/events", params={"limit": "1"}) as response:
                assert response.status == 200, response.status
                result["events_api_total"] = (await response.json())["total"]

        # Checks, read in-process.
        emitted = tenant.events.events[events_before:]
        types = collections.Counter(e.type for e in emitted)
        result["event_types"] = types
        connected = [a for a in everyone if a.connected]
        refreshed = collections.Counter(a.refreshes - refreshes_before[a.id] for a in everyone)
        result["refreshes_per_account"] = refreshed
        result["wrong_refreshes"] = [a.id for a in connected
                                     if a.refreshes - refreshes_before[a.id] != days]
        hourly = sum(1 for a in connected if a.profile.employee_type == "hourly")
        live = sum(1 for a in connected if not a.pii_deleted)
        expected = {f"{kind}-synced": len(connected) * days for kind in DATA_KINDS}
        expected["timesheets-synced"] = hourly * days
        expected["earn-user-data"] = live * days
        result["expected"] = expected
        result["hourly"], result["connected"] = hourly, len(connected)
        result["everyone"] = len(everyone)
        added = lambda kind: sum(len(e.body["data"]["records"])  # noqa: E731
                                 for e in emitted if e.type == f"{kind}-added")
        result["statements_gained"] = sum(len(a.statements) for a in everyone) - statements_before
        result["statements_announced"] = added("statements")
        result["timesheets_gained"] = sum(len(a.timesheets) for a in everyone) - timesheets_before
        result["timesheets_announced"] = added("timesheets")
    finally:
        await runner.cleanup()
    result["rss_peak"] = peak_rss_mb()
    return result


def report(r: dict[str, Any]) -> tuple[bool, list[str]]:
    accounts, days = r["accounts"], r["days"]
    print(f"payroll-sandbox refresh bench: {accounts} linked accounts x {days} virtual days, "
          f"manual clock, tenant {r['tenant']}, {r['base']}")
    print(f"  companies: {r['distinct_companies']} distinct, spread over the {r['eligible']} "
          f"operational ones offering {PRODUCT}")
    print()
    if r["how"] == "http":
        print(f"creating the accounts (HTTP: POST /task/create {PRODUCT}/{HAPPY_PATH} + "
              f"run-until-idle, concurrency {r['concurrency']}) {r['create_seconds']:8.3f} s")
        print(f"  POST /task/create x{accounts}      {r['create_tasks_seconds']:8.3f} s  "
              f"{1e3 * r['create_tasks_seconds'] / accounts:6.3f} ms/req  "
              f"statuses {r['create_status']}")
        print(f"  POST /_sandbox/clock/run-until-idle {r['create_idle_seconds']:8.3f} s  "
              f"jobs run {r['create_idle_jobs']} (task steps; the linked accounts are made "
              f"as the tasks complete)")
    else:
        print(f"creating the accounts (in-process LinkedAccounts.create) "
              f"{r['create_seconds']:8.3f} s  "
              f"{1e3 * r['create_seconds'] / accounts:6.3f} ms/account")
    created = ", ".join(f"{t} {c}" for t, c in sorted(r["create_events"].items()))
    print(f"  events while creating: {sum(r['create_events'].values())} ({created})")
    if r["preexisting"]:
        print(f"  plus {r['preexisting']} ready-made linked accounts from the fixtures")
    print()

    seconds = [s for s, _ in r["per_day"]]
    jobs = sum(j for _, j in r["per_day"])
    print(f"POST /_sandbox/clock/advance {{\"seconds\": {DAY}}} x{days}   total "
          f"{r['run_seconds']:8.3f} s  virtual time +{r['virtual_seconds'] / DAY:g} days, "
          f"jobs run {jobs}")
    print(f"  process CPU time {r['run_cpu_seconds']:.3f} s (the wall time minus this is time "
          f"the process waited, e.g. for a busy machine)")
    print(f"  per advance: min {min(seconds):.3f} s, median {statistics.median(seconds):.3f} s, "
          f"max {max(seconds):.3f} s; {1e6 * r['run_seconds'] / max(jobs, 1):.1f} us/refresh")
    gc_timer = r["gc"]
    print(f"  garbage collector during the run: {sum(gc_timer.seconds):.3f} s in "
          f"{sum(gc_timer.counts)} collections (gen0 {gc_timer.counts[0]} "
          f"{gc_timer.seconds[0]:.3f} s, gen1 {gc_timer.counts[1]} {gc_timer.seconds[1]:.3f} s, "
          f"gen2 {gc_timer.counts[2]} {gc_timer.seconds[2]:.3f} s)")
    for first in range(0, days, 10):
        row = "  ".join(f"{s:.3f}" for s, _ in r["per_day"][first:first + 10])
        print(f"  days {first + 1:2d}-{min(first + 10, days):2d}: {row}")
    print()
    emitted = r["events_after"] - r["events_before"]
    print(f"events emitted by the run {emitted} (ledger {r['events_before']} -> "
          f"{r['events_after']}; GET /_sandbox/events total {r['events_api_total']}), "
          f"{emitted / r['run_seconds']:.0f} events/s")
    for event_type, count in sorted(r["event_types"].items()):
        want = r["expected"].get(event_type)
        note = "" if want is None else ("  = expected" if count == want else f"  != {want}")
        print(f"  {event_type:32s} {count:8d}{note}")
    print()
    problems = []
    refreshes = ", ".join(f"{n} refreshes: {c}" for n, c in sorted(r["refreshes_per_account"].items()))
    print(f"push refreshes per linked account ({r['everyone']} accounts, {r['connected']} "
          f"connected, {r['hourly']} hourly): {refreshes}")
    if r["wrong_refreshes"]:
        problems.append(f"{len(r['wrong_refreshes'])} connected accounts did not get {days} "
                        f"refreshes, e.g. {r['wrong_refreshes'][:5]}")
    mismatched = {t: (r["event_types"].get(t, 0), want) for t, want in r["expected"].items()
                  if r["event_types"].get(t, 0) != want}
    if mismatched:
        problems.append(f"event counts (got, expected): {mismatched}")
    if r["event_types"].get("statements-synced", 0) != accounts * days and not r["preexisting"]:
        problems.append(f"statements-synced {r['event_types'].get('statements-synced', 0)} "
                        f"!= {accounts} x {days}")
    if r["events_api_total"] != r["events_after"]:
        problems.append(f"GET /_sandbox/events total {r['events_api_total']} != ledger "
                        f"{r['events_after']}")
    if jobs != r["everyone"] * days:
        problems.append(f"jobs run {jobs} != {r['everyone']} accounts x {days} days")
    for kind in ("statements", "timesheets"):
        if r[f"{kind}_gained"] != r[f"{kind}_announced"]:
            problems.append(f"{kind}: accounts gained {r[f'{kind}_gained']}, "
                            f"{kind}-added events name {r[f'{kind}_announced']}")
    print(f"records added: statements {r['statements_gained']} (events name "
          f"{r['statements_announced']}), timesheets {r['timesheets_gained']} (events name "
          f"{r['timesheets_announced']})")
    print(f"checks: {'all OK' if not problems else 'FAILED'}")
    for problem in problems:
        print(f"  {problem}")
    print()
    print(f"RSS peak (ru_maxrss): start {r['rss_start']:.1f} MB, app built {r['rss_app']:.1f} MB, "
          f"accounts created {r['rss_created']:.1f} MB, after run {r['rss_run']:.1f} MB, "
          f"end {r['rss_peak']:.1f} MB")
    print()
    run_ok = r["run_seconds"] < TARGET_RUN_SECONDS
    print(f"{'PASS' if run_ok else 'FAIL'}  {days}-day run {r['run_seconds']:.3f} s "
          f"(target < {TARGET_RUN_SECONDS:g} s; account creation {r['create_seconds']:.3f} s "
          f"not counted)")
    return run_ok, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=1_000, help="linked accounts (1000)")
    parser.add_argument("--days", type=int, default=30, help="virtual days to advance (30)")
    parser.add_argument("--create", choices=("http", "domain"), default="http",
                        help="make the accounts through tasks over HTTP (default) or in-process")
    parser.add_argument("--concurrency", type=int, default=50,
                        help="POST /task/create in flight per batch with --create http (50)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target fails")
    parser.add_argument("--profile", metavar="FILE",
                        help="cProfile the run phase into FILE and print the top functions")
    args = parser.parse_args(argv)
    if args.accounts < 1 or args.days < 1 or args.concurrency < 1:
        parser.error("--accounts, --days and --concurrency must be at least 1")

    result = asyncio.run(bench(args.accounts, args.days, args.create, args.concurrency,
                               args.profile))
    ok, problems = report(result)
    assert not problems, "; ".join(problems)
    if args.profile:
        print_profile(args.profile)
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
