"""The real service's API surface (docs/spec/real-api-surface.md), operation by operation.

The file's tables are the expectation, read here as they are written: for every row (method,
path, auth, request, response), the operation answers at its real path (not 404) under its
published auth (a public token refused with 401 where the auth is "key"), and the answer has
the published fields with their JSON types and enum values (the shared objects Company, Task
and Success as the file's Conventions define them). The sandbox answers in its one
`{"data": ...}` envelope (the file's envelope note), so a field the file shows bare is looked
for inside `data`.

Then the behaviour behind the operations the sandbox added for them: revoking a token,
payrollDataAvailable, task files and their signed URLs, prescreen's rule, workflows with
onComplete/onFail and distributions, users' tasks, payment methods and the end of
monitoring, webhook endpoints with ids and signing secrets, and pay-link accounts and
actions. Real app, real HTTP, manual clock.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from calls import advance, call, error_of, run_until_idle
from conftest import ACME, FEDEX, GLOBEX, HOOKS, REPO, WALMART

SURFACE = REPO / "docs" / "spec" / "real-api-surface.md"  # .ci/spec-in-step keeps it in step
NETFLIX = "6410a0000000000000000060"   # merchant: switch and present
AMAZON_PRIME = "6410a0000000000000000069"  # merchant-card: switch only
USER = "surface-user"
VISA = {"type": "card", "_id": "card-4242", "title": "Visa 4242", "lastFour": "4242"}
CLOSED = "http://127.0.0.1:9/hook"  # a URL the outbound policy allows; nothing listens there


# -- reading the file -----------------------------------------------------------------------

@dataclass(frozen=True)
class Field:
    path: str              # as written: `data.task.status`, `accounts[].company.name`, `url`
    kind: str | None       # string, integer, boolean, number, date-time, uri, string[], a shape
    enum: tuple[str, ...] = ()
    value: str | None = None  # `data.status` = queued


@dataclass(frozen=True)
class Row:
    section: str
    method: str
    path: str
    auth: str
    request: str
    response: str

    @property
    def id(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def token_refused(self) -> bool:
        """Published auth "key": a public token gets 401."""
        return self.auth == "key"

    @property
    def token_accepted(self) -> bool:
        return self.auth == "either" or "x-public-token" in self.auth


def _cells(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def surface_rows() -> list[Row]:
    """Every operation row of the file's tables (its "Simulator today" table aside), once."""
    rows: dict[str, Row] = {}
    section = ""
    for line in SURFACE.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        if section.startswith(("Simulator today", "Conventions")) or not line.startswith("|"):
            continue
        cells = _cells(line)
        if len(cells) < 5 or cells[0] not in ("GET", "POST", "PUT", "DELETE", "PATCH"):
            continue
        path = cells[1].split(" ")[0]  # "/task/prescreen (beta)"
        row = Row(section, cells[0], path, cells[2], cells[3], cells[4])
        rows.setdefault(row.id, row)  # the Linked accounts table repeats a Tasks row
    return list(rows.values())


_FIELD = re.compile(
    r"`(?P<path>[A-Za-z_][\w.\[\]]*)`"
    r"(?:\s*:\s*(?:enum\s+(?P<enum1>[\w-]+(?:\|[\w-]+)+)|(?P<kind>[\w-]+(?:\[\])?))"
    r"|\s+enum\s+(?P<enum2>[\w-]+(?:\|[\w-]+)+)"
    r"|\s*=\s*(?P<value>[\w-]+))?")


def fields_in(text: str) -> list[Field]:
    found = []
    text = text.replace("\\|", "|")
    for match in _FIELD.finditer(text):
        if text[match.end():].startswith(" not echoed"):  # "`secretId` not echoed"
            continue
        enum = match["enum1"] or match["enum2"]
        found.append(Field(match["path"], "enum" if enum else match["kind"],
                           tuple(enum.split("|")) if enum else (), match["value"]))
    return found


def shapes() -> dict[str, list[Field]]:
    """The Conventions' shared objects: `- **Company**: `_id`: string, ...`."""
    found, bullets = {}, []
    for line in SURFACE.read_text().splitlines():  # a bullet and the lines continuing it
        if re.match(r"\s*- ", line) or not bullets or not line.startswith("    "):
            bullets.append(line)
        else:
            bullets[-1] += " " + line.strip()
    for bullet in bullets:
        match = re.match(r"\s*- \*\*(\w+)\*\*: (.*)", bullet)
        if match:
            found[match[1]] = fields_in(match[2].split(". ")[0])
    return found


ROWS = surface_rows()
SHAPES = shapes()


def test_the_file_is_read_whole():
    """Guards the reading: the file's operations, each table."""
    assert SURFACE.exists(), f"{SURFACE} is missing"
    assert len(ROWS) >= 30
    assert {"Company", "Task", "Success"} <= set(SHAPES)
    assert [f.path for f in SHAPES["Task"]] == ["_id", "status", "product", "authentication",
                                                "company", "payrollDataAvailable", "createdAt"]
    status = next(r for r in ROWS if r.id == "GET /task/{taskId}/status")
    assert Field("data.task.status", "enum", ("queued", "processing", "completed", "failed")) \
        in fields_in(status.response)


# -- checking an answer against a row ---------------------------------------------------------

def _is_date_time(value: Any) -> bool:
    if not isinstance(value, str) or "T" not in value:
        return False
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None
    except ValueError:
        return False


KINDS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "date-time": _is_date_time,
    "uri": lambda v: isinstance(v, str) and re.match(r"^https?://[^\s/]+", v) is not None,
    "string[]": lambda v: isinstance(v, list) and all(isinstance(i, str) for i in v),
}


def _values(document: Any, path: str) -> list[tuple[str, Any]]:
    """Every value at `path` (`a.b[].c`: each item of `b`), with where it was found; a
    missing key is reported as such."""
    found = [("$", document)]
    for part in path.split("."):
        many = part.endswith("[]")
        name = part[:-2] if many else part
        step = []
        for where, value in found:
            if not isinstance(value, dict) or name not in value:
                raise AssertionError(f"{where} has no `{name}` (looking for `{path}`): {value!r:.300}")
            inner = value[name]
            if many:
                assert isinstance(inner, list), f"{where}.{name} is not an array"
                assert inner, f"{where}.{name} is empty: nothing to check `{path}` against"
                step += [(f"{where}.{name}[{n}]", item) for n, item in enumerate(inner)]
            else:
                step.append((f"{where}.{name}", inner))
        found = step
    return found


# Where the spec outranks this single-source table: the Task's `authentication` (the spec's
# authenticationMethod) has values "For pay-link Tasks" only, and is null on a user-link one.
SPEC_NULLS = {"authentication"}


def check_fields(document: Any, fields: list[Field], where: str = "$") -> None:
    for field in fields:
        for at, value in _values(document, field.path):
            at = where + at[1:]
            if field.value is not None:
                assert value == field.value, f"{at} = {value!r}, published {field.value!r}"
            elif field.kind == "enum":
                assert value in field.enum, f"{at} = {value!r}, published one of {field.enum}"
            elif field.kind in SHAPES:
                check_fields(value, SHAPES[field.kind], at)
            elif value is None and field.path in SPEC_NULLS:
                continue
            elif field.kind is not None and field.kind in KINDS:
                assert KINDS[field.kind](value), f"{at} = {value!r:.200} is not a {field.kind}"


def check_answer(row: Row, body: dict) -> None:
    """The answer has the row's published fields. `data.x` paths start at the body; other
    paths in `data` (the sandbox's envelope: the file's envelope note)."""
    assert "data" in body, body
    data = body["data"]
    text = row.response.split("→", 1)[-1].strip()
    head = re.match(r"(\w+)(\[\])?", text)
    if head and head[1] in SHAPES:  # "Task", "Company[]", "Success (...)"
        items = data if head[2] else [data]
        assert isinstance(items, list) and items, f"{row.id}: no {head[1]} in {data!r:.300}"
        for n, item in enumerate(items):
            check_fields(item, SHAPES[head[1]], f"$.data[{n}]" if head[2] else "$.data")
        return
    fields = fields_in(text)
    if "same fields" in text:  # "one secret (same fields)": the fields of the list above
        listing = next(r for r in ROWS if r.section == row.section and r.method == "GET")
        fields = fields_in(listing.response)
    if row.section.startswith("Data") or text.startswith(("array", "records")):
        assert isinstance(data, list), f"{row.id}: not an array: {data!r:.300}"
        assert data or not fields, f"{row.id}: an empty array, nothing to check the fields against"
        for n, item in enumerate(data):
            check_fields(item, [f for f in fields if not f.path.startswith("data.")],
                         f"$.data[{n}]")
        return
    for field in fields:
        if field.path.startswith("data."):
            check_fields(body, [field])
        elif "bare" in text:  # generate-url: the old docs' bare `{url}` too
            check_fields(body, [field])
            check_fields(data, [field], "$.data")
        else:
            check_fields(data, [field], "$.data")


def at_fault(error: dict) -> list[str]:
    """The JSON paths an error names; a missing required field (named at its object, as the
    validator says it) as the field's own path."""
    paths = []
    for detail in error["details"]:
        missing = re.match(r"'(\w+)' is a required property", detail["message"])
        paths.append(f"{detail['path']}.{missing[1]}" if missing else detail["path"])
    return paths


# -- the world the operations act on -----------------------------------------------------------

async def token_of(client, identifier: str = USER) -> str:
    return (await call(client, "POST", "/access-token",
                       json={"identifier": identifier}))["data"]["publicToken"]


async def create(client, **body) -> dict:
    return (await call(client, "POST", "/task/create", json={"identifier": USER, **body}))["data"]


@dataclass
class World:
    token: str
    completed: str   # a completed deposit task at Walmart (it left a linked account)
    failed: str      # a failed verify task
    pay_link: str    # a completed switch task at Netflix
    linked_account: str
    endpoint: str
    secret: str
    spare_secret: str  # one no endpoint uses


async def make_world(client) -> World:
    token = await token_of(client)
    completed = (await create(client, company=WALMART, product="deposit"))["id"]
    failed = (await create(client, company=WALMART, product="verify",
                           scenario="unknown-failure"))["id"]
    pay_link = (await create(client, company=NETFLIX, product="switch", paymentMethod=VISA))["id"]
    await run_until_idle(client)
    [account] = (await call(client, "GET", f"/linked-accounts/{USER}"))["data"]
    # A connection that failed once and came back: the record then holds `lastFailure`
    # (absent while it never failed).
    for action in ("disconnect", "reconnect"):
        await call(client, "POST", f"/_sandbox/linked-accounts/{account['_id']}/{action}")
    secret = (await call(client, "POST", "/secrets", json={"name": "main"}))["data"]["_id"]
    spare = (await call(client, "POST", "/secrets", json={"name": "spare"}))["data"]["_id"]
    endpoint = (await call(client, "POST", "/webhooks/endpoints", json={
        "url": CLOSED, "eventTypes": ["company-deleted"], "secretId": secret}))["data"]["_id"]
    return World(token, completed, failed, pay_link, account["_id"], endpoint, secret, spare)


def request_of(row: Row, world: World) -> tuple[str, dict | None]:
    """The row's path with the world's ids, its query where the row names one, its body."""
    params = {"taskId": world.failed if row.path.endswith("/status") else world.completed,
              "fileId": "direct-deposit-form", "identifier": USER, "publicToken": world.token,
              "companyId": NETFLIX if row.path.startswith("/pay-link") else WALMART,
              "id": world.spare_secret if row.path.startswith("/secrets") else world.endpoint}
    path = re.sub(r"\{(\w+)\}", lambda m: params[m[1]], row.path)
    query = {"/company/list": "?product=deposit&scope=user-link&limit=100&skip=0",
             "/statements/{identifier}": "?limit=10",
             "/user/{identifier}/tasks": "?status=completed&payrollDataAvailable=true"}
    path += query.get(row.path, "")
    bodies = {
        "/access-token": {"identifier": USER, "tokenLifetime": 86400},
        "/company/search": {"query": "walmart", "product": "deposit", "scopes": ["user-link"]},
        "/task/prescreen": {"company": {"name": "Walmart", "id": WALMART}, "product": "deposit"},
        "/task-workflow/from-linked-account": {
            "linkedAccount": world.linked_account,
            "tasks": [{"operation": "verify", "onComplete": "continue", "onFail": "finish",
                       "distribution": {"type": "total"}}]},
        "/task/create": {"product": "deposit", "linkedAccount": world.linked_account,
                         "distribution": {"type": "percent", "amount": 50}},
        "/user": {"identifier": USER, "data": {
            "bankAccounts": [{"accountNumber": "000123456789", "routingNumber": "021000021",
                              "accountType": "checking"}],
            "cards": [{"brand": "Visa", "lastFour": "4242"}]}},
        "/webhooks/endpoints": {"url": CLOSED, "eventTypes": ["task-status-updated"]},
        "/webhooks/endpoints/{id}": {"url": CLOSED, "eventTypes": ["task-status-updated"]},
        "/secrets": {"name": "another"},
    }
    body = bodies.get(row.path) if row.method in ("POST", "PUT") else None
    return path, body


def headers_of(row: Row, world: World) -> dict:
    if row.path == "/pay-link/accounts":  # the vendor's client code: the user's token, v2
        return {"x-public-token": world.token, "x-api-version": "v2"}
    return ACME


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
async def test_the_operation_answers_at_its_path_with_its_published_fields(client, row):
    world = await make_world(client)
    path, body = request_of(row, world)
    response = await client.request(row.method, path, json=body, headers=headers_of(row, world))
    answer = await response.json()
    assert response.status == 200, (row.id, response.status, answer)
    check_answer(row, answer)


@pytest.mark.parametrize("row", [r for r in ROWS if r.token_refused or r.token_accepted],
                         ids=[r.id for r in ROWS if r.token_refused or r.token_accepted])
async def test_the_operation_takes_the_published_credentials(client, row):
    """"key": a public token is refused (401 api-keys-required); "either" or the public
    token: the user's token is accepted."""
    world = await make_world(client)
    path, body = request_of(row, world)
    response = await client.request(row.method, path, json=body,
                                    headers={"x-public-token": world.token})
    answer = await response.json()
    if row.token_refused:
        assert response.status == 401, (row.id, response.status, answer)
        assert answer["error"]["code"] == "api-keys-required"
    else:
        assert response.status == 200, (row.id, response.status, answer)


# -- tokens -------------------------------------------------------------------------------------

async def test_a_revoked_token_stops_working_at_once_and_another_token_of_the_user_keeps_working(
        client):
    token, other = await token_of(client), await token_of(client)
    search = {"query": "walmart"}
    await call(client, "POST", "/company/search", json=search, headers={"x-public-token": token})
    answer = await call(client, "PUT", f"/access-token/{token}/revoke")
    assert answer == {"data": {"success": True, "result": {"success": True}}}
    error = await error_of(client, "POST", "/company/search", 401, json=search,
                           headers={"x-public-token": token})
    assert error["code"] == "invalid-public-token"
    await call(client, "POST", "/company/search", json=search, headers={"x-public-token": other})


async def test_revoking_an_unknown_or_revoked_token_is_404_and_another_tenants_token_is_kept(
        client):
    token = await token_of(client)
    await call(client, "PUT", f"/access-token/{token}/revoke")
    error = await error_of(client, "PUT", f"/access-token/{token}/revoke", 404)
    assert error["code"] == "public-token-not-found"
    assert error["details"][0]["path"] == "$.publicToken"
    theirs = (await call(client, "POST", "/access-token", json={"identifier": "g"},
                         headers=GLOBEX))["data"]["publicToken"]
    await error_of(client, "PUT", f"/access-token/{theirs}/revoke", 404)
    await call(client, "POST", "/company/search", json={"query": "a"},
               headers={"x-public-token": theirs})


# -- tasks ---------------------------------------------------------------------------------------

async def details(client, task_id: str) -> dict:
    return (await call(client, "GET", f"/task/{task_id}/details"))["data"]


async def test_task_details_is_the_task_with_its_company_and_the_sandboxs_fields(client):
    world = await make_world(client)
    task = await details(client, world.completed)
    sandbox = (await call(client, "GET", f"/task/{world.completed}"))["data"]
    company = (await call(client, "POST", "/company/search", json={"query": "Walmart"}))["data"][0]
    assert task["_id"] == sandbox["id"] and task["company"] == company
    assert task["authentication"] == sandbox["authenticationMethod"]
    assert task["payrollDataAvailable"] is True
    assert {k: v for k, v in sandbox.items() if k not in ("id", "company")}.items() \
        <= task.items()
    assert [f["_id"] for f in task["files"]][0] == "direct-deposit-form"


async def test_payroll_data_is_available_only_for_completed_user_link_tasks_with_data(client):
    world = await make_world(client)
    assert (await details(client, world.failed))["payrollDataAvailable"] is False
    assert (await details(client, world.pay_link))["payrollDataAvailable"] is False
    queued = (await create(client, company=WALMART, product="verify"))["id"]
    assert (await details(client, queued))["payrollDataAvailable"] is False
    await call(client, "POST", f"/_sandbox/users/{USER}/delete-pii")
    assert (await details(client, world.completed))["payrollDataAvailable"] is False


async def test_task_status_has_fail_reason_only_when_failed(client):
    world = await make_world(client)
    failed = (await call(client, "GET", f"/task/{world.failed}/status"))["data"]["task"]
    assert failed["status"] == "failed" and failed["failReason"] == "unknown-failure"
    done = (await call(client, "GET", f"/task/{world.completed}/status"))["data"]["task"]
    assert set(done) == {"createdAt", "status", "payrollDataAvailable"}


async def test_task_operations_of_another_tenant_or_unknown_ids_are_404(client):
    world = await make_world(client)
    for path in (f"/task/{world.completed}/details", f"/task/{world.completed}/status",
                 f"/task/{world.completed}/file/direct-deposit-form/generate-url"):
        assert (await error_of(client, "GET", path, 404, headers=GLOBEX))["code"] == "task-not-found"
    error = await error_of(client, "GET", f"/task/{world.completed}/file/nope/generate-url", 404)
    assert error["code"] == "file-not-found"


async def test_a_generated_url_serves_the_file_without_credentials_until_it_expires(client):
    world = await make_world(client)
    task = await details(client, world.completed)
    paystub = next(f for f in task["files"] if f["name"].startswith("paystub-"))
    for file_id in ("direct-deposit-form", paystub["_id"]):
        answer = await call(client, "GET",
                            f"/task/{world.completed}/file/{file_id}/generate-url")
        url = answer["url"]
        assert answer["data"]["url"] == url and url.startswith("http://127.0.0.1:")
        response = await client.get(url[url.index("/task/"):])  # no credentials at all
        assert response.status == 200 and response.content_type == "application/pdf"
        assert (await response.read()).startswith(b"%PDF")
    signature = re.search(r"signature=([0-9a-f]+)", url)[1]
    tampered = url.replace(signature, signature[::-1])  # another task's file, say
    response = await client.get(tampered[tampered.index("/task/"):])
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "invalid-file-url"
    await advance(client, 3600)
    response = await client.get(url[url.index("/task/"):])
    assert response.status == 401
    assert (await response.json())["error"]["code"] == "file-url-expired"


async def test_prescreen_is_high_only_where_a_headless_task_would_start(client):
    async def confidence(product="deposit", **company) -> str:
        answer = await call(client, "POST", "/task/prescreen",
                            json={"company": company, "product": product})
        return answer["data"]["confidence"]

    assert await confidence(name="walmart") == "HIGH"       # the exact name, case aside
    assert await confidence(id=WALMART) == "HIGH"
    assert await confidence(id=WALMART, product="tax") == "LOW"  # not offered there
    assert await confidence(id=FEDEX) == "LOW"              # under maintenance
    assert await confidence(name="No Such Employer Inc") == "LOW"
    assert await confidence(id="000000000000000000000000") == "LOW"
    error = await error_of(client, "POST", "/task/prescreen", 422,
                           json={"company": {"name": "Walmart"}, "product": "switch"})
    assert error["details"][0]["path"] == "$.product"
    error = await error_of(client, "POST", "/task/prescreen", 422,
                           json={"company": {}, "product": "deposit"})
    assert error["details"][0]["path"] == "$.company"


async def test_prescreen_path_is_not_taken_for_a_task_id(client):
    response = await client.get("/task/prescreen", headers=ACME)
    assert response.status == 405 and "POST" in response.headers["allow"]


async def test_from_linked_account_runs_its_tasks_on_the_accounts_company_and_user(client):
    world = await make_world(client)
    answer = await call(client, "POST", "/task-workflow/from-linked-account", json={
        "linkedAccount": world.linked_account,
        "tasks": [{"operation": "verify"}, {"operation": "deposit"}]})
    task = answer["data"]["task"]
    assert task["status"] == "queued" and task["company"]["_id"] == WALMART
    assert task["user"]["identifier"] == USER and task["linkedAccount"] == world.linked_account
    assert task["taskWorkflow"] == answer["data"]["taskWorkflow"]
    await run_until_idle(client)
    tasks = (await call(client, "GET", f"/user/{USER}/tasks"))["data"]
    mine = [t for t in tasks if t["taskWorkflow"] == answer["data"]["taskWorkflow"]]
    assert [(t["product"], t["status"], t["payrollDataAvailable"]) for t in mine] == [
        ("verify", "completed", True), ("deposit", "completed", True)]


async def test_from_linked_account_refuses_what_it_cannot_run_and_changes_nothing(client):
    world = await make_world(client)
    before = (await call(client, "GET", f"/user/{USER}/tasks"))["data"]
    cases = [
        ({"tasks": [{"operation": "verify"}]}, 422, "$.linkedAccount"),
        ({"linkedAccount": world.linked_account, "tasks": []}, 422, "$.tasks"),
        ({"linkedAccount": world.linked_account, "tasks": [{"operation": "switch"}]}, 422,
         "$.tasks[0].operation"),
        ({"linkedAccount": world.linked_account,
          "tasks": [{"operation": "verify", "onFail": "stop"}]}, 422, "$.tasks[0].onFail"),
        ({"linkedAccount": world.linked_account,
          "tasks": [{"operation": "deposit", "distribution": {"type": "percent"}}]}, 422,
         "$.tasks[0].distribution.amount"),
        ({"linkedAccount": "000000000000000000000000", "tasks": [{"operation": "verify"}]}, 404,
         "$.linkedAccount"),
        ({"linkedAccount": world.linked_account, "tasks": [{"operation": "tax"}]}, 400,
         "$.tasks[0].operation"),
    ]
    for body, status, path in cases:
        error = await error_of(client, "POST", "/task-workflow/from-linked-account", status,
                               json=body)
        assert path in at_fault(error), (body, error)
    assert (await call(client, "GET", f"/user/{USER}/tasks"))["data"] == before


async def workflow_run(client, tasks: list[dict], **body) -> list[dict]:
    created = await create(client, company=WALMART, tasks=tasks, **body)
    await run_until_idle(client)
    events = (await call(client, "GET", "/_sandbox/events",
                         params={"type": "task-workflow-finished"}))["data"]
    [finished] = [e for e in events if e["body"]["taskWorkflow"] == created["taskWorkflow"]]
    return finished["body"]["data"]["tasks"]


async def test_finish_on_complete_ends_the_workflow_after_that_task(client):
    ran = await workflow_run(client, [{"operation": "verify", "onComplete": "finish"},
                                      {"operation": "deposit"}])
    assert [(t["product"], t["status"]) for t in ran] == [("verify", "completed")]


async def test_continue_runs_the_next_task_once_the_one_before_ended(client):
    ran = await workflow_run(client, [{"operation": "verify", "onFail": "finish"},
                                      {"operation": "deposit", "onComplete": "continue"}])
    assert [(t["product"], t["status"]) for t in ran] == [("verify", "completed"),
                                                         ("deposit", "completed")]


async def test_finish_on_fail_ends_the_workflow_when_the_task_fails(client):
    ran = await workflow_run(client, [{"operation": "verify", "onFail": "finish"},
                                      {"operation": "deposit"}], scenario="connection-error")
    assert [(t["product"], t["status"]) for t in ran] == [("verify", "failed")]


async def test_task_create_takes_task_options_and_a_legacy_distribution(client):
    """Facts 8: `POST /task/create` {product, linkedAccount, distribution}; the task options
    the SDK's tasks take."""
    world = await make_world(client)
    created = (await call(client, "POST", "/task/create", json={
        "linkedAccount": world.linked_account, "product": "deposit",
        "distribution": {"type": "fixed", "amount": 250}}))["data"]
    assert created["status"] == "queued"
    task = (await call(client, "GET", f"/task/{created['id']}"))["data"]
    assert task["distribution"] == {"type": "fixed", "amount": 250}
    created = await create(client, company=WALMART, distribution={"type": "total"}, tasks=[
        {"operation": "deposit", "distribution": {"type": "percent", "amount": 40},
         "onComplete": "continue", "onFail": "finish"}, {"operation": "verify"}])
    task = (await call(client, "GET", f"/task/{created['id']}"))["data"]
    assert task["distribution"] == {"type": "percent", "amount": 40}
    assert (task["onComplete"], task["onFail"]) == ("continue", "finish")


async def test_a_split_the_connector_cannot_set_up_fails_the_deposit(client):
    company = (await call(client, "POST", "/_sandbox/companies", status=201, json={
        "name": "Whole Paycheck Only Inc", "connector": {
            "availableProducts": ["deposit", "verify"],
            "capabilities": {"headlessAuthentication": True, "distributionTypes": ["total"]}}}
                          ))["data"]
    fractional = (await create(client, company=company["_id"], product="deposit",
                               distribution={"type": "percent", "amount": 10}))["id"]
    whole = (await create(client, company=company["_id"], product="deposit",
                          distribution={"type": "total"}))["id"]
    await run_until_idle(client)
    assert (await details(client, fractional))["failReason"] == "product-not-supported"
    assert (await details(client, whole))["status"] == "completed"


async def test_a_snapshot_keeps_a_workflow_waiting_for_its_next_task(client):
    created = await create(client, company=WALMART, tasks=[
        {"operation": "verify", "onFail": "finish"}, {"operation": "deposit"}])
    snapshot = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    await run_until_idle(client)
    expected = (await call(client, "GET", f"/user/{USER}/tasks"))["data"]
    await call(client, "POST", "/_sandbox/snapshot", json=snapshot)
    assert len((await call(client, "GET", f"/user/{USER}/tasks"))["data"]) == 1
    await run_until_idle(client)
    restored = (await call(client, "GET", f"/user/{USER}/tasks"))["data"]
    assert restored == expected and len(restored) == 2
    assert restored[1]["taskWorkflow"] == created["taskWorkflow"]


# -- users ----------------------------------------------------------------------------------------

async def test_user_tasks_filter_by_status_and_payroll_data(client):
    world = await make_world(client)

    async def ids(query: str) -> list[str]:
        return [t["_id"] for t in (await call(client, "GET", f"/user/{USER}/tasks{query}"))["data"]]

    assert await ids("") == [world.completed, world.failed, world.pay_link]
    assert await ids("?status=failed") == [world.failed]
    assert await ids("?payrollDataAvailable=true") == [world.completed]
    assert await ids("?status=completed&payrollDataAvailable=false") == [world.pay_link]
    error = await error_of(client, "GET", f"/user/{USER}/tasks?payrollDataAvailable=yes", 422)
    assert error["details"][0]["path"] == "$.payrollDataAvailable"
    error = await error_of(client, "GET", "/user/nobody/tasks", 404)
    assert error["code"] == "user-not-found"


async def test_put_user_stores_payment_methods_the_flow_can_offer(client):
    await call(client, "PUT", "/user", json={"identifier": "payer", "data": {
        "bankAccounts": [{"accountNumber": "000123456789", "routingNumber": "021000021",
                          "accountType": "savings", "externalId": "ext-1"}],
        "cards": [{"brand": "Visa", "lastFour": "4242", "_id": "card-1"}]}})
    stored = (await call(client, "GET", "/_sandbox/users/payer/payment-methods"))["data"]
    [bank], [card] = stored["bankAccounts"], stored["cards"]
    assert bank["type"] == "bank" and bank["accountNumber"] == "6789"  # last four kept only
    assert bank["title"] == "Savings ending in 6789" and bank["externalId"] == "ext-1"
    assert card == {"type": "card", "_id": "card-1", "title": "Visa ending in 4242",
                    "brand": "Visa", "lastFour": "4242"}
    await call(client, "PUT", "/user", json={"identifier": "payer"})  # replaces: none now
    stored = (await call(client, "GET", "/_sandbox/users/payer/payment-methods"))["data"]
    assert stored == {"identifier": "payer", "bankAccounts": [], "cards": []}
    # Issue 47, point 8: any digit string a bank could issue (1 to 34 digits) is taken.
    error = await error_of(client, "PUT", "/user", 422, json={"identifier": "payer", "data": {
        "bankAccounts": [{"accountNumber": "12a", "routingNumber": "021000021"}]}})
    assert error["details"][0]["path"] == "$.data.bankAccounts[0].accountNumber"
    error = await error_of(client, "PUT", "/user", 422, json={"data": {}})
    assert at_fault(error) == ["$.identifier"]


async def test_end_monitoring_disconnects_each_linked_account_and_stops_push_refreshes(client):
    world = await make_world(client)
    disconnected = {"type": "linked-account-disconnected", "user": USER}
    before = len((await call(client, "GET", "/_sandbox/events", params=disconnected))["data"])
    await call(client, "PUT", f"/user/{USER}/end-monitoring")
    events = (await call(client, "GET", "/_sandbox/events", params=disconnected))["data"]
    assert len(events) == before + 1  # one more: the user's one linked account
    assert {e["body"]["data"]["linkedAccount"] for e in events} == {world.linked_account}
    [listed] = (await call(client, "GET", f"/linked-account/list/{USER}"))["data"]
    assert listed["valid"] is False
    emitted = (await call(client, "GET", "/_sandbox/events", params={"user": USER}))["data"]
    await advance(client, 3 * 86_400)
    later = (await call(client, "GET", "/_sandbox/events", params={"user": USER}))["data"]
    assert not [e for e in later[len(emitted):] if e["type"].endswith("-synced")]
    await call(client, "PUT", f"/user/{USER}/end-monitoring")  # again: nothing more to end
    events = (await call(client, "GET", "/_sandbox/events", params=disconnected))["data"]
    assert len(events) == before + 1
    assert (await error_of(client, "PUT", "/user/nobody/end-monitoring", 404))["code"] == \
        "user-not-found"


# -- companies -------------------------------------------------------------------------------------

async def test_company_details_at_the_real_path_is_the_sandboxs_company_record(client):
    real = await call(client, "GET", f"/company/{WALMART}/details")
    assert real == await call(client, "GET", f"/company/{WALMART}")
    error = await error_of(client, "GET", "/company/000000000000000000000000/details", 404)
    assert error["code"] == "company-not-found"


# -- webhook endpoints and signing secrets ----------------------------------------------------------

async def test_api_endpoints_are_the_control_planes_with_the_same_ids(sandbox, receiver):
    [default] = (await call(sandbox, "GET", "/_sandbox/webhooks/endpoints"))["data"]
    listed = (await call(sandbox, "GET", "/webhooks/endpoints"))["data"]
    assert [e["_id"] for e in listed] == [default["_id"]]
    assert "task-status-updated" in listed[0]["eventTypes"]  # registered for every type
    made = (await call(sandbox, "POST", "/webhooks/endpoints", json={
        "url": receiver.url("/companies"), "eventTypes": ["company-deleted"]}))["data"]
    control = (await call(sandbox, "GET", "/_sandbox/webhooks/endpoints"))["data"]
    assert [e["_id"] for e in control] == [default["_id"], made["_id"]]
    # The control plane's PUT keeps the ids of the URLs it keeps.
    await call(sandbox, "PUT", "/_sandbox/webhooks/endpoints", json={"endpoints": [
        {"url": receiver.url("/companies"), "eventTypes": ["company-deleted"]}]})
    assert [e["_id"] for e in (await call(sandbox, "GET", "/webhooks/endpoints"))["data"]] == [
        made["_id"]]
    await call(sandbox, "POST", "/_sandbox/events/trigger", status=201,
               json={"eventType": "company-deleted"})
    assert [r.path for r in receiver.requests] == ["/companies"]


async def test_endpoint_put_and_delete_by_id(sandbox, receiver):
    made = (await call(sandbox, "POST", "/webhooks/endpoints", json={
        "url": receiver.url("/a"), "eventTypes": ["company-created"]}))["data"]
    changed = (await call(sandbox, "PUT", f"/webhooks/endpoints/{made['_id']}", json={
        "url": receiver.url("/b"), "eventTypes": ["company-deleted"]}))["data"]
    assert changed == {"_id": made["_id"], "url": receiver.url("/b"),
                       "eventTypes": ["company-deleted"]}
    answer = await call(sandbox, "DELETE", f"/webhooks/endpoints/{made['_id']}")
    assert answer["data"] == {"success": True, "result": {"success": True}}
    assert made["_id"] not in [e["_id"] for e in
                               (await call(sandbox, "GET", "/webhooks/endpoints"))["data"]]
    for method in ("PUT", "DELETE"):
        error = await error_of(sandbox, method, f"/webhooks/endpoints/{made['_id']}", 404,
                               json={"url": receiver.url("/b"), "eventTypes": ["company-deleted"]}
                               if method == "PUT" else None)
        assert error["code"] == "webhook-endpoint-not-found"


async def test_endpoint_bodies_are_checked_like_the_control_planes_and_change_nothing(client):
    before = (await call(client, "GET", "/webhooks/endpoints"))["data"]
    cases = [({"url": "ftp://x/hook", "eventTypes": ["company-created"]}, 422, "$.url"),
             ({"url": "http://169.254.169.254/x", "eventTypes": ["company-created"]}, 422, "$.url"),
             ({"url": CLOSED, "eventTypes": ["no-such-event"]}, 422, "$.eventTypes[0]"),
             ({"url": CLOSED}, 422, "$.eventTypes")]
    for body, status, path in cases:
        error = await error_of(client, "POST", "/webhooks/endpoints", status, json=body)
        assert path in at_fault(error), (body, error)
    assert (await call(client, "GET", "/webhooks/endpoints"))["data"] == before


async def test_an_endpoint_with_a_secret_is_signed_with_that_secret(sandbox, receiver):
    secret = (await call(sandbox, "POST", "/secrets", json={"name": "per endpoint"}))["data"]
    assert set(secret) == {"_id", "name", "token", "createdAt"}
    await call(sandbox, "POST", "/webhooks/endpoints", json={
        "url": receiver.url("/signed"), "eventTypes": ["company-deleted"],
        "secretId": secret["_id"]})
    await call(sandbox, "POST", "/_sandbox/events/trigger", status=201,
               json={"eventType": "company-deleted"})
    signed = receiver.received("/signed")[0]
    default = receiver.received(HOOKS)[0]
    assert signed.body == default.body
    assert signed.signature_matches(secret["token"])
    assert default.signature_matches(ACME["x-api-secret"])  # facts 5: the API secret
    ledger = (await call(sandbox, "GET", "/_sandbox/events",
                         params={"type": "company-deleted"}))["data"][0]["deliveries"]
    signatures = {d["url"]: d["attempts"][0]["requestHeaders"]["x-hmac-signature-sha-256"]
                  for d in ledger}
    expected = hmac.new(secret["token"].encode(), signed.body, hashlib.sha256).hexdigest()
    assert signatures[receiver.url("/signed")] == expected
    # A secret in use cannot go; once no endpoint names it, it can.
    error = await error_of(sandbox, "DELETE", f"/secrets/{secret['_id']}", 409)
    assert error["code"] == "secret-in-use"
    assert secret in (await call(sandbox, "GET", "/secrets"))["data"]


async def test_a_snapshot_keeps_endpoint_ids_secrets_and_payment_methods(client):
    world = await make_world(client)
    await call(client, "PUT", "/user", json={"identifier": USER, "data": {
        "cards": [{"brand": "Visa", "lastFour": "4242"}]}})
    reads = ("/webhooks/endpoints", "/_sandbox/webhooks/endpoints", "/secrets",
             f"/_sandbox/users/{USER}/payment-methods")
    before = [await call(client, "GET", path) for path in reads]
    snapshot = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    await call(client, "POST", "/_sandbox/reset")
    assert (await call(client, "GET", "/secrets"))["data"] == []
    await call(client, "POST", "/_sandbox/snapshot", json=snapshot)
    assert [await call(client, "GET", path) for path in reads] == before
    assert world.endpoint in [e["_id"] for e in before[0]["data"]]


async def test_a_snapshot_naming_a_missing_secret_is_refused(client):
    await make_world(client)
    snapshot = (await call(client, "GET", "/_sandbox/snapshot"))["data"]
    snapshot["webhooks"]["secrets"] = []
    error = await error_of(client, "POST", "/_sandbox/snapshot", 422, json=snapshot)
    assert error["details"][0]["path"] == "$.webhooks.endpoints[0].secretId"


# -- pay-link ---------------------------------------------------------------------------------------

async def test_pay_link_accounts_are_the_users_merchants_with_actions_and_bills(client):
    world = await make_world(client)
    headers = {"x-public-token": world.token, "x-api-version": "v2"}
    [account] = (await call(client, "GET", "/pay-link/accounts", headers=headers))["data"]["accounts"]
    assert account["company"]["name"] == "Netflix"
    assert account["paymentMethod"] == VISA
    types = [a["type"] for a in account["actions"]]
    assert types == ["refresh", "view-account", "switch", "pay-now"]
    [bill] = account["bills"]
    assert [a["type"] for a in bill["actions"]] == ["switch", "pay-now"]
    again = (await call(client, "GET", "/pay-link/accounts", headers=headers))["data"]
    assert again["accounts"] == [account]  # ids derived, the same on every read
    other = await token_of(client, "nobody-yet")
    assert (await call(client, "GET", "/pay-link/accounts",
                       headers={"x-public-token": other}))["data"] == {"accounts": []}
    older = await call(client, "GET", "/pay-link/accounts",  # v2's shape, the one it knows
                       headers={**headers, "x-api-version": "v1"})
    assert older["data"] == again
    error = await error_of(client, "GET", "/pay-link/accounts", 401)
    assert error["code"] == "public-token-required"


async def test_pay_link_actions_follow_the_companys_pay_link_products(client):
    async def actions(company: str) -> list[str]:
        answer = await call(client, "GET", f"/pay-link/actions-for-company/{company}")
        return [a["type"] for a in answer["data"]]

    assert await actions(NETFLIX) == ["connect-account", "refresh", "view-account", "switch",
                                      "pay-now"]
    assert await actions(AMAZON_PRIME) == ["connect-account", "refresh", "switch"]
    assert await actions(WALMART) == []  # an employer: no pay-link product
    error = await error_of(client, "GET", "/pay-link/actions-for-company/nope", 404)
    assert error["code"] == "company-not-found"

