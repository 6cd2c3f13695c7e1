"""Emitting any event type of the spec on demand, with a realistic payload.

POST /_sandbox/events/trigger: the payload is built from the tenant's real users,
tasks and companies where the request names them; `data` overrides are merged in, and
the result must still match the event type's published schema.

What a triggered event names resolves, so a handler tested with it can follow up as
the pull flow says (issue 20, point 8): the user's real public token (a new one if the
user has none alive), a task stored for the event (GET /task/{id} answers it), the
user's linked account at the company (linked now, silently, if there is none) and the
ids of records it holds. Processor-link events name the user's latest processor link
when there is one.
"""

from __future__ import annotations

import random
from typing import Annotated, Any, Literal, get_args, get_origin

import msgspec

from ...errors import (CompanyNotFound, TaskNotFound, UnknownEventType, ValidationFailed,
                      field_detail)
from .event_types import EventType, Family, declared, example_of
from ..companies.companies import OPERATIONAL, UNKNOWN_COMPANY, Company
from .events import Event
from ...clock import Moment
from ..tasks.states import COMPLETED, PROCESSING, QUEUED
from ..accounts import payroll_records
from ..tasks.tasks import task_event_fields
from ..tasks.records import UNKNOWN_TASK, Task, TaskTransition, Workflow
from ..identity.identity import DEFAULT_TOKEN_LIFETIME
from ..shapes import UNSET, given, is_struct
from ..tenants import Tenant

DEFAULT_IDENTIFIER = "sandbox-user"
UNKNOWN_TYPE = "Unknown event type {event_type!r}. Known: {known}."
NO_DATA = "pii-data-deleted has no data (spec: Privacy event)."


def trigger_event(tenant: Tenant, aggregator: str, request: Any) -> Event:
    event_type = request.event_type
    known = declared(aggregator)
    declaration = known.get(event_type)
    if declaration is None:
        raise UnknownEventType(UNKNOWN_TYPE.format(event_type=event_type, known=", ".join(known)),
                               details=[field_detail("$.eventType", "unknown event type")])
    overrides = given(request.data) or {}
    if declaration.family is Family.PRIVACY and overrides:
        raise ValidationFailed(NO_DATA, details=[field_detail("$.data", NO_DATA)])
    tenant.admit_work()
    identifier = given(request.identifier)
    task = _task(tenant, request, identifier, declaration)
    company = _company(tenant, request, task)
    if declaration.family is Family.TASK:
        fields, identifier = task_event_fields(task, company), task.identifier
    elif declaration.family is Family.COMPANY:
        fields, identifier = {}, None
    else:
        identifier = identifier or (task.identifier if task else DEFAULT_IDENTIFIER)
        user = tenant.identity.user(identifier)
        fields = {"user": {"_id": user.id, "identifier": identifier}}
        if declaration.family is Family.PRIVACY:
            task = task or _stored_task(tenant, identifier, company)
            fields["task"] = task.id
    data = None
    if declaration.family is not Family.PRIVACY:
        example = declaration.shape.example(Example(tenant, declaration, task, company,
                                                    identifier))
        data = {**msgspec.to_builtins(example), **overrides} if overrides else example
    return _checked_emit(tenant, declaration, data, fields, identifier=identifier,
                         task_id=task.id if task else None)


class Example:
    """What a trigger knows for the example its event type's struct makes
    (event_types.example_of): the task, the company and the user it names, the records of
    theirs a field names (a linked account made when the user has none: the ids an event
    names resolve), and a generator seeded by the tenant and its count of events."""

    def __init__(self, tenant: Tenant, declaration: EventType, task: Task | None,
                 company: Company, identifier: str | None) -> None:
        self.tenant, self.event_type, self.family = tenant, declaration.name, declaration.family
        self.task, self.company, self.identifier = task, company, identifier
        self.rng = random.Random(f"{tenant.name}:{tenant.events.emitted}")
        self._account: Any = None

    def new_id(self) -> str:
        return self.tenant.ids.object_id()

    def known(self, name: str) -> Any:
        """A field's value (by its JSON name) from the tenant's records, or UNSET."""
        if self.family is Family.TASK:
            return self.task.authenticated if name == "authenticated" else UNSET
        if self.family is Family.COMPANY:
            return self.company.id if name == "companyId" else UNSET
        if name == "processorLink":
            links = [link for link in self.tenant.links.values()
                     if link.identifier == self.identifier]
            return links[-1].id if links else self.new_id()
        if name in ("linkedAccount", "companyId"):
            return self.account.id if name == "linkedAccount" else self.account.company_id
        if name == "records":
            return _record_ids(self.account, self.event_type, self.rng)
        if name == "depositAccount":
            deposits = self.account.deposit_accounts
            return deposits[-1]["_id"] if deposits else self.new_id()
        if name in INCOME_FIELDS:
            return payroll_records.income(self.account, self.tenant.clock.timestamp())[name]
        return UNSET

    @property
    def account(self) -> Any:
        """The user's linked account at the company (else the user's latest one), linked now
        without an event when the user has none."""
        if self._account is None:
            accounts = self.tenant.accounts
            found = accounts.find(self.identifier, self.company.id)
            if found is None:
                mine = [a for a in accounts.values() if a.identifier == self.identifier]
                if not mine:
                    accounts.admit(self.identifier, self.company.id, ["deposit"])
                found = mine[-1] if mine else accounts.create(self.identifier, self.company,
                                                              "deposit", emit=False)
            self._account = found
        return self._account

    def made(self, kind: Any) -> Any:
        """A realistic value of a required field the records do not give, by its type: the
        first of its choices, a number in its range, a struct's example, an id."""
        bounds: dict[str, Any] = {}
        while get_origin(kind) is Annotated:
            kind, *metas = get_args(kind)
            bounds.update({name: getattr(meta, name) for meta in metas
                           if isinstance(meta, msgspec.Meta) for name in ("ge", "le")
                           if getattr(meta, name) is not None})
        if get_origin(kind) is Literal:
            return get_args(kind)[0]
        if kind is bool:
            return self.rng.random() < 0.5
        if kind in (int, float):
            low = max(bounds.get("ge", 1), 1)
            value = self.rng.randint(low, min(bounds.get("le", low + 11), low + 11))
            return value if kind is int else float(value)
        if get_origin(kind) is list:
            return [self.made(get_args(kind)[0])]
        if is_struct(kind):
            return kind.example(self) if hasattr(kind, "example") else example_of(kind, self)
        return self.new_id()


# The income record's fields an event may carry (earn-user-data), by their JSON names.
INCOME_FIELDS = frozenset({"netHourlyRate", "unpaidHoursInPayPeriod", "currentPayPeriodStart"})


def _task(tenant: Tenant, request: Any, identifier: str | None,
          declaration: EventType) -> Task | None:
    if request.task_id is not UNSET:
        task = tenant.tasks.get(request.task_id)
        if task is None:
            raise TaskNotFound(UNKNOWN_TASK.format(task_id=request.task_id),
                               details=[field_detail("$.taskId", "unknown task")])
        return task
    if declaration.family is not Family.TASK:
        return None
    return _stored_task(tenant, identifier or DEFAULT_IDENTIFIER,
                        _company(tenant, request, None))


def _stored_task(tenant: Tenant, identifier: str, company: Company) -> Task:
    """A completed task made for the event and stored with its workflow, so the ids the
    event names answer on GET /task/{id}; its public token is the user's own."""
    user = tenant.identity.user(identifier)
    product = company.available_products[0]
    now = tenant.clock.timestamp()
    task = Task(id=tenant.ids.object_id(), workflow=tenant.ids.object_id(), identifier=identifier,
                user_id=user.id, company_id=company.id, product=product, scenario="trigger",
                created_at=now, authentication_method=tenant.tasks.authentication_method(company, product),
                public_token=_public_token(tenant, identifier), status=COMPLETED,
                previous_status=PROCESSING, authenticated=True,
                history=[TaskTransition(status=QUEUED, at=Moment(now)),
                         *(TaskTransition(status=status, previous_status=previous,
                                          at=Moment(now), patch=False)
                           for previous, status in ((QUEUED, PROCESSING),
                                                    (PROCESSING, COMPLETED)))])
    tenant.tasks.file(task, Workflow(id=task.workflow, identifier=identifier, tasks=[task.id],
                                     finished=True))
    return task


def _public_token(tenant: Tenant, identifier: str) -> str:
    """The user's latest public token while it lives, else a new one (real-service-facts 2:
    24 hours by default)."""
    latest = tenant.identity.tokens.get(tenant.identity.latest_token.get(identifier, ""))
    if latest is not None and latest.expires_at > tenant.clock.timestamp():
        return latest.public_token
    return tenant.identity.create_access_token(identifier, DEFAULT_TOKEN_LIFETIME).public_token


def _company(tenant: Tenant, request: Any, task: Task | None) -> Company:
    if request.company_id is not UNSET:
        company = tenant.companies.get(request.company_id)
        if company is None:
            raise CompanyNotFound(UNKNOWN_COMPANY.format(company_id=request.company_id),
                                  details=[field_detail("$.companyId", "unknown company")])
        return company
    if task is not None:
        company = tenant.companies.get(task.company_id)
        if company is not None:
            return company
    return next(c for c in tenant.companies.ordered() if c.status == OPERATIONAL)


def _record_ids(account: Any, event_type: str, rng: random.Random) -> list[str]:
    """Ids of records the account holds, of the kind the event names (the newest few); an
    event whose name names no kind, its pay statements."""
    kind = event_type.rsplit("-", 1)[0]
    singles = {"income": account.income_id, "employment": account.employment_id,
               "identity": account.identity_id}
    if kind in singles:
        return [singles[kind]]
    held = {"timesheets": account.timesheets, "taxes": account.taxes,
            "deposit-accounts": account.deposit_accounts}.get(kind, account.statements)
    return [record["_id"] for record in held[-rng.randint(1, 3):]]


def _checked_emit(tenant: Tenant, declaration: EventType, data: Any,
                  fields: dict[str, Any], *, identifier: str | None = None,
                  task_id: str | None = None) -> Event:
    """Emits the event once the whole body, overrides merged, matches its type's schema."""
    from ...validate import schema_errors

    candidate = {"eventType": declaration.name, "eventTime": "2000-01-01T00:00:00.000Z",
                 **fields, **({"data": msgspec.to_builtins(data)} if data is not None else {})}
    errors = schema_errors(candidate, declaration.schema)
    if errors:
        raise ValidationFailed(f"The overrides make an invalid {declaration.name} event.",
                               details=[field_detail(p.replace("$.", "$.body.", 1), m)
                                        for p, m in errors])
    return tenant.emit(declaration.draft(data), identifier=identifier, task_id=task_id, **fields)
