"""Clients and webhook receivers for tests against the sandbox: the one module to import from.

- `AsyncSandbox` (awaitable, never blocking the event loop) and `Sandbox` (blocking, for
  sync tests) are one tenant of a running sandbox: its keys, any API call, and the control
  plane (clock, events, triggers, endpoints, scenarios). `AsyncSandbox` is the sandbox
  client of simulator/client.py with these methods; `Sandbox` has the same ones, each
  running its AsyncSandbox twin to the end on an event loop in a thread of its own.
- `WebhookReceiver` and `AsyncWebhookReceiver` are real HTTP servers (on 127.0.0.1, or on
  every interface with a `ReceiverHost` for a sandbox in a container) that a tenant
  delivers its webhooks to. They check each delivery as a customer's endpoint
  should (the signature, the CloudEvent read by the official SDK), keep every one as a
  `ReceivedDelivery`, answer as programmed (`fail_next`, `hang_next`) and wait for or
  assert on what arrived.
- `AsgiServer` serves the customer's own ASGI app (FastAPI, Starlette, Django; a WSGI app
  through a2wsgi) with uvicorn on a real port, so the sandbox delivers to it.

What a sandbox says it ignored (its x-sandbox-warning: an unknown body field) becomes a
`payroll_sandbox.SandboxWarning`; a webhook URL on this machine's loopback given to a
sandbox that cannot reach it raises `LoopbackURLError` (with a `LoopbackCheck`, as the
plugin's sandboxes have one).

The pytest plugin (simulator/kit/pytest_plugin.py) builds its fixtures from these; they work
without pytest too. Nothing heavy is imported until it is used, so the plugin costs a
test run that does not use it nothing.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import hashlib
import hmac
import ipaddress
import os
import socket
import sys
import threading
import time
import urllib.parse
import warnings
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from ..client import SandboxClient, SandboxError, new_session, with_query

if TYPE_CHECKING:
    import aiohttp
    from aiohttp import web

__all__ = ["AsgiServer", "AsyncSandbox", "AsyncWebhookReceiver", "BlockingCallError",
           "LoopbackCheck", "LoopbackURLError", "ReceivedDelivery", "ReceiverHost",
           "RequestNotMade", "Sandbox", "SandboxError", "WebhookReceiver",
           "describe_near_misses", "describe_undelivered", "on_loopback"]

WAIT_TIMEOUT = 10.0      # wall seconds `wait_for` waits by default
CALLBACK_POLL = 0.05     # wall seconds between two reads of the callbacks ledger
CALLBACKS = "/_sandbox/sdk/callbacks"
SIGNATURE_HEADER = "x-hmac-signature-sha-256"
WEBHOOK_PATH = "/webhooks"
ENDPOINTS = "/_sandbox/webhooks/endpoints"
API_FAULTS = "/_sandbox/faults/api"
VERIFY = "/_sandbox/requests/verify"
ASYNC_TWIN = "async_payroll_sandbox (AsyncSandbox)"

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True)
class ReceiverHost:
    """Where a receiver listens and the host it gives the sandbox in its URL.

    The default, `ReceiverHost()`, is 127.0.0.1 for both: a sandbox on the same machine.
    A sandbox in a container cannot reach the test machine's 127.0.0.1; `ReceiverHost.
    advertising("host.docker.internal")` (or the runner's address on the container
    network) listens on every interface and names that host in the URLs.
    """

    listen: str = "127.0.0.1"
    advertised: str = "127.0.0.1"

    @classmethod
    def advertising(cls, host: str | None) -> ReceiverHost:
        """Every interface, `host` in the URLs; None or empty: the default (loopback)."""
        host = (host or "").strip().strip("[]")
        if not host:
            return cls()
        return cls(listen="::" if ":" in host else "0.0.0.0", advertised=host)

    def url(self, port: int, path: str = "/") -> str:
        """`http://<advertised>:<port><path>` (an IPv6 literal in brackets)."""
        host = f"[{self.advertised}]" if ":" in self.advertised else self.advertised
        return f"http://{host}:{port}{path}"


class BlockingCallError(RuntimeError):
    """A blocking method was called on a thread whose event loop is running (an async
    test): it would hold up that loop, and any receiver or app served by it, until the
    call timed out. The message names the async twin to use instead."""


BLOCKING = ("{what} blocks, and it was called on a thread whose event loop is running "
            "(an async test?): nothing on that loop (your app, a receiver) could answer until "
            "it timed out. Use {twin} instead, awaited: `await {example}`.")


def _refuse_on_a_running_loop(what: str, twin: str, example: str) -> None:
    """Raises BlockingCallError at once when this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # no loop here: blocking is fine
    raise BlockingCallError(BLOCKING.format(what=what, twin=twin, example=example))


def _fault_rule(operation: str, **fault: Any) -> dict[str, Any]:
    """A rule of PUT /_sandbox/faults/api: `operation` is the method and the path as the
    OpenAPI document declares it (`"POST /task/create"`, `"GET /task/{taskId}"`; a path
    alone is a GET), `fault` its fault and limits (None left out)."""
    method, _, path = operation.strip().partition(" ")
    if not path:
        method, path = "GET", method
    path = path.strip()
    if not method.isalpha() or not path.startswith("/"):
        raise ValueError(f"{operation!r} is no operation: write it as the method and the path "
                         "of the OpenAPI document, e.g. 'POST /task/create'")
    return {"method": method.upper(), "path": path,
            **{name: value for name, value in fault.items() if value is not None}}


def _rules_with(current: list[dict[str, Any]], rule: dict[str, Any]) -> dict[str, Any]:
    """The PUT body that adds `rule` after the tenant's rules that can still fire: a PUT
    starts every count afresh, so a counted rule goes back with what it has left."""
    kept = []
    for existing in current:
        if existing["remaining"] == 0:
            continue
        fields = {k: v for k, v in existing.items()
                  if k not in ("fired", "remaining", "count") and v is not None}
        if existing["remaining"] is not None:
            fields["count"] = existing["remaining"]
        kept.append(fields)
    return {"rules": [*kept, rule]}


def _endpoints_with(endpoints: list[dict[str, Any]], url: str,
                    event_types: Iterable[str] | None) -> list[dict[str, Any]]:
    """The tenant's endpoints with `url` (re)registered for `event_types` (None: all)."""
    kept = [{k: v for k, v in e.items() if k in ("url", "eventTypes")}
            for e in endpoints if e["url"] != url]
    types = list(event_types) if event_types is not None else None
    return [*kept, {"url": url, **({"eventTypes": types} if types else {})}]


# -- what the sandbox ignored: a Python warning at the caller's line ----------------------------

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the package
IGNORED = ("{method} {path}: {warning} (the sandbox's x-sandbox-warning: a typo? A sandbox "
           "started with --strict-bodies refuses it with 422)")


def _warn(method: str, path: str, warning: str) -> None:
    """`warning` (an x-sandbox-warning) as a SandboxWarning, reported at the first line of
    the stack outside this package: the test's call, not the client's."""
    from .. import SandboxWarning

    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(SandboxWarning(IGNORED.format(method=method, path=path.split("?")[0],
                                                warning=warning)), stacklevel=level)


# -- webhook URLs the sandbox cannot reach ------------------------------------------------------

class LoopbackURLError(ValueError):
    """A webhook URL on this machine's loopback (127.0.0.1, ::1, localhost) given to a
    sandbox that cannot reach it (in a container, another network namespace): nothing sent
    there would arrive. The message names `payroll_sandbox_receiver_host`, the setting that
    gives the sandbox a host it reaches."""


LOOPBACK_UNREACHABLE = (
    "{url} is on this machine's loopback, which the sandbox at {sandbox} does not reach (it "
    "runs in a container or another network namespace?): nothing sent there would arrive. "
    "Set payroll_sandbox_receiver_host (--payroll-sandbox-receiver-host HOST, ini "
    "payroll_sandbox_receiver_host, or PAYROLL_SANDBOX_RECEIVER_HOST) to the host the "
    "sandbox reaches this machine by (host.docker.internal, or this machine's address on "
    "the container network): the receivers then listen on every interface and give that "
    "host, and your own server's URL is payroll_sandbox_receiver_host.url(port, path).")


def on_loopback(url: str) -> bool:
    """Whether `url`'s host is a loopback address or `localhost`."""
    return is_loopback(urllib.parse.urlsplit(url).hostname or "")


def is_loopback(host: str) -> bool:
    """Whether a host name or address is this machine's loopback (`localhost` and its
    subdomains too); verify-against trusts such a host as well."""
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LoopbackCheck:
    """Whether a sandbox delivers to this machine's loopback, for `use_webhook_url`.

    `reaches` is the answer when known. Otherwise it is found out once, on the first
    loopback URL: a tenant made for it (with `api_key` and `api_secret`, keys that may make
    tenants) sends one event to a receiver on 127.0.0.1, and it arrives or not. Its base
    URL says nothing: `http://localhost:8080` is as often a container's published port
    as a server of this machine.
    """

    def __init__(self, base_url: str, api_key: str = "", api_secret: str = "", *,
                 reaches: bool | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key, self.api_secret = api_key, api_secret
        self.reaches = reaches

    def __repr__(self) -> str:
        return f"<LoopbackCheck {self.base_url} reaches={self.reaches}>"

    async def require(self, url: str) -> None:
        """Raises LoopbackURLError when `url` is on the loopback and the sandbox does not
        reach it."""
        if not on_loopback(url):
            return
        if self.reaches is None:
            self.reaches = await self._probe()
        if not self.reaches:
            raise LoopbackURLError(LOOPBACK_UNREACHABLE.format(url=url, sandbox=self.base_url))

    async def _probe(self) -> bool:
        async with AsyncSandbox(self.base_url, self.api_key, self.api_secret) as server:
            try:
                tenant = await server.new_tenant()
            except SandboxError:
                return True  # no tenant to probe with: no check, rather than a false alarm
            try:
                async with AsyncWebhookReceiver() as receiver:  # on 127.0.0.1
                    await tenant.request("PUT", ENDPOINTS, {"endpoints": [{"url": receiver.url}]})
                    await tenant.trigger("company-updated")  # answers once it was attempted
                    return bool(receiver.deliveries)
            except SandboxError:
                return True  # the URL refused (--webhook-deny): the sandbox will say so itself
            finally:
                await tenant.request("DELETE", f"/_sandbox/tenants/{tenant.name}")


# -- requests that were not made: the nearest ones, as a mock server's near misses --------------

class RequestNotMade(SandboxError):
    """`assert_called` failed: the sandbox's `not-called` answer, its message the
    nearest requests of the journal with every JSON path where each differs."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status, body)
        error = body.get("error", {})
        self.matched: list[int] = error.get("matched", [])
        self.near_misses: list[dict[str, Any]] = error.get("nearMisses", [])
        self.args = (describe_near_misses(error.get("message", ""), self.near_misses),)


def _shown(value: Any, limit: int = 120) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def describe_near_misses(message: str, near_misses: Iterable[Mapping[str, Any]]) -> str:
    """The sandbox's message, then each near miss: `#id METHOD path -> status at time`
    and a line per differing JSON path (expected, and what the request had)."""
    lines = [message]
    for miss in near_misses:
        lines.append(f"  request #{miss['id']} {miss['method']} {miss['path']} -> "
                     f"{miss['status']} at {miss['time']}:")
        for difference in miss["differences"]:
            expected = (_shown(difference["expected"]) if "expected" in difference
                        else "nothing (not expected)")
            actual = _shown(difference["actual"]) if "actual" in difference else "nothing"
            lines.append(f"    {difference['path']}: expected {expected}, got {actual}")
    return "\n".join(lines)


class AsyncSandbox(SandboxClient):
    """One tenant of a running sandbox, awaitable: the sandbox client (simulator/client.py)
    with the control plane's common cases, so the event loop keeps serving (the customer's
    app on `aiohttp_server`, an AsyncWebhookReceiver) while the sandbox works.

    `request/get/post` return the answer's `data` and raise SandboxError on a 4xx/5xx. The
    session is made on first use, in the running loop; `await close()` (or `async with`)
    ends it. Tenants from `new_tenant` share it. `Sandbox` has the same methods, blocking.

    What the sandbox ignored in a call (x-sandbox-warning) is a SandboxWarning at the
    caller's line. `loopback` (a LoopbackCheck, passed on to `new_tenant`'s tenants) makes
    `use_webhook_url` refuse a loopback URL the sandbox cannot reach.
    """

    def __init__(self, base_url: str, api_key: str, api_secret: str, name: str = "", *,
                 session: aiohttp.ClientSession | None = None,
                 loopback: LoopbackCheck | None = None) -> None:
        super().__init__(base_url, api_key, api_secret, session=session)
        self.name = name
        self.loopback = loopback
        self.scenario: str | None = None  # the scenario matrix's item: its bound scenario
        self.handler_checks: Counter[str] = Counter()  # checks passed, for the coverage report
        self._held: list[tuple[str, str, str]] | None = None  # warnings kept for Sandbox

    def __repr__(self) -> str:
        return f"<AsyncSandbox {self.name or 'tenant'} at {self.base_url}>"

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def request(self, method: str, path: str, body: Any = None, *,
                      headers: dict[str, str] | None = None) -> Any:
        """Any API call with this tenant's keys; returns `data` (raises SandboxError on a
        4xx/5xx, CannotReach when no answer comes). What the sandbox ignored (an unknown
        field) is a SandboxWarning."""
        answer = await self.answer(method, path, body, headers=headers)
        if answer.warning:
            if self._held is not None:  # a Sandbox's call: warned on the caller's thread
                self._held.append((method, path, answer.warning))
            else:
                _warn(method, path, answer.warning)
        return answer.data

    async def get(self, path: str, **query: Any) -> Any:
        return await self.request("GET", with_query(path, query))

    async def post(self, path: str, body: Any = None) -> Any:
        return await self.request("POST", path, body if body is not None else {})

    # -- the control plane, for the common cases --------------------------------------------

    async def advance(self, seconds: float) -> dict[str, Any]:
        """Moves the clock `seconds`, running every step, retry and refresh due on the way;
        asks again while the sandbox stops at its work limit (`complete: false`).
        Deliveries it makes reach receivers on this loop."""
        clock = await self.post("/_sandbox/clock/advance", {"seconds": seconds})
        while not clock.get("complete", True):
            clock = await self.post("/_sandbox/clock/advance",
                                    {"seconds": clock["remainingSeconds"]})
        return clock

    async def run_until_idle(self) -> dict[str, Any]:
        """Runs every pending job in time order until nothing but background work is left."""
        clock = await self.post("/_sandbox/clock/run-until-idle")
        while not clock.get("complete", True):
            clock = await self.post("/_sandbox/clock/run-until-idle")
        return clock

    async def events(self, **filters: Any) -> list[dict[str, Any]]:
        """The ledger: `type`, `user`, `task`, `since`, `delivery`, `limit` filter it."""
        return await self.get("/_sandbox/events", **filters)

    async def trigger(self, event_type: str, **fields: Any) -> dict[str, Any]:
        """Emits `event_type` (`identifier`, `taskId`, `companyId`, `data` as the API takes
        them); answers once its first delivery attempts are done."""
        return await self.post("/_sandbox/events/trigger", {"eventType": event_type, **fields})

    async def check_handler(self, url: str, secret: str | None = None, **options: Any) -> Any:
        """Judges the webhook handler at `url` as the service will treat it (README:
        Checking your webhook handler): a report whose `ok` is true when no check failed
        and whose text reads as an assertion message (`assert report.ok, report`). The
        handler may run on this loop. `options` as `payroll_sandbox.checker.check_handler`
        takes them (`events`, `state_url`, `burst`, `timeout`, ...); `sandbox_url=self.
        base_url, api_key=self.api_key, api_secret=self.api_secret` has this sandbox make
        the events (its service profile) instead of an in-process one."""
        from ..checker import check_handler_async
        from .coverage import handler_checks

        report = await check_handler_async(url, secret, **options)
        self.handler_checks.update(handler_checks(report))
        return report

    async def use_webhook_url(self, url: str, event_types: Iterable[str] | None = None) -> None:
        """Delivers this tenant's events (every type, or `event_types`) to `url` too; the
        other endpoints stay (a receiver fixture's among them), an earlier registration of
        `url` is replaced. A URL on this machine's loopback that the sandbox cannot reach
        raises LoopbackURLError (with a `loopback` check, as the plugin's sandboxes have)."""
        if self.loopback is not None:
            await self.loopback.require(url)
        endpoints = await self.request("GET", ENDPOINTS)
        await self.request("PUT", ENDPOINTS,
                           {"endpoints": _endpoints_with(endpoints, url, event_types)})

    async def bind_scenario(self, identifier: str, scenario: str | None) -> None:
        """The user's next tasks run `scenario` (None removes the binding)."""
        await self.request("PUT",
                           f"/_sandbox/users/{urllib.parse.quote(identifier, safe='')}/scenario",
                           {"scenario": scenario})

    async def use_profile(self, identifier: str, name: str | None = None,
                          **data: Any) -> dict[str, Any]:
        """The user's next linked accounts (and the next refresh of their connected ones)
        take the data profile `name` (GET /_sandbox/profiles) with `data` over it: record
        kinds as keywords (`income={"income": 85000, "incomeType": "yearly"}`,
        `deposit_accounts=[...]` or `depositAccounts`). Neither: the binding goes. Returns
        the binding (PUT /_sandbox/users/{identifier}/profile)."""
        path = f"/_sandbox/users/{urllib.parse.quote(identifier, safe='')}/profile"
        if name is None and not data:
            return await self.request("DELETE", path)
        body: dict[str, Any] = {}
        if name is not None:
            body["profile"] = name
        if data:
            body["data"] = {_camel(key): value for key, value in data.items()}
        return await self.request("PUT", path, body)

    async def public_token(self, identifier: str) -> str:
        return (await self.post("/access-token", {"identifier": identifier}))["publicToken"]

    # -- the hosted flow: its autopilot and what it told the host page ----------------------

    async def autopilot(self, identifier: str, company: str | None, *,
                        username: str = "test-good", **plan: Any) -> dict[str, Any] | None:
        """When your frontend opens the hosted flow for `identifier`, the flow plays the
        user's steps itself: picks `company` (its _id), signs in as `username` (a sandbox
        username or test-<scenario>) and goes on to the success or failure screen, with no
        click. `plan`: `mfa`, `password`, `distribution`, `language`, `product`, `pause`
        (seconds of the tenant's clock on each screen) as PUT
        /_sandbox/users/{identifier}/autopilot takes them. `company=None` unbinds it.
        Returns the bound plan (None once unbound); SandboxError (422) for a plan the flow
        cannot play (an unknown company, a scenario that does not fit the product)."""
        path = f"/_sandbox/users/{urllib.parse.quote(identifier, safe='')}/autopilot"
        if company is None:
            await self.request("DELETE", path)
            return None
        body = {"company": company, "username": username,
                **{_camel(key): value for key, value in plan.items()}}
        return (await self.request("PUT", path, body))["autopilot"]

    async def callbacks(self, identifier: str | None = None, *,
                        after: int = 0) -> list[dict[str, Any]]:
        """What the hosted flow told the host page (its onInteraction, onFinish, onClose,
        onDataRequest, onOpenUrl calls), oldest first: `{id, time, identifier, flow, event,
        payload}`; `after` the id of the last one read gives only the newer ones."""
        query: dict[str, Any] = {"after": after}
        if identifier is not None:
            query["identifier"] = identifier
        return await self.get(CALLBACKS, **query)

    async def wait_for_callback(self, identifier: str, event: str | None = None, *,
                                name: str | None = None, after: int = 0,
                                timeout: float = WAIT_TIMEOUT, **match: Any) -> dict[str, Any]:
        """The first message the hosted flow told the host page for `identifier` (after the
        id `after`) whose `event` is `event` (interaction, finish, close, data-request,
        open-url), whose interaction `name` is `name` and whose payload's top-level fields
        equal `match` (`reason="auth-expired"`); waits up to `timeout` wall seconds. A
        timeout says what the flow did tell the host."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while True:
            for entry in await self.callbacks(identifier, after=after):
                seen.append(entry)
                after = entry["id"]
                if _is_callback(entry, event, name, match):
                    return entry
            if time.monotonic() >= deadline:
                raise AssertionError(_callback_timeout(identifier, event, name, match, timeout,
                                                       seen))
            await asyncio.sleep(CALLBACK_POLL)

    async def new_tenant(self, **settings: Any) -> AsyncSandbox:
        """Another isolated tenant (`name`, `products`, `signing`, ... as the API takes them)."""
        tenant = await self.post("/_sandbox/tenants", settings)
        return AsyncSandbox(self.base_url, tenant["apiKey"], tenant["apiSecret"], tenant["name"],
                            session=self.session, loopback=self.loopback)

    async def assert_called(self, method: str, path: str, body: Any = None,
                            query: Mapping[str, Any] | None = None,
                            times: int | None = None) -> list[int]:
        """Asserts that this tenant received `method path` (a `{name}` segment matches any
        one segment) with the `query` parameters and the `body` fields given (None: not
        looked at; an object's other fields are not looked at, an array matches item for
        item), at least once or `times` exactly (POST /_sandbox/requests/verify). Returns
        the matching requests' journal ids. Raises RequestNotMade (an AssertionError)
        naming the nearest requests that did not match (3 at most) and every JSON path
        where each differs."""
        expected: dict[str, Any] = {"method": method, "path": path}
        if body is not None:
            expected["body"] = body
        if query is not None:
            expected["query"] = {name: str(value) for name, value in query.items()}
        if times is not None:
            expected["times"] = times
        try:
            return (await self.post(VERIFY, expected))["matched"]
        except SandboxError as error:
            if error.code != "not-called":
                raise
            raise RequestNotMade(error.status, error.body) from None

    async def snapshot(self) -> dict[str, Any]:
        """This tenant's whole state as one JSON document (`GET /_sandbox/snapshot`)."""
        return await self.get("/_sandbox/snapshot")

    async def restore(self, document: dict[str, Any]) -> Any:
        """Puts back a `snapshot()` exactly: ids, clock, cursors, ledger."""
        return await self.post("/_sandbox/snapshot", document)

    # -- API faults on purpose: the calls your app makes fail (PUT /_sandbox/faults/api) ----

    async def fail_next(self, operation: str, status: int = 503, *,
                        retry_after: int | None = None,
                        count: int | None = 1) -> list[dict[str, Any]]:
        """The next `count` calls of `operation` (`"POST /task/create"`, as the OpenAPI
        document names it) answer `status` with the error body (and `retry-after:
        <retry_after>`), changing nothing; `count=None`: every call. Returns the rules."""
        return await self._add_api_fault(_fault_rule(operation, status=status,
                                                     retryAfter=retry_after, count=count))

    async def slow_next(self, operation: str, latency_ms: int, *,
                        count: int | None = 1) -> list[dict[str, Any]]:
        """The next `count` calls of `operation` wait `latency_ms` wall milliseconds (at
        most 30,000), then are served as usual."""
        return await self._add_api_fault(_fault_rule(operation, latencyMs=latency_ms,
                                                     count=count))

    async def reset_next(self, operation: str, *,
                         count: int | None = 1) -> list[dict[str, Any]]:
        """The next `count` calls of `operation` have their connection closed without an
        answer (a TCP reset), changing nothing."""
        return await self._add_api_fault(_fault_rule(operation, reset=True, count=count))

    async def api_faults(self) -> list[dict[str, Any]]:
        """The tenant's API fault rules, each with how often it `fired` and its `remaining`."""
        return (await self.get(API_FAULTS))["rules"]

    async def clear_api_faults(self) -> None:
        """No API fault rules any more (`DELETE /_sandbox/faults/api`)."""
        await self.request("DELETE", API_FAULTS)

    async def _add_api_fault(self, rule: dict[str, Any]) -> list[dict[str, Any]]:
        rules = _rules_with(await self.api_faults(), rule)
        return (await self.request("PUT", API_FAULTS, rules))["rules"]


def _blocking(method: Callable[Concatenate[AsyncSandbox, P], Coroutine[Any, Any, T]]
              ) -> Callable[Concatenate[Sandbox, P], T]:
    """Sandbox's face of an AsyncSandbox method: the same arguments and docstring, run to
    its end on the sync clients' loop (refused at once on a thread that runs a loop)."""
    name = method.__name__

    @functools.wraps(method)
    def blocking(self: Sandbox, *args: P.args, **kwargs: P.kwargs) -> T:
        _refuse_on_a_running_loop(f"payroll_sandbox.{name}", ASYNC_TWIN,
                                  f"async_payroll_sandbox.{name}(...)")
        twin = self._twin()
        result = _sync_clients().run(method(twin, *args, **kwargs), timeout=None)
        self._warn_held(twin)
        return result

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
        _refuse_on_a_running_loop(f"payroll_sandbox's {method} {path.split('?')[0]}", ASYNC_TWIN,
                                  f"async_payroll_sandbox.request({method!r}, {path!r}, ...)")
        twin = self._twin()
        data = _sync_clients().run(twin.request(method, path, body, headers=headers),
                                   timeout=None)
        self._warn_held(twin)
        return data

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
        """Judges the webhook handler at `url` as the service will treat it (README:
        Checking your webhook handler): a report whose `ok` is true when no check failed
        and whose text reads as an assertion message (`assert report.ok, report`).
        `options` as `payroll_sandbox.checker.check_handler` takes them (`events`,
        `state_url`, `burst`, `timeout`, ...); `sandbox_url=self.base_url,
        api_key=self.api_key, api_secret=self.api_secret` has this sandbox make the events
        (its service profile) instead of an in-process one."""
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

    def _twin(self) -> AsyncSandbox:
        """This tenant as an AsyncSandbox on the sync clients' loop and session, keeping
        the warnings of its calls for `_warn_held`."""
        twin = AsyncSandbox(self.base_url, self.api_key, self.api_secret, self.name,
                            session=_sync_clients().session, loopback=self.loopback)
        twin._held = []
        return twin

    @staticmethod
    def _warn_held(twin: AsyncSandbox) -> None:
        """The warnings of the twin's calls, on this (the caller's) thread: pytest records
        the warnings of the test's thread."""
        for method, path, warning in twin._held or ():
            _warn(method, path, warning)


# -- webhook receivers --------------------------------------------------------------------

class Tenant(Protocol):
    """What a receiver's `register` uses of a tenant's client (a Sandbox or an AsyncSandbox)."""

    api_secret: str

    def use_webhook_url(self, url: str, event_types: Iterable[str] | None = None) -> Any: ...


@dataclass(frozen=True)
class ReceivedDelivery:
    """One webhook request as a receiver got it, and how it answered."""

    arrival: int                 # 1, 2, ... in order of arrival
    event_id: str | None         # ce-id (None: not a CloudEvent)
    event_type: str | None       # the body's eventType
    body: dict[str, Any] | None  # the event body (None: unparseable)
    status: int | None           # the answer; None: hung until the sandbox gave up
    problem: str | None = None   # why it was refused: a bad signature, not a CloudEvent
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # names lower-cased
    raw_body: bytes = field(default=b"", repr=False)
    cloud_event: Any = field(default=None, repr=False, compare=False)  # the SDK's own (1.x/2.x)

    @property
    def accepted(self) -> bool:
        """Answered with a 2xx: the delivery counts (the sandbox will not retry it)."""
        return self.status is not None and 200 <= self.status < 300

    def describe(self) -> str:
        answer = "hung" if self.status is None else str(self.status)
        refused = f" refused: {self.problem}" if self.problem else ""
        return (f"#{self.arrival} {self.event_type or '?'} {self.event_id or '?'} "
                f"-> {answer}{refused}")


HANG = "hang"


def _matches(body: Mapping[str, Any], match: Mapping[str, Any]) -> bool:
    """Top-level body fields equal `match`; `user=` is the user's identifier, and an
    object with an `_id` (`company`) also matches its id."""
    for key, wanted in match.items():
        value = body.get(key)
        if key == "user" and isinstance(value, dict) and not isinstance(wanted, dict):
            value = value.get("identifier")
        elif isinstance(value, dict) and "_id" in value and not isinstance(wanted, dict):
            value = value["_id"]
        if value != wanted:
            return False
    return True


def _is_callback(entry: Mapping[str, Any], event: str | None, name: str | None,
                 match: Mapping[str, Any]) -> bool:
    payload = entry["payload"]
    return ((event is None or entry["event"] == event)
            and (name is None or payload.get("name") == name) and _matches(payload, match))


def _callback_timeout(identifier: str, event: str | None, name: str | None,
                      match: Mapping[str, Any], timeout: float,
                      seen: list[dict[str, Any]]) -> str:
    wanted = " ".join(part for part in (event or "callback", name and repr(name)) if part)
    told = "; ".join(f"{e['event']} {e['payload'].get('name') or e['payload'].get('reason') or ''}"
                     .strip() for e in seen[-30:]) or "nothing"
    return (f"the hosted flow told the host page no {wanted}{_where(match)} for "
            f"{identifier!r} within {timeout:g} s; it told: {told}")


def _where(match: Mapping[str, Any]) -> str:
    """` (task='...', user='...')`, or nothing without a match."""
    return f" ({', '.join(f'{k}={v!r}' for k, v in match.items())})" if match else ""


class _Receiving:
    """What both receivers share: the server (on whichever loop serves it), the checks
    of each delivery, the programmed answers and the assertions over what arrived."""

    def __init__(self, *, secret: str | None = None, path: str = WEBHOOK_PATH,
                 host: ReceiverHost | None = None) -> None:
        self.path = path
        self.host = host or ReceiverHost()
        self.port: int | None = None
        self._secrets: set[str] = {secret} if secret else set()
        self._deliveries: list[ReceivedDelivery] = []
        self._plan: deque[int | str] = deque()   # answers for the next deliveries
        self._lock = threading.Lock()            # the sync receiver serves on another thread
        self._runner: web.AppRunner | None = None
        self._release: asyncio.Event | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("the receiver is not started")
        return self.host.url(self.port, self.path)

    @property
    def deliveries(self) -> list[ReceivedDelivery]:
        """Every request received, accepted or not, in order of arrival."""
        with self._lock:
            return list(self._deliveries)

    @property
    def events(self) -> list[dict[str, Any]]:
        """The bodies of the deliveries accepted with a 2xx, in order of arrival."""
        return [d.body for d in self.deliveries if d.accepted and d.body is not None]

    @property
    def problems(self) -> list[str]:
        """Deliveries a customer's endpoint must refuse: each one fails the test."""
        return [d.describe() for d in self.deliveries if d.problem]

    def trust(self, secret: str) -> None:
        """Accept signatures keyed by `secret` (register() does this for its tenant)."""
        self._secrets.add(secret)

    def fail_next(self, n: int = 1, status: int = 500) -> None:
        """Answer the next `n` deliveries with `status` (the sandbox retries them)."""
        if not 100 <= status <= 599:
            raise ValueError(f"{status!r} is not an HTTP status")
        with self._lock:
            self._plan.extend([status] * n)

    def hang_next(self, n: int = 1) -> None:
        """Answer nothing to the next `n` deliveries, until the sandbox's attempt times out."""
        with self._lock:
            self._plan.extend([HANG] * n)

    def check(self) -> None:
        """Raises AssertionError when a delivery was refused (signature, not a CloudEvent)."""
        problems = self.problems
        if problems:
            count = f"{len(problems)} deliver{'y' if len(problems) == 1 else 'ies'}"
            raise AssertionError(f"the webhook receiver refused {count}: " + "; ".join(problems))

    def assert_exactly_once(self, event_type: str, **match: Any) -> dict[str, Any]:
        """Exactly one accepted delivery of `event_type` matching `match`; its body."""
        self.check()
        found = self._matching(event_type, match)
        if len(found) != 1:
            raise AssertionError(f"expected exactly one {event_type}{_where(match)} "
                                 f"delivery, got {len(found)}; received {self._summary()}")
        return found[0]

    def assert_order(self, event_types: Iterable[str], **match: Any) -> list[dict[str, Any]]:
        """The accepted deliveries matching `match` whose type is listed came in exactly this
        order (each listed once per expected delivery); their bodies."""
        self.check()
        expected = list(event_types)
        wanted = set(expected)
        found = [b for b in self.events if b.get("eventType") in wanted and _matches(b, match)]
        got = [b.get("eventType") for b in found]
        if got != expected:
            raise AssertionError(f"expected {expected}{_where(match)} in this order, got {got}; "
                                 f"received {self._summary()}")
        return found

    # -- for the subclasses -----------------------------------------------------------------

    def _matching(self, event_type: str, match: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [b for b in self.events if b.get("eventType") == event_type and _matches(b, match)]

    def _summary(self) -> str:
        deliveries = self.deliveries
        if not deliveries:
            return "nothing"
        shown = deliveries[-50:]
        more = (f"(the last {len(shown)} of {len(deliveries)}) "
                if len(shown) < len(deliveries) else "")
        return f"{len(deliveries)}: {more}" + "; ".join(d.describe() for d in shown)

    def _timed_out(self, event_type: str, match: Mapping[str, Any],
                   timeout: float) -> AssertionError:
        return AssertionError(f"no {event_type}{_where(match)} delivery was accepted within "
                              f"{timeout:g} s; received {self._summary()}")

    def _recorded(self) -> None:
        """A delivery was recorded (on the serving loop): wake whoever waits."""

    async def _serve(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_post(self.path, self._handle)
        self._release = asyncio.Event()
        # handler_cancellation: when the sandbox gives up on a hung attempt, its handler goes.
        runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0,
                               access_log=None)
        await runner.setup()
        await web.TCPSite(runner, self.host.listen, 0).start()
        self._runner = runner
        self.port = runner.addresses[0][1]

    async def _stop(self) -> None:
        if self._release is not None:
            self._release.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import web

        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        event, body, problem, refusal = self._read(headers, raw)
        with self._lock:
            answer: int | str = refusal or (self._plan.popleft() if self._plan else 200)
            self._deliveries.append(ReceivedDelivery(
                arrival=len(self._deliveries) + 1, event_id=headers.get("ce-id"),
                event_type=body.get("eventType") if body else None, body=body,
                status=None if answer == HANG else int(answer), problem=problem,
                headers=headers, raw_body=raw, cloud_event=event))
        self._recorded()
        if answer == HANG:
            assert self._release is not None
            await self._release.wait()  # or cancelled when the sandbox's attempt times out
            return web.Response(status=503)
        return web.Response(status=int(answer))

    def _read(self, headers: dict[str, str], raw: bytes
              ) -> tuple[Any, dict[str, Any] | None, str | None, int | None]:
        """The delivery read as a customer's endpoint must: (CloudEvent, body, problem,
        refusal status). The signature is checked against every trusted secret."""
        from .cloudevents_sdk import NotACloudEvent, read_binary

        try:
            parsed = read_binary(headers, raw)
        except NotACloudEvent as error:
            return None, None, f"not a binary-mode CloudEvent: {error}", 400
        event, body = parsed.event, parsed.data
        if not isinstance(body, dict):
            return event, None, "the body is not a JSON object", 400
        ce_type, event_type = parsed.type, body.get("eventType")
        if not isinstance(event_type, str) or not ce_type.endswith(f".{event_type}"):
            return event, body, f"ce-type {ce_type!r} does not name eventType {event_type!r}", 400
        if self._secrets:
            signature = headers.get(SIGNATURE_HEADER)
            if signature is None:
                return event, body, f"unsigned (no {SIGNATURE_HEADER} header)", 401
            if not any(hmac.compare_digest(signature, hmac.new(secret.encode(), raw,
                                                               hashlib.sha256).hexdigest())
                       for secret in self._secrets):
                return event, body, f"{SIGNATURE_HEADER} does not match the body", 401
        return event, body, None, None


class _LoopThread:
    """An event loop running in a daemon thread, for servers a sync test uses."""

    def __init__(self, name: str = "payroll-sandbox-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(60)
        if self._error is not None:
            raise self._error

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        """Runs `coroutine` on the loop, from another thread, and returns its result; when
        the wait ends without it (a timeout, Ctrl-C), the coroutine is cancelled."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    async def _setup(self) -> None:
        """Runs on the loop before start() returns (a server's start-up)."""

    async def _cleanup(self) -> None:
        """Runs on the loop when stop() is called."""

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._setup())
        except BaseException as error:  # reported to the starting thread
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        if self._thread.is_alive() and self._error is None:
            self.run(self._cleanup(), 30)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(30)
        self.loop.close()


class _SyncClients(_LoopThread):
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


class WebhookReceiver(_Receiving):
    """A webhook receiver for sync tests, served by an event loop in a thread (its own,
    or `loop`: the pytest plugin's server thread).

        with WebhookReceiver() as receiver:
            receiver.register(sandbox)
            sandbox.trigger("company-updated")
            receiver.assert_exactly_once("company-updated")
    """

    def __init__(self, *, secret: str | None = None, path: str = WEBHOOK_PATH,
                 loop: _LoopThread | None = None, host: ReceiverHost | None = None) -> None:
        super().__init__(secret=secret, path=path, host=host)
        self._own_loop = loop is None
        self._loop = loop or _LoopThread("payroll-sandbox-receiver")
        self._changed = threading.Condition(self._lock)

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> WebhookReceiver:
        if self._own_loop:
            self._loop.start()
        self._loop.run(self._serve())
        return self

    def close(self) -> None:
        try:
            self._loop.run(self._stop())
        finally:
            if self._own_loop:
                self._loop.stop()

    def register(self, sandbox: Tenant, event_types: Iterable[str] | None = None) -> None:
        """Registers this receiver as an endpoint of `sandbox`'s tenant (every event type,
        or `event_types`) and trusts the tenant's signatures."""
        self.trust(sandbox.api_secret)
        sandbox.use_webhook_url(self.url, event_types)

    def wait_for(self, event_type: str, timeout: float = WAIT_TIMEOUT,
                 **match: Any) -> dict[str, Any]:
        """The body of the first accepted delivery of `event_type` matching `match`,
        waiting up to `timeout` seconds for it (it is usually there already: the sandbox's
        clock calls answer once their deliveries are done)."""
        _refuse_on_a_running_loop("webhook_receiver.wait_for",
                                  "async_webhook_receiver (AsyncWebhookReceiver)",
                                  f"async_webhook_receiver.wait_for({event_type!r}, ...)")
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                seen = len(self._deliveries)
            self.check()
            found = self._matching(event_type, match)
            if found:
                return found[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timed_out(event_type, match, timeout)
            with self._changed:
                if len(self._deliveries) == seen:  # nothing new since the look above
                    self._changed.wait(remaining)

    def _recorded(self) -> None:
        with self._changed:
            self._changed.notify_all()


class AsyncWebhookReceiver(_Receiving):
    """A webhook receiver on the running event loop, for async tests: the deliveries
    reach it while the test awaits the sandbox (AsyncSandbox).

        async with AsyncWebhookReceiver() as receiver:
            await receiver.register(sandbox)
            await sandbox.trigger("company-updated")
            await receiver.wait_for("company-updated")
    """

    def __init__(self, *, secret: str | None = None, path: str = WEBHOOK_PATH,
                 host: ReceiverHost | None = None) -> None:
        super().__init__(secret=secret, path=path, host=host)
        self._changed: asyncio.Event | None = None

    async def __aenter__(self) -> AsyncWebhookReceiver:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> AsyncWebhookReceiver:
        self._changed = asyncio.Event()
        await self._serve()
        return self

    async def close(self) -> None:
        await self._stop()

    async def register(self, sandbox: Tenant, event_types: Iterable[str] | None = None) -> None:
        """Registers this receiver as an endpoint of `sandbox`'s tenant (an AsyncSandbox or a
        Sandbox; every event type, or `event_types`) and trusts the tenant's signatures."""
        self.trust(sandbox.api_secret)
        if not hasattr(sandbox, "awaitable"):  # an AsyncSandbox
            await sandbox.use_webhook_url(self.url, event_types)
            return
        # A sync Sandbox would block this loop: its tenant, over an awaitable client.
        async with sandbox.awaitable() as tenant:
            await tenant.use_webhook_url(self.url, event_types)

    async def wait_for(self, event_type: str, timeout: float = WAIT_TIMEOUT,
                       **match: Any) -> dict[str, Any]:
        """The body of the first accepted delivery of `event_type` matching `match`,
        waiting up to `timeout` seconds (without blocking the loop) for it."""
        assert self._changed is not None, "the receiver is not started"
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            found = self._matching(event_type, match)
            if found:
                return found[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timed_out(event_type, match, timeout)
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                pass

    def _recorded(self) -> None:
        if self._changed is not None:
            self._changed.set()


# -- the failure report: deliveries that never got a 2xx ------------------------------------

REPORT_LIMIT = 50  # deliveries a report lists; the ledger has them all


def describe_undelivered(events: Iterable[Mapping[str, Any]], tenant: str = "") -> str:
    """The deliveries of `events` (GET /_sandbox/events records) that never got a 2xx, each
    with its event type, URL, state and every attempt's answer or error; "" when none.
    The pytest plugin puts this in a failed test's report."""
    found = [(event, delivery) for event in events for delivery in event.get("deliveries", ())
             if delivery.get("state") != "delivered"]
    if not found:
        return ""
    count = f"{len(found)} webhook deliver{'y' if len(found) == 1 else 'ies'}"
    lines = [f"{count}{f' of tenant {tenant}' if tenant else ''} never got a 2xx:"]
    for event, delivery in found[:REPORT_LIMIT]:
        attempts = delivery.get("attempts") or []
        lines.append(f"{event.get('eventType')} (event {event.get('id')}) to "
                     f"{delivery.get('url')}: {_delivery_state(delivery, len(attempts))}")
        lines += [f"  attempt {a.get('number')} at {a.get('time')}: {_attempt_answer(a)}"
                  for a in attempts]
    if len(found) > REPORT_LIMIT:
        lines.append(f"... and {len(found) - REPORT_LIMIT} more (GET /_sandbox/events)")
    return "\n".join(lines)


def _delivery_state(delivery: Mapping[str, Any], attempts: int) -> str:
    state = delivery.get("state")
    tried = f"{attempts} attempt{'' if attempts == 1 else 's'}"
    if state == "failed":
        return f"failed after {tried}"
    if state == "interrupted":
        return f"interrupted after {tried} (the sandbox stopped during an attempt)"
    due = delivery.get("nextAttemptAt")
    if due:
        return (f"pending after {tried}, the next attempt due at {due} on the tenant's "
                "clock (advance it to send it)")
    return f"pending after {tried}, an attempt under way"


def _attempt_answer(attempt: Mapping[str, Any]) -> str:
    status, error, fault = attempt.get("status"), attempt.get("error"), attempt.get("fault")
    if status is None:
        text = error or "no answer yet"
    elif error and error != f"non-2xx response {status}":
        text = f"HTTP {status}: {error}"  # a redirect not followed, an answer cut short
    else:
        text = f"HTTP {status}"
    return f"{text} [fault on purpose: {fault}]" if fault else text


# -- your own ASGI app on a real port -----------------------------------------------------------

NEEDS_UVICORN = ("serving an ASGI app needs uvicorn: pip install 'payroll-sandbox[asgi]' "
                 "(or uvicorn)")
WSGI_APP = ("{app!r} looks like a WSGI app (it takes environ and start_response): serve it "
            "through a2wsgi (pip install a2wsgi): `from a2wsgi import WSGIMiddleware`, then "
            "the server of WSGIMiddleware(app)")
STOP_TIMEOUT = 10.0  # wall seconds the app has to finish its requests and lifespan at stop


class AsgiServer:
    """Your ASGI app (FastAPI, Starlette, Django's `get_asgi_application()`; a WSGI app such
    as Flask through a2wsgi's `WSGIMiddleware`) served by uvicorn on a real port, on an
    event loop in a thread of its own, so a sandbox delivers webhooks to it in sync and
    async tests alike; its lifespan runs at start and stop.

        with AsgiServer(app) as server:
            sandbox.use_webhook_url(f"{server.url}/webhooks")

    `host` (a ReceiverHost) says where it listens and the host `url` names; `options` are
    more `uvicorn.Config` arguments (`root_path=...`, `lifespan="off"`).
    """

    def __init__(self, app: Any, *, host: ReceiverHost | None = None, **options: Any) -> None:
        self.app = app
        self.host = host or ReceiverHost()
        self.options = options
        self.port: int | None = None
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._loop: _LoopThread | None = None

    def __repr__(self) -> str:
        return f"<AsgiServer {self.app!r} at {self.url if self.port else 'not started'}>"

    def __enter__(self) -> AsgiServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """`http://<host>:<port>`, the app's base URL (no trailing slash)."""
        if self.port is None:
            raise RuntimeError("the app's server is not started")
        return self.host.url(self.port, "")

    def start(self) -> AsgiServer:
        """Listens, runs the app's lifespan startup and returns once it serves."""
        try:
            import uvicorn
        except ImportError:
            raise ImportError(NEEDS_UVICORN) from None
        if _is_wsgi(self.app):
            raise TypeError(WSGI_APP.format(app=self.app))
        listener = _listening_socket(self.host.listen)
        self.port = listener.getsockname()[1]
        # log_config None: uvicorn leaves the process's logging alone (its errors still
        # reach pytest's captured log); no access log line per delivery.
        config = uvicorn.Config(self.app, **{"log_config": None, "access_log": False,
                                             "timeout_graceful_shutdown": STOP_TIMEOUT / 2,
                                             **self.options})
        self._server = uvicorn.Server(config)
        self._loop = _LoopThread("payroll-sandbox-asgi")
        self._loop.start()
        try:
            self._loop.run(self._start(listener))
        except BaseException:
            self._loop.stop()
            self._loop, self.port = None, None
            listener.close()
            raise
        return self

    def close(self) -> None:
        """Stops listening, lets the requests under way finish and runs the app's lifespan
        shutdown."""
        if self._loop is None:
            return
        loop, self._loop = self._loop, None
        try:
            loop.run(self._stop(), timeout=STOP_TIMEOUT * 2)
        finally:
            loop.stop()

    async def _start(self, listener: socket.socket) -> None:
        self._task = asyncio.ensure_future(self._serve(listener))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise RuntimeError(f"uvicorn stopped before serving {self.app!r}")
            await asyncio.sleep(0.005)

    async def _serve(self, listener: socket.socket) -> None:
        try:
            await self._server.serve(sockets=[listener])
        except SystemExit:  # uvicorn's word for a startup that failed (logged above)
            raise RuntimeError(f"uvicorn could not start {self.app!r}: its lifespan startup "
                               "failed (see the log)") from None

    async def _stop(self) -> None:
        assert self._task is not None
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT)
        except TimeoutError:
            self._server.force_exit = True
            await self._task


def _listening_socket(host: str) -> socket.socket:
    """A TCP socket bound to `host` and a free port: the port is known before uvicorn runs."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:  # "::" takes IPv4 connections too
            listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        listener.bind((host, 0))
    except OSError:
        listener.close()
        raise
    return listener


def _is_wsgi(app: Any) -> bool:
    """A callable of (environ, start_response) that is not a coroutine function: WSGI.
    ASGI 3 takes (scope, receive, send), ASGI 2 (scope)."""
    import inspect

    call = app if inspect.isfunction(app) or inspect.ismethod(app) else getattr(app, "__call__",
                                                                                None)
    if call is None or inspect.iscoroutinefunction(call) or inspect.isclass(app):
        return False
    try:
        parameters = [p for p in inspect.signature(call).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(parameters) == 2


def _camel(name: str) -> str:
    """A keyword as the profile document names it: deposit_accounts -> depositAccounts."""
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)
