"""Building a CloudEvent: a pure function from an Event to headers and body.

Binary content mode (spec: Events, Delivery): the attributes travel as `ce-*`
headers and the event body is the HTTP body. Sending is the dispatcher's job.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime

from ..clock import isoformat
from ..domain.events import Event

SIGNATURE_HEADER = "x-hmac-signature-sha-256"


@dataclass(frozen=True)
class OutboundMessage:
    headers: dict[str, str]
    body: bytes


def to_message(event: Event, vendor: str, signing_secret: str | None = None) -> OutboundMessage:
    """The HTTP request for one event: `ce-specversion`, `ce-source: com.<vendor>`,
    `ce-type: com.<vendor>.<eventType>`, `ce-time`, `ce-id`, JSON body; signed when asked."""
    from cloudevents.core.bindings.http import to_binary
    from cloudevents.core.formats.json import JSONFormat
    from cloudevents.core.v1.event import CloudEvent

    cloud_event = CloudEvent(
        attributes={
            "id": event.id,
            "source": f"com.{vendor}",
            "type": f"com.{vendor}.{event.type}",
            "specversion": "1.0",
            # The same millisecond instant as the body's eventTime.
            "time": datetime.fromisoformat(isoformat(event.time).replace("Z", "+00:00")),
            "datacontenttype": "application/json",
        },
        data=event.body_json,  # the JSON as stored: sent byte for byte
    )
    message = to_binary(cloud_event, JSONFormat())
    headers = {name.lower(): value for name, value in message.headers.items()}
    headers["ce-time"] = isoformat(event.time)  # exactly the body's eventTime string
    if signing_secret is not None:
        headers[SIGNATURE_HEADER] = sign(message.body, signing_secret)
    return OutboundMessage(headers=headers, body=message.body)


def sign(body: bytes, secret: str) -> str:
    """HMAC-SHA256 hex digest of the raw body keyed by the tenant's API secret."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
