"""`payroll-sandbox listen`: follow a running sandbox's event ledger from a terminal.

One line per new event and per delivery attempt, as they happen; with `--forward-to`,
each new event is also sent to a local URL as the sandbox sends it (the same CloudEvent
headers, signature and body bytes), as `stripe listen --forward-to` does for Stripe.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import operator
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TextIO

import orjson

from ..validate import checked_url
from ..domain.webhooks.events import Event
from ..client import CannotReach, NotASandbox, SandboxClient, SandboxError, new_session
from ..transport.cloudevents import SIGNATURE_HEADER, sign, to_message
from ..transport.sender import post
from ..validate import parse_time

POLL_INTERVAL = 0.5     # wall seconds between two reads of the ledger
PAGE = 10000            # the most one GET /_sandbox/events returns
CHECK_EVICTIONS = 1000  # events remembered between two looks at how many the ledger keeps
REQUEST_TIMEOUT = 30.0  # wall seconds per control-plane request
FORWARD_TIMEOUT = 15.0  # wall seconds per forward: the sandbox's own attempt timeout
PREFIX = "payroll-sandbox"


class ListenError(Exception):
    """Ends `listen` with exit code 1 and this one line on standard error."""


class Unreachable(ListenError):
    """The server did not answer (refused, reset, timed out): worth trying again."""


Fetch = Callable[..., Awaitable[dict[str, Any]]]


# -- what listen shows ----------------------------------------------------------------------

@dataclass(frozen=True)
class NewEvent:
    record: dict[str, Any]          # as GET /_sandbox/events shows it


@dataclass(frozen=True)
class NewAttempt:
    record: dict[str, Any]          # the event
    delivery: dict[str, Any]
    attempt: dict[str, Any]
    state: str                      # the delivery's state right after this attempt
    retry_at: str | None = None     # when pending: the time of the next attempt


@dataclass(frozen=True)
class Notice:
    text: str                       # for standard error: resets, events lost to eviction


Item = NewEvent | NewAttempt | Notice


# -- the cursor -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Seen:
    """What listen has shown of one event: per delivery, how many attempts (attempts of a
    delivery run one after the other, so the finished ones are always the first ones)."""

    sequence: int
    fingerprint: int                # its time and body: tells another ledger from this one
    shown: tuple[int, ...]
    settled: bool                   # no delivery pending, no attempt in flight: evictable


def _fingerprint(record: dict[str, Any]) -> int:
    return hash((record["time"], orjson.dumps(record["body"])))


_sequence = operator.itemgetter("sequence")


def _finished(attempt: dict[str, Any]) -> bool:
    """An attempt in flight has neither a status nor an error yet."""
    return attempt.get("status") is not None or attempt.get("error") is not None


def _finished_count(attempts: list[dict[str, Any]]) -> int:
    return sum(1 for _ in itertools.takewhile(_finished, attempts))


class Follower:
    """Reads a tenant's ledger so that every event is shown once and every attempt once.

    The cursor is the ledger's revision: GET /_sandbox/events?after=<revision> answers the
    events emitted or delivered since (a new delivery, an attempt started or answered), each
    with its whole record, so a poll reads what changed and a quiet one an empty page.

    - New events: sequences run 1, 2, ... with no holes, and an event above the highest
      read is new: shown in sequence order, with its finished attempts. A gap before it
      means events left the ledger (eviction) before listen could read them: reported,
      never skipped silently.
    - Attempts: an event read before comes back whenever it changes; the attempts finished
      since (retries, replays, duplicates) are shown, counted per delivery in `seen`.
    - Another ledger: `reset: true` (POST /_sandbox/reset, a snapshot restored, a new
      server, or a reader further behind than the change window) comes with a full read.
      It is compared with what was read and followed from the first sequence where they
      differ; the same history (a slow reader, a server restarted with --state-file) is
      carried on with, not shown again. A server without incremental reads answers every
      read in full, and each is reconciled so.
    - `seen` keeps what the ledger keeps: a full read drops what it no longer holds, and
      every CHECK_EVICTIONS new events GET /_sandbox/stats says how many it still stores.
    """

    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch
        self.seen: dict[str, Seen] = {}     # by event id
        self.revision = 0                   # the cursor: 0 reads the whole ledger
        self.high = 0                       # every sequence up to this one was read
        self.floor = 0                      # events up to this one may be unknown to `seen`
        self.unchecked = 0                  # events remembered since the last look at evictions

    async def start(self) -> None:
        """From now on: what the ledger holds already is remembered, not shown."""
        emitted = await self._emitted()
        records, self.revision, _ = await self._changes(after=0)
        for record in records:
            self._remember(record)
        self.high = max([emitted] + [r["sequence"] for r in records])
        self.floor = min([r["sequence"] - 1 for r in records], default=self.high)
        self.unchecked = 0

    async def poll(self) -> list[Item]:
        if self.unchecked >= CHECK_EVICTIONS:
            await self._forget_evicted()
        records, revision, full = await self._changes(after=self.revision)
        if not full and self._divergence(records) is not None:
            # An event read before came back different under a cursor that looked current
            # (a new server counts revisions from 1 again): read that ledger whole.
            records, revision, full = await self._changes(after=0)
        items = self._reconcile(records, await self._emitted()) if full else []
        items += self._take(records)
        self.revision = revision
        return items

    async def _changes(self, after: int) -> tuple[list[dict[str, Any]], int, bool]:
        """The events changed after revision `after`, each once as it is now, in sequence
        order; the revision to go on from; and whether the server answered with a full
        read instead."""
        changed: dict[str, dict[str, Any]] = {}
        while True:
            page = await self.fetch("/_sandbox/events", {"after": after, "limit": PAGE})
            if page.get("reset", True):  # a server without `after` reads everything, always
                return sorted(page["data"], key=_sequence), page.get("revision", 0), True
            for record in page["data"]:  # a later page has the later record
                changed.pop(record["id"], None)
                changed[record["id"]] = record
            after = page["revision"]
            if len(page["data"]) >= page["total"]:  # else the rest waits after `revision`
                return sorted(changed.values(), key=_sequence), after, False

    def _take(self, records: list[dict[str, Any]]) -> list[Item]:
        """What is news in `records` (in sequence order): the new events, each with its
        finished attempts, and the attempts finished since on events read before."""
        fresh = [r["sequence"] for r in records if r["sequence"] > self.high]
        lost = sorted(set(range(self.high + 1, max(fresh, default=0))) - set(fresh))
        items: list[Item] = []
        if lost:
            items.append(Notice(f"{len(lost)} events (sequence {lost[0]} to {lost[-1]}) "
                                "left the ledger before listen could read them"))
            self.floor = max(self.floor, lost[-1])
        for record in records:
            seen = self.seen.get(record["id"])
            if record["sequence"] > self.high:
                items.append(NewEvent(record))
                items += self._attempts(record, shown_before=())
            elif seen is not None:
                items += self._attempts(record, shown_before=seen.shown)
            # Else one listen does not remember (older than its start, or forgotten as
            # evicted, see `_forget_evicted`): its attempts are shown from now on.
            self._remember(record)
        self.high = max([self.high] + fresh)
        return items

    def _attempts(self, record: dict[str, Any], shown_before: tuple[int, ...]) -> list[Item]:
        """The finished attempts of `record` not shown yet."""
        items: list[Item] = []
        for index, delivery in enumerate(record["deliveries"]):
            attempts = delivery["attempts"]
            first = shown_before[index] if index < len(shown_before) else 0
            for position in range(first, _finished_count(attempts)):
                attempt = attempts[position]
                if position + 1 < len(attempts):
                    state = "delivered" if attempt.get("error") is None else "pending"
                    retry_at = attempts[position + 1]["time"]
                else:
                    state, retry_at = delivery["state"], delivery.get("nextAttemptAt")
                items.append(NewAttempt(record, delivery, attempt, state,
                                        retry_at if state == "pending" else None))
        return items

    def _remember(self, record: dict[str, Any]) -> None:
        if record["id"] not in self.seen:
            self.unchecked += 1
        deliveries = record["deliveries"]
        self.seen[record["id"]] = Seen(
            record["sequence"], _fingerprint(record),
            tuple(_finished_count(d["attempts"]) for d in deliveries),
            all(d["state"] != "pending" and all(map(_finished, d["attempts"]))
                for d in deliveries))

    # -- another ledger -----------------------------------------------------------------------

    def _divergence(self, records: list[dict[str, Any]]) -> int | None:
        """The first sequence read before that `records` (in sequence order) holds
        differently, if any."""
        for record in records:
            sequence = record["sequence"]
            if sequence > self.high:
                break
            seen = self.seen.get(record["id"])
            if seen is None:
                if sequence > self.floor:
                    return sequence
            elif seen.sequence != sequence or seen.fingerprint != _fingerprint(record):
                return sequence
        return None

    def _reconcile(self, records: list[dict[str, Any]], emitted: int) -> list[Item]:
        """A full read: forget what the ledger no longer holds, and follow it from where it
        differs from what was read, or from its end if it is the same history cut short (an
        earlier snapshot). `emitted` was read after `records`: it is never behind them."""
        if len(records) < PAGE:  # the whole ledger: what it lacks was evicted
            held = {r["id"] for r in records}
            self.seen = {i: seen for i, seen in self.seen.items() if i in held}
        divergence = self._divergence(records)
        last = max([emitted] + [r["sequence"] for r in records])
        back_to = min(self.high, last, self.high if divergence is None else divergence - 1)
        if back_to >= self.high:
            return []
        self.seen = {i: seen for i, seen in self.seen.items() if seen.sequence <= back_to}
        self.high = back_to
        self.floor = min(self.floor, back_to)
        return [Notice("the ledger changed under listen (a reset, a snapshot restored or a "
                       f"new server): following it from sequence {back_to + 1}")]

    # -- what the ledger evicted --------------------------------------------------------------

    async def _forget_evicted(self) -> None:
        """The ledger evicts its oldest settled events (README: Limits) and no read says
        which: forget as many of ours, oldest settled first, so that what listen keeps
        stays the size of the ledger."""
        stored = (await self._stats())["events"]["stored"]
        settled = sorted((seen.sequence, i) for i, seen in self.seen.items() if seen.settled)
        for sequence, event_id in settled[:max(0, len(self.seen) - stored)]:
            del self.seen[event_id]
            self.floor = max(self.floor, sequence)
        self.unchecked = 0

    async def _emitted(self) -> int:
        return (await self._stats())["events"]["emitted"]

    async def _stats(self) -> dict[str, Any]:
        return (await self.fetch("/_sandbox/stats"))["data"]


# -- the control plane, from outside ----------------------------------------------------------

class Client:
    """listen's reads of a running sandbox's control plane: GETs with a tenant's keys
    through the sandbox client (simulator/client.py), each refusal one line."""

    def __init__(self, session: Any, base: str, key: str, secret: str) -> None:
        self.base = base
        self.sandbox = SandboxClient(base, key, secret, session=session, timeout=REQUEST_TIMEOUT)

    async def fetch(self, path: str, query: dict[str, Any] | None = None) -> dict[str, Any]:
        """The envelope: `data` and its other keys (a ledger page's `revision`, ...)."""
        try:
            answer = await self.sandbox.answer("GET", path, query=query, strict=True)
        except CannotReach as error:
            raise Unreachable(str(error)) from None
        except NotASandbox as error:
            if _busy(error.status):
                raise Unreachable(f"GET {path} on {self.base} answered HTTP {error.status}"
                                  ) from None
            raise ListenError(str(error)) from None
        except SandboxError as error:
            if _busy(error.status):
                raise Unreachable(f"GET {path} on {self.base} answered {error.line}") from None
            raise ListenError(error.line) from None
        return {"data": answer.data, **answer.extra}


def _busy(status: int) -> bool:
    """Busy or failing for now: worth trying again."""
    return status == 429 or status >= 500


# -- forwarding -----------------------------------------------------------------------------

class Forwarder:
    """Sends each new event to one URL as the sandbox sends it: binary-mode CloudEvent,
    the body byte for byte, signed with the tenant's secret when the tenant signs."""

    def __init__(self, client: Client, url: str, vendor: str, secret: str | None,
                 warn: Callable[[str], None]) -> None:
        self.client = client
        self.url = url
        self.vendor = vendor            # the ce-source is com.<vendor>
        self.secret = secret
        self.warn = warn

    def message(self, record: dict[str, Any]) -> tuple[dict[str, str], bytes]:
        """The headers the sandbox sent for this event (the ledger keeps them with every
        attempt) or, for an event it sent nowhere, the same built as the sandbox builds
        them; the body is the compact JSON the sandbox stores, signs and sends."""
        event = Event(id=record["id"], type=record["eventType"], time=parse_time(record["time"], "$.time"),
                      body=record["body"], sequence=record["sequence"])
        sent = next((a["requestHeaders"] for d in record["deliveries"] for a in d["attempts"]
                     if a.get("requestHeaders")), None)
        if sent:
            headers = dict(sent)
        else:
            headers = to_message(event, self.vendor, self.secret).headers
            headers["ce-time"] = record["time"]  # the ledger's own string, not a round trip
        if self.secret is not None and headers.get(SIGNATURE_HEADER) != sign(event.body_json,
                                                                              self.secret):
            # Only if the body read back from the ledger were not the bytes the sandbox
            # signed: sign what is sent, so that it verifies, and say so.
            headers[SIGNATURE_HEADER] = sign(event.body_json, self.secret)
            self.warn(f"event {record['id']}: the body differs from the bytes the sandbox "
                      "signed; re-signed")
        return headers, event.body_json

    async def send(self, record: dict[str, Any]) -> tuple[int | None, str | None]:
        """(status, None) when the URL answered, else (None, what went wrong)."""
        headers, body = self.message(record)
        outcome = await post(self.client.sandbox.session, self.url, headers, body,
                             timeout=FORWARD_TIMEOUT)
        return outcome.status, None if outcome.failure is None else outcome.failure.reason


# -- lines ----------------------------------------------------------------------------------

class Printer:
    """One line per event or attempt: readable text (coloured on a terminal) or JSON."""

    COLOURS = {"time": "2", "type": "36", "ok": "32", "bad": "31", "wait": "33", "note": "35"}

    def __init__(self, out: TextIO, *, as_json: bool, colour: bool) -> None:
        self.out = out
        self.as_json = as_json
        self.colour = colour

    def event(self, record: dict[str, Any], forward: tuple[int | None, str | None] | None,
              url: str | None) -> None:
        if self.as_json:
            line: dict[str, Any] = {
                "kind": "event", "time": record["time"], "eventType": record["eventType"],
                "id": record["id"], "sequence": record["sequence"],
                "user": record.get("userIdentifier"), "task": record.get("task"),
                "delivery": record["delivery"], "body": record["body"]}
            if forward is not None:
                line["forward"] = {"url": url, "status": forward[0], "error": forward[1]}
            return self._write_json(line)
        state = record["delivery"]
        text = f"{self._head(record, record['time'])}  delivery={self._paint(state, _tone(state))}"
        if forward is not None:
            status, error = forward
            shown = str(status) if status is not None else error
            tone = "ok" if status is not None and 200 <= status < 300 else "bad"
            text += f"  --> {self._paint(shown, tone)}"
        self._write(text)

    def attempt(self, item: NewAttempt) -> None:
        record, delivery, attempt = item.record, item.delivery, item.attempt
        if self.as_json:
            return self._write_json({
                "kind": "attempt", "time": attempt["time"], "eventType": record["eventType"],
                "eventId": record["id"], "sequence": record["sequence"],
                "user": record.get("userIdentifier"), "task": record.get("task"),
                "delivery": delivery["id"], "url": delivery["url"], "replay": delivery["replay"],
                "attempt": attempt["number"], "status": attempt["status"],
                "error": attempt["error"], "latencyMs": attempt["latencyMs"],
                "fault": attempt.get("fault"), "state": item.state,
                "nextAttemptAt": item.retry_at})
        ok = attempt["error"] is None
        result = (f"{attempt['status']} in {attempt['latencyMs']:g} ms" if ok
                  else str(attempt["error"]))
        state = f"retry at {item.retry_at}" if item.retry_at else item.state
        tags = "".join(f" ({tag})" for tag in (("replay",) if delivery["replay"] else ())
                       + ((attempt["fault"],) if attempt.get("fault") else ()))
        self._write(f"{self._head(record, attempt['time'])}  attempt {attempt['number']}{tags} "
                    f"to {delivery['url']}: {self._paint(result, 'ok' if ok else 'bad')}, "
                    f"{self._paint(state, _tone(item.state))}")

    def _head(self, record: dict[str, Any], time: str) -> str:
        return (f"{self._paint(time, 'time')}  {self._paint(record['eventType'], 'type')}  "
                f"{record['id']}  user={record.get('userIdentifier') or '-'}  "
                f"task={record.get('task') or '-'}")

    def _paint(self, text: str, tone: str) -> str:
        if not self.colour or tone not in self.COLOURS:
            return text
        return f"\033[{self.COLOURS[tone]}m{text}\033[0m"

    def _write_json(self, line: dict[str, Any]) -> None:
        self._write(orjson.dumps(line).decode())

    def _write(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()


def _tone(state: str) -> str:
    return {"delivered": "ok", "failed": "bad", "interrupted": "bad", "pending": "wait"}.get(
        state, "note")


# -- the command ----------------------------------------------------------------------------

@dataclass(frozen=True)
class ListenOptions:
    url: str
    api_key: str
    api_secret: str
    forward_to: str | None = None
    event_types: frozenset[str] | None = None   # None: every type
    as_json: bool = False


def run(options: ListenOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Exit 0 on Ctrl-C (SIGINT) or SIGTERM; 1 with one line on `err` when it cannot go on."""
    try:
        return asyncio.run(_listen(options, out, err))
    except ListenError as error:
        print(f"{PREFIX}: {error}", file=err)
        return 1
    except KeyboardInterrupt:  # before the signal handlers were in place, or on Windows
        return 0
    except BrokenPipeError:  # `listen | head`: the reader went away
        # Python flushes stdout once more at exit: point it at nothing, quietly.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return 0


async def _listen(options: ListenOptions, out: TextIO, err: TextIO) -> int:
    url = checked_url(options.url, "--url", ListenError).rstrip("/")
    forward_to = (checked_url(options.forward_to, "--forward-to", ListenError)
                  if options.forward_to else None)
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows: KeyboardInterrupt
            loop.add_signal_handler(signum, main.cancel)

    def warn(text: str) -> None:
        print(f"{PREFIX}: {text}", file=err, flush=True)

    with contextlib.suppress(asyncio.CancelledError):  # Ctrl-C or SIGTERM: the end
        async with new_session() as session:
            client = Client(session, url, options.api_key, options.api_secret)
            tenant = (await client.fetch("/_sandbox/tenant"))["data"]
            if options.event_types:
                known = set((await client.fetch("/_sandbox/schemas/events"))["data"])
                unknown = sorted(options.event_types - known)
                if unknown:
                    raise ListenError(f"--events: no event type is named {', '.join(unknown)}")
            follower = Follower(client.fetch)
            await follower.start()
            forwarder = None
            if forward_to:
                secret = tenant["apiSecret"] if tenant.get("signing", True) else None
                # /health names the vendor (the default profile's, if a server does not).
                vendor = (await client.fetch("/health"))["data"].get("vendor") or "example"
                forwarder = Forwarder(client, forward_to, vendor, secret, warn)
            colour = out.isatty() and "NO_COLOR" not in os.environ
            printer = Printer(out, as_json=options.as_json, colour=colour)
            warn(f"listening to {url} (tenant {tenant['name']})"
                 + (f", forwarding to {forward_to}" if forward_to else "") + "; Ctrl-C stops")

            # One queue in ledger order: the poller fills it, one consumer forwards and prints,
            # so a slow handler delays lines but never reorders or drops them.
            queue: asyncio.Queue[Item] = asyncio.Queue()
            tasks = {asyncio.create_task(_poll(follower, queue, warn, url)),
                     asyncio.create_task(_show(queue, printer, forwarder, options.event_types,
                                               warn))}
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a fatal error (keys refused, say) ends listen here
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    return 0


async def _poll(follower: Follower, queue: asyncio.Queue, warn: Callable[[str], None],
                url: str) -> None:
    lost = False
    while True:
        try:
            items = await follower.poll()
        except Unreachable as error:
            if not lost:
                warn(f"{error}; trying again every {POLL_INTERVAL:g}s")
            lost = True
        else:
            if lost:
                warn(f"{url} answers again")
                lost = False
            for item in items:
                queue.put_nowait(item)
        await asyncio.sleep(POLL_INTERVAL)


async def _show(queue: asyncio.Queue, printer: Printer, forwarder: Forwarder | None,
                event_types: frozenset[str] | None, warn: Callable[[str], None]) -> None:
    """In ledger order: forward an event, then print it; print attempts; notices to stderr."""
    while True:
        item = await queue.get()
        if isinstance(item, Notice):
            warn(item.text)
            continue
        if event_types is not None and item.record["eventType"] not in event_types:
            continue
        if isinstance(item, NewAttempt):
            printer.attempt(item)
            continue
        forward = await forwarder.send(item.record) if forwarder is not None else None
        printer.event(item.record, forward, forwarder.url if forwarder is not None else None)
