"""API faults on purpose (issue 23; DESIGN.md, Bodies and API faults): rules a tenant sets
with `PUT /_sandbox/faults/api` so that the calls its own app makes fail as a production
API sometimes does (an error status with `retry-after`, a slow answer, a reset connection)
and its retry and backoff code is exercised.

A rule names one operation as the OpenAPI document does (method and declared path, with
its `{params}`) and one fault; `count` spends it, `probability` draws from the tenant's
seeded generator, so a run repeats. The pipeline (edge/pipeline.py) asks `fire` for
every request after authentication and carries out what fired before the handler runs,
so a faulted request changes nothing; the control plane is never faulted, so a test can
always take its rules back. Pure: no HTTP here.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from functools import cache
from typing import Any

import msgspec

from ..errors import ApiError, ValidationFailed, field_detail
from .shapes import UNSET, Command, Maybe, View, choice, of, raw, view_of
from .stored import LoadError, Stored, loaded, schema, stored
from .sections import (COUNT, RANDOM_STATE, Sections, checked_random_state, obj,
                       random_state as random_state_of)

MAX_RULES = 100            # per tenant (README: Limits)
MAX_LATENCY_MS = 30_000    # a slow answer waits at most 30 wall seconds
MAX_RETRY_AFTER = 3_600    # seconds a `retry-after` may ask for
MAX_COUNT = 1_000_000
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
CONTROL_PLANE = "/_sandbox/"
KINDS = ("status", "latencyMs", "reset")  # the fault a rule makes: exactly one of these

# The answer's `code` for the statuses a client tells apart; any other is injected-fault.
# The message says that the sandbox injected it.
CODES = {400: "bad-request", 401: "unauthorized", 403: "forbidden", 404: "not-found",
         408: "request-timeout", 409: "conflict", 429: "rate-limited",
         500: "internal-error", 502: "bad-gateway", 503: "service-unavailable",
         504: "gateway-timeout"}
INJECTED = ("The sandbox injected this {status} on purpose (rule $.rules[{number}] of PUT "
            "/_sandbox/faults/api, for {method} {path}); the request was not processed.")
NOT_FAULTABLE = "A rule names an operation that cannot be faulted."
CONTROL_PLANE_REFUSED = ("the control plane cannot be faulted (so a test can always take its "
                         "rules back)")
NO_CREDENTIALS = "{method} {path} takes no credentials, so no tenant's rule applies to it"
OTHER_METHOD = "{path} takes {methods}, not {method}"
NO_SUCH_PATH = ("no operation has the path {path!r}: name it as GET /openapi.json does, "
                "e.g. /task/{{taskId}}")

Method = choice(*METHODS, description="The operation's method (a GET rule also faults its "
                "HEAD).")
OperationPath = of(str, "The operation's path as the OpenAPI document declares it, with its "
                   "`{params}`: `/task/{taskId}`. Not the control plane.",
                   min_length=1, max_length=512, pattern=r"^/[^\x00-\x1f\x7f-\x9f]*$")
Status = of(int, "Answer this status with the error body (code `rate-limited` for 429, "
            "`service-unavailable` for 503, ...).", ge=400, le=599)
RetryAfter = of(int, "With `status`: the `retry-after` header, in seconds.", ge=0,
                le=MAX_RETRY_AFTER)
LatencyMs = of(int, "Wait this many wall milliseconds, then answer as usual.", ge=1,
               le=MAX_LATENCY_MS)
# A const (msgspec below 0.19 takes no Literal[True]).
Reset = raw({"const": True, "description": "Close the connection without an answer."})
Fires = of(int, "Fire this many times, then the rule is spent (omitted: no limit).", ge=1,
           le=MAX_COUNT)
Probability = of(float, "Fire on this share of the matching requests, drawn from the "
                 "tenant's seeded generator (default 1).", ge=0, le=1)


class OperationFault(View, kw_only=True):
    # A rule's operation and its fault (the request's, the answer's and the journal's).
    method: Method
    path: OperationPath
    status: Maybe[Status] = UNSET
    retry_after: Maybe[RetryAfter] = UNSET
    latency_ms: Maybe[LatencyMs] = UNSET
    reset: Maybe[Reset] = UNSET


class RuleRequest(OperationFault, kw_only=True, forbid_unknown_fields=True):
    """One rule of the request body: an operation and exactly one fault."""

    __schema_extra__ = {"oneOf": [{"required": [kind]} for kind in KINDS],
                        "dependentRequired": {"retryAfter": ["status"]}}

    count: Maybe[Fires] = UNSET
    probability: Maybe[Probability] = UNSET


class FaultsRequest(Command, kw_only=True):
    rules: of(list[RuleRequest], f"Every rule of the tenant (at most {MAX_RULES}); replaces "
              "the rules it had, counts starting at 0. `[]` clears them.",
              max_length=MAX_RULES)


class RuleView(OperationFault, kw_only=True):
    """A rule as the API writes it."""

    count: of(int, "Fires it may make (null: no limit).", ge=1) | None
    probability: Probability

    @classmethod
    def of(cls, rule: FaultRule, /, **more: Any) -> RuleView:
        """The rule: its operation, its one fault, count and probability (and what a view
        of it adds: `more`)."""
        return view_of(cls, rule, reset=True if rule.reset else UNSET, **more)


class CountedRule(RuleView, kw_only=True):
    fired: of(int, "How many requests it faulted.", ge=0)
    remaining: of(int, "Fires left (null: no limit).", ge=0) | None


class FaultsRecord(View, kw_only=True):
    rules: list[CountedRule]

    @classmethod
    def of(cls, faults: ApiFaults) -> FaultsRecord:
        """GET /_sandbox/faults/api: each rule, how often it fired and how often it may
        still fire."""
        return cls(rules=[CountedRule.of(rule, fired=fired, remaining=None if rule.count is None
                                         else rule.count - fired)
                          for rule, fired in zip(faults.rules, faults.fired)])


class FiredRule(RuleView, kw_only=True, forbid_unknown_fields=True):
    """The API fault rule that fired on the request (PUT /_sandbox/faults/api)."""

    rule: of(int, "Its place in the rules.", ge=0)


class InjectedFault(ApiError):
    """The error answer a rule asked for: its status, the code clients know that status
    by, a message saying the sandbox injected it, and its `retry-after`."""

    code = "injected-fault"

    def __init__(self, number: int, rule: FaultRule) -> None:
        super().__init__(INJECTED.format(status=rule.status, number=number, method=rule.method,
                                         path=rule.path),
                         code=CODES.get(rule.status or 0, "injected-fault"))
        self.status = rule.status or 500
        if rule.retry_after is not None:  # the header, as the edge renders it
            self.retry_after = rule.retry_after


UnknownOperation = ValidationFailed.coded("unknown-operation")


class FaultRule(Stored, frozen=True):
    """One rule as set: the operation, its one fault, and how often it may fire (a
    snapshot keeps it as the request gives it, null where a rule may go without one)."""

    method: Method
    path: OperationPath
    status: Status | None = None
    retry_after: RetryAfter | None = None
    latency_ms: LatencyMs | None = None
    reset: bool = False
    count: Fires | None = None     # None: no limit
    probability: Probability = 1.0

    @classmethod
    def from_request(cls, rule: RuleRequest) -> FaultRule:
        """A rule of a checked request body (the same fields; an absent one at its default)."""
        return msgspec.convert(msgspec.to_builtins(rule), cls)

    @property
    def kinds(self) -> list[str]:
        """The fault kinds it names (a valid rule: exactly one)."""
        return [kind for kind, given in (("status", self.status is not None),
                                         ("latencyMs", self.latency_ms is not None),
                                         ("reset", self.reset)) if given]


class Fired(msgspec.Struct, frozen=True):
    """A rule that fired on a request: its place in the list and the rule."""

    number: int
    rule: FaultRule


class Target(msgspec.Struct, frozen=True):
    """An operation of the app, as a rule may name it."""

    method: str
    path: str
    credentials: bool  # False: it takes none (no tenant's rule can apply)


class ApiFaults:
    """One tenant's API fault rules, how often each fired, and the seeded generator its
    probabilities draw from (a reset of the tenant makes a new one)."""

    def __init__(self, generator: random.Random) -> None:
        self.random = generator
        self.rules: list[FaultRule] = []
        self.fired: list[int] = []

    def put_rules(self, rules: list[FaultRule], targets: Iterable[Target]) -> FaultsRecord:
        """PUT /_sandbox/faults/api: these rules in place of the tenant's, counts at 0; or
        422 unknown-operation naming each rule whose operation cannot be faulted, and
        nothing changed."""
        problems = target_problems(rules, targets)
        if problems:
            raise UnknownOperation(NOT_FAULTABLE, details=[
                field_detail(f"$.rules[{number}].path", problem) for number, problem in problems])
        self.rules, self.fired = list(rules), [0] * len(rules)
        return FaultsRecord.of(self)

    def clear(self) -> FaultsRecord:
        """DELETE /_sandbox/faults/api."""
        self.rules, self.fired = [], []
        return FaultsRecord.of(self)

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    # Added later (issue 23): a snapshot without it has no API fault rules.
    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({}, {"apiFaults": obj({
        "rules": {"type": "array", "items": schema(FaultRule), "maxItems": MAX_RULES},
        "fired": {"type": "array", "items": COUNT, "maxItems": MAX_RULES},
        "random": RANDOM_STATE})})

    def dump(self) -> dict[str, Any]:
        return {"apiFaults": {"rules": [stored(rule) for rule in self.rules],
                              "fired": list(self.fired), "random": random_state_of(self.random)}}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        """The rules, their counts and generator (none: a snapshot from before they
        existed), checked as PUT /_sandbox/faults/api checks rules."""
        section = document.get("apiFaults")
        if section is None:
            return {}
        path = "$.apiFaults"
        rules = loaded(section["rules"], list[FaultRule], f"{path}.rules")
        if len(section["fired"]) != len(rules):
            raise LoadError(f"{path}.fired", "must count each rule once")
        for number, (rule, fired) in enumerate(zip(rules, section["fired"])):
            if len(rule.kinds) != 1:
                raise LoadError(f"{path}.rules[{number}]", "names exactly one of status, "
                                f"latencyMs, reset (it names {', '.join(rule.kinds) or 'none'})")
            if rule.retry_after is not None and rule.status is None:
                raise LoadError(f"{path}.rules[{number}].retryAfter", "only with status")
            if rule.count is not None and fired > rule.count:
                raise LoadError(f"{path}.fired[{number}]", f"more than its count {rule.count}")
        for number, problem in target_problems(rules, loading.fault_targets()):
            raise LoadError(f"{path}.rules[{number}].path", problem)
        return {"rules": rules, "fired": list(section["fired"]),
                "random_state": checked_random_state(section["random"], f"{path}.random")}

    def restore(self, rules: list[FaultRule] = (), fired: list[int] = (),
                random_state: tuple[Any, ...] | None = None) -> None:
        """A snapshot's rules, counts and draws (as load checked them; none: the tenant's
        fresh ones)."""
        self.rules, self.fired = list(rules), list(fired)
        if random_state is not None:
            self.random.setstate(random_state)

    def fire(self, method: str, path: str) -> Fired | None:
        """The first rule for this operation that is not spent and whose draw (when its
        probability is below 1) falls under it; counted. None: the request goes on."""
        for number, rule in enumerate(self.rules):
            if rule.path != path or rule.method != method:
                continue
            if rule.count is not None and self.fired[number] >= rule.count:
                continue
            if rule.probability < 1 and self.random.random() >= rule.probability:
                continue
            self.fired[number] += 1
            return Fired(number, rule)
        return None


def target_problems(rules: Iterable[FaultRule], targets: Iterable[Target]
                    ) -> list[tuple[int, str]]:
    """(place, why) of each rule whose operation cannot be faulted: the control plane, an
    operation without credentials, a path of another method, or no such path."""
    methods: dict[str, dict[str, bool]] = {}
    for target in targets:
        methods.setdefault(target.path, {})[target.method] = target.credentials
    problems = []
    for number, rule in enumerate(rules):
        served = methods.get(rule.path, {})
        if rule.path.startswith(CONTROL_PLANE) or rule.path == CONTROL_PLANE.rstrip("/"):
            problems.append((number, CONTROL_PLANE_REFUSED))
        elif rule.method in served and not served[rule.method]:
            problems.append((number, NO_CREDENTIALS.format(method=rule.method, path=rule.path)))
        elif served and rule.method not in served:
            problems.append((number, OTHER_METHOD.format(path=rule.path, method=rule.method,
                                                         methods=", ".join(sorted(served)))))
        elif not served:
            problems.append((number, NO_SUCH_PATH.format(path=rule.path)))
    return problems
