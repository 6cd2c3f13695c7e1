"""What the benchmarks share: peak memory, profiles, and the PASS/FAIL line."""

from __future__ import annotations

import pstats
import resource
import sys


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (ru_maxrss), in MB."""
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def print_profile(path: str) -> None:
    """The top functions of a cProfile dump, by own time, then by cumulative time."""
    print()
    stats = pstats.Stats(path)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)


async def serve(app):
    """Serves `app` on 127.0.0.1, a free port; returns (runner, base URL). Clean up the runner."""
    from aiohttp import web

    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    return runner, f"http://{host}:{port}"


async def serve_hook(handler):
    """A webhook receiver: POST /hook answered by `handler`, on 127.0.0.1, a free port;
    returns (runner, URL). Clean up the runner."""
    from aiohttp import web

    app = web.Application()
    app.router.add_post("/hook", handler)
    runner, base = await serve(app)
    return runner, f"{base}/hook"


def percentile(values: list[float], pct: float) -> float:
    """The value at `pct` percent of the sorted values (nearest rank, as wrk reports)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def report(results: list[tuple[str, bool]], strict: bool) -> None:
    """One PASS/FAIL line per (check, ok); with `strict`, exit 1 when a check failed."""
    for line, ok in results:
        print(f"{'PASS' if ok else 'FAIL'}  {line}")
    if strict and not all(ok for _, ok in results):
        sys.exit(1)
