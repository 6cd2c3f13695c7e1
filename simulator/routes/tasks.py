"""Task creation and reading (DESIGN.md, Public API: /task)."""

from __future__ import annotations

from aiohttp import web

from ..keys import ENGINE, public_token_of, tenant_of
from ..middleware import read_json
from ..schemas.api import TASK_CREATE_REQUEST

routes = web.RouteTableDef()


@routes.post("/task/create")
async def create_task(request: web.Request) -> web.Response:
    body = await read_json(request, TASK_CREATE_REQUEST)
    token = public_token_of(request)
    workflow, tasks = request.app[ENGINE].create_task(
        tenant_of(request), body, token_identifier=token.identifier if token else None,
        public_token=token.public_token if token else None)
    first = tasks[0]
    return web.json_response({"data": {
        "id": first.id, "status": first.status, "taskWorkflow": workflow.id,
        "tasks": [{"id": t.id, "product": t.product, "status": t.status, "scenario": t.scenario}
                  for t in tasks]}})


@routes.get("/task/{taskId}")
async def get_task(request: web.Request) -> web.Response:
    token = public_token_of(request)
    task = request.app[ENGINE].get_task(tenant_of(request), request.match_info["taskId"],
                                        identifier=token.identifier if token else None)
    return web.json_response({"data": task.record()})
