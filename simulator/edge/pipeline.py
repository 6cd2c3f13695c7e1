"""The one pipeline that applies the declared operations (operations.py) to every request:
auth -> parse and validate -> handler -> settle -> render `{"data": ...}`.

`routes_of` makes each operation an aiohttp route whose handler is this pipeline around
the operation's own handler, which gets exactly the parameters it names; `add_routes`
gives an app those routes.
Model: stripe-mock's single HandleRequest pipeline.
"""

from __future__ import annotations

import asyncio
import difflib
import operator
import socket
import struct
from contextlib import suppress
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec
from aiohttp import web

from ..domain.faults import Fired, FiredRule, InjectedFault
from ..errors import ApiError, ApiKeysRequired, PublicTokenRequired, ValidationFailed, field_detail
from ..domain.journal import journal_body
from ..domain.shapes import View
from .keys import DIALECTS, FIXED_PATHS, FIXED_SIBLINGS, SANDBOX, Exchange, exchange_of
from .operations import CLIENT_ID, CLIENT_SECRET, Auth, Operation, Reply
from .render import json_response, read_body, wrong_method
from ..validate import (INVALID_BODY, INVALID_QUERY, INVALID_TEXT, check_json_type, parse_json_body,
                        parse_query, text_problem)

CONTROL_PLANE = "/_sandbox/"
# A parameter that takes the rest of the path, slashes and every other character included
# (`.` would leave out a newline: that path then matched no route, a 404 instead of the
# 422 that names the control character).
REST = r"[\s\S]+"

API_KEYS_REQUIRED = "This operation needs the x-api-key and x-api-secret headers, not a public token."
TOKEN_REQUIRED = "The hosted flow authenticates with the user's public token (x-public-token)."


class Routes(NamedTuple):
    """The aiohttp resources of some operations, with what the edge reads beside them."""

    operations: tuple[Operation, ...]
    resources: tuple[web.AbstractResource, ...]
    fixed: dict[str, str]  # app[FIXED_PATHS]
    siblings: list[tuple[list[str], dict[str, list[str]]]]  # app[FIXED_SIBLINGS]
    dialects: dict[str, Any]  # app[DIALECTS]


def routes_of(operations: Iterable[Operation]) -> Routes:
    """Each operation an aiohttp resource whose handler is this pipeline around the
    operation's own handler. They belong to no app, so every app of the same operations
    registers the same ones (routes.routes_at): a test suite makes an app a test, and
    aiohttp's making of resources and routes was 60% of making one. Such an app is never
    mounted under a prefix (add_subapp would prefix them in every app)."""
    operations = tuple(operations)
    fixed, siblings = _fixed_paths([(op.method, op.path, op.rest) for op in operations])
    router = web.UrlDispatcher()
    for op in operations:
        handler = _endpoint(op, fixed if "{" in op.path else None)
        path = op.path if op.rest is None else op.path.replace(f"{{{op.rest}}}",
                                                               f"{{{op.rest}:{REST}}}")
        if op.method == "GET":  # HEAD answers as GET would, without the body
            router.add_get(path, handler)
        else:
            router.add_route(op.method, path, handler)
    dialects = {op.dialect.prefix: op.dialect for op in operations
                if op.dialect is not None and op.dialect.prefix}
    return Routes(operations, tuple(router.resources()), fixed, siblings, dialects)


def add_routes(app: web.Application, routes: Routes) -> None:
    app[FIXED_PATHS], app[FIXED_SIBLINGS], app[DIALECTS] = (routes.fixed, routes.siblings,
                                                            routes.dialects)
    for resource in routes.resources:
        app.router.register_resource(resource)


def _fits(template: list[str], path: list[str]) -> bool:
    """Whether a path (its segments) has the shape of a parameter route's `template`: the
    same literal segments, a non-empty one for each parameter."""
    return len(template) == len(path) and all(
        b != "" if a.startswith("{") else a == b for a, b in zip(template, path))


def _fixed_paths(routes: list[tuple[str, str, str | None]]
                 ) -> tuple[dict[str, str], list[tuple[list[str], dict[str, list[str]]]]]:
    """Of the routes' (method, path, rest), read only: each path without parameters with
    its methods (app[FIXED_PATHS]), and for each parameter route with fixed paths of its
    shape, those paths by each method they take that the parameter route does not
    (app[FIXED_SIBLINGS])."""
    fixed: dict[str, set[str]] = {}  # a path without parameters -> its methods
    templates: dict[str, set[str]] = {}
    for method, path, rest in routes:
        if "{" not in path:
            fixed.setdefault(path, set()).add(method)
        elif rest is None:
            templates.setdefault(path, set()).add(method)
    found = []
    for template, own in templates.items():
        segments = template.split("/")
        by_method: dict[str, list[str]] = {}
        for path, methods in fixed.items():
            if _fits(segments, path.split("/")):
                for method in methods - own:
                    by_method.setdefault(method, []).append(path)
        if by_method:
            found.append((segments, by_method))
    return {path: ", ".join(sorted(methods)) for path, methods in fixed.items()}, found


def fixed_paths_meant(request: web.Request) -> list[str]:
    """The fixed paths a request that aiohttp would answer with a 405 was meant for, closest
    first (none: the 405 stands). POST /task/creat matches GET /task/{taskId} only by its
    shape, while POST there is taken by /task/create and /task/prescreen: a path that no
    route of its method has is a 404, however much a parameter route shares of it; a wrong
    method on a task (DELETE /task/{taskId}) stays a 405 with Allow."""
    path = request.rel_url.raw_path
    meant = {sibling for template, by_method in request.app.get(FIXED_SIBLINGS, [])
             if _fits(template, path.split("/")) for sibling in by_method.get(request.method, ())}
    return sorted(meant, key=lambda p: (-difflib.SequenceMatcher(None, path, p).ratio(), p))


# Warnings kept of one request: the first ones, then a count. A 1 MiB body of 75,000
# unknown fields kept all 75,000 in the journal (8.9 MB a request).
WARNINGS_KEPT = 20


def ignored_warnings(template: str, names: Sequence[str]) -> list[str]:
    """What the API ignored, as warnings: each of the first WARNINGS_KEPT names, then how
    many more."""
    shown = [template.format(name) for name in names[:WARNINGS_KEPT]]
    if len(names) > WARNINGS_KEPT:
        shown.append(f"and {len(names) - WARNINGS_KEPT} more ignored")
    return shown


# What a handler may take, by parameter name (operations.py: an operation's `wants`).
OFFERED = ("tenant", "token", "body", "query", "params", "headers", "sandbox", "request")


def _endpoint(op: Operation, fixed: dict[str, str] | None = None
              ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    # The handler's arguments, in its parameters' order, taken from what the pipeline
    # offers (OFFERED) by their places: a positional call, no dict made for it.
    places = [OFFERED.index(name) for name in op.wants]
    take = (operator.itemgetter(*places) if len(places) > 1
            else lambda offered: [offered[place] for place in places])
    # The control plane is the sandbox's own: a typo in a test's setup is refused there.
    strict = op.strict  # unknown fields refused whatever --strict-bodies says
    # The tenant's API fault rules apply here (domain/faults.py); never to the control
    # plane, so a test can always take them back.
    faultable = op.auth is not Auth.NONE and not op.path.startswith(CONTROL_PLANE)

    async def handle(request: web.Request) -> web.StreamResponse:
        # A fixed path this parameter route matches too (GET /task/{taskId} matches
        # /task/create), asked with a method it does not take (`fixed`: path -> its methods):
        # a 405 for the fixed path, not a 404 for a task named "create".
        if fixed and (allowed := fixed.get(request.path)) and op.method not in allowed.split(", "):
            raise wrong_method(request, allowed)
        sandbox = request.app[SANDBOX]
        exchange = exchange_of(request)
        if op.auth is Auth.AGGREGATOR:
            tenant, token = await _authenticate_client(request, sandbox), None
        else:
            tenant, token = _authenticate(request, op.auth, sandbox, exchange)
        if faultable and tenant.api_faults.rules:
            fired = tenant.api_faults.fire(op.method, op.path)
            if fired is not None and (reset := await _inject(request, fired)) is not None:
                return reset
        if request.match_info:
            _check_path(request.match_info)
        body = query = None
        # What a lenient operation ignores (DESIGN.md, Bodies): named in x-sandbox-warning.
        lenient = not (strict or sandbox.settings.strict_bodies)
        warnings = exchange.warnings
        if op.body is not None:
            raw = await read_body(request, exchange)
            ignored: list[str] | None = [] if lenient else None
            try:
                if raw:
                    _check_body_type(request.headers.get("content-type"), warnings, lenient)
                body = parse_json_body(raw, op.body, ignored=ignored)
            except ApiError:  # the journal keeps the text of a refused body
                exchange.body = journal_body(raw.decode("utf-8", "replace") if raw else None,
                                             len(raw))
                raise
            finally:
                if ignored:
                    warnings += ignored_warnings("unknown field {} ignored", ignored)
            exchange.body = journal_body(_without_secret(body), len(raw))
            if op.decode_body is not None:
                body = _typed(op.decode_body, body, INVALID_BODY, "body")
        if op.query is not None:
            ignored = [] if lenient else None
            try:
                query = parse_query(request.query, op.query, ignored=ignored)
            finally:
                if ignored:
                    warnings += ignored_warnings("unknown query parameter {} ignored",
                                                 [name[2:] for name in ignored])
            if op.decode_query is not None:
                query = _typed(op.decode_query, query, INVALID_QUERY, "query")
        offered = (tenant, token, body, query, request.match_info, request.headers, sandbox,
                   request)
        try:
            result = await op.handler(*take(offered))
        finally:  # what the handler's events queued goes out now (the domain sends nothing)
            if tenant is not None and tenant.webhooks.queue:
                sandbox.dispatcher.flush(tenant.webhooks)
        if op.settles and tenant is not None:
            await sandbox.dispatcher.settle(tenant)
        if callable(result):  # an answer that shows what the settled attempts did
            result = result()
        if isinstance(result, View) and op.dialect is None:  # the common answer: first
            return json_response({"data": result}, status=op.status)
        if isinstance(result, web.StreamResponse):
            return result
        if op.dialect is not None:
            return json_response(result, status=op.status)
        if isinstance(result, Reply):
            return json_response({"data": result.data, **result.extra}, status=op.status)
        return json_response({"data": result}, status=op.status)

    handle.__name__ = op.handler.__name__
    # A browser app on another origin calls these with a public token (the edge answers
    # their preflights and lets that origin read their answers); nothing else.
    handle.cors = op.auth in (Auth.EITHER, Auth.PUBLIC_TOKEN)  # type: ignore[attr-defined]
    handle.dialect = op.dialect  # type: ignore[attr-defined]  # the edge renders its errors
    return handle


def _typed(decode: Callable[[Any], Any], document: Any, message: str, location: str) -> Any:
    """A checked body or query as its operation's struct. The JSON Schema it passed is
    derived from that struct, so a refusal here is a rule the two state differently: a
    422 naming the field all the same, never a 500."""
    try:
        return decode(document)
    except msgspec.ValidationError as error:
        text, _, path = str(error).rpartition(" - at `")
        raise ValidationFailed(message, details=[field_detail(
            path.rstrip("`") if path else "$", text or str(error), location=location)]) from None


def _without_secret(body: Any) -> Any:
    """The body as the journal keeps it: the aggregator's client may send the tenant's API
    secret as `secret` in its bodies, and no secret is written down."""
    if isinstance(body, dict) and "secret" in body:
        return {**body, "secret": "[redacted]"}
    return body


async def _inject(request: web.Request, fired: Fired) -> web.StreamResponse | None:
    """Carries out a fault rule that fired, before anything else of the request: a slow
    answer waits and lets the request go on (None); an error status is raised; a reset
    reads the request, closes the connection without an answer and gives the journal a
    response of status 0 that is never sent. The journal names the rule."""
    rule = fired.rule
    exchange_of(request).fault = msgspec.to_builtins(FiredRule.of(rule, rule=fired.number))
    if rule.latency_ms is not None:
        await asyncio.sleep(rule.latency_ms / 1000)
        return None
    await _keep_body(request)
    if not rule.reset:
        raise InjectedFault(fired.number, rule)
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:  # a zero linger: the close is a TCP reset, not an orderly end
            with suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return web.Response(status=0)


async def _keep_body(request: web.Request) -> None:
    """A faulted request's body, read whole (as a server that fails after reading it) and
    kept for the journal (its text when it is no JSON); one that cannot be read is not."""
    try:
        raw = await read_body(request)
    except (ApiError, web.HTTPException):
        return
    if raw:
        try:
            body: Any = parse_json_body(raw, None)
        except ApiError:
            body = raw.decode("utf-8", "replace")
        exchange_of(request).body = journal_body(body, len(raw))


def _check_body_type(content_type: str | None, warnings: list[str], lenient: bool) -> None:
    """A body's content type: JSON, or (lenient) read as JSON all the same and said so.
    The real service's answer to another type is not published, so only --strict-bodies
    (and the control plane) refuse it (415)."""
    try:
        check_json_type(content_type)
    except ApiError:
        if not lenient:
            raise
        media = (content_type or "").partition(";")[0].strip().lower()
        warnings.append(f"content-type {media or '(empty)'} read as JSON")


async def _authenticate_client(request: web.Request, sandbox: Any) -> Any:
    """Auth.AGGREGATOR: the tenant whose API key and secret are the client id and secret,
    from the headers or, failing those, the body's fields (a body that is not a JSON object
    has none; its own fault is told after the credentials')."""
    key, secret = (request.headers.get(header) for header, _ in (CLIENT_ID, CLIENT_SECRET))
    if not (key and secret):
        raw = await read_body(request)
        try:
            document = parse_json_body(raw, None)
        except ApiError:
            document = None
        if isinstance(document, dict):
            key, secret = (value if isinstance(value := document.get(name), str) else given
                           for given, (_, name) in ((key, CLIENT_ID), (secret, CLIENT_SECRET)))
    tenant = sandbox.registry.tenants.authenticate_keys(key, secret)
    exchange_of(request).tenant = tenant
    tenant.seen()
    return tenant


def _check_path(params: Mapping[str, str]) -> None:
    """Ids and identifiers in the path hold no control character or lone surrogate (422)."""
    if all(map(str.isprintable, params.values())):  # neither is printable: checked in C
        return
    faults = [field_detail(name, problem, location="path") for name, value in params.items()
              if (problem := text_problem(value)) is not None]
    if faults:
        raise ValidationFailed(INVALID_TEXT, details=faults)


def _authenticate(request: web.Request, auth: Auth, sandbox: Any,
                  exchange: Exchange) -> tuple[Any, Any]:
    """The tenant and the public token (None under API keys) of a request, by the
    operation's auth kind; the tenant remembered on the exchange for the journal."""
    if auth is Auth.NONE:
        return None, None
    headers = request.headers
    tenant, token = sandbox.registry.tenants.authenticate(
        headers.get("x-api-key"), headers.get("x-api-secret"), headers.get("x-public-token"))
    exchange.tenant = tenant
    tenant.seen()
    if auth is Auth.API_KEYS and token is not None:
        raise ApiKeysRequired(API_KEYS_REQUIRED)
    if auth is Auth.PUBLIC_TOKEN and token is None:
        raise PublicTokenRequired(TOKEN_REQUIRED)
    return tenant, token
