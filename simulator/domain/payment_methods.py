"""A payment method (spec: Payment method object), as requests, scenario files and PUT /user
give it and as answers and events write it."""

from __future__ import annotations

from typing import Any

from ..clock import written_time
from ..dates import date_time_field
from .states import PAYMENT_METHOD_TYPES

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
