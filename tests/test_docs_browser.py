"""/docs, the API reference, in headless Chromium: rendered from /openapi.json with Swagger
UI's own files served by the sandbox (no CDN), under the page's CSP, readable by all, its
operations in their groups, and "Try it out" answering with the examples as they stand."""

from __future__ import annotations

import re

import pytest
import pytest_asyncio
from playwright.async_api import expect
from conftest import ACME, page_errors, readable_in_both_themes

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

TIMEOUT_MS = 15_000
# Swagger UI's own markup, not the sandbox's: each operation's summary is a button that
# holds the copy and lock buttons (nested-interactive), and its model headings skip a level.
UPSTREAM_RULES = frozenset({"nested-interactive", "heading-order"})

# In the browser's loop (conftest.browser); Swagger UI renders the whole document and axe
# reads every node of it, twice per test: tens of seconds each, so they start first.
pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.long]


@pytest_asyncio.fixture(loop_scope="session")
async def docs(live_server, loaded, clock, browser_context):
    """(base URL, a page) of a server with the bundled fixtures on a manual clock."""
    settings = Settings(port=0, clock="manual")
    server = await live_server(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))
    page = await browser_context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return str(server.make_url("/")).rstrip("/"), page


async def open_every_group(page) -> None:
    """The groups start closed: open each one."""
    await page.locator(".opblock-tag").first.wait_for()
    for tag in await page.locator(".opblock-tag").all():
        await tag.click()
    await page.locator(".opblock").first.wait_for()


async def test_docs_renders_every_operation_from_local_files_readably(docs):
    base, page = docs
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    problems = page_errors(page, ignore=("favicon",))
    await page.goto(base + "/docs")
    await page.locator(".opblock-tag").first.wait_for(timeout=2 * TIMEOUT_MS)
    await open_every_group(page)

    document = await (await page.request.get(base + "/openapi.json")).json()
    methods = {"get", "put", "post", "delete", "patch", "head", "options"}
    paths = [path for path, item in document["paths"].items() for key in item if key in methods]
    shown = {text.replace("\u200b", "") for text in
             await page.locator(".opblock-summary-path").all_inner_texts()}
    assert set(paths) <= shown  # every operation (and the webhooks section besides)
    groups = await page.locator(".opblock-tag").evaluate_all("tags => tags.map(t => t.dataset.tag)")
    assert groups == [tag["name"] for tag in document["tags"]]  # in order, no "default" group
    assert all(url.startswith(base) for url in requested), "nothing but the sandbox is asked"
    assert not problems, problems  # no CSP refusal, no failed script

    await readable_in_both_themes(page, ignore=UPSTREAM_RULES)


async def test_docs_try_it_out_on_search_answers_with_its_example(docs):
    """The issue's first try: Authorize with the bundled tenant's keys, then "Try it out" on
    POST /company/search sends the example as it stands and the answer is 200."""
    base, page = docs
    await page.goto(base + "/docs#/companies/post-company-search")
    await page.locator(".opblock-tag").first.wait_for(timeout=2 * TIMEOUT_MS)
    await page.locator("button.authorize").click()
    dialog = page.locator(".modal-ux")
    for scheme, header in (("apiKey", "x-api-key"), ("apiSecret", "x-api-secret")):
        form = dialog.locator(".auth-container", has=page.locator(
            "h4 code", has_text=re.compile(f"^{scheme}$")))
        await form.locator("input").fill(ACME[header])
        await form.locator("button.authorize").click()
        await form.get_by_role("button", name="Remove authorization").wait_for()
    await dialog.locator("button.btn-done").first.click()

    operation = page.locator("#operations-companies-post-company-search")
    await operation.get_by_role("button", name="Try it out").click()
    body = operation.locator("textarea.body-param__text")
    await expect(body).to_have_value(re.compile('"query"'))
    assert '"products"' not in await body.input_value()  # `product` only, as the rule wants
    await operation.get_by_role("button", name="Execute").click()
    status = operation.locator(".live-responses-table tbody .response-col_status").first
    await expect(status).to_have_text("200")
    assert "Walmart" in await operation.locator(".live-responses-table").inner_text()
    # The open operation: its form, tables and answer (the page's test read the rest).
    await readable_in_both_themes(page, "#operations-companies-post-company-search",
                                  ignore=UPSTREAM_RULES)
