"""The blocking client for sync tests: `Sandbox` (its docstring says how it runs)."""

from __future__ import annotations

import atexit
import functools
import os
import threading
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate

from ..client import new_session, with_query
from .loops import T, LoopThread, refuse_on_a_running_loop
from .testing import ASYNC_TWIN, P, AsyncSandbox, LoopbackCheck, warn_ignored

if TYPE_CHECKING:
    import aiohttp


def _blocking(method: Callable[Concatenate[AsyncSandbox, P], Coroutine[Any, Any, T]]
              ) -> Callable[Concatenate[Sandbox, P], T]:
    """Sandbox's face of an AsyncSandbox method: the same arguments and docstring, run to
    its end on the sync clients' loop (refused at once on a thread that runs a loop)."""
    name = method.__name__

    @functools.wraps(method)
    def blocking(self: Sandbox, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(lambda twin: method(twin, *args, **kwargs), f"payroll_sandbox.{name}",
                         f"async_payroll_sandbox.{name}(...)")

    blocking.__qualname__ = f"Sandbox.{name}"
    return blocking


class Sandbox:
    """One tenant of a running sandbox, blocking: for sync tests.

    Each method is AsyncSandbox's, run to its end on an event loop in a thread of the
    process that every Sandbox shares (with one aiohttp session). `request/get/post` return
    the answer's `data` and raise SandboxError on a 4xx/5xx. In an async test use
    AsyncSandbox instead: a blocking call there holds up the event loop, and with it any
    receiver of the test's that the call makes the sandbox deliver to; it raises
    BlockingCallError at once.
    """

    def __init__(self, base_url: str, api_key: str, api_secret: str, name: str = "", *,
                 loopback: LoopbackCheck | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key, self.api_secret, self.name = api_key, api_secret, name
        self.loopback = loopback
        self.scenario: str | None = None  # the scenario matrix's item: its bound scenario
        self.handler_checks: Counter[str] = Counter()  # checks passed, for the coverage report

    def __repr__(self) -> str:
        return f"<Sandbox {self.name or 'tenant'} at {self.base_url}>"

    def awaitable(self) -> AsyncSandbox:
        """This tenant over an awaitable client of its own, for a coroutine on the caller's
        event loop (`async with sandbox.awaitable() as tenant: ...`)."""
        return AsyncSandbox(self.base_url, self.api_key, self.api_secret, self.name,
                            loopback=self.loopback)

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.api_key, "x-api-secret": self.api_secret}

    def request(self, method: str, path: str, body: Any = None, *,
                headers: dict[str, str] | None = None) -> Any:
        """Any API call with this tenant's keys; returns `data` (raises SandboxError on 4xx/5xx;
        BlockingCallError at once on a thread that runs an event loop)."""
        return self._run(lambda twin: twin.request(method, path, body, headers=headers),
                         f"payroll_sandbox's {method} {path.split('?')[0]}",
                         f"async_payroll_sandbox.request({method!r}, {path!r}, ...)")

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", with_query(path, query))

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body if body is not None else {})

    # -- the control plane, for the common cases --------------------------------------------

    advance = _blocking(AsyncSandbox.advance)
    run_until_idle = _blocking(AsyncSandbox.run_until_idle)
    events = _blocking(AsyncSandbox.events)
    trigger = _blocking(AsyncSandbox.trigger)
    use_webhook_url = _blocking(AsyncSandbox.use_webhook_url)
    bind_scenario = _blocking(AsyncSandbox.bind_scenario)
    use_profile = _blocking(AsyncSandbox.use_profile)
    public_token = _blocking(AsyncSandbox.public_token)
    autopilot = _blocking(AsyncSandbox.autopilot)
    callbacks = _blocking(AsyncSandbox.callbacks)
    wait_for_callback = _blocking(AsyncSandbox.wait_for_callback)
    snapshot = _blocking(AsyncSandbox.snapshot)
    restore = _blocking(AsyncSandbox.restore)
    assert_called = _blocking(AsyncSandbox.assert_called)

    def new_tenant(self, **settings: Any) -> Sandbox:
        """Another isolated tenant (`name`, `products`, `signing`, ... as the API takes them)."""
        tenant = _blocking(AsyncSandbox.new_tenant)(self, **settings)
        return Sandbox(self.base_url, tenant.api_key, tenant.api_secret, tenant.name,
                       loopback=self.loopback)

    def check_handler(self, url: str, secret: str | None = None, **options: Any) -> Any:
        """AsyncSandbox.check_handler, blocking: the report on the webhook handler at `url`
        (`assert report.ok, report`; README: Checking your webhook handler)."""
        from ..checker import check_handler
        from .coverage import handler_checks

        report = check_handler(url, secret, **options)
        self.handler_checks.update(handler_checks(report))
        return report

    # -- API faults on purpose: the calls your app makes fail (PUT /_sandbox/faults/api) ----

    fail_next = _blocking(AsyncSandbox.fail_next)
    slow_next = _blocking(AsyncSandbox.slow_next)
    reset_next = _blocking(AsyncSandbox.reset_next)
    api_faults = _blocking(AsyncSandbox.api_faults)
    clear_api_faults = _blocking(AsyncSandbox.clear_api_faults)

    def _run(self, call: Callable[[AsyncSandbox], Coroutine[Any, Any, T]], what: str,
             example: str) -> T:
        """`call` on this tenant as an AsyncSandbox (on the sync clients' loop and session)
        run to its end; refused at once on a thread that runs a loop. The warnings of its
        calls are given on this (the caller's) thread: pytest records the test thread's."""
        refuse_on_a_running_loop(what, ASYNC_TWIN, example)
        twin = AsyncSandbox(self.base_url, self.api_key, self.api_secret, self.name,
                            session=_sync_clients().session, loopback=self.loopback)
        twin._held = []
        result = _sync_clients().run(call(twin), timeout=None)
        for method, path, warning in twin._held:
            warn_ignored(method, path, warning)
        return result


class _SyncClients(LoopThread):
    """The loop every Sandbox's calls run on, and the one aiohttp session they share: made
    on the first call of the process, closed at its exit."""

    def __init__(self) -> None:
        super().__init__("payroll-sandbox-client")
        self.pid = os.getpid()
        self.session: aiohttp.ClientSession | None = None

    async def _setup(self) -> None:
        self.session = new_session()

    async def _cleanup(self) -> None:
        if self.session is not None:
            await self.session.close()


_sync_clients_lock = threading.Lock()
_sync_clients_thread: _SyncClients | None = None


def _sync_clients() -> _SyncClients:
    """The process's _SyncClients, started on first use (again in a forked child, which
    has the parent's object but not its thread)."""
    global _sync_clients_thread
    with _sync_clients_lock:
        if _sync_clients_thread is None or _sync_clients_thread.pid != os.getpid():
            clients = _SyncClients()
            clients.start()
            atexit.register(clients.stop)
            _sync_clients_thread = clients
        return _sync_clients_thread
