"""What changed in a tenant, in order: the cursor of incremental reads (the dashboard's
live updates, GET /_sandbox/events?after= and /_sandbox/tasks?after=).

Every change to an event (emitted, a delivery made, an attempt started or answered) or to
a task (created, a step applied) takes the next *revision*, a number never reused in the
process, even across a tenant's resets; each item remembers only its latest one, kept in
the order of the changes. Reading what changed after a revision walks back from the
newest change and stops at the first older one: the cost is what changed, not what is
stored.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable

EVENT, TASK = "event", "task"

_revisions = itertools.count(1)  # process-wide


class Changes:
    """One tenant's changes since it (re)started. A cursor from before that (a reset, a
    restored snapshot, another process) is not `current`: its reader starts over."""

    def __init__(self) -> None:
        self.floor = self.revision = next(_revisions)
        self._latest: dict[str, OrderedDict[str, int]] = {EVENT: OrderedDict(),
                                                          TASK: OrderedDict()}

    def touch(self, kind: str, key: str) -> None:
        """`key` (an event or task id) changed just now."""
        self.revision = revision = next(_revisions)
        latest = self._latest[kind]
        latest[key] = revision
        latest.move_to_end(key)

    def touch_all(self, kind: str, keys: Iterable[str]) -> None:
        for key in keys:
            self.touch(kind, key)

    def __len__(self) -> int:
        """Entries kept: one per stored event and task (README: Limits)."""
        return sum(len(latest) for latest in self._latest.values())

    def forget(self, kind: str, key: str) -> None:
        """The item was evicted: it changes no more."""
        self._latest[kind].pop(key, None)

    def current(self, revision: int) -> bool:
        """Whether a reader who saw up to `revision` can go on from there."""
        return self.floor <= revision <= self.revision

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
