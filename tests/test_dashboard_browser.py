"""The dashboard in headless Chromium: the timeline of a tenant's tasks on its virtual time
axis, every attempt of an event and its resend, each endpoint's delivery state, the controls
(companies picked by name), the API fault rules, live updates that cost only what changed,
keys from the address's fragment whenever it changes (and gone from it at once), one prompt
and nothing live when signed out, both themes without an accessibility violation."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
import pytest_asyncio
from conftest import ACME, GLOBEX, HOOKS, KROGER, WALMART, page_errors, readable_in_both_themes
from playwright.async_api import expect

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.settings import Settings

TIMEOUT_MS = 5_000
FRAGMENT = f"#key={ACME['x-api-key']}&secret={ACME['x-api-secret']}"

pytestmark = pytest.mark.asyncio(loop_scope="session")  # the browser's (conftest.browser)


def fragment(keys: dict) -> str:
    return f"#key={keys['x-api-key']}&secret={keys['x-api-secret']}"


async def open_dashboard(server, browser_context):
    """The dashboard with acme's keys, and its script and console errors as they come."""
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(page)
    await page.goto(str(server.make_url("/_sandbox/")) + FRAGMENT)
    await page.locator("#task-scenario option[value='auth-expired']").wait_for(state="attached")
    assert "secret" not in page.url, "the keys leave the address (and the history) at once"
    return page, errors


@pytest.fixture
def receiver(live_receiver):
    """The real webhook receiver, in the browser tests' loop."""
    return live_receiver


@pytest_asyncio.fixture(loop_scope="session")
async def dashboard(live_server, live_client, loaded, clock, receiver, browser_context):
    """The dashboard of tenant acme, on a sandbox with a manual clock delivering every event
    to the real receiver at /hooks; and a client of it. The browser context comes after
    the server, so it closes before it. No test ends with a script or console error on
    the page."""
    settings = Settings(port=0, clock="manual", webhook_url=receiver.url(HOOKS),
                        webhook_timeout=0.5)
    server = await live_server(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))
    client = await live_client(server)
    page, errors = await open_dashboard(server, browser_context)
    yield page, client
    assert errors == []


async def api(client, method: str, path: str, body: dict | None = None) -> dict:
    response = await client.request(method, path, json=body, headers=ACME)
    assert response.status < 300, await response.text()
    return await response.json()


async def create_task(page, user: str, scenario: str, company: str = "Walmart") -> None:
    await page.fill("#task-user", user)
    await page.fill("#task-company", company)
    await page.select_option("#task-scenario", scenario)
    await page.click("#task-form button")
    await expect(page.locator("#message")).to_have_text("Task created.")


async def test_the_timeline_shows_each_retry_30_seconds_apart_and_resend_sends_a_fourth(
        dashboard, receiver):
    page, client = dashboard
    receiver.program(HOOKS, 500)
    await create_task(page, "retry-user", "happy-path")
    await page.click("#run-until-idle")
    lane = page.locator(".lane", has_text="retry-user")
    await lane.locator(".pill", has_text="completed").wait_for()

    final = (await api(client, "GET", "/_sandbox/events?type=task-status-updated&user=retry-user"))
    event_id = final["data"][0]["id"]
    lane = page.locator(".lane", has_text="retry-user")
    dots = lane.locator(f".dot.attempt[data-event='{event_id}']")
    await expect(dots).to_have_count(3)
    times = [float(await dots.nth(i).get_attribute("data-time")) for i in range(3)]
    assert [b - a for a, b in zip(times, times[1:])] == [30.0, 30.0]
    assert [await dots.nth(i).get_attribute("data-outcome") for i in range(3)] == ["failed"] * 3
    # On the axis, too: the dots stand 30 s apart, the same distance each time.
    boxes = [await dots.nth(i).bounding_box() for i in range(3)]
    gaps = [boxes[1]["x"] - boxes[0]["x"], boxes[2]["x"] - boxes[1]["x"]]
    assert gaps[0] > 20 and abs(gaps[0] - gaps[1]) < 1.5, gaps

    await lane.locator(f".event-marker[data-event='{event_id}']").click()
    rows = page.locator("#attempt-rows tr")
    await expect(rows).to_have_count(3)
    assert "(+30 s)" in await rows.nth(1).inner_text() and "500" in await rows.nth(2).inner_text()
    assert event_id in await page.locator("#detail-summary").inner_text()

    receiver.program(HOOKS, 200)
    before = [r.ce_id for r in receiver.received(HOOKS)]
    await page.get_by_role("button", name="Resend (same ce-id)").click()
    await expect(rows).to_have_count(4)
    after = [r.ce_id for r in receiver.received(HOOKS)]
    assert after[len(before):] == [event_id], "one more delivery, the same ce-id"
    assert before.count(event_id) == 3
    assert "(resent)" in await rows.nth(3).inner_text() and "200" in await rows.nth(3).inner_text()
    await expect(dots).to_have_count(4)
    assert await dots.nth(3).get_attribute("data-outcome") == "ok"


async def test_dashboard_creates_a_task_and_runs_it_to_its_events(dashboard):
    page, client = dashboard
    await create_task(page, "dash-user", "auth-expired")
    await page.locator("#tasks tr").first.wait_for()
    assert "queued" in await page.locator("#tasks tr").first.inner_text()

    await page.click("#run-until-idle")
    await page.locator("#tasks tr", has_text="failed").wait_for()
    row = await page.locator("#tasks tr").first.inner_text()
    assert "auth-expired" in row and "dash-user" in row
    events = (await api(client, "GET", "/_sandbox/events?user=dash-user"))["data"]
    await page.locator("#events tr", has_text="task-workflow-finished").wait_for()
    assert await page.locator("#events tr").count() == len(events)
    markers = page.locator(".lane", has_text="dash-user").locator(".event-marker")
    await expect(markers).to_have_count(len(events))

    await page.locator("#events tr", has_text="task-workflow-finished").click()
    detail = await page.locator("#event-detail").text_content()
    assert '"failureReason": "auth-expired"' in detail and '"deliveries"' in detail
    await page.locator("#tasks tr", has_text="dash-user").click()
    history = await page.locator("#history-rows").inner_text()
    assert "processing" in history and "auth-expired" in history


async def test_dashboard_moves_the_clock_and_sets_a_company_status(dashboard):
    page, client = dashboard
    before = (await api(client, "GET", "/_sandbox/clock"))["data"]["timestamp"]
    # Locator expectations, not wait_for_function: the page's CSP (no 'unsafe-eval')
    # refuses the string predicates Playwright evaluates there.
    await expect(page.locator("#clock")).not_to_have_text("-", timeout=TIMEOUT_MS)
    shown = await page.locator("#clock").inner_text()
    await page.click("[data-advance='3600']")
    await expect(page.locator("#clock")).not_to_have_text(shown, timeout=TIMEOUT_MS)
    await page.fill("#advance-seconds", "90")
    await page.click("#advance-form button:has-text('Advance')")
    await expect(page.locator("#message")).to_have_text(re.compile("^Advanced 90 s"))
    after = (await api(client, "GET", "/_sandbox/clock"))["data"]["timestamp"]
    assert after == before + 3600 + 90

    await page.fill("#company-id", "Kroger")
    await expect(page.locator("#company-id-chosen")).to_have_attribute("data-company", KROGER)
    await page.select_option("#company-status", "under-maintenance")
    await page.fill("#company-products", "deposit")
    await page.click("#company-form button")
    await expect(page.locator("#message")).to_have_text(re.compile("under maintenance for deposit"))
    await page.locator("#events tr", has_text="maintenance-mode").wait_for()
    company = await api(client, "GET", f"/company/{KROGER}")
    assert company["data"]["status"] == "under-maintenance"
    refused = await client.post("/task/create", headers=ACME, json={
        "identifier": "maintenance-user", "company": KROGER, "product": "deposit"})
    assert refused.status == 403, "a deposit at a company under maintenance for deposits"


async def test_a_running_task_bar_ends_at_the_axis_when_now_is_past_it(dashboard):
    page, client = dashboard
    await create_task(page, "slow-user", "slow-processing")  # completes after 9 minutes
    await page.fill("#advance-seconds", "120")
    await page.click("#advance-form button:has-text('Advance')")
    await expect(page.locator("#message")).to_have_text(re.compile("^Advanced 2 min"))
    lane = page.locator(".lane", has_text="slow-user")
    await lane.locator(".pill", has_text="processing").wait_for()
    await expect(page.locator("#timeline-range")).to_contain_text("now is")
    # One measurement in the page (a redraw between two would detach what was measured).
    sticks_out = await lane.evaluate("""lane => {
        const bar = lane.querySelector('.span').getBoundingClientRect();
        const track = lane.querySelector('.track').getBoundingClientRect();
        return bar.right - track.right; }""")
    assert sticks_out <= 3, "the bar of a task still running stops at the axis's end"
    overflow = await page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0


async def test_dashboard_binds_a_scenario_and_sets_webhook_faults(dashboard):
    page, client = dashboard
    await page.fill("#binding-user", "bound-user")
    await page.select_option("#binding-scenario", "connection-error")
    await page.click("#binding-form button")
    await page.locator("#bindings li", has_text="bound-user").wait_for()
    assert (await api(client, "GET", "/_sandbox/scenarios"))["bindings"] == {
        "bound-user": "connection-error"}
    task = await api(client, "POST", "/task/create", {"identifier": "bound-user",
                                                      "company": WALMART, "product": "deposit"})
    created = await api(client, "GET", "/_sandbox/tasks?user=bound-user")
    assert [t["id"] for t in created["data"]] == [task["data"]["id"]]
    assert created["data"][0]["scenario"] == "connection-error"
    await page.get_by_role("button", name="unbind bound-user").click()
    await expect(page.locator("#bindings li")).to_have_count(0)
    assert (await api(client, "GET", "/_sandbox/scenarios"))["bindings"] == {}

    await page.fill("#fault-duplicate", "1")
    await page.fill("#fault-delay", "0.5")
    await page.fill("#fault-delay-seconds", "120")
    await page.click("#faults-form button")
    await expect(page.locator("#message")).to_have_text("Faults set.")
    assert (await api(client, "GET", "/_sandbox/webhooks/faults"))["data"] == {
        "duplicate": 1.0, "outOfOrder": 0.0, "delay": 0.5, "delaySeconds": 120.0}

    sent = []
    page.on("request", lambda r: sent.append(r.method + " " + r.url))
    await page.fill("#fault-duplicate", "2")  # past 1: the form refuses it, nothing is sent
    await page.click("#faults-form button")
    await expect(page.locator("#fault-duplicate:invalid")).to_have_count(1)
    await page.click("#trigger-form button")  # a later action's answer: what came before did too
    await expect(page.locator("#message")).to_have_text("Event emitted.")
    assert not [r for r in sent if r.startswith("PUT") and "/webhooks/faults" in r], sent
    assert (await api(client, "GET", "/_sandbox/webhooks/faults"))["data"]["duplicate"] == 1.0


async def test_dashboard_binds_a_data_profile_to_a_user_and_unbinds_it(dashboard, tmp_path):
    page, client = dashboard
    await page.fill("#profile-user", "gig-user")
    await page.select_option("#profile-name", "recently-terminated")
    await expect(page.locator("#profile-about")).to_contain_text("terminated 20 days ago")
    await page.click("#profile-form button:text('Bind')")
    await expect(page.locator("#message")).to_have_text(
        "gig-user's next linked accounts take the recently-terminated profile.")
    await expect(page.locator("#profile-bound")).to_have_text(
        "Now: gig-user \u2192 recently-terminated")
    bound = await api(client, "GET", "/_sandbox/users/gig-user/profile")
    assert bound["data"]["profile"] == "recently-terminated" and bound["data"]["data"] is None
    await page.locator("section", has=page.locator("#profile-form")).screenshot(
        path=str(tmp_path / "dashboard-profile.png"))

    await page.get_by_role("button", name="Unbind").click()
    await expect(page.locator("#message")).to_contain_text("gig-user has no profile now")
    await expect(page.locator("#profile-bound")).to_have_text(
        "Now: gig-user \u2192 no profile (generated from the seed)")
    assert (await api(client, "GET", "/_sandbox/users/gig-user/profile"))["data"][
        "profile"] is None


async def test_a_tick_asks_only_for_what_changed_with_ten_thousand_events_stored(
        live_server, loaded, clock, browser_context):
    settings = Settings(port=0, clock="manual", max_events=20_000)
    server = await live_server(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))
    tenant = server.app[SANDBOX].registry.tenants.get("acme")
    for number in range(10_000):
        tenant.emit("company-updated", data={"companyId": f"stored-{number}"})

    ticks = []
    page = await browser_context.new_page()
    page.on("response", lambda r: ticks.append(r) if is_tick(r) else None)
    page.set_default_timeout(TIMEOUT_MS)
    await page.goto(str(server.make_url("/_sandbox/")) + FRAGMENT)
    await expect(page.locator("#events tr")).to_have_count(100)  # the newest, in the table
    for _ in range(2):
        await page.wait_for_event("response", is_tick)
    for number in range(2):
        tenant.emit("company-updated", data={"companyId": f"new-{number}"})
    for _ in range(2):
        await page.wait_for_event("response", is_tick)
    await page.locator("#events tr").first.click()
    assert '"new-1"' in await page.locator("#event-detail").text_content()

    sizes = []
    for response in ticks:
        after = int(parse_qs(urlsplit(response.url).query)["after"][0])
        sizes.append((after, len(await response.body()), (await response.json())["data"]))
    first, rest = sizes[0], sizes[1:]
    assert first[0] == 0 and len(first[2]) == 500, "the first read: the newest page, a cursor"
    assert all(after > 0 for after, _, _ in rest), "every later read goes on from a cursor"
    quiet = [size for _, size, data in rest if not data]
    assert quiet and max(quiet) < 100, quiet
    new = [data for _, _, data in rest if data]
    assert [[e["body"]["data"]["companyId"] for e in data] for data in new] in (
        [["new-0", "new-1"]], [["new-0"], ["new-1"]])
    assert max(size for _, size, _ in rest) < 2_000


async def test_keyboard_focus_and_a_selection_survive_live_updates(
        live_server, loaded, browser_context, receiver):
    """On a real clock (time moves every tick) the page redraws only what time moves; a
    focused control keeps the focus through redraws, and the details keep a selection."""
    settings = Settings(port=0, clock="real", time_scale=60, webhook_url=receiver.url(HOOKS))
    server = await live_server(create_app(settings, registry=build_registry(
        settings, loaded=loaded)))
    page, errors = await open_dashboard(server, browser_context)
    await create_task(page, "focus-user", "happy-path")  # over in 8 virtual seconds
    # A real clock: a loaded CI machine may take longer than the default 5 s to show it.
    await page.locator("#tasks tr", has_text="completed").wait_for(timeout=20_000)
    await expect(page.locator("#events tr", has_text="task-workflow-finished")).to_have_count(1)
    button = page.locator("#events tr button").first
    await button.focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#attempt-rows tr").first).to_be_visible()
    # Its delivery answered before the selection: on a loaded machine the attempt may still
    # be in flight, and its answer is a change the details must show (a rewrite).
    await expect(page.locator("#attempt-rows tr").first).not_to_contain_text(
        "in flight", timeout=20_000)
    assert await button.get_attribute("aria-current") == "true"
    key = await button.get_attribute("data-focus")
    rows_before = await page.locator("#events").evaluate_handle("body => body.firstElementChild")
    await page.locator("#detail-summary").evaluate("""node => {
        const range = document.createRange(); range.selectNodeContents(node);
        getSelection().removeAllRanges(); getSelection().addRange(range); }""")
    for _ in range(3):  # three ticks of a moving clock
        await page.wait_for_event("response", lambda r: "/_sandbox/clock" in r.url)
    focused = await page.evaluate("() => document.activeElement.getAttribute('data-focus')")
    assert focused == key, "the focus stays on the events table's button"
    selection = await page.evaluate("() => getSelection().toString()")
    assert "ce-id" in selection, "the details were not rewritten under the selection"
    still = await page.locator("#events").evaluate("(body, row) => body.firstElementChild === row",
                                                   rows_before)
    assert still, "no data changed: the events table was not rebuilt"
    assert errors == []


def is_tick(response) -> bool:
    return "/_sandbox/events?" in response.url


async def test_the_dashboard_passes_axe_in_both_themes(dashboard, receiver):
    page, client = dashboard
    receiver.program(HOOKS, 500)
    await api(client, "PUT", "/_sandbox/webhooks/endpoints",
              {"endpoints": [{"url": receiver.url(HOOKS)}, {"url": receiver.url("/good")}]})
    await api(client, "PUT", "/_sandbox/faults/api", {"rules": [
        {"method": "GET", "path": "/task/{taskId}", "latencyMs": 200, "probability": 0.5}]})
    await create_task(page, "axe-user", "connection-error")
    await page.fill("#company-id", "Krog")
    await expect(page.locator("#company-id-chosen")).to_contain_text("No company picked")
    await page.click("#run-until-idle")
    await page.locator(".lane .pill", has_text="failed").wait_for()
    await page.locator(".event-marker").first.click()
    await page.locator("#attempt-rows tr").first.wait_for()
    await expect(page.locator("#api-fault-rows tr")).to_have_count(1)
    await expect(page.locator("#events [data-state='delivered']").first).to_be_visible()
    await page.fill("#profile-user", "axe-user")
    await page.click("#profile-form button:text('Bind')")
    await expect(page.locator("#profile-bound")).to_contain_text("axe-user \u2192 gig-worker")
    await page.locator("#message").evaluate("m => m.textContent = ''")  # the toast is its own check
    await readable_in_both_themes(page)

    await page.locator("#message").evaluate("m => m.textContent = 'A message.'")
    for kind in ("", "ok"):
        await page.locator("#message").evaluate(f"m => m.className = 'message {kind}'")
        await readable_in_both_themes(page, "#message")


async def test_the_sign_in_prompt_passes_axe_in_both_themes(plain_server, browser_context):
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    await page.goto(str(plain_server.make_url("/_sandbox/")) + "#key=wrong-key&secret=wrong")
    await expect(page.locator("#signin-message")).to_contain_text("do not match")
    await readable_in_both_themes(page)


async def test_dashboard_reports_wrong_keys(live_server, loaded, clock, browser_context):
    settings = Settings(port=0, clock="manual")
    server = await live_server(create_app(settings, registry=build_registry(settings, clock=clock,
                                                                          loaded=loaded)))
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    await page.goto(str(server.make_url("/_sandbox/")) + "#key=wrong-key&secret=wrong-secret")
    await expect(page.locator("#signin-message")).to_contain_text("do not match")
    await expect(page.locator("#console")).to_be_hidden()
    assert "wrong-secret" not in page.url


# -- signed out, and keys from the address -------------------------------------------------------

@pytest_asyncio.fixture(loop_scope="session")
async def plain_server(live_server, loaded, clock):
    settings = Settings(port=0, clock="manual")
    return await live_server(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))


async def test_signed_out_the_dashboard_is_one_prompt_and_nothing_runs(plain_server,
                                                                      browser_context):
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(page)
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/_sandbox/" in r.url
            and not r.url.endswith((".js", ".css", "/_sandbox/")) else None)
    await page.goto(str(plain_server.make_url("/_sandbox/")))
    await expect(page.get_by_role("heading", name="Sign in to a tenant")).to_be_visible()
    await expect(page.locator("#console")).to_be_hidden()
    for hidden in ("#clock", "#timeline", "#tasks", "#events", "#sign-out", "#tenant"):
        await expect(page.locator(hidden)).to_be_hidden()
    visible_buttons = [await b.inner_text() for b in await page.get_by_role("button").all()
                       if await b.is_visible()]
    assert visible_buttons == ["Sign in"]
    await page.wait_for_timeout(2_500)  # two ticks' time: nothing is asked for
    assert asked == [], asked

    await page.fill("#api-key", ACME["x-api-key"])
    await page.fill("#api-secret", ACME["x-api-secret"])
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#tenant")).to_have_text("tenant acme (sandbox)")
    await expect(page.locator("#clock")).to_contain_text("UTC")
    await page.get_by_role("button", name="Sign out").click()
    await expect(page.locator("#console")).to_be_hidden()
    assert await page.evaluate("() => localStorage.getItem('payroll-sandbox-keys')") is None
    await page.reload()
    await expect(page.get_by_role("heading", name="Sign in to a tenant")).to_be_visible()
    await expect(page.locator("#console")).to_be_hidden()
    assert errors == []


async def test_keys_pasted_into_the_address_of_an_open_tab_are_taken_and_leave_it(
        plain_server, browser_context):
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(page)
    base = str(plain_server.make_url("/_sandbox/"))
    await page.goto(base)
    await expect(page.locator("#signin")).to_be_visible()

    await page.goto(base + fragment(ACME))  # the same document: only its fragment changes
    await expect(page.locator("#tenant")).to_have_text("tenant acme (sandbox)")
    assert page.url == base, "the keys left the address at once"
    await page.go_back()  # the history entry the fragment made holds no key either
    assert "secret" not in page.url

    await page.goto(base + fragment(GLOBEX))  # other keys pasted: the other tenant
    await expect(page.locator("#tenant")).to_have_text("tenant globex (sandbox)")
    assert page.url == base
    await page.goto(base + "#key=wrong-key&secret=wrong-secret")
    await expect(page.locator("#signin-message")).to_contain_text("do not match")
    await expect(page.locator("#console")).to_be_hidden()
    assert page.url == base
    assert [e for e in errors if "401" not in e] == []  # the refused keys' answer


# -- companies by name, per-endpoint delivery, API faults ------------------------------------------

async def test_the_company_fields_search_by_name_and_fill_the_id(dashboard):
    page, client = dashboard
    await page.fill("#task-company", "krog")
    await expect(page.locator("#task-company-options option[value='Kroger']")).to_have_count(1)
    await page.fill("#task-company", "Kroger")
    chosen = page.locator("#task-company-chosen")
    await expect(chosen).to_have_attribute("data-company", KROGER)
    await expect(chosen).to_contain_text(KROGER)
    await page.fill("#task-user", "named-user")
    await page.click("#task-form button")
    await expect(page.locator("#message")).to_have_text("Task created.")
    [task] = (await api(client, "GET", "/_sandbox/tasks?user=named-user"))["data"]
    assert (await api(client, "GET", f"/task/{task['id']}"))["data"]["company"] == KROGER

    await page.fill("#task-company", "no such employer anywhere")
    await page.click("#task-form button")
    await expect(page.locator("#message")).to_contain_text("No company matches")

    # Search leaves disabled companies out; the status field finds them all the same.
    await api(client, "POST", f"/_sandbox/companies/{WALMART}/status", {"status": "disabled"})
    await page.reload()  # the catalog is read when the console opens
    await page.locator("#task-scenario option[value='auth-expired']").wait_for(state="attached")
    await page.fill("#company-id", "Walma")
    await expect(page.locator("#company-id-options option[value='Walmart (disabled)']")
                 ).to_have_count(1)
    await page.fill("#company-id", "Walmart (disabled)")
    await expect(page.locator("#company-id-chosen")).to_have_attribute("data-company", WALMART)
    await page.select_option("#company-status", "operational")
    await page.click("#company-form button")
    await expect(page.locator("#message")).to_have_text(re.compile("Walmart is operational"))


async def test_each_event_shows_each_endpoints_delivery_state(dashboard, receiver):
    page, client = dashboard
    good, bad = receiver.url("/good"), receiver.url("/bad")
    receiver.program("/bad", 500)
    await api(client, "PUT", "/_sandbox/webhooks/endpoints",
              {"endpoints": [{"url": good}, {"url": bad}]})
    await api(client, "POST", "/_sandbox/events/trigger",
              {"eventType": "company-updated", "companyId": WALMART})
    row = page.locator("#events tr", has_text="company-updated")
    await expect(row.locator("[data-state]")).to_have_count(2)
    await expect(row.locator("[data-state='delivered']")).to_contain_text("/good")
    await expect(row.locator("[data-state='retrying']")).to_contain_text("/bad")

    await page.click("#run-until-idle")
    await expect(row.locator("[data-state='failed']")).to_contain_text("/bad")
    await expect(row.locator("[data-state='delivered']")).to_contain_text("/good")
    marker = page.locator(".event-marker[aria-label^='company-updated']")
    await expect(marker).to_have_attribute("data-delivery", "mixed")
    label = await marker.get_attribute("aria-label")
    assert "delivered to" in label and "/good" in label and "failed at" in label, label
    await marker.click()
    summary = await page.locator("#detail-summary").inner_text()
    assert "delivered to" in summary and "failed at" in summary, summary


async def test_the_api_fault_rules_are_shown_with_how_often_each_fired(dashboard):
    page, client = dashboard
    panel = page.locator("#api-faults")
    await expect(panel).to_be_visible()
    await expect(panel).to_contain_text("No rules")
    await api(client, "PUT", "/_sandbox/faults/api", {"rules": [
        {"method": "POST", "path": "/task/create", "status": 503, "retryAfter": 5, "count": 2}]})
    response = await client.post("/task/create", headers=ACME, json={
        "identifier": "faulted-user", "company": WALMART, "product": "deposit"})
    assert response.status == 503  # the app's call, faulted on purpose
    await page.click("#run-until-idle")  # after an action the page reads the rules again
    rows = page.locator("#api-fault-rows tr")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("POST /task/create")
    await expect(rows.first).to_contain_text("503, retry-after 5 s (2 times)")
    await expect(rows.first).to_contain_text("1 (1 left)")
