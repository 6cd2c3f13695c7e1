"""HTTP calls to the sandbox that several test modules make (manual clock, ledger)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import date
from typing import Any

from conftest import ACME, WALMART


async def call(client, method: str, path: str, *, status: int = 200, headers: dict = ACME,
               **kwargs: Any) -> dict:
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status == status, (method, path, response.status, await response.text())
    return await response.json()


async def error_of(client, method: str, path: str, status: int, *, headers: dict = ACME,
                   **kwargs: Any) -> dict:
    return (await call(client, method, path, status=status, headers=headers, **kwargs))["error"]


async def advance(client, seconds: float, *, headers: dict = ACME) -> dict:
    """POST /_sandbox/clock/advance: the clock moved `seconds` on; its answer's `data`."""
    return (await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": seconds},
                       headers=headers))["data"]


async def run_until_idle(client, *, headers: dict = ACME) -> dict:
    """POST /_sandbox/clock/run-until-idle, which must end idle; its answer's `data`."""
    body = await call(client, "POST", "/_sandbox/clock/run-until-idle", headers=headers)
    assert body["data"]["idle"] is True
    return body["data"]


async def today(client, *, headers: dict = ACME) -> date:
    body = await call(client, "GET", "/_sandbox/clock", headers=headers)
    return date.fromisoformat(body["data"]["now"][:10])


def task_body(identifier: str | None = "user-1", *, company: str | None = WALMART,
              product: str | None = "deposit", scenario: str | None = None,
              **extra: Any) -> dict[str, Any]:
    """A POST /task/create body: one `product` task at `company` for `identifier`, in
    `scenario` (a field given None is left out: the server's default, or a refusal)."""
    body = {"identifier": identifier, "company": company, "product": product,
            "scenario": scenario, **extra}
    return {name: value for name, value in body.items() if value is not None}


async def create_task(client, identifier: str | None = "user-1", *, status: int = 200,
                      headers: dict = ACME, **fields: Any) -> dict:
    """POST /task/create with API keys (the body as `task_body` makes it): the answer's
    `data`, the workflow (`id` is its first task's), or with a refusal's `status`, its
    `error`."""
    body = await call(client, "POST", "/task/create", status=status, headers=headers,
                      json=task_body(identifier, **fields))
    return body["data"] if status == 200 else body["error"]


def script_result(script: str) -> dict:
    """What a script run in a Python process of its own printed last, as JSON: for a test
    that changes a table of the package before the app is imported."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


_APP_SCRIPT = """
import asyncio, json
{setup}
from aiohttp.test_utils import TestClient, TestServer
from payroll_sandbox.app import create_app
from payroll_sandbox.settings import Settings

ACME = {acme!r}
WALMART = {walmart!r}


async def main():
    seen = {{}}
    async with TestClient(TestServer(create_app(Settings({settings})))) as client:
        async def call(method, path, body=None):
            response = await client.request(method, path, json=body, headers=ACME)
            return response.status, (await response.json())

{body}
    print(json.dumps(seen))


asyncio.run(main())
"""


def app_result(setup: str, body: str, settings: str = "") -> dict:
    """`script_result` of the real app in a process of its own: `setup` changes the
    package's tables first; `body` (inside `async with` the app's client) calls the API
    with `call(method, path, body)` under acme's keys and fills `seen`, printed as JSON."""
    return script_result(_APP_SCRIPT.format(
        setup=textwrap.dedent(setup), settings=settings, acme=ACME, walmart=WALMART,
        body=textwrap.indent(textwrap.dedent(body), " " * 8)))
