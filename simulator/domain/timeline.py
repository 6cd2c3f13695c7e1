"""A tenant's timeline: the jobs due on its clock (task steps, webhook retries, refreshes).

Pure bookkeeping: the timeline orders jobs by due time (then by the order they
were scheduled) and hands them out; the scheduler decides when to ask.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(order=True)
class Job:
    due: float
    sequence: int
    action: Callable[[], Any] = field(compare=False)
    label: str = field(default="", compare=False)
    # Background jobs (periodic refreshes) do not keep the timeline busy: run-until-idle
    # stops when only they are left.
    background: bool = field(default=False, compare=False)
    owner: str | None = field(default=None, compare=False)
    cancelled: bool = field(default=False, compare=False)
    handed_out: bool = field(default=False, compare=False)  # pop_due gave it to the runner


class Timeline:
    def __init__(self) -> None:
        self._heap: list[Job] = []
        self._counter = itertools.count()
        self._busy = 0
        self._owned: dict[str, int] = {}  # owner -> pending jobs
        self.on_schedule: Callable[[Job], None] | None = None

    def schedule(self, due: float, action: Callable[[], Any], *, label: str = "",
                 background: bool = False, owner: str | None = None) -> Job:
        job = Job(due=due, sequence=next(self._counter), action=action, label=label,
                  background=background, owner=owner)
        heapq.heappush(self._heap, job)
        if not background:
            self._busy += 1
        if owner is not None:
            self._owned[owner] = self._owned.get(owner, 0) + 1
        if self.on_schedule is not None:
            self.on_schedule(job)
        return job

    def cancel(self, job: Job) -> None:
        if not job.cancelled and not job.handed_out:
            job.cancelled = True
            if not job.background:
                self._busy -= 1
            self._release(job)

    def _release(self, job: Job) -> None:
        if job.owner is not None:
            left = self._owned[job.owner] - 1
            if left:
                self._owned[job.owner] = left
            else:
                del self._owned[job.owner]

    def owns_pending(self, owner: str) -> bool:
        """Whether a job of this owner (a task, a delivery) is still to run."""
        return owner in self._owned

    def cancel_owned(self, owner: str) -> int:
        """Cancels every pending job of one owner (a task, a processor link); returns how many."""
        jobs = [j for j in self._heap if j.owner == owner and not j.cancelled]
        for job in jobs:
            self.cancel(job)
        return len(jobs)

    def next_due(self) -> float | None:
        self._drop_cancelled()
        return self._heap[0].due if self._heap else None

    def pop_due(self, now: float) -> Job | None:
        """The earliest job due at or before `now`, removed from the timeline."""
        self._drop_cancelled()
        if not self._heap or self._heap[0].due > now:
            return None
        job = heapq.heappop(self._heap)
        job.handed_out = True
        if not job.background:
            self._busy -= 1
        self._release(job)
        return job

    @property
    def idle(self) -> bool:
        return self._busy == 0

    @property
    def busy(self) -> int:
        """Pending jobs that are not background ones."""
        return self._busy

    def __len__(self) -> int:
        return sum(1 for j in self._heap if not j.cancelled)

    def pending(self) -> list[Job]:
        return sorted(j for j in self._heap if not j.cancelled)

    def clear(self) -> None:
        for job in self._heap:
            job.cancelled = True
        self._heap.clear()
        self._busy = 0
        self._owned.clear()

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
