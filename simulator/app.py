"""The app factory: settings in, a wired aiohttp application out. No side effects on import."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from .catalog import build_companies
from .clock import REAL, Clock
from .domain.companies import Catalog
from .domain.search import SearchIndex
from .domain.store import Store
from .domain.tenants import Tenants
from .fixtures import ConfigError, Fixtures, load_fixtures
from .journal import Journal
from .domain.tasks import HAPPY_PATH, TaskEngine
from .datagen import ProfileFactory
from .domain.linked_accounts import LinkedAccounts
from .domain.tenants import Tenant
from .domain.processor_links import DEFAULT_SCENARIO as PROCESSOR_DEFAULT
from .domain.processor_links import ProcessorLinks
from .keys import SANDBOX, Sandbox
from .middleware import MAX_BODY_BYTES, cors_middleware, error_middleware, journal_middleware
from .routes import OPERATIONS, add_routes
from .scenarios.loader import Scenario, load_scenarios
from .scheduler import Runners
from .settings import Settings
from .webhooks.dispatcher import ATTEMPT_TIMEOUT, Dispatcher


@dataclass(frozen=True)
class LoadedFixtures:
    """The read-only part of the state: checked fixtures, the catalog and its index."""

    fixtures: Fixtures
    catalog: Catalog
    index: SearchIndex
    scenarios: dict[str, Scenario]


def load(settings: Settings) -> LoadedFixtures:
    """Load and check fixtures and scenarios, build the catalog (ConfigError when one is wrong)."""
    fixtures = load_fixtures(settings.fixtures, vendor=settings.vendor,
                             aggregator=settings.aggregator, sdk_prefix=settings.sdk_prefix)
    scenarios = load_scenarios(settings.scenarios)
    for default in (HAPPY_PATH, PROCESSOR_DEFAULT):
        if default not in scenarios:
            raise ConfigError(str(settings.scenarios), "$", f"no {default}.yaml: it is a default")
    known_companies = {c["_id"] for c in fixtures.companies}
    for number, account in enumerate(fixtures.accounts):
        for entry_number, entry in enumerate(account.get("linkedAccounts", [])):
            if entry["company"] not in known_companies:
                raise ConfigError(str(fixtures.directory / "accounts.yaml"),
                                  f"$.accounts[{number}].linkedAccounts[{entry_number}].company",
                                  f"no hand-written company has the id {entry['company']!r}")
    for number, company in enumerate(fixtures.companies):
        name = company.get("defaultScenario")
        if name is not None and (name not in scenarios or scenarios[name].kind != "task"):
            raise ConfigError(str(fixtures.directory / "companies.yaml"),
                              f"$.companies[{number}].defaultScenario",
                              f"no task scenario named {name!r}")
    catalog = Catalog(build_companies(fixtures, settings.seed))
    return LoadedFixtures(fixtures=fixtures, catalog=catalog, index=SearchIndex(catalog.ordered),
                          scenarios=scenarios)


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
                  clock_factory=clock_factory, scenarios=loaded.scenarios)
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
    store = store or build_store(settings, clock=clock)
    engine = TaskEngine(store.scenarios, scope_of=store.service.products.get)
    real = settings.clock == REAL and clock is None
    dispatcher = Dispatcher(
        vendor=store.service.vendor, seed=settings.seed, default_url=settings.webhook_url,
        timeout=settings.webhook_timeout or ATTEMPT_TIMEOUT / (settings.time_scale if real else 1))
    runners = Runners(real=real, settle=dispatcher.settle)
    profiles = ProfileFactory(settings.seed)
    linked = LinkedAccounts(
        lambda tenant, identifier, company: profiles.profile(
            tenant.name, identifier, company.id, company.name, tenant.clock.now().date()))
    engine.linked_accounts = linked
    engine.on_final.append(linked.on_task_final)
    engine.step_hooks["linkedAccount"] = linked.on_step
    engine.step_hooks["piiDataDeleted"] = lambda tenant, task, _: linked.delete_pii(
        tenant, task.identifier, task.id, even_without_accounts=True)

    def ready_made_accounts(tenant: Tenant) -> None:
        for entry in store.accounts[tenant.name].get("linkedAccounts", []):
            company = tenant.companies.require(entry["company"])
            account = linked.create(tenant, entry["identifier"], company,
                                    entry.get("product", "deposit"), emit=False)
            account.connected = entry.get("connected", True)

    for tenant in store.tenants:
        dispatcher.attach(tenant)
        runners.add(tenant)
        ready_made_accounts(tenant)
    store.on_tenant += [dispatcher.attach, runners.add, ready_made_accounts]
    operations = [op.at(store.service.aggregator) for op in OPERATIONS]
    sandbox = Sandbox(settings=settings, store=store, engine=engine, dispatcher=dispatcher,
                      runners=runners, journal=Journal(), linked_accounts=linked,
                      processor_links=ProcessorLinks(store.scenarios, store.service.aggregator),
                      operations=operations)
    app = web.Application(client_max_size=MAX_BODY_BYTES,
                          middlewares=[cors_middleware, journal_middleware, error_middleware])
    app[SANDBOX] = sandbox
    add_routes(app, operations)
    app.cleanup_ctx.append(_background_context)
    # On shutdown (SIGTERM), before the server waits for handlers: in-flight webhook
    # attempts finish or are recorded as interrupted, so no handler waits on them.
    app.on_shutdown.append(_stop_deliveries)
    return app


async def _stop_deliveries(app: web.Application) -> None:
    await app[SANDBOX].dispatcher.stop()


async def _background_context(app: web.Application) -> AsyncIterator[None]:
    """The webhook client session and the real-mode timer live as long as the app."""
    sandbox = app[SANDBOX]
    await sandbox.dispatcher.start()
    sandbox.runners.start()
    yield
    sandbox.runners.shutdown()
    await sandbox.dispatcher.close()
