"""The task state machine as data: the table, transition_error and the events a move emits
(domain/states.py; spec: States and transitions)."""

from __future__ import annotations

import itertools

import pytest

from payroll_sandbox.domain.tasks.states import (COMPLETED, FAILED, FINAL, TASK_PATCHES, TASK_TRANSITIONS,
                                     emits_status_update, transition_error)

STATUSES = ("queued", "processing", "completed", "failed")
# Written out from the spec rather than read back from the table under test.
ORDINARY_MOVES = {("queued", "processing"), ("queued", "failed"),
                  ("processing", "completed"), ("processing", "failed")}
PATCHES = {("failed", "completed")}
PAIRS = list(itertools.product(STATUSES, STATUSES))


def test_task_transitions_table_is_the_specs_state_machine():
    moves = {(current, new) for current, targets in TASK_TRANSITIONS.items() for new in targets}
    assert set(TASK_TRANSITIONS) == set(STATUSES)
    assert moves == ORDINARY_MOVES


def test_task_patches_table_corrects_only_failed_to_completed():
    patches = {(current, new) for current, targets in TASK_PATCHES.items() for new in targets}
    assert patches == PATCHES


def test_task_final_statuses_are_those_without_an_ordinary_move():
    assert FINAL == {COMPLETED, FAILED}
    assert {s for s, targets in TASK_TRANSITIONS.items() if not targets} == FINAL


@pytest.mark.parametrize(("current", "new"), PAIRS)
def test_transition_error_allows_exactly_the_specs_moves(current, new):
    error = transition_error(current, new, patch=False)
    if (current, new) in ORDINARY_MOVES:
        assert error is None
    else:
        assert error is not None
        assert error.startswith(f"illegal transition {current} -> {new}: ")


@pytest.mark.parametrize(("current", "new"), PAIRS)
def test_transition_error_patch_allows_only_failed_to_completed(current, new):
    error = transition_error(current, new, patch=True)
    if (current, new) in PATCHES:
        assert error is None
    else:
        assert error is not None
        assert error.startswith(f"illegal patch {current} -> {new}: ")
        assert "(failed -> completed)" in error


@pytest.mark.parametrize("current", ["completed", "failed"])
@pytest.mark.parametrize("new", STATUSES)
def test_transition_error_from_a_final_status_says_it_is_final_and_names_the_patch(current, new):
    error = transition_error(current, new, patch=False)
    assert f"{current} is final" in error
    assert "only a patch (failed -> completed) may follow" in error


@pytest.mark.parametrize(("current", "new", "allowed"), [
    ("queued", "queued", "failed, processing"),
    ("queued", "completed", "failed, processing"),
    ("processing", "queued", "completed, failed"),
    ("processing", "processing", "completed, failed"),
])
def test_transition_error_from_a_live_status_lists_the_allowed_moves(current, new, allowed):
    assert transition_error(current, new, patch=False) == (
        f"illegal transition {current} -> {new}: from {current} only {allowed}")


def test_transition_error_a_patch_is_not_an_ordinary_move():
    # processing -> completed is fine as an update but not as a correction.
    assert transition_error("processing", "completed", patch=False) is None
    assert transition_error("processing", "completed", patch=True) is not None
    # failed -> completed is fine as a correction but not as an update.
    assert transition_error("failed", "completed", patch=True) is None
    assert transition_error("failed", "completed", patch=False) is not None


@pytest.mark.parametrize(("current", "new", "patch", "event"), [
    ("queued", "processing", False, None),                  # not announced (spec)
    ("queued", "failed", False, "task-status-updated"),
    ("processing", "completed", False, "task-status-updated"),
    ("processing", "failed", False, "task-status-updated"),
    ("failed", "completed", True, "task-status-patched"),
])
def test_emits_status_update_for_every_legal_move(current, new, patch, event):
    assert transition_error(current, new, patch=patch) is None
    assert emits_status_update(current, new, patch=patch) == event
