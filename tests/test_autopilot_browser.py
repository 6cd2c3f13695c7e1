"""The autopilot and the callbacks ledger in headless Chromium (issue 46, points 1 and 2).

The host page is the tests' own, written from the SDK facts (tests/test_sdk_protocol_browser.py
PROTOCOL_PAGE: it builds the iframe URL with btoa, answers the handshake and records every
message in `window.events`); nothing in it knows of the autopilot. For every task scenario
that fits `deposit`, a user bound to `test-<scenario>` runs the flow to its end with no click:
the callbacks ledger equals what the page heard, in order and content, and the webhooks equal
those of the same scenario clicked through by hand. Spanish once, with screenshots and axe.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from calls import advance, call, run_until_idle
from conftest import ACME, WALMART, page_errors, readable_in_both_themes
from test_flow_look_browser import axe_blocking
from test_sdk_browser import HOOKS, SHOTS, on_screen, shot, token_of
from test_sdk_spanish_browser import english_on_screen
from test_sdk_protocol_browser import flow_of, open_raw, page, pick_walmart, sandbox, sign_in  # noqa: F401

from payroll_sandbox.app import load
from payroll_sandbox.settings import Settings

pytestmark = pytest.mark.asyncio(loop_scope="session")

DEPOSIT = {"tasks": [{"operation": "deposit"}]}
ENDS = ("finish", "close")
WALL_SECONDS = 5.0  # at most, per flow on the manual clock (issue 46)


def deposit_scenarios() -> list[str]:
    scenarios = load(Settings()).scenarios
    return sorted(name for name, s in scenarios.items()
                  if s.kind == "task" and "deposit" in (s.products or ()))


async def heard(page) -> list[list]:
    """What the page's callbacks received: [event, payload], the token handshake aside."""
    return await page.evaluate("""() => window.events
        .filter(e => e[0] !== 'request-public-token').map(e => [e[0], e[1]])""")


async def ended(page) -> dict:
    await page.wait_for_function(
        "ends => window.events.some(e => ends.includes(e[0]))", arg=list(ENDS), timeout=10_000)
    return [e for e in await heard(page) if e[0] in ENDS][0]


async def ledger(sandbox, identifier: str) -> list[list]:
    entries = (await call(sandbox, "GET", "/_sandbox/sdk/callbacks",
                          params={"identifier": identifier}))["data"]
    return [[e["event"], e["payload"]] for e in entries]


async def started(page) -> None:
    """The flow signed in: its task started (or the sign-in ended the flow)."""
    await page.wait_for_function("""() => window.events.some(e => e[0] === 'close' ||
        e[0] === 'interaction' && e[1].name === 'Started Task')""", timeout=10_000)


_IDS = re.compile(r"^public-(sandbox|production)-|^[0-9a-f]{24}$|^[0-9a-f-]{36}$|^\d{4}-\d\d-\d\dT")


def webhooks_of(receiver, identifier: str) -> list:
    """The user's webhooks as the receiver got them, in order, with the user's name, ids
    and times written as the order they first appear in (two runs differ in nothing else)."""
    bodies = [json.loads(r.body) for r in receiver.received(HOOKS)]
    mine = [b for b in bodies if identifier in json.dumps(b)]
    seen: dict[str, str] = {}

    def plain(value):
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        if isinstance(value, str):
            if value == identifier:
                return "<user>"
            if _IDS.match(value):
                return seen.setdefault(value, f"<{len(seen)}>")
        return value

    return [plain(b) for b in mine]


async def task_final(page, sandbox) -> None:
    """The clock moved on until the flow's task is final."""
    task_id = await page.evaluate("""() => window.events.filter(e => e[0] === 'interaction'
        && e[1].name === 'Started Task').map(e => e[1].value.taskId)[0]""")
    for _ in range(1_000):
        if (await call(sandbox, "GET", f"/task/{task_id}"))["data"]["status"] in ("completed", "failed"):
            return
        await advance(sandbox, 10)


async def until_final(page, sandbox) -> None:
    """Move the clock on, ten seconds at a time, until the flow's task is final (a run
    until idle could pass the public token's expiry first: a scenario whose later steps
    come a day on, such as pii-data-deleted); the page sees it on its next poll."""
    if not await page.evaluate("() => window.events.some(e => e[0] === 'close')"):
        await task_final(page, sandbox)
    await ended(page)
    await run_until_idle(sandbox)  # what comes after the outcome (its webhooks too)


async def autopilot_run(page, sandbox, identifier: str, username: str, **plan) -> float:
    """The flow for a user bound to `username`, to its end, with no click: the wall
    seconds it took."""
    await page.evaluate("() => { window.events = []; }")
    token = await token_of(sandbox, identifier)
    await call(sandbox, "PUT", f"/_sandbox/users/{identifier}/autopilot",
               json={"company": WALMART, "username": username, **plan})
    began = time.monotonic()
    await open_raw(page, DEPOSIT, token)
    await started(page)
    await until_final(page, sandbox)
    return time.monotonic() - began


async def hand_run(page, sandbox, identifier: str, username: str) -> None:
    await page.evaluate("() => { window.events = []; }")
    token = await token_of(sandbox, identifier)
    await open_raw(page, DEPOSIT, token)
    flow = flow_of(page)
    await pick_walmart(flow)
    await sign_in(flow, username)
    await started(page)
    await task_final(page, sandbox)
    await on_screen(flow, "done")
    await flow.get_by_test_id("done").dispatch_event("click")
    await ended(page)
    await run_until_idle(sandbox)


@pytest.mark.parametrize("scenario", deposit_scenarios())
async def test_autopilot_runs_each_deposit_scenario_to_its_end_with_no_click(
        page, sandbox, live_receiver, scenario):
    identifier = f"auto-{scenario}"
    seconds = await autopilot_run(page, sandbox, identifier, f"test-{scenario}")
    assert seconds <= WALL_SECONDS, f"{scenario}: {seconds:.1f} s"
    told = await heard(page)
    assert told[-1][0] in ENDS
    assert await ledger(sandbox, identifier) == told  # in order and content
    names = [p["name"] for e, p in told if e == "interaction"]
    assert "Selected Company" in names and "Submitted Credentials" in names, names

    await hand_run(page, sandbox, f"hand-{scenario}", f"test-{scenario}")
    assert webhooks_of(live_receiver, identifier) == webhooks_of(live_receiver, f"hand-{scenario}")
    assert webhooks_of(live_receiver, identifier), scenario
    # What the host heard at the end is the same too (the ids aside).
    hand_end = [e for e in await heard(page) if e[0] in ENDS][0]
    assert hand_end[0] == told[-1][0]
    assert hand_end[1].get("reason") == told[-1][1].get("reason")


async def test_autopilot_in_spanish_pauses_on_the_clock_and_the_screens_pass_axe(page, sandbox):
    """Spanish once: the autopilot's language over the configuration's. With a pause of 5
    seconds of the tenant's clock the screens wait for advance(): screenshots of the sign-in
    and the success screen, axe on both."""
    identifier = "auto-es"
    token = await token_of(sandbox, identifier)
    await call(sandbox, "PUT", f"/_sandbox/users/{identifier}/autopilot",
               json={"company": WALMART, "username": "test-code-mfa", "language": "es",
                     "pause": 5})
    await page.evaluate("() => { window.events = []; }")
    await open_raw(page, DEPOSIT, token)
    flow = flow_of(page)
    await on_screen(flow, "search")
    await page.wait_for_timeout(400)  # the page reads the clock: it stays while it stands
    assert await flow.locator("#app").get_attribute("data-screen") == "search"
    for screen in ("login", "mfa-code", "progress"):
        await advance(sandbox, 5)
        await on_screen(flow, screen)
        if screen == "login":
            assert await flow.locator("html").get_attribute("lang") == "es"
            assert await flow.get_by_test_id("submit").inner_text() == "Iniciar sesión"
        assert await english_on_screen(flow) == {"sentences": [], "words": []}, screen
    await run_until_idle(sandbox)
    await on_screen(flow, "done")
    assert await flow.get_by_test_id("outcome").inner_text() == "¡Todo listo!"
    assert await english_on_screen(flow) == {"sentences": [], "words": []}
    await shot(page, "autopilot-done-es")
    assert await axe_blocking(page) == []
    assert [e for e in await heard(page) if e[0] in ENDS] == []
    await advance(sandbox, 5)
    end = await ended(page)
    assert end[0] == "finish"
    told = await heard(page)
    assert {p["language"] for e, p in told if e == "interaction"} == {"es"}
    assert await ledger(sandbox, identifier) == told
    assert (SHOTS / "autopilot-done-es.png").stat().st_size > 0


@pytest.mark.parametrize("config, username, end", [
    # A deeplinked company skips the search; the host shows its own success view.
    ({"deeplink": {"step": "login-company", "companyId": WALMART},
      "handoff": ["authentication-success"]}, "test-good",
     ["finish", {"handoff": "authentication-success"}]),
    # The host asks for the exit prompt itself: the refused user's close hands it off.
    ({"handoff": ["exit-prompt"]}, "test-bad", ["close", {"handoff": "exit-prompt"}]),
    # A code MFA, answered; a split where the flow asks for one.
    ({"deeplink": {"step": "direct-deposit-setup", "companyId": WALMART}}, "test-code-mfa",
     ["finish", {"handoff": None}]),
])
async def test_autopilot_follows_the_configurations_deeplinks_and_handoffs(
        page, sandbox, config, username, end):
    identifier = f"auto-config-{username}-{len(config)}-{sorted(config)[0]}"
    token = await token_of(sandbox, identifier)
    await call(sandbox, "PUT", f"/_sandbox/users/{identifier}/autopilot",
               json={"company": WALMART, "username": username, "mfa": "246810",
                     "distribution": {"type": "percent", "amount": 40}})
    await page.evaluate("() => { window.events = []; }")
    await open_raw(page, {**DEPOSIT, **config}, token)
    await started(page)
    if end[0] == "finish":
        await until_final(page, sandbox)
    event, payload = await ended(page)
    assert event == end[0] and {k: payload.get(k) for k in end[1]} == end[1], payload
    told = await heard(page)
    assert await ledger(sandbox, identifier) == told
    names = [p["name"] for e, p in told if e == "interaction"]
    assert ("Selected Company" in names) is ("deeplink" not in config)
    if "direct-deposit-setup" in str(config):
        assert "Chose Distribution" in names and "Submitted MFA" in names
        [chose] = [p["value"] for e, p in told if e == "interaction" and p["name"] == "Chose Distribution"]
        assert chose["type"] == "percent"
        logins = (await call(sandbox, "GET", "/_sandbox/requests", params={"path": "/sdk/login"}))["data"]
        assert logins[0]["body"]["distribution"] == {"type": "percent", "amount": 40}
        assert logins[0]["body"]["mfaAnswer"] == "246810"


async def test_a_refused_sign_in_ends_the_flow_and_an_unbound_user_clicks_again(page, sandbox):
    """test-bad is refused on the login form: the autopilot leaves the flow (its exit prompt
    confirmed), the host hears close. Unbound, the flow waits for the user's clicks."""
    identifier = "auto-bad"
    token = await token_of(sandbox, identifier)
    await call(sandbox, "PUT", f"/_sandbox/users/{identifier}/autopilot",
               json={"company": WALMART, "username": "test-bad"})
    await page.evaluate("() => { window.events = []; }")
    await open_raw(page, DEPOSIT, token)
    end = await ended(page)
    assert end[0] == "close"
    names = [p["name"] for e, p in await heard(page) if e == "interaction"]
    assert "Login Refused" in names and "Viewed Exit Prompt" in names
    assert await ledger(sandbox, identifier) == await heard(page)

    await call(sandbox, "DELETE", f"/_sandbox/users/{identifier}/autopilot")
    await page.evaluate("() => { window.events = []; }")
    await open_raw(page, DEPOSIT, token)
    flow = flow_of(page)
    await on_screen(flow, "search")
    await page.wait_for_timeout(500)
    assert await flow.get_by_test_id("search").input_value() == ""
    await flow.get_by_test_id("close").dispatch_event("click")
    await flow.get_by_test_id("exit-confirm").dispatch_event("click")
    await ended(page)


async def test_the_dashboard_shows_the_flows_callbacks_on_the_timeline_beside_the_webhooks(
        page, sandbox, browser_context):
    """An autopilot run, then the tenant's dashboard: on the task's lane, the flow's
    messages to the host page (one mark per instant, the last one named: finish) below its
    webhooks; a flow that started no task has a lane of its own. Both themes pass axe."""
    await autopilot_run(page, sandbox, "dash-user", "test-auth-expired")
    await autopilot_run(page, sandbox, "dash-refused", "test-bad")
    told = await ledger(sandbox, "dash-user")
    board = await browser_context.new_page()
    await board.set_viewport_size({"width": 1400, "height": 900})
    errors = page_errors(board)
    fragment = f"#key={ACME['x-api-key']}&secret={ACME['x-api-secret']}"
    await board.goto(str(sandbox.server.make_url("/_sandbox/")) + fragment)
    lane = board.locator(".lane", has_text="dash-user")
    marks = lane.locator(".callback")
    await marks.first.wait_for()
    ids = " ".join([await marks.nth(i).get_attribute("data-callbacks")
                    for i in range(await marks.count())]).split()
    assert len(ids) == len(told)  # every message of the flow, on its task's lane
    last = marks.nth(await marks.count() - 1)
    assert "close auth-expired" in await last.get_attribute("aria-label")
    assert await lane.locator(".event-marker").count() >= 1  # its webhooks beside them
    marker = await lane.locator(".event-marker").first.bounding_box()
    assert (await last.bounding_box())["y"] > marker["y"]  # a sub-row of their own
    refused = board.locator(".lane", has_text="dash-refused")
    assert "Hosted flow" in await refused.inner_text()
    assert "Login Refused" in await refused.locator(".callback").first.get_attribute("aria-label")
    await board.locator("#timeline").screenshot(path=str(SHOTS / "dashboard-callbacks.png"))
    await readable_in_both_themes(board, "#timeline")
    assert errors == []
