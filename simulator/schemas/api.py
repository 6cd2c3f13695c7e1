"""JSON Schemas of request bodies, query parameters and responses (draft 2020-12).

Handlers validate against these and the OpenAPI document publishes the same
objects, so what is documented is what is enforced.
"""

from __future__ import annotations

from .fixtures import (AUTHENTICATION_METHODS, COMPANY_STATUSES, DERIVED_TAGS, SCOPES,
                       STORED_TAGS)

_NAME = {"type": "string", "minLength": 1, "maxLength": 200}
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
        "skip": {"type": "integer", "minimum": 0, "default": 0},
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
        "manualDeposits": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "enabled": {"type": "boolean"},
                "companies": _STRINGS,
                "withoutProgrammaticAuthentication": {"type": "boolean"},
            },
        },
        "signing": {"type": "boolean"},
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

ACCESS_TOKEN = {
    "type": "object",
    "required": ["publicToken", "token"],
    "properties": {"publicToken": {"type": "string"}, "token": {"type": "string"},
                   "expiresAt": {"type": "string", "format": "date-time"}},
}
