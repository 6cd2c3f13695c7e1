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
secret, all removed when the probes are done (`clean_up`); a write that would reach
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
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from .answers import Difference, Note, Unreadable, diff_answers, parse_answer
from .probes import (AGGREGATOR_KEYS, AGGREGATOR_PREFIX, BAD_SECRET, CAPTURED_BY, KEYS, NO_KEYS,
                     NO_PAYMENT_METHODS, PROBES, SANDBOX, SERVICE, TOKEN, WRONG_SECRET, Probe,
                     VerifyError, checked_url, is_payroll_sandbox, production_signal, refusal)

# The probes and the targets refused: probes.py; comparing two answers: answers.py.

REQUEST_TIMEOUT = 30.0          # wall seconds for one answer
MAX_ANSWER_BYTES = 10 * 2**20   # an answer is read whole, up to this much
MAX_IDENTIFIER = 200
MAX_CAPTURED = 500              # a captured id or name longer than this is not used
RECORD_KINDS = ("income", "employment", "identity", "deposit-accounts", "statements", "taxes",
                "timesheets")
MAX_LINKED_COMPANIES = 12       # companies the in-process test user is linked at, at most


# -- the run ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """One side: where it is and the keys it takes; `aggregator` where its aggregator's
    API is, with that API's client id and secret (None: no aggregator to probe)."""

    side: str
    base_url: str
    key: str
    secret: str
    aggregator: Target | None = None


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
           trust_host: bool = False, timeout: float = REQUEST_TIMEOUT,
           aggregator: tuple[str, str, str] | None = None) -> Report:
    """Runs every probe against `url` and an in-process sandbox; the Report.
    `aggregator`: the aggregator's sandbox (URL, client id, secret) the aggregator's probes
    go to (by default, a payroll-sandbox's own /aggregator-api; none for another service).
    Raises VerifyError when the run cannot be made (and sends nothing when refused)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(verify_async(url, key, secret, identifier=identifier,
                                        trust_host=trust_host, timeout=timeout,
                                        aggregator=aggregator))
    raise RuntimeError("verify() blocks: inside a running event loop, await verify_async()")


async def verify_async(url: str, key: str, secret: str, *, identifier: str | None = None,
                       trust_host: bool = False, timeout: float = REQUEST_TIMEOUT,
                       aggregator: tuple[str, str, str] | None = None) -> Report:
    """`verify`, awaitable."""
    import aiohttp

    run_user = f"verify-{secrets.token_hex(6)}"
    identifier = run_user if identifier is None else _checked_identifier(identifier)
    service = _service(url, key, secret, "--key and --secret", trust_host)
    if aggregator is not None:
        service = replace(service, aggregator=_service(
            *aggregator, "--aggregator-client-id and --aggregator-secret", trust_host))
    base = service.base_url
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
        if service.aggregator is None and removable:  # a payroll-sandbox serves its own
            service = replace(service, aggregator=Target(
                SERVICE, base + AGGREGATOR_PREFIX, key, secret))
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


def _service(url: str, key: str, secret: str, flags: str, trust_host: bool) -> Target:
    """The service's side at `url` (or its aggregator's), refused before anything is sent
    when the keys are empty or `refusal` says it looks like production."""
    base = checked_url(url)
    if not key.strip() or not secret.strip():
        raise VerifyError(f"{flags} must not be empty")
    reason = refusal(base, key, secret, trust_host=trust_host)
    if reason is not None:
        raise VerifyError(f"refused to probe {base}: {reason}")
    return Target(SERVICE, base, key, secret)


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
            if probe.credentials == AGGREGATOR_KEYS:
                if target.aggregator is None:
                    notes.append(Note("", f"not sent to the {target.side}: no aggregator to "
                                          "probe (--aggregator-url)", probe.name))
                    continue
                target = target.aggregator
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
                self._capture(probe, side, answers[side])
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
        elif probe.name == "aggregator-item-remove":
            self.deleted.add("aggregatorAccessToken")

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
        if "aggregatorAccessToken" in found and "aggregatorAccessToken" not in self.deleted:
            steps.append(("the run's item at the aggregator", "POST", "/item/remove",
                          {"access_token": found["aggregatorAccessToken"]}))
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
            at_aggregator = what == "the run's item at the aggregator"
            target = self.service.aggregator if at_aggregator else self.service
            try:
                status, _, _ = await self.client.send(
                    target, method, path, body, AGGREGATOR_KEYS if at_aggregator else KEYS)
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
        elif credentials == AGGREGATOR_KEYS:
            sent["PLAID-CLIENT-ID"], sent["PLAID-SECRET"] = target.key, target.secret
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
    from ..edge.server import start_site
    from ..settings import Settings

    app = create_app(Settings(host="127.0.0.1", port=0, clock="manual"))
    tenant = app[SANDBOX_KEY].registry.tenants.default()
    runner, host, port = await start_site(app)
    try:
        origin = f"http://{host}:{port}"
        target = Target(SANDBOX, origin, tenant.api_key, tenant.api_secret,
                        Target(SANDBOX, origin + AGGREGATOR_PREFIX, tenant.api_key,
                               tenant.api_secret))
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
