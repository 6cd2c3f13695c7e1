"""HTTP calls to the sandbox that several test modules make (manual clock, ledger)."""

from __future__ import annotations

from datetime import date
from typing import Any

from conftest import ACME


async def call(client, method: str, path: str, *, status: int = 200, headers: dict = ACME,
               **kwargs: Any) -> dict:
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status == status, (method, path, response.status, await response.text())
    return await response.json()


async def error_of(client, method: str, path: str, status: int, *, headers: dict = ACME,
                   **kwargs: Any) -> dict:
    return (await call(client, method, path, status=status, headers=headers, **kwargs))["error"]


async def advance(client, seconds: float, *, headers: dict = ACME) -> None:
    await call(client, "POST", "/_sandbox/clock/advance", json={"seconds": seconds}, headers=headers)


async def run_until_idle(client, *, headers: dict = ACME) -> None:
    body = await call(client, "POST", "/_sandbox/clock/run-until-idle", headers=headers)
    assert body["data"]["idle"] is True


async def today(client, *, headers: dict = ACME) -> date:
    body = await call(client, "GET", "/_sandbox/clock", headers=headers)
    return date.fromisoformat(body["data"]["now"][:10])
