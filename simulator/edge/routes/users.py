"""The real service's user operations (docs/spec/real-api-surface.md, Users): the
payment methods a workflow can offer, a user's tasks, and the end of continuous access."""

from __future__ import annotations

from ...domain.identity import users
from ...domain.shapes import given
from ...schemas.api import (SUCCEEDED, StoredPaymentMethods, Success, TaskDetails, UserRequest,
                           UserTasksQuery)
from ...schemas.responses import UserRemoved
from ..operations import CONTROL, operation
from ..examples import USER, Example


@operation("PUT", "/user", "Store the bank accounts and cards a user's tasks can offer",
           body=UserRequest, errors=(429,),
           example=Example({"identifier": USER, "data": {"bankAccounts": [{
               "_id": "checking-1", "title": "Everyday checking", "accountNumber": "000123456789",
               "routingNumber": "021000021", "accountType": "checking"}]}}))
async def put_user(tenant, body) -> Success:
    """What is stored replaces what was; GET /_sandbox/users/{identifier}/payment-methods
    shows it."""
    users.put_user(tenant, body.identifier, body.data)
    return SUCCEEDED


@operation("GET", "/user/{identifier}/tasks", "A user's tasks, oldest first",
           query=UserTasksQuery, errors=(404,))
async def list_user_tasks(tenant, params, query) -> list[TaskDetails]:
    available = given(query.payroll_data_available)
    return tenant.tasks.of_user(params["identifier"], status=given(query.status),
                                payroll_data=None if available is None else available == "true")


@operation("PUT", "/user/{identifier}/end-monitoring", "End continuous access to a user's "
           "linked accounts", settles=True, errors=(404,))
async def end_monitoring(tenant, params, sandbox) -> Success:
    users.end_monitoring(tenant, params["identifier"])
    return SUCCEEDED


@operation("GET", "/_sandbox/users/{identifier}/payment-methods",
           "A user's stored bank accounts and cards", errors=(404,), **CONTROL)
async def stored_payment_methods(tenant, params) -> StoredPaymentMethods:
    return users.payment_methods(tenant, params["identifier"])


@operation("DELETE", "/_sandbox/users/{identifier}", "Remove a user who has no tasks, linked "
           "accounts or processor links", errors=(409,), **CONTROL,
           example=Example(parameters={"identifier": "user-2"}))  # user-1 has tasks (409)
async def remove_user(tenant, params) -> UserRemoved:
    """Their public tokens and stored payment methods go with them (`removed`: false when
    there was no such user: it is gone either way); a user with tasks, linked accounts or
    processor links stays (409 user-has-records). verify-against removes the user it made
    for its run with it."""
    removed = users.remove_user(tenant, params["identifier"])
    return UserRemoved(identifier=params["identifier"], removed=removed)
