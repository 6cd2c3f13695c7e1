"""The pytest plugin as a customer uses it: a shared server, a fresh tenant per test."""

from __future__ import annotations

import pytest

from simulator.pytest_plugin import SandboxError

WALMART = "6410a0000000000000000001"


def test_plugin_runs_a_task_on_the_manual_clock(payroll_sandbox):
    task = payroll_sandbox.post("/task/create", {"identifier": "u1", "company": WALMART,
                                                 "product": "deposit", "scenario": "auth-expired"})
    assert payroll_sandbox.get(f"/task/{task['id']}")["status"] == "queued"
    payroll_sandbox.run_until_idle()
    events = payroll_sandbox.events(task=task["id"])
    assert [e["eventType"] for e in events][-2:] == ["task-status-updated", "task-workflow-finished"]
    assert events[-2]["body"]["data"]["reason"] == "auth-expired"


def test_plugin_gives_each_test_its_own_tenant(payroll_sandbox, payroll_sandbox_server):
    other = payroll_sandbox_server.new_tenant()
    payroll_sandbox.trigger("company-updated")
    assert len(payroll_sandbox.events()) == 1
    assert other.events() == []
    assert payroll_sandbox.name != other.name


def test_plugin_reports_errors_with_the_error_body(payroll_sandbox):
    with pytest.raises(SandboxError) as raised:
        payroll_sandbox.post("/company/search", {"query": "x", "product": "a", "products": ["b"]})
    assert raised.value.status == 400
    assert raised.value.body["error"]["code"] == "product-and-products"
