"""Data profiles (DESIGN.md: Payroll data you choose): the merge and each check of a profile
document (domain/data_profiles.py), then the bundled profiles and the control plane through
the real app."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from payroll_sandbox.datagen import ProfileFactory
from payroll_sandbox.domain import data_profiles as dp
from payroll_sandbox.errors import ValidationFailed

TODAY = date(2026, 11, 27)


def made(company: str = "c1"):
    return ProfileFactory(7).profile("t", "user-1", company, "Acme", TODAY)


# -- the merge --------------------------------------------------------------------------------

def test_merge_objects_field_by_field_and_lists_replaced():
    base = {"income": {"income": 50_000, "incomeType": "yearly"},
            "depositAccounts": [{"type": "checking", "distributionType": "total"}]}
    over = {"income": {"income": 60_000},
            "depositAccounts": [{"type": "paycard", "distributionType": "total"}]}
    assert dp.merge(base, over) == {
        "income": {"income": 60_000, "incomeType": "yearly"},
        "depositAccounts": [{"type": "paycard", "distributionType": "total"}]}
    assert base["income"]["income"] == 50_000  # neither side is changed


def test_jobs_go_round_over_the_rest():
    document = {"taxes": {"rate": 0.2}, "jobs": [{"income": {"income": 20, "incomeType": "hourly"}},
                                                 {"income": {"income": 30, "incomeType": "hourly"}}]}
    assert [dp.job(document, n)["income"]["income"] for n in range(3)] == [20, 30, 20]
    assert dp.job(document, 1)["taxes"] == {"rate": 0.2}


def test_apply_yearly_income_derives_the_wage():
    profile = dp.apply(made(), {"income": {"income": 85_000, "incomeType": "yearly",
                                           "payCycle": "biweekly"},
                                "employment": {"weeklyHours": 40}}, TODAY)
    assert (profile.annual_income, profile.employee_type, profile.pay_cycle) == (
        85_000, "salaried", "biweekly")
    assert profile.hourly_rate == round(85_000 / 2080, 2)


def test_apply_hourly_income_derives_the_annual_income():
    profile = dp.apply(made(), {"income": {"income": 20, "incomeType": "hourly"},
                                "employment": {"weeklyHours": 25}}, TODAY)
    assert (profile.hourly_rate, profile.annual_income, profile.employee_type) == (
        20, 20 * 25 * 52, "hourly")


def test_apply_relative_days_count_from_today():
    profile = dp.apply(made(), {"employment": {"employmentStatus": "terminated",
                                               "startDate": "-400d", "endDate": "-10d"}}, TODAY)
    assert profile.start_date == TODAY - timedelta(days=400)
    assert (profile.employment_status, profile.end_date) == ("terminated",
                                                             TODAY - timedelta(days=10))


def test_apply_deposit_accounts_total_takes_the_rest():
    profile = dp.apply(made(), {"depositAccounts": [
        {"type": "checking", "distributionType": "total"},
        {"type": "savings", "distributionType": "percent", "distributionAmount": 25}]}, TODAY)
    assert [(a["distributionType"], a["distributionAmount"]) for a in profile.deposit_accounts] == [
        ("total", 75), ("percent", 25)]
    assert all(a["accountNumber"].isdigit() for a in profile.deposit_accounts)


def test_apply_leaves_what_the_profile_does_not_name():
    before = made()
    after = dp.apply(before, {"identity": {"firstName": "Ada"}}, TODAY)
    assert after.first_name == "Ada"
    assert (after.last_name, after.annual_income, after.pay_cycle) == (
        before.last_name, before.annual_income, before.pay_cycle)


# -- the checks -------------------------------------------------------------------------------

@pytest.mark.parametrize("document, path", [
    ({"income": {"income": 85_000, "incomeType": "hourly"}}, "$.income.income"),
    ({"income": {"income": 25, "incomeType": "yearly"}}, "$.income.income"),
    ({"income": {"income": 25}}, "$.income.incomeType"),
    ({"income": {"salary": 1}}, "$.income.salary"),
    ({"payslips": {}}, "$.payslips"),
    ({"depositAccounts": [{"type": "checking", "distributionType": "percent",
                           "distributionAmount": 60},
                          {"type": "savings", "distributionType": "percent",
                           "distributionAmount": 50}]}, "$.depositAccounts[1].distributionAmount"),
    ({"depositAccounts": [{"type": "checking", "distributionType": "total"},
                          {"type": "savings", "distributionType": "total"}]},
     "$.depositAccounts[1].distributionType"),
    ({"depositAccounts": [{"type": "checking", "distributionType": "percent",
                           "distributionAmount": 60}]}, "$.depositAccounts"),
    ({"employment": {"startDate": "-30d"}, "statements": {"firstPayDate": "-40d"}},
     "$.statements.firstPayDate"),
    ({"employment": {"employmentStatus": "terminated"}}, "$.employment.endDate"),
    ({"employment": {"endDate": "-3d"}}, "$.employment.endDate"),
    ({"employment": {"employmentStatus": "terminated", "startDate": "-10d", "endDate": "-20d"}},
     "$.employment.endDate"),
    ({"employment": {"startDate": "+10d"}}, "$.employment.startDate"),
    ({"income": {"income": 50_000, "incomeType": "yearly"}, "timesheets": {"hoursVariation": 0.3}},
     "$.timesheets.hoursVariation"),
    ({"jobs": [{"income": {"income": 20, "incomeType": "hourly"}},
               {"income": {"income": 9_000, "incomeType": "hourly"}}]}, "$.jobs[1].income.income"),
])
def test_check_refuses_with_the_path(document, path):
    with pytest.raises(ValidationFailed) as raised:
        dp.check(document, TODAY, "$")
    assert path in [detail["path"] for detail in raised.value.details]


def test_check_paths_under_where():
    with pytest.raises(ValidationFailed) as raised:
        dp.check({"income": {"income": 85_000, "incomeType": "hourly"}}, TODAY, "$.data")
    assert raised.value.details[0]["path"] == "$.data.income.income"
    assert raised.value.status == 422


def test_check_accepts_a_consistent_profile():
    dp.check({"income": {"income": 85_000, "incomeType": "yearly", "payCycle": "biweekly"},
              "employment": {"employmentStatus": "terminated", "startDate": "2020-01-06",
                             "endDate": "-20d"},
              "depositAccounts": [{"type": "paycard", "distributionType": "total"}],
              "statements": {"count": 6, "firstPayDate": "2020-02-01"}, "taxes": {"rate": 0.2}},
             TODAY)


# -- profiles.yaml ----------------------------------------------------------------------------

BUNDLED_NAMES = {"salaried", "hourly", "gig-worker", "recently-terminated", "new-hire", "paycard",
                 "high-earner", "part-time"}


def _folder_with_profiles(tmp_path, text: str):
    import shutil

    from conftest import REPO

    folder = tmp_path / "fixtures"
    shutil.copytree(REPO / "fixtures", folder)
    (folder / "profiles.yaml").write_text(text, encoding="utf-8")
    return folder


def test_bundled_profiles_load_with_a_description_each(loaded):
    profiles = loaded.fixtures.profiles
    assert BUNDLED_NAMES <= set(profiles)
    assert all(profile["description"] for profile in profiles.values())


def test_a_folder_adds_profiles_over_the_bundled_by_name(tmp_path):
    from payroll_sandbox.loading import load
    from payroll_sandbox.settings import Settings

    folder = _folder_with_profiles(tmp_path, (
        "profiles:\n  mine: {description: Mine, income: {income: 40000, incomeType: yearly}}\n"
        "  salaried: {description: Replaced, income: {income: 99000, incomeType: yearly}}\n"))
    profiles = load(Settings(fixtures=folder)).fixtures.profiles
    assert BUNDLED_NAMES | {"mine"} <= set(profiles)
    assert profiles["salaried"]["description"] == "Replaced"


@pytest.mark.parametrize("text, path", [
    ("profiles:\n  bad: {description: x, income: {income: 90000, incomeType: hourly}}\n",
     "$.profiles.bad.income.income"),
    ("profiles:\n  bad: {description: x, wages: 1}\n", "$.profiles.bad.wages"),
    ("profiles:\n  bad: {income: {income: 9, incomeType: hourly}}\n", "$.profiles.bad"),
])
def test_a_wrong_profiles_file_stops_the_start_with_file_and_path(tmp_path, text, path):
    from payroll_sandbox.fixtures import ConfigError
    from payroll_sandbox.loading import load
    from payroll_sandbox.settings import Settings

    folder = _folder_with_profiles(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load(Settings(fixtures=folder))
    assert raised.value.file.endswith("profiles.yaml")
    assert path in [p for _, p, _ in raised.value.problems]


def test_fixtures_validate_checks_profiles(tmp_path):
    from conftest import run_cli

    folder = _folder_with_profiles(
        tmp_path, "profiles:\n  bad: {description: x, taxes: {rate: 0.9}}\n")
    result = run_cli("fixtures", "validate", str(folder))
    assert result.returncode == 2
    assert "profiles.yaml: $.profiles.bad.taxes.rate" in result.stderr
    assert "8 data profiles" in run_cli("fixtures", "validate").stdout
