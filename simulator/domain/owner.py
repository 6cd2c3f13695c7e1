"""The tenant as its parts see it.

A tenant (tenants.py) is made of parts (tasks.py, linked_accounts.py, processor_links.py,
...) that each own their state and the rules that change it. A part holds its tenant to
reach what is shared across parts (the clock, the seeded ids, the ledger, the other parts);
it knows the tenant only by this description, so no part imports the module that builds
the tenant out of them.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ..clock import Clock
from .changes import Changes
from .companies import CompanyDirectory, ManualDepositRule
from .events import Event, EventLog
from .timeline import Timeline
from .event_types import Draft


@dataclass
class TenantSettings:
    """The account's settings the parts read: its products, its manual-deposit rule and its
    continuous-access intervals. One object from a reset to the next; a restore changes it
    in place, so a part given it reads the current ones."""

    products: tuple[str, ...]
    manual_deposits: ManualDepositRule
    refresh_interval: float | None
    pii_deletion_interval: float | None


class Owner(Protocol):
    name: str
    environment: str
    account: dict[str, Any]
    api_secret: str
    products: tuple[str, ...]
    manual_deposits: ManualDepositRule
    refresh_interval: float | None
    pii_deletion_interval: float | None
    clock: Clock
    ids: Any                       # identity.Ids
    companies: CompanyDirectory
    timeline: Timeline
    changes: Changes
    events: EventLog
    identity: Any                  # identity.Identity (users, public tokens)
    rules: Any                     # rules.Rules (read-only: scenarios, catalog, limits)
    # The parts: each is the one writer of its state.
    tasks: Any                     # tasks.Tasks
    accounts: Any                  # linked_accounts.LinkedAccounts
    links: Any                     # processor_links.ProcessorLinks
    webhooks: Any                  # outbox.Outbox (endpoints, deliveries, faults)
    aggregator: Any                # aggregator.Aggregator (its items and their tokens)

    def emit(self, event: Draft | str, *, identifier: str | None = None,
             task_id: str | None = None, at: float | None = None, **body: Any) -> Event: ...

    def emit_webhook(self, url: str, event_type: str, body: dict[str, Any]) -> Event: ...



V = TypeVar("V")


class Held(Mapping[str, V]):
    """A part's records read as a mapping of id -> record (the part changes `_by_id`
    through its methods only). Reads go straight to the dict: a listing of 10,000 tasks
    costs no Python call per record."""

    _by_id: dict[str, V]

    def itself(self) -> Any:
        """The part itself: what its scheduled actions call when they run (a restored
        action finds its part through the tenant instead: Loading.part)."""
        return self

    def __getitem__(self, key: str) -> V:
        return self._by_id[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, key: object) -> bool:
        return key in self._by_id

    def get(self, key: str, default: Any = None) -> Any:
        return self._by_id.get(key, default)

    def values(self) -> ValuesView[V]:
        return self._by_id.values()

    def items(self) -> ItemsView[str, V]:
        return self._by_id.items()
