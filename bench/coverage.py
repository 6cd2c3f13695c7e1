"""What the coverage report (`--payroll-sandbox-coverage=FILE`) costs a customer's suite.

A 40-test customer suite (each test: a tenant, a receiver, a deposit task under a scenario
of the catalog run to its end, the webhooks waited on), run in fresh pytest processes,
alternating with and without the report so both see the same machine load. The report
reads each tenant's tally (GET /_sandbox/coverage) before the tenant goes, merges them and
writes the file.

Target: median(with the report) <= 1.05 x median(without).

    python bench/coverage.py [--runs 5] [--strict]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import report  # noqa: E402

TARGET = 1.05
TESTS = 40
SUITE = f"""
import pytest

SCENARIOS = ["happy-path", "auth-expired", "connection-error", "user-abandon",
             "system-unavailable", "unknown-failure", "device-disconnected", "mfa-then-success"]

@pytest.mark.parametrize("number", range({TESTS}))
def test_a_deposit(payroll_sandbox, webhook_receiver, number):
    task = payroll_sandbox.post("/task/create", {{
        "identifier": f"user-{{number}}", "company": "6410a0000000000000000001",
        "product": "deposit", "scenario": SCENARIOS[number % len(SCENARIOS)]}})
    payroll_sandbox.run_until_idle()
    webhook_receiver.wait_for("task-workflow-finished", task=task["id"])
"""
FLAGS = ["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:schemathesis",
         "-p", "no:hypothesispytest", "-p", "no:faker", "-n", "0"]


def timed(folder: Path, *extra: str) -> float:
    started = time.perf_counter()
    ran = subprocess.run([sys.executable, "-m", "pytest", *FLAGS, *extra], cwd=folder,
                         capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if ran.returncode != 0:
        raise SystemExit(f"the suite failed:\n{ran.stdout}\n{ran.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        (project / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
        (project / "test_suite.py").write_text(SUITE)
        timed(project)  # a first run warms the load cache and the bytecode
        without, with_report = [], []
        for _ in range(args.runs):
            without.append(timed(project))
            with_report.append(timed(project, "--payroll-sandbox-coverage=coverage.json"))
        document = json.loads((project / "coverage.json").read_text())
    base, cost = statistics.median(without), statistics.median(with_report)
    print(json.dumps({"tests": TESTS, "runs": args.runs, "withoutS": round(base, 3),
                      "withReportS": round(cost, 3), "ratio": round(cost / base, 4),
                      "tenants": document["tenants"], "percent": document["percent"]}))
    report([(f"the report costs {100 * (cost / base - 1):+.1f}% of a {TESTS}-test suite's "
             f"wall time ({cost:.2f} s with it, {base:.2f} s without; target at most "
             f"{100 * (TARGET - 1):.0f}%)", cost <= TARGET * base),
            (f"every test's tenant was read ({document['tenants']} of {TESTS})",
             document["tenants"] == TESTS)], args.strict)


if __name__ == "__main__":
    main()
