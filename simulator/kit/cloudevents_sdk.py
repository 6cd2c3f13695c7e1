"""Reading a webhook delivery with the official CloudEvents SDK, whichever major version the
customer's environment holds.

cloudevents 2.x reads binary content mode with `cloudevents.core.bindings.http.from_binary`;
1.x (whose `cloudevents.http` many apps still import) with `cloudevents.http.from_http`. The
receivers call `read_binary` alone, so installing payroll-sandbox never forces a version of
the SDK on an app. The server itself writes the binary mode without the SDK
(webhooks/cloudevents.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["NotACloudEvent", "ParsedEvent", "read_binary", "sdk_major"]


class NotACloudEvent(ValueError):
    """The SDK refused the request: the message is its reason."""


@dataclass(frozen=True)
class ParsedEvent:
    """A delivery as the SDK read it: the SDK's own event object and the attributes a
    receiver checks, the same whichever version read them."""

    event: Any   # 2.x: cloudevents.core.v1.event.CloudEvent; 1.x: cloudevents.http.CloudEvent
    type: str
    id: str
    data: Any    # the JSON body, decoded


def sdk_major() -> int:
    """The installed SDK's major version (1 or 2)."""
    try:
        import cloudevents.core  # noqa: F401  (2.x only)
    except ImportError:
        return 1
    return 2


def read_binary(headers: Mapping[str, str], body: bytes) -> ParsedEvent:
    """The request parsed by the SDK in binary content mode; NotACloudEvent when it refuses."""
    try:
        if sdk_major() == 2:
            return _read_v2(headers, body)
        return _read_v1(headers, body)
    except NotACloudEvent:
        raise
    except Exception as error:  # any refusal of the SDK's is the finding
        raise NotACloudEvent(str(error) or type(error).__name__) from None


def _read_v2(headers: Mapping[str, str], body: bytes) -> ParsedEvent:
    from cloudevents.core.bindings.http import HTTPMessage, from_binary
    from cloudevents.core.formats.json import JSONFormat
    from cloudevents.core.v1.event import CloudEvent

    event = from_binary(HTTPMessage(headers=dict(headers), body=body), JSONFormat(), CloudEvent)
    return ParsedEvent(event=event, type=event.get_type(), id=event.get_id(),
                       data=event.get_data())


def _read_v1(headers: Mapping[str, str], body: bytes) -> ParsedEvent:
    from cloudevents.http import from_http

    if not any(name.lower() == "ce-specversion" for name in headers):
        # 1.x falls back to structured mode without it; a delivery must be binary mode.
        raise NotACloudEvent("no ce-specversion header: not binary content mode")
    event = from_http(headers=dict(headers), data=body)  # keywords: 1.0 took (data, headers)
    return ParsedEvent(event=event, type=event["type"], id=event["id"], data=event.data)
