"""The only outbound I/O: events leave as CloudEvents over HTTP, every attempt recorded."""

import hashlib
import hmac

# Wall seconds attempts in flight get to finish at shutdown, unless --shutdown-grace says
# (here, not in the dispatcher: the settings read it without loading the transport).
SHUTDOWN_GRACE = 5.0

# How a delivery is signed (spec: Delivery). Here, not in cloudevents.py, so that a customer's
# receiver (kit/receivers.py) checks signatures without loading the domain.
SIGNATURE_HEADER = "x-hmac-signature-sha-256"


def sign(body: bytes, secret: str) -> str:
    """HMAC-SHA256 hex digest of the raw body keyed by the tenant's API secret."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
