"""Shared test fixtures: the real app on a real (pytest-aiohttp) server.

The catalog is built once per session (it is read-only); every test gets fresh
tenants and a manual clock, so tests never sleep and never see each other.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
from typing import Any
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import BaseTestServer, TestClient, TestServer

# The aggregator's key is made on first use, and cryptography and PyJWT imported then
# (domain/links/aggregator_keys.py). pytester's in-process runs take out of sys.modules what
# each imported first, and cryptography's Rust module cannot be loaded twice in a process
# ("PyO3 modules may only be initialized once"): imported here, before any run, it stays.
import cryptography.exceptions  # noqa: E402,F401
import cryptography.hazmat.primitives.asymmetric.ec  # noqa: E402,F401
import cryptography.hazmat.primitives.serialization  # noqa: E402,F401
import jwt.algorithms  # noqa: E402,F401
from payroll_sandbox.app import (SERVER_GC_THRESHOLDS, build_registry, create_app, load,
                                 long_lived)
from payroll_sandbox.clock import Clock
from payroll_sandbox.settings import Settings

REPO = Path(__file__).resolve().parent.parent


def _cache_bytecode_outside_the_tree() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (this machine's image sets it), every Python the
    suite starts (`serve`, the CLI, pytester, the xdist workers) compiled the package and
    aiohttp from source: about 3 of a `serve`'s 5 to 9 s of start-up. Their bytecode is
    cached under the temporary folder instead (PYTHONPYCACHEPREFIX), so the tree stays
    free of __pycache__ as the variable wants. Set before the workers start."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        os.environ["PYTHONPYCACHEPREFIX"] = str(
            Path(tempfile.gettempdir()) / f"payroll-sandbox-pycache-{os.getuid()}")


_cache_bytecode_outside_the_tree()


# The slow files: headless chromium, processes and installs, the fuzzers. `pytest` (the
# README's command) leaves them out (pyproject's addopts: -m "not slow"), `pytest -m slow`
# runs them, and .ci/run runs both. A new file of browser or process tests goes here.
SLOW_FILES = frozenset({
    "test_autopilot_browser.py", "test_check_handler_remote.py", "test_cli.py",
    "test_cli_toolkit.py", "test_container_network.py", "test_coverage_gate.py",
    "test_dashboard_browser.py", "test_demo_browser.py",
    "test_docs_browser.py", "test_exec.py", "test_flow_look_browser.py", "test_listen.py",
    "test_package.py", "test_plugin_asgi.py", "test_plugin_failures.py", "test_recipes.py",
    "test_release.py", "test_restore_fuzz.py", "test_schemathesis.py", "test_sdk_browser.py",
    "test_sdk_protocol_browser.py", "test_sdk_spanish_browser.py",
    "test_fidelity_round_four_browser.py", "test_hostile_input_five_browser.py",
    "test_verify_against_more.py",
})


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.path.name in SLOW_FILES:
        item.add_marker(pytest.mark.slow)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under the README's `pytest` (-m "not slow") a slow file is not even imported: each
    worker imported them (chromium's driver, schemathesis, ...) only to leave their tests
    out, about 4 s of CPU a worker. Any other selection collects them and marks them."""
    if collection_path.name in SLOW_FILES and config.option.markexpr == "not slow":
        return True
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session):
    """The suite's process collects garbage as `serve` does (app.py SERVER_GC_THRESHOLDS),
    with what collection imported frozen out of the collector's way. Python's thresholds
    ran a full collection every few tests over a heap of a few hundred thousand objects
    (the modules, the catalog, the apps of the tests so far): a fifth of the suite's CPU."""
    with long_lived():  # as serve's start-up: what collection imports lives as long
        collected = yield
    gc.set_threshold(*SERVER_GC_THRESHOLDS)
    return collected


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `long` first (xdist hands tests out in this order): one of them left to
    the end would keep one worker busy while the other has nothing left to do. The others
    keep their order, which mixes heavy tests with light ones (putting every test that was
    long in the last run first made both workers fight over the CPU: 330 s against 315 s)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: each worker learns how the tests are handed out (`workerinput["dist"]`;
    its own `--dist` option is "no"), so a module can tell whether all its tests run there."""
    node.workerinput["dist"] = node.config.getoption("dist")


def openapi_document(**settings: Any) -> dict:
    """The OpenAPI document an app with the bundled fixtures publishes, built in-process (no
    server): `settings` as Settings takes them, on port 0 and a manual clock unless given."""
    from payroll_sandbox.app import create_app
    from payroll_sandbox.edge.keys import SANDBOX
    from payroll_sandbox.settings import Settings

    return create_app(Settings(**{"port": 0, "clock": "manual", **settings}))[SANDBOX].openapi()


def require_extra(module: str) -> None:
    """Imports a module of the `test` extra, or skips the calling test module without it;
    CI (CI=true) must not skip, so there the ImportError stands."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"{module} is not installed: pip install -e '.[test]'",
                    allow_module_level=True)
ACME = {"x-api-key": "sandbox-key-acme-0001", "x-api-secret": "sandbox-secret-acme-0001"}
GLOBEX = {"x-api-key": "sandbox-key-globex-0002", "x-api-secret": "sandbox-secret-globex-0002"}
ACME_LIVE = {"x-api-key": "production-key-acme-0001", "x-api-secret": "production-secret-acme-0001"}

# Hand-written fixture companies that tests name.
WALMART = "6410a0000000000000000001"
KROGER = "6410a0000000000000000008"
FEDEX = "6410a0000000000000000009"
SEARS = "6410a000000000000000000e"
JOES_DINER = "6410a000000000000000000f"
MCDONALDS = "6410a0000000000000000040"
MCDONALDS_RENO = "6410a0000000000000000045"
SUBWAY = "6410a0000000000000000046"


CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]


# Debian's chromium builds: the headless shell (package chromium-headless-shell, the build
# Playwright itself runs headless) when installed, as it draws for a test at about a third of
# the desktop browser's CPU; else the desktop browser in headless mode.
CHROMIUM_BUILDS = ("/usr/lib/chromium/chromium-headless-shell", "/usr/lib/chromium/chromium")


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium for the browser tests (Playwright drives it; no browser download):
    skipped where it is absent, a failure in CI (CI=true)."""
    found = [path for path in CHROMIUM_BUILDS if os.access(path, os.X_OK)]
    if not found:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is required for the browser tests in CI")
        pytest.skip("chromium is not installed")
    return found[0]


BROWSER_START_TIMEOUT = 30.0  # wall seconds for chromium to start


# The browser tests run in the session's event loop (each such module says
# `pytestmark = pytest.mark.asyncio(loop_scope="session")`): Playwright objects belong to
# the loop that made them, and one Playwright driver per test cost 2-3 s of start-up. What
# they use in that loop comes from here: the browser, a fresh context per test, and the
# servers and receiver its pages reach (pytest-aiohttp's live in each test's own loop).
BROWSER_LOOP = "session"


@pytest_asyncio.fixture(scope="session", loop_scope=BROWSER_LOOP)
async def browser(chromium):
    """One headless chromium for the session, driven by one Playwright driver in the
    browser tests' loop; its contexts are the tests' own (`browser_context`). If pytest
    dies, the driver's pipe closes and it takes chromium with it."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium, args=CHROMIUM_ARGS, headless=True,
            timeout=BROWSER_START_TIMEOUT * 1000)
        try:
            yield browser
        finally:
            await browser.close()


@pytest_asyncio.fixture(loop_scope=BROWSER_LOOP)
async def browser_context(browser):
    """A fresh browser context per test (its own cookies, storage, cache and pages) in the
    session's chromium. Motion reduced (the user's setting, which the pages honour): a
    screen is there at once and no spinner keeps chromium drawing while a test waits;
    the motion test turns motion back on."""
    context = await browser.new_context(reduced_motion="reduce")
    try:
        yield context
    finally:
        await context.close()


@pytest_asyncio.fixture(loop_scope=BROWSER_LOOP)
async def live_server():
    """`aiohttp_server` for the browser tests: `await live_server(app)` serves `app` on
    127.0.0.1 (or `host=`) until the test ends, in the browser tests' loop."""
    servers: list[TestServer] = []

    async def serve(app: web.Application, *, host: str = "127.0.0.1") -> TestServer:
        server = TestServer(app, host=host)
        await server.start_server()
        servers.append(server)
        return server

    yield serve
    while servers:
        await servers.pop().close()


@pytest_asyncio.fixture(loop_scope=BROWSER_LOOP)
async def live_client():
    """`aiohttp_client` for the browser tests: `await live_client(server_or_app)`."""
    clients: list[TestClient] = []

    async def connect(target: web.Application | BaseTestServer) -> TestClient:
        client = TestClient(target if isinstance(target, BaseTestServer) else TestServer(target))
        await client.start_server()
        clients.append(client)
        return client

    yield connect
    while clients:
        await clients.pop().close()


@pytest_asyncio.fixture(loop_scope=BROWSER_LOOP)
async def live_receiver():
    """`receiver` for the browser tests: a real webhook receiver on 127.0.0.1."""
    from receiver import Receiver

    receiver = await Receiver().start()
    yield receiver
    await receiver.stop()


def page_errors(page, ignore: tuple[str, ...] = ()) -> list[str]:
    """The script errors and console errors (a CSP refusal among them) of `page`, as they
    come; console messages containing one of `ignore` are left out."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error"
            and not any(part in m.text for part in ignore) else None)
    return errors


# What a page's dark theme changes is colour (each page's CSS swaps its colour variables
# under prefers-color-scheme: dark): in the second theme, axe's rules that read colours.
COLOUR_RULES = ["color-contrast", "link-in-text-block"]


async def readable_in_both_themes(page, context: str | None = None,
                                  ignore: frozenset[str] = frozenset()) -> None:
    """axe-core finds nothing in `page` (a page or a frame), over all of it or over `context`
    (a CSS selector), in the light theme (every rule) and the dark one (the rules that read
    colours); rules in `ignore` are not the page's own. The page is left in the light theme."""
    from axe_playwright_python.async_playwright import Axe

    for scheme, rules in (("dark", COLOUR_RULES), ("light", None)):
        await page.emulate_media(color_scheme=scheme)
        # axe reads the colours the theme settles on, not a transition's midway frame (the
        # docs page's buttons fade when the scheme switches).
        await page.wait_for_function(
            "() => document.getAnimations().every(a => a.playState !== 'running')")
        options = {"resultTypes": ["violations"], **({"runOnly": rules} if rules else {})}
        violations = (await Axe().run(page, context=context, options=options)).response["violations"]
        found = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
                 for v in violations if v["id"] not in ignore]
        assert not found, (scheme, found)


@pytest.fixture
def pytester(pytester: pytest.Pytester, request, monkeypatch) -> pytest.Pytester:
    """pytester's runs leave out the plugins the suite leaves out (pyproject's addopts
    `-p no:...`): an in-process run took out of sys.modules what it imported first, so
    each run imported schemathesis and Hypothesis anew (about 2.5 s a run)."""
    addopts = request.config.getini("addopts")
    unused = [f"-p {name}" for flag, name in zip(addopts, addopts[1:])
              if flag == "-p" and name.startswith("no:")]
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join(unused))
    return pytester


@pytest.fixture(scope="session")
def loaded():
    return load(Settings())


@pytest.fixture
def clock():
    return Clock(mode="manual", start=1_780_000_000)


@pytest.fixture
def settings():
    return Settings(port=0, clock="manual")


@pytest.fixture
async def receiver():
    """A real webhook receiver on 127.0.0.1 (tests/receiver.py)."""
    from receiver import Receiver

    receiver = await Receiver().start()
    yield receiver
    await receiver.stop()


HOOKS = "/hooks"  # where `sandbox` delivers every event


@pytest.fixture
async def sandbox(aiohttp_client, loaded, clock, receiver):
    """A client of a fresh app on the manual clock, delivering every event of every tenant
    to the real receiver at /hooks (0.5 s wall-clock attempt timeout)."""
    settings = Settings(port=0, clock="manual", webhook_url=receiver.url(HOOKS),
                        webhook_timeout=0.5)
    store = build_registry(settings, clock=clock, loaded=loaded)
    return await aiohttp_client(create_app(settings, registry=store))


@pytest.fixture
def make_client(aiohttp_client, loaded, clock):
    """A client of a fresh app: `await make_client(environment="production")`."""

    async def make(**overrides):
        settings = Settings(port=0, clock="manual").with_overrides(**overrides)
        store = build_registry(settings, clock=clock, loaded=loaded)
        return await aiohttp_client(create_app(settings, registry=store))

    return make


@pytest.fixture
async def client(make_client):
    return await make_client()


def run_cli(*args: str, timeout: float = 60, env: dict | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Runs `python -m payroll_sandbox ...` as a real process (in `cwd`, else the repo)."""
    return subprocess.run([sys.executable, "-m", "payroll_sandbox", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd or REPO,
                          env={**os.environ, **(env or {})})
