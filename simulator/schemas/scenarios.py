"""JSON Schema of a scenario file (scenarios/*.yaml), and the payment method's shape."""

from __future__ import annotations

from typing import Any

from ..clock import written_time
from ..domain.states import (AUTHENTICATION_METHODS, CHANGED_FIELDS, FAILURE_REASONS,
                             PAYMENT_METHOD_TYPES, UPDATE_TYPES)
from ..domain.task_fields import step_field_schemas
from .dates import date_time_field

PAYMENT_METHOD = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "_id", "title"],
    "properties": {
        "type": {"enum": list(PAYMENT_METHOD_TYPES)},
        "_id": {"type": "string", "minLength": 1},
        "title": {"type": "string"},
        "expiry": {"type": "string", "format": "date-time",
                   "description": "Card expiry: any ISO 8601 date-time with a zone; answers "
                                  "and events write it 2020-06-30T12:00:00.000Z."},
        "brand": {"type": "string"},
        "lastFour": {"type": "string", "pattern": r"^[0-9]{4}$"},
        "accountNumber": {"type": "string", "pattern": r"^[0-9]{4}$"},
        "routingNumber": {"type": "string", "pattern": r"^[0-9]{9}$"},
        "accountType": {"enum": ["checking", "savings"]},
        "cardStatus": {"enum": ["frozen"]},
        "externalId": {"type": "string"},
    },
}
# A payment method as answers and events write it: its expiry in the one date-time form.
WRITTEN_PAYMENT_METHOD = {**PAYMENT_METHOD, "properties": {
    **PAYMENT_METHOD["properties"],
    "expiry": date_time_field("Card expiry (spec: Payment method object)."),
}}


def written_payment_method(method: dict[str, Any] | None) -> dict[str, Any] | None:
    """A payment method as answers and events write it: its `expiry`, given in any ISO 8601
    form (a request, a scenario file, PUT /user), in the one date-time form."""
    if method is None or not isinstance(method.get("expiry"), str):
        return method
    return {**method, "expiry": written_time(method["expiry"])}

ACCOUNT_UPDATE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["updateType"],
    "properties": {
        "_id": {"type": "string", "minLength": 1,
                "description": "Omitted: the task's account for this user and company."},
        "updateType": {"enum": list(UPDATE_TYPES)},
        "bills": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "_id": {"type": "string", "minLength": 1},
                    "changedFields": {"type": "array", "items": {"enum": list(CHANGED_FIELDS)},
                                      "uniqueItems": True},
                },
            },
        },
    },
}

STEP = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {
        "after": {"type": "number", "minimum": 0,
                  "description": "Seconds of virtual time after the previous step (default 0)."},
        "status": {"enum": ["processing", "completed", "failed"]},
        "patch": {"type": "boolean",
                  "description": "A correction of a final status: task-status-patched."},
        "authenticated": {"type": "boolean"},
        "reason": {"enum": list(FAILURE_REASONS)},
        **step_field_schemas(),  # flow, meta, ... (domain/task_fields.py)
        "product": {"type": "string", "minLength": 1,
                    "description": "Older files: the one product the scenario fits (as "
                                   "`products: [it]`). It does not change the task's product."},
        "authenticationMethod": {
            "enum": list(AUTHENTICATION_METHODS),
            "description": "The task's authenticationMethod: the spec's values, which it lists "
                           "for pay-link tasks only (a scenario that sets it runs pay-link "
                           "tasks only)."},
        "paymentMethod": PAYMENT_METHOD,
        "connected": {"type": "boolean",
                      "description": "false: the user leaves the hosted flow (user.connected "
                                     "false from here on). Only the flow's open page makes a "
                                     "user present, so a scenario cannot state true."},
        "accounts": {"type": "array", "items": ACCOUNT_UPDATE, "minItems": 1,
                     "description": "Pay-link accounts that changed: pay-link-accounts-updated."},
        "company": {
            "type": "object",
            "additionalProperties": False,
            "required": ["status"],
            "properties": {
                "status": {"enum": ["operational", "under-maintenance", "disabled"]},
                "products": {"type": "array", "items": {"type": "string"}},
            },
            "description": "The task's company changes status (maintenance-mode, company-updated).",
        },
        "linkedAccount": {"enum": ["connected", "disconnected"],
                          "description": "The user's linked account for this company."},
        "aggregatorError": {
            "type": "object",
            "additionalProperties": False,
            "required": ["errorType", "errorCode"],
            "properties": {"errorType": {"type": "string"}, "errorCode": {"type": "string"},
                           "errorMessage": {"type": "string"}},
        },
        "stage": {"enum": ["pull-transactions", "employer-classification",
                           "recurring-transaction-detection"],
                  "description": "Processor-link scenarios: the pipeline stage that runs."},
        "piiDataDeleted": {"const": True,
                           "description": "The user's personal data is deleted (pii-data-deleted)."},
        "workflowFailureReason": {"type": "string",
                                  "description": "Failure reason in task-workflow-finished."},
    },
}

SCENARIO_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "A scenario: a timeline of task steps and the events they emit",
    "type": "object",
    "additionalProperties": False,
    "required": ["description", "steps"],
    "properties": {
        "description": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"^[^\n]*$",
                        "description": "One line a demo presenter can read."},
        "kind": {"enum": ["task", "processor-link"], "default": "task"},
        "products": {"type": "array", "items": {"type": "string", "minLength": 1},
                     "minItems": 1, "uniqueItems": True,
                     "description": "The products whose tasks may run it (service.yaml "
                                    "`products`). Default: from the steps - pay-link steps "
                                    "(flow, paymentMethod, ...) the pay-link products, "
                                    "user-link steps (linkedAccount, piiDataDeleted) the "
                                    "user-link ones, else every product."},
        "steps": {"type": "array", "minItems": 1, "items": STEP},
    },
}
