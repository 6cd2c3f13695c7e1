"""Processor links: aggregator tokens registered for a user, and the pipeline they feed.

The customer mints a processor token at the aggregator (here: the control plane),
registers it, and the service pulls the account's transactions asynchronously,
then runs employer classification, recurring-transaction detection, or both, as
the customer's enabled products say (spec: Processor link, Processor-link events).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta
from functools import cache
from itertools import pairwise
from typing import Any

import msgspec

from ...clock import Clock, calendar_day
from ...errors import (ApiError, IdentifierMismatch, InvalidProcessorToken, OtherEnvironmentToken,
                      ProcessorLinksNotFound, ProcessorTokenLimitReached, ProcessorTokenAlreadyRegistered,
                      ProcessorTokenNotFound, ProcessorTokenRevoked, UnknownScenario,
                      ValidationFailed, field_detail)
from rapidfuzz import fuzz

from ..webhooks.event_types import declared
from .aggregator_data import PAYROLL_WORDS, account_history, candidates, payer
from ..companies.companies import Company, CompanyDirectory, ManualDepositRule
from ..tasks.states import DAYS_REQUESTED
from ..companies.search import SearchRequest, normalize, search_companies
from ..rules import Rules
from ..identity.identity import unguessable
from ..parts import Held, TenantSettings
from ..shapes import (NO_CONTROL_CHARACTER, PROCESSOR_LINK_SCENARIOS, UNSET, Command, Maybe, View,
                     choice, field, given, of, schema_of)
from ..stored import LoadError, Stored, Time, array, described, stored
from ..sections import Sections, unique
from ..timeline import Timeline, action_kind

TOKEN_PATTERN = re.compile(r"^processor-(sandbox|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-"
                           r"[0-9a-f]{4}-[0-9a-f]{12}$")
PULL, CLASSIFY, DETECT = "pull-transactions", "employer-classification", "recurring-transaction-detection"
STAGES = (PULL, CLASSIFY, DETECT)  # a link's processing, in order
DEFAULT_SCENARIO = "processor-link-happy-path"
PROCESSOR_TOKEN_LIMIT = ("This tenant holds {stored} processor tokens (each with its link at "
                         "most), and keeps at most {limit}: --max-tokens "
                         "(PAYROLL_SANDBOX_MAX_TOKENS, config maxTokens). Reset it or raise "
                         "the bound; nothing stored was changed.")
PROCESSING, COMPLETED, ERROR = "processing", "completed", "error"

MALFORMED = "processorToken is not a processor token (processor-<environment>-<uuid>)."
WRONG_ENVIRONMENT = ("This processor token was minted for the {theirs} environment; this server is "
                     "the {ours} environment.")
UNKNOWN_TOKEN = "No processor token {token!r} was minted by the aggregator."
REVOKED = "This processor token was revoked at the aggregator; mint a new one after relinking."
ALREADY_REGISTERED = "This processor token is already registered (link {link_id})."
IDENTIFIER_NEEDED = "Name the user with the user-identifier header (or mint the token for one)."
IDENTIFIER_MISMATCH = "user-identifier does not match the user the token was minted for."
NO_LINKS = "The user {identifier!r} has no processor links."
BROKEN_STAGE = "The sandbox could not run this link's next stage (its log says why)."
ONLY_AUTH = ("The link token requested only the auth product; request the transactions "
             "product so that transactions can be retrieved.")


DaysRequested = of(int, ge=DAYS_REQUESTED["minimum"], le=DAYS_REQUESTED["maximum"])


class ProcessorToken(Stored):
    """A processor token the aggregator's client exchanges for a processor link."""

    token: str
    environment: str
    identifier: str | None
    days_requested: DaysRequested
    products: tuple[str, ...]
    scenario: str | None
    account_id: str
    request_id: str
    revoked: bool = False
    link_id: str | None = None
    item_id: str | None = None  # the aggregator API's item it was made from (None: the shortcut)


# One transaction a link pulled from the aggregator (ProcessorLink.transactions), as the
# pipeline's later stages read it: a snapshot's are checked against it.
class PulledTransaction(Command, rename=None, kw_only=True):
    transaction_id: str
    account_id: str
    date: of(str, extra_json_schema={"format": "date"})
    amount: float
    name: str
    category: choice("payroll", "subscription", "purchase", "transfer", "interest")


class ProcessorLink(Stored):
    """A bank link an aggregator made with a processor token, and its transactions."""

    id: str
    identifier: str
    user_id: str
    token: str
    created_at: Time
    status: str = PROCESSING
    stages: list[str] = msgspec.field(default_factory=list)
    transactions: described(list[dict[str, Any]], schema_of(list[PulledTransaction])) = (
        msgspec.field(default_factory=list))
    employer_matches: list[dict[str, Any]] | None = None
    recurring: list[dict[str, Any]] | None = None
    error: dict[str, str] | None = None


class ProcessorTokenRequest(Command, kw_only=True):
    identifier: Maybe[of(str, "The user the token is for (else: the user-identifier header at "
                         "registration).", min_length=1, pattern=NO_CONTROL_CHARACTER)] = UNSET
    days_requested: of(DaysRequested, "transactions.days_requested of the link token.") = 90
    products: of(list[choice("transactions", "auth")], "Products the link token requested; "
                 "only auth fails the pipeline.", min_length=1, unique=True,
                 extra_json_schema={"default": ["transactions"]}
                 ) = field(default_factory=lambda: ["transactions"])
    scenario: Maybe[of(str, "A processor-link scenario, e.g. item-login-required.",
                       min_length=1, extra_json_schema={"x-names": PROCESSOR_LINK_SCENARIOS})
                    ] = UNSET



class ProcessorLinks(Held[ProcessorLink]):
    """One tenant's processor tokens and processor links, and the pipeline that runs each
    link: read as a mapping of link id -> ProcessorLink; changed only through its methods.
    It is given what it uses, not the tenant; the aggregator's items (`items`) once they
    exist, as they are given these links."""

    def __init__(self, rules: Rules, *, ids: Any, environment: str, clock: Clock,
                 timeline: Timeline, companies: CompanyDirectory, settings: TenantSettings,
                 identity: Any, emit: Callable[..., Any]) -> None:
        self.scenarios = rules.scenarios
        self.aggregator = rules.aggregator
        self.limits = rules.limits
        self.ids, self.environment, self.clock, self.timeline = ids, environment, clock, timeline
        self.companies, self.settings, self.identity, self.emit = companies, settings, identity, emit
        self.items: Any = None  # aggregator.Aggregator, the aggregator API's items
        self.tokens: dict[str, ProcessorToken] = {}   # token text -> ProcessorToken
        self._by_id: dict[str, ProcessorLink] = {}

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({"processorTokens": array(ProcessorToken),
                         "processorLinks": array(ProcessorLink)},
                        bounds={"processorTokens": lambda limits: (limits.max_tokens, "--max-tokens"),
                                "processorLinks": lambda limits: (limits.max_tokens, "--max-tokens")})

    def dump(self) -> dict[str, Any]:
        return {"processorTokens": [stored(token) for token in self.tokens.values()],
                "processorLinks": [stored(link) for link in self._by_id.values()]}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        """The tokens and links, each once, every link's token among the tokens."""
        tokens = loading.processor_tokens = unique(document, "processorTokens", ProcessorToken,
                                                   "token")
        links = loading.links = unique(document, "processorLinks", ProcessorLink, "id")
        for number, link in enumerate(links.values()):
            if link.token not in tokens:
                raise LoadError(f"$.processorLinks[{number}].token", "no such processor token")
        return {"tokens": tokens, "links": links}

    def restore(self, tokens: dict[str, ProcessorToken], links: dict[str, ProcessorLink]) -> None:
        """A snapshot's processor tokens and links (as load checked them)."""
        self.tokens, self._by_id = tokens, links

    # -- the aggregator's side --------------------------------------------------------------

    def mint_token(self, request: ProcessorTokenRequest, *, item_id: str | None = None,
                   account_id: str | None = None) -> ProcessorToken:
        """What the aggregator's processor-token creation returns: for the control plane's
        shortcut, or (`item_id`, `account_id`) for an account of an item of the aggregator
        API (domain/aggregator.py)."""
        if len(self.tokens) >= self.limits.max_tokens:  # a link each at most: bounded too
            raise ProcessorTokenLimitReached(PROCESSOR_TOKEN_LIMIT.format(
                stored=len(self.tokens), limit=self.limits.max_tokens))
        scenario = given(request.scenario)
        if scenario is not None:
            found = self.scenarios.get(scenario)
            if found is None or found.kind != "processor-link":
                known = sorted(n for n, s in self.scenarios.items() if s.kind == "processor-link")
                raise UnknownScenario(f"No processor-link scenario is named {scenario!r}. "
                                      f"Known: {', '.join(known)}.",
                                      details=[field_detail("$.scenario", "unknown")])
        token = ProcessorToken(
            token=unguessable(f"processor-{self.environment}-"),
            environment=self.environment, identifier=given(request.identifier),
            days_requested=request.days_requested, products=tuple(request.products),
            scenario=scenario,
            account_id=account_id or self.ids.secret("acc_")[:28],
            request_id=self.ids.secret("req_")[:20], item_id=item_id)
        self.tokens[token.token] = token
        return token

    def revoke_token(self, token_text: str) -> ProcessorToken:
        token = self.tokens.get(token_text)
        if token is None:
            raise ProcessorTokenNotFound(UNKNOWN_TOKEN.format(token=token_text))
        token.revoked = True
        return token

    def revoke_item_tokens(self, item_id: str) -> None:
        """The aggregator removed an item: every processor token made from it is revoked."""
        for token in self.tokens.values():
            if token.item_id == item_id:
                token.revoked = True

    # -- the service's side -----------------------------------------------------------------

    def register(self, token_text: str, header_identifier: str | None) -> ProcessorLink:
        """POST /{aggregator}/processor-links: checks the token, starts the pipeline."""
        path = "$.processorToken"
        match = TOKEN_PATTERN.match(token_text)
        if match is None:
            raise InvalidProcessorToken(MALFORMED, details=[field_detail(path, MALFORMED)])
        if match.group(1) != self.environment:
            raise OtherEnvironmentToken(
                WRONG_ENVIRONMENT.format(theirs=match.group(1), ours=self.environment),
                details=[field_detail(path, "other environment")])
        token = self.tokens.get(token_text)
        if token is None:
            raise ProcessorTokenNotFound(UNKNOWN_TOKEN.format(token=token_text),
                                         details=[field_detail(path, "unknown")])
        if token.revoked:
            raise ProcessorTokenRevoked(REVOKED, details=[field_detail(path, "revoked")])
        if token.link_id is not None:
            raise ProcessorTokenAlreadyRegistered(ALREADY_REGISTERED.format(link_id=token.link_id),
                                                  details=[field_detail(path, "already registered")])
        identifier = header_identifier or token.identifier
        if identifier is None:
            raise ValidationFailed(IDENTIFIER_NEEDED, details=[
                field_detail("user-identifier", IDENTIFIER_NEEDED, location="header")])
        if token.identifier is not None and header_identifier and header_identifier != token.identifier:
            raise IdentifierMismatch(IDENTIFIER_MISMATCH, details=[
                field_detail("user-identifier", IDENTIFIER_MISMATCH, location="header")])
        user = self.identity.user(identifier)
        link = ProcessorLink(id=self.ids.object_id(), identifier=identifier, user_id=user.id,
                             token=token.token, created_at=self.clock.timestamp())
        token.link_id = link.id
        self._by_id[link.id] = link
        self._schedule(link, token)
        return link

    def _links_of(self, identifier: str) -> list[ProcessorLink]:
        links = [l for l in self._by_id.values() if l.identifier == identifier]
        if not links:
            raise ProcessorLinksNotFound(NO_LINKS.format(identifier=identifier))
        return links

    def remove_links(self, identifier: str) -> list[ProcessorLink]:
        """DELETE: every link of the user goes, and nothing pending runs afterwards."""
        links = self._links_of(identifier)
        for link in links:
            self.timeline.cancel_owned(link.id)
            del self._by_id[link.id]
        return links

    def results(self, identifier: str, kind: str) -> dict[str, Any]:
        """Employer matches or recurring transactions of every link of the user, with the
        links' status, so a caller sees when processing has not completed."""
        links = self._links_of(identifier)
        data = []
        for link in links:
            found = link.employer_matches if kind == CLASSIFY else link.recurring
            data += [{**item, "processorLink": link.id} for item in found or []]
        statuses = {l.status for l in links}
        # A relink still processing is what a polling client waits for, not the old error.
        status = next((s for s in (PROCESSING, COMPLETED) if s in statuses), ERROR)
        return {"data": data, "status": status, "links": links}

    # -- the pipeline -----------------------------------------------------------------------

    def _schedule(self, link: ProcessorLink, token: ProcessorToken) -> None:
        scenario = self.scenarios[token.scenario or DEFAULT_SCENARIO]
        for number, step in enumerate(scenario.steps):
            changes = {**step.changes, "last": number == len(scenario.steps) - 1}
            self.timeline.schedule(link.created_at + step.at,
                                   _Stage(self.itself, link, token, changes),
                                     label=f"{scenario.name} for processor link {link.id}",
                                     owner=link.id)

    def run_step(self, link: ProcessorLink, token: ProcessorToken,
                 changes: dict[str, Any]) -> None:
        if link.status != PROCESSING:
            return
        if "aggregatorError" in changes:
            self._fail(link, changes["aggregatorError"])
            return
        stage = changes["stage"]
        if stage == PULL:
            # The aggregator refuses the pull when the token's item needs its user to log in
            # again (or is gone), whatever the item's products.
            refused = self.items.pull_error(token.item_id)
            if refused is not None:
                self._fail(link, refused)
                return
            if "transactions" not in token.products:
                self._fail(link, {"errorType": "ITEM_ERROR",
                                  "errorCode": "PRODUCTS_NOT_SUPPORTED",
                                  "errorMessage": ONLY_AUTH})
                return
            link.transactions = self._transactions(link, token)
        elif stage not in self.settings.products:
            pass  # a later stage is named after its product, which this account lacks: skipped
        elif stage == CLASSIFY:
            link.employer_matches = self._classify(link)
            link.stages.append(stage)
            self._emit(link, "employer-classification-completed",
                       {"matches": len(link.employer_matches)})
        else:
            link.recurring = self._detect(link)
            link.stages.append(stage)
            self._emit(link, "recurring-transaction-detection-completed",
                       {"recurringTransactions": len(link.recurring)})
        if changes.get("last"):
            link.status = COMPLETED

    def fail_broken(self, link: ProcessorLink) -> None:
        """A stage of `link` raised (a job's error): the link fails as the aggregator's
        internal error would fail it, rather than stays processing."""
        if link.status == PROCESSING:
            self._fail(link, {"errorType": "API_ERROR", "errorCode": "INTERNAL_SERVER_ERROR",
                              "errorMessage": BROKEN_STAGE})

    def _fail(self, link: ProcessorLink, error: dict[str, str]) -> None:
        """The aggregator failed: processing does not complete (spec: aggregator-error)."""
        link.status = ERROR
        link.error = dict(error)
        self.timeline.cancel_owned(link.id)
        self._emit(link, f"{self.aggregator}-error", dict(error))

    def _emit(self, link: ProcessorLink, event_type: str, data: dict[str, Any]) -> None:
        draft = declared(self.aggregator)[event_type].from_json(
            {"processorLink": link.id, **data})
        self.emit(draft, identifier=link.identifier,
                  user={"_id": link.user_id, "identifier": link.identifier})

    def _transactions(self, link: ProcessorLink,
                      token: ProcessorToken) -> list[dict[str, Any]]:
        """The account's history of the token's daysRequested days: a token of an item of
        the aggregator's API pulls the item's (the one its /transactions/sync answers); the
        control plane's shortcut, which has no item, gets a checking account's made up for
        the link (aggregator_data.account_history)."""
        if token.item_id is not None:
            return self.items.pulled_transactions(token.item_id, token.account_id)
        history = account_history(link.id, self.clock.now().date(), token.days_requested,
                                  token.account_id, lambda: self.ids.secret("txn_")[:24],
                                  *candidates(self.companies.ordered()))
        return sorted(history, key=lambda t: (t["date"], t["name"]))

    def _classify(self, link: ProcessorLink) -> list[dict[str, Any]]:
        """Payroll deposits grouped by payer, matched to catalog companies by name."""
        by_payer: dict[str, list[dict[str, Any]]] = {}
        for transaction in link.transactions:
            if transaction["amount"] < 0 and any(w in transaction["name"] for w in PAYROLL_WORDS):
                by_payer.setdefault(payer(transaction["name"]), []).append(transaction)
        import statistics  # here, not at the top: with fractions and decimal, 5 ms of a start

        matches = []
        for name, deposits in sorted(by_payer.items()):
            match = self._catalog_match(name)
            if match is None:
                continue
            company, confidence = match
            dates = [date.fromisoformat(d["date"]) for d in deposits]
            matches.append({"companyId": company.id, "name": company.name,
                            "confidence": confidence, "transactionsMatched": len(deposits),
                            "averageDepositAmount": round(-statistics.fmean(d["amount"] for d in deposits), 2),
                            "lastDepositDate": calendar_day(max(dates)),
                            "payCycle": _cadence(dates)})
        return matches

    def _detect(self, link: ProcessorLink) -> list[dict[str, Any]]:
        """Outgoing charges that repeat at a steady interval."""
        import statistics

        by_name: dict[str, list[dict[str, Any]]] = {}
        for transaction in link.transactions:
            if transaction["amount"] > 0:
                by_name.setdefault(transaction["name"], []).append(transaction)
        found = []
        for name, charges in sorted(by_name.items()):
            if len(charges) < 2:
                continue
            amounts = {c["amount"] for c in charges}
            dates = sorted(date.fromisoformat(c["date"]) for c in charges)
            gaps = [(b - a).days for a, b in pairwise(dates)]
            if len(amounts) > 1 or max(gaps) - min(gaps) > 3:
                continue  # not the same charge at a steady interval
            interval = round(statistics.median(gaps))
            match = self._catalog_match(name)
            found.append({"merchant": name.title(), "companyId": match[0].id if match else None,
                          "cadence": _cadence(dates), "amount": charges[0]["amount"],
                          "lastDate": calendar_day(dates[-1]),
                          "nextDate": calendar_day(dates[-1] + timedelta(days=interval)),
                          "transactions": len(charges),
                          "confidence": round(min(1.0, 0.5 + 0.1 * len(charges)), 2)})
        return found

    def _catalog_match(self, text: str) -> tuple[Company, float] | None:
        """The catalog company a bank statement's text names, and how sure the match is."""
        try:
            found = search_companies(self.companies, ManualDepositRule(),
                                     SearchRequest(query=text[:200], limit=1))
        except ApiError:
            return None
        if not found:
            return None
        confidence = round(fuzz.token_set_ratio(normalize(text), normalize(found[0].name)) / 100, 2)
        return found[0], confidence


def _cadence(dates: list[date]) -> str:
    import statistics

    if len(dates) < 2:
        return "unknown"
    gap = statistics.median((b - a).days for a, b in pairwise(sorted(dates)))
    if gap <= 8:
        return "weekly"
    if gap <= 16:
        return "biweekly"
    return "monthly"


class _StageChanges(View, kw_only=True):
    stage: Maybe[choice(*STAGES)] = UNSET
    aggregator_error: Maybe[dict[str, Any]] = UNSET
    last: Maybe[bool] = UNSET


@action_kind("processor-link-stage")
class _Stage(msgspec.Struct, frozen=True):
    """A scenario step of a processor link, due on the timeline."""

    # The links, found when the stage runs (a restored stage is rebuilt before the restored
    # tenant has its new links, so it finds them through the tenant).
    links: Callable[[], ProcessorLinks]
    link: ProcessorLink
    token: ProcessorToken
    changes: dict[str, Any]

    # In a snapshot: the link (its token follows) and the step's changes as they are.
    class Stored(Command, kw_only=True):
        link: str
        changes: _StageChanges

    def __call__(self) -> None:
        self.links().run_step(self.link, self.token, self.changes)

    def fail(self) -> None:
        """The step raised: the link ends in `error`, with its event."""
        self.links().fail_broken(self.link)

    def stored(self) -> Stored:
        return self.Stored(link=self.link.id, changes=self.changes)

    @classmethod
    def rebuild(cls, data: Stored, context: Any) -> _Stage:
        changes = msgspec.to_builtins(data.changes)  # as the step's changes are run
        if "aggregatorError" not in changes and "stage" not in changes:
            raise LookupError("a stage's changes name a `stage` or an `aggregatorError`")
        link = context.processor_link(data.link)
        return cls(context.part("links"), link, context.processor_token(link.token), dict(changes))
