"""`payroll-sandbox verify-against URL`: the drift check (docs/verify-against.md).

A fixed list of probes (`PROBES`, data) is sent to the service at URL and to an
in-process sandbox (the bundled fixtures, default settings, a manual clock, on 127.0.0.1
and a free port, its default tenant's keys), and the two answers of each probe are
compared by their structure (`diff_answers`, pure): the status code, then, when both are
2xx, every field by JSON path (only on one side, or of another JSON type) and the values
of fields whose values are a published enum. Values themselves (ids, names, amounts,
dates) are never compared.

The probes cover every operation of real-api-surface.md: each read (on the test user
`--identifier`, the catalog, that user's tasks), and each write on what the run makes for
itself alone: a user of its own (`verify-<random>`), a webhook endpoint and a signing
secret, all removed when the probes are done (`_clean_up`); a write that would reach
anything else is sent as a refused input (an unknown linked account). Before anything
is sent, `refusal` and `production_signal` stop a run aimed at what looks like production.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, urlsplit

from ..validate import http_url_problem
from ..kit.testing import is_loopback

# -- published enums (real-api-surface.md, service-spec.md) --------------------------------------

COMPANY_STATUS = ("operational", "under-maintenance", "disabled")
TASK_STATUS = ("queued", "processing", "completed", "failed")
DEPOSIT_TYPE = ("checking", "savings", "paycard")
DISTRIBUTION_TYPE = ("total", "percent", "fixed")
INCOME_TYPE = ("yearly", "monthly", "weekly", "daily", "hourly")
PAY_CYCLE = ("monthly", "semimonthly", "biweekly", "weekly")
CONFIDENCE = ("HIGH", "LOW")

UNKNOWN_ID = "000000000000000000000000"   # a well-formed id that names nothing
UNKNOWN_TOKEN = "verify-against-unknown-public-token"
WRONG_SECRET = "verify-against-wrong-secret"
SEARCH_QUERY = "a"
# The run's webhook endpoint: a reserved name (RFC 2606) that no event it names reaches
# while it exists (company-deleted: the run deletes no company).
HOOK_URL = "https://example.com/payroll-sandbox-verify-against"
HOOK_EVENTS = ["company-deleted"]
SECRET_NAME = "payroll-sandbox-verify-against"
# What PUT /user stores for the run's user: a published test routing number, made-up digits.
PAYMENT_METHODS = {"bankAccounts": [{"accountNumber": "000123456789",
                                     "routingNumber": "021000021", "accountType": "checking"}],
                   "cards": [{"brand": "Visa", "lastFour": "4242"}]}
NO_PAYMENT_METHODS = {"bankAccounts": [], "cards": []}

# The credentials a probe sends: the API key and secret, a wrong secret, none, or the
# run user's public token (captured as `publicToken`).
KEYS, BAD_SECRET, NO_KEYS, TOKEN = "keys", "wrong-secret", "none", "public-token"
SERVICE, SANDBOX = "service", "sandbox"

REQUEST_TIMEOUT = 30.0          # wall seconds for one answer
MAX_ANSWER_BYTES = 10 * 2**20   # an answer is read whole, up to this much
MAX_DEPTH = 100                 # JSON nested deeper is not read (no API nests so deep)
MAX_IDENTIFIER = 200
MAX_CAPTURED = 500              # a captured id or name longer than this is not used
RECORD_KINDS = ("income", "employment", "identity", "deposit-accounts", "statements", "taxes",
                "timesheets")
MAX_LINKED_COMPANIES = 12       # companies the in-process test user is linked at, at most


@dataclass(frozen=True)
class Probe:
    """One request sent to both sides.

    `path`, string values of `body` and the public token of `credentials=TOKEN` may name
    `{identifier}` (the test user), `{runUser}` (the run's own user) and what an earlier
    probe of the same side captured (`captures`: name -> JSON path in its 2xx answer,
    `$.data[0]._id`; read bare too, as the real service may answer without `data`). A
    probe whose names a side has not captured is not sent to that side (a note says so).
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
    captures: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def names(self) -> set[str]:
        """The names its request needs."""
        text = self.path + json.dumps(self.body) + ("{publicToken}" if self.credentials == TOKEN
                                                    else "")
        return set(re.findall(r"\{(\w+)\}", text))


def _data_probe(kind: str, query: str = "", enums: Mapping[str, tuple[str, ...]] | None = None
                ) -> Probe:
    return Probe(kind, "GET", f"/{kind}/{{identifier}}{query}", "200", enums=enums or {},
                 what=f"the test user's {kind} records")


COMPANY_ENUMS = {"$.data[].status": COMPANY_STATUS}
HOOK = {"url": HOOK_URL, "eventTypes": HOOK_EVENTS}

# The probes, in the order they run; the names are a contract (docs, --json, tests).
PROBES: tuple[Probe, ...] = (
    # The run's user (made here) and its public token.
    Probe("access-token", "POST", "/access-token", "200", {"identifier": "{runUser}"},
          captures={"publicToken": "$.data.publicToken"},
          what="a public token for the run's user (creates the user)"),
    Probe("access-token-without-identifier", "POST", "/access-token", "4xx", {},
          what="the required identifier left out"),
    Probe("access-token-lifetime-out-of-range", "POST", "/access-token", "4xx",
          {"identifier": "{runUser}", "tokenLifetime": 60},
          what="tokenLifetime under the published 30 minutes"),
    Probe("access-token-wrong-secret", "POST", "/access-token", "401",
          {"identifier": "{runUser}"}, credentials=BAD_SECRET, what="a wrong API secret"),
    # The catalog.
    Probe("company-search", "POST", "/company/search", "200", {"query": SEARCH_QUERY},
          enums=COMPANY_ENUMS, what="a fuzzy search",
          captures={"companyId": "$.data[0]._id", "companyName": "$.data[0].name"}),
    Probe("company-search-product-and-products", "POST", "/company/search", "400",
          {"query": SEARCH_QUERY, "product": "deposit", "products": ["deposit"]},
          what="both product and products"),
    Probe("company-search-without-query", "POST", "/company/search", "4xx", {},
          what="the required query left out"),
    Probe("company-search-pay-link", "POST", "/company/search", "200",
          {"query": SEARCH_QUERY, "scopes": ["pay-link"]}, enums=COMPANY_ENUMS,
          captures={"payLinkCompanyId": "$.data[0]._id"}, what="a search of pay-link companies"),
    Probe("company-list", "GET", "/company/list?limit=5", "200", enums=COMPANY_ENUMS,
          what="the catalog's first five"),
    Probe("company-list-without-keys", "GET", "/company/list?limit=5", "401",
          credentials=NO_KEYS, what="no credentials"),
    Probe("company-details", "GET", "/company/{companyId}/details", "200",
          enums={"$.data.status": COMPANY_STATUS}, what="the first search hit's details"),
    Probe("company-details-unknown", "GET", f"/company/{UNKNOWN_ID}/details", "404",
          what="an id no company has"),
    # The test user's linked accounts and records.
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
    # The test user's tasks.
    Probe("user-tasks", "GET", "/user/{identifier}/tasks", "200",
          enums={"$.data[].status": TASK_STATUS}, captures={"taskId": "$.data[0]._id"},
          what="the test user's tasks"),
    Probe("task-details", "GET", "/task/{taskId}/details", "200",
          enums={"$.data.status": TASK_STATUS}, captures={"fileId": "$.data.files[0]._id"},
          what="the test user's first task"),
    Probe("task-status", "GET", "/task/{taskId}/status", "200",
          enums={"$.data.task.status": TASK_STATUS}, what="the test user's first task"),
    Probe("task-file-generate-url", "GET", "/task/{taskId}/file/{fileId}/generate-url", "200",
          what="a signed URL for that task's first file"),
    Probe("task-details-unknown", "GET", f"/task/{UNKNOWN_ID}/details", "404",
          what="an id no task has"),
    Probe("task-status-unknown", "GET", f"/task/{UNKNOWN_ID}/status", "404",
          enums={"$.data.task.status": TASK_STATUS}, what="an id no task has"),
    Probe("task-prescreen", "POST", "/task/prescreen", "200",
          {"company": {"name": "{companyName}", "id": "{companyId}"}, "product": "deposit"},
          enums={"$.data.confidence": CONFIDENCE}, what="the first search hit, for deposit"),
    # Pay-link.
    Probe("pay-link-actions-for-company", "GET", "/pay-link/actions-for-company/"
          "{payLinkCompanyId}", "200", what="the first pay-link search hit's actions"),
    Probe("pay-link-accounts", "GET", "/pay-link/accounts", "200", credentials=TOKEN,
          headers={"x-api-version": "v2"},
          what="the run user's pay-link accounts (its public token, as the vendor's client)"),
    # Writes on the run's user; writes that would reach anything else, refused.
    Probe("user-put", "PUT", "/user", "200",
          {"identifier": "{runUser}", "data": PAYMENT_METHODS},
          what="a bank account and a card for the run's user"),
    Probe("user-end-monitoring", "PUT", "/user/{runUser}/end-monitoring", "200",
          what="the run user's continuous access ended"),
    Probe("task-workflow-unknown-linked-account", "POST", "/task-workflow/from-linked-account",
          "4xx", {"linkedAccount": UNKNOWN_ID, "tasks": [{"operation": "deposit"}]},
          what="a refresh of a linked account nobody has"),
    Probe("task-create-unknown-linked-account", "POST", "/task/create", "4xx",
          {"product": "deposit", "linkedAccount": UNKNOWN_ID},
          what="the legacy task creation, on a linked account nobody has"),
    # The run's own webhook endpoint and signing secret, made and deleted.
    Probe("webhook-endpoint-create", "POST", "/webhooks/endpoints", "200", HOOK,
          captures={"endpointId": "$.data._id"}, what=f"an endpoint at {HOOK_URL}"),
    Probe("webhook-endpoint-update", "PUT", "/webhooks/endpoints/{endpointId}", "200",
          {**HOOK, "eventTypes": [*HOOK_EVENTS, "company-updated"]},
          what="the run's endpoint, with another event type"),
    Probe("webhook-endpoints", "GET", "/webhooks/endpoints", "200",
          what="the endpoints (the run's among them)"),
    Probe("webhook-endpoint-delete", "DELETE", "/webhooks/endpoints/{endpointId}", "200",
          what="the run's endpoint deleted"),
    Probe("secret-create", "POST", "/secrets", "200", {"name": SECRET_NAME},
          captures={"secretId": "$.data._id"}, what=f"a signing secret named {SECRET_NAME}"),
    Probe("secrets", "GET", "/secrets", "200", what="the signing secrets (the run's among them)"),
    Probe("secret-delete", "DELETE", "/secrets/{secretId}", "200",
          what="the run's signing secret deleted"),
    Probe("access-token-revoke", "PUT", "/access-token/{publicToken}/revoke", "200",
          what="the run user's public token revoked"),
    Probe("access-token-revoke-unknown", "PUT", f"/access-token/{UNKNOWN_TOKEN}/revoke", "4xx",
          what="a token nobody was given"),
)

# Which probe captures each name (for the notes of a probe that could not be sent).
CAPTURED_BY = {name: probe.name for probe in PROBES for name in probe.captures}


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


@dataclass(frozen=True)
class Unreadable:
    """An answer whose body could not be read as JSON, and why (`not JSON`, `nested
    deeper than 100 levels`, `larger than 10 MiB`)."""

    reason: str


NOT_JSON = Unreadable("not JSON")


def parse_answer(raw: bytes) -> Any:
    """The JSON value of an answer's body, or an Unreadable saying why not. Never raises:
    whatever a service sends is an answer to compare, not a crash of the command."""
    if not raw.strip():
        return NOT_JSON
    try:
        value = json.loads(raw)
    except RecursionError:   # the decoder's own depth limit, far below 200,000 levels
        return Unreadable(f"nested deeper than {MAX_DEPTH} levels")
    except ValueError:       # JSONDecodeError, and UnicodeDecodeError of bytes not UTF-8
        return NOT_JSON
    if depth(value) > MAX_DEPTH:
        return Unreadable(f"nested deeper than {MAX_DEPTH} levels")
    return value


def depth(value: Any) -> int:
    """How deep arrays and objects nest in a parsed JSON value (a scalar: 0), without
    recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        current, level = stack.pop()
        children = (current.values() if isinstance(current, dict)
                    else current if isinstance(current, list) else None)
        if children is None:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children
                     if isinstance(child, (dict, list)))
    return deepest


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
    """The differences of one probe's two answers, `(status, parsed body or Unreadable)`.
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
    unreadable = _unreadable(probe, service_body, sandbox_body)
    if unreadable is not None:
        return unreadable, notes
    differences, body_notes = diff_json(service_body, sandbox_body, probe.enums)
    return ([replace(d, probe=probe.name) for d in differences],
            notes + [replace(n, probe=probe.name) for n in body_notes])


def _unreadable(probe: Probe, service: Any, sandbox: Any) -> list[Difference] | None:
    """When a side's 2xx body could not be read: one difference at `$` saying why (none
    when neither side's could, for the same reason); None when both were read."""
    if not isinstance(service, Unreadable) and not isinstance(sandbox, Unreadable):
        return None
    if service == sandbox:
        return []

    def said(side: str, body: Any) -> str:
        if isinstance(body, Unreadable):
            return f"the {side}'s answer could not be read ({body.reason})"
        return f"the {side}'s is {_a(json_type(body))}"

    return [Difference("type", "$", json_type(service), json_type(sandbox),
                       f"$: {said(SERVICE, service)}; {said(SANDBOX, sandbox)}", probe.name)]


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




def _words(text: str) -> list[str]:
    return re.split(r"[-_.:]", text.strip().lower())


def says_production(credential: str) -> bool:
    """A key or secret shaped like a production one, whatever its case: its first word
    is production, prod or live (`production-key-acme-0001`, `PROD_...`, `live:...`), or
    a short kind prefix comes first and then one of them, as live keys of many APIs are
    written (`sk_live_...`, `sk_prod_...`, `pk_live_...`)."""
    words = _words(credential)
    return words[0] in PRODUCTION_WORDS or (
        len(words) > 1 and len(words[0]) <= 3 and words[1] in PRODUCTION_WORDS)


def says_production_host(host: str) -> bool:
    """A host name with production, prod or live as one of its words
    (`api.production.vendor.example`, `sandbox-live.vendor.example`), whatever its case."""
    return any(word in PRODUCTION_WORDS for word in _words(host))


def refusal(url: str, key: str, secret: str, *, trust_host: bool = False) -> str | None:
    """Why a run against `url` with these keys is refused before anything is sent (None:
    it is not). Keys or a host name that say production are always refused; a host that is
    neither loopback nor named `*sandbox*` is refused unless `trust_host`
    (--i-know-this-is-sandbox)."""
    if says_production(key) or says_production(secret):
        return ("the API key or secret says production (it starts with production, prod or "
                "live, or with a prefix such as sk_ and then one of them): verify-against runs "
                "only against a sandbox")
    host = urlsplit(url).hostname or ""
    if says_production_host(host):
        return (f"the host {host} says production (production, prod or live is one of its "
                "words): verify-against runs only against a sandbox")
    if not trust_host and not is_loopback(host) and "sandbox" not in host.lower():
        return (f"{host} does not look like a sandbox host (neither loopback nor a name with "
                "'sandbox' in it); if it is a sandbox, add --i-know-this-is-sandbox")
    return None


def production_signal(status: int, headers: Mapping[str, str], body: Any) -> str | None:
    """What, in the answer to `GET /health` (asked before anything else), says production,
    whatever its case: an `x-environment` header, or an `environment` field (a
    payroll-sandbox started with --environment production answers `{"data":
    {"environment": "production"}}`), of production, prod or live."""
    header = headers.get("x-environment", "")
    if header.strip().lower() in PRODUCTION_WORDS:
        return f"its GET /health answered x-environment: {header.strip()}"
    if 200 <= status < 300 and isinstance(body, dict):
        for holder in (body, body.get("data")):
            environment = holder.get("environment") if isinstance(holder, dict) else None
            if isinstance(environment, str) and environment.strip().lower() in PRODUCTION_WORDS:
                return f"its GET /health says environment {environment.strip()}"
    return None


def is_payroll_sandbox(status: int, body: Any) -> bool:
    """Whether the answer to `GET /health` is a payroll-sandbox's (`{"data": {status,
    environment, vendor, version, spec, ...}}`): its control plane can remove the run's
    user (the real service publishes no operation that does)."""
    data = body.get("data") if 200 <= status < 300 and isinstance(body, dict) else None
    return isinstance(data, dict) and {"environment", "vendor", "version", "spec"} <= set(data)


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
    body: Any          # parsed JSON, or an Unreadable
    path: str          # the path sent

    def record(self) -> dict[str, Any]:
        unreadable = self.body if isinstance(self.body, Unreadable) else None
        return {"status": self.status, "path": self.path, "json": unreadable is None,
                "unreadable": unreadable and unreadable.reason}


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
class Cleanup:
    """One request of the clean-up on the service: what it undoes, and how it went
    (`status` None: it could not be sent, `error` says why)."""

    what: str
    method: str
    path: str
    status: int | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def outcome(self) -> str:
        return str(self.status) if self.status is not None else f"not sent: {self.error}"

    def line(self) -> str:
        return f"clean {self.what:<36} {self.method} {self.path:<46} {self.outcome}"

    def record(self) -> dict[str, Any]:
        return {"what": self.what, "method": self.method, "path": self.path,
                "status": self.status, "ok": self.ok, "error": self.error}


@dataclass(frozen=True)
class Report:
    """The whole run; `ok` when no probe found a difference (notes do not count)."""

    url: str
    sandbox_url: str
    identifier: str
    run_user: str
    results: tuple[ProbeResult, ...]
    cleanup: tuple[Cleanup, ...] = ()
    cleanup_notes: tuple[Note, ...] = ()

    @property
    def differences(self) -> list[Difference]:
        return [d for r in self.results for d in r.differences]

    @property
    def notes(self) -> list[Note]:
        return [n for r in self.results for n in r.notes] + list(self.cleanup_notes)

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
                 f"sandbox), test user {self.identifier}, run user {self.run_user}"]
        lines += [r.line() for r in self.results]
        lines += [c.line() for c in self.cleanup]
        lines += [f"note: {n.probe}: {n.message}" for n in self.notes]
        lines.append(self.summary())
        return "\n".join(lines)

    __str__ = text

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "sandboxUrl": self.sandbox_url, "identifier": self.identifier,
                "runUser": self.run_user, "ok": self.ok, "summary": self.summary(),
                "probes": [r.record() for r in self.results],
                "cleanup": [c.record() for c in self.cleanup],
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
    run_user = f"verify-{secrets.token_hex(6)}"
    identifier = run_user if identifier is None else _checked_identifier(identifier)
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
        removable = is_payroll_sandbox(status, body)
        async with in_process_sandbox(identifier) as sandbox:
            run = _Run(client, service, sandbox, identifier, run_user)
            try:
                await run.probes()
            except VerifyError as error:   # the service stopped answering: undo what it can
                await run.clean_up(removable)
                raise VerifyError(f"{error} ({run.cleanup_summary()})") from None
            await run.clean_up(removable)
    return Report(url=base, sandbox_url=sandbox.base_url, identifier=identifier,
                  run_user=run_user, results=tuple(run.results), cleanup=tuple(run.cleanup),
                  cleanup_notes=tuple(run.cleanup_notes))


def _checked_identifier(identifier: str) -> str:
    if not identifier.strip() or len(identifier) > MAX_IDENTIFIER or not identifier.isprintable():
        raise VerifyError(f"--identifier must be 1 to {MAX_IDENTIFIER} printable characters")
    return identifier


class _Run:
    """The probes of one run, in order, and the clean-up after them: what each side's
    answers captured (`found`), and everything sent to the service that the clean-up
    undoes."""

    def __init__(self, client: _Client, service: Target, sandbox: Target, identifier: str,
                 run_user: str) -> None:
        self.client, self.service, self.sandbox = client, service, sandbox
        self.run_user = run_user
        fixed = {"identifier": identifier, "runUser": run_user}
        self.found: dict[str, dict[str, str]] = {SERVICE: dict(fixed), SANDBOX: dict(fixed)}
        self.results: list[ProbeResult] = []
        self.tokens: list[str] = []        # public tokens the service gave the run's user
        self.revoked: set[str] = set()     # ... and those its access-token-revoke revoked
        self.deleted: set[str] = set()     # endpointId, secretId: deleted by their probe
        self.cleanup: list[Cleanup] = []
        self.cleanup_notes: list[Note] = []

    async def probes(self) -> None:
        for probe in PROBES:
            self.results.append(await self.probe(probe))

    async def probe(self, probe: Probe) -> ProbeResult:
        answers: dict[str, Answer | None] = {SERVICE: None, SANDBOX: None}
        notes: list[Note] = []
        sends = {}
        for target in (self.service, self.sandbox):
            found = self.found[target.side]
            missing = sorted(probe.names - set(found))
            if missing:
                notes.append(Note("", f"not sent to the {target.side}: "
                                      f"{self._unknown(missing, target.side)}", probe.name))
                continue
            path = probe.path.format_map({k: quote(v, safe="") for k, v in found.items()})
            body = _filled(probe.body, found)
            token = found.get("publicToken") if probe.credentials == TOKEN else None
            sends[target.side] = (path, self.client.send(
                target, probe.method, path, body, probe.credentials, token=token,
                headers=probe.headers))
        if sends:
            # Both sides answer before anything is raised: no request is left running.
            done = await asyncio.gather(*(call for _, call in sends.values()),
                                        return_exceptions=True)
            for outcome in done:
                if isinstance(outcome, BaseException):
                    raise outcome
            for (side, (path, _)), (status, _, body) in zip(sends.items(), done):
                answers[side] = Answer(status, body, path)
        for side, answer in answers.items():
            if answer is not None:
                self._capture(probe, side, answer)
        differences: list[Difference] = []
        service, sandbox = answers[SERVICE], answers[SANDBOX]
        if service is not None and sandbox is not None:
            differences, body_notes = diff_answers(probe, (service.status, service.body),
                                                   (sandbox.status, sandbox.body))
            notes += body_notes
        return ProbeResult(probe, service, sandbox, tuple(differences), tuple(notes))

    def _unknown(self, names: list[str], side: str) -> str:
        """`no taskId (its user-tasks answered none)`, for each name."""
        said = []
        for name in names:
            source = CAPTURED_BY[name]
            result = next(r for r in self.results if r.probe.name == source)
            sent = (result.service if side == SERVICE else result.sandbox) is not None
            said.append(f"no {name} (its {source} {'answered none' if sent else 'was not sent'})")
        return "; ".join(said)

    def _capture(self, probe: Probe, side: str, answer: Answer) -> None:
        if not 200 <= answer.status < 300:
            return
        for name, path in probe.captures.items():
            value = _captured(answer.body, path)
            if value is not None:
                self.found[side][name] = value
        if side != SERVICE:
            return
        token = _captured(answer.body, "$.data.publicToken")
        if probe.method == "POST" and probe.path == "/access-token" and token is not None:
            self.tokens.append(token)
        deletes = re.fullmatch(r"/\w[\w/-]*/\{(\w+)\}", probe.path)
        if probe.method == "DELETE" and deletes:
            self.deleted.add(deletes[1])
        elif probe.name == "access-token-revoke":
            self.revoked.add(self.found[SERVICE]["publicToken"])

    async def clean_up(self, removable: bool) -> None:
        """Undoes on the service what the run made there that its probes did not undo
        already: the run's webhook endpoint and signing secret, the run user's public
        tokens, then the run's user itself (a payroll-sandbox's control plane removes it;
        the real service publishes no operation that does: its stored payment methods
        are emptied instead, and a note names the user left). Best effort: a request that
        fails is a line of the report, and the rest are still sent."""
        found = self.found[SERVICE]
        steps = []
        if "endpointId" in found and "endpointId" not in self.deleted:
            steps.append(("the run's webhook endpoint", "DELETE",
                          f"/webhooks/endpoints/{quote(found['endpointId'], safe='')}", None))
        if "secretId" in found and "secretId" not in self.deleted:
            steps.append(("the run's signing secret", "DELETE",
                          f"/secrets/{quote(found['secretId'], safe='')}", None))
        for token in dict.fromkeys(self.tokens):
            if token not in self.revoked:
                steps.append(("a public token of the run's user", "PUT",
                              f"/access-token/{quote(token, safe='')}/revoke", None))
        user = quote(self.run_user, safe="")
        if removable:
            steps.append(("the run's user", "DELETE", f"/_sandbox/users/{user}", None))
        else:
            steps.append(("the run user's payment methods", "PUT", "/user",
                          {"identifier": self.run_user, "data": NO_PAYMENT_METHODS}))
        for what, method, path, body in steps:
            try:
                status, _, _ = await self.client.send(self.service, method, path, body, KEYS)
            except VerifyError as error:
                self.cleanup.append(Cleanup(what, method, path, None, str(error)))
            else:
                self.cleanup.append(Cleanup(what, method, path, status))
        for step in self.cleanup:
            if not step.ok:
                self.cleanup_notes.append(Note("", f"{step.what} may be left on the service: "
                                                   f"{step.method} {step.path}: {step.outcome}",
                                               "clean-up"))
        if not removable:
            self.cleanup_notes.append(Note(
                "", f"the service publishes no operation that removes a user: the run's user "
                    f"{self.run_user} stays on it, without public tokens or payment methods, "
                    "its monitoring ended", "clean-up"))

    def cleanup_summary(self) -> str:
        """One clause on how the clean-up went, for a run that could not be finished."""
        left = [f"{step.what} ({step.method} {step.path})" for step in self.cleanup
                if not step.ok]
        if not left:
            return "the clean-up removed what the run had made on the service"
        return "the clean-up could not remove, on the service: " + "; ".join(left)


def _filled(value: Any, names: Mapping[str, str]) -> Any:
    """The body with the names put into its string values."""
    if isinstance(value, str):
        return value.format_map(names)
    if isinstance(value, dict):
        return {k: _filled(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, names) for v in value]
    return value


_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")


def _captured(body: Any, path: str) -> str | None:
    """The string at `path` (`$.data[0]._id`) of an answer; a `$.data...` path is read bare
    as well (the real service's envelope is not the same everywhere: real-api-surface.md,
    Conventions). None: no usable string there."""
    for candidate in (path, "$" + path[len("$.data"):]) if path.startswith("$.data") else (path,):
        value = body
        for name, index in _STEP.findall(candidate[1:]):
            if name and isinstance(value, dict):
                value = value.get(name)
            elif index and isinstance(value, list) and int(index) < len(value):
                value = value[int(index)]
            else:
                value = None
                break
        if isinstance(value, str) and value.strip() and len(value) <= MAX_CAPTURED \
                and value.isprintable():
            return value
    return None


class _Client:
    """Sends one request to one side and reads its whole answer; transport failures
    become VerifyError."""

    def __init__(self, session: Any, timeout: float) -> None:
        self.session = session
        self.timeout = timeout

    async def send(self, target: Target, method: str, path: str, body: Any, credentials: str,
                   *, token: str | None = None, headers: Mapping[str, str] | None = None
                   ) -> tuple[int, Mapping[str, str], Any]:
        import aiohttp

        from .. import __version__

        sent = {"accept": "application/json",
                "user-agent": f"payroll-sandbox-verify-against/{__version__}", **(headers or {})}
        if credentials in (KEYS, BAD_SECRET):
            sent["x-api-key"] = target.key
            sent["x-api-secret"] = target.secret if credentials == KEYS else WRONG_SECRET
        elif credentials == TOKEN and token is not None:
            sent["x-public-token"] = token
        data = None
        if body is not None:
            sent["content-type"] = "application/json"
            data = json.dumps(body).encode()
        try:
            async with self.session.request(method, target.base_url + path, data=data,
                                            headers=sent, allow_redirects=False) as response:
                raw = await _whole(response.content)
                status, answer_headers = response.status, response.headers
        except asyncio.TimeoutError:
            raise VerifyError(f"the {target.side} at {target.base_url} did not answer {method} "
                              f"{path} within {self.timeout:g} s") from None
        except aiohttp.ClientError as error:
            raise VerifyError(f"cannot reach the {target.side} at {target.base_url} ({method} "
                              f"{path}): {error}") from None
        parsed = (Unreadable(f"larger than {MAX_ANSWER_BYTES // 2**20} MiB") if raw is None
                  else parse_answer(raw))
        return status, answer_headers, parsed


async def _whole(content: Any) -> bytes | None:
    """The whole body, however many pieces it arrives in (a chunked answer, a slow
    network), up to MAX_ANSWER_BYTES; None past that (the rest is not read)."""
    pieces, size = [], 0
    while piece := await content.read(2**16):
        size += len(piece)
        if size > MAX_ANSWER_BYTES:
            return None
        pieces.append(piece)
    return b"".join(pieces)


@asynccontextmanager
async def in_process_sandbox(identifier: str) -> AsyncIterator[Target]:
    """The bundled sandbox with default settings on a manual clock, on 127.0.0.1 and a
    free port, for as long as the block runs; its default tenant's keys. The test user
    gets records of every kind there (`_give_records`), so the record probes have records
    to compare with the service's."""
    import aiohttp

    from ..app import create_app
    from ..edge.keys import SANDBOX as SANDBOX_KEY
    from ..edge.server import SandboxRunner, start_site
    from ..settings import Settings

    app = create_app(Settings(host="127.0.0.1", port=0, clock="manual"))
    tenant = app[SANDBOX_KEY].registry.tenants.default()
    runner = SandboxRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        host, port = await start_site(runner, "127.0.0.1", 0)
        target = Target(SANDBOX, f"http://{host}:{port}", tenant.api_key, tenant.api_secret)
        async with aiohttp.ClientSession(
                headers={"x-api-key": target.key, "x-api-secret": target.secret}) as session:
            await _give_records(session, target.base_url, identifier, _headless_companies(tenant))
        yield target
    finally:
        await runner.cleanup()


def _headless_companies(tenant: Any) -> list[str]:
    """The ids of the companies where a deposit task runs headless (no manual deposits),
    in catalog order."""
    from ..domain.companies.companies import OPERATIONAL

    return [c.id for c in tenant.companies.ordered()
            if c.status == OPERATIONAL and "deposit" in c.available_products
            and c.capabilities.get("headlessAuthentication")][:MAX_LINKED_COMPANIES * 4]


async def _give_records(session: Any, base: str, identifier: str, companies: list[str]) -> None:
    """Links the test user, as the service's test user was linked (a deposit task that
    completes), at one company after another until they have a task, linked accounts and
    records of every kind (a salaried job has no timesheets, a job started this year no
    tax form yet), or MAX_LINKED_COMPANIES tasks completed. Through the sandbox's own API:
    the records are made by its rules, not by this function."""
    linked = 0
    for company in companies:
        if linked >= MAX_LINKED_COMPANIES:
            return
        async with session.post(f"{base}/task/create", json={
                "identifier": identifier, "company": company, "product": "deposit"}) as answer:
            if answer.status != 200:
                continue
        async with session.post(f"{base}/_sandbox/clock/run-until-idle") as answer:
            answer.raise_for_status()
        linked += 1
        empty = False
        for kind in RECORD_KINDS:
            async with session.get(f"{base}/{kind}/{quote(identifier, safe='')}") as answer:
                records = (await answer.json()).get("data") if answer.status == 200 else None
            empty = empty or not records
        if not empty:
            return
