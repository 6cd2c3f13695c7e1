"""Screenshots of the hosted flow, the dashboard and /docs for the README, from a real server.

    python docs/screenshots.py [--out docs/screenshots] [--chromium /usr/bin/chromium]
                               [--only flow,demo,dashboard,docs]

Starts `python -m payroll_sandbox serve --port 0 --clock manual`, opens /demo in Debian's
chromium through Playwright, drives the flow as a user would (sandbox usernames; the
clock moved over the control plane with the demo tenant's keys, so every task step is
the server's own) and saves one PNG per screen and width into docs/screenshots/,
overwriting. Phone shots are 390 px wide (the flow is the whole screen), desktop shots
1280 px (the flow is a centred modal over the demo page). The dashboard is shot in its
light and dark themes after a scene played on the server: three tasks, and two webhook
endpoints: the sandbox's own demo receiver, and a local receiver in this script that
refuses each workflow's final event three times, so the timeline shows the attempts 30 s
apart, the resend a fourth, and the events list each endpoint's state. /demo is shot
after a deposit switch, with the SDK's callbacks and the webhooks its receiver got.
/docs is shot with its groups closed in both themes, and after "Try it out" on
company search. The flow in Spanish (config `language: "es"`, a deposit) is shot at its
login, progress and success screens, on a phone and a desktop (sdk-es-*.png).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from playwright.sync_api import FrameLocator, Page, sync_playwright

REPO = Path(__file__).resolve().parent.parent
SERVING = "payroll-sandbox serving "
DEMO_KEYS = {"x-api-key": "sandbox-key-demo-0005", "x-api-secret": "sandbox-secret-demo-0005"}
ACME_KEYS = {"x-api-key": "sandbox-key-acme-0001", "x-api-secret": "sandbox-secret-acme-0001"}
FLOW = "iframe[src*='/initialize/']"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
TIMEOUT_MS = 15_000


@contextmanager
def sandbox():
    """A real server on a free port with a manual clock; its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0", "--clock", "manual"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = process.stdout.readline().strip()
        if not line.startswith(SERVING):
            raise SystemExit(f"the server did not start: {line!r}")
        # Keep reading what it prints, so a full pipe never stops it.
        threading.Thread(target=process.stdout.read, daemon=True).start()
        yield line.split()[2]
    finally:
        process.terminate()
        process.wait(timeout=15)


def control(base: str, path: str, body: dict | None = None, method: str = "POST") -> dict:
    """A control-plane call for the demo tenant (whose visitor the demo page signs in)."""
    request = urllib.request.Request(base + path, data=json.dumps(body or {}).encode(),
                                     method=method,
                                     headers={"content-type": "application/json", **DEMO_KEYS})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def advance(base: str, seconds: float) -> None:
    control(base, "/_sandbox/clock/advance", {"seconds": seconds})


class Shooter:
    def __init__(self, browser, base: str, out: Path) -> None:
        self.browser, self.base, self.out = browser, base, out
        self.taken: list[Path] = []

    def open_flow(self, viewport: dict, config: dict | None = None) -> tuple[Page, FrameLocator]:
        """/demo and its flow: the demo's own (its Connect button), or one opened with
        `config` and the demo visitor's token, as the page's script would."""
        # Phone shots at twice the pixels (they are shown small, side by side).
        scale = 2 if viewport["width"] < 600 else 1
        context = self.browser.new_context(viewport=viewport, device_scale_factor=scale)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(self.base + "/demo")
        if config is None:
            page.get_by_role("button", name="Connect payroll").click()
        else:
            page.evaluate("""config => fetch("/demo/token", { method: "POST" })
                .then(response => response.json())
                .then(json => { window.Transact.transact({
                  config: Object.assign({ publicToken: json.data.publicToken }, config) }); })""",
                          config)
        flow = page.frame_locator(FLOW)
        screen(flow, "search")
        flow.locator("[data-testid=popular] [data-company]").first.wait_for()
        flow.locator("[data-testid=popular] img").last.wait_for()
        return page, flow

    def shot(self, page: Page, name: str, full_page: bool = False) -> None:
        path = self.out / f"{name}.png"
        page.mouse.move(0, 0)  # no hover left on what was clicked last
        # Finite animations at their end, endless ones (spinners) at their start: the same
        # picture on every run.
        page.screenshot(path=str(path), animations="disabled", full_page=full_page)
        self.taken.append(path)
        print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)


def screen(flow: FrameLocator, name: str) -> None:
    flow.locator(f"#app[data-screen='{name}']").wait_for()


def pick(flow: FrameLocator, query: str, name: str) -> None:
    flow.get_by_test_id("search").fill(query)
    flow.locator("[data-testid=results] [data-company]", has_text=name).first.click()
    screen(flow, "login")


def sign_in(flow: FrameLocator, username: str) -> None:
    flow.get_by_test_id("username").fill(username)
    flow.get_by_test_id("password").fill("any password")
    flow.get_by_test_id("submit").click()


def logos_loaded(flow: FrameLocator) -> None:
    flow.locator("#app img").last.wait_for()
    flow.locator("#app").evaluate(
        "app => Promise.all([...app.querySelectorAll('img')].map(i => i.decode().catch(() => 0)))")


def take_all(shooter: Shooter, base: str) -> None:
    for label, viewport in (("phone", PHONE), ("desktop", DESKTOP)):
        # Search, before typing (popular companies) and with results.
        page, flow = shooter.open_flow(viewport)
        shooter.shot(page, f"search-empty-{label}")
        if label == "phone":
            flow.get_by_test_id("search").fill("pay")
            flow.locator("[data-testid=results] [data-company]").first.wait_for()
            logos_loaded(flow)
            shooter.shot(page, "search-results-phone")

        # Login, then the inline message of a refused password (test-bad).
        flow.get_by_test_id("search").fill("walmart")
        flow.locator("[data-testid=results] [data-company]", has_text="Walmart").first.click()
        screen(flow, "login")
        logos_loaded(flow)
        shooter.shot(page, f"login-{label}")
        if label == "phone":
            sign_in(flow, "test-bad")
            flow.get_by_test_id("login-error").filter(has_text="username").wait_for()
            flow.get_by_test_id("submit").filter(has_text="Sign in").wait_for()
            shooter.shot(page, "login-refused-phone")

        # MFA (test-code-mfa), then progress as the server's clock moves the task.
        sign_in(flow, "test-code-mfa")
        screen(flow, "mfa-code")
        logos_loaded(flow)
        if label == "phone":
            shooter.shot(page, "mfa-code-phone")
        flow.get_by_test_id("mfa-answer").fill("123456")
        flow.get_by_test_id("mfa-submit").click()
        screen(flow, "progress")
        advance(base, 1)  # happy-path: processing after 1 s
        flow.locator("[data-step=mfa][data-state=active]").wait_for()
        logos_loaded(flow)
        shooter.shot(page, f"progress-{label}")
        advance(base, 2)  # authenticated after 2 s more: the update runs
        flow.locator("[data-step=update][data-state=active]").wait_for()
        if label == "phone":
            shooter.shot(page, "progress-updating-phone")
        advance(base, 5)  # completed
        screen(flow, "done")
        logos_loaded(flow)
        shooter.shot(page, f"success-{label}")
        page.context.close()

        # A failure: the merchant cannot be reached (test-connection-error).
        page, flow = shooter.open_flow(viewport)
        pick(flow, "target", "Target")
        sign_in(flow, "test-connection-error")
        screen(flow, "progress")
        control(base, "/_sandbox/clock/run-until-idle")
        screen(flow, "done")
        logos_loaded(flow)
        shooter.shot(page, f"failure-{label}")
        page.context.close()


SPANISH_FLOW = {"scope": "user-link", "language": "es", "tasks": [{"operation": "deposit"}]}


def take_spanish(shooter: Shooter, base: str) -> None:
    """The flow with `language: "es"`: login (its sandbox hint open on the phone), progress
    while the update runs, success; on a phone and a desktop."""
    for label, viewport in (("phone", PHONE), ("desktop", DESKTOP)):
        page, flow = shooter.open_flow(viewport, SPANISH_FLOW)
        pick(flow, "walmart", "Walmart")
        if label == "phone":
            flow.get_by_test_id("login-hint").locator("summary").click()
        logos_loaded(flow)
        shooter.shot(page, f"sdk-es-login-{label}")
        sign_in(flow, "test-good")
        screen(flow, "progress")
        advance(base, 3)  # happy-path: processing after 1 s, authenticated 2 s later
        flow.locator("[data-step=update][data-state=active]").wait_for()
        logos_loaded(flow)
        shooter.shot(page, f"sdk-es-progress-{label}")
        advance(base, 5)  # completed
        screen(flow, "done")
        logos_loaded(flow)
        shooter.shot(page, f"sdk-es-success-{label}")
        page.context.close()


REFUSED_TYPE = "task-workflow-finished"   # the receiver refuses it three times per ce-id
REFUSALS = 3
WALMART, TARGET = "6410a0000000000000000001", "6410a0000000000000000002"
DEMO_RECEIVER = "http://payroll-sandbox.localhost/demo/webhooks"  # the sandbox's own


@contextmanager
def receiver():
    """A webhook endpoint on 127.0.0.1: 500 to the first three deliveries of each
    workflow's final event (the whole retry policy), 200 to everything else."""
    seen: Counter = Counter()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("content-length") or 0))
            refused = self.headers.get("ce-type", "").endswith(REFUSED_TYPE)
            seen[self.headers.get("ce-id")] += 1
            self.send_response(500 if refused and seen[self.headers.get("ce-id")] <= REFUSALS else 200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks"
    finally:
        server.shutdown()


def dashboard_scene(base: str, hooks: str) -> None:
    """Three tasks a few seconds apart, every event sent to `hooks` and to the sandbox's own
    demo receiver, the clock run out; an API fault rule on task reads."""
    control(base, "/_sandbox/reset")
    control(base, "/_sandbox/webhooks/endpoints",
            {"endpoints": [{"url": hooks}, {"url": DEMO_RECEIVER}]}, method="PUT")
    control(base, "/_sandbox/faults/api", {"rules": [
        {"method": "GET", "path": "/task/{taskId}", "status": 503, "retryAfter": 30,
         "count": 3}]}, method="PUT")
    for identifier, company, scenario, wait in (("alice", WALMART, "happy-path", 4),
                                                ("bob", TARGET, "auth-expired", 6),
                                                ("carol", WALMART, "connection-error", 0)):
        control(base, "/task/create", {"identifier": identifier, "company": company,
                                       "product": "deposit", "scenario": scenario})
        advance(base, wait)
    control(base, "/_sandbox/clock/run-until-idle")


def take_dashboard(shooter: Shooter, base: str) -> None:
    fragment = f"#key={DEMO_KEYS['x-api-key']}&secret={DEMO_KEYS['x-api-secret']}"
    for theme in ("light", "dark"):
        context = shooter.browser.new_context(viewport={"width": 1280, "height": 900},
                                              color_scheme=theme)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(base + "/_sandbox/" + fragment)
        # Delivered to the demo receiver, refused by the other: mixed.
        failed = page.locator(f".event-marker.mixed[aria-label^='{REFUSED_TYPE}']").first
        failed.click()
        page.locator("#attempt-rows tr").nth(REFUSALS).wait_for()
        if theme == "light":
            page.get_by_role("button", name="Resend (same ce-id)").click()
            page.locator("#attempt-rows tr", has_text="(resent)").first.wait_for()
        page.locator("#api-fault-rows tr").first.wait_for()
        page.locator("#message").evaluate("m => m.textContent = ''")
        shooter.shot(page, f"dashboard-{theme}", full_page=True)
        context.close()


def take_demo(shooter: Shooter, base: str) -> None:
    """/demo after a deposit switch at Walmart: the SDK's callbacks on the left, the webhooks
    the demo receiver got on the right (one unfolded), in both themes."""
    for theme in ("light", "dark"):
        request = urllib.request.Request(base + "/demo/reset", data=b"", method="POST")
        urllib.request.urlopen(request, timeout=10).close()
        context = shooter.browser.new_context(viewport=DESKTOP, color_scheme=theme)
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(base + "/demo")
        page.get_by_role("button", name="Connect payroll").click()
        flow = page.frame_locator(FLOW)
        screen(flow, "search")
        pick(flow, "walmart", "Walmart")
        sign_in(flow, "test-good")
        screen(flow, "progress")
        control(base, "/_sandbox/clock/run-until-idle")
        screen(flow, "done")
        flow.get_by_test_id("done").click()
        page.locator("#callbacks li", has_text="The flow finished").wait_for()
        page.locator("#webhooks li", has_text="Connection to Walmart finished").wait_for()
        page.locator("#webhooks li", has_text="Deposit switch completed").locator("summary").click()
        shooter.shot(page, f"demo-{theme}", full_page=True)
        context.close()


def take_docs(shooter: Shooter, base: str) -> None:
    """/docs, the API reference: the introduction and the groups, in the light and dark
    themes (docs-light.png, docs-dark.png), then "Try it out" on company search with the
    bundled tenant's keys, its example as it stands (docs-try-it-out.png)."""
    for theme in ("dark", "light"):
        context = shooter.browser.new_context(viewport={"width": 1280, "height": 1160},
                                              color_scheme=theme)
        page = context.new_page()
        page.set_default_timeout(2 * TIMEOUT_MS)
        page.goto(base + "/docs")
        page.locator(".opblock-tag").last.wait_for()
        shooter.shot(page, f"docs-{theme}")
    page.locator("button.authorize").click()
    dialog = page.locator(".modal-ux")
    for scheme, value in (("apiKey", ACME_KEYS["x-api-key"]),
                          ("apiSecret", ACME_KEYS["x-api-secret"])):
        form = dialog.locator(".auth-container", has=page.locator(
            "h4 code", has_text=re.compile(f"^{scheme}$")))
        form.locator("input").fill(value)
        form.locator("button.authorize").click()
    dialog.locator("button.btn-done").first.click()
    page.locator("#operations-tag-companies").click()
    search = page.locator("#operations-companies-post-company-search")
    search.locator(".opblock-summary").click()
    search.get_by_role("button", name="Try it out").click()
    search.locator("textarea.body-param__text").filter(has_text="query").wait_for()
    search.get_by_role("button", name="Execute").click()
    search.locator(".live-responses-table tbody .response-col_status",
                   has_text="200").wait_for()
    # The example as sent and the answer: from the body's editor down.
    search.locator(".opblock-section-request-body").evaluate(
        "section => section.scrollIntoView({block: 'start'})")
    shooter.shot(page, "docs-try-it-out")
    context.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--only", default="flow,spanish,demo,dashboard,docs",
                        help="which shots, comma-separated: flow, spanish, demo, dashboard, "
                             "docs (all)")
    parser.add_argument("--dashboard-only", action="store_true", help="--only dashboard")
    args = parser.parse_args(argv)
    only = {"dashboard"} if args.dashboard_only else set(args.only.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    with sandbox() as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=args.chromium, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
                  "--disable-background-networking", "--disable-component-update"])
        try:
            shooter = Shooter(browser, base, args.out)
            if "flow" in only:
                take_all(shooter, base)
            if "spanish" in only:
                take_spanish(shooter, base)
            if "demo" in only:
                take_demo(shooter, base)
            if "docs" in only:
                take_docs(shooter, base)
            if "dashboard" in only:
                with receiver() as hooks:
                    dashboard_scene(base, hooks)
                    take_dashboard(shooter, base)
        finally:
            browser.close()
    print(f"{len(shooter.taken)} screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
