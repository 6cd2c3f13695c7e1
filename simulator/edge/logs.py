"""The sandbox's logs: one access line per request, the text and JSON formatters of every
log, and the batched writer `payroll-sandbox serve` uses for the access lines.

The edge middleware calls `log_access`; `serve` picks a formatter and batching (cli.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from functools import lru_cache
from typing import Any

from ..transport.redact import REDACTED, spaces_encoded

ACCESS_LOGGER = "payroll_sandbox.access"
access_log = logging.getLogger(ACCESS_LOGGER)

ACCESS_MESSAGE = "%s %s %s %.1fms tenant=%s"

# The path parameters that hold a secret, the one list of them: the hosted flow's config (a
# base64 JSON document that may hold the user's public token, slashes included), a public
# token being revoked, a processor token being revoked. Every operation whose path has one
# is redacted in logs (SECURITY.md: logs are read by people who are not the tenant).
SECRET_PARAMETERS = frozenset({"config", "publicToken", "token"})
_PARAMETER = re.compile(r"\{(\w+)\}")


@lru_cache(maxsize=1)
def _secret_paths() -> tuple[re.Pattern[str], ...]:
    """One pattern per operation path with a secret parameter, up to that parameter: what
    precedes it is kept (group 1), the secret is not, what follows is kept (group 2), so a
    mistyped path after a token (`/access-token/<token>/revok`) hides the token too."""
    from .operations import AGGREGATOR, OPERATIONS  # the operations, once they are declared

    patterns = []
    for path in sorted({op.path for op in OPERATIONS}):
        secret = next((m for m in _PARAMETER.finditer(path) if m.group(1) in SECRET_PARAMETERS),
                      None)
        if secret is None:
            continue
        before = "/".join("[^/]+" if _PARAMETER.fullmatch(segment) or segment == AGGREGATOR
                          else re.escape(segment)
                          for segment in path[:secret.start()].split("/"))
        rest = secret.end() == len(path)  # the last parameter takes the rest (a config)
        patterns.append(re.compile(f"^({before})(?:{'.+' if rest else '[^/]+'})(.*)$", re.DOTALL))
    return tuple(patterns)


def loggable_path(path: str) -> str:
    """A request's path as logs show it: a secret parameter redacted, spaces encoded."""
    for pattern in _secret_paths():
        match = pattern.match(path)
        if match:
            path = f"{match.group(1)}{REDACTED}{match.group(2)}"
            break
    return spaces_encoded(path)


def log_access(method: str, path: str, status: int, ms: float, tenant: str | None) -> None:
    """A request's access line (its path as logs may show it), batched under `serve`."""
    args = (method, loggable_path(path), status, ms, tenant)
    if _batched is not None:
        _batched.add(args)
    else:
        access_log.info(ACCESS_MESSAGE, *access_message_args(args),
                        extra={"fields": access_fields(args)})


def access_message_args(args: tuple) -> tuple:
    """log_access's args as ACCESS_MESSAGE takes them (no tenant: `-`)."""
    return (*args[:4], args[4] or "-")


def access_fields(args: tuple) -> dict[str, Any]:
    """The fields of an access line (a JSON log writes them as they are)."""
    method, path, status, ms, tenant = args
    return {"method": method, "path": path, "status": status, "ms": ms, "tenant": tenant}


# Access lines wait at most this long (or until this many are waiting) before they are
# written, as nginx's `access_log ... buffer= flush=`: a write per loop turn was a system
# call every one or two requests, a tenth of answering GET /health.
FLUSH_SECONDS = 0.05
FLUSH_LINES = 512


class BatchedAccessLog:
    """The access log of `payroll-sandbox serve`: the same lines at a fraction of the cost.

    Logging a line the usual way (a LogRecord with its caller, thread and process looked
    up, filters, the handler's lock, the time formatted, a write and a flush) cost about
    as much as answering GET /health. Here the handler's formatter (TextLogFormatter or
    JsonLogFormatter) writes the line straight from the fields, and the lines go out
    together, at most FLUSH_SECONDS after the first of them. Any other line the handler
    writes (a warning, an error) flushes them first, so the log keeps its order.
    """

    def __init__(self, handler: logging.StreamHandler) -> None:
        self._handler = handler
        self._line = handler.formatter.access_line  # type: ignore[union-attr]
        self._lines: list[str] = []
        self._timer: asyncio.TimerHandle | None = None
        handler.addFilter(self._before_other_lines)

    def add(self, args: tuple) -> None:
        lines = self._lines
        lines.append(self._line(time.time(), args))
        if len(lines) == 1:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_SECONDS, self.flush)
        elif len(lines) >= FLUSH_LINES:
            self.flush()

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._lines:
            return
        terminator = self._handler.terminator
        text = terminator.join(self._lines) + terminator
        self._lines.clear()
        try:
            self._handler.stream.write(text)
            self._handler.stream.flush()
        except (OSError, ValueError):  # the stream is gone (closed, broken pipe)
            pass

    def close(self) -> None:
        """The last lines out; the handler's other lines no longer wait for any."""
        self.flush()
        self._handler.removeFilter(self._before_other_lines)

    def _before_other_lines(self, record: logging.LogRecord) -> bool:
        self.flush()
        return True


_batched: BatchedAccessLog | None = None


def batch_access_log(handler: logging.StreamHandler | None) -> BatchedAccessLog | None:
    """Access lines go to `handler` (formatted by a TextLogFormatter or JsonLogFormatter) in
    batches; None: one logging call per line again, for whatever handlers the host
    application configured. For `serve`, which owns the process's log."""
    global _batched
    if _batched is not None:
        _batched.close()
    _batched = BatchedAccessLog(handler) if handler is not None else None
    return _batched


class _SecondsFormatter(logging.Formatter):
    """A formatter that formats the date and time of a second once, not once per line."""

    def __init__(self, fmt: str | None = None, datefmt: str | None = None) -> None:
        super().__init__(fmt, datefmt)
        self._second: tuple[int, str | None] | None = None
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return self._time(record.created, datefmt)

    def _time(self, created: float, datefmt: str | None) -> str:
        """logging.Formatter.formatTime, from the time alone."""
        second = int(created)
        if self._second != (second, datefmt):
            self._second = (second, datefmt)
            self._stamp = time.strftime(datefmt or self.default_time_format,
                                        self.converter(created))
        if datefmt or not self.default_msec_format:
            return self._stamp
        return self.default_msec_format % (self._stamp, int((created - second) * 1000))


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_controls(text: str) -> str:
    """Control characters as `\\xNN` (`\\uNNNN`): what a request sent (a path with
    `%0d%0a`) cannot start a forged line of its own in a text log."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: (f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100
                                   else f"\\u{ord(m[0]):04x}"), text)


class TextLogFormatter(_SecondsFormatter):
    """One line: time, level, logger and message (its control characters escaped; a
    traceback, when there is one, follows on lines of its own)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def access_line(self, created: float, args: tuple) -> str:
        """What format() makes of the access log record of log_access's args, without the
        record."""
        message = escape_controls(ACCESS_MESSAGE % access_message_args(args))
        return f"{self._time(created, None)} INFO {ACCESS_LOGGER} {message}"


class JsonLogFormatter(_SecondsFormatter):
    """One JSON object per line: the access fields, or the message and level."""

    def format(self, record: logging.LogRecord) -> str:
        document = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                    "logger": record.name}
        fields = getattr(record, "fields", None)
        if fields:
            document.update(fields)
        else:
            document["message"] = record.getMessage()
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document)

    def access_line(self, created: float, args: tuple) -> str:
        """What format() makes of the access log record of log_access's args, without the
        record."""
        return json.dumps({"time": self._time(created, "%Y-%m-%dT%H:%M:%S"), "level": "INFO",
                           "logger": ACCESS_LOGGER, **access_fields(args)})
