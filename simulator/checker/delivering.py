"""Sending check-handler's deliveries: each event as the dispatcher sends an attempt
(binary-mode CloudEvent, the body byte for byte, redirects not followed, through the one
webhook sender, simulator/transport/sender.py), signed right, wrongly or not at all, within
the run's bounds, every one kept for the report."""

from __future__ import annotations

import time
from typing import Any

from ..transport.cloudevents import SIGNATURE_HEADER, sign, to_message
from ..transport.sender import TIMEOUT, post
from .report import Delivery

VALID, WRONG, NONE = "valid", "wrong", "none"   # how a delivery was signed
MAX_TIMEOUTS = 3            # after this many timed-out deliveries, nothing more is sent
ANSWER_EXCERPT = 200        # characters of an answer's body kept for the report


class Deliverer:
    """Sends one event as an attempt of the dispatcher would, within the run's bounds:
    each delivery times out after `timeout`; past the run's deadline, or after
    MAX_TIMEOUTS timed-out deliveries, nothing more is sent (and the report says so)."""

    def __init__(self, session: Any, url: str, vendor: str, secret: str, timeout: float, *,
                 deadline: float, run_timeout: float) -> None:
        self.session = session
        self.url = url
        self.vendor = vendor
        self.secret = secret
        self.timeout = timeout
        self.deadline = deadline
        self.run_timeout = run_timeout
        self.timeouts = 0
        self.log: list[Delivery] = []   # every delivery of the run, for no-redirect

    def message(self, event: Any, signature: str = VALID,
                extra_headers: dict[str, str] | None = None) -> tuple[dict[str, str], bytes]:
        message = to_message(event, self.vendor, self.secret)
        headers = dict(message.headers)
        if signature == WRONG:
            headers[SIGNATURE_HEADER] = sign(message.body, f"not-{self.secret}")
        elif signature == NONE:
            del headers[SIGNATURE_HEADER]
        headers.update(extra_headers or {})
        return headers, message.body

    def stopped(self) -> str | None:
        """Why nothing more is sent, if so."""
        if self.timeouts >= MAX_TIMEOUTS:
            return (f"not sent: {self.timeouts} deliveries timed out already, the run stopped "
                    "sending")
        if time.monotonic() >= self.deadline:
            return f"not sent: the run's bound of {self.run_timeout:g}s was reached"
        return None

    async def send(self, event: Any, signature: str = VALID,
                   extra_headers: dict[str, str] | None = None,
                   message: tuple[dict[str, str], bytes] | None = None) -> Delivery:
        headers, body = message or self.message(event, signature, extra_headers)
        delivery = await self._post(event.type, headers["ce-id"], signature, headers, body)
        self.log.append(delivery)
        return delivery

    async def _post(self, event_type: str, ce_id: str, signature: str, headers: dict[str, str],
                    body: bytes) -> Delivery:
        why = self.stopped()
        if why:
            return Delivery(event_type, ce_id, signature, error=why, sent=False)
        limit = min(self.timeout, self.deadline - time.monotonic())
        outcome = await post(self.session, self.url, headers, body, timeout=limit)
        error = None if outcome.failure is None else outcome.failure.reason
        if outcome.failure is not None and outcome.failure.kind == TIMEOUT:
            if limit < self.timeout:
                error = f"not answered when the run's bound of {self.run_timeout:g}s was reached"
            else:
                self.timeouts += 1
        return Delivery(event_type, ce_id, signature, status=outcome.status,
                        latency_ms=outcome.latency_ms, error=error, location=outcome.location,
                        answer=outcome.excerpt.decode("utf-8", "replace")[:ANSWER_EXCERPT])
