"""Where a check-handler run's events come from: an `EventSource`, in-process
(in_process.py) or a running sandbox (remote.py). Either way each event is a
`domain.events.Event` as that sandbox made it; the checks see only this interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from ..domain.webhooks.events import Event
from ..domain.tasks.states import FAILURE_REASONS
from ..domain.webhooks.event_types import TASK_EVENTS
from .arguments import CheckerError, checked_names

CARRIER_SCENARIO = "happy-path"   # the real task a triggered task event names (fits every product)


class EventSource(ABC):
    """Where the suite's events come from: an in-process sandbox (`InProcessSource`) or a
    running one (`RemoteSource`, `--url`). Used as `async with`: a remote source makes its
    temporary tenant on entry and deletes it on exit."""

    vendor: str            # ce-source com.<vendor>, ce-type com.<vendor>.<eventType>
    types: list[str]       # every event type, in the spec's order, as that sandbox names them
    products: list[str]    # every product of its service profile, in the profile's order
    scenarios: list[dict[str, Any]]   # its scenarios as GET /_sandbox/scenarios lists them
    sandbox_url: str | None = None
    cleanup_note: str | None = None   # what was left behind on the sandbox, if anything

    def __init__(self) -> None:
        self._reasons: dict[str, int] = {}         # product -> failure reasons used so far
        self._companies: dict[str, str | None] = {}  # product -> a company taking its tasks

    async def __aenter__(self) -> EventSource:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        return None

    async def select_products(self, products: Iterable[str] | str | None) -> list[str]:
        """The products to check, in the profile's order: the named ones, or every one
        some company of the sandbox takes a task of."""
        wanted = (set(self.products) if products is None
                  else checked_names(products, self.products, "--products", "product"))
        chosen = []
        for product in (p for p in self.products if p in wanted):
            if await self.company_for(product) is not None:
                chosen.append(product)
            elif products is not None:
                raise CheckerError(f"--products: no company of the sandbox takes a {product} "
                                   "task (none that offers it is operational and open to it)")
        if not chosen:
            raise CheckerError("no company of the sandbox takes a task of any product")
        return chosen

    def fits(self, scenario: str, product: str) -> bool:
        """Whether the sandbox runs `scenario` for a task of `product` (its scenario files)."""
        return any(s["name"] == scenario and product in (s.get("products") or ())
                   for s in self.scenarios)

    def reasons(self, product: str) -> list[str]:
        """The failure reasons a task of `product` can end with: those of the scenarios that
        fit it, in the spec's order."""
        found = {step["reason"] for s in self.scenarios if product in (s.get("products") or ())
                 for step in s["steps"] if step.get("reason")}
        return [r for r in FAILURE_REASONS if r in found]

    async def company_for(self, product: str) -> str | None:
        """An operational company that takes a task of `product` (found once)."""
        if product not in self._companies:
            self._companies[product] = await self._company_for(product)
        return self._companies[product]

    async def trigger(self, event_type: str, *, product: str | None = None,
                      failed: bool = False) -> Event:
        """A new event of this type, as POST /_sandbox/events/trigger makes it. A task
        event names a real task of `product` (run through happy-path); `failed`: a
        task-status-updated with a failure reason of that product's scenarios, each in turn."""
        request: dict[str, Any] = {"eventType": event_type}
        if event_type in TASK_EVENTS:
            product = product or self.products[0]
            request["taskId"] = (await self.run_task(CARRIER_SCENARIO, product))[0]
            reasons = self.reasons(product)
            if failed and event_type == "task-status-updated" and reasons:
                turn = self._reasons.get(product, 0)
                self._reasons[product] = turn + 1
                request["data"] = {"status": "failed", "reason": reasons[turn % len(reasons)]}
        return await self._trigger(request)

    async def task_events(self, scenario: str, product: str) -> list[Event]:
        """The task events of one real task of `product` run through `scenario`, in
        emission order."""
        task_id, events = await self.run_task(scenario, product)
        return [e for e in events if e.type in TASK_EVENTS and e.task == task_id]

    @abstractmethod
    async def _company_for(self, product: str) -> str | None:
        """An operational company that takes a task of `product`, or None."""

    @abstractmethod
    async def run_task(self, scenario: str, product: str) -> tuple[str, list[Event]]:
        """A task of `product` at `company_for(product)` run through `scenario` to its
        end: its id and its events."""

    @abstractmethod
    async def _trigger(self, request: dict[str, Any]) -> Event:
        """What POST /_sandbox/events/trigger makes of `request`."""

    @abstractmethod
    def emit(self, event_type: str, body: dict[str, Any]) -> Event:
        """An event with this body, not checked against any schema (a future type, or
        fields the spec does not have): the trigger refuses those."""

    @abstractmethod
    def user(self, identifier: str) -> dict[str, str]:
        """A user's `{"_id", "identifier"}` for an event `emit` makes."""

    @abstractmethod
    def object_id(self) -> str:
        """A new id in the sandbox's format (24 hex digits)."""
