"""Each event type is declared once, by its data struct (`@event`, domain/event_types.py):
the struct is what the domain emits, and the same declaration gives its published schema."""

from __future__ import annotations

import msgspec
import pytest

from payroll_sandbox.domain.webhooks.event_types import (DECLARED, Family,
                                                         MaintenanceMode, PiiDataDeleted,
                                                         TaskStatusUpdated, declared,
                                                         event_schema, event_types)
from payroll_sandbox.validate import schema_errors


def test_a_type_builds_its_data_from_the_declared_fields_leaving_out_none():
    declaration = TaskStatusUpdated.event_type
    draft = declaration(previous_status="processing", status="completed", authenticated=True,
                        reason=None)
    assert draft.type is declaration is declared("plaid")["task-status-updated"]
    assert isinstance(draft.data, TaskStatusUpdated)
    assert msgspec.to_builtins(draft.data) == {"previousStatus": "processing",
                                               "status": "completed", "authenticated": True}


@pytest.mark.parametrize("fields,named", [
    ({"company_id": "c", "colour": "red"}, "colour"),  # a field the type does not declare
    ({}, "company_id"),                                # a required field missing
])
def test_a_field_the_declaration_does_not_allow_is_a_type_error(fields, named):
    with pytest.raises(TypeError, match=named):
        DECLARED["company-created"](**fields)


def test_a_type_without_data_drafts_none():
    assert PiiDataDeleted.event_type.draft(PiiDataDeleted()).data is None
    with pytest.raises(TypeError, match="reason"):
        PiiDataDeleted.event_type(reason="gone")


def test_the_schema_is_derived_from_the_same_declaration_and_kept_once():
    schema = event_schema("maintenance-mode", "plaid")
    assert schema is MaintenanceMode.event_type.schema is event_schema("maintenance-mode", "plaid")
    assert schema["properties"]["data"] is MaintenanceMode.event_type.data
    assert schema["not"] == {"required": ["user"]}  # a company event has no user
    body = {"eventType": "maintenance-mode", "eventTime": "2026-01-01T00:00:00.000Z",
            "data": msgspec.to_builtins(
                MaintenanceMode(company_id="c", status="operational", products=[]))}
    assert schema_errors(body, schema) == []
    body["data"]["products"] = ["deposit"]  # back in operation names no product
    assert schema_errors(body, schema)


def test_every_type_is_declared_once_by_name_with_the_aggregator_named():
    names = event_types("acme-bank")
    assert len(names) == len(set(names)) and "acme-bank-error" in names
    assert declared("acme-bank")["acme-bank-error"].family is Family.USER
    assert all(declared("acme-bank")[name].name == name for name in names)
    assert {t.family for t in declared("acme-bank").values()} == set(Family)
    assert msgspec.to_builtins(DECLARED["statements-synced"](
        linked_account="a", company_id="c").data) == {"linkedAccount": "a", "companyId": "c"}
    # a struct of several types has no one type of its own: it is drafted by name
    assert DECLARED["statements-synced"].shape.event_type is None
