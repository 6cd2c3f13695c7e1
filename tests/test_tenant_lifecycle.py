"""A tenant owns all its state, so a reset or a delete releases every object of it.

Each test runs tasks with real webhooks to a real receiver, takes weak references to
the tenant's objects (the tenant, its tasks, events, deliveries, webhook state, journal,
runner and timeline), resets or deletes it through HTTP, and checks with `gc` that none
of them survives.
"""

from __future__ import annotations

import gc
import weakref

from conftest import ACME, HOOKS, WALMART
from payroll_sandbox.edge.keys import SANDBOX


def keys_of(record: dict) -> dict:
    return {"x-api-key": record["apiKey"], "x-api-secret": record["apiSecret"]}


async def call(client, method: str, path: str, *, status: int = 200, headers: dict = ACME,
               **kwargs) -> dict:
    response = await client.request(method, path, headers=headers, **kwargs)
    assert response.status == status, (method, path, response.status, await response.text())
    return await response.json()


async def busy_tenant(client, receiver, headers: dict, name: str) -> list[weakref.ref]:
    """Tasks run to their end with webhooks delivered, a task left pending, a linked
    account and journal entries; weak references to all of it."""
    await call(client, "PUT", "/_sandbox/webhooks/endpoints", headers=headers,
               json={"endpoints": [{"url": receiver.url(HOOKS)}]})
    for scenario in ("happy-path", "auth-expired", "slow-processing"):
        await call(client, "POST", "/task/create", headers=headers, json={
            "identifier": f"user-{scenario}", "company": WALMART, "product": "deposit",
            "scenario": scenario})
    await call(client, "POST", "/_sandbox/clock/advance", headers=headers, json={"seconds": 60})
    await call(client, "POST", "/access-token", headers=headers, json={"identifier": "u"})
    tenant = client.server.app[SANDBOX].registry.tenants.get(name)
    assert receiver.received(HOOKS), "no webhook was delivered"
    assert len(tenant.timeline), "the slow task should still be pending"
    objects = [tenant, tenant.webhooks, tenant.journal, tenant.runner, tenant.timeline,
               tenant.events, *tenant.tasks.values(),  # (events are slotted: their log)
               *[d for ds in tenant.webhooks.deliveries.values() for d in ds],
               *tenant.accounts.values()]
    assert tenant.accounts and tenant.webhooks.deliveries
    return [weakref.ref(o) for o in objects]


def survivors(refs: list[weakref.ref]) -> list[str]:
    gc.collect()
    return [type(r()).__name__ for r in refs if r() is not None]


async def test_deleting_a_tenant_releases_every_object_of_it(sandbox, receiver):
    created = (await call(sandbox, "POST", "/_sandbox/tenants", status=201,
                          json={"name": "short-lived"}))["data"]
    keys = keys_of(created)
    refs = await busy_tenant(sandbox, receiver, keys, "short-lived")

    await call(sandbox, "DELETE", "/_sandbox/tenants/short-lived")

    assert survivors(refs) == []
    assert sandbox.server.app[SANDBOX].registry.tenants.get("short-lived") is None
    error = (await call(sandbox, "GET", "/_sandbox/clock", status=401, headers=keys))["error"]
    assert error["code"] == "invalid-credentials"


async def test_reset_releases_the_old_state_and_keeps_the_keys(sandbox, receiver):
    refs = await busy_tenant(sandbox, receiver, ACME, "acme")
    tenant_ref, kept = refs[0], refs[1:]

    await call(sandbox, "POST", "/_sandbox/reset")

    assert survivors(kept) == []
    assert tenant_ref() is not None  # the same tenant, fresh state
    assert (await call(sandbox, "GET", "/_sandbox/events"))["data"] == []
    assert (await call(sandbox, "GET", "/_sandbox/tasks"))["data"] == []


async def test_a_tenant_deletes_itself_or_what_it_created_only(sandbox):
    first = (await call(sandbox, "POST", "/_sandbox/tenants", status=201, json={}))["data"]
    second = (await call(sandbox, "POST", "/_sandbox/tenants", status=201, json={}))["data"]
    # Another's tenant, made by the control plane or not, is one that does not exist.
    error = (await call(sandbox, "DELETE", f"/_sandbox/tenants/{second['name']}", status=404,
                        headers=keys_of(first)))["error"]
    assert error["code"] == "tenant-not-found"
    error = (await call(sandbox, "DELETE", "/_sandbox/tenants/globex", status=404))["error"]
    assert error["code"] == "tenant-not-found"
    error = (await call(sandbox, "DELETE", "/_sandbox/tenants/acme", status=409))["error"]
    assert error["code"] == "tenant-not-deletable"  # a fixture account: reset it instead
    error = (await call(sandbox, "DELETE", "/_sandbox/tenants/nobody", status=404))["error"]
    assert error["code"] == "tenant-not-found"
    await call(sandbox, "DELETE", f"/_sandbox/tenants/{first['name']}", headers=keys_of(first))
    await call(sandbox, "DELETE", f"/_sandbox/tenants/{second['name']}")  # acme made it
