"""Tenants isolated in time: one tenant's long advance never stalls the others.

The sandbox app runs in this process on 127.0.0.1 (manual clock, no webhook endpoint).
A fresh tenant with a 60 s refresh interval gets a linked account (a completed deposit
task), then asks for `POST /_sandbox/clock/advance` of 60 days: 86,400 push refreshes, far
past one call's work limit, so the call answers `complete: false` after its bounded
share of work. While it runs, GET /health and another tenant's POST /company/search
are sent one after another, and their latencies measured.

Targets: /health and the other tenant's search p99 <= 50 ms during the advance.

    python bench/isolation.py [--days 60] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import aiohttp

from common import report, serve

from payroll_sandbox.app import create_app
from payroll_sandbox.settings import Settings

TARGET_P99_MS = 50.0
ACME = {"x-api-key": "sandbox-key-acme-0001", "x-api-secret": "sandbox-secret-acme-0001"}
WALMART = "6410a0000000000000000001"


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98] if len(samples) >= 2 else samples[0]


async def run(days: int) -> list[tuple[str, bool]]:
    app = create_app(Settings(port=0, clock="manual"))
    runner, base = await serve(app)
    try:
        async with aiohttp.ClientSession(base) as session:
            async def call(method: str, path: str, headers: dict, **kwargs) -> dict:
                async with session.request(method, path, headers=headers, **kwargs) as response:
                    assert response.status < 300, (path, response.status, await response.text())
                    return await response.json()

            made = (await call("POST", "/_sandbox/tenants", ACME, json={
                "name": "busy", "continuousAccess": {"refreshInterval": 60}}))["data"]
            busy = {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}
            for n in range(3):
                await call("POST", "/task/create", busy, json={
                    "identifier": f"worker-{n}", "company": WALMART, "product": "deposit"})
            await call("POST", "/_sandbox/clock/run-until-idle", busy)

            health: list[float] = []
            search: list[float] = []
            started = time.perf_counter()
            advance = asyncio.ensure_future(call("POST", "/_sandbox/clock/advance", busy,
                                                 json={"seconds": days * 86_400}))
            while not advance.done():
                for samples, method, path, kwargs in (
                        (health, "GET", "/health", {}),
                        (search, "POST", "/company/search", {"json": {"query": "walmart"}})):
                    sent = time.perf_counter()
                    await call(method, path, ACME, **kwargs)
                    samples.append((time.perf_counter() - sent) * 1000)
            result = (await advance)["data"]
            elapsed = time.perf_counter() - started
    finally:
        await runner.cleanup()

    print(f"payroll-sandbox isolation bench: tenant 'busy' advances {days} days with a 60 s "
          f"refresh interval and 3 linked accounts")
    print(f"advance: {elapsed:.2f} s wall, {result['jobsRun']:,} jobs, "
          f"{result['eventsEmitted']:,} events, complete {result['complete']}, "
          f"remainingSeconds {result['remainingSeconds']:,.0f}")
    print(f"meanwhile: {len(health)} GET /health, {len(search)} searches of tenant acme")
    print(f"  /health  p50 {statistics.median(health):.2f} ms  p99 {p99(health):.2f} ms")
    print(f"  search   p50 {statistics.median(search):.2f} ms  p99 {p99(search):.2f} ms\n")
    return [(f"/health p99 {p99(health):.2f} ms during the advance (target <= {TARGET_P99_MS:g})",
             p99(health) <= TARGET_P99_MS),
            (f"other tenant's search p99 {p99(search):.2f} ms during the advance "
             f"(target <= {TARGET_P99_MS:g})", p99(search) <= TARGET_P99_MS),
            ("the advance stopped at its work limit and can go on (complete: false)",
             result["complete"] is False and result["remainingSeconds"] > 0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    args = parser.parse_args()
    report(asyncio.run(run(args.days)), args.strict)


if __name__ == "__main__":
    main()
