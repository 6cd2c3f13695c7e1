"""The read-only part of the state, loaded once: checked fixtures and scenarios, the catalog
and its search index. Nothing here needs aiohttp, so the commands that only read files
(`fixtures validate`, `scenarios list|validate`) start without it."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import msgspec

from ..clock import start_day, start_problem
from .catalog import build_companies
from ..domain.companies.companies import Catalog
from ..domain.links.processor_links import DEFAULT_SCENARIO as PROCESSOR_DEFAULT
from ..domain.companies.search import SearchIndex
from ..domain.tasks.choosing import HAPPY_PATH
from .fixtures import FIXTURE_FILES, PROFILES_FILE, ConfigError, Fixtures, load_fixtures
from .loadcache import cached
from .scenarios.loader import Scenario, load_all_scenarios, resolve_products, scenario_folders
from ..settings import Settings, bundled_dir

__all__ = ["LoadedFixtures", "load"]


class LoadedFixtures(msgspec.Struct, frozen=True):
    """The read-only part of the state: checked fixtures, the catalog and its index."""

    fixtures: Fixtures
    catalog: Catalog
    index: SearchIndex
    scenarios: dict[str, Scenario]


def load(settings: Settings) -> LoadedFixtures:
    """Load and check fixtures and scenarios, build the catalog (ConfigError when one is
    wrong); what the last start with the same files built when it is cached (loadcache)."""
    folders = scenario_folders(settings.scenarios, bundled_dir("scenarios"))
    inputs = [*(("file", settings.fixtures / name) for name in FIXTURE_FILES),
              ("file", bundled_dir("fixtures") / PROFILES_FILE),  # a folder's own go over them
              *(("folder", folder) for folder in folders)]
    named = (str(settings.fixtures.resolve()), settings.vendor, settings.aggregator,
             settings.sdk_prefix, settings.sdk_global, settings.clock_start)
    return cached(inputs, named, lambda: _from_files(settings, folders), LoadedFixtures)


def _from_files(settings: Settings, folders: list[Path]) -> LoadedFixtures:
    fixtures = load_fixtures(settings.fixtures, vendor=settings.vendor,
                             aggregator=settings.aggregator, sdk_prefix=settings.sdk_prefix,
                             sdk_global=settings.sdk_global,
                             bundled_profiles=bundled_dir("fixtures") / PROFILES_FILE,
                             today=start_day(settings.clock_start))
    scenarios = load_all_scenarios(folders)
    scenarios = resolve_products(scenarios, fixtures.service.products)  # the products each fits
    for default, kind in ((HAPPY_PATH, "task"), (PROCESSOR_DEFAULT, "processor-link")):
        if scenarios[default].kind != kind:
            raise ConfigError(str(settings.scenarios / f"{default}.yaml"), "$.kind",
                              f"{default} is the default {kind} scenario: it must be one")
    known_companies = {c["_id"] for c in fixtures.companies}
    catalog = Catalog(build_companies(fixtures))
    file = str(fixtures.directory / "accounts.yaml")
    for number, account in enumerate(fixtures.accounts):
        problem = start_problem(account.get("clock", {}).get("start", "1970-01-01T00:00:00Z"))
        if problem is not None:
            raise ConfigError(file, f"$.accounts[{number}].clock.start", problem)
        for entry_number, entry in enumerate(account.get("linkedAccounts", [])):
            where = f"$.accounts[{number}].linkedAccounts[{entry_number}]"
            if entry["company"] not in known_companies:
                raise ConfigError(file, f"{where}.company",
                                  f"no hand-written company has the id {entry['company']!r}")
            _check_profile(entry, fixtures.profiles, file, where, start_day(settings.clock_start))
        for entry_number, entry in enumerate(account.get("autopilots", [])):
            _check_autopilot(entry, scenarios, catalog, account.get("products"), file,
                             f"$.accounts[{number}].autopilots[{entry_number}]")
    for number, company in enumerate(fixtures.companies):
        name = company.get("defaultScenario")
        if name is not None and (name not in scenarios or scenarios[name].kind != "task"):
            raise ConfigError(str(fixtures.directory / "companies.yaml"),
                              f"$.companies[{number}].defaultScenario",
                              f"no task scenario named {name!r}")
    return LoadedFixtures(fixtures=fixtures, catalog=catalog, index=SearchIndex(catalog.ordered),
                          scenarios=scenarios)


def _check_autopilot(entry: dict, scenarios: dict, catalog: Catalog, products: list | None,
                     file: str, where: str) -> None:
    """An account's autopilot, as PUT /_sandbox/users/{identifier}/autopilot checks one."""
    from ..domain.flow.autopilot import Autopilot
    from ..domain.flow.sdk import autopilot_problem
    from ..domain.tenants import DEFAULT_PRODUCTS

    try:
        autopilot = msgspec.convert({k: v for k, v in entry.items() if k != "identifier"},
                                    Autopilot)
    except msgspec.ValidationError as error:
        message, _, path = str(error).partition(" - at `$")
        raise ConfigError(file, where + path.rstrip("`"), message) from None
    problem = autopilot_problem(scenarios, catalog, products or DEFAULT_PRODUCTS, autopilot)
    if problem is not None:
        raise ConfigError(file, where + problem[0][1:], problem[1])


def _check_profile(entry: dict, profiles: dict, file: str, where: str, today: date) -> None:
    """A ready-made linked account's `profile` and `data` (data_profiles.py), as a binding
    checks them (relative days from `today`, the day the clocks start)."""
    from ..domain.accounts import data_profiles

    name, data = entry.get("profile"), entry.get("data")
    if name is not None and name not in profiles:
        raise ConfigError(file, f"{where}.profile", f"no data profile is named {name!r} "
                          f"(known: {', '.join(sorted(profiles))})")
    if data is None:
        return
    data = entry["data"] = data_profiles.plain(data)  # unquoted days are dates to YAML
    found = data_profiles.problems(data, today, f"{where}.data", whole=name is None)
    if not found and name is not None:
        found = data_profiles.problems(data_profiles.chosen(profiles[name], data), today,
                                       f"{where}.data")
    if found:
        raise ConfigError.collected([(file, path, message) for path, message in found])
