"""The aggregator's webhook verification key (real-service facts 15): a P-256 key pair per
tenant, made on its first use and kept in its snapshots, that signs every webhook the
aggregator sends (domain/links/aggregator.py) and whose public half /webhook_verification_key/get
serves as a JWK.

Each attempt of a delivery carries a JWT of its own in the `Plaid-Verification` header:
header `alg` ES256, `kid` the key's id, `typ` JWT; claims `iat` (when the attempt left, in
whole seconds of the wall clock: the receiver compares it with its own clock, so a virtual
clock set days ahead must not make every token look forged) and `request_body_sha256`, the
SHA-256 hex of the raw body. The JOSE work is PyJWT's, the curve work `cryptography`'s;
both are imported on first use (about 45 ms a server's start would otherwise pay).
"""

from __future__ import annotations

import hashlib
import uuid
from functools import lru_cache
from typing import Any

from ..stored import Stored, Time

HEADER = "Plaid-Verification"  # the aggregator's header name (facts 15)
ALGORITHM = "ES256"


class WebhookKey(Stored):
    """A tenant's key pair at the aggregator: its id, the private key (PKCS#8 PEM) and when
    it was made on the tenant's clock."""

    kid: str
    private_key: str
    created_at: Time


def new_webhook_key(now: float) -> WebhookKey:
    """A fresh P-256 key pair; its id a UUID drawn from the public key's RFC 7638 thumbprint,
    so a receiver that caches keys by id never holds a stale key under a reused id."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = _public_fields(pem)
    thumbprint = hashlib.sha256(
        f'{{"crv":"P-256","kty":"EC","x":"{public["x"]}","y":"{public["y"]}"}}'.encode()).digest()
    return WebhookKey(kid=str(uuid.UUID(bytes=thumbprint[:16], version=4)), private_key=pem,
                      created_at=now)


@lru_cache(maxsize=256)
def _private(pem: str) -> Any:
    """The private key of a PEM; ValueError for anything but an unencrypted P-256 key."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    try:
        private = serialization.load_pem_private_key(pem.encode(), password=None)
    except (TypeError, UnsupportedAlgorithm) as error:
        raise ValueError(str(error)) from None
    if not (isinstance(private, ec.EllipticCurvePrivateKey)
            and isinstance(private.curve, ec.SECP256R1)):
        raise ValueError("not a P-256 key")
    return private


@lru_cache(maxsize=256)
def _public_fields(pem: str) -> dict[str, str]:
    from jwt.algorithms import ECAlgorithm
    return ECAlgorithm.to_jwk(_private(pem).public_key(), as_dict=True)


def public_jwk(key: WebhookKey) -> dict[str, Any]:
    """The key as /webhook_verification_key/get answers it (the aggregator's JWKPublicKey):
    `created_at` in whole seconds, `expired_at` null (the key is current)."""
    fields = _public_fields(key.private_key)
    return {"alg": ALGORITHM, "crv": fields["crv"], "kid": key.kid, "kty": fields["kty"],
            "use": "sig", "x": fields["x"], "y": fields["y"],
            "created_at": int(key.created_at), "expired_at": None}


def verification_header(key: WebhookKey, body: bytes, issued_at: int) -> dict[str, str]:
    """The header one attempt carries: a JWT signed afresh for it."""
    import jwt
    token = jwt.encode({"iat": issued_at, "request_body_sha256": hashlib.sha256(body).hexdigest()},
                       _private(key.private_key), algorithm=ALGORITHM, headers={"kid": key.kid})
    return {HEADER: token}
