"""Live work under hostile load (issue 48): bounded, and one tenant never waiting on another.

1. `tasks`: one tenant on a manual clock creates N tasks (100,000) and never advances:
   the server's RSS (VmRSS of this process, the server runs in it) before and after, the
   tasks stored, and the refusals (429 task-limit-reached / job-limit-reached) counted.
   Target: stored <= --max-tasks, every create past it refused, RSS growth bounded.
2. `restores`: a third tenant's GET /_sandbox/clock p99 with no restore running, then
   while two other tenants each restore a SIZE MiB (64) snapshot at once (legal ones:
   many users, --max-users raised to hold them), in the same run. Target: both restores
   200 (each tenant waits only on its own; the memory budget holds two). The p99s are
   figures: two restores parsing on a 2-core machine share it with the probe.

    python bench/live_work.py [--tasks 100000] [--size 64] [--only tasks|restores]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import percentile, serve  # noqa: E402

ACME = {"x-api-key": "sandbox-key-acme-0001", "x-api-secret": "sandbox-secret-acme-0001"}
GLOBEX = {"x-api-key": "sandbox-key-globex-0002", "x-api-secret": "sandbox-secret-globex-0002"}
WALMART = "6410a0000000000000000001"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def app(**settings):
    from payroll_sandbox.app import create_app
    from payroll_sandbox.settings import Settings

    return create_app(Settings(port=0, clock="manual", **settings))


async def tasks(count: int) -> None:
    import aiohttp

    runner, base = await serve(app())
    codes: dict[str, int] = {}
    before = rss_mb()
    started = time.perf_counter()
    async with aiohttp.ClientSession(base) as session:
        company_id = WALMART

        async def one(n: int) -> None:
            async with session.post("/task/create", headers=ACME, json={
                    "identifier": f"user-{n % 1000}", "company": company_id,
                    "product": "deposit"}) as response:
                body = await response.json()
                code = "created" if response.status == 200 else body["error"]["code"]
                codes[code] = codes.get(code, 0) + 1

        for first in range(0, count, 50):
            await asyncio.gather(*(one(n) for n in range(first, min(count, first + 50))))
        stats = (await (await session.get("/_sandbox/stats", headers=ACME)).json())["data"]
    await runner.cleanup()
    print(f"tasks: {count} creates in {time.perf_counter() - started:.0f} s without advancing: "
          f"{codes}; stored {stats['tasks']['stored']} (max {stats['tasks']['max']}), "
          f"pending jobs {stats['pendingJobs']}; RSS {before:.0f} MB -> {rss_mb():.0f} MB "
          f"(+{rss_mb() - before:.0f} MB)")


async def restores(size_mib: int) -> None:
    import aiohttp

    runner, base = await serve(app(max_users=2_000_000))
    async with aiohttp.ClientSession(base) as session:
        bodies = []
        for headers in (ACME, GLOBEX):
            await session.post("/access-token", headers=headers, json={"identifier": "seed"})
            document = (await (await session.get("/_sandbox/snapshot", headers=headers)).json())["data"]
            user = document["users"][0]
            sample = {**user, "id": f"{0:024x}", "identifier": "bulk-100000"}
            count = size_mib * 2**20 // (len(json.dumps(sample)) + 2)
            document["users"] = [{**user, "id": f"{n:024x}", "identifier": f"bulk-{n}"}
                                 for n in range(count)]
            bodies.append((headers, json.dumps(document).encode()))
        third = {"x-api-key": "sandbox-key-initech-0003", "x-api-secret": "sandbox-secret-initech-0003"}
        probe = third if (await session.get("/_sandbox/clock", headers=third)).status == 200 else ACME

        async def latencies(seconds: float | None, until: asyncio.Future | None = None) -> list[float]:
            waits, end = [], time.perf_counter() + (seconds or 1e9)
            while time.perf_counter() < end and not (until is not None and until.done()):
                started = time.perf_counter()
                async with session.get("/_sandbox/clock", headers=probe) as response:
                    await response.read()
                waits.append(time.perf_counter() - started)
                await asyncio.sleep(0.005)
            return waits

        rest = await latencies(3.0)

        async def restore(headers, body):
            started = time.perf_counter()
            async with session.post("/_sandbox/snapshot", data=body,
                                    headers={**headers, "content-type": "application/json"}) as r:
                answer = await r.read()
                if r.status != 200:
                    print(answer[:600].decode())
                return r.status, time.perf_counter() - started

        both = asyncio.ensure_future(asyncio.gather(*(restore(h, b) for h, b in bodies)))
        during = await latencies(None, both)
        results = await both
    await runner.cleanup()
    p_rest, p_during = percentile(rest, 99) * 1000, percentile(during, 99) * 1000
    print(f"restores: two tenants' {[round(len(b) / 2**20) for _, b in bodies]} MiB restores "
          f"at once: {[(s, round(t, 1)) for s, t in results]} (status, s); the probe tenant's "
          f"p99 {p_rest:.1f} ms at rest ({len(rest)} requests), {p_during:.1f} ms during "
          f"({len(during)} requests), max {max(during) * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--only", choices=["tasks", "restores"])
    options = parser.parse_args()
    if options.only in (None, "tasks"):
        asyncio.run(tasks(options.tasks))
    if options.only in (None, "restores"):
        asyncio.run(restores(options.size))


if __name__ == "__main__":
    main()
