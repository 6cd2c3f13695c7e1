"""Issue 34, point 7: `check-handler --state-url` reads the shapes a handler naturally keeps
its outcomes in (a list of outcomes, or a mapping from task id to outcome, alone or under
`outcomes`), as the README shows them; any other answer fails `state-url` with a line
naming the shapes, never a traceback."""

from __future__ import annotations

import json

import pytest
from aiohttp import web
from test_check_handler import FAST, SECRET, example, serve
from test_readme import blocks, section

from payroll_sandbox.checker import STATE_URL, check_handler_async
from payroll_sandbox.checker.state import SHAPES, StateShapeError, state_rows

ROWS = [("t1", "completed", None), ("t2", "failed", "auth-expired")]


@pytest.mark.parametrize("document", [
    [{"task": "t1", "status": "completed", "reason": None},
     {"task": "t2", "status": "failed", "reason": "auth-expired"}],
    {"outcomes": [{"task": "t1", "status": "completed"},
                  {"taskId": "t2", "status": "failed", "reason": "auth-expired", "at": "x"}]},
    {"t1": {"status": "completed", "reason": None},
     "t2": {"status": "failed", "reason": "auth-expired"}},
    {"outcomes": {"t1": {"status": "completed", "storedAt": "2026-01-01T00:00:00Z"},
                  "t2": {"status": "failed", "reason": "auth-expired"}}},
], ids=["list", "list-under-outcomes", "mapping", "mapping-under-outcomes"])
def test_state_rows_reads_a_list_or_a_mapping_alone_or_under_outcomes(document):
    assert state_rows(document) == ROWS


def test_a_task_stored_twice_in_a_list_is_two_rows():
    twice = [{"task": "t1", "status": "completed"}, {"task": "t1", "status": "completed"}]
    assert state_rows(twice) == [ROWS[0], ROWS[0]]
    assert state_rows([]) == state_rows({}) == state_rows({"outcomes": []}) == []


@pytest.mark.parametrize("document, fault", [
    ("completed", ""),
    (None, ""),
    ([1], "an outcome is int"),
    ([{"status": "completed"}], 'no "task"'),
    ([{"task": ["t1"], "status": "completed"}], "a task id is list"),
    ({"t1": "completed"}, "an outcome is str"),
    ({"outcomes": "none"}, "an outcome is str"),
])
def test_other_answers_are_refused_naming_the_shapes(document, fault):
    with pytest.raises(StateShapeError) as refused:
        state_rows(document)
    assert str(refused.value).startswith(SHAPES) and fault in str(refused.value)


def test_the_readme_shows_a_list_and_a_mapping_the_checker_reads():
    shown = [json.loads(block) for block in
             blocks(section("Checking your webhook handler"), "json")]
    assert [type(document) for document in shown] == [list, dict]
    assert [row[0] for document in shown for row in state_rows(document)] == ["<task id>"] * 2


def example_showing(render) -> web.Application:
    """The example handler (it passes every check) with its outcomes also at /kept, in the
    shape `render` gives them: {task id: {"status", "reason", "at"}} in, the answer out."""
    app = example.create_app(SECRET)

    async def kept(request: web.Request) -> web.Response:
        outcomes = {task: {"status": o["status"], "reason": o["reason"],
                           "at": o["at"].isoformat()}
                    for task, o in request.app[example.STATE]["outcomes"].items()}
        return web.json_response(render(outcomes))

    app.router.add_get("/kept", kept)
    return app


def as_list(outcomes: dict) -> list:
    return [{"taskId": task, **outcome} for task, outcome in outcomes.items()]


def as_mapping(outcomes: dict) -> dict:
    return outcomes


@pytest.mark.parametrize("render", [as_list, as_mapping])
async def test_a_handler_keeping_a_list_or_a_mapping_passes_state_url(aiohttp_server, render):
    base = await serve(aiohttp_server, example_showing(render))
    report = await check_handler_async(f"{base}/webhooks", SECRET, state_url=f"{base}/kept",
                                       products="deposit", **FAST)
    assert report.ok, report
    assert report.check(STATE_URL).received.startswith("each of the ")


@pytest.mark.parametrize("render, fault", [
    (lambda outcomes: {"outcomes": "none"}, "an outcome is str"),
    (lambda outcomes: [{"task": [task], **o} for task, o in outcomes.items()],
     "a task id is list"),
], ids=["outcomes-a-string", "task-id-a-list"])
async def test_an_answer_of_another_shape_fails_state_url_naming_the_shapes(
        aiohttp_server, render, fault):
    base = await serve(aiohttp_server, example_showing(render))
    report = await check_handler_async(f"{base}/webhooks", SECRET, state_url=f"{base}/kept",
                                       products="deposit", **FAST)
    assert report.failed_names == {STATE_URL}, report
    received = report.check(STATE_URL).received
    assert received.startswith(SHAPES) and fault in received
