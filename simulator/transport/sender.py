"""Sending one webhook: the one place a webhook request leaves the sandbox's code.

The dispatcher's attempts, `check-handler`'s deliveries and `listen --forward-to` all POST a
prepared message (headers and body, as webhooks/cloudevents.py builds them) through `post`:
redirects never followed, the whole exchange (the answer's body included) bounded by one
timeout, at most `read_limit` bytes of the answer read (a receiver streaming without end
costs nothing), and every way it can fail named here, once (spec: Events, Delivery; Limits).
What an answer means (only a 2xx counts, a retry) is the caller's business.

Nothing is imported from aiohttp until a message is sent: `failure` is also how the
client of a running sandbox (simulator/client.py) says why no answer came.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Mapping
from typing import Any

import msgspec

ANSWER_READ = 4096   # bytes of an answer read; past them the connection closes

# Why no answer came: the kinds of Failure.
TIMEOUT = "timeout"
REFUSED = "refused"          # nothing listens there
DNS = "dns"                  # the name does not resolve
CONNECT = "connect"          # another failure to connect (unreachable, TLS)
BLOCKED = "blocked"          # the outbound policy refused every address (webhooks/policy.py)
RESET = "reset"              # the connection closed before the whole answer came
OTHER = "other"


class Failure(msgspec.Struct, frozen=True):
    """Why no answer came: its kind, a few words (`connection refused`, `DNS lookup failed
    for hooks.example`) and what the OS or aiohttp said, when it said more."""

    kind: str
    reason: str
    detail: str | None = None

    def __str__(self) -> str:
        """The reason with its detail: what the ledger records of an attempt."""
        return self.reason if self.detail is None else f"{self.reason}: {self.detail}"


class Outcome(msgspec.Struct, frozen=True):
    """What came of one POST: the answer's status, a redirect's target and the first bytes
    of its body; or the failure. `latency_ms` from the request to the end of the read."""

    latency_ms: float
    status: int | None = None
    location: str | None = None
    excerpt: bytes = b""
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return is_ok(self.status)

    @property
    def redirect(self) -> bool:
        return is_redirect(self.status)


def is_ok(status: int | None) -> bool:
    """Only a 2xx acknowledges a webhook (spec: Events, Delivery)."""
    return status is not None and 200 <= status < 300


def is_redirect(status: int | None) -> bool:
    """A 3xx: never followed, so never an acknowledgement."""
    return status is not None and 300 <= status < 400


async def post(session: Any, url: str, headers: Mapping[str, str], body: bytes, *,
               timeout: float, read_limit: int = ANSWER_READ) -> Outcome:
    """POST `body` with `headers` to `url` over `session`, redirects not followed, within
    `timeout` seconds for the whole exchange. Cancelling the caller cancels the request."""
    import aiohttp

    started = time.perf_counter()
    status = location = None
    excerpt, problem = b"", None
    try:
        # asyncio.timeout bounds the whole exchange: a ClientTimeout as well was a second
        # timer on every attempt.
        async with asyncio.timeout(timeout), session.post(
                url, data=body, headers=headers, allow_redirects=False) as response:
            excerpt = await _read_some(response, read_limit)
            status, location = response.status, response.headers.get("location")
    except (asyncio.TimeoutError, aiohttp.ClientError, OSError, ValueError) as error:
        problem = failure(error, timeout)
    return Outcome(latency_ms=round((time.perf_counter() - started) * 1000, 3), status=status,
                   location=location, excerpt=excerpt, failure=problem)


def failure(error: BaseException, timeout: float) -> Failure:
    """What an exception of an aiohttp request (or its `asyncio.timeout`) says about why no
    answer came."""
    import aiohttp

    from .policy import OutboundRefused

    if isinstance(error, asyncio.TimeoutError):
        return Failure(TIMEOUT, f"timeout after {timeout:g}s")
    if isinstance(error, aiohttp.ClientConnectorError):
        os_error = error.os_error
        if isinstance(os_error, OutboundRefused):
            return Failure(BLOCKED, str(os_error))  # every address the name has is refused
        if dns_failure(error):
            return Failure(DNS, f"DNS lookup failed for {error.host}", str(os_error))
        if isinstance(os_error, ConnectionRefusedError):
            return Failure(REFUSED, "connection refused", str(os_error))
        return Failure(CONNECT, f"cannot connect to {error.host}:{error.port}", str(os_error))
    if isinstance(error, (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError,
                          aiohttp.ClientPayloadError)):
        return Failure(RESET, "connection reset", str(error))
    return Failure(OTHER, f"{type(error).__name__}: {error}")


def dns_failure(error: BaseException) -> bool:
    """Whether a failure to connect was a failed DNS lookup: aiohttp >= 3.10.10 raises
    ClientConnectorDNSError; before it, a ClientConnectorError over socket.gaierror."""
    import aiohttp

    dns_error = getattr(aiohttp, "ClientConnectorDNSError", None)
    return ((dns_error is not None and isinstance(error, dns_error))
            or isinstance(getattr(error, "os_error", None), socket.gaierror))


def new_session(*, limit: int = 100, resolver: Any = None) -> Any:
    """A session for sending webhooks: no cookie jar (a sender carries no cookies from one
    delivery to the next), no timeout of its own (each POST has one), at most `limit`
    connections, names resolved by `resolver` (the dispatcher's checks the outbound
    policy). Made in the running loop."""
    import aiohttp

    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=None), cookie_jar=aiohttp.DummyCookieJar(),
        connector=aiohttp.TCPConnector(limit=limit, resolver=resolver))


async def _read_some(response: Any, limit: int) -> bytes:
    """At most `limit` bytes of an answer; a longer answer closes the connection instead
    of being read to its end."""
    chunks, left = [], limit
    while left > 0:
        chunk = await response.content.read(left)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        left -= len(chunk)
    if not response.content.at_eof():
        response.close()
    return b"".join(chunks)
