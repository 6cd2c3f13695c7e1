"""The one family of API errors.

Domain code raises these; exactly one middleware turns them into the error body
`{"error": {"code", "message", "details"}}` (DESIGN.md, Errors).
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


class Unauthorized(ApiError):
    status = 401
    code = "unauthorized"


class Forbidden(ApiError):
    status = 403
    code = "forbidden"


class NotFound(ApiError):
    status = 404
    code = "not-found"


class MethodNotAllowed(ApiError):
    status = 405
    code = "method-not-allowed"


class Conflict(ApiError):
    status = 409
    code = "conflict"


class PayloadTooLarge(ApiError):
    status = 413
    code = "payload-too-large"


class ValidationFailed(ApiError):
    status = 422
    code = "validation-failed"


class InternalError(ApiError):
    status = 500
    code = "internal-error"


def field_detail(path: str, message: str, *, location: str = "body") -> dict[str, str]:
    """One entry of `details`: the JSON path at fault (`$.products[0]`) and why."""
    return {"location": location, "path": path, "message": message}
