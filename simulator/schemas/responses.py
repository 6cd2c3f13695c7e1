"""The answers (`data`) that have no request-side twin in api.py, as structs
(domain/shapes.py): the sandbox's own views of what a tenant stores (tenant, clock, journal
entry, event with its deliveries, scenario, processor link, ...) and the small answers of
its control plane and hosted flow.

The operations declare these as `response=` (routes/*.py); the OpenAPI document publishes
their derived schemas and tests/test_response_schemas.py checks every operation's answer
against them. A view takes its fields from the shape it shows wherever one exists (the
task record, the linked account, a scenario step, a fault rule), so each shape is written
once.
"""

from typing import Any

import msgspec

from ..domain.dates import DATE_TIME, calendar_day_field, date_time_field
from ..domain.accounts.data_profiles import PROFILE_SCHEMA
from ..domain.flow.sdk import FlowTask
from ..domain.accounts.data_records import LinkedAccountRecord
from ..domain.faults import FiredRule
from ..domain.shapes import UNSET, Answer, Count, Maybe, View, choice, field, of, raw, schema_of, view_of
from ..domain.tasks.states import (DEEPLINK_STEPS, SCENARIO_KINDS, STEP_STATUSES,
                             WRITTEN_PAYMENT_METHOD)
from ..domain.tasks.views import TaskStatus
from ..domain.tenants import TenantStats
from .api import (DELIVERY_STATES, CardTokenRecreationRequest, EndpointId, EndpointWrite,
                  ScenarioBindingRequest, WebhookFaultsRequest)
from .aggregator import Jwk
from .fixtures import ENVIRONMENTS
from .scenarios import STEP

Id = of(str, min_length=1)
DateTime = raw(DATE_TIME)  # the one form answers write (dates.py)
TRUE = raw({"const": True})
NULL = {"type": "null"}
COMPANY = {"$ref": "#/components/schemas/Company"}


def done(key: str, flag: str, description: str) -> type:
    """`{<key>: ..., <flag>: true}`: what a deletion or a reset answers."""
    return msgspec.defstruct(f"{flag.title()}{key.strip('_').title()}", [(key, Id), (flag, TRUE)],
                             bases=(Answer,), kw_only=True, rename={key: key, flag: flag},
                             namespace={"__doc__": description})


# -- tenants ------------------------------------------------------------------------------

class TenantView(Answer, kw_only=True):
    """A tenant and its credentials."""

    name: Id
    environment: choice(*ENVIRONMENTS)
    api_key: Id
    api_secret: Id
    products: list[str]
    signing: of(bool, "Webhooks carry x-hmac-signature-sha-256.")

    @classmethod
    def of(cls, tenant: Any) -> "TenantView":
        return view_of(cls, tenant, products=list(tenant.products))


TenantDeleted = done("name", "deleted", "The tenant is gone, with all of its state.")

# -- the clock ----------------------------------------------------------------------------


class VirtualClock(Answer, kw_only=True):
    """The tenant's clock (clock.py: Clock.describe)."""

    mode: choice("manual", "real")
    time_scale: of(float, "Virtual seconds per wall second (a real clock).", gt=0)
    now: DateTime
    timestamp: of(float, "`now` in seconds since the epoch.")


class ClockState(VirtualClock, kw_only=True):
    """The tenant's clock (clock.py: Clock.describe)."""

    pending_jobs: of(Count, "Jobs due that a run until idle waits for.")
    background_jobs: of(Count, "Periodic jobs (refreshes) that never end.")
    idle: of(bool, "No pending job.")


class ClockRun(ClockState, kw_only=True):
    jobs_run: Count
    events_emitted: Count
    complete: of(bool, "false: the work limit stopped the run (README: Limits); ask again.")


class ClockAdvanced(ClockRun, kw_only=True):
    remaining_seconds: of(float, "Of the seconds asked for, those not run yet.", ge=0)


# -- what the tenant keeps ----------------------------------------------------------------

class TenantsKept(Answer, kw_only=True):
    stored: Count
    max_created: Count
    expired_idle: of(Count, "Deleted for being idle.")


class Stats(TenantStats, kw_only=True):
    """Every bound of README > Limits, with what is stored and how many items went."""

    tenants: TenantsKept


class JournalEntry(Answer, kw_only=True):
    """A request received."""

    id: of(int, ge=1)
    time: DateTime
    method: str
    path: str
    query: dict[str, str]
    status: of(int, "0: a connection reset on purpose, never answered.", ge=0, le=599)
    duration_ms: of(float, ge=0)
    error_code: str | None
    body: of(Any, "The request body as it came: any JSON (a refused one's text; one longer "
             "than 16 KiB as `{truncated: <its first characters>}`).")
    warnings: of(list[str], "What was ignored (x-sandbox-warning).")
    fault: FiredRule | None


class RequestsVerified(Answer, kw_only=True):
    """The journal holds what POST /_sandbox/requests/verify described."""

    matched: of(list[int], "The ids of the requests that matched, oldest first.")


# -- events and their deliveries ----------------------------------------------------------

class EventBody(View, kw_only=True):
    """The webhook's JSON body; each event type's schema is
    GET /_sandbox/schemas/events/{eventType} (and this document's webhooks)."""

    event_type: str
    event_time: DateTime


class AggregatorWebhookBody(View, rename=None, kw_only=True):
    """The aggregator's own webhook (POST /aggregator-api/sandbox/item/fire_webhook), as it
    sent it to the item's webhook URL; its eventType is `<webhook_type>.<webhook_code>`."""

    webhook_type: str
    webhook_code: str
    item_id: Maybe[str] = UNSET
    environment: choice("sandbox", "production")


class Attempt(Answer, kw_only=True):
    """One attempt to deliver."""

    number: of(int, ge=1)
    time: raw(date_time_field("Virtual time it started."))
    wall_time: raw(date_time_field("Wall-clock time it left."))
    request_headers: dict[str, str]
    status: of(int | None, "The answer's; null: none came.")
    latency_ms: of(float, ge=0) | None
    error: str | None
    fault: of(str | None, "A delivery fault made on purpose.")


class Delivery(Answer, kw_only=True):
    """An event's delivery to one endpoint."""

    id: of(Id, "`<event id>.<number>`.")
    event_id: Id
    url: str
    state: choice(*(state for state in DELIVERY_STATES if state != "none"))
    replay: bool
    attempts: list[Attempt]
    next_attempt_at: raw(date_time_field("Virtual time of the next attempt (null: none due).",
                                         nullable=True))
    faults: of(list[str], "Delivery faults made on purpose (duplicate, out-of-order, "
               "delayed ...).")


class EventRecord(Answer, kw_only=True):
    """An event with its deliveries and every attempt."""

    id: of(Id, "Its ce-id.")
    event_type: str
    time: DateTime
    sequence: Count
    user_identifier: str | None
    task: str | None
    body: raw({"anyOf": [schema_of(EventBody), schema_of(AggregatorWebhookBody)]})
    delivery: choice(*DELIVERY_STATES, description="`none` (no endpoint), `pending`, `failed`, "
                     "`interrupted` (any delivery) or `delivered` (all).")
    deliveries: list[Delivery]


class Replayed(Answer, kw_only=True):
    event_id: Id
    event_type: str
    deliveries: of(list[Id], "The new deliveries' ids.")


class StoredEndpoint(EndpointWrite, kw_only=True):
    """An endpoint as registered (no `eventTypes`: every event type)."""

    id: EndpointId = field(name="_id")


class WebhookFaults(WebhookFaultsRequest, kw_only=True):
    # The plan as answered: each of its fields.
    __schema_extra__ = {"required": [f.encode_name
                                     for f in msgspec.structs.fields(WebhookFaultsRequest)]}

# -- scenarios and users ------------------------------------------------------------------

SCENARIO_STEP = {
    **STEP,
    "required": ["at"],
    "properties": {"at": {"type": "number", "minimum": 0,
                          "description": "Seconds after the task starts."},
                   **{name: spec for name, spec in STEP["properties"].items() if name != "after"},
                   "paymentMethod": WRITTEN_PAYMENT_METHOD}}


class Scenario(Answer, kw_only=True):
    """A scenario and its timeline."""

    name: Id
    description: str
    kind: choice(*SCENARIO_KINDS)
    products: of(list[str] | None, "The products whose tasks may run it (null: any).")
    outcome: choice(*STEP_STATUSES, "n/a",
                    description="The last status its steps set.")
    duration: of(float, ge=0)
    steps: list[raw(SCENARIO_STEP)]

    @classmethod
    def of(cls, scenario: Any) -> "Scenario":
        """A checked scenario (domain/states.py), each step as its file writes it."""
        return view_of(cls, scenario, products=None if scenario.products is None
                       else list(scenario.products),
                       steps=[{"at": step.at, **step.changes} for step in scenario.steps])


SCENARIO_BINDINGS = {"type": "object", "additionalProperties": schema_of(Id),
                     "description": "User identifier -> the scenario bound to their tasks."}


class ScenarioBinding(ScenarioBindingRequest, kw_only=True):
    identifier: Id


def _nullable_profile(description: str) -> Any:
    return raw({**PROFILE_SCHEMA, "type": ["object", "null"], "description": description})


class ProfileBinding(Answer, kw_only=True):
    """The data profile bound to the user's next linked accounts (all null: none)."""

    identifier: Id
    profile: of(str | None, "The named profile, if one was named.")
    data: _nullable_profile("The data given over it, if any.")
    document: _nullable_profile("What the user's linked accounts take: the data over the "
                                "profile.")


class ProfileUnbound(Answer, kw_only=True):
    identifier: Id
    removed: of(bool, "False: no profile was bound.")


class ProfileSummary(Answer, kw_only=True):
    name: Id
    description: str


class CardTokenRecreation(CardTokenRecreationRequest, kw_only=True):
    identifier: Id


PiiDeleted = done("identifier", "deleted", "The user's personal data is deleted.")


class UserRemoved(Answer, kw_only=True):
    """The user is gone, with their public tokens and what PUT /user stored."""

    identifier: Id
    removed: of(bool, "False: there was no such user (gone already).")


# -- companies ----------------------------------------------------------------------------

class CompanyWithStatus(View, kw_only=True):
    __schema_extra__ = {"allOf": [COMPANY]}

    maintenance_products: Maybe[of(list[str], "Under maintenance: the products it is "
                                   "for.")] = UNSET


CompanyDeleted = done("_id", "deleted", "The company is gone from this tenant's catalog.")

# -- linked accounts ----------------------------------------------------------------------


class DepositSwitchRemoved(Answer, kw_only=True):
    linked_account: Id
    removed: of(Id, "The deposit account's `_id`.")


# POST /_sandbox/linked-accounts/{accountId}/<action>: what each action answers.
LINKED_ACCOUNT_ACTIONS = {"disconnect": LinkedAccountRecord,
                          "reconnect": LinkedAccountRecord,
                          "refresh": LinkedAccountRecord,
                          "remove-deposit-switch": DepositSwitchRemoved}

# -- processor links ----------------------------------------------------------------------

LinkStatus = choice("processing", "completed", "error")


class ProcessorLinkRegistered(Answer, kw_only=True):
    id: Id = field(name="_id")
    status: raw({"const": "processing"})


class ProcessorLinksRemoved(Answer, kw_only=True):
    removed: list[Id]


class ProcessorLink(Answer, kw_only=True):
    """A processor link and how far its processing went."""

    id: Id = field(name="_id")
    status: LinkStatus
    created_at: DateTime
    stages: of(list[raw(STEP["properties"]["stage"])], "The stages that ran.")
    transactions: of(Count, "Transactions pulled.")
    error: Maybe[raw({**STEP["properties"]["aggregatorError"],
                      "description": "Why the aggregator failed it (status `error`)."})] = UNSET


PROCESSING_RESULTS = {  # fields beside `data`
    "status": schema_of(of(LinkStatus, "processing while any link processes, else completed "
                           "when any completed.")),
    "links": schema_of(list[ProcessorLink]),
}


class Linked(Answer, kw_only=True):
    processor_link: of(Id, "The link whose transactions show it.")


PayCycle = choice("weekly", "biweekly", "monthly", "unknown")
Confidence = of(float, ge=0, le=1)


class EmployerMatch(Linked, kw_only=True):
    """A payer of payroll deposits, matched to a catalog company."""

    company_id: Id
    name: str
    confidence: Confidence
    transactions_matched: of(int, ge=1)
    average_deposit_amount: float
    last_deposit_date: raw(calendar_day_field("The day of the latest deposit (the "
                                              "transactions' day)."))
    pay_cycle: PayCycle


class RecurringTransaction(Linked, kw_only=True):
    """An outgoing charge that repeats at a steady interval."""

    merchant: str
    company_id: str | None
    cadence: PayCycle
    amount: float
    last_date: raw(calendar_day_field("The day of the latest charge (the transactions' day)."))
    next_date: raw(calendar_day_field("The day the next charge is due, at the usual interval."))
    transactions: of(int, ge=2)
    confidence: Confidence


class WebhookKey(Answer, kw_only=True):
    """The key that signs the tenant's aggregator webhooks (their Plaid-Verification JWT):
    its id, the `kid` of each token's header, and its public half as
    /aggregator-api/webhook_verification_key/get answers it."""

    key_id: of(str, "The `kid` in the header of each webhook's Plaid-Verification JWT.")
    key: Jwk


class ProcessorToken(Answer, kw_only=True):
    """A processor token as the aggregator minted it."""

    processor_token: Id
    request_id: Id
    account_id: Id
    identifier: of(str | None, "The user it was minted for.")
    days_requested: of(int, ge=1)
    products: list[str]
    scenario: str | None
    revoked: bool


# -- the hosted flow ----------------------------------------------------------------------

class Refusal(Answer, kw_only=True):
    """Why the configured tasks cannot start at the company: the API's error."""

    code: Id
    message: str


class SessionUser(Answer, kw_only=True):
    identifier: Id


class SessionAccount(LinkedAccountRecord, kw_only=True):
    """A linked account as GET /linked-accounts shows it: the real record (GET
    /linked-account/list/{identifier}), with the sandbox's own fields beside it."""

    credentials_required: of(bool, "Its session does not resume without them.")


class SdkSession(Answer, kw_only=True):
    """Where the hosted flow starts."""

    step: choice(*DEEPLINK_STEPS, "task-progress", description="The step the flow opens at "
                 "(Initialized.step): the deeplink's, or for a linked account's reconnect "
                 "login-company, or task-progress when it resumes without credentials.")
    user: SessionUser
    company: raw({"anyOf": [COMPANY, NULL], "description": "The deeplink's company (or the "
                  "linked account's)."})
    refusal: Refusal | None
    linked_account: SessionAccount | None


class SdkCompany(Answer, kw_only=True):
    company: raw(COMPANY)
    refusal: Refusal | None


class SdkWorkflow(Answer, kw_only=True):
    """The tasks the hosted flow's sign-in started."""

    id: Id
    pending: of(Count, "Tasks a `finish` option holds back: they start when the task before "
                "them goes on.")
    tasks: list[FlowTask]


class LeftTask(Answer, kw_only=True):
    id: Id
    status: TaskStatus
    connected: bool


class SdkLeft(Answer, kw_only=True):
    task_workflow: Id
    tasks: list[LeftTask]


# -- the rest -----------------------------------------------------------------------------

class SnapshotRestored(Answer, kw_only=True):
    """What the restore put in place."""

    tenant: Id
    restored: TRUE
    clock: VirtualClock
    users: Count
    tasks: Count
    events: Count
    deliveries: Count
    linked_accounts: Count
    processor_links: Count
    pending_jobs: Count


class Index(Answer, kw_only=True):
    """Where to go."""

    dashboard: str
    openapi: str
    docs: str
    demo: str
    health: str
    sdk: str


DemoReset = done("tenant", "reset", "The demo tenant is back to its fixtures.")
