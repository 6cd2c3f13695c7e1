"""Company search, Company List and Company Details (spec: Endpoints; the real paths:
docs/spec/real-api-surface.md, Company)."""

from __future__ import annotations

from ...domain.companies.companies import full_record, search_record
from ...domain.companies.search import (SearchRequest, check_products, company_filter,
                                           search_companies)
from ...schemas.api import CompanyListQuery
from ..operations import Auth, Reply, operation
from ..examples import Example

SEARCH_COMPANIES = {"type": "array", "items": {"$ref": "#/components/schemas/SearchCompany"}}
COMPANIES = {"type": "array", "items": {"$ref": "#/components/schemas/Company"}}
COMPANY = {"$ref": "#/components/schemas/Company"}


@operation("POST", "/company/search", "Search companies, most relevant first",
           auth=Auth.EITHER,  # the one operation the real API also opens to a public token
           body=SearchRequest, response=SEARCH_COMPANIES, errors=(400, 404),
           example=Example({"query": "walmart", "product": "deposit"}))
async def search(tenant, body) -> list:
    found = search_companies(tenant.companies, tenant.manual_deposits, body,
                             tenant.rules.service.products)
    return [search_record(c, tenant.manual_deposits) for c in found]


@operation("GET", "/company/list", "List the catalog (disabled companies too)",
           query=CompanyListQuery, errors=(400,),
           response=COMPANIES, envelope={"total": {"type": "integer"}},
           example=Example(parameters={"product": "deposit", "limit": 10}))
async def list_companies(tenant, query) -> Reply:
    check_products(tenant.rules.service.products,
                   {"$.product": [query.product] if query.product else ()}, location="query")
    keep = company_filter(tenant.manual_deposits, include_disabled=True,
                          scopes=[query.scope] if query.scope else (),
                          products=[query.product] if query.product else ())
    matching = [c for c in tenant.companies.ordered() if keep(c)]
    page = matching[query.skip:query.skip + query.limit]
    return Reply([full_record(c, tenant.manual_deposits) for c in page],
                 extra={"total": len(matching)})


# The real path second: a decorator applies from the bottom up.
@operation("GET", "/company/{companyId}/details", "A company's details, at the real path",
           auth=Auth.API_KEYS, response=COMPANY, errors=(404,))
@operation("GET", "/company/{companyId}", "A company and what its connector can do",
           response=COMPANY, errors=(404,))
async def company_details(tenant, params) -> dict:
    return full_record(tenant.companies.require(params["companyId"]), tenant.manual_deposits)
