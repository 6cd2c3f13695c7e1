"""Issue 22: a restore is untrusted input. Seeded mutations of a real snapshot (a busy
tenant's: tasks at every step, jobs, tokens, bindings, companies, a linked account, a
processor link mid-pipeline) go through the restore; each is either refused with a 4xx and
changes nothing, or accepted, and then every read of the tenant answers and a
run-until-idle ends within its work limit. Nothing but an ApiError (the API's refusal)
may come out of a restore.

The mutations run in-process (tests/engine.py): the body parsed, checked, built and put
in place by snapshot.py as POST /_sandbox/snapshot does it, the reads answered by the
routes' handlers (about 20 ms a mutation on a quiet 2-core machine, 1,000 over the four
seeded runs); one test posts a few of them through the route. Seeded, bounded in count
and time so it runs in CI.
"""

from __future__ import annotations

import copy
import json
import random
import time
from typing import Any

import orjson
import pytest

from conftest import ACME
from engine import Engine
from payroll_sandbox.edge import snapshot
from payroll_sandbox.edge import snapshot_document
from payroll_sandbox.errors import ApiError
from test_snapshot import busy, fresh_app, snapshot_of

# Seeded runs, one test apiece so the workers share them: each goes through up to MUTATIONS
# mutations within SECONDS (on a loaded machine, fewer), and fails below MIN_MUTATIONS.
SEEDS = (22, 23, 24, 25)
MUTATIONS = 250
MIN_MUTATIONS = 100
SECONDS = 10.0

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


DEEP = "__deep__"  # stands for a value nested too deep to serialize, put in the text


def mutate(document: dict, rng: random.Random, all_paths: list[tuple]) -> tuple[bytes, str]:
    """The document's JSON text with one mutation, and its description."""
    mutated, description = _mutated(document, rng, all_paths)
    if isinstance(mutated, bytes):
        return mutated, description
    text = orjson.dumps(mutated)
    if f'"{DEEP}'.encode() in text:
        levels = int(text.split(f'"{DEEP}'.encode(), 1)[1].split(b'"', 1)[0])
        text = text.replace(f'"{DEEP}{levels}"'.encode(), b"[" * levels + b"]" * levels)
    return text, description


def copied_along(document: dict, path: tuple) -> tuple[dict, Any]:
    """The document with fresh copies of the containers on the way to `path` (the rest
    shared, so the original stays as it is), and the copy holding the item at `path`."""
    root = node = copy.copy(document)
    for step in path[:-1]:
        node[step] = copy.copy(node[step])
        node = node[step]
    return root, node


def _mutated(document: dict, rng: random.Random, all_paths: list[tuple]) -> tuple[Any, str]:
    kind = rng.choice(["number", "number", "odd", "delete", "extra", "deep", "swap", "raw"])
    if kind == "raw":
        text = orjson.dumps(document)
        cut = rng.randrange(len(text))
        return text[:cut] + rng.choice([b"", b"{", b"]", b"\x00", b"\xff"]), \
            f"raw body cut at {cut}"
    path = rng.choice(all_paths)
    mutated, parent = copied_along(document, path)
    key = path[-1]
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
        if isinstance(parent[key], dict):
            parent[key] = {**parent[key], "unexpected": rng.choice(HUGE + ODD)}
            return mutated, f"extra key in {where}"
        if isinstance(parent, dict):
            parent["unexpected"] = rng.choice(HUGE + ODD)
            return mutated, f"extra key in {where}"
        parent.append(rng.choice(HUGE + ODD))
        return mutated, f"extra item in {where}"
    if kind == "deep":
        parent[key] = f"{DEEP}{rng.choice([50, 500, 5000])}"
        return mutated, f"{where} nested deep"
    other_path = rng.choice(all_paths)
    other_parent, other_key = parent_of(document, other_path)
    parent[key] = copy.deepcopy(other_parent[other_key])  # a value from elsewhere
    return mutated, f"{where} = value of {other_path}"


def without_journal(document: dict) -> dict:
    """The document but for the journal and its counters: the test's own requests."""
    counters = {k: v for k, v in document["counters"].items() if not k.startswith("journal")}
    return {**{k: v for k, v in document.items() if k != "journal"}, "counters": counters}


_BUSY: list[dict] = []  # the busy snapshot, made once per process (a read-only document)


async def busy_snapshot(aiohttp_client, loaded) -> dict:
    """The snapshot of a busy tenant, made over HTTP (test_snapshot.busy)."""
    if not _BUSY:
        client = await fresh_app(aiohttp_client, loaded)
        await busy(client)
        _BUSY.append(await snapshot_of(client))
    return _BUSY[0]


# -- in-process -------------------------------------------------------------------------------

def restore(engine: Engine, body: bytes) -> ApiError | None:
    """POST /_sandbox/snapshot's work on a body, as snapshot.restore_settled does it (parsed,
    checked and built, then put in place): its refusal, or None when it was restored. Any
    other exception is the server's fault (a 500) and fails the test."""
    try:
        planned = snapshot._plan_body(engine.tenant, engine.sandbox, [bytearray(body)])
        snapshot.put_in_place(engine.tenant, engine.sandbox, planned)
    except snapshot_document.Fault as fault:
        return fault.api_error()
    except ApiError as error:  # not JSON at all (400)
        return error
    return None


def state(engine: Engine) -> bytes:
    """The tenant's whole state, as GET /_sandbox/snapshot shows it."""
    return orjson.dumps(snapshot.take(engine.tenant, engine.sandbox))


READS = [("/_sandbox/tasks", {"limit": "1000"}), ("/_sandbox/events", {"limit": "1000"}),
         ("/_sandbox/clock", {}), ("/_sandbox/snapshot", {}), ("/_sandbox/requests", {}),
         ("/_sandbox/stats", {}), ("/_sandbox/webhooks/endpoints", {}),
         ("/_sandbox/webhooks/faults", {}), ("/_sandbox/scenarios", {}),
         ("/_sandbox/tasks", {"after": "0"}), ("/_sandbox/events", {"after": "0"})]


async def every_read_answers(engine: Engine, description: str) -> None:
    """The control plane's reads answer (no refusal either); the reads of each task, user
    and event answer or refuse with an ApiError (a 4xx: a restored user may have no linked
    account); then the clock runs until idle, within the work limit, and an hour on."""
    async def read(path: str, *, refusal_allowed: bool = False, **named: Any) -> Any:
        try:
            return orjson.loads(await engine.answer("GET", path, **named))
        except ApiError as error:
            if not refusal_allowed or not 400 <= error.status < 500:
                raise AssertionError(f"after restoring ({description}): GET {path} answered "
                                     f"{error.status} {error.code}: {error.message}") from None
        except Exception as error:
            raise AssertionError(f"after restoring ({description}): GET {path} failed: "
                                 f"{type(error).__name__}: {error}") from error

    for path, query in READS:
        await read(path, query=query)
    tasks = (await read("/_sandbox/tasks", query={"limit": "1000"}))["data"]
    for task in tasks[:20]:
        await read("/task/{taskId}", params={"taskId": task["id"]}, refusal_allowed=True)
    users = {task["user"]["identifier"] for task in tasks if isinstance(task.get("user"), dict)}
    for identifier in sorted(users)[:5]:
        for path in ("/linked-accounts", "/income", "/statements"):
            await read(path, query={"identifier": identifier}, refusal_allowed=True)
        await read("/linked-account/list/{identifier}", params={"identifier": identifier},
                   refusal_allowed=True)
    events = (await read("/_sandbox/events", query={"limit": "1000"}))["data"]
    for event in events[:10]:
        await read("/_sandbox/events/{eventId}", params={"eventId": event["id"]},
                   refusal_allowed=True)
    started = time.monotonic()
    result = await engine.tenant.runner.run_until_idle()
    assert result.complete, (description, result)
    assert time.monotonic() - started < 10, f"run-until-idle took long after ({description})"
    await engine.tenant.runner.advance(3600)
    for path, query in READS[:4]:
        await read(path, query=query)


@pytest.mark.parametrize("seed", SEEDS)
async def test_mutated_snapshots_are_refused_cleanly_or_leave_a_working_tenant(
        aiohttp_client, loaded, seed):
    original = await busy_snapshot(aiohttp_client, loaded)
    engine = Engine()
    body = orjson.dumps(original)
    assert restore(engine, body) is None
    baseline = state(engine)
    assert len(engine.tenant.tasks) >= 10 and len(engine.tenant.timeline) > 0
    all_paths = paths(original)[1:]  # not the root itself
    rng = random.Random(seed)
    started, done, accepted, refused = time.monotonic(), 0, 0, {}
    while done < MUTATIONS and time.monotonic() - started < SECONDS:
        data, description = mutate(original, rng, all_paths)
        error = restore(engine, data)
        if error is not None:
            assert 400 <= error.status < 500, (description, error.status, error.code)
            refused[error.code] = refused.get(error.code, 0) + 1
            assert state(engine) == baseline, f"a refused restore changed the tenant: {description}"
        else:
            accepted += 1
            await every_read_answers(engine, description)
            assert restore(engine, body) is None
        done += 1
    assert done >= MIN_MUTATIONS, f"only {done} mutations in {SECONDS:g} s"
    print(f"{done} mutations in {time.monotonic() - started:.1f} s: {accepted} accepted, "
          f"refused {refused}")
    assert accepted > done // 10 and sum(refused.values()) > done // 2, (accepted, refused)
    assert {"invalid-snapshot", "malformed-json"} <= set(refused), refused


# -- through the route --------------------------------------------------------------------------

async def test_mutated_snapshots_posted_to_the_route_are_4xx_without_a_traceback(
        aiohttp_client, loaded):
    """The route answers a refused document with its 4xx error body (no traceback) and
    keeps the tenant as it was; the original document then restores (200)."""
    client = await fresh_app(aiohttp_client, loaded)
    await busy(client)
    original = await snapshot_of(client)
    baseline = without_journal(original)
    all_paths = paths(original)[1:]
    rng = random.Random(SEEDS[0])
    codes = set()
    for _ in range(20):
        data, description = mutate(original, rng, all_paths)
        response = await client.post("/_sandbox/snapshot", data=data,
                                     headers={**ACME, "content-type": "application/json"})
        answer = await response.text()
        assert response.status < 500, (description, response.status, answer[:500])
        if response.status >= 400:
            assert "Traceback" not in answer
            codes.add(json.loads(answer)["error"]["code"])
            assert without_journal(await snapshot_of(client)) == baseline, description
        else:  # accepted: the next mutation starts from the original again
            response = await client.post("/_sandbox/snapshot", json=original, headers=ACME)
            assert response.status == 200, await response.text()
    assert {"invalid-snapshot", "malformed-json"} <= codes, codes
    response = await client.post("/_sandbox/snapshot", json=original, headers=ACME)
    assert response.status == 200, await response.text()
