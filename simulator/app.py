"""The app factory: settings in, a wired aiohttp application out. No side effects on import."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from .catalog import build_companies
from .clock import Clock
from .domain.companies import Catalog
from .domain.search import SearchIndex
from .domain.store import Store
from .domain.tenants import Tenants
from .fixtures import ConfigError, Fixtures, load_fixtures
from .journal import Journal
from .keys import JOURNAL, OPENAPI, SETTINGS, STORE
from .middleware import MAX_BODY_BYTES, auth_middleware, error_middleware, journal_middleware
from .routes import access, companies, control, meta
from .settings import Settings


@dataclass(frozen=True)
class LoadedFixtures:
    """The read-only part of the state: checked fixtures, the catalog and its index."""

    fixtures: Fixtures
    catalog: Catalog
    index: SearchIndex


def load(settings: Settings) -> LoadedFixtures:
    """Load and check the fixtures and build the catalog (ConfigError when one is wrong)."""
    fixtures = load_fixtures(settings.fixtures, vendor=settings.vendor,
                             aggregator=settings.aggregator, sdk_prefix=settings.sdk_prefix)
    catalog = Catalog(build_companies(fixtures, settings.seed))
    return LoadedFixtures(fixtures=fixtures, catalog=catalog, index=SearchIndex(catalog.ordered))


def build_store(settings: Settings, *, clock: Clock | None = None,
                loaded: LoadedFixtures | None = None) -> Store:
    """The whole state: the catalog and a tenant per account of the fixtures.

    Raises ConfigError (file and JSON path) when a fixture is wrong. With `clock`,
    every tenant reads that one clock (tests); otherwise each gets its own.
    """
    loaded = loaded or load(settings)
    fixtures = loaded.fixtures

    def clock_factory() -> Clock:
        return clock or Clock(mode=settings.clock, time_scale=settings.time_scale)

    store = Store(service=fixtures.service, catalog=loaded.catalog, index=loaded.index,
                  tenants=Tenants(settings.environment), seed=settings.seed,
                  clock_factory=clock_factory)
    for account in fixtures.accounts:
        store.add_account(account)
    try:
        store.tenants.default()
    except LookupError:
        raise ConfigError(str(fixtures.directory / "accounts.yaml"), "$.accounts",
                          f"no account has environment {settings.environment!r}") from None
    return store


def create_app(settings: Settings, *, clock: Clock | None = None,
               store: Store | None = None) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES,
                          middlewares=[journal_middleware, error_middleware, auth_middleware])
    app[SETTINGS] = settings
    app[STORE] = store or build_store(settings, clock=clock)
    app[JOURNAL] = Journal()
    app[OPENAPI] = {}  # built on first request
    for module in (meta, access, companies, control):
        app.add_routes(module.routes)
    return app
