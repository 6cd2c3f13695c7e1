"""Scenario files checked at load: schema, then the spec's transitions step by step
(scenarios/loader.py). Each refusal names the file and the JSON path of the step."""

from __future__ import annotations

from pathlib import Path

import pytest

from payroll_sandbox.load.fixtures import ConfigError
from payroll_sandbox.load.scenarios.loader import load_scenario, load_scenarios

BUNDLED = Path(__file__).resolve().parents[2] / "scenarios"


def write(tmp_path: Path, steps: str, *, kind: str | None = None, name: str = "case") -> Path:
    """A scenario file with these steps (YAML list items, indented by two)."""
    header = "description: a scenario under test\n" + (f"kind: {kind}\n" if kind else "")
    path = tmp_path / f"{name}.yaml"
    path.write_text(header + "steps:\n" + steps, encoding="utf-8")
    return path


def refusal(path: Path) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert caught.value.file == str(path)
    return caught.value


# -- what loads -------------------------------------------------------------------------------

def test_load_scenario_adds_up_the_afters_into_times_since_creation(tmp_path):
    scenario = load_scenario(write(tmp_path, """\
  - after: 1.5
    status: processing
  - authenticated: true
  - after: 8
    status: failed
    reason: unknown-failure
  - after: 3600
    patch: true
    status: completed
""", name="patched"))
    assert scenario.name == "patched" and scenario.kind == "task"
    assert [step.at for step in scenario.steps] == [1.5, 1.5, 9.5, 3609.5]
    assert scenario.steps[3].changes == {"patch": True, "status": "completed"}  # no `after`
    assert scenario.duration == 3609.5
    assert scenario.outcome == "completed"


def test_load_scenario_a_task_may_fail_straight_from_queued(tmp_path):
    scenario = load_scenario(write(tmp_path, """\
  - after: 2
    status: failed
    reason: device-disconnected
"""))
    assert scenario.outcome == "failed"


def test_load_scenario_the_user_may_leave_with_connected_false(tmp_path):
    load_scenario(write(tmp_path, """\
  - status: processing
  - connected: false
  - status: completed
"""))


def test_load_scenario_steps_that_do_not_touch_the_task_may_follow_its_end(tmp_path):
    load_scenario(write(tmp_path, """\
  - status: processing
  - status: completed
  - after: 60
    linkedAccount: disconnected
  - piiDataDeleted: true
"""))


def test_load_scenario_managed_by_partner_with_its_company_loads(tmp_path):
    load_scenario(write(tmp_path, """\
  - status: processing
  - status: failed
    reason: subscription-managed-by-partner-provider
    meta: {managedBy: {companyId: "6410a0000000000000000001", name: Partner}}
"""))


# -- task rules -------------------------------------------------------------------------------

@pytest.mark.parametrize(("steps", "path", "words"), [
    pytest.param("  - status: completed\n", "$.steps[0].status",
                 "illegal transition queued -> completed", id="queued-to-completed"),
    pytest.param("  - status: processing\n  - status: processing\n", "$.steps[1].status",
                 "illegal transition processing -> processing", id="processing-twice"),
    pytest.param("  - status: processing\n  - status: completed\n  - status: failed\n"
                 "    reason: unknown-failure\n", "$.steps[2].status",
                 "completed is final", id="after-final"),
    pytest.param("  - status: processing\n  - patch: true\n    status: completed\n",
                 "$.steps[1].status", "illegal patch processing -> completed", id="patch-of-live-task"),
    pytest.param("  - status: processing\n  - status: completed\n  - patch: true\n"
                 "    status: completed\n", "$.steps[2].status",
                 "illegal patch completed -> completed", id="patch-of-completed"),
])
def test_load_scenario_refuses_a_move_the_spec_forbids(tmp_path, steps, path, words):
    error = refusal(write(tmp_path, steps))
    assert error.path == path
    assert words in error.message


def test_load_scenario_refuses_a_patch_without_a_status(tmp_path):
    error = refusal(write(tmp_path, """\
  - status: processing
  - status: failed
    reason: unknown-failure
  - patch: true
"""))
    assert error.path == "$.steps[2].patch"
    assert "a patch needs a status" in error.message


def test_load_scenario_refuses_a_change_after_the_task_ended(tmp_path):
    error = refusal(write(tmp_path, """\
  - status: processing
  - status: completed
  - authenticated: true
"""))
    assert error.path == "$.steps[2]"
    assert "after it became completed" in error.message


def test_load_scenario_refuses_a_change_while_the_task_is_queued(tmp_path):
    error = refusal(write(tmp_path, """\
  - flow: refresh
  - status: processing
  - status: completed
"""))
    assert error.path == "$.steps[0]"
    assert "while it is queued" in error.message


def test_load_scenario_refuses_connected_true(tmp_path):
    error = refusal(write(tmp_path, """\
  - status: processing
    connected: true
  - status: completed
"""))
    assert error.path == "$.steps[0].connected"
    assert "connected: false" in error.message


def test_load_scenario_refuses_authenticating_on_the_way_from_queued_to_failed(tmp_path):
    error = refusal(write(tmp_path, """\
  - status: failed
    reason: auth-expired
    authenticated: false
"""))
    assert error.path == "$.steps[0].authenticated"
    assert "queued -> failed" in error.message


def test_load_scenario_authenticating_on_the_step_that_starts_processing_is_allowed(tmp_path):
    load_scenario(write(tmp_path, "  - status: processing\n    authenticated: true\n"
                                  "  - status: completed\n"))


@pytest.mark.parametrize(("steps", "path", "words"), [
    pytest.param("  - status: processing\n  - status: completed\n    reason: unknown-failure\n",
                 "$.steps[1].reason", "a reason goes with status failed", id="reason-on-completed"),
    pytest.param("  - status: processing\n  - reason: unknown-failure\n  - status: completed\n",
                 "$.steps[1].reason", "a reason goes with status failed", id="reason-alone"),
    pytest.param("  - status: processing\n  - status: failed\n",
                 "$.steps[1].reason", "status failed needs a reason", id="failed-without-reason"),
    pytest.param("  - status: processing\n  - status: completed\n"
                 "    meta: {managedBy: {companyId: x, name: y}}\n",
                 "$.steps[1].meta", "meta goes with status failed", id="meta-on-completed"),
    pytest.param("  - status: processing\n  - status: failed\n"
                 "    reason: subscription-managed-by-partner-provider\n",
                 "$.steps[1].meta", "needs meta.managedBy", id="managed-by-without-company"),
    pytest.param("  - status: processing\n  - status: failed\n"
                 "    reason: subscription-managed-by-partner-provider\n    meta: {}\n",
                 "$.steps[1].meta", "needs meta.managedBy", id="managed-by-empty-meta"),
])
def test_load_scenario_refuses_a_failure_detail_out_of_place(tmp_path, steps, path, words):
    error = refusal(write(tmp_path, steps))
    assert error.path == path
    assert words in error.message


@pytest.mark.parametrize("steps", [
    pytest.param("  - after: 3\n    piiDataDeleted: true\n", id="never-starts"),
    pytest.param("  - status: processing\n  - authenticated: true\n", id="stays-processing"),
])
def test_load_scenario_refuses_a_task_that_never_ends(tmp_path, steps):
    error = refusal(write(tmp_path, steps))
    assert error.path == "$.steps"
    assert "a scenario must end it completed or failed" in error.message


@pytest.mark.parametrize("after", [".inf", ".nan"])
def test_load_scenario_refuses_an_after_that_is_not_finite(tmp_path, after):
    error = refusal(write(tmp_path, f"  - status: processing\n  - after: {after}\n"
                                    "    status: completed\n"))
    assert error.path == "$.steps[1].after"
    assert error.message == "must be a finite number"


@pytest.mark.parametrize(("steps", "path"), [
    pytest.param("  - status: queued\n", "$.steps[0].status", id="unknown-status"),
    pytest.param("  - after: -1\n    status: processing\n", "$.steps[0].after", id="negative-after"),
    pytest.param("  - status: processing\n    colour: red\n", "$.steps[0].colour", id="unknown-field"),
])
def test_load_scenario_schema_faults_name_the_path(tmp_path, steps, path):
    assert refusal(write(tmp_path, steps)).path == path


# -- processor-link rules ---------------------------------------------------------------------

def test_load_scenario_processor_link_stages_may_skip_but_not_go_back(tmp_path):
    scenario = load_scenario(write(tmp_path, """\
  - after: 2
    stage: pull-transactions
  - after: 3
    stage: recurring-transaction-detection
""", kind="processor-link"))
    assert scenario.kind == "processor-link"
    assert [step.at for step in scenario.steps] == [2, 5]


def test_load_scenario_processor_link_may_fail_with_an_aggregator_error_first(tmp_path):
    load_scenario(write(tmp_path, """\
  - aggregatorError: {errorType: ITEM_ERROR, errorCode: ITEM_LOGIN_REQUIRED}
""", kind="processor-link"))


@pytest.mark.parametrize(("steps", "path", "words"), [
    pytest.param("  - stage: pull-transactions\n    status: processing\n", "$.steps[0].status",
                 "only stage and aggregatorError steps", id="task-field"),
    pytest.param("  - stage: pull-transactions\n"
                 "    aggregatorError: {errorType: E, errorCode: C}\n", "$.steps[0]",
                 "one of stage or aggregatorError", id="both"),
    pytest.param("  - stage: pull-transactions\n  - after: 3\n", "$.steps[1]",
                 "one of stage or aggregatorError", id="neither"),
    pytest.param("  - stage: employer-classification\n", "$.steps[0].stage",
                 "transactions first", id="not-transactions-first"),
    pytest.param("  - stage: pull-transactions\n  - stage: recurring-transaction-detection\n"
                 "  - stage: employer-classification\n", "$.steps[2].stage",
                 "stages run in the order", id="backwards"),
    pytest.param("  - stage: pull-transactions\n  - stage: pull-transactions\n", "$.steps[1].stage",
                 "stages run in the order", id="repeated"),
    pytest.param("  - stage: pull-transactions\n"
                 "  - aggregatorError: {errorType: E, errorCode: C}\n"
                 "  - stage: employer-classification\n", "$.steps[2]",
                 "follows the end of the pipeline", id="after-aggregator-error"),
    pytest.param("  - stage: pull-transactions\n  - stage: recurring-transaction-detection\n"
                 "  - aggregatorError: {errorType: E, errorCode: C}\n", "$.steps[2]",
                 "follows the end of the pipeline", id="error-after-the-last-stage"),
])
def test_load_scenario_refuses_a_broken_processor_pipeline(tmp_path, steps, path, words):
    error = refusal(write(tmp_path, steps, kind="processor-link"))
    assert error.path == path
    assert words in error.message


# -- folders ----------------------------------------------------------------------------------

def test_load_scenarios_loads_every_bundled_scenario():
    files = sorted(path.stem for path in BUNDLED.glob("*.yaml"))
    scenarios = load_scenarios(BUNDLED)
    assert files and sorted(scenarios) == files
    for name, scenario in scenarios.items():
        assert scenario.name == name and scenario.description
        if scenario.kind == "task":
            assert scenario.outcome in ("completed", "failed"), name
    assert scenarios["processor-link-happy-path"].kind == "processor-link"


def test_load_scenarios_refuses_yml_files(tmp_path):
    write(tmp_path, "  - status: processing\n  - status: completed\n", name="good")
    (tmp_path / "typo.yml").write_text("description: x\nsteps: []\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_scenarios(tmp_path)
    assert caught.value.file == str(tmp_path / "typo.yml")


def test_load_scenarios_refuses_a_missing_folder(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_scenarios(tmp_path / "nowhere")
    assert caught.value.path == "$"
