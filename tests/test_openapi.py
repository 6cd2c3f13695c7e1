"""GET /openapi.json: a valid OpenAPI 3.1 document built from the enforced schemas."""

from __future__ import annotations

from openapi_spec_validator import validate

from simulator.schemas import api


async def test_openapi_document_is_valid_openapi_3_1(client):
    response = await client.get("/openapi.json")
    assert response.status == 200
    document = await response.json()
    assert document["openapi"].startswith("3.1")
    validate(document)


async def test_openapi_publishes_the_schemas_the_handlers_enforce(client):
    document = await (await client.get("/openapi.json")).json()
    search = document["paths"]["/company/search"]["post"]
    assert search["requestBody"]["content"]["application/json"]["schema"] == api.SEARCH_REQUEST
    token = document["paths"]["/access-token"]["post"]
    assert token["requestBody"]["content"]["application/json"]["schema"] == api.ACCESS_TOKEN_REQUEST
    assert document["components"]["schemas"]["Error"] == api.ERROR


async def test_openapi_search_responses_match_the_published_item_schema(client):
    from jsonschema import Draft202012Validator

    document = await (await client.get("/openapi.json")).json()
    response = await client.post("/company/search", json={"query": "mc", "limit": 100},
                                 headers={"x-api-key": "sandbox-key-acme-0001",
                                          "x-api-secret": "sandbox-secret-acme-0001"})
    validator = Draft202012Validator(document["components"]["schemas"]["SearchCompany"])
    for item in (await response.json())["data"]:
        validator.validate(item)
