"""The scenario matrix and the coverage report through the plugin, run as a customer runs it
(pytester, a pytest process of its own), and `exec --coverage` running a Node script: the
matrix has exactly one item per fitting scenario of the catalog for each product, a bad
filter is a collection error, `-n 2` and `-n 0` report the same totals, the gate exits 1
below its threshold and 0 at it, and a report that cannot be written is a clear error."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from calls import call
from conftest import run_cli

pytest_plugins = ["pytester"]

INI = """\
[pytest]
filterwarnings = error
"""
NETFLIX = "6410a0000000000000000060"
WALMART = "6410a0000000000000000001"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:hypothesispytest",
        "-p", "no:faker", "-p", "no:randomly", *args, timeout=240)


async def test_the_matrix_has_one_item_per_fitting_scenario_for_each_product(client, pytester):
    scenarios = (await call(client, "GET", "/_sandbox/scenarios"))["data"]
    tasks = [s for s in scenarios if s["kind"] == "task"]
    products = sorted({p for s in tasks for p in s["products"]})
    reasons = {s["name"]: [st for st in s["steps"] if st.get("status") == "failed"][-1]["reason"]
               for s in tasks if s["outcome"] == "failed"}
    pytester.makeini(INI)
    pytester.makepyfile(test_matrix="import pytest\n\n" + "\n".join(
        f"@pytest.mark.payroll_sandbox_each_scenario(product={p!r}{extra})\n"
        f"def test_{p}{suffix}(payroll_sandbox_expected):\n    pass\n"
        for p in products
        for suffix, extra in (("", ""), ("_failed", ", outcome='failed'"))) + """
@pytest.mark.payroll_sandbox_each_scenario(reason="auth-expired")
def test_by_reason(payroll_sandbox_expected):
    pass
""")
    result = run(pytester, "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    items = [line for line in result.outlines if "::" in line]
    for product in products:
        fitting = [s["name"] for s in tasks if product in s["products"]]
        failing = [name for name in fitting if name in reasons]
        assert fitting and sorted(i.split("[")[1][:-1] for i in items
                                  if f"::test_{product}[" in i) == sorted(fitting)
        assert len([i for i in items if f"::test_{product}_failed[" in i]) == len(failing)
    by_reason = [i for i in items if "::test_by_reason[" in i]
    assert len(by_reason) == sum(1 for r in reasons.values() if r == "auth-expired")


def test_every_failure_of_a_product_runs_with_its_expected_events(pytester):
    """The README's example: one test, every failure deposit can end in."""
    pytester.makeini(INI)
    pytester.makepyfile(test_failures=textwrap.dedent(f"""
        import pytest

        @pytest.mark.payroll_sandbox_each_scenario(product="deposit", outcome="failed")
        def test_the_app_handles_every_deposit_failure(payroll_sandbox, webhook_receiver,
                                                        payroll_sandbox_expected):
            task = payroll_sandbox.post("/task/create", {{
                "identifier": "u1", "company": "{WALMART}", "product": "deposit"}})
            payroll_sandbox.run_until_idle()
            got = [e["eventType"] for e in webhook_receiver.events if e.get("task") == task["id"]]
            assert got == payroll_sandbox_expected["eventTypes"]
            status = payroll_sandbox.get(f"/task/{{task['id']}}")
            assert status["status"] == payroll_sandbox_expected["status"] == "failed"
            assert status["reason"] == payroll_sandbox_expected["reason"]
            assert payroll_sandbox.scenario == payroll_sandbox_expected["scenario"]
    """))
    result = run(pytester, "-q")
    assert result.ret == 0, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 5 and "failed" not in outcomes


@pytest.mark.parametrize("marker, says", [
    ('product="nope"', "no task scenario of the catalog has product 'nope'"),
    ('colour="red"', "unknown filter 'colour'"),
    ('outcome="n/a"', "no task scenario of the catalog has outcome 'n/a'"),
])
def test_an_unknown_filter_is_a_clear_collection_error(pytester, marker, says):
    pytester.makeini(INI)
    pytester.makepyfile(test_bad=f"""
        import pytest

        @pytest.mark.payroll_sandbox_each_scenario({marker})
        def test_x(payroll_sandbox):
            pass
    """)
    result = run(pytester, "-q")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    output = result.stdout.str()
    assert "ERROR collecting test_bad.py" in output and says in output
    assert "Traceback" not in output


SUITE = f"""
import pytest

def deposit(sandbox, scenario, identifier="u1"):
    sandbox.post("/task/create", {{"identifier": identifier, "company": "{WALMART}",
                                  "product": "deposit", "scenario": scenario}})
    sandbox.run_until_idle()

@pytest.mark.parametrize("scenario", ["auth-expired", "connection-error", "happy-path",
                                      "auth-expired", "user-abandon", "task-status-patched"])
def test_a_task(payroll_sandbox, webhook_receiver, scenario):
    deposit(payroll_sandbox, scenario)

def test_faults(payroll_sandbox, webhook_receiver):
    payroll_sandbox.request("PUT", "/_sandbox/webhooks/faults", {{"duplicate": 1}})
    payroll_sandbox.fail_next("GET /task/{{taskId}}", status=503)
    with pytest.raises(Exception):
        payroll_sandbox.get("/task/nope")
    deposit(payroll_sandbox, "system-unavailable")

def test_profile(payroll_sandbox):
    payroll_sandbox.use_profile("u2", "salaried")
    payroll_sandbox.post("/task/create", {{"identifier": "u2", "company": "{NETFLIX}",
                                          "product": "switch",
                                          "scenario": "payment-method-declined"}})
    payroll_sandbox.run_until_idle()

def test_without_a_tenant():
    pass
"""


def test_workers_merge_to_the_serial_totals_and_the_gate_holds_at_its_threshold(pytester):
    pytester.makeini(INI)
    pytester.makepyfile(test_suite=SUITE)
    serial = run(pytester, "-n", "0", "--payroll-sandbox-coverage=serial.json")
    assert serial.ret == 0, serial.stdout.str()
    report = json.loads((pytester.path / "serial.json").read_text())
    assert report["tenants"] == 8
    assert report["reasons"]["counts"] == {"auth-expired": 2, "connection-error": 1,
                                           "user-abandon": 1, "unknown-failure": 1,
                                           "system-unavailable": 1,
                                           "payment-method-declined": 1}
    assert report["apiFaults"]["counts"] == {"status": 1}
    assert report["webhookFaults"]["counts"]["duplicate"] > 0
    assert report["profiles"]["reached"] == ["salaried"]
    assert report["products"] == ["deposit", "switch"]
    assert "payment-method-locked" in report["reasons"]["missing"]
    assert "payroll-sandbox coverage" in serial.stdout.str()
    assert "failure reasons of the products used (deposit, switch)" in serial.stdout.str()
    threshold = report["percent"]
    assert 0 < threshold < 100

    parallel = run(pytester, "-n", "2", "--payroll-sandbox-coverage=parallel.json",
                   f"--payroll-sandbox-cov-fail-under={threshold}")
    assert parallel.ret == 0, parallel.stdout.str()
    merged = json.loads((pytester.path / "parallel.json").read_text())
    for key in ("scenarios", "reasons", "eventTypes", "apiFaults", "profiles"):
        assert merged[key] == report[key], key
    assert merged["tenants"] == report["tenants"] and merged["percent"] == threshold
    # The duplicate fault's draws are seeded per tenant, so they add up alike too.
    assert merged["webhookFaults"] == report["webhookFaults"]

    below = run(pytester, "-n", "0", f"--payroll-sandbox-cov-fail-under={threshold + 0.01}")
    assert below.ret == 1, below.stdout.str()
    assert "below --payroll-sandbox-cov-fail-under" in below.stdout.str()
    assert "9 passed" in below.stdout.str()


def test_a_coverage_file_that_cannot_be_written_is_a_clear_error(pytester):
    pytester.makeini(INI)
    pytester.makepyfile(test_one="def test_one(payroll_sandbox):\n    pass\n")
    result = run(pytester, "--payroll-sandbox-coverage=missing/folder/report.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("cannot write the report to missing/folder/report.json: no folder missing/folder"
            in result.stderr.str())
    (pytester.path / "taken").mkdir()
    result = run(pytester, "--payroll-sandbox-coverage=taken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "taken is a directory, not a file" in result.stderr.str()


NODE_SUITE = f"""
const URL = process.env.PAYROLL_SANDBOX_URL;
let keys = {{"x-api-key": process.env.PAYROLL_SANDBOX_API_KEY,
            "x-api-secret": process.env.PAYROLL_SANDBOX_API_SECRET}};
async function call(method, path, body) {{
  const answer = await fetch(URL + path, {{method, headers: {{...keys,
    "content-type": "application/json"}}, body: body && JSON.stringify(body)}});
  return (await answer.json()).data;
}}
(async () => {{
  for (const [user, scenario] of [["a", "auth-expired"], ["b", "connection-error"]]) {{
    await call("POST", "/task/create", {{identifier: user, company: "{WALMART}",
                                        product: "deposit", scenario}});
  }}
  await call("POST", "/_sandbox/clock/run-until-idle");
  // A tenant of its own, deleted before the end: counted as it goes.
  const made = await call("POST", "/_sandbox/tenants", {{name: "per-test"}});
  keys = {{"x-api-key": made.apiKey, "x-api-secret": made.apiSecret}};
  await call("POST", "/task/create", {{identifier: "c", company: "{WALMART}",
                                      product: "deposit", scenario: "auth-expired"}});
  await call("POST", "/_sandbox/clock/run-until-idle");
  await call("DELETE", "/_sandbox/tenants/per-test");
}})();
"""


def test_exec_writes_the_same_report_for_a_node_suite(tmp_path):
    if shutil.which("node") is None:
        pytest.skip("no node on this machine")
    script = tmp_path / "suite.js"
    script.write_text(NODE_SUITE)
    report_path = tmp_path / "coverage.json"
    result = run_cli("exec", "--coverage", str(report_path), "--", "node", str(script),
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(report_path.read_text())
    assert report["tenants"] == 2  # acme, and per-test as it was deleted
    assert report["reasons"]["counts"] == {"auth-expired": 2, "connection-error": 1}
    assert report["scenarios"]["counts"] == {"auth-expired": 2, "connection-error": 1}
    assert report["products"] == ["deposit"]
    assert "user-abandon" in report["reasons"]["missing"]
    catalog = len(report["reasons"]["missing"]) + 2
    assert report["percent"] == round(100 * 2 / catalog, 2)
    assert "failure reasons of the products used (deposit)" in result.stderr
    unwritable = run_cli("exec", "--coverage", str(tmp_path / "no" / "x.json"), "--", "true",
                         cwd=tmp_path)
    assert unwritable.returncode == 2
    assert "cannot write the report to" in unwritable.stderr
