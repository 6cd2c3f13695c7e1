"""Continuous access: linked payroll accounts, their data, push refreshes and pull refreshes.

A linked account holds one person's job at one company (a Profile made from the
seed) and the records derived from it: pay statements on the pay cycle, income,
timesheets, tax forms, deposit accounts, employment and identity. The records
agree with each other (statements follow the income, the employer is the
company), stay the same between reads, and change only when a refresh says so
(spec: Continuous access, Continuous-access events, Pull refresh flow).

Dates in the records are written as the real service writes them: date-times with
milliseconds and a `Z` (real-service-facts: `2020-06-30T12:00:00.000Z`), see clock.day_time.
"""

from __future__ import annotations

import copy
import random
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from datetime import timedelta
from functools import cache
from typing import Any, ClassVar

import msgspec
from msgspec.structs import replace

from ...clock import Clock
from ...errors import (DepositAccountNotFound, LinkedAccountLimitReached, LinkedAccountNotFound,
                      StatementNotFound, ValidationFailed, field_detail)
from ..webhooks.event_types import DECLARED, PiiDataDeleted
from .data_records import DATA_KINDS, DATA_RECORDS, LinkedAccountListRecord, LinkedAccountRecord
from . import data_profiles
from . import payroll_records as records
from ..companies.companies import Company, CompanyDirectory
from ..tasks.states import COMPLETED, FAILED
from ..rules import Rules
from ..parts import Held, TenantSettings
from .pay_calendar import Profile, day
from ..shapes import UNSET, Command, Maybe, of, schema_of
from ..stored import Count, Stored, Time, array, described, stored
from ..sections import Sections, unique
from ..timeline import Timeline, action_kind

USER_LINK_PRODUCTS = frozenset({"deposit", "verify"})
# What a sync found, by kind of data: the events it sends there, each with the records it names.
Changes = defaultdict[str, list[tuple[str, list[str]]]]
# Chances per push refresh that something changes at the employer.
RAISE_CHANCE = 0.04
NEW_DEPOSIT_ACCOUNT_CHANCE = 0.02

DAY = 86_400
UNKNOWN_PROFILE = "No data profile is named {name!r} (known: {known})."
LINKED_ACCOUNT_LIMIT = ("This tenant holds {stored} linked accounts, and tasks still running may "
                        "link {coming} more; it keeps at most {limit}: --max-linked-accounts "
                        "(PAYROLL_SANDBOX_MAX_LINKED_ACCOUNTS, config maxLinkedAccounts). A task "
                        "that relinks one of its accounts is not refused. Reset it or raise the "
                        "bound; nothing stored was changed.")


class ProfileBinding(Command, kw_only=True):
    """A user's bound data profile, as a snapshot keeps it."""

    profile: Maybe[str] = UNSET
    data: Maybe[dict[str, Any]] = UNSET
    document: dict[str, Any]


UNKNOWN_LINKED_ACCOUNT = "No linked account has the id {account_id!r}."
UNKNOWN_STATEMENT = "No pay statement has the id {statement_id!r}."
# What the reads add to a stored data record as they render it.
_RENDERED = {"linkedAccount", "paystub"}


def _data_records(kind: str) -> Any:
    """A list of a linked account's stored data records (statements, ...): the API's record
    shape (domain/data_records.py), which the reads render, less the fields they add. The
    records are kept as the restore parsed them (the schema checked them): a full tenant's
    260,000 are not copied again."""
    record = schema_of(DATA_RECORDS[kind])
    return described(list[Any], {"type": "array", "items": {
        **record, "required": [name for name in record["required"] if name not in _RENDERED]}})


class LinkedAccount(Stored, weakref=True):  # weakref: a deleted tenant's are followed
    """An account a finished task linked: the employer, its records and their refreshes."""

    id: str
    identifier: str
    user_id: str
    company_id: str
    product: str
    profile: Profile
    company_at_link: Company    # shown if the company is later deleted from the catalog
    created_at: Time
    last_refresh: Time          # the last successful sync: at the link, then each refresh
    connected: bool = True
    refreshes: Count = 0
    pii_deleted: bool = False
    # The last time the connection failed (a disconnect, a refresh task that failed), and
    # why the session ended: a reconnect needs the credentials again only after they changed.
    last_failure: Time | None = None
    disconnect_reason: str | None = None
    statements: _data_records("statements") = msgspec.field(default_factory=list)
    timesheets: _data_records("timesheets") = msgspec.field(default_factory=list)
    taxes: _data_records("taxes") = msgspec.field(default_factory=list)
    deposit_accounts: _data_records("deposit-accounts") = msgspec.field(default_factory=list)
    employment_id: str = ""
    identity_id: str = ""
    income_id: str = ""
    # The data profile document (one job's) the records follow, None for the seed's own:
    # a refresh applies the user's bound profile when it differs (data_profiles.py).
    profile_document: dict[str, Any] | None = None

    SPARSE: ClassVar[tuple[str, ...]] = ("profile_document",)  # a snapshot's, when set


def life_event_moments(account: LinkedAccount) -> list[tuple[float, int]]:
    """Each life event of the account's profile as (its moment, its number in `timeline`),
    in the order they happen: days after the link, at the link's time of day."""
    return [(account.created_at + days * DAY, number)
            for days, number in data_profiles.life_events(account.profile_document or {})]


class LinkedAccounts(Held[LinkedAccount]):
    """One tenant's linked accounts and everything continuous access does with them: read
    as a mapping of linked account id -> LinkedAccount; changed only through its methods."""

    def __init__(self, rules: Rules, *, name: str, account: dict[str, Any], ids: Any,
                 clock: Clock, timeline: Timeline, companies: CompanyDirectory,
                 settings: TenantSettings, identity: Any, emit: Callable[..., Any]) -> None:
        # Given what it uses, not the tenant (`account`: its ready-made linked accounts;
        # `identity`: its users); the tasks once they exist.
        self.rules = rules
        self.name, self.account, self.ids, self.clock = name, account, ids, clock
        self.timeline, self.companies, self.settings = timeline, companies, settings
        self.identity, self.emit = identity, emit
        self.tasks: Any = None  # tasks.Tasks
        self._by_id: dict[str, LinkedAccount] = {}
        self._by_pair: dict[tuple[str, str], LinkedAccount] = {}  # (identifier, company) -> first
        # workflow id -> (identifier, company): the new account an unfinished workflow may link;
        # how many workflows reserve each pair, and how many reserved pairs are not linked yet
        # (kept as they change, so admitting work at the bound costs no walk over them).
        self.coming: dict[str, tuple[str, str]] = {}
        self._reserved: Counter[tuple[str, str]] = Counter()
        self._unlinked = 0
        # identifier -> {"profile": name?, "data": {...}?, "document": the two merged}
        self.profile_bindings: dict[str, dict[str, Any]] = {}

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({"linkedAccounts": array(LinkedAccount)}, optional={
            "profileBindings": {"type": "object",
                                "additionalProperties": schema_of(ProfileBinding)}},
            bounds={"linkedAccounts": lambda limits: (limits.max_linked_accounts,
                                                      "--max-linked-accounts")})

    def dump(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "linkedAccounts": [stored(a) for a in self._by_id.values()]}
        if self.profile_bindings:  # written only once used: older readers never saw it
            document["profileBindings"] = copy.deepcopy(self.profile_bindings)
        return document

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        accounts = loading.accounts = unique(document, "linkedAccounts", LinkedAccount, "id")
        catalog = loading.rules.catalog
        for account in accounts.values():
            shared = catalog.get(account.company_at_link.id)
            if shared == account.company_at_link:  # the catalog's own record: keep one copy
                account.company_at_link = shared
        return {"accounts": accounts,
                "profile_bindings": copy.deepcopy(document.get("profileBindings", {}))}

    def restore(self, accounts: dict[str, LinkedAccount],
                profile_bindings: dict[str, dict[str, Any]] | None = None) -> None:
        """A snapshot's linked accounts and profile bindings (as load checked them), and
        what its unfinished workflows may still link (admit; the tasks are restored first)."""
        self._by_id, self._by_pair = accounts, {}
        for account in accounts.values():
            self._by_pair.setdefault((account.identifier, account.company_id), account)
        self.profile_bindings = profile_bindings or {}
        self.coming, self._reserved, self._unlinked = {}, Counter(), 0
        tasks = self.tasks
        for workflow in tasks.workflows.values():
            first = tasks.get(workflow.tasks[0]) if workflow.tasks else None
            if first is not None and not workflow.finished and first.linked_account is None:
                pair = self._new_link(workflow.identifier, first.company_id, [
                    *(tasks[t].product for t in workflow.tasks),
                    *(p["product"] for p in workflow.pending)])
                if pair is not None:
                    self.reserve(workflow.id, pair)

    def _profile(self, identifier: str, company: Company,
                 document: dict[str, Any] | None = None) -> tuple[Profile, dict[str, Any] | None]:
        """The person and job of a new linked account, and the data profile document (one
        job's) over them: `document`, or the user's bound profile, or none."""
        today = self.clock.now().date()
        made = self.rules.profiles.profile(self.name, identifier, company.id, company.name,
                                           today)
        if document is None:
            linked = sum(1 for a in self._by_id.values() if a.identifier == identifier)
            document = self._bound_job(identifier, linked)
        if document is None:
            return made, None
        return data_profiles.apply(made, document, today), document

    def _bound_job(self, identifier: str, number: int) -> dict[str, Any] | None:
        """What the user's bound profile gives their `number`-th linked account, if bound."""
        binding = self.profile_bindings.get(identifier)
        return None if binding is None else data_profiles.job(binding["document"], number)

    # -- data profiles (DESIGN.md: Payroll data you choose) -----------------------------------

    def bind_profile(self, identifier: str, name: str | None,
                     data: dict[str, Any] | None) -> dict[str, Any]:
        """PUT /_sandbox/users/{identifier}/profile: the user's next linked accounts take the
        named profile with `data` over it; a profile that is unknown or contradicts itself
        is refused (422, its JSON path) and nothing changes."""
        named = self.rules.data_profiles
        if name is not None and name not in named:
            raise ValidationFailed(
                UNKNOWN_PROFILE.format(name=name, known=", ".join(sorted(named))),
                details=[field_detail("$.profile", "unknown profile")])
        document = data_profiles.chosen(named.get(name), data)
        if data is not None:
            # data over a named profile is a part: its contradictions are the merged one's
            today = self.clock.now().date()
            data_profiles.check(data, today, "$.data", whole=name is None)
            data_profiles.check(document, today, "$.data")
        self.identity.user(identifier)
        binding: dict[str, Any] = {"document": document}
        if name is not None:
            binding["profile"] = name
        if data is not None:
            binding["data"] = copy.deepcopy(data)
        self.profile_bindings[identifier] = binding
        return self.profile_binding(identifier)

    def profile_binding(self, identifier: str) -> dict[str, Any]:
        """The user's bound profile: its name, the data over it and the two merged (each
        null when none is bound)."""
        binding = self.profile_bindings.get(identifier, {})
        return {"identifier": identifier, "profile": binding.get("profile"),
                "data": binding.get("data"), "document": binding.get("document")}

    def profile_names(self) -> list[dict[str, str]]:
        """GET /_sandbox/profiles: the named profiles, a line each."""
        return [{"name": name, "description": profile["description"]}
                for name, profile in self.rules.data_profiles.items()]

    def unbind_profile(self, identifier: str) -> bool:
        """DELETE /_sandbox/users/{identifier}/profile: the next linked accounts are made
        from the seed again. Whether there was a binding."""
        return self.profile_bindings.pop(identifier, None) is not None

    def seed_from_account(self) -> None:
        """The account's ready-made linked accounts (fixtures `linkedAccounts`), made
        without events."""
        named = self.rules.data_profiles
        for entry in self.account.get("linkedAccounts", []):
            company = self.companies.require(entry["company"])
            document = None
            if "profile" in entry or "data" in entry:  # checked at load (loading.py)
                document = data_profiles.job(
                    data_profiles.chosen(named.get(entry.get("profile")), entry.get("data")), 0)
            account = self.create(entry["identifier"], company, entry.get("product", "deposit"),
                                  emit=False, document=document)
            account.connected = entry.get("connected", True)

    # -- creation and connection ------------------------------------------------------------

    def create(self, identifier: str, company: Company, product: str, *,
               emit: bool = True, document: dict[str, Any] | None = None) -> LinkedAccount:
        user = self.identity.user(identifier)
        now = self.clock.timestamp()
        profile, document = self._profile(identifier, company, document)
        ids = self.ids  # the account's id, then its employment's, identity's and income's
        account = LinkedAccount(id=ids.object_id(), identifier=identifier, user_id=user.id,
                                company_id=company.id, product=product, profile=profile,
                                company_at_link=company, created_at=now, last_refresh=now,
                                profile_document=document, employment_id=ids.object_id(),
                                identity_id=ids.object_id(), income_id=ids.object_id())
        self._collect_history(account, now)
        self._by_id[account.id] = account
        if (identifier, company.id) not in self._by_pair:
            self._by_pair[identifier, company.id] = account
            self._unlinked -= (identifier, company.id) in self._reserved
        if emit:
            self._emit(account, "linked-account-connected", {})
        if self.settings.refresh_interval:
            self._schedule_refresh(account, now, self.settings.refresh_interval)
        self._schedule_pii_deletion(account)
        self._schedule_life_events(account)
        return account

    def _collect_history(self, account: LinkedAccount, now: float) -> None:
        """What a first sign-in collects: the deposit accounts, 90 days of statements, two
        weeks of timesheets and the tax forms published so far."""
        ids = self.ids
        account.deposit_accounts = [{"_id": ids.object_id(), **a}
                                    for a in account.profile.deposit_accounts]
        today, profile = day(now), account.profile
        count = profile.statement_count  # a data profile's count: the latest ones
        since = today - timedelta(days=90 if count is None else 10 * 366)
        found = records.statements(ids, account, max(profile.start_date, since), today)
        account.statements = found if count is None else found[max(0, len(found) - count):]
        account.timesheets = records.timesheets(ids, account, today - timedelta(days=14), today)
        account.taxes = records.tax_forms(ids, account, 0, today)

    def disconnect(self, account: LinkedAccount, reason: str = "timeout") -> None:
        """The session expired or was revoked (spec: Linked account connection)."""
        if account.connected:
            account.connected = False
            account.last_failure = self.clock.timestamp()
            account.disconnect_reason = reason
            self._emit(account, "linked-account-disconnected", {"reason": reason})

    @staticmethod
    def needs_credentials(account: LinkedAccount) -> bool:
        """Spec (Client SDK configuration, linkedAccount): a reconnect "often does not require
        re-entering credentials". The sandbox's rule: it does only after the credentials
        changed at the company (a disconnect for `credentials-changed`); an expired session
        (`timeout`) or a system update resumes without them."""
        return not account.connected and account.disconnect_reason == "credentials-changed"

    def reconnect(self, account: LinkedAccount) -> None:
        """The user signed in again through the SDK `linkedAccount` flow."""
        if not account.connected:
            account.connected = True
            account.disconnect_reason = None
            self._emit(account, "linked-account-connected", {})

    def require(self, account_id: str, path: str = "$.linkedAccount") -> LinkedAccount:
        account = self._by_id.get(account_id)
        if account is None:
            raise LinkedAccountNotFound(UNKNOWN_LINKED_ACCOUNT.format(account_id=account_id),
                                        details=[field_detail(path, "unknown")])
        return account

    def find(self, identifier: str, company_id: str) -> LinkedAccount | None:
        return self._by_pair.get((identifier, company_id))

    def _new_link(self, identifier: str, company_id: str,
                  products: Iterable[str]) -> tuple[str, str] | None:
        """(identifier, company_id) when a task of `products` there may link a new account."""
        pair = (identifier, company_id)
        return None if pair in self._by_pair or USER_LINK_PRODUCTS.isdisjoint(products) else pair

    def admit(self, identifier: str, company_id: str,
              products: Iterable[str]) -> tuple[str, str] | None:
        """Room for the account new work of `products` for `identifier` at `company_id` may
        link, or 429 naming --max-linked-accounts; the pair it may link (None: it links none,
        as a relink, never refused). The accounts stored and those unfinished workflows may
        still link (`coming`) never pass the bound together: nothing stored is lost, and no
        task that succeeds ends without its account."""
        pair = self._new_link(identifier, company_id, products)
        limit = self.rules.limits.max_linked_accounts
        if (pair is not None and pair not in self._reserved
                and len(self._by_id) + self._unlinked >= limit):
            raise LinkedAccountLimitReached(LINKED_ACCOUNT_LIMIT.format(
                stored=len(self._by_id), coming=self._unlinked, limit=limit))
        return pair

    def reserve(self, workflow_id: str, pair: tuple[str, str]) -> None:
        """An unfinished workflow may link the account of `pair` (admit said there is room)."""
        self.coming[workflow_id] = pair
        held = self._reserved.get(pair, 0)  # get: a Counter's [] calls __missing__ in Python
        self._unlinked += not held and pair not in self._by_pair
        self._reserved[pair] = held + 1

    def release(self, workflow_id: str) -> None:
        """The workflow finished: whatever it linked is stored, its reservation ends."""
        pair = self.coming.pop(workflow_id, None)
        if pair is not None:
            self._reserved[pair] -= 1
            if not self._reserved[pair]:
                del self._reserved[pair]
                self._unlinked -= pair not in self._by_pair

    # -- hooks into the task engine ---------------------------------------------------------

    def on_task_final(self, task: Any) -> None:
        """A completed user-link task leaves a linked account; a completed refresh refreshes."""
        account = self._by_id.get(task.linked_account)  # a refresh's (none for a new link)
        if task.status != COMPLETED:
            if account is not None and task.status == FAILED:
                account.last_failure = self.clock.timestamp()
            return
        if task.linked_account is not None:
            if account is not None and account.connected:
                self.refresh(account, task_id=task.id)
            return
        if task.product in USER_LINK_PRODUCTS:
            account = self.find(task.identifier, task.company_id)
            if account is None:
                company = self.companies.get(task.company_id)
                if company is not None:
                    self.create(task.identifier, company, task.product)
            else:
                # Signed in again: connected, and its data synced now (lastSuccess moves).
                self.reconnect(account)
                if account.pii_deleted:  # collected again, as at the first sign-in (README)
                    account.pii_deleted = False
                    self._collect_history(account, self.clock.timestamp())
                self.refresh(account, task_id=task.id)

    def on_pii_step(self, task: Any) -> None:
        """A scenario step `piiDataDeleted`: the user's personal data is deleted now."""
        self.delete_pii(task.identifier, task.id, even_without_accounts=True)

    def on_step(self, task: Any, value: str) -> None:
        """A scenario step `linkedAccount: connected|disconnected`."""
        account = (self._by_id.get(task.linked_account) if task.linked_account
                   else self.find(task.identifier, task.company_id))
        if account is None:
            return
        if value == "disconnected":
            self.disconnect(account, "credentials-changed")
        else:
            self.reconnect(account)

    # -- refresh ----------------------------------------------------------------------------

    def refresh(self, account: LinkedAccount, *, task_id: str | None = None) -> None:
        """Sync every kind of data: `*-synced` for each, then what changed (spec:
        Continuous-access events). The data endpoints show the same change.

        An account whose personal data was deleted syncs nothing and announces nothing
        (no `*-synced` event for data that is not there; its lastSuccess stays) until the
        user signs in again through the SDK (README: Fidelity)."""
        if account.pii_deleted:
            return
        rng = random.Random(zlib.crc32(f"{account.id}:{account.refreshes}".encode()))
        account.refreshes += 1
        changes: Changes = defaultdict(list)

        self._follow_profile(account, changes)
        self._collect(account, changes)
        if rng.random() < RAISE_CHANCE and account.profile.employment_status == "active":
            self.give_raise(account, rng.uniform(0.03, 0.08))
            changes["income"].append(("income-updated", [account.income_id]))
        if rng.random() < NEW_DEPOSIT_ACCOUNT_CHANCE:
            added, adjusted = self.add_deposit_account(account, rng)
            changes["deposit-accounts"].append(("deposit-accounts-added", [added["_id"]]))
            if adjusted is not None:
                changes["deposit-accounts"].append(("deposit-accounts-updated", [adjusted["_id"]]))

        self._announce(account, changes, task_id)

    def _announce(self, account: LinkedAccount, changes: Changes,
                  task_id: str | None = None) -> None:
        """What a sync sends: `*-synced` for each kind of data, each followed by what changed
        in it, then earn-user-data."""
        for kind in DATA_KINDS:
            if kind == "timesheets" and account.profile.employee_type != "hourly":
                continue
            self._emit(account, f"{kind}-synced", {}, task_id=task_id)
            for event_type, ids in changes.get(kind, ()):
                self._emit(account, event_type, {"records": ids}, task_id=task_id)
        income = records.income(account, self.clock.timestamp())
        self._emit(account, "earn-user-data", {
            "net_hourly_rate": income["netHourlyRate"],
            "unpaid_hours_in_pay_period": income["unpaidHoursInPayPeriod"],
            "current_pay_period_start": income["currentPayPeriodStart"]}, task_id=task_id)

    def _follow_profile(self, account: LinkedAccount, changes: Changes) -> None:
        """A profile bound to the user since the account's records were made (or changed
        since): the records follow it from this refresh on, and what changed is announced."""
        mine = [a.id for a in self._by_id.values() if a.identifier == account.identifier]
        wanted = self._bound_job(account.identifier, mine.index(account.id))
        if wanted is None or wanted == account.profile_document:
            return
        after = data_profiles.apply(account.profile, wanted, day(self.clock.timestamp()))
        account.profile_document = wanted
        self._schedule_life_events(account, after=self.clock.timestamp())
        self._change_profile(account, after, wanted, changes)

    def _change_profile(self, account: LinkedAccount, after: Profile, wanted: dict[str, Any],
                        changes: Changes) -> None:
        """The person and job become `after` (a profile or life event `wanted` gave): the
        `*-updated` events that sends (a raise income-updated, a termination
        employment-updated, ...), and the deposit accounts `wanted` gives, unless the user's
        personal data is deleted."""
        before, account.profile = account.profile, after

        def changed(*names: str) -> bool:
            return any(getattr(before, n) != getattr(after, n) for n in names)

        if changed("annual_income", "hourly_rate", "employee_type", "pay_cycle", "tax_rate"):
            changes["income"].append(("income-updated", [account.income_id]))
        if changed("employment_status", "end_date", "job_title", "weekly_hours", "start_date"):
            changes["employment"].append(("employment-updated", [account.employment_id]))
        if changed("first_name", "last_name", "email", "phone", "address", "city", "state",
                   "postal_code", "date_of_birth", "ssn_last4"):
            changes["identity"].append(("identity-updated", [account.identity_id]))
        if "depositAccounts" in wanted and not account.pii_deleted:
            self._replace_deposit_accounts(account, after.deposit_accounts, changes)

    # -- life events (data_profiles: timeline) ------------------------------------------------

    def _schedule_life_events(self, account: LinkedAccount, after: float | None = None) -> None:
        """Each life event of the account's profile on the timeline, at its moment
        (life_event_moments). `after` (a profile bound since the link): the pending ones of
        the document before are cancelled, and only the events still to come are scheduled."""
        if after is not None:
            for job in self.timeline.pending():
                if isinstance(job.action, _LifeEvent) and job.action.account is account:
                    self.timeline.cancel(job)
        for moment, number in life_event_moments(account):
            if after is not None and moment <= after:
                continue
            self.timeline.schedule(moment, _LifeEvent(self.itself, account, number),
                                   background=True, label=f"life event {number} of {account.id}",
                                   owner=account.id)

    def life_event(self, account: LinkedAccount, number: int) -> None:
        """A life event happens: the service syncs what was paid until now on the old terms,
        then the person or job changes, and the sync announces it (`*-synced`, `*-updated`,
        `deposit-accounts-*`; `deposit-switch-removed` when the user moved their pay off
        the account a deposit switch set). An account that is disconnected, or whose personal
        data was deleted, changes without a word: nothing syncs it."""
        assert account.profile_document is not None
        entry = account.profile_document["timeline"][number]
        unit = "hourly" if account.profile.employee_type == "hourly" else "yearly"
        wanted = data_profiles.life_event_changes(entry, day(account.created_at), unit)
        heard = account.connected and not account.pii_deleted
        changes: Changes = defaultdict(list)
        if heard:
            self._collect(account, changes)
        switched = (account.deposit_accounts[-1] if account.product == "deposit"
                    and account.deposit_accounts else None)
        self._change_profile(account, data_profiles.apply_life_event(
            account.profile, wanted, day(account.created_at), key=f"{entry['at']}:{number}:"),
            wanted, changes)
        if not heard:
            return
        kept = {a["_id"] for a in account.deposit_accounts}
        if switched is not None and switched["_id"] not in kept:
            self._emit(account, "deposit-switch-removed", {"deposit_account": switched["_id"]})
        self._announce(account, changes)

    def _replace_deposit_accounts(self, account: LinkedAccount, wanted: list[dict[str, Any]],
                                  changes: Changes) -> None:
        """The deposit accounts a profile now gives: the same account number is the same
        account (updated if its split changed), a new one added, a missing one removed."""
        held = {a["accountNumber"]: a for a in account.deposit_accounts}
        kept, added, updated = [], [], []
        for given in wanted:
            old = held.pop(given["accountNumber"], None)
            if old is None:
                record = {"_id": self.ids.object_id(), **given}
                added.append(record["_id"])
            else:
                record = {"_id": old["_id"], **given}
                if record != old:
                    updated.append(old["_id"])
            kept.append(record)
        account.deposit_accounts = kept
        for event_type, ids in (("deposit-accounts-added", added),
                                ("deposit-accounts-updated", updated),
                                ("deposit-accounts-removed", [a["_id"] for a in held.values()])):
            if ids:
                changes["deposit-accounts"].append((event_type, ids))

    def _collect(self, account: LinkedAccount, changes: Changes) -> None:
        """A sync's new statements, timesheets and tax forms: those since the day of the last
        one, which is now."""
        now = self.clock.timestamp()
        first, today = day(account.last_refresh) + timedelta(days=1), day(now)
        account.last_refresh = now
        for kind, event_type, held, found in (
                ("statements", "statements-added", account.statements,
                 records.statements(self.ids, account, first, today)),
                ("timesheets", "timesheets-added", account.timesheets,
                 records.timesheets(self.ids, account, first, today)),
                ("taxes", "taxes-added", account.taxes,
                 records.tax_forms(self.ids, account, len(account.taxes), today))):
            held += found
            if found:
                changes[kind] = [(event_type, [record["_id"] for record in found])]

    def give_raise(self, account: LinkedAccount, share: float) -> None:
        profile = account.profile
        account.profile = replace(profile, annual_income=round(profile.annual_income * (1 + share), 2),
                                  hourly_rate=round(profile.hourly_rate * (1 + share), 2))

    def add_deposit_account(self, account: LinkedAccount,
                            rng: random.Random) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The user splits the paycheck to a new account: it takes a share from the account
        that had the most, so the split still adds up to the whole paycheck. Returns the
        new account and the one that gave up the share (None if it is the only one)."""
        share, donor = rng.choice((10, 15, 20)), None
        if account.deposit_accounts:
            donor = max(account.deposit_accounts, key=lambda a: (a["distributionType"] == "total",
                                                                a["distributionAmount"]))
            if donor["distributionType"] == "total":
                donor["distributionType"], donor["distributionAmount"] = "percent", 100
            share = min(share, donor["distributionAmount"] // 2)
            donor["distributionAmount"] -= share
        added = {"_id": self.ids.object_id(), "accountNumber": f"{rng.randrange(10**9, 10**10)}",
                 "routingNumber": "021000021", "type": "savings",
                 "bankName": rng.choice(("Ally Bank", "Chime", "Capital One")),
                 "distributionType": "percent" if donor else "total",
                 "distributionAmount": share if donor else 100}
        account.deposit_accounts.append(added)
        return added, donor

    def remove_deposit_switch(self, account: LinkedAccount) -> dict[str, Any]:
        """The deposit account our deposit switch added is gone at the employer."""
        if len(account.deposit_accounts) == 0:
            raise DepositAccountNotFound("This linked account has no deposit account to remove.")
        removed = account.deposit_accounts.pop()
        self._emit(account, "deposit-switch-removed", {"deposit_account": removed["_id"]})
        self._emit(account, "deposit-accounts-removed", {"records": [removed["_id"]]})
        return removed

    def _schedule_refresh(self, account: LinkedAccount, since: float, interval: float) -> None:
        """The account's next push refresh, `interval` seconds after `since`."""
        self.timeline.schedule(since + interval, _PushRefresh(self.itself, account, interval),
                               background=True, label=f"push refresh of {account.id}",
                               owner=account.id)

    # -- privacy ----------------------------------------------------------------------------

    def _schedule_pii_deletion(self, account: LinkedAccount) -> None:
        interval = self.settings.pii_deletion_interval
        if interval:
            self.timeline.schedule(account.created_at + interval,
                                   _PiiDeletion(self.itself, account.identifier),
                                     background=True, label=f"PII deletion of {account.identifier}")

    def delete_pii(self, identifier: str, task_id: str | None = None, *,
                   even_without_accounts: bool = False) -> None:
        """The user's personal data is removed; `pii-data-deleted` has `user` and `task`
        and no `data` (spec: Privacy event)."""
        accounts = [a for a in self._by_id.values()
                    if a.identifier == identifier and not a.pii_deleted]
        if not accounts and not even_without_accounts:
            return
        for account in accounts:
            account.pii_deleted = True
            account.statements, account.timesheets, account.taxes = [], [], []
            account.deposit_accounts = []
        user = self.identity.user(identifier)
        if task_id is None:
            tasks = [t for t in self.tasks.values() if t.identifier == identifier]
            task_id = tasks[-1].id if tasks else self.ids.object_id()
        self.emit(PiiDataDeleted(), identifier=identifier, task_id=task_id,
                  user={"_id": user.id, "identifier": identifier}, task=task_id)

    # -- records ----------------------------------------------------------------------------

    def accounts_of(self, identifier: str,
                    linked_account: str | None = None) -> list[LinkedAccount]:
        self.identity.require(identifier, location="query")
        accounts = [a for a in self._by_id.values() if a.identifier == identifier]
        if linked_account is not None:
            accounts = [a for a in accounts if a.id == linked_account]
            if not accounts:
                raise LinkedAccountNotFound(
                    UNKNOWN_LINKED_ACCOUNT.format(account_id=linked_account),
                    details=[field_detail("$.linkedAccount", "not this user's", location="query")])
        return accounts

    def record(self, account: LinkedAccount, view: type[LinkedAccountListRecord]
               = LinkedAccountRecord, **more: Any) -> LinkedAccountListRecord:
        """The account as GET /linked-accounts shows it (or as `view` does), with its
        company as it is now."""
        return view.of(account, self.companies.get(account.company_id),
                       self.settings.manual_deposits, **more)

    def linked_account_list(self, identifier: str) -> list[LinkedAccountListRecord]:
        """GET /linked-account/list/{identifier}: the real service's records
        (real-service-facts 8)."""
        return [self.record(account, LinkedAccountListRecord)
                for account in self.accounts_of(identifier)]

    def records(self, kind: str, account: LinkedAccount, *,
                base_url: str = "") -> list[dict[str, Any]]:
        """One kind of data of one linked account, as the data endpoints show it (a
        statement's `paystub` is the URL of its PDF under `base_url`, the sandbox's origin)."""
        if kind == "linked-accounts":
            return [self.record(account)]
        return records.data_records(kind, account, self.clock.timestamp(),
                                    base_url=base_url)

    def paystub(self, statement_id: str,
                owner: str | None = None) -> tuple[LinkedAccount, dict[str, Any]]:
        """The pay statement a `paystub` URL names, with its linked account. A public token
        (`owner`: its user) finds only its own user's statements; another user's is unknown."""
        for account in self._by_id.values():
            if owner is not None and account.identifier != owner:
                continue
            for statement in account.statements:
                if statement["_id"] == statement_id:
                    return account, statement
        raise StatementNotFound(UNKNOWN_STATEMENT.format(statement_id=statement_id),
                                details=[field_detail("$.statementId", "unknown", location="path")])

    def _emit(self, account: LinkedAccount, event_type: str, data: dict[str, Any],
              task_id: str | None = None) -> None:
        # The task of a pull refresh is named in the data (README: the synced events of a
        # pull refresh carry its task id); the spec does not show these payloads.
        self.emit(DECLARED[event_type](linked_account=account.id,
                                       company_id=account.company_id, task=task_id, **data),
                    identifier=account.identifier, task_id=task_id,
                    user={"_id": account.user_id, "identifier": account.identifier})


@action_kind("push-refresh")
class _PushRefresh(msgspec.Struct, frozen=True):
    """A push refresh of one linked account, which schedules the next one `interval`
    seconds later (a small object rather than a closure: a snapshot describes it)."""

    # The linked accounts, found when the refresh runs (a restored one is rebuilt before
    # the restored tenant has its new part, so it finds it through the tenant).
    accounts: Callable[[], LinkedAccounts]
    account: LinkedAccount
    interval: float

    class Stored(Command, kw_only=True):
        account: str
        interval: of(float, gt=0)

    def __call__(self) -> None:
        accounts, account = self.accounts(), self.account
        if accounts.get(account.id) is not account:
            return  # deleted
        if account.connected:
            accounts.refresh(account)
        accounts._schedule_refresh(account, accounts.clock.timestamp(), self.interval)

    def stored(self) -> Stored:
        return self.Stored(account=self.account.id, interval=self.interval)

    @classmethod
    def rebuild(cls, data: Stored, context: Any) -> _PushRefresh:
        return cls(context.part("accounts"), context.linked_account(data.account),
                   float(data.interval))


@action_kind("life-event")
class _LifeEvent(msgspec.Struct, frozen=True):
    """One life event of a linked account's profile (its number in the timeline), at its
    moment (data_profiles: timeline)."""

    accounts: Callable[[], LinkedAccounts]  # as _PushRefresh's
    account: LinkedAccount
    number: int

    class Stored(Command, kw_only=True):
        account: str
        number: of(int, ge=0, le=1_000)

    def __call__(self) -> None:
        accounts, account = self.accounts(), self.account
        if accounts.get(account.id) is account:  # not deleted since
            accounts.life_event(account, self.number)

    def stored(self) -> Stored:
        return self.Stored(account=self.account.id, number=self.number)

    @classmethod
    def rebuild(cls, data: Stored, context: Any) -> _LifeEvent:
        account = context.linked_account(data.account)
        if data.number >= len((account.profile_document or {}).get("timeline", [])):
            raise LookupError(f"linked account {data.account} has no life event {data.number}")
        return cls(context.part("accounts"), account, data.number)


@action_kind("pii-deletion")
class _PiiDeletion(msgspec.Struct, frozen=True):
    """The user's personal data deleted, `piiDeletionInterval` after an account linked."""

    accounts: Callable[[], LinkedAccounts]  # as _PushRefresh's
    identifier: str

    class Stored(Command, kw_only=True):
        identifier: str

    def __call__(self) -> None:
        self.accounts().delete_pii(self.identifier)

    def stored(self) -> Stored:
        return self.Stored(identifier=self.identifier)

    @classmethod
    def rebuild(cls, data: Stored, context: Any) -> _PiiDeletion:
        return cls(context.part("accounts"), data.identifier)


