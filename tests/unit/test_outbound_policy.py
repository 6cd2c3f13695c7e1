"""The outbound policy's answer before each attempt: worked out once per URL, and again
once the sandbox listens (a URL at its own address is refused from then on)."""

from __future__ import annotations

import yarl

from payroll_sandbox.webhooks.policy import OutboundPolicy


def test_the_policy_forgets_its_answers_when_the_sandbox_starts_listening():
    policy = OutboundPolicy()
    url = "http://127.0.0.1:8123/hook"
    assert policy.attempt_problem(url) is None  # not listening yet: another local server
    policy.serving([("127.0.0.1", 8123)])
    assert policy.attempt_problem(url) == policy.url_problem(yarl.URL(url))
    assert "own address" in policy.attempt_problem(url)
    assert policy.attempt_problem("http://127.0.0.1:9000/hook") is None


def test_the_answers_kept_are_bounded():
    from payroll_sandbox.webhooks.policy import KEPT_URLS

    policy = OutboundPolicy()
    for number in range(KEPT_URLS + 10):
        assert policy.attempt_problem(f"http://receiver.test/hook/{number}") is None
    assert len(policy._refusals) <= KEPT_URLS
    assert policy.attempt_problem("http://169.254.169.254/latest") is not None  # still answers
