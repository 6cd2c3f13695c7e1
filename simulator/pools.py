"""Pools of real-looking words drawn from Faker, cached on disk.

Faker draws a pool once per seed and size; seeded generators then pick from it.
That keeps large catalogs and many linked accounts fast to build (Faker per value
costs ~0.2 ms) and keeps Faker's import (longer than the rest of a start) off the
start when the pool is cached. The same seed gives the same pool with or without
the cache (PAYROLL_SANDBOX_CACHE_DIR, default ~/.cache/payroll-sandbox; `off`: none).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def faker_pools(name: str, seed: int, size: int,
                draw: Callable[[Any, int], dict[str, list[str]]]) -> dict[str, list[str]]:
    """`draw(fake, size)` with a Faker seeded by `seed`, or its cached result."""
    folder = cache_dir()
    cache = folder / f"{name}-{seed}-{size}-faker{faker_version()}.json" if folder else None
    try:
        cached = json.loads(cache.read_text()) if cache else None
        if isinstance(cached, dict):
            return cached
    except (OSError, ValueError):  # missing, unreadable or damaged: draw again
        pass
    from faker import Faker  # slow to import: only when the pool is not cached

    fake = Faker("en_US", use_weighting=False)
    fake.seed_instance(seed)
    pools = draw(fake, size)
    if cache is not None:
        keep(cache, json.dumps(pools).encode())
    return pools


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
