"""Bundles: a failed test's tenant as one file that reopens where it failed (issue 46, point 4).

A bundle is one JSON document: `{format, version, test, tenant, takenAt, seed, clock,
bindings, snapshot, requests, events, callbacks}`. `snapshot` is the tenant's GET
/_sandbox/snapshot at the failing moment (what `serve --open-bundle` restores); the others
are there to be read without a server: the request journal and the event ledger as GET
/_sandbox/requests (oldest first) and GET /_sandbox/events show them, the clock, the
scenario bindings, and the hosted flow's callbacks to its host page (GET
/_sandbox/sdk/callbacks).

GET /_sandbox/bundle (routes/control.py) makes one; the pytest plugin writes one per failed
test, `exec` one per tenant of a failed run (write_bundle, inside their folder only); `serve
--open-bundle FILE` reads one (read_bundle: bounded, checked, nothing restored from a file
that is no bundle) and restores it into a tenant of the snapshot's name (open_bundle).

No key of the tenant is written: the restored tenant gets keys of its own. A URL's user
information (`https://user:pass@...`) is redacted wherever it appears, so the only secrets a
bundle can hold are the sandbox's own (webhook signing secrets the tenant made).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from functools import cache
from pathlib import Path
from typing import Any

from ..validate import ConfigError

FORMAT = "payroll-sandbox-bundle"
VERSION = 1
FOLDER = "payroll-sandbox-bundles"     # the default folder, where the run starts
OFF = "off"                            # the folder setting that writes none
# The largest bundle `serve --open-bundle` reads: the largest snapshot a server restores
# (snapshot.MAX_DOCUMENT_BYTES), which a bundle holds, plus as much again for its journal
# and ledger views.
MAX_BUNDLE_BYTES = 2 * 256 * 1024 * 1024
MAX_NAME = 120                         # characters of a bundle's file name before `.json`
MAX_TEST = 1024                        # characters of the test id a bundle names

NOT_A_BUNDLE = (f"not a bundle: its `format` must be {FORMAT!r} (a failed test's file in "
                f"{FOLDER}/, or GET /_sandbox/bundle)")
A_SNAPSHOT = ("a tenant's snapshot, not a bundle: restore it with POST /_sandbox/snapshot "
              "(or `payroll_sandbox.restore(document)`)")
NEWER = ("a bundle of format version {theirs}; this payroll-sandbox reads versions 1 to "
         "{ours}: open it with the version that wrote it, or a newer one")
TOO_LARGE = f"larger than {MAX_BUNDLE_BYTES} bytes, the largest bundle this server opens"

_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s]*@")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def redacted(value: Any) -> Any:
    """`value` with every URL's user information replaced by `redacted` (a customer's
    credential for their endpoint); what has none is returned as it is (not copied)."""
    if isinstance(value, str):
        return _USERINFO.sub(r"\g<1>redacted@", value) if "@" in value else value
    if isinstance(value, dict):
        changed = {key: redacted(item) for key, item in value.items()}
        return changed if any(changed[k] is not value[k] for k in value) else value
    if isinstance(value, list):
        changed_items = [redacted(item) for item in value]
        return (changed_items if any(a is not b for a, b in zip(changed_items, value))
                else value)
    return value


def document(*, test: str, tenant: str, seed: int, clock: dict[str, Any],
             bindings: dict[str, str], snapshot: dict[str, Any], requests: list[Any],
             events: list[Any], callbacks: list[Any]) -> dict[str, Any]:
    """A bundle of these parts (the snapshot and views as JSON builtins), URLs redacted."""
    return redacted({"format": FORMAT, "version": VERSION, "test": test[:MAX_TEST],
                     "tenant": tenant, "takenAt": clock.get("now"), "seed": seed,
                     "clock": clock, "bindings": bindings, "snapshot": snapshot,
                     "requests": requests, "events": events, "callbacks": callbacks})


@cache
def bundle_schema() -> dict[str, Any]:
    """GET /_sandbox/bundle's answer: each part's schema is that of the control plane's
    answer it copies, taken from that operation (made when first needed)."""
    from .operations import OPERATIONS
    from .snapshot_document import snapshot_schema

    def answer(path: str) -> dict[str, Any]:
        return next(o.response for o in OPERATIONS if (o.method, o.path) == ("GET", path))

    def copied(path: str, description: str) -> dict[str, Any]:
        return {**answer(path), "description": f"GET {path}, {description}."}

    snapshot = {k: v for k, v in snapshot_schema().items() if k != "$schema"}
    return {
        "type": "object",
        "description": "A tenant's bundle (docs/plugin.md: A failed test reopens): its "
                       "snapshot, and its journal, ledger, clock and bindings as the control "
                       "plane shows them.",
        "required": [*PARTS],
        "properties": {
            "format": {"const": FORMAT}, "version": {"const": VERSION},
            "test": {"type": "string", "description": "The test's id (what asked for it)."},
            "tenant": {"type": "string"}, "takenAt": {"type": ["string", "null"]},
            "seed": {"type": "integer"}, "clock": answer("/_sandbox/clock"),
            "bindings": {"type": "object", "additionalProperties": {"type": "string"}},
            "snapshot": {**snapshot, "description": "GET /_sandbox/snapshot's document."},
            "requests": copied("/_sandbox/requests", "oldest first"),
            "events": copied("/_sandbox/events", "oldest first"),
            "callbacks": copied("/_sandbox/sdk/callbacks", "oldest first: the hosted flow's "
                                "messages to its host page")},
    }


# What a file must have to be opened as a bundle (its snapshot is checked as it restores).
PARTS = {"format": "string", "version": "integer", "test": "string", "tenant": "string",
         "seed": "integer", "clock": "object", "bindings": "object", "snapshot": "object",
         "requests": "array", "events": "array", "callbacks": "array"}
FILE_SCHEMA = {"type": "object", "required": [*PARTS],
               "properties": {name: {"type": kind} for name, kind in PARTS.items()}}


# -- writing: one file per test, inside its folder ------------------------------------------------

def safe_name(text: str) -> str:
    """`text` with every run of characters but letters, digits, `_`, `.` and `-` as one `_`
    and no leading dot: a file name (and a tenant name) that is never a path."""
    return _UNSAFE.sub("_", text).lstrip(".") or "test"


def file_name(test: str) -> str:
    """A test id as a file name of the folder: `tests/test_x.py::test_y[a/b]` ->
    `tests_test_x.py__test_y_a_b_.json`; characters other than letters, digits, `_`, `.`
    and `-` become `_`, no leading dot, and a long id is cut with a hash of the whole id
    so that two ids never share a name by being cut."""
    name = safe_name(test)
    if len(name) > MAX_NAME:
        name = f"{name[:MAX_NAME - 11]}-{hashlib.sha256(test.encode()).hexdigest()[:10]}"
    return f"{name}.json"


def write_bundle(folder: Path, test: str, data: bytes) -> Path:
    """`data` as `<folder>/<file_name(test)>`, written whole (state_file.write_atomically:
    a symlink of that name is replaced, never followed, so nothing is written outside the
    folder). The folder is made if needed."""
    from .state_file import write_atomically

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name(test)
    write_atomically(path, data, follow_links=False)
    return path


def folder_setting(value: str | None, base: Path) -> Path | None:
    """The bundles' folder a setting names (relative to `base`), or None for `off`; no
    setting: FOLDER under `base`."""
    value = (value or "").strip()
    if value.lower() == OFF:
        return None
    return base / (value or FOLDER)


# -- reading: `serve --open-bundle FILE` ----------------------------------------------------------

def read_bundle(path: Path) -> dict[str, Any]:
    """The bundle at `path`, checked as a bundle (its snapshot is checked as it is
    restored), or ConfigError naming the file and what is wrong: not a regular file, over
    MAX_BUNDLE_BYTES (refused before it is read), not JSON, not a bundle, a newer version."""
    from .snapshot import decode

    file = str(path)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would be waited on for ever
            raise ConfigError(file, "$", "not a regular file")
        with open(path, "rb") as handle:
            facts = os.fstat(handle.fileno())
            if not stat.S_ISREG(facts.st_mode):
                raise ConfigError(file, "$", "not a regular file")
            if facts.st_size > MAX_BUNDLE_BYTES:
                raise ConfigError(file, "$", TOO_LARGE)
            raw = handle.read(MAX_BUNDLE_BYTES + 1)
    except OSError as error:
        raise ConfigError(file, "$", f"cannot read: {error.strerror or error}") from None
    if len(raw) > MAX_BUNDLE_BYTES:
        raise ConfigError(file, "$", TOO_LARGE)
    try:
        bundle = decode(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise ConfigError(file, "$", f"not JSON ({error}): {NOT_A_BUNDLE}") from None
    if not isinstance(bundle, dict):
        raise ConfigError(file, "$", NOT_A_BUNDLE)
    if bundle.get("format") != FORMAT:
        from .snapshot_document import FORMAT as SNAPSHOT

        raise ConfigError(file, "$.format",
                          A_SNAPSHOT if bundle.get("format") == SNAPSHOT else NOT_A_BUNDLE)
    version = bundle.get("version")
    if type(version) is not int or not 1 <= version <= VERSION:
        raise ConfigError(file, "$.version", NEWER.format(theirs=version, ours=VERSION))
    from ..validate import schema_errors

    problems = schema_errors(bundle, FILE_SCHEMA)
    if problems:
        raise ConfigError.collected([(file, where, message) for where, message in problems])
    return bundle


def bundle_seed(path: Path) -> int | None:
    """The seed a bundle was taken with (None when it cannot be read: open_bundle then
    says why), so that `serve --open-bundle` without `--seed` makes the same catalog."""
    try:
        seed = read_bundle(path)["seed"]
    except ConfigError:
        return None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def open_bundle(sandbox: Any, path: Path) -> tuple[dict[str, Any], Any]:
    """The bundle at `path` restored into a new tenant of its snapshot's name (keys of its
    own; a fixtures' account of that name, such as `exec`'s default tenant, is restored
    into), or ConfigError and nothing restored: the tenant made for it goes again when its
    snapshot does not restore (another seed or environment, a scenario this server lacks,
    a document at fault). The bundle and the tenant."""
    from ..schemas.api import TenantRequest
    from .snapshot import restore
    from .snapshot_document import Fault

    bundle = read_bundle(path)
    name = bundle["snapshot"].get("tenant", {}).get("name") if isinstance(
        bundle["snapshot"].get("tenant"), dict) else None
    registry = sandbox.registry
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
        raise ConfigError(str(path), "$.snapshot.tenant.name",
                          "a tenant name (letters, digits, _ . -; 64 at most)")
    tenant = registry.tenants.get(name)
    made = tenant is None
    if not made and registry.creator_of(name) is not None:
        raise ConfigError(str(path), "$.snapshot.tenant.name",
                          f"a tenant named {name!r} exists already on this server")
    if made:  # else a fixtures' account (`exec`'s default tenant): restored into it
        tenant = registry.create_tenant(TenantRequest(name=name))
    try:
        restore(tenant, sandbox, bundle["snapshot"])
    except Fault as fault:
        if made:
            registry.delete(tenant.name, caller=tenant)
        raise fault.config_error(str(path), "$.snapshot") from None
    return bundle, tenant
