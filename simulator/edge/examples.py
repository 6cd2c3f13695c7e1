"""Every operation's example request for /docs ("Try it out"), one that succeeds with the
bundled default tenant, and what it takes from an earlier answer (published as OpenAPI
links by openapi.py). An operation declares its own (`@operation(..., example=Example(...))`)
only where the one derived here does not fit: a parameter that names something the sandbox
makes (a task's id, ...) from the answer that makes it, any other from PARAMETER_EXAMPLES.
The order of /docs (the declarations') is an order in which they all work
(tests/test_docs_examples.py runs them so)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..domain.tasks.records import DEPOSIT_FORM
from .operations import AGGREGATOR, PATH_PARAMETER, Operation

# What the examples name: the bundled default tenant's companies and a user of yours.
WALMART = "6410a0000000000000000001"
USER = "user-1"
RECEIVER = "http://127.0.0.1:9000/webhooks"  # a local receiver of yours (any URL it allows)


def _flow_config() -> str:
    """A hosted flow's configuration as /initialize/{config} takes it (base64 of JSON)."""
    config = {"publicToken": "public-token-of-POST-access-token",
              "tasks": [{"operation": "deposit"}],
              "deeplink": {"step": "login-company", "companyId": WALMART}}
    return base64.urlsafe_b64encode(json.dumps(config).encode()).decode().rstrip("=")


# A parameter's example wherever an operation takes it (an operation's own come first).
PARAMETER_EXAMPLES: dict[str, Any] = {
    "companyId": WALMART, "identifier": USER, "user-identifier": USER, "x-api-version": "v2",
    "eventType": "task-status-updated", "fileId": DEPOSIT_FORM, "config": _flow_config(),
}


@dataclass(frozen=True)
class From:
    """What a request takes from an earlier answer, published as an OpenAPI link on the
    success answer of `method path`: `parameters` (name -> runtime expression), `fields`
    (JSON pointer into the example body -> runtime expression) or the whole `body`."""

    method: str
    path: str
    parameters: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None


@dataclass(frozen=True)
class Example:
    """An operation's example request: its body, its own parameter values, and what comes
    from an earlier answer (`after`)."""

    body: Any = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    after: From | None = None


_FIRST_ID = "$response.body#/data/0/_id"

# The operation whose answer makes the value of each parameter that names something the
# sandbox makes (an id, a token), and where in that answer it is. An operation that
# declares no example takes such a parameter's value from that answer (example_of).
MADE_BY: dict[str, From] = {name: From(method, path, parameters={name: where})
                            for name, method, path, where in (
    ("taskId", "POST", "/task/create", "$response.body#/data/id"),
    ("taskWorkflow", "POST", "/task/create", "$response.body#/data/taskWorkflow"),
    ("accountId", "GET", "/linked-account/list/{identifier}", _FIRST_ID),
    ("publicToken", "POST", "/access-token", "$response.body#/data/publicToken"),
    ("statementId", "GET", "/statements/{identifier}", _FIRST_ID),
    ("eventId", "POST", "/_sandbox/events/trigger", "$response.body#/data/id"),
    ("token", "POST", f"/_sandbox/{AGGREGATOR}/processor-token",
     "$response.body#/data/processorToken"))}


def example_of(op: Operation) -> Example:
    """An operation's example: the one it declares, else its parameters' values from the
    answers that make them (MADE_BY), the others from PARAMETER_EXAMPLES."""
    if op.example is not None:
        return op.example
    names = [*PATH_PARAMETER.findall(op.path), *(op.query or {}).get("properties", ())]
    return next((Example(after=MADE_BY[name]) for name in names if name in MADE_BY), Example())
