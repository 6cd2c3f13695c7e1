"""What a new task is decided by before it runs: the scenario that fits it, whether its company
takes it, the user it is for, its tasks, and what the pay-link state or a distribution
decide first."""

from __future__ import annotations

from ...errors import (CompanyDisabled, CompanyManualDeposits, CompanyUnderMaintenance,
                       IdentifierMismatch, ProductNotOffered, ScenarioDoesNotFit, UnknownScenario,
                       ValidationFailed, field_detail)
from .requests import check_metadata
from ..companies.companies import DISABLED, Company
from ..shapes import UNSET, given
from .pay_link import PAY_LINK
from .records import DEPOSIT
from .requests import CreateTask, TaskRequest, _split
from .states import Scenario, given_fields, written_payment_method

HAPPY_PATH = "happy-path"
DISTRIBUTION_NOT_SUPPORTED = "distribution-not-supported"
PAYMENT_TOKEN_LIFETIME = 24 * 3600  # spec: Limits, card token lifetime
PAYMENT_TOKEN_EXPIRED = "payment-token-expired"

UNKNOWN_SCENARIO = "No scenario is named {name!r}. Known: {known}."
SCENARIO_DOES_NOT_FIT = ("The scenario {name!r} does not fit a {product} task ({path}): it fits "
                         "{fits}. Scenarios for {product}: {fitting}.")
COMPANY_DISABLED = "Company {name!r} is disabled: no authentication flow can start against it."
COMPANY_IN_MAINTENANCE = ("Company {name!r} is under maintenance for {product}: no "
                          "authentication flow can start against it until it is operational.")
PRODUCT_NOT_OFFERED = "Company {name!r} does not offer the product {product!r} (it offers {offered})."
IDENTIFIER_REQUIRED = "With API keys, name the user with `identifier`."
IDENTIFIER_MISMATCH = "`identifier` does not match the user of the public token."

PRODUCT_REQUIRED = "Name the product: `product`, `operation` or `tasks`."
MANUAL_DEPOSITS_ONLY = ("Company {name!r} has no programmatic authentication for this account "
                        "(manual-deposits): users update their direct deposit by hand, and the "
                        "hosted flow shows them manual instructions.")


class TaskChoices:
    """The tasks part's choices for a new task (Tasks inherits them)."""

    def select_scenario(self, identifier: str, company: Company | None,
                        requested: str | None, login_scenario: str | None = None, *,
                        product: str | None = None,
                        product_path: str = "$.product") -> Scenario:
        """First match wins: the request, the user's binding, the binding of every user, the
        SDK login, the company, happy-path. With `product`, only a scenario that fits it: the request's is refused
        (422 scenario-does-not-fit), any other is passed over for the next."""
        if requested is not None:
            scenario = self.require_scenario(requested, "$.scenario")
            if product is not None and not self.fits(scenario, product):
                raise self.misfit(scenario, product, product_path)
            return scenario
        for name in (self.bindings.get(identifier), self.everyone, login_scenario,
                     company.default_scenario if company else None):
            if name is not None and (scenario := self.scenarios.get(name)) is not None and (
                    scenario.kind == "task" and (product is None or self.fits(scenario, product))):
                return scenario
        return self.scenarios[HAPPY_PATH]

    def fits(self, scenario: Scenario, product: str) -> bool:
        """Whether a task of `product` may run `scenario` (its products: scenario files)."""
        return scenario.fits(product, self.rules.scope_of)

    def misfit(self, scenario: Scenario, product: str, product_path: str) -> ScenarioDoesNotFit:
        """The 422 for a requested scenario that does not fit the task's product."""
        fits = ", ".join(scenario.products or ()) or "no product of this service"
        fitting = [n for n, s in sorted(self.scenarios.items()) if self.fits(s, product)]
        message = SCENARIO_DOES_NOT_FIT.format(name=scenario.name, product=product,
                                               path=product_path, fits=fits,
                                               fitting=", ".join(fitting))
        return ScenarioDoesNotFit(message, details=[
            field_detail("$.scenario", f"fits {fits}, not {product} ({product_path})")])

    def require_scenario(self, name: str, path: str = "$.scenario") -> Scenario:
        scenario = self.scenarios.get(name)
        if scenario is None or scenario.kind != "task":
            known = ", ".join(n for n, s in sorted(self.scenarios.items()) if s.kind == "task")
            raise UnknownScenario(UNKNOWN_SCENARIO.format(name=name, known=known),
                                  details=[field_detail(path, "unknown")])
        return scenario

    def _identifier(self, command: CreateTask) -> str:
        identifier = command.request.identifier
        if command.token is not None:
            token_identifier = command.token.identifier
            if identifier not in (UNSET, token_identifier):
                raise IdentifierMismatch(IDENTIFIER_MISMATCH,
                                         details=[field_detail("$.identifier", IDENTIFIER_MISMATCH)])
            return token_identifier
        if identifier is UNSET:
            raise ValidationFailed(IDENTIFIER_REQUIRED,
                                   details=[field_detail("$.identifier", IDENTIFIER_REQUIRED)])
        return identifier

    def _task_requests(self, command: CreateTask) -> list[TaskRequest]:
        request = command.request
        # Empty metadata is metadata; UNSET is false, a split is not.
        metadata, distribution = given(request.metadata), request.distribution or None
        if metadata is not None:
            check_metadata(metadata, "$.metadata")
        top_fields = given_fields(request)
        if request.tasks is not UNSET:
            for n, item in enumerate(request.tasks):
                if item.metadata is not UNSET:
                    check_metadata(item.metadata, f"$.tasks[{n}].metadata")
            return [TaskRequest(product=item.product or item.operation,
                                metadata=given(item.metadata, metadata),
                                payment_method=written_payment_method(given(item.payment_method)),
                                path=f"$.tasks[{n}].{'product' if item.product else 'operation'}",
                                distribution=_split(given(item.distribution, distribution)),
                                on_complete=item.on_complete, on_fail=item.on_fail,
                                fields={**top_fields, **given_fields(item)})
                    for n, item in enumerate(request.tasks)]
        # `operation`: the legacy name of `product`.
        if request.product is not UNSET:
            product, path = request.product, "$.product"
        elif request.operation is not UNSET:
            product, path = request.operation, "$.operation"
        else:
            raise ValidationFailed(PRODUCT_REQUIRED,
                                   details=[field_detail("$.product", PRODUCT_REQUIRED)])
        return [TaskRequest(product=product, metadata=metadata,
                            payment_method=written_payment_method(given(request.payment_method)),
                            path=path, distribution=_split(distribution), fields=top_fields)]

    def check_company_accepts(self, company: Company, product: str, path: str) -> None:
        """Spec: "Starting an authentication flow against an under-maintenance or disabled
        company is not possible" (maintenance is per product), and a manual-deposits company
        "has no programmatic authentication"."""
        if company.status == DISABLED:
            raise CompanyDisabled(COMPANY_DISABLED.format(name=company.name),
                                  details=[field_detail("$.company", "disabled")])
        if company.under_maintenance_for(product):
            raise CompanyUnderMaintenance(
                COMPANY_IN_MAINTENANCE.format(name=company.name, product=product),
                details=[field_detail("$.company", "under maintenance")])
        if self.settings.manual_deposits.applies_to(company):
            raise CompanyManualDeposits(MANUAL_DEPOSITS_ONLY.format(name=company.name),
                                        details=[field_detail("$.company", "manual deposits only")])
        if product not in company.available_products:
            raise ProductNotOffered(PRODUCT_NOT_OFFERED.format(
                name=company.name, product=product,
                offered=", ".join(company.available_products)),
                                  details=[field_detail(path, "not offered")])

    def authentication_method(self, company: Company, product: str) -> str | None:
        """A task's `authenticationMethod`, which the spec's Task table gives "For pay-link
        Tasks: `true-auth`, `smart-auth`": None (null) for a task of another scope, which
        the spec gives no value. The sandbox's rule (README: Fidelity): `true-auth` where
        the company's connector authenticates with true-auth (any of its forms), else
        `smart-auth` (a connector's `standard-auth` is the company's capability name, not a
        Task value)."""
        if self.rules.scope_of(product) != PAY_LINK:
            return None
        methods = company.capabilities.get("authenticationMethods") or ()
        return "true-auth" if any(m.startswith("true-auth") for m in methods) else "smart-auth"

    def _distribution_outcome(self, company: Company, request: TaskRequest) -> Scenario | None:
        """A deposit split the company's connector cannot set up (its
        capabilities.distributionTypes) fails as the sandbox username
        test-distribution-not-supported makes it fail (README: Fidelity)."""
        distribution = request.distribution
        supported = company.capabilities.get("distributionTypes")
        if (request.product != DEPOSIT or not distribution or supported is None
                or distribution["type"] in supported):
            return None
        return self.scenarios.get(DISTRIBUTION_NOT_SUPPORTED)

    def _pay_link_outcome(self, identifier: str, company: Company,
                          request: TaskRequest) -> Scenario | None:
        """Spec rules that decide a pay-link task before any scenario: the merchant's
        supported payment methods, the card token lifetime and the merchant's maximum of
        payment methods. A card token older than 24 hours is recreated, as "Recreation is
        normally automatic"; it expires only for a user whose recreation was switched off
        on the control plane (or through the payment-token-expired scenario)."""
        method = request.payment_method
        if not method:
            return None
        supported = company.capabilities.get("supportedPaymentMethods") or []
        if supported and method.get("type") not in supported:
            return self.scenarios.get("payment-method-not-supported")
        now = self.clock.timestamp()
        key = (identifier, method["_id"])
        if method.get("type") == "card":
            created = self.payment_tokens.get(key)
            expired = created is not None and now - created >= PAYMENT_TOKEN_LIFETIME
            if expired and identifier in self.card_token_recreation_off:
                return self.scenarios.get(PAYMENT_TOKEN_EXPIRED)
            if created is None or expired:
                self.payment_tokens[key] = now
        methods = self.merchant_payment_methods.setdefault((identifier, company.id), set())
        if method["_id"] not in methods:
            if company.max_payment_methods is not None and len(methods) >= company.max_payment_methods:
                return self.scenarios.get("payment-method-limit-reached")
            methods.add(method["_id"])
        return None
