"""The control plane's companies and the event ledger, through real HTTP.

Status changes (spec: Company status), create/update/delete (spec: Company events),
tenant isolation (DESIGN.md: Tenancy) and the filters of GET /_sandbox/events.
"""

from __future__ import annotations

import pytest
from calls import create_task
from conftest import ACME, GLOBEX, KROGER, WALMART

from payroll_sandbox.clock import isoformat

AMAZON = "6410a0000000000000000002"
TARGET = "6410a0000000000000000003"
START = 1_780_000_000  # the manual clock of conftest


async def set_status(client, company_id, headers=ACME, **body):
    return await client.post(f"/_sandbox/companies/{company_id}/status", json=body,
                             headers=headers)


async def events(client, headers=ACME, **query) -> list[dict]:
    response = await client.get("/_sandbox/events", params=query, headers=headers)
    assert response.status == 200, await response.text()
    return (await response.json())["data"]


async def search_ids(client, query, headers=ACME) -> list[str]:
    response = await client.post("/company/search", json={"query": query}, headers=headers)
    assert response.status == 200, await response.text()
    return [c["_id"] for c in (await response.json())["data"]]


async def search_hit(client, query, company_id, headers=ACME) -> dict | None:
    response = await client.post("/company/search", json={"query": query}, headers=headers)
    found = [c for c in (await response.json())["data"] if c["_id"] == company_id]
    return found[0] if found else None


async def error_of(response, status) -> dict:
    assert response.status == status, await response.text()
    return (await response.json())["error"]


# -- maintenance and disabled ---------------------------------------------------------------

async def test_company_maintenance_for_one_product_blocks_it_and_announces_it(client):
    response = await set_status(client, WALMART, status="under-maintenance", products=["deposit"])
    assert response.status == 200
    data = (await response.json())["data"]
    assert data["status"] == "under-maintenance" and data["maintenanceProducts"] == ["deposit"]

    [event] = await events(client, type="maintenance-mode")
    assert event["body"]["data"] == {"companyId": WALMART, "status": "maintenance",
                                     "products": ["deposit"]}
    assert "user" not in event["body"] and event["userIdentifier"] is None

    error = await create_task(client, product="deposit", status=403)
    assert error["code"] == "company-under-maintenance"
    assert [d["path"] for d in error["details"]] == ["$.company"]
    await create_task(client, product="verify")
    hit = await search_hit(client, "Walmart", WALMART)
    assert hit is not None and hit["status"] == "under-maintenance"
    details = await (await client.get(f"/company/{WALMART}", headers=ACME)).json()
    assert details["data"]["status"] == "under-maintenance"


async def test_company_back_to_operational_announces_empty_products_and_accepts_tasks(client):
    await set_status(client, WALMART, status="under-maintenance", products=["deposit"])
    response = await set_status(client, WALMART, status="operational")
    assert response.status == 200
    assert (await response.json())["data"]["status"] == "operational"
    ledger = await events(client, type="maintenance-mode")
    assert [e["body"]["data"] for e in ledger] == [
        {"companyId": WALMART, "status": "maintenance", "products": ["deposit"]},
        {"companyId": WALMART, "status": "operational", "products": []},
    ]
    assert all("user" not in e["body"] for e in ledger)
    await create_task(client, product="deposit")
    assert (await search_hit(client, "Walmart", WALMART))["status"] == "operational"


async def test_company_maintenance_without_products_covers_every_product(client):
    await set_status(client, WALMART, status="under-maintenance")
    [event] = await events(client, type="maintenance-mode")
    assert sorted(event["body"]["data"]["products"]) == ["deposit", "verify"]
    for product in ("deposit", "verify"):
        error = await create_task(client, product=product, status=403)
        assert error["code"] == "company-under-maintenance"


async def test_company_update_keeps_maintenance_of_the_listed_products(client):
    await set_status(client, WALMART, status="under-maintenance", products=["deposit"])
    response = await client.patch(f"/_sandbox/companies/{WALMART}", json={"name": "Walmart Inc"},
                                  headers=ACME)
    assert response.status == 200
    await create_task(client, product="verify")
    error = await create_task(client, product="deposit", status=403)
    assert error["code"] == "company-under-maintenance"


async def test_company_disabled_leaves_search_refuses_tasks_and_emits_company_updated(client):
    assert WALMART in await search_ids(client, "Walmart")
    response = await set_status(client, WALMART, status="disabled")
    assert response.status == 200
    assert (await response.json())["data"]["status"] == "disabled"
    assert WALMART not in await search_ids(client, "Walmart")
    error = await create_task(client, status=403)
    assert error["code"] == "company-disabled"
    [event] = await events(client)
    assert event["eventType"] == "company-updated"
    assert event["body"]["data"] == {"companyId": WALMART} and "user" not in event["body"]
    # Details still answer (Company Details is not search), showing the status.
    details = await (await client.get(f"/company/{WALMART}", headers=ACME)).json()
    assert details["data"]["status"] == "disabled"


async def test_company_disabled_then_operational_is_searchable_again(client):
    await set_status(client, WALMART, status="disabled")
    await set_status(client, WALMART, status="operational")
    assert WALMART in await search_ids(client, "Walmart")
    await create_task(client)
    assert [e["eventType"] for e in await events(client)] == ["company-updated", "company-updated"]


async def test_company_status_with_a_product_it_does_not_offer_is_422(client):
    response = await set_status(client, WALMART, status="under-maintenance", products=["switch"])
    error = await error_of(response, 422)
    assert error["code"] == "unknown-products"
    assert [d["path"] for d in error["details"]] == ["$.products"]
    assert await events(client) == []


# -- create, update, delete -----------------------------------------------------------------

NEW_COMPANY = {"name": "Quillfeather Robotics",
               "connector": {"availableProducts": ["deposit", "verify"]}}


async def test_company_create_is_201_emits_company_created_and_is_found(client):
    response = await client.post("/_sandbox/companies", json=NEW_COMPANY, headers=ACME)
    assert response.status == 201
    created = (await response.json())["data"]
    company_id = created["_id"]
    assert created["name"] == "Quillfeather Robotics" and created["status"] == "operational"
    [event] = await events(client)
    assert event["eventType"] == "company-created"
    assert event["body"]["data"] == {"companyId": company_id} and "user" not in event["body"]
    assert (await search_ids(client, "Quillfeather Robotics"))[0] == company_id
    details = await client.get(f"/company/{company_id}", headers=ACME)
    assert details.status == 200
    assert (await details.json())["data"]["connector"]["availableProducts"] == ["deposit", "verify"]
    await create_task(client, company=company_id)


async def test_company_create_with_a_chosen_id_keeps_it(client):
    body = {**NEW_COMPANY, "_id": "6410a00000000000000000ff"}
    response = await client.post("/_sandbox/companies", json=body, headers=ACME)
    assert response.status == 201
    assert (await response.json())["data"]["_id"] == "6410a00000000000000000ff"
    assert (await client.get("/company/6410a00000000000000000ff", headers=ACME)).status == 200


async def test_company_create_with_an_existing_id_is_409(client):
    response = await client.post("/_sandbox/companies", json={**NEW_COMPANY, "_id": WALMART},
                                 headers=ACME)
    error = await error_of(response, 409)
    assert error["code"] == "company-exists"
    assert [d["path"] for d in error["details"]] == ["$._id"]
    assert await events(client) == []
    details = await (await client.get(f"/company/{WALMART}", headers=ACME)).json()
    assert details["data"]["name"] == "Walmart"


@pytest.mark.parametrize("body, paths", [
    ({}, {"$"}),
    ({"name": 5}, {"$.name"}),
    ({"name": "X", "maxPaymentMethods": 0, "branding": {"color": "red"}},
     {"$.maxPaymentMethods", "$.branding.color"}),
    ({"name": "X", "tags": ["manual-deposits"]}, {"$.tags[0]"}),
    ({"name": "X", "connector": {"availableProducts": ["teleport"]}},
     {"$.connector.availableProducts"}),
    ({"name": "X", "franchiseParent": WALMART}, {"$.franchiseParent"}),
], ids=["empty", "name-not-string", "bad-limit-and-colour", "derived-tag", "unknown-product",
        "parent-not-a-franchise-parent"])
async def test_company_create_with_a_bad_body_is_422_naming_each_path(client, body, paths):
    response = await client.post("/_sandbox/companies", json=body, headers=ACME)
    error = await error_of(response, 422)
    assert paths <= {d["path"] for d in error["details"]}
    assert await events(client) == []


async def test_company_update_emits_company_updated_and_search_finds_the_new_name(client):
    response = await client.patch(f"/_sandbox/companies/{TARGET}",
                                  json={"name": "Bullseye Megastores"}, headers=ACME)
    assert response.status == 200
    assert (await response.json())["data"]["name"] == "Bullseye Megastores"
    [event] = await events(client)
    assert event["eventType"] == "company-updated"
    assert event["body"]["data"] == {"companyId": TARGET} and "user" not in event["body"]
    assert (await search_ids(client, "Bullseye Megastores"))[0] == TARGET
    details = await (await client.get(f"/company/{TARGET}", headers=ACME)).json()
    assert details["data"]["name"] == "Bullseye Megastores"
    assert details["data"]["connector"]["_id"] == "conn-target"  # other fields kept


@pytest.mark.parametrize("body, path", [
    ({}, "$"),
    ({"status": "disabled"}, "$.status"),
    ({"_id": "other"}, "$._id"),
    ({"name": ""}, "$.name"),
], ids=["empty", "status-not-here", "id-not-here", "empty-name"])
async def test_company_update_with_a_bad_body_is_422(client, body, path):
    response = await client.patch(f"/_sandbox/companies/{TARGET}", json=body, headers=ACME)
    error = await error_of(response, 422)
    assert path in {d["path"] for d in error["details"]}
    assert await events(client) == []


async def test_company_delete_emits_company_deleted_and_the_company_is_gone(client):
    response = await client.delete(f"/_sandbox/companies/{WALMART}", headers=ACME)
    assert response.status == 200
    [event] = await events(client)
    assert event["eventType"] == "company-deleted"
    assert event["body"]["data"] == {"companyId": WALMART} and "user" not in event["body"]
    error = await error_of(await client.get(f"/company/{WALMART}", headers=ACME), 404)
    assert error["code"] == "company-not-found"
    assert WALMART not in await search_ids(client, "Walmart")
    await create_task(client, status=404)


@pytest.mark.parametrize("method, path, body", [
    ("PATCH", "/_sandbox/companies/6410afffffffffffffffffff", {"name": "X"}),
    ("DELETE", "/_sandbox/companies/6410afffffffffffffffffff", None),
    ("POST", "/_sandbox/companies/6410afffffffffffffffffff/status", {"status": "disabled"}),
])
async def test_company_control_on_an_unknown_id_is_404(client, method, path, body):
    response = await client.request(method, path, json=body, headers=ACME)
    error = await error_of(response, 404)
    assert error["code"] == "company-not-found"
    assert await events(client) == []


async def test_company_delete_twice_is_404(client):
    assert (await client.delete(f"/_sandbox/companies/{WALMART}", headers=ACME)).status == 200
    response = await client.delete(f"/_sandbox/companies/{WALMART}", headers=ACME)
    assert (await error_of(response, 404))["code"] == "company-not-found"


async def test_company_control_needs_api_keys(client):
    token = await (await client.post("/access-token", json={"identifier": "u"}, headers=ACME)).json()
    response = await set_status(client, WALMART, headers={"x-public-token": token["data"]["publicToken"]},
                                status="disabled")
    assert (await error_of(response, 401))["code"] == "api-keys-required"


# -- tenant isolation ---------------------------------------------------------------------

async def test_company_changes_of_one_tenant_are_invisible_to_another(client):
    await set_status(client, WALMART, status="under-maintenance", products=["deposit"])
    await set_status(client, AMAZON, status="disabled")
    await client.patch(f"/_sandbox/companies/{TARGET}", json={"name": "Bullseye Megastores"},
                       headers=ACME)
    await client.delete(f"/_sandbox/companies/{KROGER}", headers=ACME)
    created = await (await client.post("/_sandbox/companies", json=NEW_COMPANY,
                                       headers=ACME)).json()
    assert len(await events(client)) == 5

    assert (await search_hit(client, "Walmart", WALMART, GLOBEX))["status"] == "operational"
    assert AMAZON in await search_ids(client, "Amazon", GLOBEX)
    assert TARGET not in await search_ids(client, "Bullseye Megastores", GLOBEX)
    target = await (await client.get(f"/company/{TARGET}", headers=GLOBEX)).json()
    assert target["data"]["name"] == "Target"
    assert (await client.get(f"/company/{KROGER}", headers=GLOBEX)).status == 200
    assert (await client.get(f"/company/{created['data']['_id']}", headers=GLOBEX)).status == 404
    assert created["data"]["_id"] not in await search_ids(client, "Quillfeather Robotics", GLOBEX)
    await create_task(client, company=WALMART, headers=GLOBEX)
    await create_task(client, company=AMAZON, headers=GLOBEX)
    assert await events(client, GLOBEX) == []


# -- the event ledger ---------------------------------------------------------------------

async def ledger_with_two_users(client):
    """Two users' tasks run to the end, then (100 s later) a company event."""
    first = await create_task(client, "user-a")
    second = await create_task(client, "user-b")
    await client.post("/_sandbox/clock/run-until-idle", headers=ACME)
    await client.post("/_sandbox/clock/advance", json={"seconds": 100}, headers=ACME)
    await set_status(client, WALMART, status="disabled")
    return first["id"], second["id"]


async def test_events_filter_by_type(client):
    await ledger_with_two_users(client)
    updates = await events(client, type="task-status-updated")
    assert len(updates) == 2  # two tasks, each announced when it resolves
    assert {e["eventType"] for e in updates} == {"task-status-updated"}
    assert await events(client, type="no-such-type") == []


async def test_events_filter_by_user(client):
    first, _ = await ledger_with_two_users(client)
    mine = await events(client, user="user-a")
    assert mine and {e["userIdentifier"] for e in mine} == {"user-a"}
    # The task's events, plus linked-account-connected (a completed deposit links the account).
    assert {e["task"] for e in mine if e["task"]} == {first}
    assert [e["eventType"] for e in mine if not e["task"]] == ["linked-account-connected"]
    assert all(e["body"]["user"]["identifier"] == "user-a" for e in mine)


async def test_events_filter_by_task(client):
    _, second = await ledger_with_two_users(client)
    mine = await events(client, task=second)
    assert [e["eventType"] for e in mine] == ["task-authentication-status-updated",
                                              "task-status-updated", "task-workflow-finished"]
    assert {e["task"] for e in mine} == {second}


async def test_events_filter_since_a_virtual_time(client):
    await ledger_with_two_users(client)
    everything = await events(client)
    since = isoformat(START + 100)
    later = await events(client, since=since)
    assert [e["eventType"] for e in later] == ["company-updated"]
    assert later == [e for e in everything if e["time"] >= since]
    assert await events(client, since=isoformat(START)) == everything


async def test_events_filters_combine(client):
    first, _ = await ledger_with_two_users(client)
    found = await events(client, type="task-status-updated", user="user-a", task=first)
    assert [e["body"]["data"]["status"] for e in found] == ["completed"]


async def test_events_since_that_is_not_a_time_is_422(client):
    response = await client.get("/_sandbox/events", params={"since": "yesterday"}, headers=ACME)
    error = await error_of(response, 422)
    assert [d["path"] for d in error["details"]] == ["$.since"]


async def test_events_are_oldest_first_with_increasing_sequence(client):
    await ledger_with_two_users(client)
    everything = await events(client)
    sequences = [e["sequence"] for e in everything]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    assert [e["time"] for e in everything] == sorted(e["time"] for e in everything)


async def test_event_by_id_returns_the_same_record(client):
    await ledger_with_two_users(client)
    for event in await events(client):
        response = await client.get(f"/_sandbox/events/{event['id']}", headers=ACME)
        assert response.status == 200
        assert (await response.json())["data"] == event


async def test_event_unknown_id_is_404_event_not_found(client):
    response = await client.get("/_sandbox/events/no-such-event", headers=ACME)
    assert (await error_of(response, 404))["code"] == "event-not-found"


async def test_event_of_another_tenant_is_404(client):
    await set_status(client, WALMART, status="disabled")
    [event] = await events(client)
    response = await client.get(f"/_sandbox/events/{event['id']}", headers=GLOBEX)
    assert (await error_of(response, 404))["code"] == "event-not-found"
