"""The drift check's pure parts (simulator/tools/verify.py): the structural diff of two JSON
answers, the status rule, and what is refused before anything is sent."""

from __future__ import annotations

import json

import pytest

from payroll_sandbox.tools.probes import production_signal, refusal
from payroll_sandbox.tools.answers import NOT_JSON, diff_answers, diff_json
from payroll_sandbox.tools.probes import COMPANY_STATUS, INCOME_TYPE, PROBES, Probe

COMPANY = {"_id": "6410a0000000000000000001", "name": "Walmart", "status": "operational",
           "branding": {"color": "#0071ce", "logo": {"url": "https://x/walmart.svg"}},
           "tags": ["employer"]}
PROBE = Probe("company-search", "POST", "/company/search", "200",
              enums={"$.data[].status": COMPANY_STATUS})


def kinds(differences) -> list[tuple[str, str, object, object]]:
    return [(d.kind, d.path, d.service, d.sandbox) for d in differences]


def test_diff_json_of_the_same_shape_with_other_values_is_empty():
    other = {**COMPANY, "_id": "ffff", "name": "Kroger", "tags": []}
    assert diff_json({"data": [COMPANY]}, {"data": [other, COMPANY]}) == ([], [])


def test_diff_json_names_a_changed_type_by_its_path():
    changed = {**COMPANY, "name": 42}
    differences, _ = diff_json({"data": [changed]}, {"data": [COMPANY]})
    assert kinds(differences) == [("type", "$.data[].name", "number", "string")]
    assert differences[0].message == ("$.data[].name: the service answers a number, the "
                                      "sandbox a string")


def test_diff_json_names_missing_and_extra_fields_once_at_their_own_path():
    service = {"data": {"publicToken": "p", "legacy": {"a": 1, "b": 2}}}
    sandbox = {"data": {"publicToken": "p", "expiresAt": "2026-01-01T00:00:00.000Z"}}
    differences, _ = diff_json(service, sandbox)
    assert kinds(differences) == [("missing", "$.data.legacy", "object", None),
                                  ("extra", "$.data.expiresAt", None, "string")]


def test_diff_json_compares_the_union_of_an_arrays_item_shapes():
    """A field that one item has counts for the array; a mixed type shows both types."""
    service = {"data": [{"a": 1}, {"a": 2, "b": "x"}]}
    sandbox = {"data": [{"a": 1, "b": "y"}, {"a": "3"}]}
    differences, _ = diff_json(service, sandbox)
    assert kinds(differences) == [("type", "$.data[].a", "number", "number|string")]


def test_diff_json_both_arrays_empty_is_no_difference_and_one_empty_is_a_note():
    assert diff_json({"data": []}, {"data": []}) == ([], [])
    differences, notes = diff_json({"data": []}, {"data": [COMPANY]})
    assert differences == []
    assert [(n.path, n.message) for n in notes] == [
        ("$.data", "$.data: the service answered no items, the sandbox some: their fields "
                   "were not compared")]


def test_diff_json_null_matches_any_type():
    assert diff_json({"a": None, "b": 1}, {"a": "x", "b": None}) == ([], [])


def test_diff_json_top_level_shape_change_is_one_type_difference():
    """A bare array where the sandbox wraps it in `data`: one difference at `$`."""
    differences, _ = diff_json([COMPANY], {"data": [COMPANY]})
    assert kinds(differences) == [("type", "$", "array", "object")]


def test_diff_json_a_body_that_is_not_json_differs_from_json():
    differences, _ = diff_json(NOT_JSON, {"data": {}})
    assert kinds(differences) == [("type", "$", "not JSON", "object")]


def test_diff_json_quotes_field_names_that_are_not_plain():
    differences, _ = diff_json({"odd key": 1}, {})
    assert kinds(differences) == [("missing", '$["odd key"]', "number", None)]


def test_diff_json_enum_value_neither_published_nor_answered_by_the_other_side():
    enums = {"$.data[].incomeType": INCOME_TYPE}
    # Published values, or values the other side answered too, are not differences.
    assert diff_json({"data": [{"incomeType": "yearly"}]}, {"data": [{"incomeType": "hourly"}]},
                     enums) == ([], [])
    assert diff_json({"data": [{"incomeType": "salary"}]}, {"data": [{"incomeType": "salary"}]},
                     enums) == ([], [])
    differences, _ = diff_json({"data": [{"incomeType": "annual"}]},
                               {"data": [{"incomeType": "salary"}, {"incomeType": "hourly"}]},
                               enums)
    assert kinds(differences) == [("enum", "$.data[].incomeType", "annual", None),
                                  ("enum", "$.data[].incomeType", None, "salary")]
    assert "the service answered 'annual', which is not a published value" in \
        differences[0].message


def test_diff_answers_a_status_difference_is_the_only_difference():
    differences, notes = diff_answers(PROBE, (400, {"message": "bad"}), (404, {"error": {}}))
    assert kinds(differences) == [("status", "status", 400, 404)]
    assert differences[0].probe == "company-search" and notes == []


def test_diff_answers_compares_error_bodies_by_status_only():
    probe = Probe("company-details-unknown", "GET", "/company/x/details", "404")
    assert diff_answers(probe, (404, {"message": "nope"}), (404, {"error": {"code": "x"}})) \
        == ([], [])


def test_diff_answers_notes_a_shared_status_the_documentation_does_not_give():
    _, notes = diff_answers(PROBE, (404, None), (404, None))
    assert [n.message for n in notes] == ["status: both answered 404; the documentation "
                                          "says 200"]
    probe = Probe("access-token-without-identifier", "POST", "/access-token", "4xx")
    assert diff_answers(probe, (422, {}), (422, {})) == ([], [])


def test_diff_answers_applies_the_probes_enums_and_names_the_probe():
    differences, _ = diff_answers(PROBE, (200, {"data": [{**COMPANY, "status": "paused"}]}),
                                  (200, {"data": [COMPANY]}))
    assert kinds(differences) == [("enum", "$.data[].status", "paused", None)]
    assert differences[0].probe == "company-search"


# Writes that read (search, prescreen) and the run's own objects it may change.
# The aggregator's API reads by POST too; its probes (issue 47: "its probes cover every
# operation docs/aggregator.md lists") act on the run's own item, made by
# /sandbox/public_token/create, or on nothing (a link token, a refused key id).
READS_BY_POST = {"/company/search", "/task/prescreen", "/pay-link/search",
                 "/institutions/get_by_id"}
RUN_OWN = ("{runUser}", "{endpointId}", "{secretId}", "{publicToken}", "{aggregatorPublicToken}",
           "{aggregatorAccessToken}")


def test_probes_have_unique_names_and_write_only_on_what_the_run_makes():
    """verify-against writes (issue 33, point 11) only on the user, webhook endpoint,
    signing secret and tokens it makes for the run, or where the service must refuse:
    never on the customer's test user (`{identifier}`)."""
    assert len({p.name for p in PROBES}) == len(PROBES)
    writes = [p for p in PROBES if p.method != "GET"]
    assert writes
    for probe in writes:
        request = probe.path + json.dumps(probe.body)
        assert "{identifier}" not in request, probe.name
        refused = probe.expect.startswith("4")
        assert (probe.path in READS_BY_POST or refused or any(name in request for name in RUN_OWN)
                or probe.path in ("/webhooks/endpoints", "/secrets",
                                  "/sandbox/public_token/create")), probe.name


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "http://localhost:8080",
                                 "http://[::1]:8080", "https://sandbox.vendor.example",
                                 "https://api-sandbox.vendor.example/v1",
                                 "http://app.localhost"])
def test_refusal_lets_loopback_and_sandbox_hosts_through(url):
    assert refusal(url, "key", "secret") is None


@pytest.mark.parametrize("url", ["https://api.vendor.example", "http://10.0.0.5:8080",
                                 "http://0.0.0.0:8080"])
def test_refusal_stops_other_hosts_unless_trusted(url):
    assert "--i-know-this-is-sandbox" in refusal(url, "key", "secret")
    assert refusal(url, "key", "secret", trust_host=True) is None


@pytest.mark.parametrize(("key", "secret"), [("production-key-acme-0001", "s"),
                                             ("k", "prod_secret"), ("LIVE-key", "s"),
                                             ("k", "sk_live_abc")])
def test_refusal_stops_production_keys_even_when_the_host_is_trusted(key, secret):
    reason = refusal("http://127.0.0.1:8080", key, secret, trust_host=True)
    assert reason is not None and "production" in reason


def test_refusal_does_not_read_production_into_other_words():
    assert refusal("http://127.0.0.1:8080", "products-key", "lively-secret") is None


def test_production_signal_reads_the_health_body_and_header():
    assert production_signal(200, {}, {"data": {"environment": "production"}})
    assert production_signal(200, {}, {"environment": "production"})
    assert production_signal(404, {"x-environment": "Production"}, NOT_JSON)
    assert production_signal(200, {}, {"data": {"environment": "sandbox"}}) is None
    assert production_signal(404, {}, {"environment": "production"}) is None
    assert production_signal(200, {}, NOT_JSON) is None
