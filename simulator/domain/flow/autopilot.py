"""The hosted flow's autopilot: what a user would do in the flow, bound to the user.

PUT /_sandbox/users/{identifier}/autopilot (or an account's `autopilots` in accounts.yaml)
says which company the user picks, how they sign in and answer a second factor, the split
they choose and the language they read. When the customer's unchanged frontend opens the
hosted flow for that user, the flow's page (flow-autopilot.js) plays those steps itself,
so a frontend test runs end to end with no click in the cross-origin iframe. Which plans
make sense (the company exists, the username's scenario fits the product) is the hosted
flow's rule: sdk.autopilot_problem.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec

from ..shapes import UNSET, Command, Maybe, choice, of, schema_of
from ..sections import Sections
from ..stored import loaded
from ..tasks.records import Distribution


class Autopilot(Command, kw_only=True, omit_defaults=False):
    """What the user does in the hosted flow (PUT /_sandbox/users/{identifier}/autopilot)."""

    company: of(str, "The _id of the company the user picks (the flow searches for its name "
                "and picks it among the results; a deeplinked company is taken as it is).",
                min_length=1, max_length=64)
    username: of(str, "What the user signs in with: a sandbox username (test-good, test-bad, "
                 "test-failure, test-code-mfa, ...) or test-<scenario>; any other is a good "
                 "login.", min_length=1, max_length=200) = "test-good"
    password: of(str, "Any password passes.", min_length=1, max_length=200) = "any password"
    mfa: of(str, "The answer to a code or security question, when the flow asks one (any "
            "answer passes).", min_length=1, max_length=200) = "123456"
    distribution: Maybe[of(Distribution, "The split the user chooses where the flow asks "
                           "for one (the direct-deposit-setup step).")] = UNSET
    language: Maybe[choice("en", "es", description="The language the user reads the flow in "
                           "(over the configuration's).")] = UNSET
    product: Maybe[of(str, "The operation the frontend's flow runs, which the username's "
                      "scenario must fit (default: the company's first of deposit, verify, "
                      "switch, present).", min_length=1, max_length=64)] = UNSET
    pause: of(float, "Seconds of the tenant's clock the user spends on each screen before "
              "acting (0: at once). On the manual clock the control plane's advance moves "
              "them on.", ge=0, le=3600) = 0.0


class Autopilots:
    """One tenant's autopilots: identifier -> Autopilot, changed only through its methods."""

    def __init__(self, account: dict[str, Any]) -> None:
        self.account = account
        self.bound: dict[str, Autopilot] = {}

    def seed_from_account(self) -> None:
        """The account's `autopilots` (accounts.yaml, checked at load: loading.py)."""
        for entry in self.account.get("autopilots", []):
            fields = {k: v for k, v in entry.items() if k != "identifier"}
            self.bound[entry["identifier"]] = msgspec.convert(fields, Autopilot)

    def bind(self, identifier: str, autopilot: Autopilot) -> None:
        self.bound[identifier] = autopilot

    def unbind(self, identifier: str) -> bool:
        """Whether there was one."""
        return self.bound.pop(identifier, None) is not None

    def get(self, identifier: str) -> Autopilot | None:
        return self.bound.get(identifier)

    # -- snapshot (domain/stored.py) ----------------------------------------------------------

    @staticmethod
    @cache
    def sections() -> Sections:
        return Sections({}, optional={
            "autopilots": {"type": "object", "additionalProperties": schema_of(Autopilot)}})

    def dump(self) -> dict[str, Any]:
        if not self.bound:  # written only once used: older readers never saw it
            return {}
        return {"autopilots": {k: msgspec.to_builtins(v) for k, v in self.bound.items()}}

    @staticmethod
    def load(document: dict[str, Any], loading: Any) -> dict[str, Any]:
        return {"bound": loaded(document.get("autopilots", {}), dict[str, Autopilot],
                                "$.autopilots")}

    def restore(self, bound: dict[str, Autopilot]) -> None:
        self.bound = bound

