"""Fidelity, round two (issue 20): one test per divergence it lists, each quoting its source.

Real HTTP to the real app on a manual clock; webhooks read on a real receiver
(tests/receiver.py). Sources: docs/spec/service-spec.md ("spec"),
docs/spec/real-service-facts.md ("facts"), docs/spec/real-api-surface.md
("surface"), and the issue's own words where it decides.
"""

from __future__ import annotations

import json

from calls import advance, call, error_of, run_until_idle
from conftest import ACME, FEDEX, HOOKS, WALMART

AMAZON = "6410a0000000000000000002"  # an SSO employer: its connector has true-auth
NETFLIX = "6410a0000000000000000060"  # a merchant: pay-link

PUBLIC = "/company/search"  # the one operation the surface opens to a public token
JSON_RE_DATE_TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"


async def token_of(client, identifier: str) -> str:
    return (await call(client, "POST", "/access-token",
                       json={"identifier": identifier}))["data"]["publicToken"]


def as_user(token: str) -> dict:
    return {"x-public-token": token}


async def linked(client, identifier: str, company: str = WALMART) -> dict:
    """A completed deposit task; the linked account it left, as GET /linked-accounts shows it."""
    await call(client, "POST", "/task/create", json={
        "identifier": identifier, "company": company, "product": "deposit"})
    await run_until_idle(client)
    [account] = [a for a in (await call(client, "GET", f"/linked-accounts/{identifier}"))["data"]
                 if a["companyId"] == company]
    return account


def bodies(receiver, event_type: str | None = None, **match) -> list[dict]:
    found = [json.loads(r.body) for r in receiver.received(HOOKS)]
    return [b for b in found if (event_type is None or b["eventType"] == event_type)
            and all(b.get(k) == v for k, v in match.items())]


async def login(client, token: str, status: int = 200, **body) -> dict:
    body = {"companyId": WALMART, "username": "test-good", "password": "any", **body}
    return await call(client, "POST", "/sdk/login", status=status, headers=as_user(token),
                      json=body)


async def session(client, token: str, status: int = 200, **config) -> dict:
    return await call(client, "POST", "/sdk/session", status=status, headers=as_user(token),
                      json={"config": {"publicToken": token, **config}})


# -- 1 ------------------------------------------------------------------------------------------

async def test_1_a_linked_account_shows_one_company_shape_everywhere(sandbox):
    """Issue 20, 1: "One shape for `company` everywhere a linked account is shown; the
    sandbox's extra fields may stay beside the published ones, never in place of them."
    (facts 8 publishes one record; surface: `company`: Company.)"""
    account = await linked(sandbox, "one-shape")
    [listed] = (await call(sandbox, "GET", "/linked-account/list/one-shape"))["data"]
    assert account["company"] == listed["company"]
    assert {"_id", "name", "status", "branding", "tags"} <= set(listed["company"])
    assert listed["company"]["_id"] == WALMART
    # Every published field of the list record is in the sandbox's record, the same.
    assert {k: account[k] for k in listed} == listed
    assert set(listed) == {"_id", "valid", "transactRequired", "company", "connector",
                           "lastSuccess"}  # and lastFailure, once the connection failed


# -- 2 ------------------------------------------------------------------------------------------

async def test_2_a_public_token_is_refused_on_every_server_call(sandbox):
    """Facts 1: "Server calls use `x-api-key` + `x-api-secret`; end-user calls use
    `x-public-token`." Surface: API key and secret are every operation's default; only
    `POST /company/search` also lists the public token."""
    account = await linked(sandbox, "keys-only")
    task = (await call(sandbox, "GET", "/_sandbox/tasks", params={"user": "keys-only"}))["data"][0]
    token = await token_of(sandbox, "keys-only")
    document = await (await sandbox.get("/openapi.json")).json()
    refused = 0
    for path, item in document["paths"].items():
        for method, op in item.items():
            if path.startswith(("/_sandbox", "/sdk", "/initialize", "/aggregator-api")) \
                    or any("publicToken" in scheme for scheme in op.get("security", [])):
                continue
            if not op.get("security"):
                continue  # no credentials at all (health, the API description, pages)
            concrete = (path.replace("{identifier}", "keys-only")
                        .replace("{taskId}", task["id"]).replace("{companyId}", WALMART)
                        .replace("{linkedAccount}", account["_id"]))
            for name in ("{statementId}", "{fileId}", "{id}", "{publicToken}"):
                concrete = concrete.replace(name, "x")
            response = await sandbox.request(method.upper(), concrete, headers=as_user(token),
                                             json={} if method in ("post", "put") else None)
            assert response.status == 401, (method, path, await response.text())
            error = (await response.json())["error"]
            assert error["code"] == "api-keys-required"
            assert "x-api-key" in error["message"] and "x-api-secret" in error["message"]
            refused += 1
    assert refused >= 20
    assert (await call(sandbox, "POST", PUBLIC, headers=as_user(token),
                       json={"query": "walmart"}))["data"]


# -- 3 ------------------------------------------------------------------------------------------

async def test_3_the_legacy_token_is_the_public_token(sandbox):
    """Facts 2: "`POST /access-token` {identifier, tokenLifetime?} returns
    `{"data":{"publicToken":…}}` (legacy also `token`)": the same token, usable wherever a
    public token is."""
    data = (await call(sandbox, "POST", "/access-token",
                       json={"identifier": "legacy"}))["data"]
    assert data["token"] == data["publicToken"]
    started = await session(sandbox, data["token"])
    assert started["data"]["user"]["identifier"] == "legacy"
    assert (await call(sandbox, "POST", PUBLIC, headers=as_user(data["token"]),
                       json={"query": "walmart"}))["data"]


# -- 4 ------------------------------------------------------------------------------------------

async def test_4_the_sdk_config_as_the_real_sdk_sends_it_signs_in(sandbox):
    """Spec (Client SDK configuration): `tasks` "Each has `operation`"; the real SDK also
    sends each task's `distribution`. Issue 20, 4: it "is accepted by `/sdk/session` and
    `/sdk/login`"."""
    token = await token_of(sandbox, "sdk-config")
    tasks = [{"operation": "deposit", "distribution": {"type": "fixed", "amount": 50},
              "onComplete": "continue", "onFail": "finish"}]
    started = await session(sandbox, token, tasks=tasks, scope="user-link",
                            deeplink={"step": "login-company", "companyId": WALMART})
    assert started["data"]["refusal"] is None
    created = (await login(sandbox, token, tasks=tasks))["data"]
    assert created["status"] == "queued"
    await run_until_idle(sandbox)
    task = (await call(sandbox, "GET", f"/task/{created['id']}"))["data"]
    assert task["status"] == "completed"
    assert task["distribution"] == {"type": "fixed", "amount": 50}


# -- 5 ------------------------------------------------------------------------------------------

async def test_5_metadata_of_the_sdk_config_reaches_every_task_event(sandbox, receiver):
    """Spec (Task): `metadata` is "Present if the customer's system supplied it when the
    Task was initialised." The hosted flow sends the configuration's `metadata` with the
    login; every event of every task it starts carries it."""
    token = await token_of(sandbox, "sdk-metadata")
    metadata = {"orderId": "A-17", "nested": {"n": 1}}
    created = (await login(sandbox, token, metadata=metadata,
                           tasks=[{"operation": "deposit"}, {"operation": "verify"}]))["data"]
    await run_until_idle(sandbox)
    task_ids = [t["id"] for t in created["tasks"]]
    events = [b for b in bodies(receiver) if b.get("task") in task_ids]
    assert {b["eventType"] for b in events} >= {"task-status-updated",
                                                 "task-authentication-status-updated"}
    assert {b["task"] for b in events} == set(task_ids)
    assert all(b["metadata"] == metadata for b in events), events


def test_5_the_hosted_flow_sends_the_configs_metadata():
    """The page's login body carries `config.metadata` (what the browser sends)."""
    from payroll_sandbox.static import static_text

    flow = static_text("flow-api.js")  # loginBody
    assert "if (config.metadata) { body.metadata = config.metadata; }" in flow


# -- 6 ------------------------------------------------------------------------------------------

async def test_6_test_distribution_not_supported_fails_in_the_default_flow(sandbox, receiver):
    """Facts 7: the sandbox username `test-distribution-not-supported`. Issue 20, 6: it
    "fails the way its name says in the default flow (not only after a percent split is
    picked on one deeplink screen)"; the sandbox fails the deposit with
    `product-not-supported` (README: Fidelity)."""
    token = await token_of(sandbox, "no-distribution")
    created = (await login(sandbox, token, username="test-distribution-not-supported"))["data"]
    await run_until_idle(sandbox)
    [final] = bodies(receiver, "task-status-updated", task=created["id"])
    assert final["data"]["status"] == "failed"
    assert final["data"]["reason"] == "product-not-supported"
    # A flow without a deposit has nothing to distribute: it goes through.
    created = (await login(sandbox, token, username="test-distribution-not-supported@test.com",
                           tasks=[{"operation": "verify"}]))["data"]
    await run_until_idle(sandbox)
    [final] = bodies(receiver, "task-status-updated", task=created["id"])
    assert final["data"]["status"] == "completed"


# -- 7 ------------------------------------------------------------------------------------------

async def test_7_no_event_without_a_change(sandbox):
    """Spec (maintenance-mode): "When: A company's maintenance status changed." Setting
    the same maintenance twice emits one event; so does every other repeat of a
    control-plane change (operational twice, disabled twice, an update that changes
    nothing, a disconnect of a disconnected account)."""
    async def count(event_type: str) -> int:
        return len((await call(sandbox, "GET", "/_sandbox/events",
                               params={"type": event_type, "limit": "1000"}))["data"])

    status = f"/_sandbox/companies/{FEDEX}/status"
    for _ in range(2):
        await call(sandbox, "POST", status, json={"status": "under-maintenance",
                                                  "products": ["deposit"]})
    assert await count("maintenance-mode") == 1
    await call(sandbox, "POST", status, json={"status": "under-maintenance",
                                              "products": ["deposit", "verify"]})
    assert await count("maintenance-mode") == 2  # other products: a change
    for _ in range(2):
        await call(sandbox, "POST", status, json={"status": "operational"})
    assert await count("maintenance-mode") == 3
    for _ in range(2):
        await call(sandbox, "POST", status, json={"status": "disabled"})
    assert await count("company-updated") == 1
    company = (await call(sandbox, "GET", f"/company/{FEDEX}"))["data"]
    await call(sandbox, "PATCH", f"/_sandbox/companies/{FEDEX}", json={"name": company["name"]})
    assert await count("company-updated") == 1
    account = await linked(sandbox, "twice")
    for _ in range(2):
        await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect")
    assert await count("linked-account-disconnected") == 1


# -- 8 ------------------------------------------------------------------------------------------

async def test_8_triggered_events_name_things_that_resolve(sandbox):
    """Spec (Pull refresh flow): "When a `task-status-updated` event shows status
    `completed`, fetch the data from the endpoints above." Issue 20, 8: triggered events
    "carry the user's real public token and ids that resolve"."""
    async def trigger(event_type: str) -> dict:
        return (await call(sandbox, "POST", "/_sandbox/events/trigger", status=201,
                           json={"eventType": event_type, "identifier": "triggered"}))["data"]

    event = await trigger("task-status-updated")
    body = event["body"]
    task = (await call(sandbox, "GET", f"/task/{body['task']}"))["data"]
    assert task["status"] == "completed" and task["taskWorkflow"] == body["taskWorkflow"]
    started = await session(sandbox, body["publicToken"])  # a real, live public token
    assert started["data"]["user"]["identifier"] == "triggered"

    event = await trigger("statements-added")
    data = event["body"]["data"]
    statements = (await call(sandbox, "GET", "/statements/triggered",
                             params={"linkedAccount": data["linkedAccount"]}))["data"]
    assert set(data["records"]) <= {s["_id"] for s in statements}
    for event_type, kind in (("income-updated", "income"), ("employment-updated", "employment"),
                             ("deposit-accounts-added", "deposit-accounts")):
        data = (await trigger(event_type))["body"]["data"]
        held = (await call(sandbox, "GET", f"/{kind}/triggered"))["data"]
        assert set(data["records"]) <= {r["_id"] for r in held}, event_type
    pii = (await trigger("pii-data-deleted"))["body"]
    assert (await call(sandbox, "GET", f"/task/{pii['task']}"))["data"]["id"] == pii["task"]


# -- 9 ------------------------------------------------------------------------------------------

async def test_9_an_unknown_body_field_is_ignored_and_named(sandbox, make_client):
    """Issue 20, 9: "a field the sandbox does not know is accepted and ignored, as
    production APIs do, and reported in an `x-sandbox-warning` header and the journal
    (`--strict-bodies` restores today's 422 for teams who want typos caught)"."""
    response = await sandbox.post("/access-token", headers=ACME,
                                  json={"identifier": "lenient", "idenitfier": "typo"})
    assert response.status == 200, await response.text()
    assert response.headers["x-sandbox-warning"] == "unknown field $.idenitfier ignored"
    response = await sandbox.get("/company/list", headers=ACME, params={"limt": "5"})
    assert response.status == 200
    assert response.headers["x-sandbox-warning"] == "unknown query parameter limt ignored"
    journal = {entry["path"]: entry
               for entry in (await call(sandbox, "GET", "/_sandbox/requests"))["data"]}
    assert journal["/company/list"]["warnings"] == ["unknown query parameter limt ignored"]
    assert journal["/access-token"]["warnings"] == ["unknown field $.idenitfier ignored"]
    # The control plane is the sandbox's own: a typo there is refused.
    error = await error_of(sandbox, "POST", "/_sandbox/clock/advance", 422,
                           json={"seconds": 1, "second": 2})
    assert error["details"][0]["path"] == "$.second"
    strict = await make_client(strict_bodies=True)
    error = await error_of(strict, "POST", "/access-token", 422,
                           json={"identifier": "strict", "idenitfier": "typo"})
    assert error["details"] == [{"location": "body", "path": "$.idenitfier",
                                 "message": "is not a known field"}]


# -- 10 -----------------------------------------------------------------------------------------

async def test_10_maintenance_stops_only_the_listed_products_in_the_api_and_the_flow(sandbox):
    """Spec (Company status): under-maintenance when "Maintenance enabled for listed
    products", and then "Users cannot start an authentication flow"; errors 2. The sandbox
    reads the state table: a product not listed may start, in the API and the hosted flow
    alike; a listed one is refused by both with `company-under-maintenance`."""
    await call(sandbox, "POST", f"/_sandbox/companies/{WALMART}/status",
               json={"status": "under-maintenance", "products": ["verify"]})
    token = await token_of(sandbox, "maintained")
    deeplink = {"step": "login-company", "companyId": WALMART}
    # deposit is not listed: both start it.
    assert (await session(sandbox, token, deeplink=deeplink,
                          tasks=[{"operation": "deposit"}]))["data"]["refusal"] is None
    await login(sandbox, token, tasks=[{"operation": "deposit"}])
    await call(sandbox, "POST", "/task/create", json={"identifier": "maintained",
                                                      "company": WALMART, "product": "deposit"})
    # verify is listed: both refuse it, with the same code.
    refusal = (await session(sandbox, token, deeplink=deeplink,
                             tasks=[{"operation": "verify"}]))["data"]["refusal"]
    assert refusal["code"] == "company-under-maintenance"
    error = (await login(sandbox, token, status=403, tasks=[{"operation": "verify"}]))["error"]
    assert error["code"] == "company-under-maintenance"
    error = await error_of(sandbox, "POST", "/task/create", 403, json={
        "identifier": "maintained", "company": WALMART, "product": "verify"})
    assert error["code"] == "company-under-maintenance"


# -- 11 -----------------------------------------------------------------------------------------

async def test_11_a_deeplink_to_a_disabled_company_ends_with_company_disabled(sandbox):
    """Spec (errors 3): "A deeplink with an empty or wrong company `_id` produces an
    invalid-company-id condition"; errors 2: a disabled company cannot start a flow. A
    disabled company's deeplink ends with the API's own reason."""
    await call(sandbox, "POST", f"/_sandbox/companies/{FEDEX}/status",
               json={"status": "disabled"})
    token = await token_of(sandbox, "disabled-deeplink")
    started = (await session(sandbox, token, deeplink={"step": "login-company",
                                                       "companyId": FEDEX}))["data"]
    assert started["refusal"]["code"] == "company-disabled"
    error = (await session(sandbox, token, status=404,
                           deeplink={"step": "login-company", "companyId": ""}))["error"]
    assert error["code"] == "invalid-company-id"


# -- 12 -----------------------------------------------------------------------------------------

async def test_12_processor_link_results_list_only_the_stages_that_ran(sandbox):
    """Spec (What the service does, 6): "Depending on the products enabled for the customer
    account, it runs employer classification, recurring-transaction detection, or both"."""
    tenant = (await call(sandbox, "POST", "/_sandbox/tenants", status=201, json={
        "name": "classify-only", "products": ["deposit", "employer-classification"]}))["data"]
    keys = {"x-api-key": tenant["apiKey"], "x-api-secret": tenant["apiSecret"]}
    minted = (await call(sandbox, "POST", "/_sandbox/aggregator/processor-token", status=201,
                         headers=keys, json={"identifier": "stages"}))["data"]
    await call(sandbox, "POST", "/aggregator/processor-links", status=202, headers=keys,
               json={"processorToken": minted["processorToken"]})
    await run_until_idle(sandbox, headers=keys)
    results = await call(sandbox, "GET", "/aggregator/employer-matches",
                         headers={**keys, "user-identifier": "stages"})
    [link] = results["links"]
    assert link["status"] == "completed"
    assert link["stages"] == ["employer-classification"]


# -- 13 -----------------------------------------------------------------------------------------

async def test_13_after_pii_deletion_no_synced_event_announces_missing_data(sandbox, receiver):
    """Spec (Privacy event): `pii-data-deleted` "means the user's personal data was deleted
    from the service". Issue 20, 13: "no `*-synced` event announces data that is not
    there": a refresh of such an account syncs and announces nothing until the user signs
    in again (README: Fidelity)."""
    account = await linked(sandbox, "forgotten")
    await call(sandbox, "POST", "/_sandbox/users/forgotten/delete-pii")
    before = len(bodies(receiver))
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/refresh")
    refresh = (await call(sandbox, "POST", "/task/create",
                          json={"linkedAccount": account["_id"]}))["data"]
    await advance(sandbox, 3 * 86_400)
    await run_until_idle(sandbox)
    after = bodies(receiver)[before:]
    assert not [b for b in after if b["eventType"].endswith("-synced")], after
    [final] = [b for b in after if b["eventType"] == "task-status-updated"
               and b["task"] == refresh["id"]]
    assert final["data"]["status"] == "completed"
    assert (await call(sandbox, "GET", "/statements/forgotten"))["data"] == []
    # Signing in again collects the data again, and announces it.
    await call(sandbox, "POST", "/task/create", json={
        "identifier": "forgotten", "company": WALMART, "product": "deposit"})
    await run_until_idle(sandbox)
    assert (await call(sandbox, "GET", "/statements/forgotten"))["data"]
    assert bodies(receiver, "statements-synced", user={"_id": account_user(receiver),
                                                        "identifier": "forgotten"})


def account_user(receiver) -> str:
    [first, *_] = [b for b in bodies(receiver) if b.get("user", {}).get("identifier") == "forgotten"]
    return first["user"]["_id"]


# -- 14 -----------------------------------------------------------------------------------------

async def test_14_pull_refresh_synced_events_carry_the_task_id(sandbox, receiver):
    """Docs (api.md, Pull): "when it completes, the synced events follow with its task
    id"."""
    account = await linked(sandbox, "pull")
    created = (await call(sandbox, "POST", "/task/create",
                          json={"linkedAccount": account["_id"]}))["data"]
    await run_until_idle(sandbox)
    synced = [b for b in bodies(receiver) if b["eventType"].endswith("-synced")
              and b["data"]["linkedAccount"] == account["_id"]]
    assert synced and all(b["data"]["task"] == created["id"] for b in synced)


async def test_14_date_times_have_one_form_and_days_are_plain_only_in_aggregator_data(sandbox):
    """Facts ("date forms"): date-times as `2020-06-30T12:00:00.000Z`. Every date-time the
    API answers has that form; plain dates appear only for calendar days of the
    aggregator's own data (its transactions' `date`, results' days), documented per field."""
    import re

    account = await linked(sandbox, "dates")
    token = (await call(sandbox, "POST", "/access-token", json={"identifier": "dates"}))["data"]
    found: list[tuple[str, str]] = []

    def walk(value, path):
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, f"{path}.{key}")
        elif isinstance(value, list):
            for inner in value:
                walk(inner, f"{path}[]")
        elif isinstance(value, str) and re.match(r"^\d{4}-\d{2}-\d{2}", value):
            found.append((path, value))

    walk(token, "access-token")
    walk(account, "linked-accounts")
    for kind in ("statements", "income", "employment", "identity", "timesheets"):
        walk((await call(sandbox, "GET", f"/{kind}/dates"))["data"], kind)
    walk((await call(sandbox, "GET", f"/task/{(await call(sandbox, 'GET', '/_sandbox/tasks', params={'user': 'dates'}))['data'][0]['id']}"))["data"], "task")
    assert len(found) > 10
    bad = [(p, v) for p, v in found if not re.match(JSON_RE_DATE_TIME, v)]
    assert not bad, bad


async def test_14_a_reconnect_goes_straight_through_and_updates_last_success(sandbox, receiver):
    """Spec (Client SDK configuration): `linkedAccount` "Opens the authentication flow
    directly for an existing linked account, to reconnect it. It often does not require
    re-entering credentials." The sandbox: an expired session (`timeout`) resumes without
    them; changed credentials need them again. Either way lastSuccess moves."""
    account = await linked(sandbox, "reconnect")
    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect",
               json={"reason": "timeout"})
    await advance(sandbox, 3600)
    token = await token_of(sandbox, "reconnect")
    started = (await session(sandbox, token, linkedAccount=account["_id"]))["data"]
    assert started["linkedAccount"]["credentialsRequired"] is False
    created = (await call(sandbox, "POST", "/sdk/login", headers=as_user(token), json={
        "companyId": WALMART, "linkedAccount": account["_id"]}))["data"]
    await run_until_idle(sandbox)
    [listed] = (await call(sandbox, "GET", "/linked-account/list/reconnect"))["data"]
    assert listed["valid"] is True
    assert listed["lastSuccess"] > account["lastSuccess"]
    assert listed["lastFailure"] is not None
    assert bodies(receiver, "linked-account-connected")[-1]["data"]["linkedAccount"] \
        == account["_id"]
    assert created["status"] == "queued"

    await call(sandbox, "POST", f"/_sandbox/linked-accounts/{account['_id']}/disconnect",
               json={"reason": "credentials-changed"})
    started = (await session(sandbox, token, linkedAccount=account["_id"]))["data"]
    assert started["linkedAccount"]["credentialsRequired"] is True
    error = await error_of(sandbox, "POST", "/sdk/login", 422, headers=as_user(token), json={
        "companyId": WALMART, "linkedAccount": account["_id"]})
    assert {d["path"] for d in error["details"]} == {"$.username", "$.password"}


async def test_14_authentication_method_holds_only_the_task_enum(sandbox, receiver):
    """Spec (Task): `authenticationMethod` enum "For pay-link Tasks: `true-auth`,
    `smart-auth`"; (Task events) every task event carries it, so a user-link task's carry
    null (issue 33, point 12)."""
    for company, product in ((WALMART, "deposit"), (AMAZON, "deposit"), (NETFLIX, "switch")):
        await call(sandbox, "POST", "/task/create", json={
            "identifier": f"auth-{company}", "company": company, "product": product})
    await run_until_idle(sandbox)
    methods: dict[str, set] = {}
    for body in bodies(receiver):
        if "task" in body and "taskWorkflow" in body:  # a task event
            methods.setdefault(body["product"], set()).add(body["authenticationMethod"])
    assert methods["deposit"] == {None}
    assert methods["switch"] and methods["switch"] <= {"true-auth", "smart-auth"}
