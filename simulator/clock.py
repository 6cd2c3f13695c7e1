"""Virtual time.

Every tenant has one Clock; everything that depends on time (token expiry, task
steps, webhook retries, refresh cadence) reads it, never the wall clock. A manual
clock moves only when told to; a real clock follows the wall clock times a scale.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from functools import lru_cache

MANUAL = "manual"
REAL = "real"


class Clock:
    """Virtual time for one tenant, in seconds since the epoch (UTC)."""

    def __init__(self, *, mode: str = MANUAL, time_scale: float = 1.0,
                 start: float | None = None,
                 wall: Callable[[], float] = time.time) -> None:
        if mode not in (MANUAL, REAL):
            raise ValueError(f"unknown clock mode {mode!r}")
        self.mode = mode
        self.time_scale = time_scale
        self._wall = wall
        self._wall_at_start = wall()
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
    """ISO 8601 in UTC with milliseconds and a `Z`, as the service writes times."""
    moment = datetime.fromtimestamp(timestamp, tz=timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
