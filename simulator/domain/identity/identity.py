"""Who acts in a tenant and with what: seeded ids, users and public tokens.

Ids and generated data come from the tenant's seed (the same seed, the same ids);
credentials (public, access and processor tokens) never do.
"""

from __future__ import annotations

import json
import random
import uuid
from functools import cache
from typing import Any

from ...clock import Clock, isoformat
from ...errors import NotFound, UserLimitReached, UserNotFound, ValidationFailed, field_detail
from ..tasks.states import PAYMENT_METHOD
from ..shapes import UNSET, Command, Maybe, View, field, of, raw, schema_of
from ..stored import LoadError, Stored, Time, array, described, stored
from ..sections import (COUNT, RANDOM_STATE, STRING, Sections, checked_random_state, obj,
                        random_state, unique)

MIN_TOKEN_LIFETIME = 1800
MAX_TOKEN_LIFETIME = 2_592_000
DEFAULT_TOKEN_LIFETIME = 86_400
USER_LIMIT = ("This tenant already has {limit} users (--max-users); reset it or use a fresh "
              "tenant.")
UNKNOWN_TOKEN = "This tenant has no public token {token!r} (revoked already, or never issued)."
UNKNOWN_USER = "No user has the identifier {identifier!r}."


class UserView(View, kw_only=True):
    # The user as task events and task records name it.
    id: of(str, min_length=1) = field(name="_id")
    identifier: of(str, min_length=1)
    connected: Maybe[bool] = UNSET


class StoredMethods(Command, kw_only=True):
    """The payment methods PUT /user stored for a user, as a snapshot keeps them."""

    bank_accounts: of(list[raw(PAYMENT_METHOD)], max_length=20)
    cards: of(list[raw(PAYMENT_METHOD)], max_length=20)


PublicTokenNotFound = NotFound.coded("public-token-not-found")


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


class User(Stored):
    """A user of the service, made by its first task or access token."""

    id: str
    identifier: str
    created_at: Time
    # PUT /user: the destination bank accounts and cards a task workflow can offer the
    # user ({"bankAccounts": [...], "cards": [...]}, payment method objects), or None.
    payment_methods: described(dict[str, Any] | None, schema_of(StoredMethods | None)) = None


class PublicToken(Stored, frozen=True):
    """A public token handed to the client SDK and the access token it stands for."""

    public_token: str
    access_token: str
    identifier: str
    expires_at: Time


def token_record(token: PublicToken) -> dict[str, Any]:
    """POST /access-token's `data`: the public token, also under its legacy name `token`
    (real-service-facts 2: "legacy also `token`": the same token, usable wherever a public
    token is), and when it expires (the sandbox's own field)."""
    return {"publicToken": token.public_token, "token": token.public_token,
            "expiresAt": isoformat(token.expires_at)}


class Identity:
    """A tenant's users and the public tokens made for them: the one writer of both, and of
    which token is each user's latest. It is given what it uses (the tenant's seeded ids,
    its clock, its bounds), not the tenant."""

    def __init__(self, ids: Ids, clock: Clock, limits: Any, environment: str) -> None:
        self.ids, self.clock, self.limits, self.environment = ids, clock, limits, environment
        self.users: dict[str, User] = {}
        self.tokens: dict[str, PublicToken] = {}
        self.latest_token: dict[str, str] = {}  # identifier -> public token
        self.evicted = 0  # tokens evicted past the bound

    def user(self, identifier: str) -> User:
        """The user with this identifier, created on first use (up to max_users)."""
        user = self.users.get(identifier)
        if user is None:
            if len(self.users) >= self.limits.max_users:
                raise UserLimitReached(USER_LIMIT.format(limit=len(self.users)))
            user = User(id=self.ids.object_id(), identifier=identifier,
                        created_at=self.clock.timestamp())
            self.users[identifier] = user
        return user

    def require(self, identifier: str, location: str = "path") -> User:
        """The user with this identifier (404 `user-not-found` naming `identifier` where the
        request gave it: its path or its query)."""
        user = self.users.get(identifier)
        if user is None:
            raise UserNotFound(UNKNOWN_USER.format(identifier=identifier), details=[
                field_detail("$.identifier", "unknown", location=location)])
        return user

    def create_access_token(self, identifier: str,
                            token_lifetime: int = DEFAULT_TOKEN_LIFETIME) -> PublicToken:
        """POST /access-token: a public token (and access token) for the user, on the clock."""
        if not MIN_TOKEN_LIFETIME <= token_lifetime <= MAX_TOKEN_LIFETIME:
            message = f"must be between {MIN_TOKEN_LIFETIME} and {MAX_TOKEN_LIFETIME} seconds"
            raise ValidationFailed("tokenLifetime is out of range.",
                                   details=[field_detail("$.tokenLifetime", message)])
        self.user(identifier)
        token = PublicToken(
            public_token=unguessable(f"public-{self.environment}-"),
            access_token=unguessable(f"access-{self.environment}-"),
            identifier=identifier,
            expires_at=self.clock.timestamp() + token_lifetime,
        )
        self.tokens[token.public_token] = token
        self.latest_token[identifier] = token.public_token
        self._keep_tokens_bounded()
        return token

    def revoke(self, public_token: str) -> None:
        """PUT /access-token/{publicToken}/revoke: the token stops working at once (401
        invalid-public-token afterwards); the user and what they did stay."""
        if public_token not in self.tokens:
            raise PublicTokenNotFound(UNKNOWN_TOKEN.format(token=public_token),
                                      details=[field_detail("$.publicToken", "unknown",
                                                            location="path")])
        self._drop(public_token)

    def _drop(self, public_token: str) -> None:
        """The token goes, and with it its user's latest token if it was that one."""
        token = self.tokens.pop(public_token)
        if self.latest_token.get(token.identifier) == public_token:
            del self.latest_token[token.identifier]

    def forget(self, identifier: str) -> None:
        """The user, with their public tokens, as if never made (users.remove_user)."""
        for text in [t for t, token in self.tokens.items() if token.identifier == identifier]:
            del self.tokens[text]
        self.latest_token.pop(identifier, None)
        del self.users[identifier]

    def _keep_tokens_bounded(self) -> None:
        """Past max_tokens, expired tokens go first, then the oldest."""
        limit = self.limits.max_tokens
        if len(self.tokens) <= limit:
            return
        keep = limit - max(1, limit // 10)
        now = self.clock.timestamp()
        expired = [t for t, token in self.tokens.items() if token.expires_at <= now]
        live = [t for t, token in self.tokens.items() if token.expires_at > now]
        for public_token in (expired + live)[:len(self.tokens) - keep]:
            self._drop(public_token)
            self.evicted += 1

    # -- snapshot (domain/stored.py): the users, their tokens and the tenant's seeded ids ----

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({"rng": obj({"ids": RANDOM_STATE}),
                         "counters": obj({"tokensEvicted": COUNT}),
                         "users": array(User), "tokens": array(PublicToken),
                         "latestTokens": {"type": "object", "additionalProperties": STRING}},
                        bounds={"tokens": lambda limits: (limits.max_tokens, "--max-tokens"),
                                "users": lambda limits: (limits.max_users, "--max-users")})

    def dump(self) -> dict[str, Any]:
        return {"rng": {"ids": self.ids.state()},
                "counters": {"tokensEvicted": self.evicted},
                "users": [stored(user) for user in self.users.values()],
                "tokens": [stored(token) for token in self.tokens.values()],
                "latestTokens": dict(self.latest_token)}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        """The users and tokens (no more than this server keeps), each once; every latest
        token one of the tokens."""
        ids = checked_random_state(document["rng"]["ids"], "$.rng.ids")
        users = unique(document, "users", User, "identifier")
        tokens = unique(document, "tokens", PublicToken, "public_token")
        for identifier, public_token in document["latestTokens"].items():
            if public_token not in tokens:
                raise LoadError(f"$.latestTokens[{json.dumps(identifier)}]", "no such token")
        loading.public_tokens = tokens
        return {"users": users, "tokens": tokens, "latest": dict(document["latestTokens"]),
                "ids": ids, "evicted": document["counters"]["tokensEvicted"]}

    def restore(self, *, users: dict[str, User], tokens: dict[str, PublicToken],
                latest: dict[str, str], ids: tuple[Any, ...], evicted: int) -> None:
        self.users, self.tokens, self.latest_token = users, tokens, latest
        self.ids.restore(ids)
        self.evicted = evicted
