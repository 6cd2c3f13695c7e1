"""Company changes through the control plane, each emitting the spec's company events.

Changes stay inside the tenant that made them (spec: Company events;
DESIGN.md: Tenancy). Company events carry no `user`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from msgspec.structs import replace

from ...errors import CompanyExists, UnknownProducts, ValidationFailed, field_detail
from ..rules import ServiceProfile
from .companies import (OPERATIONAL, UNDER_MAINTENANCE, Company, CompanyDirectory,
                        ManualDepositRule, company_from_fixture, full_record)
from ..webhooks.event_types import DECLARED, MaintenanceMode

ALREADY_EXISTS = "A company with the id {company_id!r} already exists."
NOT_A_PARENT = "Company {company_id!r} is not tagged franchise-parent."
UNKNOWN_PRODUCTS = "Unknown products: {products}."
CHILD_TAG = "A company with franchiseParent must be tagged franchise-child."
PARENT_NEEDED = "A franchise-child needs franchiseParent."


def create_company(companies: CompanyDirectory, emit: Callable[..., Any], new_id: Callable[[], str],
                   service: ServiceProfile, body: dict[str, Any]) -> Company:
    """POST /_sandbox/companies: emits company-created."""
    if "_id" not in body:
        body = {**body, "_id": new_id()}
    if companies.get(body["_id"]) is not None:
        raise CompanyExists(ALREADY_EXISTS.format(company_id=body["_id"]),
                            details=[field_detail("$._id", "already exists")])
    _check_references(companies, service, body)
    company = company_from_fixture(body, service)
    companies.put(company)
    emit(DECLARED["company-created"](company_id=company.id))
    return company


def update_company(companies: CompanyDirectory, emit: Callable[..., Any], service: ServiceProfile,
                   company_id: str, body: dict[str, Any]) -> Company:
    """PATCH /_sandbox/companies/{id}: the given fields replaced; emits company-updated."""
    current = companies.require(company_id)
    merged = {**fixture_of(current), **body, "_id": current.id}
    _check_references(companies, service, merged)
    company = replace(company_from_fixture(merged, service),
                      maintenance_products=current.maintenance_products)
    if company == current:
        return current  # nothing changed: no event (spec: "A company was updated")
    companies.put(company)
    emit(DECLARED["company-updated"](company_id=company.id))
    return company


def delete_company(companies: CompanyDirectory, emit: Callable[..., Any], company_id: str) -> None:
    """DELETE /_sandbox/companies/{id}: emits company-deleted."""
    company = companies.require(company_id)
    companies.delete(company.id)
    emit(DECLARED["company-deleted"](company_id=company.id))


def set_company_status(companies: CompanyDirectory, emit: Callable[..., Any], company_id: str,
                       status: str, products: list[str] | None = None) -> Company:
    """Maintenance on or off, or disabled (spec: Company status).

    Into or out of maintenance emits `maintenance-mode` (status `maintenance` with the
    products, or `operational` with an empty list); the spec does not show how
    `disabled` is announced, so the sandbox emits `company-updated` for it. Only a change
    is announced (spec: "When: A company's maintenance status changed"): the same status
    set again, with the same products, emits nothing.
    """
    company = companies.require(company_id)
    _refuse_unknown(sorted(set(products or ()) - set(company.available_products)),
                    "$.products", "not offered by the company")
    same, maintenance_products = company.status == status, ()
    if status == UNDER_MAINTENANCE:
        maintenance_products = tuple(products or company.available_products)
        same = same and company.maintenance_products == maintenance_products
        event = MaintenanceMode(company_id=company.id, status="maintenance",
                                products=list(maintenance_products))
    elif status == OPERATIONAL and company.status == UNDER_MAINTENANCE:
        event = MaintenanceMode(company_id=company.id, status="operational", products=[])
    else:
        event = DECLARED["company-updated"](company_id=company.id)
    if same:
        return company
    updated = replace(company, status=status, maintenance_products=maintenance_products)
    companies.put(updated)
    emit(event)
    return updated


def _refuse_unknown(unknown: list[str], path: str, why: str) -> None:
    """The unknown-products error naming each product at `path`, if there are any."""
    if unknown:
        raise UnknownProducts(UNKNOWN_PRODUCTS.format(products=", ".join(unknown)),
                              details=[field_detail(path, f"{why}: {p}") for p in unknown])


def _check_references(companies: CompanyDirectory, service: ServiceProfile,
                      body: dict[str, Any]) -> None:
    parent_id = body.get("franchiseParent")
    child = "franchise-child" in body.get("tags", [])
    if parent_id is not None:
        parent = (None if parent_id == body.get("_id")  # itself: not a parent (below)
                  else companies.require(parent_id, "$.franchiseParent"))  # unknown: a 404
        if parent is None or "franchise-parent" not in parent.tags:  # itself, or no parent
            raise ValidationFailed(NOT_A_PARENT.format(company_id=parent_id),
                                   details=[field_detail("$.franchiseParent", "not a franchise parent")])
        if not child:
            raise ValidationFailed(CHILD_TAG, details=[field_detail("$.tags", CHILD_TAG)])
    elif child:
        raise ValidationFailed(PARENT_NEEDED,
                               details=[field_detail("$.franchiseParent", PARENT_NEEDED)])
    products = body.get("connector", {}).get("availableProducts", [])
    _refuse_unknown([p for p in products if p not in service.products],
                    "$.connector.availableProducts", "unknown")


def fixture_of(company: Company) -> dict[str, Any]:
    """A company as a companies.yaml entry (so an update can merge fields into it): its full
    record under no manual-deposit rule (its stored tags; the scopes are derived again), with
    what only an entry gives."""
    record = full_record(company, ManualDepositRule())
    if company.default_scenario:
        record["defaultScenario"] = company.default_scenario
    if company.max_payment_methods is not None:
        record["maxPaymentMethods"] = company.max_payment_methods
    return record
