"""Tenants (customer accounts), their users and credentials.

Each account in accounts.yaml is a tenant with its own users, tokens, clock and
settings; nothing crosses tenants. The control plane can add fresh tenants.
"""

from __future__ import annotations

import hmac
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..clock import Clock, isoformat
from ..errors import (InvalidCredentials, InvalidPublicToken, MissingCredentials,
                      PublicTokenExpired, UserLimitReached, ValidationFailed, WrongEnvironment,
                      field_detail)
from ..journal import Journal
from ..scheduler import Runner
from .changes import EVENT, TASK, Changes
from .companies import CompanyDirectory, ManualDepositRule
from .events import Event, EventLog, event_body
from .faults import ApiFaults
from .timeline import Timeline

DEFAULT_PRODUCTS = ("deposit", "verify", "switch", "present", "employer-classification",
                    "recurring-transaction-detection")
DEFAULT_REFRESH_INTERVAL = 86_400.0  # a push refresh a day (continuous access)

MIN_TOKEN_LIFETIME = 1800
MAX_TOKEN_LIFETIME = 2_592_000
DEFAULT_TOKEN_LIFETIME = 86_400

MISSING_CREDENTIALS = "Send the x-api-key and x-api-secret headers (or x-public-token)."
INVALID_CREDENTIALS = "The x-api-key and x-api-secret headers do not match an account."
WRONG_ENVIRONMENT = ("These credentials belong to the {theirs} environment; this server is the "
                     "{ours} environment. Use the {ours} credentials.")
INVALID_PUBLIC_TOKEN = "The x-public-token header does not match a public token."
TOKEN_OWNER_CACHE = 100_000  # public tokens whose tenant is remembered (a lookup cache)
USER_LIMIT = ("This tenant already has {limit} users (--max-users); reset it or use a fresh "
              "tenant.")
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


@dataclass(frozen=True)
class Limits:
    """What one tenant keeps at most (README: Limits; settings --max-events, ...).

    Past a bound the oldest settled items go first (events whose deliveries are done,
    workflows whose tasks all ended, expired tokens before live ones); nothing still
    pending is evicted. Users past `max_users` are refused (429)."""

    max_events: int = 5_000
    max_tasks: int = 10_000
    max_tokens: int = 10_000
    max_users: int = 100_000
    max_aggregator_items: int = 10_000  # the aggregator API's items (domain/aggregator.py)


@dataclass(frozen=True)
class TenantServices:
    """What every tenant works with, made once by the app factory and handed to each
    tenant's constructor: the webhook dispatcher, the wall-clock timer (real mode only)
    and the seeding of the account's ready-made linked accounts."""

    dispatcher: Any                                  # webhooks.dispatcher.Dispatcher
    timer: Any = None                                # scheduler.RealTimer, or None
    seed_accounts: Callable[[Tenant], None] = lambda tenant: None
    limits: Limits = Limits()


class Tenant:
    """One customer account and all its state: users, tokens, tasks, linked accounts,
    processor links, events and their deliveries, webhook endpoints and faults, the
    request journal, the clock and the runner of its timeline.

    Nothing of a tenant lives anywhere else, so `reset()` (back to the account as the
    fixtures made it, same keys) and `close()` (before it is deleted) are one call each.
    """

    def __init__(self, account: dict[str, Any], *, clock_factory: Callable[[], Clock],
                 companies: Callable[[], CompanyDirectory], seed: int | str,
                 services: TenantServices, from_fixtures: bool = True) -> None:
        self.account = account
        self.name: str = account["name"]
        # An account of the fixtures (else made by the control plane): only these take
        # --webhook-url as an endpoint (DESIGN.md, Commands).
        self.from_fixtures = from_fixtures
        # Wall time (monotonic) of its latest request: a shared deployment forgets tenants
        # idle past --tenant-idle-expiry (TenantRegistry.expire_idle).
        self.last_request = time.monotonic()
        self.api_key: str = account["apiKey"]
        self.api_secret: str = account["apiSecret"]
        self.environment: str = account["environment"]
        self._configure()
        self._clock_factory = clock_factory
        self._companies = companies
        self._seed = seed
        self.services = services
        self._start()

    def _configure(self) -> None:
        """The account's settings (a restored snapshot may change them; a reset puts the
        account's back)."""
        account = self.account
        self.products: tuple[str, ...] = tuple(account.get("products", DEFAULT_PRODUCTS))
        self.manual_deposits = ManualDepositRule.from_fixture(account.get("manualDeposits"))
        webhooks = account.get("webhooks", {})
        # Signed by default, as the real service signs every webhook (real-service facts
        # 5); an account may turn it off.
        self.signing: bool = webhooks.get("signing", True)
        self.webhook_endpoints: list[dict[str, Any]] = list(webhooks.get("endpoints", []))
        continuous = account.get("continuousAccess", {})
        self.refresh_interval: float | None = continuous.get("refreshInterval",
                                                             DEFAULT_REFRESH_INTERVAL)
        self.pii_deletion_interval: float | None = continuous.get("piiDeletionInterval")

    def _start(self, seed_accounts: bool = True) -> None:
        """The tenant's state as its account first makes it."""
        self.clock: Clock = self._clock_factory()
        self.ids = Ids(f"{self._seed}:{self.name}")
        self.companies: CompanyDirectory = self._companies()
        self.users: dict[str, User] = {}
        self.tokens: dict[str, PublicToken] = {}
        self.latest_token: dict[str, str] = {}  # identifier -> public token
        self.timeline = Timeline()
        dispatcher = self.services.dispatcher
        self.webhooks = dispatcher.webhooks_for(self)  # endpoints, faults, deliveries
        self.changes = Changes()  # the cursor of incremental reads (domain/changes.py)
        self.events = EventLog(self.services.limits.max_events, settled=self.webhooks.settled,
                               on_evict=self._forget_event)
        self.evicted = {"tasks": 0, "tokens": 0}
        self._next_task_eviction = 0  # task count at which to look for evictions again
        self.tasks: dict[str, Any] = {}                # id -> tasks.Task
        self.workflows: dict[str, Any] = {}            # id -> tasks.Workflow
        self.scenario_bindings: dict[str, str] = {}    # identifier -> scenario
        # Pay-link: card tokens (identifier, payment method id) -> created at, and the
        # payment methods each user has at each merchant.
        self.payment_tokens: dict[tuple[str, str], float] = {}
        self.merchant_payment_methods: dict[tuple[str, str], set[str]] = {}
        # Users whose expired card tokens are not recreated (the control plane's switch):
        # their next task with a card older than 24 hours fails payment-token-expired.
        self.card_token_recreation_off: set[str] = set()
        self.linked_accounts: dict[str, Any] = {}      # id -> LinkedAccount
        self.processor_tokens: dict[str, Any] = {}
        self.processor_links: dict[str, Any] = {}
        # The aggregator's own API (domain/aggregator.py): its items by id, and each live
        # public or access token -> its item's id.
        self.aggregator_items: dict[str, Any] = {}
        self.aggregator_tokens: dict[str, str] = {}
        self.journal = Journal()
        # API faults on purpose (PUT /_sandbox/faults/api), their draws seeded per tenant.
        self.api_faults = ApiFaults(random.Random(f"{self._seed}:{self.name}:api-faults"))
        self.events.listeners.append(lambda event: self.changes.touch(EVENT, event.id))
        self.events.listeners.append(partial(dispatcher.deliver_new, self))
        self.runner = Runner(self, dispatcher.settle)
        self.runner.stopping = lambda: dispatcher.closing
        if self.services.timer is not None:
            self.services.timer.watch(self.runner)
        if seed_accounts:
            self.services.seed_accounts(self)

    def reset(self) -> None:
        """POST /_sandbox/reset: back to the account as the fixtures made it, same keys;
        work in flight (jobs, webhook attempts) is dropped."""
        self.close()
        self._configure()
        self._start()

    def restore(self, fill: Callable[[Tenant], None]) -> None:
        """POST /_sandbox/snapshot and --state-file (snapshot.py): work in flight stops,
        the state starts afresh (without the account's ready-made linked accounts) and
        `fill` puts the snapshot's in. `fill` is built from a checked document, so it
        cannot fail half-way; name, keys and environment stay the tenant's own."""
        self.close()
        self._start(seed_accounts=False)
        fill(self)
        # Every restored item is new to a reader: the tasks, then the ledger, in order.
        self.changes.touch_all(TASK, self.tasks)
        self.changes.touch_all(EVENT, self.events.by_id)

    def close(self) -> None:
        """Stop everything the tenant has going: jobs on its clock, webhook attempts in
        flight, the wall-clock timer's watch."""
        self.timeline.clear()
        self.webhooks.cancel()
        if self.services.timer is not None:
            self.services.timer.forget(self.runner)

    def _forget_event(self, event_id: str) -> None:
        """The ledger evicted the event: its deliveries and attempts go with it."""
        self.webhooks.forget(event_id)
        self.changes.forget(EVENT, event_id)

    def emit(self, event_type: str, *, identifier: str | None = None, task_id: str | None = None,
             at: float | None = None, **body: Any) -> Event:
        """Store a new event in the ledger (listeners such as the dispatcher see it next).

        `identifier` and `task_id` index the event for filters and replay; `body` holds
        the body's fields (`user`, `data`, and for task events `task`, `company`, ...).
        """
        at = self.clock.timestamp() if at is None else at
        at = round(at, 3)  # milliseconds, as eventTime and ce-time show it
        event = Event(id=self.ids.uuid(), type=event_type, time=at,
                      body=event_body(event_type, at, **body), sequence=self.events.emitted + 1,
                      user=identifier, task=task_id)
        return self.events.append(event)

    def user(self, identifier: str) -> User:
        """The user with this identifier, created on first use (up to max_users)."""
        user = self.users.get(identifier)
        if user is None:
            if len(self.users) >= self.services.limits.max_users:
                raise UserLimitReached(USER_LIMIT.format(limit=len(self.users)))
            user = User(id=self.ids.object_id(), identifier=identifier,
                        created_at=self.clock.timestamp())
            self.users[identifier] = user
        return user

    def keep_tasks_bounded(self) -> None:
        """Past max_tasks, the oldest finished workflows go with their tasks (a workflow
        with a task still running, or a patch still to come, stays)."""
        limit = self.services.limits.max_tasks
        if len(self.tasks) <= max(limit, self._next_task_eviction):
            return
        keep = limit - max(1, limit // 10)
        gone = []
        for workflow in self.workflows.values():
            if len(self.tasks) - sum(len(w.tasks) for w in gone) <= keep:
                break
            if workflow.finished and not any(self.timeline.owns_pending(t)
                                             for t in workflow.tasks):
                gone.append(workflow)
        for workflow in gone:
            del self.workflows[workflow.id]
            for task_id in workflow.tasks:
                self.tasks.pop(task_id, None)
                self.changes.forget(TASK, task_id)
                self.evicted["tasks"] += 1
        # Tasks still running stay; look again only a tenth of the bound later, so a
        # burst of running tasks costs one scan per batch, not one per task.
        self._next_task_eviction = len(self.tasks) + max(1, limit // 10)

    def keep_tokens_bounded(self) -> None:
        """Past max_tokens, expired tokens go first, then the oldest."""
        limit = self.services.limits.max_tokens
        if len(self.tokens) <= limit:
            return
        keep = limit - max(1, limit // 10)
        now = self.clock.timestamp()
        expired = [t for t, token in self.tokens.items() if token.expires_at <= now]
        live = [t for t, token in self.tokens.items() if token.expires_at > now]
        for public_token in (expired + live)[:len(self.tokens) - keep]:
            token = self.tokens.pop(public_token)
            if self.latest_token.get(token.identifier) == public_token:
                del self.latest_token[token.identifier]
            self.evicted["tokens"] += 1

    def stats(self) -> dict[str, Any]:
        """What the tenant keeps, its bounds, and what it evicted (GET /_sandbox/stats)."""
        limits = self.services.limits
        deliveries = sum(len(d) for d in self.webhooks.deliveries.values())
        return {
            "events": {"stored": len(self.events), "max": limits.max_events,
                       "emitted": self.events.emitted, "evicted": self.events.evicted},
            "deliveries": {"stored": deliveries, "inFlight": len(self.webhooks.in_flight)},
            "tasks": {"stored": len(self.tasks), "max": limits.max_tasks,
                      "evicted": self.evicted["tasks"]},
            "tokens": {"stored": len(self.tokens), "max": limits.max_tokens,
                       "evicted": self.evicted["tokens"]},
            "users": {"stored": len(self.users), "max": limits.max_users},
            "journal": {"stored": len(self.journal), "max": self.journal.max_entries,
                        "evicted": self.journal.evicted},
            "pendingJobs": len(self.timeline),
        }

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

    def __len__(self) -> int:
        return len(self._by_name)

    def remove(self, tenant: Tenant) -> None:
        """A deleted tenant: its keys and public tokens find nothing any more."""
        self.forget_tokens(tenant)
        self._by_key.pop(tenant.api_key, None)
        self._by_name.pop(tenant.name, None)

    def forget_tokens(self, tenant: Tenant) -> None:
        for public_token in tenant.tokens:
            self._token_owner.pop(public_token, None)

    def get(self, name: str) -> Tenant | None:
        return self._by_name.get(name)

    def default(self) -> Tenant:
        """The first account of this server's environment (its keys are printed at start)."""
        for tenant in self._by_name.values():
            if tenant.environment == self.environment:
                return tenant
        raise LookupError(f"no account for the {self.environment} environment")

    def authenticate(self, api_key: str | None, api_secret: str | None,
                     public_token: str | None) -> tuple[Tenant, PublicToken | None]:
        """The tenant (and public token) of a request's credential headers. A public token
        alone is the end user's; any key header, even empty, makes it a server call. Keys
        sent beside a token must be whole and right: an empty or missing half there is a
        wrong key (invalid-credentials), not a missing one."""
        if api_key is None and api_secret is None and public_token:
            return self.authenticate_public_token(public_token)
        if public_token and (not api_key or not api_secret):
            raise InvalidCredentials(INVALID_CREDENTIALS)
        return self.authenticate_keys(api_key, api_secret), None

    def authenticate_keys(self, api_key: str | None, api_secret: str | None) -> Tenant:
        if not api_key or not api_secret:
            raise MissingCredentials(MISSING_CREDENTIALS)
        tenant = self._by_key.get(api_key)
        if tenant is None or not hmac.compare_digest(
                tenant.api_secret.encode(), api_secret.encode("utf-8", "surrogateescape")):
            raise InvalidCredentials(INVALID_CREDENTIALS)
        if tenant.environment != self.environment:
            raise WrongEnvironment(WRONG_ENVIRONMENT.format(theirs=tenant.environment,
                                                        ours=self.environment))
        return tenant

    def authenticate_public_token(self, public_token: str) -> tuple[Tenant, PublicToken]:
        for environment in ("sandbox", "production"):
            if public_token.startswith(f"public-{environment}-") and environment != self.environment:
                raise WrongEnvironment(WRONG_ENVIRONMENT_TOKEN.format(theirs=environment,
                                                                  ours=self.environment))
        # Tokens are found by their tenant, remembered after the first look (one tenant
        # per test makes the scan grow); a reset tenant no longer has them.
        owner = self._by_name.get(self._token_owner.get(public_token, ""))
        if owner is None or public_token not in owner.tokens:
            owner = next((t for t in self._by_name.values() if public_token in t.tokens), None)
        if owner is not None:
            token = owner.tokens[public_token]
            self._token_owner[public_token] = owner.name
            if len(self._token_owner) > TOKEN_OWNER_CACHE:  # a cache: the oldest go first
                del self._token_owner[next(iter(self._token_owner))]
            if owner.clock.timestamp() >= token.expires_at:
                raise PublicTokenExpired(EXPIRED_PUBLIC_TOKEN.format(expires=isoformat(token.expires_at)))
            return owner, token
        raise InvalidPublicToken(INVALID_PUBLIC_TOKEN)
