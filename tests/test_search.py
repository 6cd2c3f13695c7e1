"""POST /company/search through real HTTP: the spec's rules 1-6, tags, filters, relevance."""

from __future__ import annotations

from conftest import (ACME, FEDEX, GLOBEX, JOES_DINER, KROGER, MCDONALDS, MCDONALDS_RENO, SEARS,
                      SUBWAY, WALMART)


async def search(client, headers=ACME, **body):
    response = await client.post("/company/search", json=body, headers=headers)
    return response.status, await response.json()


def names(payload):
    return [c["name"] for c in payload["data"]]


def ids(payload):
    return [c["_id"] for c in payload["data"]]


async def test_search_exact_name_comes_first(client):
    status, payload = await search(client, query="Walmart")
    assert status == 200
    assert ids(payload)[0] == WALMART


async def test_search_items_have_the_spec_fields_and_a_slim_connector(client):
    _, payload = await search(client, query="Walmart")
    item = payload["data"][0]
    assert set(item) == {"_id", "name", "status", "branding", "tags", "connector"}
    assert set(item["connector"]) == {"_id", "availableProducts", "capabilities"}
    assert set(item["connector"]["capabilities"]) <= {"distributionTypes", "supportedPaymentMethods"}
    assert item["branding"]["logo"]["url"] and item["branding"]["color"].startswith("#")


async def test_search_relevance_exact_then_prefix_then_word_then_fuzzy(client):
    _, payload = await search(client, query="amazon")
    assert names(payload)[:3] == ["Amazon", "Amazon Prime", "Amazon Web Services"]
    _, payload = await search(client, query="home depot")
    assert names(payload)[0] == "The Home Depot"  # every word matches, not a prefix
    _, payload = await search(client, query="walmrt")  # typo
    assert names(payload)[0] == "Walmart"
    _, payload = await search(client, query="netfl")  # still typing
    assert names(payload)[0] == "Netflix"


async def test_search_ignores_case_and_punctuation(client):
    for query in ("mcdonalds", "McDonald's", "MCDONALD'S"):
        _, payload = await search(client, query=query)
        assert ids(payload)[0] == MCDONALDS
    _, payload = await search(client, query="at&t")
    assert names(payload)[0] == "AT&T"


async def test_search_order_is_deterministic(client):
    first = [await search(client, query="pizza", limit=50) for _ in range(3)]
    assert first[0] == first[1] == first[2]


async def test_search_product_and_products_is_rejected(client):
    status, payload = await search(client, query="walmart", product="deposit", products=["deposit"])
    assert status == 400
    assert payload["error"]["code"] == "product-and-products"
    assert {d["path"] for d in payload["error"]["details"]} == {"$.product", "$.products"}


async def test_search_never_returns_disabled_companies(client):
    _, payload = await search(client, query="Sears")
    assert SEARS not in ids(payload)
    _, payload = await search(client, query="McDonald's", limit=100)
    assert MCDONALDS_RENO not in ids(payload)
    assert all(c["status"] != "disabled" for c in payload["data"])


async def test_search_returns_under_maintenance_companies(client):
    _, payload = await search(client, query="FedEx")
    assert ids(payload)[0] == FEDEX
    assert payload["data"][0]["status"] == "under-maintenance"


async def test_search_manual_deposits_tag_follows_the_account_rule(client):
    # acme: companies without programmatic authentication are manual.
    _, payload = await search(client, query="Joe's Family Diner")
    assert payload["data"][0]["_id"] == JOES_DINER
    assert "manual-deposits" in payload["data"][0]["tags"]
    _, payload = await search(client, query="Kroger")
    assert "manual-deposits" not in payload["data"][0]["tags"]
    # globex: only Kroger is manual, by id.
    _, payload = await search(client, GLOBEX, query="Kroger")
    assert payload["data"][0]["_id"] == KROGER
    assert "manual-deposits" in payload["data"][0]["tags"]
    _, payload = await search(client, GLOBEX, query="Joe's Family Diner")
    assert "manual-deposits" not in payload["data"][0]["tags"]


async def test_search_manual_deposits_tag_is_never_stored(client):
    response = await client.get(f"/company/{JOES_DINER}", headers=GLOBEX)
    assert "manual-deposits" not in (await response.json())["data"]["tags"]


async def test_search_excluded_tags_does_not_remove_manual_deposits(client):
    _, payload = await search(client, query="Joe's Family Diner", excludedTags=["manual-deposits"])
    assert ids(payload)[0] == JOES_DINER


async def test_search_tags_filter_can_ask_for_manual_deposits(client):
    _, payload = await search(client, query="a", tags=["manual-deposits"], limit=100)
    assert payload["data"]
    assert all("manual-deposits" in c["tags"] for c in payload["data"])


async def test_search_tags_include_only_companies_with_every_tag(client):
    _, payload = await search(client, query="pay", tags=["payroll-provider"], limit=100)
    assert {"Paychex", "Paycom", "Paylocity"} <= set(names(payload))
    assert all("payroll-provider" in c["tags"] for c in payload["data"])


async def test_search_excluding_franchise_child_collapses_to_the_parent(client):
    _, with_children = await search(client, query="McDonald's", limit=100)
    assert len([c for c in with_children["data"] if "franchise-child" in c["tags"]]) >= 3
    _, collapsed = await search(client, query="McDonald's", excludedTags=["franchise-child"])
    assert ids(collapsed)[0] == MCDONALDS
    assert not [c for c in collapsed["data"] if "franchise-child" in c["tags"]]


async def test_search_franchise_parent_lists_only_its_children(client, loaded):
    _, payload = await search(client, query="McDonald's", franchiseParent=MCDONALDS)
    listed = {c.id for c in loaded.catalog.children_of(MCDONALDS) if c.status != "disabled"}
    assert listed and sorted(ids(payload)) == sorted(listed)
    assert all("franchise-child" in c["tags"] for c in payload["data"])
    for company in payload["data"]:
        response = await client.get(f"/company/{company['_id']}", headers=ACME)
        assert (await response.json())["data"]["franchiseParent"] == MCDONALDS
    _, other = await search(client, query="McDonald's", franchiseParent=SUBWAY)
    assert other["data"] == []  # scoped on the server: Subway has no McDonald's


async def test_search_franchise_parent_is_ranked_by_the_query(client):
    _, payload = await search(client, query="austin", franchiseParent=MCDONALDS)
    assert names(payload)[0] == "McDonald's - Austin, TX"


async def test_search_unknown_franchise_parent_is_404(client):
    status, payload = await search(client, query="x", franchiseParent="no-such-company")
    assert status == 404
    assert payload["error"]["details"][0]["path"] == "$.franchiseParent"


async def test_search_query_is_required_also_with_franchise_parent(client):
    status, payload = await search(client, franchiseParent=MCDONALDS)
    assert status == 422
    assert payload["error"]["details"][0]["path"] == "$"
    assert "query" in payload["error"]["details"][0]["message"]


async def test_search_product_filter(client):
    _, payload = await search(client, query="a", product="switch", limit=100)
    assert payload["data"]
    assert all("switch" in c["connector"]["availableProducts"] for c in payload["data"])


async def test_search_products_filter_needs_every_product(client):
    _, payload = await search(client, query="costco", products=["deposit", "switch"])
    assert names(payload) == ["Costco Membership"]


async def test_search_scopes_filter(client):
    _, payload = await search(client, query="amazon", scopes=["pay-link"])
    assert names(payload) == ["Amazon Prime"]
    _, payload = await search(client, query="amazon", scopes=["user-link"])
    assert names(payload) == ["Amazon", "Amazon Web Services"]


async def test_search_limit_defaults_to_20_and_is_at_most_100(client):
    _, payload = await search(client, query="a")
    assert len(payload["data"]) == 20
    _, payload = await search(client, query="a", limit=100)
    assert len(payload["data"]) == 100
    status, payload = await search(client, query="a", limit=101)
    assert status == 422
    assert payload["error"]["details"][0]["path"] == "$.limit"


async def test_search_with_a_public_token(client):
    response = await client.post("/access-token", json={"identifier": "user-1"}, headers=ACME)
    token = (await response.json())["data"]["publicToken"]
    status, payload = await search(client, {"x-public-token": token}, query="Walmart")
    assert status == 200
    assert ids(payload)[0] == WALMART
