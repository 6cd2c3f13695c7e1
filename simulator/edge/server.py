"""The runner `serve` and the pytest plugin start the app with: aiohttp's, with two changes.

- A request aiohttp's HTTP parser refuses (a 10 KB request line, a 20 KB header, a body in a
  content-encoding it cannot read) is answered in the sandbox's error shape, with one log
  line, instead of aiohttp's plain-text page and a traceback. Those refusals happen before
  the app (and its middleware) sees the request, in aiohttp's RequestHandler.handle_error.
- Connections are bounded (issue 22, slowloris): a request's line and headers must arrive
  within `--request-timeout` seconds of the connection's start (or of their first byte on a
  kept-alive connection), an idle kept-alive connection closes after `--idle-timeout`, and
  at most `--max-connections` are open: past it the oldest idle or half-open ones close
  first, so a new client (a health check) is still answered. Bodies have the same time
  limit where they are read (render.read_within_time).

The runner makes its connections' handlers a subclass that does both.
"""

from __future__ import annotations

import logging
import resource
from typing import Any

import msgspec
import orjson
from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from ..errors import ApiError
from .logs import escape_controls
from ..settings import Settings

log = logging.getLogger("payroll_sandbox.error")


DESCRIPTORS_KEPT = 256  # descriptors left for files, webhook connections and the listener


class ConnectionLimits(msgspec.Struct, frozen=True):
    request_timeout: float   # wall seconds for a request's head (and, elsewhere, body)
    idle_timeout: float      # an idle kept-alive connection
    max_connections: int     # open at once

    @classmethod
    def from_settings(cls, settings: Any) -> ConnectionLimits:
        """The settings' limits; max_connections 0 is the descriptor limit less some."""
        cap = settings.max_connections
        if not cap:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)  # this process's limit
            cap = (10_000 if soft == resource.RLIM_INFINITY
                   else max(64, min(10_000, soft - DESCRIPTORS_KEPT)))
        return cls(request_timeout=settings.request_timeout, idle_timeout=settings.idle_timeout,
                   max_connections=cap)


class SandboxRunner(web.AppRunner):
    """web.AppRunner whose connections answer malformed requests in the error shape and
    are bounded in time and number (ConnectionLimits, from the app's settings)."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        from .keys import SANDBOX

        sandbox = app.get(SANDBOX)
        self.limits = ConnectionLimits.from_settings(
            sandbox.settings if sandbox is not None else Settings())
        kwargs.setdefault("keepalive_timeout", self.limits.idle_timeout)
        super().__init__(app, **kwargs)

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _Server
        server.limits = self.limits  # type: ignore[attr-defined]
        return server


async def start_site(app: web.Application, host: str = "127.0.0.1", port: int = 0, *,
                     runner_class: type[web.AppRunner] = SandboxRunner,
                     **options: Any) -> tuple[Any, str, int]:
    """Serves `app` (no access log; `options` are more of the runner's) on host:port (0: a
    free port) and tells a sandbox's outbound policy, which refuses webhooks to the sandbox
    itself; the runner (its cleanup() stops it; cleaned up already when listening fails)
    and the address and port. The sandbox's apps and the kit's webhook receivers start so."""
    from .keys import SANDBOX

    runner = runner_class(app, **{"access_log": None, **options})
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except BaseException:
        await runner.cleanup()
        raise
    sandbox = app.get(SANDBOX)
    if sandbox is not None:
        sandbox.dispatcher.policy.serving(runner.addresses)
    bound_host, bound_port = runner.addresses[0][:2]
    return runner, bound_host, bound_port


class _Server(web.Server):
    __slots__ = ()

    def __call__(self) -> RequestHandler:
        return _RequestHandler(self, loop=self._loop, **self._kwargs)


class _RequestHandler(RequestHandler):
    __slots__ = ("_head_timer", "_head_deadline")

    # A request's head has until _head_deadline (None: no head under way). One timer per
    # connection watches it and is moved on, not made and cancelled for every request:
    # that was a timer handle in and out of the loop's heap per request.

    def connection_made(self, transport: Any) -> None:
        self._head_timer: Any = None
        self._head_deadline: float | None = None
        super().connection_made(transport)
        self._head_started()
        self._make_room()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._head_deadline = None
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        new_head = self._head_deadline is None and self._idle()  # a request's first bytes
        count = self._request_count
        super().data_received(data)
        if self._request_count != count:
            self._head_deadline = None  # its whole head arrived
        elif new_head:
            self._head_started()

    def _idle(self) -> bool:
        """Waiting for a request (none in progress)."""
        waiter = self._waiter
        return waiter is not None and not waiter.done()

    def _unused(self) -> bool:
        """No request in progress: idle, or not a whole request head yet."""
        return self._idle() or (self._request_count == 0 and not self._messages)

    def _head_started(self) -> None:
        if self.transport is None:
            return
        self._head_deadline = self._loop.time() + self._manager.limits.request_timeout
        if self._head_timer is None:
            self._head_timer = self._loop.call_at(self._head_deadline, self._head_due)

    def _head_due(self) -> None:
        self._head_timer = None
        deadline = self._head_deadline
        if deadline is None:
            return  # no head under way: the next one arms the timer again
        if self._loop.time() < deadline:  # a later head than the one it was armed for
            self._head_timer = self._loop.call_at(deadline, self._head_due)
        elif self._idle():
            self.force_close()  # no whole request head in time: a slow or half-open client

    def _make_room(self) -> None:
        """Past max_connections, the oldest idle or half-open connections close; when every
        other one is busy with a request, this new one does."""
        manager = self._manager
        # handler -> transport, oldest first; a closed one stays until its task ends
        open_ = [h for h in manager._connections if h.transport is not None]
        excess = len(open_) - manager.limits.max_connections
        if excess <= 0:
            return
        idle = [handler for handler in open_ if handler is not self
                and isinstance(handler, _RequestHandler) and handler._unused()]
        for handler in idle[:excess]:
            handler.force_close()
        if len(idle) < excess:
            self.force_close()

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500 or request.writer.output_size > 0:
            return super().handle_error(request, status, exc, message)
        status, code, text = _refusal(status, exc, message)
        log.warning("refused a malformed request from %s: %d %s: %s", request.remote, status,
                    code, text)
        response = web.Response(status=status, body=orjson.dumps(ApiError(text, code=code).body()),
                                content_type="application/json", charset="utf-8")
        response.force_close()
        return response


TOO_LARGE = "The request line or a header is longer than {limit} bytes."
ENCODING = "The body's content-encoding cannot be read; send it plain, gzip or deflate."


def _refusal(status: int, exc: BaseException | None,
             message: str | None) -> tuple[int, str, str]:
    """The status, error code and message for what aiohttp's parser refused."""
    if isinstance(exc, LineTooLong):
        return 431, "request-too-large", TOO_LARGE.format(limit=LIMIT)
    if isinstance(exc, ContentEncodingError):
        return 415, "unsupported-content-encoding", ENCODING
    text = getattr(exc, "message", None) or message or "The request could not be read."
    return status, "malformed-request", escape_controls(" ".join(str(text).split()))[:300]


LIMIT = 8190  # aiohttp's max_line_size and max_field_size
