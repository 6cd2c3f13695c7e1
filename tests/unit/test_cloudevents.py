"""Building a webhook request from an Event, with no client involved (webhooks/cloudevents.py;
spec: Events, Delivery: binary content mode, signed with the tenant's API secret)."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime, timezone

import pytest
from cloudevents.core.bindings.http import HTTPMessage, from_binary
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from payroll_sandbox.domain.webhooks.events import Event
from payroll_sandbox.transport.cloudevents import SIGNATURE_HEADER, to_message

SECRET = "sandbox-secret-acme-0001"
# 2026-05-28T20:26:40.123600Z: more precision than the service writes.
TIME = 1_780_000_000.1236
BODY = {"eventType": "task-status-updated", "eventTime": "2026-05-28T20:26:40.123Z",
        "user": {"_id": "u1", "identifier": "user-1", "connected": False},
        "data": {"status": "failed", "failureReason": "auth-expired", "note": "caf\u00e9"}}


def event(**overrides) -> Event:
    fields = {"id": "7f0c7d8e-2f51-4c8c-9a59-0e1a1f2b3c4d", "type": "task-status-updated",
              "time": TIME, "body": BODY, "sequence": 3, "user": "user-1", "task": "t1"}
    return Event(**{**fields, **overrides})


def parsed(message) -> CloudEvent:
    """What a receiver using the official SDK reads (as tests/receiver.py does)."""
    return from_binary(HTTPMessage(headers=dict(message.headers), body=message.body),
                       JSONFormat(), CloudEvent)


def test_to_message_unsigned_has_exactly_the_cloudevent_headers():
    message = to_message(event(), "atomic")
    assert set(message.headers) == {"ce-id", "ce-source", "ce-type", "ce-specversion", "ce-time",
                                    "content-type"}
    assert message.headers["ce-id"] == "7f0c7d8e-2f51-4c8c-9a59-0e1a1f2b3c4d"
    assert message.headers["ce-source"] == "com.atomic"
    assert message.headers["ce-type"] == "com.atomic.task-status-updated"
    assert message.headers["ce-specversion"] == "1.0"
    assert message.headers["content-type"] == "application/json"


def test_to_message_names_source_and_type_after_the_vendor():
    message = to_message(event(type="maintenance-mode"), "payco")
    assert message.headers["ce-source"] == "com.payco"
    assert message.headers["ce-type"] == "com.payco.maintenance-mode"


def test_to_message_body_is_the_event_body_as_json_bytes():
    message = to_message(event(), "atomic")
    assert isinstance(message.body, bytes)
    assert json.loads(message.body) == BODY


def test_to_message_ce_time_is_the_event_instant_to_the_millisecond():
    sent = to_message(event(), "atomic").headers["ce-time"]
    moment = datetime.fromisoformat(sent.replace("Z", "+00:00"))
    assert moment == datetime(2026, 5, 28, 20, 26, 40, 123000, tzinfo=timezone.utc)


def test_to_message_parses_with_the_official_sdk():
    cloud_event = parsed(to_message(event(), "atomic"))
    assert cloud_event.get_id() == "7f0c7d8e-2f51-4c8c-9a59-0e1a1f2b3c4d"
    assert cloud_event.get_source() == "com.atomic"
    assert cloud_event.get_type() == "com.atomic.task-status-updated"
    assert cloud_event.get_specversion() == "1.0"
    assert cloud_event.get_datacontenttype() == "application/json"
    assert cloud_event.get_time() == datetime(2026, 5, 28, 20, 26, 40, 123000, tzinfo=timezone.utc)
    assert cloud_event.get_data() == BODY


def test_to_message_with_a_secret_signs_the_raw_body():
    message = to_message(event(), "atomic", SECRET)
    expected = hmac.new(SECRET.encode(), message.body, hashlib.sha256).hexdigest()
    assert message.headers[SIGNATURE_HEADER] == expected
    assert SIGNATURE_HEADER == "x-hmac-signature-sha-256"
    # The signature is an extra header: the CloudEvent itself is unchanged.
    unsigned = to_message(event(), "atomic")
    assert message.body == unsigned.body
    assert {k: v for k, v in message.headers.items() if k != SIGNATURE_HEADER} == unsigned.headers
    assert parsed(message).get_data() == BODY


def test_to_message_signature_depends_on_the_secret_and_the_body():
    signed = to_message(event(), "atomic", SECRET).headers[SIGNATURE_HEADER]
    assert to_message(event(), "atomic", "another-secret").headers[SIGNATURE_HEADER] != signed
    other_body = {**BODY, "data": {"status": "completed"}}
    assert to_message(event(body=other_body), "atomic", SECRET).headers[SIGNATURE_HEADER] != signed


def test_to_message_without_a_secret_is_unsigned():
    assert SIGNATURE_HEADER not in to_message(event(), "atomic", None).headers


def test_to_message_is_pure_and_its_result_frozen():
    first, second = to_message(event(), "atomic", SECRET), to_message(event(), "atomic", SECRET)
    assert first == second
    with pytest.raises(AttributeError):  # frozen
        first.body = b"{}"  # type: ignore[misc]
