"""The runner `serve` and the pytest plugin start the app with: aiohttp's, except that a
request aiohttp's HTTP parser refuses (a 10 KB request line, a 20 KB header, a body in a
content-encoding it cannot read) is answered in the sandbox's error shape, with one log
line, instead of aiohttp's plain-text page and a traceback.

Those refusals happen before the app (and its middleware) sees the request, in aiohttp's
RequestHandler.handle_error; the runner makes its connections' handlers a subclass that
answers them itself. Nothing else about serving changes.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from .middleware import escape_controls

log = logging.getLogger("payroll_sandbox.error")


class SandboxRunner(web.AppRunner):
    """web.AppRunner whose connections answer malformed requests in the error shape."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _Server
        return server


class _Server(web.Server):
    __slots__ = ()

    def __call__(self) -> RequestHandler:
        handler = super().__call__()
        handler.__class__ = _RequestHandler
        return handler


class _RequestHandler(RequestHandler):
    __slots__ = ()

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500 or request.writer.output_size > 0:
            return super().handle_error(request, status, exc, message)
        status, code, text = _refusal(status, exc, message)
        log.warning("refused a malformed request from %s: %d %s: %s", request.remote, status,
                    code, text)
        body = {"error": {"code": code, "message": text, "details": []}}
        response = web.Response(status=status, body=orjson.dumps(body),
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
