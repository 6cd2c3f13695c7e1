"""The Docker, Compose and CI recipes, run as what they run (no image can be built here):
the image's command, environment and health check; the Compose services' commands and
environment, with each service name pointing at 127.0.0.1; the GitHub job's health command
and its service (the image's command with the service's environment); the testcontainers
conftest under pytest-xdist, with a stand-in for testcontainers that runs the image's
command as a process.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager

import pytest
import yaml
from conftest import ACME, REPO, WALMART

DEFAULT_KEYS = ACME  # the bundled default tenant's, as the serving line prints them


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def dockerfile() -> dict:
    """ENV, ENTRYPOINT, CMD and the HEALTHCHECK command of the Dockerfile."""
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    env = dict(re.findall(r"(\w+)=(\S+)", text.split("\nENV ", 1)[1].split("\n", 1)[0]))
    directive = {name: json.loads(re.search(rf"^{name} (\[.*\])$", text, re.M)[1])
                 for name in ("ENTRYPOINT", "CMD")}
    health = json.loads(re.search(r"HEALTHCHECK .*? CMD (\[.*\])$", text, re.M)[1])
    return {"env": env, **directive, "health": health}


def wait_until_up(port: int, process: subprocess.Popen, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)


@contextmanager
def running(command: list[str], env: dict[str, str], port: int):
    process = subprocess.Popen(command, env={**os.environ, **env}, cwd=REPO, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_until_up(port, process)
        yield process
    finally:
        process.terminate()
        process.communicate(timeout=15)


def call(url: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                     headers={"content-type": "application/json",
                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def payroll_sandbox(entrypoint: list[str]) -> list[str]:
    """The image's `payroll-sandbox` console script, as this interpreter runs it."""
    assert entrypoint == ["payroll-sandbox"]
    return [sys.executable, "-m", "payroll_sandbox"]


def test_the_image_serves_with_its_command_and_environment_and_its_health_check_passes():
    image = dockerfile()
    port = free_port()  # the image's 8080, moved so a busy 8080 here cannot fail the test
    env = {**image["env"], "PAYROLL_SANDBOX_PORT": str(port)}
    assert image["env"]["PAYROLL_SANDBOX_HOST"] == "0.0.0.0"
    with running(payroll_sandbox(image["ENTRYPOINT"]) + image["CMD"], env, port):
        health = [part.replace(":8080/", f":{port}/") for part in image["health"]]
        assert subprocess.run(health, timeout=10).returncode == 0


def test_the_image_fills_the_start_up_cache_that_its_command_then_reads(tmp_path):
    image = dockerfile()
    text = (REPO / "Dockerfile").read_text()
    warm = re.search(r"^RUN (payroll-sandbox .*)$", text, re.M)[1]
    assert text.index("USER sandbox") < text.index(warm)  # the serving user's cache
    env = {**image["env"], "PAYROLL_SANDBOX_CACHE_DIR": str(tmp_path),
           "PAYROLL_SANDBOX_PORT": str(free_port())}
    filled = subprocess.run(payroll_sandbox(warm.split()[:1]) + warm.split()[1:], cwd=REPO,
                            env={**os.environ, **env}, capture_output=True, text=True)
    assert filled.returncode == 0, filled.stderr
    loads = sorted(tmp_path.glob("load-*.pickle"))
    assert len(loads) == 1
    with running(payroll_sandbox(image["ENTRYPOINT"]) + image["CMD"], env,
                 int(env["PAYROLL_SANDBOX_PORT"])):
        pass
    assert sorted(tmp_path.glob("load-*.pickle")) == loads  # the same key: read, not made


def test_the_dockerfile_installs_the_dependencies_before_the_source():
    text = (REPO / "Dockerfile").read_text()
    install = "pip install --no-cache-dir -c constraints.txt -r"  # the lock's versions
    assert text.index("COPY pyproject.toml constraints.txt") < text.index(install)
    assert text.index(install) < text.index("COPY simulator")
    command = re.search(r'RUN (python -c ".*?")', text)[1]
    listed = subprocess.run(shlex.split(command), cwd=REPO, capture_output=True, text=True)
    assert listed.returncode == 0 and "aiohttp" in listed.stdout
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {"tests", "bench", ".venv", ".git"} <= set(ignored)


def test_the_compose_services_run_and_the_app_gets_the_webhooks_by_service_name():
    compose = yaml.safe_load((REPO / "compose.yaml").read_text())
    image = dockerfile()
    sandbox, app = compose["services"]["sandbox"], compose["services"]["app"]
    sandbox_port, app_port = free_port(), free_port()
    names = {"sandbox:8080": f"127.0.0.1:{sandbox_port}", "app:8000": f"127.0.0.1:{app_port}"}

    def local(text: str) -> str:
        for name, address in names.items():
            text = text.replace(name, address)
        return text

    sandbox_command = payroll_sandbox(image["ENTRYPOINT"]) + [local(a) for a in sandbox["command"]]
    sandbox_env = {**image["env"], "PAYROLL_SANDBOX_PORT": str(sandbox_port)}
    app_command = [sys.executable, str(REPO / "examples" / "app.py")]
    assert app["entrypoint"] == ["python", "/examples/app.py"]
    app_env = {k: local(str(v)) for k, v in app["environment"].items()} | {"PORT": str(app_port)}
    with running(sandbox_command, sandbox_env, sandbox_port), \
            running(app_command, app_env, app_port):
        # The sandbox answers its service name (--allowed-host sandbox) and refuses others.
        request = urllib.request.Request(f"http://127.0.0.1:{sandbox_port}/health",
                                         headers={"host": "sandbox:8080"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        status, created = call(f"http://127.0.0.1:{app_port}/deposits",
                               {"user": "user-1", "company": WALMART,
                                "scenario": "auth-expired"})
        assert status == 201, created
        # The sandbox's clock is real (the recipe's command): it is moved past the scenario's
        # 9.5 s over the control plane, as a test does, instead of waiting them out.
        keys = {"x-api-key": app["environment"]["SANDBOX_API_KEY"],
                "x-api-secret": app["environment"]["SANDBOX_API_SECRET"]}
        status, ran = call(f"http://127.0.0.1:{sandbox_port}/_sandbox/clock/run-until-idle",
                           {}, keys)
        assert status == 200 and ran["data"]["idle"], ran
        deadline = time.monotonic() + 30  # the webhook reaches the app, which stores it
        while True:
            status, deposit = call(f"http://127.0.0.1:{app_port}/deposits/user-1")
            if deposit["status"] == "failed" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert deposit == {"task": created["task"], "status": "failed", "reason": "auth-expired"}


def test_the_github_job_health_command_passes_against_a_running_sandbox():
    job = yaml.safe_load((REPO / "docs" / "ci" / "github-actions.yml").read_text())
    service = job["jobs"]["integration"]["services"]["sandbox"]
    assert service["ports"] == ["8080:8080"]
    health = re.search(r'--health-cmd "(.*?)" --health-interval',
                       service["options"].replace("\n", " "))[1].replace('\\"', '"')
    port = free_port()
    env = {**dockerfile()["env"], "PAYROLL_SANDBOX_PORT": str(port)}
    with running([sys.executable, "-m", "payroll_sandbox", "serve"], env, port):
        command = shlex.split(health.replace(":8080/", f":{port}/"))
        assert subprocess.run(command, timeout=10).returncode == 0
    assert job["jobs"]["integration"]["env"]["PAYROLL_SANDBOX_URL"] == "http://localhost:8080"


def github_job() -> tuple[dict, dict]:
    """The GitHub job's environment and its sandbox service."""
    job = yaml.safe_load((REPO / "docs" / "ci" / "github-actions.yml").read_text())
    integration = job["jobs"]["integration"]
    return integration["env"], integration["services"]["sandbox"]


def test_the_github_job_gives_the_container_a_way_back_to_the_receivers():
    """tests/test_container_network.py runs this with the sandbox in a namespace of its own."""
    env, service = github_job()
    assert env["PAYROLL_SANDBOX_RECEIVER_HOST"] == "host.docker.internal"
    assert "--add-host=host.docker.internal:host-gateway" in service["options"].split()


def test_the_github_service_runs_the_sandbox_on_the_manual_clock():
    """Issue 34, point 7: the job's service sets the manual clock; run as the service runs
    (the image's command with the image's and the service's environment, on its port), the
    sandbox it starts is on that clock."""
    env, service = github_job()
    assert service["env"] == {"PAYROLL_SANDBOX_CLOCK": "manual"}
    assert env["PAYROLL_SANDBOX_URL"] == "http://localhost:8080"
    assert service["ports"] == ["8080:8080"]
    image = dockerfile()
    port = free_port()  # the service's 8080, moved so a busy 8080 here cannot fail the test
    environment = {**image["env"], **service["env"], "PAYROLL_SANDBOX_PORT": str(port)}
    with running(payroll_sandbox(image["ENTRYPOINT"]) + image["CMD"], environment, port):
        url = env["PAYROLL_SANDBOX_URL"].replace(":8080", f":{port}")
        status, clock = call(f"{url}/_sandbox/clock", headers=DEFAULT_KEYS)
        assert status == 200 and clock["data"]["mode"] == "manual", clock
        time.sleep(1.1)  # wall time passes; the sandbox's time stands until a test moves it
        status, later = call(f"{url}/_sandbox/clock", headers=DEFAULT_KEYS)
        assert status == 200 and later["data"]["timestamp"] == clock["data"]["timestamp"]


# A stand-in for testcontainers-python: the container is the image's command run as a local
# process on a free port (its output in a file, for wait_for_logs); each start and stop is
# a line of $STAND_IN_LOG, so the test counts them.
STAND_IN = {
    "testcontainers/__init__.py": "",
    "testcontainers/core/__init__.py": "",
    "testcontainers/core/waiting_utils.py": """
import time


def wait_for_logs(container, text, timeout=60):
    deadline = time.monotonic() + timeout
    while text not in container.output.read_text():
        assert container.process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
""",
    "testcontainers/core/container.py": """
import json
import os
import socket
import subprocess
import sys
from pathlib import Path


def record(**entry):
    with open(os.environ["STAND_IN_LOG"], "a") as log:
        log.write(json.dumps({**entry, "pid": os.getpid(),
                              "worker": os.environ.get("PYTEST_XDIST_WORKER")}) + "\\n")


class DockerContainer:
    def __init__(self, image):
        self.image, self.ports, self.command, self.kwargs = image, [], "", {}

    def with_exposed_ports(self, *ports):
        self.ports += ports
        return self

    def with_command(self, command):
        self.command = command
        return self

    def with_kwargs(self, **kwargs):
        self.kwargs.update(kwargs)
        return self

    def start(self):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = {**os.environ, **json.loads(os.environ["STAND_IN_IMAGE_ENV"]),
               "PAYROLL_SANDBOX_PORT": str(self.port)}
        self.output = Path(os.environ["STAND_IN_LOG"]).with_suffix(f".{self.port}.out")
        with open(self.output, "w") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "payroll_sandbox", *self.command.split()], env=env,
                stdout=output, stderr=subprocess.STDOUT)
        record(event="start", image=self.image, command=self.command, kwargs=self.kwargs,
               port=self.port)
        return self

    def get_container_host_ip(self):
        return "127.0.0.1"

    def get_exposed_port(self, port):
        assert port in self.ports, port
        return self.port

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=15)
        record(event="stop", port=self.port)
""",
}

# The suite the recipe serves: each test notes its worker and the sandbox it reached; one
# uses the plugin's own fixture, which must take the container's server.
SUITE = """
import json
import os
import urllib.request

import pytest


@pytest.mark.parametrize("n", range(6))
def test_reaches_the_one_sandbox(n):
    url = os.environ["PAYROLL_SANDBOX_URL"]
    with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
        assert response.status == 200
    with open(os.environ["SUITE_LOG"], "a") as log:
        log.write(json.dumps([os.environ.get("PYTEST_XDIST_WORKER"), url]) + "\\n")


def test_the_plugin_uses_it(payroll_sandbox):
    assert payroll_sandbox.base_url.rstrip("/") == os.environ["PAYROLL_SANDBOX_URL"]
"""


def test_the_testcontainers_conftest_starts_one_sandbox_for_all_xdist_workers(tmp_path):
    """Issue 34, point 7: under `pytest -n 2` the recipe starts one container (the main
    process, before the workers), both workers use it, and it is stopped at the end."""
    recipe = (REPO / "docs" / "ci" / "testcontainers_conftest.py").read_text()
    for name, text in {**STAND_IN, "conftest.py": recipe, "test_suite.py": SUITE}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("PAYROLL_SANDBOX_", "PYTEST_"))}
    env.update(PYTHONPATH=str(tmp_path), STAND_IN_LOG=str(tmp_path / "starts.log"),
               SUITE_LOG=str(tmp_path / "suite.log"),
               STAND_IN_IMAGE_ENV=json.dumps(dockerfile()["env"]))
    ran = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider",
                          "-p", "no:faker", "-q"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "7 passed" in ran.stdout, ran.stdout

    starts = (tmp_path / "starts.log").read_text().splitlines()
    [start, stop] = [json.loads(line) for line in starts]
    assert start["event"] == "start" and stop["event"] == "stop"
    assert start["worker"] is None and stop["pid"] == start["pid"]  # the main process
    assert start["image"] == "payroll-sandbox" and start["command"] == "serve --clock manual"
    assert start["kwargs"] == {"extra_hosts": {"host.docker.internal": "host-gateway"}}
    reached = [json.loads(line) for line in (tmp_path / "suite.log").read_text().splitlines()]
    assert {url for _, url in reached} == {f"http://127.0.0.1:{start['port']}"}
    assert {worker for worker, _ in reached} == {"gw0", "gw1"}
    with pytest.raises(OSError):  # stopped
        socket.create_connection(("127.0.0.1", start["port"]), timeout=1).close()
