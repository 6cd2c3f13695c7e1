"""Issue 22: a restore is untrusted input. Thousands of mutations of a real snapshot (a busy
tenant's: tasks at every step, deliveries and retries, jobs, tokens, linked accounts, a
processor link) are posted back; each is either refused with a 4xx and changes nothing,
or accepted, and then every read of the tenant answers 2xx and a run-until-idle ends within
its work limit. Seeded, bounded in count and time so it runs in CI.
"""

from __future__ import annotations

import copy
import json
import random
import time
from typing import Any

from conftest import ACME
from test_snapshot import busy, fresh_app, snapshot_of

MUTATIONS = 2000
MIN_MUTATIONS = 1000    # at least this many within the time bound, or the test fails
SECONDS = 100.0
SEED = 22

HUGE = [1e308, -1e308, 1e19, 2**63 - 1, -(2**63), 2**53, -1, -0.5, 0, 1e-300, 253402300800,
        -62135596800, 31_536_000_000]
ODD = [None, True, False, "", "x" * 5000, "\u2028", [], {}, [1, 2], {"a": 1}, "2026-13-45",
       "NaN", 3.5]


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indexes) into a JSON document."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node[:6]):  # the first few items of long lists
            found += paths(value, (*prefix, index))
    return found


def parent_of(document: Any, path: tuple) -> tuple[Any, Any]:
    node = document
    for step in path[:-1]:
        node = node[step]
    return node, path[-1]


DEEP = "__deep__"  # stands for a value nested too deep for json.dumps, put in the text


def mutate(document: dict, rng: random.Random, all_paths: list[tuple]) -> tuple[bytes, str]:
    """The document's JSON text with one mutation, and its description."""
    mutated, description = _mutated(document, rng, all_paths)
    if isinstance(mutated, bytes):
        return mutated, description
    text = json.dumps(mutated)
    if f'"{DEEP}' in text:
        levels = int(text.split(f'"{DEEP}', 1)[1].split('"', 1)[0])
        text = text.replace(f'"{DEEP}{levels}"', "[" * levels + "]" * levels)
    return text.encode(), description


def _mutated(document: dict, rng: random.Random, all_paths: list[tuple]) -> tuple[Any, str]:
    kind = rng.choice(["number", "number", "odd", "delete", "extra", "deep", "swap", "raw"])
    if kind == "raw":
        text = json.dumps(document)
        cut = rng.randrange(len(text))
        return text[:cut].encode() + rng.choice([b"", b"{", b"]", b"\x00", b"\xff"]), \
            f"raw body cut at {cut}"
    mutated = copy.deepcopy(document)
    path = rng.choice([p for p in all_paths if p])
    parent, key = parent_of(mutated, path)
    where = "$" + "".join(f"[{k!r}]" for k in path)
    if kind == "number":
        value = rng.choice(HUGE)
        parent[key] = value
        return mutated, f"{where} = {value!r}"
    if kind == "odd":
        value = rng.choice(ODD)
        parent[key] = copy.deepcopy(value)
        return mutated, f"{where} = {value!r:.40}"
    if kind == "delete":
        del parent[key]
        return mutated, f"del {where}"
    if kind == "extra":
        target = parent[key] if isinstance(parent[key], dict) else parent
        if isinstance(target, dict):
            target["unexpected"] = rng.choice(HUGE + ODD)
            return mutated, f"extra key in {where}"
        target.append(rng.choice(HUGE + ODD))
        return mutated, f"extra item in {where}"
    if kind == "deep":
        parent[key] = f"{DEEP}{rng.choice([50, 500, 5000])}"
        return mutated, f"{where} nested deep"
    other_path = rng.choice([p for p in all_paths if p])
    other_parent, other_key = parent_of(document, other_path)
    parent[key] = copy.deepcopy(other_parent[other_key])  # a value from elsewhere
    return mutated, f"{where} = value of {other_path}"


def without_journal(document: dict) -> dict:
    """The document but for the journal and its counters: the fuzz's own requests."""
    counters = {k: v for k, v in document["counters"].items() if not k.startswith("journal")}
    return {**{k: v for k, v in document.items() if k != "journal"}, "counters": counters}


READS = ["/_sandbox/tasks?limit=1000", "/_sandbox/events?limit=1000", "/_sandbox/clock",
         "/_sandbox/snapshot", "/_sandbox/requests", "/_sandbox/stats",
         "/_sandbox/webhooks/endpoints", "/_sandbox/webhooks/faults", "/_sandbox/scenarios",
         "/_sandbox/tasks?after=0", "/_sandbox/events?after=0"]


async def every_read_answers(client, description: str) -> None:
    tasks = (await (await client.get("/_sandbox/tasks?limit=1000", headers=ACME)).json())["data"]
    extra = [f"/task/{task['id']}" for task in tasks[:20]]
    users = {task["user"]["identifier"] for task in tasks if isinstance(task.get("user"), dict)}
    for identifier in sorted(users)[:5]:
        extra += [f"/linked-accounts?identifier={identifier}",
                  f"/linked-account/list/{identifier}",
                  f"/income?identifier={identifier}", f"/statements?identifier={identifier}"]
    events = (await (await client.get("/_sandbox/events?limit=1000", headers=ACME)).json())["data"]
    extra += [f"/_sandbox/events/{event['id']}" for event in events[:10]]
    for path in READS + extra:
        response = await client.get(path, headers=ACME)
        if response.status >= 500 or (response.status >= 400 and path in READS):
            raise AssertionError(f"after restoring ({description}): GET {path} answered "
                                 f"{response.status}: {(await response.text())[:300]}")
        await response.read()
    started = time.monotonic()
    response = await client.post("/_sandbox/clock/run-until-idle", headers=ACME)
    assert response.status == 200, (description, await response.text())
    assert time.monotonic() - started < 10, f"run-until-idle took long after ({description})"
    response = await client.post("/_sandbox/clock/advance", json={"seconds": 3600},
                                 headers=ACME)
    assert response.status == 200, (description, await response.text())
    for path in READS[:4]:
        response = await client.get(path, headers=ACME)
        assert response.status == 200, (description, path, await response.text())


async def test_thousands_of_mutated_snapshots_are_refused_cleanly_or_leave_a_working_tenant(
        aiohttp_client, loaded):
    client = await fresh_app(aiohttp_client, loaded)
    await busy(client)
    original = await snapshot_of(client)
    baseline = without_journal(original)
    all_paths = paths(original)
    rng = random.Random(SEED)
    started, done, accepted, refused = time.monotonic(), 0, 0, {}
    while done < MUTATIONS and time.monotonic() - started < SECONDS:
        data, description = mutate(original, rng, all_paths)
        response = await client.post("/_sandbox/snapshot", data=data,
                                     headers={**ACME, "content-type": "application/json"})
        answer = await response.text()
        assert response.status < 500, (description, response.status, answer[:500])
        if response.status >= 400:
            assert "Traceback" not in answer
            code = json.loads(answer)["error"]["code"]
            refused[code] = refused.get(code, 0) + 1
            if done % 10 == 0:  # nothing changed (checked on every tenth refusal: it costs)
                assert without_journal(await snapshot_of(client)) == baseline, description
        else:
            accepted += 1
            await every_read_answers(client, description)
            response = await client.post("/_sandbox/snapshot", json=original, headers=ACME)
            assert response.status == 200, await response.text()
        done += 1
    assert done >= MIN_MUTATIONS, f"only {done} mutations in {SECONDS:g} s"
    print(f"{done} mutations in {time.monotonic() - started:.0f} s: {accepted} accepted, "
          f"refused {refused}")
    assert accepted > 10 and sum(refused.values()) > 100, (accepted, refused)
