"""Operations as data: what a route module declares beside each handler.

Each API operation is declared once, as an `Operation`: method, path, handler, the auth
kind, the request body and query schemas, whether it settles webhook deliveries, a
summary, the errors it can answer and its response schema. Everything else is derived
from that declaration: the aiohttp routes and the pipeline every request goes through
(edge/pipeline.py) and the whole OpenAPI document (openapi.py).

A handler names what it needs as parameters and gets exactly that: `tenant`, `token`
(the public token, or None under API keys), `body`, `query`, `params` (the path's),
`headers`, `sandbox` (the app's collaborators) or, for pages and files, `request`. It
returns the `data` (or a `Reply`, or a web.Response for pages and files, or a function
that makes the data once the webhook attempts it started have settled). Its return
annotation is the answer's shape (`-> TaskRecord`, `-> Reply[list[EventRecord]]`);
`response=` declares it only where the handler's value is not its shape.
Model: FastAPI's declarations.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from enum import Enum
from functools import cached_property
from typing import Any, Generic, TypeVar, get_args, get_origin, get_type_hints

import msgspec
from aiohttp import web

from ..domain.shapes import View, decoder, schema_of
from ..errors import ApiError
from ..static import static_text

AGGREGATOR = "<aggregator>"  # in a declared path: the service profile's aggregator name
PATH_PARAMETER = re.compile(r"\{([^}:]+)")  # in a declared path: {name} or {name:regex}


class Auth(Enum):
    """Who may call an operation (spec: Authentication)."""

    API_KEYS = "api-keys"          # server side: x-api-key and x-api-secret only
    EITHER = "either"              # API keys, or a user's x-public-token
    PUBLIC_TOKEN = "public-token"  # the hosted flow: the user's x-public-token only
    NONE = "none"                  # liveness, the API description, the SDK's pages
    # The aggregator's own API (routes/aggregator_api.py): the tenant's API key and secret
    # as its client id and secret, in the headers its official client sends or the body.
    AGGREGATOR = "aggregator"


# The control plane's operations (the sandbox's own console): API keys, and their group.
CONTROL = {"auth": Auth.API_KEYS, "tags": ("control plane",)}

# Auth.AGGREGATOR: where the client id and secret come (header, else body field).
CLIENT_ID = ("PLAID-CLIENT-ID", "client_id")
CLIENT_SECRET = ("PLAID-SECRET", "secret")


class Dialect(msgspec.Struct, frozen=True):
    """The conventions of another API that some operations stand in for (the aggregator's
    own, routes/aggregator_api.py): their answers go out as the handler gives them (no
    `{"data": ...}`), their errors as `render_error(error, status)` -> (status, body) makes
    them (the edge calls it), and the OpenAPI document shows `errors` (status ->
    description) with `error_schema`. Every path under `prefix` answers in this dialect,
    those no operation has (404) and methods its paths do not take (405) included."""

    render_error: Callable[[ApiError, int], tuple[int, dict[str, Any]]]
    error_schema: dict[str, Any]
    errors: dict[int, str]
    prefix: str | None = None


T = TypeVar("T")


class Reply(msgspec.Struct, Generic[T], frozen=True):
    """A handler's answer when it is more than `data`: extra top-level fields beside `data`
    (such as `total`). `-> Reply[X]` declares `data`'s shape."""

    data: T
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class Operation(msgspec.Struct, frozen=True, dict=True):
    """One API operation, declared once: its route, auth, bodies, responses and handler."""

    method: str
    path: str
    handler: Callable[..., Awaitable[Any]]
    summary: str
    # The real API's default (real-api-surface.md, Conventions): API key and secret; an
    # operation the end user's public token may call says so.
    auth: Auth = Auth.API_KEYS
    # The request body, the query parameters and `data`: each a struct (domain/shapes.py),
    # a JSON Schema, or a function that makes one; `body`, `query` and `response` are their
    # schemas.
    body_shape: Any = None
    query_shape: Any = None
    response_shape: Any = None
    # The struct the checked body becomes, when it is not the body's own: a narrower
    # request of a wider command (a refresh's body is a task creation's).
    command: Any = None
    envelope: dict[str, Any] = msgspec.field(default_factory=dict)  # fields beside `data`: schemas
    status: int = 200
    errors: tuple[int, ...] = ()             # besides 401 (auth), 413 and 422 (body, query)
    settles: bool = False                    # waits for the webhook attempts it started
    content_type: str | None = None          # a page, script or file instead of JSON
    headers: tuple[tuple[str, bool], ...] = ()  # request headers it reads: (name, required)
    tags: tuple[str, ...] = ()
    description: str = ""
    dialect: Dialect | None = None           # another API's conventions (None: this API's)
    wants: tuple[str, ...] = ()              # the handler's parameters (read once, below)
    rest: str | None = None                  # a path parameter that takes slashes too
    example: Any = None                      # for /docs: examples.Example (None: derived)

    def __post_init__(self) -> None:
        if not self.wants:  # read here once, not by every app that routes the operation
            msgspec.structs.force_setattr(self, "wants", parameters(self.handler))

    # Derived on first use (the first request, or the document), not when the routes'
    # modules are imported: a struct's schema costs ~0.7 ms, and there are 120 operations.
    @cached_property
    def body(self) -> dict[str, Any] | None:
        return _schema(self.body_shape)

    @cached_property
    def query(self) -> dict[str, Any] | None:
        return _schema(self.query_shape)

    @cached_property
    def response(self) -> dict[str, Any] | None:
        return _schema(self.response_shape if self.response_shape is not None
                       else returned(self.handler))

    @cached_property
    def decode_body(self) -> Callable[[Any], Any] | None:
        """What makes the checked body the handler's value: its struct (None: the body as
        JSON data, for a body declared by a schema)."""
        return decoder(self.command or self.body_shape)

    @cached_property
    def decode_query(self) -> Callable[[Any], Any] | None:
        return decoder(self.query_shape)

    @property
    def strict(self) -> bool:
        """Whether an unknown body field or query parameter is refused (422) whatever
        --strict-bodies says: the control plane (a typo in a test's set-up) and the
        aggregator's own API (as the aggregator does). The service's operations take what
        the real service would: an unknown field is ignored and named (DESIGN.md, Bodies)."""
        return self.path.startswith("/_sandbox/") or self.auth is Auth.AGGREGATOR

    def at(self, aggregator: str) -> Operation:
        """The operation with the service profile's aggregator name in its path."""
        if AGGREGATOR not in self.path:
            return self
        return msgspec.structs.replace(self, path=self.path.replace(AGGREGATOR, aggregator))


def _schema(shape: Any) -> dict[str, Any] | None:
    if shape is None or isinstance(shape, dict):
        return shape
    if isinstance(shape, type) or get_origin(shape) is not None:  # a struct, list[...], ...
        return schema_of(shape)
    return shape()  # a function that makes it


def returned(handler: Callable[..., Any]) -> Any:
    """The shape a handler's return annotation names: a View, a list of them, or either
    in a `Reply[...]`; None for anything else (a page, a file, untyped data)."""
    shape = get_type_hints(handler).get("return")
    if get_origin(shape) is Reply:
        (shape,) = get_args(shape)
    item = get_args(shape)[0] if get_origin(shape) is list else shape
    return shape if isinstance(item, type) and issubclass(item, View) else None


def parameters(handler: Callable[..., Any]) -> tuple[str, ...]:
    """The names of a handler's parameters. A plain function's are read off its code:
    inspect.signature, for every operation, was 5 ms of each start."""
    code = getattr(handler, "__code__", None)
    if code is None or hasattr(handler, "__wrapped__"):
        return tuple(inspect.signature(handler).parameters)
    return code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def operation(method: str, path: str, summary: str, **declared: Any) -> Callable:
    """A decorator that declares the function below it as an operation's handler:
    `@operation("POST", "/task/create", "Create a task", body=TASK_CREATE_REQUEST)`."""

    def declare(handler: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        shapes = {f"{key}_shape": declared.pop(key) for key in ("body", "query", "response")
                  if key in declared}
        OPERATIONS.append(Operation(method, path, handler, summary,
                                    description=inspect.getdoc(handler) or "",
                                    **declared, **shapes))
        return handler

    return declare


OPERATIONS: list[Operation] = []  # every operation of every route module, in declaration order


NO_STORE = {"cache-control": "no-store"}  # the sandbox's pages change with the package


def serve_file(path: str, summary: str, content_type: str, file: str | None = None,
               **declared: Any) -> None:
    """Declares an operation that answers a file of simulator/static (a page, a script, a
    style): `file`, else the last segment of `path`."""
    name = file or path.rsplit("/", 1)[-1]

    async def asset() -> web.Response:
        return web.Response(text=static_text(name), content_type=content_type, headers=NO_STORE)

    asset.__name__ = f"asset_{name.replace('.', '_')}"
    operation("GET", path, summary, auth=Auth.NONE, content_type=content_type, **declared)(asset)


def serve_script_and_styles(assets: str, whose: str, **declared: Any) -> None:
    """Declares GET `<assets>.js` and `<assets>.css`: `whose` script and styles."""
    serve_file(f"{assets}.js", f"The {whose} script", "application/javascript", **declared)
    serve_file(f"{assets}.css", f"The {whose} styles", "text/css", **declared)
