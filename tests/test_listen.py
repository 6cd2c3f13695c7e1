"""Issue 12, the terminal: `payroll-sandbox listen [--forward-to URL]` follows a running
server's ledger, one line per event and per attempt, and forwards each event once, as the
sandbox sends it.

Real processes: one `serve --clock manual` for the module (a fresh tenant per test), a
`listen` process per test, and a real receiver (tests/receiver.py) in the test's loop.
Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

import aiohttp
import orjson
import pytest
from conftest import ACME, REPO, WALMART, run_cli
from receiver import Receiver, closed_port

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.domain.changes import WINDOW
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.tools.listen import (CHECK_EVICTIONS, PAGE, Client, Follower, NewAttempt, NewEvent,
                              Notice)
from payroll_sandbox.settings import Settings

SERVING = "payroll-sandbox serving "
# The shape of a text line (README: Webhooks > Watching and forwarding from a terminal).
LINE = re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+Z  [a-z0-9.-]+  \S+  user=\S+  task=\S+  "
                  r"(delivery=[a-z]+(  --> .+)?|attempt \d+( \([a-z-]+\))* to \S+: .+, .+)$")
WAIT = 60.0  # seconds: generous (2 cores, other suites running), never unbounded


# -- the processes --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sandbox():
    """`serve --port 0 --clock manual`; yields its base URL."""
    process = subprocess.Popen([sys.executable, "-m", "payroll_sandbox", "serve", "--port", "0",
                                "--clock", "manual"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(WAIT)
    try:
        assert first and first[0].startswith(SERVING), f"no serving line: {first}"
        yield first[0].split()[2]
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        process.stdout.close()


class Api:
    """The sandbox's HTTP API with one tenant's keys (aiohttp: the receiver shares the loop)."""

    def __init__(self, session: aiohttp.ClientSession, base: str, keys: dict[str, str]) -> None:
        self.session, self.base, self.keys = session, base, keys

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        async with self.session.request(method, self.base + path, json=body,
                                        headers=self.keys) as response:
            payload = await response.json()
            assert response.status < 300, (method, path, response.status, payload)
            return payload["data"]

    async def events(self) -> list[dict]:
        return await self.call("GET", "/_sandbox/events?limit=10000")

    async def task(self, identifier: str) -> str:
        task = await self.call("POST", "/task/create", {"identifier": identifier,
                                                        "company": WALMART,
                                                        "product": "deposit"})
        await self.call("POST", "/_sandbox/clock/run-until-idle")
        return task["id"]

    async def trigger(self, event_type: str = "pii-data-deleted", **body: Any) -> dict:
        return await self.call("POST", "/_sandbox/events/trigger", {"eventType": event_type,
                                                                     **body})


@pytest.fixture
async def api(sandbox):
    """A fresh tenant on the module's server; deleted afterwards."""
    timeout = aiohttp.ClientTimeout(total=WAIT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        made = await Api(session, sandbox, ACME).call("POST", "/_sandbox/tenants", {})
        tenant = Api(session, sandbox, {"x-api-key": made["apiKey"],
                                        "x-api-secret": made["apiSecret"]})
        tenant.secret = made["apiSecret"]
        try:
            yield tenant
        finally:
            await tenant.call("DELETE", f"/_sandbox/tenants/{made['name']}")


@pytest.fixture
async def receiver():
    receiver = await Receiver().start()
    yield receiver
    await receiver.stop()


class Listen:
    """A `payroll-sandbox listen` process: its stdout lines as they come."""

    def __init__(self, api: Api, *args: str) -> None:
        self.api, self.args = api, args
        self.lines: list[str] = []
        self.stderr = ""
        self._more = asyncio.Event()

    async def __aenter__(self) -> Listen:
        env = {**os.environ, "PAYROLL_SANDBOX_URL": self.api.base,
               "PAYROLL_SANDBOX_API_KEY": self.api.keys["x-api-key"],
               "PAYROLL_SANDBOX_API_SECRET": self.api.keys["x-api-secret"]}
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "payroll_sandbox", "listen", *self.args, cwd=REPO, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            ready = await asyncio.wait_for(self.process.stderr.readline(), WAIT)
            assert b"listening to" in ready, ready + await self._rest_of_stderr()
        except BaseException:
            if self.process.returncode is None:
                self.process.kill()
            await asyncio.wait_for(self.process.wait(), WAIT)
            raise
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        while line := await self.process.stdout.readline():
            self.lines.append(line.decode().rstrip("\n"))
            self._more.set()

    async def _rest_of_stderr(self) -> bytes:
        with contextlib.suppress(asyncio.TimeoutError):
            return await asyncio.wait_for(self.process.stderr.read(), 5)
        return b""

    async def until(self, count: Any, what: str = "lines") -> list[str]:
        """Waits (bounded) until `count(lines)` is true; returns the lines."""
        deadline = time.monotonic() + WAIT
        while not count(self.lines):
            left = deadline - time.monotonic()
            assert left > 0, f"waited {WAIT}s for {what}; got:\n" + "\n".join(self.lines)
            self._more.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._more.wait(), min(left, 1.0))
        return self.lines

    async def stop(self) -> int:
        """Ctrl-C; the exit code (bounded wait)."""
        self.process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(self.process.wait(), WAIT)
        await asyncio.wait_for(self._reader, WAIT)
        self.stderr = (await self._rest_of_stderr()).decode()
        return code

    async def __aexit__(self, *exc: Any) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await asyncio.wait_for(self.process.wait(), WAIT)
        self._reader.cancel()


def event_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "  delivery=" in line]


def attempt_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if "  attempt " in line]


# -- forwarding ------------------------------------------------------------------------------

async def test_listen_forwards_each_event_once_as_the_sandbox_sends_it(api, receiver):
    # Some types also go to a sandbox endpoint (their headers come from the ledger); the
    # rest are delivered nowhere (listen builds their headers as the sandbox would).
    sent_types = ["task-status-updated", "task-workflow-finished"]
    await api.call("PUT", "/_sandbox/webhooks/endpoints",
                   {"endpoints": [{"url": receiver.url("/sandbox"), "eventTypes": sent_types}]})
    async with Listen(api, "--forward-to", receiver.url("/forward")) as listen:
        task = await api.task("user-1")
        ledger = await api.events()
        attempts = sum(len(d["attempts"]) for r in ledger for d in r["deliveries"])
        await listen.until(lambda lines: len(event_lines(lines)) >= len(ledger)
                           and len(attempt_lines(lines)) >= attempts, "every event and attempt")
        assert await listen.stop() == 0
    assert "Traceback" not in listen.stderr

    assert {r["eventType"] for r in ledger} > set(sent_types)  # both kinds are covered
    forwarded = receiver.received("/forward")
    assert Counter(r.ce_id for r in forwarded) == Counter(r["id"] for r in ledger)
    by_id = {r["id"]: r for r in ledger}
    sandbox_sent = {r.ce_id: r for r in receiver.received("/sandbox")}
    assert set(sandbox_sent) == {r["id"] for r in ledger if r["eventType"] in sent_types}
    for request in forwarded:
        record = by_id[request.ce_id]
        assert request.signature_matches(api.secret), record["eventType"]
        assert orjson.loads(request.body) == record["body"]
        event = request.cloud_event()  # the official SDK reads it as a binary-mode CloudEvent
        assert event.get_type() == f"com.example.{record['eventType']}"
        assert request.headers["ce-time"] == record["time"] == record["body"]["eventTime"]
        if request.ce_id in sandbox_sent:  # byte for byte what the sandbox sent
            original = sandbox_sent[request.ce_id]
            assert request.body == original.body
            names = [n for n in original.headers if n.startswith("ce-")] + [
                "content-type", "x-hmac-signature-sha-256"]
            assert {n: request.headers[n] for n in names} == {n: original.headers[n]
                                                              for n in names}

    assert all(LINE.match(line) for line in listen.lines), listen.lines
    events = event_lines(listen.lines)
    assert len(events) == len(ledger)
    for line, record in zip(events, ledger, strict=True):  # in ledger order
        assert f"  {record['eventType']}  {record['id']}  user=user-1  " in line
        assert line.endswith("  --> 200")
        assert line.startswith(record["time"])
    assert all(f"task={task}" in line for line in events if "task-" in line.split()[1])
    assert len(attempt_lines(listen.lines)) == attempts
    assert all(f"to {receiver.url('/sandbox')}: 200 in " in line
               for line in attempt_lines(listen.lines))


async def test_listen_shows_each_attempt_of_a_failing_delivery_and_the_forward_status(
        api, receiver):
    receiver.program("/sandbox", 500)
    receiver.program("/forward", 500)
    await api.call("PUT", "/_sandbox/webhooks/endpoints",
                   {"endpoints": [{"url": receiver.url("/sandbox")}]})
    async with Listen(api, "--forward-to", receiver.url("/forward")) as listen:
        event = await api.trigger(identifier="user-2")
        # Seen after the first attempt, then followed while the retries run.
        await listen.until(lambda lines: len(lines) >= 2, "the event and its first attempt")
        await api.call("POST", "/_sandbox/clock/run-until-idle")
        await listen.until(lambda lines: len(attempt_lines(lines)) >= 3, "three attempts")
        assert await listen.stop() == 0
    assert all(LINE.match(line) for line in listen.lines), listen.lines
    events, attempts = event_lines(listen.lines), attempt_lines(listen.lines)
    assert len(events) == 1 and event["id"] in events[0]
    assert events[0].endswith("  --> 500")
    assert [line.split("  attempt ")[1].split()[0] for line in attempts] == ["1", "2", "3"]
    assert all(event["id"] in line and "non-2xx response 500" in line for line in attempts)
    assert "retry at " in attempts[0] and "retry at " in attempts[1]
    assert attempts[2].endswith(", failed")
    assert len(receiver.received("/forward")) == 1  # forwarded once, not once per attempt


async def test_listen_reads_events_that_share_a_time_across_polls_once(api):
    """The manual clock stands still: every event has the same time, read over several polls."""
    async with Listen(api, "--json") as listen:
        for count in (3, 6, 7):
            while len(await api.events()) < count:
                await api.trigger(identifier=f"user-{count}")
            await listen.until(lambda lines, count=count: len(lines) >= count, f"{count} events")
        ledger = await api.events()
        assert await listen.stop() == 0
    assert len({r["time"] for r in ledger}) == 1
    shown = [json.loads(line) for line in listen.lines]
    assert [(s["kind"], s["id"], s["sequence"]) for s in shown] == [
        ("event", r["id"], r["sequence"]) for r in ledger]


async def test_listen_json_lines_parse_and_events_keeps_the_types_asked_for(api):
    wanted = {"task-status-updated", "task-workflow-finished"}
    refused = closed_port()
    async with Listen(api, "--json", "--events", ",".join(sorted(wanted)),
                      "--forward-to", f"http://127.0.0.1:{refused}/hooks") as listen:
        await api.task("user-3")
        await api.task("user-4")
        expected = [r for r in await api.events() if r["eventType"] in wanted]
        await listen.until(lambda lines: len(lines) >= len(expected), "the wanted events")
        await api.trigger("task-status-updated", identifier="user-5")  # a last one, after all
        await listen.until(lambda lines: len(lines) >= len(expected) + 1, "the last event")
        assert await listen.stop() == 0
    shown = [json.loads(line) for line in listen.lines]
    assert {s["eventType"] for s in shown} == {"task-status-updated", "task-workflow-finished"}
    assert [s["id"] for s in shown[:-1]] == [r["id"] for r in expected]
    assert all(s["kind"] == "event" and s["delivery"] == "none" for s in shown)
    assert all(s["forward"] == {"url": f"http://127.0.0.1:{refused}/hooks", "status": None,
                                "error": "connection refused"} for s in shown)
    assert {s["user"] for s in shown} == {"user-3", "user-4", "user-5"}
    assert shown[0]["body"] == expected[0]["body"]


async def test_listen_shows_a_replay_as_new_attempts_and_follows_a_reset_ledger(api, receiver):
    await api.call("PUT", "/_sandbox/webhooks/endpoints",
                   {"endpoints": [{"url": receiver.url("/sandbox")}]})
    async with Listen(api, "--forward-to", receiver.url("/forward")) as listen:
        task = await api.task("user-6")
        ledger = await api.events()
        await listen.until(lambda lines: len(attempt_lines(lines)) >= len(ledger), "attempts")
        replayed = await api.call("POST", "/_sandbox/webhooks/replay", {"taskId": task})
        replays = sum(len(r["deliveries"]) for r in replayed)
        assert replays
        await listen.until(lambda lines: len(attempt_lines(lines)) >= len(ledger) + replays,
                           "the replayed attempts")
        await api.call("POST", "/_sandbox/reset")
        after_reset = [await api.trigger(identifier="user-7") for _ in range(2)]
        await listen.until(lambda lines: len(event_lines(lines)) >= len(ledger) + 2,
                           "the events after the reset")
        assert await listen.stop() == 0
    assert "the ledger changed under listen" in listen.stderr
    replay_lines = [line for line in attempt_lines(listen.lines) if "(replay)" in line]
    assert len(replay_lines) == replays
    assert len(event_lines(listen.lines)) == len(ledger) + 2
    assert [r["sequence"] for r in after_reset] == [1, 2]
    assert all(r["id"] in line for r, line in zip(after_reset, event_lines(listen.lines)[-2:],
                                                  strict=True))
    # Each event forwarded once: a replay is the sandbox sending again, not a new event.
    assert len(receiver.received("/forward")) == len(ledger) + 2


def test_the_readme_shows_lines_of_the_shape_listen_prints():
    text = (REPO / "README.md").read_text()
    section = text.split("### Watching and forwarding from a terminal\n", 1)[1]
    sample = re.findall(r"\n```\n(\d.*?)```", section.split("\n## ", 1)[0], re.S)[0]
    lines = sample.splitlines()
    assert len(lines) >= 4 and all(LINE.match(line) for line in lines), lines
    assert any("--> " in line for line in lines) and any(" attempt " in line for line in lines)


# -- refusals --------------------------------------------------------------------------------

def _refused(*args: str) -> str:
    result = run_cli("listen", *args, timeout=WAIT)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_listen_with_wrong_keys_exits_1_with_one_line(sandbox):
    line = _refused("--url", sandbox, "--api-key", "nope", "--api-secret", "nope")
    assert line.startswith("payroll-sandbox: 401 invalid-credentials: ")


def test_listen_refuses_an_unreachable_server_a_bad_url_and_unknown_event_types(sandbox):
    port = closed_port()
    line = _refused("--url", f"http://127.0.0.1:{port}")
    assert line == f"payroll-sandbox: cannot reach http://127.0.0.1:{port}: connection refused"
    assert "is not an http:// or https:// URL" in _refused("--url", "127.0.0.1:8080")
    assert "--forward-to" in _refused("--url", sandbox, "--forward-to", "localhost/hooks")
    assert "no event type is named nope" in _refused("--url", sandbox, "--events",
                                                      "task-status-updated,nope")


# -- the cursor, against a ledger in memory ---------------------------------------------------

class Ledger:
    """GET /_sandbox/stats and /_sandbox/events as the control plane answers them."""

    def __init__(self) -> None:
        self.records: list[dict] = []
        self.emitted = self.evicted = self.journal = 0
        self.made = 0  # across resets: bodies differ, as public tokens and times do

    def add(self, time: str, deliveries: int = 0, state: str = "delivered") -> dict:
        self.emitted += 1
        self.made += 1
        record = {"id": f"e{self.emitted}", "eventType": "pii-data-deleted", "time": time,
                  "sequence": self.emitted, "userIdentifier": "u", "task": None,
                  "body": {"n": self.made}, "deliveries": []}
        for _ in range(deliveries):
            self.deliver(record, state)
        self.records.append(record)
        return record

    def deliver(self, record: dict, state: str = "delivered", replay: bool = False) -> None:
        number = len(record["deliveries"]) + 1
        attempts = [{"number": 1, "time": record["time"], "status": 200 if state == "delivered"
                     else 500, "error": None if state == "delivered" else "non-2xx response 500",
                     "latencyMs": 1.0, "fault": None, "requestHeaders": {}}]
        record["deliveries"].append({"id": f"{record['id']}.{number}", "url": "http://h/",
                                     "state": state, "replay": replay, "attempts": attempts,
                                     "nextAttemptAt": None})

    def state(self, record: dict) -> str:
        states = {d["state"] for d in record["deliveries"]}
        return next((s for s in ("pending", "failed") if s in states),
                    "delivered" if states else "none")

    async def fetch(self, path: str, query: dict | None = None) -> dict:
        self.journal += 1
        query = query or {}
        if path == "/_sandbox/stats":
            return {"data": {
                "events": {"stored": len(self.records), "emitted": self.emitted,
                           "evicted": self.evicted},
                "deliveries": {"stored": sum(len(r["deliveries"]) for r in self.records)},
                "journal": {"stored": self.journal, "evicted": 0}}}
        records = [{**r, "delivery": self.state(r)} for r in self.records
                   if ("since" not in query or r["time"] >= query["since"])
                   and query.get("delivery", self.state(r)) == self.state(r)]
        if path == "/_sandbox/events":
            return {"data": records[-query.get("limit", 1000):], "total": len(records)}
        return {"data": next(r for r in records if path.endswith("/" + r["id"]))}

    def reset(self) -> None:
        self.records, self.emitted, self.evicted, self.journal = [], 0, 0, 0

    def restore(self, records: list[dict]) -> None:
        """A snapshot (or a restart with --state-file): this history, a new journal."""
        self.records = [json.loads(json.dumps(r)) for r in records]
        self.emitted = records[-1]["sequence"] if records else 0
        self.journal = 0


T0, T1, T2 = "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:05.000Z", "2026-01-01T00:00:09.000Z"


def _kinds(items: list) -> list[tuple[str, str]]:
    return [(type(i).__name__, i.record["id"] if not isinstance(i, Notice) else i.text)
            for i in items]


async def test_follower_starts_from_now_and_reads_events_sharing_a_time_once():
    ledger = Ledger()
    ledger.add(T0)
    follower = Follower(ledger.fetch)
    await follower.start()
    assert await follower.poll() == []
    ledger.add(T0)
    ledger.add(T1)
    assert _kinds(await follower.poll()) == [("NewEvent", "e2"), ("NewEvent", "e3")]
    ledger.add(T1)
    assert _kinds(await follower.poll()) == [("NewEvent", "e4")]
    assert await follower.poll() == []


async def test_follower_reads_an_event_older_than_its_window_and_reports_evicted_ones():
    ledger = Ledger()
    follower = Follower(ledger.fetch)
    await follower.start()
    ledger.add(T2)
    assert _kinds(await follower.poll()) == [("NewEvent", "e1")]
    ledger.add(T0)  # earlier than `since`: found by sequence in a read of the whole ledger
    assert _kinds(await follower.poll()) == [("NewEvent", "e2")]
    ledger.add(T2)
    ledger.add(T2)
    del ledger.records[-2]  # gone before it was read
    ledger.evicted += 1
    items = await follower.poll()
    assert isinstance(items[0], Notice) and "1 events (sequence 3 to 3)" in items[0].text
    assert _kinds(items[1:]) == [("NewEvent", "e4")]


async def test_follower_shows_retries_and_replays_once_and_a_reset_ledger_from_its_start():
    ledger = Ledger()
    follower = Follower(ledger.fetch)
    await follower.start()
    first = ledger.add(T0, deliveries=1, state="pending")
    items = await follower.poll()
    assert [type(i) for i in items] == [NewEvent, NewAttempt] and items[1].state == "pending"
    first["deliveries"][0]["attempts"].append({**first["deliveries"][0]["attempts"][0],
                                               "number": 2, "status": 200, "error": None})
    first["deliveries"][0]["state"] = "delivered"
    items = await follower.poll()
    assert [(i.attempt["number"], i.state) for i in items] == [(2, "delivered")]
    assert await follower.poll() == []
    ledger.deliver(first, replay=True)  # settled before any poll saw it pending
    items = await follower.poll()
    assert [(i.delivery["id"], i.delivery["replay"]) for i in items] == [("e1.2", True)]
    assert await follower.poll() == []
    ledger.reset()  # and more events than were read before it
    for _ in range(3):
        ledger.add(T0)
    items = await follower.poll()
    assert "reset" in items[0].text
    assert _kinds(items[1:]) == [("NewEvent", "e1"), ("NewEvent", "e2"), ("NewEvent", "e3")]


async def test_follower_carries_on_with_the_same_history_and_shows_what_follows_a_restore():
    ledger = Ledger()
    follower = Follower(ledger.fetch)
    await follower.start()
    ledger.add(T0)
    ledger.add(T1)
    saved = json.loads(json.dumps(ledger.records))
    ledger.add(T1)
    assert len(await follower.poll()) == 3
    ledger.restore(saved + [json.loads(json.dumps(ledger.records[-1]))])  # a restart
    assert await follower.poll() == []
    ledger.restore(saved)  # an earlier snapshot: the same history, one event shorter
    items = await follower.poll()
    assert len(items) == 1 and "from sequence 3" in items[0].text
    ledger.add(T2)  # sequence 3 again, another event
    assert _kinds(await follower.poll()) == [("NewEvent", "e3")]
    assert await follower.poll() == []


# -- the cursor, against a real server ---------------------------------------------------------

class Reads:
    """listen's own Client on a server, keeping every read it makes: (path, query, how many
    records came back, `reset`). With `page`, incremental reads ask for that few at a time."""

    def __init__(self, api: Api, page: int | None = None) -> None:
        self.client = Client(api.session, api.base, api.keys["x-api-key"],
                             api.keys["x-api-secret"])
        self.page = page
        self.reads: list[tuple[str, dict, int | None, bool | None]] = []

    async def fetch(self, path: str, query: dict | None = None) -> dict:
        query = dict(query or {})
        if self.page is not None and query.get("after"):
            query["limit"] = self.page
        answer = await self.client.fetch(path, query)
        data = answer["data"]
        self.reads.append((path, query, len(data) if isinstance(data, list) else None,
                           answer.get("reset")))
        return answer


@pytest.fixture
def make_server(aiohttp_client, loaded, clock):
    """A server in this process (real HTTP on 127.0.0.1, a manual clock): the API with
    ACME's keys, and the ACME tenant, which a test fills thousands of events at a time
    (as tests/test_live_updates.py does)."""

    async def make(**limits: Any) -> tuple[Api, Any]:
        settings = Settings(port=0, clock="manual", **limits)
        client = await aiohttp_client(create_app(settings, registry=build_registry(
            settings, clock=clock, loaded=loaded)))
        api = Api(client.session, f"http://{client.host}:{client.port}", ACME)
        return api, client.server.app[SANDBOX].registry.tenants.get("acme")

    return make


def emit(tenant: Any, count: int, label: str = "company") -> list:
    return [tenant.emit("company-updated", data={"companyId": f"{label}-{number}"})
            for number in range(count)]


async def test_follower_on_a_long_ledger_polls_by_cursor_and_shows_an_old_retry_once(
        make_server, receiver):
    api, tenant = await make_server(max_events=20_000)
    receiver.program("/sandbox", 500)
    await api.call("PUT", "/_sandbox/webhooks/endpoints", {"endpoints": [
        {"url": receiver.url("/sandbox"), "eventTypes": ["pii-data-deleted"]}]})
    old = await api.trigger(identifier="user-1")  # attempt 1 refused: a retry in 30 s
    emit(tenant, 5_000)
    reads = Reads(api)
    follower = Follower(reads.fetch)
    await follower.start()
    assert reads.reads[-1][2] == len(await api.events())  # the start reads the whole ledger

    reads.reads.clear()
    for _ in range(3):
        assert await follower.poll() == []
    after = reads.reads[0][1].get("after")
    assert after and reads.reads == [
        ("/_sandbox/events", {"after": after, "limit": PAGE}, 0, False)] * 3, "quiet: one read"
    journal = await api.call("GET", "/_sandbox/requests?path=/_sandbox/events&limit=3")
    assert [entry["query"] for entry in journal] == [{"after": str(after),
                                                      "limit": str(PAGE)}] * 3

    for number, state in ((2, "pending"), (3, "failed")):
        await api.call("POST", "/_sandbox/clock/advance", {"seconds": 30})
        reads.reads.clear()
        items = await follower.poll()
        assert [(type(i), i.record["id"], i.attempt["number"], i.state) for i in items] == [
            (NewAttempt, old["id"], number, state)]
        assert [count for _, _, count, _ in reads.reads] == [1], "only the event that changed"
        assert await follower.poll() == []
    assert len(receiver.received("/sandbox")) == 3


async def test_follower_behind_the_change_window_carries_on_and_shows_nothing_twice(
        make_server):
    api, tenant = await make_server(max_events=20_000)
    emit(tenant, 10, "before")
    reads = Reads(api)
    follower = Follower(reads.fetch)
    await follower.start()
    made = emit(tenant, WINDOW + 500)
    items = await follower.poll()
    assert [read[3] for read in reads.reads if read[0] == "/_sandbox/events"][-1] is True
    assert not any(isinstance(item, Notice) for item in items), "the same history"
    assert [(type(i), i.record["id"]) for i in items] == [(NewEvent, e.id) for e in made]
    later = emit(tenant, 2, "later")
    reads.reads.clear()
    assert [i.record["id"] for i in await follower.poll()] == [e.id for e in later]
    assert [(read[2], read[3]) for read in reads.reads if read[0] == "/_sandbox/events"] == [
        (2, False)]


async def test_follower_reads_on_past_a_short_page_in_the_same_poll(make_server):
    api, tenant = await make_server()
    reads = Reads(api, page=2)
    follower = Follower(reads.fetch)
    await follower.start()
    reads.reads.clear()
    made = emit(tenant, 5)
    assert [(type(i), i.record["id"]) for i in await follower.poll()] == [
        (NewEvent, e.id) for e in made]
    assert [count for _, _, count, _ in reads.reads] == [2, 2, 1]
    assert await follower.poll() == []


async def test_follower_reports_events_evicted_unread_and_keeps_no_more_than_the_ledger(
        make_server):
    api, tenant = await make_server(max_events=100)
    follower = Follower(Reads(api).fetch)
    await follower.start()
    made = emit(tenant, 300)
    items = await follower.poll()
    stored = {r["sequence"] for r in await api.events()}
    gone = [e.sequence for e in made if e.sequence not in stored]
    assert gone and items[0] == Notice(f"{len(gone)} events (sequence {gone[0]} to "
                                       f"{gone[-1]}) left the ledger before listen could "
                                       "read them")
    assert [i.record["sequence"] for i in items[1:]] == sorted(stored)
    for round in range(30):  # each poll remembers the hundred the ledger keeps
        emit(tenant, 150, f"round-{round}")
        assert isinstance((await follower.poll())[0], Notice)
    assert len(follower.seen) <= CHECK_EVICTIONS + 2 * 100


async def test_follower_carries_on_over_a_restored_snapshot_and_follows_an_earlier_one(
        make_server):
    api, tenant = await make_server()
    follower = Follower(Reads(api).fetch)
    await follower.start()
    first = [await api.trigger(identifier="user-8") for _ in range(2)]
    assert [i.record["id"] for i in await follower.poll()] == [e["id"] for e in first]
    earlier = await api.call("GET", "/_sandbox/snapshot")
    third = await api.trigger(identifier="user-8")
    assert [i.record["id"] for i in await follower.poll()] == [third["id"]]

    await api.call("POST", "/_sandbox/snapshot", await api.call("GET", "/_sandbox/snapshot"))
    assert await follower.poll() == [], "the same history: nothing again, no notice"
    await api.call("POST", "/_sandbox/snapshot", earlier)
    assert await follower.poll() == [Notice(
        "the ledger changed under listen (a reset, a snapshot restored or a new server): "
        f"following it from sequence {third['sequence']}")]
    other = await api.trigger(identifier="user-9")
    assert other["sequence"] == third["sequence"]
    assert [(type(i), i.record["id"]) for i in await follower.poll()] == [(NewEvent, other["id"])]
