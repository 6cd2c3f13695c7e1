"""Pools of real-looking words drawn from Faker, cached on disk.

Faker draws a pool once per seed and size; seeded generators then pick from it.
That keeps large catalogs and many linked accounts fast to build (Faker per value
costs ~0.2 ms) and keeps Faker's import (longer than the rest of a start) off the
start when the pool is cached. The same seed gives the same pool with or without
the cache (PAYROLL_SANDBOX_CACHE_DIR, default ~/.cache/payroll-sandbox; `off`: none).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any


# The pool files a build read, with a digest of each (loadcache keeps them with the load
# it caches, and a load whose pool files changed since is built again).
READ: list[tuple[str, str]] = []
# Pools read and checked in this process, by their file's digest: every app a test suite
# makes reads the same file (a file changed or planted since is other bytes, checked
# anew). Callers only read them. At most CHECKED_KEPT, the first checked dropped first.
CHECKED_KEPT = 4
_CHECKED: dict[str, dict[str, list[str]]] = {}
# A word of a pool: plain text of a sane length (a planted file made company names markup).
_WORD = re.compile(r"[^<>&\x00-\x1f\x7f-\x9f]{1,200}")


def faker_pools(name: str, seed: int, size: int,
                draw: Callable[[Any, int], dict[str, list[str]]]) -> dict[str, list[str]]:
    """`draw(fake, size)` with a Faker seeded by `seed`, or its cached result: read only
    from a file this user owns and no one else may write, and only when it has the shape
    of pools (else drawn again and written anew)."""
    folder = cache_dir()
    cache = folder / f"{name}-{seed}-{size}-faker{faker_version()}.json" if folder else None
    data = read_own(cache) if cache else None
    if data is not None:
        known = digest(data)
        if (cached := _CHECKED.get(known)) is None:
            try:
                document = json.loads(data)
            except ValueError:  # damaged: draw again
                document = None
            if is_pools(document):
                while len(_CHECKED) >= CHECKED_KEPT:
                    del _CHECKED[next(iter(_CHECKED))]  # the first checked goes first
                cached = _CHECKED[known] = document
        if cached is not None:
            READ.append((str(cache), known))
            return cached
    from faker import Faker  # slow to import: only when the pool is not cached

    fake = Faker("en_US", use_weighting=False)
    fake.seed_instance(seed)
    pools = draw(fake, size)
    if cache is not None:
        data = json.dumps(pools).encode()
        if keep(cache, data):
            READ.append((str(cache), digest(data)))
    return pools


def is_pools(document: Any) -> bool:
    """Pools as faker_pools draws them: names of non-empty lists of plain words."""
    return (isinstance(document, dict) and bool(document)
            and all(isinstance(key, str) and isinstance(words, list) and words
                    and all(isinstance(word, str) and _WORD.fullmatch(word) for word in words)
                    for key, words in document.items()))


def read_own(path: Path) -> bytes | None:
    """A cache file's bytes, when this user owns it and no one else may write it (a shared
    cache folder may hold a file another user planted); None otherwise or when missing."""
    try:
        with open(path, "rb") as file:
            info = os.fstat(file.fileno())
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return None
            return file.read()
    except OSError:
        return None


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def unchanged(read: list[tuple[str, str]]) -> bool:
    """Whether every pool file a build read still holds what it held then."""
    for path, known in read:
        data = read_own(Path(path))
        if data is None or digest(data) != known:
            return False
    return True


def keep(path: Path, data: bytes) -> bool:
    """`data` written to `path` in the cache folder whole or not at all (a temporary file
    replaced, whoever else starts meanwhile). False when the folder cannot take it: no
    cache, the same data."""
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary.write_bytes(data)
        temporary.replace(path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
        return False


@functools.cache  # the installed Faker does not change under a running process
def faker_version() -> str:
    """Faker's installed version, from the name of its dist-info folder beside the package:
    what importlib.metadata reads, without importing it (13 ms of a start) or Faker."""
    spec = importlib.util.find_spec("faker")
    if spec is not None and spec.origin is not None:
        for info in Path(spec.origin).parent.parent.glob("[Ff]aker-*.dist-info"):
            return info.name[len("faker-"):-len(".dist-info")]
    from importlib.metadata import version  # another layout (an egg, a zip)

    return version("faker")


def cache_dir() -> Path | None:
    """The cache folder (PAYROLL_SANDBOX_CACHE_DIR); None when it says `off`."""
    configured = os.environ.get("PAYROLL_SANDBOX_CACHE_DIR")
    if configured and configured.lower() == "off":
        return None
    if configured:
        return Path(configured)
    try:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    except RuntimeError:  # no home folder to put it in
        return None
    return Path(base) / "payroll-sandbox"
