"""Webhook receivers for tests: real HTTP servers (on 127.0.0.1, or on the address a
sandbox in a container reaches) that check each delivery's signature, answer as told
(fail_next, hang) and let a test wait for and assert on what arrived."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..transport import SIGNATURE_HEADER, sign
from .loops import LoopThread, refuse_on_a_running_loop

if TYPE_CHECKING:
    from aiohttp import web


WAIT_TIMEOUT = 10.0      # wall seconds `wait_for` waits by default
WEBHOOK_PATH = "/webhooks"


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


def matches(body: Mapping[str, Any], match: Mapping[str, Any]) -> bool:
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


def where_it_was(match: Mapping[str, Any]) -> str:
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
            raise AssertionError(f"expected exactly one {event_type}{where_it_was(match)} "
                                 f"delivery, got {len(found)}; received {self._summary()}")
        return found[0]

    def assert_order(self, event_types: Iterable[str], **match: Any) -> list[dict[str, Any]]:
        """The accepted deliveries matching `match` whose type is listed came in exactly this
        order (each listed once per expected delivery); their bodies."""
        self.check()
        expected = list(event_types)
        wanted = set(expected)
        found = [b for b in self.events if b.get("eventType") in wanted and matches(b, match)]
        got = [b.get("eventType") for b in found]
        if got != expected:
            raise AssertionError(f"expected {expected}{where_it_was(match)} in this order, got {got}; "
                                 f"received {self._summary()}")
        return found

    # -- for the subclasses -----------------------------------------------------------------

    def _matching(self, event_type: str, match: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [b for b in self.events if b.get("eventType") == event_type and matches(b, match)]

    def _summary(self) -> str:
        deliveries = self.deliveries
        if not deliveries:
            return "nothing"
        shown = deliveries[-50:]
        more = (f"(the last {len(shown)} of {len(deliveries)}) "
                if len(shown) < len(deliveries) else "")
        return f"{len(deliveries)}: {more}" + "; ".join(d.describe() for d in shown)

    def _look(self, event_type: str, match: Mapping[str, Any], deadline: float,
              timeout: float) -> tuple[dict[str, Any] | None, float]:
        """The first accepted delivery of `event_type` matching `match` (None: none yet) and
        the seconds left; AssertionError on a refused delivery, or none by `deadline`."""
        self.check()
        found = self._matching(event_type, match)
        if found:
            return found[0], 0.0
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no {event_type}{where_it_was(match)} delivery was accepted "
                                 f"within {timeout:g} s; received {self._summary()}")
        return None, remaining

    def _recorded(self) -> None:
        """A delivery was recorded (on the serving loop): wake whoever waits."""

    async def _serve(self) -> None:
        from aiohttp import web

        from ..edge.server import start_site

        app = web.Application()
        app.router.add_post(self.path, self._handle)
        self._release = asyncio.Event()
        # handler_cancellation: when the sandbox gives up on a hung attempt, its handler goes.
        self._runner, _, self.port = await start_site(
            app, self.host.listen, runner_class=web.AppRunner, handler_cancellation=True,
            shutdown_timeout=1.0)

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
            if not any(hmac.compare_digest(signature, sign(raw, secret))
                       for secret in self._secrets):
                return event, body, f"{SIGNATURE_HEADER} does not match the body", 401
        return event, body, None, None


class WebhookReceiver(_Receiving):
    """A webhook receiver for sync tests, served by an event loop in a thread (its own,
    or `loop`: the pytest plugin's server thread).

        with WebhookReceiver() as receiver:
            receiver.register(sandbox)
            sandbox.trigger("company-updated")
            receiver.assert_exactly_once("company-updated")
    """

    def __init__(self, *, secret: str | None = None, path: str = WEBHOOK_PATH,
                 loop: LoopThread | None = None, host: ReceiverHost | None = None) -> None:
        super().__init__(secret=secret, path=path, host=host)
        self._own_loop = loop is None
        self._loop = loop or LoopThread("payroll-sandbox-receiver")
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
        refuse_on_a_running_loop("webhook_receiver.wait_for",
                                  "async_webhook_receiver (AsyncWebhookReceiver)",
                                  f"async_webhook_receiver.wait_for({event_type!r}, ...)")
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                seen = len(self._deliveries)
            found, remaining = self._look(event_type, match, deadline, timeout)
            if found is not None:
                return found
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
            found, remaining = self._look(event_type, match, deadline, timeout)
            if found is not None:
                return found
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    def _recorded(self) -> None:
        if self._changed is not None:
            self._changed.set()


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
