"""/docs, the API reference, in headless Chromium: rendered from /openapi.json with Swagger
UI's own files served by the sandbox (no CDN), under the page's CSP, readable by all."""

from __future__ import annotations

from axe_playwright_python.async_playwright import Axe
from conftest import page_errors

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

TIMEOUT_MS = 15_000
# Swagger UI's own markup, not the sandbox's: each operation's summary is a button that
# holds the copy and lock buttons (nested-interactive), and its model headings skip a level.
UPSTREAM_RULES = {"nested-interactive", "heading-order"}


async def test_docs_renders_every_operation_from_local_files_readably(aiohttp_server, loaded,
                                                                     clock, browser_context):
    settings = Settings(port=0, clock="manual")
    server = await aiohttp_server(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))
    base = str(server.make_url("/")).rstrip("/")
    page = await browser_context.new_page()
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    problems = page_errors(page, ignore=("favicon",))
    await page.goto(base + "/docs")
    await page.locator(".opblock").first.wait_for(timeout=TIMEOUT_MS)

    document = await (await page.request.get(base + "/openapi.json")).json()
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    paths = [path for path, item in document["paths"].items() for key in item if key in methods]
    shown = {text.replace("\u200b", "") for text in
             await page.locator(".opblock-summary-path").all_inner_texts()}
    assert set(paths) <= shown  # every operation (and the webhooks section besides)
    assert all(url.startswith(base) for url in requested), "nothing but the sandbox is asked"
    assert not problems, problems  # no CSP refusal, no failed script

    violations = (await Axe().run(page)).response["violations"]
    ours = [(v["id"], len(v["nodes"])) for v in violations if v["id"] not in UPSTREAM_RULES]
    assert not ours, ours
