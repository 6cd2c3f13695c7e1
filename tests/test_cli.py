"""The command line as a real process: serve, the serving line, config faults, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import REPO, WALMART, run_cli

from payroll_sandbox.settings import CONFIG_SCHEMA, Settings, bundled_dir, load_settings

SERVING = "payroll-sandbox serving "


@contextmanager
def serving(*args: str, env: dict | None = None):
    """Starts `python -m payroll_sandbox serve --port 0 ...`; yields (base_url, key, secret, line)."""
    process = subprocess.Popen([sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                               env={**os.environ, **(env or {})})
    try:
        line = process.stdout.readline().strip()
        assert line.startswith(SERVING), process.stderr.read()
        fields = dict(part.split("=", 1) for part in line.split()[3:])
        yield line.split()[2], fields["x-api-key"], fields["x-api-secret"], line
    finally:
        process.terminate()
        process.communicate(timeout=10)


def post(url: str, body: dict, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_serve_prints_the_serving_line_and_finds_a_company_first():
    with serving() as (base_url, key, secret, line):
        assert line.startswith(f"{SERVING}{base_url} environment=sandbox x-api-key={key} "
                               f"x-api-secret={secret} seed=")
        assert base_url.startswith("http://127.0.0.1:")
        status, body = post(f"{base_url}/company/search", {"query": "Walmart"},
                            {"x-api-key": key, "x-api-secret": secret})
        assert status == 200
        assert body["data"][0]["_id"] == WALMART


def test_serve_on_every_interface_prints_the_bound_address_and_a_reachable_one():
    """Issue 23: "`serve` prints the address it is bound to (and a reachable one beside it
    for 0.0.0.0)"; the reachable one answers."""
    with serving("--host", "0.0.0.0") as (base_url, key, secret, line):
        assert base_url.startswith("http://0.0.0.0:")
        fields = dict(part.split("=", 1) for part in line.split()[3:])
        port = base_url.rsplit(":", 1)[1]
        assert fields["reachable"] == f"http://127.0.0.1:{port}"
        status, _ = post(f"{fields['reachable']}/company/search", {"query": "Walmart"},
                         {"x-api-key": key, "x-api-secret": secret})
        assert status == 200


def first_task_id(*args: str) -> tuple[str, str]:
    """(the seed in the ready line, the id of the first task) of a fresh `serve`."""
    with serving("--clock", "manual", *args) as (base_url, key, secret, line):
        status, body = post(f"{base_url}/task/create",
                            {"identifier": "u1", "company": WALMART, "product": "deposit"},
                            {"x-api-key": key, "x-api-secret": secret})
        assert status == 200, body
        return dict(part.split("=", 1) for part in line.split()[3:])["seed"], body["data"]["id"]


def test_serve_without_a_seed_draws_a_fresh_one_each_start_and_prints_it():
    """Two plain starts never mint the same task ids (a handler deduplicating on ids would
    drop real events); the printed seed reproduces a run exactly."""
    (seed_a, task_a), (seed_b, task_b) = first_task_id(), first_task_id()
    assert seed_a.isdigit() and seed_b.isdigit() and seed_a != seed_b
    assert task_a != task_b
    assert first_task_id("--seed", seed_a) == (seed_a, task_a)


def test_serve_with_the_same_seed_twice_gives_the_same_ids():
    first, second = first_task_id("--seed", "42"), first_task_id("--seed", "42")
    assert first == second and first[0] == "42"


def test_serve_environment_comes_from_the_flag_or_the_variable():
    with serving("--environment", "production") as (_, key, _secret, line):
        assert "environment=production" in line and key.startswith("production-")
    with serving(env={"PAYROLL_SANDBOX_ENVIRONMENT": "production"}) as (_, key, _secret, line):
        assert "environment=production" in line


def test_serve_logs_one_json_line_per_request():
    process = subprocess.Popen([sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0",
                                "--log-format", "json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        base_url = process.stdout.readline().split()[2]
        urllib.request.urlopen(f"{base_url}/health", timeout=10).read()
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    access = [line for line in lines if line.get("path") == "/health"]
    assert access and access[0]["method"] == "GET" and access[0]["status"] == 200
    assert "ms" in access[0] and "tenant" in access[0]


def test_python_dash_m_and_the_console_script_are_the_same_cli():
    result = subprocess.run(["payroll-sandbox", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "serve" in result.stdout


def copy_fixtures(tmp_path: Path) -> Path:
    for source in bundled_dir("fixtures").iterdir():
        (tmp_path / source.name).write_text(source.read_text())
    return tmp_path


@pytest.mark.parametrize("file, broken, path", [
    ("companies.yaml", ("name: Walmart,", "name: 42,"), "$.companies[0].name"),
    ("accounts.yaml", ("environment: production", "environment: staging"), "$.accounts[3].environment"),
    ("service.yaml", ("vendor: example", "vendor: Not A Label"), "$.vendor"),
    ("companies.yaml", ('franchiseParent: "6410a0000000000000000040"', 'franchiseParent: "nope"'),
     "$.companies[33].franchiseParent"),
])
def test_a_broken_fixture_stops_the_start_with_exit_2_naming_file_and_path(tmp_path, file, broken, path):
    folder = copy_fixtures(tmp_path)
    target = folder / file
    old, new = broken
    assert old in target.read_text()
    target.write_text(target.read_text().replace(old, new, 1))
    result = run_cli("serve", "--port", "0", "--fixtures", str(folder), timeout=30)
    assert result.returncode == 2
    assert result.stdout == ""  # nothing started
    assert str(target) in result.stderr and path in result.stderr
    assert "Traceback" not in result.stderr
    validated = run_cli("fixtures", "validate", str(folder))
    assert validated.returncode == 2 and path in validated.stderr


def test_invalid_yaml_names_the_file_and_line(tmp_path):
    folder = copy_fixtures(tmp_path)
    (folder / "accounts.yaml").write_text("accounts: [\n  {name: a\n")
    result = run_cli("fixtures", "validate", str(folder))
    assert result.returncode == 2
    assert "accounts.yaml" in result.stderr and "line" in result.stderr


def test_fixtures_validate_accepts_the_bundled_fixtures():
    result = run_cli("fixtures", "validate")
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_a_broken_config_file_stops_the_start_with_exit_2(tmp_path):
    config = tmp_path / "sandbox.yaml"
    config.write_text("port: 0\nclock: sometimes\n")
    result = run_cli("serve", "--config", str(config))
    assert result.returncode == 2
    assert str(config) in result.stderr and "$.clock" in result.stderr


def test_a_config_file_sets_the_environment(tmp_path):
    config = tmp_path / "sandbox.yaml"
    config.write_text("environment: production\nseed: 3\n")
    with serving("--config", str(config)) as (_, _key, _secret, line):
        assert "environment=production" in line


def test_the_config_file_takes_every_setting_the_flags_take(tmp_path):
    """Its schema is made from Settings: each setting but `config` has its camelCase key,
    `strictBodies` too (docs/configuration.md), and a list is read as commas."""
    assert len(CONFIG_SCHEMA["properties"]) == len(fields(Settings)) - 1
    assert "`strictBodies`" in (REPO / "docs" / "configuration.md").read_text()
    config = tmp_path / "sandbox.yaml"
    config.write_text("strictBodies: true\nwebhookDeny: [10.0.0.0/8, metadata.internal]\n")
    settings = load_settings({"config": str(config)}, {})
    assert settings.strict_bodies is True
    assert settings.webhook_deny == "10.0.0.0/8,metadata.internal"


def test_a_bad_environment_variable_is_exit_2():
    result = run_cli("serve", env={"PAYROLL_SANDBOX_SEED": "many"})
    assert result.returncode == 2
    assert "PAYROLL_SANDBOX_SEED" in result.stderr


def test_a_port_in_use_is_exit_2():
    with serving() as (base_url, *_):
        port = base_url.rsplit(":", 1)[1]
        result = run_cli("serve", "--port", port)
    assert result.returncode == 2
    assert "cannot listen" in result.stderr


def test_trigger_command_emits_through_a_running_server():
    with serving("--clock", "manual") as (base_url, key, secret, _):
        result = run_cli("trigger", "earn-user-data", "--identifier", "cli-user", "--data",
                         '{"netHourlyRate": 31.5}', "--url", base_url)
        assert result.returncode == 0, result.stderr
        event = json.loads(result.stdout)
        assert event["eventType"] == "earn-user-data" and event["userIdentifier"] == "cli-user"
        assert event["body"]["data"]["netHourlyRate"] == 31.5
        status, ledger = get(f"{base_url}/_sandbox/events", {"x-api-key": key, "x-api-secret": secret})
        assert [e["id"] for e in ledger["data"]] == [event["id"]]
        unknown = run_cli("trigger", "no-such-event", "--url", base_url)
        assert unknown.returncode == 1
        assert "unknown-event-type" in unknown.stderr and "earn-user-data" in unknown.stderr
        bad_data = run_cli("trigger", "earn-user-data", "--data", "{not json", "--url", base_url)
        assert bad_data.returncode == 2 and "--data is not JSON" in bad_data.stderr
    unreachable = run_cli("trigger", "company-created", "--url", "http://127.0.0.1:9")
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr


def test_ready_made_linked_accounts_answer_at_once():
    with serving("--clock", "manual") as (base_url, *_):
        headers = {"x-api-key": "sandbox-key-demo-0005", "x-api-secret": "sandbox-secret-demo-0005"}
        status, accounts = get(f"{base_url}/linked-accounts?identifier=demo-user", headers)
        assert status == 200 and len(accounts["data"]) == 2
        status, income = get(f"{base_url}/income/demo-user", headers)
        assert status == 200 and len(income["data"]) == 2
        status, other = get(f"{base_url}/linked-accounts/demo-disconnected", headers)
        assert [a["connected"] for a in other["data"]] == [False]


def get(url: str, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_serve_refuses_a_bound_below_one_naming_it():
    """README, Limits: every bound is a setting (flag, variable, config key); a bound
    below 1 stops the start with exit 2 and names the setting."""
    result = run_cli("serve", "--port", "0", "--max-events", "0")
    assert result.returncode == 2, result.stderr
    assert "$.max_events" in result.stderr and "at least 1" in result.stderr
    result = run_cli("serve", "--port", "0", env={"PAYROLL_SANDBOX_MAX_TENANTS": "many"})
    assert result.returncode == 2, result.stderr
    assert "PAYROLL_SANDBOX_MAX_TENANTS" in result.stderr


def test_version_and_health_name_the_package_version_and_the_spec_revision():
    """The spec revision is the first 12 hex digits of the SHA-256 of the service spec, as
    the repository keeps it (docs/spec/service-spec.md; .ci/spec-in-step keeps it in step)."""
    import hashlib

    import payroll_sandbox

    spec = REPO / "docs" / "spec" / "service-spec.md"
    assert payroll_sandbox.SPEC_REVISION == hashlib.sha256(spec.read_bytes()).hexdigest()[:12]
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == (f"payroll-sandbox {payroll_sandbox.__version__} "
                                     f"(spec {payroll_sandbox.SPEC_REVISION})")
    with serving() as (base_url, *_):
        with urllib.request.urlopen(f"{base_url}/health", timeout=10) as response:
            health = json.load(response)["data"]
    assert health["version"] == payroll_sandbox.__version__
    assert health["spec"] == payroll_sandbox.SPEC_REVISION
