"""The batched access log of `serve` writes the lines logging would write."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

from payroll_sandbox.edge import logs
from payroll_sandbox.edge.logs import (ACCESS_MESSAGE, BatchedAccessLog, JsonLogFormatter,
                                TextLogFormatter, access_log)

ARGS = ("POST", "/company/search", 200, 0.123, "acme")
ANONYMOUS = ("GET", "/health", 404, 12.25, None)  # no tenant: "-" in text, null in JSON


def record_at(created: float, args: tuple = ARGS) -> logging.LogRecord:
    method, path, status, ms, tenant = args
    fields = {"method": method, "path": path, "status": status, "ms": ms, "tenant": tenant}
    record = access_log.makeRecord(access_log.name, logging.INFO, __file__, 1, ACCESS_MESSAGE,
                                   (*args[:4], tenant or "-"), None, extra={"fields": fields})
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    return record


@pytest.mark.parametrize("formatter", [TextLogFormatter(), JsonLogFormatter()],
                         ids=["text", "json"])
@pytest.mark.parametrize("created", [1_764_000_000.0, 1_764_000_000.999, 1_764_000_001.5])
@pytest.mark.parametrize("args", [ARGS, ANONYMOUS], ids=["tenant", "no-tenant"])
def test_access_line_is_what_logging_formats(formatter, created, args):
    assert formatter.access_line(created, args) == formatter.format(record_at(created, args))
    plain = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    if isinstance(formatter, TextLogFormatter):  # the cached time is logging's own
        assert formatter.format(record_at(created, args)) == plain.format(record_at(created, args))


def writes_of(formatter: logging.Formatter) -> tuple[BatchedAccessLog, logging.Handler,
                                                   io.StringIO, list[str]]:
    """A batched access log on a handler whose stream counts its writes."""
    stream = io.StringIO()
    writes: list[str] = []
    stream.write = lambda text, write=stream.write: writes.append(text) or write(text)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    return BatchedAccessLog(handler), handler, stream, writes


async def test_lines_go_out_together_at_most_flush_seconds_after_the_first(monkeypatch):
    monkeypatch.setattr(logs, "FLUSH_SECONDS", 0.02)
    batched, _, stream, writes = writes_of(JsonLogFormatter())
    batched.add(ARGS)
    await asyncio.sleep(0)
    batched.add((*ARGS[:2], 404, *ARGS[3:]))
    assert writes == []  # a loop turn later, still waiting for the others
    await asyncio.sleep(0.05)
    assert len(writes) == 1
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["status"] for line in lines] == [200, 404]
    assert lines[0]["logger"] == "payroll_sandbox.access" and lines[0]["tenant"] == "acme"


async def test_a_full_batch_goes_out_at_once_and_other_lines_keep_the_order(monkeypatch):
    monkeypatch.setattr(logs, "FLUSH_LINES", 3)
    batched, handler, stream, writes = writes_of(TextLogFormatter())
    for _ in range(3):
        batched.add(ARGS)
    assert len(writes) == 1 and stream.getvalue().count("\n") == 3
    batched.add(ANONYMOUS)
    other = logging.getLogger("payroll_sandbox.test-order")
    other.addHandler(handler)
    try:
        other.warning("after the request")
    finally:
        other.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert "GET /health 404" in lines[3] and lines[4].endswith("after the request")
    batched.add(ARGS)
    batched.close()  # serve's end: the last lines out, no timer left
    assert stream.getvalue().splitlines()[5].endswith("tenant=acme") and batched._timer is None
