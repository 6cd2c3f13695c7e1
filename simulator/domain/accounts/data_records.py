"""The records the linked-account data endpoints return, as structs (domain/shapes.py).

Field names follow the real service's published record fields (real-service-facts, DESIGN.md:
Public API); the OpenAPI document publishes their schemas, and the tests check every record
the endpoints return against them.
"""

from __future__ import annotations

from typing import Any

from ...clock import isoformat
from ..dates import date_time_field
from ..companies.companies import Company, ManualDepositRule, SearchCompany, search_record
from ..shapes import UNSET, Answer, Maybe, View, choice, field, of, raw, view_of


def payroll_day(what: str) -> dict[str, Any]:
    """A calendar day of payroll data (a pay day, a period's bound, a start date), which the
    real service writes as a date-time: that day at 12:00 UTC (clock.day_time)."""
    return date_time_field(f"{what}: a calendar day, written as that day at 12:00 UTC.")


Id = of(str, min_length=1)
Money = of(float, ge=0)
Hours = of(float, ge=0)


def day(what: str) -> Any:
    return raw(payroll_day(what))


class Connector(Answer, kw_only=True):
    id: Id = field(name="_id")
    name: str


class LinkedAccountListRecord(Answer, kw_only=True):
    """The real service's linked-account record (GET /linked-account/list/{identifier})."""

    id: Id = field(name="_id")
    valid: of(bool, "The account is connected: refreshes work.")
    transact_required: of(bool, "The user must go through the SDK again (to reconnect).")
    company: of(SearchCompany, "The company: the same Company shape as search answers "
                "(real-api-surface: Company).")
    connector: Connector
    last_success: raw(date_time_field("When data was last synced successfully (null: never).",
                                      nullable=True))
    last_failure: Maybe[raw(date_time_field("When the connection last failed: a disconnect, "
                                            "or a refresh task that failed (absent: "
                                            "never)."))] = UNSET

    @classmethod
    def of(cls, account: Any, company: Company | None, rule: ManualDepositRule, **more: Any
           ) -> LinkedAccountListRecord:
        """A LinkedAccount (domain/linked_accounts.py) with `company`, the catalog's current
        record of its company (None: deleted since, shown as it was at the link) under the
        account's manual-deposit rule (the Company's tags); a view that adds fields: `more`."""
        company = company or account.company_at_link
        return view_of(
            cls, account, valid=account.connected,
            # The user must go through the SDK again: only a disconnected account does.
            transact_required=not account.connected, company=search_record(company, rule),
            # Every company in this sandbox has a connector of its own, named after it.
            connector=Connector(id=company.connector_id, name=company.name),
            # Refreshes run only while connected: the last refresh is the last success.
            last_success=isoformat(account.last_refresh),
            last_failure=None if account.last_failure is None else isoformat(account.last_failure),
            **more)


class LinkedAccountRecord(LinkedAccountListRecord, kw_only=True):
    """A linked account as GET /linked-accounts shows it: the real record
    (GET /linked-account/list/{identifier}), with the sandbox's own fields beside it."""

    identifier: Id
    company_id: of(Id, "The company's `_id` (also `company._id`).")
    product: str
    connected: bool
    status: choice("connected", "disconnected")
    created_at: raw(date_time_field("When the account was linked."))
    last_refreshed_at: raw(date_time_field("When its data was last refreshed."))

    @classmethod
    def of(cls, account: Any, company: Company | None, rule: ManualDepositRule, **more: Any
           ) -> LinkedAccountRecord:
        return super().of(account, company, rule,
                          status="connected" if account.connected else "disconnected",
                          created_at=isoformat(account.created_at),
                          last_refreshed_at=isoformat(account.last_refresh), **more)


class DataRecord(View, kw_only=True):
    id: Id = field(name="_id")
    linked_account: of(Id, "The linked account the record comes from.")


class Income(DataRecord, kw_only=True):
    income: of(Money, "Gross pay per pay period.")
    income_type: choice("yearly", "monthly", "weekly", "daily", "hourly", description="The "
                        "unit of `income`: the sandbox answers `hourly` (a wage) or `yearly` "
                        "(a salary).")
    annual_income: Money
    hourly_income: Money
    net_hourly_rate: Money
    pay_cycle: choice("weekly", "biweekly", "semimonthly", "monthly")
    next_expected_pay_date: raw(date_time_field(
        "The next pay day, as a calendar day at 12:00 UTC (null: a terminated job expects "
        "none).", nullable=True))
    current_pay_period_start: day("The first day of the current pay period")
    current_pay_period_end: day("The last day of the current pay period")
    unpaid_hours_in_pay_period: float


class Statement(DataRecord, kw_only=True):
    date: day("The pay day")
    pay_period_start_date: day("The first day of the pay period")
    pay_period_end_date: day("The last day of the pay period")
    gross_amount: Money
    net_amount: Money
    payment_method: str
    paystub: of(str, "URL of the paystub as a PDF (GET /paystub/{statementId}, with the same "
                "credentials as the data endpoints).", extra_json_schema={"format": "uri"})
    hours: Hours


class Timesheet(DataRecord, kw_only=True):
    date: day("The workday")
    hours: Hours
    rate: Money


class DepositAccount(DataRecord, kw_only=True):
    account_number: of(str, "Masked but for the last 4 digits.")
    routing_number: of(str, pattern=r"^\d{9}$")
    type: choice("checking", "savings", "paycard")
    bank_name: str
    distribution_type: choice("total", "percent", "fixed")
    distribution_amount: of(of(float, ge=0) | None, "A percent (0-100) or a fixed amount; "
                            "null for `total`, which takes what the others leave.")


class Employer(View, kw_only=True):
    id: Id = field(name="_id")
    name: str


class Employment(DataRecord, kw_only=True):
    employee_type: str
    employment_status: str
    job_title: str
    start_date: day("The first day of the job")
    end_date: Maybe[day("The last day of a terminated job (absent: still employed)")] = UNSET
    weekly_hours: float
    employer: Employer


class Identity(DataRecord, kw_only=True):
    first_name: str
    last_name: str
    date_of_birth: day("The date of birth")
    email: str
    phone: str
    ssn: of(str, "Masked.")
    address: str
    city: str
    state: str
    postal_code: str


class Tax(DataRecord, kw_only=True):
    year: int
    total_wages: Money
    form: str
    employer: Maybe[str] = UNSET


# The kinds of data a linked account holds, in the order a sync announces them (`<kind>-synced`).
DATA_KINDS = ("statements", "income", "timesheets", "employment", "identity", "taxes",
              "deposit-accounts")
# Each GET /<kind>'s record (its schema is schema_of(record), derived on first use).
DATA_RECORDS: dict[str, type[View]] = {
    "linked-accounts": LinkedAccountRecord, "income": Income, "statements": Statement,
    "timesheets": Timesheet, "deposit-accounts": DepositAccount, "employment": Employment,
    "identity": Identity, "taxes": Tax}
