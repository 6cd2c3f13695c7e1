"""The aggregator's own API under /aggregator-api/, driven by its official client (plaid-python)
against a real server: the pytest plugin's session server and a fresh tenant per test, a
manual clock, and a real webhook receiver (DESIGN.md, The aggregator's own API; real-service
facts 10; spec: Steps at the third-party aggregator, Processor-link events).

Nothing of the sandbox is mocked: the client speaks HTTP to the server as it would to the
aggregator, and the processor tokens it gets go through POST /aggregator/processor-links.
"""

from __future__ import annotations

import ast
import json
import re
import urllib.error
import urllib.request
from msgspec.structs import replace
from typing import Any

import pytest

from conftest import require_extra  # noqa: E402

require_extra("plaid")
import plaid  # noqa: E402

from plaid.api import plaid_api  # noqa: E402
from plaid.model.accounts_get_request import AccountsGetRequest  # noqa: E402
from plaid.model.item_public_token_exchange_request import (  # noqa: E402
    ItemPublicTokenExchangeRequest)
from plaid.model.item_remove_request import ItemRemoveRequest  # noqa: E402
from plaid.model.processor_token_create_request import ProcessorTokenCreateRequest  # noqa: E402
from plaid.model.products import Products  # noqa: E402
from plaid.model.sandbox_item_reset_login_request import SandboxItemResetLoginRequest  # noqa: E402
from plaid.model.sandbox_public_token_create_request import (  # noqa: E402
    SandboxPublicTokenCreateRequest)
from plaid.model.sandbox_public_token_create_request_options import (  # noqa: E402
    SandboxPublicTokenCreateRequestOptions)
from plaid.model.sandbox_public_token_create_request_options_transactions import (  # noqa: E402
    SandboxPublicTokenCreateRequestOptionsTransactions)

from conftest import ACME, REPO  # noqa: E402
from payroll_sandbox.app import create_app  # noqa: E402
from payroll_sandbox.domain.rules import Limits  # noqa: E402
from payroll_sandbox.edge.keys import SANDBOX  # noqa: E402
from payroll_sandbox.settings import Settings  # noqa: E402
from payroll_sandbox.testing import SandboxError  # noqa: E402

PREFIX = "/aggregator-api"
LINKS = "/aggregator/processor-links"
PROCESSOR = "atomic"  # the service's processor key; the client sends only names it knows
INSTITUTION = "ins_109508"
CLASSIFIED = "employer-classification-completed"
DETECTED = "recurring-transaction-detection-completed"
AGGREGATOR_ERROR = "aggregator-error"
PROCESSOR_TOKEN = re.compile(r"^processor-sandbox-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-"
                             r"[0-9a-f]{4}-[0-9a-f]{12}$")
ERROR_FIELDS = {"error_type", "error_code", "error_message", "display_message", "request_id"}


# -- helpers ----------------------------------------------------------------------------------

def client_for(sandbox, secret: str | None = None) -> plaid_api.PlaidApi:
    """The official client as a customer configures it for the sandbox (docs/aggregator.md)."""
    configuration = plaid.Configuration(
        host=f"{sandbox.base_url}{PREFIX}",
        api_key={"clientId": sandbox.api_key, "secret": secret or sandbox.api_secret})
    return plaid_api.PlaidApi(plaid.ApiClient(configuration))


@pytest.fixture
def aggregator(payroll_sandbox) -> plaid_api.PlaidApi:
    return client_for(payroll_sandbox)


def link_item(aggregator, products: tuple[str, ...] = ("transactions",),
              days_requested: int | None = None) -> tuple[str, str, str]:
    """Steps 1 and 2 at the aggregator, and the first account: (access token, item id,
    account id)."""
    options = {}
    if days_requested is not None:
        options["options"] = SandboxPublicTokenCreateRequestOptions(
            transactions=SandboxPublicTokenCreateRequestOptionsTransactions(
                days_requested=days_requested))
    created = aggregator.sandbox_public_token_create(SandboxPublicTokenCreateRequest(
        institution_id=INSTITUTION, initial_products=[Products(p) for p in products], **options))
    exchanged = aggregator.item_public_token_exchange(
        ItemPublicTokenExchangeRequest(public_token=created.public_token))
    accounts = aggregator.accounts_get(AccountsGetRequest(access_token=exchanged.access_token))
    return exchanged.access_token, exchanged.item_id, accounts.accounts[0].account_id


def processor_token(aggregator, access_token: str, account_id: str) -> str:
    return aggregator.processor_token_create(ProcessorTokenCreateRequest(
        access_token=access_token, account_id=account_id, processor=PROCESSOR)).processor_token


def register(sandbox, token: str, identifier: str) -> str:
    """Step 4: POST /aggregator/processor-links; the link's id."""
    link = sandbox.request("POST", LINKS, {"processorToken": token},
                           headers={"user-identifier": identifier})
    assert link["status"] == "processing"
    return link["_id"]


def error_of(call) -> tuple[int, dict[str, Any]]:
    """The status and the aggregator's error body of a call the client raised on."""
    with pytest.raises(plaid.ApiException) as raised:
        call()
    return raised.value.status, json.loads(raised.value.body)


def raw_post(sandbox, path: str, body: Any, headers: dict[str, str] | None = None
             ) -> tuple[int, dict[str, Any]]:
    """A request the official client would not send (it checks its arguments first)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"{sandbox.base_url}{PREFIX}{path}", data=data,
                                     method="POST", headers={"content-type": "application/json",
                                                             **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def events_of(receiver, link_id: str) -> list[dict[str, Any]]:
    """The accepted deliveries about one processor link, in order."""
    return [e for e in receiver.events if (e.get("data") or {}).get("processorLink") == link_id]


def link_statuses(sandbox) -> dict[str, str]:
    """Each processor link of the tenant -> its status (processing, completed, error)."""
    return {link["id"]: link["status"] for link in sandbox.snapshot()["processorLinks"]}


def state(sandbox) -> dict[str, Any]:
    """The tenant's snapshot without what every request changes (the journal)."""
    document = sandbox.snapshot()
    document.pop("journal")
    document["counters"].pop("journalNextId")
    document.pop("takenAt")
    return document


# -- the whole flow ---------------------------------------------------------------------------

def test_official_client_links_an_item_and_its_processor_token_is_processed(
        payroll_sandbox, webhook_receiver, aggregator):
    """DESIGN.md: "so that its official client configured with `host=<sandbox>/aggregator-api`
    and the tenant's API key and secret as client id and secret runs unchanged"; "Tokens it
    mints are the ones `POST /aggregator/processor-links` accepts". Facts 10:
    "`/processor/token/create` {access_token, account_id, processor} -> {processor_token,
    request_id}; token format `processor-<environment>-<id>`"."""
    created = aggregator.sandbox_public_token_create(SandboxPublicTokenCreateRequest(
        institution_id=INSTITUTION, initial_products=[Products("transactions")],
        options=SandboxPublicTokenCreateRequestOptions(
            transactions=SandboxPublicTokenCreateRequestOptionsTransactions(days_requested=30))))
    assert created.public_token.startswith("public-sandbox-") and created.request_id
    exchanged = aggregator.item_public_token_exchange(
        ItemPublicTokenExchangeRequest(public_token=created.public_token))
    assert exchanged.access_token.startswith("access-sandbox-") and exchanged.item_id

    got = aggregator.accounts_get(AccountsGetRequest(access_token=exchanged.access_token))
    assert got.item.item_id == exchanged.item_id
    assert [p.value for p in got.item.billed_products] == ["transactions"]
    assert [(a.type.value, a.subtype.value, a.mask) for a in got.accounts] == [
        ("depository", "checking", "0000"), ("depository", "savings", "1111")]
    account = got.accounts[0]
    assert account.name and account.balances.current > 0
    assert account.balances.iso_currency_code == "USD"

    made = aggregator.processor_token_create(ProcessorTokenCreateRequest(
        access_token=exchanged.access_token, account_id=account.account_id, processor=PROCESSOR))
    assert PROCESSOR_TOKEN.match(made.processor_token), made.processor_token
    assert made.request_id

    # The token carries the item, its products and days_requested to the service.
    [token] = [t for t in payroll_sandbox.snapshot()["processorTokens"]
               if t["token"] == made.processor_token]
    assert (token["itemId"], token["accountId"], token["products"], token["daysRequested"]) == (
        exchanged.item_id, account.account_id, ["transactions"], 30)

    link = register(payroll_sandbox, made.processor_token, "bank-user")
    payroll_sandbox.run_until_idle()
    assert [e["eventType"] for e in events_of(webhook_receiver, link)] == [CLASSIFIED, DETECTED]
    assert link_statuses(payroll_sandbox) == {link: "completed"}
    assert payroll_sandbox.events(type=AGGREGATOR_ERROR) == []


def test_reset_login_ends_processing_in_item_login_required_and_a_new_item_recovers(
        payroll_sandbox, webhook_receiver, aggregator):
    """DESIGN.md: "a reset login makes that item's processing end in `<aggregator>-error` with
    `ITEM_ERROR` / `ITEM_LOGIN_REQUIRED`". Spec, aggregator-error: "For codes such as
    `ITEM_LOGIN_REQUIRED` the user must relink and a new processor token must be
    registered." Facts 10: "ITEM_LOGIN_REQUIRED is error_type ITEM_ERROR, HTTP 400"."""
    access_token, item_id, account_id = link_item(aggregator)
    done = register(payroll_sandbox, processor_token(aggregator, access_token, account_id),
                    "relink")
    payroll_sandbox.run_until_idle()
    assert [e["eventType"] for e in events_of(webhook_receiver, done)] == [CLASSIFIED, DETECTED]

    pending = register(payroll_sandbox, processor_token(aggregator, access_token, account_id),
                       "relink")       # registered before the reset, not pulled yet
    spare = processor_token(aggregator, access_token, account_id)  # registered after it
    reset = aggregator.sandbox_item_reset_login(SandboxItemResetLoginRequest(
        access_token=access_token))
    assert reset.reset_login is True and reset.request_id

    status, body = error_of(lambda: aggregator.accounts_get(
        AccountsGetRequest(access_token=access_token)))
    assert status == 400 and set(body) == ERROR_FIELDS
    assert (body["error_type"], body["error_code"]) == ("ITEM_ERROR", "ITEM_LOGIN_REQUIRED")

    late = register(payroll_sandbox, spare, "relink")
    payroll_sandbox.run_until_idle()
    for link in (pending, late):
        [event] = events_of(webhook_receiver, link)
        assert event["eventType"] == AGGREGATOR_ERROR
        assert (event["data"]["errorType"], event["data"]["errorCode"]) == (
            "ITEM_ERROR", "ITEM_LOGIN_REQUIRED")
        assert event["user"]["identifier"] == "relink"
    # The link that had completed stays completed; the failed ones say so.
    assert link_statuses(payroll_sandbox) == {done: "completed", pending: "error", late: "error"}

    # The user relinks: a new item, a new processor token, processed to the end.
    new_access, new_item, new_account = link_item(aggregator)
    assert new_item != item_id
    again = register(payroll_sandbox, processor_token(aggregator, new_access, new_account),
                     "relink")
    payroll_sandbox.run_until_idle()
    assert [e["eventType"] for e in events_of(webhook_receiver, again)] == [CLASSIFIED, DETECTED]


def test_an_item_linked_for_auth_only_fails_with_products_not_supported(
        payroll_sandbox, webhook_receiver, aggregator):
    """Spec, Steps at the third-party aggregator: "The link token must request the
    `transactions` product ... Requesting only the auth product is insufficient."
    (the existing PRODUCTS_NOT_SUPPORTED path of the pipeline)."""
    access_token, _, account_id = link_item(aggregator, products=("auth",))
    link = register(payroll_sandbox, processor_token(aggregator, access_token, account_id),
                    "auth-only")
    payroll_sandbox.run_until_idle()
    [event] = events_of(webhook_receiver, link)
    assert event["eventType"] == AGGREGATOR_ERROR
    assert event["data"]["errorCode"] == "PRODUCTS_NOT_SUPPORTED"


def test_item_remove_revokes_the_items_processor_tokens(payroll_sandbox, webhook_receiver,
                                                       aggregator):
    """DESIGN.md: `/item/remove` is served; facts 10's token is "scoped ... to a single
    account chosen at the aggregator" (spec: Processor link), so it ends with its item."""
    access_token, _, account_id = link_item(aggregator)
    pending = register(payroll_sandbox, processor_token(aggregator, access_token, account_id),
                       "removed")
    spare = processor_token(aggregator, access_token, account_id)
    assert aggregator.item_remove(ItemRemoveRequest(access_token=access_token)).request_id

    status, body = error_of(lambda: aggregator.accounts_get(
        AccountsGetRequest(access_token=access_token)))
    assert (status, body["error_code"]) == (400, "INVALID_ACCESS_TOKEN")
    with pytest.raises(SandboxError) as refused:
        register(payroll_sandbox, spare, "removed")
    assert refused.value.status == 409
    assert refused.value.body["error"]["code"] == "processor-token-revoked"
    payroll_sandbox.run_until_idle()
    [event] = events_of(webhook_receiver, pending)
    assert (event["eventType"], event["data"]["errorCode"]) == (AGGREGATOR_ERROR, "ITEM_NOT_FOUND")


# -- errors: the aggregator's error body, and nothing changed ----------------------------------

def _wrong_secret(sandbox, aggregator, item):
    client = client_for(sandbox, secret="not-the-secret")
    return lambda: client.accounts_get(AccountsGetRequest(access_token=item[0]))


def _unknown_access_token(sandbox, aggregator, item):
    return lambda: aggregator.accounts_get(AccountsGetRequest(
        access_token="access-sandbox-00000000-0000-4000-8000-000000000000"))


def _production_access_token(sandbox, aggregator, item):
    return lambda: aggregator.item_remove(ItemRemoveRequest(
        access_token="access-production-00000000-0000-4000-8000-000000000000"))


def _other_tenants_access_token(sandbox, aggregator, item):
    other = sandbox.new_tenant()
    try:
        theirs = link_item(client_for(other))[0]
    finally:
        other.request("DELETE", f"/_sandbox/tenants/{other.name}")
    return lambda: aggregator.sandbox_item_reset_login(SandboxItemResetLoginRequest(
        access_token=theirs))


def _used_public_token(sandbox, aggregator, item):
    return lambda: aggregator.item_public_token_exchange(
        ItemPublicTokenExchangeRequest(public_token=item[3]))


def _expired_public_token(sandbox, aggregator, item):
    fresh = aggregator.sandbox_public_token_create(SandboxPublicTokenCreateRequest(
        institution_id=INSTITUTION, initial_products=[Products("transactions")])).public_token
    sandbox.advance(1800)  # public tokens live 30 minutes
    return lambda: aggregator.item_public_token_exchange(
        ItemPublicTokenExchangeRequest(public_token=fresh))


def _account_of_no_item(sandbox, aggregator, item):
    return lambda: aggregator.processor_token_create(ProcessorTokenCreateRequest(
        access_token=item[0], account_id="not-an-account", processor=PROCESSOR))


@pytest.mark.parametrize("setup, error_type, error_code", [
    (_wrong_secret, "INVALID_INPUT", "INVALID_API_KEYS"),
    (_unknown_access_token, "INVALID_INPUT", "INVALID_ACCESS_TOKEN"),
    (_production_access_token, "INVALID_INPUT", "INVALID_ACCESS_TOKEN"),
    (_other_tenants_access_token, "INVALID_INPUT", "INVALID_ACCESS_TOKEN"),
    (_used_public_token, "INVALID_INPUT", "INVALID_PUBLIC_TOKEN"),
    (_expired_public_token, "INVALID_INPUT", "INVALID_PUBLIC_TOKEN"),
    (_account_of_no_item, "INVALID_INPUT", "INVALID_ACCOUNT_ID"),
], ids=lambda v: v.__name__.strip("_") if callable(v) else None)
def test_a_refused_call_answers_the_aggregators_error_body_and_changes_nothing(
        payroll_sandbox, aggregator, setup, error_type, error_code):
    """DESIGN.md: "in its own conventions (snake_case, `request_id`, its error body
    `{error_type, error_code, error_message, display_message, request_id}`)"; DESIGN.md,
    Errors: "Never a 500 for bad input"."""
    public = aggregator.sandbox_public_token_create(SandboxPublicTokenCreateRequest(
        institution_id=INSTITUTION, initial_products=[Products("transactions")])).public_token
    exchanged = aggregator.item_public_token_exchange(
        ItemPublicTokenExchangeRequest(public_token=public))
    item = (exchanged.access_token, exchanged.item_id, None, public)
    call = setup(payroll_sandbox, aggregator, item)
    before = state(payroll_sandbox)

    status, body = error_of(call)
    assert status == 400
    assert set(body) == ERROR_FIELDS, body
    assert (body["error_type"], body["error_code"]) == (error_type, error_code)
    assert body["error_message"] and body["request_id"]
    assert state(payroll_sandbox) == before
    # The item is as it was: its access token still works.
    assert aggregator.accounts_get(AccountsGetRequest(access_token=item[0])).item.item_id == item[1]


@pytest.mark.parametrize("body, headers, error_type, error_code, names", [
    ({"public_token": "public-sandbox-x"}, None, "INVALID_REQUEST", "MISSING_FIELDS",
     "client_id, secret"),
    ({}, "keys", "INVALID_REQUEST", "MISSING_FIELDS", "public_token"),
    ({"public_token": 7}, "keys", "INVALID_REQUEST", "INVALID_FIELD", "public_token"),
    (b"{not json", "keys", "INVALID_REQUEST", "INVALID_BODY", "JSON"),
    ({"client_id": "sandbox-key-acme-0001", "secret": "wrong", "public_token": "x"}, None,
     "INVALID_INPUT", "INVALID_API_KEYS", "client_id or secret"),
], ids=["no-credentials", "missing-field", "wrong-type", "not-json", "wrong-body-secret"])
def test_a_malformed_request_is_the_aggregators_400(payroll_sandbox, body, headers, error_type,
                                                   error_code, names):
    """Facts 10's error body for what the official client never sends: "400 INVALID_REQUEST
    for malformed bodies/missing fields" (missing credentials included), INVALID_API_KEYS
    (INVALID_INPUT) for a wrong client id or secret."""
    keys = {"PLAID-CLIENT-ID": payroll_sandbox.api_key,
            "PLAID-SECRET": payroll_sandbox.api_secret} if headers == "keys" else None
    before = state(payroll_sandbox)
    status, answer = raw_post(payroll_sandbox, "/item/public_token/exchange", body, keys)
    assert status == 400
    assert set(answer) == ERROR_FIELDS
    assert (answer["error_type"], answer["error_code"]) == (error_type, error_code)
    assert names in answer["error_message"]
    assert state(payroll_sandbox) == before


def test_credentials_in_the_body_are_accepted(payroll_sandbox):
    """The aggregator's API takes `client_id` and `secret` in the body as well as in the
    headers its client sends."""
    status, answer = raw_post(payroll_sandbox, "/sandbox/public_token/create", {
        "client_id": payroll_sandbox.api_key, "secret": payroll_sandbox.api_secret,
        "institution_id": INSTITUTION, "initial_products": ["transactions"]})
    assert status == 200 and answer["public_token"].startswith("public-sandbox-")
    assert answer["request_id"]
    # The journal keeps the request, not the secret in it.
    [entry] = [e for e in payroll_sandbox.get("/_sandbox/requests")
               if e["path"].endswith("/sandbox/public_token/create")]
    assert entry["body"]["secret"] == "[redacted]"
    assert payroll_sandbox.api_secret not in json.dumps(entry)


# -- the tenant's state: snapshot, reset, bound -------------------------------------------------

def test_items_are_in_the_snapshot_and_an_older_snapshot_without_them_restores(
        payroll_sandbox, aggregator):
    """Items live on the tenant: its snapshot has them (GET/POST /_sandbox/snapshot restore
    "exactly"), a reset forgets them, and a snapshot taken before they existed restores."""
    access_token, item_id, account_id = link_item(aggregator, days_requested=45)
    token = processor_token(aggregator, access_token, account_id)
    taken = payroll_sandbox.snapshot()
    [item] = taken["aggregatorItems"]
    assert (item["itemId"], item["accessToken"], item["daysRequested"]) == (
        item_id, access_token, 45)
    assert [t["itemId"] for t in taken["processorTokens"]] == [item_id]

    payroll_sandbox.post("/_sandbox/reset")
    status, body = error_of(lambda: aggregator.accounts_get(
        AccountsGetRequest(access_token=access_token)))
    assert body["error_code"] == "INVALID_ACCESS_TOKEN"

    payroll_sandbox.restore(taken)
    got = aggregator.accounts_get(AccountsGetRequest(access_token=access_token))
    assert (got.item.item_id, got.accounts[0].account_id) == (item_id, account_id)

    older = {k: v for k, v in taken.items() if k != "aggregatorItems"}
    for record in older["processorTokens"]:
        record.pop("itemId")
    payroll_sandbox.restore(older)
    restored = payroll_sandbox.snapshot()
    assert restored["aggregatorItems"] == []
    assert [(t["token"], t["itemId"]) for t in restored["processorTokens"]] == [(token, None)]


async def test_items_past_the_bound_go_unreachable_first_then_oldest(client):
    """README, Limits: everything a long-running server keeps has a bound; past it the
    items that cannot be reached any more (a public token that expired unexchanged) go
    first, then the oldest."""
    tenant = client.server.app[SANDBOX].registry.tenants.get("acme")
    tenant.aggregator.rules = replace(tenant.rules, limits=Limits(max_aggregator_items=5))
    headers = {"PLAID-CLIENT-ID": ACME["x-api-key"], "PLAID-SECRET": ACME["x-api-secret"]}

    async def post(path: str, body: dict) -> dict:
        response = await client.post(f"{PREFIX}{path}", json=body, headers=headers)
        assert response.status == 200, await response.text()
        return await response.json()

    async def new_public_token() -> str:
        return (await post("/sandbox/public_token/create", {
            "institution_id": INSTITUTION, "initial_products": ["transactions"]}))["public_token"]

    kept = [(await post("/item/public_token/exchange",
                        {"public_token": await new_public_token()}))["access_token"]
            for _ in range(3)]
    for _ in range(2):
        await new_public_token()   # never exchanged: unreachable once expired
    await client.post("/_sandbox/clock/advance", json={"seconds": 1800}, headers=ACME)
    await new_public_token()       # the sixth item: the bound is passed
    assert len(tenant.aggregator.items) == 4  # a tenth of the bound, at least one, below it
    for access_token in kept:
        await post("/accounts/get", {"access_token": access_token})


async def test_a_reset_login_ends_in_the_service_profiles_aggregator_error(aiohttp_client, clock):
    """DESIGN.md, Service profile: `aggregator` "(default `aggregator`: path
    `/aggregator/processor-links`, event `aggregator-error`)"; the /aggregator-api/ prefix
    stays as DESIGN.md fixes it."""
    settings = Settings(port=0, clock="manual", aggregator="plaid")
    client = await aiohttp_client(create_app(settings, clock=clock))
    headers = {"PLAID-CLIENT-ID": ACME["x-api-key"], "PLAID-SECRET": ACME["x-api-secret"]}

    async def post(path: str, body: dict) -> dict:
        response = await client.post(f"{PREFIX}{path}", json=body, headers=headers)
        assert response.status == 200, await response.text()
        return await response.json()

    public = (await post("/sandbox/public_token/create", {
        "institution_id": INSTITUTION, "initial_products": ["transactions"]}))["public_token"]
    access = (await post("/item/public_token/exchange", {"public_token": public}))["access_token"]
    account = (await post("/accounts/get", {"access_token": access}))["accounts"][0]["account_id"]
    token = (await post("/processor/token/create", {
        "access_token": access, "account_id": account, "processor": PROCESSOR}))["processor_token"]
    await post("/sandbox/item/reset_login", {"access_token": access})
    response = await client.post("/plaid/processor-links", json={"processorToken": token},
                                 headers={**ACME, "user-identifier": "profiled"})
    assert response.status == 202
    await client.post("/_sandbox/clock/run-until-idle", headers=ACME)
    events = (await (await client.get("/_sandbox/events", headers=ACME)).json())["data"]
    assert [(e["eventType"], e["body"]["data"]["errorCode"]) for e in events] == [
        ("plaid-error", "ITEM_LOGIN_REQUIRED")]


# -- the docs ------------------------------------------------------------------------------------

def test_the_docs_example_runs_as_written(payroll_sandbox, webhook_receiver, monkeypatch,
                                          capsys):
    """docs/aggregator.md's example, as written, against the sandbox; the link it registers
    is processed to the end (STYLE: README examples are tests)."""
    text = (REPO / "docs" / "aggregator.md").read_text()
    example = re.search(r"\n## Example\n.*?```python\n(.*?)```", text, re.S)[1]
    monkeypatch.setenv("PAYROLL_SANDBOX_URL", payroll_sandbox.base_url)
    monkeypatch.setenv("PAYROLL_SANDBOX_API_KEY", payroll_sandbox.api_key)
    monkeypatch.setenv("PAYROLL_SANDBOX_API_SECRET", payroll_sandbox.api_secret)
    exec(compile(example, "docs/aggregator.md", "exec"), {"__name__": "__main__"})
    printed = ast.literal_eval(capsys.readouterr().out)
    assert printed["data"]["status"] == "processing"
    payroll_sandbox.run_until_idle()
    link = printed["data"]["_id"]
    assert [e["eventType"] for e in events_of(webhook_receiver, link)] == [CLASSIFIED, DETECTED]
    [token] = payroll_sandbox.snapshot()["processorTokens"]
    assert token["daysRequested"] == 180
