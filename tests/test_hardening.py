"""Bad input that once reached too far: each is a clear 4xx and changes nothing."""

from __future__ import annotations

from conftest import ACME, GLOBEX, JOES_DINER, WALMART

NETFLIX = "6410a0000000000000000060"
JSON_ACME = {**ACME, "content-type": "application/json"}


async def events(client, headers=ACME, **query):
    response = await client.get("/_sandbox/events", params=query, headers=headers)
    return (await response.json())["data"]


async def test_nan_and_infinity_are_not_json(client):
    for raw in (b'{"seconds": NaN}', b'{"seconds": Infinity}', b'{"seconds": -Infinity}'):
        response = await client.post("/_sandbox/clock/advance", data=raw, headers=JSON_ACME)
        assert response.status == 400
        assert (await response.json())["error"]["code"] == "malformed-json"
    response = await client.put("/_sandbox/webhooks/faults", data=b'{"delay": 1, "delaySeconds": NaN}',
                                headers=JSON_ACME)
    assert response.status == 400


async def test_a_non_ascii_secret_is_401_not_500(client):
    response = await client.get("/company/list", headers={
        "x-api-key": ACME["x-api-key"], "x-api-secret": "s\u00e9cret".encode().decode("latin-1")})
    assert response.status == 401


async def test_a_refresh_cadence_under_a_minute_is_refused(client):
    response = await client.post("/_sandbox/tenants", headers=ACME,
                                 json={"continuousAccess": {"refreshInterval": 0.01}})
    assert response.status == 422
    assert response_path(await response.json()) == "$.continuousAccess.refreshInterval"


def response_path(body):
    return body["error"]["details"][0]["path"]


async def test_sdk_login_checks_each_task_like_task_creation(client):
    token = (await (await client.post("/access-token", json={"identifier": "sdk"},
                                      headers=ACME)).json())["data"]["publicToken"]
    response = await client.post("/sdk/login", headers={"x-public-token": token}, json={
        "companyId": NETFLIX, "username": "test-good", "password": "x",
        "tasks": [{"operation": "switch", "paymentMethod": {"type": "card"}}]})
    assert response.status == 422
    response = await client.post("/sdk/login", headers={"x-public-token": token}, json={
        "companyId": WALMART, "username": "test-good", "password": "x",
        "tasks": [{"operation": "deposit", "metadata": "not an object"}]})
    assert response.status == 422
    assert await events(client) == []


async def test_a_public_token_reads_only_its_own_users_tasks(client):
    created = await (await client.post("/task/create", headers=ACME, json={
        "identifier": "alice", "company": WALMART, "product": "deposit",
        "metadata": {"ssnRef": "secret"}})).json()
    bob = (await (await client.post("/access-token", json={"identifier": "bob"},
                                    headers=ACME)).json())["data"]["publicToken"]
    # The API's task reads need API keys; the hosted flow reads its own user's tasks.
    response = await client.get(f"/task/{created['data']['id']}", headers={"x-public-token": bob})
    assert response.status == 401
    response = await client.get(f"/sdk/task/{created['data']['id']}",
                                headers={"x-public-token": bob})
    assert response.status == 404
    alice = (await (await client.post("/access-token", json={"identifier": "alice"},
                                      headers=ACME)).json())["data"]["publicToken"]
    response = await client.get(f"/sdk/task/{created['data']['id']}",
                                headers={"x-public-token": alice})
    assert response.status == 200


async def test_a_refresh_of_a_linked_account_cannot_name_another_company(client):
    await client.post("/task/create", headers=ACME,
                      json={"identifier": "la", "company": WALMART, "product": "deposit"})
    await client.post("/_sandbox/clock/run-until-idle", headers=ACME)
    account = (await (await client.get("/linked-accounts?identifier=la",
                                       headers=ACME)).json())["data"][0]
    before = len(await events(client))
    response = await client.post("/task/create", headers=ACME, json={
        "linkedAccount": account["_id"], "company": "6410a0000000000000000020", "product": "tax"})
    assert response.status == 422
    assert response_path(await response.json()) == "$.company"
    assert len(await events(client)) == before


async def test_control_plane_companies_follow_the_franchise_rules(client):
    cases = [({"name": "Kid", "tags": ["franchise-child"]}, "$.franchiseParent"),
             ({"name": "Orphan", "franchiseParent": "6410a0000000000000000040"}, "$.tags"),
             ({"_id": "selfp", "name": "Self", "tags": ["franchise-parent", "franchise-child"],
               "franchiseParent": "selfp"}, "$.franchiseParent")]
    for body, path in cases:
        response = await client.post("/_sandbox/companies", json=body, headers=ACME)
        assert response.status == 422, body
        assert response_path(await response.json()) == path
    assert await events(client) == []


async def test_a_company_default_scenario_must_be_a_task_scenario(client):
    response = await client.post("/_sandbox/companies", headers=ACME, json={
        "name": "Proc", "defaultScenario": "processor-link-happy-path"})
    assert response.status == 422
    assert (await response.json())["error"]["code"] == "unknown-scenario"
    assert await events(client) == []


async def test_maintenance_scenario_keeps_the_products_the_company_offers(client):
    # globex: Joe's Diner offers only deposit and is not a manual-deposits company there.
    response = await client.post("/task/create", headers=GLOBEX, json={
        "identifier": "m1", "company": JOES_DINER, "product": "deposit", "scenario": "maintenance"})
    assert response.status == 200, await response.text()
    await client.post("/_sandbox/clock/run-until-idle", headers=GLOBEX)
    maintenance = await events(client, type="maintenance-mode", headers=GLOBEX)
    assert [e["body"]["data"]["status"] for e in maintenance] == ["maintenance", "operational"]
    assert maintenance[0]["body"]["data"]["products"] == ["deposit"]
