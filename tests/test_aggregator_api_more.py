"""The aggregator's own API beyond the processor-token flow, driven by its official client
(plaid-python) against a real app on a real (pytest-aiohttp) server with a manual clock:
its error body on every path under /aggregator-api/, /item/get, /link/token/create,
/institutions/get_by_id, /transactions/sync (the transactions the service's pipeline
classified for the item) and its webhooks (/sandbox/item/fire_webhook,
/item/webhook/update), received by a real local receiver (tests/receiver.py) and kept on
the tenant's ledger (DESIGN.md, The aggregator's own API; real-service facts 10).

The client is synchronous: each of its calls runs in a worker thread, so the event loop
serves the sandbox and the receiver meanwhile. Nothing sleeps: answers that start a
webhook come once its first attempt is answered, and the clock is moved by hand.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import uuid
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from conftest import ACME, require_extra

require_extra("plaid")
import plaid  # noqa: E402

from plaid.api import plaid_api  # noqa: E402
from plaid.model.accounts_get_request import AccountsGetRequest  # noqa: E402
from plaid.model.country_code import CountryCode  # noqa: E402
from plaid.model.institutions_get_by_id_request import InstitutionsGetByIdRequest  # noqa: E402
from plaid.model.institutions_get_by_id_request_options import (  # noqa: E402
    InstitutionsGetByIdRequestOptions)
from plaid.model.item_get_request import ItemGetRequest  # noqa: E402
from plaid.model.item_public_token_exchange_request import (  # noqa: E402
    ItemPublicTokenExchangeRequest)
from plaid.model.item_webhook_update_request import ItemWebhookUpdateRequest  # noqa: E402
from plaid.model.link_token_create_request import LinkTokenCreateRequest  # noqa: E402
from plaid.model.link_token_create_request_user import LinkTokenCreateRequestUser  # noqa: E402
from plaid.model.processor_token_create_request import ProcessorTokenCreateRequest  # noqa: E402
from plaid.model.products import Products  # noqa: E402
from plaid.model.sandbox_item_fire_webhook_request import (  # noqa: E402
    SandboxItemFireWebhookRequest)
from plaid.model.sandbox_item_reset_login_request import SandboxItemResetLoginRequest  # noqa: E402
from plaid.model.sandbox_public_token_create_request import (  # noqa: E402
    SandboxPublicTokenCreateRequest)
from plaid.model.sandbox_public_token_create_request_options import (  # noqa: E402
    SandboxPublicTokenCreateRequestOptions)
from plaid.model.sandbox_public_token_create_request_options_transactions import (  # noqa: E402
    SandboxPublicTokenCreateRequestOptionsTransactions)
from plaid.model.sync_updates_available_webhook import SyncUpdatesAvailableWebhook  # noqa: E402
from plaid.model.transactions_sync_request import TransactionsSyncRequest  # noqa: E402
from plaid.model.transactions_sync_request_options import (  # noqa: E402
    TransactionsSyncRequestOptions)
from plaid.model.webhook_type import WebhookType  # noqa: E402
from plaid.model.webhook_update_acknowledged_webhook import (  # noqa: E402
    WebhookUpdateAcknowledgedWebhook)

PREFIX = "/aggregator-api"
INSTITUTION = "ins_109508"
PROCESSOR = "atomic"
ERROR_FIELDS = {"error_type", "error_code", "error_message", "display_message", "request_id"}
HOOK = "/bank-hooks"
SYNC = "TRANSACTIONS.SYNC_UPDATES_AVAILABLE"
START = datetime(2026, 5, 28, 20, 26, 40, tzinfo=timezone.utc)  # conftest's manual clock
# The paths this file adds, and a body each takes (an access token filled in).
NEW_OPERATIONS = {
    "/item/get": {},
    "/item/webhook/update": {"webhook": None},
    "/link/token/create": {"client_name": "App", "language": "en", "country_codes": ["US"]},
    "/institutions/get_by_id": {"institution_id": INSTITUTION, "country_codes": ["US"]},
    "/transactions/sync": {},
    "/sandbox/item/fire_webhook": {"webhook_code": "SYNC_UPDATES_AVAILABLE"},
}


# -- helpers ----------------------------------------------------------------------------------

class Aggregator:
    """The official client as a customer configures it (docs/aggregator.md), each call run
    in a worker thread; and the sandbox's own API beside it, for the test's checks."""

    def __init__(self, client, secret: str | None = None) -> None:
        self.http = client
        self.base = str(client.make_url("")).rstrip("/")
        configuration = plaid.Configuration(
            host=f"{self.base}{PREFIX}",
            api_key={"clientId": ACME["x-api-key"], "secret": secret or ACME["x-api-secret"]})
        self.api = plaid_api.PlaidApi(plaid.ApiClient(configuration))

    async def __call__(self, operation: str, request: Any) -> Any:
        return await asyncio.to_thread(getattr(self.api, operation), request)

    async def refused(self, operation: str, request: Any) -> tuple[int, dict[str, Any]]:
        """The status and the aggregator's error body of a call the client raised on."""
        with pytest.raises(plaid.ApiException) as raised:
            await self(operation, request)
        return raised.value.status, json.loads(raised.value.body)

    async def link(self, products: tuple[str, ...] = ("transactions",), webhook: str | None = None,
                   days_requested: int | None = None) -> tuple[str, str, list[Any]]:
        """A new item: (access token, item id, its accounts)."""
        options: dict[str, Any] = {}
        if webhook is not None:
            options["webhook"] = webhook
        if days_requested is not None:
            options["transactions"] = SandboxPublicTokenCreateRequestOptionsTransactions(
                days_requested=days_requested)
        created = await self("sandbox_public_token_create", SandboxPublicTokenCreateRequest(
            institution_id=INSTITUTION, initial_products=[Products(p) for p in products],
            **({"options": SandboxPublicTokenCreateRequestOptions(**options)} if options else {})))
        exchanged = await self("item_public_token_exchange", ItemPublicTokenExchangeRequest(
            public_token=created.public_token))
        accounts = await self("accounts_get",
                              AccountsGetRequest(access_token=exchanged.access_token))
        return exchanged.access_token, exchanged.item_id, accounts.accounts

    async def sandbox(self, method: str, path: str, body: Any = None,
                      headers: dict[str, str] | None = None) -> Any:
        """A call of the sandbox's own API (200s only), its `data`."""
        response = await self.http.request(method, path, json=body,
                                           headers={**ACME, **(headers or {})})
        assert response.status < 300, (path, response.status, await response.text())
        return (await response.json())["data"]

    async def raw(self, method: str, path: str, body: Any = None,
                  headers: dict[str, str] | None = None) -> tuple[int, Any, Any]:
        """What the client would never send: (status, headers, JSON body)."""
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        response = await self.http.request(method, f"{PREFIX}{path}", data=data, headers={
            "content-type": "application/json", **(headers or {})})
        return response.status, response.headers, await response.json()


@pytest.fixture
async def aggregator(make_client) -> Aggregator:
    return Aggregator(await make_client())


def keys() -> dict[str, str]:
    return {"PLAID-CLIENT-ID": ACME["x-api-key"], "PLAID-SECRET": ACME["x-api-secret"]}


def webhook_body(received) -> dict[str, Any]:
    """A webhook the receiver got: plain JSON in the aggregator's conventions, none of the
    service's CloudEvent headers or signature."""
    assert received.headers["content-type"] == "application/json"
    assert not [name for name in received.headers
                if name.startswith("ce-") or name == "x-hmac-signature-sha-256"]
    return json.loads(received.body)


def read_with_client(aggregator: Aggregator, body: bytes, model: type) -> Any:
    """A webhook body read by the official client's own model of it (strict types)."""
    return aggregator.api.api_client.deserialize(SimpleNamespace(data=body), (model,), True)


# -- every path answers in the aggregator's error body ----------------------------------------

async def test_an_unknown_path_is_the_aggregators_404_and_the_client_raises_with_its_type(
        aggregator):
    """Issue 33: "Every path under `/aggregator-api/` answers in the aggregator's error
    shape, unknown ones included (... the official client raises with no `error_type`)"."""
    client = aggregator.api.api_client

    def call_unknown() -> None:  # a call of an API version the sandbox does not serve
        client.call_api("/beta/transactions/v9/get", "POST",
                        header_params={"Content-Type": "application/json"},
                        body={"access_token": "access-sandbox-x"},
                        auth_settings=["clientId", "secret"], response_type=None)

    with pytest.raises(plaid.ApiException) as raised:
        await asyncio.to_thread(call_unknown)
    assert raised.value.status == 404
    body = json.loads(raised.value.body)
    assert set(body) == ERROR_FIELDS
    assert (body["error_type"], body["error_code"]) == ("INVALID_REQUEST", "NOT_FOUND")
    assert "/aggregator-api/beta/transactions/v9/get" in body["error_message"]
    assert body["request_id"] and body["display_message"] is None

    for method, path in (("GET", ""), ("DELETE", "/nothing/here"), ("POST", "/")):
        status, _, body = await aggregator.raw(method, path)
        assert (status, body["error_code"], set(body)) == (404, "NOT_FOUND", ERROR_FIELDS)


@pytest.mark.parametrize("path", sorted({*NEW_OPERATIONS, "/accounts/get"}))
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_another_method_than_post_is_a_405_in_the_aggregators_error_body(aggregator,
                                                                              path, method):
    """Every operation of the aggregator's API is POST; another method is refused in its
    error body (with Allow), not the sandbox's `{"error": ...}`."""
    status, headers, body = await aggregator.raw(method, path, headers=keys())
    assert status == 405 and headers["allow"] == "POST"
    assert set(body) == ERROR_FIELDS
    assert (body["error_type"], body["error_code"]) == ("INVALID_REQUEST", "METHOD_NOT_ALLOWED")
    assert f"{method} is not allowed on {PREFIX}{path}" in body["error_message"]


@pytest.mark.parametrize("path", sorted(NEW_OPERATIONS))
async def test_the_new_operations_refuse_bad_requests_in_the_aggregators_terms(aggregator, path):
    """Facts 10 and DESIGN.md: malformed JSON, missing fields, fields it does not know and
    bad credentials are the aggregator's 400s (INVALID_BODY, MISSING_FIELDS,
    UNKNOWN_FIELDS, INVALID_API_KEYS), on the operations added here too."""
    access_token, _, _ = await aggregator.link()
    body = {"access_token": access_token, **NEW_OPERATIONS[path]}
    if path in ("/link/token/create", "/institutions/get_by_id"):
        del body["access_token"]
    required = {"/link/token/create": "client_name", "/institutions/get_by_id": "institution_id",
                "/sandbox/item/fire_webhook": "webhook_code"}.get(path, "access_token")
    cases = [
        (b'{"access_token": ', keys(), "INVALID_REQUEST", "INVALID_BODY", "JSON"),
        ({k: v for k, v in body.items() if k != required}, keys(), "INVALID_REQUEST",
         "MISSING_FIELDS", required),
        ({**body, "surprise": 1}, keys(), "INVALID_REQUEST", "UNKNOWN_FIELDS", "surprise"),
        (body, {**keys(), "PLAID-SECRET": "wrong"}, "INVALID_INPUT", "INVALID_API_KEYS",
         "client_id or secret"),
        (body, None, "INVALID_REQUEST", "MISSING_FIELDS", "client_id, secret"),
    ]
    for sent, headers, error_type, error_code, named in cases:
        status, _, answer = await aggregator.raw("POST", path, sent, headers)
        assert status == 400, (sent, answer)
        assert set(answer) == ERROR_FIELDS
        assert (answer["error_type"], answer["error_code"]) == (error_type, error_code), answer
        assert named in answer["error_message"]


# -- /item/get, /link/token/create, /institutions/get_by_id -----------------------------------

async def test_item_get_shows_the_item_its_error_after_a_reset_login_and_its_last_webhook(
        aggregator, receiver):
    """/item/get answers the item (institution, products, webhook) and reports a reset
    login as the item's `error` (ITEM_ERROR / ITEM_LOGIN_REQUIRED) rather than failing, as
    the aggregator does; `status.last_webhook` names the webhook it fired last."""
    url = receiver.url(HOOK)
    access_token, item_id, _ = await aggregator.link(webhook=url)
    got = await aggregator("item_get", ItemGetRequest(access_token=access_token))
    item = got.item
    assert (item.item_id, item.institution_id, item.institution_name, item.webhook) == (
        item_id, INSTITUTION, "First Platypus Bank", url)
    assert [p.value for p in item.billed_products] == ["transactions"]
    assert item.error is None and got.request_id
    assert got.status.last_webhook is None
    assert got.status.transactions.last_successful_update == START

    await aggregator("sandbox_item_reset_login",
                     SandboxItemResetLoginRequest(access_token=access_token))
    item = (await aggregator("item_get", ItemGetRequest(access_token=access_token))).item
    assert (item.error.error_type.value, item.error.error_code) == (
        "ITEM_ERROR", "ITEM_LOGIN_REQUIRED")

    await aggregator("sandbox_item_fire_webhook", SandboxItemFireWebhookRequest(
        access_token=access_token, webhook_code="NEW_ACCOUNTS_AVAILABLE"))
    status = (await aggregator("item_get", ItemGetRequest(access_token=access_token))).status
    assert (status.last_webhook.code_sent, status.last_webhook.sent_at) == (
        "NEW_ACCOUNTS_AVAILABLE", START)

    status_code, body = await aggregator.refused("item_get", ItemGetRequest(
        access_token="access-sandbox-00000000-0000-4000-8000-000000000000"))
    assert (status_code, body["error_code"]) == (400, "INVALID_ACCESS_TOKEN")


async def test_link_token_create_makes_a_link_token_for_four_hours(aggregator):
    """/link/token/create: `link-<environment>-<uuid>`, expiring 4 hours after the tenant's
    clock; update mode names an item of the tenant's (else INVALID_ACCESS_TOKEN)."""
    request = dict(client_name="Payroll App", language="en", country_codes=[CountryCode("US")],
                   user=LinkTokenCreateRequestUser(client_user_id="user-7"),
                   products=[Products("transactions")])
    made = await aggregator("link_token_create", LinkTokenCreateRequest(**request))
    assert re.fullmatch(r"link-sandbox-[0-9a-f-]{36}", made.link_token), made.link_token
    uuid.UUID(made.link_token.removeprefix("link-sandbox-"))
    assert made.expiration == START + timedelta(hours=4) and made.request_id
    again = await aggregator("link_token_create", LinkTokenCreateRequest(**request))
    assert again.link_token != made.link_token

    access_token, _, _ = await aggregator.link()
    update = await aggregator("link_token_create", LinkTokenCreateRequest(
        **request, access_token=access_token))
    assert update.link_token.startswith("link-sandbox-")
    status, body = await aggregator.refused("link_token_create", LinkTokenCreateRequest(
        **request, access_token="access-sandbox-00000000-0000-4000-8000-000000000000"))
    assert (status, body["error_type"], body["error_code"]) == (
        400, "INVALID_INPUT", "INVALID_ACCESS_TOKEN")


async def test_institutions_get_by_id_answers_the_sandbox_institutions(aggregator):
    """/institutions/get_by_id: a sandbox institution, its optional metadata and status when
    asked; an id that is none of them is INVALID_INSTITUTION, here and when linking."""
    plain = await aggregator("institutions_get_by_id", InstitutionsGetByIdRequest(
        institution_id=INSTITUTION, country_codes=[CountryCode("US")]))
    institution = plain.institution
    assert (institution.institution_id, institution.name, institution.oauth) == (
        INSTITUTION, "First Platypus Bank", False)
    assert {"auth", "transactions"} <= {p.value for p in institution.products}
    assert [c.value for c in institution.country_codes] == ["US"]
    assert institution.routing_numbers and "url" not in institution and "status" not in institution

    full = (await aggregator("institutions_get_by_id", InstitutionsGetByIdRequest(
        institution_id="ins_127287", country_codes=[CountryCode("US"), CountryCode("GB")],
        options=InstitutionsGetByIdRequestOptions(include_optional_metadata=True,
                                                  include_status=True)))).institution
    assert full.oauth is True and full.url.startswith("https://") and full.primary_color
    assert full.status.item_logins.status == "HEALTHY"

    for institution_id, codes in (("ins_999999", ["US"]), (INSTITUTION, ["GB"])):
        status, body = await aggregator.refused("institutions_get_by_id",
                                                InstitutionsGetByIdRequest(
            institution_id=institution_id, country_codes=[CountryCode(c) for c in codes]))
        assert (status, body["error_type"], body["error_code"]) == (
            400, "INVALID_INPUT", "INVALID_INSTITUTION")
    status, body = await aggregator.refused("sandbox_public_token_create",
                                            SandboxPublicTokenCreateRequest(
        institution_id="ins_999999", initial_products=[Products("transactions")]))
    assert (status, body["error_code"]) == (400, "INVALID_INSTITUTION")


# -- /transactions/sync and the pipeline --------------------------------------------------------

async def sync_all(aggregator: Aggregator, access_token: str, count: int,
                   account_id: str | None = None) -> tuple[list[Any], list[str]]:
    """Every page of /transactions/sync from the start: (the transactions, the cursors)."""
    added, cursors, cursor = [], [], ""
    while True:
        options = ({"options": TransactionsSyncRequestOptions(account_id=account_id)}
                   if account_id else {})
        page = await aggregator("transactions_sync", TransactionsSyncRequest(
            access_token=access_token, cursor=cursor, count=count, **options))
        assert page.transactions_update_status.value == "HISTORICAL_UPDATE_COMPLETE"
        assert page.modified == [] and page.removed == [] and len(page.added) <= count
        added += page.added
        cursor = page.next_cursor
        cursors.append(cursor)
        if not page.has_more:
            return added, cursors


async def test_transactions_sync_answers_the_transactions_the_pipeline_classified(aggregator):
    """Issue 33: "`/transactions/sync` (the same transactions the service classified for
    that item, so the two sides agree)". The processor link of the item's checking account
    pulls exactly the checking account's transactions that sync pages through, and its
    employer matches and recurring transactions are made of them."""
    access_token, item_id, accounts = await aggregator.link(days_requested=120)
    checking, savings = accounts
    token = (await aggregator("processor_token_create", ProcessorTokenCreateRequest(
        access_token=access_token, account_id=checking.account_id,
        processor=PROCESSOR))).processor_token
    user = {"user-identifier": "synced-user"}
    link = await aggregator.sandbox("POST", "/aggregator/processor-links",
                                    {"processorToken": token}, user)
    await aggregator.sandbox("POST", "/_sandbox/clock/run-until-idle")

    everything, cursors = await sync_all(aggregator, access_token, count=17)
    assert len(everything) > 17 and len(set(cursors)) == len(cursors)
    assert {t.account_id for t in everything} == {checking.account_id, savings.account_id}
    assert [t.date for t in everything] == sorted(t.date for t in everything)
    first_day = (START - timedelta(days=119)).date()
    assert first_day <= everything[0].date and everything[-1].date <= START.date()
    assert all(t.pending is False and t.iso_currency_code == "USD" for t in everything)

    # The pipeline pulled the checking account's history: the same transactions.
    [pulled] = [l for l in (await aggregator.sandbox("GET", "/_sandbox/snapshot"))["processorLinks"]
                if l["id"] == link["_id"]]
    mine, _ = await sync_all(aggregator, access_token, count=500, account_id=checking.account_id)
    assert [(t.transaction_id, t.date.isoformat(), t.amount, t.name) for t in mine] == [
        (t["transaction_id"], t["date"], t["amount"], t["name"]) for t in pulled["transactions"]]
    assert mine == [t for t in everything if t.account_id == checking.account_id]

    # Its results are made of them: each employer's deposits, each merchant's charges.
    wages = [t for t in mine if t.personal_finance_category.detailed == "INCOME_WAGES"]
    assert wages and all(t.amount < 0 for t in wages)
    matches = (await aggregator.http.get("/aggregator/employer-matches",
                                         headers={**ACME, **user}))
    matches = (await matches.json())["data"]
    assert matches
    for match in matches:
        deposits = [t for t in wages
                    if t.counterparties[0].name.casefold() == match["name"].casefold()]
        assert len(deposits) == match["transactionsMatched"], match
        assert max(t.date for t in deposits).isoformat() == match["lastDepositDate"]
        assert round(-statistics.fmean(t.amount for t in deposits), 2) == \
            match["averageDepositAmount"]
    recurring = await aggregator.http.get("/aggregator/recurring-transactions",
                                          headers={**ACME, **user})
    for charge in (await recurring.json())["data"]:
        charges = [t for t in mine if t.merchant_name == charge["merchant"]]
        assert len(charges) == charge["transactions"], charge
        assert {t.amount for t in charges} == {charge["amount"]}
        assert max(t.date for t in charges).isoformat() == charge["lastDate"]

    # The same item read again, later, is the same history (it does not depend on when).
    await aggregator.sandbox("POST", "/_sandbox/clock/advance", {"seconds": 3 * 86_400})
    assert (await sync_all(aggregator, access_token, count=500))[0] == everything


async def test_transactions_sync_cursors_and_refusals(aggregator):
    """A cursor that reached the end answers nothing new, with itself; a cursor it did not
    give is INVALID_FIELD; an item whose login was reset is ITEM_LOGIN_REQUIRED, one linked
    for auth only PRODUCTS_NOT_SUPPORTED (as the pipeline's pull of it fails)."""
    access_token, _, accounts = await aggregator.link(days_requested=30)
    everything, cursors = await sync_all(aggregator, access_token, count=500)
    end = await aggregator("transactions_sync", TransactionsSyncRequest(
        access_token=access_token, cursor=cursors[-1]))
    assert (end.added, end.has_more, end.next_cursor) == ([], False, cursors[-1])
    status, body = await aggregator.refused("transactions_sync", TransactionsSyncRequest(
        access_token=access_token, cursor="bm90LWEtY3Vyc29y"))
    assert (status, body["error_type"], body["error_code"]) == (
        400, "INVALID_REQUEST", "INVALID_FIELD")
    other_token, _, _ = await aggregator.link()
    status, body = await aggregator.refused("transactions_sync", TransactionsSyncRequest(
        access_token=other_token, cursor=cursors[-1]))  # another item's cursor
    assert body["error_code"] == "INVALID_FIELD"
    status, body = await aggregator.refused("transactions_sync", TransactionsSyncRequest(
        access_token=access_token, options=TransactionsSyncRequestOptions(account_id="nope")))
    assert body["error_code"] == "INVALID_ACCOUNT_ID"

    auth_only, _, _ = await aggregator.link(products=("auth",))
    status, body = await aggregator.refused("transactions_sync", TransactionsSyncRequest(
        access_token=auth_only))
    assert (status, body["error_type"], body["error_code"]) == (
        400, "ITEM_ERROR", "PRODUCTS_NOT_SUPPORTED")
    await aggregator("sandbox_item_reset_login",
                     SandboxItemResetLoginRequest(access_token=access_token))
    status, body = await aggregator.refused("transactions_sync", TransactionsSyncRequest(
        access_token=access_token))
    assert (status, body["error_type"], body["error_code"]) == (
        400, "ITEM_ERROR", "ITEM_LOGIN_REQUIRED")


# -- the aggregator's webhooks ------------------------------------------------------------------

async def test_fire_webhook_sends_the_aggregators_webhook_to_the_items_url_on_the_ledger(
        aggregator, receiver):
    """Facts 10: "its sandbox has ... `/sandbox/item/fire_webhook`". The webhook goes to the
    URL the item was made with, as the aggregator sends it (JSON, snake_case,
    {webhook_type, webhook_code, item_id, environment, ...}: its official client reads it),
    and it is on the tenant's ledger with its delivery and attempt like every webhook."""
    url = receiver.url(HOOK)
    access_token, item_id, _ = await aggregator.link(webhook=url)
    fired = await aggregator("sandbox_item_fire_webhook", SandboxItemFireWebhookRequest(
        access_token=access_token, webhook_code="SYNC_UPDATES_AVAILABLE"))
    assert fired.webhook_fired is True and fired.request_id

    [received] = receiver.received(HOOK)  # there when the answer came: nothing to wait for
    assert webhook_body(received) == {
        "webhook_type": "TRANSACTIONS", "webhook_code": "SYNC_UPDATES_AVAILABLE",
        "item_id": item_id, "initial_update_complete": True,
        "historical_update_complete": True, "environment": "sandbox"}
    webhook = read_with_client(aggregator, received.body, SyncUpdatesAvailableWebhook)
    assert (webhook.item_id, webhook.environment.value) == (item_id, "sandbox")

    [event] = await aggregator.sandbox("GET", f"/_sandbox/events?type={SYNC}")
    assert event["body"] == webhook_body(received) and event["delivery"] == "delivered"
    [delivery] = event["deliveries"]
    assert (delivery["url"], delivery["state"]) == (url, "delivered")
    [attempt] = delivery["attempts"]
    assert (attempt["status"], attempt["error"], attempt["time"]) == (
        200, None, "2026-05-28T20:26:40.000Z")
    assert attempt["requestHeaders"] == {"content-type": "application/json"}
    assert await aggregator.sandbox("GET", f"/_sandbox/events/{event['id']}") == event

    # The ledger's replay sends it to the item's URL again, as any event.
    replayed = await aggregator.sandbox("POST", "/_sandbox/webhooks/replay",
                                        {"eventId": event["id"]})
    assert [r["deliveries"] for r in replayed] == [[f"{event['id']}.2"]]
    await aggregator.sandbox("POST", "/_sandbox/clock/run-until-idle")
    assert [webhook_body(r) for r in receiver.received(HOOK)] == [event["body"]] * 2


async def test_a_refused_webhook_is_retried_on_the_tenants_clock(aggregator, receiver):
    """The aggregator's webhooks go through the one outbox: an attempt the receiver refuses
    is on the ledger and retried 30 seconds of the tenant's clock later."""
    url = receiver.url(HOOK)
    receiver.program(HOOK, 500, 200)
    access_token, _, _ = await aggregator.link(webhook=url)
    await aggregator("sandbox_item_fire_webhook", SandboxItemFireWebhookRequest(
        access_token=access_token, webhook_code="DEFAULT_UPDATE",
        webhook_type=WebhookType("TRANSACTIONS")))
    [event] = await aggregator.sandbox("GET", "/_sandbox/events?type=TRANSACTIONS.DEFAULT_UPDATE")
    assert event["delivery"] == "pending"
    [delivery] = event["deliveries"]
    assert [a["status"] for a in delivery["attempts"]] == [500]
    assert delivery["nextAttemptAt"] == "2026-05-28T20:27:10.000Z"

    await aggregator.sandbox("POST", "/_sandbox/clock/advance", {"seconds": 30})
    event = await aggregator.sandbox("GET", f"/_sandbox/events/{event['id']}")
    assert event["delivery"] == "delivered"
    assert [a["status"] for a in event["deliveries"][0]["attempts"]] == [500, 200]
    bodies = [webhook_body(r) for r in receiver.received(HOOK)]
    assert bodies[0] == bodies[1] == event["body"]
    assert (event["body"]["webhook_code"], event["body"]["error"]) == ("DEFAULT_UPDATE", None)
    assert event["body"]["new_transactions"] > 0


async def test_webhook_update_moves_the_items_webhooks_and_acknowledges_at_the_new_url(
        aggregator, receiver):
    """/item/webhook/update: the new URL gets WEBHOOK_UPDATE_ACKNOWLEDGED, and the item's
    webhooks go there from then on; an item made without a webhook URL fires none
    (SANDBOX_WEBHOOK_INVALID) until it has one."""
    access_token, item_id, _ = await aggregator.link()
    status, body = await aggregator.refused("sandbox_item_fire_webhook",
                                            SandboxItemFireWebhookRequest(
        access_token=access_token, webhook_code="SYNC_UPDATES_AVAILABLE"))
    assert (status, body["error_type"], body["error_code"]) == (
        400, "SANDBOX_ERROR", "SANDBOX_WEBHOOK_INVALID")

    url = receiver.url("/moved")
    updated = await aggregator("item_webhook_update", ItemWebhookUpdateRequest(
        access_token=access_token, webhook=url))
    assert updated.item.webhook == url
    [acknowledged] = receiver.received("/moved")
    webhook = read_with_client(aggregator, acknowledged.body, WebhookUpdateAcknowledgedWebhook)
    assert (webhook.webhook_code, webhook.new_webhook_url, webhook.item_id) == (
        "WEBHOOK_UPDATE_ACKNOWLEDGED", url, item_id)

    await aggregator("sandbox_item_fire_webhook", SandboxItemFireWebhookRequest(
        access_token=access_token, webhook_code="USER_ACCOUNT_REVOKED"))
    codes = [webhook_body(r)["webhook_code"] for r in receiver.received("/moved")]
    assert codes == ["WEBHOOK_UPDATE_ACKNOWLEDGED", "USER_ACCOUNT_REVOKED"]

    # A URL the sandbox may not send to is refused, as a webhook endpoint's would be.
    status, _, body = await aggregator.raw("POST", "/item/webhook/update", {
        "access_token": access_token, "webhook": "ftp://example.invalid/hooks"}, keys())
    assert (status, body["error_code"]) == (400, "INVALID_FIELD")
    assert "webhook" in body["error_message"]


async def test_fire_webhook_refusals_and_login_repaired(aggregator, receiver):
    """A webhook of a product the item lacks is SANDBOX_PRODUCT_NOT_ENABLED, a type that
    is not the code's INVALID_FIELD; LOGIN_REPAIRED repairs a reset login, so the item's
    calls and the service's pull work again."""
    url = receiver.url(HOOK)
    auth_only, _, _ = await aggregator.link(products=("auth",), webhook=url)
    for code, webhook_type in (("SYNC_UPDATES_AVAILABLE", None), ("DEFAULT_UPDATE", "HOLDINGS"),
                               ("PRODUCT_READY", None)):
        status, body = await aggregator.refused("sandbox_item_fire_webhook",
                                                SandboxItemFireWebhookRequest(
            access_token=auth_only, webhook_code=code,
            **({"webhook_type": WebhookType(webhook_type)} if webhook_type else {})))
        assert (status, body["error_type"], body["error_code"]) == (
            400, "SANDBOX_ERROR", "SANDBOX_PRODUCT_NOT_ENABLED"), (code, body)
    status, body = await aggregator.refused("sandbox_item_fire_webhook",
                                            SandboxItemFireWebhookRequest(
        access_token=auth_only, webhook_code="LOGIN_REPAIRED",
        webhook_type=WebhookType("TRANSACTIONS")))
    assert (status, body["error_code"]) == (400, "INVALID_FIELD")
    assert receiver.received(HOOK) == []

    access_token, _, accounts = await aggregator.link(webhook=url)
    await aggregator("sandbox_item_reset_login",
                     SandboxItemResetLoginRequest(access_token=access_token))
    status, body = await aggregator.refused("accounts_get", AccountsGetRequest(
        access_token=access_token))
    assert body["error_code"] == "ITEM_LOGIN_REQUIRED"
    await aggregator("sandbox_item_fire_webhook", SandboxItemFireWebhookRequest(
        access_token=access_token, webhook_code="LOGIN_REPAIRED"))
    assert [webhook_body(r)["webhook_code"] for r in receiver.received(HOOK)] == [
        "LOGIN_REPAIRED"]
    assert (await aggregator("accounts_get", AccountsGetRequest(
        access_token=access_token))).item.error is None
    token = (await aggregator("processor_token_create", ProcessorTokenCreateRequest(
        access_token=access_token, account_id=accounts[0].account_id,
        processor=PROCESSOR))).processor_token
    user = {"user-identifier": "repaired"}
    await aggregator.sandbox("POST", "/aggregator/processor-links", {"processorToken": token},
                             user)
    await aggregator.sandbox("POST", "/_sandbox/clock/run-until-idle")
    results = await aggregator.http.get("/aggregator/employer-matches", headers={**ACME, **user})
    assert (await results.json())["status"] == "completed"


async def test_the_aggregators_webhooks_survive_a_snapshot(aggregator, receiver):
    """A webhook of the aggregator's is an event of the tenant's: a snapshot keeps it with
    the URL it went to, and a restore gives it back to the ledger as it was."""
    access_token, _, _ = await aggregator.link(webhook=receiver.url(HOOK))
    await aggregator("sandbox_item_fire_webhook", SandboxItemFireWebhookRequest(
        access_token=access_token, webhook_code="PENDING_DISCONNECT"))
    taken = await aggregator.sandbox("GET", "/_sandbox/snapshot")
    [stored] = [e for e in taken["events"] if e.get("url")]
    assert (stored["url"], stored["type"]) == (receiver.url(HOOK), "ITEM.PENDING_DISCONNECT")
    before = await aggregator.sandbox("GET", "/_sandbox/events")
    await aggregator.sandbox("POST", "/_sandbox/reset")
    await aggregator.sandbox("POST", "/_sandbox/snapshot", taken)
    assert await aggregator.sandbox("GET", "/_sandbox/events") == before
    assert len(receiver.received(HOOK)) == 1  # a restore sends nothing again
