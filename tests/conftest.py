"""Shared test fixtures: the real app on a real (pytest-aiohttp) server.

The catalog is built once per session (it is read-only); every test gets fresh
tenants and a manual clock, so tests never sleep and never see each other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.app import build_store, create_app, load
from simulator.clock import Clock
from simulator.settings import Settings

REPO = Path(__file__).resolve().parent.parent
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
    store = build_store(settings, clock=clock, loaded=loaded)
    return await aiohttp_client(create_app(settings, store=store))


@pytest.fixture
def make_client(aiohttp_client, loaded, clock):
    """A client of a fresh app: `await make_client(environment="production")`."""

    async def make(**overrides):
        settings = Settings(port=0, clock="manual").with_overrides(**overrides)
        store = build_store(settings, clock=clock, loaded=loaded)
        return await aiohttp_client(create_app(settings, store=store))

    return make


@pytest.fixture
async def client(make_client):
    return await make_client()


def run_cli(*args: str, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """Runs `python -m simulator ...` as a real process."""
    return subprocess.run([sys.executable, "-m", "simulator", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env={**os.environ, **(env or {})})
