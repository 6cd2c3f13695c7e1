"""The operation table is the one truth: every route the app serves is in /openapi.json
with its method, and every operation's declared auth is what the server enforces.

Routes, the auth rule and the OpenAPI document are all generated from the declarations
in simulator/edge/routes/ (routes/pipeline.py); these tests fail when anything is served
that the document does not describe, or described as public that is not, or the other
way round.
"""

from __future__ import annotations

import re

import pytest

from conftest import ACME
from payroll_sandbox.app import create_app
from payroll_sandbox.domain.shapes import schema_of
from payroll_sandbox.domain.tasks.views import TaskRecord, TaskTransition
from payroll_sandbox.edge.examples import MADE_BY, Example, From, example_of
from payroll_sandbox.edge.operations import Auth, Operation, Reply
from payroll_sandbox.edge.routes import OPERATIONS
from payroll_sandbox.settings import Settings

PLACEHOLDER = re.compile(r"\{([^}:]+)(:[^}]*)?\}")


def served(client) -> set[tuple[str, str]]:
    """(METHOD, path) of every route of the app's router, HEAD (GET's shadow) aside."""
    found = set()
    for route in client.server.app.router.routes():
        if route.method == "HEAD":
            continue
        info = route.resource.get_info()
        path = info.get("path") or info.get("formatter")
        found.add((route.method, PLACEHOLDER.sub(r"{\1}", path)))
    return found


async def test_every_served_route_is_in_the_openapi_document(client):
    document = await (await client.get("/openapi.json")).json()
    described = {(method.upper(), path) for path, item in document["paths"].items()
                 for method in item}
    routes = served(client)
    assert routes, "the app serves no route"
    assert routes - described == set()
    assert described - routes == set()


async def test_the_document_names_the_aggregator_of_the_service_profile(aiohttp_client, clock):
    settings = Settings(port=0, clock="manual", aggregator="plaidish")
    client = await aiohttp_client(create_app(settings, clock=clock))
    assert ("POST", "/plaidish/processor-links") in served(client)
    document = await (await client.get("/openapi.json")).json()
    assert "/plaidish/processor-links" in document["paths"]
    assert not [path for path in document["paths"] if "aggregator>" in path]


def operations_of(client):
    from payroll_sandbox.edge.keys import SANDBOX

    return client.server.app[SANDBOX].operations


def concrete(path: str) -> str:
    return PLACEHOLDER.sub("x", path)


async def test_every_operation_without_credentials_is_401_unless_it_is_public(client):
    """spec, Authentication: "When the key headers are wrong, the request is unauthorized";
    each operation's declared auth kind is what the pipeline enforces, before any body."""
    checked = 0
    for op in operations_of(client):
        response = await client.request(op.method, concrete(op.path), json={})
        if op.auth is Auth.NONE and op.path == "/demo/webhooks" and op.method == "POST":
            # The demo's webhook receiver: an unsigned delivery is refused as a customer's
            # handler refuses it (401 for the signature), not for missing API credentials.
            assert response.status == 401
            assert (await response.json())["error"]["code"] != "missing-credentials"
        elif op.auth is Auth.NONE:
            assert response.status != 401, (op.method, op.path)
        elif op.auth is Auth.AGGREGATOR:  # the aggregator's own answer (real-service facts 10)
            assert response.status == 400, (op.method, op.path, response.status)
            assert (await response.json())["error_code"] == "MISSING_FIELDS"
        else:
            assert response.status == 401, (op.method, op.path, response.status)
            assert (await response.json())["error"]["code"] == "missing-credentials"
        # Read whole: aiohttp 3.9's client (.ci/minimums) puts a connection back in its pool
        # with an unread answer's rest (Swagger UI's CSS), and the next request read that.
        await response.read()
        checked += 1
    assert checked == len(OPERATIONS)  # every declared operation is served


async def test_api_key_operations_refuse_a_public_token_and_token_operations_refuse_keys(client):
    """Server-side operations take API keys only; the hosted flow's calls the user's
    public token only (DESIGN.md, Tenancy and auth)."""
    response = await client.post("/access-token", json={"identifier": "op-user"}, headers=ACME)
    token = {"x-public-token": (await response.json())["data"]["publicToken"]}
    for op in operations_of(client):
        if op.auth is Auth.API_KEYS:
            response = await client.request(op.method, concrete(op.path), json={}, headers=token)
            assert response.status == 401, (op.method, op.path)
            assert (await response.json())["error"]["code"] == "api-keys-required"
        elif op.auth is Auth.PUBLIC_TOKEN:
            response = await client.request(op.method, concrete(op.path), json={}, headers=ACME)
            assert response.status == 401, (op.method, op.path)
            assert (await response.json())["error"]["code"] == "public-token-required"


@pytest.mark.parametrize("auth, security", [
    (Auth.API_KEYS, [{"apiKey": [], "apiSecret": []}]),
    (Auth.PUBLIC_TOKEN, [{"publicToken": []}]),
    (Auth.NONE, []),
    (Auth.AGGREGATOR, [{"aggregatorClientId": [], "aggregatorSecret": []}]),
])
async def test_the_document_states_each_operations_auth(client, auth, security):
    document = await (await client.get("/openapi.json")).json()
    ops = [op for op in operations_of(client) if op.auth is auth]
    assert ops
    for op in ops:
        assert document["paths"][op.path][op.method.lower()]["security"] == security, op.path


async def _history() -> list[TaskTransition]: ...


async def _tasks() -> Reply[list[TaskRecord]]: ...


async def _untyped() -> dict: ...


def test_an_operations_answer_is_its_handlers_return_annotation():
    """`-> X` declares the answer's shape (a string under `from __future__ import
    annotations`, read in the handler's module); `response=` wins where it is given."""
    def declared(handler, **more):
        return Operation("GET", "/x", handler, "x", **more)

    assert declared(_history).response == schema_of(list[TaskTransition])
    assert declared(_tasks).response == schema_of(list[TaskRecord])
    assert declared(_untyped).response is None
    assert declared(_history, response_shape=TaskRecord).response == schema_of(TaskRecord)


def test_an_operation_without_an_example_takes_each_id_from_the_answer_that_makes_it():
    """A new operation needs no example of its own: `{taskId}` comes from the task that
    POST /task/create makes (an OpenAPI link /docs follows); one it declares wins."""
    derived = example_of(Operation("GET", "/task/{taskId}/history", _history, "x"))
    assert derived == Example(after=From("POST", "/task/create",
                                         parameters={"taskId": "$response.body#/data/id"}))
    assert example_of(Operation("GET", "/health-of/{thing}", _history, "x")) == Example()
    own = Example(parameters={"taskId": "6410c0ffee0000000000a001"})
    assert example_of(Operation("GET", "/task/{taskId}/history", _history, "x",
                                example=own)) is own
    makers = {(op.method, op.path) for op in OPERATIONS}
    assert {(made.method, made.path) for made in MADE_BY.values()} <= makers
