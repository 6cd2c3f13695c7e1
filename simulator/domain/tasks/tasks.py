"""Tasks and task workflows: created by the API, moved by scenario steps on the clock.

A task only moves along the spec's transitions (states.py), and the spec's event rules
are applied here, whatever a scenario says (spec: Task, Task events, User object):
task-authentication-status-updated only when `authenticated` changes,
task-status-updated only when the task resolves, nothing after a final status but a
patch, and `user.connected` true only for a task whose hosted-flow page was open
when it resolved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

import msgspec

from ...clock import Clock, Moment
from ...errors import (CompanyMismatch, CompanyNotFound,
                      IllegalTransition,
                      LinkedAccountNotFound, TaskLimitReached, ValidationFailed, field_detail)
from ..changes import TASK, Changes
from ..companies.companies import (UNKNOWN_COMPANY, Company, CompanyDirectory)
from ..companies.company_admin import set_company_status
from ..webhooks.event_types import (Authenticated, Bill, PayLinkAccount, PayLinkAccounts,
                                    TaskStatusPatched, TaskStatusUpdated, WorkflowFinished,
                                    WorkflowTask)
from ..parts import Held, TenantSettings
from .pay_link import PAY_LINK
from ..rules import Rules
from ..shapes import UNSET, Command, given, made, of, view_of
from .states import (COMPLETED, FAILED, FINAL, PROCESSING, QUEUED,
                     STEP_FIELDS, Scenario, Step,
                     emits_status_update, transition_error,
                     written_payment_method)
from ..stored import LoadError, Stored, array, stored
from ..sections import COUNT, STRING, STRINGS, TIME, Sections, obj, unique
from ..timeline import Timeline, action_kind
from .records import Task, TaskTransition, Workflow
from .requests import CreateTask, TaskRequest, first_batch
from .reads import TaskReads
from .choosing import HAPPY_PATH, TaskChoices

BROKEN_STEP_REASON = "unknown-failure"  # a step that raised fails its task with this reason

TASK_LIMIT = ("This tenant holds {stored} tasks that cannot go yet (running, or held back by "
              "their workflow), and keeps at most {limit}: --max-tasks "
              "(PAYROLL_SANDBOX_MAX_TASKS, config maxTasks). Run its clock so they end, reset "
              "it, or raise the bound; nothing stored was changed.")
COMPANY_OR_LINKED_ACCOUNT = "Send `company` (with a product or tasks) or `linkedAccount`."
REFRESH_COMPANY = "A refresh runs at the linked account's company; leave `company` out."


# The task's records: records.py; what a create request sends: requests.py; what the API
# shows of a task: views.py; what the part answers (TaskReads): reads.py; what decides a
# new task (TaskChoices): choosing.py.


def _as_written_now(task: Task, scope_of: Callable[[str], str | None]) -> None:
    """A restored task as this version writes one (an older snapshot restores, in the
    forms it has): `authenticationMethod` on a pay-link task only (older versions gave
    every task one), the payment method's expiry in the one date-time form."""
    if scope_of(task.product) != PAY_LINK:
        task.authentication_method = None
    task.payment_method = written_payment_method(task.payment_method)


class Tasks(TaskChoices, TaskReads, Held[Task]):
    """One tenant's tasks and task workflows, and the rules that create and move them:
    read as a mapping of task id -> Task; changed only through its methods.

    It also keeps what decides a task before its scenario: the users' scenario bindings
    and, for pay-link, the card tokens and the payment methods each user has at each
    merchant."""

    def __init__(self, rules: Rules, *, ids: Any, clock: Clock, timeline: Timeline,
                 changes: Changes, companies: CompanyDirectory, settings: TenantSettings,
                 identity: Any, emit: Callable[..., Any]) -> None:
        # Given what it uses, not the tenant (parts.py); the linked accounts once they exist.
        self.rules = rules
        self.ids, self.clock, self.timeline, self.changes = ids, clock, timeline, changes
        self.companies, self.settings, self.identity, self.emit = companies, settings, identity, emit
        self.accounts: Any = None  # linked_accounts.LinkedAccounts
        self.scenarios = rules.scenarios
        self._by_id: dict[str, Task] = {}
        self.workflows: dict[str, Workflow] = {}
        self.bindings: dict[str, str] = {}  # identifier -> scenario
        self.everyone: str | None = None  # the scenario of every user's tasks (below their own)
        # Pay-link: card tokens (identifier, payment method id) -> created at, and the
        # payment methods each user has at each merchant.
        self.payment_tokens: dict[tuple[str, str], float] = {}
        self.merchant_payment_methods: dict[tuple[str, str], set[str]] = {}
        # Users whose expired card tokens are not recreated (the control plane's switch):
        # their next task with a card older than 24 hours fails payment-token-expired.
        self.card_token_recreation_off: set[str] = set()
        self.evicted = 0
        self.next_eviction = 0  # task count at which to look for evictions again
        # Tasks workflows hold until the one before ends (Workflow.pending): admitted, so
        # counted against max_tasks before they start (admit).
        self.waiting = 0
        self._fruitless_at: tuple[int, int] | None = None  # (revision, tasks) of a vain scan
        # The rest of the tenant's live work (Tenant.admit_work: events, jobs), checked
        # before a task is made.
        self.admit_work: Callable[[], None] = lambda: None

    def file(self, task: Task, workflow: Workflow) -> None:
        """Keep a task made outside a scenario (a triggered event's, already final) with
        its workflow, so the ids an event names answer on GET /task/{id}."""
        self.workflows[workflow.id] = workflow
        self._by_id[task.id] = task
        self.changes.touch(TASK, task.id)
        self.keep_bounded()

    def bind(self, identifier: str, scenario: str | None) -> None:
        """PUT /_sandbox/users/{identifier}/scenario: the user's next tasks run `scenario`
        (None: the binding goes)."""
        if scenario is None:
            self.bindings.pop(identifier, None)
        else:
            self.require_scenario(scenario)
            self.bindings[identifier] = scenario

    def bind_everyone(self, scenario: str | None) -> None:
        """PUT /_sandbox/scenario: every user's next tasks run `scenario`, unless the request
        or the user's own binding names another (None: the binding goes)."""
        if scenario is not None:
            self.require_scenario(scenario)
        self.everyone = scenario

    def recreate_card_tokens(self, identifier: str, enabled: bool) -> None:
        """PUT /_sandbox/users/{identifier}/card-token-recreation: off, the user's next task
        with a card older than 24 hours fails payment-token-expired."""
        if enabled:
            self.card_token_recreation_off.discard(identifier)
        else:
            self.card_token_recreation_off.add(identifier)

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({
            "tasks": array(Task), "workflows": array(Workflow),
            "scenarioBindings": {"type": "object", "additionalProperties": STRING},
            "payLink": obj({
                "paymentTokens": {"type": "array", "items": obj(
                    {"identifier": STRING, "paymentMethod": STRING, "createdAt": TIME})},
                "merchantPaymentMethods": {"type": "array", "items": obj(
                    {"identifier": STRING, "company": STRING, "paymentMethods": STRINGS})},
                "cardTokenRecreationOff": STRINGS}),
            "counters": obj({"tasksEvicted": COUNT, "nextTaskEviction": COUNT})},
            optional={"scenarioForEveryone": {"type": ["string", "null"]}},
            bounds={"tasks": lambda limits: (limits.max_tasks, "--max-tasks"),
                    "workflows": lambda limits: (limits.max_tasks, "--max-tasks")})

    def dump(self) -> dict[str, Any]:
        return {
            "tasks": [stored(task) for task in self._by_id.values()],
            "workflows": [stored(workflow) for workflow in self.workflows.values()],
            "scenarioBindings": dict(self.bindings),
            # written only when bound, so a snapshot without one is byte for byte as before
            **({"scenarioForEveryone": self.everyone} if self.everyone is not None else {}),
            "payLink": {
                "paymentTokens": [
                    {"identifier": identifier, "paymentMethod": method, "createdAt": at}
                    for (identifier, method), at in self.payment_tokens.items()],
                "merchantPaymentMethods": [
                    {"identifier": identifier, "company": company,
                     "paymentMethods": sorted(methods)}
                    for (identifier, company), methods in self.merchant_payment_methods.items()],
                "cardTokenRecreationOff": sorted(self.card_token_recreation_off)},
            "counters": {"tasksEvicted": self.evicted, "nextTaskEviction": self.next_eviction}}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        """The tasks and workflows, each once, every workflow's tasks among them."""
        tasks = loading.tasks = unique(document, "tasks", Task, "id")
        for task in tasks.values():
            _as_written_now(task, loading.rules.scope_of)
        workflows = unique(document, "workflows", Workflow, "id")
        for number_of, workflow in enumerate(workflows.values()):
            for number, task_id in enumerate(workflow.tasks):
                if task_id not in tasks:
                    raise LoadError(f"$.workflows[{number_of}].tasks[{number}]", "no such task")
        pay_link, counters = document["payLink"], document["counters"]
        return {"tasks": tasks, "workflows": workflows,
                "bindings": document["scenarioBindings"],
                "everyone": document.get("scenarioForEveryone"),
                "payment_tokens": {(t["identifier"], t["paymentMethod"]): float(t["createdAt"])
                                   for t in pay_link["paymentTokens"]},
                "merchant_payment_methods": {(m["identifier"], m["company"]):
                                             set(m["paymentMethods"])
                                             for m in pay_link["merchantPaymentMethods"]},
                "card_token_recreation_off": pay_link["cardTokenRecreationOff"],
                "evicted": counters["tasksEvicted"],
                "next_eviction": counters["nextTaskEviction"]}

    def restore(self, tasks: dict[str, Task], workflows: dict[str, Workflow], *,
                bindings: dict[str, str], payment_tokens: dict[tuple[str, str], float],
                everyone: str | None = None,
                merchant_payment_methods: dict[tuple[str, str], set[str]],
                card_token_recreation_off: Iterable[str], evicted: int,
                next_eviction: int) -> None:
        """A snapshot's tasks and what decides them (as load checked them)."""
        self._by_id, self.workflows = tasks, workflows
        self.bindings = dict(bindings)
        self.everyone = everyone
        self.payment_tokens = payment_tokens
        self.merchant_payment_methods = merchant_payment_methods
        self.card_token_recreation_off = set(card_token_recreation_off)
        self.evicted, self.next_eviction = evicted, next_eviction
        self.waiting = sum(len(workflow.pending) for workflow in workflows.values())
        self._fruitless_at = None

    def admit(self, count: int) -> None:
        """Room for `count` new tasks, or 429 naming --max-tasks: the tasks stored and
        those workflows hold back never pass max_tasks together, so a tenant that makes
        tasks and never runs its clock stays bounded; nothing stored goes but finished
        workflows (keep_bounded). Then the rest of its live work (admit_work)."""
        limit = self.rules.limits.max_tasks
        if len(self._by_id) + self.waiting + count > limit:
            # A scan that freed nothing is not made again until a task or an event changes
            # (a refused burst costs one scan, not one per request).
            if self._fruitless_at != (self.changes.revision, len(self._by_id)):
                self._evict(limit - max(1, limit // 10))
                self._fruitless_at = (self.changes.revision, len(self._by_id))
            stored = len(self._by_id) + self.waiting
            if stored + count > limit:
                raise TaskLimitReached(TASK_LIMIT.format(stored=stored, limit=limit))
        self.admit_work()

    def keep_bounded(self) -> None:
        """Past max_tasks, the oldest finished workflows go with their tasks (a workflow
        with a task still running, or a patch still to come, stays)."""
        limit = self.rules.limits.max_tasks
        if len(self._by_id) <= max(limit, self.next_eviction):
            return
        self._evict(limit - max(1, limit // 10))
        # Tasks still running stay; look again only a tenth of the bound later, so a
        # burst of running tasks costs one scan per batch, not one per task.
        self.next_eviction = len(self._by_id) + max(1, limit // 10)

    def _evict(self, keep: int) -> None:
        """The oldest finished workflows with their tasks, until `keep` tasks are left."""
        gone = []
        for workflow in self.workflows.values():
            if len(self._by_id) - sum(len(w.tasks) for w in gone) <= keep:
                break
            if workflow.finished and not any(self.timeline.owns_pending(t)
                                             for t in workflow.tasks):
                gone.append(workflow)
        for workflow in gone:
            del self.workflows[workflow.id]
            for task_id in workflow.tasks:
                self._by_id.pop(task_id, None)
                self.changes.forget(TASK, task_id)
                self.evicted += 1

    # -- creation ---------------------------------------------------------------------------

    def create_task(self, command: CreateTask) -> tuple[Workflow, list[Task]]:
        """POST /task/create: one workflow with one or more tasks, all queued.

        `command.watched`: the tasks were started in the hosted flow, whose page is open.

        With `linked_account` it is a pull refresh of that account: the company and the
        user are the account's, and a disconnected account's refresh fails with
        auth-expired (a refresh does not recover it; spec: Account update lifecycle).
        """
        account = None
        asked = command.request
        linked = command.linked_account
        if linked is not None:
            account = self.accounts.require(linked)
            if given(asked.company, account.company_id) != account.company_id:
                raise CompanyMismatch(REFRESH_COMPANY,
                                      details=[field_detail("$.company", REFRESH_COMPANY)])
            asked = msgspec.structs.replace(
                asked, company=account.company_id,
                identifier=given(asked.identifier,
                                 command.token_identifier or account.identifier),
                product=asked.product if asked.product or asked.operation
                or asked.tasks else account.product)
            command = msgspec.structs.replace(command, request=asked)
        identifier = self._identifier(command)
        if account is not None and account.identifier != identifier:
            raise LinkedAccountNotFound(
                f"No linked account of {identifier!r} has the id {account.id!r}.",
                details=[field_detail("$.linkedAccount", "not this user's")])
        if asked.company is UNSET:
            raise ValidationFailed(COMPANY_OR_LINKED_ACCOUNT,
                                   details=[field_detail("$.company", COMPANY_OR_LINKED_ACCOUNT)])
        company = self.companies.get(asked.company)
        if company is None:
            raise CompanyNotFound(UNKNOWN_COMPANY.format(company_id=asked.company),
                                  details=[field_detail("$.company", "unknown company id")])
        requests = self._task_requests(command)
        for request in requests:
            self.check_company_accepts(company, request.product, request.path)
        # Each task's own: a scenario must fit the task's product (DESIGN.md, Scenarios).
        requested = asked.scenario or None  # UNSET is false, a name is not
        scenarios = [self.select_scenario(identifier, company, requested,
                                          command.login_scenario, product=request.product,
                                          product_path=request.path)
                     for request in requests]
        if account is not None and not account.connected:
            scenarios = [self.scenarios.get("auth-expired", s) for s in scenarios]
        self.admit(len(requests))
        link = None if account is not None else self.accounts.admit(
            identifier, company.id, [request.product for request in requests])
        user = self.identity.user(identifier)
        # Task events always carry the user's public token; a user who never had one
        # (tasks made with API keys) gets one, as the SDK flow would have issued.
        token = ((command.token.public_token if command.token is not None else None)
                 or self.identity.latest_token.get(identifier)
                 or self.identity.create_access_token(identifier).public_token)
        workflow = Workflow(id=self.ids.object_id(), identifier=identifier, tasks=[])
        starting, waiting = first_batch(requests)
        if waiting:
            workflow.pending = [request.pending(scenario.name) for request, scenario
                                in zip(waiting, scenarios[len(starting):])]
            self.waiting += len(waiting)
        tasks = [self._start_task(workflow, company, request, scenario, user_id=user.id,
                                  public_token=token, linked_account=linked,
                                  watched=command.watched)
                 for request, scenario in zip(starting, scenarios)]
        self.workflows[workflow.id] = workflow
        if link is not None:
            self.accounts.reserve(workflow.id, link)
        self.keep_bounded()
        return workflow, tasks

    def _start_task(self, workflow: Workflow, company: Company,
                    request: TaskRequest, scenario: Scenario, *, user_id: str, public_token: str,
                    linked_account: str | None, watched: bool) -> Task:
        """One task of a workflow, queued, its scenario's steps on the clock."""
        decided = (self._pay_link_outcome(workflow.identifier, company, request)
                   or self._distribution_outcome(company, request))
        task_scenario = decided if decided is not None and self.fits(decided, request.product) \
            else scenario
        task = Task(
            id=self.ids.object_id(), workflow=workflow.id, identifier=workflow.identifier,
            user_id=user_id, company_id=company.id, product=request.product,
            scenario=task_scenario.name, created_at=self.clock.timestamp(),
            authentication_method=self.authentication_method(company, request.product),
            public_token=public_token, metadata=request.metadata,
            payment_method=request.payment_method, linked_account=linked_account,
            payment_method_given=request.payment_method is not None, watched=watched,
            distribution=request.distribution, on_complete=request.on_complete,
            on_fail=request.on_fail, fields=request.fields)
        task.history.append(TaskTransition(status=QUEUED, at=Moment(task.created_at)))
        self._by_id[task.id] = task
        self.changes.touch(TASK, task.id)
        workflow.tasks.append(task.id)
        self.schedule(task, task_scenario)
        return task

    def _go_on(self, task: Task) -> None:
        """A task that held the rest of its workflow back ended: the next tasks start, or,
        when its option says `finish` for this outcome, never do (the workflow ends with
        the tasks it ran)."""
        workflow = self.workflows.get(task.workflow)
        if workflow is None or not workflow.pending or workflow.tasks[-1] != task.id:
            return
        company = self.companies.get(task.company_id)
        if task.ends_workflow or company is None:
            self.waiting -= len(workflow.pending)
            workflow.pending = []
            return
        scenarios = [self.scenarios.get(p["scenario"]) or self.scenarios[HAPPY_PATH]
                     for p in workflow.pending]
        starting, waiting = first_batch([TaskRequest.from_pending(p) for p in workflow.pending])
        workflow.pending = workflow.pending[len(starting):]
        self.waiting -= len(starting)
        for request, scenario in zip(starting, scenarios):
            started = self._start_task(workflow, company, request, scenario,
                                       user_id=task.user_id, public_token=task.public_token,
                                       linked_account=task.linked_account, watched=task.watched)
            started.user_left = task.user_left

    def schedule(self, task: Task, scenario: Scenario) -> None:
        for step in scenario.steps:
            # No label: the step action describes itself when asked (a string per step
            # was a tenth of a task's creation).
            self.timeline.schedule(task.created_at + step.at, _StepAction(self.itself, task, step),
                                   owner=task.id)

    # -- steps ------------------------------------------------------------------------------

    def apply_step(self, task: Task, step: Step) -> None:
        """One scenario step: company first, then the move to processing, authentication,
        the final status, and accounts. The event rules are applied here, not by the step."""
        changes = step.changes
        self.changes.touch(TASK, task.id)
        if "company" in changes:
            company_change = changes["company"]
            company = self.companies.get(task.company_id)
            # A scenario is written for any company: keep the listed products it offers.
            offered = [p for p in company_change.get("products") or []
                       if company is not None and p in company.available_products]
            set_company_status(self.companies, self.emit, task.company_id,
                               company_change["status"], offered or None)
        patch = changes.get("patch", False)
        status = changes.get("status")
        if status is not None and task.status in FINAL and not patch:
            return  # nothing but a patch follows a final status (hand-built steps too)
        for name in STEP_FIELDS:  # never `product`: a task runs a scenario that fits it
            if name in changes:
                setattr(task, name, changes[name])
        if "authenticationMethod" in changes and self.rules.scope_of(task.product) == PAY_LINK:
            task.authentication_method = changes["authenticationMethod"]
        if "paymentMethod" in changes and not task.payment_method_given:
            # The scenario's payment method stands in only when the request named none.
            task.payment_method = changes["paymentMethod"]
        if changes.get("connected") is False:
            self.leave(task)
        if status == PROCESSING:
            self._move(task, status, reason=None, patch=False)
        if "authenticated" in changes:
            self._authenticate(task, changes["authenticated"])
        if status is not None and status != PROCESSING:
            self._move(task, status, reason=changes.get("reason"), patch=patch)
        if "accounts" in changes:
            self.emit(PayLinkAccounts(accounts=self._accounts(task, changes["accounts"])),
                      for_task=task)
        # Continuous access: a step may change the task's linked account or delete the
        # user's data, and every task that ends may make or refresh a linked account.
        if "linkedAccount" in changes:
            self.accounts.on_step(task, changes["linkedAccount"])
        if "piiDataDeleted" in changes:
            self.accounts.on_pii_step(task)
        if status in FINAL and not patch:
            self.accounts.on_task_final(task)
            self._go_on(task)
            self._finish_workflow_if_done(task, changes.get("workflowFailureReason"))

    def fail_broken(self, task: Task) -> None:
        """A step of `task` raised (a job's error, not the scenario's outcome): the task
        fails with `unknown-failure` and its event, its later steps are dropped, and its
        workflow goes on as after any failure. A task already final stays as it is."""
        if task.status in FINAL:
            return
        self.timeline.cancel_owned(task.id)
        self._move(task, FAILED, reason=BROKEN_STEP_REASON, patch=False)
        self._go_on(task)
        self._finish_workflow_if_done(task, None)

    def leave(self, task: Task) -> None:
        """The user left the hosted flow (its page closed): user.connected is false from
        now on, and on the final outcome if the task has not resolved yet."""
        task.user_left = True
        self.changes.touch(TASK, task.id)

    def _authenticate(self, task: Task, authenticated: bool) -> None:
        """Spec: task-authentication-status-updated, "Authentication status of a Task
        changed": a step that states the value the task already has emits nothing."""
        if task.status in FINAL or authenticated == task.authenticated:
            return
        task.authenticated = authenticated
        self.emit(Authenticated(authenticated=task.authenticated), for_task=task)

    def _move(self, task: Task, status: str, *, reason: str | None,
              patch: bool) -> None:
        problem = transition_error(task.status, status, patch=patch)
        if problem:  # loaded scenarios are checked; this guards hand-built steps
            raise IllegalTransition(problem)
        task.previous_status, task.status = task.status, status
        task.reason = reason if status == FAILED else None
        if status in FINAL and task.saw_outcome is None:
            task.saw_outcome = task.watched and not task.user_left
        task.history.append(TaskTransition(
            status=status, previous_status=task.previous_status,
            at=Moment(self.clock.timestamp()), patch=patch, reason=reason or UNSET))
        event_type = emits_status_update(task.previous_status, status, patch=patch)
        if event_type == TaskStatusPatched.event_type.name:
            self.emit(view_of(TaskStatusPatched, task, payment_method=task.payment_method or None),
                      for_task=task)
        elif event_type == TaskStatusUpdated.event_type.name:  # the task's fields, by name
            self.emit(view_of(TaskStatusUpdated, task, **{
                name: UNSET for name, field in STEP_FIELDS.items()
                if status != FAILED and field.on_failure_only}), for_task=task)

    def _accounts(self, task: Task, updates: list[dict[str, Any]]) -> list[PayLinkAccount]:
        """A step's `accounts` (its scenario file's) as the event says them: each account's
        id (the task's company and user when the step names none) and its bills'."""
        return [PayLinkAccount(
            id=update.get("_id") or f"{task.company_id}-{task.user_id}",
            update_type=update["updateType"],
            bills=[Bill(id=bill.get("_id") or self.ids.object_id(),
                        changed_fields=bill.get("changedFields") or UNSET
                        if update["updateType"] == "updated" else UNSET)
                   for bill in update.get("bills", [])]) for update in updates]

    def _finish_workflow_if_done(self, task: Task,
                                 failure_reason: str | None) -> None:
        workflow = self.workflows.get(task.workflow)
        if workflow is None or workflow.finished or workflow.pending:
            return
        tasks = [self._by_id[t] for t in workflow.tasks]
        if not all(t.status in FINAL for t in tasks):
            return
        workflow.finished = True
        self.accounts.release(workflow.id)
        failed = [t for t in tasks if t.status == FAILED]
        self.emit(made(WorkflowFinished, status=FAILED if failed else COMPLETED,
                       tasks=[WorkflowTask(task=t.id, product=t.product, status=t.status,
                                           reason=t.reason or UNSET) for t in tasks],
                       failure_reason=(failure_reason or failed[0].reason) if failed else None),
                  for_task=task)


def task_event_fields(task: Task, company: Company | None) -> dict[str, Any]:
    """What every task event carries beside its `data` (spec: Task events): the user (with
    `connected`), the public token, product, task, workflow, authentication method, the
    company's summary and the task's metadata (when it has some). The engine's events and
    triggered ones (triggers.py) are made from this one place."""
    fields = {"user": {"_id": task.user_id, "identifier": task.identifier,
                       "connected": task.connected},
              "publicToken": task.public_token, "product": task.product, "task": task.id,
              "taskWorkflow": task.workflow, "authenticationMethod": task.authentication_method,
              "company": company.branding_summary() if company else {"_id": task.company_id}}
    if task.metadata is not None:
        fields["metadata"] = task.metadata
    fields.update(task.fields)
    return fields


@action_kind("task-step")
class _StepAction(msgspec.Struct, eq=False):
    """A scheduled step (a small object rather than a closure: cheap at 10,000s of tasks)."""

    # The part, found when the step runs: a restored step is rebuilt before the restored
    # tenant has its new Tasks, so it finds them through the tenant.
    tasks: Callable[[], Tasks]
    task: Task
    step: Step

    # In a snapshot a step is a scenario cursor: the task, its scenario, the step's place.
    class Stored(Command, kw_only=True):
        task: str
        scenario: str
        step: of(int, ge=0)

    def __call__(self) -> None:
        self.tasks().apply_step(self.task, self.step)

    def fail(self) -> None:
        """The step raised: its task fails rather than stays where it was."""
        self.tasks().fail_broken(self.task)

    def __str__(self) -> str:
        return f"{self.task.scenario} step for task {self.task.id}"

    def stored(self) -> Stored:
        steps = self.tasks().scenarios[self.task.scenario].steps
        index = next((n for n, step in enumerate(steps) if step is self.step), None)
        return self.Stored(task=self.task.id, scenario=self.task.scenario,
                           step=steps.index(self.step) if index is None else index)

    @classmethod
    def rebuild(cls, data: Stored, context: Any) -> _StepAction:
        return cls(context.part("tasks"), context.task(data.task),
                   context.step(data.scenario, data.step, "task"))
