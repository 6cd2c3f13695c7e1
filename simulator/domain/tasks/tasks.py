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
from typing import Any, ClassVar

import msgspec

from ...clock import Clock, isoformat
from ...errors import (CompanyDisabled, CompanyManualDeposits, CompanyMismatch, CompanyNotFound,
                      CompanyUnderMaintenance, IdentifierMismatch, IllegalTransition,
                      LinkedAccountNotFound, NotFound, ProductNotOffered, ScenarioDoesNotFit,
                      TaskLimitReached, TaskNotFound, Unauthorized, UnknownScenario, ValidationFailed, field_detail)
from ...validate import check_metadata
from ..changes import TASK, Changes
from ..companies.companies import (COMPANY_STATUSES, DISABLED, OPERATIONAL, UNKNOWN_COMPANY, Branding,
                        Company, CompanyDirectory, SearchCompany, SearchConnector, Tag,
                        search_record)
from ..companies.company_admin import set_company_status
from ..webhooks.event_types import (PAY_LINK_ACCOUNTS_UPDATED, TASK_AUTHENTICATION_STATUS_UPDATED,
                          TASK_STATUS_PATCHED, TASK_STATUS_UPDATED, TASK_WORKFLOW_FINISHED, Bill,
                          Draft, PayLinkAccount, WorkflowTask)
from ..accounts.linked_accounts import USER_LINK_PRODUCTS
from ..parts import Held, TenantSettings
from .pay_link import PAY_LINK
from ..rules import Rules
from ..companies.search import SearchRequest, normalize, search_companies
from ..identity.identity import UserView
from ..shapes import (NO_CONTROL_CHARACTER, TASK_SCENARIOS, UNSET, Command, DateTime, Maybe,
                     Metadata, Name, Text, View, choice, field, given, of, raw, schema_of, text,
                     view_of)
from .states import AUTHENTICATION_METHODS as TASK_AUTHENTICATION_METHODS
from .states import (COMPLETED, FAILED, FAILURE_REASONS, FINAL, PAYMENT_METHOD, PROCESSING, QUEUED,
                     REQUEST_FIELDS, STEP_FIELDS, WRITTEN_PAYMENT_METHOD, Scenario, Step,
                     emits_status_update, field_schemas, given_fields, transition_error,
                     written_payment_method)
from ..stored import LoadError, Stored, Time, array, described, stored
from ..sections import COUNT, STRING, STRINGS, TIME, Sections, obj, unique
from ..timeline import Timeline, action_kind

HAPPY_PATH = "happy-path"
DISTRIBUTION_NOT_SUPPORTED = "distribution-not-supported"
# A workflow's next step after a task ends (the task options onComplete / onFail).
CONTINUE, FINISH = "continue", "finish"
DEPOSIT = "deposit"
PAYMENT_TOKEN_LIFETIME = 24 * 3600  # spec: Limits, card token lifetime
PAYMENT_TOKEN_EXPIRED = "payment-token-expired"
BROKEN_STEP_REASON = "unknown-failure"  # a step that raised fails its task with this reason

UNKNOWN_TASK = "No task has the id {task_id!r}."
TASK_LIMIT = ("This tenant holds {stored} tasks that cannot go yet (running, or held back by "
              "their workflow), and keeps at most {limit}: --max-tasks "
              "(PAYROLL_SANDBOX_MAX_TASKS, config maxTasks). Run its clock so they end, reset "
              "it, or raise the bound; nothing stored was changed.")
UNKNOWN_SCENARIO = "No scenario is named {name!r}. Known: {known}."
SCENARIO_DOES_NOT_FIT = ("The scenario {name!r} does not fit a {product} task ({path}): it fits "
                         "{fits}. Scenarios for {product}: {fitting}.")
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


class Task(Stored, weakref=True):  # weakref: a deleted tenant's are followed
    """A task of a workflow: its status, scenario and the fields its steps set. A snapshot
    keeps it as its fields say, so a restored one is one the engine can run and the reads
    can render: a task moves only along the spec's transitions, from the statuses it has."""

    id: str
    workflow: str
    identifier: str
    user_id: str
    company_id: str
    product: str
    scenario: str
    created_at: Time
    authentication_method: str | None  # a pay-link task's only (Tasks.authentication_method)
    public_token: str
    status: choice(*TASK_STATUSES) = QUEUED
    previous_status: choice(*TASK_STATUSES, None) = None
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
    history: list[dict[str, Any]] = msgspec.field(default_factory=list)
    # {type, amount}: the deposit's split
    distribution: described(dict[str, Any] | None, schema_of(Distribution | None)) = None
    on_complete: choice(CONTINUE, FINISH) = CONTINUE
    on_fail: choice(CONTINUE, FINISH) = CONTINUE
    fields: described(dict[str, Any], {  # the request's (REQUEST_FIELDS)
        "type": "object", "additionalProperties": False,
        "properties": field_schemas(REQUEST_FIELDS)}) = msgspec.field(default_factory=dict)
    SPARSE: ClassVar[tuple[str, ...]] = ("fields",)  # a snapshot's, when given

    @property
    def ends_workflow(self) -> bool:
        """The task ended in a way its options say finishes the workflow."""
        return ((self.status == COMPLETED and self.on_complete == FINISH)
                or (self.status == FAILED and self.on_fail == FINISH))

    @property
    def connected(self) -> bool:
        """True while the user is present in the hosted flow; after resolution, whether
        they were present to see the final outcome."""
        if self.saw_outcome is not None:
            return self.saw_outcome
        return self.watched and not self.user_left


class Workflow(Stored):
    """The tasks one POST /task/create made, run one after another."""

    id: str
    identifier: str
    tasks: list[str]
    finished: bool = False
    # Tasks not started yet: those after a task whose onComplete or onFail is `finish`,
    # started when it ends the way that goes on (TaskRequest.pending form).
    pending: described(list[dict[str, Any]], schema_of(list[PendingTask])) = msgspec.field(
        default_factory=list)


class Distribution(Command, kw_only=True):
    """How the deposit is split (a deposit task; the deposit accounts' distributionType and
    distributionAmount). A type the company's connector cannot set up
    (capabilities.distributionTypes) fails the task."""

    __schema_extra__ = {"allOf": [
        {"if": {"properties": {"type": {"const": "percent"}}},
         "then": {"required": ["amount"], "properties": {"amount": {"maximum": 100}}}},
        {"if": {"properties": {"type": {"const": "fixed"}}}, "then": {"required": ["amount"]}}]}

    type: choice("total", "fixed", "percent", description="total: the entire paycheck; fixed: "
                 "`amount` dollars; percent: `amount` per cent of it.")
    amount: Maybe[of(float, gt=0, le=1_000_000)] = UNSET


class PendingTask(Command, kw_only=True):
    """A task a workflow holds until the one before it ends (TaskRequest.pending)."""

    __schema_extra__ = {"properties": field_schemas(REQUEST_FIELDS)}

    product: of(str, min_length=1)
    metadata: Maybe[dict[str, Any] | None] = UNSET
    payment_method: Maybe[raw({"anyOf": [PAYMENT_METHOD, {"type": "null"}]})] = UNSET
    distribution: Maybe[Distribution | None] = UNSET
    on_complete: choice(CONTINUE, FINISH)
    on_fail: choice(CONTINUE, FINISH)
    scenario: of(str, min_length=1)


# -- what POST /task/create sends (its body's structs) -------------------------------------------

# A workflow's next step after a task ends (the SDK's and the real service's task options):
# `continue` runs the next task, `finish` ends the workflow there (below).


def next_step(description: str) -> Any:
    return choice(CONTINUE, FINISH, description=description)


ON_COMPLETE = ("After this task completes: `continue` with the next task (default) or "
               "`finish` the workflow.")
ON_FAIL = ("After this task fails: `continue` with the next task (default) or `finish` the "
           "workflow.")


# The task fields a create request may give (domain/states.py: REQUEST_FIELDS, one entry
# each), as fields of the request's structs, at the top and per task: a body's value
# arrives on the struct (absent: UNSET), named as the table names it.
RequestFields = msgspec.defstruct(
    "RequestFields", [(name, Maybe[raw(schema)], UNSET)
                      for name, schema in field_schemas(REQUEST_FIELDS).items()],
    bases=(Command,), kw_only=True)


class TaskOptions(RequestFields, kw_only=True):
    # What each task of a workflow may say about itself.
    on_complete: next_step(ON_COMPLETE) = CONTINUE
    on_fail: next_step(ON_FAIL) = CONTINUE
    distribution: Maybe[Distribution] = UNSET


class TaskItem(TaskOptions, kw_only=True):
    __schema_extra__ = {"anyOf": [{"required": ["operation"]}, {"required": ["product"]}]}

    operation: Maybe[Text] = UNSET
    product: Maybe[Text] = UNSET
    metadata: Maybe[Metadata] = UNSET
    payment_method: Maybe[raw(PAYMENT_METHOD)] = UNSET


TaskItems = of(list[TaskItem], "Several operations in one task workflow. A task after one "
               "whose onComplete or onFail is `finish` starts only when that one ended the way "
               "that goes on.", min_length=1, max_length=10)
ScenarioName = of(str, "The scenario that drives the task (see GET /_sandbox/scenarios).",
              min_length=1, extra_json_schema={"x-names": TASK_SCENARIOS})


def task_items(documents: Iterable[dict[str, Any]]) -> list[TaskItem]:
    """Tasks as the hosted flow's documents give them (its configuration's, which may hold
    fields of the SDK's that a task does not use: left out), as a create request's."""
    known = {field.encode_name for field in msgspec.structs.fields(TaskItem)}
    return msgspec.convert([{k: v for k, v in document.items() if k in known}
                            for document in documents], list[TaskItem])


class TaskCreateRequest(RequestFields, kw_only=True):
    __schema_extra__ = {"not": {"anyOf": [
        {"required": ["product", "operation"]}, {"required": ["product", "tasks"]},
        {"required": ["operation", "tasks"]}, {"required": ["linkedAccount", "linkedAccountId"]}]}}

    identifier: Maybe[of(str, "The user (with API keys); a public token names it itself.",
                         min_length=1, max_length=256, pattern=NO_CONTROL_CHARACTER)] = UNSET
    company: Maybe[text("A company `_id`.")] = UNSET
    linked_account: Maybe[text("Refresh this linked account (pull refresh flow).")] = UNSET
    linked_account_id: Maybe[text("The spec's name for `linkedAccount`.")] = UNSET
    product: Maybe[Text] = UNSET
    operation: Maybe[text("Same as `product`.")] = UNSET
    tasks: Maybe[TaskItems] = UNSET
    metadata: Maybe[Metadata] = UNSET
    scenario: Maybe[ScenarioName] = UNSET
    payment_method: Maybe[raw(PAYMENT_METHOD)] = UNSET
    distribution: Maybe[of(Distribution, "The legacy top-level split (real-service-facts 8): "
                           "every task of the request that names none.")] = UNSET


TASK_STATUSES = [QUEUED, PROCESSING, COMPLETED, FAILED]
TaskStatus = choice(*TASK_STATUSES)


# -- what the API shows of a task (its views) -----------------------------------------------------

class TaskFileView(View, kw_only=True):
    id: str = field(name="_id")
    name: str
    content_type: str

Reason = choice(*FAILURE_REASONS)
# Spec (Task): authenticationMethod, "For pay-link Tasks: `true-auth`, `smart-auth`"; a task
# of another scope has none of those values: null.
TASK_AUTHENTICATION = ("A pay-link task's: true-auth or smart-auth. Any other task's: null.")


class TaskTransition(View, kw_only=True):
    """One move of a task; the first is its creation (`queued`, no previousStatus)."""

    status: TaskStatus
    previous_status: Maybe[TaskStatus] = UNSET
    at: DateTime
    patch: Maybe[of(bool, "A correction of a final status (task-status-patched).")] = UNSET
    reason: Maybe[Reason] = UNSET

_STEP_FIELDS = field_schemas(STEP_FIELDS)  # flow, meta, ... (domain/states.py)


TaskScenario = of(str, "The scenario that drives it (`trigger`: a task made for POST "
                  "/_sandbox/events/trigger).")


class TaskUser(UserView, kw_only=True):
    connected: bool


class TaskFields(RequestFields, kw_only=True):
    # A task's fields as GET /task/{taskId} shows them (TaskRecord), but `id` and
    # `company`: the real Task (TaskDetails) takes its own. Most are the Task's own, by
    # name; `shown` gives the rest. The request fields it was given are shown too.
    task_workflow: str
    status: TaskStatus
    previous_status: choice(None, "queued", "processing", "failed")
    product: str
    user: TaskUser
    authenticated: bool
    authentication_method: choice(*TASK_AUTHENTICATION_METHODS, None,
                                  description=TASK_AUTHENTICATION)
    scenario: TaskScenario
    created_at: DateTime
    history: of(list[TaskTransition], "Every transition, oldest first.", min_length=1)
    reason: Maybe[of(Reason, "The failure reason, when failed.")] = UNSET
    flow: Maybe[raw(_STEP_FIELDS["flow"])] = UNSET
    meta: Maybe[raw(_STEP_FIELDS["meta"])] = UNSET
    metadata: Maybe[Metadata] = UNSET
    payment_method: Maybe[raw(WRITTEN_PAYMENT_METHOD)] = UNSET
    linked_account: Maybe[of(str, "The linked account a refresh acts on.")] = UNSET
    distribution: Maybe[Distribution] = UNSET
    on_complete: Maybe[of(next_step(ON_COMPLETE), extra_json_schema={"default": CONTINUE})] = UNSET
    on_fail: Maybe[of(next_step(ON_FAIL), extra_json_schema={"default": CONTINUE})] = UNSET


    @staticmethod
    def shown(task: Task) -> dict[str, Any]:
        """The fields of a task's view whose names or forms are not the Task's own."""
        options = task.on_complete != CONTINUE or task.on_fail != CONTINUE
        return {"task_workflow": task.workflow, "created_at": isoformat(task.created_at),
                "user": TaskUser(id=task.user_id, identifier=task.identifier,
                                 connected=task.connected),
                "on_complete": task.on_complete if options else UNSET,
                "on_fail": task.on_fail if options else UNSET, **task.fields}


class TaskRecord(TaskFields, kw_only=True):
    """A task: its outcome and every transition it made (`onComplete` and `onFail` only when
    one of them is not `continue`)."""

    id: str
    company: of(str, "The company's `_id`.")

    @classmethod
    def of(cls, task: Task, **more: Any) -> TaskRecord:
        """GET /task/{id}: the task, its outcome and every transition it made (a view that
        adds fields: `more`)."""
        return view_of(cls, task, company=task.company_id, **cls.shown(task), **more)


class StartedTask(Command, kw_only=True):
    id: str
    product: str
    status: TaskStatus
    scenario: TaskScenario


class TaskCreated(View, kw_only=True):
    id: str
    status: choice("queued")
    task_workflow: str
    tasks: of(list[StartedTask], "Every task started (one after a task whose onComplete or "
              "onFail is `finish` starts when that one ends).", min_length=1)

    @classmethod
    def of(cls, workflow: Workflow, tasks: list[Task]) -> TaskCreated:
        """What task creation answers: the first task, its workflow, and every task started
        (a task after one whose onComplete or onFail is `finish` starts when that one ends)."""
        return cls(id=tasks[0].id, status=tasks[0].status, task_workflow=workflow.id,
                   tasks=[view_of(StartedTask, task) for task in tasks])


class TaskCompany(SearchCompany, kw_only=True):
    """The Company (a company deleted since: its `_id` only)."""

    name: Maybe[Name] = UNSET
    status: Maybe[choice(*COMPANY_STATUSES)] = UNSET
    branding: Maybe[Branding] = UNSET
    tags: Maybe[list[Tag]] = UNSET
    connector: Maybe[SearchConnector] = UNSET


class TaskDetails(TaskFields, kw_only=True):
    """The real service's Task, with the sandbox's fields (GET /task/{taskId}) beside it."""

    id: str = field(name="_id")
    product: str
    authentication: choice(*TASK_AUTHENTICATION_METHODS, None, description="The task's "
                           "authenticationMethod, by the real Task's name (null: not a "
                           "pay-link task).")
    company: TaskCompany
    payroll_data_available: of(bool, "The task completed and left payroll data to read: a "
                               "completed deposit or verify task (or a refresh) whose linked "
                               "account holds data (not deleted as PII).")
    fail_reason: Maybe[of(Reason, "The failure reason, when failed.")] = UNSET
    files: of(list[TaskFileView], "The task's files "
              "(GET /task/{taskId}/file/{fileId}/generate-url).")

    @classmethod
    def of(cls, task: Task, *, company: Any, payroll_data_available: bool,
           files: list[TaskFile]) -> TaskDetails:
        """GET /task/{taskId}/details: the real service's Task, then the sandbox's own
        fields (GET /task/{taskId}) and the task's files."""
        return view_of(cls, task, authentication=task.authentication_method, company=company,
                       payroll_data_available=payroll_data_available,
                       fail_reason=task.reason if task.status == FAILED else None,
                       files=[view_of(TaskFileView, file) for file in files], **cls.shown(task))


class StatusOfTask(View, kw_only=True):
    created_at: DateTime
    status: TaskStatus
    payroll_data_available: bool
    fail_reason: Maybe[of(str, "Present when failed.")] = UNSET

    @classmethod
    def of(cls, task: Task, payroll_data_available: bool) -> StatusOfTask:
        return cls(created_at=isoformat(task.created_at), status=task.status,
                   payroll_data_available=payroll_data_available,
                   fail_reason=task.reason or "unknown-failure" if task.status == FAILED
                   else UNSET)


class TaskStatusAnswer(View, kw_only=True):
    task: StatusOfTask


class Prescreen(View, kw_only=True):
    """HIGH when the company is known, operational, offers the product, has headless
    (username and password) authentication, and the account's manual-deposit rule does not
    cover it; LOW otherwise."""

    confidence: choice("HIGH", "LOW")
    company_id: Maybe[of(str | None, "The company the request named, if the catalog has it.")
                      ] = UNSET





def _as_written_now(task: Task, scope_of: Callable[[str], str | None]) -> None:
    """A restored task as this version writes one (an older snapshot restores, in the
    forms it has): `authenticationMethod` on a pay-link task only (older versions gave
    every task one), the payment method's expiry in the one date-time form."""
    if scope_of(task.product) != PAY_LINK:
        task.authentication_method = None
    task.payment_method = written_payment_method(task.payment_method)


class TaskRequest(msgspec.Struct, frozen=True):
    """One task of a create request, after the request was checked."""

    product: str
    metadata: dict[str, Any] | None
    payment_method: dict[str, Any] | None
    path: str = "$.product"  # where the product was named, for errors
    distribution: dict[str, Any] | None = None
    on_complete: str = CONTINUE
    on_fail: str = CONTINUE
    fields: dict[str, Any] = msgspec.field(default_factory=dict)  # REQUEST_FIELDS given

    @property
    def gates(self) -> bool:
        """Whether the tasks after it wait for its outcome (one of its options is finish)."""
        return FINISH in (self.on_complete, self.on_fail)

    def pending(self, scenario: str) -> dict[str, Any]:
        """The request as a workflow keeps it until it starts (JSON: snapshots hold it)."""
        return {"product": self.product, "metadata": self.metadata,
                "paymentMethod": self.payment_method, "distribution": self.distribution,
                "onComplete": self.on_complete, "onFail": self.on_fail, "scenario": scenario,
                **self.fields}

    @classmethod
    def from_pending(cls, pending: dict[str, Any]) -> TaskRequest:
        return cls(product=pending["product"], metadata=pending.get("metadata"),
                   payment_method=written_payment_method(pending.get("paymentMethod")),
                   distribution=pending.get("distribution"),
                   on_complete=pending.get("onComplete", CONTINUE),
                   on_fail=pending.get("onFail", CONTINUE), fields=given_fields(pending))


class CreateTask(msgspec.Struct, frozen=True):
    """A task creation: what was asked (POST /task/create's body as its struct, a pull
    refresh's, or what the hosted flow's sign-in asks) and who asks. The rules that need
    the tenant's state (the linked account's user, company and product; the company's
    products; the scenarios) are `Tasks.create_task`'s."""

    request: TaskCreateRequest
    # Who asks: a public token's user and token (None under API keys); the hosted flow's
    # sign-in adds the scenario its username picks and that its page watches the tasks.
    token: Any = None  # identity.PublicToken
    login_scenario: str | None = None
    watched: bool = False

    @property
    def token_identifier(self) -> str | None:
        return self.token.identifier if self.token is not None else None

    @property
    def linked_account(self) -> str | None:
        """The account a pull refresh acts on (`linkedAccountId` is the spec's name)."""
        request = self.request
        return given(request.linked_account, given(request.linked_account_id))

    @property
    def product_field(self) -> str:
        """How the body named its one task's product (`operation`: the legacy name)."""
        request = self.request
        return "operation" if request.product is UNSET and request.operation is not UNSET \
            else "product"


def _split(distribution: Distribution | None) -> dict[str, Any] | None:
    """A deposit's split as a task keeps it (JSON data: snapshots and answers show it)."""
    return None if distribution is None else msgspec.to_builtins(distribution)


def first_batch(requests: list[TaskRequest]) -> tuple[list[TaskRequest], list[TaskRequest]]:
    """The requests that start now (up to the first whose outcome decides whether the
    workflow goes on, included) and those that wait for it."""
    for n, request in enumerate(requests):
        if request.gates:
            return requests[:n + 1], requests[n + 1:]
    return requests, []


class Tasks(Held[Task]):
    """One tenant's tasks and task workflows, and the rules that create and move them:
    read as a mapping of task id -> Task; changed only through its methods.

    It also keeps what decides a task before its scenario: the users' scenario bindings
    and, for pay-link, the card tokens and the payment methods each user has at each
    merchant."""

    def __init__(self, rules: Rules, *, ids: Any, clock: Clock, timeline: Timeline,
                 changes: Changes, companies: CompanyDirectory, settings: TenantSettings,
                 identity: Any, emit: Callable[..., Any]) -> None:
        # Given what it uses, not the tenant: the world's rules, the tenant's seeded ids,
        # clock, timeline, change window, company directory, settings, users and how it
        # emits; and the linked accounts, once they exist.
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

    def scope_of(self, product: str) -> str | None:
        return self.rules.scope_of(product)

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
        if command.linked_account is not None:
            account = self.accounts.require(command.linked_account)
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
        scenarios = [self.select_scenario(identifier, company, given(asked.scenario),
                                          command.login_scenario, product=request.product,
                                          product_path=request.path)
                     for request in requests]
        if account is not None and not account.connected:
            scenarios = [self.scenarios.get("auth-expired", s) for s in scenarios]
        self.admit(len(requests))
        user = self.identity.user(identifier)
        # Task events always carry the user's public token; a user who never had one
        # (tasks made with API keys) gets one, as the SDK flow would have issued.
        token = ((command.token.public_token if command.token is not None else None)
                 or self.identity.latest_token.get(identifier)
                 or self.identity.create_access_token(identifier).public_token)
        workflow = Workflow(id=self.ids.object_id(), identifier=identifier, tasks=[])
        starting, waiting = first_batch(requests)
        workflow.pending = [request.pending(scenario.name)
                            for request, scenario in zip(waiting, scenarios[len(starting):])]
        self.waiting += len(workflow.pending)
        tasks = [self._start_task(workflow, company, request, scenario, user_id=user.id,
                                  public_token=token, linked_account=command.linked_account,
                                  watched=command.watched)
                 for request, scenario in zip(starting, scenarios)]
        self.workflows[workflow.id] = workflow
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
        task.history.append({"status": QUEUED, "at": isoformat(task.created_at)})
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

    def select_scenario(self, identifier: str, company: Company | None,
                        requested: str | None, login_scenario: str | None = None, *,
                        product: str | None = None,
                        product_path: str = "$.product") -> Scenario:
        """First match wins: the request, the user's binding, the binding of every user, the
        SDK login, the company, happy-path. With `product`, only a scenario that fits it: the request's is refused
        (422 scenario-does-not-fit), any other is passed over for the next."""
        if requested is not None:
            scenario = self.require_scenario(requested, "$.scenario")
            if product is not None and not self.fits(scenario, product):
                raise self.misfit(scenario, product, product_path)
            return scenario
        for name in (self.bindings.get(identifier), self.everyone, login_scenario,
                     company.default_scenario if company else None):
            scenario = self.scenarios.get(name) if name is not None else None
            if (scenario is not None and scenario.kind == "task"
                    and (product is None or self.fits(scenario, product))):
                return scenario
        return self.scenarios[HAPPY_PATH]

    def fits(self, scenario: Scenario, product: str) -> bool:
        """Whether a task of `product` may run `scenario` (its products: scenario files)."""
        return scenario.fits(product, self.scope_of)

    def misfit(self, scenario: Scenario, product: str, product_path: str) -> ScenarioDoesNotFit:
        """The 422 for a requested scenario that does not fit the task's product."""
        fits = ", ".join(scenario.products or ()) or "no product of this service"
        fitting = [n for n, s in sorted(self.scenarios.items()) if self.fits(s, product)]
        message = SCENARIO_DOES_NOT_FIT.format(name=scenario.name, product=product,
                                               path=product_path, fits=fits,
                                               fitting=", ".join(fitting))
        return ScenarioDoesNotFit(message, details=[
            field_detail("$.scenario", f"fits {fits}, not {product} ({product_path})")])

    def require_scenario(self, name: str, path: str = "$.scenario") -> Scenario:
        scenario = self.scenarios.get(name)
        if scenario is None or scenario.kind != "task":
            known = ", ".join(n for n, s in sorted(self.scenarios.items()) if s.kind == "task")
            raise UnknownScenario(UNKNOWN_SCENARIO.format(name=name, known=known),
                                  details=[field_detail(path, "unknown")])
        return scenario

    def schedule(self, task: Task, scenario: Scenario) -> None:
        for step in scenario.steps:
            # No label: the step action describes itself when asked (a string per step
            # was a tenth of a task's creation).
            self.timeline.schedule(task.created_at + step.at, _StepAction(self.itself, task, step),
                                   owner=task.id)

    def _identifier(self, command: CreateTask) -> str:
        identifier = command.request.identifier
        if command.token_identifier is not None:
            if identifier not in (UNSET, command.token_identifier):
                raise IdentifierMismatch(IDENTIFIER_MISMATCH,
                                         details=[field_detail("$.identifier", IDENTIFIER_MISMATCH)])
            return command.token_identifier
        if identifier is UNSET:
            raise ValidationFailed(IDENTIFIER_REQUIRED,
                                   details=[field_detail("$.identifier", IDENTIFIER_REQUIRED)])
        return identifier

    def _task_requests(self, command: CreateTask) -> list[TaskRequest]:
        request = command.request
        metadata, distribution = given(request.metadata), given(request.distribution)
        if metadata is not None:
            check_metadata(metadata, "$.metadata")
        for n, item in enumerate(given(request.tasks, ())):
            if item.metadata is not UNSET:
                check_metadata(item.metadata, f"$.tasks[{n}].metadata")
        top_fields = given_fields(request)
        if request.tasks is not UNSET:
            return [TaskRequest(product=item.product or item.operation,
                                metadata=given(item.metadata, metadata),
                                payment_method=written_payment_method(given(item.payment_method)),
                                path=f"$.tasks[{n}].{'product' if item.product else 'operation'}",
                                distribution=_split(given(item.distribution, distribution)),
                                on_complete=item.on_complete, on_fail=item.on_fail,
                                fields={**top_fields, **given_fields(item)})
                    for n, item in enumerate(request.tasks)]
        product = given(request.product, given(request.operation))
        if product is None:
            raise ValidationFailed(PRODUCT_REQUIRED,
                                   details=[field_detail("$.product", PRODUCT_REQUIRED)])
        return [TaskRequest(product=product, metadata=metadata,
                            payment_method=written_payment_method(given(request.payment_method)),
                            path=f"$.{command.product_field}", distribution=_split(distribution),
                            fields=top_fields)]

    def check_company_accepts(self, company: Company, product: str, path: str) -> None:
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
        if self.settings.manual_deposits.applies_to(company):
            raise CompanyManualDeposits(MANUAL_DEPOSITS_ONLY.format(name=company.name),
                                        details=[field_detail("$.company", "manual deposits only")])
        if product not in company.available_products:
            raise ProductNotOffered(PRODUCT_NOT_OFFERED.format(
                name=company.name, product=product,
                offered=", ".join(company.available_products)),
                                  details=[field_detail(path, "not offered")])

    def authentication_method(self, company: Company, product: str) -> str | None:
        """A task's `authenticationMethod`, which the spec's Task table gives "For pay-link
        Tasks: `true-auth`, `smart-auth`": None (null) for a task of another scope, which
        the spec gives no value. The sandbox's rule (README: Fidelity): `true-auth` where
        the company's connector authenticates with true-auth (any of its forms), else
        `smart-auth` (a connector's `standard-auth` is the company's capability name, not a
        Task value)."""
        if self.scope_of(product) != PAY_LINK:
            return None
        methods = company.capabilities.get("authenticationMethods") or ()
        return "true-auth" if any(m.startswith("true-auth") for m in methods) else "smart-auth"

    def _distribution_outcome(self, company: Company, request: TaskRequest) -> Scenario | None:
        """A deposit split the company's connector cannot set up (its
        capabilities.distributionTypes) fails as the sandbox username
        test-distribution-not-supported makes it fail (README: Fidelity)."""
        distribution = request.distribution
        supported = company.capabilities.get("distributionTypes")
        if (request.product != DEPOSIT or not distribution or supported is None
                or distribution["type"] in supported):
            return None
        return self.scenarios.get(DISTRIBUTION_NOT_SUPPORTED)

    def _pay_link_outcome(self, identifier: str, company: Company,
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
        now = self.clock.timestamp()
        key = (identifier, method["_id"])
        if method.get("type") == "card":
            created = self.payment_tokens.get(key)
            expired = created is not None and now - created >= PAYMENT_TOKEN_LIFETIME
            if expired and identifier in self.card_token_recreation_off:
                return self.scenarios.get(PAYMENT_TOKEN_EXPIRED)
            if created is None or expired:
                self.payment_tokens[key] = now
        methods = self.merchant_payment_methods.setdefault((identifier, company.id), set())
        if method["_id"] not in methods:
            if company.max_payment_methods is not None and len(methods) >= company.max_payment_methods:
                return self.scenarios.get("payment-method-limit-reached")
            methods.add(method["_id"])
        return None

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
        if "authenticationMethod" in changes and self.scope_of(task.product) == PAY_LINK:
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
            self._emit_task_event(task, PAY_LINK_ACCOUNTS_UPDATED(
                accounts=self._accounts(task, changes["accounts"])))
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
        self._emit_task_event(task, TASK_AUTHENTICATION_STATUS_UPDATED(
            authenticated=task.authenticated))

    def _move(self, task: Task, status: str, *, reason: str | None,
              patch: bool) -> None:
        problem = transition_error(task.status, status, patch=patch)
        if problem:  # loaded scenarios are checked; this guards hand-built steps
            raise IllegalTransition(problem)
        task.previous_status, task.status = task.status, status
        task.reason = reason if status == FAILED else None
        if status in FINAL and task.saw_outcome is None:
            task.saw_outcome = task.watched and not task.user_left
        task.history.append({"status": status, "previousStatus": task.previous_status,
                             "at": isoformat(self.clock.timestamp()), "patch": patch,
                             **({"reason": reason} if reason else {})})
        event_type = emits_status_update(task.previous_status, status, patch=patch)
        if event_type == TASK_STATUS_PATCHED.name:
            self._emit_task_event(task, TASK_STATUS_PATCHED(
                authenticated=task.authenticated, status=task.status,
                previous_status=task.previous_status, payment_method=task.payment_method or None))
        elif event_type == TASK_STATUS_UPDATED.name:
            self._emit_task_event(task, TASK_STATUS_UPDATED(
                previous_status=task.previous_status, status=task.status,
                authenticated=task.authenticated, payment_method=task.payment_method,
                reason=task.reason,
                **{name: getattr(task, name) for name, field in STEP_FIELDS.items()
                   if status == FAILED or not field.on_failure_only}))

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
        failed = [t for t in tasks if t.status == FAILED]
        self._emit_task_event(task, TASK_WORKFLOW_FINISHED(
            status=FAILED if failed else COMPLETED,
            tasks=[WorkflowTask(task=t.id, product=t.product, status=t.status,
                                reason=t.reason or UNSET) for t in tasks],
            failure_reason=(failure_reason or failed[0].reason) if failed else None))

    def _emit_task_event(self, task: Task, draft: Draft) -> None:
        self.emit(draft, identifier=task.identifier, task_id=task.id,
                  **task_event_fields(task, self.companies.get(task.company_id)))

    # -- reading ----------------------------------------------------------------------------

    def get_task(self, task_id: str, identifier: str | None = None) -> Task:
        """A task; with `identifier` (a public token's user) only that user's tasks exist."""
        task = self._by_id.get(task_id)
        if task is None or identifier is not None and task.identifier != identifier:
            raise TaskNotFound(UNKNOWN_TASK.format(task_id=task_id))
        return task

    # -- the task as the real service shows it ---------------------------------------------

    def _accounts_by_company(self, identifier: str) -> dict[str, Any]:
        """The user's linked accounts by company (the first one of each, as the engine finds)."""
        accounts: dict[str, Any] = {}
        for account in self.accounts.values():
            if account.identifier == identifier:
                accounts.setdefault(account.company_id, account)
        return accounts

    def _data_account(self, task: Task, accounts: dict[str, Any] | None) -> Any:
        """The linked account whose data a completed task left or refreshed, if any."""
        if task.status != COMPLETED:
            return None
        if task.linked_account is not None:
            account = self.accounts.get(task.linked_account)
        elif task.product in USER_LINK_PRODUCTS:
            if accounts is None:
                accounts = self._accounts_by_company(task.identifier)
            account = accounts.get(task.company_id)
        else:
            return None
        return None if account is None or account.pii_deleted else account

    def payroll_data_available(self, task: Task, accounts: dict[str, Any] | None = None) -> bool:
        """The real Task's `payrollDataAvailable`: the task completed and left payroll data
        to read (a completed deposit or verify task, or a refresh of a linked account, whose
        account still holds its data: not deleted as PII)."""
        return self._data_account(task, accounts) is not None

    def files(self, task: Task, accounts: dict[str, Any] | None = None) -> list[TaskFile]:
        """A task's files: the direct deposit authorization form of a deposit task, and the
        paystubs of the payroll data it left."""
        files = []
        if task.product == DEPOSIT:
            files.append(TaskFile(DEPOSIT_FORM, f"direct-deposit-{task.company_id}.pdf"))
        account = self._data_account(task, accounts)
        if account is not None:
            files += [TaskFile(s["_id"], f"paystub-{s['date'][:10]}.pdf", statement=s,
                               account=account) for s in account.statements]
        return files

    def file_of(self, task: Task, file_id: str) -> TaskFile:
        for file in self.files(task):
            if file.id == file_id:
                return file
        raise FileNotFound(UNKNOWN_FILE.format(task_id=task.id, file_id=file_id),
                           details=[field_detail("$.fileId", "unknown", location="path")])

    def details_of(self, task: Task, accounts: dict[str, Any] | None = None) -> TaskDetails:
        """GET /task/{taskId}/details: the task with its company (a Company; one deleted
        since: its `_id`), whether it left payroll data, and its files."""
        if accounts is None:
            accounts = self._accounts_by_company(task.identifier)
        company = self.companies.get(task.company_id)
        return TaskDetails.of(
            task, company=(search_record(company, self.settings.manual_deposits)
                           if company is not None else {"_id": task.company_id}),
            payroll_data_available=self.payroll_data_available(task, accounts),
            files=self.files(task, accounts))

    def of_user(self, identifier: str, *, status: str | None = None,
                payroll_data: bool | None = None) -> list[TaskDetails]:
        """GET /user/{identifier}/tasks: the user's tasks as Task records, oldest first."""
        self.identity.require(identifier)
        accounts = self._accounts_by_company(identifier)
        found = []
        for task in self.values():
            if task.identifier != identifier or status is not None and task.status != status:
                continue
            if (payroll_data is not None
                    and self.payroll_data_available(task, accounts) != payroll_data):
                continue
            found.append(self.details_of(task, accounts))
        return found

    def prescreen(self, named: Any, product: str) -> Prescreen:
        """POST /task/prescreen: HIGH when a task for `product` at the company would start
        and run headless (username and password): the company is known, operational,
        offers the product and has headless authentication, and the account's
        manual-deposit rule does not cover it; LOW otherwise (an unknown company too)."""
        company = self._prescreened_company(named)
        high = (company is not None and company.status == OPERATIONAL
                and product in company.available_products
                and bool(company.capabilities.get("headlessAuthentication"))
                and not self.settings.manual_deposits.applies_to(company))
        return Prescreen(confidence=HIGH if high else LOW,
                         company_id=company.id if company is not None else None)

    def _prescreened_company(self, named: Any) -> Company | None:
        """The company by `id`, else the one whose name is `name` (case, spaces and
        punctuation aside, as the search's exact tier compares them): a PrescreenCompany."""
        company = self.companies.get(named.id) if named.id is not UNSET else None
        if company is None and named.name is not UNSET:
            wanted = normalize(named.name)
            found = search_companies(self.companies, self.settings.manual_deposits,
                                     SearchRequest(query=named.name, limit=5))
            company = next((c for c in found if normalize(c.name) == wanted), None)
        return company


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


# -- the real service's task operations (docs/spec/real-api-surface.md: Tasks) -------------

DEPOSIT_FORM = "direct-deposit-form"  # the file id of a deposit task's authorization form
FILE_URL_LIFETIME = 3600              # virtual seconds a generated file URL works
UNKNOWN_FILE = "Task {task_id!r} has no file {file_id!r} (its details list its `files`)."
INVALID_FILE_URL = "This file URL is not one the sandbox made, or it was changed."
EXPIRED_FILE_URL = ("This file URL expired at {expires}; ask for a new one "
                    "(GET /task/{{taskId}}/file/{{fileId}}/generate-url).")
HIGH, LOW = "HIGH", "LOW"


class FileNotFound(NotFound):
    code = "file-not-found"


class InvalidFileUrl(Unauthorized):
    code = "invalid-file-url"


class FileUrlExpired(Unauthorized):
    code = "file-url-expired"


class TaskFile(msgspec.Struct, frozen=True):
    """A file of a task: a deposit task's direct deposit authorization form, or a paystub
    of the payroll data a task left (`statement` of the linked account `account`)."""

    id: str
    name: str
    content_type: str = "application/pdf"
    statement: dict[str, Any] | None = None
    account: Any = None


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
