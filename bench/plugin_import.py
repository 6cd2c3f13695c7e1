"""What the pytest plugin costs a customer's pytest start when a test run does not use it.

Installing payroll-sandbox registers its plugin (entry point `pytest11`), so every pytest
start in that environment imports `payroll_sandbox.kit.pytest_plugin`. The server (aiohttp,
jsonschema, the catalog, Faker) must stay out until a fixture asks for it.

Measured in fresh processes, alternating so both see the same machine load:
- baseline: `python -m pytest --collect-only -q -p no:payroll_sandbox` in an empty project;
- with the plugin: the same command without `-p no:payroll_sandbox`.
Also the import alone (`import pytest` vs `import pytest, payroll_sandbox.kit.pytest_plugin`),
and which heavy modules the import brings in (none may be: aiohttp, jsonschema, faker,
yaml, payroll_sandbox.app).

Target: median(with the plugin) - median(baseline) <= 100 ms. The package's bytecode is
compiled first, as pip does when it installs the wheel.

    python bench/plugin_import.py [--runs 15] [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import report  # noqa: E402

TARGET_MS = 100.0
HEAVY = ("aiohttp", "jsonschema", "faker", "yaml", "payroll_sandbox.app", "orjson", "rapidfuzz")


def timed(command: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return (time.perf_counter() - started) * 1000


def pair(runs: int, with_plugin: list[str], baseline: list[str], cwd: str) -> tuple[float, float]:
    """Medians in ms of `runs` alternating starts of each (one unmeasured start first)."""
    timed(with_plugin, cwd), timed(baseline, cwd)
    ours, bare = [], []
    for _ in range(runs):
        bare.append(timed(baseline, cwd))
        ours.append(timed(with_plugin, cwd))
    return statistics.median(ours), statistics.median(bare)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    python = sys.executable
    # As pip installs a wheel: the package's bytecode compiled. Without it, a machine with
    # PYTHONDONTWRITEBYTECODE=1 and an editable install compiles the plugin's modules from
    # source on every start (about 40 ms here), which no installed plugin pays.
    import payroll_sandbox

    subprocess.run([python, "-m", "compileall", "-q", str(Path(payroll_sandbox.__file__).parent)],
                   check=True, capture_output=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
    with tempfile.TemporaryDirectory() as project:
        Path(project, "test_nothing.py").write_text("def test_nothing():\n    pass\n")
        pytest = [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        start_ours, start_bare = pair(args.runs, pytest, [*pytest, "-p", "no:payroll_sandbox"],
                                      project)
        import_ours, import_bare = pair(
            args.runs, [python, "-c", "import pytest, payroll_sandbox.kit.pytest_plugin"],
            [python, "-c", "import pytest"], project)
        loaded = json.loads(subprocess.run(
            [python, "-c", "import sys, json, pytest; before = set(sys.modules); "
             "import payroll_sandbox.kit.pytest_plugin; "
             "print(json.dumps(sorted(set(sys.modules) - before)))"],
            cwd=project, check=True, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": ""}).stdout)
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY)
    added = start_ours - start_bare
    print(f"pytest start (collect-only, one test): {start_bare:.0f} ms without the plugin, "
          f"{start_ours:.0f} ms with it: +{added:.0f} ms (median of {args.runs})")
    print(f"import alone: {import_bare:.0f} ms `import pytest`, {import_ours:.0f} ms with "
          f"the plugin: +{import_ours - import_bare:.0f} ms; {len(loaded)} modules loaded")
    report([(f"plugin adds {added:.0f} ms to a pytest start (target <= {TARGET_MS:.0f} ms)",
             added <= TARGET_MS),
            (f"heavy modules imported by the plugin: {heavy or 'none'}", not heavy)],
           args.strict)


if __name__ == "__main__":
    main()
