"""Loading and checking the fixture files.

Every file is validated against its JSON Schema, then against the rules a schema
cannot say (unique ids, franchise links). A fault raises ConfigError naming the
file and the JSON path; the CLI turns it into one message and exit code 2.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import msgspec

from ..domain.rules import ServiceProfile
from ..schemas.fixtures import (ACCOUNTS_SCHEMA, COMPANIES_SCHEMA, SERVICE_SCHEMA)
from ..validate import ConfigError, load_yaml, validate_document

__all__ = ["ConfigError", "load_yaml", "validate_document"]  # where the loaders find them

# The files of a fixtures folder (companies.yaml and profiles.yaml may be left out).
FIXTURE_FILES = ("service.yaml", "accounts.yaml", "companies.yaml", "profiles.yaml")
PROFILES_FILE = "profiles.yaml"


class Fixtures(msgspec.Struct, frozen=True):
    """The checked fixture files: the service profile, accounts, companies and catalog settings."""

    directory: Path
    service: ServiceProfile
    accounts: list[dict[str, Any]]
    companies: list[dict[str, Any]]
    catalog: dict[str, Any]
    # The named data profiles: the bundled profiles.yaml, the folder's own over them by name.
    profiles: dict[str, Any] = msgspec.field(default_factory=dict)


def load_fixtures(directory: Path, *, vendor: str | None = None, aggregator: str | None = None,
                  sdk_prefix: str | None = None, sdk_global: str | None = None,
                  bundled_profiles: Path | None = None, today: date | None = None) -> Fixtures:
    """Read and check service.yaml, accounts.yaml, companies.yaml and profiles.yaml from a
    folder; `bundled_profiles`, the bundled profiles.yaml, gives the profiles the folder's
    own add to or replace by name; relative days count from `today` (the day the clocks
    start; None: the wall clock's)."""
    if not directory.is_dir():
        raise ConfigError(str(directory), "$", "fixtures folder not found")
    service_doc = _checked(directory / "service.yaml", SERVICE_SCHEMA)
    accounts_doc = _checked(directory / "accounts.yaml", ACCOUNTS_SCHEMA)
    companies_doc = _checked(directory / "companies.yaml", COMPANIES_SCHEMA, default={})

    service = ServiceProfile(vendor=vendor or service_doc["vendor"],
                             aggregator=aggregator or service_doc["aggregator"],
                             sdk_prefix=sdk_prefix or service_doc["sdkPrefix"],
                             products=dict(service_doc["products"]),
                             sdk_global=sdk_global or service_doc.get("sdkGlobal", "Transact"))
    accounts = accounts_doc["accounts"]
    companies = companies_doc.get("companies", [])
    _check_accounts(accounts, service, directory / "accounts.yaml")
    _check_companies(companies, service, directory / "companies.yaml")
    profiles = load_profiles(bundled_profiles, today=today) if bundled_profiles is not None else {}
    if bundled_profiles is None or directory.resolve() != bundled_profiles.parent.resolve():
        profiles.update(load_profiles(directory / PROFILES_FILE, missing_ok=True, today=today))
    return Fixtures(directory=directory, service=service, accounts=accounts,
                    companies=companies, catalog=companies_doc.get("catalog", {}),
                    profiles=profiles)


def load_profiles(path: Path, *, missing_ok: bool = False,
                  today: date | None = None) -> dict[str, Any]:
    """The named data profiles of a profiles.yaml (domain/data_profiles.py), each checked
    as a binding checks it: its schema, then its contradictions (relative days count from
    today)."""
    from ..domain.accounts.data_profiles import PROFILES_FILE_SCHEMA, bundled_problems, plain

    if missing_ok and not path.exists():
        return {}
    document = plain(load_yaml(path))  # unquoted days are dates to YAML
    validate_document(document, PROFILES_FILE_SCHEMA, str(path))
    found = bundled_problems(document["profiles"], today or date.today())
    if found:
        raise ConfigError.collected([(str(path), where, message) for where, message in found])
    return dict(document["profiles"])


def _checked(path: Path, schema: dict, default: Any = None) -> Any:
    if default is not None and not path.exists():
        return default
    document = load_yaml(path)
    validate_document(document, schema, str(path))
    return document


# What an account may also enable besides the service's products: the processor-link
# pipeline's stages, each named after its product (domain/links/processor_links.py).
AGGREGATOR_PRODUCTS = ("employer-classification", "recurring-transaction-detection")


def _check_accounts(accounts: list[dict[str, Any]], service: ServiceProfile, path: Path) -> None:
    seen_names: set[str] = set()
    seen_keys: set[str] = set()
    for i, account in enumerate(accounts):
        known = {*service.products, *AGGREGATOR_PRODUCTS}
        for j, product in enumerate(account.get("products", [])):
            if product not in known:
                raise ConfigError(str(path), f"$.accounts[{i}].products[{j}]",
                                  f"unknown product {product!r} (known: "
                                  f"{', '.join(sorted(known))})")
        if account["name"] in seen_names:
            raise ConfigError(str(path), f"$.accounts[{i}].name",
                              f"duplicate account name {account['name']!r}")
        if account["apiKey"] in seen_keys:
            raise ConfigError(str(path), f"$.accounts[{i}].apiKey", "duplicate apiKey")
        seen_names.add(account["name"])
        seen_keys.add(account["apiKey"])


def _check_companies(companies: list[dict[str, Any]], service: ServiceProfile, path: Path) -> None:
    by_id: dict[str, dict[str, Any]] = {}
    for i, company in enumerate(companies):
        if company["_id"] in by_id:
            raise ConfigError(str(path), f"$.companies[{i}]._id",
                              f"duplicate company id {company['_id']!r}")
        by_id[company["_id"]] = company
    for i, company in enumerate(companies):
        where = f"$.companies[{i}]"
        tags = company.get("tags", [])
        parent_id = company.get("franchiseParent")
        if parent_id is not None:
            parent = by_id.get(parent_id)
            if parent is None:
                raise ConfigError(str(path), f"{where}.franchiseParent",
                                  f"no company has the id {parent_id!r}")
            if "franchise-parent" not in parent.get("tags", []):
                raise ConfigError(str(path), f"{where}.franchiseParent",
                                  f"company {parent_id!r} is not tagged franchise-parent")
            if "franchise-child" not in tags:
                raise ConfigError(str(path), f"{where}.tags",
                                  "a company with franchiseParent must be tagged franchise-child")
        elif "franchise-child" in tags:
            raise ConfigError(str(path), f"{where}.franchiseParent",
                              "a franchise-child needs franchiseParent")
        for j, product in enumerate(company.get("connector", {}).get("availableProducts", [])):
            if product not in service.products:
                raise ConfigError(str(path), f"{where}.connector.availableProducts[{j}]",
                                  f"unknown product {product!r} (service.yaml lists "
                                  f"{', '.join(sorted(service.products))})")


