"""Payroll data you choose (DESIGN.md: data profiles): a partial document per kind of
record (income, employment, identity, depositAccounts, statements, timesheets, taxes)
applied over the person and job the seed makes (pay_calendar.Profile), so every record
derived from them stays consistent: statements follow the income, the pay cycle and the
hours, a terminated job pays nothing after its end date, a split paycheck adds up. Its
`timeline` (life events) says what changes after the account links, each at its moment
(linked_accounts.py schedules and applies them: life_event_changes, apply_life_event).

A document is checked twice: against PROFILE_SCHEMA (unknown fields refused), then against
the rules a schema cannot say (check); either raises ValidationFailed with the JSON paths at
fault. Pure functions: the caller hands in the day the dates count from.
"""

from __future__ import annotations

import copy
import zlib
from datetime import date, timedelta
from typing import Any

from msgspec.structs import replace

from ...errors import ValidationFailed, field_detail
from ...validate import schema_errors
from .pay_calendar import PAY_CYCLES, Profile
from ..tasks.states import ACCOUNT_NUMBER

# A day in a profile: an ISO date, or days from the day the account links ("-30d", "+0d"),
# so a bundled profile stays "recently terminated" on any day.
DAY = {"type": "string", "pattern": r"^([+-]\d{1,5}d|\d{4}-\d{2}-\d{2})$",
       "description": "An ISO date (2026-01-31) or days from the day the account links "
                      "(-30d: thirty days before)."}
_MONEY = {"type": "number", "minimum": 0, "maximum": 100_000_000}


def _obj(properties: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": properties, **more}


KINDS: dict[str, Any] = {
    "income": _obj({
        "income": {**_MONEY, "description": "In the unit incomeType names: a yearly salary "
                                            "or an hourly wage."},
        "incomeType": {"enum": ["yearly", "hourly"]},
        "payCycle": {"enum": list(PAY_CYCLES)}}),
    "employment": _obj({
        "employmentStatus": {"enum": ["active", "terminated"]},
        "startDate": DAY, "endDate": DAY,
        "jobTitle": {"type": "string", "minLength": 1, "maxLength": 200},
        "weeklyHours": {"type": "integer", "minimum": 1, "maximum": 80}}),
    "identity": _obj({
        **{name: {"type": "string", "minLength": 1, "maxLength": 200}
           for name in ("firstName", "lastName", "email", "phone", "address", "city", "state",
                        "postalCode")},
        "dateOfBirth": DAY,
        "ssn": {"type": "string", "pattern": r"^(\d{3}-?\d{2}-?)?\d{4}$",
                "description": "The whole number or its last four digits: only those are kept."}}),
    "depositAccounts": {"type": "array", "maxItems": 10, "items": _obj({
        "type": {"enum": ["checking", "savings", "paycard"]},
        "bankName": {"type": "string", "minLength": 1, "maxLength": 200},
        "accountNumber": {"type": "string", "pattern": ACCOUNT_NUMBER},
        "routingNumber": {"type": "string", "pattern": r"^\d{9}$"},
        "distributionType": {"enum": ["total", "percent", "fixed"]},
        "distributionAmount": {"type": "number", "minimum": 0, "maximum": 1_000_000}},
        required=["type", "distributionType"])},
    "statements": _obj({
        "count": {"type": "integer", "minimum": 0, "maximum": 120,
                  "description": "How many of the latest statements a first sign-in finds "
                                 "(0: none yet)."},
        "firstPayDate": {**DAY, "description": "The first pay day with a statement (on or "
                                               "after the start date)."}}),
    "timesheets": _obj({
        "hoursVariation": {"type": "number", "minimum": 0, "maximum": 0.9,
                           "description": "How far a day's hours stray from the usual day "
                                          "(0.3: 70% to 130%); hourly incomes only."}}),
    "taxes": _obj({
        "rate": {"type": "number", "exclusiveMinimum": 0, "maximum": 0.6,
                 "description": "The share of gross pay withheld: net pay is below gross."}}),
}
# Life events (issue 45): what happens to the user after the account links, each at its
# moment (days after the link, at the link's time of day): a termination, a raise, a move of
# the pay to other accounts, a new employer (this job ends; the user's next linked account
# takes the next job).
LIFE_EVENT_KINDS = ("employment", "income", "depositAccounts", "identity", "taxes")
AT = {"type": "string", "pattern": r"^[+-]\d{1,4}d$",
      "description": "Days after the day the account links (+30d), at the link's time of day."}
LIFE_EVENT = _obj({"at": AT, **{kind: KINDS[kind] for kind in LIFE_EVENT_KINDS},
                   "job": {"const": "next", "description": "The user leaves this employer that "
                                                           "day: the job ends, and the user's "
                                                           "next linked account takes the next "
                                                           "job."}},
                  required=["at"], minProperties=2)
TIMELINE = {"type": "array", "maxItems": 20, "items": LIFE_EVENT,
            "description": "Life events: what changes for the user after the account links, "
                           "each at its moment, with the events such a change sends."}
_JOB = _obj({**{kind: schema for kind, schema in KINDS.items() if kind != "identity"},
             "timeline": TIMELINE})
PROFILE_SCHEMA: dict[str, Any] = _obj({
    **KINDS, "timeline": TIMELINE,
    "jobs": {"type": "array", "minItems": 1, "maxItems": 10, "items": _JOB,
             "description": "Several employers: the user's first linked account takes the "
                            "first job, the next the second, and so on (over the rest)."}})
NAMED_PROFILE_SCHEMA: dict[str, Any] = _obj(
    {"description": {"type": "string", "minLength": 1, "maxLength": 200},
     **PROFILE_SCHEMA["properties"]}, required=["description"])

PROFILES_FILE_SCHEMA: dict[str, Any] = _obj(
    {"profiles": {"type": "object", "propertyNames": {"pattern": r"^[a-z0-9][a-z0-9-]{0,63}$"},
                  "additionalProperties": NAMED_PROFILE_SCHEMA}}, required=["profiles"])

HOURLY_WAGE_TOO_HIGH = ("an hourly wage of {amount} is a yearly amount: say incomeType "
                        "yearly, or give the wage per hour")
YEARLY_TOO_LOW = "a yearly income of {amount} is an hourly wage: say incomeType hourly"
PERCENTS_OVER = "the percents add up to {total}: at most 100"
TWO_TOTALS = "only one account takes the total"
NOWHERE = "the percents add up to {total} and no account takes the total (the rest)"
END_NEEDS_TERMINATED = "only a terminated employment has an end date"
BEFORE_LINK = "{at} is before the day the account links: a life event comes at +0d or later"
AFTER_END = ("the job ended at {ended} (a termination or a new employer): nothing changes at "
             "it after that")
END_BEFORE_EVENT = "the end date {end} is before the day of its life event ({day})"
# A terminated employment given without its end date ended this many days before the link.
ENDED_DAYS_AGO = 14
END_BEFORE_START = "the end date {end} is before the start date {start}"
PAY_BEFORE_START = "the pay date {pay} is before the start date {start}"
START_IN_FUTURE = "the start date {start} is after today ({today})"
NO_TIMESHEETS = "a yearly income has no timesheets: hoursVariation needs incomeType hourly"
INVALID = "The profile is not valid: {problems}."
MAX_HOURLY_WAGE = 1_000
MIN_YEARLY_INCOME = 1_000


def plain(document: Any) -> Any:
    """A document as JSON has it: the calendar days YAML reads unquoted as ISO strings."""
    if isinstance(document, dict):
        return {key: plain(value) for key, value in document.items()}
    if isinstance(document, list):
        return [plain(value) for value in document]
    return document.isoformat() if isinstance(document, date) else document


def resolve_day(text: str, today: date) -> date:
    """A profile's day (DAY) as a calendar day, relative ones counted from `today`."""
    if text[0] in "+-":
        return today + timedelta(days=int(text[:-1]))
    return date.fromisoformat(text)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` merged over `base`: objects field by field, anything else (lists too) replaced."""
    merged = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def chosen(named: dict[str, Any] | None, data: dict[str, Any] | None) -> dict[str, Any]:
    """The document a named profile (less its description) with `data` over it makes."""
    return merge({k: v for k, v in (named or {}).items() if k != "description"}, data or {})


def job(document: dict[str, Any], number: int) -> dict[str, Any]:
    """What the user's `number`-th linked account (0 first) takes: the document, with its
    job of that number (they go round) merged over it."""
    jobs = document.get("jobs")
    base = {k: v for k, v in document.items() if k != "jobs"}
    return merge(base, jobs[number % len(jobs)]) if jobs else base


def problems(document: Any, today: date, where: str = "$",
             schema: dict[str, Any] = PROFILE_SCHEMA, *,
             whole: bool = True) -> list[tuple[str, str]]:
    """Every (JSON path, why) at which a profile document is wrong: its schema first, then
    (a `whole` document, not a part to merge over another) each job's contradictions
    (paths under `where`)."""
    found = [(where + path[1:], message) for path, message in schema_errors(document, schema)]
    if not found:
        found = _bad_days(document, today, where)
    if found or not whole:
        return found
    jobs = document.get("jobs")
    if not jobs:
        return _whole_problems(document, today, where)
    for number in range(len(jobs)):
        merged = job(document, number)
        for path, message in _whole_problems(merged, today, where):
            # a fault of a field the job gives names the job
            own = path_in(jobs[number], path, where)
            found.append((f"{where}.jobs[{number}]{path[len(where):]}" if own else path, message))
    return list(dict.fromkeys(found))


def path_in(document: dict[str, Any], path: str, where: str) -> bool:
    """Whether the field a path names is in `document` (object fields, list items)."""
    parts = path[len(where) + 1:].split(".")
    value: Any = document
    for part in parts:
        name, *indexes = part.replace("]", "").split("[")
        if not isinstance(value, dict) or name not in value:
            return False
        value = value[name]
        for index in indexes:
            if not isinstance(value, list) or int(index) >= len(value):
                return False
            value = value[int(index)]
    return True


DAY_FIELDS = ("startDate", "endDate", "dateOfBirth", "firstPayDate")
NOT_A_DAY = "{value!r} is not a calendar day"


def _bad_days(document: Any, today: date, where: str) -> list[tuple[str, str]]:
    """The days (DAY) that match the pattern but name no calendar day (2026-02-30, or one
    too far from today)."""
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            if key in DAY_FIELDS and isinstance(value, str):
                try:
                    resolve_day(value, today)
                except (ValueError, OverflowError):
                    found.append((f"{where}.{key}", NOT_A_DAY.format(value=value)))
            else:
                found += _bad_days(value, today, f"{where}.{key}")
    elif isinstance(document, list):
        for number, value in enumerate(document):
            found += _bad_days(value, today, f"{where}[{number}]")
    return found


def check(document: Any, today: date, where: str = "$", *, whole: bool = True) -> None:
    """ValidationFailed (422) naming every JSON path at fault, or nothing (`whole`: as
    problems)."""
    found = problems(document, today, where, whole=whole)
    if found:
        raise ValidationFailed(INVALID.format(problems="; ".join(f"{p}: {m}" for p, m in found)),
                               details=[field_detail(path, message) for path, message in found])


def _whole_problems(document: dict[str, Any], today: date,
                    where: str) -> list[tuple[str, str]]:
    """One job's contradictions: at the link, then (none there) along its timeline."""
    return _contradictions(document, today, where) or _timeline_problems(document, today, where)


def at_days(entry: dict[str, Any]) -> int:
    """A life event's `at` in days after the link day."""
    return int(entry["at"][:-1])


def life_events(document: dict[str, Any]) -> list[tuple[int, int]]:
    """A (one job's) document's life events as (days after the link, number in `timeline`),
    in the order they happen (the same day: in the order listed)."""
    return sorted((at_days(entry), number)
                  for number, entry in enumerate(document.get("timeline", [])))


def life_event_changes(entry: dict[str, Any], link_day: date,
                       income_type: str | None) -> dict[str, Any]:
    """What a life event changes, as a partial profile document, with what it leaves out
    filled in: a termination (or a new employer, `job: next`) ends on the event's day; an
    income without its incomeType keeps `income_type` (none known: the one its amount
    means)."""
    changes = {kind: copy.deepcopy(entry[kind]) for kind in LIFE_EVENT_KINDS if kind in entry}
    if entry.get("job") == "next":
        changes["employment"] = {**changes.get("employment", {}),
                                 "employmentStatus": "terminated"}
    employment = changes.get("employment", {})
    if employment.get("employmentStatus") == "terminated" and "endDate" not in employment:
        employment["endDate"] = (link_day + timedelta(days=at_days(entry))).isoformat()
    income = changes.get("income")
    if income is not None and "income" in income and "incomeType" not in income:
        income["incomeType"] = income_type or (
            "yearly" if income["income"] >= MIN_YEARLY_INCOME else "hourly")
    return changes


def _timeline_problems(document: dict[str, Any], today: date,
                       where: str) -> list[tuple[str, str]]:
    """A timeline's contradictions, `today` the link day: an event before the link day,
    anything after the job ended, an end date before its event's day, and what each event
    makes of the profile so far (a wage that is a salary, percents over 100, ...)."""
    found: list[tuple[str, str]] = []
    state = {k: v for k, v in document.items() if k not in ("timeline", "jobs")}
    ended = "the link" if state.get("employment", {}).get(
        "employmentStatus") == "terminated" else None
    timeline = document.get("timeline", [])
    for days, number in life_events(document):
        entry, path = timeline[number], f"{where}.timeline[{number}]"
        if days < 0:
            found.append((f"{path}.at", BEFORE_LINK.format(at=entry["at"])))
            continue
        if ended is not None:
            kind = next(k for k in entry if k != "at")
            found.append((f"{path}.{kind}", AFTER_END.format(ended=ended)))
            continue
        changes = life_event_changes(entry, today, state.get("income", {}).get("incomeType"))
        event_day = today + timedelta(days=days)
        given_end = entry.get("employment", {}).get("endDate")
        if given_end is not None and resolve_day(given_end, today) < event_day:
            found.append((f"{path}.employment.endDate", END_BEFORE_EVENT.format(
                end=resolve_day(given_end, today), day=event_day)))
            continue
        state = merge(state, changes)
        for fault, message in _contradictions(state, today, where):
            own = path_in(entry, fault, where)
            found.append((f"{path}{fault[len(where):]}" if own else path, message))
        if changes.get("employment", {}).get("employmentStatus") == "terminated":
            ended = entry["at"]
    return found


def _contradictions(document: dict[str, Any], today: date, where: str) -> list[tuple[str, str]]:
    found = []
    income = document.get("income", {})
    amount, unit = income.get("income"), income.get("incomeType")
    if amount is not None and unit == "hourly" and amount > MAX_HOURLY_WAGE:
        found.append((f"{where}.income.income", HOURLY_WAGE_TOO_HIGH.format(amount=amount)))
    if amount is not None and unit == "yearly" and amount < MIN_YEARLY_INCOME:
        found.append((f"{where}.income.income", YEARLY_TOO_LOW.format(amount=amount)))
    if amount is not None and unit is None:
        found.append((f"{where}.income.incomeType", "an income needs its incomeType"))
    employment = document.get("employment", {})
    start = employment.get("startDate")
    start_day = resolve_day(start, today) if start else None
    if start_day is not None and start_day > today:
        found.append((f"{where}.employment.startDate",
                      START_IN_FUTURE.format(start=start_day, today=today)))
    status = employment.get("employmentStatus")
    if "endDate" in employment:
        end = resolve_day(employment["endDate"], today)
        if status != "terminated":
            found.append((f"{where}.employment.endDate", END_NEEDS_TERMINATED))
        elif start_day is not None and end < start_day:
            found.append((f"{where}.employment.endDate",
                          END_BEFORE_START.format(end=end, start=start_day)))
    first_pay = document.get("statements", {}).get("firstPayDate")
    if first_pay and start_day is not None and resolve_day(first_pay, today) < start_day:
        found.append((f"{where}.statements.firstPayDate",
                      PAY_BEFORE_START.format(pay=resolve_day(first_pay, today), start=start_day)))
    if "hoursVariation" in document.get("timesheets", {}) and unit == "yearly":
        found.append((f"{where}.timesheets.hoursVariation", NO_TIMESHEETS))
    accounts = document.get("depositAccounts", [])
    totals = [n for n, a in enumerate(accounts) if a["distributionType"] == "total"]
    for number in totals[1:]:
        found.append((f"{where}.depositAccounts[{number}].distributionType", TWO_TOTALS))
    percents = [(n, a.get("distributionAmount", 0)) for n, a in enumerate(accounts)
                if a["distributionType"] == "percent"]
    total = sum(share for _, share in percents)
    if total > 100:
        found.append((f"{where}.depositAccounts[{percents[-1][0]}].distributionAmount",
                      PERCENTS_OVER.format(total=total)))
    elif accounts and not totals and total < 100:
        found.append((f"{where}.depositAccounts", NOWHERE.format(total=total)))
    return found


# The fields a document gives as they are (a day: resolved), and the Profile attribute each
# sets: (kind of record, field, attribute).
_ATTRIBUTES = (*(("identity", name, attribute) for name, attribute in (
                   ("firstName", "first_name"), ("lastName", "last_name"), ("email", "email"),
                   ("phone", "phone"), ("address", "address"), ("city", "city"),
                   ("state", "state"), ("postalCode", "postal_code"),
                   ("dateOfBirth", "date_of_birth"))),
               ("employment", "startDate", "start_date"), ("employment", "jobTitle", "job_title"),
               ("income", "payCycle", "pay_cycle"), ("taxes", "rate", "tax_rate"),
               ("timesheets", "hoursVariation", "hours_variation"),
               ("statements", "count", "statement_count"),
               ("statements", "firstPayDate", "first_pay_date"))


def apply(profile: Profile, document: dict[str, Any], today: date, *,
          accounts_key: str = "") -> Profile:
    """The person and job of `profile` with a (checked, one job's) document over them; what
    derives from what the document gives follows it (the annual income from an hourly wage
    and the hours, the wage from a salary)."""
    changes: dict[str, Any] = {}
    for kind, name, attribute in _ATTRIBUTES:
        if name in document.get(kind, {}):
            value = document[kind][name]
            changes[attribute] = resolve_day(value, today) if name in DAY_FIELDS else value
    if "ssn" in document.get("identity", {}):
        changes["ssn_last4"] = document["identity"]["ssn"][-4:]
    employment = document.get("employment", {})
    if employment.get("employmentStatus") == "terminated":
        # Without its end date, the job ended ENDED_DAYS_AGO days ago (not before it began).
        changes["employment_status"] = "terminated"
        changes["end_date"] = (resolve_day(employment["endDate"], today) if "endDate" in employment
                               else max(changes.get("start_date", profile.start_date),
                                        today - timedelta(days=ENDED_DAYS_AGO)))
    weekly_hours = employment.get("weeklyHours", profile.weekly_hours)
    changes["weekly_hours"] = weekly_hours
    income = document.get("income", {})
    unit = income.get("incomeType", "hourly" if profile.employee_type == "hourly" else "yearly")
    if unit == "hourly":
        rate = income.get("income", profile.hourly_rate)
        changes.update(employee_type="hourly", hourly_rate=round(rate, 2),
                       annual_income=round(rate * weekly_hours * 52, 2))
    else:
        annual = income.get("income", profile.annual_income)
        changes.update(employee_type="salaried", annual_income=round(float(annual), 2),
                       hourly_rate=round(annual / (weekly_hours * 52), 2))
    if "depositAccounts" in document:
        changes["deposit_accounts"] = deposit_accounts(profile, document["depositAccounts"],
                                                       accounts_key)
    return replace(profile, **changes)


def apply_life_event(profile: Profile, changes: dict[str, Any], link_day: date,
                     key: str) -> Profile:
    """The person and job after a life event (`changes`: life_event_changes'); the income
    figures stay as they are unless it changes the income or the hours, and the deposit
    accounts it names without numbers are new ones (`key`: the event's own)."""
    after = apply(profile, changes, link_day, accounts_key=key)
    if "income" not in changes and "weeklyHours" not in changes.get("employment", {}):
        after = replace(after, employee_type=profile.employee_type,
                        annual_income=profile.annual_income, hourly_rate=profile.hourly_rate)
    return after


def deposit_accounts(profile: Profile, given: list[dict[str, Any]],
                     key: str = "") -> list[dict[str, Any]]:
    """The accounts a profile gives, each number it leaves out made up (the same for the
    same person and `key`: a life event's are new accounts), a `total` taking what the
    percents leave."""
    percents = sum(a.get("distributionAmount", 0) for a in given
                   if a["distributionType"] == "percent")
    made = []
    for number, account in enumerate(given):
        made_up = zlib.crc32(f"{profile.email}:{key}{number}".encode())
        amount = (100 - percents if account["distributionType"] == "total"
                  else account.get("distributionAmount", 0))
        made.append({
            "accountNumber": account.get("accountNumber", f"{10**9 + made_up % (9 * 10**9)}"),
            "routingNumber": account.get("routingNumber", "021000021"),
            "type": account["type"],
            "bankName": account.get("bankName", "Paycard Bank" if account["type"] == "paycard"
                                    else "Chase"),
            "distributionType": account["distributionType"], "distributionAmount": amount})
    return made


def bundled_problems(profiles: dict[str, Any], today: date) -> list[tuple[str, str]]:
    """The contradictions of a profiles.yaml's `profiles` (PROFILES_FILE_SCHEMA checked
    already), with paths from the file's root."""
    found = []
    for name, profile in profiles.items():
        found += problems(chosen(profile, None), today, f"$.profiles.{name}")
    return found
