"""What `--state-url` answers: the task outcomes a handler stored, in the shape it keeps them.

A handler keeps its outcomes as rows (a list, one entry per outcome stored) or as a mapping
from task id to outcome (one per task by construction); either may stand alone or under
`outcomes`. Each becomes the rows the `state-url` check compares: (task, status, reason),
a reason the handler did not keep being None.
"""

from __future__ import annotations

from typing import Any

TASK_FIELDS = ("task", "taskId")   # a row's task id: the event's field, or the spec's name
WRAPPER = "outcomes"
SHAPES = ('not a list of {"task", "status", "reason"} or a mapping from task id to '
          '{"status", "reason"}, alone or under "outcomes"')

Row = tuple[str, Any, Any]


class StateShapeError(ValueError):
    """The answer is none of the shapes; the message says which part is at fault."""


def state_rows(document: Any) -> list[Row]:
    """The (task, status, reason) of every outcome `document` (the parsed answer) holds."""
    if isinstance(document, dict) and isinstance(document.get(WRAPPER), (list, dict)):
        document = document[WRAPPER]
    if isinstance(document, list):
        return [_row(entry) for entry in document]
    if isinstance(document, dict):
        return [_row(outcome, task) for task, outcome in document.items()]
    raise StateShapeError(SHAPES)


def _row(outcome: Any, task: Any = None) -> Row:
    if not isinstance(outcome, dict):
        raise StateShapeError(f"{SHAPES}: an outcome is {type(outcome).__name__}, not an object")
    if task is None:
        task = next((outcome[name] for name in TASK_FIELDS if name in outcome), None)
        if task is None:
            raise StateShapeError(f"{SHAPES}: an entry of the list has no \"task\"")
    if not isinstance(task, str):
        raise StateShapeError(f"{SHAPES}: a task id is {type(task).__name__}, not a string")
    return task, outcome.get("status"), outcome.get("reason")
