"""Tenants (customer accounts), their users and credentials.

Each account in accounts.yaml is a tenant with its own users, tokens, clock and
settings; nothing crosses tenants. The control plane can add fresh tenants.
"""

from __future__ import annotations

import hmac
import random
from dataclasses import dataclass, field
from typing import Any

from ..clock import Clock, isoformat
from ..errors import Unauthorized, ValidationFailed, field_detail
from .companies import CompanyDirectory, ManualDepositRule
from .events import Event, EventLog, event_body
from .timeline import Timeline

MIN_TOKEN_LIFETIME = 1800
MAX_TOKEN_LIFETIME = 2_592_000
DEFAULT_TOKEN_LIFETIME = 86_400

MISSING_CREDENTIALS = "Send the x-api-key and x-api-secret headers (or x-public-token)."
INVALID_CREDENTIALS = "The x-api-key and x-api-secret headers do not match an account."
WRONG_ENVIRONMENT = ("These credentials belong to the {theirs} environment; this server is the "
                     "{ours} environment. Use the {ours} credentials.")
INVALID_PUBLIC_TOKEN = "The x-public-token header does not match a public token."
EXPIRED_PUBLIC_TOKEN = "The public token expired at {expires}; create a new one with POST /access-token."
WRONG_ENVIRONMENT_TOKEN = ("This public token belongs to the {theirs} environment; this server is "
                           "the {ours} environment.")


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


@dataclass
class User:
    id: str
    identifier: str
    created_at: float


@dataclass(frozen=True)
class PublicToken:
    public_token: str
    access_token: str
    identifier: str
    expires_at: float


@dataclass
class Tenant:
    name: str
    api_key: str
    api_secret: str
    environment: str
    products: tuple[str, ...]
    manual_deposits: ManualDepositRule
    signing: bool
    webhook_endpoints: list[dict[str, Any]]
    clock: Clock
    ids: Ids
    companies: CompanyDirectory
    users: dict[str, User] = field(default_factory=dict)
    tokens: dict[str, PublicToken] = field(default_factory=dict)
    latest_token: dict[str, str] = field(default_factory=dict)  # identifier -> public token
    timeline: Timeline = field(default_factory=Timeline)
    events: EventLog = field(default_factory=EventLog)
    tasks: dict[str, Any] = field(default_factory=dict)          # id -> tasks.Task
    workflows: dict[str, Any] = field(default_factory=dict)      # id -> tasks.Workflow
    scenario_bindings: dict[str, str] = field(default_factory=dict)  # identifier -> scenario
    # Pay-link: card tokens (identifier, payment method id) -> created at, and the
    # payment methods each user has at each merchant.
    payment_tokens: dict[tuple[str, str], float] = field(default_factory=dict)
    merchant_payment_methods: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    # Users whose expired card tokens are not recreated (the control plane's switch):
    # their next task with a card older than 24 hours fails payment-token-expired.
    card_token_recreation_off: set[str] = field(default_factory=set)
    # Continuous access: linked accounts, the push cadence and the PII deletion cadence.
    linked_accounts: dict[str, Any] = field(default_factory=dict)   # id -> LinkedAccount
    refresh_interval: float | None = 86_400.0
    pii_deletion_interval: float | None = None
    # Processor links: minted tokens and registered links.
    processor_tokens: dict[str, Any] = field(default_factory=dict)
    processor_links: dict[str, Any] = field(default_factory=dict)

    def emit(self, event_type: str, *, identifier: str | None = None, task_id: str | None = None,
             at: float | None = None, **body: Any) -> Event:
        """Store a new event in the ledger (listeners such as the dispatcher see it next).

        `identifier` and `task_id` index the event for filters and replay; `body` holds
        the body's fields (`user`, `data`, and for task events `task`, `company`, ...).
        """
        at = self.clock.timestamp() if at is None else at
        at = round(at, 3)  # milliseconds, as eventTime and ce-time show it
        event = Event(id=self.ids.uuid(), type=event_type, time=at,
                      body=event_body(event_type, at, **body), sequence=len(self.events.events) + 1,
                      user=identifier, task=task_id)
        return self.events.append(event)

    def user(self, identifier: str) -> User:
        """The user with this identifier, created on first use."""
        user = self.users.get(identifier)
        if user is None:
            user = User(id=self.ids.object_id(), identifier=identifier,
                        created_at=self.clock.timestamp())
            self.users[identifier] = user
        return user

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "environment": self.environment, "apiKey": self.api_key,
                "apiSecret": self.api_secret, "products": list(self.products),
                "signing": self.signing}


def create_access_token(tenant: Tenant, identifier: str,
                        token_lifetime: int = DEFAULT_TOKEN_LIFETIME) -> PublicToken:
    """POST /access-token: a public token (and access token) for the user, on the clock."""
    if not MIN_TOKEN_LIFETIME <= token_lifetime <= MAX_TOKEN_LIFETIME:
        message = f"must be between {MIN_TOKEN_LIFETIME} and {MAX_TOKEN_LIFETIME} seconds"
        raise ValidationFailed("tokenLifetime is out of range.",
                               details=[field_detail("$.tokenLifetime", message)])
    tenant.user(identifier)
    token = PublicToken(
        public_token=f"public-{tenant.environment}-{tenant.ids.uuid()}",
        access_token=f"access-{tenant.environment}-{tenant.ids.uuid()}",
        identifier=identifier,
        expires_at=tenant.clock.timestamp() + token_lifetime,
    )
    tenant.tokens[token.public_token] = token
    tenant.latest_token[identifier] = token.public_token
    return token


def token_record(token: PublicToken) -> dict[str, Any]:
    return {"publicToken": token.public_token, "token": token.access_token,
            "expiresAt": isoformat(token.expires_at)}


class Tenants:
    """Every tenant of the server, found by API key or by public token."""

    def __init__(self, environment: str) -> None:
        self.environment = environment
        self._by_key: dict[str, Tenant] = {}
        self._by_name: dict[str, Tenant] = {}
        self._token_owner: dict[str, str] = {}  # public token -> tenant name

    def add(self, tenant: Tenant) -> None:
        self._by_key[tenant.api_key] = tenant
        self._by_name[tenant.name] = tenant

    def __iter__(self):
        return iter(self._by_name.values())

    def get(self, name: str) -> Tenant | None:
        return self._by_name.get(name)

    def default(self) -> Tenant:
        """The first account of this server's environment (its keys are printed at start)."""
        for tenant in self._by_name.values():
            if tenant.environment == self.environment:
                return tenant
        raise LookupError(f"no account for the {self.environment} environment")

    def authenticate_keys(self, api_key: str | None, api_secret: str | None) -> Tenant:
        if not api_key or not api_secret:
            raise Unauthorized(MISSING_CREDENTIALS, code="missing-credentials")
        tenant = self._by_key.get(api_key)
        if tenant is None or not hmac.compare_digest(
                tenant.api_secret.encode(), api_secret.encode("utf-8", "surrogateescape")):
            raise Unauthorized(INVALID_CREDENTIALS, code="invalid-credentials")
        if tenant.environment != self.environment:
            raise Unauthorized(WRONG_ENVIRONMENT.format(theirs=tenant.environment,
                                                        ours=self.environment),
                               code="wrong-environment")
        return tenant

    def authenticate_public_token(self, public_token: str) -> tuple[Tenant, PublicToken]:
        for environment in ("sandbox", "production"):
            if public_token.startswith(f"public-{environment}-") and environment != self.environment:
                raise Unauthorized(WRONG_ENVIRONMENT_TOKEN.format(theirs=environment,
                                                                  ours=self.environment),
                                   code="wrong-environment")
        # Tokens are found by their tenant, remembered after the first look (one tenant
        # per test makes the scan grow); a reset tenant no longer has them.
        owner = self._by_name.get(self._token_owner.get(public_token, ""))
        if owner is None or public_token not in owner.tokens:
            owner = next((t for t in self._by_name.values() if public_token in t.tokens), None)
        if owner is not None:
            token = owner.tokens[public_token]
            self._token_owner[public_token] = owner.name
            if owner.clock.timestamp() >= token.expires_at:
                raise Unauthorized(EXPIRED_PUBLIC_TOKEN.format(expires=isoformat(token.expires_at)),
                                   code="public-token-expired")
            return owner, token
        raise Unauthorized(INVALID_PUBLIC_TOKEN, code="invalid-public-token")
