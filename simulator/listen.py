"""`payroll-sandbox listen`: follow a running sandbox's event ledger from a terminal.

One line per new event and per delivery attempt, as they happen; with `--forward-to`,
each new event is also sent to a local URL as the sandbox sends it (the same CloudEvent
headers, signature and body bytes), as `stripe listen --forward-to` does for Stripe.

The ledger is read through the control plane (GET /_sandbox/stats and /_sandbox/events);
`Follower` is the cursor that reads each event once and every attempt once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TextIO
from urllib.parse import urlsplit

import orjson

from .clock import isoformat
from .domain.events import Event
from .webhooks.cloudevents import SIGNATURE_HEADER, sign, to_message

POLL_INTERVAL = 0.5     # wall seconds between two reads of the ledger
SINCE_MARGIN = 1.0      # `since` has milliseconds and is inclusive: read a second back,
                        # and drop what was read already by its sequence
PAGE = 10000            # the most one GET /_sandbox/events returns
FOLLOW_ONE_BY_ONE = 20  # settled events re-read one by one; more: one read of their window
REQUEST_TIMEOUT = 30.0  # wall seconds per control-plane request
FORWARD_TIMEOUT = 15.0  # wall seconds per forward: the sandbox's own attempt timeout
PREFIX = "payroll-sandbox"


class ListenError(Exception):
    """Ends `listen` with exit code 1 and this one line on standard error."""


class Unreachable(ListenError):
    """The server did not answer (refused, reset, timed out): worth trying again."""


class NotFound(ListenError):
    pass


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

@dataclass
class Seen:
    """What listen has shown of one event: per delivery, how many attempts (attempts of a
    delivery run one after the other, so the finished ones are always the first ones)."""

    sequence: int
    time: float
    fingerprint: int                # its time and body: tells a reset ledger from this one
    shown: list[int] = field(default_factory=list)
    following: bool = False         # a delivery pending or an attempt in flight


def _fingerprint(record: dict[str, Any]) -> int:
    return hash((record["time"], orjson.dumps(record["body"])))


def _finished(attempt: dict[str, Any]) -> bool:
    """An attempt in flight has neither a status nor an error yet."""
    return attempt.get("status") is not None or attempt.get("error") is not None


def _epoch(iso: str) -> float:
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


class Follower:
    """Reads a tenant's ledger so that every event is shown once and every attempt once.

    - New events: the sequence numbers every event of a tenant carries (1, 2, ... with no
      holes, `emitted` in GET /_sandbox/stats is the last one) are the cursor. Each read asks
      for the events since the last one read, less a second (`since` is an inclusive time
      with milliseconds, and many events share a time); what was read already is dropped by
      sequence. If a sequence up to `emitted` is still missing (time went back, or the
      window overflowed), the whole ledger is read; what is not there either left the
      ledger (eviction) and is reported, never skipped silently.
    - Attempts: an event whose delivery is pending, or whose attempt is in flight, is
      followed until it settles. Replays of settled events show up as stored deliveries
      that no event read accounts for (`deliveries.stored` of the stats): the ledger is
      read once more and the new attempts shown.
    - Another ledger under the same keys (POST /_sandbox/reset, a snapshot restored, a new
      server): `emitted` went back, the tenant's journal was cleared, or an event read
      before came back different. The ledger is compared with what was read, and followed
      from the first sequence where they differ; the same history (a server restarted
      with --state-file) is carried on with, not shown again.
    """

    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch
        self.seen: dict[str, Seen] = {}     # by event id, in sequence order
        self.high = 0                       # every sequence up to this one was read
        self.floor = 0                      # events up to this one may be unknown to `seen`
        self.latest: float | None = None    # the time of the last event read
        self.known = 0                      # deliveries listen knows of, over `seen`
        self.offset = 0                     # stored deliveries of events never read
        self.evicted = 0
        self.journal: tuple[int, int] = (0, 0)  # (evicted, stored): a reset clears it

    async def start(self) -> None:
        """From now on: what the ledger holds already is remembered, not shown."""
        stats = await self._stats()
        records = sorted(await self._events(limit=PAGE), key=lambda r: r["sequence"])
        for record in records:
            self._update(record)
        self.high = max([stats["events"]["emitted"]] + [r["sequence"] for r in records])
        self.floor = records[0]["sequence"] - 1 if records else self.high
        self.latest = _epoch(records[-1]["time"]) if records else None
        self._settle_accounts(stats)

    async def poll(self) -> list[Item]:
        items: list[Item] = []
        stats = await self._stats()
        emitted = stats["events"]["emitted"]
        if emitted < self.high or self._journal_cleared(stats):
            items += self._rewind(await self._events(limit=PAGE), emitted)
        fresh: set[str] = set()
        if emitted > self.high:
            items += await self._read_new(emitted, fresh)
        items += await self._follow(fresh)
        if stats["events"]["evicted"] != self.evicted:
            self._prune(stats)
            self._settle_accounts(stats)
        elif stats["deliveries"]["stored"] - self._known_up_to(emitted) > self.offset:
            items += await self._reread()
            self._settle_accounts(stats)
        self.journal = self._journal(stats)
        return items

    # -- new events ---------------------------------------------------------------------------

    async def _read_new(self, emitted: int, fresh: set[str]) -> list[Item]:
        query: dict[str, Any] = {"limit": PAGE}
        if self.latest is not None:
            query["since"] = isoformat(self.latest - SINCE_MARGIN)
        records = await self._events(**query)
        items: list[Item] = []
        if (self._divergence(records) is not None
                or not set(range(self.high + 1, emitted + 1)) <= self._sequences(records)):
            records = await self._events(limit=PAGE)
            items += self._rewind(records, emitted)
            lost = set(range(self.high + 1, emitted + 1)) - self._sequences(records)
            if lost:
                items.append(Notice(f"{len(lost)} events (sequence {min(lost)} to {max(lost)}) "
                                    "left the ledger before listen could read them"))
                self.floor = max(self.floor, max(lost))
        for record in self._unread(records):
            self._update(record)
            fresh.add(record["id"])
            items.append(NewEvent(record))
            items += self._attempts(record, shown_before=[])
            self.high = record["sequence"]
            self.latest = self.seen[record["id"]].time
        self.high = max(self.high, emitted)
        return items

    def _unread(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        by_sequence = {r["sequence"]: r for r in records if r["sequence"] > self.high}
        return [by_sequence[s] for s in sorted(by_sequence)]

    def _sequences(self, records: list[dict[str, Any]]) -> set[int]:
        return {r["sequence"] for r in records if r["sequence"] > self.high}

    # -- another ledger -----------------------------------------------------------------------

    def _divergence(self, records: list[dict[str, Any]]) -> int | None:
        """The first sequence read before that `records` holds differently, if any."""
        for record in sorted(records, key=lambda r: r["sequence"]):
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

    def _rewind(self, records: list[dict[str, Any]], emitted: int) -> list[Item]:
        """Follow the whole ledger `records` from where it differs from what was read, or
        from its last event if it is the same history cut short."""
        divergence = self._divergence(records)
        back_to = min(self.high, emitted, self.high if divergence is None else divergence - 1)
        if back_to >= self.high:
            return []
        for event_id in [i for i, seen in self.seen.items() if seen.sequence > back_to]:
            del self.seen[event_id]
        self.known = sum(len(seen.shown) for seen in self.seen.values())
        self.high = back_to
        self.floor = min(self.floor, back_to)
        last = max(self.seen.values(), key=lambda seen: seen.sequence, default=None)
        self.latest = last.time if last is not None else None
        return [Notice("the ledger changed under listen (a reset, a snapshot restored or a "
                       f"new server): following it from sequence {back_to + 1}")]

    def _journal_cleared(self, stats: dict[str, Any]) -> bool:
        # listen's own reads are journaled, so the journal only grows (or turns over,
        # counting evictions) until a reset or a restore starts it again.
        evicted, stored = self._journal(stats)
        return evicted < self.journal[0] or (evicted == self.journal[0] and stored < self.journal[1])

    @staticmethod
    def _journal(stats: dict[str, Any]) -> tuple[int, int]:
        journal = stats.get("journal") or {}
        return journal.get("evicted", 0), journal.get("stored", 0)

    # -- attempts -----------------------------------------------------------------------------

    async def _follow(self, fresh: set[str]) -> list[Item]:
        """New attempts of the events still being delivered."""
        ids = [i for i, seen in self.seen.items() if seen.following and i not in fresh]
        if not ids:
            return []
        since = isoformat(min(self.seen[i].time for i in ids) - SINCE_MARGIN)
        pending = {r["id"]: r for r in await self._events(delivery="pending", since=since,
                                                           limit=PAGE)}
        settled = [i for i in ids if i not in pending]
        if len(settled) > FOLLOW_ONE_BY_ONE:
            pending.update({r["id"]: r for r in await self._events(since=since, limit=PAGE)})
        else:
            for event_id in settled:
                with contextlib.suppress(NotFound):  # evicted meanwhile: nothing more to show
                    pending[event_id] = (await self.fetch(f"/_sandbox/events/{event_id}"))["data"]
        items: list[Item] = []
        for event_id in ids:
            record = pending.get(event_id)
            if record is None or record["sequence"] != self.seen[event_id].sequence:
                self.seen[event_id].following = False
                continue
            items += self._attempts(record, shown_before=list(self.seen[event_id].shown))
            self._update(record)
        return items

    async def _reread(self) -> list[Item]:
        """Deliveries appeared on events read before (a replay, a duplicate): show them."""
        items: list[Item] = []
        for record in await self._events(limit=PAGE):
            seen = self.seen.get(record["id"])
            if seen is None or seen.sequence != record["sequence"]:
                continue  # not read yet: the next poll reads it as new
            items += self._attempts(record, shown_before=list(seen.shown))
            self._update(record)
        return items

    def _attempts(self, record: dict[str, Any], shown_before: list[int]) -> list[Item]:
        """The finished attempts of `record` not shown yet."""
        items: list[Item] = []
        for index, delivery in enumerate(record["deliveries"]):
            attempts = delivery["attempts"]
            done = _finished_count(attempts)
            first = shown_before[index] if index < len(shown_before) else 0
            for position in range(first, done):
                attempt = attempts[position]
                if position + 1 < len(attempts):
                    state = "delivered" if attempt.get("error") is None else "pending"
                    retry_at = attempts[position + 1]["time"]
                else:
                    state, retry_at = delivery["state"], delivery.get("nextAttemptAt")
                items.append(NewAttempt(record, delivery, attempt, state,
                                        retry_at if state == "pending" else None))
        return items

    # -- bookkeeping --------------------------------------------------------------------------

    def _update(self, record: dict[str, Any]) -> None:
        seen = self.seen.get(record["id"])
        if seen is None:
            seen = self.seen[record["id"]] = Seen(record["sequence"], _epoch(record["time"]),
                                                  _fingerprint(record))
        deliveries = record["deliveries"]
        self.known += len(deliveries) - len(seen.shown)
        seen.shown = [_finished_count(d["attempts"]) for d in deliveries]
        seen.following = any(d["state"] == "pending" or not all(map(_finished, d["attempts"]))
                             for d in deliveries)

    def _known_up_to(self, sequence: int) -> int:
        """Deliveries known of events up to `sequence` (those read after the stats were
        taken are the last few of `seen`)."""
        later = 0
        for event_id in reversed(self.seen):
            seen = self.seen[event_id]
            if seen.sequence <= sequence:
                break
            later += len(seen.shown)
        return self.known - later

    def _settle_accounts(self, stats: dict[str, Any]) -> None:
        """From here on, stored deliveries that no read accounts for are news."""
        emitted = stats["events"]["emitted"]
        self.offset = stats["deliveries"]["stored"] - self._known_up_to(emitted)
        self.evicted = stats["events"]["evicted"]
        self.journal = self._journal(stats)

    def _prune(self, stats: dict[str, Any]) -> None:
        """The ledger evicted its oldest settled events: forget as many of ours."""
        excess = len(self.seen) - stats["events"]["stored"]
        for event_id in list(self.seen):
            if excess <= 0:
                break
            seen = self.seen[event_id]
            if seen.sequence <= stats["events"]["emitted"] and not seen.following:
                self.known -= len(seen.shown)
                self.floor = max(self.floor, seen.sequence)
                del self.seen[event_id]
                excess -= 1

    async def _stats(self) -> dict[str, Any]:
        return (await self.fetch("/_sandbox/stats"))["data"]

    async def _events(self, **query: Any) -> list[dict[str, Any]]:
        return (await self.fetch("/_sandbox/events", query))["data"]


def _finished_count(attempts: list[dict[str, Any]]) -> int:
    count = 0
    for attempt in attempts:
        if not _finished(attempt):
            break
        count += 1
    return count


# -- the control plane, from outside ----------------------------------------------------------

class Client:
    """GET on a running sandbox with a tenant's keys; errors as one line each."""

    def __init__(self, session: Any, base: str, key: str, secret: str) -> None:
        self.session = session
        self.base = base
        self.headers = {"x-api-key": key, "x-api-secret": secret}

    async def fetch(self, path: str, query: dict[str, Any] | None = None) -> dict[str, Any]:
        import aiohttp

        params = {k: str(v) for k, v in (query or {}).items()}
        try:
            async with self.session.get(self.base + path, params=params, headers=self.headers,
                                        allow_redirects=False) as response:
                raw = await response.read()
                status = response.status
        except asyncio.TimeoutError:
            raise Unreachable(f"cannot reach {self.base}: no answer in {REQUEST_TIMEOUT:g}s") \
                from None
        except aiohttp.ClientConnectorError as error:
            reason = ("connection refused" if isinstance(error.os_error, ConnectionRefusedError)
                      else str(error.os_error or error))
            raise Unreachable(f"cannot reach {self.base}: {reason}") from None
        except (aiohttp.ClientError, OSError) as error:
            raise Unreachable(f"cannot reach {self.base}: {error or type(error).__name__}") \
                from None
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        if status == 200 and isinstance(body, dict) and "data" in body:
            return body
        error = body.get("error") if isinstance(body, dict) else None
        text = (f"{status} {error.get('code')}: {error.get('message')}"
                if isinstance(error, dict) else f"HTTP {status}")
        if status == 429 or status >= 500:  # busy or failing for now: worth trying again
            raise Unreachable(f"GET {path} on {self.base} answered {text}")
        if not isinstance(error, dict):
            raise ListenError(f"{self.base} does not answer as a payroll-sandbox "
                              f"(GET {path}: HTTP {status})")
        if status == 404:
            raise NotFound(text)
        raise ListenError(text)


def check_url(url: str, flag: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ListenError(f"{flag} {url!r} is not an http:// or https:// URL with a host")
    try:
        parts.port  # raises on a port that is not a number from 0 to 65535
    except ValueError as error:
        raise ListenError(f"{flag} {url!r}: {error}") from None
    return url.rstrip("/") if flag == "--url" else url


# -- forwarding -----------------------------------------------------------------------------

class Forwarder:
    """Sends each new event to one URL as the sandbox sends it: binary-mode CloudEvent,
    the body byte for byte, signed with the tenant's secret when the tenant signs."""

    def __init__(self, session: Any, client: Client, url: str, secret: str | None,
                 warn: Callable[[str], None]) -> None:
        self.session = session
        self.client = client
        self.url = url
        self.secret = secret
        self.warn = warn
        self.vendor: str | None = None

    async def message(self, record: dict[str, Any]) -> tuple[dict[str, str], bytes]:
        """The headers the sandbox sent for this event (the ledger keeps them with every
        attempt) or, for an event it sent nowhere, the same built as the sandbox builds
        them; the body is the compact JSON the sandbox stores, signs and sends."""
        event = Event(id=record["id"], type=record["eventType"], time=_epoch(record["time"]),
                      body=record["body"], sequence=record["sequence"])
        sent = next((a["requestHeaders"] for d in record["deliveries"] for a in d["attempts"]
                     if a.get("requestHeaders")), None)
        if sent:
            headers = dict(sent)
            self.vendor = self.vendor or _vendor_of(headers)
        else:
            headers = to_message(event, await self._vendor(), self.secret).headers
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
        import aiohttp

        headers, body = await self.message(record)
        try:
            async with self.session.post(self.url, data=body, headers=headers,
                                         allow_redirects=False,
                                         timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT)
                                         ) as response:
                await response.read()
                return response.status, None
        except asyncio.TimeoutError:
            return None, f"timeout after {FORWARD_TIMEOUT:g}s"
        except aiohttp.ClientConnectorDNSError as error:
            return None, f"DNS lookup failed for {error.host}"
        except aiohttp.ClientConnectorError as error:
            if isinstance(error.os_error, ConnectionRefusedError):
                return None, "connection refused"
            return None, f"cannot connect to {error.host}:{error.port}"
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError,
                aiohttp.ClientPayloadError):
            return None, "connection reset"
        except (aiohttp.ClientError, OSError, ValueError) as error:
            return None, f"{type(error).__name__}: {error}"

    async def _vendor(self) -> str:
        """`com.<vendor>` is the ce-source; the OpenAPI document's webhooks say it."""
        if self.vendor is None:
            self.vendor = await _vendor_from_openapi(self.session, self.client.base)
        return self.vendor


def _vendor_of(headers: dict[str, str]) -> str | None:
    source = headers.get("ce-source", "")
    return source[len("com."):] if source.startswith("com.") else None


async def _vendor_from_openapi(session: Any, base: str) -> str:
    """The vendor label from the `ce-source` the OpenAPI document publishes for webhooks;
    the default profile's (`example`) if the document cannot be read."""
    try:
        async with session.get(f"{base}/openapi.json") as response:
            document = orjson.loads(await response.read())
        for operation in (document.get("webhooks") or {}).values():
            for parameter in operation.get("post", {}).get("parameters", []):
                if parameter.get("name") == "ce-source":
                    return _vendor_of({"ce-source": parameter["schema"]["const"]}) or "example"
    except Exception:  # a guess is better than no forward at all
        pass
    return "example"


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
    import aiohttp

    url = check_url(options.url, "--url")
    forward_to = check_url(options.forward_to, "--forward-to") if options.forward_to else None
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows: KeyboardInterrupt
            loop.add_signal_handler(signum, main.cancel)

    def warn(text: str) -> None:
        print(f"{PREFIX}: {text}", file=err, flush=True)

    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    try:
        async with aiohttp.ClientSession(timeout=timeout,
                                         cookie_jar=aiohttp.DummyCookieJar()) as session:
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
                forwarder = Forwarder(session, client, forward_to, secret, warn)
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
    except asyncio.CancelledError:  # Ctrl-C or SIGTERM
        return 0
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
