"""The tenant registry: the service profile, the shared catalog, and every tenant.

Built from the fixtures before the app exists (so a bad fixture stops the start);
the app factory then opens it with the collaborators every tenant works with, and
the accounts of the fixtures become tenants. The control plane adds, resets and
deletes tenants here. Time comes from each tenant's Clock, randomness from seeded Ids;
the keys of created tenants from a cryptographic source.
"""

from __future__ import annotations

import gc
import secrets
import time
from collections.abc import Callable
from typing import Any

from ..clock import Clock
from ..clock import start_problem, written_time
from ..errors import (TenantLimitReached, TenantNotDeletable, TenantNotFound, ValidationFailed,
                      field_detail)
from .rules import Rules
from .shapes import given
from .tenants import DEFAULT_PRODUCTS, Tenant, Tenants, TenantServices

UNKNOWN_TENANT = "No tenant is named {name!r}."
BAD_START = "The clock cannot start there: {problem}."
TENANT_LIMIT = ("{limit} tenants made by the control plane exist (--max-tenants); delete some "
                "(DELETE /_sandbox/tenants/{{name}}) first.")
MAKER_LIMIT = ("This tenant's tree (the tenants made by it or its maker, and by those tenants "
               "in turn) has {limit} tenants that still exist (--max-tenants-per-maker, its "
               "share of --max-tenants); delete some (DELETE /_sandbox/tenants/{{name}}) first.")
FIXTURE_TENANT = ("{name!r} comes from the fixtures; reset it (POST /_sandbox/reset) instead of "
                  "deleting it.")



# Records (tasks, events, journal entries) a reset, delete or expiry frees before it collects
# at once: a full collection costs tens of milliseconds in a large process (the pytest
# plugin resets a tenant for every test), so a small tenant's objects are left to Python's
# own collector, and a large one's memory goes back to the system at once.
RELEASE_AFTER = 1_000


def held(tenant: Tenant) -> int:
    """The records the tenant holds, which a reset, delete or expiry frees."""
    return len(tenant.tasks) + len(tenant.events) + len(tenant.journal)


def give_back_memory(freed: int = RELEASE_AFTER) -> None:
    """Collect the garbage now and hand the heap's free pages back to the system (glibc),
    so a long-running server shrinks again after a big piece of work let go: after a
    reset, delete or expiry that freed `freed` records, only if they were many (the old
    objects hold cycles)."""
    if freed < RELEASE_AFTER:
        return
    gc.collect()
    import ctypes  # here, not at the top: 4 ms of every start, for a rare call

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory is reused, not returned
        pass


class TenantRegistry:
    def __init__(self, rules: Rules, *, environment: str,
                 clock_factory: Callable[[float | None], Clock],
                 accounts: list[dict[str, Any]], max_tenants: int = 1_000,
                 max_per_maker: int = 250) -> None:
        self.rules = rules
        self.service = rules.service
        self.catalog = rules.catalog
        self.seed = rules.seed
        self.scenarios = rules.scenarios
        self.tenants = Tenants(environment)
        self._clock_factory = clock_factory
        self._fixture_accounts = accounts
        self._services: TenantServices | None = None
        self.max_tenants = max_tenants  # made by the control plane (fixtures' accounts aside)
        self.max_per_maker = max_per_maker  # of those, made by one tenant
        # A tenant made by the control plane -> its maker, the object itself (None: none):
        # a later tenant that takes a deleted maker's name is not that maker.
        self._made_by: dict[str, Tenant | None] = {}
        self._tree_sizes: dict[int, int] = {}  # id of a root tenant -> tenants made below it
        self.expired = 0  # tenants deleted for being idle (--tenant-idle-expiry)
        # Told of a tenant whose state is about to go (`"deleted"`, also by expiry, or
        # `"reset"`), before it goes: `exec` keeps its undelivered webhooks for its report.
        self.leaving: list[Callable[[Tenant, str], None]] = []

    @property
    def services(self) -> TenantServices:
        assert self._services is not None, "open the registry first"
        return self._services

    def open(self, services: TenantServices) -> None:
        """Every account of the fixtures becomes a tenant working with `services`."""
        self._services = services
        for account in self._fixture_accounts:
            self._add(account)

    def _add(self, account: dict[str, Any], *, from_fixtures: bool = True) -> Tenant:
        assert self._services is not None, "open the registry first"
        tenant = Tenant(account, rules=self.rules, clock_factory=self._clock_factory,
                        services=self._services, from_fixtures=from_fixtures)
        self.tenants.add(tenant)
        return tenant

    def create_tenant(self, request: Any, creator: Tenant | None = None) -> Tenant:
        """POST /_sandbox/tenants: a fresh, isolated tenant with new, random keys (and its
        clock pinned at `clock.start`, if given: a start that is no date-time or out of range
        is a 422 naming it, and no tenant is made)."""
        start = None
        if given(request.clock) is not None:
            problem = start_problem(request.clock.start)
            if problem is not None:
                raise ValidationFailed(BAD_START.format(problem=problem),
                                       details=[field_detail("$.clock.start", problem)])
            start = written_time(request.clock.start)
        if len(self._made_by) >= self.max_tenants:
            raise TenantLimitReached(TENANT_LIMIT.format(limit=self.max_tenants))
        if creator is not None and self._tree_size(self._root_of(creator)) >= self.max_per_maker:
            raise TenantLimitReached(MAKER_LIMIT.format(limit=self.max_per_maker))
        name = given(request.name)
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
            "products": given(request.products, list(DEFAULT_PRODUCTS)),
            "manualDeposits": given(request.manual_deposits, {}),
            "webhooks": {"signing": request.signing, "endpoints": []},
            "continuousAccess": given(request.continuous_access, {}),
        }
        if start is not None:
            account["clock"] = {"start": start}
        tenant = self._add(account, from_fixtures=False)
        self._made_by[name] = creator
        self._count(tenant, +1)
        return tenant

    def restore_tenant(self, account: dict[str, Any], created_by: str) -> Tenant:
        """--state-file: a tenant the control plane had made, back with its saved account
        (name and keys) and its maker's name ("" for none; makers are saved before what they
        made); snapshot.py fills in its state."""
        tenant = self._add(account, from_fixtures=False)
        self._made_by[tenant.name] = self.tenants.get(created_by) if created_by else None
        self._count(tenant, +1)
        return tenant

    def _maker_of(self, tenant: Tenant) -> Tenant | None:
        return self._made_by.get(tenant.name) if self.tenants.get(tenant.name) is tenant else None

    def _root_of(self, tenant: Tenant) -> Tenant:
        """The tenant at the top of `tenant`'s makers (itself when nobody made it): its
        children's children count against it too, so a tree of tenants cannot fill
        --max-tenants through a maker each (issue 37, point 8)."""
        while (maker := self._maker_of(tenant)) is not None:
            tenant = maker
        return tenant

    def _tree_size(self, root: Tenant) -> int:
        """How many tenants made by the control plane have `root` at the top of their makers
        (counted as they come and go: a sum over every tenant cost each creation 3 ms)."""
        return self._tree_sizes.get(id(root), 0)

    def _count(self, tenant: Tenant, change: int) -> None:
        maker = self._maker_of(tenant)
        if maker is not None:
            key = id(self._root_of(maker))
            self._tree_sizes[key] = self._tree_sizes.get(key, 0) + change

    def creator_of(self, name: str) -> str | None:
        """The name of the tenant that made a tenant by the control plane ("" for none);
        None: a fixtures' account."""
        if name not in self._made_by:
            return None
        maker = self._made_by[name]
        return maker.name if maker is not None else ""

    def reset(self, tenant: Tenant) -> Tenant:
        """POST /_sandbox/reset: the tenant as its account first made it, same keys."""
        self.tenants.forget_tokens(tenant)
        freed = held(tenant)
        self._leaving(tenant, "reset")
        tenant.reset()
        give_back_memory(freed)
        return tenant

    def delete(self, name: str, caller: Tenant) -> None:
        """DELETE /_sandbox/tenants/{name}: stops and forgets every object of the tenant,
        and every tenant it made (theirs too). A tenant made by the control plane may be
        deleted by itself or by its maker (that very tenant, not a later one of its name);
        the fixtures' accounts are reset instead. Any other tenant is, to the caller, one that
        does not exist (404): a neighbour learns nothing of the names in use."""
        tenant = self.tenants.get(name)
        if tenant is None or (caller is not tenant and self._made_by.get(name) is not caller):
            raise TenantNotFound(UNKNOWN_TENANT.format(name=name))
        if name not in self._made_by:
            raise TenantNotDeletable(FIXTURE_TENANT.format(name=name))
        give_back_memory(self._forget(tenant))

    def expire_idle(self, max_idle: float, now: float | None = None) -> list[str]:
        """Deletes every tenant made by the control plane whose latest request is more than
        `max_idle` wall seconds old (before `now`, monotonic); the fixtures' accounts stay.
        Their names."""
        now = time.monotonic() if now is None else now
        idle = [tenant for name in self._made_by
                if (tenant := self.tenants.get(name)) is not None
                and now - tenant.last_request > max_idle]
        freed = sum(self._forget(tenant) for tenant in idle)
        if idle:
            self.expired += len(idle)
            give_back_memory(freed)
        return [tenant.name for tenant in idle]

    def _leaving(self, tenant: Tenant, why: str) -> None:
        for listener in self.leaving:
            listener(tenant, why)

    def _forget(self, tenant: Tenant) -> int:
        """The tenant and, first, every tenant it made (and theirs): deleting a maker
        deletes what it made, so nothing is left that only it could delete. The records
        they held."""
        if self.tenants.get(tenant.name) is not tenant:
            return 0  # gone already (a child of a tenant forgotten in the same sweep)
        freed = 0
        for name in [n for n, maker in self._made_by.items() if maker is tenant]:
            child = self.tenants.get(name)
            if child is not None:
                freed += self._forget(child)
        freed += held(tenant)
        self._leaving(tenant, "deleted")
        tenant.close()
        self._count(tenant, -1)  # while its makers are still there
        self.tenants.remove(tenant)
        self._made_by.pop(tenant.name, None)
        return freed
