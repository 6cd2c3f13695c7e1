"""Tasks and task workflows: created by the API, moved by scenario steps on the clock.

A task only moves along the spec's transitions (states.py), and the spec's event rules
are applied here, whatever a scenario says (spec: Task, Task events, User object):
task-authentication-status-updated only when `authenticated` changes,
task-status-updated only when the task resolves, nothing after a final status but a
patch, and `user.connected` true only for a task whose hosted-flow page was open
when it resolved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..clock import isoformat
from ..errors import (CompanyDisabled, CompanyManualDeposits, CompanyMismatch, CompanyNotFound,
                      CompanyUnderMaintenance, IdentifierMismatch, IllegalTransition,
                      LinkedAccountNotFound, ProductNotOffered, TaskNotFound, UnknownScenario,
                      ValidationFailed, field_detail)
from ..scenarios.loader import Scenario, Step
from ..schemas.validate import check_metadata
from .changes import TASK
from .companies import DISABLED, UNKNOWN_COMPANY, Company
from .company_admin import set_company_status
from .states import (COMPLETED, FAILED, FINAL, PROCESSING, QUEUED, emits_status_update,
                     transition_error)
from .tenants import Tenant, create_access_token
from .timeline import action_kind

HAPPY_PATH = "happy-path"
PAYMENT_TOKEN_LIFETIME = 24 * 3600  # spec: Limits, card token lifetime
PAYMENT_TOKEN_EXPIRED = "payment-token-expired"

UNKNOWN_TASK = "No task has the id {task_id!r}."
UNKNOWN_SCENARIO = "No scenario is named {name!r}. Known: {known}."
COMPANY_DISABLED = "Company {name!r} is disabled: no authentication flow can start against it."
COMPANY_IN_MAINTENANCE = ("Company {name!r} is under maintenance for {product}: no "
                          "authentication flow can start against it until it is operational.")
PRODUCT_NOT_OFFERED = "Company {name!r} does not offer the product {product!r} (it offers {offered})."
IDENTIFIER_REQUIRED = "With API keys, name the user with `identifier`."
IDENTIFIER_MISMATCH = "`identifier` does not match the user of the public token."
COMPANY_OR_LINKED_ACCOUNT = "Send `company` (with a product or tasks) or `linkedAccount`."
REFRESH_COMPANY = "A refresh runs at the linked account's company; leave `company` out."
PRODUCT_REQUIRED = "Name the product: `product`, `operation` or `tasks`."
MANUAL_DEPOSITS_ONLY = ("Company {name!r} has no programmatic authentication for this account "
                        "(manual-deposits): users update their direct deposit by hand, and the "
                        "hosted flow shows them manual instructions.")


@dataclass
class Task:
    id: str
    workflow: str
    identifier: str
    user_id: str
    company_id: str
    product: str
    scenario: str
    created_at: float
    authentication_method: str
    public_token: str
    status: str = QUEUED
    previous_status: str | None = None
    authenticated: bool = False
    # user.connected (spec: User object): only a task started in the hosted flow can have
    # its user present; the page closing (or a scenario's `connected: false`) means the
    # user left. Frozen when the task resolves: later events (a patch, the workflow's
    # end) tell whether the user saw the final outcome.
    watched: bool = False
    user_left: bool = False
    saw_outcome: bool | None = None
    reason: str | None = None
    flow: str | None = None
    meta: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    payment_method: dict[str, Any] | None = None
    linked_account: str | None = None
    payment_method_given: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def connected(self) -> bool:
        """True while the user is present in the hosted flow; after resolution, whether
        they were present to see the final outcome."""
        if self.saw_outcome is not None:
            return self.saw_outcome
        return self.watched and not self.user_left

    def record(self) -> dict[str, Any]:
        """GET /task/{id}: the task, its outcome and every transition it made."""
        record: dict[str, Any] = {
            "id": self.id, "taskWorkflow": self.workflow, "status": self.status,
            "previousStatus": self.previous_status, "product": self.product,
            "company": self.company_id, "user": {"_id": self.user_id, "identifier": self.identifier,
                                                  "connected": self.connected},
            "authenticated": self.authenticated, "authenticationMethod": self.authentication_method,
            "scenario": self.scenario, "createdAt": isoformat(self.created_at),
            "history": self.history,
        }
        optional = {"reason": self.reason, "flow": self.flow, "meta": self.meta,
                    "metadata": self.metadata, "paymentMethod": self.payment_method,
                    "linkedAccount": self.linked_account}
        record.update({k: v for k, v in optional.items() if v is not None})
        return record


@dataclass
class Workflow:
    id: str
    identifier: str
    tasks: list[str]
    finished: bool = False


@dataclass(frozen=True)
class TaskRequest:
    """One task of a create request, after the request was checked."""

    product: str
    metadata: dict[str, Any] | None
    payment_method: dict[str, Any] | None
    path: str = "$.product"  # where the product was named, for errors


# Hooks other capabilities plug into a step (linked accounts, the aggregator):
# name of the step field -> function(tenant, task, value).
StepHook = Callable[[Tenant, Task, Any], None]


class TaskEngine:
    """Creates tasks and runs their scenario steps on the tenant's timeline."""

    def __init__(self, scenarios: Mapping[str, Scenario], scope_of: Callable[[str], str | None],
                 linked_accounts: Any = None) -> None:
        """`linked_accounts` (LinkedAccounts): continuous access, told of every task that
        ends and of the steps that change a linked account or delete a user's data."""
        self.scenarios = scenarios
        self.scope_of = scope_of
        self.linked_accounts = linked_accounts
        self.step_hooks: dict[str, StepHook] = {}
        self.on_final: list[Callable[[Tenant, Task], None]] = []
        if linked_accounts is not None:
            self.on_final.append(linked_accounts.on_task_final)
            self.step_hooks["linkedAccount"] = linked_accounts.on_step
            self.step_hooks["piiDataDeleted"] = linked_accounts.on_pii_step

    # -- creation ---------------------------------------------------------------------------

    def create_task(self, tenant: Tenant, body: dict[str, Any], *,
                    token_identifier: str | None = None, public_token: str | None = None,
                    login_scenario: str | None = None,
                    watched: bool = False) -> tuple[Workflow, list[Task]]:
        """POST /task/create: one workflow with one or more tasks, all queued.

        `watched`: the tasks were started in the hosted flow, whose page is open.

        With `linkedAccount` it is a pull refresh of that account: the company and the
        user are the account's, and a disconnected account's refresh fails with
        auth-expired (a refresh does not recover it; spec: Account update lifecycle).
        """
        account = None
        if "linkedAccountId" in body:  # the spec's name for it (Pull refresh flow)
            body = {**{k: v for k, v in body.items() if k != "linkedAccountId"},
                    "linkedAccount": body["linkedAccountId"]}
        if "linkedAccount" in body:
            if self.linked_accounts is None:
                raise LinkedAccountNotFound("Continuous access is not available.")
            account = self.linked_accounts.require(tenant, body["linkedAccount"])
            if body.get("company", account.company_id) != account.company_id:
                raise CompanyMismatch(REFRESH_COMPANY,
                                      details=[field_detail("$.company", REFRESH_COMPANY)])
            body = {"identifier": token_identifier or account.identifier,
                    "company": account.company_id, **body}
            if "product" not in body and "operation" not in body and "tasks" not in body:
                body["product"] = account.product
        identifier = self._identifier(body, token_identifier)
        if account is not None and account.identifier != identifier:
            raise LinkedAccountNotFound(
                f"No linked account of {identifier!r} has the id {account.id!r}.",
                details=[field_detail("$.linkedAccount", "not this user's")])
        if "company" not in body:
            raise ValidationFailed(COMPANY_OR_LINKED_ACCOUNT,
                                   details=[field_detail("$.company", COMPANY_OR_LINKED_ACCOUNT)])
        company = tenant.companies.get(body["company"])
        if company is None:
            raise CompanyNotFound(UNKNOWN_COMPANY.format(company_id=body["company"]),
                                  details=[field_detail("$.company", "unknown company id")])
        requests = self._task_requests(body)
        for request in requests:
            self.check_company_accepts(tenant, company, request.product, request.path)
        scenario = self.select_scenario(tenant, identifier, company, body.get("scenario"),
                                        login_scenario)
        if account is not None and not account.connected:
            scenario = self.scenarios.get("auth-expired", scenario)
        user = tenant.user(identifier)
        # Task events always carry the user's public token; a user who never had one
        # (tasks made with API keys) gets one, as the SDK flow would have issued.
        token = (public_token or tenant.latest_token.get(identifier)
                 or create_access_token(tenant, identifier).public_token)
        workflow = Workflow(id=tenant.ids.object_id(), identifier=identifier, tasks=[])
        tasks = []
        for request in requests:
            task_scenario = self._pay_link_outcome(tenant, identifier, company, request) or scenario
            task = Task(
                id=tenant.ids.object_id(), workflow=workflow.id, identifier=identifier,
                user_id=user.id, company_id=company.id, product=request.product,
                scenario=task_scenario.name, created_at=tenant.clock.timestamp(),
                authentication_method=self.authentication_method(company, request.product),
                public_token=token, metadata=request.metadata,
                payment_method=request.payment_method, linked_account=body.get("linkedAccount"),
                payment_method_given=request.payment_method is not None, watched=watched)
            task.history.append({"status": QUEUED, "at": isoformat(task.created_at)})
            tenant.tasks[task.id] = task
            tenant.changes.touch(TASK, task.id)
            workflow.tasks.append(task.id)
            self.schedule(tenant, task, task_scenario)
            tasks.append(task)
        tenant.workflows[workflow.id] = workflow
        tenant.keep_tasks_bounded()
        return workflow, tasks

    def select_scenario(self, tenant: Tenant, identifier: str, company: Company | None,
                        requested: str | None, login_scenario: str | None = None) -> Scenario:
        """First match wins: the request, the user's binding, the SDK login, the company, happy-path."""
        if requested is not None:
            return self.require_scenario(requested, "$.scenario")
        for name in (tenant.scenario_bindings.get(identifier), login_scenario,
                     company.default_scenario if company else None):
            scenario = self.scenarios.get(name) if name is not None else None
            if scenario is not None and scenario.kind == "task":
                return scenario
        return self.scenarios[HAPPY_PATH]

    def require_scenario(self, name: str, path: str = "$.scenario") -> Scenario:
        scenario = self.scenarios.get(name)
        if scenario is None or scenario.kind != "task":
            known = ", ".join(n for n, s in sorted(self.scenarios.items()) if s.kind == "task")
            raise UnknownScenario(UNKNOWN_SCENARIO.format(name=name, known=known),
                                  details=[field_detail(path, "unknown")])
        return scenario

    def schedule(self, tenant: Tenant, task: Task, scenario: Scenario) -> None:
        for step in scenario.steps:
            # No label: the step action describes itself when asked (a string per step
            # was a tenth of a task's creation).
            tenant.timeline.schedule(task.created_at + step.at, _StepAction(self, tenant, task, step),
                                     owner=task.id)

    def _identifier(self, body: dict[str, Any], token_identifier: str | None) -> str:
        if token_identifier is not None:
            if body.get("identifier", token_identifier) != token_identifier:
                raise IdentifierMismatch(IDENTIFIER_MISMATCH,
                                         details=[field_detail("$.identifier", IDENTIFIER_MISMATCH)])
            return token_identifier
        if "identifier" not in body:
            raise ValidationFailed(IDENTIFIER_REQUIRED,
                                   details=[field_detail("$.identifier", IDENTIFIER_REQUIRED)])
        return body["identifier"]

    def _task_requests(self, body: dict[str, Any]) -> list[TaskRequest]:
        if "metadata" in body:
            check_metadata(body["metadata"], "$.metadata")
        for n, t in enumerate(body.get("tasks", ())):
            if "metadata" in t:
                check_metadata(t["metadata"], f"$.tasks[{n}].metadata")
        if "tasks" in body:
            return [TaskRequest(product=t.get("product") or t["operation"],
                                metadata=t.get("metadata", body.get("metadata")),
                                payment_method=t.get("paymentMethod"),
                                path=f"$.tasks[{n}].{'product' if 'product' in t else 'operation'}")
                    for n, t in enumerate(body["tasks"])]
        field_name = "product" if "product" in body else "operation"
        if field_name not in body:
            raise ValidationFailed(PRODUCT_REQUIRED,
                                   details=[field_detail("$.product", PRODUCT_REQUIRED)])
        return [TaskRequest(product=body[field_name], metadata=body.get("metadata"),
                            payment_method=body.get("paymentMethod"),
                            path=f"$.{field_name}")]

    @staticmethod
    def check_company_accepts(tenant: Tenant, company: Company, product: str, path: str) -> None:
        """Spec: "Starting an authentication flow against an under-maintenance or disabled
        company is not possible" (maintenance is per product), and a manual-deposits company
        "has no programmatic authentication"."""
        if company.status == DISABLED:
            raise CompanyDisabled(COMPANY_DISABLED.format(name=company.name),
                                  details=[field_detail("$.company", "disabled")])
        if company.under_maintenance_for(product):
            raise CompanyUnderMaintenance(
                COMPANY_IN_MAINTENANCE.format(name=company.name, product=product),
                details=[field_detail("$.company", "under maintenance")])
        if tenant.manual_deposits.applies_to(company):
            raise CompanyManualDeposits(MANUAL_DEPOSITS_ONLY.format(name=company.name),
                                        details=[field_detail("$.company", "manual deposits only")])
        if product not in company.available_products:
            raise ProductNotOffered(PRODUCT_NOT_OFFERED.format(
                name=company.name, product=product,
                offered=", ".join(company.available_products)),
                                  details=[field_detail(path, "not offered")])

    def authentication_method(self, company: Company, product: str) -> str:
        methods = company.capabilities.get("authenticationMethods") or ["standard-auth"]
        if self.scope_of(product) == "pay-link":
            # Pay-link tasks report true-auth or smart-auth (spec: Task, authenticationMethod).
            return "true-auth" if "true-auth" in methods else "smart-auth"
        return methods[0]

    def _pay_link_outcome(self, tenant: Tenant, identifier: str, company: Company,
                          request: TaskRequest) -> Scenario | None:
        """Spec rules that decide a pay-link task before any scenario: the merchant's
        supported payment methods, the card token lifetime and the merchant's maximum of
        payment methods. A card token older than 24 hours is recreated, as "Recreation is
        normally automatic"; it expires only for a user whose recreation was switched off
        on the control plane (or through the payment-token-expired scenario)."""
        method = request.payment_method
        if not method:
            return None
        supported = company.capabilities.get("supportedPaymentMethods") or []
        if supported and method.get("type") not in supported:
            return self.scenarios.get("payment-method-not-supported")
        now = tenant.clock.timestamp()
        key = (identifier, method["_id"])
        if method.get("type") == "card":
            created = tenant.payment_tokens.get(key)
            expired = created is not None and now - created >= PAYMENT_TOKEN_LIFETIME
            if expired and identifier in tenant.card_token_recreation_off:
                return self.scenarios.get(PAYMENT_TOKEN_EXPIRED)
            if created is None or expired:
                tenant.payment_tokens[key] = now
        methods = tenant.merchant_payment_methods.setdefault((identifier, company.id), set())
        if method["_id"] not in methods:
            if company.max_payment_methods is not None and len(methods) >= company.max_payment_methods:
                return self.scenarios.get("payment-method-limit-reached")
            methods.add(method["_id"])
        return None

    # -- steps ------------------------------------------------------------------------------

    def apply_step(self, tenant: Tenant, task: Task, step: Step) -> None:
        """One scenario step: company first, then the move to processing, authentication,
        the final status, and accounts. The event rules are applied here, not by the step."""
        changes = step.changes
        tenant.changes.touch(TASK, task.id)
        if "company" in changes:
            company_change = changes["company"]
            company = tenant.companies.get(task.company_id)
            # A scenario is written for any company: keep the listed products it offers.
            offered = [p for p in company_change.get("products") or []
                       if company is not None and p in company.available_products]
            set_company_status(tenant, task.company_id, company_change["status"], offered or None)
        patch = changes.get("patch", False)
        status = changes.get("status")
        if status is not None and task.status in FINAL and not patch:
            return  # nothing but a patch follows a final status (hand-built steps too)
        for name in ("product", "flow", "meta"):
            if name in changes:
                setattr(task, name, changes[name])
        if "authenticationMethod" in changes:
            task.authentication_method = changes["authenticationMethod"]
        if "paymentMethod" in changes and not task.payment_method_given:
            # The scenario's payment method stands in only when the request named none.
            task.payment_method = changes["paymentMethod"]
        if changes.get("connected") is False:
            self.leave(tenant, task)
        if status == PROCESSING:
            self._move(tenant, task, status, reason=None, patch=False)
        if "authenticated" in changes:
            self._authenticate(tenant, task, changes["authenticated"])
        if status is not None and status != PROCESSING:
            self._move(tenant, task, status, reason=changes.get("reason"), patch=patch)
        if "accounts" in changes:
            self._emit_task_event(tenant, task, "pay-link-accounts-updated",
                                  {"accounts": self._accounts(tenant, task, changes["accounts"])})
        for name, hook in self.step_hooks.items():
            if name in changes:
                hook(tenant, task, changes[name])
        if status in FINAL and not patch:
            for listener in self.on_final:
                listener(tenant, task)
            self._finish_workflow_if_done(tenant, task, changes.get("workflowFailureReason"))

    @staticmethod
    def leave(tenant: Tenant, task: Task) -> None:
        """The user left the hosted flow (its page closed): user.connected is false from
        now on, and on the final outcome if the task has not resolved yet."""
        task.user_left = True
        tenant.changes.touch(TASK, task.id)

    def _authenticate(self, tenant: Tenant, task: Task, authenticated: bool) -> None:
        """Spec: task-authentication-status-updated, "Authentication status of a Task
        changed": a step that states the value the task already has emits nothing."""
        if task.status in FINAL or authenticated == task.authenticated:
            return
        task.authenticated = authenticated
        self._emit_task_event(tenant, task, "task-authentication-status-updated",
                              {"authenticated": task.authenticated})

    def _move(self, tenant: Tenant, task: Task, status: str, *, reason: str | None,
              patch: bool) -> None:
        problem = transition_error(task.status, status, patch=patch)
        if problem:  # loaded scenarios are checked; this guards hand-built steps
            raise IllegalTransition(problem)
        task.previous_status, task.status = task.status, status
        task.reason = reason if status == FAILED else None
        if status in FINAL and task.saw_outcome is None:
            task.saw_outcome = task.watched and not task.user_left
        task.history.append({"status": status, "previousStatus": task.previous_status,
                             "at": isoformat(tenant.clock.timestamp()), "patch": patch,
                             **({"reason": reason} if reason else {})})
        event_type = emits_status_update(task.previous_status, status, patch=patch)
        if event_type == "task-status-patched":
            data = {"authenticated": task.authenticated, "status": task.status,
                    "previousStatus": task.previous_status}
            if task.payment_method:
                data["paymentMethod"] = task.payment_method
            self._emit_task_event(tenant, task, event_type, data)
        elif event_type == "task-status-updated":
            data = {"previousStatus": task.previous_status, "status": task.status,
                    "authenticated": task.authenticated}
            optional = {"paymentMethod": task.payment_method, "reason": task.reason,
                        "flow": task.flow, "meta": task.meta if status == FAILED else None}
            data.update({k: v for k, v in optional.items() if v is not None})
            self._emit_task_event(tenant, task, event_type, data)

    def _accounts(self, tenant: Tenant, task: Task, updates: list[dict[str, Any]]) -> list[dict]:
        accounts = []
        for update in updates:
            account = {"_id": update.get("_id") or f"{task.company_id}-{task.user_id}",
                       "updateType": update["updateType"], "bills": []}
            for bill in update.get("bills", []):
                entry = {"_id": bill.get("_id") or tenant.ids.object_id()}
                if update["updateType"] == "updated" and bill.get("changedFields"):
                    entry["changedFields"] = bill["changedFields"]
                account["bills"].append(entry)
            accounts.append(account)
        return accounts

    def _finish_workflow_if_done(self, tenant: Tenant, task: Task,
                                 failure_reason: str | None) -> None:
        workflow = tenant.workflows.get(task.workflow)
        if workflow is None or workflow.finished:
            return
        tasks = [tenant.tasks[t] for t in workflow.tasks]
        if not all(t.status in FINAL for t in tasks):
            return
        workflow.finished = True
        failed = [t for t in tasks if t.status == FAILED]
        data: dict[str, Any] = {
            "status": FAILED if failed else COMPLETED,
            "tasks": [{"task": t.id, "product": t.product, "status": t.status,
                       **({"reason": t.reason} if t.reason else {})} for t in tasks],
        }
        if failed:
            data["failureReason"] = failure_reason or failed[0].reason
        self._emit_task_event(tenant, task, "task-workflow-finished", data)

    def _emit_task_event(self, tenant: Tenant, task: Task, event_type: str,
                         data: dict[str, Any] | None) -> None:
        company = tenant.companies.get(task.company_id)
        tenant.emit(
            event_type, identifier=task.identifier, task_id=task.id,
            user={"_id": task.user_id, "identifier": task.identifier, "connected": task.connected},
            data=data, publicToken=task.public_token, product=task.product, task=task.id,
            taskWorkflow=task.workflow, authenticationMethod=task.authentication_method,
            company=company.branding_summary() if company else {"_id": task.company_id},
            metadata=task.metadata)

    # -- reading ----------------------------------------------------------------------------

    @staticmethod
    def get_task(tenant: Tenant, task_id: str, identifier: str | None = None) -> Task:
        """A task; with `identifier` (a public token's user) only that user's tasks exist."""
        task = tenant.tasks.get(task_id)
        if task is None or identifier is not None and task.identifier != identifier:
            raise TaskNotFound(UNKNOWN_TASK.format(task_id=task_id))
        return task


@action_kind("task-step")
class _StepAction:
    """A scheduled step (a small object rather than a closure: cheap at 10,000s of tasks;
    slotted, not a frozen dataclass, whose __init__ cost a task creation 3 setattr calls
    per step)."""

    __slots__ = ("engine", "tenant", "task", "step")

    def __init__(self, engine: TaskEngine, tenant: Tenant, task: Task, step: Step) -> None:
        self.engine, self.tenant, self.task, self.step = engine, tenant, task, step

    # In a snapshot a step is a scenario cursor: the task, its scenario, the step's place.
    schema = {"type": "object", "additionalProperties": False,
              "required": ["kind", "task", "scenario", "step"],
              "properties": {"kind": {"const": "task-step"}, "task": {"type": "string"},
                             "scenario": {"type": "string"},
                             "step": {"type": "integer", "minimum": 0}}}

    def __call__(self) -> None:
        self.engine.apply_step(self.tenant, self.task, self.step)

    def __str__(self) -> str:
        return f"{self.task.scenario} step for task {self.task.id}"

    def describe(self) -> dict[str, Any]:
        steps = self.engine.scenarios[self.task.scenario].steps
        index = next((n for n, step in enumerate(steps) if step is self.step), None)
        return {"kind": "task-step", "task": self.task.id, "scenario": self.task.scenario,
                "step": steps.index(self.step) if index is None else index}

    @classmethod
    def rebuild(cls, data: dict[str, Any], context: Any) -> _StepAction:
        return cls(context.engine, context.tenant, context.task(data["task"]),
                   context.step(data["scenario"], data["step"], "task"))
