"""The server answers as its OpenAPI document says: schemathesis against the real process.

Every operation of GET /openapi.json, every check schemathesis has (status codes, content
types, response bodies and headers, negative data refused, positive data accepted, missing
headers, unsupported methods, auth enforced, ...), from its explicit examples, its coverage
cases and its fuzzing: a bounded, seeded run of about 25 generated requests an operation,
one test item an operation, under API keys of one tenant put back to its fixtures before
each (and a public token of its user where the operation takes only that). Any finding
fails the test, except the few below (issue 11), each pinned to one check of
one operation and one kind of answer: server behaviour to change, and rules a JSON Schema
cannot state. The server log must hold no error either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field

import pytest

from conftest import REPO, openapi_document, require_extra  # noqa: E402

require_extra("schemathesis")
import schemathesis  # noqa: E402

SERVING = "payroll-sandbox serving "
SEED = 11
EXAMPLES_PER_OPERATION = 25
TENANT = "schemathesis-run"  # a name no generated request is likely to delete
USER = "schemathesis-user"  # the user of the public tokens


@dataclass(frozen=True)
class Waiver:
    """One check of one operation not applied to one kind of answer (its status, and the
    error code and failing field it names), and why."""

    method: str
    path: str
    check: str
    status: int
    code: str | None = None   # the error body's `code`; None: any
    field: str | None = None  # a `details[].path` the error names; None: any
    why: str = ""

    def covers(self, response) -> bool:
        if response.status_code != self.status:
            return False
        if self.code is None and self.field is None:
            return True
        try:
            error = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            return False
        return ((self.code is None or error.get("code") == self.code)
                and (self.field is None
                     or any(d.get("path") == self.field for d in error.get("details", []))))


# Issue 11: findings that need the server to change, not the document. Each covers one
# check of one operation for one kind of answer; remove it when the server is fixed.
ISSUE_11_SERVER_FINDINGS: list[Waiver] = [
    # Issue 47, point 7: a product this service does not have is a 400 naming the field, as
    # the published surface's enum would refuse it; the document keeps the field a string.
    *(Waiver(method, path, "positive_data_acceptance", 400, "unknown-product",
             why="a product string (`product`, an item of `products`) that is none of the "
                 "service's products")
      for method, path in (("POST", "/company/search"), ("GET", "/company/list"))),
    # A clock start that is a string but not a date-time in the clock's range (issue 45).
    Waiver("POST", "/_sandbox/tenants", "positive_data_acceptance", 422, "validation-failed",
           "$.clock.start", why="a start that is not an ISO 8601 date-time in range"),
    # A request that was never made is the answer verify exists to give (issue 46).
    Waiver("POST", "/_sandbox/requests/verify", "positive_data_acceptance", 422, "not-called",
           why="no journaled request matches: 422 not-called with the near misses"),
    # The restore reads its body itself (past the 1 MiB of declared bodies), so no body is
    # declared: the document shows none, and a request without one is 422.
    Waiver("POST", "/_sandbox/snapshot", "positive_data_acceptance", 422, "invalid-snapshot",
           why="no requestBody documented; the restore needs a snapshot document"),
]

# Issue 11: rules JSON Schema cannot state, so a schema-valid request meets them.
ISSUE_11_NOT_EXPRESSIBLE: list[Waiver] = [
    # The user is `identifier` under API keys, the public token's user otherwise: whether
    # it is required depends on the credentials, which a schema does not see.
    Waiver("POST", "/task/create", "positive_data_acceptance", 422, "validation-failed",
           "$.identifier", why="identifier required under API keys"),
    *(Waiver("GET", f"/{kind}", "positive_data_acceptance", 422, "validation-failed",
             "$.identifier", why="?identifier= required under API keys")
      for kind in ("linked-accounts", "income", "statements", "deposit-accounts",
                   "employment", "taxes", "identity", "timesheets")),
    # Which products a company offers, only the catalog knows: a request naming a company
    # that exists (the document's examples name Walmart) with a product it does not offer
    # is 400 product-not-offered, a maintenance list with one 422 unknown-products.
    *(Waiver("POST", path, "positive_data_acceptance", 400, "product-not-offered",
             why="a product the company does not offer")
      for path in ("/task/create", "/sdk/login")),
    Waiver("POST", "/_sandbox/companies/{companyId}/status", "positive_data_acceptance", 422,
           "unknown-products", why="a product the company does not offer"),
    # Which scenarios fit a task's product, only the scenario files say (422
    # scenario-does-not-fit); a sign-in needs credentials unless it resumes a linked
    # account's session, which only the account's state says.
    Waiver("POST", "/task/create", "positive_data_acceptance", 422, "scenario-does-not-fit",
           why="a scenario that does not fit the product"),
    *(Waiver("POST", "/sdk/login", "positive_data_acceptance", 422, "validation-failed",
             field, why="username and password, unless a reconnect resumes")
      for field in ("$.username", "$.password")),
    # A replay's window: `from` no later than `to` (two date-times a schema cannot compare).
    Waiver("POST", "/_sandbox/webhooks/replay", "positive_data_acceptance", 422,
           "validation-failed", "$.from", why="from later than to"),
    # With `after`, no filter on what a change moves (an event's delivery state, a task's
    # status): a rule across two query parameters, which OpenAPI parameters cannot state.
    Waiver("GET", "/_sandbox/events", "positive_data_acceptance", 422, "validation-failed",
           "$.delivery", why="delivery with after"),
    Waiver("GET", "/_sandbox/tasks", "positive_data_acceptance", 422, "validation-failed",
           "$.status", why="status with after"),
    # franchiseParent must name a company tagged franchise-parent (an unknown id is a 404):
    # which companies are, only the tenant's catalog knows.
    *(Waiver(method, path, "positive_data_acceptance", 422, "validation-failed",
             "$.franchiseParent", why="franchiseParent names a company that is no parent")
      for method, path in (("POST", "/_sandbox/companies"),
                           ("PATCH", "/_sandbox/companies/{companyId}"))),
    # The path holds base64 of a JSON configuration: `contentSchema` is an annotation
    # only, so generated segments are rarely a configuration (the page answers 400).
    Waiver("GET", "/initialize/{config}", "positive_data_acceptance", 400,
           why="a path segment that is not base64 of a JSON object"),
    # An API fault rule names an operation of this server (method and declared path) that
    # takes credentials and is not the control plane: which ones, only the running app
    # knows (its aggregator name among them). Generated paths name none, so the run's
    # tenant never gets a rule that would fault the operations checked after it.
    Waiver("PUT", "/_sandbox/faults/api", "positive_data_acceptance", 422, "unknown-operation",
           why="a rule names no operation that can be faulted"),
    # A data profile's contradictions (an end date without a termination, a pay date before
    # the start date, percents over 100, an hourly wage of a yearly amount, ...) and the
    # names of the profiles (the fixtures' profiles.yaml) are rules a schema does not say
    # (DESIGN.md: Payroll data you choose; domain/data_profiles.py).
    Waiver("PUT", "/_sandbox/users/{identifier}/profile", "positive_data_acceptance", 422,
           "validation-failed", why="a profile that contradicts itself, or an unknown name"),
    Waiver("PUT", "/demo/profile", "positive_data_acceptance", 422, "validation-failed",
           "$.profile", why="a name that is none of the profiles"),
    # An autopilot the flow could play: a company of the tenant's catalog that offers the
    # product, and a username whose scenario fits it (only the catalog and the scenario
    # files say which).
    *(Waiver("PUT", "/_sandbox/users/{identifier}/autopilot", "positive_data_acceptance", 422,
             "validation-failed", field, why="a plan the hosted flow cannot play")
      for field in ("$.company", "$.product", "$.username")),
]


# The aggregator's own API (/aggregator-api/, DESIGN.md): its conventions, not this API's.
_AGGREGATOR_API = ("/sandbox/public_token/create", "/item/public_token/exchange", "/accounts/get",
                   "/processor/token/create", "/item/remove", "/sandbox/item/reset_login",
                   "/item/get", "/item/webhook/update", "/link/token/create",
                   "/institutions/get_by_id", "/transactions/sync",
                   "/sandbox/item/fire_webhook", "/transactions/get", "/transactions/refresh",
                   "/accounts/balance/get", "/auth/get", "/webhook_verification_key/get")
AGGREGATOR_CONVENTIONS: list[Waiver] = [
    # It refuses missing or wrong credentials with 400 (MISSING_FIELDS, INVALID_API_KEYS),
    # as the real aggregator does, not 401/403 (tests/test_aggregator_api.py checks both).
    *(Waiver("POST", f"/aggregator-api{path}", "ignored_auth", 200,
             why="the aggregator answers 400 without valid keys") for path in _AGGREGATOR_API),
    # A token (public or access) must be one it made, an institution one of its sandbox's
    # (INVALID_INSTITUTION), a webhook URL one the sandbox may send to, a cursor one it
    # gave: which ones, no schema can say.
    *(Waiver("POST", f"/aggregator-api{path}", "positive_data_acceptance", 400,
             why="a token, institution, webhook URL or cursor the aggregator does not know")
      for path in _AGGREGATOR_API),
]


# Schemathesis 4.32 turns the `prefixItems` of a response schema into draft-4 `items: [...]`
# and then validates with Draft 2020-12, which refuses that schema (its issue #3842). These
# operations' answers are checked against the document by jsonschema instead.
PREFIX_ITEMS_IN_RESPONSE = {("GET", "/_sandbox/snapshot")}


def _waived(case) -> list[Waiver]:
    """The waivers of the case's operation (a case may probe it with another method)."""
    operation = case.operation
    return [w for w in (*ISSUE_11_SERVER_FINDINGS, *ISSUE_11_NOT_EXPRESSIBLE,
                        *AGGREGATOR_CONVENTIONS)
            if w.method == operation.method.upper() and w.path == operation.path]


# Operations whose credentials ignored_auth has seen enforced (their probes refused).
_AUTH_ENFORCED: set[str] = set()


def _confirmed_once(check):
    """ignored_auth as schemathesis's own runner applies it: enforcement is a property of
    the operation, so once its probes without and with wrong credentials are refused, the
    operation's other successful cases are not probed again (its pytest path has no run to
    remember that in, and probed every one: about a tenth of this file's time)."""

    def ignored_auth(ctx, response, case):
        ctx.auth_enforced_operations = _AUTH_ENFORCED
        return check(ctx, response, case)

    ignored_auth.__name__ = check.__name__
    return ignored_auth


def _narrowed(check, waivers: list[Waiver]):
    """`check`, except for the answers the waivers cover."""

    def narrowed(ctx, response, case):
        if any(w.covers(response) for w in waivers):
            return None
        return check(ctx, response, case)

    narrowed.__name__ = check.__name__
    return narrowed


@pytest.fixture(scope="session")
def sandbox_process(tmp_path_factory):
    """`python -m payroll_sandbox serve --port 0 --clock manual --strict-bodies`: (base_url,
    key, secret) of its default tenant, read from the serving line. Webhook attempts time
    out after 0.2 wall seconds, as endpoints registered by generated requests go nowhere.
    --strict-bodies: the document's request schemas are what it enforces (without it an
    unknown field is ignored with a warning, which a schema cannot state)."""
    log = tmp_path_factory.mktemp("schemathesis") / "server.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0", "--clock", "manual",
             "--webhook-timeout", "0.2", "--strict-bodies"],
            stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = process.stdout.readline().strip()
        assert line.startswith(SERVING), log.read_text()
        fields = dict(part.split("=", 1) for part in line.split()[3:])
        yield line.split()[2], fields["x-api-key"], fields["x-api-secret"]
    finally:
        process.terminate()
        process.communicate(timeout=15)
    errors = [entry for entry in log.read_text().splitlines() if " ERROR " in entry]
    assert not errors, "\n".join(errors)


def _post(url: str, body: dict, headers: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)["data"]


@dataclass(frozen=True)
class Tenant:
    """The fresh tenant the run works in, the served document, and the operations only a
    public token opens."""

    base_url: str
    keys: dict[str, str]
    document: dict
    token_operations: frozenset[tuple[str, str]]
    tokens: list[str] = field(default_factory=list)  # the public token since the last reset

    def public_token(self) -> str:
        """A public token of the run's user, made once after each reset (`fresh_tenant`):
        the operations that take one neither reset the tenant nor move its clock."""
        if not self.tokens:
            token = _post(f"{self.base_url}/access-token", {"identifier": USER}, self.keys)
            self.tokens.append(token["publicToken"])
        return self.tokens[0]


@pytest.fixture(scope="session")
def sandbox_tenant(sandbox_process) -> Tenant:
    base_url, key, secret = sandbox_process
    tenant = _post(f"{base_url}/_sandbox/tenants", {"name": TENANT},
                   {"x-api-key": key, "x-api-secret": secret})
    with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=10) as response:
        document = json.load(response)
    token_operations = frozenset((method.upper(), path)
                                 for path, item in document["paths"].items()
                                 for method, op in item.items()
                                 if op["security"] == [{"publicToken": []}])
    return Tenant(base_url, {"x-api-key": tenant["apiKey"], "x-api-secret": tenant["apiSecret"]},
                  document, token_operations)


@pytest.fixture(scope="session")
def api_schema(sandbox_tenant):
    """The served document, loaded by schemathesis with the API keys of the fresh tenant."""
    config = schemathesis.Config.from_dict({
        "seed": SEED,
        "base-url": sandbox_tenant.base_url,
        "generation": {"max-examples": EXAMPLES_PER_OPERATION, "deterministic": True,
                       "database": "none"},
        "phases": {"examples": {"enabled": True}, "coverage": {"enabled": True},
                   "fuzzing": {"enabled": True}},
        "checks": {"enabled": True},
        "auth": {"openapi": {"apiKey": {"api_key": sandbox_tenant.keys["x-api-key"]},
                             "apiSecret": {"api_key": sandbox_tenant.keys["x-api-secret"]},
                             # The aggregator's API (/aggregator-api/): the same keys.
                             "aggregatorClientId": {"api_key": sandbox_tenant.keys["x-api-key"]},
                             "aggregatorSecret": {"api_key": sandbox_tenant.keys["x-api-secret"]}}},
    })
    return schemathesis.openapi.from_url(f"{sandbox_tenant.base_url}/openapi.json", config=config)


def _operations() -> list[tuple[str, str]]:
    """Every (method, path) of the document the served app publishes, read at collection from
    an app built in-process with the same settings: one test item an operation, so the run
    spreads over the workers and names the operation that failed."""
    document = openapi_document(strict_bodies=True)
    return [(method.upper(), path) for path, item in document["paths"].items()
            for method in item if method in ("get", "put", "post", "delete", "patch")]


OPERATIONS = _operations()
LAZY_SCHEMA = schemathesis.pytest.from_fixture("api_schema")


def _matches_the_document(document: dict):
    """response_schema_conformance by jsonschema (Draft 2020-12), for PREFIX_ITEMS_IN_RESPONSE."""
    from jsonschema import Draft202012Validator

    def response_schema_conformance(ctx, response, case):
        operation = document["paths"][case.operation.path][case.operation.method.lower()]
        declared = operation["responses"].get(str(response.status_code), {})
        media = declared.get("content", {}).get("application/json")
        if media is None or case.method.upper() != case.operation.method.upper():
            return None
        schema = {**media["schema"], "components": document["components"]}
        errors = [f"{list(e.absolute_path)}: {e.message}"
                  for e in Draft202012Validator(schema).iter_errors(response.json())]
        assert not errors, "the answer does not match the document:\n" + "\n".join(errors[:5])
        return None

    return response_schema_conformance


@pytest.fixture
def fresh_tenant(sandbox_tenant):
    """The run's tenant put back to its fixtures (and its clock to the start) before each
    operation: what one operation's cases did (a year of clock, hundreds of tasks) does not
    weigh on the next, whichever worker ran which operations before it."""
    _post(f"{sandbox_tenant.base_url}/_sandbox/reset", {}, sandbox_tenant.keys)
    sandbox_tenant.tokens.clear()  # the reset forgot them


@pytest.mark.parametrize("method,path", OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_operation_answers_as_the_document_says(method, path, request, fresh_tenant):
    """The examples, coverage cases and fuzzing of one operation (schemathesis's own pytest
    runner, narrowed to it), each case checked by `_answers_as_documented`."""
    one = LAZY_SCHEMA.include(method=method, path=path)
    one.parametrize()(_answers_as_documented)(request=request)


@pytest.fixture(scope="session")
def http_session():
    """One HTTP session (keep-alive) for the run's requests: without it each case opens a
    session and a connection of its own. schemathesis's own kind, which follows redirects
    only within the host; the sandbox sets no cookie, so no case sees another's."""
    from schemathesis.transport.requests import SameHostRedirectsSession

    with SameHostRedirectsSession() as session:
        yield session


def _answers_as_documented(case, sandbox_tenant, http_session):
    from schemathesis.checks import CHECKS

    operation = (case.operation.method.upper(), case.operation.path)
    headers = ({"x-public-token": sandbox_tenant.public_token()}
               if operation in sandbox_tenant.token_operations else None)
    waivers = _waived(case)
    names = sorted({w.check for w in waivers} | {"ignored_auth"})
    excluded = CHECKS.get_by_names(names)
    additional = [_narrowed(_confirmed_once(check) if name == "ignored_auth" else check,
                            [w for w in waivers if w.check == name])
                  for name, check in zip(names, excluded)]
    if operation in PREFIX_ITEMS_IN_RESPONSE:
        excluded.append(CHECKS.get_one("response_schema_conformance"))
        additional.append(_matches_the_document(sandbox_tenant.document))
    case.call_and_validate(session=http_session, headers=headers, excluded_checks=excluded,
                           additional_checks=additional)
