"""JSON Schemas of every event body (spec: Events), one per event type.

Published in the OpenAPI document's `webhooks` section and at
GET /_sandbox/schemas/events/{eventType}, so customers can check their handlers;
the tests check every emitted event against them.

Where the spec shows a payload, the schema follows it exactly; where it says "not
shown", the sandbox's choice is documented in each schema's description.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..domain.states import AUTHENTICATION_METHODS, CHANGED_FIELDS, FAILURE_REASONS, UPDATE_TYPES
from ..domain.task_fields import step_field_schemas
from .api import COMPANY_SUMMARY, USER
from .records import SERVICE_DATE_TIME
from .scenarios import PAYMENT_METHOD

_TIME = {"type": "string", "format": "date-time"}
_ID = {"type": "string", "minLength": 1}
_TASK_FIELDS = {
    "publicToken": {"type": "string"},
    "product": {"type": "string"},
    "task": _ID,
    "taskWorkflow": _ID,
    "authenticationMethod": {"enum": list(AUTHENTICATION_METHODS)},
    "company": COMPANY_SUMMARY,
    "metadata": {"type": "object"},
}
_STATUS = {"enum": ["queued", "processing", "completed", "failed"]}
TASK_EVENT_DATA: dict[str, dict[str, Any]] = {
    "task-status-updated": {
        "type": "object",
        "description": "Emitted when a Task resolves (spec: Task events): the status is final; "
                       "previousStatus is processing, or queued for a task that failed before "
                       "it ever started processing. A failure carries its reason.",
        "required": ["previousStatus", "status", "authenticated"],
        "allOf": [
            {"if": {"properties": {"status": {"const": "failed"}}},
             "then": {"required": ["reason"]}},
            {"if": {"properties": {"previousStatus": {"const": "queued"}}},
             "then": {"properties": {"status": {"const": "failed"}}}},
        ],
        "properties": {
            "previousStatus": {"enum": ["queued", "processing"]},
            "status": {"enum": ["completed", "failed"]},
            "authenticated": {"type": "boolean"},
            "paymentMethod": PAYMENT_METHOD,
            "reason": {"enum": list(FAILURE_REASONS)},
            **step_field_schemas(),  # flow, meta, ... (domain/task_fields.py)
        },
    },
    "task-authentication-status-updated": {
        "type": "object", "required": ["authenticated"],
        "properties": {"authenticated": {"type": "boolean"}},
    },
    "task-status-patched": {
        "type": "object",
        "required": ["authenticated", "status", "previousStatus"],
        "properties": {"authenticated": {"type": "boolean"}, "status": _STATUS,
                       "previousStatus": _STATUS, "paymentMethod": PAYMENT_METHOD},
    },
    "task-workflow-finished": {
        "type": "object",
        "description": "The spec shows only a failure reason; the sandbox adds the outcome "
                       "and the workflow's tasks.",
        "required": ["status"],
        "properties": {
            "status": {"enum": ["completed", "failed"]},
            "failureReason": {"type": "string"},
            "tasks": {"type": "array", "items": {"type": "object", "required": ["task", "status"],
                                                 "properties": {"task": _ID, "status": _STATUS,
                                                                "product": {"type": "string"},
                                                                "reason": {"type": "string"}}}},
        },
    },
}

_COMPANY_ID_DATA = {"type": "object", "required": ["companyId"], "properties": {"companyId": _ID}}
COMPANY_EVENT_DATA: dict[str, dict[str, Any]] = {
    "company-created": _COMPANY_ID_DATA,
    "company-updated": _COMPANY_ID_DATA,
    "company-deleted": _COMPANY_ID_DATA,
    "maintenance-mode": {
        "type": "object",
        "required": ["companyId", "status", "products"],
        "properties": {"companyId": _ID, "status": {"enum": ["maintenance", "operational"]},
                       "products": {"type": "array", "items": {"type": "string"}}},
        "if": {"properties": {"status": {"const": "operational"}}},
        "then": {"properties": {"products": {"maxItems": 0}}},
    },
}

PAY_LINK_ACCOUNTS_DATA = {
    "type": "object",
    "required": ["accounts"],
    "properties": {"accounts": {"type": "array", "items": {
        "type": "object",
        "required": ["_id", "updateType", "bills"],
        "properties": {
            "_id": _ID, "updateType": {"enum": list(UPDATE_TYPES)},
            "bills": {"type": "array", "items": {
                "type": "object", "required": ["_id"],
                "properties": {"_id": _ID, "changedFields": {
                    "type": "array", "items": {"enum": list(CHANGED_FIELDS)}}}}},
        }}}},
}

_LINKED = {"linkedAccount": _ID, "companyId": _ID,
           "task": {**_ID, "description": "The refresh task whose completion synced the data "
                                          "(a pull refresh, or a sign-in again); absent for a "
                                          "push refresh."}}
_SYNCED = {
    "type": "object", "required": ["linkedAccount", "companyId"], "properties": _LINKED,
    "description": "Not shown by the spec: the sandbox names the linked account and company, "
                   "and the task of a pull refresh.",
}
_CHANGED = {
    "type": "object", "required": ["linkedAccount", "companyId", "records"],
    "properties": {**_LINKED, "records": {"type": "array", "items": _ID,
                                          "description": "Ids of the records that changed."}},
    "description": "Not shown by the spec: the sandbox names the linked account, company and "
                   "the changed records; fetch them from the data endpoints.",
}
CONTINUOUS_ACCESS_DATA: dict[str, dict[str, Any]] = {
    **{f"{kind}-synced": _SYNCED for kind in
       ("statements", "income", "timesheets", "employment", "identity", "taxes", "deposit-accounts")},
    **{name: _CHANGED for name in
       ("statements-added", "income-updated", "timesheets-added", "employment-updated",
        "identity-updated", "taxes-added", "deposit-accounts-added", "deposit-accounts-updated",
        "deposit-accounts-removed")},
    "deposit-switch-removed": {
        "type": "object", "required": ["linkedAccount", "companyId", "depositAccount"],
        "properties": {**_LINKED, "depositAccount": _ID},
    },
    "linked-account-connected": _SYNCED,
    "linked-account-disconnected": {
        "type": "object", "required": ["linkedAccount", "companyId", "reason"],
        "properties": {**_LINKED, "reason": {"enum": ["timeout", "credentials-changed",
                                                      "system-update"]}},
    },
    "earn-user-data": {
        "type": "object",
        "required": ["netHourlyRate", "unpaidHoursInPayPeriod", "currentPayPeriodStart"],
        "properties": {**_LINKED, "netHourlyRate": {"type": "number"},
                       "unpaidHoursInPayPeriod": {"type": "number"},
                       # Dates in payroll data are date-times (real-service-facts).
                       "currentPayPeriodStart": SERVICE_DATE_TIME},
    },
}


def processor_link_data(aggregator: str) -> dict[str, dict[str, Any]]:
    link = {"processorLink": _ID}
    return {
        "employer-classification-completed": {
            "type": "object", "required": ["processorLink", "matches"],
            "properties": {**link, "matches": {"type": "integer", "minimum": 0}},
            "description": "Not shown by the spec: fetch results from employer-matches.",
        },
        "recurring-transaction-detection-completed": {
            "type": "object", "required": ["processorLink", "recurringTransactions"],
            "properties": {**link, "recurringTransactions": {"type": "integer", "minimum": 0}},
            "description": "Not shown by the spec: fetch results from recurring-transactions.",
        },
        f"{aggregator}-error": {
            "type": "object", "required": ["processorLink", "errorType", "errorCode"],
            "properties": {**link, "errorType": {"type": "string"}, "errorCode": {"type": "string"},
                           "errorMessage": {"type": "string"}},
        },
    }


def event_types(aggregator: str) -> list[str]:
    """Every event type of the spec, with the aggregator's name filled in."""
    return [*TASK_EVENT_DATA, *COMPANY_EVENT_DATA, "pay-link-accounts-updated", "pii-data-deleted",
            *CONTINUOUS_ACCESS_DATA, *processor_link_data(aggregator)]


@lru_cache(maxsize=256)  # the same object each time: validators are cached by identity
def event_schema(event_type: str, aggregator: str) -> dict[str, Any] | None:
    """The JSON Schema of one event type's body, or None if the spec has no such type."""
    base: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": event_type,
        "type": "object",
        "properties": {"eventType": {"const": event_type}, "eventTime": _TIME},
        "required": ["eventType", "eventTime"],
    }
    if event_type in TASK_EVENT_DATA:
        base["properties"].update(user={**USER, "required": ["_id", "identifier", "connected"]},
                                  data=TASK_EVENT_DATA[event_type], **_TASK_FIELDS)
        base["required"] += ["user", "data", "publicToken", "product", "task", "taskWorkflow",
                             "authenticationMethod", "company"]
        return base
    if event_type in COMPANY_EVENT_DATA:
        base["properties"]["data"] = COMPANY_EVENT_DATA[event_type]
        base["required"].append("data")
        base["not"] = {"required": ["user"]}  # company events have no user
        return base
    if event_type == "pii-data-deleted":
        base["properties"].update(user=USER, task=_ID)
        base["required"] += ["user", "task"]
        base["not"] = {"required": ["data"]}  # the spec: it has no data
        return base
    data = ({"pay-link-accounts-updated": PAY_LINK_ACCOUNTS_DATA} | CONTINUOUS_ACCESS_DATA
            | processor_link_data(aggregator)).get(event_type)
    if data is None:
        return None
    base["properties"].update(user=USER, data=data)
    base["required"] += ["user", "data"]
    return base
