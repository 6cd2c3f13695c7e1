"""What a tenant's run reached, for the customer suite's coverage report (GET
/_sandbox/coverage; the kit merges the tenants' tallies: kit/coverage.py).

Everything is read from what the tenant already records, so a reader can recount it from
the public reads: the tasks (GET /_sandbox/tasks: the scenarios run to a final status and
the products used), the ledger (GET /_sandbox/events: the failure reasons a
task-status-updated carried, the event types delivered with a 2xx, the delivery faults)
and the journal (GET /_sandbox/requests: the API faults fired, the profiles bound).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..accounts.data_profiles import LIFE_EVENT_KINDS
from ..accounts.linked_accounts import life_event_moments
from ..faults import KINDS as API_FAULT_KINDS
from ..shapes import Answer, of
from ..tasks.states import FAILED, FINAL

# The delivery faults (domain/webhooks/outbox.py writes `delayed <seconds>s`).
WEBHOOK_FAULT_KINDS = ("duplicate", "out-of-order", "delayed")
STATUS_EVENT = "task-status-updated"
PROFILE_PATH = "/_sandbox/users/{identifier}/profile"


class CoverageTally(Answer, kw_only=True):
    """What one tenant's run reached, each as name -> how many."""

    scenarios: of(dict[str, int], "Scenario -> its tasks that reached a final status.")
    products: of(dict[str, int], "Product -> its tasks.")
    reasons: of(dict[str, int], "Failure reason -> the task-status-updated events (status "
                "failed) that carried it.")
    event_types: of(dict[str, int], "Event type -> its events with a delivery answered 2xx.")
    api_faults: of(dict[str, int], "API fault kind (status, latencyMs, reset) -> the "
                   "journaled requests it faulted.")
    webhook_faults: of(dict[str, int], "Delivery fault (duplicate, out-of-order, delayed) -> "
                       "the deliveries it was made on.")
    profiles: of(dict[str, int], "Named data profile -> the journaled bindings (2xx) of it.")
    life_events: of(dict[str, int], "Life event kind (employment, income, depositAccounts, "
                    "identity, taxes, job) -> the linked accounts' timeline entries of it "
                    "whose moment has come.") = {}


class ScenarioEntry(Answer, kw_only=True):
    products: list[str]
    outcome: str
    reason: of(str | None, "The reason its task fails with (a failed outcome).")


class CoverageCatalog(Answer, kw_only=True):
    """What there is to reach on this server: the task scenarios (with the products they fit
    and the reason they end in), the event types, the fault kinds and the profiles."""

    scenarios: dict[str, ScenarioEntry]
    event_types: list[str]
    api_faults: list[str]
    webhook_faults: list[str]
    profiles: list[str]
    life_events: list[str]


class Coverage(Answer, kw_only=True):
    tally: CoverageTally
    catalog: of(CoverageCatalog | None, "With `catalog=true`; else null.")


def failure_reason(scenario: Any) -> str | None:
    """The reason a scenario's task fails with: its last failing step's (None: it never
    fails, or a patch corrects it)."""
    if scenario.outcome != FAILED:
        return None
    return next((s.get("reason") for s in reversed(scenario.steps) if s.get("status") == FAILED),
                None)


def catalog(rules: Any, event_types: Iterable[str]) -> CoverageCatalog:
    """The catalog a tally is measured against (rules: the tenant's frozen Rules)."""
    return CoverageCatalog(
        scenarios={name: ScenarioEntry(products=list(s.products or ()), outcome=s.outcome,
                                       reason=failure_reason(s))
                   for name, s in rules.scenarios.items() if s.kind == "task"},
        event_types=list(event_types), api_faults=list(API_FAULT_KINDS),
        webhook_faults=list(WEBHOOK_FAULT_KINDS), profiles=list(rules.data_profiles),
        life_events=[*LIFE_EVENT_KINDS, "job"])


def of_tenant(tenant: Any) -> CoverageTally:
    """A tenant's tally as it stands, from its tasks, its ledger (events and their
    deliveries), its journal and its linked accounts (attempts in flight are not waited for)."""
    scenarios: Counter[str] = Counter()
    products: Counter[str] = Counter()
    for task in tenant.tasks.values():
        products[task.product] += 1
        if task.status in FINAL:
            scenarios[task.scenario] += 1
    reasons: Counter[str] = Counter()
    delivered: Counter[str] = Counter()
    webhook_faults: Counter[str] = Counter()
    for event in tenant.events.by_id.values():
        if event.type == STATUS_EVENT:
            data = event.body.get("data") or {}
            if data.get("status") == FAILED and data.get("reason"):
                reasons[data["reason"]] += 1
        answered = False
        for delivery in tenant.webhooks.deliveries.get(event.id, ()):
            answered = answered or any(a.status is not None and 200 <= a.status < 300
                                       for a in delivery.attempts)
            for fault in delivery.faults:
                webhook_faults[fault.split(" ", 1)[0]] += 1
        if answered:
            delivered[event.type] += 1
    api_faults: Counter[str] = Counter()
    profiles: Counter[str] = Counter()
    for entry in tenant.journal.query(limit=tenant.journal.max_entries):
        if entry.fault:
            api_faults.update(kind for kind in API_FAULT_KINDS if kind in entry.fault)
        elif (entry.method == "PUT" and 200 <= entry.status < 300 and is_profile_path(entry.path)
              and isinstance(entry.body, dict) and isinstance(entry.body.get("profile"), str)):
            profiles[entry.body["profile"]] += 1
    return CoverageTally(scenarios=dict(scenarios), products=dict(products),
                         reasons=dict(reasons), event_types=dict(delivered),
                         api_faults=dict(api_faults), webhook_faults=dict(webhook_faults),
                         profiles=dict(profiles), life_events=life_events(
                             tenant.accounts.values(), tenant.clock.timestamp()))


def life_events(accounts: Iterable[Any], now: float) -> dict[str, int]:
    """The life events the linked accounts' profiles scripted whose moment has come (each
    entry's kinds: a raise and a move of the pay in one entry count once each)."""
    found: Counter[str] = Counter()
    for account in accounts:
        for moment, number in life_event_moments(account):
            if moment <= now:
                entry = account.profile_document["timeline"][number]
                found.update(kind for kind in entry if kind != "at")
    return dict(found)


def is_profile_path(path: str) -> bool:
    """PUT /_sandbox/users/{identifier}/profile (the identifier may hold anything but /)."""
    head, _, tail = PROFILE_PATH.partition("{identifier}")
    return (path.startswith(head) and path.endswith(tail)
            and "/" not in path[len(head):len(path) - len(tail)])
