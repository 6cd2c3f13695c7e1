"""The tenant registry: the service profile, the shared catalog, and every tenant.

Built from the fixtures before the app exists (so a bad fixture stops the start);
the app factory then opens it with the collaborators every tenant works with, and
the accounts of the fixtures become tenants. The control plane adds, resets and
deletes tenants here. Time comes from each tenant's Clock, randomness from seeded Ids;
the keys of created tenants from a cryptographic source.
"""

from __future__ import annotations

import ctypes
import gc
import secrets
import time
from collections.abc import Callable
from typing import Any

from ..clock import Clock
from ..errors import TenantLimitReached, TenantNotDeletable, TenantNotFound
from ..fixtures import ServiceProfile
from .companies import Catalog, CompanyDirectory
from .search import SearchIndex
from .tenants import DEFAULT_PRODUCTS, Tenant, Tenants, TenantServices

UNKNOWN_TENANT = "No tenant is named {name!r}."
TENANT_LIMIT = ("{limit} tenants made by the control plane exist (--max-tenants); delete some "
                "(DELETE /_sandbox/tenants/{{name}}) first.")
FIXTURE_TENANT = ("{name!r} comes from the fixtures; reset it (POST /_sandbox/reset) instead of "
                  "deleting it.")



def release_memory() -> None:
    """After a reset or a delete: collect the tenant's old objects now (they hold cycles)
    and hand freed memory back to the system, so a long-running server shrinks again."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory is reused, not returned
        pass


class TenantRegistry:
    def __init__(self, *, service: ServiceProfile, catalog: Catalog, index: SearchIndex,
                 environment: str, seed: int, clock_factory: Callable[[], Clock],
                 scenarios: dict[str, Any], accounts: list[dict[str, Any]],
                 max_tenants: int = 1_000) -> None:
        self.service = service
        self.catalog = catalog
        self.index = index
        self.seed = seed
        self.scenarios = scenarios
        self.tenants = Tenants(environment)
        self._clock_factory = clock_factory
        self._fixture_accounts = accounts
        self._services: TenantServices | None = None
        self.max_tenants = max_tenants  # made by the control plane (fixtures' accounts aside)
        self._created_by: dict[str, str] = {}  # tenant made by the control plane -> its maker
        self.expired = 0  # tenants deleted for being idle (--tenant-idle-expiry)

    @property
    def services(self) -> TenantServices:
        assert self._services is not None, "open the registry first"
        return self._services

    def open(self, services: TenantServices) -> None:
        """Every account of the fixtures becomes a tenant working with `services`."""
        self._services = services
        for account in self._fixture_accounts:
            self._add(account)

    def _add(self, account: dict[str, Any]) -> Tenant:
        assert self._services is not None, "open the registry first"
        tenant = Tenant(account, clock_factory=self._clock_factory,
                        companies=lambda: CompanyDirectory(self.catalog, self.index),
                        seed=self.seed, services=self._services)
        self.tenants.add(tenant)
        return tenant

    def create_tenant(self, request: dict[str, Any], creator: Tenant | None = None) -> Tenant:
        """POST /_sandbox/tenants: a fresh, isolated tenant with new, random keys."""
        if len(self._created_by) >= self.max_tenants:
            raise TenantLimitReached(TENANT_LIMIT.format(limit=self.max_tenants))
        name = request.get("name")
        if name is None or self.tenants.get(name) is not None:
            base = name or "tenant"
            number = len(self.tenants) + 1
            while self.tenants.get(f"{base}-{number}") is not None:
                number += 1
            name = f"{base}-{number}"
        prefix = self.tenants.environment[:4]
        account = {
            "name": name,
            "apiKey": f"{prefix}_key_{secrets.token_hex(16)}",
            "apiSecret": f"{prefix}_secret_{secrets.token_hex(16)}",
            "environment": self.tenants.environment,
            "products": request.get("products", list(DEFAULT_PRODUCTS)),
            "manualDeposits": request.get("manualDeposits", {}),
            "webhooks": {"signing": request.get("signing", True), "endpoints": []},
            "continuousAccess": request.get("continuousAccess", {}),
        }
        tenant = self._add(account)
        self._created_by[name] = creator.name if creator is not None else ""
        return tenant

    def restore_tenant(self, account: dict[str, Any], created_by: str) -> Tenant:
        """--state-file: a tenant the control plane had made, back with its saved account
        (name and keys) and its maker's name ("" for none); snapshot.py fills in its state."""
        tenant = self._add(account)
        self._created_by[tenant.name] = created_by
        return tenant

    def creator_of(self, name: str) -> str | None:
        """Who made a tenant by the control plane ("" for no tenant); None: a fixtures' account."""
        return self._created_by.get(name)

    def reset(self, tenant: Tenant) -> Tenant:
        """POST /_sandbox/reset: the tenant as its account first made it, same keys."""
        self.tenants.forget_tokens(tenant)
        tenant.reset()
        release_memory()
        return tenant

    def delete(self, name: str, caller: Tenant) -> None:
        """DELETE /_sandbox/tenants/{name}: stops and forgets every object of the tenant.
        A tenant made by the control plane may be deleted by itself or by its maker; the
        fixtures' accounts are reset instead. Any other tenant is, to the caller, one that
        does not exist (404): a neighbour learns nothing of the names in use."""
        tenant = self.tenants.get(name)
        if tenant is None or (caller is not tenant and self._created_by.get(name) != caller.name):
            raise TenantNotFound(UNKNOWN_TENANT.format(name=name))
        if name not in self._created_by:
            raise TenantNotDeletable(FIXTURE_TENANT.format(name=name))
        self._forget(tenant)
        release_memory()

    def expire_idle(self, max_idle: float, now: float | None = None) -> list[str]:
        """Deletes every tenant made by the control plane whose latest request is more than
        `max_idle` wall seconds old (before `now`, monotonic); the fixtures' accounts stay.
        Their names."""
        now = time.monotonic() if now is None else now
        idle = [tenant for name in self._created_by
                if (tenant := self.tenants.get(name)) is not None
                and now - tenant.last_request > max_idle]
        for tenant in idle:
            self._forget(tenant)
        if idle:
            self.expired += len(idle)
            release_memory()
        return [tenant.name for tenant in idle]

    def _forget(self, tenant: Tenant) -> None:
        tenant.close()
        self.tenants.remove(tenant)
        self._created_by.pop(tenant.name, None)
