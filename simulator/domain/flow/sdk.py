"""The client SDK's hosted flow: its configuration, the sandbox login and what the
user reads.

The flow is configured by the customer's page (spec: Client SDK configuration) and
talks to the sandbox with the user's public token. Logging in starts a real task,
driven by its scenario (DESIGN.md, Scenarios). The usernames are the real sandbox's
(real-service-facts 7): `test-good` succeeds, `test-bad` is refused on the login form,
`test-failure` fails, `test-distribution-not-supported` fails a deposit (product-not-supported),
`test-code-mfa` and `test-question-mfa` ask for a code or an answer first; `@test.com`
may follow any of them. `test-<scenario>` runs that scenario (this sandbox's own
extension); any other username is a good login.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any

import msgspec

from ...errors import (ApiError, CredentialsRefused, InvalidCompanyId, InvalidConfig,
                      PublicTokenMismatch, TaskNotFound, ValidationFailed, field_detail)
from ..pdf import text_pdf
from ...validate import strict_json
from ..companies.companies import Company, CompanyDirectory, ManualDepositRule
from .flow_words import ENGLISH, WORDS
from ..companies.search import company_filter
from ..shapes import UNSET, View, choice, given, of
from ..tasks.states import PROCESSING
from ..tasks.choosing import HAPPY_PATH
from ..tasks.views import TaskRecord
from ..tasks.requests import CreateTask, TaskCreateRequest, task_items
from ..tasks.records import Task, Workflow
from ..identity.identity import PublicToken
from ..tenants import Tenant

# Spec (Client SDK configuration): "`login-company` (requires `companyId`)". The other
# company steps let the user pick the company first when the deeplink names none.
STEPS_NEEDING_COMPANY = ("login-company",)
DEFAULT_OPERATIONS = ("deposit", "verify", "switch", "present")

# The real sandbox's usernames (real-service-facts 7); "@test.com" may follow them.
SANDBOX_EMAIL = "@test.com"
REFUSED_USERNAME = "test-bad"
DISTRIBUTION_USERNAME = "test-distribution-not-supported"
DISTRIBUTION_SCENARIO = "distribution-not-supported"
USERNAMES = {"test-good": HAPPY_PATH, "test-failure": "unknown-failure",
             "test-code-mfa": HAPPY_PATH, "test-question-mfa": HAPPY_PATH}


# A second sign-in step the flow shows before the task starts: the challenge and its view.
class MfaPrompt(View, kw_only=True):
    """The sandbox usernames test-code-mfa and test-question-mfa: answer with `mfaAnswer`
    (any answer passes) to start the tasks."""

    type: choice("code", "question")
    prompt: str


MFA_CHALLENGES = {
    "test-code-mfa": MfaPrompt(type="code", prompt="Enter the 6-digit code we sent to your phone."),
    "test-question-mfa": MfaPrompt(type="question",
                                   prompt="What was the name of your first pet?"),
}


class LoginOutcome(msgspec.Struct, frozen=True):
    """POST /sdk/login: either the started workflow and tasks, or an MFA challenge."""

    workflow: Workflow | None = None
    tasks: tuple[Task, ...] = ()
    mfa: MfaPrompt | None = None


INVALID_CONFIG = "The SDK configuration is not base64 of a JSON object."
INVALID_CONFIG_FIELDS = "The SDK configuration has fields the flow cannot read."
TOKEN_MISMATCH = "The configuration's publicToken does not match the token issued for this user."
UNKNOWN_WORKFLOW = "No task workflow {workflow_id!r} of this user."
INVALID_COMPANY_ID = "The deeplink names no company with that _id (invalid-company-id)."
CREDENTIALS_REFUSED = ("The company refused the username and password (sandbox username "
                       "test-bad); no task was started. The user can try again.")
LINKED_ACCOUNT_ELSEWHERE = "The linked account is not this user's at this company."
CREDENTIALS_NEEDED = ("Send the username and password (only a reconnect whose session "
                      "resumes goes without them).")


# -- what the user reads --------------------------------------------------------------------
# Spec (Errors): every task failure reason, and every error the hosted flow can meet,
# as a plain sentence with a next step. The codes go to onClose / onInteraction only.
# `{company}` is the company's name (or "the company"), `{partner}` meta.managedBy's name.

FAILURE_SENTENCES = {
    "auth-expired": "Your session with {company} has ended. Sign in again to continue.",
    "connection-error": "We couldn't reach {company}. Check your internet connection and try "
                        "again in a few minutes.",
    "device-disconnected": "The connection to your device was lost before we could finish. "
                           "Start again and keep this window open until it's done.",
    "action-failed": "We couldn't confirm the change at {company}. Try again in a few minutes.",
    "plan-selection-required": "We couldn't tell which of your plans at {company} to update. "
                               "Check your plans at {company}, then try again.",
    "product-not-supported": "{company} doesn't allow this change for your account. Try "
                             "another option, such as your entire paycheck, or make the change "
                             "with {company} directly.",
    "subscription-inactive": "Your subscription at {company} isn't active, so nothing could be "
                             "changed. Reactivate it at {company}, then try again.",
    "subscription-managed-by-partner-provider": "Your subscription at {company} is managed by "
                                                "{partner}. Make the change with {partner}.",
    "subscription-not-found": "We couldn't find your subscription at {company}. Check that it "
                              "is still there, then try again.",
    "payment-method-locked": "Your payment method is locked at {company}. Try again once "
                             "{company} unlocks it.",
    "payment-method-not-supported": "{company} doesn't accept this payment method. Try another "
                                    "card or bank account.",
    "payment-method-insufficient-funds": "Your payment method didn't have enough funds for "
                                         "{company}'s check. Add funds or use another card or "
                                         "account, then try again.",
    "payment-method-limit-reached": "{company} already holds as many payment methods as it "
                                    "allows. Remove one at {company}, then try again.",
    "payment-method-declined": "{company} declined this payment method. Try another card or "
                               "bank account.",
    "user-abandon": "The sign-in wasn't finished, so nothing was changed. Start again when "
                    "you're ready.",
    "payment-token-expired": "Your card details expired before we could use them. Add your "
                             "card again, then try again.",
    "payment-switch-unsuccessful": "We couldn't update your payment method at {company}. Try "
                                   "again, or update it at {company} directly.",
    "system-unavailable": "{company} is unavailable right now, perhaps for maintenance. Try "
                          "again later.",
    "unexpected-response": "{company} answered in a way we didn't expect. Try again in a few "
                           "minutes.",
    "unknown-failure": "Something went wrong and we couldn't finish. Try again in a few "
                       "minutes.",
}

# The next step each failure's sentence names, offered first on the failure screen:
# `retry` (sign in again), `another-card` (add another card: a pay-link flow), `manual`
# (make the change with the company directly), `close` (nothing the flow can do).
# Choosing another company is offered besides, wherever the flow may go back to search.
NEXT_STEPS = {
    **dict.fromkeys(FAILURE_SENTENCES, "retry"),
    "product-not-supported": "manual", "subscription-managed-by-partner-provider": "close",
    **dict.fromkeys(("payment-method-not-supported", "payment-method-insufficient-funds",
                     "payment-method-declined", "payment-token-expired"), "another-card"),
}

# The errors that end the flow's session: the user can only start again from the app.
SESSION_ENDED_CODES = ("public-token-mismatch", "public-token-required", "public-token-expired",
                       "invalid-public-token", "identifier-mismatch", "invalid-credentials",
                       "missing-credentials", "wrong-environment", "unauthorized")
_SESSION_ENDED = ("This session has expired or isn't valid any more. Close this window and "
                  "start again from the app.")
_RECONNECT_LOST = ("We couldn't find the account you want to reconnect. Close this window "
                   "and start again from the app.")
ERROR_SENTENCES = {
    "invalid-config": "This connection link isn't set up correctly. Close this window and "
                      "contact the app that sent you here.",
    **dict.fromkeys(SESSION_ENDED_CODES, _SESSION_ENDED),
    "invalid-company-id": "We couldn't find the employer this link points to. Close this "
                          "window and try again from the app.",
    "company-not-found": "We couldn't find that company. Go back and search for it again.",
    "company-under-maintenance": "{company} is under maintenance right now, so you can't sign "
                                 "in. Try again later.",
    "company-disabled": "{company} can't be connected at the moment. Go back and choose "
                        "another company, or try again later.",
    "company-manual-deposits": "{company} can't be connected online. Update your direct "
                               "deposit with your employer's payroll team instead.",
    "product-not-offered": "{company} doesn't support this kind of connection. Go back and "
                           "choose another company.",
    "credentials-refused": "That username or password isn't right. Check them and try again.",
    "linked-account-not-found": _RECONNECT_LOST,
    "linked-account-not-yours": _RECONNECT_LOST,
    "task-not-found": "We lost track of your connection. Close this window and start again.",
    "validation-failed": "Some of the details weren't accepted. Check what you entered and try "
                         "again.",
    "network": "We couldn't reach the service. Check your internet connection and try again.",
}
FALLBACK_SENTENCE = ("Something went wrong on our side. Close this window and try again in a "
                     "few minutes.")

# The same sentences in Spanish (config.language `es`; flow_words.py says how it reads),
# for the same codes and with the same placeholders.
FAILURE_SENTENCES_ES = {
    "auth-expired": "Tu sesión con {company} terminó. Vuelve a iniciar sesión para continuar.",
    "connection-error": "No pudimos comunicarnos con {company}. Revisa tu conexión a internet y "
                        "vuelve a intentarlo en unos minutos.",
    "device-disconnected": "Se perdió la conexión con tu dispositivo antes de que pudiéramos "
                           "terminar. Empieza de nuevo y mantén esta ventana abierta hasta que "
                           "termine.",
    "action-failed": "No pudimos confirmar el cambio en {company}. Vuelve a intentarlo en unos "
                     "minutos.",
    "plan-selection-required": "No pudimos saber cuál de tus planes en {company} había que "
                               "actualizar. Revisa tus planes en {company} y vuelve a "
                               "intentarlo.",
    "product-not-supported": "{company} no permite este cambio en tu cuenta. Prueba otra opción, "
                             "como todo tu cheque de pago, o haz el cambio directamente con "
                             "{company}.",
    "subscription-inactive": "Tu suscripción en {company} no está activa, así que no se pudo "
                             "cambiar nada. Reactívala en {company} y vuelve a intentarlo.",
    "subscription-managed-by-partner-provider": "Tu suscripción en {company} la administra "
                                                "{partner}. Haz el cambio con {partner}.",
    "subscription-not-found": "No encontramos tu suscripción en {company}. Verifica que todavía "
                              "exista y vuelve a intentarlo.",
    "payment-method-locked": "Tu método de pago está bloqueado en {company}. Vuelve a intentarlo "
                             "cuando {company} lo desbloquee.",
    "payment-method-not-supported": "{company} no acepta este método de pago. Prueba con otra "
                                    "tarjeta o cuenta bancaria.",
    "payment-method-insufficient-funds": "Tu método de pago no tenía fondos suficientes para la "
                                         "verificación de {company}. Agrega fondos o usa otra "
                                         "tarjeta o cuenta, y vuelve a intentarlo.",
    "payment-method-limit-reached": "{company} ya tiene la cantidad máxima de métodos de pago "
                                    "que permite. Elimina uno en {company} y vuelve a "
                                    "intentarlo.",
    "payment-method-declined": "{company} rechazó este método de pago. Prueba con otra tarjeta o "
                               "cuenta bancaria.",
    "user-abandon": "No se terminó el inicio de sesión, así que no se cambió nada. Empieza de "
                    "nuevo cuando quieras.",
    "payment-token-expired": "Los datos de tu tarjeta vencieron antes de que pudiéramos usarlos. "
                             "Vuelve a agregar tu tarjeta e inténtalo de nuevo.",
    "payment-switch-unsuccessful": "No pudimos actualizar tu método de pago en {company}. Vuelve "
                                   "a intentarlo o actualízalo directamente en {company}.",
    "system-unavailable": "{company} no está disponible en este momento, quizás por "
                          "mantenimiento. Vuelve a intentarlo más tarde.",
    "unexpected-response": "{company} respondió de una forma que no esperábamos. Vuelve a "
                           "intentarlo en unos minutos.",
    "unknown-failure": "Algo salió mal y no pudimos terminar. Vuelve a intentarlo en unos "
                       "minutos.",
}
_SESSION_ENDED_ES = ("Esta sesión venció o ya no es válida. Cierra esta ventana y vuelve a "
                     "empezar desde la app.")
_RECONNECT_LOST_ES = ("No encontramos la cuenta que quieres volver a conectar. Cierra esta "
                      "ventana y vuelve a empezar desde la app.")
ERROR_SENTENCES_ES = {
    "invalid-config": "Este enlace de conexión no está bien configurado. Cierra esta ventana y "
                      "comunícate con la app que te trajo aquí.",
    **dict.fromkeys(SESSION_ENDED_CODES, _SESSION_ENDED_ES),
    "invalid-company-id": "No encontramos el empleador al que apunta este enlace. Cierra esta "
                          "ventana y vuelve a intentarlo desde la app.",
    "company-not-found": "No encontramos esa empresa. Vuelve atrás y búscala de nuevo.",
    "company-under-maintenance": "{company} está en mantenimiento en este momento, así que no "
                                 "puedes iniciar sesión. Vuelve a intentarlo más tarde.",
    "company-disabled": "No es posible conectar {company} en este momento. Vuelve atrás y elige "
                        "otra empresa, o inténtalo más tarde.",
    "company-manual-deposits": "No es posible conectar {company} en línea. Actualiza tu depósito "
                               "directo con el equipo de nómina de tu empleador.",
    "product-not-offered": "{company} no admite este tipo de conexión. Vuelve atrás y elige otra "
                           "empresa.",
    "credentials-refused": "El usuario o la contraseña no son correctos. Revísalos y vuelve a "
                           "intentarlo.",
    "linked-account-not-found": _RECONNECT_LOST_ES,
    "linked-account-not-yours": _RECONNECT_LOST_ES,
    "task-not-found": "Perdimos el seguimiento de tu conexión. Cierra esta ventana y vuelve a "
                      "empezar.",
    "validation-failed": "Algunos de los datos no se aceptaron. Revisa lo que ingresaste y vuelve "
                         "a intentarlo.",
    "network": "No pudimos comunicarnos con el servicio. Revisa tu conexión a internet y vuelve a "
               "intentarlo.",
}
FALLBACK_SENTENCE_ES = ("Algo salió mal de nuestro lado. Cierra esta ventana y vuelve a "
                        "intentarlo en unos minutos.")

# language -> (failure sentences, error sentences, fallback)
USER_SENTENCES = {
    ENGLISH: (FAILURE_SENTENCES, ERROR_SENTENCES, FALLBACK_SENTENCE),
    "es": (FAILURE_SENTENCES_ES, ERROR_SENTENCES_ES, FALLBACK_SENTENCE_ES),
}


def user_messages(language: str = ENGLISH) -> dict[str, Any]:
    """The sentences the hosted page shows, in the configured language, handed to it with
    its configuration; besides English, `words`: the flow's own texts translated, keyed by
    the English its scripts write (flow_words.py). A language the sandbox lacks is English."""
    reasons, errors, fallback = USER_SENTENCES.get(language, USER_SENTENCES[ENGLISH])
    messages: dict[str, Any] = {"reasons": reasons, "errors": errors, "fallback": fallback}
    words = WORDS.get(language)
    if words:
        messages["words"] = words
    return messages


# -- configuration and session --------------------------------------------------------------

def decode_config(encoded: str) -> dict[str, Any]:
    """The configuration from /initialize/{base64 of JSON} (URL-safe or not, padded or not)."""
    text = encoded.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        config = strict_json(raw)  # NaN or a 1,500-deep document: 400, not a stuck page
    except (binascii.Error, ValueError):
        config = None
    if not isinstance(config, dict):
        raise InvalidConfig(INVALID_CONFIG,
                            details=[field_detail("$", INVALID_CONFIG, location="path")])
    return config


def flow_config(config: dict[str, Any]) -> dict[str, Any]:
    """The configuration as the flow runs it: the published forms of its tasks
    (real-service-facts 12) made one. `tasks[].product` is the SDK docs' name for the
    spec's `operation`; the deprecated top-level `product` (with its `distribution`) is one
    task; `additionalProduct` is one more task after them."""
    tasks = [_task(t) for t in config.get("tasks") or ()]
    if not tasks and config.get("product"):
        tasks = [_task({"operation": config["product"],
                        **({"distribution": config["distribution"]}
                           if "distribution" in config else {})})]
    if config.get("additionalProduct"):
        tasks.append({"operation": config["additionalProduct"]})
    flow = {k: v for k, v in config.items()
            if k not in ("product", "distribution", "additionalProduct", "tasks")}
    if tasks:
        flow["tasks"] = tasks
    return flow


def _task(task: dict[str, Any]) -> dict[str, Any]:
    named = {"operation": task.get("operation") or task["product"]}
    return {**named, **{k: v for k, v in task.items() if k not in ("operation", "product")}}


def check_token(config: dict[str, Any], token: PublicToken) -> None:
    """The token comes through the handshake (real-service-facts 11); a configuration that
    still carries one must carry the same."""
    given = config.get("publicToken")
    if given is not None and given != token.public_token:
        raise PublicTokenMismatch(TOKEN_MISMATCH,
                                  details=[field_detail("$.config.publicToken", TOKEN_MISMATCH)])


# The flow's high-latency view (real-service-facts 13): the sign-in has run this many
# virtual seconds without authenticating (scenario `high-latency`, username
# test-high-latency, takes two minutes).
HIGH_LATENCY_SECONDS = 30.0


class FlowTask(TaskRecord, kw_only=True):
    high_latency: of(bool, "Signing in for longer than the flow waits quietly (its "
                     "high-latency view).")


def flow_workflow(tenant: Tenant, token: PublicToken, workflow_id: str) -> dict[str, Any]:
    """GET /sdk/workflow/{id}: every task the flow's sign-in started (those a `finish`
    option held back appear when they start), whether more may start, and which tasks
    are signing in for longer than HIGH_LATENCY_SECONDS."""
    workflow = tenant.tasks.workflows.get(workflow_id)
    if workflow is None or workflow.identifier != token.identifier:
        raise TaskNotFound(UNKNOWN_WORKFLOW.format(workflow_id=workflow_id))
    now = tenant.clock.timestamp()
    tasks = [tenant.tasks[t] for t in workflow.tasks]
    return {"id": workflow.id, "pending": len(workflow.pending),
            "tasks": [FlowTask.of(t, high_latency=_slow(t, now)) for t in tasks]}


def _slow(task: Task, now: float) -> bool:
    if task.status != PROCESSING or task.authenticated:
        return False
    started = next((h.at for h in reversed(task.history) if h.status == PROCESSING), None)
    return started is not None and now - started >= HIGH_LATENCY_SECONDS


def deeplink_company(tenant: Tenant, config: dict[str, Any]) -> Company | None:
    """The deeplinked company, or the invalid-company-id condition (spec: API and SDK
    errors 3): a given id must be non-empty and be a company's `_id`; only
    `login-company` requires one. A disabled company is a company: the flow ends with the
    API's own reason for it (`company-disabled`, the session's `refusal`), not with
    invalid-company-id, which errors 3 keeps for an empty or wrong id."""
    deeplink = config.get("deeplink") or {}
    if deeplink.get("step") not in STEPS_NEEDING_COMPANY and "companyId" not in deeplink:
        return None
    return _company(tenant, deeplink.get("companyId"), "$.deeplink.companyId")


def operations_of(tasks: list[dict[str, Any]] | None, company: Company) -> list[dict[str, Any]]:
    """The configured tasks, or the company's default operation when none is configured."""
    if tasks:
        return tasks
    offered = company.available_products
    return [{"operation": next((o for o in DEFAULT_OPERATIONS if o in offered), offered[0])}]


def check_flow_can_start(tenant: Tenant, company: Company,
                         operations: Iterable[dict[str, Any]]) -> None:
    """Spec (Company status): under maintenance, "Users cannot start an authentication
    flow", per product listed. The task engine's own rule, so the API and the hosted flow
    refuse alike, with the same code: the flow cannot start when ANY of its tasks cannot."""
    for n, operation in enumerate(operations):
        name = "product" if "product" in operation else "operation"
        tenant.tasks.check_company_accepts(company, operation[name], f"$.tasks[{n}].{name}")


def refusal(tenant: Tenant, company: Company | None,
            operations: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """Why the flow cannot sign in at `company` (the API's error code and message), or None."""
    if company is None:
        return None
    try:
        check_flow_can_start(tenant, company, operations_of(operations, company))
    except ApiError as error:
        return {"code": error.code, "message": error.message}
    return None


def company_for_flow(tenant: Tenant, company_id: str,
                     tasks: list[dict[str, Any]] | None) -> tuple[Company, dict[str, Any] | None]:
    """POST /sdk/company: the company the user picked, and why the configured tasks
    cannot start there (None when they can)."""
    company = _company(tenant, company_id)
    return company, refusal(tenant, company, tasks)


def _company(tenant: Tenant, company_id: Any, path: str = "$.companyId") -> Company:
    """The company whose `_id` is `company_id`, or invalid-company-id naming `path`."""
    company = tenant.companies.get(company_id) if isinstance(company_id, str) and company_id else None
    if company is None:
        raise InvalidCompanyId(INVALID_COMPANY_ID,
                               details=[field_detail(path, "not a company _id")])
    return company


# -- the empty search screen ----------------------------------------------------------------
# The sandbox keeps no usage statistics: "popular" is the names below, the best-known
# employers, merchants and payroll providers of the bundled fixtures, in the order a
# user meets them. Names a catalog lacks (custom fixtures) are skipped; payroll
# providers then come from the catalog's `payroll-provider` tag.

POPULAR_COMPANIES = ("Walmart", "Amazon", "Target", "Starbucks", "The Home Depot",
                     "Costco Wholesale", "United Parcel Service", "Kroger", "CVS Health",
                     "McDonald's", "Uber", "DoorDash",
                     # Merchants, for a pay-link flow.
                     "Netflix", "Spotify", "Hulu", "Disney+", "Verizon", "AT&T")
POPULAR_PAYROLL_PROVIDERS = ("ADP", "Paychex", "Gusto", "Workday", "Paylocity", "Paycom")
PAYROLL_PROVIDER = "payroll-provider"
POPULAR_LIMIT = 9
POPULAR_PAYROLL_LIMIT = 6


def popular_companies(directory: CompanyDirectory, rule: ManualDepositRule, *,
                      scope: str | None = None, tasks: list[dict[str, Any]] | None = None,
                      payroll_only: bool = False) -> dict[str, list[Company]]:
    """POST /sdk/popular: what the search screen shows before the user types, filtered as
    the flow's own search is (the configured scope and operations; never a disabled
    company): `companies` (employers, or merchants for pay-link) and `payrollProviders`."""
    products = tuple(t.get("operation") or t.get("product") for t in tasks or ())
    scopes = (scope,) if scope else ()
    keep = company_filter(rule, scopes=scopes, products=products)
    keep_payroll = company_filter(rule, scopes=scopes, products=products, tags=(PAYROLL_PROVIDER,))

    named = [c for c in (_named(directory, n) for n in POPULAR_PAYROLL_PROVIDERS) if c is not None]
    # A catalog without the bundled names: its first payroll providers, by name.
    payroll = [c for c in named if keep_payroll(c)] if named else list(
        islice(filter(keep_payroll, directory.ordered()), POPULAR_PAYROLL_LIMIT))
    payroll = payroll[:POPULAR_PAYROLL_LIMIT]
    if payroll_only:
        return {"companies": [], "payrollProviders": payroll}
    companies = [c for c in (_named(directory, n) for n in POPULAR_COMPANIES)
                 if c is not None and keep(c) and PAYROLL_PROVIDER not in c.tags]
    return {"companies": companies[:POPULAR_LIMIT], "payrollProviders": payroll}


def _named(directory: CompanyDirectory, name: str) -> Company | None:
    """The company named exactly `name` as this tenant sees it: the search index's
    exact-name tier only (the first of its tiers), over the shared catalog and the
    tenant's own changes."""
    indexes = [(directory.index, directory.changed.__contains__)]
    if directory.changed:
        indexes.append((directory.overlay_index(), None))
    for index, skip in indexes:
        for key, company in index.ranked(name, skip=skip):
            if key[0] != EXACT_TIER:
                break
            if company.name == name:
                return company
    return None


EXACT_TIER = 0  # SearchIndex.ranked: the exact name comes first, as tier 0


# -- what the progress screen names ---------------------------------------------------------
# Scenarios whose task waits for the user's second factor while processing (the
# mfa-then-success scenario: authenticated turns true only after the code): the hosted
# flow's progress shows a verification step for them.
MFA_SCENARIOS = ("mfa-then-success",)


def flow_hints() -> dict[str, Any]:
    """What the hosted page needs besides its sentences, handed to it at load: the next
    step of each failure reason, and the scenarios whose progress has a verification step."""
    return {"nextSteps": NEXT_STEPS, "mfaScenarios": list(MFA_SCENARIOS)}


# -- login ----------------------------------------------------------------------------------

def sandbox_username(username: str) -> str:
    """`test-good@test.com` is `test-good` (real-service-facts 7: "append @test.com where
    an email is needed")."""
    name = username.strip().lower()
    return name[:-len(SANDBOX_EMAIL)] if name.endswith(SANDBOX_EMAIL) else name


def scenario_for_username(scenarios: Mapping[str, Any], username: str,
                          operations: Iterable[dict[str, Any]] = ()) -> str | None:
    name = sandbox_username(username)
    if name == DISTRIBUTION_USERNAME:
        # The payroll system cannot set up the deposit the flow asks for, whatever its
        # split (README: Fidelity): a flow with a deposit fails; verify-only goes through.
        deposit = any((o.get("operation") or o.get("product")) == "deposit" for o in operations)
        return DISTRIBUTION_SCENARIO if deposit else HAPPY_PATH
    if name in USERNAMES:
        return USERNAMES[name]
    if name.startswith("test-"):
        scenario = scenarios.get(name[len("test-"):])
        if scenario is not None and scenario.kind == "task":
            return scenario.name
    return None


def login(tenant: Tenant, token: PublicToken, sign_in: Any) -> LoginOutcome:
    """POST /sdk/login (`sign_in`: its body's SdkLoginRequest): the user's credentials at a
    company start the configured tasks (watched: the hosted flow's page is open), after an
    MFA step for the MFA usernames."""
    company = _company(tenant, sign_in.company_id)
    operations = operations_of(given(sign_in.tasks), company)
    check_flow_can_start(tenant, company, operations)
    resumes = False  # a reconnect whose session resumes without the credentials
    if sign_in.linked_account is not UNSET:
        account = tenant.accounts.require(sign_in.linked_account, "$.linkedAccount")
        if account.company_id != company.id or account.identifier != token.identifier:
            raise ValidationFailed(LINKED_ACCOUNT_ELSEWHERE,
                                   details=[field_detail("$.linkedAccount", "not this user's")])
        resumes = not tenant.accounts.needs_credentials(account)
    missing = [name for name in ("username", "password") if not given(getattr(sign_in, name))]
    if missing and not resumes:
        raise ValidationFailed(CREDENTIALS_NEEDED, details=[
            field_detail(f"$.{name}", "required") for name in missing])
    username = given(sign_in.username, "")
    name = sandbox_username(username)
    if name == REFUSED_USERNAME:
        raise CredentialsRefused(CREDENTIALS_REFUSED,
                                 details=[field_detail("$.username", "refused by the company")])
    challenge = MFA_CHALLENGES.get(name)
    if challenge is not None and not given(sign_in.mfa_answer):
        return LoginOutcome(mfa=challenge)
    login_scenario = scenario_for_username(tenant.tasks.scenarios, username, operations)
    if sign_in.payment_method is not UNSET:
        operations = [{**t, "paymentMethod": sign_in.payment_method} for t in operations]
    workflow, tasks = tenant.tasks.create_task(CreateTask(
        TaskCreateRequest(company=company.id, tasks=task_items(operations),
                          metadata=sign_in.metadata),
        token=token, login_scenario=login_scenario, watched=True))
    return LoginOutcome(workflow=workflow, tasks=tuple(tasks))


def leave(tenant: Tenant, token: PublicToken, task_id: str) -> list[Task]:
    """POST /sdk/leave: the user left the hosted flow (closed it, or the page went away)
    before the outcome. Every task of the workflow the flow started is left: their events
    carry user.connected false (spec: User object, connected)."""
    task = tenant.tasks.get_task(task_id, token.identifier)
    workflow = tenant.tasks.workflows.get(task.workflow)
    tasks = [tenant.tasks[t] for t in workflow.tasks] if workflow is not None else [task]
    for each in tasks:
        tenant.tasks.leave(each)
    return tasks


def deposit_form_pdf(employer: str, identifier: str, today: Any) -> bytes:
    """A one-page PDF: the direct deposit authorization a user hands to the employer."""
    return text_pdf([(18, "Direct Deposit Authorization"), (12, f"Employer: {employer}"),
                     (12, f"Employee: {identifier}"), (12, f"Date: {today.isoformat()}"), (12, ""),
                     (12, "Bank name: ______________________________"),
                     (12, "Routing number: _________________________"),
                     (12, "Account number: _________________________"),
                     (12, "Account type:  [ ] checking   [ ] savings"),
                     (12, "Amount:  [ ] entire paycheck   [ ] ____ %   [ ] $ ______"), (12, ""),
                     (12, "Signature: ______________________________")])


# -- the autopilot (domain/autopilot.py) ----------------------------------------------------

AUTOPILOT_UNKNOWN_COMPANY = ("No company has the _id {company!r}: the autopilot picks one of "
                             "this tenant's companies (GET /company/search finds their _id).")
AUTOPILOT_PRODUCT = "{company} does not offer {product!r} (it offers {offered})."
AUTOPILOT_ACCOUNT_PRODUCT = ("This account has no {product!r} product (it has {products}): "
                             "the flow would refuse it (product-not-offered).")
AUTOPILOT_UNKNOWN_USERNAME = ("{username!r} is no sandbox username and no test-<scenario> of a "
                              "task scenario (GET /_sandbox/scenarios lists them).")
AUTOPILOT_UNFIT = ("The username {username!r} runs the scenario {scenario!r}, which does not "
                   "fit {product!r} (it fits {fits}): choose another username or product.")


def autopilot_problem(scenarios: Mapping[str, Any], companies: Any, products: Iterable[str],
                      autopilot: Any) -> tuple[str, str] | None:
    """Why the hosted flow could not play `autopilot` (its JSON path and a sentence), or
    None: the company is one of `companies`, it and the account (`products`) offer the
    product, and the username's scenario fits that product (a flow the user could not run
    is refused, never played)."""
    company = companies.get(autopilot.company)
    if company is None:
        return "$.company", AUTOPILOT_UNKNOWN_COMPANY.format(company=autopilot.company)
    product = given(autopilot.product) or operations_of(None, company)[0]["operation"]
    if product not in company.available_products:
        return "$.product", AUTOPILOT_PRODUCT.format(
            company=company.name, product=product, offered=", ".join(company.available_products))
    if product not in products:
        return "$.product", AUTOPILOT_ACCOUNT_PRODUCT.format(product=product,
                                                             products=", ".join(products))
    name = sandbox_username(autopilot.username)
    scenario = scenario_for_username(scenarios, autopilot.username, [{"operation": product}])
    if scenario is None:
        if name.startswith("test-") and name != REFUSED_USERNAME:
            return "$.username", AUTOPILOT_UNKNOWN_USERNAME.format(username=autopilot.username)
        return None
    if not scenarios[scenario].fits(product):
        fits = ", ".join(scenarios[scenario].products or ()) or "no product"
        return "$.username", AUTOPILOT_UNFIT.format(username=autopilot.username,
                                                    scenario=scenario, product=product, fits=fits)
    return None


def bind_autopilot(tenant: Tenant, identifier: str, autopilot: Any) -> None:
    """PUT /_sandbox/users/{identifier}/autopilot: a plan the flow cannot play is refused
    (422 with the field at fault) and nothing changes; else it replaces the user's."""
    problem = autopilot_problem(tenant.tasks.scenarios, tenant.companies, tenant.products,
                                autopilot)
    if problem is not None:
        path, message = problem
        raise ValidationFailed(message, details=[field_detail(path, message)])
    tenant.identity.user(identifier)
    tenant.autopilots.bind(identifier, autopilot)


def flow_autopilot(tenant: Tenant, token: PublicToken) -> dict[str, Any]:
    """GET /sdk/autopilot: the plan of the token's user (null: none), the tenant's clock
    (the page's pauses follow it) and, for a plan with its own language, the sentences in
    it."""
    autopilot = tenant.autopilots.get(token.identifier)
    answer: dict[str, Any] = {"autopilot": autopilot, "now": tenant.clock.timestamp()}
    company = tenant.companies.get(autopilot.company) if autopilot is not None else None
    if company is not None:
        answer["company_name"] = company.name  # what the user types into the search
    if autopilot is not None and given(autopilot.language):
        answer["messages"] = user_messages(autopilot.language)
    return answer
