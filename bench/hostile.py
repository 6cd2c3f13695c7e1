"""What hostile input costs a running sandbox (issue 22): memory and event-loop stalls.

Starts `python -m payroll_sandbox serve --clock manual` (a real process) and measures it
from /proc (VmRSS, and VmHWM, the peak, reset before each step via clear_refs):

1. A receiver that answers 200 and streams 1 GiB: the server's peak RSS over one delivery
   and how long the attempt took (it reads at most 4 KiB, then closes the connection).
2. The largest snapshot a full tenant makes: a tenant with --max-tasks tasks (every one
   completed, so each leaves a linked account with its records: --max-linked-accounts the
   same), --max-tokens tokens and --max-events events with their deliveries and failed
   attempts; its size sets the default restore limit (snapshot.MAX_DOCUMENT_BYTES).
3. Restoring that snapshot: the server's peak RSS above its RSS before, as a multiple of
   the body, and the longest wait of GET /health polled every 10 ms meanwhile (the loop's
   stall; the parse, checks and build run in a worker thread).

Baseline: the RSS of the same server at rest after the fill (so the peaks are what the
step adds). Targets: the 1 GiB receiver adds < 50 MB and ends within the 15 s timeout; the
restore peaks under 20 times the body; the longest /health wait under 1.5 s. (The parse,
checks and build hold the loop about 0.1 s at most, measured in process; what remains is
the one full collection of the heap the restore grew by ~0.8 GB, about 1 s under CPython,
as a tenant that grew that big by itself would cost.)

    python bench/hostile.py [--tasks 10000] [--save FILE] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import report, serve_hook  # noqa: E402

HOST = "127.0.0.1"
GIB = 1 << 30


def status_of(pid: int) -> dict[str, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) // 1024  # MB
    return fields


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


@contextmanager
def health_waits(url: str) -> Iterator[list[float]]:
    """GET /health polled every 10 ms from a thread while the block runs: how long each
    answer took (the longest is the event loop's longest stall)."""
    waits: list[float] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            started = time.perf_counter()
            urllib.request.urlopen(f"{url}/health", timeout=120).read()
            waits.append(time.perf_counter() - started)
            time.sleep(0.01)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        yield waits
    finally:
        done.set()
        poller.join()


class Sandbox:
    def __init__(self, tasks: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "payroll_sandbox", "serve", "--clock", "manual", "--host",
             HOST, "--port", "0", "--max-tasks", str(tasks), "--max-linked-accounts",
             str(tasks), "--seed", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline().split()
        self.url = line[2]
        fields = dict(part.split("=", 1) for part in line[3:])
        self.headers = {"x-api-key": fields["x-api-key"], "x-api-secret": fields["x-api-secret"],
                        "content-type": "application/json"}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


async def streaming_receiver() -> tuple[object, str, dict]:
    from aiohttp import web

    sent = {"bytes": 0}

    async def hook(request):
        await request.read()
        response = web.StreamResponse(status=200)
        await response.prepare(request)
        chunk = b"x" * (1 << 20)
        try:
            while sent["bytes"] < GIB:
                await response.write(chunk)
                sent["bytes"] += len(chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response

    runner, url = await serve_hook(hook)
    return runner, url, sent


async def call(session, sandbox: Sandbox, method: str, path: str, body=None, **kwargs):
    async with session.request(method, sandbox.url + path, headers=sandbox.headers,
                               data=body if body is None or isinstance(body, bytes)
                               else json.dumps(body),
                               **kwargs) as response:
        data = await response.read()
        assert response.status < 400, (path, response.status, data[:300])
        return data


async def measure(tasks: int, save: str | None = None) -> list[tuple[str, bool]]:
    import aiohttp

    sandbox = Sandbox(tasks)
    pid = sandbox.process.pid
    results = []
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
            # 1. a receiver streaming 1 GiB
            runner, url, sent = await streaming_receiver()
            await call(session, sandbox, "PUT", "/_sandbox/webhooks/endpoints",
                       {"endpoints": [{"url": url}]})
            before = status_of(pid)["VmRSS"]
            reset_peak(pid)
            started = time.perf_counter()
            await call(session, sandbox, "POST", "/_sandbox/events/trigger",
                       {"eventType": "company-updated"})
            took = time.perf_counter() - started
            peak = status_of(pid)["VmHWM"]
            await runner.cleanup()
            print(f"1 GiB streaming receiver: RSS {before} MB before, peak {peak} MB "
                  f"(+{peak - before} MB); the attempt took {took:.2f} s; the receiver got "
                  f"{sent['bytes'] / 2**20:.0f} MiB out before the sandbox closed")
            results.append((f"1 GiB receiver adds {peak - before} MB (target < 50), "
                            f"{took:.1f} s (target < 15)", peak - before < 50 and took < 15))

            # 2. a full tenant: tasks, tokens, events, deliveries to a closed port
            await call(session, sandbox, "PUT", "/_sandbox/webhooks/endpoints",
                       {"endpoints": [{"url": "http://127.0.0.1:9/closed"}]})
            started = time.perf_counter()
            semaphore = asyncio.Semaphore(32)

            async def one(number: int) -> None:
                async with semaphore:
                    await call(session, sandbox, "POST", "/task/create", {
                        "identifier": f"user-{number}", "company": "6410a0000000000000000001",
                        "product": "deposit", "scenario": "happy-path"})
                    await call(session, sandbox, "POST", "/access-token",
                               {"identifier": f"user-{number}"})

            await asyncio.gather(*(one(n) for n in range(tasks)))
            clock = json.loads(await call(session, sandbox, "POST",
                                          "/_sandbox/clock/run-until-idle"))["data"]
            while not clock.get("complete", True):
                clock = json.loads(await call(session, sandbox, "POST",
                                              "/_sandbox/clock/run-until-idle"))["data"]
            print(f"filled a tenant with {tasks} completed tasks and tokens in "
                  f"{time.perf_counter() - started:.0f} s")
            document = await call(session, sandbox, "GET", "/_sandbox/snapshot")
            body = json.dumps(json.loads(document)["data"]).encode()
            counts = {k: len(v) for k, v in json.loads(body).items() if isinstance(v, list)}
            print(f"its snapshot: {len(body) / 2**20:.1f} MiB ({counts})")
            if save:
                Path(save).write_bytes(body)

            # 3. restoring it, with /health polled meanwhile
            rest = status_of(pid)["VmRSS"]
            reset_peak(pid)
            with health_waits(sandbox.url) as waits:
                started = time.perf_counter()
                await call(session, sandbox, "POST", "/_sandbox/snapshot", body)
                took = time.perf_counter() - started
            peak = status_of(pid)["VmHWM"]
            multiple = (peak - rest) / (len(body) / 2**20)
            print(f"restore of {len(body) / 2**20:.1f} MiB: {took:.2f} s; RSS {rest} MB at "
                  f"rest, peak {peak} MB (+{peak - rest} MB, {multiple:.1f} x the body); "
                  f"longest /health wait {max(waits) * 1000:.0f} ms over {len(waits)} polls")
            results.append((f"restore peak {multiple:.1f} x its body (target < 20)",
                            multiple < 20))
            results.append((f"longest /health wait during the restore {max(waits):.2f} s "
                            "(target < 1.5)", max(waits) < 1.5))
    finally:
        sandbox.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--save", metavar="FILE", help="keep the full tenant's snapshot here")
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    report(asyncio.run(measure(args.tasks, args.save)), args.strict)


if __name__ == "__main__":
    main()
