"""The sandbox's whole state: the service profile, the catalog and the tenants.

Built once by the app factory from the fixtures; handlers reach everything
through it. Time comes from each tenant's Clock, randomness from seeded Ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock
from ..fixtures import ServiceProfile
from .companies import Catalog, CompanyDirectory, ManualDepositRule
from .search import SearchIndex
from .linked_accounts import DEFAULT_REFRESH_INTERVAL
from .tenants import Ids, Tenant, Tenants

DEFAULT_PRODUCTS = ("deposit", "verify", "switch", "present", "employer-classification",
                    "recurring-transaction-detection")


@dataclass
class Store:
    service: ServiceProfile
    catalog: Catalog
    index: SearchIndex
    tenants: Tenants
    seed: int
    clock_factory: Callable[[], Clock]
    scenarios: dict[str, Any] = field(default_factory=dict)
    accounts: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Told of every tenant made (from fixtures, the control plane or a reset).
    on_tenant: list[Callable[[Tenant], None]] = field(default_factory=list)
    _ids: Ids | None = None

    def add_account(self, account: dict[str, Any]) -> Tenant:
        """A tenant from an accounts.yaml entry (or a control-plane request shaped like one)."""
        tenant = Tenant(
            name=account["name"],
            api_key=account["apiKey"],
            api_secret=account["apiSecret"],
            environment=account["environment"],
            products=tuple(account.get("products", DEFAULT_PRODUCTS)),
            manual_deposits=ManualDepositRule.from_fixture(account.get("manualDeposits")),
            # Signed by default, as the real service signs every webhook
            # (real-service facts 5); an account may turn it off.
            signing=account.get("webhooks", {}).get("signing", True),
            webhook_endpoints=list(account.get("webhooks", {}).get("endpoints", [])),
            clock=self.clock_factory(),
            ids=Ids(f"{self.seed}:{account['name']}"),
            companies=CompanyDirectory(self.catalog, self.index),
            refresh_interval=account.get("continuousAccess", {}).get("refreshInterval",
                                                                    DEFAULT_REFRESH_INTERVAL),
            pii_deletion_interval=account.get("continuousAccess", {}).get("piiDeletionInterval"),
        )
        self.accounts[tenant.name] = account
        self.tenants.add(tenant)
        for listener in self.on_tenant:
            listener(tenant)
        return tenant

    def create_tenant(self, request: dict[str, Any]) -> Tenant:
        """POST /_sandbox/tenants: a fresh, isolated tenant with new keys."""
        if self._ids is None:
            self._ids = Ids(f"{self.seed}:tenants")
        name = request.get("name")
        if name is None or self.tenants.get(name) is not None:
            base = name or "tenant"
            number = len(self.accounts) + 1
            while self.tenants.get(f"{base}-{number}") is not None:
                number += 1
            name = f"{base}-{number}"
        account = {
            "name": name,
            "apiKey": self._ids.secret(f"{self.tenants.environment[:4]}_key_"),
            "apiSecret": self._ids.secret(f"{self.tenants.environment[:4]}_secret_"),
            "environment": self.tenants.environment,
            "products": request.get("products", list(DEFAULT_PRODUCTS)),
            "manualDeposits": request.get("manualDeposits", {}),
            "webhooks": {"signing": request.get("signing", True), "endpoints": []},
            "continuousAccess": request.get("continuousAccess", {}),
        }
        return self.add_account(account)

    def reset_tenant(self, tenant: Tenant) -> Tenant:
        """POST /_sandbox/reset: the tenant as its account first made it, same keys."""
        return self.add_account(self.accounts[tenant.name])
