"""The outbound policy's answer before each attempt: worked out once per URL, and again
once the sandbox listens (a URL at its own address is refused from then on)."""

from __future__ import annotations

import yarl

from payroll_sandbox.transport.policy import OutboundPolicy


def test_the_policy_forgets_its_answers_when_the_sandbox_starts_listening():
    policy = OutboundPolicy()
    url = "http://127.0.0.1:8123/hook"
    assert policy.attempt_problem(url) is None  # not listening yet: another local server
    policy.serving([("127.0.0.1", 8123)])
    assert policy.attempt_problem(url) == policy.url_problem(yarl.URL(url))
    assert "own address" in policy.attempt_problem(url)
    assert policy.attempt_problem("http://127.0.0.1:9000/hook") is None


def test_the_answers_kept_are_bounded():
    from payroll_sandbox.transport.policy import KEPT_URLS

    policy = OutboundPolicy()
    for number in range(KEPT_URLS + 10):
        assert policy.attempt_problem(f"http://receiver.test/hook/{number}") is None
    assert len(policy._refusals) <= KEPT_URLS
    assert policy.attempt_problem("http://169.254.169.254/latest") is not None  # still answers


# -- issue 37, point 1: "this host" addresses --------------------------------------------------

THIS_HOST = ["http://0.0.0.0:{port}/hook", "http://0.1.2.3:{port}/hook", "http://[::]:{port}/hook",
             "http://[::ffff:0.0.0.0]:{port}/hook", "http://[::ffff:127.0.0.1]:{port}/hook",
             "http://[::ffff:7f00:1]:{port}/hook"]


def test_this_host_addresses_are_the_sandbox_itself():
    """0.0.0.0 and :: (and their mapped forms) connect to the loopback on Linux: a sandbox
    on 127.0.0.1 answered its own /demo/reset through http://0.0.0.0:<port>."""
    policy = OutboundPolicy()
    policy.serving([("127.0.0.1", 8123)])
    for url in THIS_HOST:
        assert "own address" in policy.url_problem(yarl.URL(url.format(port=8123))), url
    assert policy.url_problem(yarl.URL("http://0.0.0.0:9000/hook")) is None  # another server


def test_a_loopback_deny_rule_covers_this_host_and_mapped_addresses():
    """--webhook-deny 127.0.0.0/8 let http://0.0.0.0:<port> through to a loopback receiver;
    a rule written in the mapped IPv6 form is read as its IPv4 network."""
    for deny in ("127.0.0.0/8", "::ffff:127.0.0.0/104"):
        policy = OutboundPolicy.from_settings(type("S", (), {"webhook_allow": "",
                                                             "webhook_deny": deny})())
        for url in [*THIS_HOST[:2], *THIS_HOST[3:], "http://127.0.0.1:9000/hook"]:
            assert "--webhook-deny" in policy.url_problem(yarl.URL(url.format(port=9000))), \
                (deny, url)
        assert policy.url_problem(yarl.URL("http://10.1.2.3:9000/hook")) is None
    v6 = OutboundPolicy.from_settings(type("S", (), {"webhook_allow": "",
                                                     "webhook_deny": "::1/128"})())
    assert "--webhook-deny" in v6.url_problem(yarl.URL("http://[::]:9000/hook"))
