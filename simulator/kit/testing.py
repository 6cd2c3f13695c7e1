"""The awaitable client of one tenant (`AsyncSandbox`), the loopback check its
`use_webhook_url` makes, and what `assert_called` says of a request not made
(`RequestNotMade`). Customers import them from `payroll_sandbox.testing`."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import sys
import time
import urllib.parse
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ParamSpec

from ..client import SandboxClient, SandboxError, with_query
from .receivers import AsyncWebhookReceiver, WAIT_TIMEOUT, matches, where_it_was

if TYPE_CHECKING:
    import aiohttp

__all__ = ["AsyncSandbox", "LoopbackCheck", "LoopbackURLError", "RequestNotMade",
           "describe_near_misses", "on_loopback"]

CALLBACK_POLL = 0.05     # wall seconds between two reads of the callbacks ledger
CALLBACKS = "/_sandbox/sdk/callbacks"
ENDPOINTS = "/_sandbox/webhooks/endpoints"
API_FAULTS = "/_sandbox/faults/api"
VERIFY = "/_sandbox/requests/verify"
ASYNC_TWIN = "async_payroll_sandbox (AsyncSandbox)"

P = ParamSpec("P")


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


def warn_ignored(method: str, path: str, warning: str) -> None:
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
                warn_ignored(method, path, answer.warning)
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
        await self.request("PUT", _user_path(identifier, "scenario"), {"scenario": scenario})

    async def use_profile(self, identifier: str, name: str | None = None,
                          **data: Any) -> dict[str, Any]:
        """The user's next linked accounts (and the next refresh of their connected ones)
        take the data profile `name` (GET /_sandbox/profiles) with `data` over it: record
        kinds as keywords (`income={"income": 85000, "incomeType": "yearly"}`,
        `deposit_accounts=[...]` or `depositAccounts`). Neither: the binding goes. Returns
        the binding (PUT /_sandbox/users/{identifier}/profile)."""
        path = _user_path(identifier, "profile")
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
        path = _user_path(identifier, "autopilot")
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
        expected = {"method": method, "path": path, "body": body, "times": times,
                    "query": None if query is None else {k: str(v) for k, v in query.items()}}
        try:
            return (await self.post(VERIFY, {k: v for k, v in expected.items()
                                             if v is not None}))["matched"]
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


# -- the hosted flow's callbacks -------------------------------------------------------------

def _is_callback(entry: Mapping[str, Any], event: str | None, name: str | None,
                 match: Mapping[str, Any]) -> bool:
    payload = entry["payload"]
    return ((event is None or entry["event"] == event)
            and (name is None or payload.get("name") == name) and matches(payload, match))


def _callback_timeout(identifier: str, event: str | None, name: str | None,
                      match: Mapping[str, Any], timeout: float,
                      seen: list[dict[str, Any]]) -> str:
    wanted = " ".join(part for part in (event or "callback", name and repr(name)) if part)
    told = "; ".join(f"{e['event']} {e['payload'].get('name') or e['payload'].get('reason') or ''}"
                     .strip() for e in seen[-30:]) or "nothing"
    return (f"the hosted flow told the host page no {wanted}{where_it_was(match)} for "
            f"{identifier!r} within {timeout:g} s; it told: {told}")


def _user_path(identifier: str, part: str) -> str:
    return f"/_sandbox/users/{urllib.parse.quote(identifier, safe='')}/{part}"


def _camel(name: str) -> str:
    """A keyword as the profile document names it: deposit_accounts -> depositAccounts."""
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)
