"""Data profiles (DESIGN.md: Payroll data you choose): the merge and each check of a profile
document (domain/data_profiles.py), then the bundled profiles and the control plane through
the real app."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from payroll_sandbox.load.datagen import ProfileFactory
from payroll_sandbox.domain.accounts import data_profiles as dp
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
    ({"employment": {"startDate": "2026-02-30"}}, "$.employment.startDate"),
    ({"identity": {"dateOfBirth": "0000-01-01"}}, "$.identity.dateOfBirth"),
    ({"jobs": [{"statements": {"firstPayDate": "2025-13-01"}}]}, "$.jobs[0].statements.firstPayDate"),
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
    from payroll_sandbox.load.loading import load
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
    from payroll_sandbox.load.fixtures import ConfigError
    from payroll_sandbox.load.loading import load
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


# -- through the real app ---------------------------------------------------------------------

from calls import call, error_of, run_until_idle  # noqa: E402
from conftest import ACME, WALMART  # noqa: E402
from jsonschema import Draft202012Validator  # noqa: E402

from payroll_sandbox.domain.accounts.data_records import DATA_RECORDS  # noqa: E402
from payroll_sandbox.domain.shapes import schema_of  # noqa: E402

TARGET = "6410a0000000000000000003"  # a second employer (deposit, verify)
KINDS = ("income", "employment", "deposit-accounts", "statements", "identity", "taxes",
         "timesheets")


async def linked(client, identifier: str, company: str = WALMART) -> dict[str, list[dict]]:
    """A completed deposit task for the user at `company`; each kind of its linked account's
    records, read at the data endpoints' real paths (/income/{identifier}, ...)."""
    await call(client, "POST", "/task/create", json={
        "identifier": identifier, "company": company, "product": "deposit",
        "scenario": "happy-path"})
    await run_until_idle(client)
    accounts = (await call(client, "GET", f"/linked-accounts/{identifier}"))["data"]
    account = next(a["_id"] for a in accounts if a["companyId"] == company)
    found = {}
    for kind in KINDS:
        params = {"linkedAccount": account, **({"limit": "1000"} if kind == "statements" else {})}
        found[kind] = (await call(client, "GET", f"/{kind}/{identifier}", params=params))["data"]
        for record in found[kind]:
            errors = list(Draft202012Validator(schema_of(DATA_RECORDS[kind])).iter_errors(record))
            assert not errors, (kind, record, errors[0].message)
    return found


def assert_statements_follow_income(records: dict[str, list[dict]]) -> None:
    income = records["income"][0]
    periods = {"weekly": 52, "biweekly": 26, "semimonthly": 24, "monthly": 12}[income["payCycle"]]
    for statement in records["statements"]:
        assert statement["netAmount"] < statement["grossAmount"]
        if income["incomeType"] == "yearly":
            assert abs(statement["grossAmount"] * periods - income["annualIncome"]) <= periods
        else:
            assert statement["grossAmount"] == pytest.approx(
                statement["hours"] * income["hourlyIncome"], abs=0.01)
        assert statement["payPeriodStartDate"] <= statement["payPeriodEndDate"] == \
            statement["payPeriodEndDate"] and statement["date"] >= statement["payPeriodEndDate"]


async def test_profiles_list_names_each_with_a_line(client):
    listed = (await call(client, "GET", "/_sandbox/profiles"))["data"]
    assert BUNDLED_NAMES <= {p["name"] for p in listed}
    assert all(p["description"] for p in listed)


@pytest.mark.parametrize("name", sorted(BUNDLED_NAMES))
async def test_each_bundled_profile_makes_records_of_the_published_shapes(client, name):
    await call(client, "PUT", "/_sandbox/users/u-1/profile", json={"profile": name})
    records = await linked(client, "u-1")
    assert_statements_follow_income(records)
    employment = records["employment"][0]
    if name == "recently-terminated":
        assert employment["employmentStatus"] == "terminated"
        assert all(s["date"] <= employment["endDate"] for s in records["statements"])
        assert records["income"][0]["nextExpectedPayDate"] is None
    if name == "new-hire":
        assert records["statements"] == []
    if name == "paycard":
        assert [a["type"] for a in records["deposit-accounts"]] == ["paycard"]


async def test_bound_profile_is_what_the_data_endpoints_answer(client):
    data = {"income": {"income": 85_000, "incomeType": "yearly", "payCycle": "biweekly"},
            "employment": {"jobTitle": "Analyst", "weeklyHours": 40, "startDate": "2021-03-01"},
            "identity": {"firstName": "Ada", "lastName": "Lovelace"},
            "depositAccounts": [{"type": "checking", "bankName": "Chase",
                                 "accountNumber": "123456789", "routingNumber": "021000021",
                                 "distributionType": "total"},
                                {"type": "savings", "bankName": "Ally Bank",
                                 "distributionType": "percent", "distributionAmount": 20}]}
    bound = (await call(client, "PUT", "/_sandbox/users/u-2/profile", json={"data": data}))["data"]
    assert bound["data"] == data and bound["profile"] is None
    assert (await call(client, "GET", "/_sandbox/users/u-2/profile"))["data"] == bound
    records = await linked(client, "u-2")
    income = records["income"][0]
    assert (income["income"], income["incomeType"], income["annualIncome"], income["payCycle"]) \
        == (85_000, "yearly", 85_000, "biweekly")
    employment = records["employment"][0]
    assert (employment["jobTitle"], employment["weeklyHours"], employment["startDate"][:10],
            employment["employmentStatus"]) == ("Analyst", 40, "2021-03-01", "active")
    assert [(a["type"], a["distributionType"], a["distributionAmount"], a["accountNumber"][-4:])
            for a in records["deposit-accounts"]][:1] == [("checking", "total", 80, "6789")]
    assert [a["distributionAmount"] for a in records["deposit-accounts"]] == [80, 20]
    assert (records["identity"][0]["firstName"], records["identity"][0]["lastName"]) == (
        "Ada", "Lovelace")
    assert_statements_follow_income(records)
    assert len(records["statements"]) >= 6


async def test_hourly_profile_statements_vary_with_the_hours(client):
    await call(client, "PUT", "/_sandbox/users/u-3/profile", json={"profile": "hourly"})
    records = await linked(client, "u-3")
    assert_statements_follow_income(records)
    assert records["income"][0]["hourlyIncome"] == 19.5
    assert len({s["hours"] for s in records["statements"]}) > 1
    assert len({s["grossAmount"] for s in records["statements"]}) > 1


async def test_named_profile_with_data_over_it(client):
    body = {"profile": "salaried", "data": {"income": {"income": 29_999}}}
    document = (await call(client, "PUT", "/_sandbox/users/u-4/profile", json=body))["data"]
    assert document["document"]["income"] == {"income": 29_999, "incomeType": "yearly",
                                              "payCycle": "biweekly"}
    records = await linked(client, "u-4")
    assert records["income"][0]["annualIncome"] == 29_999
    assert records["deposit-accounts"][0]["bankName"] == "Chase"  # from the named profile


async def test_gig_worker_each_linked_account_is_the_next_job(client):
    await call(client, "PUT", "/_sandbox/users/u-5/profile", json={"profile": "gig-worker"})
    first = await linked(client, "u-5", WALMART)
    second = await linked(client, "u-5", TARGET)
    assert first["employment"][0]["jobTitle"] == "Delivery Driver"
    assert second["employment"][0]["jobTitle"] == "Rideshare Driver"
    assert (first["income"][0]["hourlyIncome"], second["income"][0]["hourlyIncome"]) == (18, 22.5)


@pytest.mark.parametrize("body, path", [
    ({"data": {"income": {"income": 85_000, "incomeType": "hourly"}}}, "$.data.income.income"),
    ({"data": {"income": {"wage": 1}}}, "$.data.income.wage"),
    ({"data": {"depositAccounts": [
        {"type": "checking", "distributionType": "percent", "distributionAmount": 70},
        {"type": "savings", "distributionType": "percent", "distributionAmount": 40}]}},
     "$.data.depositAccounts[1].distributionAmount"),
    ({"profile": "hourly", "data": {"income": {"income": 90_000}}}, "$.data.income.income"),
    ({"profile": "no-such-profile"}, "$.profile"),
    ({}, "$"),
])
async def test_contradictory_profile_is_refused_with_its_path_and_nothing_changes(client, body,
                                                                                  path):
    await call(client, "PUT", "/_sandbox/users/u-6/profile", json={"profile": "part-time"})
    error = await error_of(client, "PUT", "/_sandbox/users/u-6/profile", 422, json=body)
    assert path in [detail["path"] for detail in error["details"]]
    assert (await call(client, "GET", "/_sandbox/users/u-6/profile"))["data"]["profile"] == \
        "part-time"


async def test_unbound_user_links_from_the_seed_again(client):
    await call(client, "PUT", "/_sandbox/users/u-7/profile", json={"profile": "high-earner"})
    removed = (await call(client, "DELETE", "/_sandbox/users/u-7/profile"))["data"]
    assert removed == {"identifier": "u-7", "removed": True}
    assert (await call(client, "GET", "/_sandbox/users/u-7/profile"))["data"]["document"] is None
    records = await linked(client, "u-7")
    assert records["income"][0]["annualIncome"] != 310_000


async def test_profile_bindings_survive_a_snapshot_and_restore(client):
    await call(client, "PUT", "/_sandbox/users/u-8/profile", json={"profile": "paycard"})
    taken = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    assert taken["profileBindings"]["u-8"]["profile"] == "paycard"
    await call(client, "DELETE", "/_sandbox/users/u-8/profile")
    await call(client, "POST", "/_sandbox/snapshot", json=taken)
    assert (await call(client, "GET", "/_sandbox/users/u-8/profile"))["data"]["profile"] == "paycard"
    without = {k: v for k, v in taken.items() if k != "profileBindings"}
    await call(client, "POST", "/_sandbox/snapshot", json=without)  # older snapshots restore
    assert (await call(client, "GET", "/_sandbox/users/u-8/profile"))["data"]["profile"] is None


# -- a profile bound to a connected account; accounts.yaml ------------------------------------

async def test_profile_bound_to_a_connected_account_shows_at_its_next_refresh(client):
    before = await linked(client, "u-9")
    account_id = before["income"][0]["linkedAccount"]
    data = {"income": {"income": 123_456, "incomeType": "yearly"},
            "employment": {"employmentStatus": "terminated", "endDate": "-0d"},
            "depositAccounts": [{"type": "paycard", "bankName": "Wisely",
                                 "accountNumber": "5550001111", "distributionType": "total"}]}
    await call(client, "PUT", "/_sandbox/users/u-9/profile", json={"data": data})
    # nothing changes before the refresh
    assert (await call(client, "GET", "/income/u-9"))["data"] == before["income"]
    task_id = (await call(client, "POST", "/task/create",
                          json={"linkedAccount": account_id}))["data"]["id"]
    await run_until_idle(client)
    events = (await call(client, "GET", "/_sandbox/events",
                         params={"task": task_id, "limit": "1000"}))["data"]
    types = [e["eventType"] for e in events]
    for kind in ("income", "employment", "deposit-accounts", "statements", "identity"):
        assert f"{kind}-synced" in types
    assert {"income-updated", "employment-updated", "deposit-accounts-added",
            "deposit-accounts-removed"} <= set(types)
    assert "identity-updated" not in types
    income = (await call(client, "GET", f"/income/u-9"))["data"][0]
    assert (income["annualIncome"], income["nextExpectedPayDate"]) == (123_456, None)
    employment = (await call(client, "GET", "/employment/u-9"))["data"][0]
    assert employment["employmentStatus"] == "terminated"
    deposits = (await call(client, "GET", "/deposit-accounts/u-9"))["data"]
    assert [(a["type"], a["accountNumber"][-4:]) for a in deposits] == [("paycard", "1111")]

    # the same binding again at the next refresh: nothing more to announce
    task_id = (await call(client, "POST", "/task/create",
                          json={"linkedAccount": account_id}))["data"]["id"]
    await run_until_idle(client)
    events = (await call(client, "GET", "/_sandbox/events",
                         params={"task": task_id, "limit": "1000"}))["data"]
    assert not {"income-updated", "employment-updated"} & {e["eventType"] for e in events}


async def _with_accounts(aiohttp_client, clock, tmp_path, entries, profiles_text=None):
    import shutil

    import yaml
    from conftest import REPO

    from payroll_sandbox.app import build_registry, create_app
    from payroll_sandbox.load.loading import load
    from payroll_sandbox.settings import Settings

    folder = tmp_path / "fixtures"
    shutil.copytree(REPO / "fixtures", folder)
    document = yaml.safe_load((folder / "accounts.yaml").read_text(encoding="utf-8"))
    document["accounts"][0]["linkedAccounts"] = entries
    (folder / "accounts.yaml").write_text(yaml.safe_dump(document), encoding="utf-8")
    settings = Settings(port=0, clock="manual", fixtures=folder)
    loaded = load(settings)
    store = build_registry(settings, clock=clock, loaded=loaded)
    return await aiohttp_client(create_app(settings, registry=store))


async def test_accounts_yaml_linked_accounts_take_profile_and_data(aiohttp_client, clock,
                                                                   tmp_path):
    client = await _with_accounts(aiohttp_client, clock, tmp_path, [
        {"identifier": "ready", "company": WALMART, "profile": "high-earner",
         "data": {"identity": {"firstName": "Grace"}}}])
    income = (await call(client, "GET", "/income/ready"))["data"][0]
    assert income["annualIncome"] == 310_000
    identity = (await call(client, "GET", "/identity/ready"))["data"][0]
    assert identity["firstName"] == "Grace"


@pytest.mark.parametrize("entry, path", [
    ({"profile": "nope"}, "$.accounts[0].linkedAccounts[0].profile"),
    ({"data": {"taxes": {"rate": 2}}}, "$.accounts[0].linkedAccounts[0].data.taxes.rate"),
    ({"profile": "hourly", "data": {"income": {"income": 50_000}}},
     "$.accounts[0].linkedAccounts[0].data.income.income"),
])
async def test_accounts_yaml_wrong_profile_names_file_and_path(aiohttp_client, clock, tmp_path,
                                                               entry, path):
    from payroll_sandbox.load.fixtures import ConfigError

    with pytest.raises(ConfigError) as raised:
        await _with_accounts(aiohttp_client, clock, tmp_path,
                             [{"identifier": "ready", "company": WALMART, **entry}])
    assert raised.value.file.endswith("accounts.yaml")
    assert path in [p for _, p, _ in raised.value.problems]


async def test_user_signing_in_through_the_hosted_flow_gets_the_bound_profile(client):
    await call(client, "PUT", "/_sandbox/users/flow-user/profile", json={"profile": "paycard"})
    token = (await call(client, "POST", "/access-token",
                        json={"identifier": "flow-user"}))["data"]["publicToken"]
    await call(client, "POST", "/sdk/session", headers={"x-public-token": token},
               json={"config": {"publicToken": token, "tasks": [{"operation": "deposit"}]}})
    await call(client, "POST", "/sdk/login", headers={"x-public-token": token},
               json={"companyId": WALMART, "username": "test-good", "password": "any",
                     "tasks": [{"operation": "deposit"}]})
    await run_until_idle(client)
    income = (await call(client, "GET", "/income/flow-user"))["data"][0]
    assert (income["hourlyIncome"], income["payCycle"]) == (15.25, "biweekly")
    deposits = (await call(client, "GET", "/deposit-accounts/flow-user"))["data"]
    assert deposits[0]["type"] == "paycard"


# -- the pytest plugin's use_profile ----------------------------------------------------------

def test_plugin_use_profile_sync(payroll_sandbox):
    bound = payroll_sandbox.use_profile("plugin-user", "salaried",
                                        income={"income": 29_999, "incomeType": "yearly"})
    assert (bound["profile"], bound["data"]) == ("salaried", {"income": {
        "income": 29_999, "incomeType": "yearly"}})
    payroll_sandbox.post("/task/create", {"identifier": "plugin-user", "company": WALMART,
                                          "product": "deposit", "scenario": "happy-path"})
    payroll_sandbox.run_until_idle()
    [income] = payroll_sandbox.get("/income/plugin-user")
    assert income["annualIncome"] == 29_999  # a rule "below 30,000 a year" at its edge
    assert payroll_sandbox.use_profile("plugin-user")["removed"] is True


async def test_plugin_use_profile_async(async_payroll_sandbox):
    sandbox = async_payroll_sandbox
    bound = await sandbox.use_profile("plugin-async", deposit_accounts=[
        {"type": "paycard", "distributionType": "total"}])
    assert bound["data"] == {"depositAccounts": [{"type": "paycard",
                                                  "distributionType": "total"}]}
    await sandbox.post("/task/create", {"identifier": "plugin-async", "company": WALMART,
                                        "product": "verify", "scenario": "happy-path"})
    await sandbox.run_until_idle()
    deposits = await sandbox.get("/deposit-accounts/plugin-async")
    assert [a["type"] for a in deposits] == ["paycard"]


def test_docs_fixtures_profile_format_is_a_valid_profiles_file(tmp_path):
    from conftest import REPO

    from payroll_sandbox.load.fixtures import load_profiles

    text = (REPO / "docs" / "fixtures.md").read_text(encoding="utf-8")
    block = text.split("every field optional:\n\n```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "profiles.yaml").write_text(block, encoding="utf-8")
    profile = load_profiles(tmp_path / "profiles.yaml")["my-profile"]
    assert set(dp.KINDS) | {"jobs", "description"} == set(profile)
    assert profile["identity"]["dateOfBirth"] == "1990-12-10"


async def test_a_profiled_linked_account_reads_back_the_same_after_a_restore(client):
    await call(client, "PUT", "/_sandbox/users/u-10/profile",
               json={"profile": "recently-terminated",
                     "data": {"timesheets": {"hoursVariation": 0.2},
                              "income": {"income": 20, "incomeType": "hourly"},
                              "statements": {"count": 3}}})
    before = await linked(client, "u-10")
    assert len(before["statements"]) == 3
    taken = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    [stored] = [a for a in taken["linkedAccounts"] if a["identifier"] == "u-10"]
    assert stored["profile"]["employmentStatus"] == "terminated"
    await call(client, "POST", "/_sandbox/reset")
    await call(client, "POST", "/_sandbox/snapshot", json=taken)
    for kind in ("income", "employment", "statements", "timesheets"):
        assert (await call(client, "GET", f"/{kind}/u-10",
                           params={"limit": "1000"} if kind == "statements" else {}))["data"] \
            == before[kind], kind
    again = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    assert again["linkedAccounts"] == taken["linkedAccounts"]
