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
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

import msgspec

from ..clock import Clock
from ..domain.webhooks.events import EventLog
from ..domain.timeline import Job, Timeline
from ..errors import ShuttingDown

log = logging.getLogger("payroll_sandbox.scheduler")

# The work one advance or run-until-idle may do before it answers (README: Limits); the
# next call goes on from there. Also a guard against work that schedules itself forever.
MAX_JOBS_PER_RUN = 5_000_000
MAX_EVENTS_PER_RUN = 200_000
YIELD_SECONDS = 0.004  # wall time a run keeps the event loop before it lets others in
SHUTTING_DOWN = ("The sandbox is shutting down: the run stopped between two jobs; what it "
                 "ran is kept, the rest was not run.")

Settle = Callable[..., Awaitable[None]]  # (tenant, before=inf)


class Timed(Protocol):
    """What a runner runs: a tenant's clock, its timeline of jobs, its ledger and its
    webhook attempts in flight (the tenant is one; the runner needs no more of it)."""

    clock: Clock
    timeline: Timeline
    events: EventLog
    webhooks: Any


class RunResult(msgspec.Struct, frozen=True):
    """What one advance or run-until-idle did. `complete` is false when it stopped at its
    work limit (MAX_EVENTS_PER_RUN events): the clock stands at the last job it ran, and
    the next call goes on from there."""

    jobs: int
    events: int
    complete: bool


class Runner:
    """Runs one tenant's timeline; one run at a time per tenant.

    Webhook attempts started by a job are not waited for one by one: the runner only
    waits, all of them together, for the attempts whose retry could fall due before the
    next job (an attempt started at t retries at t + 30 s at the earliest), so many
    slow receivers cost one timeout per retry round and every retry still runs at its
    exact virtual time. After every YIELD_SECONDS of work it yields to the event loop, so
    one tenant's long advance never stalls the other tenants.
    """

    def __init__(self, tenant: Timed, settle: Settle, stopping: Callable[[], bool]) -> None:
        self.tenant = tenant
        self.settle = settle
        # True once the server is stopping (SIGTERM): a run stops between two jobs.
        self.stopping = stopping
        self.lock = asyncio.Lock()
        self.on_moved: Callable[[], None] | None = None  # the real-mode timer re-arms itself

    async def advance(self, seconds: float) -> RunResult:
        """Move the clock `seconds` forward, running every job due on the way (up to the
        work limit: then the clock stops at the last job run)."""
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"cannot advance a clock by {seconds!r} seconds")
        async with self.lock:
            target = self.tenant.clock.timestamp() + seconds
            result = await self._run_until(target)
            if result.complete:
                self.tenant.clock.advance_to(target)
            # The call answers once the attempts it started are done (their retries, due
            # after the target, wait on the timeline), so the ledger and the receiver
            # already show them.
            await self.settle(self.tenant)
        self._moved()
        return result

    async def run_due(self) -> RunResult:
        async with self.lock:
            result = await self._run_until(self.tenant.clock.timestamp())
        self.tenant.events.trim()
        return result

    async def run_until_idle(self) -> RunResult:
        """Run jobs in time order until only background jobs are left and no webhook
        attempt can schedule another retry (up to the work limit)."""
        async with self.lock:
            timeline, clock = self.tenant.timeline, self.tenant.clock
            jobs = events = 0
            first = self.tenant.events.emitted
            while True:
                events = self.tenant.events.emitted - first
                if events >= MAX_EVENTS_PER_RUN or jobs >= MAX_JOBS_PER_RUN:
                    break
                if self.stopping():
                    raise ShuttingDown(SHUTTING_DOWN)
                if timeline.idle:
                    if not self.tenant.webhooks.busy:
                        break
                    await self.settle(self.tenant)  # their retries may still come
                    continue
                due = timeline.next_due()
                result = await self._run_until(max(due, clock.timestamp()), limit=1)
                jobs += result.jobs
            done = timeline.idle and not self.tenant.webhooks.busy
        self._moved()
        return RunResult(jobs=jobs, events=events, complete=done)

    async def _run_until(self, target: float, limit: int = MAX_JOBS_PER_RUN) -> RunResult:
        timeline, clock = self.tenant.timeline, self.tenant.clock
        first = self.tenant.events.emitted
        jobs = 0
        slice_started = time.perf_counter()
        while jobs < limit:
            due = timeline.next_due()
            # Attempts that could still schedule a retry at or before the next job finish
            # first (all together), so the retry takes its place in time order.
            await self.settle(self.tenant, min(target, math.inf if due is None else due))
            due = timeline.next_due()
            if due is None or due > target:
                break
            if self.tenant.events.emitted - first >= MAX_EVENTS_PER_RUN:
                return RunResult(jobs, self.tenant.events.emitted - first, complete=False)
            if self.stopping():
                raise ShuttingDown(SHUTTING_DOWN)
            job = timeline.pop_due(target)
            clock.advance_to(job.due)
            self._run(job)
            jobs += 1
            if time.perf_counter() - slice_started > YIELD_SECONDS:
                await asyncio.sleep(0)  # let the other tenants' requests in
                slice_started = time.perf_counter()
        return RunResult(jobs, self.tenant.events.emitted - first, complete=True)

    def _moved(self) -> None:
        """After a run: the ledger back within its bound (deliveries settled during the
        run), and the real-mode timer re-armed."""
        self.tenant.events.trim()
        if self.on_moved is not None:
            self.on_moved()

    @staticmethod
    def _run(job: Job) -> None:
        try:
            job.action()
        except Exception:  # one broken job must not stop the clock for everything else
            log.exception("job %s failed", job.label)
            # ... nor leave its task or link stuck where it was: an action that can fail
            # its record visibly (a status and an event) does so.
            fail = getattr(job.action, "fail", None)
            if fail is not None:
                try:
                    fail()
                except Exception:
                    log.exception("job %s could not fail its record", job.label)


START_GRACE = 1.0  # wall seconds: wake-ups further out than this are armed after start


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
        """The event loop runs: arm the wake-ups of jobs scheduled while the app was built.

        Those due within START_GRACE wall seconds are armed now; the rest (seeded refreshes,
        hours away) a moment later, once the server is answering: arming is what loads
        APScheduler, and a first request should not wait for that."""
        self._loop_running = True
        later = []
        for name, runner in list(self._runners.items()):
            clock, due = runner.tenant.clock, runner.tenant.timeline.next_due()
            if due is not None and clock.wall_seconds(due - clock.timestamp()) <= START_GRACE:
                self._rearm(name)
            else:
                later.append(name)
        if later:
            asyncio.get_running_loop().call_later(
                START_GRACE, lambda: [self._rearm(name) for name in later if name not in self._wakes])

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
