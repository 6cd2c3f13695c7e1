"""The Docker, Compose and CI recipes, run as what they run (no image can be built here):
the image's command, environment and health check; the Compose services' commands and
environment, with each service name pointing at 127.0.0.1; the GitHub job's health command.
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

import yaml
from conftest import REPO, WALMART


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
