"""Who acts in a tenant and with what: seeded ids, users and public tokens.

Ids and generated data come from the tenant's seed (the same seed, the same ids);
credentials (public, access and processor tokens) never do.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from typing import Any

from ..clock import isoformat
from ..errors import ValidationFailed, field_detail
from ..schemas.api import USER_SNAPSHOT_SHAPES
from .owner import Owner
from .stored import (COUNT, RANDOM_STATE, STRING, LoadError, Record, Sections, array,
                     checked_random_state, obj, random_state, unique)

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
        return random_state(self._random)

    def restore(self, state: tuple[Any, ...]) -> None:
        """A stored state (stored.checked_random_state): the next ids follow from it."""
        self._random.setstate(state)


def unguessable(prefix: str) -> str:
    """A credential (public, access and processor tokens): from the operating system's
    cryptographic source, never from the seed, so knowing the seed, or other tokens,
    tells nothing about it. Ids and generated data stay seeded."""
    return f"{prefix}{uuid.uuid4()}"


@dataclass
class User:
    """A user of the service, made by its first task or access token."""

    id: str
    identifier: str
    created_at: float
    # PUT /user: the destination bank accounts and cards a task workflow can offer the
    # user ({"bankAccounts": [...], "cards": [...]}, payment method objects), or None.
    payment_methods: dict[str, Any] | None = None


@dataclass(frozen=True)
class PublicToken:
    """A public token handed to the client SDK and the access token it stands for."""

    public_token: str
    access_token: str
    identifier: str
    expires_at: float


STORED_USER = Record(User, shapes=USER_SNAPSHOT_SHAPES)
STORED_PUBLIC_TOKEN = Record(PublicToken)


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


# -- snapshot (domain/stored.py): a tenant's users, their tokens and its seeded ids ----------

SECTIONS = Sections({"rng": obj({"ids": RANDOM_STATE}),
                     "counters": obj({"tokensEvicted": COUNT}),
                     "users": array(STORED_USER), "tokens": array(STORED_PUBLIC_TOKEN),
                     "latestTokens": {"type": "object", "additionalProperties": STRING}},
                    bounds={"tokens": lambda limits: (limits.max_tokens, "--max-tokens"),
                            "users": lambda limits: (limits.max_users, "--max-users")})


def dump_identity(tenant: Owner) -> dict[str, Any]:
    return {"rng": {"ids": tenant.ids.state()},
            "counters": {"tokensEvicted": tenant.evicted_tokens},
            "users": [STORED_USER.dump(user) for user in tenant.users.values()],
            "tokens": [STORED_PUBLIC_TOKEN.dump(token) for token in tenant.tokens.values()],
            "latestTokens": dict(tenant.latest_token)}


def load_identity(document: dict[str, Any], loading: Any) -> dict[str, Any]:
    """The users and tokens (no more than this server keeps), each once; every latest
    token one of the tokens."""
    ids = checked_random_state(document["rng"]["ids"], "$.rng.ids")
    users = unique(document, "users", STORED_USER, "identifier")
    tokens = unique(document, "tokens", STORED_PUBLIC_TOKEN, "public_token")
    for identifier, public_token in document["latestTokens"].items():
        if public_token not in tokens:
            raise LoadError(f"$.latestTokens[{json.dumps(identifier)}]", "no such token")
    loading.public_tokens = tokens
    return {"users": users, "tokens": tokens, "latest": dict(document["latestTokens"]),
            "ids": ids, "evicted": document["counters"]["tokensEvicted"]}


def restore_identity(tenant: Any, *, users: dict[str, User], tokens: dict[str, PublicToken],
                     latest: dict[str, str], ids: tuple[Any, ...], evicted: int) -> None:
    tenant.users, tenant.tokens, tenant.latest_token = users, tokens, latest
    tenant.ids.restore(ids)
    tenant.evicted_tokens = evicted
