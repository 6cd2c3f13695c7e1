"""Task creation latency on a big heap: 100,000 tasks stored, then more created one at a time.

Starts `python -m payroll_sandbox serve --clock manual --port 0` (a real process, as users
run it; PAYROLL_SANDBOX_MAX_TASKS raised so nothing is evicted), stores --stored tasks
(default 100,000) with POST /task/create, 32 in flight, then sends --timed more
(default 10,000) one after another and prints p50/p99/max of their latency (as the
client sees it) and the server's GET /_sandbox/stats. On a manual clock every task stays queued, so the heap holds
every one of them, their histories and their scheduled steps.

What keeps the tail short: the catalog is frozen out of the collector's way after start
(`long_lived()` in simulator/app.py), so a full collection walks the tenants' objects
only, and `serve` runs the collector less often (SERVER_GC_THRESHOLDS).

Target: p99 <= 20 ms per creation with 100,000 tasks stored.

    python bench/stored.py [--stored 100000] [--timed 10000] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).parent))

from common import percentile, report  # noqa: E402
from throughput import SANDBOX, Server  # noqa: E402

TARGET_P99_MS = 20.0
IN_FLIGHT = 32


async def run(stored: int, timed: int, server: Server) -> list[tuple[str, bool]]:
    headers = server.credentials
    async with aiohttp.ClientSession(base_url=server.url, headers=headers) as session:
        async with session.post("/company/search", json={"query": "walmart"}) as response:
            company = (await response.json())["data"][0]
        body = {"identifier": "bench-user", "company": company["_id"],
                "product": company["connector"]["availableProducts"][0]}

        async def create() -> float:
            started = time.perf_counter()
            async with session.post("/task/create", json=body) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"task create answered {response.status}")
            return (time.perf_counter() - started) * 1000

        started = time.perf_counter()
        left = stored

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await create()

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        print(f"stored {stored:,} tasks in {time.perf_counter() - started:.1f} s "
              f"({IN_FLIGHT} in flight)")

        latencies = [await create() for _ in range(timed)]
        async with session.get("/_sandbox/stats") as response:
            stats = await response.json()
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    print(f"{timed:,} more, one at a time: p50 {p50:.2f} ms, p99 {p99:.2f} ms, "
          f"max {max(latencies):.2f} ms")
    print("server stats:", json.dumps(stats.get("data", stats))[:400])
    return [(f"task create p99 {p99:.2f} ms with {stored:,} tasks stored "
             f"(target <= {TARGET_P99_MS:g} ms; max {max(latencies):.1f} ms)",
             p99 <= TARGET_P99_MS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stored", type=int, default=100_000, help="tasks stored first")
    parser.add_argument("--timed", type=int, default=10_000, help="creations then timed")
    parser.add_argument("--strict", action="store_true", help="exit 1 on FAIL")
    args = parser.parse_args()
    room = str(args.stored + args.timed + 10)  # no task refused: none evicted, none 429
    env = {"PAYROLL_SANDBOX_MAX_TASKS": room, "PAYROLL_SANDBOX_MAX_LINKED_ACCOUNTS": room}
    with tempfile.TemporaryDirectory() as folder:
        server = Server("sandbox", SANDBOX, Path(folder) / "sandbox.log", env)
        try:
            results = asyncio.run(run(args.stored, args.timed, server))
        finally:
            server.stop()
    report(results, args.strict)


if __name__ == "__main__":
    main()
