"""Instructions per request, counted by valgrind's callgrind: a figure load cannot move.

wrk's requests per second on a shared 2-core machine move by 10% from one round to the
next; a change of a few microseconds a request hides in that. This counts the CPU
instructions one request costs instead, the same on every run: each given Python (a
virtualenv with the package installed, e.g. one of the tree before a change and one of
main) runs the app in one process with a client (`--clock manual`, PYTHONHASHSEED=0),
sends the same request 100 times and then, in a second process, 700 times; the
difference over 600 is what one request costs, start-up and the client's set-up taken
out (the client's own share stays in, the same for every Python). The app starts as `serve`
starts it (frozen out of the collector's way, the server's thresholds): otherwise a full
collection over the start-up's objects, landing in one of the two runs and not the other,
moved a row by half.

    python bench/instructions.py [--python PY ...] [--rows task health search create]

valgrind is Debian's package `valgrind`. One row takes about a minute per Python.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

REQUESTS = """
import asyncio, gc, sys
import aiohttp
from aiohttp import web
from payroll_sandbox.app import SERVER_GC_THRESHOLDS, create_app, long_lived
from payroll_sandbox.settings import load_settings

async def main(count, row):
    with long_lived():  # as `serve` starts: the app frozen out of the collector's way
        app = create_app(load_settings({"clock": "manual"}, {}))
    gc.set_threshold(*SERVER_GC_THRESHOLDS)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = "http://127.0.0.1:%d" % site._server.sockets[0].getsockname()[1]
    keys = {"x-api-key": "sandbox-key-acme-0001", "x-api-secret": "sandbox-secret-acme-0001"}
    async with aiohttp.ClientSession(headers=keys) as client:
        answer = await client.post(base + "/company/search", json={"query": "walmart"})
        company = (await answer.json())["data"][0]
        task_body = {"identifier": "bench-user", "company": company["_id"],
                     "product": company["connector"]["availableProducts"][0]}
        answer = await client.post(base + "/task/create", json=task_body)
        task = (await answer.json())["data"]["id"]
        method, path, body = {
            "task": ("GET", "/task/" + task, None), "health": ("GET", "/health", None),
            "company": ("GET", "/company/" + company["_id"], None),
            "search": ("POST", "/company/search", {"query": "walmart"}),
            "create": ("POST", "/task/create", task_body)}[row]
        for _ in range(count):
            await (await client.request(method, base + path, json=body)).read()
    await runner.cleanup()

asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
"""
COLLECTED = re.compile(r"Collected : (\d+)")


def instructions(python: str, count: int, row: str) -> int:
    """The instructions of one process that sends `count` requests of `row`."""
    run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          python, "-c", REQUESTS, str(count), row], capture_output=True,
                         text=True, env={**os.environ, "PYTHONHASHSEED": "0"})
    found = COLLECTED.search(run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"{python} {row}: {run.stderr[-800:]}")
    return int(found[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", help="a Python (repeatable); "
                        "default: this one")
    parser.add_argument("--rows", nargs="+", default=["task", "health", "search", "create"])
    arguments = parser.parse_args()
    for row in arguments.rows:
        for python in arguments.python or [sys.executable]:
            # One run first, outside valgrind: it writes the .pyc files the runs then read.
            subprocess.run([python, "-c", REQUESTS, "1", row], capture_output=True, check=True)
            per_request = (instructions(python, 700, row) - instructions(python, 100, row)) / 600
            print(f"{row:8s} {per_request:12,.0f} instructions/request  {python}", flush=True)


if __name__ == "__main__":
    main()
