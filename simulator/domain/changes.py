"""What changed in a tenant, in order: the cursor of incremental reads (the dashboard's
live updates, GET /_sandbox/events?after= and /_sandbox/tasks?after=).

Every change to an event (emitted, a delivery made, an attempt started or answered) or to
a task (created, a step applied) takes the next *revision*, a number never reused in the
process, even across a tenant's resets. The latest WINDOW changed events (and as many
tasks) are kept in the order of their latest change, each with its revision: reading what
changed after a revision walks back from the newest change and stops at the first older
one, so its cost is what changed, not what is stored. A reader further behind than the
window (or from before a reset) is told to start over with a full read, as a Kubernetes
watch answers "too old" past its compaction: the window is what bounds the memory.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable

EVENT, TASK = "event", "task"
WINDOW = 1_000  # changed events (and tasks) remembered per tenant (README: Limits)

_revisions = itertools.count(1)  # process-wide


class Changes:
    """One tenant's latest changes since it (re)started."""

    def __init__(self, window: int = WINDOW) -> None:
        self.floor = self.revision = next(_revisions)
        self.window = window
        self._latest: dict[str, OrderedDict[str, int]] = {EVENT: OrderedDict(),
                                                          TASK: OrderedDict()}
        # Per kind, the revision of the latest change that left the window: a reader
        # behind it may have missed that one.
        self._horizon = {EVENT: self.floor, TASK: self.floor}

    def touch(self, kind: str, key: str) -> None:
        """`key` (an event or task id) changed just now."""
        self.revision = revision = next(_revisions)
        latest = self._latest[kind]
        latest[key] = revision
        latest.move_to_end(key)
        if len(latest) > self.window:
            self._horizon[kind] = latest.popitem(last=False)[1]

    def touch_all(self, kind: str, keys: Iterable[str]) -> None:
        for key in keys:
            self.touch(kind, key)

    def __len__(self) -> int:
        """Entries kept: at most the window per kind (README: Limits)."""
        return sum(len(latest) for latest in self._latest.values())

    def forget(self, kind: str, key: str) -> None:
        """The item was evicted: it changes no more."""
        self._latest[kind].pop(key, None)

    def current(self, kind: str, revision: int) -> bool:
        """Whether a reader who saw up to `revision` can go on from there."""
        return self._horizon[kind] <= revision <= self.revision

    def since(self, kind: str, revision: int) -> list[str]:
        """The keys changed after `revision`, in the order of their latest change."""
        changed = []
        for key, latest in reversed(self._latest[kind].items()):
            if latest <= revision:
                break
            changed.append(key)
        changed.reverse()
        return changed

    def revision_of(self, kind: str, key: str) -> int:
        return self._latest[kind].get(key, self.floor)
