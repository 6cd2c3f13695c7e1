"""Authentication through real HTTP: both header kinds, environments, token expiry."""

from __future__ import annotations

import pytest
from conftest import ACME, ACME_LIVE, WALMART


async def new_token(client, identifier="user-1", headers=ACME, **body):
    response = await client.post("/access-token", json={"identifier": identifier, **body},
                                 headers=headers)
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def test_api_keys_authenticate(client):
    response = await client.get(f"/company/{WALMART}", headers=ACME)
    assert response.status == 200


@pytest.mark.parametrize("headers, code", [
    ({}, "missing-credentials"),
    ({"x-api-key": ACME["x-api-key"]}, "missing-credentials"),
    ({"x-api-key": ACME["x-api-key"], "x-api-secret": "wrong-secret"}, "invalid-credentials"),
    ({"x-api-key": "no-such-key", "x-api-secret": ACME["x-api-secret"]}, "invalid-credentials"),
    ({"x-public-token": "public-sandbox-not-issued"}, "invalid-public-token"),
])
async def test_wrong_or_missing_credentials_are_401(client, headers, code):
    response = await client.get(f"/company/{WALMART}", headers=headers)
    assert response.status == 401
    body = await response.json()
    assert body["error"]["code"] == code
    assert body["error"]["message"]


async def search_as(client, token: str):
    """Company search: the one operation of the real API a public token may call."""
    return await client.post("/company/search", json={"query": "walmart"},
                             headers={"x-public-token": token})


async def test_access_token_issues_a_public_token_that_authenticates(client):
    data = await new_token(client)
    assert set(data) >= {"publicToken", "token"}
    assert data["publicToken"].startswith("public-sandbox-")
    response = await search_as(client, data["publicToken"])
    assert response.status == 200
    response = await search_as(client, data["token"])  # the legacy name of the same token
    assert response.status == 200


async def test_access_token_needs_api_keys_not_a_public_token(client):
    token = (await new_token(client))["publicToken"]
    response = await client.post("/access-token", json={"identifier": "x"},
                                 headers={"x-public-token": token})
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "api-keys-required"


async def test_access_token_lifetime_out_of_range_is_422(client):
    for lifetime in (1799, 2_592_001, "long"):
        response = await client.post("/access-token", headers=ACME,
                                     json={"identifier": "u", "tokenLifetime": lifetime})
        assert response.status == 422
        assert (await response.json())["error"]["details"][0]["path"] == "$.tokenLifetime"


async def test_public_token_expires_on_the_virtual_clock(client, clock):
    token = (await new_token(client, tokenLifetime=1800))["publicToken"]
    clock.advance(1799)
    assert (await search_as(client, token)).status == 200
    clock.advance(1)
    response = await search_as(client, token)
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "public-token-expired"


async def test_default_token_lifetime_is_a_day(client, clock):
    token = (await new_token(client))["publicToken"]
    clock.advance(86_399)
    assert (await search_as(client, token)).status == 200
    clock.advance(1)
    assert (await search_as(client, token)).status == 401


async def test_production_credentials_on_the_sandbox_are_401_saying_so(client):
    response = await client.get(f"/company/{WALMART}", headers=ACME_LIVE)
    assert response.status == 401
    body = await response.json()
    assert body["error"]["code"] == "wrong-environment"
    assert "production" in body["error"]["message"] and "sandbox" in body["error"]["message"]


async def test_sandbox_credentials_on_production_are_401_saying_so(make_client):
    client = await make_client(environment="production")
    assert (await client.get(f"/company/{WALMART}", headers=ACME_LIVE)).status == 200
    response = await client.get(f"/company/{WALMART}", headers=ACME)
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "wrong-environment"


async def test_public_token_of_the_other_environment_is_401_saying_so(make_client):
    production = await make_client(environment="production")
    token = (await new_token(production, headers=ACME_LIVE))["publicToken"]
    assert token.startswith("public-production-")
    sandbox = await make_client()
    response = await sandbox.get(f"/company/{WALMART}", headers={"x-public-token": token})
    assert response.status == 401
    body = await response.json()
    assert body["error"]["code"] == "wrong-environment"
    assert "production" in body["error"]["message"]


async def test_public_token_is_bound_to_its_tenant(client):
    token = (await new_token(client))["publicToken"]
    response = await client.get("/_sandbox/requests", headers={"x-public-token": token})
    assert response.status == 401  # the control plane needs API keys
