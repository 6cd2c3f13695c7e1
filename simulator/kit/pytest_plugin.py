"""pytest fixtures for customers' own test suites (entry point `pytest11`; the reference is
docs/plugin.md).

`payroll_sandbox` gives each test a fresh, isolated tenant (named after the test) on one
sandbox server shared by the whole session, so tests can run in parallel, with a manual
clock; `webhook_receiver` is a real local receiver registered as that tenant's endpoint;
`async_payroll_sandbox` and `async_webhook_receiver` are their twins for async tests (with
pytest-asyncio installed). The server runs in a thread of the test process, configured by
the options below, their ini keys and the PAYROLL_SANDBOX_* variables; PAYROLL_SANDBOX_URL
names a server you run yourself instead. A failed test's report lists its tenant's webhook
deliveries that never got a 2xx, and its tenant is written as a bundle that `payroll-sandbox
serve --open-bundle FILE` reopens at the failing moment; a passing test costs no request
for either.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..client import URL_VARIABLE, with_query
from . import coverage
from . import matrix
from .matrix import MARKER, Case
from .testing import AsyncSandbox, LoopbackCheck, SandboxError
from .blocking import Sandbox
from .receivers import AsyncWebhookReceiver, ReceiverHost, WebhookReceiver, describe_undelivered
from .loops import LoopThread
from .asgi import AsgiServer
from .coverage import SessionCoverage

try:
    import pytest_asyncio
except ImportError:  # the async fixtures need it; the sync ones do not
    pytest_asyncio = None

__all__ = ["Sandbox", "SandboxError"]  # importable from here as before; payroll_sandbox.kit.testing has all

COVERAGE = "payroll_sandbox_coverage"
FAIL_UNDER = "payroll_sandbox_cov_fail_under"
WORKER_OUTPUT = "payroll_sandbox_coverage"  # an xdist worker's tally, for the controller
RECEIVER_HOST = "payroll_sandbox_receiver_host"  # option, ini key and (upper case) variable
RECEIVER_HOST_HELP = ("the host a sandbox in a container reaches this machine by (e.g. "
                      "host.docker.internal): the receivers listen on every interface and "
                      "give the sandbox URLs with it")
REPORT_SECTION = "payroll-sandbox: webhook deliveries that never got a 2xx"
BUNDLE_SECTION = "payroll-sandbox: bundle"
BUNDLES = "payroll_sandbox_bundles"  # option and ini key: the bundles' folder, or `off`
BUNDLES_HELP = ("folder a failed test's tenant is written to as <test id>.json, for `payroll-"
                "sandbox serve --open-bundle FILE` (default payroll-sandbox-bundles; off: none)")
LEDGER_STATES = ("pending", "failed", "interrupted")  # GET /_sandbox/events?delivery=...
LEDGER_LIMIT = 100  # newest events read per state

# pytest option (and ini key) -> the Settings field it sets, and what it is.
OPTIONS = {
    "payroll_sandbox_scenarios": ("scenarios", "path", "folder of scenario files, added to the "
                                  "bundled ones (same name: yours)"),
    "payroll_sandbox_fixtures": ("fixtures", "path", "fixtures folder instead of the bundled one"),
    "payroll_sandbox_seed": ("seed", "int", "seed of every generated id and record (default 1)"),
    "payroll_sandbox_clock_start": ("clock_start", "datetime", "where every test tenant's clock "
                                    "starts, ISO 8601 (2026-01-05T09:00:00Z; default: now): "
                                    "the same bytes on any day"),
    # The service profile (vendor, aggregator, sdkPrefix) and any other setting, as
    # `serve --config FILE` reads them; the options above and the manual clock still win.
    "payroll_sandbox_config": ("config", "path", "a --config YAML file: the service profile "
                               "(vendor, aggregator, sdkPrefix) and other settings"),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("payroll-sandbox", "the in-process payroll sandbox server")
    settings = [(name, int if kind == "int" else str,
                 {"int": "N", "datetime": "DATETIME"}.get(kind, "DIR"), text)
                for name, (_, kind, text) in OPTIONS.items()]
    for name, kind, metavar, text in (*settings, (RECEIVER_HOST, str, "HOST", RECEIVER_HOST_HELP),
                                      (BUNDLES, str, "DIR|off", BUNDLES_HELP)):
        group.addoption(f"--{name.replace('_', '-')}", dest=name, type=kind, metavar=metavar,
                        help=f"{text} (ini: {name})")
        parser.addini(name, f"payroll-sandbox: {text}", default=None)
    group.addoption("--payroll-sandbox-coverage", dest=COVERAGE, metavar="FILE",
                    help="write what the suite's tenants reached (scenarios, failure reasons, "
                         "event types delivered, faults, profiles, handler checks) and what "
                         "the catalog has that they never reached, as JSON")
    group.addoption("--payroll-sandbox-cov-fail-under", dest=FAIL_UNDER, metavar="N",
                    type=float, help="fail the run (exit 1) when the suite reached less than "
                    "N percent of the catalog's failure reasons of the products it used")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(**filters): one item per scenario of the "
                            "catalog that fits the filters (product=, outcome=, reason=, "
                            "name=, kind=), bound to the item's tenant for every user; the "
                            "fixture payroll_sandbox_expected says how its task ends")
    path, fail_under = config.getoption(COVERAGE), config.getoption(FAIL_UNDER)
    if path is None and fail_under is None:
        return
    if path is not None and not hasattr(config, "workerinput"):  # xdist's controller writes it
        try:
            coverage.check_writable(path)
        except coverage.CoverageError as error:
            raise pytest.UsageError(str(error)) from None
    config.stash[_COVERAGE] = SessionCoverage(path, fail_under)


def bundles_folder(config: pytest.Config) -> Path | None:
    """Where failed tests' bundles go: the option (from where pytest runs), else the ini
    key (from the ini file's folder), else payroll-sandbox-bundles in the root folder; None
    when either says `off`."""
    from ..edge.bundles import folder_setting

    value = config.getoption(BUNDLES)
    if value is not None:
        return folder_setting(value, Path(config.invocation_params.dir))
    value = config.getini(BUNDLES)
    if value:
        return folder_setting(value, config.inipath.parent if config.inipath else config.rootpath)
    return folder_setting(None, config.rootpath)


def sandbox_settings(config: pytest.Config, environ: dict[str, str] | None = None) -> Any:
    """The in-process server's Settings: a manual clock on 127.0.0.1, a free port; the
    options, then the ini keys, then the PAYROLL_SANDBOX_* variables, then the defaults.
    Relative folders are read from where pytest runs (options) or the ini file's folder."""
    from ..load.fixtures import ConfigError
    from ..settings import load_settings

    ini_dir = config.inipath.parent if config.inipath else config.rootpath
    flags: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "clock": "manual"}
    for name, (setting, kind, _) in OPTIONS.items():
        value, base = config.getoption(name), config.invocation_params.dir
        if value is None:
            value, base = config.getini(name) or None, ini_dir
        if value is None:
            continue
        if kind == "path":
            value = Path(base) / str(value).strip()
        elif kind == "datetime":
            value = str(value).strip()  # load_settings names a bad one
        elif not str(value).strip().isdigit():
            raise ConfigError(f"ini key {name}", f"$.{setting}", f"{value!r} is not a whole number")
        flags[setting] = value
    return load_settings(flags, os.environ if environ is None else environ)


class _ServerThread(LoopThread):
    """The sandbox app on 127.0.0.1, port 0, on an event loop in a thread of its own;
    the sync receivers are served by the same loop."""

    def __init__(self, settings: Any) -> None:
        super().__init__("payroll-sandbox")
        self.settings = settings
        self.sandbox: Sandbox | None = None  # its default tenant, once it serves
        self._runner: Any = None

    async def _setup(self) -> None:
        from ..app import create_app, long_lived
        from ..edge.keys import SANDBOX
        from ..edge.server import start_site

        with long_lived():  # each test's tenant deletion collects; the catalog stays out
            app = create_app(self.settings)
        self._runner, _, port = await start_site(app)
        tenant = app[SANDBOX].registry.tenants.default()
        self.sandbox = Sandbox(f"http://127.0.0.1:{port}", tenant.api_key, tenant.api_secret)

    async def _cleanup(self) -> None:  # stop() may come before _setup went through
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture(scope="session")
def _payroll_sandbox_thread(request: pytest.FixtureRequest) -> Iterator[LoopThread]:
    """The session's loop thread: the in-process server's, or (PAYROLL_SANDBOX_URL) a bare
    one for the sync receivers."""
    from ..load.fixtures import ConfigError

    thread: LoopThread | None = None
    try:
        thread = (LoopThread() if os.environ.get(URL_VARIABLE)
                  else _ServerThread(sandbox_settings(request.config)))
        thread.start()
    except BaseException as error:
        if thread is not None:
            thread.stop()
        if not isinstance(error, ConfigError):
            raise
        pytest.fail("payroll-sandbox configuration error: " + "; ".join(
            f"{file}: {path}: {message}" for file, path, message in error.problems),
            pytrace=False)
    try:
        yield thread
    finally:
        thread.stop()


@pytest.fixture(scope="session")
def payroll_sandbox_server(_payroll_sandbox_thread: LoopThread) -> Sandbox:
    """The session's sandbox, as its default tenant (PAYROLL_SANDBOX_URL: yours)."""
    url = os.environ.get(URL_VARIABLE)
    if url:
        from ..client import sandbox_keys

        key, secret = sandbox_keys()
        # Yours may not share this machine's loopback (a container's published port looks
        # local): the first loopback webhook URL given finds out, once per session.
        return Sandbox(url, key, secret, loopback=LoopbackCheck(url, key, secret))
    assert isinstance(_payroll_sandbox_thread, _ServerThread) and _payroll_sandbox_thread.sandbox
    return _payroll_sandbox_thread.sandbox


def _setting(config: pytest.Config, name: str) -> str | None:
    """The option `name`, else its ini key, else its variable (`name` in upper case)."""
    return config.getoption(name) or config.getini(name) or os.environ.get(name.upper()) or None


@pytest.fixture(scope="session")
def payroll_sandbox_receiver_host(request: pytest.FixtureRequest) -> ReceiverHost:
    """Where the receivers listen and the host their URLs name: 127.0.0.1, or with
    --payroll-sandbox-receiver-host (ini, PAYROLL_SANDBOX_RECEIVER_HOST) every interface
    and that host. Your own app's server can use it too: `aiohttp_server(app,
    host=host.listen)`, then `host.url(server.port, "/webhooks")`."""
    return ReceiverHost.advertising(_setting(request.config, RECEIVER_HOST))


# -- the failure report ---------------------------------------------------------------------

@dataclass
class _Ledger:
    """A test's tenant, for its report: the deliveries that never got a 2xx, read while the
    tenant exists: at the report of a failed setup or call, or at teardown before the
    tenant is deleted when a receiver's check is about to fail the teardown."""

    tenant: Sandbox
    reported: bool = False       # a report of this test carries the section already
    wanted: bool = False         # a receiver refused a delivery: its teardown fails
    at_teardown: str | None = None
    bundles: Path | None = None  # the folder of bundles (None: off)
    bundle: str | None = None    # what writing this test's bundle said, once written
    bundle_shown: bool = False   # a report of this test says it already

    def write_bundle(self, test: str) -> str:
        """The tenant as `<bundles>/<test id>.json` (GET /_sandbox/bundle), once: a line
        for the report. Reads nothing for a test that passes."""
        if self.bundle is None and self.bundles is not None:
            from ..edge.bundles import write_bundle
            from ..edge.snapshot import encode

            try:
                bundle = self.tenant.request("GET", with_query("/_sandbox/bundle",
                                                               {"test": test[:1024]}))
                path = write_bundle(self.bundles, test, encode(bundle))
                self.bundle = (f"written to {path} (reopen it: payroll-sandbox serve "
                               f"--open-bundle {path})")
            except Exception as error:  # the report says so; the test's own failure stays
                self.bundle = f"not written: {error}"
        return self.bundle or ""

    def read(self) -> str:
        try:
            events = [event for state in LEDGER_STATES
                      for event in self.tenant.events(delivery=state, limit=LEDGER_LIMIT)]
        except Exception as error:  # the report says so; the test's own failure stays
            if isinstance(error, SandboxError) and error.status in (401, 404):
                return ""  # the test deleted its tenant: nothing is left to tell
            return f"the ledger of tenant {self.tenant.name} could not be read: {error}"
        events.sort(key=lambda event: event.get("sequence", 0))
        return describe_undelivered(events, self.tenant.name)


_LEDGER = pytest.StashKey[_Ledger]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """A failed report of a test with a tenant gets the REPORT_SECTION (pytest shows it
    under the failure, as it shows captured output)."""
    report = yield
    ledger = item.stash.get(_LEDGER, None)
    if ledger is None or not report.failed:
        return report
    if report.when != "teardown":  # (a failed teardown's was written before the tenant went)
        ledger.write_bundle(item.nodeid)
    if ledger.bundle and not ledger.bundle_shown:
        report.sections.append((BUNDLE_SECTION, ledger.bundle))
        ledger.bundle_shown = True
    if ledger.reported:
        return report
    text = ledger.at_teardown if report.when == "teardown" else ledger.read()
    if text:
        report.sections.append((REPORT_SECTION, text))
        ledger.reported = True
    return report


# -- the scenario matrix and the coverage report ---------------------------------------------

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked payroll_sandbox_each_scenario: one item per fitting scenario of the
    catalog (read by the package's loader, no server needed), its id the scenario's name."""
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        return
    if marker.args:
        raise pytest.Collector.CollectError(f"{MARKER} takes filters by name only "
                                            "(product=..., outcome=...)")
    if "_payroll_sandbox_case" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(
            f"{metafunc.definition.name}: {MARKER} binds each scenario to the test's tenant: "
            "use the payroll_sandbox (or async_payroll_sandbox) or payroll_sandbox_expected "
            "fixture")
    from ..load.fixtures import ConfigError

    try:
        found = matrix.cases(sandbox_settings(metafunc.config), marker.kwargs)
    except (matrix.MatrixError, ConfigError) as error:
        raise pytest.Collector.CollectError(str(error)) from None
    metafunc.parametrize("_payroll_sandbox_case", found, ids=[case.scenario for case in found],
                         indirect=True)


_COVERAGE = pytest.StashKey[SessionCoverage]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist's controller: a worker's tally joins the run's."""
    collected = node.config.stash.get(_COVERAGE, None)
    output = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
    if collected is not None and output is not None:
        collected.merge(output)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A worker hands its tally on; the run (or xdist's controller) writes the report and
    applies the gate: exit 1 below --payroll-sandbox-cov-fail-under."""
    config = session.config
    collected = config.stash.get(_COVERAGE, None)
    if collected is None:
        return
    if hasattr(config, "workerinput"):
        config.workeroutput[WORKER_OUTPUT] = {**collected.tally.dump(),  # type: ignore[attr-defined]
                                              "catalog": collected.catalog}
        return
    document = collected.finish()
    if session.exitstatus == 0 and (collected.problem or coverage.below(
            document, collected.fail_under)):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    collected = config.stash.get(_COVERAGE, None)
    if collected is None or collected.document is None:
        return
    terminalreporter.write_sep("-", "payroll-sandbox coverage")
    for line in coverage.table(collected.document):
        terminalreporter.write_line(line)
    if collected.path is not None and collected.problem is None:
        terminalreporter.write_line(f"report written to {collected.path}")
    failed = collected.problem or coverage.below(collected.document, collected.fail_under)
    if failed:
        terminalreporter.write_line(failed, red=True, bold=True)


# -- the fixtures -----------------------------------------------------------------------------

def tenant_name(test: str) -> str:
    """A test's tenant is named after it (`test_refund[a-b]` -> `test_refund_a-b_`), so
    its bundle reopens as a tenant of that name; the server adds `-N` to a name in use."""
    from ..edge.bundles import safe_name

    return safe_name(test)[:56]


@pytest.fixture
def payroll_sandbox_clock_start(request: pytest.FixtureRequest) -> str | None:
    """Where this test's tenant's clock starts (ISO 8601; None: now): the option, ini key or
    variable `payroll_sandbox_clock_start`. Override it (a fixture of this name in a
    conftest, module or class) or parametrize it to pin one test's start. The in-process
    server's settings hold it too; a server of yours (PAYROLL_SANDBOX_URL) gets it per tenant."""
    return _setting(request.config, "payroll_sandbox_clock_start")


@pytest.fixture
def payroll_sandbox(payroll_sandbox_server: Sandbox, payroll_sandbox_clock_start: str | None,
                    _payroll_sandbox_case: Case | None,
                    request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A fresh tenant for this test: its own users, tasks, events, clock and endpoints;
    deleted after the test, so a long session keeps the server small. A failed test's
    report lists its deliveries that never got a 2xx. An item of the scenario matrix has
    its scenario bound to every user (`payroll_sandbox.scenario` names it); with
    --payroll-sandbox-coverage the tenant's tally is read before it goes.

    Its clock starts at the fixture argument `clock_start`
    (`@pytest.mark.parametrize("payroll_sandbox", [{"clock_start": "2026-01-05T09:00:00Z"}],
    indirect=True)`), else at `payroll_sandbox_clock_start` (the fixture), else now."""
    argument = getattr(request, "param", None) or {}
    unknown = set(argument) - {"clock_start"}
    if unknown:
        pytest.fail(f"payroll_sandbox takes the argument clock_start, not "
                    f"{', '.join(sorted(unknown))}", pytrace=False)
    start = argument.get("clock_start") or payroll_sandbox_clock_start
    try:
        tenant = payroll_sandbox_server.new_tenant(
            name=tenant_name(request.node.name), **({"clock": {"start": start}} if start else {}))
    except SandboxError as error:
        if error.status != 422:
            raise
        pytest.fail(f"payroll_sandbox: clock_start {start!r}: {error}", pytrace=False)
    ledger = _Ledger(tenant, bundles=bundles_folder(request.config))
    request.node.stash[_LEDGER] = ledger
    if _payroll_sandbox_case is not None:
        tenant.request("PUT", "/_sandbox/scenario", {"scenario": _payroll_sandbox_case.scenario})
        tenant.scenario = _payroll_sandbox_case.scenario
    yield tenant
    if ledger.wanted and not ledger.reported:  # read now: the teardown's report comes after
        ledger.at_teardown = ledger.read()
    if ledger.wanted:
        ledger.write_bundle(request.node.nodeid)
    collected = request.config.stash.get(_COVERAGE, None)
    if collected is not None:
        collected.read(tenant)
    with contextlib.suppress(SandboxError):  # already gone (the test deleted or reset it)
        tenant.request("DELETE", f"/_sandbox/tenants/{tenant.name}")


@pytest.fixture
def _payroll_sandbox_case(request: pytest.FixtureRequest) -> Case | None:
    """The matrix item's case (pytest_generate_tests parametrizes it), else None."""
    return getattr(request, "param", None)


@pytest.fixture
def payroll_sandbox_expected(_payroll_sandbox_case: Case | None) -> dict[str, Any]:
    """An item of the scenario matrix: `{scenario, product, status, reason, eventTypes}`,
    how one task of the product under the item's scenario ends and the event types it
    sends, in order (from the catalog, run in-process)."""
    if _payroll_sandbox_case is None:
        pytest.fail(f"payroll_sandbox_expected is for tests marked {MARKER}", pytrace=False)
    return _payroll_sandbox_case.expected()


@pytest.fixture
def payroll_sandbox_asgi_server(
        payroll_sandbox_receiver_host: ReceiverHost) -> Iterator[Callable[..., str]]:
    """A factory: `payroll_sandbox_asgi_server(app)` serves your ASGI app (FastAPI,
    Starlette, Django's `get_asgi_application()`; Flask through a2wsgi's WSGIMiddleware)
    with uvicorn on a real port (payroll_sandbox_receiver_host) for this test and returns
    its base URL; `options` are more uvicorn.Config arguments. The app runs on an event
    loop in a thread of its own, in sync and async tests alike; every server it started
    stops after the test (the app's lifespan shutdown runs)."""
    with contextlib.ExitStack() as started:  # each closed, newest first, even if one fails

        def serve(app: Any, **options: Any) -> str:
            server = AsgiServer(app, host=payroll_sandbox_receiver_host, **options).start()
            started.callback(server.close)
            return server.url

        yield serve


@pytest.fixture
def webhook_receiver(payroll_sandbox: Sandbox, _payroll_sandbox_thread: LoopThread,
                     payroll_sandbox_receiver_host: ReceiverHost,
                     request: pytest.FixtureRequest) -> Iterator[WebhookReceiver]:
    """A real receiver (payroll_sandbox_receiver_host), this test's tenant's endpoint for
    every event type. A delivery it had to refuse (bad signature, not a CloudEvent) fails
    the test."""
    receiver = WebhookReceiver(loop=_payroll_sandbox_thread,
                               host=payroll_sandbox_receiver_host).start()
    try:
        receiver.register(payroll_sandbox)
        yield receiver
    finally:
        receiver.close()
    _refusals_fail_the_teardown(receiver, request)


def _refusals_fail_the_teardown(receiver: WebhookReceiver | AsyncWebhookReceiver,
                                request: pytest.FixtureRequest) -> None:
    """A receiver's check at teardown: a refused delivery fails it, and the ledger is read
    for its report before the tenant goes."""
    ledger = request.node.stash.get(_LEDGER, None)
    if receiver.problems and ledger is not None:
        ledger.wanted = True
    receiver.check()


if pytest_asyncio is not None:

    @pytest_asyncio.fixture
    async def async_payroll_sandbox(payroll_sandbox: Sandbox) -> AsyncIterator[AsyncSandbox]:
        """`payroll_sandbox`'s tenant, awaitable: its calls leave the event loop free."""
        async with payroll_sandbox.awaitable() as sandbox:
            sandbox.scenario = payroll_sandbox.scenario
            sandbox.handler_checks = payroll_sandbox.handler_checks  # one tally per tenant
            yield sandbox

    @pytest_asyncio.fixture
    async def async_webhook_receiver(
            async_payroll_sandbox: AsyncSandbox, payroll_sandbox_receiver_host: ReceiverHost,
            request: pytest.FixtureRequest) -> AsyncIterator[AsyncWebhookReceiver]:
        """A real receiver on the test's event loop, this test's tenant's endpoint for
        every event type. A delivery it had to refuse fails the test."""
        receiver = await AsyncWebhookReceiver(host=payroll_sandbox_receiver_host).start()
        try:
            await receiver.register(async_payroll_sandbox)
            yield receiver
        finally:
            await receiver.close()
        _refusals_fail_the_teardown(receiver, request)
