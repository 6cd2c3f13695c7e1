"""The edge: the Host check, CORS, the one place an error becomes its body, the page
headers, the journal and the access log, in one middleware.

The bodies it writes are render.py's, the access line logs.py's. Authentication, parsing
and validation are the operations' pipeline (edge/pipeline.py)."""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp import web

from ..clock import isoformat
from ..errors import (ApiError, HostNotAllowed, InternalError, PayloadTooLarge, RouteNotFound,
                     field_detail)
from .keys import EXCHANGE, FIXED_PATHS, SANDBOX, Exchange
from .logs import access_log, log_access, loggable_path
from .render import render_error, wrong_method
from .pipeline import fixed_paths_meant


error_log = logging.getLogger("payroll_sandbox.error")

MAX_BODY_BYTES = 1024 * 1024  # DESIGN.md, Errors: 413 over 1 MiB
BODY_TOO_LARGE = "The request body is larger than {limit} bytes."
NO_ROUTE = "No route matches {method} {path}."

# Every answer: a browser never guesses a type other than the one given.
NOSNIFF = ("x-content-type-options", "nosniff")

# The pages load only their own scripts, styles and data; company logos may come from
# anywhere over http(s) or data: URLs.
_PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                "img-src 'self' data: https: http:; font-src 'self'; frame-src 'self'; "
                "base-uri 'none'; form-action 'self'; frame-ancestors {ancestors}")
NO_ROUTE_MEANT = "No route matches {method} {path}; the {method} paths of its shape are {meant}."
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
    exchange = request[EXCHANGE] = Exchange()
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
    tenant = exchange.tenant
    tenant_name = None
    if tenant is not None:
        tenant_name = tenant.name
        tenant.journal.add(
            isoformat(tenant.clock.timestamp()), request.method, request.path,
            dict(request.query) if request.query_string else {}, response.status, duration,
            exchange.error_code, exchange.body, exchange.warnings, exchange.fault)
    if access_log.isEnabledFor(logging.INFO):
        log_access(request.method, request.path, response.status, duration, tenant_name)
    headers = response.headers
    headers[NOSNIFF[0]] = NOSNIFF[1]
    if exchange.warnings:
        headers[WARNING_HEADER] = warning_text(exchange.warnings)
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
        # Another path of a parameter route's shape than the fixed ones that take this
        # method (POST /task/creat beside POST /task/create): no route of it matches.
        if request.path not in request.app.get(FIXED_PATHS, {}) and (
                meant := fixed_paths_meant(request)):
            return RouteNotFound(NO_ROUTE_MEANT.format(
                method=request.method, path=request.path, meant=", ".join(meant))), None
        # A fixed path (/task/create) takes its own methods only, not those of a parameter
        # route that also matches it (GET /task/{taskId}).
        return wrong_method(request, request.app.get(FIXED_PATHS, {}).get(request.path)
                            or ", ".join(sorted(error.allowed_methods))), None
    if isinstance(error, web.HTTPNotFound):
        return RouteNotFound(NO_ROUTE.format(method=request.method, path=request.path)), None
    return ApiError(error.reason, code="-".join(error.reason.lower().split())), error.status


def page_headers(frame_ancestors: str) -> dict[str, str]:
    """The headers of an HTML page: its Content-Security-Policy, framed only by
    `frame_ancestors` (`'none'` for the dashboard), and no Referer sent from it."""
    headers = {"content-security-policy": _PAGE_POLICY.format(ancestors=frame_ancestors),
               "referrer-policy": "no-referrer"}
    if frame_ancestors == "'none'":
        headers["x-frame-options"] = "DENY"  # for browsers without frame-ancestors
    return headers
