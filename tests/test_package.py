"""The package as a customer gets it: `python -m build` makes a wheel and an sdist, and the
wheel, installed into fresh virtualenvs outside the repository, serves, names its version
and runs a customer's tests through its pytest plugin, with cloudevents 2.x (what the wheel
brings) and with cloudevents 1.x beside it.

Everything after the build runs from a customer project folder in a temporary directory,
without PYTHONPATH, so nothing of the repository (its simulator/ folder above all) can be
imported by accident. The installs need the package registry; without it these tests fail.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
import zipfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO

BUILD_TIMEOUT = 300    # seconds for `python -m build` (setuptools comes from the registry)
INSTALL_TIMEOUT = 300  # seconds for one `pip install` into a fresh virtualenv
RUN_TIMEOUT = 120      # seconds for the customer's pytest run
READY_TIMEOUT = 60     # seconds for `payroll-sandbox serve` to print its ready line

WALMART = "6410a0000000000000000001"

# One worker runs the whole module (`--dist loadgroup`): one build, both installs side by side.
pytestmark = pytest.mark.xdist_group("package")

# Not copied into the folder the build reads: the repository's own build leftovers.
TOP_LEVEL_LEFTOVERS = {".git", "build", "dist", ".venv", ".pytest_cache"}


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path
    version: str


@dataclass(frozen=True)
class Venv:
    root: Path
    site_packages: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def script(self, name: str) -> Path:
        return self.root / "bin" / name


def customer_environment(venv: Path | None = None) -> dict[str, str]:
    """This process's environment (the pip settings of the machine included) less what could
    reach into the repository or steer the plugin: PYTHONPATH, the active virtualenv, the
    PYTEST_* and PAYROLL_SANDBOX_* variables."""
    env = {name: value for name, value in os.environ.items()
           if name not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
           and not name.startswith(("PYTEST_", "PAYROLL_SANDBOX_", "COV_CORE_"))}
    if env.get("PIP_CONSTRAINT"):  # the commands run elsewhere: a relative path from here
        env["PIP_CONSTRAINT"] = " ".join(
            name if "://" in name else str(Path(name).resolve())
            for name in env["PIP_CONSTRAINT"].split())
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = os.pathsep.join([str(venv / "bin"), os.environ.get("PATH", "")])
    return env


def run(args: list[str | Path], *, cwd: Path, timeout: float,
        env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(arg) for arg in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def outcome(result: subprocess.CompletedProcess) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def source_copy(target: Path) -> Path:
    """The working tree as it is, copied without .git and build leftovers: building an sdist
    writes payroll_sandbox.egg-info/ into the folder it reads, so the build reads this copy
    and leaves the repository (and a parallel run of this file) alone."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == REPO
        return {name for name in names
                if name == "__pycache__" or name.endswith(".egg-info")
                or (top and name in TOP_LEVEL_LEFTOVERS)}

    return Path(shutil.copytree(REPO, target, ignore=ignore))


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Dist:
    """`python -m build`: the sdist, then the wheel built from that sdist, made once."""
    work = tmp_path_factory.mktemp("build")
    source = source_copy(work / "source")
    out = work / "dist"
    result = run([sys.executable, "-m", "build", "--outdir", out, source], cwd=work,
                 timeout=BUILD_TIMEOUT, env=customer_environment())
    assert result.returncode == 0, outcome(result)
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(out.iterdir())
    wheel, sdist = wheels[0], sdists[0]
    match = re.fullmatch(r"payroll_sandbox-([^-]+)-py3-none-any\.whl", wheel.name)
    assert match, f"unexpected wheel name {wheel.name}"
    version = match.group(1)
    assert sdist.name == f"payroll_sandbox-{version}.tar.gz"
    return Dist(wheel=wheel, sdist=sdist, version=version)


def unpinned(env: dict[str, str], project: str, folder: Path) -> dict[str, str]:
    """`env` with the constraint files of PIP_CONSTRAINT (CI holds pip to the repository's
    lock, constraints.txt) copied into `folder` less their lines on `project`: a customer who
    keeps cloudevents 1.x is off the lock's 2.x pin, and the rest stays held to the lock."""
    files = []
    for index, name in enumerate(env.get("PIP_CONSTRAINT", "").split()):
        if "://" not in name and Path(name).is_file():
            lines = Path(name).read_text().splitlines()
            copy = folder / f"constraints-{index}.txt"
            copy.write_text("".join(f"{line}\n" for line in lines if not re.match(
                rf"\s*{re.escape(project)}\s*($|[\[<>=!~;@ ])", line, re.I)))
            name = str(copy)
        files.append(name)
    return {**env, "PIP_CONSTRAINT": " ".join(files)} if files else env


def make_venv(folder: Path, *requirements: str | Path,
              unpin: str | None = None) -> tuple[Venv, float]:
    """A fresh virtualenv at `folder` (outside the repository) with `requirements` installed
    by pip running in it (`pip --python`), with the machine's pip settings (less any pin of
    `unpin`); it and the seconds the install took. The virtualenv gets no pip of its own
    (ensurepip's is older and slower) and pip compiles no bytecode up front (faker's
    thousands of modules): the customer's run compiles what it imports."""
    created = run([sys.executable, "-m", "venv", "--without-pip", folder], cwd=folder.parent,
                  timeout=120, env=customer_environment())
    assert created.returncode == 0, outcome(created)
    python = folder / "bin" / "python"
    env = customer_environment(folder)
    if unpin:
        env = unpinned(env, unpin, folder.parent)
    started = time.monotonic()
    installed = run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet",
                     "--no-compile", *requirements],
                    cwd=folder.parent, timeout=INSTALL_TIMEOUT, env=env)
    seconds = time.monotonic() - started
    assert installed.returncode == 0, f"pip install {requirements}: {outcome(installed)}"
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                  cwd=folder.parent, timeout=60, env=customer_environment(folder))
    assert purelib.returncode == 0, outcome(purelib)
    return Venv(root=folder, site_packages=Path(purelib.stdout.strip())), seconds


# The customers' virtualenvs, named by the fixtures that give them: the wheel with what it
# brings (cloudevents 2.x) and pytest-asyncio for the async fixtures; the wheel beside
# cloudevents 1.x, with sync tests only.
def customer_installs(wheel: Path) -> dict[str, tuple[list[str | Path], str | None]]:
    """Each virtualenv's requirements and the project whose pin in a constraints file it
    lifts."""
    return {"venv_cloudevents_2": ([wheel, "pytest", "pytest-asyncio"], None),
            "venv_cloudevents_1": (["cloudevents<2", wheel, "pytest"], "cloudevents")}


@pytest.fixture(scope="module")
def installs(request, dist, tmp_path_factory):
    """Starts the virtualenvs that this module's selected tests use all at once, side by side
    (an install partly waits on the registry): they all run in this process, alone or as
    one xdist group (`--dist loadgroup`). Under another xdist mode, each install starts when
    a test asks for it. Gives a function of a fixture's name: the (Venv, install seconds) it
    names, once its install is done."""
    requirements = customer_installs(dist.wheel)
    futures: dict[str, Future] = {}
    with ThreadPoolExecutor(max_workers=len(requirements)) as pool:

        def start(name: str) -> Future:
            if name not in futures:
                folder = tmp_path_factory.mktemp(name.replace("_", "-")) / "venv"
                wanted, unpin = requirements[name]
                futures[name] = pool.submit(make_venv, folder, *wanted, unpin=unpin)
            return futures[name]

        if ("PYTEST_XDIST_WORKER" not in os.environ
                or request.config.workerinput.get("dist") == "loadgroup"):
            for item in request.session.items:
                if item.module is request.module:
                    for name in requirements:
                        if name in getattr(item, "fixturenames", ()):
                            start(name)
        yield lambda name: start(name).result()


def installed(installs, name: str) -> Venv:
    venv, seconds = installs(name)
    print(f"{name}: pip install took {seconds:.1f} s")  # the setup's captured output (-rA)
    return venv


@pytest.fixture(scope="module")
def venv_cloudevents_2(installs) -> Venv:
    return installed(installs, "venv_cloudevents_2")


@pytest.fixture(scope="module")
def venv_cloudevents_1(installs) -> Venv:
    return installed(installs, "venv_cloudevents_1")


# -- the customer's project ----------------------------------------------------------------

CUSTOMER_SYNC_TESTS = '''\
import sys

import cloudevents

import payroll_sandbox.kit.pytest_plugin

WALMART = "{walmart}"
CLOUDEVENTS_MAJOR = "{cloudevents_major}"


def test_the_plugin_is_the_installed_one():
    assert payroll_sandbox.kit.pytest_plugin.__file__.startswith(sys.prefix)
    assert cloudevents.__version__.startswith(CLOUDEVENTS_MAJOR + ".")


def test_a_company_update_arrives_once_as_a_cloudevent(payroll_sandbox, webhook_receiver):
    payroll_sandbox.trigger("company-updated")
    body = webhook_receiver.assert_exactly_once("company-updated")
    assert body["eventType"] == "company-updated"
    delivery = webhook_receiver.deliveries[0]
    assert delivery.accepted and delivery.problem is None
    event = delivery.cloud_event
    assert event is not None
    if CLOUDEVENTS_MAJOR == "1":
        from cloudevents.http import CloudEvent

        assert isinstance(event, CloudEvent)
        assert event["type"].endswith(".company-updated")
        assert event["id"] == delivery.event_id
    else:
        from cloudevents.core.v1.event import CloudEvent

        assert isinstance(event, CloudEvent)
        assert event.get_type().endswith(".company-updated")
        assert event.get_id() == delivery.event_id


def test_deposit_fails_when_the_session_expired(payroll_sandbox, webhook_receiver):
    task = payroll_sandbox.post("/task/create", {{
        "identifier": "user-1", "company": WALMART, "product": "deposit",
        "scenario": "auth-expired"}})
    payroll_sandbox.advance(60)
    status = webhook_receiver.wait_for("task-status-updated", task=task["id"])
    assert status["data"]["reason"] == "auth-expired"
    webhook_receiver.assert_order(["task-status-updated", "task-workflow-finished"],
                                  user="user-1")
    assert webhook_receiver.deliveries[0].cloud_event is not None
'''

CUSTOMER_ASYNC_TESTS = '''\
async def test_with_the_receiver(async_payroll_sandbox, async_webhook_receiver):
    await async_payroll_sandbox.trigger("company-updated")
    body = await async_webhook_receiver.wait_for("company-updated")
    assert body["data"]["companyId"]
'''

SYNC_TEST_COUNT = 3
ASYNC_TEST_COUNT = 1


def customer_project(folder: Path, *, cloudevents_major: str, with_async: bool) -> Path:
    """A customer's project: a pytest.ini as the README advises and tests like its examples."""
    folder.mkdir()
    ini = ["[pytest]", "filterwarnings = error"]
    if with_async:
        ini += ["asyncio_mode = auto", "asyncio_default_fixture_loop_scope = function"]
    (folder / "pytest.ini").write_text("\n".join(ini) + "\n")
    tests = folder / "tests"
    tests.mkdir()
    (tests / "test_webhooks.py").write_text(CUSTOMER_SYNC_TESTS.format(
        walmart=WALMART, cloudevents_major=cloudevents_major))
    if with_async:
        (tests / "test_webhooks_async.py").write_text(CUSTOMER_ASYNC_TESTS)
    return folder


def run_customer_tests(venv: Venv, project: Path, expected: int) -> None:
    result = run([venv.python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project,
                 timeout=RUN_TIMEOUT, env=customer_environment(venv.root))
    assert result.returncode == 0, outcome(result)
    assert re.search(rf"^{expected} passed in ", result.stdout, re.M), outcome(result)


def assert_nothing_named_simulator(venv: Venv, cwd: Path) -> None:
    names = sorted(p.name for p in venv.site_packages.iterdir())
    assert not [n for n in names if n.lower().startswith("simulator")], names
    assert "payroll_sandbox" in names
    imported = run([venv.python, "-c", "import simulator"], cwd=cwd, timeout=60,
                   env=customer_environment(venv.root))
    assert imported.returncode != 0
    assert "ModuleNotFoundError: No module named 'simulator'" in imported.stderr, outcome(imported)


def read_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def serve_and_check_health(venv: Venv, cwd: Path) -> None:
    """`payroll-sandbox serve` from the venv's bin: its ready line, then GET /health."""
    stderr = (cwd / "serve.stderr").open("w")
    process = subprocess.Popen(
        [str(venv.script("payroll-sandbox")), "serve", "--host", "127.0.0.1", "--port", "0",
         "--clock", "manual"],
        cwd=cwd, env=customer_environment(venv.root), stdout=subprocess.PIPE, stderr=stderr,
        text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=read_lines, args=(process.stdout, lines), daemon=True).start()
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        seen: list[str] = []
        url = None
        while url is None:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                stderr.flush()
                pytest.fail(f"serve printed no ready line: {seen!r}\n"
                            + (cwd / "serve.stderr").read_text())
            seen.append(line)
            ready = re.match(r"payroll-sandbox serving (http://127\.0\.0\.1:\d+) ", line)
            url = ready and ready.group(1)
        with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
            assert response.status == 200
            health = json.loads(response.read())["data"]
        assert health["status"] == "ok" and health["companies"] > 0, health  # bundled data
        for path in ("/_sandbox/dashboard.js", "/docs"):  # packaged static files, Swagger UI
            with urllib.request.urlopen(f"{url}{path}", timeout=30) as response:
                assert response.status == 200, path
    finally:
        process.terminate()
        try:
            returncode = process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        finally:
            process.stdout.close()
            stderr.close()
    assert returncode == 0, (cwd / "serve.stderr").read_text()


# -- the tests -------------------------------------------------------------------------------

def test_the_wheel_and_sdist_hold_the_package_under_its_own_name(dist):
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = wheel.namelist()
        info = f"payroll_sandbox-{dist.version}.dist-info"
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
        metadata = wheel.read(f"{info}/METADATA").decode()
    assert "payroll_sandbox/__init__.py" in names
    assert "payroll_sandbox/kit/pytest_plugin.py" in names and "payroll_sandbox/py.typed" in names
    for pattern in (r"payroll_sandbox/_bundled/fixtures/[^/]+\.yaml",
                    r"payroll_sandbox/_bundled/scenarios/[^/]+\.yaml",
                    r"payroll_sandbox/static/[^/]+\.js"):
        assert any(re.fullmatch(pattern, name) for name in names), pattern
    assert "payroll_sandbox/_bundled/scenarios/auth-expired.yaml" in names
    outside = [name for name in names
               if not name.startswith(("payroll_sandbox/", f"{info}/"))]
    assert outside == []  # no simulator/, no fixtures/ or scenarios/ at the top
    assert re.search(r"^payroll-sandbox = payroll_sandbox\.tools\.cli:main$", entry_points, re.M)
    assert re.search(r"^\[pytest11\]\npayroll_sandbox = payroll_sandbox\.kit\.pytest_plugin$",
                     entry_points, re.M), entry_points
    assert re.search(r"^Name: payroll-sandbox$", metadata, re.M)
    assert re.search(rf"^Version: {re.escape(dist.version)}$", metadata, re.M)
    assert re.search(r"^Requires-Dist: cloudevents", metadata, re.M)

    top = f"payroll_sandbox-{dist.version}"
    with tarfile.open(dist.sdist) as sdist:
        members = set(sdist.getnames())
        pkg_info = sdist.extractfile(f"{top}/PKG-INFO").read().decode()
    assert {f"{top}/pyproject.toml", f"{top}/README.md", f"{top}/simulator/__init__.py",
            f"{top}/fixtures/companies.yaml", f"{top}/scenarios/auth-expired.yaml"} <= members
    assert re.search(rf"^Version: {re.escape(dist.version)}$", pkg_info, re.M)


def test_the_wheel_installed_outside_the_repository_serves_and_its_plugin_receives_a_webhook(
        dist, venv_cloudevents_2):
    venv = venv_cloudevents_2
    root = venv.root.parent
    assert REPO not in root.parents
    work = root / "work"
    work.mkdir()
    env = customer_environment(venv.root)

    version = run([venv.script("payroll-sandbox"), "--version"], cwd=work, timeout=60, env=env)
    assert version.returncode == 0, outcome(version)
    match = re.match(r"payroll-sandbox (\S+)(\s|$)", version.stdout)
    assert match and match.group(1) == dist.version, outcome(version)

    imported = run([venv.python, "-c", "import payroll_sandbox; "
                    "print(payroll_sandbox.__version__, payroll_sandbox.__file__)"],
                   cwd=work, timeout=60, env=env)
    assert imported.returncode == 0, outcome(imported)
    module_version, module_file = imported.stdout.split()
    assert module_version == dist.version
    assert Path(module_file) == venv.site_packages / "payroll_sandbox" / "__init__.py"
    assert_nothing_named_simulator(venv, work)

    serve_and_check_health(venv, work)

    project = customer_project(root / "project", cloudevents_major="2", with_async=True)
    run_customer_tests(venv, project, SYNC_TEST_COUNT + ASYNC_TEST_COUNT)


def test_the_wheel_installs_beside_cloudevents_1_and_its_receiver_parses_with_it(
        venv_cloudevents_1):
    venv = venv_cloudevents_1
    root = venv.root.parent
    assert REPO not in root.parents
    assert_nothing_named_simulator(venv, root)
    project = customer_project(root / "project", cloudevents_major="1", with_async=False)
    run_customer_tests(venv, project, SYNC_TEST_COUNT)
