"""What bodies full of unknown fields cost a running sandbox (issue 37, point 2).

Starts `python -m payroll_sandbox serve --clock manual` (a real process) and sends it
200 bodies of about 1 MiB, each a task creation with 75,000 fields it does not know (the
server ignores them and warns, as production does), with GET /health polled every 10 ms
meanwhile. Reports the server's RSS at rest before (the baseline), its peak and its RSS
after (from /proc), the longest /health wait, the time per request, and the size of the
journal's entry for one such request and of the warning header.

Targets: RSS after within 64 MB of the baseline; the longest /health wait < 0.5 s; a
journal entry under 16 KiB. Before issue 37: RSS 639 -> 2,411 MB over the 200 requests,
/health waiting up to 3.8 s, 8.9 MB of warnings kept per request.

    python bench/unknown_fields.py [--requests 200] [--fields 75000] [--strict]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import report  # noqa: E402
from hostile import Sandbox, reset_peak, status_of  # noqa: E402
from huge_snapshots import watched  # noqa: E402


def send(url: str, headers: dict, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(f"{url}/task/create", data=body, method="POST",
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def measure(requests: int, fields: int) -> list[tuple[str, bool]]:
    sandbox = Sandbox(10_000)
    pid = sandbox.process.pid
    body = json.dumps({"identifier": "bulk", "company": "6410a0000000000000000001",
                       "product": "deposit",
                       **{f"u{n:x}": 0 for n in range(fields)}}).encode()
    try:
        time.sleep(0.5)
        base = status_of(pid)["VmRSS"]
        reset_peak(pid)
        answers: list[tuple[int, dict]] = []
        started = time.perf_counter()

        def all_of_them() -> None:
            for _ in range(requests):
                answers.append(send(sandbox.url, sandbox.headers, body))

        _, stall = watched(sandbox.url, all_of_them)
        took = (time.perf_counter() - started) / requests
        time.sleep(0.5)
        after = status_of(pid)
        with urllib.request.urlopen(urllib.request.Request(
                f"{sandbox.url}/_sandbox/requests?limit=1&path=/task/create",
                headers=sandbox.headers)) as response:
            entry = json.loads(response.read())["data"][0]
        entry_bytes = len(json.dumps(entry))
        warning = answers[-1][1].get("x-sandbox-warning", "")
        print(f"{requests} bodies of {len(body) / 2**20:.2f} MiB with {fields} unknown fields: "
              f"statuses {sorted({a[0] for a in answers})}, {took * 1000:.0f} ms a request; "
              f"RSS {base} MB before, peak {after['VmHWM']} MB, after {after['VmRSS']} MB "
              f"(+{after['VmRSS'] - base}); longest /health wait {stall * 1000:.0f} ms; "
              f"journal entry {entry_bytes} bytes; warning header {len(warning)} bytes")
        return [
            (f"every body read and answered ({sorted({a[0] for a in answers})})",
             {a[0] for a in answers} == {200}),
            (f"RSS after {requests} requests +{after['VmRSS'] - base} MB (target < 64)",
             after["VmRSS"] - base < 64),
            (f"longest /health wait {stall:.2f} s (target < 0.5)", stall < 0.5),
            (f"journal entry {entry_bytes} bytes (target < 16384)", entry_bytes < 16384),
        ]
    finally:
        sandbox.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--fields", type=int, default=75_000)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    report(measure(args.requests, args.fields), args.strict)


if __name__ == "__main__":
    main()
