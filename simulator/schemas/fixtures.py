"""JSON Schemas of the fixture files (draft 2020-12; the config file's: settings.py).

Start-up and `payroll-sandbox fixtures validate` check every file against these;
a fault names the file and the JSON path.
"""

from __future__ import annotations

from ..domain.companies.companies import (AUTHENTICATION_METHODS, COMPANY_STATUSES, SCOPES,
                                          STORED_TAGS)

ENVIRONMENTS = ["sandbox", "production"]

_ID = {"type": "string", "pattern": r"^[A-Za-z0-9_-]{1,64}$"}
_COLOR = {"type": "string", "pattern": r"^#[0-9A-Fa-f]{6}$"}
_LABEL = {"type": "string", "pattern": r"^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*$"}
_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}

# A JavaScript identifier (ASCII): the browser SDK's global object, e.g. the vendor's name.
SDK_GLOBAL = {"type": "string", "pattern": r"^[A-Za-z_$][A-Za-z0-9_$]{0,63}$",
              "description": "The name of the browser SDK's global object (/sdk/transact.js)."}

SERVICE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "service.yaml: the service profile",
    "type": "object",
    "additionalProperties": False,
    "required": ["vendor", "aggregator", "sdkPrefix", "products"],
    "properties": {
        "vendor": {**_LABEL, "description": "Reverse-domain label: ce-source is com.<vendor>."},
        "aggregator": {"type": "string", "pattern": r"^[a-z][a-z0-9-]*$",
                       "description": "Path segment and event prefix of the bank-data aggregator."},
        "sdkPrefix": {"type": "string", "pattern": r"^[a-z][a-z0-9-]*$"},
        "sdkGlobal": {**SDK_GLOBAL, "default": "Transact"},
        "products": {
            "type": "object",
            "description": "Every product name, mapped to the scope it belongs to.",
            "minProperties": 1,
            "additionalProperties": {"enum": SCOPES},
        },
    },
}

MANUAL_DEPOSITS = {
    "type": "object",
    "additionalProperties": False,
    "description": "The account-level manual-deposit configuration that derives the "
                   "`manual-deposits` tag (spec: Company tags).",
    "properties": {
        "enabled": {"type": "boolean"},
        "companies": {**_STRINGS, "description": "Company ids always treated as manual."},
        "withoutProgrammaticAuthentication": {
            "type": "boolean",
            "description": "Companies whose connector supports neither headless nor SSO "
                           "authentication are manual.",
        },
    },
}

CONTINUOUS_ACCESS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "refreshInterval": {"type": ["number", "null"], "minimum": 60,
                            "description": "Seconds between push refreshes (default a day; "
                                           "null: never)."},
        "piiDeletionInterval": {"type": ["number", "null"], "minimum": 60,
                                "description": "Seconds after a user's account links until "
                                               "their personal data is deleted (default: never)."},
    },
}

_WEBHOOK_ENDPOINT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["url"],
    "properties": {
        "url": {"type": "string", "pattern": r"^https?://"},
        "eventTypes": {**_STRINGS, "description": "Omitted: every event type."},
    },
}

ACCOUNT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "apiKey", "apiSecret", "environment"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]{1,64}$"},
        "apiKey": {"type": "string", "minLength": 8},
        "apiSecret": {"type": "string", "minLength": 8},
        "environment": {"enum": ENVIRONMENTS},
        "products": {**_STRINGS, "description": "Products enabled for the account."},
        "manualDeposits": MANUAL_DEPOSITS,
        "continuousAccess": CONTINUOUS_ACCESS,
        "clock": {"type": "object", "additionalProperties": False, "required": ["start"],
                  "properties": {"start": {
                      "type": "string", "format": "date-time",
                      "description": "Where the tenant's clock starts, and starts again at a "
                                     "reset (none: the server's --clock-start, else now)."}}},
        "linkedAccounts": {
            "type": "array",
            "description": "Ready-made linked accounts for demo users.",
            "items": {
                "type": "object", "additionalProperties": False, "required": ["identifier", "company"],
                "properties": {"identifier": {"type": "string", "minLength": 1}, "company": _ID,
                               "product": {"enum": ["deposit", "verify"]},
                               "connected": {"type": "boolean"},
                               "profile": {"type": "string", "minLength": 1,
                                           "description": "A named data profile "
                                                          "(profiles.yaml) for its records."},
                               "data": {"type": "object", "description": "A data profile "
                                        "document of its own (over `profile` if both)."}},
            },
        },
        "autopilots": {
            "type": "array",
            "description": "Users whose hosted flow plays itself (docs/sdk.md, Autopilot): as "
                           "PUT /_sandbox/users/{identifier}/autopilot takes them.",
            "items": {
                "type": "object", "additionalProperties": False, "required": ["identifier", "company"],
                "properties": {"identifier": {"type": "string", "minLength": 1}, "company": _ID,
                               "username": {"type": "string", "minLength": 1, "maxLength": 200},
                               "password": {"type": "string", "minLength": 1, "maxLength": 200},
                               "mfa": {"type": "string", "minLength": 1, "maxLength": 200},
                               "distribution": {"type": "object"},
                               "language": {"enum": ["en", "es"]},
                               "product": {"type": "string", "minLength": 1, "maxLength": 64},
                               "pause": {"type": "number", "minimum": 0, "maximum": 3600}},
            },
        },
        "webhooks": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "signing": {"type": "boolean"},
                "endpoints": {"type": "array", "items": _WEBHOOK_ENDPOINT},
            },
        },
    },
}

ACCOUNTS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "accounts.yaml: customer accounts (tenants)",
    "type": "object",
    "additionalProperties": False,
    "required": ["accounts"],
    "properties": {"accounts": {"type": "array", "minItems": 1, "items": ACCOUNT_SCHEMA}},
}

CAPABILITIES_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "headlessAuthentication": {"type": "boolean"},
        "ssoAuthentication": {"type": "boolean"},
        "authenticationMethods": {"type": "array", "items": {"enum": AUTHENTICATION_METHODS},
                                  "uniqueItems": True},
        "distributionActions": _STRINGS,
        "distributionTypes": _STRINGS,
        "supportedPaymentMethods": _STRINGS,
    },
}

COMPANY_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["_id", "name"],
    "properties": {
        "_id": _ID,
        "name": {"type": "string", "minLength": 1, "maxLength": 200},
        "status": {"enum": COMPANY_STATUSES},
        "tags": {"type": "array", "items": {"enum": STORED_TAGS}, "uniqueItems": True},
        "franchiseParent": _ID,
        "branding": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "color": _COLOR,
                "logo": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"url": {"type": "string"}, "backgroundColor": _COLOR},
                },
            },
        },
        "connector": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "_id": _ID,
                "availableProducts": {**_STRINGS, "minItems": 1},
                "capabilities": CAPABILITIES_SCHEMA,
            },
        },
        "defaultScenario": {"type": "string", "minLength": 1,
                            "description": "Scenario for tasks against this company."},
        "maxPaymentMethods": {"type": "integer", "minimum": 1,
                              "description": "The merchant's maximum of payment methods per user."},
    },
}

COMPANIES_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "companies.yaml: hand-written companies and the generated catalog",
    "type": "object",
    "additionalProperties": False,
    "patternProperties": {"^x-": {"description": "Free space for YAML anchors."}},
    "properties": {
        "companies": {"type": "array", "items": COMPANY_SCHEMA},
        "catalog": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "generate": {"type": "integer", "minimum": 0, "maximum": 1_000_000,
                             "description": "How many companies Faker adds, seeded."},
                "franchiseShare": {"type": "number", "minimum": 0, "maximum": 0.5,
                                   "description": "Share of generated companies that belong to "
                                                  "franchise networks."},
            },
        },
    },
}
