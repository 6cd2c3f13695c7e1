"""`payroll-sandbox verify-against URL`: the drift check (docs/verify-against.md).

A fixed list of sandbox-safe probes (`PROBES`, data) is sent to the service at URL and to
an in-process sandbox (the bundled fixtures, default settings, a manual clock, on
127.0.0.1 and a free port, its default tenant's keys), and the two answers of each probe
are compared by their structure (`diff_answers`, pure): the status code, then, when both
are 2xx, every field by JSON path (only on one side, or of another JSON type) and the
values of fields whose values are a published enum. Values themselves (ids, names,
amounts, dates) are never compared.

Nothing is written on the service but a test user and its public token: every probe is a
read, a search, an access token or a refused input. Before any of them, `refusal` and
`production_signal` stop a run aimed at what looks like production.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, urlsplit

from .schemas.validate import http_url_problem

# -- published enums (real-api-surface.md, service-spec.md) --------------------------------------

COMPANY_STATUS = ("operational", "under-maintenance", "disabled")
TASK_STATUS = ("queued", "processing", "completed", "failed")
DEPOSIT_TYPE = ("checking", "savings", "paycard")
DISTRIBUTION_TYPE = ("total", "percent", "fixed")
INCOME_TYPE = ("yearly", "monthly", "weekly", "daily", "hourly")
PAY_CYCLE = ("monthly", "semimonthly", "biweekly", "weekly")

UNKNOWN_ID = "000000000000000000000000"   # a well-formed id that names nothing
WRONG_SECRET = "verify-against-wrong-secret"
SEARCH_QUERY = "a"

KEYS, BAD_SECRET, NO_KEYS = "keys", "wrong-secret", "none"   # the credentials a probe sends
SERVICE, SANDBOX = "service", "sandbox"

REQUEST_TIMEOUT = 30.0          # wall seconds for one answer
MAX_ANSWER_BYTES = 10 * 2**20   # an answer is read up to this much
MAX_IDENTIFIER = 200


@dataclass(frozen=True)
class Probe:
    """One request sent to both sides. `path` and string values of `body` may name
    `{identifier}` and `{companyId}` (the first hit of that side's `company-search`);
    `expect` is what the documentation says it answers (a status or a class like `4xx`);
    `enums` maps JSON paths of its answer to the published values of that field."""

    name: str
    method: str
    path: str
    expect: str
    body: Any = None
    credentials: str = KEYS
    enums: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    what: str = ""


def _data_probe(kind: str, query: str = "", enums: Mapping[str, tuple[str, ...]] | None = None
                ) -> Probe:
    return Probe(kind, "GET", f"/{kind}/{{identifier}}{query}", "200", enums=enums or {},
                 what=f"the test user's {kind} records")


COMPANY_ENUMS = {"$.data[].status": COMPANY_STATUS}

# The probes, in the order they run; the names are a contract (docs, --json, tests).
PROBES: tuple[Probe, ...] = (
    Probe("access-token", "POST", "/access-token", "200", {"identifier": "{identifier}"},
          what="a public token for the test user (creates the user if new)"),
    Probe("access-token-without-identifier", "POST", "/access-token", "4xx", {},
          what="the required identifier left out"),
    Probe("access-token-lifetime-out-of-range", "POST", "/access-token", "4xx",
          {"identifier": "{identifier}", "tokenLifetime": 60},
          what="tokenLifetime under the published 30 minutes"),
    Probe("access-token-wrong-secret", "POST", "/access-token", "401",
          {"identifier": "{identifier}"}, credentials=BAD_SECRET, what="a wrong API secret"),
    Probe("company-search", "POST", "/company/search", "200", {"query": SEARCH_QUERY},
          enums=COMPANY_ENUMS, what="a fuzzy search"),
    Probe("company-search-product-and-products", "POST", "/company/search", "400",
          {"query": SEARCH_QUERY, "product": "deposit", "products": ["deposit"]},
          what="both product and products"),
    Probe("company-search-without-query", "POST", "/company/search", "4xx", {},
          what="the required query left out"),
    Probe("company-list", "GET", "/company/list?limit=5", "200", enums=COMPANY_ENUMS,
          what="the catalog's first five"),
    Probe("company-list-without-keys", "GET", "/company/list?limit=5", "401",
          credentials=NO_KEYS, what="no credentials"),
    Probe("company-details", "GET", "/company/{companyId}/details", "200",
          enums={"$.data.status": COMPANY_STATUS}, what="the first search hit's details"),
    Probe("company-details-unknown", "GET", f"/company/{UNKNOWN_ID}/details", "404",
          what="an id no company has"),
    Probe("linked-account-list", "GET", "/linked-account/list/{identifier}", "200",
          enums={"$.data[].company.status": COMPANY_STATUS},
          what="the test user's linked accounts"),
    _data_probe("income", enums={"$.data[].incomeType": INCOME_TYPE,
                                 "$.data[].payCycle": PAY_CYCLE}),
    _data_probe("employment"),
    _data_probe("identity"),
    _data_probe("deposit-accounts", enums={"$.data[].type": DEPOSIT_TYPE,
                                           "$.data[].distributionType": DISTRIBUTION_TYPE}),
    _data_probe("statements", "?limit=5"),
    _data_probe("taxes"),
    _data_probe("timesheets"),
    Probe("task-details-unknown", "GET", f"/task/{UNKNOWN_ID}/details", "404",
          what="an id no task has"),
    Probe("task-status-unknown", "GET", f"/task/{UNKNOWN_ID}/status", "404",
          enums={"$.data.task.status": TASK_STATUS}, what="an id no task has"),
)


class VerifyError(ValueError):
    """The run cannot be made: bad arguments, a production target, an unreachable URL."""


# -- the diff (pure) -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    """One way the service's answer differs from the sandbox's. `kind`: `status`, `type`,
    `missing` (only the service answers the field), `extra` (only the sandbox does) or
    `enum`; `service` and `sandbox` are what each side had there (None: nothing)."""

    kind: str
    path: str
    service: Any
    sandbox: Any
    message: str
    probe: str = ""

    def record(self) -> dict[str, Any]:
        return {"probe": self.probe, "kind": self.kind, "path": self.path,
                "service": self.service, "sandbox": self.sandbox, "message": self.message}


@dataclass(frozen=True)
class Note:
    """Something not compared, or worth knowing, that is not a difference."""

    path: str
    message: str
    probe: str = ""

    def record(self) -> dict[str, Any]:
        return {"probe": self.probe, "path": self.path, "message": self.message}


class _NotJson:
    """An answer whose body is not JSON."""


NOT_JSON = _NotJson()


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):   # before int: True is an int in Python
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"   # JSON has one number type: 5 and 5.5 are the same shape
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "not JSON"


@dataclass
class Shape:
    """The structure of one JSON value, or the union of several (the items of an array):
    the types seen, each object field's shape, the items' shape (None: no item seen) and
    the string values seen (for enum fields)."""

    types: set[str] = field(default_factory=set)
    fields: dict[str, Shape] = field(default_factory=dict)
    items: Shape | None = None
    values: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, value: Any) -> Shape:
        return cls().add(value)

    def add(self, value: Any) -> Shape:
        self.types.add(json_type(value))
        if isinstance(value, dict):
            for name, child in value.items():
                self.fields.setdefault(name, Shape()).add(child)
        elif isinstance(value, list):
            for item in value:
                self.items = (self.items or Shape()).add(item)
        elif isinstance(value, str):
            self.values.add(value)
        return self

    def described(self) -> str:
        return "|".join(sorted(self.types - {"null"})) or "null"


_NAME = re.compile(r"^[A-Za-z_$][\w$-]*$")


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if _NAME.match(name) else f"{path}[{json.dumps(name)}]"


def _a(kind: str) -> str:
    """`a string`, `an object`, `null`."""
    if kind == "null":
        return kind
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def diff_json(service: Any, sandbox: Any,
              enums: Mapping[str, tuple[str, ...]] | None = None
              ) -> tuple[list[Difference], list[Note]]:
    """Every structural difference between two JSON answers (parsed), and notes of what
    could not be compared.

    - A field only one side has is `missing` (service only) or `extra` (sandbox only),
      once, at its own path (not again for what it holds).
    - Types are JSON's (number covers integers); `null` matches any type (a value that
      is absent in that record, not a change of shape).
    - An array's items are compared as the union of their shapes, at `path[]`. Both
      empty: nothing to compare. One empty: a note, as test data, not the API, decides
      whether a user has records.
    - At a path named in `enums`, a string value is a difference when it is neither a
      published value nor one the other side answered there.
    """
    differences: list[Difference] = []
    notes: list[Note] = []
    _compare(Shape.of(service), Shape.of(sandbox), "$", enums or {}, differences, notes)
    return differences, notes


def _compare(service: Shape, sandbox: Shape, path: str, enums: Mapping[str, tuple[str, ...]],
             differences: list[Difference], notes: list[Note]) -> None:
    ours, theirs = sandbox.types - {"null"}, service.types - {"null"}
    if ours and theirs and ours != theirs:
        differences.append(Difference(
            "type", path, service.described(), sandbox.described(),
            f"{path}: the service answers {_a(service.described())}, the sandbox "
            f"{_a(sandbox.described())}"))
    if "object" in ours and "object" in theirs:
        for name, shape in service.fields.items():
            child = _child(path, name)
            if name in sandbox.fields:
                _compare(shape, sandbox.fields[name], child, enums, differences, notes)
            else:
                differences.append(Difference(
                    "missing", child, shape.described(), None,
                    f"{child}: only the service answers this field ({_a(shape.described())}); "
                    "the sandbox has no such field"))
        for name, shape in sandbox.fields.items():
            if name not in service.fields:
                child = _child(path, name)
                differences.append(Difference(
                    "extra", child, None, shape.described(),
                    f"{child}: only the sandbox answers this field ({_a(shape.described())}); "
                    "the service has no such field"))
    if "array" in ours and "array" in theirs:
        if service.items is not None and sandbox.items is not None:
            _compare(service.items, sandbox.items, f"{path}[]", enums, differences, notes)
        elif service.items is not None or sandbox.items is not None:
            empty, full = (SERVICE, SANDBOX) if service.items is None else (SANDBOX, SERVICE)
            notes.append(Note(path, f"{path}: the {empty} answered no items, the {full} some: "
                                    "their fields were not compared"))
    published = enums.get(path)
    if published is not None:
        for side, values, other in ((SERVICE, service.values, sandbox.values),
                                    (SANDBOX, sandbox.values, service.values)):
            for value in sorted(values - set(published) - other):
                differences.append(Difference(
                    "enum", path, value if side == SERVICE else None,
                    value if side == SANDBOX else None,
                    f"{path}: the {side} answered {value!r}, which is not a published value "
                    f"({', '.join(published)}) and the "
                    f"{SANDBOX if side == SERVICE else SERVICE} never answered it"))


def _expected(status: int, expect: str) -> bool:
    if expect.endswith("xx"):
        return str(status)[:1] == expect[:1]
    return str(status) == expect


def diff_answers(probe: Probe, service: tuple[int, Any], sandbox: tuple[int, Any]
                 ) -> tuple[list[Difference], list[Note]]:
    """The differences of one probe's two answers, `(status, parsed body or NOT_JSON)`.
    Statuses first: when they differ, that is the one difference (the bodies of a 200 and
    a 404 have nothing in common). Bodies are compared only when both are 2xx: the real
    service's error body is not published (real-service-facts.md, fact 3)."""
    (service_status, service_body), (sandbox_status, sandbox_body) = service, sandbox
    if service_status != sandbox_status:
        return [Difference("status", "status", service_status, sandbox_status,
                           f"status: the service answered {service_status}, the sandbox "
                           f"{sandbox_status}", probe.name)], []
    notes = []
    if not _expected(service_status, probe.expect):
        notes.append(Note("status", f"status: both answered {service_status}; the "
                                    f"documentation says {probe.expect}", probe.name))
    if not 200 <= service_status < 300:
        return [], notes
    differences, body_notes = diff_json(service_body, sandbox_body, probe.enums)
    return ([replace(d, probe=probe.name) for d in differences],
            notes + [replace(n, probe=probe.name) for n in body_notes])


# -- what is refused ------------------------------------------------------------------------------

PRODUCTION_WORDS = ("production", "prod", "live")


def checked_url(url: str) -> str:
    problem = http_url_problem(url)
    if problem is not None:
        raise VerifyError(f"URL {url!r} {problem}" if problem.startswith("is ")
                          else f"URL {url!r}: {problem}")
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        raise VerifyError(f"URL {url!r}: give the service's base URL, without a query or "
                          "fragment")
    return url.rstrip("/")


def is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _says_production(credential: str) -> bool:
    first = re.split(r"[-_.:]", credential.strip().lower(), maxsplit=1)[0]
    return first in PRODUCTION_WORDS or credential.lower().startswith("sk_live")


def refusal(url: str, key: str, secret: str, *, trust_host: bool = False) -> str | None:
    """Why a run against `url` with these keys is refused before anything is sent (None:
    it is not). Keys that say production are always refused; a host that is neither
    loopback nor named `*sandbox*` is refused unless `trust_host` (--i-know-this-is-sandbox)."""
    if _says_production(key) or _says_production(secret):
        return ("the API key or secret says production (it starts with production, prod or "
                "live): verify-against runs only against a sandbox")
    host = urlsplit(url).hostname or ""
    if not trust_host and not is_loopback(host) and "sandbox" not in host.lower():
        return (f"{host} does not look like a sandbox host (neither loopback nor a name with "
                "'sandbox' in it); if it is a sandbox, add --i-know-this-is-sandbox")
    return None


def production_signal(status: int, headers: Mapping[str, str], body: Any) -> str | None:
    """What, in the answer to `GET /health` (asked before anything else), says production:
    an `x-environment` header, or an `environment` field (a payroll-sandbox started with
    --environment production answers `{"data": {"environment": "production"}}`)."""
    header = headers.get("x-environment", "")
    if header.strip().lower() == "production":
        return "its GET /health answered x-environment: production"
    if 200 <= status < 300 and isinstance(body, dict):
        for holder in (body, body.get("data")):
            if isinstance(holder, dict) and holder.get("environment") == "production":
                return "its GET /health says environment production"
    return None


# -- the run ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """One side: where it is and the keys it takes."""

    side: str
    base_url: str
    key: str
    secret: str


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any          # parsed JSON, or NOT_JSON
    path: str          # the path sent

    def record(self) -> dict[str, Any]:
        return {"status": self.status, "path": self.path,
                "json": self.body is not NOT_JSON}


@dataclass(frozen=True)
class ProbeResult:
    probe: Probe
    service: Answer | None     # None: not sent (see the notes)
    sandbox: Answer | None
    differences: tuple[Difference, ...]
    notes: tuple[Note, ...]

    def line(self) -> str:
        probe = self.probe
        state = "DIFF" if self.differences else ("skip" if self.service is None
                                                 or self.sandbox is None else "same")
        path = (self.service or self.sandbox).path if (self.service or self.sandbox) else probe.path
        statuses = (f"{self.service.status}" if self.service and self.sandbox
                    and self.service.status == self.sandbox.status
                    else f"service {_status(self.service)}, sandbox {_status(self.sandbox)}")
        request = f"{probe.method} {path}"
        lines = [f"{state:<4}  {probe.name:<36} {request:<46} {statuses}"]
        lines += [f"      {d.kind}: {d.message}" for d in self.differences]
        return "\n".join(lines)

    def record(self) -> dict[str, Any]:
        probe = self.probe
        return {"name": probe.name, "method": probe.method, "path": probe.path,
                "expect": probe.expect, "what": probe.what,
                "service": self.service.record() if self.service else None,
                "sandbox": self.sandbox.record() if self.sandbox else None,
                "differences": len(self.differences)}


def _status(answer: Answer | None) -> str:
    return "not sent" if answer is None else str(answer.status)


@dataclass(frozen=True)
class Report:
    """The whole run; `ok` when no probe found a difference (notes do not count)."""

    url: str
    sandbox_url: str
    identifier: str
    results: tuple[ProbeResult, ...]

    @property
    def differences(self) -> list[Difference]:
        return [d for r in self.results for d in r.differences]

    @property
    def notes(self) -> list[Note]:
        return [n for r in self.results for n in r.notes]

    @property
    def ok(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        count, probes = len(self.differences), sum(1 for r in self.results if r.differences)
        text = (f"{count} difference{'s' * (count != 1)} in {probes} of {len(self.results)} "
                f"probes" if count else f"no differences in {len(self.results)} probes")
        return text + f" ({len(self.notes)} notes)" * bool(self.notes)

    def text(self) -> str:
        lines = [f"verify-against {self.url} (service) and {self.sandbox_url} (in-process "
                 f"sandbox), test user {self.identifier}"]
        lines += [r.line() for r in self.results]
        lines += [f"note: {n.probe}: {n.message}" for n in self.notes]
        lines.append(self.summary())
        return "\n".join(lines)

    __str__ = text

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "sandboxUrl": self.sandbox_url, "identifier": self.identifier,
                "ok": self.ok, "summary": self.summary(),
                "probes": [r.record() for r in self.results],
                "differences": [d.record() for d in self.differences],
                "notes": [n.record() for n in self.notes]}


def verify(url: str, key: str, secret: str, *, identifier: str | None = None,
           trust_host: bool = False, timeout: float = REQUEST_TIMEOUT) -> Report:
    """Runs every probe against `url` and an in-process sandbox; the Report.
    Raises VerifyError when the run cannot be made (and sends nothing when refused)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(verify_async(url, key, secret, identifier=identifier,
                                        trust_host=trust_host, timeout=timeout))
    raise RuntimeError("verify() blocks: inside a running event loop, await verify_async()")


async def verify_async(url: str, key: str, secret: str, *, identifier: str | None = None,
                       trust_host: bool = False, timeout: float = REQUEST_TIMEOUT) -> Report:
    """`verify`, awaitable."""
    import aiohttp

    base = checked_url(url)
    if not key.strip() or not secret.strip():
        raise VerifyError("--key and --secret must not be empty")
    identifier = _checked_identifier(identifier)
    reason = refusal(base, key, secret, trust_host=trust_host)
    if reason is not None:
        raise VerifyError(f"refused to probe {base}: {reason}")
    service = Target(SERVICE, base, key, secret)
    async with aiohttp.ClientSession(
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        client = _Client(session, timeout)
        status, headers, body = await client.send(service, "GET", "/health", None, NO_KEYS)
        signal = production_signal(status, headers, body)
        if signal is not None:
            raise VerifyError(f"refused to probe {base}: {signal}; verify-against runs only "
                              "against a sandbox")
        async with in_process_sandbox(identifier) as sandbox:
            results = await _run(client, service, sandbox, identifier)
    return Report(url=base, sandbox_url=sandbox.base_url, identifier=identifier,
                  results=tuple(results))


def _checked_identifier(identifier: str | None) -> str:
    if identifier is None:
        return f"verify-{secrets.token_hex(6)}"
    if not identifier.strip() or len(identifier) > MAX_IDENTIFIER or not identifier.isprintable():
        raise VerifyError(f"--identifier must be 1 to {MAX_IDENTIFIER} printable characters")
    return identifier


async def _run(client: _Client, service: Target, sandbox: Target,
               identifier: str) -> list[ProbeResult]:
    companies: dict[str, str | None] = {}   # side -> the first hit of its company-search
    results = []
    for probe in PROBES:
        answers: dict[str, Answer | None] = {}
        notes: list[Note] = []
        sends = {}
        for target in (service, sandbox):
            names = {"identifier": quote(identifier, safe=""),
                     "companyId": companies.get(target.side)}
            if "{companyId}" in probe.path and names["companyId"] is None:
                notes.append(Note("", f"not sent to the {target.side}: its company-search "
                                      "answered no company", probe.name))
                answers[target.side] = None
                continue
            path = probe.path.format_map(names)
            body = _filled(probe.body, {"identifier": identifier})
            sends[target.side] = (path, client.send(target, probe.method, path, body,
                                                    probe.credentials))
        if sends:
            # Both sides answer before anything is raised: no request is left running.
            done = await asyncio.gather(*(call for _, call in sends.values()),
                                        return_exceptions=True)
            for outcome in done:
                if isinstance(outcome, BaseException):
                    raise outcome
            for (side, (path, _)), (status, _, body) in zip(sends.items(), done):
                answers[side] = Answer(status, body, path)
        differences: list[Difference] = []
        if answers[SERVICE] is not None and answers[SANDBOX] is not None:
            differences, body_notes = diff_answers(
                probe, (answers[SERVICE].status, answers[SERVICE].body),
                (answers[SANDBOX].status, answers[SANDBOX].body))
            notes += body_notes
        if probe.name == "company-search":
            for side, answer in answers.items():
                companies[side] = _first_company(answer)
        results.append(ProbeResult(probe, answers[SERVICE], answers[SANDBOX],
                                   tuple(differences), tuple(notes)))
    return results


def _filled(value: Any, names: Mapping[str, str]) -> Any:
    """The body with `{identifier}` put into its string values."""
    if isinstance(value, str):
        return value.format_map(names)
    if isinstance(value, dict):
        return {k: _filled(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, names) for v in value]
    return value


def _first_company(answer: Answer | None) -> str | None:
    if answer is None or not 200 <= answer.status < 300:
        return None
    body = answer.body
    hits = body.get("data") if isinstance(body, dict) else body
    if isinstance(hits, list) and hits and isinstance(hits[0], dict):
        company = hits[0].get("_id") or hits[0].get("id")
        if isinstance(company, str) and company:
            return quote(company, safe="")
    return None


class _Client:
    """Sends one request to one side; transport failures become VerifyError."""

    def __init__(self, session: Any, timeout: float) -> None:
        self.session = session
        self.timeout = timeout

    async def send(self, target: Target, method: str, path: str, body: Any,
                   credentials: str) -> tuple[int, Mapping[str, str], Any]:
        import aiohttp

        from . import __version__

        headers = {"accept": "application/json",
                   "user-agent": f"payroll-sandbox-verify-against/{__version__}"}
        if credentials != NO_KEYS:
            headers["x-api-key"] = target.key
            headers["x-api-secret"] = target.secret if credentials == KEYS else WRONG_SECRET
        data = None
        if body is not None:
            headers["content-type"] = "application/json"
            data = json.dumps(body).encode()
        try:
            async with self.session.request(method, target.base_url + path, data=data,
                                            headers=headers, allow_redirects=False) as response:
                raw = await response.content.read(MAX_ANSWER_BYTES)
                status, answer_headers = response.status, response.headers
        except asyncio.TimeoutError:
            raise VerifyError(f"the {target.side} at {target.base_url} did not answer {method} "
                              f"{path} within {self.timeout:g} s") from None
        except aiohttp.ClientError as error:
            raise VerifyError(f"cannot reach the {target.side} at {target.base_url} ({method} "
                              f"{path}): {error}") from None
        try:
            parsed = json.loads(raw) if raw else NOT_JSON
        except ValueError:
            parsed = NOT_JSON
        return status, answer_headers, parsed


@asynccontextmanager
async def in_process_sandbox(identifier: str) -> AsyncIterator[Target]:
    """The bundled sandbox with default settings on a manual clock, on 127.0.0.1 and a
    free port, for as long as the block runs; its default tenant's keys. The test user
    gets one linked account there, as a fixture's `linkedAccounts` entry makes it, so the
    record probes have records to compare with the service's."""
    from .app import create_app
    from .domain.companies import OPERATIONAL
    from .keys import SANDBOX as SANDBOX_KEY
    from .server import SandboxRunner, start_site
    from .settings import Settings

    app = create_app(Settings(host="127.0.0.1", port=0, clock="manual"))
    sandbox = app[SANDBOX_KEY]
    tenant = sandbox.registry.tenants.default()
    runner = SandboxRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        host, port = await start_site(runner, "127.0.0.1", 0)
        company = next((c for c in tenant.companies.ordered()
                        if c.status == OPERATIONAL and "deposit" in c.available_products), None)
        if company is not None:
            tenant.accounts.create(identifier, company, "deposit", emit=False)
        yield Target(SANDBOX, f"http://{host}:{port}", tenant.api_key, tenant.api_secret)
    finally:
        await runner.cleanup()
