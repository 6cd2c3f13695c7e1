"""--state-file: the tenants saved on shutdown (and on a timer) into one file, written
atomically, and read back at start-up; a torn or foreign file is refused with its reason."""

from __future__ import annotations

import asyncio
import glob
import os
import stat
import tempfile
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from aiohttp import web

from ..clock import MANUAL, isoformat
from ..load.fixtures import ConfigError
from ..schemas.fixtures import ACCOUNT_SCHEMA
from ..validate import schema_errors
from .snapshot import decode, encode, log, restore, take
from .snapshot_document import (STATE_FORMAT, STATE_SCHEMA, VERSION, Fault,
                                check_header, migrated)


TORN_FILE = ("not valid JSON ({error}): the state file is torn or corrupt; remove it (the "
             "sandbox then starts from the fixtures) or put back a good copy")


def state_document(sandbox: Any) -> dict[str, Any]:
    """Every tenant of the server: its account (name, keys, settings), who made it (None for
    the fixtures' accounts) and its snapshot."""
    registry = sandbox.registry
    return {"format": STATE_FORMAT, "version": VERSION,
            "environment": registry.tenants.environment, "seed": registry.seed,
            "savedAt": isoformat(time.time()),  # the wall clock: when the file was written
            "tenants": [{"account": tenant.account, "createdBy": registry.creator_of(tenant.name),
                         "snapshot": take(tenant, sandbox)} for tenant in registry.tenants]}


def saved_seed(path: Path) -> int | None:
    """The seed a state file was saved with (None: no file, or none readable in it), so
    that `serve --state-file` without `--seed` goes on with the saved run's ids and
    records; load_state reports a torn file with its own message."""
    try:
        seed = decode(path.read_bytes()).get("seed")
    except (OSError, ValueError, UnicodeDecodeError, AttributeError):
        return None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def load_state(sandbox: Any, path: Path) -> int:
    """Every tenant of the state file, restored (ConfigError naming the file and the JSON
    path when it is torn, corrupt or of another server). The number of tenants."""
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise ConfigError(file, "$", f"cannot read: {error.strerror or error}") from None
    try:
        document = decode(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise ConfigError(file, "$", TORN_FILE.format(error=error)) from None
    try:
        check_header(document, sandbox, STATE_FORMAT)
    except Fault as fault:
        raise ConfigError(file, fault.problems[0][0], f"{fault.message} Remove the file to "
                          "start from the fixtures.") from None
    document = migrated(document)
    problems = schema_errors(document, STATE_SCHEMA)
    if problems:
        raise ConfigError.collected([(file, path, message) for path, message in problems])
    registry = sandbox.registry
    for number, entry in enumerate(document["tenants"]):
        where = f"$.tenants[{number}]"
        account, creator = entry["account"], entry["createdBy"]
        faults = [(file, f"{where}.account{p[1:]}", m)
                  for p, m in schema_errors(account, ACCOUNT_SCHEMA)]
        if faults:
            raise ConfigError.collected(faults)
        tenant = registry.tenants.get(account["name"])
        if creator is None:
            if tenant is None or registry.creator_of(tenant.name) is not None:
                raise ConfigError(file, f"{where}.account.name", f"the fixtures have no account "
                                  f"named {account['name']!r} any more; remove the file to start "
                                  "from the fixtures")
        else:
            if tenant is not None:
                raise ConfigError(file, f"{where}.account.name",
                                  f"a tenant named {account['name']!r} exists already")
            tenant = registry.restore_tenant(account, creator)
        try:
            restore(tenant, sandbox, entry["snapshot"])
        except Fault as fault:
            raise fault.config_error(file, f"{where}.snapshot") from None
    return len(document["tenants"])


def write_atomically(path: Path, data: bytes, *, follow_links: bool = True) -> None:
    """A temporary file in the same folder, written and fsynced, then os.replace and an
    fsync of the folder: a crash leaves the old file or the new one, never a torn one.
    The file holds API keys: only its owner may read it (mkstemp's 0600). A symlink is
    followed: its target is what is replaced (in the target's folder), the link stays;
    without `follow_links`, the link is what is replaced."""
    path = path.resolve() if follow_links else path
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                             suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    with suppress(OSError):  # not every file system can sync a folder
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def remove_leftovers(path: Path, *, before: float) -> list[Path]:
    """The temporary files write_atomically left beside `path` when a process was killed
    mid-write (`.state.json.<random>.tmp`): removed at start, so a crash loop does not fill
    the volume. Only this user's regular files made before `before` (this start): another
    process writing the same file now keeps its own."""
    path = path.resolve()
    removed = []
    with suppress(OSError):
        for leftover in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
            with suppress(OSError):
                facts = leftover.lstat()
                if (stat.S_ISREG(facts.st_mode) and facts.st_uid == os.getuid()
                        and facts.st_mtime < before):
                    leftover.unlink()
                    removed.append(leftover)
    if removed:
        log.info("removed %d temporary files a crash left beside %s", len(removed), path)
    return removed


class StateFile:
    """`serve --state-file`: restored at start (if the file exists), saved every
    `--state-interval` seconds when something changed and once more on shutdown, before
    webhook deliveries stop. Without the setting it does nothing."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self.path: Path | None = sandbox.settings.state_file
        self.interval: float = sandbox.settings.state_interval
        self._lock = asyncio.Lock()
        self._closed = False
        self._saved: Any = None  # what the state looked like at the last save
        self._task: asyncio.Task | None = None
        self._started = time.time()  # temporary files older than this are a crash's

    def restore(self) -> None:
        if self.path is None:
            return
        remove_leftovers(self.path, before=self._started)
        if not self.path.exists():
            return
        count = load_state(self.sandbox, self.path)
        self._saved = self._fingerprint()
        log.info("restored %d tenants from %s", count, self.path)

    def start(self) -> None:
        if self.path is not None and self.interval > 0:
            self._task = asyncio.get_running_loop().create_task(self._every_interval())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def on_shutdown(self, app: web.Application) -> None:
        """The last save, before deliveries stop (SIGTERM): attempts in flight get the
        dispatcher's grace to finish first, so the file shows how they went."""
        if self.path is None:
            return
        tenants = [t for t in self.sandbox.registry.tenants if t.webhooks.busy]
        if tenants:
            settling = [asyncio.ensure_future(self.sandbox.dispatcher.settle(t)) for t in tenants]
            await asyncio.wait(settling, timeout=self.sandbox.dispatcher.grace)
        try:
            await self.save(final=True)
        except Exception:  # the shutdown goes on (deliveries still stop and are recorded)
            log.exception("could not save the state file %s on shutdown", self.path)

    async def save(self, *, final: bool = False, only_if_changed: bool = False) -> bool:
        """Writes the file (in a worker thread; the document is made here, between two
        jobs). After the final save no other is written. Whether it wrote."""
        if self.path is None:
            return False
        async with self._lock:
            if self._closed:
                return False
            self._closed = final
            fingerprint = self._fingerprint()
            if only_if_changed and fingerprint == self._saved:
                return False
            data = encode(state_document(self.sandbox))
            try:
                await asyncio.to_thread(write_atomically, self.path, data)
            except OSError as error:
                log.error("could not save the state file %s: %s", self.path, error)
                return False
            self._saved = fingerprint
            return True

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.save(only_if_changed=True)
            except Exception:  # the server goes on; the next save may work
                log.exception("could not save the state file %s", self.path)

    def _fingerprint(self) -> tuple[Any, ...]:
        """Cheap signs of change: requests journaled, events, jobs scheduled and pending,
        attempts in flight, the manual clock (a real clock moves by itself: the final save
        keeps its time)."""
        manual = self.sandbox.settings.clock == MANUAL
        return tuple((t.name, len(t.journal) + t.journal.evicted, t.events.emitted,
                      len(t.timeline), t.timeline.next_sequence(), len(t.webhooks.in_flight),
                      sum(len(d) for d in t.webhooks.deliveries.values()),
                      t.clock.timestamp() if manual else None)
                     for t in self.sandbox.registry.tenants)


STATE_FILE = web.AppKey("state_file", StateFile)
