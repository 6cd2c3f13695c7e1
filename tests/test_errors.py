"""Every error status through real HTTP, always in the one error shape, never a 500."""

from __future__ import annotations

import io
import json

import pytest
from conftest import ACME, WALMART

from payroll_sandbox.edge.keys import SANDBOX


def assert_error_shape(body, code=None):
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert isinstance(body["error"]["details"], list)
    assert "Traceback" not in json.dumps(body)
    if code:
        assert body["error"]["code"] == code


async def test_malformed_json_is_400(client):
    response = await client.post("/company/search", data=b'{"query": ',
                                 headers={**ACME, "content-type": "application/json"})
    assert response.status == 400
    assert_error_shape(await response.json(), "malformed-json")


async def test_unknown_company_is_404(client):
    response = await client.get("/company/does-not-exist", headers=ACME)
    assert response.status == 404
    body = await response.json()
    assert_error_shape(body, "company-not-found")
    assert "does-not-exist" in body["error"]["message"]


async def test_unknown_route_is_404_in_the_error_shape(client):
    response = await client.get("/nowhere", headers=ACME)
    assert response.status == 404
    assert_error_shape(await response.json(), "route-not-found")


async def test_wrong_method_is_405_in_the_error_shape(client):
    response = await client.get("/company/search", headers=ACME)
    assert response.status in (404, 405)  # GET /company/{id} matches the path
    response = await client.delete("/access-token", headers=ACME)
    assert response.status == 405
    assert_error_shape(await response.json(), "method-not-allowed")


async def test_a_typo_of_a_fixed_path_is_404_though_a_parameter_route_shares_its_prefix(
        client):
    """Issue 34, point 7: POST /task/creat matched GET /task/{taskId} by its shape and was
    a 405; no route of any method matches it, so it is a 404 naming the paths meant."""
    for method, path, meant in (("POST", "/task/creat", "/task/create"),
                                ("POST", "/company/serch", "/company/search"),
                                ("POST", "/_sandbox/events/triger", "/_sandbox/events/trigger")):
        response = await client.request(method, path, headers=ACME, json={})
        assert response.status == 404, (method, path)
        assert "allow" not in response.headers
        body = await response.json()
        assert_error_shape(body, "route-not-found")
        assert body["error"]["message"].startswith(f"No route matches {method} {path};")
        assert meant in body["error"]["message"]


async def test_every_fixed_path_misspelt_is_404_with_its_own_method(client):
    """Each operation's fixed path with its last letter dropped (no path of its own), asked
    with its method: a 404 (the aggregator's API in its own body), never a 405, whatever
    route shares the prefix."""
    sandbox = client.server.app[SANDBOX]
    paths = {op.path for op in sandbox.operations}
    for op in sandbox.operations:
        typo = op.path[:-1]  # /_sandbox/tenant is a path of its own (GET): left out
        if "{" in op.path or typo.endswith("/") or typo in paths or not typo:
            continue
        response = await client.request(op.method, typo, headers=ACME, json={})
        assert response.status == 404, (op.method, typo, await response.text())
        assert "allow" not in response.headers, (op.method, typo)


async def test_a_wrong_method_on_a_path_that_exists_stays_405_with_allow(client):
    task = (await (await client.post("/task/create", headers=ACME, json={
        "identifier": "u-405", "company": WALMART, "product": "deposit"})).json())["data"]
    for method, path, allowed in (("DELETE", "/access-token", "POST"),
                                  ("GET", "/task/create", "POST"),
                                  ("PUT", "/_sandbox/events/trigger", "POST"),
                                  ("DELETE", f"/task/{task['id']}", "GET, HEAD"),
                                  ("PUT", f"/task/{task['id']}", "GET, HEAD")):
        response = await client.request(method, path, headers=ACME)
        assert response.status == 405, (method, path)
        assert response.headers["allow"] == allowed, (method, path)
        assert_error_shape(await response.json(), "method-not-allowed")


async def test_a_newline_in_a_parameter_that_takes_the_rest_of_the_path_is_422(client):
    """GET /initialize/{config} takes slashes: a newline there once matched no route (404)."""
    for path in ("/initialize/%0Ae30=", "/initialize/e30=/a%0Ab"):
        response = await client.get(path)
        assert response.status == 422, path
        body = await response.json()
        assert_error_shape(body, "validation-failed")
        assert body["error"]["details"][0]["location"] == "path"


async def test_body_over_one_mib_is_413(client):
    body = json.dumps({"query": "x" * (1024 * 1024 + 10)}).encode()
    response = await client.post("/company/search", data=io.BytesIO(body), headers=ACME)
    assert response.status == 413
    assert_error_shape(await response.json(), "payload-too-large")


async def test_schema_violations_are_422_naming_every_path(make_client):
    client = await make_client(strict_bodies=True)
    response = await client.post("/company/search", headers=ACME,
                                 json={"query": 5, "scopes": ["nope"], "limit": 0, "extra": 1})
    assert response.status == 422
    body = await response.json()
    assert_error_shape(body, "validation-failed")
    paths = {d["path"] for d in body["error"]["details"]}
    assert {"$.query", "$.scopes[0]", "$.limit", "$.extra"} <= paths


async def test_schema_violations_are_422_and_an_unknown_field_is_only_named(client):
    """Without --strict-bodies an unknown field is no fault: the 422 names the real ones,
    and the warning header names the field ignored."""
    response = await client.post("/company/search", headers=ACME,
                                 json={"query": 5, "scopes": ["nope"], "limit": 0, "extra": 1})
    assert response.status == 422
    body = await response.json()
    assert {d["path"] for d in body["error"]["details"]} == {"$.query", "$.scopes[0]", "$.limit"}
    assert response.headers["x-sandbox-warning"] == "unknown field $.extra ignored"


async def test_bad_query_parameters_are_422(client):
    response = await client.get("/company/list?limit=abc", headers=ACME)
    assert response.status == 422
    body = await response.json()
    assert body["error"]["details"][0] == {"location": "query", "path": "$.limit",
                                           "message": "'abc' is not an integer"}
    response = await client.get("/company/list?scope=everything", headers=ACME)
    assert response.status == 422


@pytest.mark.parametrize("raw", [b"[]", b"null", b"42", b'"text"', b"\xff\xfe", b"{}",
                                 b'{"query": null}', b'{"query": ["a"]}', b'{"query": ""}',
                                 b'{"query": "   "}', b'{"query": "a", "limit": "5"}',
                                 b'{"query": "a", "tags": "payroll-provider"}',
                                 b"[" * 5000 + b"]" * 5000], ids=lambda raw: repr(raw[:20]))
async def test_garbage_bodies_never_give_500(client, raw):
    response = await client.post("/company/search", data=raw, headers=ACME)
    assert 400 <= response.status < 500
    assert_error_shape(await response.json())


async def test_bad_input_changes_nothing(client):
    before = await (await client.get("/company/list?limit=1000", headers=ACME)).json()
    await client.post("/access-token", json={"identifier": ""}, headers=ACME)
    await client.post("/_sandbox/tenants", json={"name": "bad name!"}, headers=ACME)
    after = await (await client.get("/company/list?limit=1000", headers=ACME)).json()
    assert before == after
    journal = await (await client.get("/_sandbox/requests", headers=ACME)).json()
    assert [e["status"] for e in journal["data"][1:3]] == [422, 422]


async def test_browsers_on_another_origin_may_call_the_api(client):
    preflight = await client.options("/company/search", headers={
        "origin": "http://localhost:3000", "access-control-request-method": "POST",
        "access-control-request-headers": "x-public-token, content-type"})
    assert preflight.status == 204
    assert "x-public-token" in preflight.headers["access-control-allow-headers"]
    response = await client.post("/company/search", json={"query": "walmart"},
                                 headers={**ACME, "origin": "http://localhost:3000"})
    assert response.headers["access-control-allow-origin"] == "*"
    refused = await client.post("/company/search", json={"query": "walmart"})
    assert refused.status == 401 and refused.headers["access-control-allow-origin"] == "*"
