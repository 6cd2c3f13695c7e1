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
from typing import Any

from ..errors import (CompanyNotFound, TaskNotFound, UnknownEventType, ValidationFailed,
                      field_detail)
from .event_types import CONTINUOUS_ACCESS, EventType, Family, declared
from .companies import OPERATIONAL, UNKNOWN_COMPANY, Company
from .events import Event
from ..clock import isoformat
from .states import COMPLETED, FINAL, PROCESSING, QUEUED
from . import payroll_records
from .tasks import UNKNOWN_TASK, Task, Workflow, task_event_fields
from .identity import DEFAULT_TOKEN_LIFETIME
from .shapes import UNSET, given
from .tenants import Tenant

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
    rng = random.Random(f"{tenant.name}:{tenant.events.emitted}")
    identifier = given(request.identifier)
    task = _task(tenant, request, identifier, declaration)
    company = _company(tenant, request, task)

    if declaration.family is Family.TASK:
        data = {**_task_data(event_type, task), **overrides}
        return _checked_emit(tenant, declaration, data, task_event_fields(task, company),
                             identifier=task.identifier, task_id=task.id)
    if declaration.family is Family.COMPANY:
        data = {"companyId": company.id}
        if event_type == "maintenance-mode":
            data.update(status="maintenance", products=list(company.available_products))
        return _checked_emit(tenant, declaration, {**data, **overrides}, {})

    identifier = identifier or (task.identifier if task else DEFAULT_IDENTIFIER)
    user = tenant.identity.user(identifier)
    user_body = {"_id": user.id, "identifier": identifier}
    if declaration.family is Family.PRIVACY:
        task = task or _stored_task(tenant, identifier, company)
        return _checked_emit(tenant, declaration, None, {"user": user_body, "task": task.id},
                             identifier=identifier, task_id=task.id)
    data = {**_user_data(tenant, event_type, aggregator, identifier, company, rng),
            **overrides}
    return _checked_emit(tenant, declaration, data, {"user": user_body},
                         identifier=identifier, task_id=task.id if task else None)


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
                history=[{"status": QUEUED, "at": isoformat(now)},
                         *({"status": status, "previousStatus": previous, "at": isoformat(now),
                            "patch": False}
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


def _task_data(event_type: str, task: Task) -> dict[str, Any]:
    if event_type == "task-authentication-status-updated":
        return {"authenticated": task.authenticated}
    if event_type == "task-workflow-finished":
        data: dict[str, Any] = {"status": "failed" if task.status == "failed" else "completed",
                                "tasks": [{"task": task.id, "product": task.product,
                                           "status": task.status}]}
        if task.reason:
            data["failureReason"] = task.reason
        return data
    if event_type == "task-status-patched":
        return {"authenticated": task.authenticated, "status": COMPLETED, "previousStatus": "failed"}
    # "Emitted when a Task resolves": a task not yet final is shown as completing now.
    final = task.status in FINAL
    data = {"previousStatus": task.previous_status if final and task.previous_status else PROCESSING,
            "status": task.status if final else COMPLETED, "authenticated": task.authenticated}
    if task.reason:
        data["reason"] = task.reason
    return data


def _user_data(tenant: Tenant, event_type: str, aggregator: str,
               identifier: str, company: Company, rng: random.Random) -> dict[str, Any]:
    if event_type == "pay-link-accounts-updated":
        return {"accounts": [{"_id": tenant.ids.object_id(), "updateType": "updated",
                              "bills": [{"_id": tenant.ids.object_id(),
                                         "changedFields": ["amount", "dueDate"]}]}]}
    if event_type in ("employer-classification-completed",
                      "recurring-transaction-detection-completed", f"{aggregator}-error"):
        links = [l for l in tenant.links.values() if l.identifier == identifier]
        link = {"processorLink": links[-1].id if links else tenant.ids.object_id()}
        if event_type == "employer-classification-completed":
            return {**link, "matches": rng.randint(1, 3)}
        if event_type == "recurring-transaction-detection-completed":
            return {**link, "recurringTransactions": rng.randint(2, 12)}
        return {**link, "errorType": "ITEM_ERROR", "errorCode": "ITEM_LOGIN_REQUIRED",
                "errorMessage": "the login details of this item have changed"}
    account = _linked_account(tenant, identifier, company)
    linked = {"linkedAccount": account.id, "companyId": account.company_id}
    if event_type == "earn-user-data":
        income = payroll_records.income(account, tenant.clock.timestamp())
        return {**linked, **{name: income[name] for name in (
            "netHourlyRate", "unpaidHoursInPayPeriod", "currentPayPeriodStart")}}
    if event_type == "linked-account-disconnected":
        return {**linked, "reason": "timeout"}
    if event_type == "deposit-switch-removed":
        deposits = account.deposit_accounts
        return {**linked, "depositAccount": deposits[-1]["_id"] if deposits
                else tenant.ids.object_id()}
    if "records" in CONTINUOUS_ACCESS[event_type].data["properties"]:
        return {**linked, "records": _record_ids(account, event_type, rng)}
    return linked


def _linked_account(tenant: Tenant, identifier: str, company: Company) -> Any:
    """The user's linked account at the company (else the user's latest one), linked now
    without an event when the user has none: the ids a triggered event names resolve."""
    found = tenant.accounts.find(identifier, company.id)
    if found is None:
        mine = [a for a in tenant.accounts.values() if a.identifier == identifier]
        found = mine[-1] if mine else tenant.accounts.create(identifier, company, "deposit",
                                                             emit=False)
    return found


def _record_ids(account: Any, event_type: str, rng: random.Random) -> list[str]:
    """Ids of records the account holds, of the kind the event names (the newest few)."""
    kind = event_type.rsplit("-", 1)[0]
    singles = {"income": account.income_id, "employment": account.employment_id,
               "identity": account.identity_id}
    if kind in singles:
        return [singles[kind]]
    held = {"statements": account.statements, "timesheets": account.timesheets,
            "taxes": account.taxes, "deposit-accounts": account.deposit_accounts}[kind]
    return [record["_id"] for record in held[-rng.randint(1, 3):]]


def _checked_emit(tenant: Tenant, declaration: EventType, data: dict[str, Any] | None,
                  fields: dict[str, Any], *, identifier: str | None = None,
                  task_id: str | None = None) -> Event:
    """Emits the event once the whole body, overrides merged, matches its type's schema."""
    from ..validate import schema_errors

    candidate = {"eventType": declaration.name, "eventTime": "2000-01-01T00:00:00.000Z",
                 **fields, **({"data": data} if data is not None else {})}
    errors = schema_errors(candidate, declaration.schema)
    if errors:
        raise ValidationFailed(f"The overrides make an invalid {declaration.name} event.",
                               details=[field_detail(p.replace("$.", "$.body.", 1), m)
                                        for p, m in errors])
    return tenant.emit(declaration.draft(data), identifier=identifier, task_id=task_id, **fields)
