"""Virtual time (DESIGN.md, Time): the manual clock through the control plane, the real
clock in a real process, and the scenario files that the clock runs.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from datetime import datetime, timezone

import pytest
import yaml
from calls import advance, create_task, task_body
from conftest import ACME, GLOBEX, run_cli
from test_cli import copy_fixtures, post, serving

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings, bundled_dir

START = 1_780_000_000  # the manual clock of conftest


async def clock_of(client, headers=ACME) -> dict:
    response = await client.get("/_sandbox/clock", headers=headers)
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def status_of(client, task_id, headers=ACME) -> str:
    response = await client.get(f"/task/{task_id}", headers=headers)
    return (await response.json())["data"]["status"]


def iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- the manual clock through HTTP --------------------------------------------------------

async def test_clock_get_describes_mode_time_and_pending_jobs(client):
    data = await clock_of(client)
    assert data == {"mode": "manual", "timeScale": 1.0, "now": "2026-05-28T20:26:40.000Z",
                    "timestamp": START, "pendingJobs": 0, "backgroundJobs": 0, "idle": True}
    await create_task(client)
    data = await clock_of(client)
    assert data["pendingJobs"] == 3 and data["idle"] is False  # happy-path has three steps


async def test_clock_advance_moves_now_by_exactly_the_seconds(client):
    data = await advance(client, 12.5)
    assert data["timestamp"] == START + 12.5 and data["now"] == iso(START + 12.5)
    assert data["jobsRun"] == 0
    data = await advance(client, 86_400)
    assert data["timestamp"] == START + 86_412.5
    assert (await clock_of(client))["timestamp"] == START + 86_412.5


async def test_clock_advance_runs_the_steps_that_fall_due(client):
    task_id = (await create_task(client))["id"]
    assert (await advance(client, 0))["jobsRun"] == 0
    assert await status_of(client, task_id) == "queued"
    data = await advance(client, 2)  # happy-path: processing at 1 s
    assert data["jobsRun"] == 1 and await status_of(client, task_id) == "processing"
    data = await advance(client, 5)  # authenticated at 3 s; completed at 8 s is not due yet
    assert data["jobsRun"] == 1 and await status_of(client, task_id) == "processing"
    data = await advance(client, 1)
    assert data["jobsRun"] == 1 and await status_of(client, task_id) == "completed"
    assert data["pendingJobs"] == 0 and data["idle"] is True
    assert data["timestamp"] == START + 8


async def test_clock_advance_runs_each_step_at_its_own_virtual_time(client):
    task_id = (await create_task(client))["id"]
    await advance(client, 3600)
    response = await client.get(f"/task/{task_id}", headers=ACME)
    history = (await response.json())["data"]["history"]
    assert [(h["status"], h["at"]) for h in history] == [
        ("queued", iso(START)), ("processing", iso(START + 1)), ("completed", iso(START + 8))]
    ledger = await (await client.get(f"/_sandbox/events?task={task_id}", headers=ACME)).json()
    # queued -> processing at 1 s is not announced (task-status-updated is "Emitted when a
    # Task resolves"): authenticated at 3 s, completed and the workflow's end at 8 s.
    assert [e["time"] for e in ledger["data"]] == [iso(START + 3), iso(START + 8), iso(START + 8)]


@pytest.mark.parametrize("body, path", [
    ({"seconds": -1}, "$.seconds"),
    ({}, "$"),
    ({"seconds": "10"}, "$.seconds"),
    ({"seconds": 10, "minutes": 1}, "$.minutes"),
], ids=["negative", "missing", "not-a-number", "extra-field"])
async def test_clock_advance_with_bad_seconds_is_422_and_does_not_move(client, body, path):
    response = await client.post("/_sandbox/clock/advance", json=body, headers=ACME)
    assert response.status == 422
    error = (await response.json())["error"]
    assert error["code"] == "validation-failed"
    assert path in [d["path"] for d in error["details"]]
    assert (await clock_of(client))["timestamp"] == START


async def test_clock_run_until_idle_runs_every_task_to_its_end(client):
    fast = (await create_task(client))["id"]
    slow = (await create_task(client, scenario="slow-processing"))["id"]
    response = await client.post("/_sandbox/clock/run-until-idle", headers=ACME)
    assert response.status == 200
    data = (await response.json())["data"]
    assert data["idle"] is True and data["pendingJobs"] == 0
    assert data["jobsRun"] > 3
    assert await status_of(client, fast) == "completed"
    assert await status_of(client, slow) == "completed"
    assert data["timestamp"] > START + 8  # the slow task's last step, no further


async def test_clock_run_until_idle_with_nothing_pending_does_not_move(client):
    response = await client.post("/_sandbox/clock/run-until-idle", headers=ACME)
    data = (await response.json())["data"]
    assert data == {**await clock_of(client), "jobsRun": 0, "eventsEmitted": 0, "complete": True}
    assert data["timestamp"] == START and data["idle"] is True


async def test_clock_control_needs_api_keys(client):
    token = await (await client.post("/access-token", json={"identifier": "u"}, headers=ACME)).json()
    response = await client.post("/_sandbox/clock/advance", json={"seconds": 1},
                                 headers={"x-public-token": token["data"]["publicToken"]})
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "api-keys-required"


async def test_clock_is_per_tenant(aiohttp_client, loaded):
    # The conftest `client` shares one clock between tenants; this app gives each its own.
    settings = Settings(port=0, clock="manual")
    client = await aiohttp_client(create_app(settings, registry=build_registry(settings, loaded=loaded)))
    acme_before, globex_before = await clock_of(client, ACME), await clock_of(client, GLOBEX)
    globex_task = (await create_task(client, headers=GLOBEX))["id"]
    data = await advance(client, 3600, headers=ACME)
    assert data["timestamp"] == acme_before["timestamp"] + 3600
    globex_after = await clock_of(client, GLOBEX)
    assert globex_after["timestamp"] == globex_before["timestamp"]
    assert globex_after["pendingJobs"] == 3
    assert await status_of(client, globex_task, GLOBEX) == "queued"
    await advance(client, 10, headers=GLOBEX)
    assert await status_of(client, globex_task, GLOBEX) == "completed"
    assert (await clock_of(client, ACME))["timestamp"] == acme_before["timestamp"] + 3600


# -- the real clock in a real process ------------------------------------------------------

def get(url: str, headers: dict) -> dict:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_real_clock_process_completes_a_happy_path_task_within_two_seconds():
    with serving("--clock", "real", "--time-scale", "600") as (base_url, key, secret, _):
        headers = {"x-api-key": key, "x-api-secret": secret}
        clock = get(f"{base_url}/_sandbox/clock", headers)["data"]
        assert clock["mode"] == "real" and clock["timeScale"] == 600
        status, body = post(f"{base_url}/task/create", task_body(), headers)
        assert status == 200, body
        task_id = body["data"]["id"]
        # happy-path lasts 8 virtual seconds: about 13 ms of wall time at 600x.
        deadline = time.monotonic() + 2
        seen = []
        while time.monotonic() < deadline:
            task = get(f"{base_url}/task/{task_id}", headers)["data"]
            seen.append(task["status"])
            if task["status"] == "completed":
                break
            time.sleep(0.02)
        assert seen[-1] == "completed", seen
        assert [h["status"] for h in task["history"]] == ["queued", "processing", "completed"]


# -- scenario files and the fixtures that name them ----------------------------------------

ILLEGAL = """\
description: "Completes, then tries to go back to processing."
steps:
  - after: 1
    status: processing
  - after: 2
    status: completed
  - after: 3
    status: processing
"""


def test_scenarios_validate_names_file_step_and_illegal_transition(tmp_path):
    shutil.copy(bundled_dir("scenarios") / "happy-path.yaml", tmp_path / "happy-path.yaml")
    broken = tmp_path / "back-to-processing.yaml"
    broken.write_text(ILLEGAL)
    result = run_cli("scenarios", "validate", str(tmp_path))
    assert result.returncode == 2
    assert str(broken) in result.stderr
    assert "$.steps[2]" in result.stderr
    assert "completed -> processing" in result.stderr
    assert "Traceback" not in result.stderr


def test_scenarios_validate_accepts_a_valid_folder(tmp_path):
    shutil.copy(bundled_dir("scenarios") / "happy-path.yaml", tmp_path / "happy-path.yaml")
    result = run_cli("scenarios", "validate", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "1 from this folder, 1 of them replacing bundled ones" in result.stdout


def test_scenarios_list_prints_every_bundled_scenario_with_its_description():
    result = run_cli("scenarios", "list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    files = sorted(bundled_dir("scenarios").glob("*.yaml"))
    assert len(lines) == len(files)
    for path, line in zip(files, lines):
        description = yaml.safe_load(path.read_text())["description"]
        assert line.split()[0] == path.stem
        assert line.endswith(description)


def test_serve_with_a_company_naming_an_unknown_default_scenario_is_exit_2(tmp_path):
    folder = copy_fixtures(tmp_path)
    companies = folder / "companies.yaml"
    text = companies.read_text()
    assert "defaultScenario: connection-error" in text
    companies.write_text(text.replace("defaultScenario: connection-error",
                                      "defaultScenario: no-such-scenario", 1))
    result = run_cli("serve", "--port", "0", "--fixtures", str(folder), timeout=30)
    assert result.returncode == 2
    assert result.stdout == ""  # nothing started
    assert str(companies) in result.stderr
    assert "$.companies[17].defaultScenario" in result.stderr  # Flaky Freight
    assert "no-such-scenario" in result.stderr
    assert "Traceback" not in result.stderr


def test_fixtures_validate_with_an_unknown_default_scenario_is_exit_2(tmp_path):
    # `fixtures validate` must refuse what `serve` refuses.
    folder = copy_fixtures(tmp_path)
    companies = folder / "companies.yaml"
    companies.write_text(companies.read_text().replace("defaultScenario: connection-error",
                                                       "defaultScenario: no-such-scenario", 1))
    result = run_cli("fixtures", "validate", str(folder))
    assert result.returncode == 2, result.stdout
    assert str(companies) in result.stderr
    assert "$.companies[17].defaultScenario" in result.stderr
