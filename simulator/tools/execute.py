"""`payroll-sandbox exec [serve flags] -- CMD [ARGS...]`: a command, such as a test suite in
any language, run beside an in-process sandbox (DESIGN.md, Commands; docs/exec.md).

The sandbox is `serve`'s app on a free port (cli.py starts and stops it); this module runs
CMD with the sandbox's URL and the default tenant's keys in its environment, passes signals
on, and, once CMD has ended and the attempts in flight have landed, reads every tenant's
ledger for the deliveries of the run that never got a 2xx, so a suite whose app never
received its webhooks is told why. When CMD fails, every tenant the run touched is written
as a bundle (bundles.py; `--bundles DIR|off`), those it deleted or reset on the way too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from ..client import KEY_VARIABLE, SECRET_VARIABLE, URL_VARIABLE
from ..domain.webhooks import coverage as tenant_coverage
from ..domain.webhooks.event_types import event_types
from ..domain.webhooks.outbox import DELIVERED, PENDING, Delivery
from ..kit import coverage as suite_coverage
from ..kit.coverage import CoverageError
from ..transport.redact import loggable_url

if TYPE_CHECKING:
    from pathlib import Path

# Signals passed on to CMD. SIGINT from a terminal's Ctrl-C reaches CMD by itself (the
# terminal signals the whole foreground process group): passed on only when it came from
# elsewhere (`kill -INT`, a CI runner) or a second time, so CMD never sees one Ctrl-C twice
# (a second one means "stop now" to many runners).
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE = 127, 126  # as a shell answers
SETTLE_LIMIT = 30.0  # wall seconds the attempts in flight get to land after CMD ended

NO_COMMAND = ("payroll-sandbox exec: no command given; write it after --, e.g. "
              "`payroll-sandbox exec -- npm test`")


@dataclass(frozen=True)
class Undelivered:
    """A delivery of the run that never got a 2xx, as the report names it."""

    tenant: str
    event_type: str
    event_id: str
    url: str
    state: str          # failed, interrupted, or pending (a retry the clock never reached)
    attempts: int
    error: str          # the last attempt's, or why none was made
    fate: str = ""      # "deleted" or "reset": the tenant's state went before the end

    def line(self) -> str:
        tenant = f"{self.tenant} ({self.fate})" if self.fate else self.tenant
        tried = f"{self.attempts} attempt{'' if self.attempts == 1 else 's'}"
        return (f"  tenant {tenant}: {self.event_type} to {loggable_url(self.url)} "
                f"[{self.state}, {tried}, event {self.event_id}]: {self.error}")


def _why(delivery: Delivery, fate: str = "") -> str:
    """The last error of a delivery that never got a 2xx, or why no attempt was made."""
    answered = [a for a in delivery.attempts if a.fault != "duplicate" and a.answered]
    error = answered[-1].error if answered else None
    if error is None and delivery.attempts:
        error = "no answer recorded (the attempt was still in flight)"
    if delivery.state == PENDING and fate:
        waiting = f"the tenant was {fate} before the next attempt"
        return f"{error}; {waiting}" if error else f"no attempt made: {waiting}"
    if delivery.state == PENDING and delivery.next_attempt_at:
        waiting = (f"the next attempt was due at {delivery.next_attempt_at} on the tenant's "
                   "clock, which never got there")
        return f"{error}; {waiting}" if error else f"no attempt made: {waiting}"
    return error or "no attempt made"


class _Leaving:
    """What is told of each tenant that leaves `self.registry` (`_leaving`) until `close()`."""

    def close(self) -> None:
        if self._leaving in self.registry.leaving:
            self.registry.leaving.remove(self._leaving)


class Ledgers(_Leaving):
    """Every tenant's deliveries of the run that never got a 2xx: the tenants alive at the
    end, and those deleted or reset meanwhile (kept as they leave, their attempts still
    landing on the records). Deliveries there before CMD started (a --state-file's) count
    only if the run attempted them again."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self._before: dict[int, tuple[Delivery, int]] = {
            id(delivery): (delivery, len(delivery.attempts))
            for tenant in registry.tenants for _, delivery in _deliveries(tenant)}
        self._gone: list[tuple[str, str, Delivery, str]] = []
        registry.leaving.append(self._leaving)

    def _of_the_run(self, delivery: Delivery) -> bool:
        # Ids are safe keys: _before holds each delivery, so none is freed and its id reused.
        before = self._before.get(id(delivery))
        return before is None or len(delivery.attempts) > before[1]

    def _leaving(self, tenant: Any, why: str) -> None:
        self._gone += [(tenant.name, event_type, delivery, why)
                       for event_type, delivery in _deliveries(tenant)
                       if delivery.state != DELIVERED and self._of_the_run(delivery)]

    def undelivered(self) -> list[Undelivered]:
        """In the order the tenants left, then the live tenants' in ledger order."""
        found = self._gone + [(tenant.name, event_type, delivery, "")
                              for tenant in self.registry.tenants
                              for event_type, delivery in _deliveries(tenant)]
        return [Undelivered(tenant=name, event_type=event_type, event_id=delivery.event_id,
                            url=delivery.url, state=delivery.state,
                            attempts=sum(1 for a in delivery.attempts if a.fault != "duplicate"),
                            error=_why(delivery, fate), fate=fate)
                for name, event_type, delivery, fate in found
                if delivery.state != DELIVERED and self._of_the_run(delivery)]


# Tenants deleted or reset during the run whose bundles are kept until CMD ends (the newest).
MAX_LEFT_BUNDLES = 50


class Bundles(_Leaving):
    """The bundles of a run's tenants, written when CMD fails: the live tenants the run
    touched (a request journaled) at the end, and those deleted or reset meanwhile, taken
    as they leave (MAX_LEFT_BUNDLES of them, the newest)."""

    def __init__(self, sandbox: Any, folder: Path | None, argv: Sequence[str]) -> None:
        self.sandbox, self.folder, self.registry = sandbox, folder, sandbox.registry
        self.test = "exec: " + " ".join(argv)
        self._left: list[tuple[str, bytes]] = []
        if folder is not None:
            sandbox.registry.leaving.append(self._leaving)

    def _bundle(self, tenant: Any) -> bytes:
        from ..edge.routes.control import bundle_of
        from ..edge.snapshot import encode

        return encode(bundle_of(tenant, self.sandbox, self.test))

    def _leaving(self, tenant: Any, why: str) -> None:
        if _requests(tenant):
            self._left.append((f"exec-{tenant.name}-{why}-{len(self._left) + 1}",
                               self._bundle(tenant)))
            del self._left[:-MAX_LEFT_BUNDLES]

    def write(self) -> str:
        """Every bundle of the run into the folder; a line for the report ("" for none)."""
        from ..edge.bundles import write_bundle

        if self.folder is None:
            return ""
        found = [*self._left, *((f"exec-{tenant.name}", self._bundle(tenant))
                                for tenant in list(self.sandbox.registry.tenants)
                                if _requests(tenant))]
        try:
            paths = [write_bundle(self.folder, name, data) for name, data in found]
        except OSError as error:
            return f"payroll-sandbox exec: the run's bundles were not written: {error}"
        if not paths:
            return ""
        return (f"payroll-sandbox exec: the run failed; {len(paths)} tenant bundle"
                f"{'' if len(paths) == 1 else 's'} written to {self.folder} (reopen one: "
                f"payroll-sandbox serve --open-bundle {paths[-1]})")


def _deliveries(tenant: Any) -> list[tuple[str, Delivery]]:
    """Each delivery of the tenant's ledger, with its event's type."""
    found = []
    for event_id, deliveries in tenant.webhooks.deliveries.items():
        event = tenant.events.by_id.get(event_id)
        found += [(event.type if event else "?", delivery) for delivery in deliveries]
    return found


def report(undelivered: Sequence[Undelivered]) -> str:
    """What exec prints to standard error before it exits ("" when every delivery got a 2xx)."""
    if not undelivered:
        return ""
    count = len(undelivered)
    head = (f"payroll-sandbox exec: {count} webhook deliver{'y' if count == 1 else 'ies'} of "
            f"this run never got a 2xx:")
    return "\n".join([head, *(item.line() for item in undelivered)])


def _terminal_signals_us() -> bool:
    """This process is in the foreground process group of its terminal: a Ctrl-C there
    signals CMD (in the same group) by itself."""
    for stream in (sys.stdin, sys.stderr, sys.stdout):
        try:
            fd = stream.fileno()
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
        except (AttributeError, OSError, ValueError):
            continue
    return False


def exit_status(returncode: int) -> int:
    """CMD's exit status as exec exits with it: a signal's death is 128 + its number, as
    a shell reports it."""
    return 128 - returncode if returncode < 0 else returncode


async def run_command(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Runs CMD to its end, passing signals on; its exit status. Standard input, output
    and error are exec's own."""
    try:
        process = await asyncio.create_subprocess_exec(*argv, env=dict(env))
    except FileNotFoundError:
        print(f"payroll-sandbox exec: {argv[0]}: command not found", file=sys.stderr)
        return EXIT_NOT_FOUND
    except PermissionError:
        print(f"payroll-sandbox exec: {argv[0]}: permission denied", file=sys.stderr)
        return EXIT_NOT_EXECUTABLE
    except OSError as error:
        print(f"payroll-sandbox exec: {argv[0]}: {error.strerror}", file=sys.stderr)
        return EXIT_NOT_EXECUTABLE
    loop = asyncio.get_running_loop()
    from_terminal = _terminal_signals_us()
    interrupts = 0

    def forward(signum: int) -> None:
        nonlocal interrupts
        if signum == signal.SIGINT:
            interrupts += 1
            if from_terminal and interrupts == 1:
                return  # the terminal's Ctrl-C reached CMD already
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                process.send_signal(signum)

    for signum in FORWARDED:
        loop.add_signal_handler(signum, forward, signum)
    try:
        returncode = await process.wait()
    finally:
        for signum in FORWARDED:
            loop.remove_signal_handler(signum)
    return exit_status(returncode)


async def settle(sandbox: Any, limit: float = SETTLE_LIMIT) -> None:
    """Lets every tenant's attempts in flight land on the ledger (a retry that only the
    clock would start is not waited for: it is reported as pending). A signal meanwhile
    ends the wait."""
    dispatcher = sandbox.dispatcher
    waits = [dispatcher.settle(tenant) for tenant in list(sandbox.registry.tenants)]
    if not waits:
        return
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in FORWARDED:
        loop.add_signal_handler(signum, stop.set)
    everything = asyncio.ensure_future(asyncio.gather(*waits, return_exceptions=True))
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([everything, stopped], timeout=limit,
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        for signum in FORWARDED:
            loop.remove_signal_handler(signum)
        for future in (everything, stopped):
            future.cancel()
        await asyncio.gather(everything, stopped, return_exceptions=True)


class Tallies(_Leaving):
    """The coverage tallies (domain/webhooks/coverage.py) of every tenant the run touched (one that
    took a request during it): those deleted or reset meanwhile, read as they leave, and
    those alive at the end."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self._before = {id(tenant): _requests(tenant) for tenant in registry.tenants}
        self.tally = suite_coverage.Tally()
        registry.leaving.append(self._leaving)

    def _add(self, tenant: Any) -> None:
        if _requests(tenant) > self._before.get(id(tenant), 0):  # touched
            self.tally.add(msgspec.to_builtins(tenant_coverage.of_tenant(tenant)))

    def _leaving(self, tenant: Any, why: str) -> None:
        self._add(tenant)
        self._before[id(tenant)] = _requests(tenant)  # a reset tenant counts afresh

    def write(self, path: str, aggregator: str) -> str:
        """Writes the report at `path`; its table, as exec prints it."""
        for tenant in self.registry.tenants:
            self._add(tenant)
        rules = self.registry.tenants.default().rules
        catalog = msgspec.to_builtins(tenant_coverage.catalog(rules, event_types(aggregator)))
        document = suite_coverage.report(self.tally, catalog)
        suite_coverage.write(document, path)
        return "\n".join(["payroll-sandbox coverage:", *suite_coverage.table(document),
                          f"report written to {path}"])


def _requests(tenant: Any) -> int:
    """How many requests the tenant's journal ever took (kept and dropped)."""
    return len(tenant.journal) + tenant.journal.evicted


async def beside(argv: Sequence[str], app: Any, base_url: str, *,
                 coverage: str | None = None, bundles: Path | None = None) -> tuple[int, str]:
    """CMD run against the started sandbox `app` at `base_url`: (CMD's exit status, the
    report of undelivered webhooks). With `coverage`, the coverage report of the tenants
    the run touched is written there; when the run failed, their bundles to `bundles`.
    The caller stops the sandbox afterwards."""
    from ..edge.keys import SANDBOX

    sandbox = app[SANDBOX]
    tenant = sandbox.registry.tenants.default()
    ledgers = Ledgers(sandbox.registry)
    tallies = Tallies(sandbox.registry) if coverage is not None else None
    kept = Bundles(sandbox, bundles, argv)
    try:
        # CMD's environment: this one, with the sandbox's URL and the default tenant's keys.
        status = await run_command(argv, {**os.environ, URL_VARIABLE: base_url,
                                          KEY_VARIABLE: tenant.api_key,
                                          SECRET_VARIABLE: tenant.api_secret})
        await settle(sandbox)
        text = report(ledgers.undelivered())
        if tallies is not None and coverage is not None:
            try:
                summary = tallies.write(coverage, sandbox.registry.service.aggregator)
            except CoverageError as error:
                summary, status = str(error), status or 1
            text = f"{text}\n{summary}" if text else summary
        written = kept.write() if status != 0 else ""
        return status, "\n".join(line for line in (text, written) if line)
    finally:
        ledgers.close()
        kept.close()
        if tallies is not None:
            tallies.close()
