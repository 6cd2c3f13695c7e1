"""The edge: CORS, the journal and access log, and the one error renderer.

Authentication, parsing and validation are the operations' pipeline (routes/pipeline.py)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from aiohttp import web

from .clock import isoformat
from .errors import ApiError, InternalError, MethodNotAllowed, PayloadTooLarge, RouteNotFound
from .journal import MAX_BODY_BYTES as MAX_JOURNAL_BODY
from .keys import BODY, ERROR_CODE, TENANT

access_log = logging.getLogger("payroll_sandbox.access")
error_log = logging.getLogger("payroll_sandbox.error")

MAX_BODY_BYTES = 1024 * 1024  # DESIGN.md, Errors: 413 over 1 MiB
BODY_TOO_LARGE = "The request body is larger than {limit} bytes."
NO_ROUTE = "No route matches {method} {path}."
WRONG_METHOD = "{method} is not allowed on {path}; allowed: {allowed}."
INTERNAL = "The sandbox failed to handle this request; see its log."


CORS_HEADERS = {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET, POST, PUT, PATCH, DELETE, OPTIONS",
    "access-control-allow-headers": "content-type, x-api-key, x-api-secret, x-public-token, "
                                    "user-identifier",
    "access-control-max-age": "600",
}


@web.middleware
async def cors_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Browsers on the developer's own origin may call the sandbox (a web app searching
    companies with a public token): preflights are answered, every answer allows it."""
    if request.method == "OPTIONS" and "access-control-request-method" in request.headers:
        return web.Response(status=204, headers=CORS_HEADERS)
    response = await handler(request)
    response.headers.setdefault("access-control-allow-origin", "*")
    return response


@web.middleware
async def journal_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Records every request in the tenant's journal and writes one log line."""
    started = time.perf_counter()
    response = await handler(request)
    duration = round((time.perf_counter() - started) * 1000, 3)
    tenant = request.get(TENANT)
    tenant_name = tenant.name if tenant is not None else None
    if tenant is not None:
        tenant.journal.add(
            time=isoformat(tenant.clock.timestamp()), method=request.method,
            path=request.path, query=dict(request.query), status=response.status,
            duration_ms=duration, error_code=request.get(ERROR_CODE), body=_journal_body(request))
    access_log.info("%s %s %s %.1fms tenant=%s", request.method, request.path, response.status,
                    duration, tenant_name or "-",
                    extra={"fields": {"method": request.method, "path": request.path,
                                      "status": response.status, "ms": duration,
                                      "tenant": tenant_name}})
    return response


def _journal_body(request: web.Request) -> Any:
    body = request.get(BODY)
    if body is None:
        return None
    text = json.dumps(body)
    return body if len(text) <= MAX_JOURNAL_BODY else {"truncated": text[:MAX_JOURNAL_BODY]}


@web.middleware
async def error_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """The one place an error becomes the error body (DESIGN.md, Errors)."""
    try:
        return await handler(request)
    except ApiError as error:
        return render_error(request, error)
    except web.HTTPRequestEntityTooLarge:
        return render_error(request, PayloadTooLarge(BODY_TOO_LARGE.format(limit=MAX_BODY_BYTES)))
    except web.HTTPMethodNotAllowed as error:
        allowed = ", ".join(sorted(error.allowed_methods))
        return render_error(request, MethodNotAllowed(WRONG_METHOD.format(
            method=request.method, path=request.path, allowed=allowed)))
    except web.HTTPNotFound:
        return render_error(request, RouteNotFound(NO_ROUTE.format(method=request.method,
                                                              path=request.path)))
    except web.HTTPException as error:
        if error.status < 400:
            raise
        return render_error(request, ApiError(error.reason, code=_kebab(error.reason)),
                            status=error.status)
    except Exception:
        error_log.exception("unhandled error on %s %s", request.method, request.path)
        return render_error(request, InternalError(INTERNAL))


def render_error(request: web.Request, error: ApiError, *, status: int | None = None) -> web.Response:
    request[ERROR_CODE] = error.code
    retry_after = getattr(error, "retry_after", None)
    headers = {"retry-after": str(retry_after)} if retry_after is not None else None
    return web.json_response(error.body(), status=status or error.status, headers=headers)


def _kebab(text: str) -> str:
    return "-".join(text.lower().split())


class JsonLogFormatter(logging.Formatter):
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
