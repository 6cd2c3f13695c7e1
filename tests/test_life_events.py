"""Life events in data profiles (issue 45, point 2): a profile's `timeline` (at +Nd after the
link: a termination, a raise, a move of the pay, a new employer), each applied at its
virtual moment with the events a real change sends, the records staying consistent; the
contradictions refused with their JSON path; the bundled profiles with timelines. Through
the real app, a real webhook receiver and the manual clock."""

from __future__ import annotations

import asyncio
import json
from datetime import date, datetime, timedelta, timezone

import pytest
import yaml  # noqa: F401  (before pytester's runs: tests/test_pytest_plugin.py says why)
from calls import call, error_of, run_until_idle
from conftest import ACME, HOOKS, WALMART

from payroll_sandbox.clock import isoformat

pytest_plugins = ["pytester"]
DAY = 86_400
TARGET = "6410a0000000000000000003"  # a second employer (deposit, verify)
SYNCED = {"statements-synced", "income-synced", "employment-synced", "identity-synced",
          "taxes-synced", "deposit-accounts-synced", "earn-user-data"}

THREE = {  # a weekly-paid hourly user: a raise, a move of the pay, then the end of the job
    "income": {"income": 22.0, "incomeType": "hourly", "payCycle": "weekly"},
    "employment": {"employmentStatus": "active", "startDate": "-400d", "weeklyHours": 40},
    "depositAccounts": [{"type": "checking", "bankName": "Chase", "distributionType": "total"}],
    "timeline": [
        {"at": "+30d", "employment": {"employmentStatus": "terminated"}},
        {"at": "+14d", "income": {"income": 26.0}},
        {"at": "+21d", "depositAccounts": [{"type": "checking", "bankName": "Chime",
                                            "distributionType": "total"}]},
    ]}


async def quiet_tenant(sandbox, receiver) -> dict:
    """A tenant without push refreshes (only the life events sync), delivering to /hooks."""
    made = (await call(sandbox, "POST", "/_sandbox/tenants", status=201,
                       json={"continuousAccess": {"refreshInterval": None}}))["data"]
    keys = {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}
    await call(sandbox, "PUT", "/_sandbox/webhooks/endpoints", headers=keys,
               json={"endpoints": [{"url": receiver.url(HOOKS)}]})
    return keys


async def link(client, keys, identifier: str, company: str = WALMART) -> dict:
    keys = keys or ACME
    await call(client, "POST", "/task/create", headers=keys, json={
        "identifier": identifier, "company": company, "product": "deposit"})
    await run_until_idle(client, headers=keys)
    accounts = (await call(client, "GET", f"/linked-accounts/{identifier}", headers=keys))["data"]
    return next(a for a in accounts if a["companyId"] == company)


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def settle(client, keys) -> None:
    for _ in range(200):
        if not (await call(client, "GET", "/_sandbox/events", headers=keys,
                           params={"delivery": "pending"}))["data"]:
            return
        await asyncio.sleep(0.02)


async def advance_to(client, keys, moment: float) -> None:
    now = (await call(client, "GET", "/_sandbox/clock", headers=keys))["data"]["timestamp"]
    await call(client, "POST", "/_sandbox/clock/advance", headers=keys,
               json={"seconds": moment - now})
    await settle(client, keys)


def delivered(receiver) -> list[tuple[str, str, str]]:
    """(event type, eventTime, ce-time) of every delivery so far."""
    found = []
    for received in receiver.received(HOOKS):
        body = json.loads(received.body)
        found.append((body["eventType"], body["eventTime"], received.headers["ce-time"]))
    return found


async def test_each_life_event_is_delivered_at_exactly_its_moment(sandbox, receiver):
    keys = await quiet_tenant(sandbox, receiver)
    await call(sandbox, "PUT", "/_sandbox/users/u-1/profile", headers=keys, json={"data": THREE})
    account = await link(sandbox, keys, "u-1")
    linked_at = stamp(account["createdAt"])
    expected = {14: {"income-updated"}, 21: {"deposit-accounts-added", "deposit-accounts-removed",
                                             "deposit-switch-removed"},
                30: {"employment-updated"}}
    for days, types in expected.items():
        moment = linked_at + days * DAY
        await advance_to(sandbox, keys, moment - 1)
        seen = len(delivered(receiver))
        assert not any(stamp(t) >= moment for _, t, _ in delivered(receiver))
        await advance_to(sandbox, keys, moment)
        now = delivered(receiver)[seen:]
        assert now, days
        assert {(t, c) for _, t, c in now} == {(isoformat(moment), isoformat(moment))}, days
        assert types <= {kind for kind, _, _ in now}, (days, now)
        assert {kind for kind, _, _ in now} - types - {"statements-added", "timesheets-added",
                                                       "taxes-added"} == SYNCED | {"timesheets-synced"}
    # nothing more after the last one
    await advance_to(sandbox, keys, linked_at + 90 * DAY)
    assert all(stamp(t) <= linked_at + 30 * DAY for _, t, _ in delivered(receiver))


async def _records(client, identifier: str) -> dict[str, list[dict]]:
    return {kind: (await call(client, "GET", f"/{kind}/{identifier}",
                              params={"limit": "1000"}))["data"]
            for kind in ("income", "employment", "deposit-accounts", "statements", "timesheets")}


async def test_a_raise_then_a_move_then_the_end(client):
    await call(client, "PUT", "/_sandbox/users/u-2/profile", json={"data": THREE})
    account = await link(client, {}, "u-2")
    linked_day = date.fromisoformat(account["createdAt"][:10])
    before = await _records(client, "u-2")
    assert before["income"][0]["hourlyIncome"] == 22.0
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 60 * DAY})
    await run_until_idle(client)
    after = await _records(client, "u-2")
    income, employment = after["income"][0], after["employment"][0]
    # the raise: statements paid after its day follow it; before it, the old wage
    raise_day = linked_day + timedelta(days=14)
    assert income["hourlyIncome"] == 26.0
    for statement in after["statements"]:
        paid = date.fromisoformat(statement["date"][:10])
        rate = 26.0 if paid > raise_day else 22.0
        assert statement["grossAmount"] == pytest.approx(statement["hours"] * rate, abs=0.01), paid
    assert any(date.fromisoformat(s["date"][:10]) > raise_day for s in after["statements"])
    # the end: no pay, no hours after the end date; no next pay day
    end = linked_day + timedelta(days=30)
    assert employment["employmentStatus"] == "terminated"
    assert employment["endDate"][:10] == end.isoformat()
    assert all(date.fromisoformat(s["date"][:10]) <= end for s in after["statements"])
    assert all(date.fromisoformat(t["date"][:10]) <= end for t in after["timesheets"])
    assert income["nextExpectedPayDate"] is None and income["unpaidHoursInPayPeriod"] == 0.0
    # the move: the pay goes to the new account only
    assert [a["bankName"] for a in after["deposit-accounts"]] == ["Chime"]
    assert after["deposit-accounts"][0]["accountNumber"] != before["deposit-accounts"][0][
        "accountNumber"]


async def test_a_new_employer_ends_this_job_and_the_next_link_takes_the_next(client):
    await call(client, "PUT", "/_sandbox/users/u-3/profile", json={"profile": "new-employer"})
    account = await link(client, {}, "u-3")
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 46 * DAY})
    employment = (await call(client, "GET", "/employment/u-3",
                             params={"linkedAccount": account["_id"]}))["data"][0]
    assert employment["employmentStatus"] == "terminated"
    assert employment["endDate"][:10] == (date.fromisoformat(account["createdAt"][:10])
                                          + timedelta(days=45)).isoformat()
    events = (await call(client, "GET", "/_sandbox/events",
                         params={"user": "u-3", "limit": "1000"}))["data"]
    types = [e["eventType"] for e in events]
    assert {"employment-updated", "deposit-switch-removed", "deposit-accounts-added"} <= set(types)
    second = await link(client, {}, "u-3", TARGET)
    records = (await call(client, "GET", "/employment/u-3",
                          params={"linkedAccount": second["_id"]}))["data"][0]
    assert (records["jobTitle"], records["employmentStatus"]) == ("Senior Data Analyst", "active")


async def test_terminated_alone_ends_in_the_past_with_no_pay_after(client):
    await call(client, "PUT", "/_sandbox/users/u-4/profile",
               json={"data": {"employment": {"employmentStatus": "terminated"}}})
    account = await link(client, {}, "u-4")
    records = await _records(client, "u-4")
    end = date.fromisoformat(records["employment"][0]["endDate"][:10])
    assert end < date.fromisoformat(account["createdAt"][:10])
    assert all(date.fromisoformat(s["date"][:10]) <= end for s in records["statements"])
    assert records["income"][0]["nextExpectedPayDate"] is None


@pytest.mark.parametrize("timeline, path", [
    ([{"at": "+30d", "employment": {"employmentStatus": "terminated"}},
      {"at": "+40d", "income": {"income": 90_000}}], "$.data.timeline[1].income"),
    ([{"at": "-5d", "income": {"income": 90_000}}], "$.data.timeline[0].at"),
    ([{"at": "+10d", "employment": {"employmentStatus": "terminated", "endDate": "+5d"}}],
     "$.data.timeline[0].employment.endDate"),
    ([{"at": "+10d", "income": {"income": 9_000, "incomeType": "hourly"}}],
     "$.data.timeline[0].income.income"),
    ([{"at": "+10d", "depositAccounts": [{"type": "checking", "distributionType": "percent",
                                          "distributionAmount": 120}]}],
     "$.data.timeline[0].depositAccounts[0].distributionAmount"),
    ([{"at": "+10d"}], "$.data.timeline[0]"),
    ([{"at": "tomorrow", "job": "next"}], "$.data.timeline[0].at"),
])
async def test_a_contradicting_timeline_is_refused_with_its_path(client, timeline, path):
    await call(client, "PUT", "/_sandbox/users/u-5/profile", json={"profile": "salaried"})
    error = await error_of(client, "PUT", "/_sandbox/users/u-5/profile", 422,
                           json={"data": {"income": {"income": 60_000, "incomeType": "yearly"},
                                          "timeline": timeline}})
    assert path in [d["path"] for d in error["details"]], error
    bound = (await call(client, "GET", "/_sandbox/users/u-5/profile"))["data"]
    assert bound["profile"] == "salaried" and bound["data"] is None  # nothing changed


async def test_a_terminated_profile_takes_no_life_event_after(client):
    error = await error_of(client, "PUT", "/_sandbox/users/u-6/profile", 422,
                           json={"profile": "recently-terminated",
                                 "data": {"timeline": [{"at": "+3d", "income": {"income": 1}}]}})
    assert error["details"][0]["path"] == "$.data.timeline[0].income"


async def test_life_events_survive_a_snapshot_and_restore(client):
    await call(client, "PUT", "/_sandbox/users/u-7/profile",
               json={"profile": "terminated-next-month"})
    account = await link(client, {}, "u-7")
    taken = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    kinds = [job["action"]["kind"] for job in taken["jobs"]]
    assert "life-event" in kinds
    await call(client, "POST", "/_sandbox/reset")
    await call(client, "POST", "/_sandbox/snapshot", json=taken)
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 31 * DAY})
    employment = (await call(client, "GET", "/employment/u-7"))["data"][0]
    assert employment["employmentStatus"] == "terminated"
    updated = (await call(client, "GET", "/_sandbox/events",
                          params={"type": "employment-updated", "user": "u-7"}))["data"]
    assert [e["time"] for e in updated] == [
        isoformat(stamp(account["createdAt"]) + 30 * DAY)]


@pytest.mark.parametrize("name, days, wanted", [
    ("terminated-next-month", 30, "employment-updated"),
    ("raise-over-threshold", 21, "income-updated"),
    ("new-employer", 45, "employment-updated"),
])
async def test_bundled_profiles_with_timelines(client, name, days, wanted):
    await call(client, "PUT", "/_sandbox/users/u-8/profile", json={"profile": name})
    account = await link(client, {}, "u-8")
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 60 * DAY})
    events = (await call(client, "GET", "/_sandbox/events",
                         params={"type": wanted, "user": "u-8"}))["data"]
    moment = isoformat(stamp(account["createdAt"]) + days * DAY)
    assert moment in [e["time"] for e in events]
    if name == "raise-over-threshold":
        income = (await call(client, "GET", "/income/u-8"))["data"][0]
        assert income["annualIncome"] > 50_000 > 23.5 * 40 * 52


def test_docs_fixtures_life_events_block_is_a_valid_profiles_file(tmp_path):
    from conftest import REPO

    from payroll_sandbox.load.fixtures import load_profiles

    text = (REPO / "docs" / "fixtures.md").read_text(encoding="utf-8")
    block = text.split("### Life events\n", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "profiles.yaml").write_text(block, encoding="utf-8")
    profiles = load_profiles(tmp_path / "profiles.yaml")
    assert [e["at"] for e in profiles["three-changes"]["timeline"]] == ["+30d", "+14d", "+21d"]
    assert profiles["next-job"]["jobs"][0]["timeline"] == [{"at": "+60d", "job": "next"}]


def test_docs_plugin_examples_pass_as_a_customers_tests(pytester):
    """docs/plugin.md's pinned-start and life-events examples, run by the plugin (pytester)."""
    from conftest import REPO

    text = (REPO / "docs" / "plugin.md").read_text(encoding="utf-8")
    tests = []
    for heading in ("### The same bytes on any day\n", "### Life events\n"):
        part = text.split(heading, 1)[1]
        tests.append(part.split("```python\n", 1)[1].split("```", 1)[0])
    pytester.makeini("[pytest]\nasyncio_mode = auto\n"
                     "asyncio_default_fixture_loop_scope = function\nfilterwarnings = error\n")
    pytester.makepyfile("import pytest\n\n\n" + "\n\n".join(tests))
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


async def test_a_timeline_bound_after_the_link_takes_its_events_still_to_come(client):
    """Bound to a connected account, a profile with a timeline applies at the next refresh;
    its life events still to come (counted from the link) follow, the ones past do not, and
    the life events of the profile before are dropped."""
    await call(client, "PUT", "/_sandbox/users/u-9/profile",
               json={"profile": "terminated-next-month"})
    account = await link(client, {}, "u-9")
    linked_at = stamp(account["createdAt"])
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 5 * DAY})
    await call(client, "PUT", "/_sandbox/users/u-9/profile", json={"data": {
        "income": {"income": 70_000, "incomeType": "yearly"},
        "timeline": [{"at": "+2d", "income": {"income": 1_000_000}},
                     {"at": "+10d", "income": {"income": 75_000}}]}})
    await call(client, "POST", "/task/create", json={"linkedAccount": account["_id"]})
    await run_until_idle(client)
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 40 * DAY})
    income = (await call(client, "GET", "/income/u-9"))["data"][0]
    employment = (await call(client, "GET", "/employment/u-9"))["data"][0]
    assert income["annualIncome"] == 75_000  # +10d came; +2d had passed
    assert employment["employmentStatus"] == "active"  # the old timeline's +30d is gone
    updated = (await call(client, "GET", "/_sandbox/events",
                          params={"type": "income-updated", "user": "u-9"}))["data"]
    assert isoformat(linked_at + 10 * DAY) in [e["time"] for e in updated]


async def test_a_split_that_keeps_the_switched_account_is_no_switch_removed(client):
    await call(client, "PUT", "/_sandbox/users/u-10/profile", json={"data": {
        "depositAccounts": [{"type": "checking", "accountNumber": "111111111",
                             "distributionType": "total"}],
        "timeline": [{"at": "+3d", "depositAccounts": [
            {"type": "checking", "accountNumber": "111111111", "distributionType": "total"},
            {"type": "savings", "distributionType": "percent", "distributionAmount": 25}]}]}})
    await link(client, {}, "u-10")
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 4 * DAY})
    types = [e["eventType"] for e in (await call(client, "GET", "/_sandbox/events", params={
        "user": "u-10", "limit": "1000"}))["data"]]
    assert {"deposit-accounts-added", "deposit-accounts-updated"} <= set(types)
    assert "deposit-switch-removed" not in types
    deposits = (await call(client, "GET", "/deposit-accounts/u-10"))["data"]
    # The switched account keeps the remainder: a `total` account's amount is null (issue 47,
    # point 10), and the new savings account takes its 25%.
    assert [(a["accountNumber"][-4:], a["distributionType"], a["distributionAmount"])
            for a in deposits][:2] == [("1111", "total", None), (deposits[1]["accountNumber"][-4:],
                                                                 "percent", 25)]


async def test_the_coverage_tally_counts_the_life_events_whose_moment_came(client):
    """Issue 45, point 4: the coverage report counts the life events used. A profile scripts
    a raise at +5d and the end of the job at +20d; the tally has each once its moment came."""
    await call(client, "PUT", "/_sandbox/users/u-cov/profile", json={"data": {"timeline": [
        {"at": "+5d", "income": {"income": 91_000}},
        {"at": "+20d", "employment": {"employmentStatus": "terminated"}}]}})
    await link(client, {}, "u-cov")

    async def reached() -> dict:
        answer = (await call(client, "GET", "/_sandbox/coverage",
                             params={"catalog": "true"}))["data"]
        return answer

    first = await reached()
    assert first["tally"].get("lifeEvents", {}) == {}
    assert {"employment", "income", "depositAccounts", "job"} <= set(first["catalog"]["lifeEvents"])
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 6 * DAY})
    assert (await reached())["tally"]["lifeEvents"] == {"income": 1}
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 15 * DAY})
    assert (await reached())["tally"]["lifeEvents"] == {"income": 1, "employment": 1}
