"""Task creation and reading (DESIGN.md, Public API: /task), and the real service's task
operations at their real paths (docs/spec/real-api-surface.md: Tasks)."""

from __future__ import annotations

from aiohttp import web

from ...clock import isoformat
from ...domain.accounts.payroll_records import paystub_lines
from ...domain.flow.sdk import deposit_form_pdf
from ...domain.tenants import open_task_file
from ...domain.pdf import text_pdf
from ...domain.tasks import views  # the answers: views.TaskRecord, ...
from ...domain.tasks.requests import CreateTask, TaskCreateRequest
from ...schemas.api import (FileQuery, FileUrl, PrescreenRequest, TaskWorkflowCreated,
                           TaskWorkflowRequest)
from ..operations import Auth, Reply, operation
from ..render import origin, pdf_response
from ..examples import USER, WALMART, Example, From


@operation("POST", "/task/create", "Create a task (or a workflow of several)",
           body=TaskCreateRequest, errors=(400, 403, 404, 429),
           example=Example({"identifier": USER, "company": WALMART, "product": "deposit",
                            "scenario": "happy-path", "metadata": {"orderId": "A-1001"}}))
async def create_task(tenant, token, body, sandbox) -> views.TaskCreated:
    workflow, tasks = tenant.tasks.create_task(CreateTask(body, token=token))
    return views.TaskCreated.of(workflow, tasks)


@operation("GET", "/task/{taskId}", "A task, with its history", errors=(404,))
async def get_task(tenant, token, params, sandbox) -> views.TaskRecord:
    task = tenant.tasks.get_task(params["taskId"],
                                   identifier=token.identifier if token else None)
    return views.TaskRecord.of(task)


@operation("GET", "/task/{taskId}/details", "A task's details (the real Task)", errors=(404,))
async def task_details(tenant, params, sandbox) -> views.TaskDetails:
    """The real Task (`_id`, `status`, `product`, `authentication`, `company`,
    `payrollDataAvailable`, `createdAt`), then the sandbox's own fields and `files`."""
    return tenant.tasks.details_of(tenant.tasks.get_task(params["taskId"]))


@operation("GET", "/task/{taskId}/status", "A task's status", errors=(404,))
async def task_status(tenant, params, sandbox) -> views.TaskStatusAnswer:
    task = tenant.tasks.get_task(params["taskId"])
    return views.TaskStatusAnswer(task=views.StatusOfTask.of(
        task, tenant.tasks.payroll_data_available(task)))


@operation("POST", "/task/prescreen", "Prescreen: how likely a task at a company is to work",
           body=PrescreenRequest,
           example=Example({"company": {"id": WALMART}, "product": "deposit"}))
async def prescreen(tenant, body) -> views.Prescreen:
    """HIGH when the company is known, operational, offers the product and has headless
    authentication, and the account's manual-deposit rule does not cover it; else LOW."""
    return tenant.tasks.prescreen(body.company, body.product)


@operation("POST", "/task-workflow/from-linked-account", "Refresh a linked account (tasks on it)",
           body=TaskWorkflowRequest, command=TaskCreateRequest,
           errors=(400, 403, 404, 429),
           example=Example(
               {"linkedAccount": "6410b1c2d3e4f5a6b7c8d9e0", "tasks": [{"operation": "verify"}]},
               after=From("GET", "/linked-account/list/{identifier}",
                          fields={"/linkedAccount": "$response.body#/data/0/_id"})))
async def create_task_workflow(tenant, body, sandbox) -> TaskWorkflowCreated:
    """The spec's pull refresh (a linked account passed to task creation), one task per
    `tasks` entry, in one workflow; the user and the company are the linked account's."""
    workflow, tasks = tenant.tasks.create_task(CreateTask(body))
    return TaskWorkflowCreated(task=tenant.tasks.details_of(tasks[0]), task_workflow=workflow.id)


@operation("GET", "/task/{taskId}/file/{fileId}/generate-url", "A signed URL for a task's file",
           envelope={"url": {"type": "string", "format": "uri",
                             "description": "The same URL, bare, as the old docs show it."}},
           errors=(404,))
async def generate_file_url(tenant, params, request, sandbox) -> Reply[FileUrl]:
    """The old docs show this answer bare (`{url}`): the sandbox answers `url` beside its
    `data` envelope, so readers of either form find it."""
    task = tenant.tasks.get_task(params["taskId"])
    path, expires = tenant.file_url(task, params["fileId"])
    url = origin(request) + path
    return Reply(FileUrl(url=url, expires_at=isoformat(expires)), extra={"url": url})


@operation("GET", "/task/{taskId}/file/{fileId}", "A task's file, by its signed URL",
           auth=Auth.NONE, query=FileQuery, content_type="application/pdf", errors=(401, 404),
           example=Example())  # not after POST /task/create: its URL is generate-url's answer
async def task_file(params, query, sandbox) -> web.Response:
    """The URL's signature (HMAC keyed by the tenant's API secret) and expiry stand in for
    credentials, as a presigned URL's do."""
    tenant, task, file = open_task_file(
        sandbox.registry.tenants.get(query.tenant), params["taskId"], params["fileId"],
        query.expires, query.signature)
    if file.statement is not None:
        pdf = text_pdf(paystub_lines(file.account, file.statement))
    else:
        company = tenant.companies.get(task.company_id)
        pdf = deposit_form_pdf(company.name if company else "your employer", task.identifier,
                               tenant.clock.now().date())
    return pdf_response(pdf, file.name, file.content_type)
