"""`payroll-sandbox`: serve, and check fixture files.

Bad configuration stops the start with one message naming the file and the JSON
path of the fault, and exit code 2; nothing starts half-configured.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..load.fixtures import ConfigError

__all__ = ["main"]

EXIT_CONFIG = 2


def _version() -> str:
    """`0.1.0 (spec 072010dce29d)`: the package's version and the spec revision it follows."""
    from .. import SPEC_REVISION, __version__

    return f"{__version__} (spec {SPEC_REVISION})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="payroll-sandbox",
                                     description="Local sandbox of a payroll-connectivity service.")
    parser.add_argument("--version", action="version", version=f"payroll-sandbox {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the sandbox server")
    _add_serve_flags(serve)
    serve.add_argument("--open-bundle", metavar="FILE",
                       help="restore a failed test's bundle (payroll-sandbox-bundles/<test "
                            "id>.json) into a tenant of its name and print the dashboard's URL "
                            "at the failing moment (default --clock manual and the bundle's "
                            "seed)")

    run = commands.add_parser(
        "exec", help="run a command (a test suite in any language) beside a sandbox",
        usage="payroll-sandbox exec [serve flags] -- CMD [ARGS...]",
        description="Starts a sandbox on a free port, runs CMD with PAYROLL_SANDBOX_URL, "
                    "PAYROLL_SANDBOX_API_KEY and PAYROLL_SANDBOX_API_SECRET (the default "
                    "tenant's) in its environment, stops the sandbox when CMD ends and exits "
                    "with CMD's status. Before it exits it names on standard error every "
                    "webhook delivery of the run that never got a 2xx. Ctrl-C and SIGTERM "
                    "reach CMD (docs/exec.md).")
    _add_serve_flags(run, port="default 0: a free one; ", clock=" (default manual: tests "
                     "advance it; --clock real for wall time)")
    run.add_argument("--coverage", metavar="FILE", help="write the coverage report of the "
                     "tenants the run touched (scenarios, failure reasons, event types "
                     "delivered, faults, profiles) as JSON, as the pytest plugin's "
                     "--payroll-sandbox-coverage does")
    run.add_argument("--bundles", metavar="DIR|off",
                     help="when CMD fails, write each tenant the run touched as a bundle here "
                          "(default payroll-sandbox-bundles; off: none)")
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                     help="the command and its arguments")

    scenarios = commands.add_parser("scenarios", help="list or check scenario files")
    scenario_commands = scenarios.add_subparsers(dest="action", required=True)
    for action, text in (("list", "list the scenarios a server would load with this folder"),
                         ("validate", "check a folder as `serve --scenarios DIR` would load it")):
        command = scenario_commands.add_parser(action, help=text)
        command.add_argument("directory", nargs="?",
                             help="added to the bundled scenarios (default: those alone)")
    export = scenario_commands.add_parser("export", help="copy the bundled scenarios into a "
                                                         "folder, to start your own from")
    export.add_argument("directory")
    export.add_argument("--force", action="store_true", help="overwrite files already there")

    trigger = commands.add_parser("trigger", help="emit an event through a running server")
    trigger.add_argument("event_type", metavar="EVENT-TYPE")
    trigger.add_argument("--identifier", help="the user's identifier")
    trigger.add_argument("--task-id", help="an existing task")
    trigger.add_argument("--company-id", help="a company id")
    trigger.add_argument("--data", help="JSON object merged over the generated data")
    trigger.add_argument("--url", help="base URL (default $PAYROLL_SANDBOX_URL or "
                                       "http://127.0.0.1:8080)")
    _add_key_options(trigger)

    listen = commands.add_parser(
        "listen", help="follow a running server's events; optionally forward them to a URL",
        description="One line per new event and per delivery attempt of a running server, "
                    "as they happen. With --forward-to, each new event is also sent to that "
                    "URL as the sandbox sends it (CloudEvent, signed). Ctrl-C stops.")
    listen.add_argument("--url", help="base URL (default $PAYROLL_SANDBOX_URL or "
                                      "http://127.0.0.1:8080)")
    _add_key_options(listen)
    listen.add_argument("--forward-to", metavar="URL",
                        help="deliver each new event to this URL (e.g. your local handler)")
    listen.add_argument("--events", action="append", metavar="TYPE,TYPE",
                        help="only these event types (comma-separated; repeatable)")
    listen.add_argument("--json", action="store_true",
                        help="one JSON object per line instead of text")

    fixtures = commands.add_parser("fixtures", help="check fixture files")
    fixtures_commands = fixtures.add_subparsers(dest="action", required=True)
    validate = fixtures_commands.add_parser("validate", help="validate a fixtures folder")
    validate.add_argument("directory", nargs="?", help="default: the bundled fixtures")

    check = commands.add_parser(
        "check-handler", help="judge a webhook handler the way the service will treat it",
        description="Sends a fixed suite of deliveries to URL, with events made by an "
                    "in-process sandbox (or, with --url, by a running one), and prints one "
                    "line per check (README: Checking your webhook handler). Exit 0 only when "
                    "no check fails.")
    check.add_argument("url", metavar="URL", help="the handler's webhook URL")
    check.add_argument("--secret", help="the secret the handler verifies "
                                        "x-hmac-signature-sha-256 with (default: the bundled "
                                        "default tenant's API secret, as listen and trigger "
                                        "use its keys)")
    check.add_argument("--events", action="append", metavar="TYPE,TYPE",
                       help="only these event types (comma-separated; repeatable)")
    check.add_argument("--products", action="append", metavar="PRODUCT,PRODUCT",
                       help="only tasks of these products, e.g. deposit: the task events "
                            "name them and the state URL is judged on them (comma-separated; "
                            "repeatable; default every product a task can be made for)")
    check.add_argument("--state-url", metavar="URL",
                       help='where the handler shows what it stored: a list of {"task", '
                            '"status", "reason"} or a mapping from task id to {"status", '
                            '"reason"}, alone or under "outcomes"')
    check.add_argument("--url", dest="sandbox_url", metavar="SANDBOX_URL",
                       help="make the events on this running sandbox (its vendor, event "
                            "names, companies and scenarios), in a temporary tenant deleted "
                            "afterwards (default: an in-process sandbox)")
    _add_key_options(check, " (with --url: they make the temporary tenant)")
    check.add_argument("--json", action="store_true", help="the report as one JSON document")

    verify = commands.add_parser(
        "verify-against", help="compare a service's answers with the sandbox's (drift check)",
        description="Sends a fixed set of sandbox-safe probes to URL and to an in-process "
                    "sandbox and prints every difference of status code, field, JSON type "
                    "and enum value (docs/verify-against.md). Exit 0 when there is none, "
                    "1 when there is one, 2 when the run cannot be made.")
    verify.add_argument("url", metavar="URL", help="the service's base URL (its sandbox)")
    verify.add_argument("--key", required=True, help="the service's x-api-key")
    verify.add_argument("--secret", required=True, help="the service's x-api-secret")
    verify.add_argument("--identifier", help="the test user to read (default: a fresh "
                                             "verify-<random>); one with a linked account "
                                             "on the service has records to compare")
    verify.add_argument("--i-know-this-is-sandbox", dest="trust_host", action="store_true",
                        help="probe a host that is neither loopback nor named *sandbox* "
                             "(keys or a /health that say production are still refused)")
    verify.add_argument("--aggregator-url", metavar="URL",
                        help="the aggregator's sandbox its probes go to (default: a "
                             "payroll-sandbox's own /aggregator-api; none for another service)")
    verify.add_argument("--aggregator-client-id", help="the aggregator's client id")
    verify.add_argument("--aggregator-secret", help="the aggregator's sandbox secret")
    verify.add_argument("--json", action="store_true",
                        help="the probes and differences as one JSON document")
    return parser


def _add_serve_flags(serve: argparse.ArgumentParser, *, port: str = "default 8080; ",
                     clock: str = "") -> None:
    """The flags of `serve`, which `exec` takes too (with its own port and clock defaults)."""
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help=f"port ({port}0 picks a free one)")
    serve.add_argument("--config", help="YAML file with the same settings as the flags")
    serve.add_argument("--fixtures", help="fixtures folder (default: the bundled one)")
    serve.add_argument("--scenarios", help="scenarios folder (default: the bundled one)")
    serve.add_argument("--seed", type=int, help="seed of every generated id and record (default: "
                       "the --state-file's, else a fresh one, printed in the ready line)")
    serve.add_argument("--clock", choices=["real", "manual"], help=f"virtual clock mode{clock}")
    serve.add_argument("--time-scale", type=float, help="virtual seconds per wall second")
    serve.add_argument("--clock-start", metavar="DATETIME",
                       help="where every tenant's clock starts, ISO 8601 (2026-01-05T09:00:00Z; "
                            "default: now): the same seed gives the same bytes on any day")
    serve.add_argument("--webhook-url", help="one endpoint for every event type of the "
                       "fixtures' tenants but demo, which keeps its own receiver")
    serve.add_argument("--webhook-timeout", type=float,
                       help="wall seconds per webhook attempt (default: 15 virtual seconds)")
    serve.add_argument("--environment", choices=["sandbox", "production"])
    serve.add_argument("--log-format", choices=["text", "json"])
    serve.add_argument("--allowed-host", dest="allowed_hosts", action="append", metavar="NAME",
                       help="a host name clients use to reach the server, besides IP addresses "
                            "and localhost (repeat it; '*' allows any; see SECURITY.md)")
    serve.add_argument("--webhook-allow", dest="webhook_allow", action="append", metavar="CIDR|HOST",
                       help="a webhook target the outbound policy refuses by default, allowed "
                            "(repeat it; see SECURITY.md)")
    serve.add_argument("--webhook-deny", dest="webhook_deny", action="append", metavar="CIDR|HOST",
                       help="a webhook target refused besides link-local and metadata "
                            "addresses (repeat it; *.example.com for subdomains)")
    serve.add_argument("--frame-ancestors", metavar="SOURCES",
                       help="who may frame the hosted SDK flow (CSP frame-ancestors; default *)")
    serve.add_argument("--tenant-idle-expiry", type=float, metavar="SECONDS",
                       help="delete tenants made by the control plane after this long without "
                            "a request (default 0: never)")
    serve.add_argument("--state-file", metavar="PATH",
                       help="keep every tenant in this file: restored at start if it exists, "
                            "saved on shutdown and periodically (written atomically)")
    serve.add_argument("--state-interval", type=float, metavar="SECONDS",
                       help="save the state file this often when something changed (default "
                            "30; 0: only on shutdown)")
    serve.add_argument("--shutdown-grace", type=float, metavar="SECONDS",
                       help="on SIGTERM, webhook attempts in flight get this long to finish "
                            "before they are recorded as interrupted (default 5; 0: at once)")
    serve.add_argument("--request-timeout", type=float, metavar="SECONDS",
                       help="to receive a request's headers, and again its body (default 30)")
    serve.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                       help="an idle keep-alive connection is closed after this (default 15)")
    serve.add_argument("--max-connections", type=int, metavar="N",
                       help="open connections at most; past it idle ones close first "
                            "(default: the descriptor limit less 256)")
    serve.add_argument("--strict-bodies", action="store_true", default=None,
                       help="refuse body fields and query parameters the API does not know "
                            "(422) and bodies not sent as JSON (415), instead of ignoring them "
                            "with an x-sandbox-warning header")
    serve.add_argument("--loop", choices=["asyncio", "uvloop"],
                       help="event loop (default asyncio; uvloop needs the uvloop extra)")
    for name, what in (("events", "per tenant: events kept with their deliveries (5000)"),
                       ("tasks", "per tenant: tasks kept, running ones included (10000)"),
                       ("jobs", "per tenant: jobs scheduled on its clock (100000)"),
                       ("tokens", "per tenant: public tokens kept (10000)"),
                       ("users", "per tenant: users (100000)"),
                       ("callbacks", "per tenant: the hosted flow's messages to the host "
                                     "page kept (2000)"),
                       ("tenants", "tenants the control plane may make (1000)"),
                       ("tenants-per-maker", "of those, made by one tenant (250)")):
        serve.add_argument(f"--max-{name}", type=int, metavar="N", help=what)


def _add_key_options(command: argparse.ArgumentParser, use: str = "") -> None:
    """--api-key and --api-secret of a running server's tenant; `control_plane_keys`
    fills in their defaults."""
    command.add_argument("--api-key", help="default $PAYROLL_SANDBOX_API_KEY or the bundled "
                                           f"default tenant's{use}")
    command.add_argument("--api-secret", help="default $PAYROLL_SANDBOX_API_SECRET or the "
                                              f"bundled default tenant's{use}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            return _serve(vars(args))
        if args.command == "exec":
            return _exec(vars(args))
        if args.command == "fixtures":
            return _validate_fixtures(args.directory)
        if args.command == "scenarios":
            return _scenarios(args.action, args.directory, getattr(args, "force", False))
        if args.command == "trigger":
            return _trigger(args)
        if args.command == "listen":
            return _listen(args)
        if args.command == "check-handler":
            return _check_handler(args)
        if args.command == "verify-against":
            return _verify_against(args)
    except ConfigError as error:
        for file, path, message in error.problems:
            print(f"payroll-sandbox: configuration error: {file}: {path}: {message}",
                  file=sys.stderr)
        return EXIT_CONFIG
    return 1


def _validate_fixtures(directory: str | None) -> int:
    """The same checks as a start: schemas, references, scenarios named by companies."""
    from ..load.loading import load
    from ..settings import Settings, bundled_dir

    folder = Path(directory) if directory else bundled_dir("fixtures")
    loaded = load(Settings(fixtures=folder))
    print(f"{folder}: valid ({len(loaded.fixtures.accounts)} accounts, "
          f"{len(loaded.catalog)} companies, {len(loaded.fixtures.profiles)} data profiles)")
    return 0


def _scenarios(action: str, directory: str | None, force: bool = False) -> int:
    from ..load.loading import load
    from ..load.scenarios.loader import load_scenarios
    from ..settings import Settings, bundled_dir

    bundled = bundled_dir("scenarios")
    if action == "export":
        return _export_scenarios(bundled, Path(directory), force)
    folder = Path(directory) if directory else bundled
    # What `serve --scenarios DIR` loads, checked as it checks it (companies' default
    # scenarios included); every problem of every file is reported.
    scenarios = load(Settings(scenarios=folder)).scenarios
    own = set(load_scenarios(folder)) if folder.resolve() != bundled.resolve() else set()
    if action == "validate":
        replacing = len(own & set(load_scenarios(bundled)))
        print(f"{folder}: valid ({len(scenarios)} scenarios: {len(own)} from this folder"
              f"{f', {replacing} of them replacing bundled ones' if replacing else ''})")
        return 0
    width = max((len(name) for name in scenarios), default=0)
    every = max((len(s.products or ()) for s in scenarios.values()), default=0)
    fits = {name: "fits=" + ("every-product" if len(s.products or ()) == every
                             else ",".join(s.products or ()) or "no-task")
            for name, s in scenarios.items()}
    fits_width = max((len(text) for text in fits.values()), default=0)
    for name, scenario in sorted(scenarios.items()):
        source = "yours  " if name in own else "bundled"
        print(f"{name:<{width}}  {source}  {scenario.outcome:<10} {scenario.duration:>7.1f}s  "
              f"{fits[name]:<{fits_width}}  {scenario.description}")
    return 0


def _export_scenarios(bundled: Path, target: Path, force: bool) -> int:
    """The bundled scenario files, copied into `target` (made if missing)."""
    import shutil

    files = sorted(bundled.glob("*.yaml"))
    existing = [target / f.name for f in files if (target / f.name).exists()]
    if existing and not force:
        print(f"payroll-sandbox: {len(existing)} files already exist in {target} (e.g. "
              f"{existing[0].name}); --force overwrites them", file=sys.stderr)
        return EXIT_CONFIG
    target.mkdir(parents=True, exist_ok=True)
    for file in files:
        shutil.copyfile(file, target / file.name)
    print(f"copied {len(files)} scenarios to {target}; serve --scenarios {target} loads your "
          "changes (files there add to or replace the bundled ones by name)")
    return 0


def _trigger(args: argparse.Namespace) -> int:
    """POST /_sandbox/events/trigger on a running server; prints the event with its deliveries."""
    import json

    from ..client import CannotReach, NotASandbox, SandboxClient, SandboxError, sandbox_url

    body: dict = {"eventType": args.event_type}
    for name, value in (("identifier", args.identifier), ("taskId", args.task_id),
                        ("companyId", args.company_id)):
        if value:
            body[name] = value
    if args.data:
        try:
            body["data"] = json.loads(args.data)
        except ValueError as error:
            print(f"payroll-sandbox: --data is not JSON: {error}", file=sys.stderr)
            return EXIT_CONFIG

    async def trigger() -> object:
        async with SandboxClient(sandbox_url(args.url), *control_plane_keys(args)) as client:
            answer = await client.answer("POST", "/_sandbox/events/trigger", body, strict=True)
            return answer.data

    try:
        print(json.dumps(asyncio.run(trigger()), indent=2))
        return 0
    except SandboxError as error:
        print(f"payroll-sandbox: {error.line}", file=sys.stderr)
        for item in error.body["error"].get("details") or []:
            print(f"  {item.get('path')}: {item.get('message')}", file=sys.stderr)
    except (CannotReach, NotASandbox) as error:
        print(f"payroll-sandbox: {error}", file=sys.stderr)
    return 1


def _listen(args: argparse.Namespace) -> int:
    """Follow a running server's ledger (simulator/tools/listen.py); URL and keys as `trigger`."""
    from ..client import sandbox_url
    from .listen import ListenOptions, run

    key, secret = control_plane_keys(args)
    types = frozenset(t.strip() for item in args.events or () for t in item.split(",")
                      if t.strip())
    return run(ListenOptions(
        url=sandbox_url(args.url), api_key=key, api_secret=secret, forward_to=args.forward_to,
        event_types=types or None, as_json=args.json))


def control_plane_keys(args: argparse.Namespace) -> tuple[str, str]:
    """--api-key and --api-secret, else $PAYROLL_SANDBOX_API_KEY and _SECRET, else the
    bundled default tenant's (both from one place: a key never goes with another's secret)."""
    from ..client import sandbox_keys

    return sandbox_keys(args.api_key, args.api_secret)


def ready_line(host: str, port: int, environment: str, api_key: str, api_secret: str,
               seed: int | None) -> str:
    """The first line `serve` prints (DESIGN.md, Commands): the address it is bound to,
    and for a wildcard address (0.0.0.0, ::) a reachable one beside it (`reachable=`)."""
    line = (f"payroll-sandbox serving {_url(host, port)} environment={environment} "
            f"x-api-key={api_key} x-api-secret={api_secret} seed={seed}")
    if host in WILDCARDS:
        line += f" reachable={reachable_url(host, port)}"
    return line


WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # -> the loopback address that reaches them


def _url(address: str, port: int) -> str:
    return f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"


def reachable_url(host: str, port: int) -> str:
    """The base URL a client on this machine reaches a server bound to host:port by."""
    return _url(WILDCARDS.get(host, host), port)


def _configure_logging(log_format: str) -> None:
    from ..edge.logs import JsonLogFormatter, TextLogFormatter, batch_access_log

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter() if log_format == "json" else TextLogFormatter())
    root = logging.getLogger("payroll_sandbox")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    root.propagate = False
    batch_access_log(handler)


def _serve(flags: dict) -> int:
    bundle = flags.pop("open_bundle", None)
    defaults = None
    if bundle:  # the tenant stays at the failing moment, with the catalog of the bundle's seed
        from ..edge.bundles import bundle_seed

        defaults = {"clock": "manual", "seed": bundle_seed(Path(bundle))}
    # Start-up (the server's imports, the catalog, the app) makes what lives as long as the
    # process: the collector stays off until long_lived freezes it (20-30 ms of a start).
    gc.disable()
    try:
        app, settings = _start_up(flags, defaults)
        opened = _open_bundle(app, Path(bundle)) if bundle else None
    finally:
        gc.enable()
    from ..edge.logs import batch_access_log

    try:
        with asyncio.Runner(loop_factory=_loop_factory(flags.get("loop"))) as runner:
            runner.run(_run(app, settings, opened=opened))
    finally:
        batch_access_log(None)  # the last lines out
    return 0


# `exec`'s own defaults, below the config file, the variables and the flags: a free port,
# and the manual clock, so a suite advances time (POST /_sandbox/clock/advance) instead of
# sleeping; `--clock real` (or PAYROLL_SANDBOX_CLOCK=real) gives wall time.
EXEC_DEFAULTS = {"port": 0, "clock": "manual"}


def _exec(flags: dict) -> int:
    """`payroll-sandbox exec [serve flags] -- CMD [ARGS...]` (simulator/tools/execute.py): CMD's
    exit status; the undelivered webhooks of the run on standard error after it."""
    import functools

    from . import execute

    from ..kit.coverage import CoverageError, check_writable

    argv = list(flags.pop("argv") or [])
    coverage = flags.pop("coverage", None)
    from ..edge.bundles import folder_setting

    bundles = folder_setting(flags.pop("bundles", None), Path.cwd())
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(execute.NO_COMMAND, file=sys.stderr)
        return EXIT_CONFIG
    try:
        if coverage is not None:
            check_writable(coverage)
    except CoverageError as error:
        print(error, file=sys.stderr)
        return EXIT_CONFIG
    gc.disable()
    try:
        app, settings = _start_up(flags, EXEC_DEFAULTS)
    finally:
        gc.enable()
    # CMD's output is the run's: the server's own lines are its warnings and errors only
    # (no access lines), and undelivered webhooks are the report's, not the log's.
    logging.getLogger("payroll_sandbox").setLevel(logging.WARNING)
    logging.getLogger("payroll_sandbox.webhooks").setLevel(logging.ERROR)
    from ..edge.logs import batch_access_log

    try:
        with asyncio.Runner(loop_factory=_loop_factory(flags.get("loop"))) as runner:
            status, text = runner.run(_run(app, settings, functools.partial(
                execute.beside, argv, coverage=coverage, bundles=bundles)))
    except KeyboardInterrupt:  # before CMD started
        return 130
    finally:
        batch_access_log(None)
    if text:
        print(text, file=sys.stderr, flush=True)
    return status


def _start_up(flags: dict, defaults: dict | None = None) -> tuple[Any, Any]:
    """The app `serve` (and `exec`, with its `defaults`) runs, and its settings."""
    from ..settings import fresh_seed, load_settings

    settings = load_settings(flags, default_seed=None, defaults=defaults)
    if settings.seed is None:  # none given: the saved run's, or a fresh one (never repeated)
        saved = None
        if settings.state_file is not None:
            from ..edge.state_file import saved_seed

            saved = saved_seed(settings.state_file)
        settings = replace(settings, seed=fresh_seed() if saved is None else saved)
    _configure_logging(settings.log_format)
    from ..app import build_registry, create_app, long_lived, tune_collector

    with long_lived():  # start-up makes only what lives as long as the process
        app = create_app(settings, registry=build_registry(settings))
    tune_collector()
    return app, settings


def _open_bundle(app: Any, path: Path) -> Callable[[str], str]:
    """`serve --open-bundle FILE`: the bundle restored into a tenant of its name
    (bundles.open_bundle: ConfigError and nothing restored when it is no bundle); what to
    print once the server listens at a base URL: the tenant and the dashboard's URL."""
    from ..edge.bundles import open_bundle
    from ..edge.keys import SANDBOX

    bundle, tenant = open_bundle(app[SANDBOX], path)

    def opened(base_url: str) -> str:
        test = (bundle["test"].splitlines() or ["?"])[0][:100]
        return (f"payroll-sandbox opened {path} (test {test}) as tenant "
                f"{tenant.name} at {tenant.clock.describe()['now']}; its dashboard: "
                f"{base_url}/_sandbox/#key={tenant.api_key}&secret={tenant.api_secret}")

    return opened


def _loop_factory(kind: str | None):
    """The event loop `serve` runs on: asyncio's own, or uvloop's (`--loop uvloop`, with
    the `uvloop` extra installed), which answers the same requests a little faster."""
    if kind != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        raise ConfigError("flags", "$.loop", "uvloop is not installed "
                          "(pip install 'payroll-sandbox[uvloop]')") from None
    return uvloop.new_event_loop


async def _run(app, settings, beside=None, opened=None) -> Any:
    """Serves `app` until SIGINT or SIGTERM (`serve`), or while `beside(app, base_url)`
    runs (`exec`: the ready line then goes to standard error); returns what it returns."""
    from ..edge.keys import SANDBOX
    from ..edge.server import SandboxRunner, start_site

    runner = SandboxRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        host, port = await start_site(runner, settings.host, settings.port)
    except OSError as error:
        await runner.cleanup()
        raise ConfigError("settings", "$.port", f"cannot listen on {settings.host}:"
                          f"{settings.port}: {error.strerror}") from None
    tenant = app[SANDBOX].registry.tenants.default()
    line = ready_line(host, port, settings.environment, tenant.api_key, tenant.api_secret,
                      settings.seed)
    if beside is not None:
        print(line, file=sys.stderr, flush=True)
        try:
            return await beside(app, reachable_url(host, port))
        finally:
            await runner.cleanup()
    print(line, flush=True)
    if opened is not None:
        print(opened(reachable_url(host, port)), flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _check_handler(args: argparse.Namespace) -> int:
    """Judge a webhook handler (simulator/checker/): exit 0 when no check failed, 1 when
    one did, 2 when the arguments cannot make a run."""
    import json

    from ..checker import CheckerError, check_handler

    types = [t.strip() for item in args.events or () for t in item.split(",") if t.strip()]
    products = None if args.products is None else ",".join(args.products)
    # Keys default as for trigger and listen, with --url only (without it, keys are refused).
    key, secret = (control_plane_keys(args) if args.sandbox_url
                   else (args.api_key, args.api_secret))
    source = f" with events from {args.sandbox_url}" if args.sandbox_url else ""
    print(f"payroll-sandbox: checking {args.url}{source}", file=sys.stderr, flush=True)
    try:
        report = check_handler(args.url, secret=args.secret, events=types or None,
                               state_url=args.state_url, products=products,
                               sandbox_url=args.sandbox_url, api_key=key, api_secret=secret)
    except CheckerError as error:
        print(f"payroll-sandbox: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:  # the run stopped; a temporary tenant was deleted on the way
        print("payroll-sandbox: check-handler interrupted", file=sys.stderr)
        return 130
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.text())
    return 0 if report.ok else 1


def _verify_against(args: argparse.Namespace) -> int:
    """The drift check (simulator/tools/verify.py): exit 0 when no probe differs, 1 when one
    does, 2 when the run cannot be made (bad arguments, production, unreachable)."""
    import json

    from .verify import verify
    from .probes import VerifyError

    print(f"payroll-sandbox: verifying {args.url} against an in-process sandbox",
          file=sys.stderr, flush=True)
    aggregator = None
    if args.aggregator_url is not None:
        aggregator = (args.aggregator_url, args.aggregator_client_id or "",
                      args.aggregator_secret or "")
    try:
        report = verify(args.url, args.key, args.secret, identifier=args.identifier,
                        trust_host=args.trust_host, aggregator=aggregator)
    except VerifyError as error:
        print(f"payroll-sandbox: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        print("payroll-sandbox: verify-against interrupted", file=sys.stderr)
        return 130
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.text())
    return 0 if report.ok else 1
