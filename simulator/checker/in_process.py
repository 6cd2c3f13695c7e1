"""Realistic events for check-handler from a sandbox inside the command: no server,
no network but the deliveries to the handler."""

from __future__ import annotations

from typing import Any

import msgspec

from ..domain.companies.companies import OPERATIONAL
from ..domain.webhooks.events import Event
from ..domain.tasks.requests import CreateTask, TaskCreateRequest
from ..domain.webhooks.event_types import event_types
from ..schemas.responses import Scenario
from .sources import EventSource


class InProcessSource(EventSource):
    """Realistic events from an in-process sandbox: its default tenant on a manual clock,
    with no endpoint (the checker sends, the sandbox only makes and records)."""

    def __init__(self, seed: int) -> None:
        from ..app import create_app
        from ..edge.keys import SANDBOX
        from ..settings import Settings

        super().__init__()
        sandbox = create_app(Settings(clock="manual", seed=seed))[SANDBOX]
        self.tenant = sandbox.registry.tenants.default()
        self.tenant.webhooks.set_endpoints([], new_id=None)  # the checker sends its events itself
        self.vendor = sandbox.registry.service.vendor
        self.aggregator = sandbox.registry.service.aggregator
        self.types = event_types(self.aggregator)
        self.products = list(sandbox.registry.service.products)
        self.scenarios = [msgspec.to_builtins(Scenario.of(s))
                          for s in self.tenant.rules.scenarios.values()]

    async def _trigger(self, request: dict[str, Any]) -> Event:
        from ..domain.webhooks.triggers import trigger_event
        from ..schemas.api import TriggerRequest

        return trigger_event(self.tenant, self.aggregator, msgspec.convert(request, TriggerRequest))

    def emit(self, event_type: str, body: dict[str, Any]) -> Event:
        fields = {k: v for k, v in body.items() if k not in ("eventType", "eventTime")}
        return self.tenant.emit(event_type, **fields)

    def user(self, identifier: str) -> dict[str, str]:
        return {"_id": self.tenant.identity.user(identifier).id, "identifier": identifier}

    def object_id(self) -> str:
        return self.tenant.ids.object_id()

    async def _company_for(self, product: str) -> str | None:
        from ..errors import ApiError

        for company in self.tenant.companies.ordered():
            if company.status != OPERATIONAL or product not in company.available_products:
                continue
            try:  # maintenance for this product, manual deposits: the next one
                self.tenant.tasks.check_company_accepts(company, product, "$.product")
            except ApiError:
                continue
            return company.id
        return None

    async def run_task(self, scenario: str, product: str) -> tuple[str, list[Event]]:
        _, tasks = self.tenant.tasks.create_task(CreateTask(TaskCreateRequest(
            identifier=f"check-{product}", product=product,
            company=await self.company_for(product), scenario=scenario)))
        await self.tenant.runner.run_until_idle()
        return tasks[0].id, list(self.tenant.events.query(task=tasks[0].id))
