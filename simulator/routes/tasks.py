"""Task creation and reading (DESIGN.md, Public API: /task)."""

from __future__ import annotations

from ..schemas.api import TASK_CREATE_REQUEST, TASK_CREATED, TASK_RECORD
from .pipeline import operation


@operation("POST", "/task/create", "Create a task (or a workflow of several) driven by a scenario",
           body=TASK_CREATE_REQUEST, response=TASK_CREATED, errors=(400, 403, 404, 429))
async def create_task(tenant, token, body, sandbox) -> dict:
    workflow, tasks = sandbox.engine.create_task(
        tenant, body, token_identifier=token.identifier if token else None,
        public_token=token.public_token if token else None)
    return created_record(workflow, tasks)


def created_record(workflow, tasks) -> dict:
    """What task creation answers: the first task, its workflow, and every task."""
    first = tasks[0]
    return {"id": first.id, "status": first.status, "taskWorkflow": workflow.id,
            "tasks": [{"id": t.id, "product": t.product, "status": t.status,
                       "scenario": t.scenario} for t in tasks]}


@operation("GET", "/task/{taskId}", "A task: status, reason, flow, authenticated and its transitions",
           response=TASK_RECORD, errors=(404,))
async def get_task(tenant, token, params, sandbox) -> dict:
    task = sandbox.engine.get_task(tenant, params["taskId"],
                                   identifier=token.identifier if token else None)
    return task.record()
