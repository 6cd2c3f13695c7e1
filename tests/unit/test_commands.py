"""Handlers turn a checked body into a typed command (docs/ARCHITECTURE.md): what each
command reads from the body, the real service's other names for a field included."""

from __future__ import annotations

from dataclasses import dataclass

from payroll_sandbox.domain.sdk import SignIn
from payroll_sandbox.domain.tasks import CreateTask


@dataclass(frozen=True)
class Token:
    identifier: str
    public_token: str


def test_create_task_reads_the_spec_names_and_who_asks():
    command = CreateTask.read({"linkedAccountId": "acct-1", "operation": "deposit",
                               "metadata": {"a": 1}, "scenario": "happy-path"},
                              token=Token("ada", "tok"))
    assert (command.linked_account, command.product, command.product_field) == (
        "acct-1", "deposit", "operation")
    assert (command.token_identifier, command.public_token) == ("ada", "tok")
    assert (command.metadata, command.scenario, command.identifier) == (
        {"a": 1}, "happy-path", None)


def test_create_task_with_several_tasks_and_under_api_keys():
    tasks = [{"product": "deposit", "onComplete": "finish"}, {"product": "pay-link"}]
    command = CreateTask.read({"identifier": "bo", "company": "c1", "tasks": tasks})
    assert command.tasks == tuple(tasks) and command.product is None
    assert (command.identifier, command.company, command.token_identifier) == ("bo", "c1", None)
    assert not command.watched and command.login_scenario is None


def test_a_sign_in_reads_its_credentials_and_options():
    sign_in = SignIn.read({"companyId": "c1", "username": "goodlogin", "password": "x",
                           "tasks": [], "paymentMethod": {"type": "card", "_id": "p",
                                                          "title": "Visa"}})
    assert (sign_in.company_id, sign_in.username, sign_in.password) == ("c1", "goodlogin", "x")
    assert sign_in.tasks is None  # none configured: the company's default operation
    assert sign_in.mfa_answer == "" and sign_in.linked_account is None
    assert sign_in.payment_method["_id"] == "p"
