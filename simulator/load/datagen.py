"""Seeded, realistic people and jobs for linked accounts.

Names, jobs and addresses come from pools Faker draws once (one seed for every run,
cached on disk, see pools.py); a generator seeded by the run's seed, tenant, user and
company picks from them, so the same seed always gives the same person and job, and
creating thousands of accounts stays fast. The domain gets the finished Profile.
"""

from __future__ import annotations

import functools
import random
import zlib
from datetime import date, timedelta
from typing import Any

from ..domain.accounts.pay_calendar import PAY_CYCLES, Profile
from .pools import faker_pools

BANKS = ("Chase", "Bank of America", "Wells Fargo", "Citibank", "U.S. Bank", "PNC", "Capital One",
         "TD Bank", "Ally Bank", "Chime")
ROUTING_NUMBERS = ("021000021", "026009593", "121000248", "111000025", "031176110")
HOURLY_TITLES = ("Cashier", "Warehouse Associate", "Barista", "Delivery Driver", "Sales Associate",
                 "Line Cook", "Customer Service Representative", "Stocker", "Nursing Assistant")
POOL_SIZE = 400
# The pools' own seed, the same for every run: a pool per run seed cost each unseeded
# start Faker's import and draw, and left a cache file per start (6,000 of them, 120 MB,
# on a machine that ran the suite for a while).
POOL_SEED = 1


def _draw_people(fake: Any, size: int) -> dict[str, list[str]]:
    return {
        "firstNames": sorted({fake.first_name() for _ in range(size)}),
        "lastNames": sorted({fake.last_name() for _ in range(size)}),
        "jobs": sorted({fake.job() for _ in range(size // 2)}),
        "streets": sorted({fake.street_name() for _ in range(size // 2)}),
        "cities": sorted({fake.city() for _ in range(size // 2)}),
        "states": sorted({fake.state_abbr(include_territories=False) for _ in range(size)}),
        "emailDomains": sorted({fake.free_email_domain() for _ in range(size // 4)}),
    }


class ProfileFactory:
    def __init__(self, seed: int) -> None:
        self.seed = seed

    @functools.cached_property
    def _people(self) -> dict[str, list[str]]:  # drawn (or read) for the first profile made
        return faker_pools("people", POOL_SEED, POOL_SIZE, _draw_people)

    def profile(self, tenant: str, identifier: str, company_id: str, company_name: str,
                today: date) -> Profile:
        people = self._people
        rng = random.Random(zlib.crc32(f"{self.seed}:{tenant}:{identifier}:{company_id}".encode()))
        hourly = rng.random() < 0.55
        if hourly:
            hourly_rate = round(rng.uniform(13.5, 34.0), 2)
            weekly_hours = rng.choice((20, 24, 30, 32, 36, 40, 40, 40))
            annual = round(hourly_rate * weekly_hours * 52, 2)
            title = rng.choice(HOURLY_TITLES)
        else:
            annual = float(rng.randrange(38_000, 165_000, 500))
            weekly_hours = 40
            hourly_rate = round(annual / 2080, 2)
            title = rng.choice(people["jobs"])
        start = today - timedelta(days=rng.randint(120, 3650))
        born = today - timedelta(days=rng.randint(19 * 365, 67 * 365))
        first, last = rng.choice(people["firstNames"]), rng.choice(people["lastNames"])
        accounts = [{
            "accountNumber": f"{rng.randrange(10**9, 10**10)}",
            "routingNumber": rng.choice(ROUTING_NUMBERS),
            "type": rng.choice(("checking", "checking", "savings", "paycard")),
            "bankName": rng.choice(BANKS),
            "distributionType": "total" if number == 0 else "percent",
            "distributionAmount": 100 if number == 0 else rng.choice((10, 15, 20, 25)),
        } for number in range(1 if rng.random() < 0.7 else 2)]
        if len(accounts) == 2:  # a split: the second takes a share, the first the rest
            accounts[0]["distributionType"] = "percent"
            accounts[0]["distributionAmount"] = 100 - accounts[1]["distributionAmount"]
        return Profile(
            first_name=first, last_name=last, date_of_birth=born,
            email=f"{first}.{last}{rng.randint(1, 99)}@{rng.choice(people['emailDomains'])}".lower(),
            phone=f"+1{rng.randint(201, 989)}{rng.randint(200, 999)}{rng.randint(1000, 9999)}",
            ssn_last4=f"{rng.randint(0, 9999):04d}",
            address=f"{rng.randint(1, 9999)} {rng.choice(people['streets'])}",
            city=rng.choice(people["cities"]), state=rng.choice(people["states"]),
            postal_code=f"{rng.randint(1000, 99999):05d}",
            employer=company_name, employer_id=company_id, job_title=title,
            employee_type="hourly" if hourly else "salaried",
            start_date=start, weekly_hours=weekly_hours, annual_income=annual,
            hourly_rate=hourly_rate, pay_cycle=rng.choice(PAY_CYCLES),
            deposit_accounts=accounts, tax_rate=round(rng.uniform(0.16, 0.31), 3),
        )
