"""The control plane under /_sandbox: the sandbox's console, scoped to the caller's tenant."""

from __future__ import annotations

from functools import partial
from typing import Any

import msgspec

from .. import bundles, snapshot
from .. import snapshot_document
from ...clock import isoformat
from ...domain.webhooks import coverage
from ...domain.companies import company_admin
from ...domain.webhooks.coverage import Coverage
from ...domain.webhooks.event_types import event_types
from ...domain.changes import EVENT, TASK
from ...domain.companies.companies import full_record
from ...domain.journal import MAX_ENTRIES, RequestsVerification
from ...domain.shapes import UNSET, given, view_of
from ...errors import ValidationFailed, field_detail
from ...domain.tasks.views import TaskRecord
from ...schemas.api import (BundleQuery, COMPANY_CREATE_REQUEST, COMPANY_UPDATE_REQUEST,
                           CardTokenRecreationRequest, ClockAdvanceRequest, CompanyStatusRequest,
                           CoverageQuery,
                           EventsQuery, JournalQuery, ProfileBindingRequest,
                           ScenarioBindingRequest, TasksQuery, TenantRequest)
from ...schemas.responses import (CardTokenRecreation, ClockState, ClockAdvanced, ClockRun,
                                 CompanyDeleted, CompanyWithStatus, EventRecord,
                                 JournalEntry, ProfileBinding, RequestsVerified, ProfileSummary,
                                 ProfileUnbound, Scenario, ScenarioBinding, SCENARIO_BINDINGS,
                                 SnapshotRestored, Stats, TenantsKept, TenantView, TenantDeleted)
from ...validate import parse_time
from ..operations import CONTROL, Reply, operation, serve_file, serve_script_and_styles
from ..examples import USER, Example, From
from .companies import COMPANY
from .sdk import CallbackRecord
from .webhooks import event_record

DOCS_TENANT = "docs-example"                # made by POST /_sandbox/tenants's example
DOCS_COMPANY = "6410a0000000000000000d0c"   # made by POST /_sandbox/companies's example
EVERYONE = {"type": ["string", "null"], "description": "The scenario bound to every user "
            "(PUT /_sandbox/scenario); a user's own binding wins."}
TOTAL = {"total": {"type": "integer"}}
CURSOR = {**TOTAL, "revision": {"type": "integer", "description": "With `after`: the next cursor."},
          "reset": {"type": "boolean", "description": "With `after`: the cursor was stale "
                                                      "(a reset or restore); a full read."}}


@operation("POST", "/_sandbox/tenants", "Create a tenant (its own keys and state)",
           body=TenantRequest, status=201, errors=(429,), **CONTROL,
           example=Example({"name": DOCS_TENANT, "products": ["deposit", "verify"]}))
async def create_tenant(tenant, body, sandbox) -> TenantView:
    return TenantView.of(sandbox.registry.create_tenant(body, creator=tenant))


@operation("GET", "/_sandbox/tenant", "The tenant these keys belong to", **CONTROL)
async def current_tenant(tenant) -> TenantView:
    """Which tenant these keys are (the pytest plugin's tenants, scripts that got keys)."""
    return TenantView.of(tenant)


@operation("DELETE", "/_sandbox/tenants/{name}", "Delete a tenant (one these keys made, "
           "or their own)", errors=(404, 409), **CONTROL,
           example=Example(parameters={"name": DOCS_TENANT}))
async def delete_tenant(tenant, params, sandbox) -> TenantDeleted:
    sandbox.registry.delete(params["name"], caller=tenant)
    return TenantDeleted(name=params["name"], deleted=True)


@operation("POST", "/_sandbox/reset", "Reset this tenant to its fixtures", **CONTROL)
async def reset(tenant, sandbox) -> TenantView:
    return TenantView.of(sandbox.registry.reset(tenant))


@operation("GET", "/_sandbox/requests", "Requests received, newest first",
           query=JournalQuery, **CONTROL, example=Example(parameters={"limit": 10}))
async def requests_journal(tenant, query) -> list[JournalEntry]:
    entries = tenant.journal.query(path=given(query.path), method=given(query.method),
                                   status=given(query.status), limit=query.limit)
    return [view_of(JournalEntry, entry) for entry in entries]


@operation("POST", "/_sandbox/requests/verify", "Check that requests like this one were "
           "received (the nearest others when not)", body=RequestsVerification,
           errors=(422,), **CONTROL,
           example=Example(
               {"method": "POST", "path": "/task/create", "body": {"identifier": USER}}))
async def verify_requests(tenant, body) -> RequestsVerified:
    """The journal (GET /_sandbox/requests) holds a request of this `method` and `path`
    (a `{name}` segment matches any one), with the `query` parameters and the `body`
    fields given (others are not looked at; an array matches item for item), at least
    once or `times` exactly. When not: 422 `not-called` with `matched` (the ids that did)
    and `nearMisses`, the 3 nearest other requests, each with every JSON path where it
    differs (`$.method`, `$.path`, `$.query.<name>`, `$.body...`). These calls themselves
    are journaled and never matched. The Python plugin's `assert_called` asks this."""
    return RequestsVerified(matched=[entry.id for entry in tenant.journal.verify(body)])


# -- snapshots ----------------------------------------------------------------------------

@operation("GET", "/_sandbox/snapshot", "Export this tenant's whole state",
           response=snapshot_document.snapshot_schema, **CONTROL)
async def get_snapshot(tenant, sandbox) -> dict:
    """Taken between two runs of the clock, once the webhook attempts in flight finished:
    users, tokens, tasks and workflows with their history, the pending jobs as data
    (scenario cursors, retries, refreshes), linked accounts, processor links and tokens,
    the event ledger with deliveries and attempts, endpoints and faults, the seeded
    generators' states and the counters (README: Snapshots and --state-file)."""
    return await snapshot.take_settled(tenant, sandbox)


@operation("POST", "/_sandbox/snapshot", "Restore an exported state, exactly",
           errors=(400, 409, 413, 415, 422, 429), **CONTROL,
           example=Example(after=From("GET", "/_sandbox/snapshot", body="$response.body#/data")))
async def restore_snapshot(tenant, request, sandbox) -> SnapshotRestored:
    """The body is a document of GET /_sandbox/snapshot, up to the largest the server's
    bounds allow (152 MiB at the defaults); one large restore at a time (429
    `restore-busy`). The tenant keeps its name and keys. 422 `invalid-snapshot` names the
    fields at fault (50 at most, and how many more); 409
    `snapshot-incompatible` for another format version, environment or seed, 409
    `snapshot-conflict` when its public tokens are another tenant's."""
    return await snapshot.restore_settled(tenant, sandbox, request)


# -- bundles: a failed test that reopens (README: Failed tests that reopen) ------------------

@operation("GET", "/_sandbox/bundle", "This tenant as a failed test's bundle: its snapshot, "
           "journal, ledger, clock and bindings", query=BundleQuery,
           response=bundles.bundle_schema, **CONTROL,
           example=Example(parameters={"test": "tests/test_app.py::test_refund"}))
async def get_bundle(tenant, query, sandbox) -> dict:
    """Taken as GET /_sandbox/snapshot is (between two runs of the clock, the attempts in
    flight finished): the snapshot, with the journal and the ledger as GET
    /_sandbox/requests and GET /_sandbox/events show them (oldest first), the clock, the
    scenario bindings and the seed. No key of the tenant is in it; a URL's user
    information is redacted. The pytest plugin writes one per failed test; `payroll-sandbox
    serve --open-bundle FILE` restores it."""
    return await snapshot.take_settled(tenant, sandbox,
                                       partial(bundle_of, test=given(query.test, "")))


def bundle_of(tenant, sandbox, test: str) -> dict:
    """The tenant's bundle as it is now (synchronous: at a job boundary), as JSON builtins."""
    journal = reversed(tenant.journal.query(limit=MAX_ENTRIES))
    callbacks = tenant.callbacks.query(limit=len(tenant.callbacks) or 1)
    views = msgspec.to_builtins({
        "clock": _clock_record(tenant),
        "requests": [view_of(JournalEntry, entry) for entry in journal],
        "events": [event_record(sandbox.dispatcher, tenant, e) for e in tenant.events.query()],
        "callbacks": [view_of(CallbackRecord, entry) for entry in callbacks]})
    return bundles.document(test=test, tenant=tenant.name, seed=sandbox.registry.seed,
                            bindings=dict(tenant.tasks.bindings),
                            snapshot=snapshot.take(tenant, sandbox), **views)


# -- the clock ----------------------------------------------------------------------------

@operation("GET", "/_sandbox/clock", "The virtual clock", **CONTROL)
async def clock(tenant) -> ClockState:
    return _clock_record(tenant)


@operation("POST", "/_sandbox/clock/advance", "Move the clock forward (what falls due "
           "runs, in order)", body=ClockAdvanceRequest, **CONTROL,
           example=Example({"seconds": 60}))
async def advance_clock(tenant, body) -> ClockAdvanced:
    """Stops at the work limit (README: Limits) with `complete: false` and the
    `remainingSeconds` to ask for next; the clock stands at the last job it ran."""
    target = tenant.clock.timestamp() + body.seconds
    result = await tenant.runner.advance(body.seconds)
    return _clock_record(tenant, ClockAdvanced, **_run(result), remaining_seconds=round(
        max(0.0, target - tenant.clock.timestamp()), 3))


@operation("POST", "/_sandbox/clock/run-until-idle", "Run the clock until nothing is pending",
           **CONTROL)
async def run_until_idle(tenant) -> ClockRun:
    result = await tenant.runner.run_until_idle()
    return _clock_record(tenant, ClockRun, **_run(result))


def _run(result) -> dict:
    """What a run of the clock did: a ClockRun's fields."""
    return {"jobs_run": result.jobs, "events_emitted": result.events, "complete": result.complete}


@operation("GET", "/_sandbox/stats", "What this tenant stores, and its limits", **CONTROL)
async def stats(tenant, sandbox) -> Stats:
    """Every bound of README > Limits with what is stored and how many items went."""
    registry = sandbox.registry
    return view_of(Stats, tenant.stats(), tenants=TenantsKept(
        stored=len(registry.tenants), max_created=registry.max_tenants,
        expired_idle=registry.expired))


def _clock_record(tenant, view: type = ClockState, **more) -> ClockState:
    """The tenant's clock and its timeline (and what a view of them adds: `more`)."""
    clock, timeline = tenant.clock, tenant.timeline
    return view_of(view, clock, now=isoformat(clock.timestamp()), timestamp=clock.timestamp(),
                   pending_jobs=timeline.busy, background_jobs=len(timeline) - timeline.busy,
                   idle=timeline.idle, **more)


# -- events -------------------------------------------------------------------------------

@operation("GET", "/_sandbox/events", "Events sent, with their deliveries", query=EventsQuery,
           envelope=CURSOR, **CONTROL, example=Example(parameters={"user": USER, "limit": 10}))
async def list_events(tenant, query, sandbox) -> Reply[list[EventRecord]]:
    """Filters combine. Without `after`, the newest `limit` events, oldest first. With
    `after` (start with 0), the events emitted or delivered since that revision, in the
    order of their latest change, the first `limit` of them; the envelope's `revision` is
    the cursor of the next read (past `limit`, it goes on from the last one shown), and
    `reset: true` says the cursor predates a reset or restore: this read is a full one."""
    since = parse_time(query.since, "$.since") if query.since is not UNSET else None
    ledger = tenant.events
    read = _changes_since(tenant, query, EVENT, ledger.by_id, changing="delivery")
    events = ledger.query(event_type=given(query.type), user=given(query.user),
                          task=given(query.task), since=since, among=read.items)
    if query.delivery is not UNSET:
        state = tenant.webhooks
        events = [e for e in events if state.state_of(e.id) == query.delivery]
    shown = read.page(events, query.limit)
    records = [event_record(sandbox.dispatcher, tenant, e) for e in shown]
    return Reply(records, extra={"total": len(events), **read.envelope(shown, events)})


@operation("GET", "/_sandbox/events/{eventId}", "An event and its deliveries",
           errors=(404,), **CONTROL)
async def get_event(tenant, params, sandbox) -> EventRecord:
    return event_record(sandbox.dispatcher, tenant, tenant.events.get(params["eventId"]))


# -- scenarios ----------------------------------------------------------------------------

@operation("GET", "/_sandbox/scenarios", "Scenarios, and the users bound to one",
           envelope={"bindings": SCENARIO_BINDINGS, "everyone": EVERYONE}, **CONTROL)
async def list_scenarios(tenant, sandbox) -> Reply[list[Scenario]]:
    return Reply([Scenario.of(s) for s in tenant.rules.scenarios.values()],
                 extra={"bindings": dict(tenant.tasks.bindings), "everyone": tenant.tasks.everyone})


@operation("PUT", "/_sandbox/scenario", "Bind a scenario to every user's next tasks",
           body=ScenarioBindingRequest, **CONTROL,
           example=Example({"scenario": None}))  # every user unbound
async def bind_scenario_for_everyone(tenant, body) -> ScenarioBindingRequest:
    """Below the request's `scenario` and a user's own binding, above the SDK login's
    username and the company's default (the pytest plugin's scenario matrix binds each
    item's scenario so)."""
    tenant.tasks.bind_everyone(body.scenario)
    return ScenarioBindingRequest(scenario=body.scenario)


@operation("PUT", "/_sandbox/users/{identifier}/scenario", "Bind a scenario to a user's next "
           "tasks", body=ScenarioBindingRequest, **CONTROL,
           example=Example({"scenario": "happy-path"}))
async def bind_scenario(tenant, params, body, sandbox) -> ScenarioBinding:
    identifier = params["identifier"]
    tenant.tasks.bind(identifier, body.scenario)
    return ScenarioBinding(identifier=identifier, scenario=body.scenario)


# -- coverage (the customer suite's report: kit/coverage.py merges the tenants' tallies) ----

@operation("GET", "/_sandbox/coverage", "What this tenant's run reached: scenarios, failure "
           "reasons, event types delivered, faults, profiles", query=CoverageQuery, **CONTROL)
async def read_coverage(tenant, query, sandbox) -> Coverage:
    """Counted from what GET /_sandbox/tasks, /_sandbox/events and /_sandbox/requests show
    (domain/webhooks/coverage.py), as it stands (attempts in flight are not waited for); with
    `catalog=true`, what there is to reach on this server as well."""
    found = coverage.of_tenant(tenant)
    known = None
    if query.catalog == "true":
        known = coverage.catalog(tenant.rules, event_types(sandbox.registry.service.aggregator))
    return Coverage(tally=found, catalog=known)


# -- data profiles (DESIGN.md: Payroll data you choose) ------------------------------------------

@operation("GET", "/_sandbox/profiles", "The named data profiles, a line each", **CONTROL)
async def list_profiles(tenant) -> list[ProfileSummary]:
    return tenant.accounts.profile_names()


@operation("PUT", "/_sandbox/users/{identifier}/profile", "Bind a data profile to a user's "
           "next linked accounts", body=ProfileBindingRequest, **CONTROL,
           example=Example(
               {"profile": "salaried", "data": {"income": {"income": 85000, "incomeType": "yearly",
                                                           "payCycle": "biweekly"}}}))
async def bind_profile(tenant, params, body) -> ProfileBinding:
    """`profile` names one of GET /_sandbox/profiles, `data` gives records of your own (over
    the named profile when both); the user's next linked accounts, through the API and the
    hosted flow alike, take it. A contradiction answers 422 with its JSON path and nothing
    changes."""
    return tenant.accounts.bind_profile(params["identifier"], given(body.profile),
                                        given(body.data))


@operation("GET", "/_sandbox/users/{identifier}/profile", "The data profile bound to a user",
           **CONTROL)
async def read_profile(tenant, params) -> ProfileBinding:
    return tenant.accounts.profile_binding(params["identifier"])


@operation("DELETE", "/_sandbox/users/{identifier}/profile", "Unbind a user's data profile "
           "(the next linked accounts come from the seed)", **CONTROL)
async def unbind_profile(tenant, params) -> ProfileUnbound:
    identifier = params["identifier"]
    return ProfileUnbound(identifier=identifier, removed=tenant.accounts.unbind_profile(identifier))


@operation("PUT", "/_sandbox/users/{identifier}/card-token-recreation", "Turn a user's card "
           "token recreation off (payment-token-expired) or on",
           body=CardTokenRecreationRequest, **CONTROL, example=Example({"enabled": True}))
async def card_token_recreation(tenant, params, body) -> CardTokenRecreation:
    """Card tokens are recreated automatically (spec: payment-token-expired, "Recreation is
    normally automatic"); switched off, a card older than 24 hours fails the task."""
    identifier = params["identifier"]
    tenant.tasks.recreate_card_tokens(identifier, body.enabled)
    return CardTokenRecreation(identifier=identifier, enabled=body.enabled)


# -- companies ----------------------------------------------------------------------------

@operation("POST", "/_sandbox/companies", "Add a company (company-created)",
           body=COMPANY_CREATE_REQUEST, status=201, settles=True, response=COMPANY,
           errors=(404, 409), **CONTROL,
           example=Example(
               {"_id": DOCS_COMPANY, "name": "Docs Example Co", "tags": ["gig-economy"]}))
async def create_company(tenant, body, sandbox) -> dict:
    _check_default_scenario(tenant, body)
    company = company_admin.create_company(tenant.companies, tenant.emit, tenant.ids.object_id,
                                           sandbox.registry.service, body)
    return full_record(company, tenant.manual_deposits)


@operation("PATCH", "/_sandbox/companies/{companyId}", "Change a company (company-updated)",
           body=COMPANY_UPDATE_REQUEST, settles=True, response=COMPANY, errors=(404,), **CONTROL,
           example=Example(
               {"name": "Docs Example Company"}, parameters={"companyId": DOCS_COMPANY}))
async def update_company(tenant, params, body, sandbox) -> dict:
    _check_default_scenario(tenant, body)
    company = company_admin.update_company(tenant.companies, tenant.emit, sandbox.registry.service,
                                           params["companyId"], body)
    return full_record(company, tenant.manual_deposits)


def _check_default_scenario(tenant, body: dict) -> None:
    if "defaultScenario" in body:
        tenant.tasks.require_scenario(body["defaultScenario"], "$.defaultScenario")


@operation("DELETE", "/_sandbox/companies/{companyId}", "Remove a company (company-deleted)",
           settles=True, errors=(404,), **CONTROL,
           example=Example(parameters={"companyId": DOCS_COMPANY}))
async def delete_company(tenant, params) -> CompanyDeleted:
    company_admin.delete_company(tenant.companies, tenant.emit, params["companyId"])
    return CompanyDeleted(_id=params["companyId"], deleted=True)


@operation("POST", "/_sandbox/companies/{companyId}/status", "Put a company under maintenance, "
           "disable it or bring it back", body=CompanyStatusRequest, settles=True,
           errors=(404,), **CONTROL, example=Example({"status": "operational"}))
async def company_status(tenant, params, body) -> CompanyWithStatus:
    company = company_admin.set_company_status(tenant.companies, tenant.emit,
                                               params["companyId"], body.status,
                                               given(body.products))
    record = full_record(company, tenant.manual_deposits)
    if company.maintenance_products:
        record["maintenanceProducts"] = list(company.maintenance_products)
    return record


# -- tasks and the dashboard ----------------------------------------------------------------

@operation("GET", "/_sandbox/tasks", "Tasks of this tenant, newest first", query=TasksQuery,
           envelope=CURSOR, **CONTROL, example=Example(parameters={"user": USER, "limit": 10}))
async def list_tasks(tenant, query) -> Reply[list[TaskRecord]]:
    """Every task of the tenant, newest first (`status`, `user`, `limit` filters); with
    `after`, the tasks created or moved since that revision, as GET /_sandbox/events."""
    read = _changes_since(tenant, query, TASK, tenant.tasks, changing="status")
    candidates = reversed(list(tenant.tasks.values())) if read.items is None else read.items
    tasks = [t for t in candidates
             if (query.status is UNSET or t.status == query.status)
             and (query.user is UNSET or t.identifier == query.user)]
    shown = tasks[:query.limit]
    return Reply([TaskRecord.of(t) for t in shown], extra={"total": len(tasks),
                                                     **read.envelope(shown, tasks)})


class _ChangesRead(msgspec.Struct, frozen=True):
    """What an `after` read looks at (domain/changes.py); without `after`, everything."""

    tenant: Any
    kind: str
    after: int | None           # the reader's cursor, if it gave a current one
    reset: bool | None          # None: no `after` given
    items: list | None          # the items changed since `after`, in order; None: all

    def page(self, items: list, limit: int) -> list:
        """An `after` read shows the oldest changes first; a full one, the newest items."""
        return items[:limit] if self.after is not None else items[-limit:]

    def envelope(self, shown: list, matched: list) -> dict:
        """An `after` read's cursor: `revision` for the next read, and `reset`."""
        if self.reset is None:
            return {}
        changes = self.tenant.changes
        revision = changes.revision
        if self.after is not None and len(shown) < len(matched):
            revision = changes.revision_of(self.kind, shown[-1].id)  # the rest next time
        return {"revision": revision, "reset": self.reset}


def _changes_since(tenant, query: Any, kind: str, stored: dict, changing: str) -> _ChangesRead:
    """The items of `stored` changed after `query.after`, if the cursor is current.
    `changing` names the filter on what a change moves (a delivery's state, a task's
    status): with `after` it is refused, since a reader would never hear that an item
    left it."""
    if query.after is UNSET:
        return _ChangesRead(tenant, kind, None, None, None)
    if getattr(query, changing) is not UNSET:
        raise ValidationFailed(f"`{changing}` cannot be combined with `after`.", details=[
            field_detail(f"$.{changing}", "filters on what a change moves: an item that "
                         "leaves it would never be read again; filter what comes back",
                         location="query")])
    changes = tenant.changes
    if not changes.current(kind, query.after):
        return _ChangesRead(tenant, kind, None, True, None)
    items = [stored[key] for key in changes.since(kind, query.after) if key in stored]
    return _ChangesRead(tenant, kind, query.after, False, items)


serve_file("/_sandbox/", "The dashboard (a page that asks for the keys)", "text/html",
           "dashboard.html", tags=CONTROL["tags"])
serve_script_and_styles("/_sandbox/dashboard", "dashboard's", tags=CONTROL["tags"])
