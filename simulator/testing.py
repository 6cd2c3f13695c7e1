"""Clients and webhook receivers for tests against the sandbox: the one module to import from
(the customer kit: kit/testing.py, kit/blocking.py, kit/receivers.py, kit/loops.py,
kit/asgi.py).

- `AsyncSandbox` (awaitable, never blocking the event loop) and `Sandbox` (blocking, for
  sync tests) are one tenant of a running sandbox: its keys, any API call, and the control
  plane (clock, events, triggers, endpoints, scenarios). `AsyncSandbox` is the sandbox
  client of simulator/client.py with these methods; `Sandbox` has the same ones, each
  running its AsyncSandbox twin to the end on an event loop in a thread of its own.
- `WebhookReceiver` and `AsyncWebhookReceiver` are real HTTP servers (on 127.0.0.1, or on
  every interface with a `ReceiverHost` for a sandbox in a container) that a tenant
  delivers its webhooks to. They check each delivery as a customer's endpoint
  should (the signature, the CloudEvent read by the official SDK), keep every one as a
  `ReceivedDelivery`, answer as programmed (`fail_next`, `hang_next`) and wait for or
  assert on what arrived.
- `AsgiServer` serves the customer's own ASGI app (FastAPI, Starlette, Django; a WSGI app
  through a2wsgi) with uvicorn on a real port, so the sandbox delivers to it.

What a sandbox says it ignored (its x-sandbox-warning: an unknown body field) becomes a
`payroll_sandbox.SandboxWarning`; a webhook URL on this machine's loopback given to a
sandbox that cannot reach it raises `LoopbackURLError` (with a `LoopbackCheck`, as the
plugin's sandboxes have one).

The pytest plugin (simulator/kit/pytest_plugin.py) builds its fixtures from these; they work
without pytest too. Nothing heavy is imported until it is used, so the plugin costs a
test run that does not use it nothing.
"""

from .client import SandboxError
from .kit.asgi import AsgiServer
from .kit.blocking import Sandbox
from .kit.loops import BlockingCallError
from .kit.receivers import (AsyncWebhookReceiver, ReceivedDelivery, ReceiverHost, WebhookReceiver,
                            describe_undelivered)
from .kit.testing import (AsyncSandbox, LoopbackCheck, LoopbackURLError, RequestNotMade,
                          describe_near_misses, on_loopback)

__all__ = ["AsgiServer", "AsyncSandbox", "AsyncWebhookReceiver", "BlockingCallError",
           "LoopbackCheck", "LoopbackURLError", "ReceivedDelivery", "ReceiverHost",
           "RequestNotMade", "Sandbox", "SandboxError", "WebhookReceiver", "describe_near_misses",
           "describe_undelivered", "on_loopback"]
