"""Seeded, realistic people and jobs for linked accounts, from Faker.

One Faker instance is reseeded per linked account, so the same seed, tenant, user
and company always give the same person and job, and nothing else is random.
The domain gets the finished Profile; it never sees Faker.
"""

from __future__ import annotations

import random
from datetime import date, timedelta

from .domain.linked_accounts import PAY_CYCLES, Profile

BANKS = ("Chase", "Bank of America", "Wells Fargo", "Citibank", "U.S. Bank", "PNC", "Capital One",
         "TD Bank", "Ally Bank", "Chime")
HOURLY_TITLES = ("Cashier", "Warehouse Associate", "Barista", "Delivery Driver", "Sales Associate",
                 "Line Cook", "Customer Service Representative", "Stocker", "Nursing Assistant")


class ProfileFactory:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._faker = None

    def _fake(self):
        if self._faker is None:
            from faker import Faker  # slow to import: only once a linked account exists

            self._faker = Faker("en_US")
        return self._faker

    def profile(self, tenant: str, identifier: str, company_id: str, company_name: str,
                today: date) -> Profile:
        key = f"{self.seed}:{tenant}:{identifier}:{company_id}"
        fake = self._fake()
        fake.seed_instance(key)
        rng = random.Random(key)
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
            title = fake.job()
        start = today - timedelta(days=rng.randint(120, 3650))
        dob = fake.date_of_birth(minimum_age=19, maximum_age=67)
        first, last = fake.first_name(), fake.last_name()
        accounts = []
        for number in range(1 if rng.random() < 0.7 else 2):
            accounts.append({
                "accountNumber": f"{rng.randrange(10**9, 10**10)}",
                "routingNumber": f"{rng.choice(('021000021', '026009593', '121000248', '111000025', '031176110'))}",
                "type": rng.choice(("checking", "checking", "savings", "paycard")),
                "bankName": rng.choice(BANKS),
                "distributionType": "total" if number == 0 else "percent",
                "distributionAmount": 100 if number == 0 else rng.choice((10, 15, 20, 25)),
            })
        if len(accounts) == 2:  # a split: the second takes a share, the first the rest
            accounts[0]["distributionType"] = "percent"
            accounts[0]["distributionAmount"] = 100 - accounts[1]["distributionAmount"]
        return Profile(
            first_name=first, last_name=last, date_of_birth=dob.isoformat(),
            email=f"{first}.{last}{rng.randint(1, 99)}@{fake.free_email_domain()}".lower(),
            phone=f"+1{rng.randint(201, 989)}{rng.randint(200, 999)}{rng.randint(1000, 9999)}",
            ssn_last4=f"{rng.randint(0, 9999):04d}", address=fake.street_address(),
            city=fake.city(), state=fake.state_abbr(), postal_code=fake.postcode(),
            employer=company_name, employer_id=company_id, job_title=title,
            employee_type="hourly" if hourly else "salaried",
            start_date=start.isoformat(), weekly_hours=weekly_hours, annual_income=annual,
            hourly_rate=hourly_rate, pay_cycle=rng.choice(PAY_CYCLES),
            deposit_accounts=accounts, tax_rate=round(rng.uniform(0.16, 0.31), 3),
        )
