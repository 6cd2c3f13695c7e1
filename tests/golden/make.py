"""Writes the golden fixtures of tests/test_compat_golden.py from the code installed now.

Run it against the code whose behaviour the fixtures should pin (from the repository's
root, with the virtualenv that imports that code):

    python tests/golden/make.py

It writes, in tests/golden/:
- snapshot-v1.json: GET /_sandbox/snapshot of a tenant with a bit of everything
  (drive.populate), taken on a manual clock with seed drive.SEED;
- snapshot-v1-reads.json: that tenant as its API reads it (drive.reads) right after the
  snapshot, and again after the snapshot was restored into a fresh server and the clock
  advanced drive.ADVANCE_AFTER_RESTORE seconds;
- scenarios.json: for every scenario file of scenarios/, one task (or processor link) of
  it run to the end in a fresh server: the ids it made, its events in order, its records.

Everything is made twice and compared before anything is written: only what the seed
decides is kept. The snapshot document is kept restorable: its unguessable tokens are
renamed to fixed tokens of the same form, its wall-clock values (attempts' `wallTime` and
`latencyMs`, the journal's `durationMs`) set to fixed ones, and the receiver's address
written as `{receiver}`; the fixtures therefore come out the same on every run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
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


_FIXED_TOKEN = "{kind}-{environment}-00000000-0000-4000-8000-{number:012d}"


def stable_document(document: dict[str, Any], receiver_url: str) -> dict[str, Any]:
    """The snapshot with its random and wall-clock parts fixed (it stays a document the
    server restores: same shapes, same references between its parts)."""
    text = json.dumps(document, sort_keys=True).replace(receiver_url, drive.RECEIVER)
    names: dict[str, str] = {}

    def fixed(match: re.Match) -> str:
        if match.group(0) not in names:
            names[match.group(0)] = _FIXED_TOKEN.format(kind=match.group(1),
                                                         environment=match.group(2),
                                                         number=len(names) + 1)
        return names[match.group(0)]

    document = json.loads(drive._TOKEN.sub(fixed, text))
    for delivery in document["webhooks"]["deliveries"]:
        for attempt in delivery["attempts"]:
            attempt["wallTime"] = attempt["time"]
            if attempt["latencyMs"] is not None:
                attempt["latencyMs"] = 1.0
    for entry in document["journal"]:
        entry["durationMs"] = 1.0
    return document


async def record_snapshot(loaded) -> tuple[dict[str, Any], dict[str, Any]]:
    """The snapshot document (stable, with `{receiver}`) and the reads around it."""
    receiver = await drive.Receiver().start()
    try:
        async with Server(loaded) as client:
            keys = await drive.populate(client, receiver.url)
            taken = await drive.snapshot(client, keys)
            before = drive.normalized_reads(await drive.reads(client, keys, taken), client,
                                            receiver.url)
        document = stable_document(taken, receiver.url)
        restorable = drive.replaced(document, {drive.RECEIVER: receiver.url})
        async with Server(loaded) as client:
            keys = await drive.make_golden_tenant(client)
            await drive.restore(client, keys, restorable)
            again = await drive.snapshot(client, keys)
            assert drive.without_journal(again) == drive.without_journal(restorable), \
                "the restored tenant does not read as the snapshot"
            restored = drive.normalized_reads(await drive.reads(client, keys, restorable),
                                              client, receiver.url)
            assert restored == before, "the restored tenant's API differs from the original's"
            await drive.advance(client, drive.ADVANCE_AFTER_RESTORE, keys)
            after = drive.normalized_reads(await drive.reads(client, keys, restorable), client,
                                           receiver.url)
    finally:
        await receiver.stop()
    return document, {"beforeSnapshot": before, "afterRestoreAndAdvance": after}


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
    runs = []
    for _ in range(2):
        scenarios = await record_scenarios(loaded)
        document, reads = await record_snapshot(loaded)
        runs.append((scenarios, document, reads))
    problems = []
    for name, (first, second) in zip(("scenarios", "snapshot", "reads"), zip(*runs)):
        problems += [f"{name} {d}" for d in drive.differences(first, second)]
    if problems:
        print("Not deterministic under the seed; nothing written:", *problems, sep="\n  ",
              file=sys.stderr)
        return 1
    scenarios, document, reads = runs[0]
    for path, value in ((SCENARIOS_FILE, scenarios), (SNAPSHOT_FILE, document),
                        (READS_FILE, reads)):
        path.write_text(pretty(value) + "\n", encoding="utf-8")
        assert json.loads(path.read_text(encoding="utf-8")) == value
        print(f"wrote {path.relative_to(REPO)} ({path.stat().st_size:,} bytes)")
    print(f"{len(scenarios)} scenarios")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
