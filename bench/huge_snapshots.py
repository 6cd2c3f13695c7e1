"""What a huge hostile snapshot costs a running sandbox (issue 37, point 3).

Starts `python -m payroll_sandbox serve --clock manual` (a real process), takes the snapshot
of a fresh tenant as a header, and restores documents of 64 MiB and 256 MiB built to hurt:

- `array`: a top level that is not an object (`[0,0,0,...]`);
- `users`: a good header with millions of users (more than --max-users allows);
- `tasks`: a good header with tasks that are each wrong (every record at fault);
- `events`: a good header with one event whose body is huge (a legal count, one big value).

For each: the answer, how long it took, the server's peak RSS (VmHWM, reset before each
restore) and its RSS once the refusal came back, and the longest wait of GET /health
polled every 10 ms meanwhile (the loop's stall). Then two large restores at once.

Baseline: the server's RSS at rest before the first restore. Targets: every document is
refused (422 or 413); the peak adds at most 8 times the body over the baseline (a legal
restore peaks at about 6); after the refusal the RSS is back within 64 MB of the
baseline; the longest /health wait < 1.5 s; each refusal within 30 s. Before issue 37
(64 MiB, this machine): `users` 236 s, peak +3,613 MB, /health waited 10.3 s; `tasks`
312 s, +5,873 MB, 24.6 s; `array` 116 s.

The restore limit grows with --max-tasks (152 MiB at the default 10,000): at the default
a 256 MiB body is a 413 before it is read; `--max-tasks 30000` lets it be parsed.

    python bench/huge_snapshots.py [--sizes 64,256] [--max-tasks 10000] [--strict]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import report  # noqa: E402
from hostile import Sandbox, health_waits, reset_peak, status_of  # noqa: E402

MIB = 1 << 20


def documents(header: dict, size: int) -> dict[str, bytes]:
    """The hostile documents of about `size` bytes each."""
    head = {k: v for k, v in header.items() if k not in ("users", "tasks", "events")}
    opening = json.dumps(head)[:-1].encode()

    def padded(section: str, item: bytes) -> bytes:
        count = max(1, (size - len(opening)) // (len(item) + 1))
        return opening + f', "{section}": ['.encode() + b",".join([item] * count) + b"]}"

    task = json.dumps({"id": "x" * 24, "status": "nowhere", "history": [1, 2, 3]}).encode()
    event = {**(header["events"][0] if header.get("events") else {"id": "e"}), "body": "x" * size}
    return {
        "array": b"[" + b",".join([b"0"] * (size // 2)) + b"]",
        "users": padded("users", b'{"identifier":"u","created":0}'),
        "tasks": padded("tasks", task),
        "events": opening + b', "events": [' + json.dumps(event).encode() + b"]}",
    }


def restore(url: str, headers: dict, body: bytes) -> tuple[int, str]:
    request = urllib.request.Request(f"{url}/_sandbox/snapshot", data=body, method="POST",
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status, response.read()[:200].decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read()[:300].decode()


def watched(url: str, work) -> tuple[object, float]:
    """`work()` run with GET /health polled every 10 ms; its result and the longest wait."""
    with health_waits(url) as waits:
        result = work()
    return result, max(waits, default=0.0)


def measure(sizes: list[int], max_tasks: int) -> list[tuple[str, bool]]:
    sandbox = Sandbox(max_tasks)
    pid, results = sandbox.process.pid, []
    try:
        with urllib.request.urlopen(urllib.request.Request(
                f"{sandbox.url}/_sandbox/snapshot", headers=sandbox.headers)) as response:
            header = json.loads(response.read())["data"]
        time.sleep(0.5)
        base = status_of(pid)["VmRSS"]
        print(f"baseline: RSS {base} MB at rest")
        for mib in sizes:
            for kind, body in documents(header, mib * MIB).items():
                reset_peak(pid)
                started = time.perf_counter()
                (status, answer), stall = watched(
                    sandbox.url, lambda: restore(sandbox.url, sandbox.headers, body))
                took = time.perf_counter() - started
                time.sleep(0.2)
                after = status_of(pid)
                added = (after["VmHWM"] - base) / (len(body) / MIB)
                print(f"{mib} MiB {kind:<6} ({len(body) / MIB:.0f} MiB): {status} in {took:.1f} s; "
                      f"peak {after['VmHWM']} MB (+{after['VmHWM'] - base}, {added:.1f} x the "
                      f"body), after {after['VmRSS']} MB; longest /health wait "
                      f"{stall * 1000:.0f} ms  {answer[:120]!r}")
                results.append((f"{mib} MiB {kind}: refused ({status}) in {took:.1f} s "
                                "(target < 30)", status in (413, 422) and took < 30))
                results.append((f"{mib} MiB {kind}: peak +{after['VmHWM'] - base} MB, "
                                f"{added:.1f} x the body (target <= 8)", added <= 8))
                results.append((f"{mib} MiB {kind}: RSS after {after['VmRSS']} MB, "
                                f"+{after['VmRSS'] - base} (target < 64)",
                                after["VmRSS"] - base < 64))
                results.append((f"{mib} MiB {kind}: longest /health wait {stall:.2f} s "
                                "(target < 1.5)", stall < 1.5))
        # Two large restores at once: one runs, the other waits its turn (or is told to
        # come back), so the peak is one body's, not two.
        body = documents(header, sizes[0] * MIB)["tasks"]
        reset_peak(pid)
        started = time.perf_counter()

        def both() -> list[tuple[int, str]]:
            answers: list = [None, None]
            threads = [threading.Thread(target=lambda n=n: answers.__setitem__(
                n, restore(sandbox.url, sandbox.headers, body))) for n in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return answers

        answers, stall = watched(sandbox.url, both)
        peak = status_of(pid)["VmHWM"]
        added = (peak - base) / (len(body) / MIB)
        print(f"two {sizes[0]} MiB restores at once: {[a[0] for a in answers]} in "
              f"{time.perf_counter() - started:.1f} s; peak {peak} MB ({added:.1f} x one body); "
              f"longest /health wait {stall * 1000:.0f} ms")
        results.append((f"two restores at once: peak {added:.1f} x one body (target <= 8)",
                         added <= 8))
    finally:
        sandbox.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="64,256", help="MiB, comma-separated")
    parser.add_argument("--max-tasks", type=int, default=10_000)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    report(measure([int(s) for s in args.sizes.split(",")], args.max_tasks), args.strict)


if __name__ == "__main__":
    main()
