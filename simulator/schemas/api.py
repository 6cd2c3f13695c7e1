"""JSON Schemas of request bodies, query parameters and responses (draft 2020-12).

Handlers validate against these and the OpenAPI document publishes the same
objects, so what is documented is what is enforced.
"""

from __future__ import annotations

from ..domain.data_profiles import PROFILE_SCHEMA

from ..domain.states import AUTHENTICATION_METHODS as TASK_AUTHENTICATION_METHODS
from ..domain.states import DAYS_REQUESTED, DEEPLINK_STEPS, FAILURE_REASONS
from ..domain.task_fields import STEP_FIELDS, step_field_schemas
from .fixtures import (AUTHENTICATION_METHODS, COMPANY_SCHEMA, COMPANY_STATUSES,
                       CONTINUOUS_ACCESS, DERIVED_TAGS, MANUAL_DEPOSITS, SCOPES, STORED_TAGS)
from .dates import DATE_TIME, date_time_field
from .scenarios import PAYMENT_METHOD, WRITTEN_PAYMENT_METHOD

_NAME = {"type": "string", "minLength": 1, "maxLength": 200}

# No C0 or C1 control character: in a user's identifier (these schemas), a path segment or
# a query value (the pipeline's check, schemas/validate.py: text_problem; the document
# states it there, openapi.py).
NO_CONTROL_CHARACTER = r"^[^\x00-\x1f\x7f-\x9f]*$"

# Names only the running app knows, marked where a request takes them (`"x-names": kind`,
# an annotation validators ignore): the document lists them (openapi.py), and the server
# refuses any other with its own code (422 unknown-scenario, unknown-event-type,
# unknown-products, invalid-processor-token).
TASK_SCENARIOS = "task-scenarios"
PROCESSOR_LINK_SCENARIOS = "processor-link-scenarios"
EVENT_TYPES = "event-types"
PRODUCTS = "products"
PROCESSOR_TOKENS = "processor-tokens"  # not a list: the pattern processor-<environment>-<uuid>

_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 50}
_TAG = {"enum": STORED_TAGS + DERIVED_TAGS}

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string", "description": "kebab-case, stable"},
                "message": {"type": "string"},
                "details": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "location": {"enum": ["body", "query", "path", "header"]},
                            "path": {"type": "string", "description": "JSON path, e.g. $.products[0]"},
                            "message": {"type": "string"},
                        },
                    },
                },
            },
        },
    },
}

SEARCH_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["query"],
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": r"\S",
                  "description": "Fuzzy match on company names. Required also with franchiseParent."},
        "scopes": {"type": "array", "items": {"enum": SCOPES}, "uniqueItems": True},
        "product": {"type": "string", "minLength": 1,
                    "description": "Only companies supporting this product. Not with `products`."},
        "products": {**_STRINGS, "minItems": 1,
                     "description": "Only companies supporting all of these. Not with `product`."},
        "tags": {"type": "array", "items": _TAG, "uniqueItems": True,
                 "description": "Only companies having every listed tag (derived ones included)."},
        "excludedTags": {"type": "array", "items": _TAG, "uniqueItems": True,
                         "description": "Exclude by stored tags only; never removes manual-deposits."},
        "franchiseParent": {"type": "string", "minLength": 1,
                            "description": "Only the franchise children of this parent company."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
    },
}

ACCESS_TOKEN_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["identifier"],
    "properties": {
        "identifier": {"type": "string", "minLength": 1, "maxLength": 256,
                       "pattern": NO_CONTROL_CHARACTER,
                       "description": "The user's id in the customer's system."},
        "tokenLifetime": {"type": "integer", "minimum": 1800, "maximum": 2592000, "default": 86400,
                          "description": "Seconds until the public token expires (virtual clock)."},
    },
}

COMPANY_LIST_QUERY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "product": {"type": "string", "minLength": 1},
        "scope": {"enum": SCOPES},
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
        # Bounded: a query's integers are read up to 18 digits (validate.parse_query).
        "skip": {"type": "integer", "minimum": 0, "maximum": 1_000_000_000, "default": 0},
    },
}

JOURNAL_QUERY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "path": {"type": "string", "description": "Only requests whose path starts with this."},
        "method": {"type": "string"},
        "status": {"type": "integer", "minimum": 100, "maximum": 599},
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
    },
}

TENANT_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]{1,64}$"},
        "products": _STRINGS,
        "manualDeposits": MANUAL_DEPOSITS,
        "signing": {"type": "boolean", "default": True,
                    "description": "Sign webhooks with x-hmac-signature-sha-256 (the real "
                                   "service signs every webhook); false turns it off."},
        "continuousAccess": CONTINUOUS_ACCESS,
    },
}

BRANDING = {
    "type": "object",
    "properties": {
        "color": {"type": "string"},
        "logo": {"type": "object", "properties": {"url": {"type": "string"},
                                                  "backgroundColor": {"type": "string"}}},
    },
}

SEARCH_COMPANY = {
    "type": "object",
    "required": ["_id", "name", "status", "branding", "tags", "connector"],
    "properties": {
        "_id": {"type": "string"},
        "name": _NAME,
        "status": {"enum": COMPANY_STATUSES},
        "branding": BRANDING,
        "tags": {"type": "array", "items": _TAG},
        "franchiseParent": {"type": "string"},
        "connector": {
            "type": "object",
            "required": ["_id", "availableProducts", "capabilities"],
            "properties": {
                "_id": {"type": "string"},
                "availableProducts": {"type": "array", "items": {"type": "string"}},
                "capabilities": {
                    "type": "object",
                    "properties": {
                        "distributionTypes": {"type": "array", "items": {"type": "string"}},
                        "supportedPaymentMethods": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
    },
}

FULL_COMPANY = {
    **SEARCH_COMPANY,
    "properties": {
        **SEARCH_COMPANY["properties"],
        "scopes": {"type": "array", "items": {"enum": SCOPES}},
        "connector": {
            "type": "object",
            "required": ["_id", "availableProducts", "capabilities"],
            "properties": {
                "_id": {"type": "string"},
                "availableProducts": {"type": "array", "items": {"type": "string"}},
                "capabilities": {
                    "type": "object",
                    "properties": {
                        "headlessAuthentication": {"type": "boolean"},
                        "ssoAuthentication": {"type": "boolean"},
                        "authenticationMethods": {"type": "array",
                                                  "items": {"enum": AUTHENTICATION_METHODS}},
                        "distributionActions": {"type": "array", "items": {"type": "string"}},
                        "distributionTypes": {"type": "array", "items": {"type": "string"}},
                        "supportedPaymentMethods": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
        },
    },
}

_ID = {"type": "string", "minLength": 1}

# The user and the company as task events (schemas/events.py) and task records name them.
USER = {
    "type": "object",
    "required": ["_id", "identifier"],
    "properties": {"_id": _ID, "identifier": _ID, "connected": {"type": "boolean"}},
}
COMPANY_SUMMARY = {
    "type": "object",
    "required": ["_id", "name", "branding"],
    "properties": {"_id": _ID, "name": {"type": "string"}, "branding": BRANDING},
}

ACCESS_TOKEN = {
    "type": "object",
    "required": ["publicToken", "token"],
    "properties": {"publicToken": {"type": "string"}, "token": {"type": "string"},
                   "expiresAt": date_time_field("When the public token expires (virtual time).")},
}

_METADATA = {"type": "object", "description": "Customer context, echoed in the task's events."}

# A workflow's next step after a task ends (the SDK's and the real service's task options):
# `continue` runs the next task, `finish` ends the workflow there.
CONTINUE, FINISH = "continue", "finish"
_NEXT = {"enum": [CONTINUE, FINISH], "default": CONTINUE}
DISTRIBUTION = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type"],
    "properties": {
        "type": {"enum": ["total", "fixed", "percent"],
                 "description": "total: the entire paycheck; fixed: `amount` dollars; "
                                "percent: `amount` per cent of it."},
        "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 1_000_000},
    },
    "allOf": [
        {"if": {"properties": {"type": {"const": "percent"}}},
         "then": {"required": ["amount"], "properties": {"amount": {"maximum": 100}}}},
        {"if": {"properties": {"type": {"const": "fixed"}}}, "then": {"required": ["amount"]}},
    ],
    "description": "How the deposit is split (a deposit task; the deposit accounts' "
                   "distributionType and distributionAmount). A type the company's connector "
                   "cannot set up (capabilities.distributionTypes) fails the task.",
}
TASK_OPTIONS = {
    "onComplete": {**_NEXT, "description": "After this task completes: `continue` with the "
                                           "next task (default) or `finish` the workflow."},
    "onFail": {**_NEXT, "description": "After this task fails: `continue` with the next task "
                                       "(default) or `finish` the workflow."},
    "distribution": DISTRIBUTION,
}

TASK_CREATE_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "identifier": {"type": "string", "minLength": 1, "maxLength": 256,
                       "pattern": NO_CONTROL_CHARACTER,
                       "description": "The user (with API keys); a public token names it itself."},
        "company": {"type": "string", "minLength": 1, "description": "A company `_id`."},
        "linkedAccount": {"type": "string", "minLength": 1,
                          "description": "Refresh this linked account (pull refresh flow)."},
        "linkedAccountId": {"type": "string", "minLength": 1,
                            "description": "The spec's name for `linkedAccount`."},
        "product": {"type": "string", "minLength": 1},
        "operation": {"type": "string", "minLength": 1, "description": "Same as `product`."},
        "tasks": {
            "type": "array", "minItems": 1, "maxItems": 10,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "anyOf": [{"required": ["operation"]}, {"required": ["product"]}],
                "properties": {
                    "operation": {"type": "string", "minLength": 1},
                    "product": {"type": "string", "minLength": 1},
                    "metadata": _METADATA,
                    "paymentMethod": PAYMENT_METHOD,
                    **TASK_OPTIONS,
                },
            },
            "description": "Several operations in one task workflow. A task after one whose "
                           "onComplete or onFail is `finish` starts only when that one ended "
                           "the way that goes on.",
        },
        "metadata": _METADATA,
        "scenario": {"type": "string", "minLength": 1, "x-names": TASK_SCENARIOS,
                     "description": "The scenario that drives the task (see GET /_sandbox/scenarios)."},
        "paymentMethod": PAYMENT_METHOD,
        "distribution": {**DISTRIBUTION, "description": "The legacy top-level split "
                         "(real-service-facts 8): every task of the request that names none."},
    },
    "not": {"anyOf": [{"required": ["product", "operation"]}, {"required": ["product", "tasks"]},
                      {"required": ["operation", "tasks"]},
                      {"required": ["linkedAccount", "linkedAccountId"]}]},
}

CLOCK_ADVANCE_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["seconds"],
    "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 31_536_000,
                               "description": "Virtual seconds to move forward (at most a year)."}},
}


def after_cursor(what: str) -> dict:
    """The `after` query parameter of incremental reads (domain/changes.py)."""
    return {"type": "integer", "minimum": 0, "maximum": 2**53 - 1,  # a safe JavaScript number
            "description": f"A revision (the envelope's `revision`): only the {what} after "
                           "it, in the order of their latest change; `reset: true` when the "
                           "tenant was reset or restored since (start over)."}


EVENTS_QUERY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "type": {"type": "string", "description": "eventType"},
        "user": {"type": "string", "description": "The user's identifier."},
        "task": {"type": "string"},
        "since": {"type": "string", "format": "date-time", "description": "Virtual time, ISO 8601."},
        "delivery": {"enum": ["pending", "delivered", "failed", "interrupted", "none"]},
        "after": after_cursor("events emitted or delivered"),
        "limit": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 1000},
    },
}

PROFILE_BINDING_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "description": "A named profile (GET /_sandbox/profiles), data of your own, or both: the "
                   "data merged over the named profile.",
    "properties": {"profile": {"type": "string", "minLength": 1, "maxLength": 64},
                   "data": PROFILE_SCHEMA},
}

SCENARIO_BINDING_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["scenario"],
    "properties": {"scenario": {"type": ["string", "null"], "minLength": 1,
                                "x-names": TASK_SCENARIOS,
                                "description": "null removes the binding."}},
}

CARD_TOKEN_RECREATION_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["enabled"],
    "properties": {"enabled": {
        "type": "boolean",
        "description": "false: the user's card tokens are not recreated after their 24 hours, "
                       "so the next task with such a card fails payment-token-expired. "
                       "true (the default, as on the real service): recreated automatically."}},
}

COMPANY_STATUS_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["status"],
    "properties": {
        "status": {"enum": ["operational", "under-maintenance", "disabled"]},
        "products": {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True,
                     "description": "Products under maintenance (default: all of the company's)."},
    },
}

_CONNECTOR = COMPANY_SCHEMA["properties"]["connector"]
_COMPANY_FIELDS = {
    **COMPANY_SCHEMA["properties"],
    "defaultScenario": {**COMPANY_SCHEMA["properties"]["defaultScenario"],
                        "x-names": TASK_SCENARIOS},
    "connector": {**_CONNECTOR, "properties": {
        **_CONNECTOR["properties"],
        "availableProducts": {**_CONNECTOR["properties"]["availableProducts"],
                              "items": {"type": "string", "minLength": 1, "x-names": PRODUCTS}}}},
}
COMPANY_CREATE_REQUEST = {**COMPANY_SCHEMA, "required": ["name"], "properties": _COMPANY_FIELDS}
COMPANY_UPDATE_REQUEST = {
    **COMPANY_SCHEMA,
    "required": [],
    "minProperties": 1,
    "properties": {k: v for k, v in _COMPANY_FIELDS.items() if k not in ("_id", "status")},
    "description": "Fields to replace. The status changes through /_sandbox/companies/{id}/status.",
}

WEBHOOK_ENDPOINTS_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["endpoints"],
    "properties": {"endpoints": {"type": "array", "maxItems": 50, "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["url"],
        "properties": {
            "_id": {"type": "string", "minLength": 1, "maxLength": 100,
                    "description": "Keep this endpoint's id (as GET shows it); omitted: the id "
                                   "of the endpoint with this URL, or a new one."},
            "url": {"type": "string", "pattern": r"^https?://[^\s]+$"},
            "eventTypes": {"type": "array", "items": {"type": "string", "x-names": EVENT_TYPES},
                           "minItems": 1,
                           "uniqueItems": True, "description": "Omitted: every event type."},
            "secretId": {"type": "string", "minLength": 1,
                         "description": "Sign this endpoint's webhooks with this signing secret "
                                        "(GET /secrets) instead of the API secret."},
        },
    }}},
}

WEBHOOK_FAULTS_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "duplicate": {"type": "number", "minimum": 0, "maximum": 1,
                      "description": "Probability that a delivered event is sent once more."},
        "outOfOrder": {"type": "number", "minimum": 0, "maximum": 1,
                       "description": "Probability that an event is held back behind the next one."},
        "delay": {"type": "number", "minimum": 0, "maximum": 1,
                  "description": "Probability that the first attempt waits `delaySeconds`."},
        "delaySeconds": {"type": "number", "minimum": 0, "maximum": 86400},
    },
}

REPLAY_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {
        "userIdentifier": {"type": "string", "minLength": 1, "pattern": NO_CONTROL_CHARACTER},
        "taskId": {"type": "string", "minLength": 1},
        "eventId": {"type": "string", "minLength": 1,
                    "description": "One event (the dashboard's resend)."},
        "from": {"type": "string", "format": "date-time"},
        "to": {"type": "string", "format": "date-time"},
    },
    "dependentRequired": {"from": ["to"], "to": ["from"]},
    # One selector, said as "at least one, and no two" (the task request's form, below):
    # the same rule as a oneOf, which schemathesis's negative cases took 9 s to draw.
    "anyOf": [{"required": ["userIdentifier"]}, {"required": ["taskId"]},
              {"required": ["eventId"]}, {"required": ["from", "to"]}],
    "not": {"anyOf": [{"required": pair} for pair in (
        ["userIdentifier", "taskId"], ["userIdentifier", "eventId"], ["userIdentifier", "from"],
        ["taskId", "eventId"], ["taskId", "from"], ["eventId", "from"])]},
}

TRIGGER_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["eventType"],
    "properties": {
        "eventType": {"type": "string", "minLength": 1, "x-names": EVENT_TYPES},
        "identifier": {"type": "string", "minLength": 1, "pattern": NO_CONTROL_CHARACTER},
        "taskId": {"type": "string", "minLength": 1},
        "companyId": {"type": "string", "minLength": 1},
        "data": {"type": "object", "description": "Merged over the generated data."},
    },
}

DATA_QUERY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "identifier": {"type": "string", "minLength": 1,
                       "description": "The user (required, here or in the path)."},
        "linkedAccount": {"type": "string", "minLength": 1, "description": "Only this linked account."},
    },
}

DISCONNECT_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"reason": {"enum": ["timeout", "credentials-changed", "system-update"],
                              "default": "timeout"}},
}

PROCESSOR_LINK_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["processorToken"],
    "properties": {"processorToken": {"type": "string", "minLength": 1, "maxLength": 200,
                                      "x-names": PROCESSOR_TOKENS,
                                      "description": "Minted by the aggregator for this service."}},
}

PROCESSOR_TOKEN_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "identifier": {"type": "string", "minLength": 1, "pattern": NO_CONTROL_CHARACTER,
                       "description": "The user the token is for (else: the user-identifier header "
                                      "at registration)."},
        "daysRequested": {**DAYS_REQUESTED, "default": 90,
                          "description": "transactions.days_requested of the link token."},
        "products": {"type": "array", "minItems": 1, "uniqueItems": True,
                     "items": {"enum": ["transactions", "auth"]}, "default": ["transactions"],
                     "description": "Products the link token requested; only auth fails the pipeline."},
        "scenario": {"type": "string", "minLength": 1, "x-names": PROCESSOR_LINK_SCENARIOS,
                     "description": "A processor-link scenario, e.g. item-login-required."},
    },
}

_SDK_PRODUCT = {"type": "string", "minLength": 1,
                "description": "A product (`deposit`, `verify`, ...; the SDK's Product constants)."}
SDK_HANDOFFS = ("exit-prompt", "authentication-success", "high-latency")
SDK_LANGUAGES = ("en", "es")
_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}
SDK_CONFIG = {
    "type": "object",
    "description": "The SDK's configuration (real-service-facts 12): keys the flow does not "
                   "know are the SDK's own and are ignored.",
    "properties": {
        "publicToken": {"type": "string", "minLength": 1,
                        "description": "Optional here: the token reaches the flow through the "
                                       "handshake; when both are there they must match."},
        "scope": {"enum": ["user-link", "pay-link"]},
        "tasks": {"type": "array", "minItems": 1, "maxItems": 10, "items": {
            "type": "object",
            "anyOf": [{"required": ["operation"]}, {"required": ["product"]}],
            "properties": {"operation": _SDK_PRODUCT,
                           "product": {**_SDK_PRODUCT, "description": "The SDK docs' name "
                                                                      "for `operation`."},
                           **TASK_OPTIONS}}},
        "product": {**_SDK_PRODUCT, "deprecated": True,
                    "description": "Deprecated: one task of this product (now `tasks`)."},
        "distribution": {**DISTRIBUTION, "deprecated": True,
                         "description": "Deprecated: the split of the top-level `product`."},
        "additionalProduct": {**_SDK_PRODUCT, "description": "A second task after the first."},
        "language": {"enum": list(SDK_LANGUAGES), "default": "en"},
        "handoff": {"type": "array", "uniqueItems": True, "items": {"enum": list(SDK_HANDOFFS)},
                    "description": "Views the host page shows itself (real-service-facts 13)."},
        "search": {"type": "object", "description": "Enforced search: the flow's company "
                   "search keeps to these tags and leaves out the excluded ones.",
                   "properties": {"tags": _STRINGS, "excludedTags": _STRINGS}},
        "experiments": {"type": "object", "description": "Feature-flag overrides (accepted; "
                                                         "the sandbox has none to flip)."},
        "customer": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1,
                                                               "maxLength": 100}},
                     "description": "The app the user connects for: its name in the flow."},
        "deeplink": {
            "type": "object",
            "properties": {
                "step": {"enum": list(DEEPLINK_STEPS)},
                "companyId": {"type": "string"},
                "companyName": {"type": "string", "maxLength": 200},
                "connectorId": {"type": "string"},
            },
        },
        "theme": {"type": "object", "properties": {
            "dark": {"type": "boolean", "description": "The flow's dark theme."},
            "navigationOptions": {
                "type": "object",
                "properties": {"showBackButton": {"type": "boolean"},
                               "showBackButtonText": {"type": "boolean"},
                               "showCloseButton": {"type": "boolean"}}}}},
        "linkedAccount": {"type": "string", "minLength": 1},
        "metadata": {"type": "object", "description": "Customer context: every event of the "
                                                      "tasks the flow starts carries it."},
    },
}

SDK_SESSION_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["config"],
    "properties": {"config": SDK_CONFIG},
}

SDK_LOGIN_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "description": "`username` and `password` are required, except to reconnect a linked "
                   "account whose session resumes without them (`linkedAccount`, spec: it "
                   "often does not require re-entering credentials).",
    "required": ["companyId"],
    "properties": {
        "companyId": {"type": "string", "minLength": 1},
        "username": {"type": "string", "minLength": 1, "maxLength": 200},
        "password": {"type": "string", "minLength": 1, "maxLength": 200},
        "tasks": {**TASK_CREATE_REQUEST["properties"]["tasks"]},
        "linkedAccount": {"type": "string", "minLength": 1},
        "metadata": {"type": "object"},
        "paymentMethod": PAYMENT_METHOD,
        "distribution": {
            "type": "object",
            "additionalProperties": False,
            "required": ["type"],
            "properties": {"type": {"enum": ["total", "percent", "fixed"]},
                           "amount": {"type": "number", "exclusiveMinimum": 0}},
            "description": "The split chosen on the direct-deposit-setup screen (the real "
                           "deposit accounts' distributionType and distributionAmount).",
        },
        "mfaAnswer": {"type": "string", "minLength": 1, "maxLength": 200,
                      "description": "The answer to the MFA challenge a previous login returned."},
    },
}

SDK_MFA_CHALLENGE = {
    "type": "object",
    "required": ["mfa"],
    "properties": {"mfa": {
        "type": "object", "required": ["type", "prompt"],
        "properties": {"type": {"enum": ["code", "question"]}, "prompt": {"type": "string"}},
        "description": "The sandbox usernames test-code-mfa and test-question-mfa: answer with "
                       "`mfaAnswer` (any answer passes) to start the tasks."}},
}

SDK_COMPANY_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["companyId"],
    "properties": {
        "companyId": {"type": "string", "minLength": 1},
        "tasks": {**TASK_CREATE_REQUEST["properties"]["tasks"]},
    },
}

SDK_LEAVE_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["taskId"],
    "properties": {"taskId": {"type": "string", "minLength": 1,
                              "description": "A task the flow started (its workflow is left)."}},
}

TASKS_QUERY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "status": {"enum": ["queued", "processing", "completed", "failed"]},
        "user": {"type": "string", "description": "The user's identifier."},
        "after": after_cursor("tasks created or moved"),
        "limit": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100},
    },
}


# -- the real service's published operations (docs/spec/real-api-surface.md) ------------
#
# Served at their real paths with their published fields; the sandbox's extra fields sit
# beside them. Answers stay in the one `{"data": ...}` envelope (the file's envelope note:
# a bare shape there "probably just leaves the wrapper out"); generate-url, which the old
# docs show bare, answers `url` beside `data` as well.

_STRING = {"type": "string"}
_DATE_TIME = DATE_TIME  # the one form answers write (schemas/dates.py)
TASK_STATUSES = ["queued", "processing", "completed", "failed"]

SUCCESS = {
    "type": "object",
    "required": ["success", "result"],
    "properties": {"success": {"type": "boolean"},
                   "result": {"type": "object", "required": ["success"],
                              "properties": {"success": {"type": "boolean"}}}},
    "description": "The real service's Success object.",
}

TASK_FILE = {
    "type": "object",
    "required": ["_id", "name", "contentType"],
    "properties": {"_id": _STRING, "name": _STRING, "contentType": _STRING},
}

_REASON = {"enum": list(FAILURE_REASONS)}
# Spec (Task): authenticationMethod, "For pay-link Tasks: `true-auth`, `smart-auth`"; a task
# of another scope has none of those values: null.
_TASK_AUTHENTICATION = {"enum": [*TASK_AUTHENTICATION_METHODS, None],
                        "description": "A pay-link task's: true-auth or smart-auth. Any "
                                       "other task's: null."}

TASK_TRANSITION = {
    "type": "object",
    "required": ["status", "at"],
    "properties": {
        "status": {"enum": TASK_STATUSES},
        "previousStatus": {"enum": TASK_STATUSES},
        "at": _DATE_TIME,
        "patch": {"type": "boolean",
                  "description": "A correction of a final status (task-status-patched)."},
        "reason": _REASON,
    },
    "description": "One move of a task; the first is its creation (`queued`, no "
                   "previousStatus).",
}

# A task's fields as GET /task/{taskId} shows them (domain/tasks.py: Task.record); the
# real Task (TASK_DETAILS) and the answers that name a task take theirs from here.
_TASK_FIELDS = {
    "id": _STRING,
    "taskWorkflow": _STRING,
    "status": {"enum": TASK_STATUSES},
    "previousStatus": {"enum": [None, "queued", "processing", "failed"]},
    "product": _STRING,
    "company": {**_STRING, "description": "The company's `_id`."},
    "user": {**USER, "required": ["_id", "identifier", "connected"]},
    "authenticated": {"type": "boolean"},
    "authenticationMethod": _TASK_AUTHENTICATION,
    "scenario": {**_STRING, "description": "The scenario that drives it (`trigger`: a task "
                                           "made for POST /_sandbox/events/trigger)."},
    "createdAt": _DATE_TIME,
    "history": {"type": "array", "minItems": 1, "items": TASK_TRANSITION,
                "description": "Every transition, oldest first."},
    "reason": {**_REASON, "description": "The failure reason, when failed."},
    **step_field_schemas(),  # flow, meta, ... (domain/task_fields.py)
    "metadata": _METADATA,
    "paymentMethod": WRITTEN_PAYMENT_METHOD,
    "linkedAccount": {**_STRING, "description": "The linked account a refresh acts on."},
    "distribution": DISTRIBUTION,
    "onComplete": TASK_OPTIONS["onComplete"],
    "onFail": TASK_OPTIONS["onFail"],
}
_OPTIONAL_TASK_FIELDS = ("reason", *STEP_FIELDS, "metadata", "paymentMethod",
                         "linkedAccount", "distribution", "onComplete", "onFail")

TASK_RECORD = {
    "type": "object",
    "additionalProperties": False,
    "required": [name for name in _TASK_FIELDS if name not in _OPTIONAL_TASK_FIELDS],
    "properties": _TASK_FIELDS,
    "description": "A task: its outcome and every transition it made (`onComplete` and "
                   "`onFail` only when one of them is not `continue`).",
}

TASK_CREATED = {
    "type": "object",
    "required": ["id", "status", "taskWorkflow", "tasks"],
    "properties": {
        "id": _STRING, "status": {"const": "queued"}, "taskWorkflow": _STRING,
        "tasks": {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "product", "status", "scenario"],
            "properties": {name: _TASK_FIELDS[name]
                           for name in ("id", "product", "status", "scenario")}},
            "description": "Every task started (one after a task whose onComplete or onFail "
                           "is `finish` starts when that one ends)."},
    },
}

_REAL_TASK_FIELDS = {
    "_id": _STRING,
    "status": _TASK_FIELDS["status"],
    "product": _STRING,
    "authentication": {**_TASK_AUTHENTICATION,
                       "description": "The task's authenticationMethod, by the real Task's "
                                      "name (null: not a pay-link task)."},
    "company": {**SEARCH_COMPANY, "required": ["_id"],
                "description": "The Company (a company deleted since: its `_id` only)."},
    "payrollDataAvailable": {
        "type": "boolean",
        "description": "The task completed and left payroll data to read: a completed "
                       "deposit or verify task (or a refresh) whose linked account holds "
                       "data (not deleted as PII)."},
    "createdAt": _DATE_TIME,
}
_SANDBOX_TASK_FIELDS = {name: spec for name, spec in _TASK_FIELDS.items()
                        if name not in ("id", "company")}
TASK_DETAILS = {
    "type": "object",
    "additionalProperties": False,
    "required": list(dict.fromkeys([
        *_REAL_TASK_FIELDS,
        *(name for name in TASK_RECORD["required"] if name in _SANDBOX_TASK_FIELDS),
        "files"])),
    "properties": {
        **_REAL_TASK_FIELDS,
        "failReason": {**_REASON, "description": "The failure reason, when failed."},
        **_SANDBOX_TASK_FIELDS,
        "files": {"type": "array", "items": TASK_FILE,
                  "description": "The task's files (GET /task/{taskId}/file/{fileId}/generate-url)."},
    },
    "description": "The real service's Task, with the sandbox's fields (GET /task/{taskId}) "
                   "beside it.",
}

TASK_STATUS = {
    "type": "object",
    "required": ["task"],
    "properties": {"task": {
        "type": "object",
        "required": ["createdAt", "status", "payrollDataAvailable"],
        "properties": {"createdAt": _DATE_TIME, "status": {"enum": TASK_STATUSES},
                       "payrollDataAvailable": {"type": "boolean"},
                       "failReason": {**_STRING, "description": "Present when failed."}},
    }},
}

TASK_WORKFLOW_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["linkedAccount", "tasks"],
    "properties": {
        "linkedAccount": {"type": "string", "minLength": 1,
                          "description": "The linked account to act on (pull refresh)."},
        "tasks": {
            "type": "array", "minItems": 1, "maxItems": 10,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["operation"],
                "properties": {"operation": {"enum": ["deposit", "verify", "tax"]},
                               "metadata": _METADATA, **TASK_OPTIONS},
            },
        },
        "metadata": _METADATA,
        "scenario": TASK_CREATE_REQUEST["properties"]["scenario"],
    },
}

TASK_WORKFLOW_CREATED = {
    "type": "object",
    "required": ["task", "taskWorkflow"],
    "properties": {"task": TASK_DETAILS, "taskWorkflow": _STRING},
}

PRESCREEN_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["company", "product"],
    "properties": {
        "company": {
            "type": "object",
            "additionalProperties": False,
            "minProperties": 1,
            "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200,
                                    "pattern": r"\S"},
                           "id": {"type": "string", "minLength": 1}},
            "description": "The employer: its `_id` (`id`), or its name (the exact name, "
                           "case and punctuation aside).",
        },
        "product": {"enum": ["deposit", "verify", "tax"]},
    },
}

PRESCREEN = {
    "type": "object",
    "required": ["confidence"],
    "properties": {
        "confidence": {"enum": ["HIGH", "LOW"]},
        "companyId": {"type": ["string", "null"],
                      "description": "The company the request named, if the catalog has it."},
    },
    "description": "HIGH when the company is known, operational, offers the product, has "
                   "headless (username and password) authentication, and the account's "
                   "manual-deposit rule does not cover it; LOW otherwise.",
}

FILE_URL = {
    "type": "object",
    "required": ["url"],
    "properties": {"url": {"type": "string", "pattern": "^https?://"}, "expiresAt": _DATE_TIME},
}

FILE_QUERY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["tenant", "expires", "signature"],
    "properties": {"tenant": {"type": "string", "minLength": 1},
                   "expires": {"type": "integer", "minimum": 0, "maximum": 253_402_300_799},
                   "signature": {"type": "string", "pattern": "^[0-9a-f]{64}$"}},
}

_BANK_ACCOUNT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "_id": {"type": "string", "minLength": 1, "maxLength": 100},
        "title": {"type": "string", "maxLength": 200},
        "accountNumber": {"type": "string", "pattern": r"^[0-9]{4,17}$",
                          "description": "Only its last four digits are kept."},
        "routingNumber": {"type": "string", "pattern": r"^[0-9]{9}$"},
        "accountType": {"enum": ["checking", "savings"]},
        "externalId": {"type": "string", "maxLength": 200},
    },
}
_CARD = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "_id": {"type": "string", "minLength": 1, "maxLength": 100},
        "title": {"type": "string", "maxLength": 200},
        "brand": {"type": "string", "maxLength": 50},
        "lastFour": {"type": "string", "pattern": r"^[0-9]{4}$"},
        "expiry": {"type": "string", "format": "date-time"},
        "externalId": {"type": "string", "maxLength": 200},
    },
}
USER_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["identifier"],
    "properties": {
        "identifier": ACCESS_TOKEN_REQUEST["properties"]["identifier"],
        "data": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "bankAccounts": {"type": "array", "maxItems": 20, "items": _BANK_ACCOUNT},
                "cards": {"type": "array", "maxItems": 20, "items": _CARD},
            },
            "description": "The destination accounts and cards a task workflow can offer the "
                           "user; replaces what was stored (absent: none).",
        },
    },
}

USER_TASKS_QUERY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "status": {"enum": TASK_STATUSES},
        "payrollDataAvailable": {"enum": ["true", "false"]},
    },
}

STORED_PAYMENT_METHODS = {
    "type": "object",
    "required": ["identifier", "bankAccounts", "cards"],
    "properties": {"identifier": _STRING,
                   "bankAccounts": {"type": "array", "items": WRITTEN_PAYMENT_METHOD},
                   "cards": {"type": "array", "items": WRITTEN_PAYMENT_METHOD}},
}

WEBHOOK_ENDPOINT_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["url", "eventTypes"],
    "properties": {
        "url": WEBHOOK_ENDPOINTS_REQUEST["properties"]["endpoints"]["items"]["properties"]["url"],
        "eventTypes": {"type": "array", "minItems": 1, "uniqueItems": True,
                       "items": {"type": "string", "x-names": EVENT_TYPES}},
        "secretId": {"type": "string", "minLength": 1,
                     "description": "A signing secret (GET /secrets) to sign this endpoint's "
                                    "webhooks with, instead of the API secret."},
    },
}

WEBHOOK_ENDPOINT = {
    "type": "object",
    "required": ["_id", "url", "eventTypes"],
    "properties": {"_id": _STRING, "url": _STRING,
                   "eventTypes": {"type": "array", "items": _STRING}},
}

SECRET_REQUEST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200}},
}

SECRET = {
    "type": "object",
    "required": ["_id", "name", "token", "createdAt"],
    "properties": {"_id": _STRING, "name": _STRING, "token": _STRING, "createdAt": _DATE_TIME},
}

PAY_LINK_ACTION = {
    "type": "object",
    "required": ["type", "product"],
    "properties": {
        "type": {"enum": ["connect-account", "refresh", "view-account", "pause-plan",
                          "change-plan", "switch", "pay-now"],
                 "description": "The flow a task runs for it (spec: Task, flow)."},
        "product": _STRING,
        "actionId": _STRING,
    },
}

PAY_LINK_ACCOUNTS = {
    "type": "object",
    "required": ["accounts"],
    "properties": {"accounts": {"type": "array", "items": {
        "type": "object",
        "required": ["_id", "company", "actions", "bills", "updatedAt"],
        "properties": {
            "_id": _STRING,
            "company": COMPANY_SUMMARY,
            "actions": {"type": "array", "items": PAY_LINK_ACTION},
            "bills": {"type": "array", "items": {
                "type": "object",
                "required": ["_id", "name", "actions"],
                "properties": {"_id": _STRING, "name": _STRING,
                               "actions": {"type": "array", "items": PAY_LINK_ACTION}}}},
            "paymentMethod": WRITTEN_PAYMENT_METHOD,
            "updatedAt": _DATE_TIME,
        }}}},
}


# How a snapshot writes the state these operations add (snapshot.py: Record shapes), so
# a restored task, workflow or user is one the engine can run and the reads can render.
_OPTIONAL = {"type": "null"}
TASK_SNAPSHOT_SHAPES = {
    # A task moves only along the spec's transitions, from the statuses it has.
    "status": {"enum": TASK_STATUSES},
    "previousStatus": {"enum": [*TASK_STATUSES, None]},
    "distribution": {"anyOf": [DISTRIBUTION, _OPTIONAL]},
    "onComplete": {"enum": [CONTINUE, FINISH]},
    "onFail": {"enum": [CONTINUE, FINISH]},
}
WORKFLOW_SNAPSHOT_SHAPES = {"pending": {"type": "array", "items": {
    "type": "object",
    "additionalProperties": False,
    "required": ["product", "onComplete", "onFail", "scenario"],
    "properties": {"product": {"type": "string", "minLength": 1},
                   "metadata": {"type": ["object", "null"]},
                   "paymentMethod": {"anyOf": [PAYMENT_METHOD, _OPTIONAL]},
                   "distribution": {"anyOf": [DISTRIBUTION, _OPTIONAL]},
                   "onComplete": {"enum": [CONTINUE, FINISH]},
                   "onFail": {"enum": [CONTINUE, FINISH]},
                   "scenario": {"type": "string", "minLength": 1}},
}}}
USER_SNAPSHOT_SHAPES = {"paymentMethods": {"anyOf": [_OPTIONAL, {
    "type": "object",
    "additionalProperties": False,
    "required": ["bankAccounts", "cards"],
    "properties": {"bankAccounts": {"type": "array", "maxItems": 20, "items": PAYMENT_METHOD},
                   "cards": {"type": "array", "maxItems": 20, "items": PAYMENT_METHOD}},
}]}}


# -- what the document adds to the enforced schemas ----------------------------------------
#
# Rules an operation enforces itself, past its schema, that the published schema states
# as well, so that a client (or a generator of requests) sees them:
#
# - `product` with `products`: refused by the search with its own code (400
#   product-and-products, domain/search.py); in the enforced schema it would be 422
#   validation-failed. Inside the object, one `not` with one `required`.
# - a task names what it acts on: `company` with `product`, `operation` or `tasks`, or a
#   linked account to refresh (422, domain/tasks.py). The user (`identifier` under API
#   keys, the public token's otherwise) depends on the credentials: no schema can say it.
# - a franchise child has the franchise-child tag and its `franchiseParent`, both or
#   neither (422, domain/company_admin.py); whether the parent is a franchise parent of the
#   tenant depends on its data.
# - a webhook URL: an absolute http(s) URL with a host and a port from 1 to 65535
#   (validate.py: webhook_url_problem, which also takes what no pattern can say simply,
#   such as international host names); the published pattern is the ASCII part of it.
_H16 = "[0-9A-Fa-f]{1,4}"
_IPV4 = r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = "|".join([  # RFC 3986, IPv6address
    f"(?:{_H16}:){{6}}{_LS32}",
    f"::(?:{_H16}:){{5}}{_LS32}",
    f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    f"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    f"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    f"(?:(?:{_H16}:){{0,6}}{_H16})?::",
])
_PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
WEBHOOK_URL_PATTERN = (rf"^https?://(?:[A-Za-z0-9._~!$&'()*+,;=:-]+@)?"
                       rf"(?:{_LABEL}(?:\.{_LABEL})*|\[(?:{_IPV6})\])"
                       rf"(?::{_PORT})?(?:[/?#][!-~]*)?$")

SEARCH_REQUEST_PUBLISHED = {**SEARCH_REQUEST, "not": {"required": ["product", "products"]}}
_ENDPOINT = WEBHOOK_ENDPOINTS_REQUEST["properties"]["endpoints"]["items"]
WEBHOOK_ENDPOINTS_REQUEST_PUBLISHED = {
    **WEBHOOK_ENDPOINTS_REQUEST,
    "properties": {"endpoints": {
        **WEBHOOK_ENDPOINTS_REQUEST["properties"]["endpoints"],
        "items": {**_ENDPOINT, "properties": {
            **_ENDPOINT["properties"],
            "url": {"type": "string", "pattern": WEBHOOK_URL_PATTERN}}}}},
}

TASK_CREATE_REQUEST_PUBLISHED = {
    **TASK_CREATE_REQUEST,
    "anyOf": [{"required": ["linkedAccount"]}, {"required": ["linkedAccountId"]},
              {"required": ["company", "product"]}, {"required": ["company", "operation"]},
              {"required": ["company", "tasks"]}],
}
_FRANCHISE_CHILD = {"const": "franchise-child"}
COMPANY_CREATE_REQUEST_PUBLISHED = {
    **COMPANY_CREATE_REQUEST,
    "dependentSchemas": {"franchiseParent": {
        "required": ["tags"], "properties": {"tags": {"contains": _FRANCHISE_CHILD}}}},
    "anyOf": [{"required": ["franchiseParent"]},
              {"properties": {"tags": {"items": {"not": _FRANCHISE_CHILD}}}}],
}

WEBHOOK_ENDPOINT_REQUEST_PUBLISHED = {
    **WEBHOOK_ENDPOINT_REQUEST,
    "properties": {**WEBHOOK_ENDPOINT_REQUEST["properties"],
                   "url": {"type": "string", "pattern": WEBHOOK_URL_PATTERN}},
}

_PUBLISHED = ((SEARCH_REQUEST, SEARCH_REQUEST_PUBLISHED),
              (TASK_CREATE_REQUEST, TASK_CREATE_REQUEST_PUBLISHED),
              (COMPANY_CREATE_REQUEST, COMPANY_CREATE_REQUEST_PUBLISHED),
              (WEBHOOK_ENDPOINTS_REQUEST, WEBHOOK_ENDPOINTS_REQUEST_PUBLISHED),
              (WEBHOOK_ENDPOINT_REQUEST, WEBHOOK_ENDPOINT_REQUEST_PUBLISHED))


def published(schema: dict) -> dict:
    """The request body schema the OpenAPI document shows for an enforced one: the same
    object, or that object with the rules its operation enforces past its schema."""
    for enforced, shown in _PUBLISHED:
        if schema is enforced:
            return shown
    return schema
