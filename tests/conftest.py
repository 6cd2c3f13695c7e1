"""Shared test fixtures: the real app on a real (pytest-aiohttp) server.

The catalog is built once per session (it is read-only); every test gets fresh
tenants and a manual clock, so tests never sleep and never see each other.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from payroll_sandbox.app import build_registry, create_app, load
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


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium for the browser tests (Playwright drives it; no browser download):
    skipped where it is absent, a failure in CI (CI=true)."""
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is required for the browser tests in CI")
        pytest.skip("chromium is not installed")
    return path


BROWSER_START_TIMEOUT = 30.0  # wall seconds for the browser server to print its endpoint

# Playwright's browser server (the driver's `launch-server`, what launchServer runs; Python
# has no launch_server method), kept alive by an open stdin: when it closes, at the end of
# the session or because pytest died, the server is stopped and takes its chromium with it.
BROWSER_SERVER = """\
import contextlib, os, signal, subprocess, sys, threading
server = subprocess.Popen([sys.executable, "-m", "playwright", "launch-server", *sys.argv[1:]],
                          stdin=subprocess.DEVNULL, start_new_session=True)

def stop_when_stdin_closes():
    sys.stdin.buffer.read()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)  # the node driver closes chromium on SIGTERM

threading.Thread(target=stop_when_stdin_closes, daemon=True).start()
sys.exit(server.wait())
"""


@pytest.fixture(scope="session")
def browser_server(chromium, tmp_path_factory):
    """One chromium for the whole session, behind Playwright's browser server; its WebSocket
    endpoint. Playwright objects belong to the event loop that made them and every test runs
    in a loop of its own (pytest-aiohttp), so what tests share is the browser process: each
    one connects to it (`browser_context`). Fails like `chromium` when it cannot start."""
    folder = tmp_path_factory.mktemp("browser-server")
    config = folder / "launch.json"
    config.write_text(json.dumps({"executablePath": chromium, "args": CHROMIUM_ARGS,
                                  "headless": True}))
    out, err = folder / "stdout", folder / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-c", BROWSER_SERVER, "--browser", "chromium",
             "--config", str(config)],
            stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, start_new_session=True)
    try:
        yield _endpoint_of(server, out, err)
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _endpoint_of(server: subprocess.Popen, out: Path, err: Path) -> str:
    deadline = time.monotonic() + BROWSER_START_TIMEOUT
    while True:
        for line in out.read_text(errors="replace").splitlines():
            if line.startswith("ws://"):
                return line.strip()
        if server.poll() is not None or time.monotonic() > deadline:
            pytest.fail("the Playwright browser server did not start:\n"
                        + err.read_text(errors="replace"))
        time.sleep(0.02)


@pytest.fixture
async def browser_context(browser_server):
    """A fresh browser context (its own cookies, storage and pages) in the session's chromium,
    over a connection made in this test's event loop."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.connect(browser_server,
                                                    timeout=BROWSER_START_TIMEOUT * 1000)
        try:
            yield await browser.new_context()
        finally:
            await browser.close()  # closes this connection's contexts; chromium keeps running


def page_errors(page, ignore: tuple[str, ...] = ()) -> list[str]:
    """The script errors and console errors (a CSP refusal among them) of `page`, as they
    come; console messages containing one of `ignore` are left out."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error"
            and not any(part in m.text for part in ignore) else None)
    return errors


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


def run_cli(*args: str, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """Runs `python -m payroll_sandbox ...` as a real process."""
    return subprocess.run([sys.executable, "-m", "payroll_sandbox", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env={**os.environ, **(env or {})})
