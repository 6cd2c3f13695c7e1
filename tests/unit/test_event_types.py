"""Each event type is declared once (domain/event_types.py): called with its data's fields it
makes the struct the domain emits, and the same declaration gives its published schema."""

from __future__ import annotations

import msgspec
import pytest

from payroll_sandbox.domain.webhooks.event_types import (COMPANY_CREATED, CONTINUOUS_ACCESS, MAINTENANCE_MODE,
                                            PII_DATA_DELETED, TASK_STATUS_UPDATED, Family,
                                            declared, event_schema, event_types,
                                            processor_link_events)
from payroll_sandbox.validate import schema_errors


def test_a_type_builds_its_data_from_the_declared_fields_leaving_out_none():
    draft = TASK_STATUS_UPDATED(previous_status="processing", status="completed",
                                authenticated=True, reason=None)
    assert draft.type is TASK_STATUS_UPDATED
    assert isinstance(draft.data, TASK_STATUS_UPDATED.shape)
    assert msgspec.to_builtins(draft.data) == {"previousStatus": "processing",
                                               "status": "completed", "authenticated": True}


@pytest.mark.parametrize("fields,named", [
    ({"company_id": "c", "colour": "red"}, "colour"),  # a field the type does not declare
    ({}, "company_id"),                                # a required field missing
])
def test_a_field_the_declaration_does_not_allow_is_a_type_error(fields, named):
    with pytest.raises(TypeError, match=named):
        COMPANY_CREATED(**fields)


def test_a_type_without_data_refuses_data():
    assert PII_DATA_DELETED().data is None
    with pytest.raises(TypeError, match="no data"):
        PII_DATA_DELETED(reason="gone")


def test_the_schema_is_derived_from_the_same_declaration_and_kept_once():
    schema = event_schema("maintenance-mode", "plaid")
    assert schema is MAINTENANCE_MODE.schema is event_schema("maintenance-mode", "plaid")
    assert schema["properties"]["data"] is MAINTENANCE_MODE.data
    assert schema["not"] == {"required": ["user"]}  # a company event has no user
    body = {"eventType": "maintenance-mode", "eventTime": "2026-01-01T00:00:00.000Z",
            "data": msgspec.to_builtins(
                MAINTENANCE_MODE(company_id="c", status="operational", products=[]).data)}
    assert schema_errors(body, schema) == []
    body["data"]["products"] = ["deposit"]  # back in operation names no product
    assert schema_errors(body, schema)


def test_every_type_is_declared_once_by_name_with_the_aggregator_named():
    names = event_types("acme-bank")
    assert len(names) == len(set(names)) and "acme-bank-error" in names
    assert processor_link_events("acme-bank")["acme-bank-error"].family is Family.USER
    assert all(declared("acme-bank")[name].name == name for name in names)
    assert {t.family for t in declared("acme-bank").values()} == set(Family)
    assert msgspec.to_builtins(CONTINUOUS_ACCESS["statements-synced"](
        linked_account="a", company_id="c").data) == {"linkedAccount": "a", "companyId": "c"}
