"""What every tenant reads and none changes: one frozen value, made once by the app
factory and handed to each tenant (and each of its parts) when it is made.

The tenant owns its state and the rules that change it (tenants.py and its parts); what
those rules read but never write comes from here: the service profile, the scenarios,
the shared catalog and its search index, how a linked account's person is generated,
the bounds on what a tenant keeps, and the seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from typing import Any, Protocol

import msgspec

from .companies.companies import Catalog
from .tasks.states import Scenario


class ServiceProfile(msgspec.Struct, frozen=True):
    """The service's names (vendor, aggregator, SDK prefix) and its products' scopes."""

    vendor: str
    aggregator: str
    sdk_prefix: str
    products: dict[str, str]  # product -> scope
    sdk_global: str = "Transact"  # the browser SDK's global object

    def scopes_of(self, products: tuple[str, ...]) -> frozenset[str]:
        return frozenset(self.products[p] for p in products if p in self.products)

class Limits(msgspec.Struct, frozen=True):
    """What one tenant keeps at most (README: Limits; settings --max-events, ...).

    Past a bound the oldest settled items go first (events whose deliveries are done,
    workflows whose tasks all ended, expired tokens before live ones); nothing still
    pending is evicted. Users past `max_users` are refused (429), and so is new work
    (a task, a triggered event) while live work fills a bound: `max_tasks` tasks that
    cannot go, `max_events` events whose deliveries are pending, `max_jobs` jobs on the
    clock (Tenant.admit_work); and a task that would link a new account past
    `max_linked_accounts` (LinkedAccounts.admit)."""

    max_events: int = 5_000
    max_tasks: int = 10_000
    max_jobs: int = 100_000
    max_tokens: int = 10_000
    max_users: int = 100_000
    max_linked_accounts: int = 10_000
    max_aggregator_items: int = 10_000  # the aggregator API's items (domain/aggregator.py)
    max_callbacks: int = 2_000  # the hosted flow's messages to the host (domain/callbacks.py)


class ProfileMaker(Protocol):
    """The person behind a linked account (datagen.ProfileFactory), seeded by the tenant,
    the user and the company, so the same seed makes the same person."""

    def profile(self, tenant: str, identifier: str, company_id: str, company_name: str,
                today: date) -> Any: ...


class Rules(msgspec.Struct, frozen=True):
    """What every tenant reads and none changes: scenarios, catalog, service profile, limits."""

    service: ServiceProfile
    scenarios: Mapping[str, Scenario]
    catalog: Catalog
    index: Any                # search.SearchIndex over the catalog
    profiles: ProfileMaker
    seed: int | str = 0
    limits: Limits = Limits()
    # The named data profiles (fixtures profiles.yaml, data_profiles.py): name -> document
    # with its `description`.
    data_profiles: Mapping[str, Any] = msgspec.field(default_factory=dict)

    @property
    def aggregator(self) -> str:
        return self.service.aggregator

    def scope_of(self, product: str) -> str | None:
        """The scope of a product (service.yaml), None for one this service lacks."""
        return self.service.products.get(product)
