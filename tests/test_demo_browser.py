"""/demo, the host page, and the sandbox's demo receiver.

In headless Chromium: no keys in the page, a public token from its own server, the hosted
flow opened with the SDK, the callbacks and the webhooks the customer's backend received
listed in plain words (the raw JSON folded away), ids kept whole, a reset button, whose
payroll the demo user has (a data profile, bound before the flow opens), axe in both
themes. Without a browser: the `demo` tenant's webhooks reach the built-in receiver
(POST /demo/webhooks) signed and delivered, the receiver refuses what the demo tenant did
not sign and keeps only the last ones, the outbound policy's one exception for the sandbox
itself is exactly that path, and the page's operations are for its own origin only."""

from __future__ import annotations

import json

import pytest
import pytest_asyncio
import yarl
from conftest import ACME, WALMART, page_errors, readable_in_both_themes
from playwright.async_api import expect

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.edge.pages.demo import RECEIVED_KEPT
from payroll_sandbox.settings import Settings
from payroll_sandbox.transport.cloudevents import sign
from payroll_sandbox.transport.policy import (RECEIVER_HOST, RECEIVER_PATH, RECEIVER_URL,
                                             OutboundPolicy, Rules)

TIMEOUT_MS = 15_000
FLOW = "iframe[src*='/initialize/']"
DEMO = {"x-api-key": "sandbox-key-demo-0005", "x-api-secret": "sandbox-secret-demo-0005"}
SAME_ORIGIN = {"sec-fetch-site": "same-origin"}

# The tests of the demo server run in the browser's event loop (conftest.browser).
browser_loop = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(loop_scope="session")
async def demo_server(live_server, loaded, clock):
    """A sandbox on a manual clock that knows where it listens, as `serve` does
    (server.start_site): the demo tenant's webhooks reach its own receiver."""
    settings = Settings(port=0, clock="manual")
    server = await live_server(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))
    server.app[SANDBOX].dispatcher.policy.serving(server.runner.addresses)
    return server


@pytest_asyncio.fixture(loop_scope="session")
async def demo_client(demo_server, live_client):
    return await live_client(demo_server)


async def call(client, method: str, path: str, body: dict | None = None,
               headers: dict | None = None, status: int = 200) -> dict:
    response = await client.request(method, path, json=body, headers=headers or DEMO)
    assert response.status == status, await response.text()
    return await response.json()


async def received(client, after: int = 0) -> dict:
    return await call(client, "GET", f"/demo/webhooks?after={after}", headers=SAME_ORIGIN)


# -- the built-in receiver ------------------------------------------------------------------

@browser_loop
async def test_the_demo_tenants_webhooks_reach_the_built_in_receiver_signed_and_delivered(
        demo_client):
    await call(demo_client, "POST", "/task/create", {
        "identifier": "demo-visitor", "company": WALMART, "product": "deposit",
        "scenario": "happy-path"})
    await call(demo_client, "POST", "/_sandbox/clock/run-until-idle")
    events = (await call(demo_client, "GET", "/_sandbox/events?user=demo-visitor"))["data"]
    assert events and {e["delivery"] for e in events} == {"delivered"}
    assert {d["url"] for e in events for d in e["deliveries"]} == {RECEIVER_URL}

    inbox = await received(demo_client)
    got = inbox["data"]
    assert sorted(r["ceId"] for r in got) == sorted(e["id"] for e in events)
    assert {r["signature"] for r in got} == {"valid"}
    summaries = [r["summary"] for r in got]
    assert "Signed in to Walmart" in summaries
    assert "Deposit switch completed at Walmart" in summaries
    assert "Connection to Walmart finished" in summaries
    first = got[0]
    assert first["headers"]["ce-type"].endswith(first["eventType"])
    assert first["body"]["eventType"] == first["eventType"] and first["user"] == "demo-visitor"
    assert inbox["last"] == len(got)
    assert (await received(demo_client, after=inbox["last"]))["data"] == []


@browser_loop
async def test_synced_data_and_company_events_read_in_plain_words(demo_client):
    for body in ({"eventType": "income-synced", "identifier": "demo-user",
                  "companyId": WALMART},
                 {"eventType": "linked-account-disconnected", "identifier": "demo-user",
                  "companyId": WALMART, "data": {"reason": "credentials-changed"}},
                 {"eventType": "maintenance-mode", "companyId": WALMART,
                  "data": {"status": "maintenance", "products": ["deposit"]}}):
        await call(demo_client, "POST", "/_sandbox/events/trigger", body, status=201)
    await call(demo_client, "POST", "/_sandbox/clock/run-until-idle")
    summaries = [r["summary"] for r in (await received(demo_client))["data"]]
    assert summaries == ["Payroll data synced: income from Walmart",
                         "Payroll account at Walmart disconnected (credentials changed)",
                         "Walmart is under maintenance for deposit"]


@browser_loop
async def test_the_receiver_refuses_what_the_demo_tenant_did_not_sign(demo_client):
    body = json.dumps({"eventType": "company-updated", "eventTime": "2026-01-01T00:00:00Z",
                       "data": {"companyId": WALMART}}).encode()
    for signature in (None, sign(body, ACME["x-api-secret"]), "0" * 64):
        headers = {"content-type": "application/json", "ce-id": "forged"}
        if signature:
            headers["x-hmac-signature-sha-256"] = signature
        response = await demo_client.post(RECEIVER_PATH, data=body, headers=headers)
        assert response.status == 401, signature
        assert (await response.json())["error"]["code"] == "invalid-signature"
    assert (await received(demo_client))["data"] == []
    signed = {"content-type": "application/json", "ce-id": "real",
              "x-hmac-signature-sha-256": sign(body, DEMO["x-api-secret"])}
    response = await demo_client.post(RECEIVER_PATH, data=body, headers=signed)
    assert response.status == 200
    [kept] = (await received(demo_client))["data"]
    assert kept["ceId"] == "real" and kept["summary"] == "Walmart updated in the catalog"


@browser_loop
async def test_the_receiver_keeps_only_the_last_deliveries(demo_client):
    for number in range(RECEIVED_KEPT + 5):
        body = json.dumps({"eventType": "company-updated", "data": {"companyId": WALMART},
                           "n": number}).encode()
        response = await demo_client.post(RECEIVER_PATH, data=body, headers={
            "ce-id": f"event-{number % 3}", "x-hmac-signature-sha-256": sign(
                body, DEMO["x-api-secret"])})
        assert response.status == 200
    inbox = await received(demo_client)
    assert len(inbox["data"]) == RECEIVED_KEPT and inbox["last"] == RECEIVED_KEPT + 5
    assert [r["body"]["n"] for r in inbox["data"]] == list(range(5, RECEIVED_KEPT + 5))
    assert inbox["data"][-1]["repeat"] is True  # the same ce-id came before


@browser_loop
async def test_the_demo_reset_puts_the_demo_tenant_back_and_empties_the_receiver(demo_client):
    await call(demo_client, "POST", "/_sandbox/events/trigger",
               {"eventType": "company-updated", "companyId": WALMART}, status=201)
    await call(demo_client, "POST", "/_sandbox/clock/run-until-idle")
    before = await received(demo_client)
    assert len(before["data"]) == 1
    for headers in ({"origin": "https://evil.example"}, {"sec-fetch-site": "cross-site"}):
        await call(demo_client, "POST", "/demo/reset", headers=headers, status=403)
    assert len((await received(demo_client))["data"]) == 1
    answer = await call(demo_client, "POST", "/demo/reset", headers=SAME_ORIGIN)
    assert answer["data"] == {"tenant": "demo", "reset": True}
    after = await received(demo_client)
    assert after["data"] == [] and after["inbox"] != before["inbox"]
    assert (await call(demo_client, "GET", "/_sandbox/events"))["data"] == []
    endpoints = (await call(demo_client, "GET", "/_sandbox/webhooks/endpoints"))["data"]
    assert [e["url"] for e in endpoints] == [RECEIVER_URL], "the fixtures' endpoint again"


async def test_the_demo_pages_operations_are_for_the_demo_page_only(client):
    for path, method in (("/demo/token", "POST"), ("/demo/reset", "POST"),
                         (RECEIVER_PATH, "GET"), ("/demo/profiles", "GET"),
                         ("/demo/profile", "PUT")):
        for headers in ({"origin": "https://evil.example"}, {"sec-fetch-site": "cross-site"}):
            body = {"profile": "gig-worker"} if method == "PUT" else None
            response = await client.request(method, path, json=body, headers=headers)
            assert response.status == 403, (path, headers)
    response = await client.post("/demo/token", headers=SAME_ORIGIN)
    assert response.status == 200
    assert (await response.json())["data"]["identifier"] == "demo-visitor"
    # A browser's Origin has no default port; a Host header (a proxy's) may.
    response = await client.post("/demo/token", headers={"host": "localhost:80",
                                                         "origin": "http://localhost"})
    assert response.status == 200, await response.text()


async def test_the_demo_profile_binds_and_unbinds_the_demo_visitors_profile(client):
    listed = await call(client, "GET", "/demo/profiles", headers=SAME_ORIGIN)
    assert "gig-worker" in [p["name"] for p in listed["data"]] and listed["bound"] is None
    answer = await call(client, "PUT", "/demo/profile", {"profile": "paycard"},
                        headers=SAME_ORIGIN)
    assert answer["data"] == {"identifier": "demo-visitor", "profile": "paycard"}
    bound = await call(client, "GET", "/_sandbox/users/demo-visitor/profile")
    assert bound["data"]["profile"] == "paycard"
    assert (await call(client, "GET", "/demo/profiles", headers=SAME_ORIGIN))["bound"] == "paycard"
    refused = await call(client, "PUT", "/demo/profile", {"profile": "astronaut"},
                         headers=SAME_ORIGIN, status=422)
    assert refused["error"]["details"][0]["path"] == "$.profile"
    await call(client, "PUT", "/demo/profile", {"profile": None}, headers=SAME_ORIGIN)
    assert (await call(client, "GET", "/_sandbox/users/demo-visitor/profile"))["data"][
        "profile"] is None


# -- the outbound policy's one exception --------------------------------------------------

def test_the_policy_lets_webhooks_reach_the_sandbox_only_at_its_demo_receiver():
    policy = OutboundPolicy()
    policy.serving([("127.0.0.1", 8080)])
    allowed = ("http://127.0.0.1:8080/demo/webhooks", RECEIVER_URL,
               f"http://{RECEIVER_HOST.upper()}/demo/webhooks",
               "http://127.0.0.1:9000/demo/webhooks", "http://127.0.0.1:9000/_sandbox/x")
    refused = ("http://127.0.0.1:8080/_sandbox/tenants", "http://127.0.0.1:8080/demo/webhooks?x=1",
               "http://127.0.0.1:8080/demo/webhooks/", "http://127.0.0.1:8080/demo",
               "http://[::ffff:127.0.0.1]:8080/_sandbox/reset",
               f"http://{RECEIVER_HOST}/_sandbox/reset", f"http://{RECEIVER_HOST}/demo/token",
               f"https://{RECEIVER_HOST}/demo/webhooks")
    for url in allowed:
        assert policy.url_problem(yarl.URL(url)) is None, url
    for url in refused:
        assert "own address" in (policy.url_problem(yarl.URL(url)) or ""), url
    assert policy.own_addresses() == [("127.0.0.1", 8080)]
    denied = OutboundPolicy(deny=Rules.parse(["*.localhost", "127.0.0.0/8"], "--webhook-deny"))
    denied.serving([("127.0.0.1", 8080)])
    assert "webhook-deny" in denied.url_problem(yarl.URL(RECEIVER_URL))
    assert denied.url_problem(yarl.URL("http://127.0.0.1:8080/demo/webhooks"))
    anywhere = OutboundPolicy()
    anywhere.serving([("0.0.0.0", 8080), ("::", 8080)])
    assert anywhere.own_addresses() == [("127.0.0.1", 8080), ("::1", 8080)]


@browser_loop
async def test_registration_refuses_every_other_path_at_the_receivers_name(demo_client):
    for url in (f"http://{RECEIVER_HOST}/_sandbox/tenants", f"http://{RECEIVER_HOST}/demo/token"):
        body = await call(demo_client, "PUT", "/_sandbox/webhooks/endpoints",
                          {"endpoints": [{"url": url}]}, status=422)
        assert "own address" in body["error"]["details"][0]["message"]
    await call(demo_client, "PUT", "/_sandbox/webhooks/endpoints",
               {"endpoints": [{"url": RECEIVER_URL}]}, headers=ACME)


async def test_a_sandbox_not_listening_records_why_its_receiver_was_not_reached(client):
    await call(client, "POST", "/_sandbox/events/trigger",
               {"eventType": "company-updated", "companyId": WALMART}, status=201)
    [event] = (await call(client, "GET", "/_sandbox/events"))["data"]
    [attempt] = event["deliveries"][0]["attempts"]
    assert attempt["status"] is None and "not listening" in attempt["error"]


# -- the page ----------------------------------------------------------------------------------

async def open_demo(server, browser_context):
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors = page_errors(page)
    response = await page.goto(str(server.make_url("/demo")))
    html = await response.text()
    assert "sandbox-key" not in html and "secret" not in html.lower()
    return page, errors


async def sign_in(page, username: str = "test-good"):
    """Through the flow to its progress screen: the login answered, the task is there."""
    await page.get_by_role("button", name="Connect payroll").click()
    flow = page.frame_locator(FLOW)
    await flow.locator("#app[data-screen='search']").wait_for()
    await flow.get_by_test_id("search").fill("walmart")
    await flow.locator("[data-company='6410a0000000000000000001']").click()
    await flow.get_by_test_id("username").fill(username)
    await flow.get_by_test_id("password").fill("any")
    await flow.get_by_test_id("submit").click()
    await flow.locator("#app[data-screen='progress']").wait_for()
    return flow


@browser_loop
async def test_demo_shows_the_callbacks_and_the_webhooks_in_plain_words(
        demo_server, demo_client, browser_context, tmp_path):
    page, errors = await open_demo(demo_server, browser_context)
    flow = await sign_in(page)
    callbacks = page.locator("#callbacks")
    await expect(callbacks).to_contain_text("Picked Walmart")
    await expect(callbacks).to_contain_text("Sent the sign-in details")

    await call(demo_client, "POST", "/_sandbox/clock/run-until-idle")
    await flow.locator("#app[data-screen='done']").wait_for()
    await flow.get_by_test_id("done").dispatch_event("click")
    await expect(callbacks).to_contain_text("The flow finished")
    tasks = (await call(demo_client, "GET", "/_sandbox/tasks?user=demo-visitor"))["data"]
    assert tasks and tasks[-1]["status"] == "completed"
    task_id = tasks[-1]["id"]
    await expect(page.locator("#status")).to_contain_text(task_id)

    webhooks = page.locator("#webhooks")
    for words in ("Signed in to Walmart", "Deposit switch completed at Walmart",
                  "Connection to Walmart finished"):
        await expect(webhooks).to_contain_text(words)
    await expect(webhooks.locator(".signature", has_text="signature valid")).to_have_count(
        len((await received(demo_client))["data"]))
    # The raw JSON is folded away until asked for, and ids never break mid-token.
    raw = webhooks.locator("details").first
    assert not await raw.locator("pre").is_visible()
    await raw.locator("summary").click()
    await expect(raw.locator("pre")).to_be_visible()
    assert '"eventType"' in await raw.locator("pre").inner_text()
    for item in await page.locator(".id").all():
        style = await item.evaluate(
            "n => [getComputedStyle(n).whiteSpace, getComputedStyle(n).overflowWrap]")
        assert style[0] == "nowrap" and style[1] != "anywhere", style
        box = await item.bounding_box()
        line = await item.evaluate("n => parseFloat(getComputedStyle(n).lineHeight)")
        assert box["height"] < 1.6 * line, "an id on one line"
        assert await item.get_attribute("title"), "the whole id on hover"
    assert not await page.evaluate(
        "() => document.documentElement.scrollWidth > document.documentElement.clientWidth")
    await page.screenshot(path=str(tmp_path / "demo-done.png"), full_page=True)
    assert not errors, errors


@browser_loop
async def test_demo_connects_a_gig_worker_and_the_api_answers_the_gig_workers_records(
        demo_server, demo_client, browser_context, tmp_path):
    page, errors = await open_demo(demo_server, browser_context)
    sent = []
    page.on("request", lambda r: sent.append(r))
    await page.select_option("#profile", label="Terminated next month")  # life events offered
    await expect(page.locator("#profile-about")).to_contain_text("terminated 30 days after")
    await page.select_option("#profile", label="Gig worker")
    await expect(page.locator("#profile-about")).to_contain_text("several employers")
    await page.locator(".intro").screenshot(path=str(tmp_path / "demo-profile.png"))
    flow = await sign_in(page)
    await expect(page.locator("#status")).to_contain_text("(gig worker)")
    bound = await call(demo_client, "GET", "/_sandbox/users/demo-visitor/profile")
    assert bound["data"]["profile"] == "gig-worker", "bound before the flow opened"
    await call(demo_client, "POST", "/_sandbox/clock/run-until-idle")
    await flow.locator("#app[data-screen='done']").wait_for()
    await flow.get_by_test_id("done").dispatch_event("click")
    await expect(page.locator("#callbacks")).to_contain_text("The flow finished")

    [employment] = (await call(demo_client, "GET", "/employment/demo-visitor"))["data"]
    assert (employment["jobTitle"], employment["employmentStatus"]) == ("Delivery Driver",
                                                                        "active")
    [income] = (await call(demo_client, "GET", "/income/demo-visitor"))["data"]
    assert (income["hourlyIncome"], income["payCycle"]) == (18.0, "weekly")
    await expect(page.locator("#webhooks")).to_contain_text("Deposit switch completed at Walmart")
    choices = [r for r in sent if r.url.endswith("/demo/profile")]
    assert [r.method for r in choices] == ["PUT"]
    for request in choices:
        assert not {"x-api-key", "x-api-secret"} & set(await request.all_headers())

    await page.reload()  # the page shows the demo user's profile as it is bound
    await expect(page.locator("#profile")).to_have_value("gig-worker")
    await page.get_by_role("button", name="Reset the demo").click()
    await expect(page.locator("#status")).to_contain_text("reset")
    await expect(page.locator("#profile")).to_have_value("")
    await expect(page.locator("#profile-about")).to_contain_text("seed")
    assert not errors, errors


@browser_loop
async def test_the_reset_button_empties_the_page_and_the_demo_tenant(
        demo_server, demo_client, browser_context):
    await call(demo_client, "POST", "/_sandbox/events/trigger",
               {"eventType": "company-updated", "companyId": WALMART}, status=201)
    await call(demo_client, "POST", "/_sandbox/clock/run-until-idle")
    page, errors = await open_demo(demo_server, browser_context)
    await expect(page.locator("#webhooks li")).to_have_count(1)
    await page.get_by_role("button", name="Connect payroll").click()
    flow = page.frame_locator(FLOW)
    await flow.locator("#app[data-screen='search']").wait_for()
    await flow.get_by_test_id("close").click()  # the flow covers the page while it is open
    await flow.get_by_test_id("exit-confirm").click()  # "are you sure?"
    await expect(page.locator("#callbacks")).to_contain_text("The flow closed (unknown)")
    sent = []
    page.on("request", lambda r: sent.append(r))
    await page.get_by_role("button", name="Reset the demo").click()
    await expect(page.locator("#status")).to_contain_text("reset")
    await expect(page.locator("#webhooks li")).to_have_count(0)
    await expect(page.locator("#callbacks li")).to_have_count(0)
    await expect(page.locator(FLOW)).to_have_count(0)
    assert (await call(demo_client, "GET", "/_sandbox/events"))["data"] == []
    resets = [r for r in sent if r.url.endswith("/demo/reset")]
    assert resets
    for request in resets:
        assert not {"x-api-key", "x-api-secret"} & set(await request.all_headers())
    assert not errors, errors


@browser_loop
async def test_the_demo_page_passes_axe_in_both_themes(demo_server, demo_client, browser_context):
    await call(demo_client, "POST", "/task/create", {
        "identifier": "demo-visitor", "company": WALMART, "product": "deposit",
        "scenario": "connection-error"})
    await call(demo_client, "POST", "/_sandbox/clock/run-until-idle")
    page, errors = await open_demo(demo_server, browser_context)
    await expect(page.locator("#webhooks li").first).to_be_visible()
    await page.locator("#webhooks details summary").first.click()
    await page.select_option("#profile", "recently-terminated")  # its description shown
    await expect(page.locator("#profile-about")).to_contain_text("terminated")
    await readable_in_both_themes(page)
    await page.get_by_role("button", name="Connect payroll").click()
    await page.frame_locator(FLOW).locator("#app[data-screen='search']").wait_for()
    await expect(page.locator("#callbacks li").first).to_be_visible()
    await page.locator(FLOW).evaluate("frame => frame.remove()")  # the flow has its own tests
    await readable_in_both_themes(page)
    assert not errors, errors
