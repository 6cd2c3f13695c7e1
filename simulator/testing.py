"""Clients and webhook receivers for tests against the sandbox: the one module to import from
(the customer kit's pieces are in kit/; docs/plugin.md is the reference).

`Sandbox` (blocking, for sync tests) and `AsyncSandbox` (awaitable) are one tenant of a
running sandbox; `WebhookReceiver` and `AsyncWebhookReceiver` are real HTTP servers that
check each delivery as a customer's endpoint should; `AsgiServer` serves the customer's own
app on a real port. The pytest plugin builds its fixtures from these; they work without
pytest too. Nothing heavy is imported until it is used, so the plugin costs a test run that
does not use it nothing.
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
