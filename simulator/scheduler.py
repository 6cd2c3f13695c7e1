"""Running due jobs on a tenant's clock.

`advance` and `run_until_idle` move a tenant's virtual time and run every job
that falls due, in time order, each at its own virtual time; between jobs the
`settle` hook lets outbound work (webhook attempts) finish, so a retry lands at
exactly the right virtual time. In real mode APScheduler is only the timer that
wakes the runner when the next job falls due on the wall clock.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from .domain.timeline import Job

if TYPE_CHECKING:
    from .domain.tenants import Tenant

log = logging.getLogger("payroll_sandbox.scheduler")

# A guard against scenarios or hooks that keep scheduling work forever.
MAX_JOBS_PER_RUN = 5_000_000

Settle = Callable[["Tenant"], Awaitable[None]]


async def _nothing(tenant: Tenant) -> None:
    return None


class Runner:
    """Runs one tenant's timeline; one at a time per tenant."""

    def __init__(self, tenant: Tenant, settle: Settle = _nothing) -> None:
        self.tenant = tenant
        self.settle = settle
        self.lock = asyncio.Lock()
        self.on_moved: Callable[[], None] | None = None  # the real-mode timer re-arms itself

    async def advance(self, seconds: float) -> int:
        """Move the clock `seconds` forward, running every job due on the way."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"cannot advance a clock by {seconds!r} seconds")
        async with self.lock:
            target = self.tenant.clock.timestamp() + seconds
            ran = await self._run_until(target)
            self.tenant.clock.advance_to(target)
        self._moved()
        return ran

    async def run_due(self) -> int:
        async with self.lock:
            return await self._run_until(self.tenant.clock.timestamp())

    async def run_until_idle(self) -> int:
        """Run jobs in time order until only background jobs are left."""
        async with self.lock:
            timeline, clock = self.tenant.timeline, self.tenant.clock
            ran = 0
            while not timeline.idle and ran < MAX_JOBS_PER_RUN:
                due = timeline.next_due()
                if due is None:
                    break
                ran += await self._run_until(max(due, clock.timestamp()), limit=1)
        self._moved()
        return ran

    async def _run_until(self, target: float, limit: int = MAX_JOBS_PER_RUN) -> int:
        timeline, clock = self.tenant.timeline, self.tenant.clock
        ran = 0
        while ran < limit and (job := timeline.pop_due(target)) is not None:
            clock.advance_to(job.due)
            self._run(job)
            ran += 1
            await self.settle(self.tenant)
        return ran

    def _moved(self) -> None:
        if self.on_moved is not None:
            self.on_moved()

    @staticmethod
    def _run(job: Job) -> None:
        try:
            job.action()
        except Exception:  # one broken job must not stop the clock for everything else
            log.exception("job %s failed", job.label or job.action)


class RealTimer:
    """APScheduler as the wall-clock timer of every tenant in `--clock real` mode.

    The scheduler itself starts on the first job, so a server that never schedules
    anything never imports it.
    """

    def __init__(self) -> None:
        self._scheduler: Any = None
        self._loop_running = False
        self._wakes: dict[str, float] = {}
        self._runners: dict[str, Runner] = {}

    def shutdown(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None

    def watch(self, runner: Runner) -> None:
        """Wake `runner` whenever its tenant's next job falls due."""
        name = runner.tenant.name
        self._runners[name] = runner
        self._wakes.pop(name, None)
        runner.tenant.timeline.on_schedule = lambda job: self._wake_at(name, job.due)
        runner.on_moved = lambda: self._rearm(name)

    def forget(self, runner: Runner) -> None:
        """The tenant is reset or deleted: its runner is no longer woken."""
        name = runner.tenant.name
        if self._runners.get(name) is runner:
            del self._runners[name]
            self._wakes.pop(name, None)
            if self._scheduler is not None and self._scheduler.get_job(f"wake:{name}"):
                self._scheduler.remove_job(f"wake:{name}")

    def _rearm(self, name: str) -> None:
        """The clock jumped: the next job's wall time moved, so set the wake-up again."""
        self._wakes.pop(name, None)
        runner = self._runners.get(name)
        due = runner.tenant.timeline.next_due() if runner is not None else None
        if due is not None:
            self._wake_at(name, due)

    def start(self) -> None:
        """The event loop runs: arm the wake-ups of jobs scheduled while the app was built."""
        self._loop_running = True
        for name in list(self._runners):
            self._rearm(name)

    def _wake_at(self, name: str, due: float) -> None:
        if not self._loop_running or name not in self._runners:
            return  # armed by start(), or the tenant is gone
        current = self._wakes.get(name)
        if current is not None and current <= due:
            return
        self._wakes[name] = due
        clock = self._runners[name].tenant.clock
        delay = max(0.0, clock.wall_seconds(due - clock.timestamp()))
        self._started().add_job(self._wake, "date", args=[name], id=f"wake:{name}",
                                replace_existing=True, misfire_grace_time=None,
                                run_date=datetime.now(timezone.utc) + timedelta(seconds=delay))

    def _started(self) -> Any:
        if self._scheduler is None:
            from apscheduler.schedulers.asyncio import AsyncIOScheduler

            self._scheduler = AsyncIOScheduler(timezone=timezone.utc)
            self._scheduler.start()
        return self._scheduler

    async def _wake(self, name: str) -> None:
        self._wakes.pop(name, None)
        runner = self._runners.get(name)
        if runner is None:
            return
        await runner.run_due()
        self._rearm(name)
