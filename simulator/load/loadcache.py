"""The start-up cache of the read-only load: fixtures and scenarios checked, the catalog
and its search index (loading.load), kept between runs.

That load is a pure function of its files (the fixture files and every scenario file),
the settings that name them and the package's code. Made from the files it takes about
100 ms of a start (YAML's import and parsing, the checks, 1,000 generated companies, the
index); read back it takes about 15 ms. The key hashes all of its inputs: every byte of
every file read, the folders' listings, the settings, the Python version and the size and
time of every module of the package, so a changed byte, an added or removed scenario, an
upgrade or an edited module is a new key, never a stale answer. Only a load that passed
its checks is kept; a wrong fixture is read (and refused) again on every start.

Best effort, like the word pools beside it (PAYROLL_SANDBOX_CACHE_DIR, default
~/.cache/payroll-sandbox; `off` for none): a folder that cannot be written or a file that
cannot be read only means loading from the files. At most KEPT_LOADS files are kept, the
least recently written out. The files are pickles, so one is read only when this user
owns it and no one else may write it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from .. import __version__
from . import pools
from .pools import cache_dir, keep

FORMAT = 4  # raised when what a cached load holds changes shape (or its classes move)
KEPT_LOADS = 16  # cached loads kept in the cache folder, the least recently written out
PREFIX = "load-"
PACKAGE = Path(__file__).resolve().parents[1]  # the whole package, not this folder
CODE_FOLDERS_SKIPPED = {"static", "__pycache__"}

T = TypeVar("T")


def cached(inputs: Iterable[tuple[str, Path]], settings_key: tuple, build: Callable[[], T],
           kind: type) -> T:
    """`build()`, or what it returned last time for the same inputs.

    `inputs` are what the build reads, as (kind, path): ("file", p) a file that may be
    missing, ("folder", p) every *.yaml and *.yml file in a folder (the build globs it).
    """
    folder = cache_dir()
    if folder is None:
        return build()
    path = folder / f"{PREFIX}{_key(inputs, settings_key)}.pickle"
    found = _read(path, kind)
    if found is not None:
        return found
    del pools.READ[:]
    made = build()
    try:  # with the word pools it read: a pool file changed since is a new build
        data = pickle.dumps((made, list(pools.READ)), protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return made  # not kept: the next start builds it again
    if keep(path, data):
        _prune(folder)
    return made


def _key(inputs: Iterable[tuple[str, Path]], settings_key: tuple) -> str:
    digest = hashlib.blake2b(digest_size=20)
    digest.update(repr((FORMAT, __version__, sys.version, settings_key)).encode())
    for kind, path in inputs:
        digest.update(f"\0{kind}\0{path}\0".encode())
        files = [path] if kind == "file" else _files_of(path)
        for file in files:
            try:
                digest.update(f"{file.name}\0".encode() + file.read_bytes())
            except OSError:
                digest.update(b"\0missing")
    for name, size, changed in _code():
        digest.update(f"{name}\0{size}\0{changed}\0".encode())
    return digest.hexdigest()


def _files_of(folder: Path) -> list[Path]:
    try:
        return sorted(entry for entry in folder.iterdir()
                      if entry.suffix in (".yaml", ".yml") and entry.is_file())
    except OSError:
        return []


def _code() -> Iterator[tuple[str, int, int]]:
    """The package's modules: an edited one (an editable install) is another key."""
    for root, folders, files in os.walk(PACKAGE):
        folders[:] = sorted(f for f in folders if f not in CODE_FOLDERS_SKIPPED)
        for name in sorted(files):
            if name.endswith(".py"):
                info = os.stat(os.path.join(root, name))
                yield os.path.join(root, name), info.st_size, info.st_mtime_ns


def _read(path: Path, kind: type) -> object | None:
    data = pools.read_own(path)  # another user could have written it: not ours to unpickle
    if data is None:
        return None
    try:
        found, read = pickle.loads(data)
    except Exception:  # damaged, or made by code that changed shape: build again
        return None
    if not isinstance(found, kind) or not pools.unchanged(read):
        return None  # a word pool it was made from changed (or went) since
    return found


def _prune(folder: Path) -> None:
    """Keep the KEPT_LOADS most recently written loads."""
    entries = []
    for entry in folder.glob(f"{PREFIX}*.pickle"):
        try:
            entries.append((entry.stat().st_mtime_ns, entry))
        except OSError:
            continue  # gone meanwhile
    for _, entry in sorted(entries, reverse=True)[KEPT_LOADS:]:
        entry.unlink(missing_ok=True)
