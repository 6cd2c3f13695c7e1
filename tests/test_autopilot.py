"""The hosted flow's autopilot and the callbacks ledger, over HTTP (issue 46, points 1 and 2):
binding, reading and unbinding a user's autopilot, what is refused and changes nothing,
what the flow's page records and reads back, the ledger's bound, and snapshots. The
browser runs are in tests/test_autopilot_browser.py."""

from __future__ import annotations

import pytest
from calls import call, error_of
from conftest import ACME, WALMART

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

NETFLIX = "6410a0000000000000000060"
UNKNOWN_COMPANY = "6410a00000000000000fffff"
PATH = "/_sandbox/users/{}/autopilot"


async def token_of(client, identifier: str) -> dict:
    body = await call(client, "POST", "/access-token", json={"identifier": identifier})
    return {"x-public-token": body["data"]["publicToken"]}


async def test_autopilot_is_bound_read_replaced_and_unbound(client):
    plan = {"company": WALMART, "username": "test-auth-expired", "mfa": "any",
            "distribution": {"type": "percent", "amount": 50}, "language": "es"}
    bound = (await call(client, "PUT", PATH.format("ap-1"), json=plan))["data"]
    assert bound["identifier"] == "ap-1"
    assert bound["autopilot"] == {**plan, "password": "any password", "pause": 0.0}
    read = (await call(client, "GET", PATH.format("ap-1")))["data"]
    assert read == bound
    again = (await call(client, "PUT", PATH.format("ap-1"), json={"company": WALMART}))["data"]
    assert again["autopilot"]["username"] == "test-good"
    assert (await call(client, "DELETE", PATH.format("ap-1")))["data"] == {
        "identifier": "ap-1", "removed": True}
    assert (await call(client, "DELETE", PATH.format("ap-1")))["data"]["removed"] is False
    assert (await call(client, "GET", PATH.format("ap-1")))["data"]["autopilot"] is None


@pytest.mark.parametrize("plan, field, words", [
    ({"company": UNKNOWN_COMPANY}, "$.company", "No company has the _id"),
    ({"company": WALMART, "username": "test-pay-link-switch"}, "$.username", "does not fit"),
    ({"company": WALMART, "username": "test-no-such-scenario"}, "$.username", "no sandbox username"),
    ({"company": NETFLIX, "product": "deposit"}, "$.product", "does not offer"),
    ({"company": WALMART, "language": "fr"}, "$.language", None),
    ({"company": WALMART, "pause": -1}, "$.pause", None),
    ({"company": WALMART, "clicks": 3}, "$.clicks", None),
])
async def test_a_plan_the_flow_cannot_play_is_refused_and_changes_nothing(client, plan, field,
                                                                           words):
    await call(client, "PUT", PATH.format("ap-bad"), json={"company": WALMART})
    before = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    error = await error_of(client, "PUT", PATH.format("ap-bad"), 422, json=plan)
    assert field in [d["path"] for d in error["details"]], error
    if words:
        assert words in error["message"], error
    assert (await call(client, "GET", PATH.format("ap-bad")))["data"]["autopilot"] == {
        "company": WALMART, "username": "test-good", "password": "any password",
        "mfa": "123456", "pause": 0.0}
    after = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    assert after["autopilots"] == before["autopilots"]


async def test_a_product_the_account_lacks_is_refused(client):
    made = (await call(client, "POST", "/_sandbox/tenants", status=201,
                       json={"products": ["deposit"]}))["data"]
    keys = {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}
    error = await error_of(client, "PUT", PATH.format("ap-verify"), 422, headers=keys,
                           json={"company": WALMART, "product": "verify"})
    assert error["details"][0]["path"] == "$.product"
    assert "This account has no 'verify' product" in error["message"]
    await call(client, "PUT", PATH.format("ap-verify"), headers=keys, json={"company": WALMART})


async def test_every_task_scenario_that_fits_deposit_is_accepted_and_the_others_refused(client):
    scenarios = (await call(client, "GET", "/_sandbox/scenarios"))["data"]
    fitting = [s["name"] for s in scenarios if s["kind"] == "task" and "deposit" in s["products"]]
    others = [s["name"] for s in scenarios if s["kind"] == "task" and "deposit" not in s["products"]]
    assert fitting and others
    for name in fitting:
        await call(client, "PUT", PATH.format("ap-fit"),
                   json={"company": WALMART, "username": f"test-{name}"})
    for name in others:
        await error_of(client, "PUT", PATH.format("ap-fit"), 422,
                       json={"company": WALMART, "username": f"test-{name}", "product": "deposit"})


async def test_the_flow_reads_its_users_plan_and_the_tenants_clock(client):
    token = await token_of(client, "ap-flow")
    answer = (await call(client, "GET", "/sdk/autopilot", headers=token))["data"]
    assert answer["autopilot"] is None and answer["now"] > 0
    await call(client, "PUT", PATH.format("ap-flow"), json={"company": WALMART, "language": "es"})
    answer = (await call(client, "GET", "/sdk/autopilot", headers=token))["data"]
    assert answer["autopilot"]["company"] == WALMART
    assert answer["messages"]["words"]["Sign in"] != "Sign in"  # Spanish sentences
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": 90})
    later = (await call(client, "GET", "/sdk/autopilot", headers=token))["data"]
    assert later["now"] == pytest.approx(answer["now"] + 90)


async def test_callbacks_are_recorded_in_order_and_read_after_an_id(client):
    token = await token_of(client, "ap-cb")
    other = await token_of(client, "ap-cb-other")
    sent = [{"event": "interaction", "payload": {"name": "Initialized", "value": {"step": "x"}}},
            {"event": "interaction", "payload": {"name": "Viewed Login Page", "value": {}}},
            {"event": "finish", "payload": {"taskId": "t1", "handoff": None, "data": {"tasks": []}}}]
    await call(client, "POST", "/sdk/callbacks", headers=token, json={"flow": "h1", "messages": sent[:2]})
    await call(client, "POST", "/sdk/callbacks", headers=other,
               json={"flow": "h2", "messages": [{"event": "close", "payload": {"reason": "unknown"}}]})
    await call(client, "POST", "/sdk/callbacks", headers=token, json={"flow": "h1", "messages": sent[2:]})
    mine = (await call(client, "GET", "/_sandbox/sdk/callbacks", params={"identifier": "ap-cb"}))["data"]
    assert [{"event": m["event"], "payload": m["payload"]} for m in mine] == sent
    assert {m["flow"] for m in mine} == {"h1"}
    every = (await call(client, "GET", "/_sandbox/sdk/callbacks"))["data"]
    assert [m["id"] for m in every] == sorted(m["id"] for m in every) and len(every) == 4
    newer = (await call(client, "GET", "/_sandbox/sdk/callbacks",
                        params={"after": str(every[1]["id"])}))["data"]
    assert newer == every[2:]


@pytest.mark.parametrize("body, field", [
    ({"flow": "h", "messages": [{"event": "request-public-token", "payload": {}}]}, "$.messages[0].event"),
    ({"flow": "h", "messages": []}, "$.messages"),
    ({"flow": "h", "messages": [{"event": "finish", "payload": []}]}, "$.messages[0].payload"),
    ({"flow": "", "messages": [{"event": "finish", "payload": {}}]}, "$.flow"),
])
async def test_callbacks_the_flow_cannot_have_sent_are_refused(client, body, field):
    token = await token_of(client, "ap-cb-bad")
    error = await error_of(client, "POST", "/sdk/callbacks", 422, headers=token, json=body)
    assert field in [d["path"] for d in error["details"]], error
    assert (await call(client, "GET", "/_sandbox/sdk/callbacks"))["data"] == []
    await error_of(client, "POST", "/sdk/callbacks", 401, headers={},
                   json={"flow": "h", "messages": [{"event": "finish", "payload": {}}]})


async def test_a_payload_past_16_kib_is_refused_and_nothing_of_its_request_is_kept(client):
    token = await token_of(client, "ap-big")
    messages = [{"event": "interaction", "payload": {"name": "small"}},
                {"event": "interaction", "payload": {"name": "x" * 17_000}}]
    error = await error_of(client, "POST", "/sdk/callbacks", 422, headers=token,
                           json={"flow": "h", "messages": messages})
    assert [d["path"] for d in error["details"]] == ["$.messages[1].payload"]
    assert (await call(client, "GET", "/_sandbox/sdk/callbacks"))["data"] == []


async def test_the_ledger_keeps_its_newest_max_callbacks(make_client):
    client = await make_client(max_callbacks=3)
    token = await token_of(client, "ap-bound")
    messages = [{"event": "interaction", "payload": {"name": f"n{i}"}} for i in range(5)]
    await call(client, "POST", "/sdk/callbacks", headers=token, json={"flow": "h", "messages": messages})
    kept = (await call(client, "GET", "/_sandbox/sdk/callbacks"))["data"]
    assert [m["payload"]["name"] for m in kept] == ["n2", "n3", "n4"]
    stats = (await call(client, "GET", "/_sandbox/stats"))["data"]
    assert stats["sdkCallbacks"] == {"stored": 3, "max": 3, "evicted": 2}


async def test_snapshots_keep_autopilots_and_callbacks(client):
    token = await token_of(client, "ap-snap")
    await call(client, "PUT", PATH.format("ap-snap"), json={"company": WALMART, "pause": 2})
    await call(client, "POST", "/sdk/callbacks", headers=token,
               json={"flow": "h", "messages": [{"event": "close", "payload": {"reason": "x"}}]})
    snapshot = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    assert snapshot["autopilots"]["ap-snap"]["pause"] == 2
    await call(client, "POST", "/_sandbox/reset")
    assert (await call(client, "GET", PATH.format("ap-snap")))["data"]["autopilot"] is None
    assert (await call(client, "GET", "/_sandbox/sdk/callbacks"))["data"] == []
    await call(client, "POST", "/_sandbox/snapshot", json=snapshot)
    assert (await call(client, "GET", PATH.format("ap-snap")))["data"]["autopilot"]["pause"] == 2
    [entry] = (await call(client, "GET", "/_sandbox/sdk/callbacks"))["data"]
    assert entry["payload"] == {"reason": "x"}
    assert (await call(client, "GET", "/_sandbox/snapshot"))["data"]["sdkCallbacks"] == \
        snapshot["sdkCallbacks"]


async def test_accounts_yaml_binds_autopilots_and_refuses_one_that_cannot_play(
        tmp_path, aiohttp_client, loaded):
    import shutil

    import yaml

    from payroll_sandbox.load.fixtures import ConfigError
    from payroll_sandbox.settings import bundled_dir

    folder = tmp_path / "fixtures"
    shutil.copytree(bundled_dir("fixtures"), folder)
    document = yaml.safe_load((folder / "accounts.yaml").read_text())
    document["accounts"][0]["autopilots"] = [
        {"identifier": "yaml-user", "company": WALMART, "username": "test-auth-expired"}]
    (folder / "accounts.yaml").write_text(yaml.safe_dump(document))
    settings = Settings(port=0, clock="manual", fixtures=folder)
    client = await aiohttp_client(create_app(settings, registry=build_registry(settings)))
    read = (await call(client, "GET", PATH.format("yaml-user"), headers=ACME))["data"]
    assert read["autopilot"]["username"] == "test-auth-expired"
    await call(client, "POST", "/_sandbox/reset")
    assert (await call(client, "GET", PATH.format("yaml-user")))["data"]["autopilot"] is not None

    document["accounts"][0]["autopilots"][0]["company"] = UNKNOWN_COMPANY
    (folder / "accounts.yaml").write_text(yaml.safe_dump(document))
    with pytest.raises(ConfigError) as refused:
        build_registry(settings)
    assert "$.accounts[0].autopilots[0].company" in str(refused.value)


# -- the pytest plugin: autopilot(), callbacks(), wait_for_callback() ----------------------------

CLOSE_AUTH_EXPIRED = [{"event": "interaction", "payload": {"name": "Initialized", "value": {}}},
                      {"event": "close", "payload": {"reason": "auth-expired", "data": {"tasks": []}}}]


async def _flow_tells(base_url: str, token: str, delay: float) -> None:
    """What a hosted flow's page sends, `delay` seconds from now."""
    import asyncio

    import aiohttp

    await asyncio.sleep(delay)
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{base_url}/sdk/callbacks", headers={"x-public-token": token},
                                json={"flow": "h1", "messages": CLOSE_AUTH_EXPIRED}) as answer:
            assert answer.status == 200, await answer.text()


def test_plugin_autopilot_and_wait_for_callback_sync(payroll_sandbox):
    import asyncio
    import threading

    from payroll_sandbox.client import SandboxError

    sandbox = payroll_sandbox
    plan = sandbox.autopilot("plug-s", WALMART, username="test-auth-expired", mfa="any")
    assert (plan["company"], plan["username"], plan["mfa"]) == (WALMART, "test-auth-expired", "any")
    token = sandbox.public_token("plug-s")
    threading.Thread(target=asyncio.run, args=(_flow_tells(sandbox.base_url, token, 0.2),)).start()
    entry = sandbox.wait_for_callback("plug-s", "close", reason="auth-expired", timeout=5)
    assert entry["payload"]["reason"] == "auth-expired" and entry["flow"] == "h1"
    assert [e["event"] for e in sandbox.callbacks("plug-s")] == ["interaction", "close"]
    assert sandbox.callbacks("plug-s", after=entry["id"]) == []
    with pytest.raises(AssertionError, match="no finish for 'plug-s'.*told: interaction "
                                             "Initialized; close auth-expired"):
        sandbox.wait_for_callback("plug-s", "finish", timeout=0.2)
    with pytest.raises(SandboxError):
        sandbox.autopilot("plug-s", UNKNOWN_COMPANY)
    assert sandbox.get(PATH.format("plug-s"))["autopilot"]["username"] == "test-auth-expired"
    assert sandbox.autopilot("plug-s", None) is None
    assert sandbox.get(PATH.format("plug-s"))["autopilot"] is None


async def test_plugin_autopilot_and_wait_for_callback_async(async_payroll_sandbox):
    import asyncio

    sandbox = async_payroll_sandbox
    plan = await sandbox.autopilot("plug-a", WALMART, language="es", pause=2,
                                   distribution={"type": "percent", "amount": 40})
    assert plan["language"] == "es" and plan["distribution"] == {"type": "percent", "amount": 40}
    token = await sandbox.public_token("plug-a")
    told = asyncio.create_task(_flow_tells(sandbox.base_url, token, 0.2))
    entry = await sandbox.wait_for_callback("plug-a", name="Initialized", timeout=5)
    assert entry["event"] == "interaction"
    await told
    closed = await sandbox.wait_for_callback("plug-a", "close", after=entry["id"], timeout=1)
    assert closed["id"] > entry["id"]
    assert await sandbox.autopilot("plug-a", None) is None
