"""The shapes of request bodies, query parameters and answers, as typed structs
(domain/shapes.py), and their JSON Schemas (draft 2020-12), derived from them.

Handlers validate against these schemas and the OpenAPI document publishes the same
objects, so what is documented is what is enforced. A struct is the one declaration of
its shape; its schema is `schema_of(struct)`, derived when an operation first needs it.
"""

from typing import Any

from ..domain.companies.companies import COMPANY_STATUSES, SCOPES, CompanySummary
from ..domain.accounts.data_profiles import PROFILE_SCHEMA
from ..domain.journal import NearMiss
from ..domain.companies.search import SearchRequest
from ..domain.shapes import (EVENT_TYPES, PROCESSOR_TOKENS, PRODUCTS, TASK_SCENARIOS, UNSET,
                             AnyDateTime, Command, DateTime, Identifier, Maybe, Metadata, Name,
                             Text, Texts, UserIdentifier, View, after_cursor, choice, field, of,
                             raw, schema_of, text)
from ..domain.tasks.states import (ACCOUNT_NUMBER, WRITTEN_PAYMENT_METHOD)
from ..domain.webhooks.outbox import Share as Probability  # one range for both
from ..domain.tasks.views import TaskDetails, TaskStatus
from ..domain.tasks.requests import (ScenarioName, TaskCreateRequest, TaskItems,
                                     TaskOptions)
from ..domain.dates import date_time_field
from .fixtures import COMPANY_SCHEMA, CONTINUOUS_ACCESS, MANUAL_DEPOSITS


class ErrorDetail(View, kw_only=True):
    location: Maybe[choice("body", "query", "path", "header")] = UNSET
    path: Maybe[of(str, "JSON path, e.g. $.products[0]")] = UNSET
    message: Maybe[str] = UNSET


class ErrorBody(View, kw_only=True):
    code: of(str, "kebab-case, stable")
    message: str
    details: list[ErrorDetail]
    # not-called only (POST /_sandbox/requests/verify)
    matched: Maybe[of(list[int], "not-called: the ids of the requests that matched.")] = UNSET
    near_misses: Maybe[of(list[NearMiss], "not-called: the nearest requests that did not "
                          "match (3 at most, nearest first), each with every JSON path "
                          "where it differs.", max_length=3)] = UNSET


class Error(View, kw_only=True):
    error: ErrorBody


class AccessTokenRequest(Command, kw_only=True):
    identifier: Identifier
    token_lifetime: of(int, "Seconds until the public token expires (virtual clock).",
                       ge=1800, le=2592000) = 86400


class CompanyListQuery(Command, kw_only=True):
    product: Maybe[Text] = UNSET
    scope: Maybe[choice(*SCOPES)] = UNSET
    limit: of(int, ge=1, le=1000) = 100
    # Bounded: a query's integers are read up to 18 digits (validate.parse_query).
    skip: of(int, ge=0, le=1_000_000_000) = 0


class JournalQuery(Command, kw_only=True):
    path: Maybe[of(str, "Only requests whose path starts with this.")] = UNSET
    method: Maybe[str] = UNSET
    status: Maybe[of(int, ge=100, le=599)] = UNSET
    limit: of(int, ge=1, le=1000) = 100


class TenantClock(Command, kw_only=True):
    start: of(str, "Where the tenant's clock starts (ISO 8601 date-time; none: now): the same "
                   "seed and start give the same bytes on any day (README: Reproducible bytes).",
                   max_length=64)


class BundleQuery(Command, kw_only=True):
    test: Maybe[of(str, "The id of the test the bundle is for (pytest's node id).",
                   max_length=1024)] = UNSET


class TenantRequest(Command, kw_only=True):
    name: Maybe[of(str, pattern=r"^[A-Za-z0-9_.-]{1,64}$")] = UNSET
    products: Maybe[of(Texts, max_length=50)] = UNSET
    manual_deposits: Maybe[raw(MANUAL_DEPOSITS)] = UNSET
    signing: of(bool, "Sign webhooks with x-hmac-signature-sha-256 (the real service signs "
                "every webhook); false turns it off.") = True
    continuous_access: Maybe[raw(CONTINUOUS_ACCESS)] = UNSET
    clock: Maybe[TenantClock] = UNSET


class AccessToken(View, kw_only=True):
    public_token: str
    token: str
    expires_at: Maybe[raw(date_time_field("When the public token expires (virtual time)."))] = UNSET


class ClockAdvanceRequest(Command, kw_only=True):
    seconds: of(float, "Virtual seconds to move forward (at most a year).", ge=0, le=31_536_000)


# An event's delivery: `none` when no endpoint takes it, else its deliveries' state.
DELIVERY_STATES = ("pending", "delivered", "failed", "interrupted", "none")


class EventsQuery(Command, kw_only=True):
    type: Maybe[of(str, "eventType")] = UNSET
    user: Maybe[of(str, "The user's identifier.")] = UNSET
    task: Maybe[str] = UNSET
    since: Maybe[of(AnyDateTime, "Virtual time, ISO 8601.")] = UNSET
    delivery: Maybe[choice(*DELIVERY_STATES)] = UNSET
    after: Maybe[after_cursor("events emitted or delivered")] = UNSET
    limit: of(int, ge=1, le=10000) = 1000


class CoverageQuery(Command, kw_only=True):
    catalog: choice("true", "false", description="true: the catalog the tally is measured "
                    "against comes with it (read it once per run).") = "false"


class ProfileBindingRequest(Command, kw_only=True):
    """A named profile (GET /_sandbox/profiles), data of your own, or both: the data merged
    over the named profile."""

    __schema_extra__ = {"minProperties": 1}

    profile: Maybe[of(str, min_length=1, max_length=64)] = UNSET
    data: Maybe[raw(PROFILE_SCHEMA)] = UNSET


class ScenarioBindingRequest(Command, kw_only=True):
    scenario: of(of(str, min_length=1, extra_json_schema={"x-names": TASK_SCENARIOS}) | None,
                 "null removes the binding.")


class CardTokenRecreationRequest(Command, kw_only=True):
    enabled: of(bool, "false: the user's card tokens are not recreated after their 24 hours, "
                "so the next task with such a card fails payment-token-expired. true (the "
                "default, as on the real service): recreated automatically.")


class CompanyStatusRequest(Command, kw_only=True):
    status: choice(*COMPANY_STATUSES)
    products: Maybe[of(Texts, "Products under maintenance (default: all of the company's).",
                       unique=True)] = UNSET


# A company as a request writes it: the fixture files' shape (schemas/fixtures.py), with
# the names only the running app knows marked.
_CONNECTOR = COMPANY_SCHEMA["properties"]["connector"]
_COMPANY_FIELDS = {
    **COMPANY_SCHEMA["properties"],
    "defaultScenario": {**COMPANY_SCHEMA["properties"]["defaultScenario"],
                        "x-names": TASK_SCENARIOS},
    "connector": {**_CONNECTOR, "properties": {
        **_CONNECTOR["properties"],
        "availableProducts": {**_CONNECTOR["properties"]["availableProducts"],
                              "items": {"type": "string", "minLength": 1, "x-names": PRODUCTS}}}},
}
COMPANY_CREATE_REQUEST = {**COMPANY_SCHEMA, "required": ["name"], "properties": _COMPANY_FIELDS}
COMPANY_UPDATE_REQUEST = {
    **COMPANY_SCHEMA,
    "required": [],
    "minProperties": 1,
    "properties": {k: v for k, v in _COMPANY_FIELDS.items() if k not in ("_id", "status")},
    "description": "Fields to replace. The status changes through /_sandbox/companies/{id}/status.",
}

WebhookUrl = of(str, pattern=r"^https?://[^\s]+$")
EventTypes = list[of(str, extra_json_schema={"x-names": EVENT_TYPES})]


class WebhookEndpointRequest(Command, kw_only=True):
    url: WebhookUrl
    event_types: of(EventTypes, min_length=1, unique=True)
    secret_id: Maybe[text("A signing secret (GET /secrets) to sign this endpoint's webhooks "
                          "with, instead of the API secret.")] = UNSET


EndpointId = of(str, "Keep this endpoint's id (as GET shows it); omitted: the id of the "
                "endpoint with this URL, or a new one.", min_length=1, max_length=100)


class EndpointWrite(Command, kw_only=True):
    id: Maybe[EndpointId] = field(default=UNSET, name="_id")
    url: WebhookUrl
    event_types: Maybe[of(EventTypes, "Omitted: every event type.", min_length=1,
                          unique=True)] = UNSET
    secret_id: Maybe[text("Sign this endpoint's webhooks with this signing secret (GET "
                          "/secrets) instead of the API secret.")] = UNSET


class WebhookEndpointsRequest(Command, kw_only=True):
    endpoints: of(list[EndpointWrite], max_length=50)




class WebhookFaultsRequest(Command, kw_only=True):
    duplicate: Maybe[of(Probability, "Probability that a delivered event is sent once "
                        "more.")] = UNSET
    out_of_order: Maybe[of(Probability, "Probability that an event is held back behind "
                           "the next one.")] = UNSET
    delay: Maybe[of(Probability, "Probability that the first attempt waits "
                    "`delaySeconds`.")] = UNSET
    delay_seconds: Maybe[of(float, ge=0, le=86400)] = UNSET


class ReplayRequest(Command, kw_only=True):
    # One selector, said as "at least one, and no two" (the task request's form): the same
    # rule as a oneOf, which schemathesis's negative cases took 9 s to draw.
    __schema_extra__ = {
        "minProperties": 1,
        "dependentRequired": {"from": ["to"], "to": ["from"]},
        "anyOf": [{"required": ["userIdentifier"]}, {"required": ["taskId"]},
                  {"required": ["eventId"]}, {"required": ["from", "to"]}],
        "not": {"anyOf": [{"required": pair} for pair in (
            ["userIdentifier", "taskId"], ["userIdentifier", "eventId"],
            ["userIdentifier", "from"], ["taskId", "eventId"], ["taskId", "from"],
            ["eventId", "from"])]}}

    user_identifier: Maybe[UserIdentifier] = UNSET
    task_id: Maybe[Text] = UNSET
    event_id: Maybe[text("One event (the dashboard's resend).")] = UNSET
    since: Maybe[AnyDateTime] = field(default=UNSET, name="from")
    until: Maybe[AnyDateTime] = field(default=UNSET, name="to")


class TriggerRequest(Command, kw_only=True):
    event_type: of(str, min_length=1, extra_json_schema={"x-names": EVENT_TYPES})
    identifier: Maybe[UserIdentifier] = UNSET
    task_id: Maybe[Text] = UNSET
    company_id: Maybe[Text] = UNSET
    data: Maybe[of(dict[str, Any], "Merged over the generated data.")] = UNSET


class DataQuery(Command, kw_only=True):
    identifier: Maybe[text("The user (required, here or in the path).")] = UNSET
    linked_account: Maybe[text("Only this linked account.")] = UNSET


class DisconnectRequest(Command, kw_only=True):
    reason: choice("timeout", "credentials-changed", "system-update") = "timeout"


class ProcessorLinkRequest(Command, kw_only=True):
    processor_token: of(str, "Minted by the aggregator for this service.", min_length=1,
                        max_length=200, extra_json_schema={"x-names": PROCESSOR_TOKENS})


# The hosted flow's own documents (its configuration, the tasks it asks for) reach the
# SDK's rules as the page wrote them: JSON data, checked by their structs' schemas.
FlowTasks = raw(schema_of(TaskItems))


class TasksQuery(Command, kw_only=True):
    status: Maybe[TaskStatus] = UNSET
    user: Maybe[of(str, "The user's identifier.")] = UNSET
    after: Maybe[after_cursor("tasks created or moved")] = UNSET
    limit: of(int, ge=1, le=10000) = 100


# -- the real service's published operations (docs/spec/real-api-surface.md) ------------
#
# Served at their real paths with their published fields; the sandbox's extra fields sit
# beside them. Answers stay in the one `{"data": ...}` envelope (the file's envelope note:
# a bare shape there "probably just leaves the wrapper out"); generate-url, which the old
# docs show bare, answers `url` beside `data` as well.

class SuccessResult(View, kw_only=True):
    success: bool


class Success(View, kw_only=True):
    """The real service's Success object."""

    success: bool
    result: SuccessResult


SUCCEEDED = Success(success=True, result=SuccessResult(success=True))  # what an action answers


class WorkflowTask(TaskOptions, kw_only=True):
    operation: choice("deposit", "verify", "tax")
    metadata: Maybe[Metadata] = UNSET


class TaskWorkflowRequest(Command, kw_only=True):
    linked_account: text("The linked account to act on (pull refresh).")
    tasks: of(list[WorkflowTask], min_length=1, max_length=10)
    metadata: Maybe[Metadata] = UNSET
    scenario: Maybe[ScenarioName] = UNSET


class TaskWorkflowCreated(View, kw_only=True):
    task: TaskDetails
    task_workflow: str


class PrescreenCompany(Command, kw_only=True):
    """The employer: its `_id` (`id`), or its name (the exact name, case and punctuation
    aside)."""

    __schema_extra__ = {"minProperties": 1}

    name: Maybe[of(str, min_length=1, max_length=200, pattern=r"\S")] = UNSET
    id: Maybe[Text] = UNSET


class PrescreenRequest(Command, kw_only=True):
    company: PrescreenCompany
    product: choice("deposit", "verify", "tax")


class FileUrl(View, kw_only=True):
    url: of(str, pattern="^https?://")
    expires_at: Maybe[DateTime] = UNSET


class FileQuery(Command, kw_only=True):
    tenant: Text
    expires: of(int, ge=0, le=253_402_300_799)
    signature: of(str, pattern="^[0-9a-f]{64}$")


class OwnMethod(Command, kw_only=True):
    # A destination a user stores (POST /user): a bank account or a card.
    id: Maybe[of(str, min_length=1, max_length=100)] = field(default=UNSET, name="_id")
    title: Maybe[of(str, max_length=200)] = UNSET
    external_id: Maybe[of(str, max_length=200)] = UNSET


class OwnBankAccount(OwnMethod, kw_only=True):
    account_number: Maybe[of(str, "1 to 34 digits; only its last four are kept.",
                             pattern=ACCOUNT_NUMBER)] = UNSET
    routing_number: Maybe[of(str, pattern=r"^[0-9]{9}$")] = UNSET
    account_type: Maybe[choice("checking", "savings")] = UNSET


class OwnCard(OwnMethod, kw_only=True):
    brand: Maybe[of(str, max_length=50)] = UNSET
    last_four: Maybe[of(str, pattern=r"^[0-9]{4}$")] = UNSET
    expiry: Maybe[AnyDateTime] = UNSET


class OwnMethods(Command, kw_only=True):
    """The destination accounts and cards a task workflow can offer the user; replaces what
    was stored (absent: none)."""

    bank_accounts: Maybe[of(list[OwnBankAccount], max_length=20)] = UNSET
    cards: Maybe[of(list[OwnCard], max_length=20)] = UNSET


class UserRequest(Command, kw_only=True):
    identifier: Identifier
    data: Maybe[OwnMethods] = UNSET


class UserTasksQuery(Command, kw_only=True):
    status: Maybe[TaskStatus] = UNSET
    payroll_data_available: Maybe[choice("true", "false")] = UNSET

WrittenMethods = list[raw(WRITTEN_PAYMENT_METHOD)]


class StoredPaymentMethods(View, kw_only=True):
    identifier: str
    bank_accounts: WrittenMethods
    cards: WrittenMethods


class WebhookEndpoint(View, kw_only=True):
    id: str = field(name="_id")
    url: str
    event_types: list[str]


class SecretRequest(Command, kw_only=True):
    name: Name


class Secret(View, kw_only=True):
    id: str = field(name="_id")
    name: str
    token: str
    created_at: DateTime


class PayLinkAction(View, kw_only=True):
    type: choice("connect-account", "refresh", "view-account", "pause-plan", "change-plan",
                 "switch", "pay-now", description="The flow a task runs for it (spec: Task, flow).")
    product: str
    action_id: Maybe[str] = UNSET


class Bill(View, kw_only=True):
    id: str = field(name="_id")
    name: str
    actions: list[PayLinkAction]


class PayLinkAccount(View, kw_only=True):
    id: str = field(name="_id")
    company: CompanySummary
    actions: list[PayLinkAction]
    bills: list[Bill]
    payment_method: Maybe[raw(WRITTEN_PAYMENT_METHOD)] = UNSET
    updated_at: DateTime


class PayLinkAccounts(View, kw_only=True):
    accounts: list[PayLinkAccount]


# -- what the document adds to the enforced schemas ----------------------------------------
#
# Rules an operation enforces itself, past its schema, that the published schema states
# as well, so that a client (or a generator of requests) sees them:
#
# - `product` with `products`: refused by the search with its own code (400
#   product-and-products, domain/search.py); in the enforced schema it would be 422
#   validation-failed. Inside the object, one `not` with one `required`.
# - a task names what it acts on: `company` with `product`, `operation` or `tasks`, or a
#   linked account to refresh (422, domain/tasks.py). The user (`identifier` under API
#   keys, the public token's otherwise) depends on the credentials: no schema can say it.
# - a franchise child has the franchise-child tag and its `franchiseParent`, both or
#   neither (422, domain/company_admin.py); whether the parent is a franchise parent of the
#   tenant depends on its data.
# - a webhook URL: an absolute http(s) URL with a host and a port from 1 to 65535
#   (validate.py: webhook_url_problem, which also takes what no pattern can say simply,
#   such as international host names); the published pattern is the ASCII part of it.
_H16 = "[0-9A-Fa-f]{1,4}"
_IPV4 = r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = "|".join([  # RFC 3986, IPv6address
    f"(?:{_H16}:){{6}}{_LS32}",
    f"::(?:{_H16}:){{5}}{_LS32}",
    f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    f"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
    f"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
    f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
    f"(?:(?:{_H16}:){{0,6}}{_H16})?::",
])
_PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
WEBHOOK_URL_PATTERN = (rf"^https?://(?:[A-Za-z0-9._~!$&'()*+,;=:-]+@)?"
                       rf"(?:{_LABEL}(?:\.{_LABEL})*|\[(?:{_IPV6})\])"
                       rf"(?::{_PORT})?(?:[/?#][!-~]*)?$")

PublishedUrl = of(str, pattern=WEBHOOK_URL_PATTERN)


class PublishedEndpointWrite(EndpointWrite, kw_only=True):
    url: PublishedUrl


class PublishedEndpointsRequest(Command, kw_only=True):
    endpoints: of(list[PublishedEndpointWrite], max_length=50)


class PublishedEndpointRequest(WebhookEndpointRequest, kw_only=True):
    url: PublishedUrl


# What the document shows past an enforced body's own schema (a struct's, or one written by
# hand): the rules its operation enforces in code, or another struct (a webhook URL's whole
# pattern).
_FRANCHISE_CHILD = {"const": "franchise-child"}
_PUBLISHED_RULES = (
    (SearchRequest, {"not": {"required": ["product", "products"]}}),
    (TaskCreateRequest, {"anyOf": [
        {"required": ["linkedAccount"]}, {"required": ["linkedAccountId"]},
        {"required": ["company", "product"]}, {"required": ["company", "operation"]},
        {"required": ["company", "tasks"]}]}),
    (COMPANY_CREATE_REQUEST, {
        "dependentSchemas": {"franchiseParent": {
            "required": ["tags"], "properties": {"tags": {"contains": _FRANCHISE_CHILD}}}},
        "anyOf": [{"required": ["franchiseParent"]},
                  {"properties": {"tags": {"items": {"not": _FRANCHISE_CHILD}}}}]}),
)
_PUBLISHED_AS = {WebhookEndpointsRequest: PublishedEndpointsRequest,
                 WebhookEndpointRequest: PublishedEndpointRequest}


def published(shape: Any) -> dict:
    """The request body schema the OpenAPI document shows for an operation's enforced body
    (a struct, or a schema): its schema, with the rules its operation enforces past it."""
    schema = shape if isinstance(shape, dict) else schema_of(_PUBLISHED_AS.get(shape, shape))
    rules = next((rules for enforced, rules in _PUBLISHED_RULES if enforced is shape), None)
    return schema if rules is None else {**schema, **rules}
