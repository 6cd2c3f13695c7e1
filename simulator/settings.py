"""Settings: defaults, then the config file, then PAYROLL_SANDBOX_* variables, then flags.

The result is one frozen value that the app factory reads; nothing else looks at
the environment or the command line.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .clock import start_problem
from .schemas.fixtures import ENVIRONMENTS, SERVICE_SCHEMA
from .validate import ConfigError, load_yaml, validate_document
from .transport import SHUTDOWN_GRACE

ENV_PREFIX = "PAYROLL_SANDBOX_"
PACKAGE_DIR = Path(__file__).resolve().parent


def bundled_dir(name: str) -> Path:
    """The bundled `fixtures` or `scenarios` folder: in the repo, or inside the wheel."""
    installed = PACKAGE_DIR / "_bundled" / name
    if installed.is_dir():
        return installed
    return PACKAGE_DIR.parent / name


@dataclass(frozen=True)
class Settings:
    """How the sandbox runs: its flags, environment and config file, merged (DESIGN.md)."""

    host: str = "127.0.0.1"
    port: int = 8080
    config: Path | None = None
    fixtures: Path = field(default_factory=lambda: bundled_dir("fixtures"))
    scenarios: Path = field(default_factory=lambda: bundled_dir("scenarios"))
    # Seed of generated ids and records. 1 for the library and the pytest plugin (each
    # test's tenant is deterministic); `serve` without one draws a fresh seed (fresh_seed).
    seed: int | None = 1
    clock: str = "real"
    time_scale: float = 1.0
    # Where every tenant's clock starts (an ISO date-time; None: the wall clock's now). With
    # the same seed and a manual clock, every answer and event is the same bytes on any day.
    clock_start: str | None = None
    webhook_url: str | None = None
    # Wall seconds before a webhook attempt times out (default: 15 virtual seconds).
    webhook_timeout: float | None = None
    # Wall seconds attempts in flight get to finish on SIGTERM before they are recorded as
    # interrupted (0: at once).
    shutdown_grace: float = SHUTDOWN_GRACE
    environment: str = "sandbox"
    log_format: str = "text"
    # Service profile overrides (fixtures/service.yaml holds the defaults).
    vendor: str | None = None
    aggregator: str | None = None
    sdk_prefix: str | None = None
    sdk_global: str | None = None
    # Bounds of what a long-running server keeps (README: Limits).
    max_events: int = 5_000      # per tenant: the event ledger with its deliveries
    max_tasks: int = 10_000      # per tenant, running ones included
    max_jobs: int = 100_000      # per tenant: jobs scheduled on its clock
    max_tokens: int = 10_000     # per tenant: public tokens
    max_users: int = 100_000     # per tenant
    max_linked_accounts: int = 10_000  # per tenant: accounts tasks linked (then 429)
    max_callbacks: int = 2_000   # per tenant: the hosted flow's messages to the host page
    max_tenants: int = 1_000     # tenants made by the control plane
    max_tenants_per_maker: int = 250  # of those, made by one tenant (its share)
    # Shared deployments (SECURITY.md): host names the server answers besides IP literals
    # and localhost (comma-separated, `*` for any); who may frame the hosted flow; how long
    # a tenant made by the control plane may sit idle before it goes (seconds; 0: never).
    allowed_hosts: str = ""
    frame_ancestors: str = "*"
    tenant_idle_expiry: float = 0.0
    # --state-file: every tenant restored from this file at start (if it exists), saved to
    # it on shutdown and every state_interval seconds when something changed (0: only on
    # shutdown), written atomically (README: Snapshots and --state-file).
    state_file: Path | None = None
    state_interval: float = 30.0
    # Connections (server.py): wall seconds to receive a request's line and headers, and
    # again its body; seconds an idle keep-alive connection stays open; open connections at
    # most (0: from the descriptor limit). A slow or half-open client cannot hold the server.
    # Outbound policy of webhooks (webhooks/policy.py): CIDRs or host names, comma-separated.
    webhook_allow: str = ""
    webhook_deny: str = ""
    request_timeout: float = 30.0
    idle_timeout: float = 15.0
    max_connections: int = 0
    # Bodies (DESIGN.md, Bodies and API faults): a field the API does not know is ignored
    # and named in x-sandbox-warning, as production APIs do; strict refuses it (422), and a
    # body sent as another type than JSON (415).
    strict_bodies: bool = False

    def with_overrides(self, **values: Any) -> Settings:
        return replace(self, **{k: v for k, v in values.items() if v is not None})


# Names in the config file (each field's name in camelCase; `config` names no other file).
_CONFIG_NAMES = {f.name.split("_")[0] + "".join(w.title() for w in f.name.split("_")[1:]): f.name
                 for f in fields(Settings) if f.name != "config"}
# The bounds (README: Limits): counts of at least 1 (max_connections' 0 means "from the
# descriptor limit").
BOUNDS = tuple(f.name for f in fields(Settings)
               if f.name.startswith("max_") and f.name != "max_connections")
_TYPES = {f.name: f.type for f in fields(Settings)}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}

# What a setting may be besides its type, declared once: the config file's schema is made of
# it (each fault named with the file), and the settings of every source are checked by it.
CHOICES = {"clock": ("real", "manual"), "environment": tuple(ENVIRONMENTS),
           "log_format": ("text", "json")}
_MORE_THAN_0 = {"time_scale": "must be greater than 0",
                "request_timeout": "must be more than 0 seconds",
                "idle_timeout": "must be more than 0 seconds"}
_0_OR_MORE = {"tenant_idle_expiry": "must be 0 (never) or more seconds",
              "max_connections": "must be 0 (from the descriptor limit) or more",
              "shutdown_grace": "must be 0 (at once) or more seconds",
              "state_interval": "must be 0 (only on shutdown) or more seconds"}
_NAMES = {"oneOf": [{"type": "string"},  # comma-separated, or a list in the config file
                    {"type": "array", "items": {"type": "string", "minLength": 1}}]}
_SERVICE = SERVICE_SCHEMA["properties"]  # the service profile's overrides: as service.yaml
# Checked in the config file as written here (the merged value is checked after, or not).
_IN_CONFIG = {
    "port": {"type": "integer", "minimum": 0, "maximum": 65535},
    "clock_start": {"type": "string", "description": "Where every tenant's clock starts "
                                                     "(ISO 8601 date-time)."},
    "webhook_url": {"type": "string", "pattern": r"^https?://"},
    "webhook_timeout": {"type": "number", "exclusiveMinimum": 0},
    "vendor": _SERVICE["vendor"],
    "aggregator": _SERVICE["aggregator"],
    "sdk_prefix": _SERVICE["sdkPrefix"],
    "sdk_global": _SERVICE["sdkGlobal"],
    **dict.fromkeys(("allowed_hosts", "webhook_allow", "webhook_deny"), _NAMES),
    "frame_ancestors": {"type": "string", "minLength": 1},
    "state_file": {"type": "string", "minLength": 1},
}
_JSON_TYPES = {"str": "string", "Path": "string", "int": "integer", "float": "number",
               "bool": "boolean"}
_CONVERT = {"int": int, "float": float, "Path": Path}  # from a flag, a variable, YAML


def _config_property(name: str) -> dict[str, Any]:
    """The JSON Schema of one setting in the config file: as _IN_CONFIG writes it, else
    its type and the rules above."""
    if name in _IN_CONFIG:
        return _IN_CONFIG[name]
    if name in CHOICES:
        return {"enum": list(CHOICES[name])}
    schema: dict[str, Any] = {"type": _JSON_TYPES[_TYPES[name].removesuffix(" | None")]}
    if name in _MORE_THAN_0:
        schema["exclusiveMinimum"] = 0
    if name in _0_OR_MORE:
        schema["minimum"] = 0
    if name in BOUNDS:
        schema["minimum"] = 1
    return schema


CONFIG_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "--config FILE: the same settings as the flags",
    "type": "object",
    "additionalProperties": False,
    "properties": {key: _config_property(name) for key, name in _CONFIG_NAMES.items()},
}


def _coerce(name: str, raw: Any, source: str) -> Any:
    kind = _TYPES[name]
    try:
        if kind == "bool":
            if isinstance(raw, bool):
                return raw
            if str(raw).strip().lower() in _TRUE | _FALSE:
                return str(raw).strip().lower() in _TRUE
            raise ValueError(raw)
        if kind == "str" and isinstance(raw, list):  # a list in the config file
            return ",".join(str(item) for item in raw)
        convert = _CONVERT.get(kind.removesuffix(" | None"))
        if convert is not None:
            return convert(raw)
    except (TypeError, ValueError):
        raise ConfigError(source, f"$.{name}", f"{raw!r} is not a valid {kind}") from None
    return raw


def fresh_seed() -> int:
    """A new seed for a `serve` started without one: ids and `ce-id`s of one run never
    repeat those of another by accident, and the ready line prints it for `--seed N`."""
    return secrets.randbelow(10**9)


def _check_choices(settings: Settings, source: str) -> None:
    for name, allowed in CHOICES.items():
        value = getattr(settings, name)
        if value not in allowed:
            raise ConfigError(source, f"$.{name}", f"{value!r} is not one of {', '.join(allowed)}")
    if settings.clock_start is not None:
        problem = start_problem(settings.clock_start)
        if problem is not None:
            raise ConfigError(source, "$.clock_start", problem)
    if not 0 <= settings.port <= 65535:
        raise ConfigError(source, "$.port", "must be between 0 and 65535")
    for name in BOUNDS:
        if getattr(settings, name) < 1:
            raise ConfigError(source, f"$.{name}", "must be at least 1")
    for name, message in _MORE_THAN_0.items():
        if getattr(settings, name) <= 0:
            raise ConfigError(source, f"$.{name}", message)
    for name, message in _0_OR_MORE.items():
        if getattr(settings, name) < 0:
            raise ConfigError(source, f"$.{name}", message)
    if any(c in settings.frame_ancestors for c in ";,\r\n"):
        raise ConfigError(source, "$.frame_ancestors",
                          "sources separated by spaces, without ';' or ','")
    if settings.state_file is not None:
        folder = settings.state_file.resolve().parent  # a symlink's target is written
        if not folder.is_dir():
            raise ConfigError(source, "$.state_file", f"{str(settings.state_file)!r}: the "
                              f"folder {str(folder)!r} does not exist")
        if settings.state_file.is_dir():
            raise ConfigError(source, "$.state_file",
                              f"{str(settings.state_file)!r} is a folder; name a file")
    from .transport.policy import Rules

    for name in ("webhook_allow", "webhook_deny"):
        try:
            Rules.parse(getattr(settings, name).split(","), f"--{name.replace('_', '-')}")
        except ValueError as error:
            raise ConfigError(source, f"$.{name}", str(error)) from None
    if settings.webhook_url is not None:
        from .validate import webhook_url_problem

        problem = webhook_url_problem(settings.webhook_url)
        if problem is not None:
            raise ConfigError(source, "$.webhook_url", f"{settings.webhook_url!r} {problem}")


def load_settings(flags: Mapping[str, Any], environ: Mapping[str, str] | None = None, *,
                  default_seed: int | None = 1,
                  defaults: Mapping[str, Any] | None = None) -> Settings:
    """Build Settings from flags (already parsed, None when absent) and the environment.
    `default_seed=None` leaves `seed` None when no source gives one (`serve` draws one);
    `defaults` replace Settings' own below every source (`exec`: port 0, a manual clock)."""
    environ = os.environ if environ is None else environ
    settings = Settings(seed=default_seed).with_overrides(**(defaults or {}))

    config_path = flags.get("config") or environ.get(ENV_PREFIX + "CONFIG")
    if config_path:
        path = Path(config_path)
        document = load_yaml(path) or {}
        if hasattr(document.get("clockStart"), "isoformat"):  # YAML reads it as a datetime
            document["clockStart"] = document["clockStart"].isoformat()
        validate_document(document, CONFIG_SCHEMA, str(path))
        values = {_CONFIG_NAMES[k]: _coerce(_CONFIG_NAMES[k], v, str(path))
                  for k, v in document.items()}
        base = path.parent
        for name in ("fixtures", "scenarios", "state_file"):
            if name in values and not values[name].is_absolute():
                values[name] = base / values[name]
        settings = settings.with_overrides(config=path, **values)

    names = [name for name in _TYPES if name != "config"]
    from_env = {name: _coerce(name, environ[variable], f"environment variable {variable}")
                for name in names if (variable := ENV_PREFIX + name.upper()) in environ}
    from_flags = {name: _coerce(name, flags[name], f"flag --{name.replace('_', '-')}")
                  for name in names if flags.get(name) is not None}
    settings = settings.with_overrides(**from_env).with_overrides(**from_flags)
    _check_choices(settings, "settings")
    return settings
