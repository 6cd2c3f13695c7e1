"""payroll-sandbox: a local sandbox simulator of a payroll-connectivity service."""

__version__ = "0.1.0"

# The revision of the service spec this sandbox implements: the first 12 hex digits of the
# SHA-256 of service-spec.md. `--version` and `GET /health` name it, so a team can tell
# which spec a sandbox follows; tests/test_cli.py checks it against the repository's copy
# of the spec (docs/spec/service-spec.md), and .ci/spec-in-step that copy against the spec.
SPEC_REVISION = "072010dce29d"
