"""The ledger of what the hosted flow told the host page.

Every message the flow's page posts to the customer's page (interaction, finish, close,
data-request, open-url, with its payload) is also sent to the sandbox (POST
/sdk/callbacks) and kept here, in the order the page posted them: GET
/_sandbox/sdk/callbacks reads them, the dashboard's timeline shows them beside the
webhooks, snapshots keep them. Bounded (--max-callbacks per tenant): the oldest go first.
"""

from __future__ import annotations

from collections import deque
from functools import cache
from itertools import islice
from typing import Any

import msgspec

from ...errors import ValidationFailed, field_detail
from ..sections import COUNT, Sections, obj
from ..stored import Count, Stored, array, loaded, stored

MAX_CALLBACKS = 2_000
# A message's payload as JSON, at most: what the flow posts is a few hundred bytes; the
# ledger's whole is then bounded (--max-callbacks times this).
MAX_PAYLOAD_BYTES = 16 * 1024
PAYLOAD_TOO_LARGE = "A message's payload is at most {limit} bytes as JSON; this one is {size}."
# The messages the host's callbacks receive (transact.js: onInteraction, onFinish,
# onClose, onDataRequest, onOpenUrl); the token handshake is the SDK's own.
CALLBACK_EVENTS = ("interaction", "finish", "close", "data-request", "open-url")


class FlowCallback(Stored, kw_only=True):
    """One message the hosted flow posted to the host page."""

    id: Count
    time: str            # the tenant's clock when the sandbox heard of it
    identifier: str      # the user whose public token the flow holds
    flow: str            # the flow's run (its handshake id): one opening of the flow
    event: str           # interaction, finish, close, data-request, open-url
    payload: Any         # what the host's callback received


class Callbacks:
    """One tenant's callbacks ledger: the newest `max_entries`, oldest dropped first."""

    def __init__(self, max_entries: int = MAX_CALLBACKS) -> None:
        self.max_entries = max_entries
        self._entries: deque[FlowCallback] = deque(maxlen=max_entries)
        self._next_id = 1
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._entries)

    def record(self, time: str, identifier: str, flow: str,
               messages: list[tuple[str, Any]]) -> list[FlowCallback]:
        """The messages of one POST /sdk/callbacks, in the order the page posted them; a
        payload past MAX_PAYLOAD_BYTES refuses them all (422, its path) and none is kept."""
        for number, (_, payload) in enumerate(messages):
            size = len(msgspec.json.encode(payload))
            if size > MAX_PAYLOAD_BYTES:
                message = PAYLOAD_TOO_LARGE.format(limit=MAX_PAYLOAD_BYTES, size=size)
                raise ValidationFailed(message, details=[
                    field_detail(f"$.messages[{number}].payload", message)])
        added = [FlowCallback(id=self._next_id + number, time=time, identifier=identifier,
                              flow=flow, event=event, payload=payload)
                 for number, (event, payload) in enumerate(messages)]
        self._next_id += len(added)
        self._keep(added)
        return added

    def _keep(self, entries: list[FlowCallback]) -> None:
        """The entries at the end; past the bound the oldest go, counted as evicted."""
        self.evicted += max(0, len(self._entries) + len(entries) - self.max_entries)
        self._entries.extend(entries)

    def query(self, *, identifier: str | None = None, after: int = 0,
              limit: int = 500) -> list[FlowCallback]:
        """Oldest first: those after the id `after`, of `identifier` when given."""
        return list(islice((entry for entry in self._entries if entry.id > after and (
            identifier is None or entry.identifier == identifier)), limit))

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({}, optional={
            "sdkCallbacks": obj({"entries": array(FlowCallback), "nextId": COUNT,
                                 "evicted": COUNT})})

    def dump(self) -> dict[str, Any]:
        if self._next_id == 1:  # written only once used: older readers never saw it
            return {}
        return {"sdkCallbacks": {"entries": [stored(e) for e in self._entries],
                                 "nextId": self._next_id, "evicted": self.evicted}}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        section = document.get("sdkCallbacks", {"entries": [], "nextId": 1, "evicted": 0})
        return {"entries": loaded(section["entries"], list[FlowCallback],
                                  "$.sdkCallbacks.entries"),
                "next_id": section["nextId"], "evicted": section["evicted"]}

    def restore(self, entries: list[FlowCallback], next_id: int, evicted: int) -> None:
        """A snapshot's newest entries (past this server's bound the oldest go) and counters."""
        self.evicted = evicted
        self._keep(entries)
        self._next_id = max(next_id, entries[-1].id + 1 if entries else 1)
