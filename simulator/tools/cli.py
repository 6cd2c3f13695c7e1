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

from .. import SPEC_REVISION, __version__
from ..load.fixtures import ConfigError
from .commands import (EXIT_CONFIG, check_fixtures, check_handler_command, listen_command,
                       scenarios_command, trigger_command, verify_against_command)

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="payroll-sandbox",
                                     description="Local sandbox of a payroll-connectivity service.")
    # `0.1.0 (spec 072010dce29d)`: the package's version and the spec revision it follows.
    parser.add_argument("--version", action="version",
                        version=f"payroll-sandbox {__version__} (spec {SPEC_REVISION})")
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
                     "--payroll-sandbox-coverage does; inside the working folder)")
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
    _add_key_options(trigger)

    listen = commands.add_parser(
        "listen", help="follow a running server's events; optionally forward them to a URL",
        description="One line per new event and per delivery attempt of a running server, "
                    "as they happen. With --forward-to, each new event is also sent to that "
                    "URL as the sandbox sends it (CloudEvent, signed). Ctrl-C stops.")
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
    _add_key_options(check, " (with --url: they make the temporary tenant)",
                     dest="sandbox_url", metavar="SANDBOX_URL",
                     help="make the events on this running sandbox (its vendor, event names, "
                          "companies and scenarios), in a temporary tenant deleted afterwards "
                          "(default: an in-process sandbox)")
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
                       ("linked-accounts", "per tenant: linked accounts (10000)"),
                       ("callbacks", "per tenant: the hosted flow's messages to the host "
                                     "page kept (2000)"),
                       ("tenants", "tenants the control plane may make (1000)"),
                       ("tenants-per-maker", "of those, made by one tenant (250)")):
        serve.add_argument(f"--max-{name}", type=int, metavar="N", help=what)


def _add_key_options(command: argparse.ArgumentParser, use: str = "", **url: Any) -> None:
    """--url of a running server (`url`: check-handler's own), --api-key and --api-secret
    of its tenant; `client.sandbox_url` and `client.sandbox_keys` fill in their defaults."""
    command.add_argument("--url", **url or {
        "help": "base URL (default $PAYROLL_SANDBOX_URL or http://127.0.0.1:8080)"})
    command.add_argument("--api-key", help="default $PAYROLL_SANDBOX_API_KEY or the bundled "
                                           f"default tenant's{use}")
    command.add_argument("--api-secret", help="default $PAYROLL_SANDBOX_API_SECRET or the "
                                              f"bundled default tenant's{use}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as error:
        for file, path, message in error.problems:
            print(f"payroll-sandbox: configuration error: {file}: {path}: {message}",
                  file=sys.stderr)
        return EXIT_CONFIG


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
    app, settings = _start_up(flags, defaults)
    opened = _open_bundle(app, Path(bundle)) if bundle else None
    _run_loop(flags, _run(app, settings, opened=opened))
    return 0


# `exec`'s own defaults, below the config file, the variables and the flags: a free port,
# and the manual clock, so a suite advances time (POST /_sandbox/clock/advance) instead of
# sleeping; `--clock real` (or PAYROLL_SANDBOX_CLOCK=real) gives wall time.
EXEC_DEFAULTS = {"port": 0, "clock": "manual"}


def _exec(flags: dict) -> int:
    """`payroll-sandbox exec [serve flags] -- CMD [ARGS...]` (simulator/tools/execute.py): CMD's
    exit status; the undelivered webhooks of the run on standard error after it."""
    import functools

    from ..edge.bundles import folder_setting
    from ..kit.coverage import CoverageError, check_writable
    from . import execute

    argv = list(flags.pop("argv") or [])
    coverage = flags.pop("coverage", None)
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
    app, settings = _start_up(flags, EXEC_DEFAULTS)
    # CMD's output is the run's: the server's own lines are its warnings and errors only
    # (no access lines), and undelivered webhooks are the report's, not the log's.
    logging.getLogger("payroll_sandbox").setLevel(logging.WARNING)
    logging.getLogger("payroll_sandbox.webhooks").setLevel(logging.ERROR)
    try:
        status, text = _run_loop(flags, _run(app, settings, functools.partial(
            execute.beside, argv, coverage=coverage, bundles=bundles)))
    except KeyboardInterrupt:  # before CMD started
        return 130
    if text:
        print(text, file=sys.stderr, flush=True)
    return status


def _start_up(flags: dict, defaults: dict | None = None) -> tuple[Any, Any]:
    """The app `serve` (and `exec`, with its `defaults`) runs, and its settings."""
    # Start-up (the server's imports, the catalog, the app) makes what lives as long as the
    # process: the collector stays off until long_lived freezes it (20-30 ms of a start).
    gc.disable()
    try:
        from ..settings import fresh_seed, load_settings

        settings = load_settings(flags, default_seed=None, defaults=defaults)
        if settings.seed is None:  # none given: the saved run's, or a fresh one (never repeated)
            saved = None
            if settings.state_file is not None:
                from ..edge.state_file import saved_seed

                saved = saved_seed(settings.state_file)
            settings = replace(settings, seed=fresh_seed() if saved is None else saved)
        _configure_logging(settings.log_format)
        from ..app import SERVER_GC_THRESHOLDS, build_registry, create_app, long_lived

        with long_lived():  # start-up makes only what lives as long as the process
            app = create_app(settings, registry=build_registry(settings))
        gc.set_threshold(*SERVER_GC_THRESHOLDS)
    finally:
        gc.enable()
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


def _run_loop(flags: dict, main: Any) -> Any:
    """Runs `main` on the event loop of `--loop`; the access log's last lines go out after."""
    from ..edge.logs import batch_access_log

    try:
        with asyncio.Runner(loop_factory=_loop_factory(flags.get("loop"))) as runner:
            return runner.run(main)
    finally:
        batch_access_log(None)


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
    from ..edge.server import start_site

    try:
        runner, host, port = await start_site(app, settings.host, settings.port)
    except OSError as error:
        raise ConfigError("settings", "$.port", f"cannot listen on {settings.host}:"
                          f"{settings.port}: {error.strerror}") from None
    tenant = app[SANDBOX].registry.tenants.default()
    line = ready_line(host, port, settings.environment, tenant.api_key, tenant.api_secret,
                      settings.seed)
    try:
        if beside is not None:
            print(line, file=sys.stderr, flush=True)
            return await beside(app, reachable_url(host, port))
        print(line, flush=True)
        if opened is not None:
            print(opened(reachable_url(host, port)), flush=True)
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": lambda args: _serve(vars(args)),
    "exec": lambda args: _exec(vars(args)),
    "fixtures": lambda args: check_fixtures(args.directory),
    "scenarios": lambda args: scenarios_command(args.action, args.directory,
                                                getattr(args, "force", False)),
    "trigger": trigger_command,
    "listen": listen_command,
    "check-handler": check_handler_command,
    "verify-against": verify_against_command,
}
