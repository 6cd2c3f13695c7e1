"""Realistic events for check-handler from a running sandbox (`--url`), made in a
temporary tenant there through its control plane (simulator/client.py)."""

from __future__ import annotations

import random
import uuid
from typing import Any
from urllib.parse import quote

from ..client import CannotReach, NotASandbox, SandboxClient, SandboxError
from ..domain.companies.companies import OPERATIONAL
from ..domain.webhooks.events import Event, event_body
from ..validate import parse_time
from .arguments import CheckerError
from .sources import CARRIER_SCENARIO, EventSource

CONTROL_TIMEOUT = 60.0      # wall seconds for one call to a running sandbox (--url)
ENDPOINTS = "/_sandbox/webhooks/endpoints"


class SandboxAnswer(CheckerError):
    """A running sandbox answered a call with an error `status`."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class RemoteSource(EventSource):
    """Realistic events from a running sandbox (`--url`), so they carry its service profile
    (vendor, the aggregator's event names), its companies and its scenarios.

    The caller's keys make a temporary tenant there (POST /_sandbox/tenants), named from
    the run's seed: a tenant's ids are seeded by the server's seed and the tenant's name,
    so no `ce-id` repeats between runs. It has no endpoint at all (not even
    `--webhook-url`): the server makes and records, the checker sends. Events come from
    its control plane (trigger; real tasks through /task/create and run-until-idle, read
    back from GET /_sandbox/events) and the tenant is deleted on exit, whatever ended the
    run. Anything the server refuses or cannot answer is a CheckerError of one line."""

    def __init__(self, session: Any, base_url: str, api_key: str, api_secret: str,
                 seed: int) -> None:
        super().__init__()
        self.session = session
        self.sandbox_url = self.base = base_url.rstrip("/")
        self.name = f"check-handler-{seed}"
        self.sandbox = self._client(api_key, api_secret)  # the caller's keys
        self.created = False
        self._ids = random.Random(seed)
        self._users: dict[str, dict[str, str]] = {}
        self._now = 0.0   # the latest virtual time seen there: when events made here happen

    async def __aenter__(self) -> RemoteSource:
        health = await self._call("GET", "/health")
        vendor = health.get("vendor") if isinstance(health, dict) else None
        if not isinstance(vendor, str) or not vendor:
            raise CheckerError(f"--url {self.base}: GET /health does not name the vendor (a "
                               "payroll-sandbox older than this checker?)")
        self.vendor = vendor
        self.types = await self._call("GET", "/_sandbox/schemas/events")
        tenant = await self._call("POST", "/_sandbox/tenants", {"name": self.name})
        self.name, self.created = tenant["name"], True
        self.sandbox = self._client(tenant["apiKey"], tenant["apiSecret"])
        try:
            await self._call("PUT", ENDPOINTS, {"endpoints": []})
            self._now = (await self._call("GET", "/_sandbox/clock"))["timestamp"]
            self.scenarios = await self._call("GET", "/_sandbox/scenarios")
            # The default scenario fits every product of the service profile, in its order.
            default = next((s for s in self.scenarios if s.get("name") == CARRIER_SCENARIO), {})
            if not isinstance(default.get("products"), list):
                raise CheckerError(f"--url {self.base}: GET /_sandbox/scenarios does not say "
                                   "which products a scenario fits (a payroll-sandbox older "
                                   "than this checker?)")
            self.products = default["products"]
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        """Deletes the temporary tenant. When that fails the run's outcome stands (or the
        error that ended it goes on): the report names the tenant left behind."""
        if not self.created:
            return
        try:
            await self._call("DELETE", f"/_sandbox/tenants/{quote(self.name, safe='')}")
            self.created = False
        except CheckerError as error:
            self.cleanup_note = (f"the temporary tenant {self.name} was not deleted ({error}); "
                                 f"DELETE /_sandbox/tenants/{self.name} removes it")

    async def _trigger(self, request: dict[str, Any]) -> Event:
        return self._event(await self._call("POST", "/_sandbox/events/trigger", request))

    def emit(self, event_type: str, body: dict[str, Any]) -> Event:
        fields = {k: v for k, v in body.items() if k not in ("eventType", "eventTime")}
        return Event(id=str(uuid.UUID(int=self._ids.getrandbits(128), version=4)),
                     type=event_type, time=self._now,
                     body=event_body(event_type, self._now, **fields), sequence=0)

    def user(self, identifier: str) -> dict[str, str]:
        if identifier not in self._users:
            self._users[identifier] = {"_id": self.object_id(), "identifier": identifier}
        return self._users[identifier]

    def object_id(self) -> str:
        return f"{self._ids.getrandbits(96):024x}"

    async def _company_for(self, product: str) -> str | None:
        skip = 0
        while True:
            page = await self._call("GET", "/company/list",
                                    query={"product": product, "limit": 1000, "skip": skip})
            for company in page:
                if company["status"] != OPERATIONAL:
                    continue
                try:  # the one way to know that this account takes the task there
                    await self._create_task(CARRIER_SCENARIO, product, company["_id"])
                except SandboxAnswer as refused:
                    if 400 <= refused.status < 500 and refused.status not in (401, 429):
                        continue  # maintenance for this product, manual deposits: next
                    raise
                return company["_id"]
            if len(page) < 1000:
                return None
            skip += len(page)

    async def run_task(self, scenario: str, product: str) -> tuple[str, list[Event]]:
        task_id = await self._create_task(scenario, product, await self.company_for(product))
        clock = await self._call("POST", "/_sandbox/clock/run-until-idle")
        while not clock["complete"]:  # stopped at the server's work limit: go on
            clock = await self._call("POST", "/_sandbox/clock/run-until-idle")
        records = await self._call("GET", "/_sandbox/events",
                                   query={"task": task_id, "limit": 10000})
        return task_id, [self._event(r) for r in records]

    async def _create_task(self, scenario: str, product: str, company: str | None) -> str:
        created = await self._call("POST", "/task/create", {
            "identifier": f"check-{product}", "company": company, "product": product,
            "scenario": scenario})
        return created["id"]

    def _event(self, record: dict[str, Any]) -> Event:
        """A record of GET /_sandbox/events as the Event the server keeps: the same id,
        type and time, and the body as the same compact JSON (sent byte for byte)."""
        at = round(parse_time(record["time"], "$.time"), 3)
        self._now = max(self._now, at)
        return Event(id=record["id"], type=record["eventType"], time=at, body=record["body"],
                     sequence=record["sequence"], user=record.get("userIdentifier"),
                     task=record.get("task"))

    def _client(self, api_key: str, api_secret: str) -> SandboxClient:
        return SandboxClient(self.base, api_key, api_secret, session=self.session,
                             timeout=CONTROL_TIMEOUT)

    async def _call(self, method: str, path: str, body: Any = None, *,
                    query: dict[str, Any] | None = None) -> Any:
        """One control-plane (or API) call with the current keys; its `data`."""
        where = f"the sandbox at {self.base}"
        try:
            answer = await self.sandbox.answer(method, path, body, query=query, strict=True)
        except CannotReach as error:
            raise CheckerError(str(error).replace(self.base, where, 1)) from None
        except NotASandbox as error:
            raise CheckerError(f"--url {error}") from None
        except SandboxError as error:
            if error.status == 401:
                raise SandboxAnswer(f"{where} refused the keys ({error.line}); --api-key and "
                                    "--api-secret are a tenant's keys there", 401) from None
            raise SandboxAnswer(f"{where} answered {method} {path} with {error.line}",
                                error.status) from None
        return answer.data
