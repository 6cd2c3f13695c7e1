"""The control plane's tenants, reset and request journal, through real HTTP."""

from __future__ import annotations

from conftest import ACME, GLOBEX, WALMART


async def test_new_tenant_gets_working_keys_and_is_isolated(client):
    response = await client.post("/_sandbox/tenants", json={"products": ["deposit"]}, headers=ACME)
    assert response.status == 201
    tenant = (await response.json())["data"]
    headers = {"x-api-key": tenant["apiKey"], "x-api-secret": tenant["apiSecret"]}
    assert tenant["environment"] == "sandbox" and tenant["products"] == ["deposit"]
    assert (await client.get(f"/company/{WALMART}", headers=headers)).status == 200
    journal = await (await client.get("/_sandbox/requests", headers=headers)).json()
    assert [e["path"] for e in journal["data"]] == [f"/company/{WALMART}"]
    other = await (await client.get("/_sandbox/requests", headers=ACME)).json()
    assert f"/company/{WALMART}" not in [e["path"] for e in other["data"]]


async def test_new_tenants_get_distinct_names_and_keys(client):
    first = await (await client.post("/_sandbox/tenants", json={"name": "ci"}, headers=ACME)).json()
    second = await (await client.post("/_sandbox/tenants", json={"name": "ci"}, headers=ACME)).json()
    assert first["data"]["name"] != second["data"]["name"]
    assert first["data"]["apiKey"] != second["data"]["apiKey"]


async def test_new_tenant_with_a_bad_body_is_422(client):
    response = await client.post("/_sandbox/tenants", json={"products": "deposit"}, headers=ACME)
    assert response.status == 422
    assert (await response.json())["error"]["details"][0]["path"] == "$.products"


async def test_reset_forgets_users_and_tokens_but_keeps_the_keys(client):
    token = (await (await client.post("/access-token", json={"identifier": "u1"},
                                      headers=ACME)).json())["data"]["publicToken"]
    assert (await client.post("/_sandbox/reset", headers=ACME)).status == 200
    response = await client.get(f"/company/{WALMART}", headers={"x-public-token": token})
    assert response.status == 401
    assert (await client.get(f"/company/{WALMART}", headers=ACME)).status == 200


async def test_journal_is_newest_first_and_filters_by_path_method_and_status(client):
    await client.post("/company/search", json={"query": "walmart"}, headers=ACME)
    await client.post("/company/search", json={"query": ""}, headers=ACME)
    await client.get(f"/company/{WALMART}", headers=ACME)
    journal = await (await client.get("/_sandbox/requests", headers=ACME)).json()
    assert [e["path"] for e in journal["data"]] == [f"/company/{WALMART}", "/company/search",
                                                   "/company/search"]
    assert journal["data"][2]["body"] == {"query": "walmart"}
    failed = await (await client.get("/_sandbox/requests?status=422", headers=ACME)).json()
    assert [e["errorCode"] for e in failed["data"]] == ["validation-failed"]
    searches = await (await client.get("/_sandbox/requests?path=/company/search&method=post",
                                       headers=ACME)).json()
    assert len(searches["data"]) == 2
    limited = await (await client.get("/_sandbox/requests?limit=1", headers=ACME)).json()
    assert len(limited["data"]) == 1


async def test_journal_is_per_tenant(client):
    await client.post("/company/search", json={"query": "walmart"}, headers=GLOBEX)
    journal = await (await client.get("/_sandbox/requests", headers=ACME)).json()
    assert journal["data"] == []


def test_journal_keeps_the_newest_entries():
    from payroll_sandbox.domain.journal import Journal

    journal = Journal(max_entries=3)
    for number in range(5):
        journal.add(time="t", method="GET", path=f"/{number}", query={}, status=200,
                    duration_ms=1.0, error_code=None, body=None)
    assert [e.path for e in journal.query()] == ["/4", "/3", "/2"]
    assert len(journal) == 3


async def test_health_needs_no_credentials(client):
    response = await client.get("/health")
    assert response.status == 200
    assert (await response.json())["data"]["status"] == "ok"


async def test_the_calling_tenant_describes_itself(client):
    response = await client.get("/_sandbox/tenant", headers=ACME)
    assert response.status == 200
    data = (await response.json())["data"]
    assert (data["name"], data["apiKey"], data["environment"]) == ("acme", ACME["x-api-key"],
                                                                    "sandbox")
    assert data["signing"] is True
    assert (await client.get("/_sandbox/tenant")).status == 401
