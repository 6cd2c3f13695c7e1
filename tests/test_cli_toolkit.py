"""Issue 12, the terminal: --version, scenarios that add to the bundled ones, export, and
validation that reports every problem of what `serve` would load."""

from __future__ import annotations

from importlib.metadata import version

from conftest import ACME, WALMART, run_cli
from test_cli import copy_fixtures, post, serving

from payroll_sandbox.settings import bundled_dir

SLOW_SUCCESS = """\
description: "Completes after a day."
steps:
  - after: 1
    status: processing
  - after: 86400
    status: completed
"""


def test_version_prints_the_installed_version():
    result = run_cli("--version")
    assert result.returncode == 0
    from payroll_sandbox import SPEC_REVISION

    assert result.stdout.strip() == (f"payroll-sandbox {version('payroll-sandbox')} "
                                     f"(spec {SPEC_REVISION})")


def test_a_scenarios_folder_adds_to_the_bundled_ones_and_replaces_by_name(tmp_path):
    (tmp_path / "day-long-success.yaml").write_text(SLOW_SUCCESS)
    (tmp_path / "auth-expired.yaml").write_text(SLOW_SUCCESS)  # replaces the bundled one
    with serving("--clock", "manual", "--scenarios", str(tmp_path)) as (base, *_):
        for scenario in ("day-long-success", "auth-expired", "happy-path"):
            status, body = post(base + "/task/create", {"identifier": "u", "company": WALMART,
                                                         "product": "deposit",
                                                         "scenario": scenario}, ACME)
            assert status == 200, (scenario, body)
    listing = run_cli("scenarios", "list", str(tmp_path)).stdout.splitlines()
    mine = {line.split()[0] for line in listing if "yours" in line.split()[1]}
    assert mine == {"day-long-success", "auth-expired"}
    assert len(listing) == len(list(bundled_dir("scenarios").glob("*.yaml"))) + 1


def test_scenarios_validate_reports_every_problem_of_every_file(tmp_path):
    (tmp_path / "two-faults.yaml").write_text("""\
description: "Fails twice."
steps:
  - after: 1
    status: completed
    reason: auth-expired
  - after: 1
    connected: true
""")
    (tmp_path / "no-end.yaml").write_text('description: "Never ends."\nsteps:\n'
                                          "  - after: 1\n    status: processing\n")
    result = run_cli("scenarios", "validate", str(tmp_path))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert any("two-faults.yaml: $.steps[0].reason" in line for line in lines), lines
    assert any("two-faults.yaml: $.steps[1].connected" in line for line in lines), lines
    assert any("no-end.yaml: $.steps" in line for line in lines), lines


def test_scenarios_validate_checks_what_serve_checks(tmp_path):
    """A happy-path of the wrong kind once validated and then stopped `serve`."""
    (tmp_path / "happy-path.yaml").write_text('description: "x"\nkind: processor-link\nsteps:\n'
                                              "  - after: 1\n    stage: pull-transactions\n")
    validated = run_cli("scenarios", "validate", str(tmp_path))
    served = run_cli("serve", "--port", "0", "--scenarios", str(tmp_path))
    assert validated.returncode == served.returncode == 2
    assert "happy-path" in validated.stderr and "happy-path" in served.stderr


def test_scenarios_export_copies_the_bundled_ones_and_keeps_yours(tmp_path):
    target = tmp_path / "mine"
    result = run_cli("scenarios", "export", str(target))
    assert result.returncode == 0, result.stderr
    bundled = sorted(p.name for p in bundled_dir("scenarios").glob("*.yaml"))
    assert sorted(p.name for p in target.glob("*.yaml")) == bundled
    (target / "happy-path.yaml").write_text(SLOW_SUCCESS)
    again = run_cli("scenarios", "export", str(target))
    assert again.returncode == 2 and "--force" in again.stderr
    assert (target / "happy-path.yaml").read_text() == SLOW_SUCCESS
    assert run_cli("scenarios", "export", str(target), "--force").returncode == 0
    assert (target / "happy-path.yaml").read_text() != SLOW_SUCCESS
    assert run_cli("scenarios", "validate", str(target)).returncode == 0


def test_fixtures_validate_catches_an_unknown_product_on_an_account(tmp_path):
    folder = copy_fixtures(tmp_path)
    accounts = folder / "accounts.yaml"
    accounts.write_text(accounts.read_text().replace("products: [deposit, verify,",
                                                     "products: [deposit, verfy,", 1))
    result = run_cli("fixtures", "validate", str(folder))
    assert result.returncode == 2
    assert "$.accounts[0].products[1]: unknown product 'verfy'" in result.stderr


def test_the_commands_that_only_read_files_start_without_aiohttp():
    """`fixtures validate` and `scenarios list|validate` (a pre-commit hook's commands) load
    the files as `serve` does, without the server's imports: a third of a second, not one."""
    import subprocess
    import sys

    for command in (["fixtures", "validate"], ["scenarios", "validate"], ["scenarios", "list"]):
        code = ("import sys; from payroll_sandbox.tools.cli import main; code = main(sys.argv[1:]); "
                "print('aiohttp' in sys.modules, code)")
        result = subprocess.run([sys.executable, "-c", code, *command], capture_output=True,
                                text=True, timeout=60)
        assert result.stdout.splitlines()[-1] == "False 0", (command, result.stdout, result.stderr)
