"""Every bundled scenario's event bodies as the webhooks send them, byte for byte, to compare
two trees (no target): a seeded app on a manual clock runs one task of each task scenario to
its end, then triggers a few event types; the bodies go to OUT one a line, with the two
fields that differ from run to run masked (the public token, random as the real service's;
eventTime, on a clock that starts at the wall time). Run it with each tree's interpreter and
diff the files:

    /tmp/vbase/bin/python bench/event_bytes.py /tmp/before.txt
    python bench/event_bytes.py /tmp/after.txt && diff /tmp/before.txt /tmp/after.txt
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys

from aiohttp.test_utils import TestClient, TestServer

from payroll_sandbox.app import create_app
from payroll_sandbox.edge.keys import SANDBOX
from payroll_sandbox.settings import Settings

ACME = {"x-api-key": "sandbox-key-acme-0001", "x-api-secret": "sandbox-secret-acme-0001"}
WALMART = "6410a0000000000000000001"
TRIGGERED = ("task-status-updated", "earn-user-data", "statements-added", "deposit-switch-removed",
             "maintenance-mode", "task-workflow-finished", "employer-classification-completed",
             "pay-link-accounts-updated", "linked-account-disconnected")
MASKED = re.compile(r'"(eventTime|publicToken)":"[^"]*"')


async def bodies() -> list[str]:
    app = create_app(Settings(clock="manual", seed=7))
    async with TestClient(TestServer(app)) as client:
        async def call(method: str, path: str, body=None):
            answer = await client.request(method, path, json=body, headers=ACME)
            return (await answer.json()).get("data")

        for scenario in await call("GET", "/_sandbox/scenarios"):
            if scenario["kind"] != "task":
                continue
            product = (scenario["products"] or ["deposit"])[0]
            company = WALMART
            if product not in ("deposit", "verify", "tax"):
                found = await call("GET", f"/company/list?product={product}&limit=1")
                if not found:
                    continue
                company = found[0]["_id"]
            await call("POST", "/task/create", {"identifier": f"u-{scenario['name']}",
                                                "company": company, "product": product,
                                                "scenario": scenario["name"]})
            await call("POST", "/_sandbox/clock/run-until-idle")
        for event_type in TRIGGERED:
            await call("POST", "/_sandbox/events/trigger",
                       {"eventType": event_type, "identifier": "u-happy-path"})
        tenant = app[SANDBOX].registry.tenants.get("acme")
        return [MASKED.sub(r'"\1":"-"', event.body_json.decode()) for event in tenant.events.events]


def main() -> None:
    lines = asyncio.run(bodies())
    text = "\n".join(lines) + "\n"
    open(sys.argv[1], "w").write(text)
    print(f"{len(lines)} event bodies, sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]}")


if __name__ == "__main__":
    main()
