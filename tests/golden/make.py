"""Refreshes the golden files of tests/test_compat_golden.py from the code installed now.

Run it against the code whose behaviour the files should pin (from the repository's root,
with the virtualenv that imports that code), then review the diff:

    python tests/golden/make.py

It writes, in tests/golden/:
- scenarios.json: for every scenario file of scenarios/, one task (or processor link) of
  it run to the end in a fresh server: the ids it made, its events in order, its records;
- snapshot-v1-reads.json: the version-1 snapshot restored into a fresh server and read
  through its API (drive.reads), right after the restore and again once the clock has
  advanced drive.ADVANCE_AFTER_RESTORE seconds (its pending jobs run).

It never writes snapshot-v1.json: that document is what the code of 2745e81 wrote
(version 1, from drive.populate as it was then), and a version-1 document cannot be made
again; the tests restore it as it is. On an unchanged tree the files come out as they
are: everything is made twice and compared before anything is written (only what the
seed decides is kept), the receiver's address is written as `{receiver}`, the server's
as `{server}`, and unguessable tokens are numbered placeholders.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import drive  # noqa: E402

SCENARIOS_FILE = HERE / "scenarios.json"
SNAPSHOT_FILE = HERE / "snapshot-v1.json"
READS_FILE = HERE / "snapshot-v1-reads.json"


class Server:
    """A fresh in-process server and a client of it (what aiohttp_client gives the tests)."""

    def __init__(self, loaded) -> None:
        self.client = TestClient(TestServer(drive.new_app(loaded)))

    async def __aenter__(self) -> TestClient:
        await self.client.start_server()
        return self.client

    async def __aexit__(self, *exc: Any) -> None:
        await self.client.close()


async def record_scenarios(loaded) -> dict[str, Any]:
    records = {}
    for name in drive.bundled_scenarios():
        async with Server(loaded) as client:
            records[name] = await drive.run_scenario(client, name)
    return records


async def record_reads(loaded, document: dict[str, Any]) -> dict[str, Any]:
    """What a fresh server reads of the golden snapshot `document` once restored, and once
    the clock has run on after the restore."""
    receiver = await drive.Receiver().start()
    try:
        async with Server(loaded) as client:
            keys = await drive.restore_golden(client, document, receiver.url)
            restored = await drive.golden_reads(client, keys, document, receiver.url)
            await drive.advance(client, drive.ADVANCE_AFTER_RESTORE, keys)
            advanced = await drive.golden_reads(client, keys, document, receiver.url)
    finally:
        await receiver.stop()
    return {"atRestore": restored, "afterRestoreAndAdvance": advanced}


def pretty(value: Any, indent: str = "") -> str:
    """JSON with one key or item per line (one space more per level), but a value whose
    compact form is short, or a list of plain values, written on one line: diffable and
    small."""
    flat = json.dumps(value, sort_keys=True, ensure_ascii=False)
    plain = isinstance(value, list) and not any(isinstance(v, (dict, list)) for v in value)
    if len(flat) <= 100 or plain or not isinstance(value, (dict, list)) or not value:
        return flat
    inner = indent + " "
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {pretty(v, inner)}"
                 for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    return "[\n" + ",\n".join(inner + pretty(v, inner) for v in value) + "\n" + indent + "]"


async def main() -> int:
    # Closing a server warns of each webhook retry it leaves pending: expected here.
    logging.getLogger("payroll_sandbox").setLevel(logging.ERROR)
    loaded = drive.fixtures()
    document = json.loads(SNAPSHOT_FILE.read_text(encoding="utf-8"))
    runs = [(await record_scenarios(loaded), await record_reads(loaded, document))
            for _ in range(2)]
    problems = []
    for name, (first, second) in zip(("scenarios", "reads"), zip(*runs)):
        problems += [f"{name} {d}" for d in drive.differences(first, second)]
    if problems:
        print("Not deterministic under the seed; nothing written:", *problems, sep="\n  ",
              file=sys.stderr)
        return 1
    scenarios, reads = runs[0]
    for path, value in ((SCENARIOS_FILE, scenarios), (READS_FILE, reads)):
        path.write_text(pretty(value) + "\n", encoding="utf-8")
        assert json.loads(path.read_text(encoding="utf-8")) == value
        print(f"wrote {path.relative_to(REPO)} ({path.stat().st_size:,} bytes)")
    print(f"{len(scenarios)} scenarios; {SNAPSHOT_FILE.relative_to(REPO)} left as it is")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
