"""A small customer app, as an integrator of the payroll-connectivity service writes one.

It starts deposit switches for its users (POST /deposits -> the service's POST /task/create),
links their bank data through an aggregator's processor token (POST /processor-links), and
receives the service's webhooks (POST /webhooks): it checks each signature, reads the
CloudEvent, and keeps what it learnt: each deposit switch's status and reason, each
processor link's state (a relink when the aggregator says ITEM_LOGIN_REQUIRED), and the
companies under maintenance. Its calls to the service ride out what a production API
sometimes answers (`call_service`: a 429 with `retry-after`, a 5xx, a dropped connection).
It knows nothing of the sandbox: point SANDBOX_URL at the real service and it works the
same.

    SANDBOX_URL=http://127.0.0.1:8080 SANDBOX_API_KEY=... SANDBOX_API_SECRET=... \\
        python examples/app.py          # serves on PORT (8000)

`create_app(url, key, secret)` builds it for tests (examples/test_app.py; the retries in
examples/test_retries.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import ClientConnectionError, ClientSession, ClientTimeout, web

SIGNATURE = "x-hmac-signature-sha-256"
SETTINGS = web.AppKey("settings", dict)
STATE = web.AppKey("state", dict)
HTTP = web.AppKey("http", ClientSession)
SLEEP = web.AppKey("sleep", Callable)
ATTEMPTS = 4             # calls to the service per request, the first one included
BACKOFF = 0.5            # seconds before the first retry without retry-after, then doubled
MAX_WAIT = 30.0          # the longest wait the app accepts, whatever retry-after says
CALL_TIMEOUT = 15.0      # seconds for one call
RETRIED = {429, 500, 502, 503, 504}


def create_app(service_url: str, api_key: str, api_secret: str, *,
               sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> web.Application:
    """The app; `sleep` is how it waits between retries (a test passes one that records)."""
    app = web.Application()
    app[SETTINGS] = {"url": service_url.rstrip("/"), "key": api_key, "secret": api_secret}
    app[SLEEP] = sleep
    # deposits: user -> {"task": id, "status": ..., "reason": ...}; events: every event
    # body received, in arrival order; outage: answer 503 to webhooks (a handler down).
    app[STATE] = {"deposits": {}, "links": {}, "maintenance": set(), "events": [],
                  "seen": set(), "outage": False}
    app.router.add_post("/deposits", start_deposit)
    app.router.add_post("/processor-links", link_bank_data)
    app.router.add_get("/processor-links/{user}", link_status)
    app.router.add_get("/deposits/{user}", deposit_status)
    app.router.add_post("/webhooks", receive_webhook)
    app.router.add_put("/outage", set_outage)
    app.cleanup_ctx.append(_http_session)
    return app


async def _http_session(app: web.Application):
    async with ClientSession() as session:
        app[HTTP] = session
        yield


async def call_service(app: web.Application, method: str, path: str,
                       body: dict | None = None) -> tuple[int, dict]:
    """One call to the service, retried as its answers allow: a 429 or 5xx after its
    `retry-after` (else a backoff doubling from BACKOFF), a dropped connection or a timeout
    after the backoff; at most ATTEMPTS calls. (status, JSON answer); the last failure
    when every attempt failed: the answer, or the connection error raised."""
    settings = app[SETTINGS]
    headers = {"x-api-key": settings["key"], "x-api-secret": settings["secret"]}
    for attempt in range(ATTEMPTS):
        last = attempt == ATTEMPTS - 1
        wait = BACKOFF * 2 ** attempt
        try:
            async with app[HTTP].request(method, settings["url"] + path, json=body,
                                         headers=headers,
                                         timeout=ClientTimeout(total=CALL_TIMEOUT)) as answer:
                document = await answer.json()
                if answer.status not in RETRIED or last:
                    return answer.status, document
                if answer.headers.get("retry-after", "").isdigit():
                    wait = float(answer.headers["retry-after"])
        except (ClientConnectionError, TimeoutError):
            # No answer: the service may or may not have done it. The sandbox faults a call
            # before doing anything; against the real service, an app that must not start
            # two tasks would look for the user's task before calling again.
            if last:
                raise
        await app[SLEEP](min(wait, MAX_WAIT))
    raise AssertionError("unreachable: the last attempt returns or raises")


async def start_deposit(request: web.Request) -> web.Response:
    """Starts a deposit switch for `user` at `company` (a scenario may be named in tests)."""
    body = await request.json()
    task = {"identifier": body["user"], "company": body["company"], "product": "deposit"}
    if "scenario" in body:
        task["scenario"] = body["scenario"]
    try:
        status, created = await call_service(request.app, "POST", "/task/create", task)
    except (ClientConnectionError, TimeoutError):
        return web.json_response({"error": "service-unreachable", "retryLater": True},
                                 status=503)
    if status == 403 and created["error"]["code"] == "company-under-maintenance":
        # Not an error of ours: tell the user to come back later.
        return web.json_response({"error": "company-under-maintenance", "retryLater": True},
                                 status=409)
    if status != 200:
        return web.json_response(created, status=502)
    task_id = created["data"]["id"]
    request.app[STATE]["deposits"][body["user"]] = {"task": task_id, "status": "queued",
                                                    "reason": None}
    return web.json_response({"task": task_id}, status=201)


async def link_bank_data(request: web.Request) -> web.Response:
    """Registers the aggregator's processor token for `user` (a new token relinks)."""
    body = await request.json()
    settings = request.app[SETTINGS]
    async with request.app[HTTP].post(
            settings["url"] + "/aggregator/processor-links",
            json={"processorToken": body["processorToken"]},
            headers={"x-api-key": settings["key"], "x-api-secret": settings["secret"],
                     "user-identifier": body["user"]}) as answer:
        linked = await answer.json()
        if answer.status >= 300:
            return web.json_response(linked, status=502)
    request.app[STATE]["links"][body["user"]] = {"link": linked["data"]["_id"],
                                                 "state": "processing"}
    return web.json_response(request.app[STATE]["links"][body["user"]], status=201)


async def link_status(request: web.Request) -> web.Response:
    link = request.app[STATE]["links"].get(request.match_info["user"])
    if link is None:
        raise web.HTTPNotFound()
    return web.json_response(link)


async def deposit_status(request: web.Request) -> web.Response:
    deposit = request.app[STATE]["deposits"].get(request.match_info["user"])
    if deposit is None:
        raise web.HTTPNotFound()
    return web.json_response(deposit)


async def receive_webhook(request: web.Request) -> web.Response:
    """A signed CloudEvent (binary mode): verify, de-duplicate by ce-id, record."""
    state = request.app[STATE]
    if state["outage"]:
        return web.Response(status=503)
    raw = await request.read()
    secret = request.app[SETTINGS]["secret"].encode()
    expected = hmac.new(secret, raw, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(request.headers.get(SIGNATURE, ""), expected):
        return web.Response(status=401, text="bad signature")
    event_id = request.headers["ce-id"]
    if event_id in state["seen"]:
        return web.Response(status=200)  # a retry or a duplicate: already handled
    state["seen"].add(event_id)
    event: dict[str, Any] = json.loads(raw)
    state["events"].append(event)
    _apply(state, event)
    return web.Response(status=200)


def _apply(state: dict, event: dict) -> None:
    """What the app learns from an event: a deposit's status and its reason, a processor
    link's state, a company going under maintenance or back."""
    kind, data = event["eventType"], event.get("data") or {}
    user = (event.get("user") or {}).get("identifier")
    if kind == "maintenance-mode":
        if data["status"] == "operational":
            state["maintenance"].discard(data["companyId"])
        else:
            state["maintenance"].add(data["companyId"])
        return
    link = state["links"].get(user)
    if link is not None and data.get("processorLink") == link["link"]:
        if kind == "aggregator-error" and data.get("errorCode") == "ITEM_LOGIN_REQUIRED":
            link["state"] = "relink-required"
        elif kind.endswith("-completed"):
            link["state"] = "ready"
        return
    deposit = state["deposits"].get(user)
    if deposit is None or event.get("task") != deposit["task"]:
        return
    if event["eventType"] == "task-status-updated":
        deposit["status"] = event["data"]["status"]
        deposit["reason"] = event["data"].get("reason")


async def set_outage(request: web.Request) -> web.Response:
    request.app[STATE]["outage"] = bool((await request.json())["outage"])
    return web.json_response({"outage": request.app[STATE]["outage"]})


if __name__ == "__main__":
    web.run_app(create_app(os.environ["SANDBOX_URL"], os.environ["SANDBOX_API_KEY"],
                           os.environ["SANDBOX_API_SECRET"]),
                host=os.environ.get("HOST", "0.0.0.0"), port=int(os.environ.get("PORT", "8000")))
