"""What the aggregator knows of banks: its sandbox institutions, and the transaction history
of every account of an item (DESIGN.md, The aggregator's own API).

One history serves both sides of the processor-token flow: the aggregator's
/transactions/sync answers it, and the service's processor-link pipeline pulls it through
a processor token of the item (domain/processor_links.py), so what the customer reads at
the aggregator and what the service classified are the same transactions. It is a pure
function of the item (its id, accounts, creation day and `days_requested`) and of the
bundled catalog, worked out again whenever it is read: nothing of it is stored, and a
company the control plane adds or changes later does not rewrite a bank's past.
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Callable, Iterable
from datetime import date, datetime, timedelta, timezone
from typing import Any

import msgspec

from ..accounts.pay_calendar import days
from ..companies.companies import OPERATIONAL, Catalog, Company

# How a bank statement names a payroll deposit (the pipeline's employer classification reads
# these words) and the everyday purchases around them.
PAYROLL_WORDS = ("PAYROLL", "DIR DEP", "DIRECT DEP")
ONE_OFF = ("COFFEE BAR", "GAS STATION", "GROCERY MART", "PHARMACY", "RESTAURANT",
           "HARDWARE STORE", "BOOKSTORE", "PARKING", "TAXI", "ONLINE MARKET")
TRANSFER_IN = "TRANSFER FROM CHECKING"
INTEREST = "INTEREST EARNED"


def payer(name: str) -> str:
    """Who paid a payroll deposit: its name on the statement without the payroll words."""
    for word in PAYROLL_WORDS:
        name = name.replace(word, "")
    return name.strip()


# -- institutions -----------------------------------------------------------------------------

_PRODUCTS = ("assets", "auth", "balance", "identity", "income_verification", "investments",
             "liabilities", "transactions")


class Institution(msgspec.Struct, frozen=True):
    """A sandbox institution, as /institutions/get_by_id shows it."""

    institution_id: str
    name: str
    routing_numbers: tuple[str, ...]
    url: str
    primary_color: str
    oauth: bool = False
    country_codes: tuple[str, ...] = ("US",)
    products: tuple[str, ...] = _PRODUCTS

    def record(self, *, optional_metadata: bool = False,
               status: dict[str, Any] | None = None) -> dict[str, Any]:
        """The aggregator's Institution object: its url, colour and logo only when
        `include_optional_metadata` asks, its status only when `include_status` does."""
        record: dict[str, Any] = {
            "institution_id": self.institution_id, "name": self.name,
            "products": list(self.products), "country_codes": list(self.country_codes),
            "routing_numbers": list(self.routing_numbers), "dtc_numbers": [],
            "oauth": self.oauth, "connection_availability": "SUPPORTED"}
        if optional_metadata:
            record.update(url=self.url, primary_color=self.primary_color, logo=None)
        if status is not None:
            record["status"] = status
        return record


# The aggregator's sandbox institutions (its test banks); items link at one of them.
INSTITUTIONS = {institution.institution_id: institution for institution in (
    Institution("ins_109508", "First Platypus Bank", ("011401533",),
                "https://www.first-platypus-bank.example", "#1f6a3a"),
    Institution("ins_109509", "First Gingham Credit Union", ("011601215",),
                "https://www.first-gingham.example", "#b3262e"),
    Institution("ins_109510", "Tattersall Federal Credit Union", ("021200339",),
                "https://www.tattersall.example", "#2b4a8b"),
    Institution("ins_109511", "Tartan Bank", ("031101169",),
                "https://www.tartan-bank.example", "#6b2d8b"),
    Institution("ins_109512", "Houndstooth Bank", ("041215663",),
                "https://www.houndstooth-bank.example", "#333333"),
    Institution("ins_127287", "Platypus OAuth Bank", ("051405515",),
                "https://www.platypus-oauth-bank.example", "#0f5d8c", oauth=True),
)}


def institution_status(since: str) -> dict[str, Any]:
    """A sandbox institution's health (`include_status`): every product healthy since
    `since`, as the sandbox's test banks always are."""
    def healthy(refresh: bool = False) -> dict[str, Any]:
        breakdown: dict[str, Any] = {"success": 0.99, "error_plaid": 0.01,
                                     "error_institution": 0.0}
        if refresh:
            breakdown["refresh_interval"] = "NORMAL"
        return {"status": "HEALTHY", "last_status_change": since, "breakdown": breakdown}

    return {"item_logins": healthy(), "transactions_updates": healthy(refresh=True),
            "auth": healthy(), "identity": healthy(), "investments_updates": healthy(True),
            "liabilities_updates": healthy(True), "liabilities": healthy(),
            "investments": healthy(), "health_incidents": []}


# -- an item's transactions -------------------------------------------------------------------

def item_history(item: Any, catalog: Catalog) -> list[dict[str, Any]]:
    """Every transaction of every account of `item` (domain/aggregator.py: Item), oldest
    first: the `days_requested` days up to the day the item was linked. Each is one record
    as the pipeline reads it (processor_links.PulledTransaction); `transaction_record`
    makes the aggregator's view."""
    last = datetime.fromtimestamp(item.created_at, tz=timezone.utc).date()
    employers, merchants = _candidates(catalog)
    found: list[dict[str, Any]] = []
    for account in item.accounts:
        seed = f"{item.item_id}:{account.account_id}"
        ids = random.Random(f"{seed}:ids")
        found += account_history(seed, last, item.days_requested, account.account_id,
                                 lambda: f"{ids.getrandbits(128):032x}", employers, merchants,
                                 savings=account.subtype != "checking")
    found.sort(key=lambda t: (t["date"], t["name"], t["transaction_id"]))
    return found


def account_history(seed: str, last: date, days_requested: int, account_id: str,
                    new_id: Callable[[], str], employers: list[Company],
                    merchants: list[Company], *, savings: bool = False) -> list[dict[str, Any]]:
    """One account's transactions of the `days_requested` days up to `last`, as drawn from
    `seed` (a checking account's, or a savings account's), each named by `new_id`: an
    item's accounts and the control plane's processor tokens write them alike."""
    rng = random.Random(f"{seed}:transactions")
    first = last - timedelta(days=days_requested - 1)
    found: list[dict[str, Any]] = []

    def add(day: date, amount: float, name: str, category: str) -> None:
        if first <= day <= last:
            found.append({"transaction_id": new_id(), "account_id": account_id,
                          "date": day.isoformat(), "amount": round(amount, 2), "name": name,
                          "category": category})

    if savings:
        _savings(rng, first, last, add)
    else:
        checking_history(rng, first, last, employers, merchants, add)
    return found


Add = Callable[[date, float, str, str], None]


def checking_history(rng: random.Random, first: date, last: date, employers: list[Company],
              merchants: list[Company], add: Add) -> None:
    """Pay every two weeks (negative: money in, as the aggregator signs amounts), monthly,
    weekly or fortnightly charges of the same amount, and a purchase most days: a checking
    account's history."""
    for employer in rng.sample(employers, k=min(len(employers), 1 if rng.random() < 0.8 else 2)):
        pay = rng.uniform(900, 3600)
        start = first + timedelta(days=rng.randrange(14))
        label = f"{employer.name.upper()} {rng.choice(PAYROLL_WORDS)}"
        for day in days(start, last, 14):
            add(day, -pay * rng.uniform(0.97, 1.03), label, "payroll")
    for merchant in rng.sample(merchants, k=min(len(merchants), rng.randint(3, 6))):
        cadence = rng.choice((30, 30, 30, 7, 14))
        amount = rng.choice((9.99, 12.99, 15.49, 29.99, 54.0, 79.99, 110.0))
        for day in days(first + timedelta(days=rng.randrange(cadence)), last, cadence):
            add(day, amount, merchant.name.upper(), "subscription")
    for day in days(first, last):
        if rng.random() < 0.6:
            add(day, rng.uniform(3, 140), rng.choice(ONE_OFF), "purchase")


def _savings(rng: random.Random, first: date, last: date, add: Add) -> None:
    """A transfer in every 30 days, and the interest it earns each month."""
    transfer = rng.choice((50.0, 100.0, 150.0, 200.0, 250.0))
    for day in days(first + timedelta(days=rng.randrange(30)), last, 30):
        add(day, -transfer, TRANSFER_IN, "transfer")
    for day in days(first + timedelta(days=rng.randrange(30)), last, 30):
        add(day, -rng.uniform(0.4, 3.5), INTEREST, "interest")


# The employers and merchants of a catalog a history draws from, worked out once per catalog.
_CANDIDATES: weakref.WeakKeyDictionary[Catalog, tuple[list[Company], list[Company]]] = (
    weakref.WeakKeyDictionary())


def _candidates(catalog: Catalog) -> tuple[list[Company], list[Company]]:
    found = _CANDIDATES.get(catalog)
    if found is None:
        found = _CANDIDATES[catalog] = candidates(catalog.ordered)
    return found


def candidates(companies: Iterable[Company]) -> tuple[list[Company], list[Company]]:
    """The employers and the merchants among `companies` (operational) a checking history
    draws from."""
    operational = [c for c in companies if c.status == OPERATIONAL]
    return ([c for c in operational if "user-link" in c.scopes and not c.franchise_parent],
            [c for c in operational if "pay-link" in c.scopes])


# -- the aggregator's Transaction object ------------------------------------------------------

# Internal category (and a purchase's name) -> the aggregator's personal finance category,
# its legacy category and id, payment channel and transaction type.
_KINDS = {
    "payroll": ("INCOME", "INCOME_WAGES", ["Transfer", "Payroll"], "21009000", "other",
                "special"),
    "subscription": ("GENERAL_SERVICES", "GENERAL_SERVICES_OTHER_GENERAL_SERVICES",
                     ["Service", "Subscription"], "18061000", "online", "digital"),
    "transfer": ("TRANSFER_IN", "TRANSFER_IN_ACCOUNT_TRANSFER",
                 ["Transfer", "Internal Account Transfer"], "21001000", "other", "special"),
    "interest": ("INCOME", "INCOME_INTEREST_EARNED", ["Interest", "Interest Earned"],
                 "15001000", "other", "special"),
    "COFFEE BAR": ("FOOD_AND_DRINK", "FOOD_AND_DRINK_COFFEE",
                   ["Food and Drink", "Restaurants", "Coffee Shop"], "13005043", "in store",
                   "place"),
    "GAS STATION": ("TRANSPORTATION", "TRANSPORTATION_GAS", ["Travel", "Gas Stations"],
                    "22009000", "in store", "place"),
    "GROCERY MART": ("FOOD_AND_DRINK", "FOOD_AND_DRINK_GROCERIES",
                     ["Shops", "Supermarkets and Groceries"], "19047000", "in store", "place"),
    "PHARMACY": ("MEDICAL", "MEDICAL_PHARMACIES_AND_SUPPLEMENTS", ["Shops", "Pharmacies"],
                 "19043000", "in store", "place"),
    "RESTAURANT": ("FOOD_AND_DRINK", "FOOD_AND_DRINK_RESTAURANT",
                   ["Food and Drink", "Restaurants"], "13005000", "in store", "place"),
    "HARDWARE STORE": ("HOME_IMPROVEMENT", "HOME_IMPROVEMENT_HARDWARE",
                       ["Shops", "Hardware Store"], "19029000", "in store", "place"),
    "BOOKSTORE": ("GENERAL_MERCHANDISE", "GENERAL_MERCHANDISE_BOOKSTORES_AND_NEWSSTANDS",
                  ["Shops", "Bookstores"], "19009000", "in store", "place"),
    "PARKING": ("TRANSPORTATION", "TRANSPORTATION_PARKING", ["Travel", "Parking"], "22013000",
                "in store", "place"),
    "TAXI": ("TRANSPORTATION", "TRANSPORTATION_TAXIS_AND_RIDE_SHARES", ["Travel", "Taxi"],
             "22016000", "in store", "place"),
    "ONLINE MARKET": ("GENERAL_MERCHANDISE", "GENERAL_MERCHANDISE_ONLINE_MARKETPLACES",
                      ["Shops", "Digital Purchase"], "19013000", "online", "digital"),
}
_NO_LOCATION = dict.fromkeys(("address", "city", "region", "postal_code", "country", "lat",
                              "lon", "store_number"))
_NO_PAYMENT_META = dict.fromkeys(("reference_number", "ppd_id", "payee", "by_order_of",
                                  "payer", "payment_method", "payment_processor", "reason"))


def transaction_record(transaction: dict[str, Any]) -> dict[str, Any]:
    """One transaction as the aggregator's Transaction object (/transactions/sync):
    posted, in US dollars, positive when money leaves the account."""
    category = transaction["category"]
    name = transaction["name"]
    primary, detailed, legacy, legacy_id, channel, kind = _KINDS.get(
        name if category == "purchase" else category, _KINDS["subscription"])
    counterparties = []
    merchant_name = None
    if category == "payroll":
        counterparties.append(_counterparty(payer(name).title(), "income_source"))
    elif category in ("subscription", "purchase"):
        merchant_name = name.title()
        counterparties.append(_counterparty(merchant_name, "merchant"))
    return {
        "transaction_id": transaction["transaction_id"],
        "account_id": transaction["account_id"], "account_owner": None,
        "amount": transaction["amount"], "iso_currency_code": "USD",
        "unofficial_currency_code": None, "date": transaction["date"],
        "authorized_date": transaction["date"], "datetime": None, "authorized_datetime": None,
        "name": name, "merchant_name": merchant_name, "merchant_entity_id": None,
        "original_description": None, "logo_url": None, "website": None,
        "payment_channel": channel, "transaction_type": kind, "transaction_code": None,
        "category": legacy, "category_id": legacy_id,
        "personal_finance_category": {"primary": primary, "detailed": detailed,
                                      "confidence_level": "VERY_HIGH"},
        "counterparties": counterparties, "location": dict(_NO_LOCATION),
        "payment_meta": dict(_NO_PAYMENT_META), "check_number": None, "pending": False,
        "pending_transaction_id": None,
    }


def _counterparty(name: str, kind: str) -> dict[str, Any]:
    return {"name": name, "type": kind, "website": None, "logo_url": None,
            "phone_number": None, "entity_id": None, "confidence_level": "HIGH"}
