"""Company List and Details through real HTTP, and the seeded catalog."""

from __future__ import annotations

from pathlib import Path

from conftest import ACME, GLOBEX, JOES_DINER, SEARS, WALMART

from payroll_sandbox.app import load
from payroll_sandbox.settings import Settings, bundled_dir


async def test_company_details_has_full_connector_capabilities(client):
    response = await client.get(f"/company/{WALMART}", headers=ACME)
    assert response.status == 200
    company = (await response.json())["data"]
    assert company["name"] == "Walmart"
    assert set(company["connector"]["capabilities"]) == {
        "headlessAuthentication", "ssoAuthentication", "authenticationMethods",
        "distributionActions", "distributionTypes", "supportedPaymentMethods"}
    assert company["scopes"] == ["user-link"]


async def test_company_details_applies_the_manual_deposit_rule(client):
    acme = await (await client.get(f"/company/{JOES_DINER}", headers=ACME)).json()
    globex = await (await client.get(f"/company/{JOES_DINER}", headers=GLOBEX)).json()
    assert "manual-deposits" in acme["data"]["tags"]
    assert "manual-deposits" not in globex["data"]["tags"]


async def test_company_details_of_a_disabled_company_is_shown(client):
    response = await client.get(f"/company/{SEARS}", headers=ACME)
    assert (await response.json())["data"]["status"] == "disabled"


async def test_company_list_pages_through_the_whole_catalog(client, loaded):
    seen = []
    skip = 0
    while True:
        response = await client.get(f"/company/list?limit=400&skip={skip}", headers=ACME)
        body = await response.json()
        assert body["total"] == len(loaded.catalog)
        if not body["data"]:
            break
        seen += [c["_id"] for c in body["data"]]
        skip += 400
    assert len(seen) == len(set(seen)) == len(loaded.catalog)


async def test_company_list_default_limit_is_100(client):
    body = await (await client.get("/company/list", headers=ACME)).json()
    assert len(body["data"]) == 100


async def test_company_list_filters_by_product_and_scope(client):
    body = await (await client.get("/company/list?product=switch&limit=1000", headers=ACME)).json()
    assert body["total"] == len(body["data"]) > 0
    assert all("switch" in c["connector"]["availableProducts"] for c in body["data"])
    body = await (await client.get("/company/list?scope=pay-link&limit=1000", headers=ACME)).json()
    assert all("pay-link" in c["scopes"] for c in body["data"])


async def test_company_list_applies_the_manual_deposit_rule(client):
    body = await (await client.get("/company/list?limit=1000&product=deposit", headers=ACME)).json()
    joes = next(c for c in body["data"] if c["_id"] == JOES_DINER)
    assert "manual-deposits" in joes["tags"]


def test_same_seed_gives_the_same_catalog_and_ids():
    first = load(Settings(seed=7)).catalog.ordered
    second = load(Settings(seed=7)).catalog.ordered
    assert [(c.id, c.name, c.status) for c in first] == [(c.id, c.name, c.status) for c in second]


def test_the_catalog_is_the_same_whatever_the_seed():
    """DESIGN (Commands): "the catalog is the same every run, while generated ids come from
    a fresh seed per start": a company id kept from one run names the same company next."""
    first = [(c.id, c.name) for c in load(Settings(seed=7)).catalog.ordered]
    second = [(c.id, c.name) for c in load(Settings(seed=8)).catalog.ordered]
    assert first == second and len(first) > 100


def test_generated_catalog_has_franchise_networks_and_every_status(tmp_path: Path):
    (tmp_path / "service.yaml").write_text((bundled_dir("fixtures") / "service.yaml").read_text())
    (tmp_path / "accounts.yaml").write_text(
        "accounts: [{name: a, apiKey: key-a-123456, apiSecret: secret-a-123456, "
        "environment: sandbox}]\n")
    generate = 3000
    (tmp_path / "companies.yaml").write_text(
        f"catalog: {{generate: {generate}, franchiseShare: 0.2}}\n")
    catalog = load(Settings(fixtures=tmp_path)).catalog
    companies = catalog.ordered
    assert len(companies) == generate
    parents = [c for c in companies if "franchise-parent" in c.tags]
    assert parents and all(len(catalog.children_of(p.id)) >= 1 for p in parents)
    assert {c.status for c in companies} == {"operational", "under-maintenance", "disabled"}
    assert {"payroll-provider", "gig-economy"} <= {t for c in companies for t in c.tags}
    assert {"user-link", "pay-link"} <= {s for c in companies for s in c.scopes}


def test_generated_catalog_is_the_same_with_and_without_the_word_pool_cache(tmp_path, monkeypatch):
    from payroll_sandbox.load.catalog import generate_companies
    from payroll_sandbox.load.fixtures import load_fixtures

    service = load_fixtures(bundled_dir("fixtures")).service
    monkeypatch.setenv("PAYROLL_SANDBOX_CACHE_DIR", str(tmp_path))
    cold = generate_companies(300, 5, service)
    assert list(tmp_path.glob("catalog-words-5-*.json"))
    warm = generate_companies(300, 5, service)
    assert [(c.id, c.name) for c in cold] == [(c.id, c.name) for c in warm]
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("PAYROLL_SANDBOX_CACHE_DIR", str(blocker / "cache"))
    uncached = generate_companies(300, 5, service)  # a cache it cannot write changes nothing
    assert [(c.id, c.name) for c in uncached] == [(c.id, c.name) for c in cold]
