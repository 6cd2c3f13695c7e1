"""Companies: the catalog records and how they are shown.

A Company is stored with its stored tags only; the `manual-deposits` tag is
derived per account when the company is shown or filtered (spec: Company tags).
"""

from __future__ import annotations

import random
import re
from functools import cache
from typing import Any

import msgspec

from ...errors import CompanyNotFound, field_detail
from ..shapes import UNSET, Maybe, View, choice, field, of
from ..stored import Count, LoadError, Stored, loaded, schema, stored
from ..sections import STRING, Sections, obj

OPERATIONAL = "operational"
UNDER_MAINTENANCE = "under-maintenance"
DISABLED = "disabled"

FRANCHISE_PARENT = "franchise-parent"
FRANCHISE_CHILD = "franchise-child"
MANUAL_DEPOSITS = "manual-deposits"

# The slim connector in search results carries only these capabilities (spec: Company).
SLIM_CAPABILITIES = ("distributionTypes", "supportedPaymentMethods")

UNKNOWN_COMPANY = "No company has the id {company_id!r}."

# The values a company's fields take (the fixture files' schema, schemas/fixtures.py, and
# the answers' say the same).
STORED_TAGS = ["payroll-provider", "gig-economy", "franchise-parent", "franchise-child"]
DERIVED_TAGS = ["manual-deposits"]
COMPANY_STATUSES = ["operational", "under-maintenance", "disabled"]
SCOPES = ["user-link", "pay-link"]
AUTHENTICATION_METHODS = ["standard-auth", "true-auth", "true-auth-desktop"]


def set_attributes(instance: object, state: dict) -> None:
    """`__setstate__` of a cached load's plain classes (the catalog, the search index): the
    attributes back one at a time, as __init__ sets them. Their values stay inline;
    pickle's default, a filled-in __dict__, made every attribute read slower (a search,
    3%). The structs it holds pickle as they are."""
    for name, value in state.items():
        object.__setattr__(instance, name, value)


class Company(Stored):
    """A catalog company: its connector, products, capabilities and branding."""

    id: str
    name: str
    status: str
    tags: tuple[str, ...]
    franchise_parent: str | None
    branding: dict[str, Any]
    connector_id: str
    available_products: tuple[str, ...]
    capabilities: dict[str, Any]
    scopes: frozenset[str]
    default_scenario: str | None = None
    # Products under maintenance when the status is under-maintenance (empty: all of them).
    maintenance_products: tuple[str, ...] = ()
    # The merchant's maximum number of payment methods per user (pay-link), if any.
    max_payment_methods: Count | None = None

    def branding_summary(self) -> dict[str, Any]:
        """`company` in task events: `_id`, `name`, `branding` (spec: Task events)."""
        return {"_id": self.id, "name": self.name, "branding": self.branding}

    def under_maintenance_for(self, product: str) -> bool:
        return self.status == UNDER_MAINTENANCE and (
            not self.maintenance_products or product in self.maintenance_products)

    def has_programmatic_authentication(self) -> bool:
        return bool(self.capabilities.get("headlessAuthentication")
                    or self.capabilities.get("ssoAuthentication"))

    def supports_products(self, products: list[str]) -> bool:
        return all(p in self.available_products for p in products)


class ManualDepositRule(Stored, frozen=True):
    """The account-level manual-deposit configuration (accounts.yaml `manualDeposits`; a
    snapshot's `tenant.manualDeposits`)."""

    enabled: bool = False
    companies: frozenset[str] = frozenset()
    without_programmatic_authentication: bool = False

    @classmethod
    def from_fixture(cls, raw: dict[str, Any] | None) -> ManualDepositRule:
        raw = raw or {}
        return cls(enabled=raw.get("enabled", bool(raw)),
                   companies=frozenset(raw.get("companies", ())),
                   without_programmatic_authentication=raw.get(
                       "withoutProgrammaticAuthentication", False))

    def applies_to(self, company: Company) -> bool:
        return self.enabled and (company.id in self.companies or (
            self.without_programmatic_authentication
            and not company.has_programmatic_authentication()))


def effective_tags(company: Company, rule: ManualDepositRule) -> list[str]:
    """Stored tags plus the derived `manual-deposits` tag when the account's rule says so."""
    tags = list(company.tags)
    if rule.applies_to(company):
        tags.append(MANUAL_DEPOSITS)
    return tags


def _record(company: Company, rule: ManualDepositRule, capabilities: dict[str, Any],
            **more: Any) -> dict[str, Any]:
    """`_id`, `name`, `status`, `branding`, `tags`, `franchiseParent` (if any), `more`, and
    the connector with these `capabilities`."""
    record: dict[str, Any] = {
        "_id": company.id,
        "name": company.name,
        "status": company.status,
        "branding": company.branding,
        "tags": effective_tags(company, rule),
    }
    if company.franchise_parent:
        record["franchiseParent"] = company.franchise_parent
    record.update(more)
    record["connector"] = {
        "_id": company.connector_id,
        "availableProducts": list(company.available_products),
        "capabilities": capabilities,
    }
    return record


def search_record(company: Company, rule: ManualDepositRule) -> dict[str, Any]:
    """A search result item: the slim connector (SLIM_CAPABILITIES only)."""
    return _record(company, rule, {k: company.capabilities[k] for k in SLIM_CAPABILITIES
                                   if k in company.capabilities})


def full_record(company: Company, rule: ManualDepositRule) -> dict[str, Any]:
    """Company List and Company Details: the full connector capabilities and the scopes."""
    return _record(company, rule, dict(company.capabilities), scopes=sorted(company.scopes))


class Catalog:
    """Every company of the fixtures, by id, in a stable order."""

    __setstate__ = set_attributes  # read back from the start-up cache

    def __init__(self, companies: list[Company]) -> None:
        self._by_id = {c.id: c for c in companies}
        self.ordered = sorted(companies, key=lambda c: (c.name.casefold(), c.id))
        self._children: dict[str, list[Company]] = {}
        for company in self.ordered:
            if company.franchise_parent:
                self._children.setdefault(company.franchise_parent, []).append(company)

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, company_id: str) -> Company | None:
        return self._by_id.get(company_id)

    def children_of(self, parent_id: str) -> list[Company]:
        return self._children.get(parent_id, [])


class CompanyDirectory:
    """The catalog as one tenant sees it: the shared catalog plus this tenant's changes.

    Control-plane changes (create, update, status, delete) stay in the tenant; the
    100,000-company base is shared by every tenant and never copied.
    """

    def __init__(self, base: Catalog, index: Any) -> None:
        self.base = base
        self.index = index
        self.changed: dict[str, Company | None] = {}  # id -> replacement; None: deleted
        self._overlay: Any = None
        self._ordered: list[Company] | None = None

    def get(self, company_id: str) -> Company | None:
        if company_id in self.changed:
            return self.changed[company_id]
        return self.base.get(company_id)

    def require(self, company_id: str, path: str | None = None) -> Company:
        """The company, or 404 company-not-found (naming `path`, where a body gave the id)."""
        company = self.get(company_id)
        if company is None:
            raise CompanyNotFound(UNKNOWN_COMPANY.format(company_id=company_id), details=[
                field_detail(path, "unknown company id")] if path else None)
        return company

    def ordered(self) -> list[Company]:
        if not self.changed:
            return self.base.ordered
        if self._ordered is None:
            kept = [c for c in self.base.ordered if c.id not in self.changed]
            kept += [c for c in self.changed.values() if c is not None]
            self._ordered = sorted(kept, key=lambda c: (c.name.casefold(), c.id))
        return self._ordered

    def children_of(self, parent_id: str) -> list[Company]:
        children = [c for c in self.base.children_of(parent_id) if c.id not in self.changed]
        children += [c for c in self.changed.values()
                     if c is not None and c.franchise_parent == parent_id]
        return children

    def put(self, company: Company) -> None:
        self.changed[company.id] = company
        self._changes_made()

    def delete(self, company_id: str) -> None:
        self.changed[company_id] = None
        self._changes_made()

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({"companies": {"type": "array", "items": obj(
        {"id": STRING, "company": {"anyOf": [schema(Company), {"type": "null"}]}})}})

    def dump(self) -> dict[str, Any]:
        """The tenant's changes to the catalog (a deleted company: null)."""
        return {"companies": [{"id": company_id,
                               "company": None if company is None else stored(company)}
                              for company_id, company in self.changed.items()]}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        changed = []
        for number, entry in enumerate(document["companies"]):
            company = loaded(entry["company"], Company | None, f"$.companies[{number}].company")
            if company is not None and company.id != entry["id"]:
                raise LoadError(f"$.companies[{number}].company.id", "is not the entry's id")
            changed.append((entry["id"], company))
        return {"changed": changed}

    def restore(self, changed: list[tuple[str, Company | None]]) -> None:
        """A snapshot's changes to the catalog, in their order."""
        self.changed = dict(changed)
        self._changes_made()

    def overlay_index(self) -> Any:
        """A small search index over this tenant's created and changed companies, of the
        shared index's own kind (search.py builds both; this module does not import it)."""
        if self._overlay is None:
            self._overlay = type(self.index)(c for c in self.changed.values() if c is not None)
        return self._overlay

    def _changes_made(self) -> None:
        self._overlay = None
        self._ordered = None


# -- companies from the fixtures' entries ---------------------------------------------------

DEFAULT_CAPABILITIES: dict[str, Any] = {
    "headlessAuthentication": True,
    "ssoAuthentication": False,
    "authenticationMethods": ["standard-auth"],
    "distributionActions": ["create", "update", "delete"],
    "distributionTypes": ["total", "percent", "fixed"],
    "supportedPaymentMethods": [],
}
EMPLOYER_PRODUCTS = ("deposit", "verify")


def company_from_fixture(raw: dict[str, Any], service: Any) -> Company:
    """A Company from a companies.yaml entry, with the defaults filled in (`service`: the
    rules.ServiceProfile, for the products' scopes)."""
    connector = raw.get("connector", {})
    products = tuple(connector.get("availableProducts", EMPLOYER_PRODUCTS))
    return Company(
        id=raw["_id"],
        name=raw["name"],
        status=raw.get("status", OPERATIONAL),
        tags=tuple(raw.get("tags", ())),
        franchise_parent=raw.get("franchiseParent"),
        branding=raw.get("branding") or default_branding(raw["_id"], raw["name"]),
        connector_id=connector.get("_id", f"{raw['_id']}-connector"),
        available_products=products,
        capabilities={**DEFAULT_CAPABILITIES, **connector.get("capabilities", {})},
        scopes=service.scopes_of(products),
        default_scenario=raw.get("defaultScenario"),
        max_payment_methods=raw.get("maxPaymentMethods"),
    )


def default_branding(company_id: str, name: str) -> dict[str, Any]:
    shade = random.Random(company_id).getrandbits(24)
    return {"color": f"#{shade:06x}",
            "logo": {"url": f"https://logos.sandbox.invalid/{slug(name) or company_id}.svg",
                     "backgroundColor": "#ffffff"}}


_SLUG = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-")


# -- how a company is shown (the API's Company; domain/shapes.py derives the schemas) ------

Name = of(str, min_length=1, max_length=200)
Tag = choice(*STORED_TAGS, *DERIVED_TAGS)


class Logo(View, kw_only=True):
    url: Maybe[str] = UNSET
    background_color: Maybe[str] = UNSET


class Branding(View, kw_only=True):
    color: Maybe[str] = UNSET
    logo: Maybe[Logo] = UNSET


class SearchCapabilities(View, kw_only=True):
    distribution_types: Maybe[list[str]] = UNSET
    supported_payment_methods: Maybe[list[str]] = UNSET


class SearchConnector(View, kw_only=True):
    id: str = field(name="_id")
    available_products: list[str]
    capabilities: SearchCapabilities


class SearchCompany(View, kw_only=True):
    id: str = field(name="_id")
    name: Name
    status: choice(*COMPANY_STATUSES)
    branding: Branding
    tags: list[Tag]
    franchise_parent: Maybe[str] = UNSET
    connector: SearchConnector


class Capabilities(SearchCapabilities, kw_only=True):
    headless_authentication: Maybe[bool] = UNSET
    sso_authentication: Maybe[bool] = UNSET
    authentication_methods: Maybe[list[choice(*AUTHENTICATION_METHODS)]] = UNSET
    distribution_actions: Maybe[list[str]] = UNSET


class Connector(SearchConnector, kw_only=True):
    capabilities: Capabilities


class FullCompany(SearchCompany, kw_only=True):
    scopes: Maybe[list[choice(*SCOPES)]] = UNSET
    connector: Connector


class CompanySummary(View, kw_only=True):
    # The company as task events and task records name it.
    id: of(str, min_length=1) = field(name="_id")
    name: str
    branding: Branding

