"""Webhook delivery throughput: N events through the dispatcher vs a bare aiohttp client.

Everything runs in one process and one event loop, on 127.0.0.1:

  * a receiver (aiohttp server, port 0) answers 200 to POST /hook and records,
    per `ce-id`, when each request arrived (time.perf_counter);
  * the sandbox app (manual clock, `webhook_url` = the receiver) runs under
    web.AppRunner/TCPSite so its cleanup context starts the dispatcher's client
    session; N events (`--events`, default 20,000) of type company-updated are
    emitted in-process through the default tenant (`Tenant.emit`), yielding to the
    loop every 100 events, then `Dispatcher.settle` waits for every attempt;
  * beside it, a bare aiohttp.ClientSession (TCPConnector limit 100, as the
    dispatcher's) posts the very same bodies and headers (built beforehand with
    `cloudevents.to_message` from the same events) with the same pattern: one
    task per event, a yield every 100, then gather. Each post uses the same
    arguments as the dispatcher's (allow_redirects=False, a per-request timeout).

Each side gets an unmeasured warm-up (`--warmup`, default 500 events) first, so
both start with their connection pool open. Per side: events/s over the wall
time from the first emit to the last arrival, and emit-to-arrival latency
p50/p99; events/s counts distinct events that arrived. Each post of either side
has a 15 s timeout (the dispatcher's, manual clock), which in aiohttp includes
the wait for a free connection of the pool.

Two PASS/FAIL lines: every event arrived exactly once and the ledger records
every sandbox delivery as `delivered` (a timed-out attempt stays `pending`: its
retry waits for the manual clock); the target, sandbox events/s >= 0.5 x
bare-client events/s. The exit status is 0 unless `--strict` is given and a
line failed.
`--profile FILE` writes a cProfile of the measured sandbox phase (pstats
format) and prints the top functions; the profiler slows that phase only, so
the ratio of such a run means nothing.

    python bench/webhooks.py [--events 20000] [--warmup 500] [--strict] [--profile FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import collections
import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from common import print_profile, serve, serve_hook

from payroll_sandbox.app import create_app
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.settings import Settings
from payroll_sandbox.transport.cloudevents import to_message
from payroll_sandbox.transport.dispatcher import ATTEMPT_TIMEOUT

EVENT_TYPE = "company-updated"
COMPANY = "6410a0000000000000000001"   # Walmart
CONNECTOR_LIMIT = 100                  # the dispatcher's TCPConnector(limit=100)
YIELD_EVERY = 100
TARGET_RATIO = 0.5


class Receiver:
    """POST /hook answers 200 and records the arrival time of each ce-id."""

    def __init__(self) -> None:
        self.arrivals: dict[str, float] = {}
        self.counts: collections.Counter[str] = collections.Counter()
        self.missing_id = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    def reset(self) -> None:
        self.arrivals = {}
        self.counts = collections.Counter()
        self.missing_id = 0

    async def hook(self, request: web.Request) -> web.Response:
        await request.read()
        now = time.perf_counter()
        event_id = request.headers.get("ce-id")
        if event_id is None:
            self.missing_id += 1
        else:
            self.counts[event_id] += 1
            self.arrivals.setdefault(event_id, now)
        return web.Response(status=200)

    async def start(self) -> None:
        self._runner, self.url = await serve_hook(self.hook)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@dataclass
class Phase:
    """One side's figures: emit times per event id, arrivals, wall time, checks."""

    name: str
    emitted: dict[str, float] = field(default_factory=dict)   # id -> perf_counter at emit
    arrivals: dict[str, float] = field(default_factory=dict)
    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    missing_id: int = 0
    statuses: collections.Counter[Any] = field(default_factory=collections.Counter)
    not_delivered: list[tuple[str, str]] = field(default_factory=list)
    attempt_errors: collections.Counter[str] = field(default_factory=collections.Counter)

    def take(self, receiver: Receiver) -> None:
        """What the receiver saw since its last reset (then reset it)."""
        self.arrivals, self.counts, self.missing_id = (receiver.arrivals, receiver.counts,
                                                       receiver.missing_id)
        receiver.reset()

    @property
    def events(self) -> int:
        return len(self.emitted)

    @property
    def wall(self) -> float:
        if not self.arrivals or not self.emitted:
            return float("nan")
        return max(self.arrivals.values()) - min(self.emitted.values())

    @property
    def emitting(self) -> float:
        """Wall seconds from the first emit to the last."""
        return max(self.emitted.values()) - min(self.emitted.values()) if self.emitted else 0.0

    @property
    def arrived(self) -> int:
        return sum(1 for i in self.emitted if i in self.arrivals)

    @property
    def rate(self) -> float:
        """Distinct events that arrived, per second of wall time."""
        return self.arrived / self.wall

    def latencies_ms(self) -> list[float]:
        return sorted(1e3 * (self.arrivals[i] - t) for i, t in self.emitted.items()
                      if i in self.arrivals)

    def percentile(self, q: float) -> float:
        values = self.latencies_ms()
        if not values:
            return float("nan")
        # nearest rank
        rank = max(1, min(len(values), int(round(q / 100 * len(values) + 0.5))))
        return values[rank - 1]

    def problems(self) -> list[str]:
        found = []
        missing = [i for i in self.emitted if i not in self.counts]
        twice = [i for i in self.emitted if self.counts.get(i, 0) > 1]
        unknown = [i for i in self.counts if i not in self.emitted]
        if missing:
            found.append(f"{len(missing)} events never arrived (e.g. {missing[:3]})")
        if twice:
            found.append(f"{len(twice)} events arrived more than once (e.g. {twice[:3]})")
        if unknown:
            found.append(f"{len(unknown)} unexpected ce-ids arrived (e.g. {unknown[:3]})")
        if self.missing_id:
            found.append(f"{self.missing_id} requests without a ce-id header")
        if self.not_delivered:
            found.append(f"{len(self.not_delivered)} ledger deliveries not `delivered` "
                         f"(e.g. {self.not_delivered[:3]})")
        return found


async def sandbox_emit(app: web.Application, count: int, phase: Phase | None) -> list:
    """Emit `count` events through the default tenant, then settle; returns the events."""
    tenant = app[SANDBOX].registry.tenants.default()
    dispatcher = app[SANDBOX].dispatcher
    events = []
    emitted = phase.emitted if phase is not None else {}
    clock = time.perf_counter
    for n in range(count):
        started = clock()
        event = tenant.emit(EVENT_TYPE, data={"companyId": COMPANY})
        emitted[event.id] = started
        events.append(event)
        if n % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)
    await dispatcher.settle(tenant)
    return events


async def bare_post(session: aiohttp.ClientSession, url: str, messages: list[tuple[str, Any]],
                    phase: Phase) -> None:
    """One task per message, a yield every 100, then gather: the dispatcher's pattern."""
    timeout = aiohttp.ClientTimeout(total=ATTEMPT_TIMEOUT)
    statuses = phase.statuses

    async def post(message: Any) -> None:
        try:
            async with session.post(url, data=message.body, headers=message.headers,
                                    allow_redirects=False, timeout=timeout) as response:
                await response.read()
                statuses[response.status] += 1
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as error:
            statuses[type(error).__name__] += 1

    loop = asyncio.get_running_loop()
    tasks = []
    emitted = phase.emitted
    clock = time.perf_counter
    for n, (event_id, message) in enumerate(messages):
        emitted[event_id] = clock()
        tasks.append(loop.create_task(post(message)))
        if n % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)
    await asyncio.gather(*tasks)


async def bench(events: int, warmup: int, profile: str | None) -> dict[str, Any]:
    receiver = Receiver()
    await receiver.start()
    # The ledger keeps every event of the run, so each delivery can be checked after it.
    app = create_app(Settings(port=0, clock="manual", webhook_url=receiver.url,
                              max_events=2 * (events + warmup)))
    runner, _ = await serve(app)
    tenant = app[SANDBOX].registry.tenants.default()
    dispatcher = app[SANDBOX].dispatcher
    sandbox, bare = Phase("sandbox dispatcher"), Phase("bare aiohttp client")
    result: dict[str, Any] = {"events": events, "warmup": warmup, "receiver": receiver.url,
                              "tenant": tenant.name, "signing": tenant.signing,
                              "sandbox": sandbox, "bare": bare}
    try:
        # -- the sandbox ------------------------------------------------------------------
        warm_events = await sandbox_emit(app, warmup, None) if warmup else []
        receiver.reset()
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        measured = await sandbox_emit(app, events, sandbox)
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)
        sandbox.take(receiver)
        state = tenant.webhooks
        for event in measured:
            outcome = state.state_of(event.id)
            sandbox.statuses[outcome] += 1
            if outcome != "delivered":
                sandbox.not_delivered.append((event.id, outcome))
            for delivery in state.deliveries.get(event.id, []):
                for attempt in delivery.attempts:
                    if attempt.error is not None:
                        sandbox.attempt_errors[attempt.error] += 1

        # -- the bare client: same bodies and headers, built before timing ------------------
        secret = tenant.api_secret if tenant.signing else None
        vendor = dispatcher.vendor
        messages = [(event.id, to_message(event, vendor, secret)) for event in measured]
        warm_messages = [(event.id, to_message(event, vendor, secret)) for event in warm_events]
        connector = aiohttp.TCPConnector(limit=CONNECTOR_LIMIT, force_close=False)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None),
                                         connector=connector) as session:
            if warm_messages:
                await bare_post(session, receiver.url, warm_messages, Phase("warm-up"))
            receiver.reset()
            await bare_post(session, receiver.url, messages, bare)
            bare.take(receiver)
    finally:
        await runner.cleanup()
        await receiver.stop()
    return result


def report(r: dict[str, Any]) -> bool:
    sandbox: Phase = r["sandbox"]
    bare: Phase = r["bare"]
    print(f"payroll-sandbox webhook bench: {r['events']} {EVENT_TYPE} events to {r['receiver']} "
          f"(tenant {r['tenant']}, signing {'on' if r['signing'] else 'off'}), "
          f"connector limit {CONNECTOR_LIMIT}, yield every {YIELD_EVERY}, "
          f"warm-up {r['warmup']} each")
    print()
    print(f"  {'':22s} {'arrived':>8s} {'emit s':>8s} {'wall s':>8s} {'events/s':>10s} "
          f"{'p50 ms':>9s} {'p99 ms':>9s}  outcome")
    for phase in (sandbox, bare):
        print(f"  {phase.name:22s} {phase.arrived:8d} {phase.emitting:8.3f} {phase.wall:8.3f} "
              f"{phase.rate:10.0f} {phase.percentile(50):9.1f} {phase.percentile(99):9.1f}  "
              f"{dict(phase.statuses)}")
    print("  (emit s: first to last emit; wall s: first emit to last arrival)")
    if sandbox.attempt_errors:
        print(f"  sandbox attempt errors: {dict(sandbox.attempt_errors)}")
    ratio = sandbox.rate / bare.rate
    print()
    ok = True
    for phase in (sandbox, bare):
        problems = phase.problems()
        if problems:
            ok = False
            for problem in problems:
                print(f"  ERROR {phase.name}: {problem}")
        else:
            print(f"  {phase.name}: all {phase.events} events arrived exactly once"
                  + (", every delivery `delivered` in the ledger" if phase is sandbox else ""))
    print()
    passed = ratio >= TARGET_RATIO
    print(f"{'PASS' if ok else 'FAIL'}  every event arrived exactly once, every sandbox delivery "
          f"`delivered`")
    print(f"{'PASS' if passed else 'FAIL'}  sandbox / bare = {ratio:.2f} "
          f"({sandbox.rate:.0f} vs {bare.rate:.0f} events/s; target >= {TARGET_RATIO:g})")
    return passed and ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events to deliver (20000)")
    parser.add_argument("--warmup", type=int, default=500,
                        help="unmeasured events per side first (500)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target fails")
    parser.add_argument("--profile", metavar="FILE",
                        help="cProfile the measured sandbox phase into FILE, print the top")
    args = parser.parse_args(argv)
    if args.events < 1 or args.warmup < 0:
        parser.error("--events must be at least 1 and --warmup at least 0")

    # Deliveries still pending at shutdown are each logged as a warning; the report
    # already counts them from the ledger, so keep stderr readable.
    logging.getLogger("payroll_sandbox.webhooks").setLevel(logging.ERROR)
    result = asyncio.run(bench(args.events, args.warmup, args.profile))
    ok = report(result)
    if args.profile:
        print_profile(args.profile)
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
