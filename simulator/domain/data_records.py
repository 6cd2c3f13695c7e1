"""JSON Schemas of the records the linked-account data endpoints return (draft 2020-12).

Field names follow the real service's published record fields (real-service-facts, DESIGN.md:
Public API); the OpenAPI document publishes these, and the tests check every record the
endpoints return against them.
"""

from __future__ import annotations

from typing import Any

from .companies import SEARCH_COMPANY
from ..dates import date_time_field


def payroll_day(what: str) -> dict[str, Any]:
    """A calendar day of payroll data (a pay day, a period's bound, a start date), which the
    real service writes as a date-time: that day at 12:00 UTC (clock.day_time)."""
    return date_time_field(f"{what}: a calendar day, written as that day at 12:00 UTC.")

_ID = {"type": "string", "minLength": 1}
_MONEY = {"type": "number", "minimum": 0}
_LINK = {"linkedAccount": {**_ID, "description": "The linked account the record comes from."}}
_REAL_FIELDS: dict[str, Any] = {
    "_id": _ID,
    "valid": {"type": "boolean", "description": "The account is connected: refreshes work."},
    "transactRequired": {"type": "boolean",
                         "description": "The user must go through the SDK again (to reconnect)."},
    "company": {**SEARCH_COMPANY, "description": "The company: the same Company shape as "
                                                 "search answers (real-api-surface: Company)."},
    "connector": {"type": "object", "additionalProperties": False, "required": ["_id", "name"],
                  "properties": {"_id": _ID, "name": {"type": "string"}}},
    "lastSuccess": date_time_field("When data was last synced successfully (null: never).",
                                   nullable=True),
    "lastFailure": date_time_field("When the connection last failed: a disconnect, or a "
                                   "refresh task that failed (absent: never)."),
}
_OPTIONAL_REAL = ("lastFailure",)

LINKED_ACCOUNT_LIST_RECORD = {
    "type": "object",
    "description": "The real service's linked-account record "
                   "(GET /linked-account/list/{identifier}).",
    "additionalProperties": False,
    "required": [name for name in _REAL_FIELDS if name not in _OPTIONAL_REAL],
    "properties": _REAL_FIELDS,
}

LINKED_ACCOUNT_RECORD = {
    "type": "object",
    "description": "A linked account as GET /linked-accounts shows it: the real record "
                   "(GET /linked-account/list/{identifier}), with the sandbox's own fields "
                   "beside it.",
    "additionalProperties": False,
    "required": [*(name for name in _REAL_FIELDS if name not in _OPTIONAL_REAL),
                 "identifier", "companyId", "product", "connected", "status",
                 "createdAt", "lastRefreshedAt"],
    "properties": {
        **_REAL_FIELDS,
        "identifier": _ID,
        "companyId": {**_ID, "description": "The company's `_id` (also `company._id`)."},
        "product": {"type": "string"},
        "connected": {"type": "boolean"},
        "status": {"enum": ["connected", "disconnected"]},
        "createdAt": date_time_field("When the account was linked."),
        "lastRefreshedAt": date_time_field("When its data was last refreshed."),
    },
}


def _record(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": ["_id", "linkedAccount", *required],
            "properties": {"_id": _ID, **_LINK, **properties}}


DATA_RECORDS: dict[str, dict[str, Any]] = {
    "linked-accounts": LINKED_ACCOUNT_RECORD,
    "income": _record(
        ["income", "incomeType", "annualIncome", "hourlyIncome", "netHourlyRate", "payCycle",
         "nextExpectedPayDate", "currentPayPeriodStart", "currentPayPeriodEnd",
         "unpaidHoursInPayPeriod"],
        {"income": {**_MONEY, "description": "Gross pay per pay period."},
         "incomeType": {"enum": ["yearly", "monthly", "weekly", "daily", "hourly"],
                        "description": "The unit of `income`: the sandbox answers `hourly` (a "
                                       "wage) or `yearly` (a salary)."}, "annualIncome": _MONEY,
         "hourlyIncome": _MONEY, "netHourlyRate": _MONEY,
         "payCycle": {"enum": ["weekly", "biweekly", "semimonthly", "monthly"]},
         "nextExpectedPayDate": date_time_field(
             "The next pay day, as a calendar day at 12:00 UTC (null: a terminated job "
             "expects none).", nullable=True),
         "currentPayPeriodStart": payroll_day("The first day of the current pay period"),
         "currentPayPeriodEnd": payroll_day("The last day of the current pay period"),
         "unpaidHoursInPayPeriod": {"type": "number"}}),
    "statements": _record(
        ["date", "payPeriodStartDate", "payPeriodEndDate", "grossAmount", "netAmount",
         "paymentMethod", "paystub", "hours"],
        {"date": payroll_day("The pay day"),
         "payPeriodStartDate": payroll_day("The first day of the pay period"),
         "payPeriodEndDate": payroll_day("The last day of the pay period"),
         "grossAmount": _MONEY, "netAmount": _MONEY,
         "paymentMethod": {"type": "string"}, "hours": {"type": "number", "minimum": 0},
         "paystub": {"type": "string", "format": "uri",
                     "description": "URL of the paystub as a PDF (GET /paystub/{statementId}, "
                                    "with the same credentials as the data endpoints)."}}),
    "timesheets": _record(["date", "hours", "rate"],
                          {"date": payroll_day("The workday"),
                           "hours": {"type": "number", "minimum": 0},
                           "rate": _MONEY}),
    "deposit-accounts": _record(
        ["accountNumber", "routingNumber", "type", "bankName", "distributionType",
         "distributionAmount"],
        {"accountNumber": {"type": "string", "description": "Masked but for the last 4 digits."},
         "routingNumber": {"type": "string", "pattern": r"^\d{9}$"},
         "type": {"enum": ["checking", "savings", "paycard"]}, "bankName": {"type": "string"},
         "distributionType": {"enum": ["total", "percent", "fixed"]},
         "distributionAmount": {"type": "number", "minimum": 0}}),
    "employment": _record(
        ["employeeType", "employmentStatus", "jobTitle", "startDate", "weeklyHours", "employer"],
        {"employeeType": {"type": "string"}, "employmentStatus": {"type": "string"},
         "jobTitle": {"type": "string"}, "startDate": payroll_day("The first day of the job"),
         "endDate": payroll_day("The last day of a terminated job (absent: still employed)"),
         "weeklyHours": {"type": "number"},
         "employer": {"type": "object", "required": ["_id", "name"],
                      "properties": {"_id": _ID, "name": {"type": "string"}}}}),
    "identity": _record(
        ["firstName", "lastName", "dateOfBirth", "email", "phone", "ssn", "address", "city",
         "state", "postalCode"],
        {"firstName": {"type": "string"}, "lastName": {"type": "string"},
         "dateOfBirth": payroll_day("The date of birth"), "email": {"type": "string"},
         "phone": {"type": "string"}, "ssn": {"type": "string", "description": "Masked."},
         "address": {"type": "string"}, "city": {"type": "string"}, "state": {"type": "string"},
         "postalCode": {"type": "string"}}),
    "taxes": _record(["year", "totalWages", "form"],
                     {"year": {"type": "integer"}, "totalWages": _MONEY, "form": {"type": "string"},
                      "employer": {"type": "string"}}),
}
