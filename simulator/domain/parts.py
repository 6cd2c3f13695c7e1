"""What the parts of a tenant share: the settings they read and the mapping they are read as.

A tenant (tenants.py) is made of parts (tasks.py, linked_accounts.py, processor_links.py,
...) that each own their state and the rules that change it. A part is given the few
collaborators it names (the clock, the seeded ids, the timeline, the sibling parts it
calls), never the tenant.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from typing import Any, TypeVar

import msgspec

from .companies.companies import ManualDepositRule


class TenantSettings(msgspec.Struct):
    """The account's settings the parts read: its products, its manual-deposit rule and its
    continuous-access intervals. One object from a reset to the next; a restore changes it
    in place, so a part given it reads the current ones."""

    products: tuple[str, ...]
    manual_deposits: ManualDepositRule
    refresh_interval: float | None
    pii_deletion_interval: float | None


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
