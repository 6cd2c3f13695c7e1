"""Serving the customer's own ASGI app beside the sandbox (the plugin's
payroll_sandbox_asgi_server): uvicorn on a thread of its own, on a port of this machine."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from .receivers import ReceiverHost
from .loops import LoopThread


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
        self._loop: LoopThread | None = None

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
        self._loop = LoopThread("payroll-sandbox-asgi")
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
