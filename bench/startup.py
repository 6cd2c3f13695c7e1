"""Start-up time of `payroll-sandbox serve` against a bare aiohttp server.

Each start is timed from just before subprocess.Popen to the first HTTP 200 on
`POST /company/search` (body {"query": "walmart"}): the clock starts, the
server is spawned on 127.0.0.1 with port 0, its first stdout line gives the URL
(and, for the sandbox, the x-api-key / x-api-secret of the default tenant), and
the request is retried every 5 ms until it answers 200. The baseline is
bench/bare_server.py, started and polled the same way; the runs alternate so
both see the same machine load. Prints the median of --runs starts of each,
their ratio, and a breakdown of where the sandbox spends its start-up.

Both servers run with a warm bytecode cache, as an installed package does:
the children get PYTHONPYCACHEPREFIX set to a temporary folder (and
PYTHONDONTWRITEBYTECODE unset), and one unmeasured start of each fills it.
Nothing is written next to the sources.

Target: median(sandbox) / median(bare aiohttp) <= 1.5.

    python bench/startup.py [--runs 5] [--no-breakdown] [--strict]

Exits 0 whatever the result, unless --strict is given (then 1 on FAIL).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

TARGET_RATIO = 1.5
HOST = "127.0.0.1"
POLL_SECONDS = 0.005
START_TIMEOUT = 120.0
SERVING = re.compile(r"serving (?P<url>http://\S+)"
                     r"(?: environment=\S+ x-api-key=(?P<key>\S+) x-api-secret=(?P<secret>\S+))?")
BODY = json.dumps({"query": "walmart"}).encode()

SANDBOX = [sys.executable, "-m", "payroll_sandbox", "serve", "--host", HOST, "--port", "0"]
BARE = [sys.executable, str(Path(__file__).with_name("bare_server.py"))]

# No proxy from the environment may stand between us and 127.0.0.1.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class Start:
    to_line: float  # seconds from Popen to the serving line
    to_200: float   # seconds from Popen to the first 200
    attempts: int   # requests sent until the first 200
    results: int    # items in the first 200's `data`


def time_start(command: list[str], env: dict[str, str]) -> Start:
    """One start of `command`, timed to its first 200; the child is always stopped."""
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                 env=env)
        try:
            line = read_line(child, started + START_TIMEOUT)
            to_line = time.perf_counter() - started
            match = SERVING.search(line)
            if match is None:
                raise RuntimeError(f"unexpected first line from {command}: {line!r}\n"
                                   f"{tail(stderr)}")
            headers = {"content-type": "application/json"}
            if match["key"]:
                headers.update({"x-api-key": match["key"], "x-api-secret": match["secret"]})
            request = urllib.request.Request(match["url"] + "/company/search", data=BODY,
                                             headers=headers, method="POST")
            attempts = 0
            while True:
                attempts += 1
                try:
                    with _opener.open(request, timeout=5) as response:
                        if response.status == 200:
                            payload = response.read()
                            to_200 = time.perf_counter() - started
                            return Start(to_line, to_200, attempts,
                                         len(json.loads(payload).get("data", [])))
                except urllib.error.HTTPError as error:  # up, but failing: no use waiting
                    raise RuntimeError(f"HTTP {error.code} from {command}: "
                                       f"{error.read()[:300]!r}\n{tail(stderr)}") from None
                except OSError:
                    pass  # refused, reset or timed out: not serving yet
                if time.perf_counter() - started > START_TIMEOUT or child.poll() is not None:
                    raise RuntimeError(f"no 200 from {command} after {attempts} attempts\n"
                                       f"{tail(stderr)}")
                time.sleep(POLL_SECONDS)
        finally:
            stop(child)


def read_line(child: subprocess.Popen, deadline: float) -> str:
    """The child's first stdout line, or RuntimeError when it exits or the deadline passes."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(child.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=max(0.0, deadline - time.perf_counter()))
    except queue.Empty:
        raise RuntimeError(f"no serving line within {START_TIMEOUT:.0f}s") from None
    if not line:
        raise RuntimeError(f"the server exited with {child.wait()} before serving")
    return line


def stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    if child.stdout:
        child.stdout.close()


def tail(stream, limit: int = 2000) -> str:
    stream.seek(0)
    return stream.read().decode("utf-8", "replace")[-limit:]


# ---------------------------------------------------------------- breakdown


def import_breakdown(env: dict[str, str], top: int = 10) -> None:
    """`python -X importtime` over one sandbox start: import time by top-level package."""
    with tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen([sys.executable, "-X", "importtime", *SANDBOX[1:]],
                                 stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        try:
            read_line(child, time.perf_counter() + START_TIMEOUT)
        finally:
            stop(child)
        stderr.seek(0)
        report = stderr.read().decode("utf-8", "replace")
    by_package: dict[str, int] = {}  # self time (us) of every module, summed per package
    for line in report.splitlines():
        if not line.startswith("import time:"):
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        if own.strip().isdigit():
            package = name.strip().split(".")[0]
            by_package[package] = by_package.get(package, 0) + int(own)
    total = sum(by_package.values())
    print(f"\nimports up to the serving line (python -X importtime): {total / 1000:.0f} ms; "
          "by top-level package (self time):")
    for package, us in sorted(by_package.items(), key=lambda item: -item[1])[:top]:
        print(f"  {us / 1000:8.1f} ms  {package}")


def phase_breakdown() -> None:
    """build_registry's phases, in this process (imports already warm)."""
    from payroll_sandbox.load.catalog import build_companies
    from payroll_sandbox.domain.companies.companies import Catalog
    from payroll_sandbox.domain.companies.search import SearchIndex
    from payroll_sandbox.load.fixtures import load_fixtures
    from payroll_sandbox.settings import load_settings

    settings = load_settings({}, environ={})
    load_fixtures(settings.fixtures)  # warm jsonschema and faker imports out of the timings
    phases = []
    started = time.perf_counter()
    fixtures = load_fixtures(settings.fixtures)
    phases.append(("load_fixtures (YAML + JSON Schema)", time.perf_counter() - started))
    started = time.perf_counter()
    companies = build_companies(fixtures, settings.seed)
    phases.append((f"build_companies ({len(companies)} companies, "
                   f"{fixtures.catalog.get('generate', 0)} generated)", time.perf_counter() - started))
    started = time.perf_counter()
    catalog = Catalog(companies)
    SearchIndex(catalog.ordered)
    phases.append(("Catalog + SearchIndex", time.perf_counter() - started))
    print("\nbuild_registry phases, in-process with imports warm:")
    for label, seconds in phases:
        print(f"  {seconds * 1000:8.1f} ms  {label}")


# ---------------------------------------------------------------- main


def child_env(pycache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def measure(args: argparse.Namespace, env: dict[str, str]) -> int:
    servers = (("sandbox", SANDBOX), ("bare aiohttp", BARE))
    starts: dict[str, list[Start]] = {label: [] for label, _ in servers}
    print("bytecode cache: warm (PYTHONPYCACHEPREFIX in a temporary folder, "
          "filled by one unmeasured start of each server)\n")
    print(f"{'run':>3}  {'server':<13}{'serving line':>14}{'first 200':>12}{'attempts':>10}"
          f"{'results':>9}")
    try:
        for _, command in servers:  # unmeasured: fills the bytecode cache
            time_start(command, env)
        for run in range(1, args.runs + 1):
            for label, command in servers:
                start = time_start(command, env)
                starts[label].append(start)
                print(f"{run:>3}  {label:<13}{start.to_line * 1000:>11.0f} ms"
                      f"{start.to_200 * 1000:>9.0f} ms{start.attempts:>10}{start.results:>9}")
    except RuntimeError as error:
        print(f"\n{error}\n\nFAIL: could not measure start-up (see above)")
        return 1 if args.strict else 0

    sandbox = statistics.median(s.to_200 for s in starts["sandbox"])
    bare = statistics.median(s.to_200 for s in starts["bare aiohttp"])
    ratio = sandbox / bare
    print(f"\nmedian to first 200 over {args.runs} starts: sandbox {sandbox * 1000:.0f} ms, "
          f"bare aiohttp {bare * 1000:.0f} ms, ratio {ratio:.2f}")
    best_sandbox = min(s.to_200 for s in starts["sandbox"])
    best_bare = min(s.to_200 for s in starts["bare aiohttp"])
    print(f"best (least disturbed) start: sandbox {best_sandbox * 1000:.0f} ms, "
          f"bare aiohttp {best_bare * 1000:.0f} ms, ratio {best_sandbox / best_bare:.2f}")

    if not args.no_breakdown:
        import_breakdown(env)
        phase_breakdown()

    passed = ratio <= TARGET_RATIO
    print(f"\n{'PASS' if passed else 'FAIL'}: sandbox / bare aiohttp start-up ratio {ratio:.2f} "
          f"(target <= {TARGET_RATIO:.1f})")
    return 1 if args.strict and not passed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="starts of each server")
    parser.add_argument("--no-breakdown", action="store_true", help="skip the breakdown")
    parser.add_argument("--strict", action="store_true", help="exit 1 on FAIL")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="startup-pycache-") as pycache:
        return measure(args, child_env(pycache))


if __name__ == "__main__":
    sys.exit(main())
