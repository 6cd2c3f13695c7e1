"""RealTimer: wake-ups armed at start, the far ones once the server answers (issue 10)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from payroll_sandbox.transport import scheduler
from payroll_sandbox.clock import REAL, Clock
from payroll_sandbox.domain.timeline import Timeline
from payroll_sandbox.transport.scheduler import RealTimer


def runner_with_job_in(name: str, seconds: float) -> SimpleNamespace:
    clock = Clock(mode=REAL)
    timeline = Timeline()
    timeline.schedule(clock.timestamp() + seconds, lambda: None, label="a job")
    return SimpleNamespace(tenant=SimpleNamespace(name=name, clock=clock, timeline=timeline),
                           on_moved=None)


async def test_far_wake_ups_are_armed_after_start_and_near_ones_at_once(monkeypatch):
    monkeypatch.setattr(scheduler, "START_GRACE", 0.05)
    timer = RealTimer()
    near, far = runner_with_job_in("near", 0.01), runner_with_job_in("far", 3600)
    timer.watch(near)
    timer.watch(far)
    try:
        timer.start()
        assert "near" in timer._wakes, "a job due within the grace is armed at start"
        assert "far" not in timer._wakes, "a job hours away waits until the server answers"
        await asyncio.sleep(0.2)
        assert timer._wakes.get("far") == far.tenant.timeline.next_due()
    finally:
        timer.shutdown()


async def test_only_far_wake_ups_leave_apscheduler_unloaded_at_start(monkeypatch):
    monkeypatch.setattr(scheduler, "START_GRACE", 0.05)
    timer = RealTimer()
    timer.watch(runner_with_job_in("far", 3600))
    try:
        timer.start()
        assert timer._scheduler is None
        await asyncio.sleep(0.2)
        assert timer._scheduler is not None
    finally:
        timer.shutdown()
