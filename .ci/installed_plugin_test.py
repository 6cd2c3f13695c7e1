"""A customer's first test, which .ci/release-check runs with the wheel it built installed
in a fresh virtualenv, from a folder outside the repository: the package is the release's
version, and its pytest plugin serves a tenant whose webhook reaches the plugin's receiver.
(tests/test_release.py runs it against the repository's own install.)"""

import os

import payroll_sandbox as package


def test_the_package_is_the_releases_version():
    assert package.__version__ == os.environ["RELEASE_VERSION"]


def test_the_plugin_delivers_a_signed_cloudevent_to_its_receiver(payroll_sandbox,
                                                                 webhook_receiver):
    payroll_sandbox.trigger("company-updated")
    body = webhook_receiver.assert_exactly_once("company-updated")
    assert body["eventType"] == "company-updated"
    delivery = webhook_receiver.deliveries[0]
    assert delivery.accepted and delivery.problem is None
    assert delivery.cloud_event is not None
