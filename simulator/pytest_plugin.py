"""pytest fixtures for customers' own test suites.

`payroll_sandbox` gives each test a fresh, isolated tenant on one sandbox server
shared by the whole session (so tests can run in parallel), with a manual clock.
The server starts in a background thread of the test process, or, with
PAYROLL_SANDBOX_URL set, the fixtures use a server you run yourself (e.g. Docker).

    def test_refund_flow(payroll_sandbox):
        task = payroll_sandbox.post("/task/create", {"identifier": "u1",
                                    "company": "6410a0000000000000000001", "product": "deposit",
                                    "scenario": "auth-expired"})
        payroll_sandbox.run_until_idle()
        assert [e["eventType"] for e in payroll_sandbox.events(task=task["id"])][-2:] == [
            "task-status-updated", "task-workflow-finished"]
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

URL_VARIABLE = "PAYROLL_SANDBOX_URL"


class SandboxError(AssertionError):
    """The sandbox answered with an error body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        error = body.get("error", {})
        super().__init__(f"{status} {error.get('code')}: {error.get('message')} "
                         f"{error.get('details') or ''}".rstrip())
        self.status, self.body = status, body


class Sandbox:
    """One tenant of a running sandbox: its base URL, keys and the control plane."""

    def __init__(self, base_url: str, api_key: str, api_secret: str, name: str = "") -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key, self.api_secret, self.name = api_key, api_secret, name

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.api_key, "x-api-secret": self.api_secret}

    def request(self, method: str, path: str, body: Any = None, *,
                headers: dict[str, str] | None = None) -> Any:
        """Any API call with this tenant's keys; returns `data` (raises SandboxError on 4xx/5xx)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base_url}{path}", data=data, method=method,
                                         headers={"content-type": "application/json",
                                                  **self.headers, **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.load(response).get("data")
        except urllib.error.HTTPError as error:
            raise SandboxError(error.code, json.load(error)) from None

    def get(self, path: str, **query: Any) -> Any:
        suffix = f"?{urllib.parse.urlencode(query)}" if query else ""
        return self.request("GET", f"{path}{suffix}")

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body if body is not None else {})

    # The control plane, for the common cases.
    def advance(self, seconds: float) -> dict[str, Any]:
        """Moves the clock `seconds`, calling again while the sandbox stops at its work
        limit (`complete: false`), so the whole span runs."""
        clock = self.post("/_sandbox/clock/advance", {"seconds": seconds})
        while not clock.get("complete", True):
            clock = self.post("/_sandbox/clock/advance", {"seconds": clock["remainingSeconds"]})
        return clock

    def run_until_idle(self) -> dict[str, Any]:
        clock = self.post("/_sandbox/clock/run-until-idle")
        while not clock.get("complete", True):
            clock = self.post("/_sandbox/clock/run-until-idle")
        return clock

    def events(self, **filters: Any) -> list[dict[str, Any]]:
        return self.get("/_sandbox/events", **filters)

    def trigger(self, event_type: str, **fields: Any) -> dict[str, Any]:
        return self.post("/_sandbox/events/trigger", {"eventType": event_type, **fields})

    def use_webhook_url(self, url: str, event_types: list[str] | None = None) -> None:
        endpoint = {"url": url, **({"eventTypes": event_types} if event_types else {})}
        self.request("PUT", "/_sandbox/webhooks/endpoints", {"endpoints": [endpoint]})

    def bind_scenario(self, identifier: str, scenario: str | None) -> None:
        self.request("PUT", f"/_sandbox/users/{urllib.parse.quote(identifier)}/scenario",
                     {"scenario": scenario})

    def public_token(self, identifier: str) -> str:
        return self.post("/access-token", {"identifier": identifier})["publicToken"]

    def new_tenant(self, **settings: Any) -> Sandbox:
        tenant = self.post("/_sandbox/tenants", settings)
        return Sandbox(self.base_url, tenant["apiKey"], tenant["apiSecret"], tenant["name"])


class _ServerThread:
    """The sandbox app on 127.0.0.1, port 0, in a thread with its own event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="payroll-sandbox", daemon=True)
        self.base_url = ""
        self.keys: tuple[str, str] = ("", "")
        self._runner: Any = None
        self._error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(60)
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._start())
        except BaseException as error:  # reported to the starting thread
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        from aiohttp import web

        from .app import create_app, long_lived
        from .keys import SANDBOX
        from .server import SandboxRunner
        from .settings import Settings

        with long_lived():  # each test's tenant deletion collects; the catalog stays out
            app = create_app(Settings(port=0, clock="manual"))
        self._runner = SandboxRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}"
        tenant = app[SANDBOX].registry.tenants.default()
        self.keys = (tenant.api_key, tenant.api_secret)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()


@pytest.fixture(scope="session")
def payroll_sandbox_server() -> Iterator[Sandbox]:
    """The session's sandbox, as its default tenant (PAYROLL_SANDBOX_URL: yours)."""
    url = os.environ.get(URL_VARIABLE)
    if url:
        from .cli import default_credentials

        key = os.environ.get("PAYROLL_SANDBOX_API_KEY")
        secret = os.environ.get("PAYROLL_SANDBOX_API_SECRET")
        if not key or not secret:
            key, secret = default_credentials()
        yield Sandbox(url, key, secret)
        return
    server = _ServerThread()
    server.start()
    try:
        yield Sandbox(server.base_url, *server.keys)
    finally:
        server.stop()


@pytest.fixture
def payroll_sandbox(payroll_sandbox_server: Sandbox) -> Iterator[Sandbox]:
    """A fresh tenant for this test: its own users, tasks, events, clock and endpoints;
    deleted after the test, so a long session keeps the server small."""
    tenant = payroll_sandbox_server.new_tenant()
    yield tenant
    try:
        tenant.request("DELETE", f"/_sandbox/tenants/{tenant.name}")
    except SandboxError:
        pass  # already gone (the test deleted or reset it)
