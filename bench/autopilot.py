"""The hosted flow on autopilot, repeated: every task scenario that fits `deposit`, N times.

A host page of its own (written from the SDK facts: it builds the iframe URL with btoa and
answers the handshake, on another origin than the sandbox) opens the flow for a user bound
to `test-<scenario>`; the page is never clicked. The sandbox runs in this process on the
manual clock; the run moves the clock until the flow's task is final, waits for the page's
finish or close, then runs the clock until idle (a scenario's later steps: maintenance ends). A run is flaky when it does not end, ends otherwise than the first
run of its scenario, or the callbacks ledger differs from what the page heard.

Targets: 0 flaky runs over `--repeats` (default 20) runs of each scenario, and each flow
at most 5 s of wall time.

    python bench/autopilot.py [--repeats 20] [--strict]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import aiohttp
from aiohttp import web

from common import report, serve

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

HEADERS = {"x-api-key": "sandbox-key-acme-0001", "x-api-secret": "sandbox-secret-acme-0001"}
WALMART = "6410a0000000000000000001"
PREFIX = "example-transact"
CHROMIUM = ("/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium")
TARGET_SECONDS = 5.0

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>Host</title></head><body>
<script>
window.events = [];
window.openFlow = function (sandbox, token) {
  var hId = "h" + Math.random().toString(16).slice(2);
  var iframe = document.createElement("iframe");
  var config = btoa(JSON.stringify({ tasks: [{ operation: "deposit" }] }));
  iframe.src = sandbox + "/initialize/" + config + "#hId=" + hId;
  window.addEventListener("message", function (event) {
    if (event.source !== iframe.contentWindow) { return; }
    var kind = event.data.event.slice("PREFIX".length + 1);
    if (kind === "request-public-token") {
      iframe.contentWindow.postMessage({ event: "sdk-PREFIX-public-token",
        payload: { publicToken: token, handshakeId: hId } }, sandbox);
      return;
    }
    window.events.push([kind, event.data.payload]);
    if (kind === "finish" || kind === "close") { iframe.remove(); }
  });
  document.body.appendChild(iframe);
};
</script></body></html>""".replace("PREFIX", PREFIX)


async def one_run(page, http, base: str, identifier: str, scenario: str) -> tuple[str, float, bool]:
    """(how it ended, wall seconds, whether the ledger equals what the page heard)."""

    async def call(method, path, body=None):
        async with http.request(method, base + path, json=body, headers=HEADERS) as answer:
            assert answer.status < 300, await answer.text()
            return (await answer.json())["data"]

    await call("PUT", f"/_sandbox/users/{identifier}/autopilot",
               {"company": WALMART, "username": f"test-{scenario}"})
    token = (await call("POST", "/access-token", {"identifier": identifier}))["publicToken"]
    await page.evaluate("() => { window.events = []; }")
    began = time.monotonic()
    await page.evaluate("([s, t]) => window.openFlow(s, t)", [base, token])
    await page.wait_for_function("""() => window.events.some(e => e[0] === 'close' ||
        e[0] === 'interaction' && e[1].name === 'Started Task')""", timeout=10_000)
    started = await page.evaluate("""() => window.events.filter(e => e[0] === 'interaction'
        && e[1].name === 'Started Task').map(e => e[1].value.taskId)[0] || null""")
    for _ in range(1_000 if started else 0):
        if (await call("GET", f"/task/{started}"))["status"] in ("completed", "failed"):
            break
        await call("POST", "/_sandbox/clock/advance", {"seconds": 10})
    await page.wait_for_function(
        "() => window.events.some(e => e[0] === 'finish' || e[0] === 'close')", timeout=10_000)
    seconds = time.monotonic() - began
    await call("POST", "/_sandbox/clock/run-until-idle")  # what comes after (maintenance ends)
    heard = await page.evaluate("() => window.events")
    told = [[e["event"], e["payload"]] for e in await call(
        "GET", f"/_sandbox/sdk/callbacks?identifier={identifier}")]
    end = heard[-1]
    return f"{end[0]} {end[1].get('reason', '')}".strip(), seconds, told == heard


async def main(repeats: int, strict: bool) -> None:
    from playwright.async_api import async_playwright

    settings = Settings(port=0, clock="manual")
    registry = build_registry(settings)
    scenarios = sorted(name for name, s in registry.rules.scenarios.items()
                       if s.kind == "task" and "deposit" in (s.products or ()))
    runner, base = await serve(create_app(settings, registry=registry))
    host = web.Application()
    host.router.add_get("/", lambda request: web.Response(text=PAGE, content_type="text/html"))
    host_runner, host_base = await serve(host)
    host_url = host_base.replace("127.0.0.1", "localhost") + "/"
    executable = next(path for path in CHROMIUM if os.access(path, os.X_OK))
    flaky, walls, runs = [], [], 0
    async with async_playwright() as playwright, aiohttp.ClientSession() as http:
        browser = await playwright.chromium.launch(executable_path=executable,
                                                   args=["--no-sandbox", "--disable-gpu"])
        page = await browser.new_page()
        await page.goto(host_url)
        for scenario in scenarios:
            first = None
            for number in range(repeats):
                runs += 1
                try:
                    end, seconds, same = await one_run(page, http, base, f"{scenario}-{number}",
                                                       scenario)
                except Exception as error:  # noqa: BLE001 - a run that did not end is flaky
                    flaky.append(f"{scenario} #{number}: {type(error).__name__}: {error}")
                    continue
                first = first or end
                walls.append(seconds)
                if end != first or not same:
                    flaky.append(f"{scenario} #{number}: {end} (first {first}), ledger same: {same}")
            print(f"{scenario:32} {first}")
        await browser.close()
    await host_runner.cleanup()
    await runner.cleanup()
    for line in flaky:
        print("flaky:", line)
    report([(f"{len(flaky)} flaky of {runs} runs ({len(scenarios)} scenarios x {repeats})",
             not flaky),
            (f"wall per flow: max {max(walls):.2f} s, mean {sum(walls) / len(walls):.2f} s "
             f"(target <= {TARGET_SECONDS:g} s)", max(walls) <= TARGET_SECONDS)], strict)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--strict", action="store_true")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.repeats, arguments.strict))
