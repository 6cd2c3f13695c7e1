"""Every JSON answer is what /openapi.json says it is, and the document says something.

The walk of tests/test_docs_examples.py drives a real server through every operation with
its documented example (the bundled fixtures, a manual clock); a few more requests give
the answers their rarer fields (a failed task, a patched one, a pay-link switch, a
workflow with options, a faulted request, a delivery to the demo receiver) and fill the
lists the examples leave empty; then every read runs again on that state. Each 2xx
answer with a JSON body is checked against the success response's schema in the
document, components resolved and formats checked; a fault names the operation and the
JSON path at fault.

The document's response schemas must also say what an answer holds: no object without
its fields and no array without its items, except the few free-form spots below.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from jsonschema import Draft202012Validator

from conftest import ACME, WALMART, openapi_document
from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.settings import Settings
from payroll_sandbox.transport.cloudevents import SIGNATURE_HEADER, sign
from test_docs_examples import METHODS, NOT_FROM_THE_DOCUMENT, RUN_LAST, Examples, Key

NETFLIX = "6410a0000000000000000060"  # a merchant: switch and present
USER = "user-1"  # the examples' user
VISA = {"type": "card", "_id": "card-4242", "title": "Visa 4242", "lastFour": "4242"}
DEMO_RECEIVER: Key = ("POST", "/demo/webhooks")

# Free-form by nature, named by the property that holds them: what a caller sent, kept as
# it came.
FREE_FORM = {
    "metadata": "the customer's own context (task creation, the SDK configuration), echoed "
                "as given",
    "body": "a request body as its caller sent it (GET /_sandbox/requests: any JSON) and a "
            "delivery the demo receiver took (any JSON object its sender posted)",
}
# Documents that have a meta-schema of their own.
FREE_DOCUMENTS: dict[Key, str] = {
    ("GET", "/openapi.json"): "this OpenAPI 3.1 document",
    ("GET", "/_sandbox/schemas/events/{eventType}"): "a JSON Schema (draft 2020-12)",
    ("GET", "/_sandbox/snapshot"): "a snapshot: snapshot.py's snapshot_schema(), which keeps "
                                   "stored documents (event bodies, journal queries) as they are",
}


# -- the answers ------------------------------------------------------------------------------

def json_schema(document: dict, key: Key) -> dict | None:
    """The schema of `key`'s success answer when it is JSON, its components resolvable."""
    operation = document["paths"][key[1]][key[0].lower()]
    status = min(code for code in operation["responses"] if code.startswith("2"))
    content = operation["responses"][status].get("content", {})
    media = next((name for name in content if "json" in name), None)
    if media is None:
        return None
    return {**content[media]["schema"], "components": document["components"]}


class Answers:
    """Checks each answer of the walk against its operation's documented schema."""

    def __init__(self, document: dict) -> None:
        self.document = document
        self.json_operations = {
            (method.upper(), path) for path, item in document["paths"].items()
            for method in item if method in METHODS
            and json_schema(document, (method.upper(), path)) is not None}
        self.validators: dict[Key, Draft202012Validator] = {}
        self.checked: set[Key] = set()
        self.faults: dict[str, None] = {}  # in the order found, each once
        self.lists: dict[Key, bool] = {}  # an operation whose data is a list -> ever filled

    def check(self, key: Key, answer: Any) -> None:
        if key not in self.json_operations:
            return
        if key not in self.validators:
            self.validators[key] = Draft202012Validator(
                json_schema(self.document, key),
                format_checker=Draft202012Validator.FORMAT_CHECKER)
        self.checked.add(key)
        for error in self.validators[key].iter_errors(answer):
            self.faults[f"{key[0]} {key[1]}: {error.json_path}: {error.message[:300]}"] = None
        data = answer.get("data", answer) if isinstance(answer, dict) else answer
        if isinstance(data, list):
            self.lists[key] = self.lists.get(key, False) or bool(data)


@pytest.fixture
async def walk(aiohttp_server, loaded, clock):
    # Webhook attempts to the examples' receiver URL, where nothing listens, give up fast.
    settings = Settings(port=0, clock="manual", webhook_timeout=0.5)
    app = create_app(settings, registry=build_registry(settings, clock=clock, loaded=loaded))
    server = await aiohttp_server(app)
    base = str(server.make_url("/")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        async with session.get(base + "/openapi.json") as response:
            document = await response.json()
        yield Examples(session, base, document), Answers(document), app


async def run(examples: Examples, answers: Answers, key: Key) -> None:
    """`key`'s example, and every answer it took (the operations it takes values from)."""
    made: dict = {}
    await examples.call(key, made)
    for made_key, call in made.items():
        answers.check(made_key, call.answer)


async def send(examples: Examples, answers: Answers, key: Key, path: str, **body: Any) -> Any:
    """One request of this test's own (`path`: `key`'s path filled in), answer checked."""
    async with examples.session.request(key[0], examples.base + path, headers=ACME,
                                        json=body or None) as response:
        text = await response.text()
        assert response.status < 300, (key, response.status, text[:600])
    answer = json.loads(text)
    answers.check(key, answer)
    return answer


async def richer_state(examples: Examples, answers: Answers, app) -> None:
    """Answers with the fields the examples never make: a failure reason, a patch, a
    scenario's meta and payment method, a workflow's options, a pay-link account, a
    journaled request that a fault rule slowed, a delivery kept by the demo receiver; and
    processing run to its end."""
    create: Key = ("POST", "/task/create")
    for task in ({"company": WALMART, "product": "verify", "scenario": "unknown-failure",
                  "metadata": {"order": 7}},
                 {"company": WALMART, "product": "deposit", "scenario": "task-status-patched"},
                 {"company": NETFLIX, "product": "switch", "scenario": "managed-by-partner"},
                 {"company": NETFLIX, "product": "switch", "scenario": "pay-link-switch",
                  "paymentMethod": VISA},
                 {"company": WALMART, "tasks": [
                     {"operation": "deposit", "onFail": "finish",
                      "distribution": {"type": "percent", "amount": 50}},
                     {"operation": "verify"}]}):
        await send(examples, answers, create, create[1], identifier=USER, **task)
    idle: Key = ("POST", "/_sandbox/clock/run-until-idle")
    await send(examples, answers, idle, idle[1])
    # A request an API fault rule slowed down: the journal names the rule.
    faults: Key = ("PUT", "/_sandbox/faults/api")
    await send(examples, answers, faults, faults[1], rules=[
        {"method": "GET", "path": "/company/list", "latencyMs": 1, "count": 1}])
    await send(examples, answers, ("GET", "/company/list"), "/company/list")
    journal = await send(examples, answers, ("GET", "/_sandbox/requests"),
                         "/_sandbox/requests?path=/company/list&limit=1")
    assert journal["data"][0]["fault"]["rule"] == 0
    await send(examples, answers, faults, faults[1], rules=[])
    demo = app[SANDBOX].registry.tenants.get("demo")
    delivery = json.dumps({"eventType": "company-created", "eventTime": "2026-01-01T00:00:00Z",
                           "data": {"companyId": WALMART}}).encode()
    async with examples.session.post(examples.base + DEMO_RECEIVER[1], data=delivery, headers={
            "content-type": "application/json", "ce-id": "schema-check-1",
            SIGNATURE_HEADER: sign(delivery, demo.api_secret)}) as response:
        assert response.status == 200, await response.text()
        answers.check(DEMO_RECEIVER, await response.json())


async def test_every_json_answer_is_what_the_document_says(walk):
    examples, answers, app = walk
    order = [key for key in examples.order() if key not in RUN_LAST]
    for key in order:
        await run(examples, answers, key)
    await richer_state(examples, answers, app)
    for key in order:  # every read again, on the richer state
        if key[0] == "GET":
            await run(examples, answers, key)
    for key in RUN_LAST:
        await run(examples, answers, key)

    assert not answers.faults, "answers the document does not describe:\n" + "\n".join(
        answers.faults)
    # Every JSON operation was checked; none but the file behind a signed URL is left out.
    unchecked = answers.json_operations - answers.checked
    assert unchecked == set(), sorted(unchecked)
    assert set(NOT_FROM_THE_DOCUMENT) - answers.checked == {("GET", "/task/{taskId}/file/{fileId}")}
    # Every list answered had items at least once, so the schema of its items was checked.
    assert [key for key, filled in answers.lists.items() if not filled] == []


# -- the document ------------------------------------------------------------------------------

def bare_spots(schema: Any, components: dict, path: str = "$",
               seen: frozenset = frozenset(), part: bool = False) -> list[str]:
    """JSON paths (into the answer) of the subschemas that do not say what they hold: an
    object without properties, an array without items, a value without a type (`part`:
    a schema of an allOf, anyOf or oneOf, which may add rules to the type of its whole)."""
    if not isinstance(schema, dict):
        return []
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return [] if name in seen else bare_spots(components[name], components, path,
                                                  seen | {name}, part)
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    combined = [sub for word in ("oneOf", "anyOf", "allOf") for sub in schema.get(word, ())]
    says = combined or any(word in schema for word in ("const", "enum", "not"))
    found = []
    if "object" in types and not says and "properties" not in schema and not isinstance(
            schema.get("additionalProperties"), dict):
        found.append(path)
    if "array" in types and not says and "items" not in schema:
        found.append(path)
    if not (types or says or part or {"properties", "items"} & set(schema)):
        found.append(path)
    for name, sub in schema.get("properties", {}).items():
        found += bare_spots(sub, components, f"{path}.{name}", seen)
    found += bare_spots(schema.get("items"), components, path + "[]", seen)
    found += bare_spots(schema.get("additionalProperties"), components, path + ".*", seen)
    for sub in combined:
        found += bare_spots(sub, components, path, seen, part=True)
    return sorted(set(found))


def test_no_answer_schema_is_a_bare_object_or_array():
    doc = openapi_document()
    components = doc["components"]["schemas"]
    bare, allowed_by = [], set()
    operations = 0
    for path, item in doc["paths"].items():
        for method in item:
            key = (method.upper(), path)
            schema = json_schema(doc, key) if method in METHODS else None
            if schema is None:
                continue
            operations += 1
            if key in FREE_DOCUMENTS:
                allowed_by.add(key)
                continue
            for spot in bare_spots(schema, components):
                name = spot.rsplit(".", 1)[-1].removesuffix("[]")
                if name in FREE_FORM:
                    allowed_by.add(name)
                else:
                    bare.append(f"{method.upper()} {path} {spot}")
    assert operations > 90
    assert bare == [], "\n".join(bare)
    # The allowances stay few, and each still names something.
    assert allowed_by == set(FREE_FORM) | set(FREE_DOCUMENTS)
    assert len(FREE_FORM) + len(FREE_DOCUMENTS) <= 6
