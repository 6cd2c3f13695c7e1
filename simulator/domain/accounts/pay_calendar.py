"""The pay calendar of a linked account's job: who the person is (Profile), the pay days of
each pay cycle, the pay period around a day and the hours of a workday (the real service
writes each day as a date-time: clock.day_time).

Pure functions of a Profile and dates: the same account gives the same calendar on every
read (linked_accounts.py and payroll_records.py read it).
"""

from __future__ import annotations

import calendar
import zlib
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, ClassVar

from ..stored import Amount, Count, Day, Stored

PAY_CYCLES = ("weekly", "biweekly", "semimonthly", "monthly")
PERIODS_PER_YEAR = {"weekly": 52, "biweekly": 26, "semimonthly": 24, "monthly": 12}


class Profile(Stored, frozen=True):
    """The person and the job behind a linked account."""

    first_name: str
    last_name: str
    date_of_birth: Day
    email: str
    phone: str
    ssn_last4: str
    address: str
    city: str
    state: str
    postal_code: str
    employer: str
    employer_id: str
    job_title: str
    employee_type: str          # hourly | salaried
    start_date: Day
    weekly_hours: Count
    annual_income: Amount
    hourly_rate: Amount
    pay_cycle: str
    deposit_accounts: list[dict[str, Any]]
    tax_rate: Amount
    # What a data profile (data_profiles.py) may set besides: left out of a snapshot while
    # at their defaults, so an account no profile touched is written as before.
    employment_status: str = "active"       # active | terminated
    end_date: Day | None = None             # a terminated job's last day: no pay after it
    hours_variation: Amount | None = None   # how far a day's hours stray (None: the usual)
    statement_count: Count | None = None    # the latest statements a first sign-in finds
    first_pay_date: Day | None = None       # no statement before it

    SPARSE: ClassVar[tuple[str, ...]] = ("employment_status", "end_date", "hours_variation",
                                         "statement_count", "first_pay_date")


def day_of(text: str) -> date:
    """The calendar day of a payroll date (clock.day_time), or of a plain ISO date."""
    return date.fromisoformat(text[:10])


def day(timestamp: float) -> date:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).date()


def days(first: date, last: date, step: int = 1) -> Iterator[date]:
    """`first`, then every `step` days up to `last` (included)."""
    return (first + timedelta(days=n) for n in range(0, (last - first).days + 1, step))


def _month_end(day: date) -> date:
    return day.replace(day=calendar.monthrange(day.year, day.month)[1])


def _anchor(profile: Profile) -> date:
    """The first Friday on or after the start date: weekly and biweekly pay days count from it."""
    start = profile.start_date
    return start + timedelta(days=(4 - start.weekday()) % 7)


def pay_dates(profile: Profile, first: date, last: date) -> list[date]:
    """Pay days between `first` and `last`, both included."""
    anchor = _anchor(profile) if profile.pay_cycle in ("weekly", "biweekly") else None
    return list(_pay_dates(profile.pay_cycle, anchor, first, last))


@lru_cache(maxsize=65_536)  # thousands of accounts share a cycle and the same few days
def _pay_dates(cycle: str, anchor: date | None, first: date, last: date) -> tuple[date, ...]:
    if last < first:
        return ()
    if anchor is not None:
        step = 7 if cycle == "weekly" else 14
        offset = max(0, -(-(first - anchor).days // step))
        return tuple(days(anchor + timedelta(days=offset * step), last, step))
    found = []
    month = first.replace(day=1)
    while month <= last:
        candidates = [_month_end(month)] if cycle == "monthly" else [month.replace(day=15),
                                                                      _month_end(month)]
        found += [d for d in candidates if first <= d <= last]
        month = _month_end(month) + timedelta(days=1)
    return tuple(found)


def next_pay_date(profile: Profile, today: date) -> date:
    return pay_dates(profile, today + timedelta(days=1), today + timedelta(days=40))[0]


def pay_period(profile: Profile, day: date) -> tuple[date, date]:
    """The pay period holding `day`: it ends on the first pay day on or after `day`."""
    end = pay_dates(profile, day, day + timedelta(days=40))[0]
    previous = pay_dates(profile, end - timedelta(days=40), end - timedelta(days=1))
    start = previous[-1] + timedelta(days=1) if previous else end - timedelta(days=13)
    return start, end


def day_hours(key: str, profile: Profile, day: date) -> float:
    """Hours worked on a workday (`key`: the linked account's id): around the usual day,
    the same on every read."""
    usual = profile.weekly_hours / 5
    spread = zlib.crc32(f"{key}:{day.toordinal()}".encode()) / 0xFFFFFFFF  # 0..1
    if profile.hours_variation is not None:
        return round(usual * (1 - profile.hours_variation + 2 * profile.hours_variation * spread), 2)
    return round(usual * (0.85 + 0.25 * spread), 2)
