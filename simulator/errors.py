"""The one family of API errors, every code the API answers with as a class.

Domain code raises these; exactly one middleware turns them into the error body
`{"error": {"code", "message", "details"}}` (DESIGN.md, Errors). The status comes from
the base class (NotFound: 404, ...), the code from the class itself.
"""

from __future__ import annotations

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


class BadRequest(ApiError):
    status = 400
    code = "bad-request"


class MalformedJson(ApiError):
    status = 400
    code = "malformed-json"


class MalformedBody(ApiError):
    """A body its own content-encoding cannot decode (a `gzip` body that is not gzip)."""
    status = 400
    code = "malformed-body"


class Unauthorized(ApiError):
    status = 401
    code = "unauthorized"


class Forbidden(ApiError):
    status = 403
    code = "forbidden"


class HostNotAllowed(Forbidden):
    code = "host-not-allowed"


class NotFound(ApiError):
    status = 404
    code = "not-found"


class MethodNotAllowed(ApiError):
    status = 405
    code = "method-not-allowed"
    allow: str | None = None  # the methods the path takes, for the Allow header


class Conflict(ApiError):
    status = 409
    code = "conflict"


class PayloadTooLarge(ApiError):
    status = 413
    code = "payload-too-large"


class RequestTimeout(ApiError):
    status = 408
    code = "request-timeout"


class UnsupportedMediaType(ApiError):
    status = 415
    code = "unsupported-media-type"


class ValidationFailed(ApiError):
    status = 422
    code = "validation-failed"


class InternalError(ApiError):
    status = 500
    code = "internal-error"


# -- the codes the API answers with, one class each (README: Errors) ----------------------

class ApiKeysRequired(Unauthorized):
    code = "api-keys-required"


class CompanyDisabled(Forbidden):
    code = "company-disabled"


class CompanyExists(Conflict):
    code = "company-exists"


class CompanyManualDeposits(Forbidden):
    code = "company-manual-deposits"


class CompanyMismatch(ValidationFailed):
    code = "company-mismatch"


class CompanyNotFound(NotFound):
    code = "company-not-found"


class CompanyUnderMaintenance(Forbidden):
    code = "company-under-maintenance"


class DepositAccountNotFound(NotFound):
    code = "deposit-account-not-found"


class EventNotFound(NotFound):
    code = "event-not-found"


class IdentifierMismatch(ValidationFailed):
    code = "identifier-mismatch"


class IllegalTransition(ApiError):
    code = "illegal-transition"


class InvalidConfig(BadRequest):
    code = "invalid-config"


class InvalidCredentials(Unauthorized):
    code = "invalid-credentials"


class InvalidProcessorToken(ValidationFailed):
    code = "invalid-processor-token"


class InvalidPublicToken(Unauthorized):
    code = "invalid-public-token"


class LinkedAccountNotFound(NotFound):
    code = "linked-account-not-found"


class LinkedAccountNotYours(Unauthorized):
    code = "linked-account-not-yours"


class MissingCredentials(Unauthorized):
    code = "missing-credentials"


class ProcessorLinksNotFound(NotFound):
    code = "processor-links-not-found"


class ProcessorTokenAlreadyRegistered(Conflict):
    code = "processor-token-already-registered"


class ProcessorTokenNotFound(NotFound):
    code = "processor-token-not-found"


class ProcessorTokenRevoked(Conflict):
    code = "processor-token-revoked"


class ProductAndProducts(BadRequest):
    code = "product-and-products"


class UnknownProduct(BadRequest):
    """A search or company-list filter names a product the service lacks (the surface:
    `product` is an enum): 400, each field at fault in `details`."""

    code = "unknown-product"


class ProductNotOffered(BadRequest):
    code = "product-not-offered"


class PublicTokenExpired(Unauthorized):
    code = "public-token-expired"


class PublicTokenMismatch(Unauthorized):
    code = "public-token-mismatch"


class PublicTokenRequired(Unauthorized):
    code = "public-token-required"


class RouteNotFound(NotFound):
    code = "route-not-found"


class StatementNotFound(NotFound):
    code = "statement-not-found"


class TaskNotFound(NotFound):
    code = "task-not-found"


class TenantNotFound(NotFound):
    code = "tenant-not-found"


class UnknownEventType(ValidationFailed):
    code = "unknown-event-type"


class EventTypeNotFound(NotFound):
    code = "unknown-event-type"


class UnknownProducts(ValidationFailed):
    code = "unknown-products"


class UnknownScenario(ValidationFailed):
    code = "unknown-scenario"


class ScenarioDoesNotFit(ValidationFailed):
    code = "scenario-does-not-fit"


class UserNotFound(NotFound):
    code = "user-not-found"


class OtherEnvironmentToken(BadRequest):
    code = "wrong-environment"


class WrongEnvironment(Unauthorized):
    code = "wrong-environment"


class InvalidCompanyId(NotFound):
    code = "invalid-company-id"


class CredentialsRefused(Unauthorized):
    code = "credentials-refused"


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


class TenantNotDeletable(Conflict):
    code = "tenant-not-deletable"


class LimitReached(ApiError):
    """429: a bound of the sandbox is reached (README: Limits); `retry-after` says when
    trying again makes sense."""

    status = 429
    code = "limit-reached"
    retry_after = 60


class UserLimitReached(LimitReached):
    code = "user-limit-reached"


class TenantLimitReached(LimitReached):
    code = "tenant-limit-reached"


class TaskLimitReached(LimitReached):
    code = "task-limit-reached"


class EventLimitReached(LimitReached):
    code = "event-limit-reached"


class JobLimitReached(LimitReached):
    code = "job-limit-reached"


class ProcessorTokenLimitReached(LimitReached):
    code = "processor-token-limit-reached"


class LinkedAccountLimitReached(LimitReached):
    code = "linked-account-limit-reached"


class ShuttingDown(ApiError):
    status = 503
    code = "shutting-down"


def field_detail(path: str, message: str, *, location: str = "body") -> dict[str, str]:
    """One entry of `details`: the JSON path at fault (`$.products[0]`) and why."""
    return {"location": location, "path": path, "message": message}
