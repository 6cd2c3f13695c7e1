"""The two forms of time in answers and events, as JSON Schema (draft 2020-12).

A date-time is written one way everywhere (clock.py: `isoformat`, `day_time`,
`written_time`): UTC with milliseconds and a `Z`. A field that is a calendar day and nothing
more is written `YYYY-MM-DD` (clock.py: `calendar_day`). Each field's schema says which in
its description and holds its values to that form by a pattern, so the OpenAPI document,
the event schemas and tests/test_response_schemas.py agree with what is sent. Schemas of
what a caller sends (a task's `paymentMethod.expiry`, a replay's `from`) stay loose: any
ISO 8601 date-time is taken there and written back in the one form.
"""

from __future__ import annotations

from typing import Any

from ..clock import CALENDAR_DAY_PATTERN, DATE_TIME_PATTERN

DATE_TIME_FORM = ("A date-time: UTC with milliseconds and a Z, as the real service writes "
                  "them (2020-06-30T12:00:00.000Z).")
CALENDAR_DAY_FORM = "A calendar day, YYYY-MM-DD (2020-06-30)."


def date_time_field(description: str = "", *, nullable: bool = False) -> dict[str, Any]:
    """A date-time field: `description` says what it is, then the form is named."""
    return {"type": ["string", "null"] if nullable else "string", "format": "date-time",
            "pattern": DATE_TIME_PATTERN,
            "description": f"{description} {DATE_TIME_FORM}".strip()}


def calendar_day_field(description: str = "") -> dict[str, Any]:
    """A calendar-day field: `description` says what it is, then the form is named."""
    return {"type": "string", "format": "date", "pattern": CALENDAR_DAY_PATTERN,
            "description": f"{description} {CALENDAR_DAY_FORM}".strip()}


DATE_TIME = date_time_field()
