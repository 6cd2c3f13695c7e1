"""The one client of a running sandbox: its API and control plane with a tenant's keys.

Everything that drives a sandbox from outside calls through `SandboxClient`: the pytest
plugin's sandboxes (simulator/kit/testing.py: `AsyncSandbox` is one, `Sandbox` runs one on a
thread of its own), `listen`, `check-handler --url` and `trigger`. One way to make a call
(the keys, a JSON body, redirects never followed, a timeout), one reader of what comes back
(`Answer`: the `{"data": ...}` envelope and its other keys, such as a ledger page's cursor),
one error for an error answer (`SandboxError`, DESIGN.md: Errors), one for no answer at
all (`CannotReach`) and one for a server that is no payroll-sandbox (`NotASandbox`).

Nothing heavy is imported until a call is made: the pytest plugin imports this module on
every pytest start.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

import msgspec

if TYPE_CHECKING:
    import aiohttp

__all__ = ["Answer", "CannotReach", "NotASandbox", "SandboxClient", "SandboxError",
           "default_credentials", "sandbox_keys", "sandbox_url"]

REQUEST_TIMEOUT = 60.0   # wall seconds for one call (an advance may run long)
KEEP_ALIVE = 5.0         # seconds an idle connection is kept: below the server's idle timeout,
                         # so a call never goes out on one the server is closing
DEFAULT_URL = "http://127.0.0.1:8080"
URL_VARIABLE = "PAYROLL_SANDBOX_URL"
KEY_VARIABLE = "PAYROLL_SANDBOX_API_KEY"
SECRET_VARIABLE = "PAYROLL_SANDBOX_API_SECRET"
ERROR_EXCERPT = 500      # characters of an answer that is no error body kept as its message
WARNING_HEADER = "x-sandbox-warning"  # what the sandbox ignored (an unknown body field, ...)


class SandboxError(AssertionError):
    """The sandbox answered with an error: `status` and the error `body`
    (`{"error": {code, message, details}}`). An error answer that is not one (a proxy's
    page, an empty answer) has the same shape, its text as the message and no code."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        error = body.get("error", {})
        super().__init__(f"{status} {error.get('code')}: {error.get('message')} "
                         f"{error.get('details') or ''}".rstrip())
        self.status, self.body = status, body

    @property
    def code(self) -> str | None:
        return self.body.get("error", {}).get("code")

    @property
    def line(self) -> str:
        """`401 invalid-credentials: <message>`: the error in one line, without details."""
        error = self.body.get("error", {})
        return f"{self.status} {error.get('code')}: {error.get('message')}"


class CannotReach(ConnectionError):
    """No answer came (refused, reset, timed out, a name that does not resolve): the
    message says so in one line, naming the base URL.

    Each one raised is also an `aiohttp.ClientConnectionError` (and, for a timeout, a
    `TimeoutError`): what `AsyncSandbox` raised before it called through this client, so
    code catching those keeps catching it (see `_unreachable`)."""


class NotASandbox(Exception):
    """An answer in neither of the sandbox's shapes (no `{"data": ...}` envelope, no error
    body): the URL is some other server. `status` is its HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Answer(msgspec.Struct, frozen=True):
    """A successful answer, read. From the sandbox's envelope: `data` and the envelope's
    other keys in `extra` (a ledger page's `revision`, `reset`, `total`). Otherwise
    (`enveloped` false): a JSON document of its own (/openapi.json, an event schema) as
    `data`, or the bytes of anything else (a paystub PDF). `warning`: the answer's
    x-sandbox-warning, what the sandbox ignored (`unknown field $.metdata ignored`)."""

    status: int
    data: Any
    extra: Mapping[str, Any] = msgspec.field(default_factory=dict)
    enveloped: bool = True
    warning: str | None = None


def read_answer(status: int, content_type: str, raw: bytes,
                warning: str | None = None) -> Answer:
    """The one reader of what a sandbox answers: an Answer, or SandboxError for a status
    of 400 or more (with the error body, or one made from a body that is none)."""
    import orjson

    if status >= 400:
        document = _json(orjson, raw)
        if not (isinstance(document, dict) and isinstance(document.get("error"), dict)):
            document = {"error": {"code": None, "details": [],
                                  "message": raw.decode(errors="replace")[:ERROR_EXCERPT]}}
        raise SandboxError(status, document)
    if "json" not in content_type:
        return Answer(status, raw, enveloped=False, warning=warning)
    document = _json(orjson, raw) if raw else None
    if isinstance(document, dict) and "data" in document:
        return Answer(status, document.pop("data"), document, warning=warning)
    return Answer(status, raw if document is _NOT_JSON else document, enveloped=False,
                  warning=warning)


class SandboxClient:
    """One tenant of a running sandbox, awaitable: any call with its keys.

    The aiohttp session is `session` when given (not closed here), else one made on first
    use in the running loop and ended by `await close()` (or `async with`).
    """

    def __init__(self, base_url: str, api_key: str, api_secret: str, *,
                 session: aiohttp.ClientSession | None = None,
                 timeout: float = REQUEST_TIMEOUT) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key, self.api_secret = api_key, api_secret
        self.timeout = timeout
        self._session = session
        self._owns_session = session is None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.api_key, "x-api-secret": self.api_secret}

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = new_session()
        return self._session

    async def request(self, method: str, path: str, body: Any = None, *,
                      headers: dict[str, str] | None = None) -> Any:
        """Any API call with this tenant's keys; returns `data` (raises SandboxError on a
        4xx/5xx, CannotReach when no answer comes)."""
        return (await self.answer(method, path, body, headers=headers)).data

    async def answer(self, method: str, path: str, body: Any = None, *,
                     query: Mapping[str, Any] | None = None,
                     headers: dict[str, str] | None = None, strict: bool = False) -> Answer:
        """`method path?query` with a JSON `body`, read (`read_answer`). `strict`: an
        answer that is no envelope or error body of a sandbox raises NotASandbox."""
        status, content_type, raw, warning = await self._exchange(
            method, with_query(path, query), body, headers)
        try:
            answer = read_answer(status, content_type, raw, warning)
        except SandboxError as error:
            if strict and error.code is None:
                raise self._not_a_sandbox(method, path, status) from None
            raise
        if strict and not answer.enveloped:
            raise self._not_a_sandbox(method, path, status)
        return answer

    async def _exchange(self, method: str, path: str, body: Any,
                        headers: dict[str, str] | None) -> tuple[int, str, bytes, str | None]:
        import aiohttp

        data = None if body is None else json.dumps(body).encode()
        try:
            async with self.session.request(
                    method, self.base_url + path, data=data, allow_redirects=False,
                    timeout=_client_timeout(self.timeout),
                    headers={"content-type": "application/json", **self.headers,
                             **(headers or {})}) as response:
                return (response.status, response.headers.get("content-type", ""),
                        await response.read(), response.headers.get(WARNING_HEADER))
        except asyncio.TimeoutError:
            raise _unreachable(f"cannot reach {self.base_url}: no answer to {method} "
                               f"{path.split('?')[0]} in {self.timeout:g}s",
                               timed_out=True) from None
        except (aiohttp.ClientError, OSError) as error:
            from .transport.sender import failure

            raise _unreachable(f"cannot reach {self.base_url}: "
                               f"{failure(error, self.timeout).reason}") from error

    def _not_a_sandbox(self, method: str, path: str, status: int) -> NotASandbox:
        return NotASandbox(f"{self.base_url} does not answer as a payroll-sandbox ({method} "
                           f"{path}: HTTP {status})", status)


def new_session() -> aiohttp.ClientSession:
    """A session for calling sandboxes: no cookies, no proxy from the environment (the
    sandbox is local), idle connections dropped before the server drops them. Made in the
    running loop."""
    import aiohttp

    return aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(),
                                 connector=aiohttp.TCPConnector(keepalive_timeout=KEEP_ALIVE))


def with_query(path: str, query: Mapping[str, Any] | None) -> str:
    return f"{path}?{urllib.parse.urlencode(query)}" if query else path


# -- where a command finds the sandbox ----------------------------------------------------------

def sandbox_url(given: str | None = None) -> str:
    """`given`, else $PAYROLL_SANDBOX_URL, else http://127.0.0.1:8080."""
    return given or os.environ.get(URL_VARIABLE) or DEFAULT_URL


def sandbox_keys(key: str | None = None, secret: str | None = None) -> tuple[str, str]:
    """The keys given, else $PAYROLL_SANDBOX_API_KEY and _SECRET, else the bundled default
    tenant's (both from one place: a key never goes with another's secret)."""
    key = key or os.environ.get(KEY_VARIABLE)
    secret = secret or os.environ.get(SECRET_VARIABLE)
    if not key or not secret:
        key, secret = default_credentials()
    return key, secret


def default_credentials() -> tuple[str, str]:
    """The bundled default tenant's API key and secret (its webhooks are signed with it)."""
    from .load.fixtures import load_fixtures
    from .settings import bundled_dir

    accounts = load_fixtures(bundled_dir("fixtures")).accounts
    account = next(a for a in accounts if a["environment"] == "sandbox")
    return account["apiKey"], account["apiSecret"]


# -- reading -----------------------------------------------------------------------------------

_NOT_JSON = object()


def _json(orjson: Any, raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _NOT_JSON


@functools.lru_cache(maxsize=8)
def _client_timeout(seconds: float) -> Any:
    import aiohttp

    return aiohttp.ClientTimeout(total=seconds)


@functools.cache
def _unreachable_type(timed_out: bool) -> type[CannotReach]:
    import aiohttp

    bases: tuple[type, ...] = (CannotReach, aiohttp.ClientConnectionError)
    if timed_out:
        bases += (TimeoutError,)
    return type("CannotReach", bases, {"__module__": __name__, "__doc__": CannotReach.__doc__})


def _unreachable(message: str, *, timed_out: bool = False) -> CannotReach:
    """A CannotReach that is also what aiohttp would have raised (CannotReach's doc)."""
    return _unreachable_type(timed_out)(message)
