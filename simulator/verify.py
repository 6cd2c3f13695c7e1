"""`payroll_sandbox.verify.verify(...)` (docs/verify-against.md): the drift check of
`payroll_sandbox.tools.verify`."""

from .tools.verify import verify

__all__ = ["verify"]
