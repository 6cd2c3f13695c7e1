"""GET /openapi.json: a valid OpenAPI 3.1 document built from the enforced schemas."""

from __future__ import annotations

from openapi_spec_validator import validate

from conftest import ACME
from payroll_sandbox.domain.shapes import schema_of
from payroll_sandbox.edge.routes import OPERATIONS
from payroll_sandbox.schemas import api


async def test_openapi_document_is_valid_openapi_3_1(client):
    response = await client.get("/openapi.json")
    assert response.status == 200
    document = await response.json()
    assert document["openapi"].startswith("3.1")
    validate(document)


async def test_openapi_publishes_the_schemas_the_handlers_enforce(client):
    """What the handlers check, less `additionalProperties: false` where an unknown field
    is ignored rather than refused (issue 37, point 9: the service's operations)."""
    from payroll_sandbox.edge.openapi import _open

    document = await (await client.get("/openapi.json")).json()
    search = document["paths"]["/company/search"]["post"]
    assert search["requestBody"]["content"]["application/json"]["schema"] == _open({
        **schema_of(api.SearchRequest), "not": {"required": ["product", "products"]}})
    token = document["paths"]["/access-token"]["post"]
    assert token["requestBody"]["content"]["application/json"]["schema"] == \
        _open(schema_of(api.AccessTokenRequest))
    assert "additionalProperties" not in str(
        token["requestBody"]["content"]["application/json"]["schema"])
    assert document["components"]["schemas"]["Error"] == schema_of(api.Error)


async def test_openapi_search_responses_match_the_published_item_schema(client):
    from jsonschema import Draft202012Validator

    document = await (await client.get("/openapi.json")).json()
    response = await client.post("/company/search", json={"query": "mc", "limit": 100},
                                 headers={"x-api-key": "sandbox-key-acme-0001",
                                          "x-api-secret": "sandbox-secret-acme-0001"})
    validator = Draft202012Validator(document["components"]["schemas"]["SearchCompany"])
    for item in (await response.json())["data"]:
        validator.validate(item)


# -- the document says what the server answers (issue 11) ---------------------------------

def operation_of(document, method, path):
    return document["paths"][path][method.lower()]


async def test_openapi_states_the_success_status_each_creation_answers(client):
    """201 where a creation answers 201 (a tenant, a company, a processor token), as the
    server does."""
    document = await (await client.get("/openapi.json")).json()
    created = [("/_sandbox/tenants", {"name": "doc-201"}),
               ("/_sandbox/companies", {"name": "Doc Status Co"}),
               ("/_sandbox/aggregator/processor-token", {})]
    for path, body in created:
        response = await client.post(path, json=body, headers=ACME)
        assert response.status == 201, (path, await response.text())
        assert list(operation_of(document, "POST", path)["responses"])[0] == "201", path


async def test_openapi_every_json_body_documents_400_413_415_and_422(client):
    document = await (await client.get("/openapi.json")).json()
    bodies = [(path, method, op) for path, item in document["paths"].items()
              for method, op in item.items() if "requestBody" in op]
    assert len(bodies) == len([op for op in OPERATIONS if op.body is not None])
    for path, method, op in bodies:
        if path.startswith("/aggregator-api/"):  # the aggregator's API: any fault is its 400
            assert set(op["responses"]) == {"200", "400"}, (method, path)
            continue
        assert {"400", "413", "415", "422"} <= set(op["responses"]), (method, path)


async def test_a_body_that_is_not_json_is_415_as_documented(make_client):
    client = await make_client(strict_bodies=True)
    response = await client.post("/access-token", data="identifier=x", headers={
        **ACME, "content-type": "application/x-www-form-urlencoded"})
    assert response.status == 415
    assert (await response.json())["error"]["code"] == "unsupported-media-type"


async def test_openapi_request_body_is_required_only_where_an_empty_body_is_refused(client):
    """An empty body reads as `{}`: a body is optional exactly where `{}` is valid."""
    document = await (await client.get("/openapi.json")).json()
    tenant = operation_of(document, "POST", "/_sandbox/tenants")
    assert tenant["requestBody"]["required"] is False
    response = await client.post("/_sandbox/tenants", headers=ACME)  # no body at all
    assert response.status == 201
    token = operation_of(document, "POST", "/access-token")
    assert token["requestBody"]["required"] is True
    response = await client.post("/access-token", headers=ACME)
    assert response.status == 422


async def test_openapi_409_company_exists_is_documented_and_answered(client):
    document = await (await client.get("/openapi.json")).json()
    assert "409" in operation_of(document, "POST", "/_sandbox/companies")["responses"]
    body = {"_id": "6410a00000000000000000ff", "name": "Twice Co"}
    assert (await client.post("/_sandbox/companies", json=body, headers=ACME)).status == 201
    response = await client.post("/_sandbox/companies", json=body, headers=ACME)
    assert response.status == 409
    assert (await response.json())["error"]["code"] == "company-exists"


async def test_openapi_429_with_retry_after_where_a_limit_applies(make_client):
    client = await make_client(max_tenants=1)
    document = await (await client.get("/openapi.json")).json()
    documented = operation_of(document, "POST", "/_sandbox/tenants")["responses"]["429"]
    assert documented["headers"]["retry-after"]["required"] is True
    assert (await client.post("/_sandbox/tenants", json={}, headers=ACME)).status == 201
    response = await client.post("/_sandbox/tenants", json={}, headers=ACME)
    assert response.status == 429 and response.headers["retry-after"].isdigit()
    for method, path in [("POST", "/access-token"), ("POST", "/task/create"),
                         ("POST", "/_sandbox/events/trigger"),
                         ("POST", "/aggregator/processor-links")]:  # a new user each
        assert "429" in operation_of(document, method, path)["responses"], path


async def test_openapi_search_states_product_xor_products_and_the_server_keeps_its_code(client):
    """The published schema refuses `product` with `products`; the server still answers
    its own 400 product-and-products (the enforced schema leaves the rule to the search)."""
    from jsonschema import Draft202012Validator

    document = await (await client.get("/openapi.json")).json()
    published = operation_of(document, "POST", "/company/search")["requestBody"]
    schema = published["content"]["application/json"]["schema"]
    assert schema["not"] == {"required": ["product", "products"]}
    both = {"query": "pay", "product": "deposit", "products": ["deposit"]}
    assert not Draft202012Validator(schema).is_valid(both)
    assert Draft202012Validator(schema).is_valid({"query": "pay", "product": "deposit"})
    response = await client.post("/company/search", json=both, headers=ACME)
    assert response.status == 400
    assert (await response.json())["error"]["code"] == "product-and-products"


async def test_openapi_documents_405_and_the_server_sends_allow(client):
    document = await (await client.get("/openapi.json")).json()
    assert "allow" in document["components"]["responses"]["MethodNotAllowed"]["headers"]
    response = await client.delete("/access-token", headers=ACME)
    assert response.status == 405
    assert response.headers["allow"] == "POST"


async def test_openapi_states_the_text_rules_of_identifiers_paths_and_queries(client):
    """A control character in a user's identifier, a path segment or a query value is 422
    before any schema; the document's patterns say so."""
    import re

    document = await (await client.get("/openapi.json")).json()
    body = operation_of(document, "POST", "/access-token")["requestBody"]
    pattern = body["content"]["application/json"]["schema"]["properties"]["identifier"]["pattern"]
    assert re.search(pattern, "user-42") and not re.search(pattern, "user\x01")
    for identifier in ("user\x01", "user\r\nforged"):
        response = await client.post("/access-token", json={"identifier": identifier},
                                     headers=ACME)
        assert response.status == 422, identifier
    (segment,) = operation_of(document, "GET", "/task/{taskId}")["parameters"]
    assert segment["schema"]["pattern"] == pattern
    response = await client.get("/task/a%01b", headers=ACME)
    assert response.status == 422


async def test_openapi_lists_the_names_only_the_running_app_knows(client):
    """Scenarios, event types and products: the document lists this app's."""
    document = await (await client.get("/openapi.json")).json()
    binding = operation_of(document, "PUT", "/_sandbox/users/{identifier}/scenario")
    scenario = binding["requestBody"]["content"]["application/json"]["schema"]["properties"][
        "scenario"]
    assert "happy-path" in scenario["enum"] and None in scenario["enum"]
    response = await client.put("/_sandbox/users/u1/scenario", json={"scenario": "nope"},
                                headers=ACME)
    assert response.status == 422
    assert (await response.json())["error"]["code"] == "unknown-scenario"
    trigger = operation_of(document, "POST", "/_sandbox/events/trigger")
    event_type = trigger["requestBody"]["content"]["application/json"]["schema"]["properties"][
        "eventType"]
    assert "task-status-updated" in event_type["enum"]
