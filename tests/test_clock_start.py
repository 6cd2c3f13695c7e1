"""A pinned clock start (issue 45, point 1): `--clock-start`, its variable and config key,
`POST /_sandbox/tenants {"clock": {"start": ...}}` and the plugin's ini key and fixture
argument. With the same seed and start, every answer body and every event body is the same
bytes whatever the wall date (a wall clock moved 400 days, 3 users, 90 virtual days); a
start that is not a date-time or out of range is refused, naming the field, and changes
nothing."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
import yaml  # noqa: F401  (before pytester's runs: tests/test_pytest_plugin.py says why)
from calls import call, error_of, run_until_idle
from conftest import ACME, HOOKS, WALMART, run_cli

from payroll_sandbox import clock as clock_module
from payroll_sandbox.clock import start_timestamp
from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.load.fixtures import ConfigError
from payroll_sandbox.settings import Settings, load_settings

START = "2026-01-05T09:00:00Z"
DAY = 86_400
WALL_APART = 400 * DAY
# u-3: the seed's job, with life events (a raise, new deposit accounts, the end of the job)
USERS = (("u-1", {"profile": "salaried"}), ("u-2", {"profile": "hourly"}), ("u-3", {"data": {
    "timeline": [{"at": "+14d", "income": {"income": 90_000, "incomeType": "yearly"}},
                 {"at": "+21d", "depositAccounts": [{"type": "savings",
                                                     "distributionType": "total"}]},
                 {"at": "+30d", "employment": {"employmentStatus": "terminated"}}]}}))
# Credentials (public, access, processor tokens) come from the system's cryptographic source,
# never from the seed (SECURITY.md): the one part of a body that differs between two runs.
TOKEN = re.compile(rb"(public|access|processor|link)-(sandbox|production)-[0-9a-f-]{36}")
pytest_plugins = ["pytester"]
KINDS = ("income", "employment", "deposit-accounts", "statements", "identity", "taxes",
         "timesheets")


async def _run(aiohttp_client, loaded, receiver, monkeypatch, *, wall_offset: float,
               pinned: str | None, way: str) -> tuple[list[bytes], list[bytes]]:
    """One run of the same script on a fresh app with the wall clock `wall_offset` seconds
    from now: the answer bodies (bytes) and the event bodies (bytes, as delivered)."""
    monkeypatch.setattr(clock_module, "wall_now", lambda: time.time() + wall_offset)
    receiver.clear()
    settings = Settings(port=0, clock="manual", webhook_url=receiver.url(HOOKS),
                        webhook_timeout=10,  # no receiver hangs: a loaded machine is no retry
                        clock_start=pinned if way == "setting" else None)
    client = await aiohttp_client(create_app(settings, registry=build_registry(
        settings, loaded=loaded)))
    headers = ACME
    if way == "tenant":
        made = (await call(client, "POST", "/_sandbox/tenants", status=201,
                           json={"name": "pinned", **({"clock": {"start": pinned}}
                                                      if pinned else {})}))["data"]
        headers = {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}
        await call(client, "PUT", "/_sandbox/webhooks/endpoints", headers=headers,
                   json={"endpoints": [{"url": receiver.url(HOOKS)}]})
    answers: list[bytes] = []
    origin = str(client.make_url("")).rstrip("/").encode()

    async def answer(method: str, path: str, **kwargs) -> dict:
        response = await client.request(method, path, headers=headers, **kwargs)
        assert response.status < 300, (path, await response.text())
        # a paystub URL names the server's origin: a free port, another on each run
        answers.append(TOKEN.sub(rb"\1-TOKEN", (await response.read()).replace(origin, b"ORIGIN")))
        return await response.json()

    await answer("GET", "/_sandbox/clock")
    for identifier, profile in USERS:
        await answer("PUT", f"/_sandbox/users/{identifier}/profile", json=profile)
        await answer("POST", "/task/create", json={"identifier": identifier,
                                                    "company": WALMART, "product": "deposit"})
        await run_until_idle(client, headers=headers)
    target = (await answer("GET", "/_sandbox/clock"))["data"]["timestamp"] + 90 * DAY
    while True:
        now = (await answer("POST", "/_sandbox/clock/advance",
                            json={"seconds": min(30 * DAY, target - (await call(
                                client, "GET", "/_sandbox/clock", headers=headers))
                                ["data"]["timestamp"])}))["data"]
        if now["timestamp"] >= target:
            break
    await run_until_idle(client, headers=headers)
    for identifier, _ in USERS:
        await answer("GET", f"/linked-accounts/{identifier}")
        for kind in KINDS:
            await answer("GET", f"/{kind}/{identifier}", params={"limit": "1000"})
    for _ in range(100):  # every attempt in flight lands
        if not (await call(client, "GET", "/_sandbox/events",
                           params={"delivery": "pending"}, headers=headers))["data"]:
            break
        await asyncio.sleep(0.05)
    events = [TOKEN.sub(rb"\1-TOKEN", received.body) for received in receiver.received(HOOKS)]
    assert events and len(answers) > 20
    await client.close()
    return answers, events


@pytest.mark.parametrize("way", ["setting", "tenant"])
async def test_same_seed_and_start_same_bytes_on_wall_dates_400_days_apart(
        aiohttp_client, loaded, receiver, monkeypatch, way):
    first = await _run(aiohttp_client, loaded, receiver, monkeypatch, wall_offset=0,
                       pinned=START, way=way)
    later = await _run(aiohttp_client, loaded, receiver, monkeypatch, wall_offset=WALL_APART,
                       pinned=START, way=way)
    assert len(first[0]) == len(later[0]) and first[0] == later[0]  # every answer body
    assert sorted(first[1]) == sorted(later[1])                     # every event body
    assert b'"2026-01-05T09:00:00.000Z"' in first[0][0]
    assert any(b"2026-04-05" in body for body in first[1])          # 90 days on
    assert any(b'"employment-updated"' in body for body in first[1])  # a life event's


async def test_without_a_start_the_wall_date_shows(aiohttp_client, loaded, receiver,
                                                   monkeypatch):
    """Today's behaviour: the clock starts at the wall clock, so the bytes move with it."""
    first = await _run(aiohttp_client, loaded, receiver, monkeypatch, wall_offset=0,
                       pinned=None, way="tenant")
    later = await _run(aiohttp_client, loaded, receiver, monkeypatch, wall_offset=WALL_APART,
                       pinned=None, way="tenant")
    assert first[0] != later[0] and sorted(first[1]) != sorted(later[1])


# -- the control plane --------------------------------------------------------------------------

async def test_a_tenant_made_with_a_start_starts_there_and_again_at_a_reset(aiohttp_client,
                                                                           loaded):
    settings = Settings(port=0, clock="manual")
    client = await aiohttp_client(create_app(settings, registry=build_registry(
        settings, loaded=loaded)))
    made = (await call(client, "POST", "/_sandbox/tenants", status=201,
                       json={"clock": {"start": "2031-07-01T12:30:00+02:00"}}))["data"]
    keys = {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}
    clock = (await call(client, "GET", "/_sandbox/clock", headers=keys))["data"]
    assert clock["now"] == "2031-07-01T10:30:00.000Z"
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 3600}, headers=keys)
    await call(client, "POST", "/_sandbox/reset", headers=keys)
    clock = (await call(client, "GET", "/_sandbox/clock", headers=keys))["data"]
    assert clock["now"] == "2031-07-01T10:30:00.000Z"


@pytest.mark.parametrize("start, why", [
    ("tomorrow", "is not an ISO 8601 date-time"),
    ("2026-02-30T00:00:00Z", "is not an ISO 8601 date-time"),
    ("2026-01-05", "is not an ISO 8601 date-time"),
    (20260105, "is not of type 'string'"),
    ("1969-12-31T23:59:59Z", "is outside"),
    ("9950-01-01T00:00:00Z", "is outside"),
])
async def test_a_bad_start_is_refused_naming_the_field_and_nothing_is_made(client, start, why):
    before = (await call(client, "GET", "/_sandbox/stats"))["data"]["tenants"]
    error = await error_of(client, "POST", "/_sandbox/tenants", 422,
                           json={"clock": {"start": start}})
    assert [d["path"] for d in error["details"]] == ["$.clock.start"]
    assert why in error["details"][0]["message"]
    assert (await call(client, "GET", "/_sandbox/stats"))["data"]["tenants"] == before


# -- settings: flag, variable, config key ------------------------------------------------------

def test_the_setting_comes_from_the_config_the_variable_and_the_flag(tmp_path):
    config = tmp_path / "sandbox.yaml"
    config.write_text("clockStart: 2026-01-05T09:00:00Z\n", encoding="utf-8")
    assert start_timestamp(load_settings({"config": str(config)}, {}).clock_start) == \
        start_timestamp("2026-01-05T09:00:00Z")
    environ = {"PAYROLL_SANDBOX_CLOCK_START": "2027-01-01T00:00:00Z"}
    assert load_settings({"config": str(config)}, environ).clock_start == "2027-01-01T00:00:00Z"
    assert load_settings({"clock_start": "2028-01-01T00:00:00Z"},
                         environ).clock_start == "2028-01-01T00:00:00Z"
    with pytest.raises(ConfigError) as caught:
        load_settings({}, {"PAYROLL_SANDBOX_CLOCK_START": "soon"})
    assert caught.value.problems[0][1] == "$.clock_start"


def test_serve_refuses_a_bad_clock_start_naming_the_flag():
    done = run_cli("serve", "--clock-start", "2026-13-01T00:00:00Z", "--port", "0")
    assert done.returncode == 2, done.stderr
    assert "clock_start" in done.stderr and "2026-13-01T00:00:00Z" in done.stderr
    assert "Traceback" not in done.stderr


# -- the pytest plugin ---------------------------------------------------------------------------

INNER_INI = """\
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
filterwarnings = error
"""
PLUGIN_TESTS = '''
import pytest

def test_ini(payroll_sandbox):
    assert payroll_sandbox.get("/_sandbox/clock")["now"] == "2026-01-05T09:00:00.000Z"

@pytest.mark.parametrize("payroll_sandbox", [{"clock_start": "2030-03-01T00:00:00Z"}],
                         indirect=True)
def test_argument(payroll_sandbox):
    assert payroll_sandbox.get("/_sandbox/clock")["now"] == "2030-03-01T00:00:00.000Z"

@pytest.mark.parametrize("payroll_sandbox_clock_start", ["2031-05-01T08:00:00+02:00"])
def test_overridden_fixture(payroll_sandbox):
    assert payroll_sandbox.get("/_sandbox/clock")["now"] == "2031-05-01T06:00:00.000Z"
'''


def test_plugin_ini_key_and_fixture_argument(pytester):
    pytester.makeini(INNER_INI + "payroll_sandbox_clock_start = 2026-01-05T09:00:00Z\n")
    pytester.makepyfile(PLUGIN_TESTS)
    pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider").assert_outcomes(passed=3)


def test_plugin_bad_ini_start_is_a_usage_error(pytester):
    pytester.makeini(INNER_INI + "payroll_sandbox_clock_start = next tuesday\n")
    pytester.makepyfile("def test_x(payroll_sandbox):\n    pass\n")
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*clock_start*next tuesday*"])


def test_profiles_at_load_count_from_the_pinned_start(tmp_path):
    """The days a profile file names are checked against the day the clocks start, not the
    wall clock's: a start date in 2024 is in the future of a clock pinned in 2020."""
    import shutil

    from conftest import REPO

    from payroll_sandbox.app import load

    folder = tmp_path / "fixtures"
    shutil.copytree(REPO / "fixtures", folder)
    (folder / "profiles.yaml").write_text(
        "profiles:\n  later:\n    description: Starts in 2024\n"
        "    employment: {startDate: 2024-01-01}\n", encoding="utf-8")
    assert "later" in load(Settings(fixtures=folder)).fixtures.profiles
    with pytest.raises(ConfigError) as caught:
        load(Settings(fixtures=folder, clock_start="2020-01-05T09:00:00Z"))
    assert caught.value.problems[0][1] == "$.profiles.later.employment.startDate"
