"""The API's operations, one module per resource; importing this declares them all.

Each module declares its operations beside their handlers (operations.py); the app adds
them as routes and openapi.py describes them, from the same declarations.
"""

from functools import lru_cache

from ..operations import OPERATIONS, Operation
# Declared in the order /openapi.json has always listed them (the pages among the routes).
from . import access, aggregator_api, companies, control  # noqa: F401
from ..pages import demo, docs  # noqa: F401
from . import faults  # noqa: F401
from ..pages import flow_modules  # noqa: F401
from . import (linked_accounts, meta, pay_link, processor_links, sdk, tasks,  # noqa: F401
               users, webhooks)
from ..pipeline import Routes, add_routes, routes_of

__all__ = ["OPERATIONS", "Operation", "Routes", "add_routes", "routes_at"]


@lru_cache(maxsize=4)
def routes_at(aggregator: str) -> Routes:
    """Every operation, with the service profile's aggregator name in its paths, and its
    route: made once a process for each name, shared by every app of that name."""
    return routes_of(op.at(aggregator) for op in OPERATIONS)
