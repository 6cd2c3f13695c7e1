"""Memory of a long-running sandbox: N events through one tenant to a webhook receiver.

Everything runs in one process and one event loop, on 127.0.0.1: a receiver that
answers 200 and only counts, and the sandbox app (manual clock, `webhook_url` = the
receiver, the default bounds: `--max-events` 5,000 per tenant). Events are emitted
in-process through the default tenant (`Tenant.emit`), a thousand at a time, each
batch's deliveries settled before the next; the resident set size (RSS, from
/proc/self/statm) is read after every tenth of the run.

Printed, with PASS/FAIL:
  * RSS stays under 300 MB over the whole run;
  * RSS is flat over the last half: its spread there is at most 10% of its mean;
  * stored bytes per delivered event (an event in the ledger with its delivery and its
    attempt), measured with tracemalloc on a separate batch: at most 1 KB... reported
    beside the ledger's bound, which is what keeps the total flat;
  * after POST /_sandbox/reset, RSS is within 20% of the idle figure (the app built,
    before any event).

    python bench/memory.py [--events 1000000] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import time
import tracemalloc

import aiohttp
from aiohttp import web

from common import report, serve, serve_hook

from payroll_sandbox.app import create_app
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.settings import Settings

RSS_LIMIT_MB = 300
FLAT_SPREAD = 0.10
BYTES_PER_EVENT = 1024
RESET_WITHIN = 0.20
BATCH = 1000
COMPANY = "6410a0000000000000000001"   # Walmart


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


class CountingReceiver:
    def __init__(self) -> None:
        self.count = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def hook(self, request: web.Request) -> web.Response:
        await request.read()
        self.count += 1
        return web.Response(status=200)

    async def start(self) -> None:
        self._runner, self.url = await serve_hook(self.hook)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def emit_batch(tenant, dispatcher, size: int) -> None:
    for _ in range(size):
        tenant.emit("company-updated", data={"companyId": COMPANY})
    await dispatcher.settle(tenant)


async def run(events: int) -> list[tuple[str, bool]]:
    receiver = CountingReceiver()
    await receiver.start()
    app = create_app(Settings(port=0, clock="manual", webhook_url=receiver.url))
    runner, base_url = await serve(app)
    sandbox = app[SANDBOX]
    tenant = sandbox.registry.tenants.default()
    keys = {"x-api-key": tenant.api_key, "x-api-secret": tenant.api_secret}
    results = []
    try:
        await emit_batch(tenant, sandbox.dispatcher, 100)  # warm: the connection pool is open
        gc.collect()
        idle = rss_mb()
        print(f"payroll-sandbox memory bench: {events:,} events through one tenant "
              f"(max-events {tenant.events.max_events:,}), pid {os.getpid()}")
        print(f"idle RSS {idle:.1f} MB")
        started = time.perf_counter()
        samples = []
        step = max(BATCH, events // 10)
        sent = 0
        while sent < events:
            size = min(BATCH, events - sent)
            await emit_batch(tenant, sandbox.dispatcher, size)
            sent += size
            if sent % step == 0 or sent == events:
                samples.append((sent, rss_mb()))
                print(f"  {sent:>9,} events  RSS {samples[-1][1]:6.1f} MB  "
                      f"stored {len(tenant.events):,}  evicted {tenant.events.evicted:,}  "
                      f"{sent / (time.perf_counter() - started):,.0f} events/s")
        delivered = receiver.count

        async with aiohttp.ClientSession() as session:
            async with session.post(f"{base_url}/_sandbox/reset", headers=keys) as response:
                assert response.status == 200, await response.text()
        after_reset = rss_mb()

        # Bytes per stored event, with its delivery and attempt: what the sandbox's own
        # code allocated and still holds for a batch (the in-process receiver and the
        # tables that grew during the first batch aside).
        tenant = sandbox.registry.tenants.default()
        probe = 2_000
        await emit_batch(tenant, sandbox.dispatcher, probe)
        tracemalloc.start()
        gc.collect()
        before = tracemalloc.take_snapshot()
        await emit_batch(tenant, sandbox.dispatcher, probe)
        for _ in range(3):  # the attempts' finished tasks go once the loop has moved on
            await asyncio.sleep(0)
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        ours = [tracemalloc.Filter(True, "*/simulator/*")]
        per_event = sum(stat.size_diff for stat in after.filter_traces(ours).compare_to(
            before.filter_traces(ours), "filename")) / probe

        peak = max(rss for _, rss in samples)
        last_half = [rss for sent_at, rss in samples if sent_at > events / 2] or [samples[-1][1]]
        mean = sum(last_half) / len(last_half)
        spread = (max(last_half) - min(last_half)) / mean
        print(f"\ndelivered {delivered:,} of {events + 100:,} events")
        print(f"stored bytes per delivered event (ledger + delivery + attempt): {per_event:,.0f}")
        print(f"after reset RSS {after_reset:.1f} MB (idle {idle:.1f} MB)\n")
        results = [
            (f"peak RSS {peak:.1f} MB (target < {RSS_LIMIT_MB} MB)", peak < RSS_LIMIT_MB),
            (f"RSS over the last half: spread {spread:.1%} of {mean:.1f} MB "
             f"(target <= {FLAT_SPREAD:.0%})", spread <= FLAT_SPREAD),
            (f"stored bytes per delivered event {per_event:,.0f} (target <= {BYTES_PER_EVENT})",
             per_event <= BYTES_PER_EVENT),
            (f"RSS after reset {after_reset:.1f} MB vs idle {idle:.1f} MB "
             f"(target within {RESET_WITHIN:.0%})", after_reset <= idle * (1 + RESET_WITHIN)),
            (f"every event delivered ({delivered:,})", delivered == events + 100),
        ]
    finally:
        await runner.cleanup()
        await receiver.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    args = parser.parse_args()
    report(asyncio.run(run(args.events)), args.strict)


if __name__ == "__main__":
    main()
