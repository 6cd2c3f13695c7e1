"""The scenario matrix (`@pytest.mark.payroll_sandbox_each_scenario(product=..., outcome=...)`):
the catalog's task scenarios that fit the marker's filters, each with what a task under it
ends as, read without a running server.

The catalog is the package's loader's (bundled scenarios, `--payroll-sandbox-scenarios`,
the service profile's products): what `GET /_sandbox/scenarios` lists. Its fields decide
the filters: a text field filters by its value (`name`, `kind`, `outcome`), a list field
by one of its items under its singular name (`products` -> `product`), and `reason` by
the failure reason a scenario ends in. The expected event types come from running one task
under each scenario on an in-process registry of the same files (no server, no I/O), so
they are what the sandbox sends, not a second description of it.
"""

from __future__ import annotations

import functools
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MARKER = "payroll_sandbox_each_scenario"
TEXT_FREE = ("description",)  # catalog fields no one filters on
MATRIX_USER = "matrix-user"


class MatrixError(ValueError):
    """A marker the catalog cannot answer: an unknown filter or a value no scenario has."""


@dataclass(frozen=True)
class Case:
    """One item of the matrix: the scenario bound to the item's tenant, and what one task of
    `product` under it ends as (the fixture `payroll_sandbox_expected`)."""

    scenario: str
    product: str
    status: str
    reason: str | None
    event_types: tuple[str, ...]

    def expected(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "product": self.product, "status": self.status,
                "reason": self.reason, "eventTypes": list(self.event_types)}


def catalog_rows(scenarios: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each task scenario as the catalog lists it (GET /_sandbox/scenarios's fields), with
    the reason it fails with."""
    from ..domain.webhooks.coverage import failure_reason
    from ..schemas.responses import Scenario

    import msgspec

    return {name: {**msgspec.to_builtins(Scenario.of(scenario)), "reason": failure_reason(scenario)}
            for name, scenario in scenarios.items() if scenario.kind == "task"}


def filters_of(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """filter name -> the catalog field it reads: a text field by its name, a list of texts
    by its singular."""
    fields: dict[str, str] = {}
    for row in rows.values():
        for field, value in row.items():
            if field in TEXT_FREE:
                continue
            if isinstance(value, str) or (value is None and field == "reason"):
                fields[field] = field
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                fields[field[:-1] if field.endswith("s") else field] = field
    return fields


def select(rows: Mapping[str, Mapping[str, Any]], filters: Mapping[str, Any]) -> list[str]:
    """The names of the rows every filter fits (a filter's value: one value or several, any
    of them), in the catalog's order; a MatrixError for an unknown filter or value."""
    known = filters_of(rows)
    wanted: dict[str, set[Any]] = {}
    for name, value in filters.items():
        if name not in known:
            raise MatrixError(f"{MARKER}: unknown filter {name!r} (the catalog's filters: "
                              f"{', '.join(sorted(known))})")
        values = set(value) if isinstance(value, (list, tuple, set, frozenset)) else {value}
        field = known[name]
        seen = {v for row in rows.values() for v in _values(row.get(field))}
        unknown = sorted(map(repr, values - seen))
        if unknown:
            raise MatrixError(f"{MARKER}({name}={value!r}): no task scenario of the catalog has "
                              f"{name} {', '.join(unknown)} (its values: "
                              f"{', '.join(sorted(map(str, seen)))})")
        wanted[field] = values
    return [name for name, row in rows.items()
            if all(values & set(_values(row.get(field))) for field, values in wanted.items())]


def _values(value: Any) -> list[Any]:
    return [v for v in value if v is not None] if isinstance(value, list) else (
        [] if value is None else [value])


def cases(settings: Any, filters: Mapping[str, Any]) -> list[Case]:
    """The matrix of a marker: one Case per fitting scenario (MatrixError: a bad marker)."""
    engine = _engine(settings)
    names = select(engine.rows, filters)
    product = filters.get("product")
    products = set(product) if isinstance(product, (list, tuple, set, frozenset)) else (
        {product} if product is not None else None)
    found = []
    for name in names:
        fits = [p for p in engine.rows[name]["products"] if products is None or p in products]
        found.append(engine.run(name, fits[0]))
    return found


@functools.lru_cache(maxsize=4)
def _engine(settings: Any) -> _Engine:
    return _Engine(settings)


class _Engine:
    """A registry of the run's files on a manual clock, and a fresh tenant of it without
    endpoints: a task runs to its end without an event loop or a server."""

    def __init__(self, settings: Any) -> None:
        from ..app import build_registry, load, tenant_services
        from ..clock import Clock
        from ..schemas.api import TenantRequest
        from ..transport.dispatcher import ATTEMPT_TIMEOUT, Dispatcher

        loaded = load(settings)
        self.rows = catalog_rows(loaded.scenarios)
        registry = build_registry(settings, clock=Clock(mode="manual"), loaded=loaded)
        registry.open(tenant_services(Dispatcher(vendor=registry.service.vendor,
                                                 seed=settings.seed, timeout=ATTEMPT_TIMEOUT)))
        self.tenant = registry.create_tenant(TenantRequest(
            name="payroll-sandbox-matrix", products=list(registry.service.products)))
        self._runs: dict[tuple[str, str], Case] = {}

    def company_for(self, products: Iterable[str]) -> tuple[str, str] | None:
        """(a company, the product) for the first of `products` an operational company
        without a default scenario of its own offers."""
        from ..domain.companies.companies import OPERATIONAL

        companies = [c for c in self.tenant.companies.ordered()
                     if c.status == OPERATIONAL and c.default_scenario is None]
        for product in products:
            for company in companies:
                if product in company.available_products:
                    return company.id, product
        return None

    def run(self, scenario: str, product: str) -> Case:
        if (scenario, product) not in self._runs:
            import msgspec

            from ..domain.tasks.requests import CreateTask, TaskCreateRequest

            # A product no company of the catalog offers runs under another the scenario
            # fits: its task's event types are the scenario's, whatever the product.
            target = self.company_for([product, *self.rows[scenario]["products"]])
            if target is None:
                raise MatrixError(f"{MARKER}: no company of the catalog offers a product "
                                  f"{scenario} fits ({', '.join(self.rows[scenario]['products'])})")
            tasks = self.tenant.tasks
            body = {"identifier": MATRIX_USER, "company": target[0], "product": target[1],
                    "scenario": scenario}
            _, started = tasks.create_task(CreateTask(msgspec.convert(body, TaskCreateRequest)))
            _drive(self.tenant.runner.run_until_idle())
            task = started[0]
            types = tuple(e.type for e in self.tenant.events.query(task=task.id))
            self._runs[scenario, product] = Case(scenario, product, task.status, task.reason,
                                                 types)
        return self._runs[scenario, product]


def _drive(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """A run of a tenant without endpoints, to its end, without an event loop: its runner
    only ever yields bare between slices of work."""
    try:
        while True:
            if coroutine.send(None) is not None:
                raise RuntimeError("the matrix's engine waited on I/O")
    except StopIteration as done:
        return done.value
    finally:
        coroutine.close()
