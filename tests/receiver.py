"""A real webhook receiver for tests: a separate aiohttp server on 127.0.0.1, port 0.

Each path answers from a programmable list of replies (a status, a redirect, a hang, a
connection reset); the last reply of a list repeats, and a path never programmed
answers 200. Every request is recorded (path, headers, raw body, arrival order) before
it is answered, so a test can read what the sandbox sent, however the answer went.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import socket
import struct
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

# Replies other than a plain status code.
HANG = "hang"    # answer nothing until the receiver stops (longer than any attempt timeout)
RESET = "reset"  # read the request, then reset the TCP connection (RST, no response)


@dataclass(frozen=True)
class Redirect:
    status: int
    location: str


@dataclass(frozen=True)
class Received:
    """One request as it reached the receiver."""

    path: str
    headers: dict[str, str]   # names lower-cased
    body: bytes
    arrival: int              # 1, 2, ... across every path, in order of arrival
    wall: float               # time.monotonic() at arrival

    def cloud_event(self) -> Any:
        """The request parsed by the official CloudEvents SDK (binary content mode)."""
        from cloudevents.core.bindings.http import HTTPMessage, from_binary
        from cloudevents.core.formats.json import JSONFormat
        from cloudevents.core.v1.event import CloudEvent

        return from_binary(HTTPMessage(headers=dict(self.headers), body=self.body),
                           JSONFormat(), CloudEvent)

    @property
    def ce_id(self) -> str:
        return self.headers["ce-id"]

    def signature_matches(self, secret: str) -> bool:
        """`x-hmac-signature-sha-256` is the HMAC-SHA256 hex of the raw body keyed by `secret`."""
        expected = hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(self.headers.get("x-hmac-signature-sha-256", ""), expected)


class Receiver:
    def __init__(self) -> None:
        self.requests: list[Received] = []
        self._replies: dict[str, list[Any]] = {}
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        # A hanging handler is released on stop; no need to wait long for it.
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- programming and reading ---------------------------------------------------------------

    def url(self, path: str = "/hooks") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def program(self, path: str, *replies: Any) -> None:
        """Replies for the next requests to `path`, in order; the last one repeats."""
        self._replies[path] = list(replies)

    def received(self, path: str | None = None) -> list[Received]:
        return [r for r in self.requests if path is None or r.path == path]

    def release(self) -> None:
        """Every HANG reply, waiting or to come, answers 200 now (as on stop)."""
        self._release.set()

    def clear(self) -> None:
        self.requests.clear()
        self._replies.clear()

    # -- serving ------------------------------------------------------------------------------

    def _next_reply(self, path: str) -> Any:
        replies = self._replies.get(path)
        if not replies:
            return 200
        return replies.pop(0) if len(replies) > 1 else replies[0]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(Received(path=request.path,
                                      headers={k.lower(): v for k, v in request.headers.items()},
                                      body=body, arrival=len(self.requests) + 1,
                                      wall=time.monotonic()))
        reply = self._next_reply(request.path)
        if reply == HANG:
            await self._release.wait()
            return web.Response(status=200)
        if reply == RESET:
            transport = request.transport
            sock = transport.get_extra_info("socket") if transport is not None else None
            if sock is not None:
                # Linger 0: close() sends a TCP RST instead of a FIN.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            if transport is not None:
                transport.abort()
            raise asyncio.CancelledError  # nothing left to answer on
        if isinstance(reply, Redirect):
            return web.Response(status=reply.status, headers={"Location": reply.location})
        return web.Response(status=reply)


def parse_time(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, noted, closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def assert_events_valid(client, receiver: Receiver, *, headers: dict | None = None,
                              path: str = "/hooks") -> list[dict]:
    """Every event of the tenant's ledger matches its published schema and reached the
    receiver at `path` with the same id and type; the ledger is returned."""
    from conftest import ACME
    from jsonschema import Draft202012Validator

    headers = headers or ACME
    response = await client.get("/_sandbox/events?limit=10000", headers=headers)
    assert response.status == 200, await response.text()
    records = (await response.json())["data"]
    validators: dict[str, Draft202012Validator] = {}
    for record in records:
        event_type = record["eventType"]
        if event_type not in validators:
            response = await client.get(f"/_sandbox/schemas/events/{event_type}")
            assert response.status == 200, (event_type, await response.text())
            schema = await response.json()
            Draft202012Validator.check_schema(schema)
            validators[event_type] = Draft202012Validator(
                schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                    for e in validators[event_type].iter_errors(record["body"])]
        assert problems == [], (event_type, record["body"])
    received = {r.ce_id: r.headers["ce-type"] for r in receiver.received(path)}
    assert [(r["eventType"], r["id"]) for r in records if r["id"] not in received] == []
    assert [(r["eventType"], received[r["id"]]) for r in records
            if received[r["id"]] != f"com.example.{r['eventType']}"] == []
    return records
