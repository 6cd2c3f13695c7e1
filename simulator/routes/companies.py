"""Company search, Company List and Company Details (spec: Endpoints)."""

from __future__ import annotations

from aiohttp import web

from ..domain.companies import full_record, search_record
from ..domain.search import SearchQuery, company_filter, search_companies
from ..keys import tenant_of
from ..middleware import read_json
from ..schemas.api import COMPANY_LIST_QUERY, SEARCH_REQUEST
from ..validation import parse_query

routes = web.RouteTableDef()


@routes.post("/company/search")
async def search(request: web.Request) -> web.Response:
    body = await read_json(request, SEARCH_REQUEST)
    tenant = tenant_of(request)
    found = search_companies(tenant.companies, tenant.manual_deposits, SearchQuery.from_body(body))
    return web.json_response({"data": [search_record(c, tenant.manual_deposits) for c in found]})


@routes.get("/company/list")
async def list_companies(request: web.Request) -> web.Response:
    query = parse_query(request.query, COMPANY_LIST_QUERY)
    tenant = tenant_of(request)
    keep = company_filter(tenant.manual_deposits, include_disabled=True,
                          scopes=[query["scope"]] if "scope" in query else (),
                          products=[query["product"]] if "product" in query else ())
    matching = [c for c in tenant.companies.ordered() if keep(c)]
    page = matching[query["skip"]:query["skip"] + query["limit"]]
    return web.json_response({"data": [full_record(c, tenant.manual_deposits) for c in page],
                              "total": len(matching)})


@routes.get("/company/{companyId}")
async def company_details(request: web.Request) -> web.Response:
    tenant = tenant_of(request)
    company = tenant.companies.require(request.match_info["companyId"])
    return web.json_response({"data": full_record(company, tenant.manual_deposits)})
