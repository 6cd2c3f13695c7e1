"""The one family of API errors, every code the API answers with as a class.

Domain code raises these; exactly one middleware turns them into the error body
`{"error": {"code", "message", "details"}}` (DESIGN.md, Errors). The status comes from
the family (NotFound: 404, ...), the code from the class itself.
"""

from __future__ import annotations

import sys
from typing import Any


class ApiError(Exception):
    """An error the API reports to the caller; `status` and `code` are per class."""

    status = 400
    code = "bad-request"

    def __init__(self, message: str, *, details: list[dict[str, Any]] | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []
        if code is not None:
            self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}

    @classmethod
    def coded(cls, code: str, *, status: int | None = None) -> type[ApiError]:
        """The subclass of this family that answers with `code` (and `status`, else the
        family's), named after its code: `NotFound.coded("task-not-found")` is TaskNotFound,
        of the module that makes it (as namedtuple does: reprs, tracebacks and pickle find
        it there)."""
        name = "".join(word.title() for word in code.split("-"))
        return type(name, (cls,), {"code": code, "status": status or cls.status,
                                   "__module__": sys._getframe(1).f_globals["__name__"]})


# -- the families, one a status (a code below, or a part's own error, belongs to one) -------

BadRequest = ApiError.coded("bad-request", status=400)
MalformedJson = ApiError.coded("malformed-json", status=400)
# A body its own content-encoding cannot decode (a `gzip` body that is not gzip).
MalformedBody = ApiError.coded("malformed-body", status=400)
Unauthorized = ApiError.coded("unauthorized", status=401)
Forbidden = ApiError.coded("forbidden", status=403)
HostNotAllowed = Forbidden.coded("host-not-allowed")
NotFound = ApiError.coded("not-found", status=404)


class MethodNotAllowed(ApiError):
    status = 405
    code = "method-not-allowed"
    allow: str | None = None  # the methods the path takes, for the Allow header


Conflict = ApiError.coded("conflict", status=409)
PayloadTooLarge = ApiError.coded("payload-too-large", status=413)
RequestTimeout = ApiError.coded("request-timeout", status=408)
UnsupportedMediaType = ApiError.coded("unsupported-media-type", status=415)
ValidationFailed = ApiError.coded("validation-failed", status=422)
InternalError = ApiError.coded("internal-error", status=500)
ShuttingDown = ApiError.coded("shutting-down", status=503)


class LimitReached(ApiError):
    """429: a bound of the sandbox is reached (README: Limits); `retry-after` says when
    trying again makes sense."""

    status = 429
    code = "limit-reached"
    retry_after = 60


# -- the codes the API answers with, one class each (README: Errors) ----------------------

ApiKeysRequired = Unauthorized.coded("api-keys-required")
CompanyDisabled = Forbidden.coded("company-disabled")
CompanyExists = Conflict.coded("company-exists")
CompanyManualDeposits = Forbidden.coded("company-manual-deposits")
CompanyMismatch = ValidationFailed.coded("company-mismatch")
CompanyNotFound = NotFound.coded("company-not-found")
CompanyUnderMaintenance = Forbidden.coded("company-under-maintenance")
CredentialsRefused = Unauthorized.coded("credentials-refused")
DepositAccountNotFound = NotFound.coded("deposit-account-not-found")
EventNotFound = NotFound.coded("event-not-found")
IdentifierMismatch = ValidationFailed.coded("identifier-mismatch")
IllegalTransition = ApiError.coded("illegal-transition")
InvalidCompanyId = NotFound.coded("invalid-company-id")
InvalidConfig = BadRequest.coded("invalid-config")
InvalidCredentials = Unauthorized.coded("invalid-credentials")
InvalidProcessorToken = ValidationFailed.coded("invalid-processor-token")
InvalidPublicToken = Unauthorized.coded("invalid-public-token")
LinkedAccountNotFound = NotFound.coded("linked-account-not-found")
LinkedAccountNotYours = Unauthorized.coded("linked-account-not-yours")
MissingCredentials = Unauthorized.coded("missing-credentials")
ProcessorLinksNotFound = NotFound.coded("processor-links-not-found")
ProcessorTokenAlreadyRegistered = Conflict.coded("processor-token-already-registered")
ProcessorTokenNotFound = NotFound.coded("processor-token-not-found")
ProcessorTokenRevoked = Conflict.coded("processor-token-revoked")
ProductAndProducts = BadRequest.coded("product-and-products")
ProductNotOffered = BadRequest.coded("product-not-offered")
PublicTokenExpired = Unauthorized.coded("public-token-expired")
PublicTokenMismatch = Unauthorized.coded("public-token-mismatch")
PublicTokenRequired = Unauthorized.coded("public-token-required")
RouteNotFound = NotFound.coded("route-not-found")
ScenarioDoesNotFit = ValidationFailed.coded("scenario-does-not-fit")
StatementNotFound = NotFound.coded("statement-not-found")
TaskNotFound = NotFound.coded("task-not-found")
TenantNotDeletable = Conflict.coded("tenant-not-deletable")
TenantNotFound = NotFound.coded("tenant-not-found")
UnknownEventType = ValidationFailed.coded("unknown-event-type")
# A search or company-list filter names a product the service lacks (the surface: `product`
# is an enum): 400, each field at fault in `details`.
UnknownProduct = BadRequest.coded("unknown-product")
UnknownProducts = ValidationFailed.coded("unknown-products")
UnknownScenario = ValidationFailed.coded("unknown-scenario")
UserNotFound = NotFound.coded("user-not-found")
WrongEnvironment = Unauthorized.coded("wrong-environment")

EventLimitReached = LimitReached.coded("event-limit-reached")
JobLimitReached = LimitReached.coded("job-limit-reached")
LinkedAccountLimitReached = LimitReached.coded("linked-account-limit-reached")
ProcessorTokenLimitReached = LimitReached.coded("processor-token-limit-reached")
TaskLimitReached = LimitReached.coded("task-limit-reached")
TenantLimitReached = LimitReached.coded("tenant-limit-reached")
UserLimitReached = LimitReached.coded("user-limit-reached")


# Two codes a second family answers with too, each its own class (named apart from its code).

class EventTypeNotFound(NotFound):
    code = "unknown-event-type"


class OtherEnvironmentToken(BadRequest):
    code = "wrong-environment"


class NotCalled(ValidationFailed):
    """POST /_sandbox/requests/verify: the journal holds no (or not as many) requests like
    the one described; the body says how many matched and shows the nearest others."""

    code = "not-called"

    def __init__(self, message: str, *, matched: list[int],
                 near_misses: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.matched, self.near_misses = matched, near_misses

    def body(self) -> dict[str, Any]:
        body = super().body()
        body["error"].update(matched=self.matched, nearMisses=self.near_misses)
        return body


def field_detail(path: str, message: str, *, location: str = "body") -> dict[str, str]:
    """One entry of `details`: the JSON path at fault (`$.products[0]`) and why."""
    return {"location": location, "path": path, "message": message}
