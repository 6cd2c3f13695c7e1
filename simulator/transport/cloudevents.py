"""Building a CloudEvent: a pure function from an Event to headers and body.

Binary content mode (spec: Events, Delivery): the attributes travel as `ce-*`
headers and the event body is the HTTP body. Sending is the dispatcher's job.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import msgspec

from ..clock import isoformat
from ..domain.webhooks.events import Event
from . import SIGNATURE_HEADER, sign


class OutboundMessage(msgspec.Struct, frozen=True):
    """A CloudEvent as it goes out: its headers and body bytes."""

    headers: dict[str, str]
    body: bytes


def to_message(event: Event, vendor: str, signing_secret: str | None = None) -> OutboundMessage:
    """The HTTP request for one event: `ce-specversion`, `ce-source: com.<vendor>`,
    `ce-type: com.<vendor>.<eventType>`, `ce-time`, `ce-id`, JSON body; signed when asked.

    Binary mode is a fixed mapping (attribute `x` travels as header `ce-x`, the data
    content type as `content-type`), written out here because building a validated
    SDK `CloudEvent` per attempt was a third of a delivery's cost; every test delivery
    is read back with the SDK's `from_binary` (tests/receiver.py), which keeps it honest.
    """
    body = event.body_json  # the JSON as stored: sent byte for byte
    headers = {
        "ce-id": _header_value(event.id),
        "ce-source": f"com.{vendor}",
        "ce-type": _header_value(f"com.{vendor}.{event.type}"),
        "ce-specversion": "1.0",
        "ce-time": isoformat(event.time),  # exactly the body's eventTime string
        "content-type": "application/json",
    }
    if signing_secret is not None:
        headers[SIGNATURE_HEADER] = sign(body, signing_secret)
    return OutboundMessage(headers=headers, body=body)


def to_plain_message(event: Event,
                     signer: Callable[[bytes], dict[str, str]] | None = None) -> OutboundMessage:
    """Another API's webhook (the aggregator's own: `event.url` set, domain/aggregator.py):
    its JSON body as that API sends it, with none of this service's `ce-*` headers or
    signature, and that API's own signature when `signer` makes one (the aggregator's
    Plaid-Verification JWT, real-service facts 15)."""
    body = event.body_json
    headers = {"content-type": "application/json"}
    if signer is not None:
        headers.update(signer(body))
    return OutboundMessage(headers=headers, body=body)


def _header_value(value: str) -> str:
    """A CloudEvents HTTP header value: printable ASCII except space, `"` and `%` as is,
    anything else percent-encoded (UTF-8), as the HTTP binding says."""
    if value.isascii() and value.isprintable() and not any(c in value for c in ' "%'):
        return value
    return quote(value, safe="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%'))
