"""JSON Schema of a scenario file (scenarios/*.yaml)."""

from __future__ import annotations

from ..domain.companies.companies import COMPANY_STATUSES
from ..domain.links.processor_links import STAGES
from ..domain.tasks.states import (AUTHENTICATION_METHODS, CHANGED_FIELDS, FAILURE_REASONS,
                             PAYMENT_METHOD, SCENARIO_KINDS, STEP_FIELDS, STEP_STATUSES,
                             UPDATE_TYPES, field_schemas)

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
        "status": {"enum": list(STEP_STATUSES)},
        "patch": {"type": "boolean",
                  "description": "A correction of a final status: task-status-patched."},
        "authenticated": {"type": "boolean"},
        "reason": {"enum": list(FAILURE_REASONS)},
        **field_schemas(STEP_FIELDS),  # flow, meta, ... (domain/states.py)
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
                "status": {"enum": COMPANY_STATUSES},
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
        "stage": {"enum": [*STAGES],
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
        "kind": {"enum": list(SCENARIO_KINDS), "default": "task"},
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
