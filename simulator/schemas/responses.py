"""JSON Schemas of the answers (`data`) that have no request-side twin in api.py: the
sandbox's own views of what a tenant stores (tenant, clock, journal entry, event with its
deliveries, scenario, processor link, ...) and the small answers of its control plane and
hosted flow (draft 2020-12).

The operations declare these as `response=` (routes/*.py); the OpenAPI document publishes
them and tests/test_response_schemas.py checks every operation's answer against them. A
view takes its fields from the shape it shows wherever one exists (the task record, the
linked account, a scenario step, a fault rule), so each shape is written once.
"""

from __future__ import annotations

from typing import Any

from ..domain.faults import FAULTS_RECORD
from ..domain.states import DEEPLINK_STEPS
from ..domain.data_profiles import PROFILE_SCHEMA
from .api import (CARD_TOKEN_RECREATION_REQUEST, EVENTS_QUERY, SCENARIO_BINDING_REQUEST,
                  TASK_RECORD, WEBHOOK_ENDPOINTS_REQUEST, WEBHOOK_FAULTS_REQUEST)
from ..dates import DATE_TIME, calendar_day_field, date_time_field
from .fixtures import ENVIRONMENTS
from ..domain.data_records import LINKED_ACCOUNT_RECORD
from ..domain.payment_methods import WRITTEN_PAYMENT_METHOD
from .scenarios import SCENARIO_SCHEMA, STEP

_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_ID = {"type": "string", "minLength": 1}
_COUNT = {"type": "integer", "minimum": 0}
_DATE_TIME = DATE_TIME  # the one form answers write (dates.py)
_OR_NULL = {"type": "null"}
COMPANY = {"$ref": "#/components/schemas/Company"}


def answer(description: str | None = None, /, **properties: Any) -> dict[str, Any]:
    """An object whose fields are all there in every answer, and nothing else."""
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False,
                              "required": list(properties), "properties": properties}
    if description:
        schema["description"] = description
    return schema


def extended(schema: dict[str, Any], **properties: Any) -> dict[str, Any]:
    """`schema` (an `answer`) with more fields, all of them always there."""
    return {**schema, "required": [*schema["required"], *properties],
            "properties": {**schema["properties"], **properties}}


def with_optional(schema: dict[str, Any], **properties: Any) -> dict[str, Any]:
    """`schema` with more fields that an answer may lack."""
    return {**schema, "properties": {**schema["properties"], **properties}}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, _OR_NULL]}


def _done(key: str, flag: str, description: str) -> dict[str, Any]:
    """`{<key>: ..., <flag>: true}`: what a deletion or a reset answers."""
    return answer(description, **{key: _ID, flag: {"const": True}})


# -- tenants ------------------------------------------------------------------------------

TENANT = answer(
    "A tenant and its credentials (domain/tenants.py: Tenant.describe).",
    name=_ID, environment={"enum": ENVIRONMENTS}, apiKey=_ID, apiSecret=_ID,
    products=_STRINGS,
    signing={"type": "boolean", "description": "Webhooks carry x-hmac-signature-sha-256."})
TENANT_DELETED = _done("name", "deleted", "The tenant is gone, with all of its state.")

# -- the clock ----------------------------------------------------------------------------

VIRTUAL_CLOCK = answer(
    "The tenant's clock (clock.py: Clock.describe).",
    mode={"enum": ["manual", "real"]},
    timeScale={"type": "number", "exclusiveMinimum": 0,
               "description": "Virtual seconds per wall second (a real clock)."},
    now=_DATE_TIME,
    timestamp={"type": "number", "description": "`now` in seconds since the epoch."})
CLOCK = extended(
    VIRTUAL_CLOCK,
    pendingJobs={**_COUNT, "description": "Jobs due that a run until idle waits for."},
    backgroundJobs={**_COUNT, "description": "Periodic jobs (refreshes) that never end."},
    idle={"type": "boolean", "description": "No pending job."})
CLOCK_RUN = extended(
    CLOCK, jobsRun=_COUNT, eventsEmitted=_COUNT,
    complete={"type": "boolean", "description": "false: the work limit stopped the run "
                                                "(README: Limits); ask again."})
CLOCK_ADVANCED = extended(
    CLOCK_RUN,
    remainingSeconds={"type": "number", "minimum": 0,
                      "description": "Of the seconds asked for, those not run yet."})

# -- what the tenant keeps ----------------------------------------------------------------

_BOUNDED = answer(stored=_COUNT, max=_COUNT, evicted=_COUNT)
STATS = answer(
    "Every bound of README > Limits, with what is stored and how many items went.",
    events=extended(_BOUNDED, emitted=_COUNT),
    deliveries=answer(stored=_COUNT, inFlight=_COUNT),
    tasks=_BOUNDED, tokens=_BOUNDED, users=answer(stored=_COUNT, max=_COUNT),
    journal=_BOUNDED, pendingJobs=_COUNT,
    tenants=answer(stored=_COUNT, maxCreated=_COUNT,
                   expiredIdle={**_COUNT, "description": "Deleted for being idle."}))

_RULE = FAULTS_RECORD["properties"]["rules"]["items"]
FIRED_FAULT = {
    "type": "object",
    "additionalProperties": False,
    "required": ["rule", *(name for name in _RULE["required"]
                           if name not in ("fired", "remaining"))],
    "properties": {"rule": {**_COUNT, "description": "Its place in the rules."},
                   **{name: spec for name, spec in _RULE["properties"].items()
                      if name not in ("fired", "remaining")}},
    "description": "The API fault rule that fired on the request (PUT /_sandbox/faults/api).",
}
JOURNAL_ENTRY = answer(
    "A request received (domain/journal.py: JournalEntry.record).",
    id={"type": "integer", "minimum": 1}, time=_DATE_TIME, method=_STRING, path=_STRING,
    query={"type": "object", "additionalProperties": _STRING},
    status={"type": "integer", "minimum": 0, "maximum": 599,
            "description": "0: a connection reset on purpose, never answered."},
    durationMs={"type": "number", "minimum": 0},
    errorCode={"type": ["string", "null"]},
    body={"description": "The request body as it came: any JSON (a refused one's text; one "
                         "longer than 16 KiB as `{truncated: <its first characters>}`)."},
    warnings={**_STRINGS, "description": "What was ignored (x-sandbox-warning)."},
    fault=nullable(FIRED_FAULT))

# -- events and their deliveries ----------------------------------------------------------

EVENT_BODY = {
    "type": "object",
    "required": ["eventType", "eventTime"],
    "properties": {"eventType": _STRING, "eventTime": _DATE_TIME},
    "description": "The webhook's JSON body; each event type's schema is "
                   "GET /_sandbox/schemas/events/{eventType} (and this document's webhooks).",
}
AGGREGATOR_WEBHOOK_BODY = {
    "type": "object",
    "required": ["webhook_type", "webhook_code", "environment"],
    "properties": {"webhook_type": _STRING, "webhook_code": _STRING, "item_id": _STRING,
                   "environment": {"enum": ["sandbox", "production"]}},
    "description": "The aggregator's own webhook (POST /aggregator-api/sandbox/item/"
                   "fire_webhook), as it sent it to the item's webhook URL; its eventType is "
                   "`<webhook_type>.<webhook_code>`.",
}
_DELIVERY_STATE = EVENTS_QUERY["properties"]["delivery"]["enum"]  # and `none`: no delivery
ATTEMPT = answer(
    "One attempt to deliver (webhooks/dispatcher.py: Attempt.record).",
    number={"type": "integer", "minimum": 1},
    time=date_time_field("Virtual time it started."),
    wallTime=date_time_field("Wall-clock time it left."),
    requestHeaders={"type": "object", "additionalProperties": _STRING},
    status={"type": ["integer", "null"], "description": "The answer's; null: none came."},
    latencyMs={"type": ["number", "null"], "minimum": 0},
    error={"type": ["string", "null"]},
    fault={"type": ["string", "null"], "description": "A delivery fault made on purpose."})
DELIVERY = answer(
    "An event's delivery to one endpoint (webhooks/dispatcher.py: Delivery.record).",
    id={**_ID, "description": "`<event id>.<number>`."}, eventId=_ID, url=_STRING,
    state={"enum": [state for state in _DELIVERY_STATE if state != "none"]},
    replay={"type": "boolean"},
    attempts={"type": "array", "items": ATTEMPT},
    nextAttemptAt=date_time_field("Virtual time of the next attempt (null: none due).",
                                  nullable=True),
    faults={**_STRINGS, "description": "Delivery faults made on purpose (duplicate, "
                                       "out-of-order, delayed ...)."})
EVENT_RECORD = answer(
    "An event with its deliveries and every attempt (routes/webhooks.py: event_record).",
    id={**_ID, "description": "Its ce-id."}, eventType=_STRING, time=_DATE_TIME,
    sequence=_COUNT, userIdentifier={"type": ["string", "null"]},
    task={"type": ["string", "null"]}, body={"anyOf": [EVENT_BODY, AGGREGATOR_WEBHOOK_BODY]},
    delivery={"enum": _DELIVERY_STATE,
              "description": "`none` (no endpoint), `pending`, `failed`, `interrupted` (any "
                             "delivery) or `delivered` (all)."},
    deliveries={"type": "array", "items": DELIVERY})
REPLAYED = answer(eventId=_ID, eventType=_STRING,
                  deliveries={"type": "array", "items": _ID,
                              "description": "The new deliveries' ids."})

WEBHOOK_ENDPOINT_STORED = {
    **WEBHOOK_ENDPOINTS_REQUEST["properties"]["endpoints"]["items"],
    "required": ["_id", "url"],
    "description": "An endpoint as registered (no `eventTypes`: every event type).",
}
WEBHOOK_FAULTS = {**WEBHOOK_FAULTS_REQUEST,
                  "required": list(WEBHOOK_FAULTS_REQUEST["properties"])}

# -- scenarios and users ------------------------------------------------------------------

SCENARIO = answer(
    "A scenario and its timeline (scenarios/loader.py: Scenario.describe).",
    name=_ID, description=_STRING,
    kind={"enum": SCENARIO_SCHEMA["properties"]["kind"]["enum"]},
    products={"type": ["array", "null"], "items": _STRING,
              "description": "The products whose tasks may run it (null: any)."},
    outcome={"enum": [*STEP["properties"]["status"]["enum"], "n/a"],
             "description": "The last status its steps set."},
    duration={"type": "number", "minimum": 0},
    steps={"type": "array", "items": {
        **STEP,
        "required": ["at"],
        "properties": {"at": {"type": "number", "minimum": 0,
                              "description": "Seconds after the task starts."},
                       **{name: spec for name, spec in STEP["properties"].items()
                          if name != "after"},
                       "paymentMethod": WRITTEN_PAYMENT_METHOD}}})
SCENARIO_BINDINGS = {"type": "object", "additionalProperties": _ID,
                     "description": "User identifier -> the scenario bound to their tasks."}
SCENARIO_BINDING = answer(identifier=_ID,
                          scenario=SCENARIO_BINDING_REQUEST["properties"]["scenario"])
PROFILE_BINDING = answer(
    "The data profile bound to the user's next linked accounts (all null: none).",
    identifier=_ID,
    profile={"type": ["string", "null"], "description": "The named profile, if one was named."},
    data={**PROFILE_SCHEMA, "type": ["object", "null"],
          "description": "The data given over it, if any."},
    document={**PROFILE_SCHEMA, "type": ["object", "null"],
              "description": "What the user's linked accounts take: the data over the profile."})
PROFILE_UNBOUND = answer(identifier=_ID, removed={
    "type": "boolean", "description": "False: no profile was bound."})
PROFILE_SUMMARY = answer(name=_ID, description=_STRING)
CARD_TOKEN_RECREATION = answer(
    identifier=_ID, enabled=CARD_TOKEN_RECREATION_REQUEST["properties"]["enabled"])
PII_DELETED = _done("identifier", "deleted", "The user's personal data is deleted.")
USER_REMOVED = answer(
    "The user is gone, with their public tokens and what PUT /user stored.",
    identifier=_ID, removed={"type": "boolean",
                             "description": "False: there was no such user (gone already)."})

# -- companies ----------------------------------------------------------------------------

COMPANY_WITH_STATUS = {
    "allOf": [COMPANY],
    "properties": {"maintenanceProducts": {
        **_STRINGS, "description": "Under maintenance: the products it is for."}},
}
COMPANY_DELETED = _done("_id", "deleted", "The company is gone from this tenant's catalog.")

# -- linked accounts ----------------------------------------------------------------------

DEPOSIT_SWITCH_REMOVED = answer(linkedAccount=_ID,
                                removed={**_ID, "description": "The deposit account's `_id`."})
# POST /_sandbox/linked-accounts/{accountId}/<action>: what each action answers.
LINKED_ACCOUNT_ACTIONS = {"disconnect": LINKED_ACCOUNT_RECORD,
                          "reconnect": LINKED_ACCOUNT_RECORD,
                          "refresh": LINKED_ACCOUNT_RECORD,
                          "remove-deposit-switch": DEPOSIT_SWITCH_REMOVED}

# -- processor links ----------------------------------------------------------------------

_LINK_STATUS = {"enum": ["processing", "completed", "error"]}
PROCESSOR_LINK_REGISTERED = answer(_id=_ID, status={"const": "processing"})
PROCESSOR_LINKS_REMOVED = answer(removed={"type": "array", "items": _ID})
PROCESSOR_LINK = with_optional(
    answer("A processor link and how far its processing went "
           "(domain/processor_links.py: ProcessorLink.record).",
           _id=_ID, status=_LINK_STATUS, createdAt=_DATE_TIME,
           stages={"type": "array", "items": STEP["properties"]["stage"],
                   "description": "The stages that ran."},
           transactions={**_COUNT, "description": "Transactions pulled."}),
    error={**STEP["properties"]["aggregatorError"],
           "description": "Why the aggregator failed it (status `error`)."})
PROCESSING_RESULTS = {  # fields beside `data`
    "status": {**_LINK_STATUS, "description": "processing while any link processes, else "
                                              "completed when any completed."},
    "links": {"type": "array", "items": PROCESSOR_LINK},
}
_LINKED = {"processorLink": {**_ID, "description": "The link whose transactions show it."}}
EMPLOYER_MATCH = answer(
    "A payer of payroll deposits, matched to a catalog company.",
    companyId=_ID, name=_STRING, confidence={"type": "number", "minimum": 0, "maximum": 1},
    transactionsMatched={"type": "integer", "minimum": 1},
    averageDepositAmount={"type": "number"},
    lastDepositDate=calendar_day_field("The day of the latest deposit (the transactions' day)."),
    payCycle={"enum": ["weekly", "biweekly", "monthly", "unknown"]}, **_LINKED)
RECURRING_TRANSACTION = answer(
    "An outgoing charge that repeats at a steady interval.",
    merchant=_STRING, companyId={"type": ["string", "null"]},
    cadence=EMPLOYER_MATCH["properties"]["payCycle"], amount={"type": "number"},
    lastDate=calendar_day_field("The day of the latest charge (the transactions' day)."),
    nextDate=calendar_day_field("The day the next charge is due, at the usual interval."),
    transactions={"type": "integer", "minimum": 2},
    confidence=EMPLOYER_MATCH["properties"]["confidence"], **_LINKED)
PROCESSOR_TOKEN = answer(
    "A processor token as the aggregator minted it "
    "(domain/processor_links.py: ProcessorToken.record).",
    processorToken=_ID, requestId=_ID, accountId=_ID,
    identifier={"type": ["string", "null"], "description": "The user it was minted for."},
    daysRequested={"type": "integer", "minimum": 1}, products=_STRINGS,
    scenario={"type": ["string", "null"]}, revoked={"type": "boolean"})

# -- the hosted flow ----------------------------------------------------------------------

REFUSAL = nullable(answer(
    "Why the configured tasks cannot start at the company: the API's error.",
    code=_ID, message=_STRING))
SDK_SESSION = answer(
    "Where the hosted flow starts.",
    step={"enum": list(DEEPLINK_STEPS)}, user=answer(identifier=_ID),
    company={**nullable(COMPANY), "description": "The deeplink's company (or the linked "
                                                 "account's)."},
    refusal=REFUSAL,
    linkedAccount=nullable(extended(
        LINKED_ACCOUNT_RECORD,
        credentialsRequired={"type": "boolean",
                             "description": "Its session does not resume without them."})))
SDK_COMPANY = answer(company=COMPANY, refusal=REFUSAL)
SDK_WORKFLOW = answer(
    "The tasks the hosted flow's sign-in started.",
    id=_ID, pending={**_COUNT, "description": "Tasks a `finish` option holds back: they "
                                              "start when the task before them goes on."},
    tasks={"type": "array", "items": {
        **TASK_RECORD,
        "required": [*TASK_RECORD["required"], "highLatency"],
        "properties": {**TASK_RECORD["properties"], "highLatency": {
            "type": "boolean", "description": "Signing in for longer than the flow waits "
                                              "quietly (its high-latency view)."}}}})
SDK_LEFT = answer(taskWorkflow=_ID, tasks={"type": "array", "items": answer(
    id=_ID, status=TASK_RECORD["properties"]["status"], connected={"type": "boolean"})})

# -- the rest -----------------------------------------------------------------------------

SNAPSHOT_RESTORED = answer(
    "What the restore put in place.",
    tenant=_ID, restored={"const": True}, clock=VIRTUAL_CLOCK, users=_COUNT, tasks=_COUNT,
    events=_COUNT, deliveries=_COUNT, linkedAccounts=_COUNT, processorLinks=_COUNT,
    pendingJobs=_COUNT)
INDEX = answer("Where to go.", dashboard=_STRING, openapi=_STRING, docs=_STRING, demo=_STRING,
               health=_STRING, sdk=_STRING)
DEMO_RESET = _done("tenant", "reset", "The demo tenant is back to its fixtures.")
