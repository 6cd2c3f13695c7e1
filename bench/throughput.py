"""Requests per second of the sandbox against a bare aiohttp server answering the same bytes.

Starts `python -m payroll_sandbox serve --clock manual --port 0` (a real process, as users
run it, with PAYROLL_SANDBOX_MAX_TASKS raised: see SANDBOX_ENV), prepares what the
requests need (a company id, a task), and sends each request once to capture the
sandbox's answer: status, content type and body bytes.
bench/bare_server.py then serves exactly those bytes for the same method and path,
on the same event loop kind (`--loop`, passed to both: asyncio by default, as `serve`
does), reading each request body as the sandbox does.

wrk (-t2 -c32, --duration seconds, POST bodies through a wrk Lua script) loads
each endpoint of each server in turn: one short warm-up, then --rounds interleaved
rounds (sandbox then bare, then bare then sandbox, ...) so both see the same
machine. The figure of each server is the median of its rounds; the ratio is
sandbox / bare.

    POST /company/search      {"query": "walmart"}                    target >= 0.40
    GET  /company/{id}        the first search result                 target >= 0.40
    GET  /health                                                       target >= 0.60
    POST /access-token        {"identifier": "bench-user"}            target >= 0.40
    POST /task/create         identifier + company + product          target >= 0.35
    GET  /task/{id}           a task created before the rounds        target >= 0.40

wrk is Debian's package `wrk`; when it is missing the script runs
`apt-get install -y wrk` (as root) or says how to install it.

    python bench/throughput.py [--duration 3] [--rounds 3] [--loop asyncio|uvloop] [--strict]

Exits 0 whatever the result, unless --strict is given (then 1 on FAIL).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from startup import HOST, SERVING, START_TIMEOUT, read_line, stop  # noqa: E402

THREADS = 2
CONNECTIONS = 32
ROUNDS = 3
DURATION = 3.0
WARMUP = 1.0

BARE = [sys.executable, str(Path(__file__).with_name("bare_server.py"))]

# On a manual clock every created task stays queued with its steps on the timeline, so the
# rounds would reach the default bounds (10,000 tasks, 100,000 jobs, 10,000 accounts the
# tasks may link per tenant) and answer 429: all are raised above what the rounds create,
# so task create measures creating a task, not a full tenant.
SANDBOX_ENV = {"PAYROLL_SANDBOX_MAX_TASKS": "1000000", "PAYROLL_SANDBOX_MAX_JOBS": "10000000",
               "PAYROLL_SANDBOX_MAX_LINKED_ACCOUNTS": "1000000"}
SANDBOX = [sys.executable, "-m", "payroll_sandbox", "serve", "--clock", "manual", "--host", HOST,
           "--port", "0"]
REQUESTS_PER_SEC = re.compile(r"Requests/sec:\s+([\d.]+)")
NON_2XX = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")

# No proxy from the environment may stand between us and 127.0.0.1.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: str
    body: dict | None
    target: float


@dataclass(frozen=True)
class Load:
    requests_per_sec: float
    errors: int  # non-2xx answers and socket errors


# ---------------------------------------------------------------- wrk


def ensure_wrk() -> str | None:
    """The path of wrk, installing Debian's package when it is missing and we may."""
    found = shutil.which("wrk")
    if found or not shutil.which("apt-get") or os.geteuid() != 0:
        return found
    print("wrk is missing: apt-get install -y wrk", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "wrk"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        subprocess.run(install, env=env, capture_output=True)
    return shutil.which("wrk")


def lua_script(endpoint: Endpoint, headers: dict[str, str]) -> str:
    """The wrk script that sends `endpoint`'s method, headers and body."""
    lines = [f"wrk.method = {lua_string(endpoint.method)}"]
    for name, value in headers.items():
        lines.append(f"wrk.headers[ {lua_string(name)} ] = {lua_string(value)}")
    if endpoint.body is not None:
        lines.append('wrk.headers["content-type"] = "application/json"')
        lines.append(f"wrk.body = {lua_string(json.dumps(endpoint.body))}")
    return "\n".join(lines) + "\n"


def lua_string(text: str) -> str:
    return "[==[" + text + "]==]"


def run_wrk(wrk: str, url: str, script: Path, seconds: float) -> Load:
    command = [wrk, f"-t{THREADS}", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s",
               "-s", str(script), url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    match = REQUESTS_PER_SEC.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"wrk failed on {url}: {done.stdout}{done.stderr}")
    errors = sum(int(n) for n in NON_2XX.findall(done.stdout))
    for counts in SOCKET_ERRORS.findall(done.stdout):
        errors += sum(int(n) for n in counts)
    return Load(float(match.group(1)), errors)


# ---------------------------------------------------------------- servers


class Server:
    """A server process started with `command`, serving until stop()."""

    def __init__(self, label: str, command: list[str], log: Path,
                 env: dict[str, str] | None = None) -> None:
        self.label = label
        self._log = open(log, "wb")
        self.child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._log,
                                      text=True, env={**os.environ, **(env or {})})
        line = read_line(self.child, time.perf_counter() + START_TIMEOUT)
        match = SERVING.search(line)
        if match is None:
            stop(self.child)
            raise RuntimeError(f"unexpected first line from {label}: {line!r}")
        self.url = match["url"]
        self.credentials = ({"x-api-key": match["key"], "x-api-secret": match["secret"]}
                            if match["key"] else {})

    def stop(self) -> None:
        stop(self.child)
        self._log.close()


def call(url: str, method: str, body: dict | None, headers: dict[str, str]) -> tuple[int, str, bytes]:
    """One request: (status, content type, body bytes)."""
    data = None if body is None else json.dumps(body).encode()
    sent = {**headers, **({"content-type": "application/json"} if data is not None else {})}
    request = urllib.request.Request(url, data=data, headers=sent, method=method)
    try:
        with _opener.open(request, timeout=10) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def endpoints(sandbox: Server) -> list[Endpoint]:
    """The measured requests, with the ids they need taken from the sandbox."""
    search = {"query": "walmart"}
    status, _, payload = call(sandbox.url + "/company/search", "POST", search, sandbox.credentials)
    companies = json.loads(payload)["data"]
    if status != 200 or not companies:
        raise RuntimeError(f"POST /company/search answered {status}: {payload[:300]!r}")
    company = companies[0]
    product = company["connector"]["availableProducts"][0]
    task_body = {"identifier": "bench-user", "company": company["_id"], "product": product}
    status, _, payload = call(sandbox.url + "/task/create", "POST", task_body, sandbox.credentials)
    if status != 200:
        raise RuntimeError(f"POST /task/create answered {status}: {payload[:300]!r}")
    task_id = json.loads(payload)["data"]["id"]
    return [
        Endpoint("search", "POST", "/company/search", search, 0.40),
        Endpoint("company details", "GET", f"/company/{company['_id']}", None, 0.40),
        Endpoint("health", "GET", "/health", None, 0.60),
        Endpoint("access-token", "POST", "/access-token", {"identifier": "bench-user"}, 0.40),
        Endpoint("task create", "POST", "/task/create", task_body, 0.35),
        Endpoint("task get", "GET", f"/task/{task_id}", None, 0.40),
    ]


def capture(sandbox: Server, measured: list[Endpoint]) -> list[dict]:
    """The sandbox's answer to each request, as bare_server.py --responses replays it."""
    responses = []
    for endpoint in measured:
        status, content_type, body = call(sandbox.url + endpoint.path, endpoint.method,
                                          endpoint.body, sandbox.credentials)
        if status >= 300:
            raise RuntimeError(f"{endpoint.method} {endpoint.path} answered {status}: "
                               f"{body[:300]!r}")
        responses.append({"method": endpoint.method, "path": endpoint.path, "status": status,
                          "content_type": content_type,
                          "headers": {"access-control-allow-origin": "*"},
                          "body": body.decode()})
    return responses


# ---------------------------------------------------------------- main


def measure(args: argparse.Namespace, wrk: str, folder: Path) -> int:
    loop = ["--loop", args.loop]
    sandbox = Server("sandbox", [*SANDBOX, *loop], folder / "sandbox.log", SANDBOX_ENV)
    bare = None
    try:
        measured = endpoints(sandbox)
        responses = folder / "responses.json"
        responses.write_text(json.dumps(capture(sandbox, measured)))
        bare = Server("bare aiohttp", [*BARE, "--responses", str(responses), *loop],
                      folder / "bare.log")
        scripts = {}
        for number, endpoint in enumerate(measured):
            scripts[endpoint.name] = folder / f"{number}.lua"
            scripts[endpoint.name].write_text(lua_script(endpoint, sandbox.credentials))

        print(f"wrk -t{THREADS} -c{CONNECTIONS} -d{args.duration:g}s, {args.rounds} interleaved "
              f"rounds after a {WARMUP:g}s warm-up; event loop: {args.loop}; "
              f"{os.cpu_count()} cores shared by wrk and the server\n")
        for endpoint in measured:  # warm-up, unmeasured
            for server in (sandbox, bare):
                run_wrk(wrk, server.url + endpoint.path, scripts[endpoint.name], WARMUP)
        loads: dict[tuple[str, str], list[Load]] = {}
        for round_number in range(args.rounds):
            order = (sandbox, bare) if round_number % 2 == 0 else (bare, sandbox)
            for endpoint in measured:
                for server in order:
                    load = run_wrk(wrk, server.url + endpoint.path, scripts[endpoint.name],
                                   args.duration)
                    loads.setdefault((endpoint.name, server.label), []).append(load)
            print(f"round {round_number + 1}: " + ", ".join(
                f"{e.name} {loads[(e.name, 'sandbox')][-1].requests_per_sec:,.0f}/"
                f"{loads[(e.name, 'bare aiohttp')][-1].requests_per_sec:,.0f}"
                for e in measured), flush=True)
    finally:
        sandbox.stop()
        if bare is not None:
            bare.stop()

    print(f"\n{'endpoint':<17}{'sandbox req/s':>14}{'bare req/s':>12}{'ratio':>8}"
          f"{'target':>9}  result")
    failed, checks = [], []
    for endpoint in measured:
        ours = loads[(endpoint.name, "sandbox")]
        theirs = loads[(endpoint.name, "bare aiohttp")]
        sandbox_rps = statistics.median(load.requests_per_sec for load in ours)
        bare_rps = statistics.median(load.requests_per_sec for load in theirs)
        ratio = sandbox_rps / bare_rps
        errors = sum(load.errors for load in ours + theirs)
        passed = ratio >= endpoint.target and errors == 0
        if not passed:
            failed.append(endpoint.name)
        note = f"  ({errors} error answers)" if errors else ""
        print(f"{endpoint.name:<17}{sandbox_rps:>14,.0f}{bare_rps:>12,.0f}{ratio:>8.2f}"
              f"{'>= ' + format(endpoint.target, '.2f'):>9}  {'PASS' if passed else 'FAIL'}{note}")
        checks.append((f"{endpoint.name} {ratio:.2f} of bare aiohttp ({sandbox_rps:,.0f} vs "
                       f"{bare_rps:,.0f} req/s; target >= {endpoint.target:.2f}){note}", passed))
    print()
    for line, passed in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {line}")
    return 1 if args.strict and failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=DURATION,
                        help="seconds of each wrk run (whole seconds)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio",
                        help="event loop of both servers (uvloop: the sandbox's uvloop extra)")
    parser.add_argument("--strict", action="store_true", help="exit 1 on FAIL")
    args = parser.parse_args(argv)

    wrk = ensure_wrk()
    if wrk is None:
        print("FAIL: wrk is not installed (Debian: apt-get install -y wrk)")
        return 1 if args.strict else 0
    with tempfile.TemporaryDirectory(prefix="throughput-") as folder:
        try:
            return measure(args, wrk, Path(folder))
        except RuntimeError as error:
            print(f"\n{error}\n\nFAIL: could not measure throughput (see above)")
            return 1 if args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
