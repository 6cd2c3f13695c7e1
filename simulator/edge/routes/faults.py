"""API faults on purpose: `/_sandbox/faults/api` (DESIGN.md, Bodies and API faults; issue
23). The rules and their matching are the tenant's (domain/faults.py); the pipeline
(edge/pipeline.py) carries out what fires."""

from __future__ import annotations

from ...domain.faults import FaultRule, FaultsRecord, FaultsRequest
from ..operations import CONTROL, operation
from ..examples import Example


@operation("GET", "/_sandbox/faults/api", "The API fault rules, with how often each fired",
           **CONTROL)
async def get_api_faults(tenant) -> FaultsRecord:
    return FaultsRecord.of(tenant.api_faults)


@operation("PUT", "/_sandbox/faults/api", "Make the app's own API calls fail on purpose: an "
           "error status (with retry-after), a slow answer or a reset connection",
           body=FaultsRequest, **CONTROL,
           example=Example({"rules": [{"method": "POST", "path": "/task/create", "status": 429,
                                       "retryAfter": 5, "count": 1}]}))
async def put_api_faults(tenant, body, sandbox) -> FaultsRecord:
    """Each rule names an operation as this document does (`POST /task/create`,
    `GET /task/{taskId}`) and exactly one fault: `status` (with `retryAfter`), `latencyMs`
    or `reset`; `count` and `probability` limit it. The rules replace the tenant's. A
    faulted request is journaled with the rule that fired and changes nothing (a slow
    one is then served as usual). The control plane cannot be faulted."""
    rules = [FaultRule.from_request(rule) for rule in body.rules]
    return tenant.api_faults.put_rules(rules, sandbox.fault_targets())


@operation("DELETE", "/_sandbox/faults/api", "Clear the API fault rules", **CONTROL)
async def delete_api_faults(tenant) -> FaultsRecord:
    return tenant.api_faults.clear()

