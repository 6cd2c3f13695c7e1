"""Who acts in a tenant and with what: seeded ids, users and public tokens.

Ids and generated data come from the tenant's seed (the same seed, the same ids);
credentials (public, access and processor tokens) never do.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Any

from ..clock import isoformat
from ..errors import ValidationFailed, field_detail
from .owner import Owner

MIN_TOKEN_LIFETIME = 1800
MAX_TOKEN_LIFETIME = 2_592_000
DEFAULT_TOKEN_LIFETIME = 86_400


class Ids:
    """Seeded identifiers: the same seed gives the same ids, in the same order."""

    def __init__(self, seed: str) -> None:
        self._random = random.Random(seed)

    def object_id(self) -> str:
        return f"{self._random.getrandbits(96):024x}"

    def uuid(self) -> str:
        """A version-4 UUID from the seeded bits (what uuid.UUID(int=..., version=4) gives)."""
        bits = self._random.getrandbits(128)
        bits = (bits & ~(0xC000 << 48) | 0x8000 << 48) & ~(0xF000 << 64) | 4 << 76
        text = f"{bits:032x}"
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"

    def secret(self, prefix: str) -> str:
        return f"{prefix}{self._random.getrandbits(128):032x}"

    def state(self) -> dict[str, Any]:
        """The generator's state as JSON data (snapshots): the next ids follow from it."""
        version, internal, gauss = self._random.getstate()
        return {"version": version, "state": list(internal), "gauss": gauss}

    def set_state(self, state: dict[str, Any]) -> None:
        self._random.setstate((state["version"], tuple(state["state"]), state["gauss"]))


def unguessable(prefix: str) -> str:
    """A credential (public, access and processor tokens): from the operating system's
    cryptographic source, never from the seed, so knowing the seed, or other tokens,
    tells nothing about it. Ids and generated data stay seeded."""
    return f"{prefix}{uuid.uuid4()}"


@dataclass
class User:
    id: str
    identifier: str
    created_at: float
    # PUT /user: the destination bank accounts and cards a task workflow can offer the
    # user ({"bankAccounts": [...], "cards": [...]}, payment method objects), or None.
    payment_methods: dict[str, Any] | None = None


@dataclass(frozen=True)
class PublicToken:
    public_token: str
    access_token: str
    identifier: str
    expires_at: float


def create_access_token(tenant: Owner, identifier: str,
                        token_lifetime: int = DEFAULT_TOKEN_LIFETIME) -> PublicToken:
    """POST /access-token: a public token (and access token) for the user, on the clock."""
    if not MIN_TOKEN_LIFETIME <= token_lifetime <= MAX_TOKEN_LIFETIME:
        message = f"must be between {MIN_TOKEN_LIFETIME} and {MAX_TOKEN_LIFETIME} seconds"
        raise ValidationFailed("tokenLifetime is out of range.",
                               details=[field_detail("$.tokenLifetime", message)])
    tenant.user(identifier)
    token = PublicToken(
        public_token=unguessable(f"public-{tenant.environment}-"),
        access_token=unguessable(f"access-{tenant.environment}-"),
        identifier=identifier,
        expires_at=tenant.clock.timestamp() + token_lifetime,
    )
    tenant.tokens[token.public_token] = token
    tenant.latest_token[identifier] = token.public_token
    tenant.keep_tokens_bounded()
    return token


def token_record(token: PublicToken) -> dict[str, Any]:
    """POST /access-token's `data`: the public token, also under its legacy name `token`
    (real-service-facts 2: "legacy also `token`": the same token, usable wherever a public
    token is), and when it expires (the sandbox's own field)."""
    return {"publicToken": token.public_token, "token": token.public_token,
            "expiresAt": isoformat(token.expires_at)}
