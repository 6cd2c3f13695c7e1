"""Building the company catalog: hand-written fixture companies plus a generated part.

`catalog: {generate: N}` in companies.yaml adds N realistic companies from Faker,
seeded, franchise networks included, so the same seed gives the same catalog and
ids, and 100,000 companies is one setting.
"""

from __future__ import annotations

import random
from typing import Any

from ..domain.companies.companies import (DEFAULT_CAPABILITIES, DISABLED, EMPLOYER_PRODUCTS,
                               FRANCHISE_CHILD, FRANCHISE_PARENT, OPERATIONAL,
                               UNDER_MAINTENANCE, Company, company_from_fixture)
from ..domain.rules import ServiceProfile
from .fixtures import Fixtures
from .pools import faker_pools

MERCHANT_PRODUCTS = ("switch", "present")

INDUSTRIES = (
    "Logistics", "Dental Care", "Construction", "Health Partners", "Home Care", "Staffing",
    "Manufacturing", "Landscaping", "Security Services", "Medical Group", "Auto Group",
    "Engineering", "Hospitality Group", "Foods", "Distribution", "Plumbing", "Electric",
    "Roofing", "Cleaning Services", "Transport", "Veterinary Clinic", "Senior Living",
    "Insurance Agency", "Credit Union", "Brewing Company", "Bakery", "Pharmacy", "Academy",
    "School District", "Hospital", "Nursing Center", "Warehouse", "Trucking", "Farms",
    "Printing", "Architecture", "Consulting", "Marketing", "Software", "Labs",
)
FRANCHISE_KINDS = (
    "Pizza", "Burgers", "Fitness", "Auto Care", "Coffee", "Tacos", "Car Wash", "Chicken",
    "Donuts", "Cleaners", "Tutoring", "Pet Grooming", "Hardware", "Ice Cream", "Smoothies",
)
GIG_KINDS = ("Delivery", "Rides", "Couriers", "Tasks", "Drivers", "Shoppers")
PAYROLL_KINDS = ("Payroll", "Payroll Services", "HR Solutions", "Workforce", "Paychecks")
MERCHANT_KINDS = ("Streaming", "Wireless", "Internet", "Energy", "Gym", "Music", "Insurance",
                  "Water Utility", "Cloud Storage", "News")
STATUS_WEIGHTS = ((OPERATIONAL, 0.92), (UNDER_MAINTENANCE, 0.05), (DISABLED, 0.03))


# The generated companies' seed. The catalog is a function of the fixtures alone, the
# same on every start whatever `--seed` is: ids a developer kept from one run still name
# the same companies in the next (DESIGN: Commands); `--seed` drives ids and records.
CATALOG_SEED = 1


def build_companies(fixtures: Fixtures, seed: int = CATALOG_SEED) -> list[Company]:
    companies = [company_from_fixture(raw, fixtures.service) for raw in fixtures.companies]
    count = fixtures.catalog.get("generate", 0)
    if count:
        share = fixtures.catalog.get("franchiseShare", 0.1)
        companies.extend(generate_companies(count, seed, fixtures.service, franchise_share=share))
    return companies


def generate_companies(count: int, seed: int, service: ServiceProfile, *,
                       franchise_share: float = 0.1) -> list[Company]:
    """`count` realistic companies from Faker, the same for the same seed."""
    last_names, cities, words, suffixes_of_companies = word_pools(seed, count)
    rng = random.Random(f"{seed}:catalog")

    def last_name() -> str:
        return rng.choice(last_names)

    def company_name() -> str:
        # The shapes of Faker's en_US company names.
        shape = rng.randrange(3)
        if shape == 0:
            return f"{last_name()} {rng.choice(suffixes_of_companies)}"
        if shape == 1:
            return f"{last_name()}-{last_name()}"
        return f"{last_name()}, {last_name()} and {last_name()}"

    suffixes = random.Random(f"{seed}:catalog:duplicates")  # ids do not depend on name clashes
    companies: list[Company] = []
    names: set[str] = set()

    def new_id() -> str:
        return f"{rng.getrandbits(96):024x}"

    def unique(name: str) -> str:
        while name in names:
            name = f"{name} #{suffixes.randint(100, 9999)}"
        names.add(name)
        return name

    def add(name: str, *, tags: tuple[str, ...] = (), products: tuple[str, ...] = EMPLOYER_PRODUCTS,
            parent: str | None = None, status: str | None = None) -> Company:
        company_id = new_id()
        capabilities = dict(DEFAULT_CAPABILITIES)
        roll = rng.random()
        if roll < 0.12:
            capabilities.update(headlessAuthentication=False, ssoAuthentication=True,
                                authenticationMethods=["true-auth"])
        elif roll < 0.15:
            capabilities.update(headlessAuthentication=False, authenticationMethods=[])
        elif roll < 0.35:
            capabilities["authenticationMethods"] = ["standard-auth", "true-auth"]
        if any(service.products.get(p) == "pay-link" for p in products):
            capabilities["supportedPaymentMethods"] = rng.choice((["card"], ["card", "bank"]))
        company = Company(
            id=company_id, name=unique(name), status=status or _weighted_status(rng), tags=tags,
            franchise_parent=parent,
            branding={"color": f"#{rng.getrandbits(24):06x}",
                      "logo": {"url": f"https://logos.sandbox.invalid/{company_id}.svg",
                               "backgroundColor": f"#{rng.getrandbits(24):06x}"}},
            connector_id=new_id(), available_products=products, capabilities=capabilities,
            scopes=service.scopes_of(products))
        companies.append(company)
        return company

    franchise_budget = int(count * franchise_share)
    while franchise_budget > 0 and len(companies) < count:
        brand = f"{last_name()}'s {rng.choice(FRANCHISE_KINDS)}"
        parent = add(brand, tags=(FRANCHISE_PARENT,), status=OPERATIONAL)
        for _ in range(min(rng.randint(3, 40), franchise_budget, count - len(companies))):
            add(f"{parent.name} - {rng.choice(cities)}", tags=(FRANCHISE_CHILD,), parent=parent.id)
        franchise_budget = int(count * franchise_share) - len(companies)
    while len(companies) < count:
        roll = rng.random()
        if roll < 0.03:
            add(f"{last_name()} {rng.choice(PAYROLL_KINDS)}", tags=("payroll-provider",))
        elif roll < 0.05:
            add(f"{rng.choice(words)} {rng.choice(GIG_KINDS)}", tags=("gig-economy",))
        elif roll < 0.17:
            products = MERCHANT_PRODUCTS if rng.random() < 0.7 else MERCHANT_PRODUCTS[:1]
            add(f"{last_name()} {rng.choice(MERCHANT_KINDS)}", products=products)
        elif roll < 0.55:
            add(company_name())
        elif roll < 0.85:
            add(f"{last_name()} {rng.choice(INDUSTRIES)}")
        else:
            add(f"{rng.choice(cities)} {rng.choice(INDUSTRIES)}")
    return companies


def word_pools(seed: int, count: int) -> tuple[list[str], list[str], list[str], list[str]]:
    """Real-looking last names, cities and words from Faker, for `count` companies."""

    def draw(fake: Any, size: int) -> dict[str, list[str]]:
        return {"lastNames": sorted({fake.last_name() for _ in range(size)}),
                "cities": sorted({fake.city() for _ in range(size // 2)}),
                "words": sorted({fake.word().title() for _ in range(size // 4)}),
                "companySuffixes": list(fake.provider("faker.providers.company").company_suffixes)}

    pools = faker_pools("catalog-words", seed, max(50, min(count // 2, 2000)), draw)
    return pools["lastNames"], pools["cities"], pools["words"], pools["companySuffixes"]


def _weighted_status(rng: random.Random) -> str:
    roll = rng.random()
    for status, weight in STATUS_WEIGHTS:
        if roll < weight:
            return status
        roll -= weight
    return OPERATIONAL
