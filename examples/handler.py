"""A webhook handler for the payroll-connectivity service that passes every check of
`payroll-sandbox check-handler` (README: Checking your webhook handler).

What makes it pass, in the order a delivery meets it:

1. The signature first: `x-hmac-signature-sha-256` must be the HMAC-SHA256 hex of the
   raw body keyed by the API secret, compared in constant time; otherwise 401 and
   nothing is processed (a forged or unsigned delivery).
2. Each `ce-id` is processed once: a redelivery (a retry after a timeout, a replay) gets
   a 200 and changes nothing.
3. Unknown event types and unknown fields are accepted and ignored: the service adds
   them without notice.
4. Order does not matter: a task's outcome is the final status (or the patch) with the
   latest `eventTime`, whatever order they arrive in; authentication events never
   touch it.
5. It answers at once (the work here is a dictionary update; a real one would queue it)
   and never redirects.

`GET /state` shows the task outcomes it stored (`check-handler --state-url`).

    WEBHOOK_SECRET=sandbox-secret-acme-0001 python examples/handler.py --port 3000
    payroll-sandbox check-handler http://127.0.0.1:3000/webhooks \\
        --secret sandbox-secret-acme-0001 --state-url http://127.0.0.1:3000/state

`create_app(secret)` builds it for tests (tests/test_check_handler.py).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import signal
import sys
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

SIGNATURE = "x-hmac-signature-sha-256"
FINAL_STATUS_EVENTS = ("task-status-updated", "task-status-patched")
REMEMBERED_IDS = 100_000        # ce-ids kept for de-duplication (oldest forgotten first)
STATE = web.AppKey("state", dict)
EARLIEST = datetime.min.replace(tzinfo=timezone.utc)


def create_app(secret: str) -> web.Application:
    app = web.Application()
    # handled: ce-id -> None, oldest first; outcomes: task id -> its latest final status.
    app[STATE] = {"secret": secret.encode(), "handled": OrderedDict(), "outcomes": {}}
    app.router.add_post("/webhooks", receive_webhook)
    app.router.add_get("/state", show_state)
    return app


async def receive_webhook(request: web.Request) -> web.Response:
    state = request.app[STATE]
    body = await request.read()  # the raw bytes: the signature is over them, not over parsed JSON
    expected = hmac.new(state["secret"], body, hashlib.sha256).hexdigest().encode()
    given = request.headers.get(SIGNATURE, "").encode("utf-8", "replace")
    if not hmac.compare_digest(given, expected):
        return web.json_response({"error": "invalid or missing signature"}, status=401)
    event_id = request.headers.get("ce-id")
    if not event_id:
        return web.json_response({"error": "no ce-id header"}, status=400)
    if event_id in state["handled"]:
        return web.json_response({"duplicate": True})  # handled before: acknowledge only
    try:
        event = json.loads(body)
    except ValueError:
        return web.json_response({"error": "the body is not JSON"}, status=400)
    if not isinstance(event, dict):
        return web.json_response({"error": "the body is not a JSON object"}, status=400)
    handle(state, event)
    handled = state["handled"]
    handled[event_id] = None  # remembered only once handled: a failure can be retried
    if len(handled) > REMEMBERED_IDS:
        handled.popitem(last=False)
    return web.json_response({"received": True})


def handle(state: dict[str, Any], event: dict[str, Any]) -> None:
    """What this integration keeps: each task's outcome. Every other type, known or not,
    is ignored here (a real integration routes the ones it needs)."""
    if event.get("eventType") not in FINAL_STATUS_EVENTS:
        return
    data, task = event.get("data") or {}, event.get("task")
    if not task or data.get("status") not in ("completed", "failed"):
        return
    at = _time(event.get("eventTime"))
    known = state["outcomes"].get(task)
    if known is not None and known["at"] > at:
        return  # an older status arriving late (out of order): the newer one stands
    state["outcomes"][task] = {"status": data["status"], "reason": data.get("reason"), "at": at}


def _time(value: Any) -> datetime:
    try:
        at = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return EARLIEST
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


async def show_state(request: web.Request) -> web.Response:
    outcomes = request.app[STATE]["outcomes"]
    return web.json_response({"outcomes": [
        {"task": task, "status": o["status"], "reason": o["reason"]}
        for task, o in outcomes.items()]})


async def serve(app: web.Application, host: str, port: int) -> None:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    print(f"handler listening on http://{bound_host}:{bound_port}/webhooks", flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "3000")))
    parser.add_argument("--secret", default=os.environ.get("WEBHOOK_SECRET"),
                        help="the API secret webhooks are signed with (default $WEBHOOK_SECRET)")
    args = parser.parse_args()
    if not args.secret:
        print("handler: no secret: pass --secret or set WEBHOOK_SECRET", file=sys.stderr)
        return 2
    asyncio.run(serve(create_app(args.secret), args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
