"""Tenant creation: latency over 1,000 creations and the memory 100 idle tenants take.

Starts `python -m payroll_sandbox serve --clock manual --port 0` (a real process, as users run
it, with PAYROLL_SANDBOX_MAX_TENANTS and PAYROLL_SANDBOX_MAX_TENANTS_PER_MAKER raised above
--count: every tenant here is made by the default one), then creates --count tenants
one after another with POST /_sandbox/tenants (what the pytest plugin does per test) and
prints p50/p99/max of their latency as the client sees it, beside GET /health on the same
connection (the HTTP share). The server's RSS (from /proc) before and after says what
100 idle tenants cost; then every tenant is deleted and the RSS read again.

Target: creation p99 under 5 ms.

    python bench/tenants.py [--count 1000] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).parent))

from common import percentile, report  # noqa: E402
from throughput import SANDBOX, Server  # noqa: E402

TARGET_P99_MS = 5.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def timed(session: aiohttp.ClientSession, method: str, path: str, **kwargs) -> tuple[float, dict]:
    started = time.perf_counter()
    async with session.request(method, path, **kwargs) as response:
        body = await response.json()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path} answered {response.status}: {body}")
    return (time.perf_counter() - started) * 1000, body


async def run(count: int, server: Server) -> list[tuple[str, bool]]:
    async with aiohttp.ClientSession(base_url=server.url, headers=server.credentials) as session:
        for _ in range(20):  # warm the connection and the code paths
            await timed(session, "GET", "/health")
        health = [(await timed(session, "GET", "/health"))[0] for _ in range(count)]
        before = rss_mb(server.child.pid)
        created, names = [], []
        for number in range(count):
            ms, body = await timed(session, "POST", "/_sandbox/tenants",
                                   json={"name": f"bench-{number}"})
            created.append(ms)
            names.append(body["data"]["name"])
        after = rss_mb(server.child.pid)
        for name in names:
            await timed(session, "DELETE", f"/_sandbox/tenants/{name}")
        deleted = rss_mb(server.child.pid)
    p50, p99 = percentile(created, 50), percentile(created, 99)
    per_100 = (after - before) / count * 100
    print(f"GET /health, {count:,} one after another: p50 {percentile(health, 50):.2f} ms, "
          f"p99 {percentile(health, 99):.2f} ms")
    print(f"POST /_sandbox/tenants, {count:,} one after another: p50 {p50:.2f} ms, "
          f"p99 {p99:.2f} ms, max {max(created):.2f} ms")
    print(f"server RSS: {before:.1f} MB before, {after:.1f} MB with {count:,} idle tenants "
          f"({per_100:.1f} MB per 100), {deleted:.1f} MB after deleting them")
    return [(f"tenant creation p99 {p99:.2f} ms over {count:,} (target < {TARGET_P99_MS:g} ms; "
             f"{per_100:.1f} MB RSS per 100 idle tenants)", p99 < TARGET_P99_MS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="tenants to create")
    parser.add_argument("--strict", action="store_true", help="exit 1 on FAIL")
    args = parser.parse_args()
    env = {"PAYROLL_SANDBOX_MAX_TENANTS": str(args.count + 10),
           "PAYROLL_SANDBOX_MAX_TENANTS_PER_MAKER": str(args.count + 10)}
    with tempfile.TemporaryDirectory() as folder:
        server = Server("sandbox", SANDBOX, Path(folder) / "sandbox.log", env)
        try:
            results = asyncio.run(run(args.count, server))
        finally:
            server.stop()
    report(results, args.strict)


if __name__ == "__main__":
    main()
