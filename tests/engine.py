"""The engine without HTTP: a tenant registry of the bundled fixtures, in-process.

No aiohttp app, server or receiver: a test makes tasks with the domain calls the routes
make (`tenant.tasks.create_task`, `sdk.login`), runs the tenant's clock and reads its
ledger. The tenants have no webhook endpoints, so nothing starts I/O and the runner awaits
nothing but itself: `run_until_idle` and `advance` drive it to its end without an event
loop, and a test of the engine is a plain function. `answer` reads as a route answers (a
handler is a coroutine: an async test awaits it).

Import what a module uses: `from engine import Engine, engine` (`engine` is a fixture,
imported by the modules that use it rather than registered for every test).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Coroutine
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from jsonschema import Draft202012Validator

from calls import task_body
from payroll_sandbox.app import LoadedFixtures, build_registry, load, tenant_services
from payroll_sandbox.clock import Clock
from payroll_sandbox.domain.flow import sdk
from payroll_sandbox.domain.webhooks.events import Event
from payroll_sandbox.domain.tasks.requests import CreateTask, TaskCreateRequest
from payroll_sandbox.domain.tasks.records import Task, Workflow
from payroll_sandbox.schemas.sdk import SdkLoginRequest
from payroll_sandbox.domain.tenants import Tenant
from payroll_sandbox.edge.keys import Sandbox
from payroll_sandbox.edge.operations import Reply
from payroll_sandbox.edge.render import json_response
from payroll_sandbox.edge.routes import OPERATIONS
from payroll_sandbox.domain.webhooks.event_types import event_schema
from payroll_sandbox.validate import parse_query
from payroll_sandbox.transport.scheduler import RunResult
from payroll_sandbox.settings import Settings
from payroll_sandbox.transport.dispatcher import ATTEMPT_TIMEOUT, Dispatcher

START = 1_780_000_000  # the clock of every engine, as conftest's `clock`
DAY = 86_400


@functools.cache
def bundled() -> LoadedFixtures:
    """The bundled fixtures and scenarios, loaded once per process (read-only)."""
    return load(Settings())


def drive(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """A coroutine of the engine run to its end without an event loop. With no attempt in
    flight the runner only yields bare (`asyncio.sleep(0)`, between slices of work) and
    takes its own uncontended lock; a future yielded means it waits on I/O, which an
    engine without endpoints never should."""
    try:
        while True:
            waited = coroutine.send(None)
            if waited is not None:
                raise AssertionError(f"the engine waited on {waited!r}: it started I/O")
    except StopIteration as done:
        return done.value
    finally:
        coroutine.close()


class Engine:
    """A tenant registry opened with a dispatcher and no timer: the fixtures' accounts as
    tenants on one manual clock (at START), `tenant` the default one (acme)."""

    def __init__(self, *, seed: int | None = None, scenarios: Path | None = None,
                 start: float = START) -> None:
        settings = Settings(clock="manual")
        if seed is not None:
            settings = settings.with_overrides(seed=seed)
        if scenarios is not None:
            settings = settings.with_overrides(scenarios=scenarios)
        self.settings = settings
        loaded = bundled() if scenarios is None and seed is None else load(settings)
        self.registry = build_registry(settings, clock=Clock(mode="manual", start=start),
                                       loaded=loaded)
        service = self.registry.service
        self.dispatcher = Dispatcher(vendor=service.vendor, seed=settings.seed,
                                     timeout=ATTEMPT_TIMEOUT)
        self.registry.open(tenant_services(self.dispatcher))
        self.tenant: Tenant = self.registry.tenants.default()
        # What a handler gets besides its request (snapshot.py reads the registry, the
        # dispatcher and the operations through it).
        self.sandbox = Sandbox(settings=settings, registry=self.registry,
                               dispatcher=self.dispatcher,
                               operations=[op.at(service.aggregator) for op in OPERATIONS])

    # -- the clock ---------------------------------------------------------------------------

    def run_until_idle(self, tenant: Tenant | None = None) -> RunResult:
        result = drive((tenant or self.tenant).runner.run_until_idle())
        assert result.complete, result
        return result

    def advance(self, seconds: float, tenant: Tenant | None = None) -> RunResult:
        return drive((tenant or self.tenant).runner.advance(seconds))

    def now(self, tenant: Tenant | None = None) -> float:
        return (tenant or self.tenant).clock.timestamp()

    # -- the two ways a task starts ----------------------------------------------------------

    def api_task(self, body: dict[str, Any],
                 tenant: Tenant | None = None) -> tuple[Workflow, list[Task]]:
        """POST /task/create with API keys: the body read as the handler reads it."""
        return (tenant or self.tenant).tasks.create_task(
            CreateTask(msgspec.convert(body, TaskCreateRequest)))

    def create_task(self, identifier: str | None = "user-1", *, tenant: Tenant | None = None,
                    **fields: Any) -> tuple[Workflow, list[Task]]:
        """POST /task/create with API keys, its body as calls.task_body makes it."""
        return self.api_task(task_body(identifier, **fields), tenant)

    def public_token(self, identifier: str, tenant: Tenant | None = None) -> Any:
        """POST /access-token: the user's PublicToken."""
        return (tenant or self.tenant).identity.create_access_token(identifier)

    def sdk_login(self, identifier: str, body: dict[str, Any],
                  tenant: Tenant | None = None) -> sdk.LoginOutcome:
        """POST /sdk/login with a fresh public token of the user: the hosted flow's tasks
        (watched: the page is open)."""
        tenant = tenant or self.tenant
        return sdk.login(tenant, self.public_token(identifier, tenant), msgspec.convert(body, SdkLoginRequest))

    # -- reads, as the routes answer them -----------------------------------------------------

    async def answer(self, method: str, path: str, *, params: dict[str, str] | None = None,
                     query: dict[str, str] | None = None, tenant: Tenant | None = None) -> Any:
        """What an operation answers a server call (API keys), in-process: its handler called
        as the route pipeline calls it (the query parsed with its schema and made its struct), the
        answer rendered as JSON; the rendered body. An ApiError is the API's refusal (4xx)."""
        tenant = tenant or self.tenant
        op = next(op for op in self.sandbox.operations if (op.method, op.path) == (method, path))
        # What handlers read of the request itself: the base URL of links they render.
        request = SimpleNamespace(scheme="http", host="127.0.0.1", method=method, path=path)
        parsed = None if op.query is None else parse_query(query or {}, op.query)
        if parsed is not None and op.decode_query is not None:
            parsed = op.decode_query(parsed)  # as the pipeline gives it: the query's struct
        offered = {"tenant": tenant, "token": None, "body": None, "params": params or {},
                   "query": parsed, "headers": {}, "sandbox": self.sandbox, "request": request}
        wants = inspect.signature(op.handler).parameters
        result = await op.handler(**{name: offered[name] for name in wants})
        if callable(result):  # an answer rendered once the attempts it started settled
            result = result()
        if isinstance(result, Reply):
            result = {"data": result.data, **result.extra}
        elif op.dialect is None:
            result = {"data": result}
        return json_response(result).body

    # -- the ledger --------------------------------------------------------------------------

    def events(self, tenant: Tenant | None = None, **query: Any) -> list[Event]:
        """The ledger, oldest first (filters as EventLog.query: event_type, user, task)."""
        return (tenant or self.tenant).events.query(**query)

    def bodies(self, tenant: Tenant | None = None, **query: Any) -> list[dict[str, Any]]:
        return [event.body for event in self.events(tenant, **query)]

    def task_events(self, task_id: str, tenant: Tenant | None = None) -> list[dict[str, Any]]:
        """One task's task events (those with `taskWorkflow`; pii-data-deleted names the
        task too but is a privacy event), as their bodies, in emission order."""
        return [body for body in self.bodies(tenant, task=task_id) if "taskWorkflow" in body]

    def assert_events_valid(self, tenant: Tenant | None = None) -> list[Event]:
        """Every event of the ledger matches its published schema; the ledger."""
        events = self.events(tenant)
        aggregator = self.registry.service.aggregator
        for event in events:
            assert event.body["eventType"] == event.type
            problems = schema_problems(event.type, aggregator, event.body)
            assert problems == [], (event.type, event.body, problems)
        return events


@functools.cache
def _validator(event_type: str, aggregator: str) -> Draft202012Validator:
    schema = event_schema(event_type, aggregator)
    assert schema is not None, f"no schema is published for {event_type!r}"
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def schema_problems(event_type: str, aggregator: str, body: dict[str, Any]) -> list[str]:
    """What GET /_sandbox/schemas/events/{eventType} finds wrong with a body."""
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _validator(event_type, aggregator).iter_errors(body)]


@pytest.fixture
def engine() -> Engine:
    """A fresh engine: the fixtures' tenants, no app, no server."""
    return Engine()
