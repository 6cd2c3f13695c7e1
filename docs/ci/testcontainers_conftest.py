"""conftest.py for a suite that tests against payroll-sandbox in a container (testcontainers).

One container for the whole run, under pytest-xdist's `-n N` too: the main pytest process
starts it before the workers exist and stops it after they are all done; the workers
inherit its URL from the environment. (A session fixture would run once per worker, and
pytest_configure runs in every worker as well: N + 1 containers.) A run given a sandbox
already (PAYROLL_SANDBOX_URL set, as by the GitHub Actions recipe) starts none.
"""

import os

from testcontainers.core.container import DockerContainer
from testcontainers.core.waiting_utils import wait_for_logs

IMAGE = "payroll-sandbox"  # docker build -t payroll-sandbox .
_container = None


def pytest_sessionstart(session):
    global _container
    if hasattr(session.config, "workerinput") or os.environ.get("PAYROLL_SANDBOX_URL"):
        return  # an xdist worker (the main process started it), or a sandbox given
    _container = (DockerContainer(IMAGE).with_exposed_ports(8080)
                  .with_command("serve --clock manual")
                  .with_kwargs(extra_hosts={"host.docker.internal": "host-gateway"}))
    _container.start()
    wait_for_logs(_container, "payroll-sandbox serving")
    host, port = _container.get_container_host_ip(), _container.get_exposed_port(8080)
    os.environ["PAYROLL_SANDBOX_URL"] = f"http://{host}:{port}"
    # The container reaches the receivers of the tests through the host's name for it.
    os.environ["PAYROLL_SANDBOX_RECEIVER_HOST"] = "host.docker.internal"


def pytest_sessionfinish(session):
    if _container is not None:
        _container.stop()
