"""The commands that read files or call a running sandbox rather than serve one:
`check-fixtures`, `scenarios`, `trigger`, `listen`, `check-handler`, `verify-against` (cli.py
parses their flags and calls them)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


EXIT_CONFIG = 2


def check_fixtures(directory: str | None) -> int:
    """The same checks as a start: schemas, references, scenarios named by companies."""
    from ..load.loading import load
    from ..settings import Settings, bundled_dir

    folder = Path(directory) if directory else bundled_dir("fixtures")
    loaded = load(Settings(fixtures=folder))
    print(f"{folder}: valid ({len(loaded.fixtures.accounts)} accounts, "
          f"{len(loaded.catalog)} companies, {len(loaded.fixtures.profiles)} data profiles)")
    return 0


def scenarios_command(action: str, directory: str | None, force: bool = False) -> int:
    from ..load.loading import load
    from ..load.scenarios.loader import load_scenarios
    from ..settings import Settings, bundled_dir

    bundled = bundled_dir("scenarios")
    if action == "export":
        return export_scenarios(bundled, Path(directory), force)
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


def export_scenarios(bundled: Path, target: Path, force: bool) -> int:
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


def trigger_command(args: argparse.Namespace) -> int:
    """POST /_sandbox/events/trigger on a running server; prints the event with its deliveries."""
    import json

    from ..client import (CannotReach, NotASandbox, SandboxClient, SandboxError, sandbox_keys,
                          sandbox_url)

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
        keys = sandbox_keys(args.api_key, args.api_secret)
        async with SandboxClient(sandbox_url(args.url), *keys) as client:
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


def listen_command(args: argparse.Namespace) -> int:
    """Follow a running server's ledger (simulator/tools/listen.py); URL and keys as `trigger`."""
    from ..validate import names_of
    from ..client import sandbox_keys, sandbox_url
    from .listen import ListenOptions, run

    key, secret = sandbox_keys(args.api_key, args.api_secret)
    types = frozenset(names_of(args.events or ()))
    return run(ListenOptions(
        url=sandbox_url(args.url), api_key=key, api_secret=secret, forward_to=args.forward_to,
        event_types=types or None, as_json=args.json))


def check_handler_command(args: argparse.Namespace) -> int:
    """Judge a webhook handler (simulator/checker/): exit 0 when no check failed, 1 when
    one did, 2 when the arguments cannot make a run."""
    from ..checker import CheckerError, check_handler
    from ..validate import names_of
    from ..client import sandbox_keys

    types = names_of(args.events or ())
    # Keys default as for trigger and listen, with --url only (without it, keys are refused).
    key, secret = (sandbox_keys(args.api_key, args.api_secret) if args.sandbox_url
                   else (args.api_key, args.api_secret))
    source = f" with events from {args.sandbox_url}" if args.sandbox_url else ""
    print(f"payroll-sandbox: checking {args.url}{source}", file=sys.stderr, flush=True)
    # Interrupted, the run stops; a temporary tenant is deleted on the way.
    return _reported(args, "check-handler", CheckerError, lambda: check_handler(
        args.url, secret=args.secret, events=types or None, state_url=args.state_url,
        products=args.products, sandbox_url=args.sandbox_url, api_key=key, api_secret=secret))


def verify_against_command(args: argparse.Namespace) -> int:
    """The drift check (simulator/tools/verify.py): exit 0 when no probe differs, 1 when one
    does, 2 when the run cannot be made (bad arguments, production, unreachable)."""
    from .verify import verify
    from .probes import VerifyError

    print(f"payroll-sandbox: verifying {args.url} against an in-process sandbox",
          file=sys.stderr, flush=True)
    aggregator = None
    if args.aggregator_url is not None:
        aggregator = (args.aggregator_url, args.aggregator_client_id or "",
                      args.aggregator_secret or "")
    return _reported(args, "verify-against", VerifyError, lambda: verify(
        args.url, args.key, args.secret, identifier=args.identifier,
        trust_host=args.trust_host, aggregator=aggregator))


def _reported(args: argparse.Namespace, command: str, refused: type[Exception],
              run: Callable[[], Any]) -> int:
    """`run()`'s report printed (text, or JSON with --json): exit 0 when it is ok, 1 when
    not; 2 with the message of a `refused` run; 130 when interrupted."""
    import json

    try:
        report = run()
    except refused as error:
        print(f"payroll-sandbox: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        print(f"payroll-sandbox: {command} interrupted", file=sys.stderr)
        return 130
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.text())
    return 0 if report.ok else 1
