"""The API's operations, one module per resource; importing this declares them all.

Each module declares its operations beside their handlers (operations.py); the app adds
them as routes and openapi.py describes them, from the same declarations.
"""

from ..operations import OPERATIONS, Operation
from . import access, aggregator_api, companies, control, faults, linked_accounts, meta, pay_link, processor_links, sdk, tasks, users, webhooks
from ..pages import demo, docs, flow_modules
from ..pipeline import add_routes

__all__ = ["OPERATIONS", "Operation", "add_routes"]
