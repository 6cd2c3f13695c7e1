"""Virtual time, and how the service writes it.

Every tenant has one Clock; everything that depends on time (token expiry, task
steps, webhook retries, refresh cadence) reads it, never the wall clock. A manual
clock moves only when told to; a real clock follows the wall clock times a scale.

Every date-time the sandbox writes (API answers, webhook bodies, the `ce-time` header,
the control plane's views) has one form, the real service's: UTC with milliseconds and a
`Z`, `2020-06-30T12:00:00.000Z` (DESIGN.md: Public API). `isoformat` writes a moment,
`day_time` a calendar day of payroll data (that day at noon), `written_time` rewrites a
date-time given in any ISO 8601 form. A field that is a calendar day and nothing more (a
processor link's deposit and charge dates) is written `2020-06-30` (`calendar_day`).
docs/api.md, "Dates and times", lists which field is which.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import date, datetime, timezone
from functools import lru_cache

MANUAL = "manual"
REAL = "real"

# The one form of a date-time, and of a calendar day, as patterns (the answers' and
# events' JSON Schemas use them: dates.py).
DATE_TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"
CALENDAR_DAY_PATTERN = r"^\d{4}-\d{2}-\d{2}$"


# A pinned start (--clock-start, POST /_sandbox/tenants {"clock": {"start": ...}}): from the
# epoch to the last day of 9899, so a century of advances still writes a four-digit year.
EARLIEST_START = "1970-01-01T00:00:00.000Z"
LATEST_START = "9899-12-31T23:59:59.000Z"
NOT_A_START = ("{value!r} is not an ISO 8601 date-time (2026-01-05T09:00:00Z; a zone or none "
               "for UTC)")
START_OUT_OF_RANGE = "{value!r} is outside {earliest} to {latest}"


def start_problem(text: object) -> str | None:
    """Why a pinned clock start is refused (not a date-time, out of range), or None."""
    if not isinstance(text, str) or _DATE_TIME_TEXT.fullmatch(text) is None:
        return NOT_A_START.format(value=text)
    written = written_time(text)
    try:
        datetime.fromisoformat(written.replace("Z", "+00:00"))
    except ValueError:
        return NOT_A_START.format(value=text)
    if not EARLIEST_START <= written <= LATEST_START:
        return START_OUT_OF_RANGE.format(value=text, earliest=EARLIEST_START,
                                         latest=LATEST_START)
    return None


def start_timestamp(text: str) -> float:
    """A pinned start (start_problem found none) in seconds since the epoch, whole seconds
    as a Clock keeps it."""
    return float(int(datetime.fromisoformat(written_time(text).replace("Z", "+00:00"))
                     .timestamp()))


def wall_now() -> float:
    """The wall clock, the one place a Clock reads it (looked up at each call: a test moves
    it to show that a pinned start gives the same bytes on any day)."""
    return time.time()


def start_day(text: str | None) -> date:
    """The calendar day (UTC) a pinned start (checked) falls on; without one, today's (what
    the clocks of a server without --clock-start start at)."""
    if text is None:
        return date.today()
    return datetime.fromtimestamp(start_timestamp(text), tz=timezone.utc).date()


class Clock:
    """Virtual time for one tenant, in seconds since the epoch (UTC)."""

    def __init__(self, *, mode: str = MANUAL, time_scale: float = 1.0,
                 start: float | None = None,
                 wall: Callable[[], float] | None = None) -> None:
        if mode not in (MANUAL, REAL):
            raise ValueError(f"unknown clock mode {mode!r}")
        self.mode = mode
        self.time_scale = time_scale
        self._wall = wall or wall_now
        self._wall_at_start = self._wall()
        self._start = float(int(self._wall_at_start if start is None else start))
        self._offset = 0.0

    def timestamp(self) -> float:
        elapsed = 0.0
        if self.mode == REAL:
            elapsed = (self._wall() - self._wall_at_start) * self.time_scale
        return self._start + elapsed + self._offset

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp(), tz=timezone.utc)

    def advance(self, seconds: float) -> None:
        """Move virtual time forward (both modes: a real clock jumps ahead)."""
        if seconds < 0:
            raise ValueError("a clock only moves forward")
        self._offset += seconds

    def advance_to(self, timestamp: float) -> None:
        """Move virtual time forward to `timestamp` (no-op if it is already past)."""
        now = self.timestamp()
        if timestamp > now:
            self._offset += timestamp - now

    def wall_seconds(self, virtual_seconds: float) -> float:
        """How long a span of virtual time lasts on the wall clock (real mode)."""
        return virtual_seconds / self.time_scale

    def describe(self) -> dict[str, object]:
        return {"mode": self.mode, "timeScale": self.time_scale,
                "now": isoformat(self.timestamp()), "timestamp": self.timestamp()}


@lru_cache(maxsize=4096)  # many events share a virtual instant
def isoformat(timestamp: float) -> str:
    """A moment (seconds since the epoch) as the service writes date-times: ISO 8601 in
    UTC with milliseconds and a `Z`, `2020-06-30T12:00:00.000Z`."""
    return _written(datetime.fromtimestamp(timestamp, tz=timezone.utc))


class Moment(float):
    """A moment (seconds since the epoch) that JSON shows as `isoformat` writes it: a field
    of this type computes as a number, and answers and snapshots write it as the one text
    (msgspec's hooks: `moment_text`, `read_moment`)."""

    __slots__ = ()  # a number only: no dict of its own


def moment_text(value: object) -> str:
    if isinstance(value, Moment):
        return isoformat(value)
    raise NotImplementedError(type(value))


def read_moment(kind: type, value: object) -> Moment:
    """msgspec's dec_hook: a Moment from its text; anything else a ValueError or TypeError,
    which msgspec reports as a ValidationError at the field's path (a snapshot's 422)."""
    if kind is not Moment:
        raise NotImplementedError(kind)
    if not isinstance(value, str):
        raise TypeError(f"Expected a date-time text, got {type(value).__name__}")
    moment = datetime.fromisoformat(value)  # ValueError: not one
    return Moment((moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp())


def _written(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def day_time(day: date) -> str:
    """A calendar day in payroll data, as the real service writes it: a date-time, that day
    at 12:00 UTC (real-service-facts: `2020-06-30T12:00:00.000Z`), so it is the same day in
    every US time zone. (Written directly: years of pay days and timesheets would crowd
    `isoformat`'s cache.)"""
    return f"{day.isoformat()}T12:00:00.000Z"


def calendar_day(day: date) -> str:
    """A field that is a calendar day and nothing more: `2020-06-30`."""
    return day.isoformat()


# RFC 3339 (what the schemas' `format: date-time` accepts) and the ISO 8601 forms near it.
_DATE_TIME_TEXT = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?([Zz]|[+-]\d{2}:?\d{2})?")


def written_time(text: str) -> str:
    """A date-time given in any ISO 8601 form with a zone (`2028-03-31T00:00:00Z`,
    `...+02:00`, a leap second; none: UTC), in the one form the service writes. Text that
    is no such date-time (or falls outside the years 1 to 9999 in UTC) is kept as it is."""
    found = _DATE_TIME_TEXT.fullmatch(text)
    if found is None:
        return text
    day, hours, minutes, seconds, fraction, zone = found.groups()
    leap = seconds == "60"  # a leap second: the last millisecond before the next minute
    zone = "+00:00" if zone is None or zone in "Zz" else zone
    try:
        moment = datetime.fromisoformat(
            f"{day}T{hours}:{minutes}:{'59' if leap else seconds}"
            f".{'999' if leap else (fraction or '0')[:6].ljust(6, '0')}{zone}")
        return _written(moment.astimezone(timezone.utc))
    except (ValueError, OverflowError):
        return text
