"""Bundles (issue 46, point 4): GET /_sandbox/bundle holds a tenant at the failing moment,
reopens to the same snapshot, and a file that is no bundle (or a newer one, or hostile) is
refused with nothing restored and no file written outside its folder."""

from __future__ import annotations

import json
import os

import pytest
from jsonschema import Draft202012Validator
from calls import advance, call, create_task
from conftest import ACME

from payroll_sandbox.edge import bundles
from payroll_sandbox.validate import ConfigError
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.edge.snapshot import encode

ONE_MB = 1024 * 1024


async def failed_tenant(client) -> tuple[dict, dict]:
    """A tenant as a failing test leaves it: a task part way through its scenario, a bound
    scenario, an endpoint whose URL has a password; its keys and its bundle."""
    made = (await call(client, "POST", "/_sandbox/tenants", status=201,
                       json={"name": "test_refund"}))["data"]
    keys = {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}
    await call(client, "PUT", "/_sandbox/webhooks/endpoints", headers=keys,
               json={"endpoints": [{"url": "http://user:hunter2@127.0.0.1:9/hooks"}]})
    await call(client, "PUT", "/_sandbox/users/u2/scenario", headers=keys,
               json={"scenario": "auth-expired"})
    await create_task(client, "u1", headers=keys)
    await advance(client, 20, headers=keys)
    return keys, made


async def test_a_bundle_holds_the_tenant_at_the_failing_moment(client):
    keys, made = await failed_tenant(client)
    # What the hosted flow told the host page (issue 46, point 2) goes in the bundle too.
    token = (await call(client, "POST", "/access-token", headers=keys,
                        json={"identifier": "u-flow"}))["data"]["publicToken"]
    await call(client, "POST", "/sdk/callbacks", headers={"x-public-token": token},
               json={"flow": "h1", "messages": [{"event": "close", "payload": {"reason": "x"}}]})
    told = (await call(client, "GET", "/_sandbox/sdk/callbacks", headers=keys))["data"]
    clock = (await call(client, "GET", "/_sandbox/clock", headers=keys))["data"]
    journal = (await call(client, "GET", "/_sandbox/requests", headers=keys))["data"]
    events = (await call(client, "GET", "/_sandbox/events", headers=keys))["data"]
    response = await client.get("/_sandbox/bundle", params={"test": "tests/a.py::test_refund"},
                                headers=keys)
    assert response.status == 200
    raw = await response.text()
    bundle = json.loads(raw)["data"]
    assert (bundle["format"], bundle["version"], bundle["test"], bundle["tenant"]) == (
        bundles.FORMAT, bundles.VERSION, "tests/a.py::test_refund", "test_refund")
    assert bundle["seed"] == bundle["snapshot"]["seed"] == 1
    assert bundle["clock"] == clock and bundle["takenAt"] == clock["now"]
    assert bundle["bindings"] == {"u2": "auth-expired"}
    assert bundle["callbacks"] == told and told[0]["payload"] == {"reason": "x"}
    # The journal oldest first, as GET /_sandbox/requests showed it (and those two reads).
    assert [e["id"] for e in bundle["requests"]] == sorted(e["id"] for e in journal) + [
        journal[0]["id"] + 1, journal[0]["id"] + 2]
    assert bundle["events"] == [redacted(e) for e in events] and events
    # No key of the tenant; a URL's password redacted, wherever it was.
    assert made["apiKey"] not in raw and made["apiSecret"] not in raw
    assert "hunter2" not in raw and "http://redacted@127.0.0.1:9/hooks" in raw
    assert len(raw) < ONE_MB
    # The bundle is what /openapi.json says GET /_sandbox/bundle answers, each copied part
    # with its operation's schema (the callbacks' fields included: required, each typed).
    document = await (await client.get("/openapi.json")).json()
    schema = document["paths"]["/_sandbox/bundle"]["get"]["responses"]["200"]["content"][
        "application/json"]["schema"]["properties"]["data"]
    Draft202012Validator({**schema, "components": document["components"]}).validate(bundle)
    callbacks = schema["properties"]["callbacks"]["items"]
    assert set(callbacks["required"]) == set(told[0]) == set(callbacks["properties"])


def redacted(value):
    return json.loads(json.dumps(value).replace("user:hunter2@", "redacted@"))


async def test_a_bundle_reopens_to_the_snapshot_taken_at_the_failure(client, make_client,
                                                                      tmp_path):
    keys, _ = await failed_tenant(client)
    bundle = (await call(client, "GET", "/_sandbox/bundle", headers=keys))["data"]
    path = bundles.write_bundle(tmp_path, "tests/a.py::test_refund", encode(bundle))
    assert path == tmp_path / "tests_a.py_test_refund.json"

    other = await make_client()
    opened, tenant = bundles.open_bundle(other.app[SANDBOX], path)
    assert opened == bundle and tenant.name == "test_refund"
    restored = {"x-api-key": tenant.api_key, "x-api-secret": tenant.api_secret}
    assert restored != keys  # keys of its own: the bundle has none
    snapshot = (await call(other, "GET", "/_sandbox/snapshot", headers=restored))["data"]
    assert snapshot == bundle["snapshot"]
    # It goes on from there: the rest of its scenario runs on the restored clock.
    await advance(other, 600, headers=restored)
    [task] = (await call(other, "GET", "/_sandbox/tasks", headers=restored))["data"]
    assert task["status"] == "completed"


def bundle_file(tmp_path, **changes) -> bytes:
    document = {"format": bundles.FORMAT, "version": 1, "test": "t", "tenant": "t", "seed": 1,
                "clock": {}, "bindings": {}, "snapshot": {}, "requests": [], "events": [],
                "callbacks": [], **changes}
    return json.dumps(document).encode()


HOSTILE = {
    "not JSON": (b"{\"format\": ", "$", "not JSON"),
    "a list": (b"[1, 2]", "$", "not a bundle"),
    "another format": (b'{"format": "zip"}', "$.format", "not a bundle"),
    "a snapshot": (b'{"format": "payroll-sandbox-snapshot", "version": 2}', "$.format",
                   "POST /_sandbox/snapshot"),
    "a newer version": (None, "$.version", "format version 2"),
    "no snapshot": (None, "$.snapshot", "object"),
    "a tenant name with path tricks": (None, "$.snapshot.tenant.name", "a tenant name"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
async def test_a_file_that_is_no_bundle_is_refused_and_nothing_restored(client, tmp_path, case):
    raw, where, says = HOSTILE[case]
    if case == "a newer version":
        raw = bundle_file(tmp_path, version=2)
    elif case == "no snapshot":
        raw = bundle_file(tmp_path, snapshot=[])
    elif case == "a tenant name with path tricks":
        raw = bundle_file(tmp_path, snapshot={"tenant": {"name": "../../etc/passwd"}})
    path = tmp_path / "bundle.json"
    path.write_bytes(raw)
    sandbox = client.app[SANDBOX]
    before = [t.name for t in sandbox.registry.tenants]
    with pytest.raises(ConfigError) as raised:
        bundles.open_bundle(sandbox, path)
    [(file, at, message)] = raised.value.problems[:1]
    assert file == str(path) and at.startswith(where) and says in message, raised.value.problems
    assert [t.name for t in sandbox.registry.tenants] == before
    assert os.listdir(tmp_path) == ["bundle.json"]


async def test_a_bundle_of_another_seed_or_a_huge_file_is_refused(client, make_client, tmp_path):
    keys, _ = await failed_tenant(client)
    bundle = (await call(client, "GET", "/_sandbox/bundle", headers=keys))["data"]
    path = bundles.write_bundle(tmp_path, "t", encode(bundle))
    other = await make_client(seed=2)
    sandbox = other.app[SANDBOX]
    before = [t.name for t in sandbox.registry.tenants]
    with pytest.raises(ConfigError, match="seed"):
        bundles.open_bundle(sandbox, path)
    assert [t.name for t in sandbox.registry.tenants] == before  # the tenant made for it went
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as file:
        file.truncate(bundles.MAX_BUNDLE_BYTES + 1)  # sparse: refused before it is read
    with pytest.raises(ConfigError, match="largest bundle"):
        bundles.open_bundle(sandbox, huge)
    with pytest.raises(ConfigError, match="not a regular file"):
        bundles.open_bundle(sandbox, tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):  # never opened: no hang
        bundles.open_bundle(sandbox, fifo)


@pytest.mark.parametrize("test", ["../../etc/passwd", "/abs/path.py::test[a/b]",
                                  "tests/x.py::test_" + "long" * 100, ".hidden", "", "::"])
def test_a_bundle_file_stays_in_its_folder(tmp_path, test):
    folder, outside = tmp_path / "bundles", tmp_path / "outside.json"
    outside.write_text("mine")
    name = bundles.file_name(test)
    assert "/" not in name and not name.startswith(".") and len(name) <= bundles.MAX_NAME + 5
    folder.mkdir()
    (folder / name).symlink_to(outside)  # a link planted where the bundle goes
    path = bundles.write_bundle(folder, test, b"{}")
    assert path.parent == folder and not path.is_symlink() and path.read_bytes() == b"{}"
    assert outside.read_text() == "mine"
    assert sorted(os.listdir(folder)) == [name]


def test_long_test_ids_that_share_a_start_get_files_of_their_own():
    first, second = ("t.py::test_" + "x" * 200 + suffix for suffix in ("a", "b"))
    assert bundles.file_name(first) != bundles.file_name(second)


def test_the_bundles_folder_setting():
    from pathlib import Path

    assert bundles.folder_setting(None, Path("/r")) == Path("/r/payroll-sandbox-bundles")
    assert bundles.folder_setting("out", Path("/r")) == Path("/r/out")
    assert bundles.folder_setting(" OFF ", Path("/r")) is None


async def test_the_bundle_operation_refuses_a_test_id_too_long(client):
    response = await client.get("/_sandbox/bundle", params={"test": "x" * 1025}, headers=ACME)
    assert response.status == 422
    assert (await response.json())["error"]["details"][0]["path"] == "$.test"

