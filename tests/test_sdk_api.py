"""The client SDK's HTTP side through real HTTP, no browser (routes/sdk.py).

The script and the hosted page are public; the flow's own calls (/sdk/session,
/sdk/login, the deposit form) authenticate with the user's public token (DESIGN.md,
Client SDK; spec: Client SDK configuration, API and SDK errors).
"""

from __future__ import annotations

import base64
import json
import re

import pytest
from calls import advance, call, error_of, run_until_idle
from conftest import ACME, FEDEX, SEARS, WALMART

from payroll_sandbox.app import build_registry, create_app
from payroll_sandbox.settings import Settings

FLAKY_FREIGHT = "6410a0000000000000000012"  # defaultScenario: connection-error
BOOTSTRAP = re.compile(r'<script id="bootstrap" type="application/json">(.*?)</script>', re.DOTALL)


def encode(config) -> str:
    """What transact.js puts in the path: URL-safe base64 of the JSON, unpadded."""
    raw = json.dumps(config).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def token_of(client, identifier: str) -> str:
    body = await call(client, "POST", "/access-token", json={"identifier": identifier})
    return body["data"]["publicToken"]


def as_user(token: str) -> dict:
    return {"x-public-token": token}


async def bootstrap_of(response) -> dict:
    page = await response.text()
    match = BOOTSTRAP.search(page)
    assert match, page
    return json.loads(match.group(1))


async def session(client, token: str, config: dict, status: int = 200) -> dict:
    return await call(client, "POST", "/sdk/session", status=status, headers=as_user(token),
                      json={"config": config})


async def login(client, token: str, status: int = 200, **body) -> dict:
    body = {"companyId": WALMART, "username": "test-good", "password": "secret", **body}
    return await call(client, "POST", "/sdk/login", status=status, headers=as_user(token), json=body)


async def get_task(client, task_id: str) -> dict:
    return (await call(client, "GET", f"/task/{task_id}"))["data"]


async def linked_account_of(client, identifier: str) -> dict:
    """A linked account left by a completed deposit task (made with the API keys)."""
    await call(client, "POST", "/task/create",
               json={"identifier": identifier, "company": WALMART, "product": "deposit"})
    await run_until_idle(client)
    accounts = (await call(client, "GET", "/linked-accounts",
                           params={"identifier": identifier}))["data"]
    assert len(accounts) == 1, accounts
    return accounts[0]


# -- the script and the page ------------------------------------------------------------------

async def test_sdk_transact_js_is_public_javascript_with_the_prefix(client):
    response = await client.get("/sdk/transact.js")
    assert response.status == 200
    assert response.content_type == "application/javascript"
    script = await response.text()
    assert 'var PREFIX = "example-transact";' in script
    assert "__PREFIX__" not in script
    assert 'window["Transact"]' in script


async def test_sdk_initialize_page_carries_the_config_in_bootstrap(client):
    config = {"publicToken": "public-sandbox-x", "scope": "user-link",
              "deeplink": {"step": "login-company", "companyId": WALMART}}
    response = await client.get(f"/initialize/{encode(config)}")
    assert response.status == 200
    assert response.content_type == "text/html"
    boot = await bootstrap_of(response)
    assert boot["prefix"] == "example-transact"
    assert boot["config"] == config
    assert set(boot["messages"]) == {"reasons", "errors", "fallback"}


async def test_sdk_initialize_accepts_standard_padded_base64(client):
    config = {"publicToken": "public-sandbox-y", "tasks": [{"operation": "deposit"}]}
    encoded = base64.b64encode(json.dumps(config).encode()).decode()
    response = await client.get(f"/initialize/{encoded.replace('/', '_')}")
    assert response.status == 200
    assert (await bootstrap_of(response))["config"] == config


async def test_sdk_initialize_reads_the_standard_alphabet_with_a_slash_as_btoa_writes_it(client):
    """Issue 33, point 1: a `?` in the JSON at one byte offset in three, or a non-ASCII
    character, makes btoa write `/`: the route takes the rest of the path."""
    for pad in range(3):
        config = {"tasks": [{"product": "deposit"}], "customer": {"name": "Jos\u00e9"},
                  "metadata": {"returnUrl": "https://app.example/r?x=1", "pad": "p" * pad}}
        encoded = base64.b64encode(json.dumps(config).encode()).decode()
        if "/" in encoded:
            break
    assert "/" in encoded
    response = await client.get(f"/initialize/{encoded}")
    assert response.status == 200
    boot = await bootstrap_of(response)
    assert boot["config"]["customer"] == {"name": "Jos\u00e9"}
    assert boot["config"]["tasks"] == [{"operation": "deposit"}]  # the SDK's `product`, named once


@pytest.mark.parametrize("config, tasks", [
    ({"tasks": [{"product": "deposit", "onComplete": "finish"}, {"operation": "verify"}]},
     [{"operation": "deposit", "onComplete": "finish"}, {"operation": "verify"}]),
    ({"product": "deposit", "distribution": {"type": "fixed", "amount": 50}},
     [{"operation": "deposit", "distribution": {"type": "fixed", "amount": 50}}]),
    ({"product": "deposit", "additionalProduct": "verify"},
     [{"operation": "deposit"}, {"operation": "verify"}]),
    ({"tasks": [{"product": "deposit"}], "additionalProduct": "verify"},
     [{"operation": "deposit"}, {"operation": "verify"}]),
])
async def test_sdk_initialize_makes_the_published_task_forms_one(client, config, tasks):
    """Point 5: tasks[].product, the deprecated top-level product and distribution, and
    additionalProduct become the flow's tasks."""
    boot = await bootstrap_of(await client.get(f"/initialize/{encode(config)}"))
    assert boot["config"]["tasks"] == tasks
    assert not {"product", "distribution", "additionalProduct"} & set(boot["config"])


async def test_sdk_session_needs_no_token_in_the_config(client):
    """Point 2: the token comes through the handshake (the x-public-token of the page's
    calls); a config without one starts the flow."""
    token = await token_of(client, "sdk-no-config-token")
    body = await call(client, "POST", "/sdk/session", headers=as_user(token),
                      json={"config": {"tasks": [{"product": "deposit"}], "language": "es"}})
    assert body["data"]["user"] == {"identifier": "sdk-no-config-token"}


async def test_sdk_workflow_lists_every_task_and_says_when_one_signs_in_slowly(client):
    """Points 7 and 8: the flow follows its workflow; a sign-in that runs past 30 virtual
    seconds is `highLatency` (scenario high-latency); another user's workflow is 404."""
    token = await token_of(client, "sdk-workflow")
    created = (await call(client, "POST", "/sdk/login", headers=as_user(token), json={
        "companyId": WALMART, "username": "test-high-latency", "password": "x",
        "tasks": [{"product": "deposit"}, {"operation": "verify"}]}))["data"]
    path = f"/sdk/workflow/{created['taskWorkflow']}"
    workflow = (await call(client, "GET", path, headers=as_user(token)))["data"]
    assert [t["id"] for t in workflow["tasks"]] == [t["id"] for t in created["tasks"]]
    assert [t["highLatency"] for t in workflow["tasks"]] == [False, False]
    await advance(client, 20)
    workflow = (await call(client, "GET", path, headers=as_user(token)))["data"]
    assert [t["highLatency"] for t in workflow["tasks"]] == [False, False]
    await advance(client, 15)
    workflow = (await call(client, "GET", path, headers=as_user(token)))["data"]
    assert [t["highLatency"] for t in workflow["tasks"]] == [True, True]
    other = await token_of(client, "sdk-workflow-other")
    error = await error_of(client, "GET", path, 404, headers=as_user(other))
    assert error["code"] == "task-not-found"


async def test_sdk_transact_js_defines_the_profiles_global(aiohttp_client, clock):
    """Point 3: the global is the profile's sdkGlobal, the prefix its sdkPrefix."""
    settings = Settings(port=0, clock="manual", sdk_global="Atomic", sdk_prefix="atomic-transact")
    client = await aiohttp_client(create_app(settings, registry=build_registry(settings, clock=clock)))
    script = await (await client.get("/sdk/transact.js")).text()
    assert 'window["Atomic"] = { transact: transact, Product: Product' in script
    assert 'var PREFIX = "atomic-transact";' in script
    assert "__GLOBAL__" not in script


async def test_sdk_initialize_escapes_script_end_in_config_values(client):
    evil = "</script><script>window.pwned=1</script>"
    config = {"publicToken": evil}
    response = await client.get(f"/initialize/{encode(config)}")
    assert response.status == 200
    page = await response.text()
    assert evil not in page
    assert "window.pwned" in page  # the value is there, only escaped
    match = BOOTSTRAP.search(page)
    assert "<" not in match.group(1)
    assert json.loads(match.group(1))["config"] == config
    # The page has exactly its two scripts: the bootstrap and flow.js.
    assert page.count("<script") == 2


@pytest.mark.parametrize("encoded", [
    "%%%not-base64%%%",
    encode(["an", "array"]),
    encode("a string"),
    base64.urlsafe_b64encode(b"{not json").decode().rstrip("="),
])
async def test_sdk_initialize_with_a_bad_config_is_400_invalid_config(client, encoded):
    response = await client.get(f"/initialize/{encoded}")
    assert response.status == 400
    assert response.content_type == "text/html"
    boot = await bootstrap_of(response)
    assert "config" not in boot
    assert boot["error"]["code"] == "invalid-config"
    assert boot["error"]["message"]


# -- POST /sdk/session ------------------------------------------------------------------------

async def test_sdk_session_with_another_token_in_config_is_401_public_token_mismatch(client):
    mine, theirs = await token_of(client, "sdk-user-1"), await token_of(client, "sdk-user-2")
    error = (await session(client, mine, {"publicToken": theirs}, status=401))["error"]
    assert error["code"] == "public-token-mismatch"


async def test_sdk_session_with_api_keys_is_401_public_token_required(client):
    token = await token_of(client, "sdk-user-1")
    error = await error_of(client, "POST", "/sdk/session", 401, headers=ACME,
                           json={"config": {"publicToken": token}})
    assert error["code"] == "public-token-required"


async def test_sdk_session_with_an_unknown_token_is_401(client):
    error = await error_of(client, "POST", "/sdk/session", 401, headers=as_user("nope"),
                           json={"config": {"publicToken": "nope"}})
    assert error["code"] == "invalid-public-token"


async def test_sdk_session_without_deeplink_starts_at_search(client):
    token = await token_of(client, "sdk-user-1")
    data = (await session(client, token, {"publicToken": token}))["data"]
    assert data == {"step": "search-company", "user": {"identifier": "sdk-user-1"},
                    "company": None, "refusal": None, "linkedAccount": None}


@pytest.mark.parametrize("deeplink", [
    {"step": "login-company", "companyId": ""},
    {"step": "login-company"},
    {"step": "login-company", "companyId": "6410a00000000000000fffff"},
    {"step": "login-company", "companyId": "walmart"},
], ids=["empty", "missing", "unknown", "name-not-id"])
async def test_sdk_session_deeplink_with_a_bad_company_id_is_404_invalid_company_id(client, deeplink):
    token = await token_of(client, "sdk-user-1")
    error = (await session(client, token, {"publicToken": token, "deeplink": deeplink},
                           status=404))["error"]
    assert error["code"] == "invalid-company-id"
    assert [d["path"] for d in error["details"]] == ["$.deeplink.companyId"]


async def test_sdk_session_deeplink_login_company_returns_the_step_and_full_company(client):
    token = await token_of(client, "sdk-user-1")
    config = {"publicToken": token, "deeplink": {"step": "login-company", "companyId": WALMART}}
    data = (await session(client, token, config))["data"]
    assert data["step"] == "login-company"
    assert data["linkedAccount"] is None
    details = (await call(client, "GET", f"/company/{WALMART}"))["data"]
    assert data["company"] == details
    assert data["company"]["name"] == "Walmart"
    assert "capabilities" in data["company"]["connector"]


async def test_sdk_session_returns_an_under_maintenance_company_with_its_refusal(client):
    token = await token_of(client, "sdk-user-1")
    config = {"publicToken": token, "deeplink": {"step": "login-company", "companyId": FEDEX}}
    data = (await session(client, token, config))["data"]
    assert data["company"]["_id"] == FEDEX
    assert data["company"]["status"] == "under-maintenance"
    assert data["refusal"]["code"] == "company-under-maintenance"


async def test_sdk_session_linked_account_returns_the_account_and_its_company(client):
    account = await linked_account_of(client, "sdk-owner")
    token = await token_of(client, "sdk-owner")
    data = (await session(client, token, {"publicToken": token,
                                          "linkedAccount": account["_id"]}))["data"]
    assert data["linkedAccount"]["_id"] == account["_id"]
    assert data["company"]["_id"] == WALMART


async def test_sdk_session_linked_account_of_another_user_is_401(client):
    account = await linked_account_of(client, "sdk-owner")
    token = await token_of(client, "sdk-intruder")
    error = (await session(client, token, {"publicToken": token, "linkedAccount": account["_id"]},
                           status=401))["error"]
    assert error["code"] == "linked-account-not-yours"


# -- POST /sdk/login: the sandbox usernames pick the scenario ------------------------------------

@pytest.mark.parametrize(("username", "scenario"), [
    ("test-good", "happy-path"),
    ("test-good@test.com", "happy-path"),
    ("test-failure", "unknown-failure"),
    ("test-distribution-not-supported", "distribution-not-supported"),  # any deposit
    ("test-auth-expired", "auth-expired"),
    ("test-bad-credentials", "bad-credentials"),
    ("jane.doe@example.com", "happy-path"),
    ("test-no-such-scenario", "happy-path"),
])
async def test_sdk_login_username_selects_the_scenario(client, username, scenario):
    token = await token_of(client, "sdk-user-1")
    data = (await login(client, token, username=username))["data"]
    assert data["tasks"][0]["scenario"] == scenario
    task = await get_task(client, data["id"])
    assert task["scenario"] == scenario
    assert task["status"] == "queued"
    assert task["company"] == WALMART


async def test_sdk_login_task_belongs_to_the_token_user_and_runs(client):
    token = await token_of(client, "sdk-user-1")
    data = (await login(client, token))["data"]
    assert data["taskWorkflow"]
    await run_until_idle(client)
    task = await get_task(client, data["id"])
    assert task["user"]["identifier"] == "sdk-user-1"
    assert task["status"] == "completed"
    assert task["product"] == "deposit"


async def test_sdk_login_user_binding_beats_the_username(client):
    await call(client, "PUT", "/_sandbox/users/sdk-bound/scenario", json={"scenario": "connection-error"})
    token = await token_of(client, "sdk-bound")
    data = (await login(client, token, username="test-good"))["data"]
    assert (await get_task(client, data["id"]))["scenario"] == "connection-error"


async def test_sdk_login_username_beats_the_company_default(client):
    token = await token_of(client, "sdk-user-1")
    data = (await login(client, token, companyId=FLAKY_FREIGHT, username="test-good"))["data"]
    assert (await get_task(client, data["id"]))["scenario"] == "happy-path"


async def test_sdk_login_plain_username_falls_back_to_the_company_default(client):
    token = await token_of(client, "sdk-user-1")
    data = (await login(client, token, companyId=FLAKY_FREIGHT, username="jane"))["data"]
    assert (await get_task(client, data["id"]))["scenario"] == "connection-error"


async def test_sdk_login_at_an_under_maintenance_company_is_403(client):
    token = await token_of(client, "sdk-user-1")
    error = (await login(client, token, status=403, companyId=FEDEX))["error"]
    assert error["code"] == "company-under-maintenance"
    tasks = (await call(client, "GET", "/_sandbox/tasks", params={"user": "sdk-user-1"}))["data"]
    assert tasks == []


async def test_sdk_login_at_a_disabled_company_is_403(client):
    token = await token_of(client, "sdk-user-1")
    error = (await login(client, token, status=403, companyId=SEARS))["error"]
    assert error["code"] == "company-disabled"


async def test_sdk_login_with_an_empty_password_is_422(client):
    token = await token_of(client, "sdk-user-1")
    error = (await login(client, token, status=422, password=""))["error"]
    assert "$.password" in [d["path"] for d in error["details"]]


async def test_sdk_login_at_an_unknown_company_is_404_invalid_company_id(client):
    token = await token_of(client, "sdk-user-1")
    error = (await login(client, token, status=404, companyId="6410a00000000000000fffff"))["error"]
    assert error["code"] == "invalid-company-id"


async def test_sdk_login_with_api_keys_is_401_public_token_required(client):
    error = await error_of(client, "POST", "/sdk/login", 401, headers=ACME,
                           json={"companyId": WALMART, "username": "test-good", "password": "x"})
    assert error["code"] == "public-token-required"


# -- GET /sdk/deposit-form.pdf ----------------------------------------------------------------

async def test_sdk_deposit_form_is_a_pdf_naming_the_employer(client):
    token = await token_of(client, "sdk-user-1")
    response = await client.get("/sdk/deposit-form.pdf",
                                params={"companyId": WALMART, "publicToken": token})
    assert response.status == 200, await response.text()
    assert response.content_type == "application/pdf"
    body = await response.read()
    assert body.startswith(b"%PDF-")
    assert b"Employer: Walmart" in body
    assert b"Employee: sdk-user-1" in body
    assert body.rstrip().endswith(b"%%EOF")


async def test_sdk_deposit_form_with_a_bad_token_is_401(client):
    response = await client.get("/sdk/deposit-form.pdf",
                                params={"companyId": WALMART, "publicToken": "nope"})
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "invalid-public-token"


async def test_sdk_deposit_form_without_a_token_is_401(client):
    response = await client.get("/sdk/deposit-form.pdf", params={"companyId": WALMART})
    assert response.status == 401
