"""The edge: CORS, the one error renderer, the journal and access log, in one middleware.

Authentication, parsing and validation are the operations' pipeline (routes/pipeline.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import orjson
from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from .clock import isoformat
from .errors import (ApiError, HostNotAllowed, InternalError, MalformedBody, MethodNotAllowed,
                     PayloadTooLarge, RequestTimeout, RouteNotFound, field_detail)
from .keys import BODY, ERROR_CODE, FAULT, FIXED_PATHS, SANDBOX, TENANT, WARNINGS
from .redact import loggable_path
from .settings import Settings
from .security import NOSNIFF, page_headers

access_log = logging.getLogger("payroll_sandbox.access")
error_log = logging.getLogger("payroll_sandbox.error")

MAX_BODY_BYTES = 1024 * 1024  # DESIGN.md, Errors: 413 over 1 MiB
T = TypeVar("T")
UNDECODABLE = "The body cannot be decoded as its content-encoding ({encoding}) says."
BODY_TOO_SLOW = ("The request's body did not arrive within {seconds:g} seconds "
                 "(--request-timeout).")
BODY_TOO_LARGE = "The request body is larger than {limit} bytes."
NO_ROUTE = "No route matches {method} {path}."
WRONG_METHOD = "{method} is not allowed on {path}; allowed: {allowed}."
INTERNAL = "The sandbox failed to handle this request; see its log."
HOST_REFUSED = ("This server does not answer the host name {host!r}: start it with "
                "--allowed-host NAME (or PAYROLL_SANDBOX_ALLOWED_HOSTS) to allow it.")
FLOW_PAGE = "/initialize/"  # the hosted SDK flow: framed by the customer's page


CORS_HEADERS = {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET, POST, PUT, PATCH, DELETE, OPTIONS",
    "access-control-allow-headers": "content-type, x-api-key, x-api-secret, x-public-token, "
                                    "user-identifier",
    "access-control-max-age": "600",
}


WARNING_HEADER = "x-sandbox-warning"
WARNING_MAX = 1000  # characters of the header; the journal keeps every warning


def warning_text(warnings: list[str]) -> str:
    """The x-sandbox-warning header: what the API ignored, in one line of visible ASCII."""
    text = "; ".join(warnings).encode("ascii", "backslashreplace").decode()
    text = "".join(c if " " <= c <= "~" else "?" for c in text)
    return text if len(text) <= WARNING_MAX else text[:WARNING_MAX - 3] + "..."


@web.middleware
async def edge_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """The edge of every request, in one layer (each layer costs every request a call):

    - the Host check (SECURITY.md): a name the server was not told about is refused, so
      a web page cannot reach it by rebinding its own name to 127.0.0.1;
    - CORS, only for the operations a browser app calls with a public token (search,
      company details, tasks): their preflights are answered and their answers readable
      from any origin; the control plane and API-key operations allow no other origin;
    - the one place an error becomes the error body (DESIGN.md, Errors), for the
      operations' errors and aiohttp's own (no route, wrong method, body too large);
    - the headers every answer carries (nosniff) and those of pages (CSP, Referrer-Policy);
    - the tenant's journal and one access log line for every request.
    """
    started = time.perf_counter()
    sandbox = request.app[SANDBOX]
    try:
        if sandbox.host_policy is not None and not sandbox.host_policy.allows(
                request.headers.get("host")):
            raise HostNotAllowed(HOST_REFUSED.format(host=request.headers.get("host", "")),
                                 details=[field_detail("host", "not an allowed host name",
                                                       location="header")])
        if request.method == "OPTIONS" and "access-control-request-method" in request.headers:
            response = await _preflight(request)
        else:
            response = await handler(request)
    except ApiError as error:
        response = render_error(request, error)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        response = render_error(request, *_http_error(request, error))
    except Exception:
        error_log.exception("unhandled error on %s %s", request.method,
                            loggable_path(request.path))
        response = render_error(request, InternalError(INTERNAL))
    duration = round((time.perf_counter() - started) * 1000, 3)
    tenant = request.get(TENANT)
    tenant_name = None
    if tenant is not None:
        tenant_name = tenant.name
        tenant.journal.add(
            time=isoformat(tenant.clock.timestamp()), method=request.method,
            path=request.path, query=dict(request.query), status=response.status,
            duration_ms=duration, error_code=request.get(ERROR_CODE), body=request.get(BODY),
            warnings=request.get(WARNINGS) or [], fault=request.get(FAULT))
    if access_log.isEnabledFor(logging.INFO):
        _log_access(request.method, request.path, response.status, duration, tenant_name)
    headers = response.headers
    headers[NOSNIFF[0]] = NOSNIFF[1]
    if request.get(WARNINGS):
        headers[WARNING_HEADER] = warning_text(request[WARNINGS])
    if getattr(request.match_info.handler, "cors", False):
        headers.setdefault("access-control-allow-origin", "*")
        headers.setdefault("access-control-expose-headers", WARNING_HEADER)
    elif headers.get("content-type", "").startswith("text/html"):
        ancestors = (sandbox.settings.frame_ancestors if request.path.startswith(FLOW_PAGE)
                     else "'none'")
        headers.update(page_headers(ancestors))
    return response


async def _preflight(request: web.Request) -> web.Response:
    """A CORS preflight: allowed (204 with the CORS headers) only for an operation marked
    `cors`; otherwise 204 without them, which the browser takes as a refusal."""
    method = request.headers["access-control-request-method"].upper()
    match = await request.app.router.resolve(request.clone(method=method))
    if getattr(match.handler, "cors", False):
        return web.Response(status=204, headers=CORS_HEADERS)
    return web.Response(status=204)


def _http_error(request: web.Request, error: web.HTTPException) -> tuple[ApiError, int | None]:
    """aiohttp's own refusals as the sandbox's errors (and the status to answer)."""
    if isinstance(error, web.HTTPRequestEntityTooLarge):
        return PayloadTooLarge(BODY_TOO_LARGE.format(limit=MAX_BODY_BYTES)), None
    if isinstance(error, web.HTTPMethodNotAllowed):
        # A fixed path (/task/create) takes its own methods only, not those of a parameter
        # route that also matches it (GET /task/{taskId}).
        return wrong_method(request, request.app.get(FIXED_PATHS, {}).get(request.path)
                            or ", ".join(sorted(error.allowed_methods))), None
    if isinstance(error, web.HTTPNotFound):
        return RouteNotFound(NO_ROUTE.format(method=request.method, path=request.path)), None
    return ApiError(error.reason, code=_kebab(error.reason)), error.status


def wrong_method(request: web.Request, allowed: str) -> MethodNotAllowed:
    """405 for `request`, whose path takes only the `allowed` methods (its Allow header,
    RFC 9110)."""
    refusal = MethodNotAllowed(WRONG_METHOD.format(method=request.method, path=request.path,
                                                   allowed=allowed))
    refusal.allow = allowed
    return refusal


def render_error(request: web.Request, error: ApiError, status: int | None = None) -> web.Response:
    request[ERROR_CODE] = error.code
    retry_after = getattr(error, "retry_after", None)
    allow = getattr(error, "allow", None)
    headers = {}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    if allow is not None:
        headers["allow"] = allow
    # An operation that stands in for another API answers in that API's error body.
    dialect = getattr(request.match_info.handler, "dialect", None)
    if dialect is not None:
        status, body = dialect.render_error(error, status or error.status)
        return json_response(body, status=status, headers=headers or None)
    return json_response(error.body(), status=status or error.status, headers=headers or None)


async def read_within_time(request: web.Request, reading: Awaitable[T]) -> T:
    """`reading` (a request's body), given the server's --request-timeout: a body that
    trickles in cannot hold a handler (408)."""
    sandbox = request.app.get(SANDBOX)
    seconds = (sandbox.settings if sandbox is not None else Settings).request_timeout
    try:
        async with asyncio.timeout(seconds):
            return await reading
    except TimeoutError:  # answered; aiohttp closes the connection when the body stays unread
        raise RequestTimeout(BODY_TOO_SLOW.format(seconds=seconds)) from None
    except RequestPayloadError:  # aiohttp's parser could not decode it (a broken gzip body)
        encoding = request.headers.get("content-encoding", "none")
        raise MalformedBody(UNDECODABLE.format(encoding=escape_controls(encoding)[:40]),
                            details=[field_detail("$", "cannot be decoded")]) from None


def json_response(data: Any, *, status: int = 200,
                  headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer (application/json; charset=utf-8), as every operation and error gives.

    orjson writes it: compact UTF-8, several times faster than json.dumps, which cost a
    search answer about as much as its validation. A value orjson refuses (an integer
    past 64 bits) goes through json.dumps, which raises on what is not JSON at all."""
    try:
        body = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        body = json.dumps(data).encode()
    return web.Response(body=body, status=status, headers=headers,
                        content_type="application/json", charset="utf-8")


def _kebab(text: str) -> str:
    return "-".join(text.lower().split())


# ---------------------------------------------------------------- the access log

ACCESS_MESSAGE = "%s %s %s %.1fms tenant=%s"


def _log_access(method: str, path: str, status: int, ms: float, tenant: str | None) -> None:
    path = loggable_path(path)
    args = (method, path, status, ms, tenant or "-")
    fields = {"method": method, "path": path, "status": status, "ms": ms, "tenant": tenant}
    if _batched is not None:
        _batched.add(args, fields)
    else:
        access_log.info(ACCESS_MESSAGE, *args, extra={"fields": fields})


class BatchedAccessLog:
    """The access log of `payroll-sandbox serve`: the same lines at a fraction of the cost.

    Logging a line the usual way (a LogRecord with its caller, thread and process looked
    up, filters, the handler's lock, the time formatted, a write and a flush) cost about
    as much as answering GET /health. Here the handler's formatter (TextLogFormatter or
    JsonLogFormatter) writes the line straight from the fields, and the lines of one event
    loop turn go out in one write.
    """

    def __init__(self, handler: logging.StreamHandler) -> None:
        self._handler = handler
        self._line = handler.formatter.access_line  # type: ignore[union-attr]
        self._lines: list[str] = []

    def add(self, args: tuple, fields: dict[str, Any]) -> None:
        self._lines.append(self._line(time.time(), args, fields))
        if len(self._lines) == 1:
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        if not self._lines:
            return
        terminator = self._handler.terminator
        text = terminator.join(self._lines) + terminator
        self._lines.clear()
        try:
            self._handler.stream.write(text)
            self._handler.stream.flush()
        except (OSError, ValueError):  # the stream is gone (closed, broken pipe)
            pass


_batched: BatchedAccessLog | None = None


def batch_access_log(handler: logging.StreamHandler | None) -> BatchedAccessLog | None:
    """Access lines go to `handler` (formatted by a TextLogFormatter or JsonLogFormatter) in
    batches; None: one logging call per line again, for whatever handlers the host
    application configured. For `serve`, which owns the process's log."""
    global _batched
    if _batched is not None:
        _batched.flush()
    _batched = BatchedAccessLog(handler) if handler is not None else None
    return _batched


class _SecondsFormatter(logging.Formatter):
    """A formatter that formats the date and time of a second once, not once per line."""

    def __init__(self, fmt: str | None = None, datefmt: str | None = None) -> None:
        super().__init__(fmt, datefmt)
        self._second: tuple[int, str | None] | None = None
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return self._time(record.created, datefmt)

    def _time(self, created: float, datefmt: str | None) -> str:
        """logging.Formatter.formatTime, from the time alone."""
        second = int(created)
        if self._second != (second, datefmt):
            self._second = (second, datefmt)
            self._stamp = time.strftime(datefmt or self.default_time_format,
                                        self.converter(created))
        if datefmt or not self.default_msec_format:
            return self._stamp
        return self.default_msec_format % (self._stamp, int((created - second) * 1000))


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_controls(text: str) -> str:
    """Control characters as `\\xNN` (`\\uNNNN`): what a request sent (a path with
    `%0d%0a`) cannot start a forged line of its own in a text log."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: (f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100
                                   else f"\\u{ord(m[0]):04x}"), text)


class TextLogFormatter(_SecondsFormatter):
    """One line: time, level, logger and message (its control characters escaped; a
    traceback, when there is one, follows on lines of its own)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def access_line(self, created: float, args: tuple, fields: dict[str, Any]) -> str:
        """What format() makes of the access log record of these fields, without the record."""
        return f"{self._time(created, None)} INFO {access_log.name} {escape_controls(ACCESS_MESSAGE % args)}"


class JsonLogFormatter(_SecondsFormatter):
    """One JSON object per line: the access fields, or the message and level."""

    def format(self, record: logging.LogRecord) -> str:
        document = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                    "logger": record.name}
        fields = getattr(record, "fields", None)
        if fields:
            document.update(fields)
        else:
            document["message"] = record.getMessage()
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document)

    def access_line(self, created: float, args: tuple, fields: dict[str, Any]) -> str:
        """What format() makes of the access log record of these fields, without the record."""
        return json.dumps({"time": self._time(created, "%Y-%m-%dT%H:%M:%S"), "level": "INFO",
                           "logger": access_log.name, **fields})
