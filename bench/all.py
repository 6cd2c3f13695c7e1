"""Every benchmark in one run, and one table of their checks.

Each script runs in a process of its own (as `python bench/<name>.py`), one after the
other so they do not share the machine; every PASS/FAIL line it prints becomes a row:
benchmark, the check (its figure, baseline or ratio and target, as the script states
them), and the result. The exit status is 1 with `--strict` when a check failed.

    python bench/all.py [--quick] [--strict]

`--quick` runs the long ones smaller (memory: 100,000 events; scenarios: 5,000 tasks;
refresh: 200 accounts; stored: 20,000 tasks), for a look rather than a record.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = [
    ("search", []), ("startup", []), ("throughput", []), ("stored", []), ("tenants", []), ("isolation", []),
    ("scenarios", []), ("webhooks", []), ("refresh", []), ("life_events", []), ("memory", []), ("plugin_import", []),
    ("hostile", []), ("huge_snapshots", ["--max-tasks", "30000"]), ("unknown_fields", []),
    ("autopilot", []),
]
QUICK = {"memory": ["--events", "100000"], "scenarios": ["--tasks", "5000"],
         "refresh": ["--accounts", "200"], "stored": ["--stored", "20000", "--timed", "2000"],
         "huge_snapshots": ["--sizes", "64"], "autopilot": ["--repeats", "3"]}


def run(name: str, args: list[str]) -> tuple[list[tuple[str, str]], float, int]:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, str(HERE / f"{name}.py"), *args],
                            capture_output=True, text=True, cwd=HERE.parent)
    elapsed = time.perf_counter() - started
    rows = []
    for line in result.stdout.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word.rstrip(":") in ("PASS", "FAIL"):
            rows.append((word.rstrip(":"), rest.strip()))
    if result.returncode != 0 and not rows:
        rows.append(("FAIL", f"exited {result.returncode}: {result.stderr.strip()[-200:]}"))
    return rows, elapsed, result.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a check failed")
    args = parser.parse_args()
    table = []
    for name, extra in BENCHES:
        options = [*extra, *(QUICK.get(name, []) if args.quick else [])]
        print(f"running bench/{name}.py {' '.join(options)}".rstrip(), flush=True)
        rows, elapsed, _ = run(name, options)
        table += [(name, check, verdict, elapsed) for verdict, check in rows]
    width = max(len(check) for _, check, _, _ in table)
    print(f"\n{'benchmark':11s} {'check (figure, baseline or ratio, target)':{width}s}  result")
    for name, check, verdict, _ in table:
        print(f"{name:11s} {check:{width}s}  {verdict}")
    failed = [row for row in table if row[2] == "FAIL"]
    print(f"\n{len(table) - len(failed)} of {len(table)} checks pass")
    if args.strict and failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
