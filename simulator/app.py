"""The app factory: settings in, a wired aiohttp application out. No side effects on import."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

from aiohttp import web

from .clock import REAL, Clock, start_timestamp
from .domain.registry import TenantRegistry
from .load.fixtures import ConfigError
from .load.datagen import ProfileFactory
from .domain.rules import Limits, Rules
from .domain.tenants import TenantServices
from .edge.keys import SANDBOX, HostPolicy, Sandbox
from .load.loading import LoadedFixtures, load
from .edge.middleware import MAX_BODY_BYTES, edge_middleware
from .edge.routes import add_routes, routes_at
from .transport.scheduler import RealTimer, Runner
from .settings import Settings
from .edge.snapshot import RestoreAdmission, restore_budget
from .edge.state_file import STATE_FILE, StateFile
from .transport.dispatcher import ATTEMPT_TIMEOUT, Dispatcher
from .transport.policy import OutboundPolicy

log = logging.getLogger("payroll_sandbox.tenants")


def build_registry(settings: Settings, *, clock: Clock | None = None,
                   loaded: LoadedFixtures | None = None) -> TenantRegistry:
    """The tenant registry of the fixtures' accounts (not yet open: create_app opens it).

    Raises ConfigError (file and JSON path) when a fixture is wrong. With `clock`,
    every tenant reads that one clock (tests); otherwise each gets its own.
    """
    loaded = loaded or load(settings)
    fixtures = loaded.fixtures

    pinned = None if settings.clock_start is None else start_timestamp(settings.clock_start)

    def clock_factory(start: float | None = None) -> Clock:
        """A tenant's clock: from `start` (its own pinned start), else --clock-start, else now."""
        return clock or Clock(mode=settings.clock, time_scale=settings.time_scale,
                              start=pinned if start is None else start)

    if not any(a["environment"] == settings.environment for a in fixtures.accounts):
        raise ConfigError(str(fixtures.directory / "accounts.yaml"), "$.accounts",
                          f"no account has environment {settings.environment!r}")
    for number, account in enumerate(fixtures.accounts):  # seeded at each start and reset
        if len(account.get("linkedAccounts", [])) > settings.max_linked_accounts:
            raise ConfigError(str(fixtures.directory / "accounts.yaml"),
                              f"$.accounts[{number}].linkedAccounts",
                              f"more than --max-linked-accounts {settings.max_linked_accounts}")
    limits = Limits(**{name: getattr(settings, name) for name in Limits.__struct_fields__
                       if hasattr(settings, name)})  # a tenant's bounds: the settings' own
    rules = Rules(service=fixtures.service, scenarios=loaded.scenarios, catalog=loaded.catalog,
                  index=loaded.index, profiles=ProfileFactory(settings.seed), seed=settings.seed,
                  limits=limits, data_profiles=fixtures.profiles)
    return TenantRegistry(rules, environment=settings.environment,
                          clock_factory=clock_factory, accounts=fixtures.accounts,
                          max_tenants=settings.max_tenants,
                          max_per_maker=settings.max_tenants_per_maker)


@contextmanager
def long_lived() -> Iterator[None]:
    """For building what lives as long as the process (the catalog, its index, the app):
    no collection while it is made, then it is frozen out of the collector's way, so a
    full collection (after every tenant reset or delete) does not walk the catalog."""
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        gc.enable()


# The collector's thresholds for a server process (Python's: 700, 10, 10). A task creation
# keeps ~15 tracked objects, so the default collected every ~50 creations over a growing
# heap of stored tasks; this is 14 times rarer (bench/throughput.py), and cycles wait for
# 10,000 new objects at most. `serve`, `exec` and this repository's suite set them; a
# customer's test process keeps Python's.
SERVER_GC_THRESHOLDS = (10_000, 10, 10)


def tenant_services(dispatcher: Dispatcher, timer: RealTimer | None = None) -> TenantServices:
    """What every tenant works with: the dispatcher as its outbox's transport, and a runner
    of its timeline that waits for that transport between jobs and stops between two jobs
    once the server is stopping."""
    return TenantServices(dispatcher=dispatcher, timer=timer,
                          run=lambda tenant: Runner(tenant, dispatcher.settle, dispatcher.stopping))


def create_app(settings: Settings, *, clock: Clock | None = None,
               registry: TenantRegistry | None = None) -> web.Application:
    registry = registry or build_registry(settings, clock=clock)
    service = registry.service
    real = settings.clock == REAL and clock is None
    dispatcher = Dispatcher(
        vendor=service.vendor, seed=settings.seed, default_url=settings.webhook_url,
        policy=OutboundPolicy.from_settings(settings), grace=settings.shutdown_grace,
        timeout=settings.webhook_timeout or ATTEMPT_TIMEOUT / (settings.time_scale if real else 1))
    registry.open(tenant_services(dispatcher, RealTimer() if real else None))
    routes = routes_at(service.aggregator)
    sandbox = Sandbox(settings=settings, registry=registry, dispatcher=dispatcher,
                      operations=list(routes.operations),
                      host_policy=HostPolicy.from_settings(settings),
                      large_restores=RestoreAdmission(restore_budget(registry.rules.limits)))
    app = web.Application(client_max_size=MAX_BODY_BYTES,
                          middlewares=[edge_middleware])
    app[SANDBOX] = sandbox
    add_routes(app, routes)
    app.cleanup_ctx.append(_background_context)
    app[STATE_FILE] = StateFile(sandbox)  # --state-file (nothing without it)
    # --state-file: the last save, before deliveries stop (pending retries stay pending).
    app.on_shutdown.append(app[STATE_FILE].on_shutdown)
    # On shutdown (SIGTERM), before the server waits for handlers: in-flight webhook
    # attempts finish or are recorded as interrupted, so no handler waits on them.
    app.on_shutdown.append(_stop_deliveries)
    return app


async def _stop_deliveries(app: web.Application) -> None:
    sandbox = app[SANDBOX]
    await sandbox.dispatcher.stop(list(sandbox.registry.tenants))


async def _background_context(app: web.Application) -> AsyncIterator[None]:
    """The webhook client session, the real-mode timer and the idle-tenant sweep live as
    long as the app."""
    sandbox = app[SANDBOX]
    timer = sandbox.registry.services.timer
    state_file = app[STATE_FILE]
    state_file.restore()  # --state-file: every tenant as saved (ConfigError when it is torn)
    await sandbox.dispatcher.start()
    if timer is not None:
        timer.start()
    expiry = sandbox.settings.tenant_idle_expiry
    sweep = asyncio.create_task(_expire_idle_tenants(sandbox.registry, expiry)) if expiry else None
    state_file.start()  # saved every --state-interval seconds when something changed
    yield
    await state_file.stop()
    if sweep is not None:
        sweep.cancel()
    if timer is not None:
        timer.shutdown()
    await sandbox.dispatcher.close()


async def _expire_idle_tenants(registry: TenantRegistry, expiry: float) -> None:
    """Every quarter of the expiry (at most a minute), the tenants idle past it go."""
    while True:
        await asyncio.sleep(min(60.0, expiry / 4))
        gone = registry.expire_idle(expiry)
        if gone:
            log.info("deleted %d tenants idle for more than %gs: %s", len(gone), expiry,
                     ", ".join(gone))
