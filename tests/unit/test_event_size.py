"""An event's stored body costs its length, not a serializer's buffer (issue 10: memory)."""

from __future__ import annotations

import tracemalloc

from payroll_sandbox.domain.webhooks.events import Event


def test_a_stored_event_body_takes_about_its_own_length():
    body = {"eventType": "task.status_updated", "eventTime": "2026-01-01T00:00:00.000Z",
            "data": {"taskId": "a" * 24, "status": "processing", "note": "é" * 40}}
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        events = [Event(f"id-{n}", "task.status_updated", 0.0, body, n) for n in range(2000)]
        grown = sum(stat.size_diff for stat in
                    tracemalloc.take_snapshot().compare_to(before, "filename"))
    finally:
        tracemalloc.stop()
    per_event = grown / len(events)
    assert len(events[0].body_json) < 250
    assert per_event < 600, f"{per_event:.0f} bytes per stored event"
    assert events[0].body == body
