"""What POST /task/create (and a refresh, a workflow from a linked account) asks: the body's
structs, and the command the tasks part takes (the request and who asks)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ...errors import ValidationFailed, field_detail
from ..shapes import (NO_CONTROL_CHARACTER, TASK_SCENARIOS, UNSET, Command, Maybe, Metadata, Text,
                      of, raw, text)
from ..webhooks.events import compact_json
from .records import CONTINUE, FINISH, Distribution, next_step
from .states import (PAYMENT_METHOD, REQUEST_FIELDS, field_schemas, given_fields,
                     written_payment_method)


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
        request = self.request  # UNSET is false, an id is not
        return request.linked_account or request.linked_account_id or None


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


# Customer context (task `metadata`) travels in every event of the task: it is bounded
# so that every event stays buildable and small (README: Limits).
METADATA_MAX_DEPTH = 8          # objects and arrays nested inside the metadata object
METADATA_MAX_ITEMS = 200        # keys and array elements, counted over the whole value
METADATA_MAX_BYTES = 8 * 1024   # as compact JSON
METADATA_TOO_BIG = ("metadata is limited to {depth} levels of nesting, {items} keys and "
                    "elements in all and {size} bytes as JSON.")


def check_metadata(value: Any, path: str) -> None:
    """Refuses (422, naming `path`) metadata past the bounds above."""
    items = 0
    level = [value]
    for depth in range(METADATA_MAX_DEPTH + 1):
        children = []
        for node in level:
            members = node.values() if isinstance(node, dict) else node
            items += len(node)
            children += [m for m in members if isinstance(m, (dict, list)) and m]
        if not children:
            break
        level = children
    else:
        _refuse_metadata(path, f"nested deeper than {METADATA_MAX_DEPTH} levels")
    if items > METADATA_MAX_ITEMS:
        _refuse_metadata(path, f"{items} keys and elements (at most {METADATA_MAX_ITEMS})")
    size = len(compact_json(value))  # as every event of the task carries it
    if size > METADATA_MAX_BYTES:
        _refuse_metadata(path, f"{size} bytes as JSON (at most {METADATA_MAX_BYTES})")


def _refuse_metadata(path: str, problem: str) -> None:
    raise ValidationFailed(METADATA_TOO_BIG.format(depth=METADATA_MAX_DEPTH,
                                                   items=METADATA_MAX_ITEMS,
                                                   size=METADATA_MAX_BYTES),
                           details=[field_detail(path, problem)])
