"""Request verification with near misses (issue 46, point 3): `assert_called` on the plugin's
sync and async sandboxes and `POST /_sandbox/requests/verify` check the tenant's journal; a
failure names the nearest requests (3 at most) with every JSON path where each differs."""

from __future__ import annotations

import pytest
from calls import call, create_task
from conftest import ACME, WALMART

from payroll_sandbox.testing import RequestNotMade

VERIFY = "/_sandbox/requests/verify"
BODY = {"identifier": "verify-1", "company": WALMART, "product": "deposit",
        "metadata": {"order": "A-1", "lines": [1, 2, 3]}}
# Three differences planted in BODY, each at its JSON path.
PLANTED = {"$.body.identifier": "verify-2", "$.body.metadata.order": "A-2",
           "$.body.metadata.lines[2]": 4}


def planted() -> dict:
    return {**BODY, "identifier": "verify-2",
            "metadata": {"order": "A-2", "lines": [1, 2, 4]}}


def differing(miss: dict) -> dict[str, tuple]:
    return {d["path"]: (d.get("expected"), d.get("actual")) for d in miss["differences"]}


# -- the plugin's sandboxes ---------------------------------------------------------------------

def test_assert_called_passes_on_an_exact_match(payroll_sandbox):
    payroll_sandbox.post("/task/create", BODY)
    payroll_sandbox.get("/_sandbox/clock")
    [entry] = payroll_sandbox.assert_called("POST", "/task/create", body=BODY, times=1)
    journal = payroll_sandbox.request("GET", "/_sandbox/requests?path=/task/create")
    assert [e["id"] for e in journal] == [entry]
    # A part of the body is enough: fields not named are not looked at.
    assert payroll_sandbox.assert_called("post", "/task/create",
                                         body={"metadata": {"order": "A-1"}}) == [entry]


def test_assert_called_names_each_planted_difference(payroll_sandbox):
    payroll_sandbox.post("/task/create", BODY)
    payroll_sandbox.run_until_idle()
    with pytest.raises(RequestNotMade) as raised:
        payroll_sandbox.assert_called("POST", "/task/create", body=planted())
    error = raised.value
    assert isinstance(error, AssertionError) and error.status == 422
    assert error.matched == [] and 1 <= len(error.near_misses) <= 3
    nearest = error.near_misses[0]
    assert (nearest["method"], nearest["path"]) == ("POST", "/task/create")
    found = differing(nearest)
    assert set(found) == set(PLANTED)  # 3 of 3, and nothing else
    assert found["$.body.metadata.lines[2]"] == (4, 3)
    message = str(error)
    for path, value in PLANTED.items():
        assert f"{path}: expected {value!r}".replace("'", '"') in message
    assert f"request #{nearest['id']} POST /task/create -> 200" in message


def test_assert_called_counts_times_and_reads_query_and_path_templates(payroll_sandbox):
    task = payroll_sandbox.post("/task/create", BODY)
    payroll_sandbox.post("/task/create", {**BODY, "identifier": "verify-3"})
    payroll_sandbox.get(f"/task/{task['id']}")
    payroll_sandbox.get("/_sandbox/events", limit=5, type="task-status-updated")
    assert len(payroll_sandbox.assert_called("POST", "/task/create", times=2)) == 2
    with pytest.raises(RequestNotMade, match="2 requests matched POST /task/create; 1 expected"):
        payroll_sandbox.assert_called("POST", "/task/create", times=1)
    payroll_sandbox.assert_called("GET", "/task/{taskId}", times=1)
    payroll_sandbox.assert_called("GET", "/_sandbox/events", query={"limit": 5})
    with pytest.raises(RequestNotMade) as raised:
        payroll_sandbox.assert_called("GET", "/_sandbox/events", query={"limit": 6, "user": "x"})
    assert differing(raised.value.near_misses[0]) == {
        "$.query.limit": ("6", "5"), "$.query.user": ("x", None)}
    # Never called: times=0 holds; the verification calls themselves are never matched.
    payroll_sandbox.assert_called("DELETE", "/task/{taskId}", times=0)
    payroll_sandbox.assert_called("POST", VERIFY, times=0)


def test_a_nearer_miss_comes_first_and_three_at_most(payroll_sandbox):
    for number in range(5):
        payroll_sandbox.get("/_sandbox/clock")
    payroll_sandbox.post("/task/create", {**BODY, "product": "verify"})
    with pytest.raises(RequestNotMade) as raised:
        payroll_sandbox.assert_called("POST", "/task/create", body=BODY)
    misses = raised.value.near_misses
    assert len(misses) == 3
    assert differing(misses[0]) == {"$.body.product": ("deposit", "verify")}
    assert all(m["path"] == "/_sandbox/clock" for m in misses[1:])


async def test_async_assert_called_answers_as_the_sync_one(async_payroll_sandbox):
    await async_payroll_sandbox.post("/task/create", BODY)
    assert len(await async_payroll_sandbox.assert_called("POST", "/task/create", body=BODY)) == 1
    with pytest.raises(RequestNotMade) as raised:
        await async_payroll_sandbox.assert_called("POST", "/task/create", body=planted())
    assert set(differing(raised.value.near_misses[0])) == set(PLANTED)


# -- the HTTP form, for other languages -----------------------------------------------------------

async def test_verify_over_http_answers_200_or_422_with_near_misses(client):
    await create_task(client, "verify-1")
    await call(client, "POST", "/task/create", json=BODY)
    held = await call(client, "POST", VERIFY, json={"method": "POST", "path": "/task/create",
                                                    "body": BODY, "times": 1})
    assert len(held["data"]["matched"]) == 1
    response = await client.post(VERIFY, json={"method": "POST", "path": "/task/create",
                                               "body": planted()}, headers=ACME)
    assert response.status == 422
    error = (await response.json())["error"]
    assert error["code"] == "not-called" and error["matched"] == []
    assert set(differing(error["nearMisses"][0])) == set(PLANTED)
    assert "nearMisses" in error["message"]


@pytest.mark.parametrize("body, path", [
    ({"path": "/task/create"}, "$"),
    ({"method": "POST", "path": "task/create"}, "$.path"),
    ({"method": "POST", "path": "/task/create", "times": -1}, "$.times"),
    ({"method": "POST", "path": "/task/create", "query": {"limit": 5}}, "$.query.limit"),
    ({"method": "POST", "path": "/task/create", "bdy": {}}, "$.bdy"),  # a typo: refused
])
async def test_verify_refuses_a_description_that_is_none(client, body, path):
    response = await client.post(VERIFY, json=body, headers=ACME)
    assert response.status == 422
    error = (await response.json())["error"]
    assert error["code"] == "validation-failed"
    assert path in [d["path"] for d in error["details"]] or path == "$"
