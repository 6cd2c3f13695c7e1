"""Every example of the API reference works: each operation's example request, built from
/openapi.json alone, answers its documented success status from a real server (the bundled
fixtures, a manual clock), run in the order /docs shows them.

A request is its path with the parameters' examples, its query and header examples, its
body example, and the credentials its `security` names: the bundled default tenant's API
keys (`acme`), or a public token of `user-1` fetched first with POST /access-token's
example. A value the sandbox makes (a task's id, a linked account's) comes from an earlier
answer, as the document's links say: the operation that gives it is called first, with its
own example, and the link's runtime expressions pick the value out of its request and
answer. The few operations that need more than that are listed below, each with why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from jsonschema import Draft202012Validator

from conftest import ACME, openapi_document
from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

Key = tuple[str, str]  # (METHOD, path as the document names it)

RUN_UNTIL_IDLE: Key = ("POST", "/_sandbox/clock/run-until-idle")
# Operations that need state their examples cannot make: run this operation's example first.
SETUP: dict[Key, tuple[Key, str]] = {
    ("GET", "/linked-account/list/{identifier}"): (
        RUN_UNTIL_IDLE, "user-1's linked account exists once a task of theirs (POST "
                        "/task/create's example) ended: on this manual clock the clock is run "
                        "out first; the real clock ends it in seconds"),
}
# Operations run after all the others: they undo what the examples before them made.
RUN_LAST: dict[Key, str] = {
    ("POST", "/_sandbox/reset"): "puts the tenant back to its fixtures: user-1, its tasks and "
                                 "linked account are gone",
}
# Operations whose request cannot be written down beforehand, checked here another way.
NOT_FROM_THE_DOCUMENT: dict[Key, str] = {
    ("GET", "/task/{taskId}/file/{fileId}"): "its URL, query and all, is the signed URL that "
                                             "generate-url answers (as a presigned URL is)",
    ("POST", "/demo/webhooks"): "the demo receiver takes deliveries signed with the demo "
                                "tenant's secret, which the sandbox itself sends",
}
METHODS = ("get", "put", "post", "delete", "patch")


@dataclass
class Call:
    """One request made, and its answer."""

    body: Any
    headers: dict[str, str]
    answer: Any


def success_status(operation: dict) -> int:
    return min(int(code) for code in operation["responses"] if code.startswith("2"))


def evaluate(expression: str, call: Call) -> Any:
    """An OpenAPI runtime expression against an earlier call: `$response.body#/pointer`,
    `$request.body#/pointer` or `$request.header.<name>`."""
    if expression.startswith("$request.header."):
        return call.headers[expression.removeprefix("$request.header.")]
    source, _, pointer = expression.partition("#")
    value = {"$response.body": call.answer, "$request.body": call.body}[source]
    for part in filter(None, pointer.split("/")):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def filled(template: Any, call: Call) -> Any:
    """A link's requestBody: an expression, or JSON whose strings `{$...}` are expressions."""
    if isinstance(template, str):
        if template.startswith("{$") and template.endswith("}"):
            return evaluate(template[1:-1], call)
        return evaluate(template, call) if template.startswith("$") else template
    if isinstance(template, dict):
        return {key: filled(value, call) for key, value in template.items()}
    if isinstance(template, list):
        return [filled(value, call) for value in template]
    return template


class Examples:
    """Runs the examples of one document against one server."""

    def __init__(self, session: aiohttp.ClientSession, base: str, document: dict) -> None:
        self.session, self.base, self.document = session, base, document
        self.operations: dict[Key, dict] = {
            (method.upper(), path): operation for path, item in document["paths"].items()
            for method, operation in item.items() if method in METHODS}
        by_id = {op["operationId"]: key for key, op in self.operations.items()}
        # operationId of the consumer -> (the operation whose answer has the link, the link)
        self.links: dict[str, tuple[Key, dict]] = {}
        for key, operation in self.operations.items():
            for response in operation["responses"].values():
                for link in response.get("links", {}).values():
                    assert link["operationId"] in by_id, link
                    assert link["operationId"] not in self.links, "one source per operation"
                    self.links[link["operationId"]] = (key, link)
        schemes = document["components"]["securitySchemes"]
        self.credentials = {"apiKey": ACME["x-api-key"], "apiSecret": ACME["x-api-secret"],
                            "aggregatorClientId": ACME["x-api-key"],
                            "aggregatorSecret": ACME["x-api-secret"]}
        self.header_of = {name: scheme["name"] for name, scheme in schemes.items()}

    def order(self) -> list[Key]:
        """The document's order (the order of /docs), RUN_LAST at the end."""
        keys = [key for key in self.operations if key not in NOT_FROM_THE_DOCUMENT]
        return [key for key in keys if key not in RUN_LAST] + [k for k in keys if k in RUN_LAST]

    async def call(self, key: Key, made: dict[Key, Call] | None = None) -> Call:
        """The example of `key`, after the operations it takes values from (each called at
        most once per example: `made`)."""
        made = {} if made is None else made
        if key in made:
            return made[key]
        if key in SETUP:
            await self.call(SETUP[key][0], made)
        operation = self.operations[key]
        source, link = self.links.get(operation["operationId"], (None, {}))
        earlier = await self.call(source, made) if source is not None else None
        path, query, headers = key[1], {}, {}
        for parameter in operation.get("parameters", ()):
            name = parameter["name"]
            if name in link.get("parameters", {}):
                value = evaluate(link["parameters"][name], earlier)
            elif "example" in parameter:
                value = parameter["example"]
            else:
                assert not parameter["required"], f"{key}: no example of {name}"
                continue
            if parameter["in"] == "path":
                path = path.replace("{" + name + "}", str(value))
            elif parameter["in"] == "query":
                query[name] = str(value)
            else:
                headers[name] = str(value)
        body = None
        if "requestBody" in link:
            body = filled(link["requestBody"], earlier)
        elif "requestBody" in operation:
            media = operation["requestBody"]["content"]["application/json"]
            body = media.get("example")
            assert body is not None or not operation["requestBody"]["required"], \
                f"{key}: no body example"
        headers.update(await self.credentials_for(operation, made))
        sent = {**headers, "content-type": "application/json"} if body is not None else headers
        response = await self.session.request(key[0], self.base + path, params=query,
                                              headers=sent,
                                              data=None if body is None else json.dumps(body))
        text = await response.text()
        expected = success_status(operation)
        assert response.status == expected, (
            f"{key[0]} {path} answered {response.status}, documented {expected}: {text[:600]}")
        try:
            answer = json.loads(text)
        except ValueError:
            answer = text
        made[key] = Call(body, headers, answer)
        return made[key]

    async def credentials_for(self, operation: dict, made: dict[Key, Call]) -> dict[str, str]:
        """Headers of the first requirement of the operation's security."""
        requirements = operation.get("security", self.document["security"])
        if not requirements:
            return {}
        schemes = list(requirements[0])
        if schemes == ["publicToken"]:
            token = await self.call(("POST", "/access-token"), made)
            return {self.header_of["publicToken"]: token.answer["data"]["publicToken"]}
        return {self.header_of[name]: self.credentials[name] for name in schemes}


@pytest.fixture
async def examples(aiohttp_server, loaded, clock):
    # Webhook attempts to the examples' local receiver URL, where nothing listens, give up
    # fast.
    settings = Settings(port=0, clock="manual", webhook_timeout=0.5)
    server = await aiohttp_server(create_app(settings, registry=build_registry(
        settings, clock=clock, loaded=loaded)))
    base = str(server.make_url("/")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        async with session.get(base + "/openapi.json") as response:
            document = await response.json()
        yield Examples(session, base, document)


async def test_every_example_answers_its_documented_success_in_the_order_of_the_docs(examples):
    ran = []
    for key in examples.order():
        await examples.call(key)
        ran.append(key)
    assert len(ran) + len(NOT_FROM_THE_DOCUMENT) >= len(examples.operations)


async def test_a_task_file_opens_by_the_url_generate_url_answers(examples):
    made: dict[Key, Call] = {}
    url = (await examples.call(("GET", "/task/{taskId}/file/{fileId}/generate-url"),
                               made)).answer["data"]["url"]
    async with examples.session.get(url) as response:
        assert response.status == 200
        assert response.content_type == "application/pdf"


async def test_the_lists_of_exceptions_stay_short_and_name_real_operations(examples):
    assert len({**SETUP, **RUN_LAST, **NOT_FROM_THE_DOCUMENT}) <= 5
    assert {*SETUP, *RUN_LAST} <= set(examples.operations)
    assert all(setup in examples.operations for setup, _ in SETUP.values())


def test_every_example_is_valid_for_its_schema():
    """A body or parameter example the server's own schema would refuse is no example."""
    document = openapi_document()
    checked = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            media = operation.get("requestBody", {}).get("content", {}).get("application/json",
                                                                           {})
            if "example" in media:
                errors = list(Draft202012Validator(media["schema"]).iter_errors(media["example"]))
                assert not errors, (method, path, [e.message for e in errors])
                checked += 1
            for parameter in operation.get("parameters", ()):
                if "example" in parameter:
                    schema = parameter["schema"]
                    assert Draft202012Validator(schema).is_valid(parameter["example"]), (
                        method, path, parameter)
                    checked += 1
    assert checked > 50


def test_every_operation_is_in_a_described_group():
    document = openapi_document()
    described = [tag["name"] for tag in document["tags"]]
    used = {tag for item in document["paths"].values() for op in item.values()
            for tag in op["tags"]}
    assert len(described) == len(set(described)) and set(described) == used
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert operation["tags"] and set(operation["tags"]) <= set(described), (method, path)
    # The page shows the groups in the order of `tags`, and the paths follow it.
    order = [described.index(op["tags"][0]) for item in document["paths"].values()
             for op in item.values()]
    assert order == sorted(order)
