"""A checked body becomes its operation's typed command (routes/pipeline.py: the operation's
`decode_body`), and the domain reads the command: the real service's other names for a
field included."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from payroll_sandbox.edge import routes  # noqa: F401  (declares the operations)
from payroll_sandbox.domain.shapes import UNSET
from payroll_sandbox.domain.tasks.requests import CreateTask, TaskCreateRequest, TaskItem
from payroll_sandbox.edge.operations import OPERATIONS


@dataclass(frozen=True)
class Token:
    identifier: str
    public_token: str


def decoded(method: str, path: str, body: dict):
    operation = next(op for op in OPERATIONS if (op.method, op.path) == (method, path))
    return operation.decode_body(body)


def test_create_task_reads_the_spec_names_and_who_asks():
    request = decoded("POST", "/task/create", {
        "linkedAccountId": "acct-1", "operation": "deposit", "metadata": {"a": 1},
        "scenario": "happy-path"})
    command = CreateTask(request, token=Token("ada", "tok"))
    assert isinstance(request, TaskCreateRequest)
    assert (command.linked_account, request.operation, request.product) == (
        "acct-1", "deposit", UNSET)
    assert command.token_identifier == "ada"
    assert (request.metadata, request.scenario, request.identifier) == (
        {"a": 1}, "happy-path", UNSET)


def test_create_task_with_several_tasks_and_under_api_keys():
    request = decoded("POST", "/task/create", {
        "identifier": "bo", "company": "c1",
        "tasks": [{"product": "deposit", "onComplete": "finish"}, {"product": "pay-link"}]})
    command = CreateTask(request)
    assert [type(t) for t in request.tasks] == [TaskItem, TaskItem]
    assert [(t.product, t.on_complete, t.on_fail) for t in request.tasks] == [
        ("deposit", "finish", "continue"), ("pay-link", "continue", "continue")]
    assert request.product is UNSET and request.operation is UNSET
    assert command.token_identifier is None and not command.watched


def test_a_refresh_body_becomes_a_task_creation():
    request = decoded("POST", "/task-workflow/from-linked-account", {
        "linkedAccount": "acct-2", "tasks": [{"operation": "deposit"}]})
    assert isinstance(request, TaskCreateRequest)
    assert CreateTask(request).linked_account == "acct-2"
    assert request.tasks[0].operation == "deposit"


def test_a_sign_in_reads_its_credentials_and_options():
    sign_in = decoded("POST", "/sdk/login", {
        "companyId": "c1", "username": "goodlogin", "password": "x",
        "paymentMethod": {"type": "card", "_id": "p", "title": "Visa"}})
    assert (sign_in.company_id, sign_in.username, sign_in.password) == ("c1", "goodlogin", "x")
    assert sign_in.tasks is UNSET  # none configured: the company's default operation
    assert sign_in.mfa_answer is UNSET and sign_in.linked_account is UNSET
    assert sign_in.payment_method["_id"] == "p"


@pytest.mark.parametrize("method, path", sorted(
    (op.method, op.path) for op in OPERATIONS if op.body_shape is not None
    and not isinstance(op.body_shape, dict)))
def test_every_operation_with_a_struct_body_decodes_it_by_type(method, path):
    operation = next(op for op in OPERATIONS if (op.method, op.path) == (method, path))
    assert operation.decode_body is not None
