"""What the edge writes and reads of bodies: every JSON answer, the one error body, the 405
refusal, a PDF shown inline, the request's origin (the base of URLs in answers), and a
request's body read within the server's --request-timeout.

The edge middleware and the operations' pipeline (edge/pipeline.py) render through
these; so do the few handlers that read a raw body themselves.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from collections.abc import Awaitable
from typing import Any, TypeVar

import msgspec
from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from yarl import URL

from ..clock import moment_text
from ..errors import ApiError, MalformedBody, MethodNotAllowed, RequestTimeout, field_detail
from .keys import DIALECTS, SANDBOX, Exchange, exchange_of
from .logs import escape_controls
from ..settings import Settings

T = TypeVar("T")
UNDECODABLE = "The body cannot be decoded as its content-encoding ({encoding}) says."
BODY_TOO_SLOW = ("The request's body did not arrive within {seconds:g} seconds "
                 "(--request-timeout).")
WRONG_METHOD = "{method} is not allowed on {path}; allowed: {allowed}."
JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}
# The headers an error answers with, from its attributes: when to try again, the methods taken.
ERROR_HEADERS = (("retry-after", "retry_after"), ("allow", "allow"))
_builtins = partial(msgspec.to_builtins, enc_hook=moment_text)  # a struct, a clock.Moment
_ENCODER = msgspec.json.Encoder(enc_hook=moment_text)


def json_response(data: Any, *, status: int = 200,
                  headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer (application/json; charset=utf-8), as every operation and error gives.

    msgspec writes it in C, structs and all (no dict made of a view first): compact UTF-8,
    several times faster than json.dumps, which cost a search answer about as much as its
    validation. A value it refuses goes through json.dumps, which raises on what is not
    JSON at all."""
    try:
        body = _ENCODER.encode(data)
    except (TypeError, msgspec.EncodeError):
        body = json.dumps(data, default=_builtins).encode()
    # The content type as a header: web.Response's content_type and charset arguments
    # format it anew for every answer.
    return web.Response(body=body, status=status, headers=JSON_HEADERS if headers is None
                        else {**headers, **JSON_HEADERS})


def render_error(request: web.Request, error: ApiError, status: int | None = None) -> web.Response:
    """`error` as the one error body (DESIGN.md, Errors), or as the error body of the API
    its operation stands in for; its code is kept on the request for the journal."""
    exchange_of(request).error_code = error.code
    headers = {name: str(value) for name, attribute in ERROR_HEADERS
               if (value := getattr(error, attribute, None)) is not None}
    # An operation that stands in for another API answers in that API's error body, and so
    # does any other path under that API's prefix (no such operation, another method).
    dialect = getattr(request.match_info.handler, "dialect", None) or _dialect_of_path(request)
    status, body = (dialect.render_error(error, status or error.status) if dialect is not None
                    else (status or error.status, error.body()))
    return json_response(body, status=status, headers=headers or None)


def _dialect_of_path(request: web.Request) -> Any:
    """The dialect whose prefix the request's path is under (operations.Dialect.prefix)."""
    path = request.path
    return next((dialect for prefix, dialect in request.app.get(DIALECTS, {}).items()
                 if path == prefix or path.startswith(prefix + "/")), None)


def wrong_method(request: web.Request, allowed: str) -> MethodNotAllowed:
    """405 for `request`, whose path takes only the `allowed` methods (its Allow header,
    RFC 9110)."""
    refusal = MethodNotAllowed(WRONG_METHOD.format(method=request.method, path=request.path,
                                                   allowed=allowed))
    refusal.allow = allowed
    return refusal


async def read_body(request: web.Request, exchange: Exchange | None = None) -> bytes:
    """A request's body, within --request-timeout (read_within_time) and the server's
    body bound (413). One that came whole with its headers is taken as it is, without
    aiohttp's read loop (POST /task/create: 9.5k of its 1,014.6k instructions), and kept
    on the request's exchange for a second reader (an aggregator operation's credentials
    may be in its body)."""
    exchange = exchange or exchange_of(request)
    raw = exchange.raw
    if raw is None:
        content = request.content
        if content.is_eof() and content.exception() is None:
            raw = content.read_nowait()
            if request.client_max_size and len(raw) > request.client_max_size:  # 0: none
                raise web.HTTPRequestEntityTooLarge(request.client_max_size, len(raw))
        else:  # still coming, or broken (a gzip body that does not decode): read says it
            raw = await read_within_time(request, request.read())
        exchange.raw = raw
    return raw


async def read_within_time(request: web.Request, reading: Awaitable[T]) -> T:
    """`reading` (a request's body), given the server's --request-timeout: a body that
    trickles in cannot hold a handler (408)."""
    sandbox = request.app.get(SANDBOX)
    seconds = (sandbox.settings if sandbox is not None else Settings).request_timeout
    try:
        if request.content.is_eof():  # all of it came with the headers: nothing can trickle
            return await reading
        async with asyncio.timeout(seconds):
            return await reading
    except TimeoutError:  # answered; aiohttp closes the connection when the body stays unread
        raise RequestTimeout(BODY_TOO_SLOW.format(seconds=seconds)) from None
    except RequestPayloadError:  # aiohttp's parser could not decode it (a broken gzip body)
        encoding = request.headers.get("content-encoding", "none")
        raise MalformedBody(UNDECODABLE.format(encoding=escape_controls(encoding)[:40]),
                            details=[field_detail("$", "cannot be decoded")]) from None


def pdf_response(pdf: bytes, name: str, content_type: str = "application/pdf") -> web.Response:
    """A PDF answer the browser shows (inline), saved as `name`."""
    return web.Response(body=pdf, content_type=content_type,
                        headers={"content-disposition": f'inline; filename="{name}"'})


def origin(request: web.Request) -> str:
    """`scheme://host[:port]` of the request (the base of the URLs an answer holds). Not
    request.url: aiohttp < 3.10.7 builds it with host="name:port", which today's yarl
    refuses (ValueError); this is how later aiohttp builds it."""
    return str(URL.build(scheme=request.scheme, authority=request.host).origin())
