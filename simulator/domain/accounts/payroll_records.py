"""The payroll data of a linked account: the records a sign-in or a refresh collects (pay
statements, timesheets, tax forms), the income figures of today, and each kind of data as
the data endpoints show it, with a statement's paystub text.

The records agree with each other and with the pay calendar (pay_calendar.py): a
statement's hours are its period's timesheet hours, its pay is the income's. Ids come from
the tenant's seeded generator, handed in.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Protocol

from ...clock import day_time
from ..identity.identity import Ids
from .pay_calendar import (PERIODS_PER_YEAR, Profile, day, day_hours, day_of, days,
                           next_pay_date, pay_dates, pay_period)

PAYSTUB_PATH = "/paystub/{statement_id}"


class Account(Protocol):
    """A linked account as its data sees it (linked_accounts.LinkedAccount)."""

    id: str
    profile: Profile
    pii_deleted: bool
    statements: list[dict[str, Any]]
    timesheets: list[dict[str, Any]]
    taxes: list[dict[str, Any]]
    deposit_accounts: list[dict[str, Any]]
    employment_id: str
    identity_id: str
    income_id: str


def paystub_lines(account: Account, statement: dict[str, Any]) -> list[tuple[int, str]]:
    """A paystub's text (font size, line): the statement's figures, employer and employee.
    The statement's `paystub` URL and a task's paystub files both print it."""
    profile = account.profile
    taxes = round(statement["grossAmount"] - statement["netAmount"], 2)
    period = (f"{day_of(statement['payPeriodStartDate']).isoformat()} to "
              f"{day_of(statement['payPeriodEndDate']).isoformat()}")
    return [(18, "Earnings Statement"), (12, f"Employer: {profile.employer}"),
            (12, f"Employee: {profile.first_name} {profile.last_name}"),
            (12, f"Pay date: {day_of(statement['date']).isoformat()}"),
            (12, f"Pay period: {period}"), (12, ""),
            (12, f"Hours: {statement['hours']:.2f}"),
            (12, f"Gross pay: ${statement['grossAmount']:,.2f}"),
            (12, f"Taxes and deductions: ${taxes:,.2f}"),
            (12, f"Net pay: ${statement['netAmount']:,.2f}"),
            (12, f"Payment method: {statement['paymentMethod']}")]


def statements(ids: Ids, account: Account, first: date,
               last: date) -> list[dict[str, Any]]:
    profile = account.profile
    # No pay date before the first a data profile gives, none after a terminated job's end
    # (its last period ends on its last day, and no pay comes after it).
    first = max(first, profile.first_pay_date or first)
    last = min(last, profile.end_date or last)
    found = []
    for pay_date in pay_dates(profile, first, last):
        start, end = pay_period(profile, pay_date)
        if profile.employee_type == "hourly":
            # The hours of the period's timesheets, so the two always agree.
            hours = round(sum(day_hours(account.id, profile, day) for day in days(start, end)
                              if day.weekday() < 5), 2)
            gross = round(hours * profile.hourly_rate, 2)
        else:
            hours = round(profile.weekly_hours * ((end - start).days + 1) / 7, 2)
            gross = round(profile.annual_income / PERIODS_PER_YEAR[profile.pay_cycle], 2)
        found.append({
            "_id": ids.object_id(), "date": day_time(pay_date),
            "payPeriodStartDate": day_time(start), "payPeriodEndDate": day_time(end),
            "grossAmount": gross, "netAmount": round(gross * (1 - profile.tax_rate), 2),
            "paymentMethod": "deposit", "hours": hours})
    return found


def timesheets(ids: Ids, account: Account, first: date,
               last: date) -> list[dict[str, Any]]:
    profile = account.profile
    if profile.employee_type != "hourly":
        return []
    first = max(first, profile.start_date)  # no hour was worked before the job began
    last = min(last, profile.end_date or last)
    return [{"_id": ids.object_id(), "date": day_time(day),
             "hours": day_hours(account.id, profile, day), "rate": profile.hourly_rate}
            for day in days(first, last) if day.weekday() < 5]


def tax_forms(ids: Ids, account: Account, have: int,
              today: date) -> list[dict[str, Any]]:
    """W-2s for each full year worked, published by January 31 of the next year."""
    profile = account.profile
    started = profile.start_date
    last_year = today.year - 1 if today >= date(today.year, 1, 31) else today.year - 2
    forms = []
    for year in range(max(started.year, last_year - 2), last_year + 1)[have:]:
        worked = 1.0 if started.year < year else (date(year, 12, 31) - started).days / 365
        forms.append({"_id": ids.object_id(), "year": year, "form": "W-2",
                      "totalWages": round(profile.annual_income * worked, 2),
                      "employer": profile.employer})
    return forms


def income(account: Account, now: float) -> dict[str, Any]:
    profile = account.profile
    # A terminated job's figures stop on its last day.
    today = min(day(now), profile.end_date or day(now))
    period_start, period_end = pay_period(profile, today)
    # Hours worked and not yet paid: the weekdays from the later of the period's start and
    # the start date (a new hire worked none before it) up to today.
    first = max(period_start, profile.start_date)
    worked = sum(day_hours(account.id, profile, d) for d in days(first, today) if d.weekday() < 5)
    ended = profile.end_date is not None
    return {
        "_id": account.income_id,
        # `income` in the unit `incomeType` names (real-api-surface: incomeType
        # yearly|monthly|weekly|daily|hourly): an hourly wage, or a yearly salary.
        "income": (profile.hourly_rate if profile.employee_type == "hourly"
                   else profile.annual_income),
        "incomeType": "hourly" if profile.employee_type == "hourly" else "yearly",
        "annualIncome": profile.annual_income,
        "hourlyIncome": profile.hourly_rate,
        "netHourlyRate": round(profile.hourly_rate * (1 - profile.tax_rate), 2),
        "payCycle": profile.pay_cycle,
        # A terminated job expects no more pay (null); its last period ends on its last day.
        "nextExpectedPayDate": None if ended else day_time(next_pay_date(profile, today)),
        "currentPayPeriodStart": day_time(period_start),
        "currentPayPeriodEnd": day_time(min(period_end, profile.end_date or period_end)),
        "unpaidHoursInPayPeriod": 0.0 if ended else round(worked, 1),
    }


def data_records(kind: str, account: Account, now: float, *,
                 base_url: str = "") -> list[dict[str, Any]]:
    """One kind of data of one linked account, as the data endpoints show it. A
    statement's `paystub` is the URL of its PDF under `base_url` (the sandbox's origin)."""
    link = {"linkedAccount": account.id}
    if account.pii_deleted:
        return []
    profile = account.profile
    if kind == "statements":
        return [{**s, "paystub": base_url + PAYSTUB_PATH.format(statement_id=s["_id"]), **link}
                for s in account.statements]
    if kind in ("timesheets", "taxes"):
        return [{**record, **link} for record in getattr(account, kind)]
    if kind == "deposit-accounts":
        # A `total` account takes whatever the others leave: it has no amount of its own
        # (null), whatever share the sandbox keeps for it to split from later.
        return [{**a, "accountNumber": mask(a["accountNumber"]), **link,
                 **({"distributionAmount": None} if a["distributionType"] == "total" else {})}
                for a in account.deposit_accounts]
    if kind == "income":
        return [{**income(account, now), **link}]
    if kind == "employment":
        employment = {"_id": account.employment_id, **link,
                      "employeeType": "full-time" if profile.weekly_hours >= 35 else "part-time",
                      "employmentStatus": profile.employment_status,
                      "jobTitle": profile.job_title, "startDate": day_time(profile.start_date),
                      "weeklyHours": profile.weekly_hours,
                      "employer": {"_id": profile.employer_id, "name": profile.employer}}
        if profile.end_date is not None:
            employment["endDate"] = day_time(profile.end_date)
        return [employment]
    return [{"_id": account.identity_id, **link, "firstName": profile.first_name,
             "lastName": profile.last_name, "dateOfBirth": day_time(profile.date_of_birth),
             "email": profile.email, "phone": profile.phone,
             "ssn": f"***-**-{profile.ssn_last4}", "address": profile.address,
             "city": profile.city, "state": profile.state, "postalCode": profile.postal_code}]


def mask(number: str) -> str:
    """An account number as the data endpoints show it: all but its last four hidden."""
    return "*" * max(0, len(number) - 4) + number[-4:]
