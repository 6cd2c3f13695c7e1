"""payroll-sandbox: a local sandbox simulator of a payroll-connectivity service."""

__version__ = "0.1.0"

# The revision of the service spec this sandbox implements: the first 12 hex digits of the
# SHA-256 of service-spec.md. `--version` and `GET /health` name it, so a team can tell
# which spec a sandbox follows; tests/test_cli.py checks it against the repository's copy
# of the spec (docs/spec/service-spec.md), and .ci/spec-in-step that copy against the spec.
SPEC_REVISION = "072010dce29d"


class SandboxWarning(UserWarning):
    """What a sandbox said it ignored in a call of yours (its `x-sandbox-warning` header: an
    unknown body field, a query parameter it does not know), raised as a Python warning by
    the test clients (payroll_sandbox.kit.testing), so pytest's summary shows the typo; `-W
    error::payroll_sandbox.SandboxWarning` or a server started with --strict-bodies makes it
    fail the test."""
