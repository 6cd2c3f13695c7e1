"""A tenant's timeline: the jobs due on its clock (task steps, webhook retries, refreshes).

Pure bookkeeping: the timeline orders jobs by due time (then by the order they
were scheduled) and hands them out; the scheduler decides when to ask.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

import msgspec

from ..validate import schema_errors
from .shapes import schema_of
from .stored import LoadError
from .sections import COUNT, STRING, TIME, Sections, obj

# Every kind of scheduled action, by the name it gives itself in a snapshot (snapshot.py):
# a small tagged union. A registered class's instances say what a snapshot keeps of them as
# their struct `Stored` (`stored()`: ids rather than objects; written with the kind) and
# `rebuild(stored, context)` makes one from it again, with the restored objects the context
# finds by id.
ACTION_KINDS: dict[str, type] = {}


def action_kind(kind: str) -> Callable[[type], type]:
    """Class decorator: registers a kind of scheduled action under `kind`. The class says
    how a snapshot keeps it, besides its kind (the timeline writes and reads that): its
    struct `Stored`, `stored()` and `rebuild(stored, context)`."""

    def register(cls: type) -> type:
        if ACTION_KINDS.get(kind, cls) is not cls:
            raise ValueError(f"two kinds of scheduled action are named {kind!r}")
        cls.kind = kind  # type: ignore[attr-defined]
        ACTION_KINDS[kind] = cls
        return cls

    return register


class Job(msgspec.Struct, eq=False):
    """One thing due on a tenant's clock. Ordered by (due, sequence): the heap holds
    `(due, sequence, job)` tuples, so ordering is a C tuple comparison (sequences are
    unique: the job itself is never compared). A struct: made in C, a task makes several."""

    due: float
    sequence: int
    action: Callable[[], Any]
    _label: str = ""
    # Background jobs (periodic refreshes) do not keep the timeline busy: run-until-idle
    # stops when only they are left.
    background: bool = False
    owner: str | None = None
    cancelled: bool = False
    handed_out: bool = False  # pop_due gave it to the runner

    @property
    def label(self) -> str:
        """What the job does: the label given, else the action's own description."""
        return self._label or str(self.action)

    def __repr__(self) -> str:
        return f"Job(due={self.due!r}, sequence={self.sequence}, label={self.label!r})"

    def describe(self) -> dict[str, Any]:
        """The job as data (snapshots): when, in which order, and what, as its action
        keeps it (an action without `stored` is not of a registered kind)."""
        return {"due": self.due, "sequence": self.sequence, "background": self.background,
                "owner": self.owner, "label": self._label,
                "action": {"kind": self.action.kind,
                           **msgspec.to_builtins(self.action.stored())}}


class Timeline:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Job]] = []
        self._counter = itertools.count()
        self._busy = 0
        self._owned: dict[str, int] = {}  # owner -> pending jobs
        self.on_schedule: Callable[[Job], None] | None = None

    def schedule(self, due: float, action: Callable[[], Any], *, label: str = "",
                 background: bool = False, owner: str | None = None) -> Job:
        sequence = next(self._counter)
        job = Job(due, sequence, action, label, background, owner)
        heapq.heappush(self._heap, (due, sequence, job))
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
        jobs = [j for _, _, j in self._heap if j.owner == owner and not j.cancelled]
        for job in jobs:
            self.cancel(job)
        return len(jobs)

    def next_due(self) -> float | None:
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> Job | None:
        """The earliest job due at or before `now`, removed from the timeline."""
        self._drop_cancelled()
        if not self._heap or self._heap[0][0] > now:
            return None
        job = heapq.heappop(self._heap)[2]
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
        return sum(1 for _, _, j in self._heap if not j.cancelled)

    def holds_at_least(self, count: int) -> bool:
        """Whether `count` jobs or more are pending (counted only when the heap, cancelled
        jobs included, is that large)."""
        return len(self._heap) >= count and len(self) >= count

    def pending(self) -> list[Job]:
        return [j for _, _, j in sorted(self._heap) if not j.cancelled]

    def next_sequence(self) -> int:
        """The sequence the next job scheduled will get (a snapshot keeps it)."""
        sequence = next(self._counter)
        self._counter = itertools.count(sequence)
        return sequence

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        """The jobs, their actions of the kinds registered (once every module that defines
        one is imported)."""
        job = obj({"due": TIME, "sequence": COUNT, "background": {"type": "boolean"},
                   "owner": {"type": ["string", "null"]}, "label": STRING,
                   "action": {"type": "object", "required": ["kind"],
                              "properties": {"kind": {"enum": sorted(ACTION_KINDS)}}}})
        return Sections({"jobs": {"type": "array", "items": job,
                                  "description": "Pending jobs of the timeline (scenario cursors, "
                                                 "retries, refreshes), each with its action as "
                                                 "data."},
                         "counters": obj({"nextJobSequence": COUNT})},
                        # Work admitted before the bound filled may still schedule past it.
                        bounds={"jobs": lambda limits: (2 * limits.max_jobs, "twice --max-jobs:")})

    def dump(self, added: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
        """The pending jobs as data, with jobs `added` (described, each given the next
        sequence in turn), in the order they run."""
        jobs = [job.describe() for job in self.pending()]
        sequence = self.next_sequence()
        for job in added:
            jobs.append({"due": job["due"], "sequence": sequence, **job})
            sequence += 1
        jobs.sort(key=lambda job: (job["due"], job["sequence"]))
        return {"jobs": jobs, "counters": {"nextJobSequence": sequence}}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        """Each job's action as its kind describes it, rebuilt with the loaded objects it
        names (`loading` finds them); sequences once each, below the next."""
        problems, actions = [], []
        for number, raw in enumerate(document["jobs"]):
            kind = ACTION_KINDS[raw["action"]["kind"]]
            rest = {name: value for name, value in raw["action"].items() if name != "kind"}
            actions.append((kind, rest))
            problems += [(f"$.jobs[{number}].action{path[1:]}", message) for path, message
                         in schema_errors(rest, schema_of(kind.Stored))]
        if problems:
            raise LoadError(*problems[0], problems[1:])
        next_sequence = document["counters"]["nextJobSequence"]
        jobs, sequences = [], set()
        for number, (raw, (kind, rest)) in enumerate(zip(document["jobs"], actions)):
            path = f"$.jobs[{number}]"
            if raw["sequence"] in sequences:
                raise LoadError(f"{path}.sequence", "appears twice")
            if raw["sequence"] >= next_sequence:
                raise LoadError(f"{path}.sequence", "must be below counters.nextJobSequence")
            sequences.add(raw["sequence"])
            try:
                action = kind.rebuild(msgspec.convert(rest, kind.Stored, strict=False), loading)
            except LookupError as error:
                raise LoadError(f"{path}.action", str(error).strip("'\"")) from None
            jobs.append(Job(float(raw["due"]), raw["sequence"], action, raw["label"],
                            raw["background"], raw["owner"]))
        return {"jobs": jobs, "next_sequence": next_sequence}

    def restore(self, jobs: list[Job], next_sequence: int) -> None:
        """A snapshot's pending jobs, each with its own due time and sequence, so they run
        in exactly the saved order; the next job scheduled gets `next_sequence`."""
        for job in jobs:  # as schedule() keeps a job, without its hook (restored, not new)
            heapq.heappush(self._heap, (job.due, job.sequence, job))
            if not job.background:
                self._busy += 1
            if job.owner is not None:
                self._owned[job.owner] = self._owned.get(job.owner, 0) + 1
        self._counter = itertools.count(next_sequence)

    def clear(self) -> None:
        for _, _, job in self._heap:
            job.cancelled = True
        self._heap.clear()
        self._busy = 0
        self._owned.clear()

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
