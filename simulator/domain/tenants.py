"""Tenants (customer accounts), their users and credentials.

Each account in accounts.yaml is a tenant with its own users, tokens, clock and
settings; nothing crosses tenants. The control plane can add fresh tenants.
"""

from __future__ import annotations

import hmac
import random
import time
from collections.abc import Callable
from functools import cache
from hashlib import sha256
from typing import Any
from urllib.parse import quote, urlencode

import msgspec

from ..clock import Clock, isoformat, start_timestamp
from ..errors import (EventLimitReached, InvalidCredentials, InvalidPublicToken,
                      JobLimitReached, MissingCredentials, PublicTokenExpired, WrongEnvironment,
                      field_detail)
from .journal import Journal
from .links.aggregator import Aggregator
from .flow.autopilot import Autopilots
from .flow.callbacks import Callbacks
from .changes import EVENT, TASK, Changes
from .companies.companies import CompanyDirectory, ManualDepositRule
from .webhooks.events import Event, EventLog, event_body
from .webhooks.event_types import Draft, EventData
from .faults import ApiFaults
from .identity.identity import Identity, Ids, PublicToken
from .accounts.linked_accounts import LinkedAccounts
from .parts import TenantSettings
from .links.processor_links import ProcessorLinks
from .rules import Rules
from .sections import STRING, STRINGS, TIME, Sections, obj
from .stored import stored
from .shapes import Answer, Count
from .tasks.tasks import Tasks, task_event_fields
from .tasks.records import (EXPIRED_FILE_URL, FILE_URL_LIFETIME, INVALID_FILE_URL, FileUrlExpired,
                            InvalidFileUrl, Task, TaskFile)
from .timeline import Timeline

DEFAULT_PRODUCTS = ("deposit", "verify", "switch", "present", "employer-classification",
                    "recurring-transaction-detection")
# The fixtures' demo account: the /demo page's, whose webhooks go to the sandbox's own demo
# receiver (routes/demo.py), never to --webhook-url.
DEMO_TENANT = "demo"
DEFAULT_REFRESH_INTERVAL = 86_400.0  # a push refresh a day (continuous access)
# Fixtures' continuousAccess: at least a minute; at most a year in a snapshot (a restore
# cannot make a refresh cadence that floods the ledger or one that never comes).
_INTERVAL = {"type": ["number", "null"], "minimum": 60, "maximum": 31_536_000}


MISSING_CREDENTIALS = "Send the x-api-key and x-api-secret headers (or x-public-token)."
INVALID_CREDENTIALS = "The x-api-key and x-api-secret headers do not match an account."
WRONG_ENVIRONMENT = ("These credentials belong to the {theirs} environment; this server is the "
                     "{ours} environment. Use the {ours} credentials.")
EVENT_LIMIT = ("This tenant holds {stored} events whose webhook deliveries are still pending, "
               "and keeps at most {limit}: --max-events (PAYROLL_SANDBOX_MAX_EVENTS, config "
               "maxEvents). Run its clock (or fix its endpoints) so they settle, reset it, or "
               "raise the bound; nothing stored was changed.")
JOB_LIMIT = ("This tenant has {stored} jobs scheduled on its clock, and keeps at most {limit}: "
             "--max-jobs (PAYROLL_SANDBOX_MAX_JOBS, config maxJobs). Run its clock so they "
             "run, reset it, or raise the bound; nothing stored was changed.")
INVALID_PUBLIC_TOKEN = "The x-public-token header does not match a public token."
TOKEN_OWNER_CACHE = 100_000  # public tokens whose tenant is remembered (a lookup cache)
EXPIRED_PUBLIC_TOKEN = "The public token expired at {expires}; create a new one with POST /access-token."
WRONG_ENVIRONMENT_TOKEN = ("This public token belongs to the {theirs} environment; this server is "
                           "the {ours} environment.")


class TenantServices(msgspec.Struct, frozen=True):
    """What every tenant works with besides its rules, made once by the app factory and
    handed to each tenant's constructor: the webhook dispatcher (the transport of its
    outbox), the runner of each tenant's timeline (scheduler.Runner, made by `run`: the
    transport's side, so the domain imports none of it) and the wall-clock timer (real
    mode only)."""

    dispatcher: Any                                  # webhooks.dispatcher.Dispatcher
    run: Callable[[Tenant], Any]                     # tenant -> scheduler.Runner
    timer: Any = None                                # scheduler.RealTimer, or None


# -- what a tenant keeps (GET /_sandbox/stats: README, Limits) ------------------------------

class Bounded(Answer, kw_only=True):
    stored: Count
    max: Count
    evicted: Count


class EventsKept(Bounded, kw_only=True):
    emitted: Count


class DeliveriesKept(Answer, kw_only=True):
    stored: Count
    in_flight: Count


class UsersKept(Answer, kw_only=True):
    stored: Count
    max: Count


class TenantStats(Answer, kw_only=True):
    events: EventsKept
    deliveries: DeliveriesKept
    tasks: Bounded
    tokens: Bounded
    users: UsersKept
    linked_accounts: UsersKept
    journal: Bounded
    sdk_callbacks: Bounded
    pending_jobs: Count


class Tenant:
    """One customer account and all its state: users, tokens, tasks, linked accounts,
    processor links, events and their deliveries, webhook endpoints and faults, the
    request journal, the clock and the runner of its timeline.

    Nothing of a tenant lives anywhere else, so `reset()` (back to the account as the
    fixtures made it, same keys) and `close()` (before it is deleted) are one call each.
    """

    def __init__(self, account: dict[str, Any], *, rules: Rules,
                 clock_factory: Callable[[float | None], Clock], services: TenantServices,
                 from_fixtures: bool = True) -> None:
        self.account = account
        self.name: str = account["name"]
        # An account of the fixtures (else made by the control plane): only these take
        # --webhook-url as an endpoint, the demo's aside (takes_webhook_url).
        self.from_fixtures = from_fixtures
        # Wall time (monotonic) of its latest request: a shared deployment forgets tenants
        # idle past --tenant-idle-expiry (TenantRegistry.expire_idle).
        self.last_request = time.monotonic()
        self.api_key: str = account["apiKey"]
        self.api_secret: str = account["apiSecret"]
        self.environment: str = account["environment"]
        self._configure()
        self.rules = rules
        self._clock_factory = clock_factory
        self._seed = rules.seed
        self.services = services
        self._start()

    @property
    def products(self) -> tuple[str, ...]:
        return self.settings.products

    @property
    def manual_deposits(self) -> ManualDepositRule:
        return self.settings.manual_deposits

    @property
    def signing(self) -> bool:
        """Whether its webhooks are signed (the outbox's setting)."""
        return self.webhooks.signing

    @property
    def takes_webhook_url(self) -> bool:
        """Whether `--webhook-url` (its variable, config `webhookUrl`) is one of this tenant's
        endpoints: an account of the fixtures, except the demo, whose webhooks stay with its
        own receiver (a team's app would refuse their signature; DESIGN.md, Commands)."""
        return self.from_fixtures and self.name != DEMO_TENANT

    def _configure(self) -> None:
        """The account's settings (a restored snapshot may change them; a reset puts the
        account's back)."""
        account = self.account
        continuous = account.get("continuousAccess", {})
        self.settings = TenantSettings(
            products=tuple(account.get("products", DEFAULT_PRODUCTS)),
            manual_deposits=ManualDepositRule.from_fixture(account.get("manualDeposits")),
            refresh_interval=continuous.get("refreshInterval", DEFAULT_REFRESH_INTERVAL),
            pii_deletion_interval=continuous.get("piiDeletionInterval"))
        webhooks = account.get("webhooks", {})
        # Signed by default, as the real service signs every webhook (real-service facts
        # 5); an account may turn it off. The outbox starts from it and keeps the setting.
        self.account_signing: bool = webhooks.get("signing", True)
        self.webhook_endpoints: list[dict[str, Any]] = list(webhooks.get("endpoints", []))

    def _start(self, seed_accounts: bool = True, clock: Clock | None = None) -> None:
        """The tenant's state as its account first makes it, on `clock` (a restore's) or a
        new one. The parts are given the clock: it is never replaced under them."""
        pinned = self.account.get("clock", {}).get("start")
        self.clock: Clock = clock or self._clock_factory(
            None if pinned is None else start_timestamp(pinned))
        self.ids = Ids(f"{self._seed}:{self.name}")
        self.companies = CompanyDirectory(self.rules.catalog, self.rules.index)
        # The users and their public tokens (domain/identity.py).
        self.identity = Identity(self.ids, self.clock, self.rules.limits, self.environment)
        self.timeline = Timeline()
        dispatcher = self.services.dispatcher
        self.changes = Changes()  # the cursor of incremental reads (domain/changes.py)
        # The outbox: endpoints, secrets, deliveries and faults; the dispatcher sends for it.
        self.webhooks = dispatcher.outbox_for(self)
        self.events = EventLog(self.rules.limits.max_events, settled=self.webhooks.settled,
                               on_evict=self._forget_event)
        self.events.settled_count = lambda: self.webhooks.landed
        # The parts: each owns its state and the rules that change it.
        self.tasks = Tasks(                                # tasks, workflows, bindings
            self.rules, ids=self.ids, clock=self.clock, timeline=self.timeline,
            changes=self.changes, companies=self.companies, settings=self.settings,
            identity=self.identity, emit=self.emit)
        self.accounts = LinkedAccounts(                    # linked accounts (continuous access)
            self.rules, name=self.name, account=self.account, ids=self.ids, clock=self.clock,
            timeline=self.timeline, companies=self.companies, settings=self.settings,
            identity=self.identity, emit=self.emit)
        self.accounts.tasks, self.tasks.accounts = self.tasks, self.accounts  # each the other
        self.tasks.admit_work = self.admit_work
        self.links = ProcessorLinks(                       # processor tokens and links
            self.rules, ids=self.ids, environment=self.environment, clock=self.clock,
            timeline=self.timeline, companies=self.companies, settings=self.settings,
            identity=self.identity, emit=self.emit)
        # The aggregator's own API (domain/aggregator.py): its items by id, and each live
        # public or access token -> its item's id.
        self.aggregator = Aggregator(ids=self.ids, clock=self.clock, environment=self.environment,
                                     rules=self.rules, events=self.events,
                                     emit_webhook=self.emit_webhook, links=self.links)
        self.links.items = self.aggregator  # each is given the other
        # The aggregator's webhooks leave signed with its key (Plaid-Verification, facts 15).
        self.webhooks.plain_signer = self.aggregator.verification_header
        self.journal = Journal()
        # The hosted flow: its users' autopilots, and what it told the host page.
        self.autopilots = Autopilots(self.account)
        self.callbacks = Callbacks(self.rules.limits.max_callbacks)
        # API faults on purpose (PUT /_sandbox/faults/api), their draws seeded per tenant.
        self.api_faults = ApiFaults(random.Random(f"{self._seed}:{self.name}:api-faults"))
        self.events.listeners.append(lambda event: self.changes.touch(EVENT, event.id))
        self.events.listeners.append(self.webhooks.deliver)  # queues, never sends
        self.runner = self.services.run(self)
        if self.services.timer is not None:
            self.services.timer.watch(self.runner)
        if seed_accounts:
            self.accounts.seed_from_account()
            self.autopilots.seed_from_account()

    def reset(self) -> None:
        """POST /_sandbox/reset: back to the account as the fixtures made it, same keys;
        work in flight (jobs, webhook attempts) is dropped."""
        self.close()
        self._configure()
        self._start()

    def restore(self, fill: Callable[[Tenant], None], clock: Clock) -> None:
        """POST /_sandbox/snapshot and --state-file (snapshot.py): work in flight stops,
        the state starts afresh on the snapshot's clock (without the account's ready-made
        linked accounts) and `fill` puts the snapshot's in. `fill` is built from a checked
        document, so it cannot fail half-way; name, keys and environment stay the
        tenant's own."""
        self.close()
        self._start(seed_accounts=False, clock=clock)
        fill(self)
        # Every restored item is new to a reader: the tasks, then the ledger, in order.
        self.changes.touch_all(TASK, self.tasks)
        self.changes.touch_all(EVENT, self.events.by_id)

    # -- snapshot (domain/stored.py): the tenant's own settings and its clock ----------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({
            "tenant": obj({
                "name": {**STRING, "description": "The tenant it was taken from (informative: a "
                                                  "restore keeps the caller's name and keys)."},
                "products": STRINGS,
                "manualDeposits": obj({"enabled": {"type": "boolean"}, "companies": STRINGS,
                                       "withoutProgrammaticAuthentication": {"type": "boolean"}}),
                "signing": {"type": "boolean"},
                "refreshInterval": _INTERVAL,
                "piiDeletionInterval": _INTERVAL}),
            "clock": obj({"timestamp": TIME}, {"now": STRING})})

    def dump_settings(self) -> dict[str, Any]:
        now, settings = self.clock.timestamp(), self.settings
        return {"tenant": {"name": self.name, "products": list(settings.products),
                           "manualDeposits": stored(settings.manual_deposits),
                           "signing": self.signing, "refreshInterval": settings.refresh_interval,
                           "piiDeletionInterval": settings.pii_deletion_interval},
                "clock": {"timestamp": now, "now": isoformat(now)}}

    @staticmethod
    def load_settings(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        """The settings, and a clock of the tenant's mode and scale at the snapshot's time
        (a real clock goes on from there: the time the server was down does not count)."""
        settings, timestamp = document["tenant"], document["clock"]["timestamp"]
        current = loading.tenant.clock
        whole = int(timestamp)
        clock = Clock(mode=current.mode, time_scale=current.time_scale, start=whole)
        clock.advance(timestamp - whole)
        return {"products": tuple(settings["products"]),
                "manual_deposits": ManualDepositRule.from_fixture(settings["manualDeposits"]),
                "signing": settings["signing"], "refresh_interval": settings["refreshInterval"],
                "pii_deletion_interval": settings["piiDeletionInterval"], "clock": clock}

    def restore_settings(self, *, products: tuple[str, ...], manual_deposits: ManualDepositRule,
                         signing: bool, refresh_interval: float | None,
                         pii_deletion_interval: float | None, clock: Clock) -> None:
        settings = self.settings  # in place: the parts hold it
        settings.products, settings.manual_deposits = products, manual_deposits
        settings.refresh_interval = refresh_interval
        settings.pii_deletion_interval = pii_deletion_interval
        self.webhooks.signing = signing
        assert clock is self.clock, "Tenant.restore starts the tenant on the snapshot's clock"

    def close(self) -> None:
        """Stop everything the tenant has going: jobs on its clock, webhook attempts in
        flight, the wall-clock timer's watch."""
        self.timeline.clear()
        self.webhooks.cancel()
        self.services.dispatcher.cancel(self.webhooks)
        if self.services.timer is not None:
            self.services.timer.forget(self.runner)

    def _forget_event(self, event_id: str) -> None:
        """The ledger evicted the event: its deliveries and attempts go with it."""
        self.webhooks.forget(event_id)
        self.changes.forget(EVENT, event_id)

    def admit_work(self) -> None:
        """New work (a task, a triggered event), or 429 while the tenant's live work fills
        a bound: events whose deliveries are pending (--max-events; settled ones go first)
        or jobs on its clock (--max-jobs). What the clock runs of work already admitted
        is never refused. Tasks: Tasks.admit."""
        limits = self.rules.limits
        if self.events.full():
            raise EventLimitReached(EVENT_LIMIT.format(stored=len(self.events),
                                                       limit=limits.max_events))
        if self.timeline.holds_at_least(limits.max_jobs):
            raise JobLimitReached(JOB_LIMIT.format(stored=len(self.timeline),
                                                   limit=limits.max_jobs))

    def emit(self, event: EventData | Draft | str, *, identifier: str | None = None,
             task_id: str | None = None, at: float | None = None,
             for_task: Task | None = None, **body: Any) -> Event:
        """Store a new event in the ledger (listeners such as the dispatcher see it next).

        `event` is its data struct (`CompanyCreated(company_id=...)`, domain/event_types.py),
        a draft its type made, or a type's name with `data` among `body`. `identifier` and
        `task_id` index the event for filters and replay; `body` holds the body's other
        fields (`user`, and for task events `task`, `company`, ...): a task event's come
        from its task, `for_task`.
        """
        if isinstance(event, EventData):
            event = type(event).event_type.draft(event)
        if for_task is not None:
            identifier, task_id = for_task.identifier, for_task.id
            body.update(task_event_fields(for_task, self.companies.get(for_task.company_id)))
        if isinstance(event, Draft):
            event_type = event.type.name
            if event.data is not None:
                body["data"] = event.data
        else:
            event_type = event
        at = self.clock.timestamp() if at is None else at
        at = round(at, 3)  # milliseconds, as eventTime and ce-time show it
        event = Event(id=self.ids.uuid(), type=event_type, time=at,
                      body=event_body(event_type, at, **body), sequence=self.events.emitted + 1,
                      user=identifier, task=task_id)
        return self.events.append(event)

    def emit_webhook(self, url: str, event_type: str, body: dict[str, Any]) -> Event:
        """Store another API's webhook in the ledger (the aggregator's own,
        domain/aggregator.py): `body` as that API writes it, for the one `url` it goes to.
        The outbox delivers it there as plain JSON, recorded and retried as every delivery."""
        at = round(self.clock.timestamp(), 3)
        event = Event(id=self.ids.uuid(), type=event_type, time=at, body=body,
                      sequence=self.events.emitted + 1, url=url)
        return self.events.append(event)

    def seen(self) -> None:
        """A request of this tenant's arrived (a shared deployment forgets tenants idle past
        --tenant-idle-expiry: TenantRegistry.expire_idle)."""
        self.last_request = time.monotonic()

    def stats(self) -> TenantStats:
        """What the tenant keeps, its bounds, and what it evicted (GET /_sandbox/stats)."""
        limits = self.rules.limits
        deliveries = sum(len(d) for d in self.webhooks.deliveries.values())
        return TenantStats(
            events=EventsKept(stored=len(self.events), max=limits.max_events,
                              emitted=self.events.emitted, evicted=self.events.evicted),
            deliveries=DeliveriesKept(stored=deliveries, in_flight=len(self.webhooks.in_flight)),
            tasks=Bounded(stored=len(self.tasks), max=limits.max_tasks,
                          evicted=self.tasks.evicted),
            tokens=Bounded(stored=len(self.identity.tokens), max=limits.max_tokens,
                           evicted=self.identity.evicted),
            users=UsersKept(stored=len(self.identity.users), max=limits.max_users),
            linked_accounts=UsersKept(stored=len(self.accounts), max=limits.max_linked_accounts),
            journal=Bounded(stored=len(self.journal), max=self.journal.max_entries,
                            evicted=self.journal.evicted),
            sdk_callbacks=Bounded(stored=len(self.callbacks), max=self.callbacks.max_entries,
                                  evicted=self.callbacks.evicted),
            pending_jobs=len(self.timeline))

    # -- a task's files, by a signed URL (GET /task/{taskId}/file/{fileId}/generate-url) --

    def _file_signature(self, task_id: str, file_id: str, expires: int) -> str:
        """HMAC-SHA256 keyed by the tenant's API secret, as a presigned URL is (it opens
        without credentials until it expires)."""
        message = "\n".join((self.name, task_id, file_id, str(expires))).encode()
        return hmac.new(self.api_secret.encode(), message, sha256).hexdigest()

    def file_url(self, task: Task, file_id: str) -> tuple[str, float]:
        """The path and query of a URL that serves the file without credentials for
        FILE_URL_LIFETIME virtual seconds, and when it expires."""
        file = self.tasks.file_of(task, file_id)
        expires = int(self.clock.timestamp()) + FILE_URL_LIFETIME
        query = urlencode({"tenant": self.name, "expires": expires,
                           "signature": self._file_signature(task.id, file.id, expires)})
        return f"/task/{quote(task.id, safe='')}/file/{quote(file.id, safe='')}?{query}", expires


def open_task_file(tenant: Tenant | None, task_id: str, file_id: str, expires: int,
                   signature: str) -> tuple[Tenant, Task, TaskFile]:
    """A generated file URL opened: its signature and expiry checked, then the file."""
    if tenant is None or not hmac.compare_digest(
            tenant._file_signature(task_id, file_id, expires), signature):
        raise InvalidFileUrl(INVALID_FILE_URL, details=[
            field_detail("$.signature", "does not match", location="query")])
    if tenant.clock.timestamp() >= expires:
        raise FileUrlExpired(EXPIRED_FILE_URL.format(expires=isoformat(expires)), details=[
            field_detail("$.expires", "in the past", location="query")])
    task = tenant.tasks.get_task(task_id)
    return tenant, task, tenant.tasks.file_of(task, file_id)


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
        for public_token in tenant.identity.tokens:
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
        if owner is None or public_token not in owner.identity.tokens:
            owner = next((t for t in self._by_name.values()
                          if public_token in t.identity.tokens), None)
        if owner is not None:
            token = owner.identity.tokens[public_token]
            self._token_owner[public_token] = owner.name
            if len(self._token_owner) > TOKEN_OWNER_CACHE:  # a cache: the oldest go first
                del self._token_owner[next(iter(self._token_owner))]
            if owner.clock.timestamp() >= token.expires_at:
                raise PublicTokenExpired(EXPIRED_PUBLIC_TOKEN.format(expires=isoformat(token.expires_at)))
            return owner, token
        raise InvalidPublicToken(INVALID_PUBLIC_TOKEN)
