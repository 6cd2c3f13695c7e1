"""The release (.github/workflows/release.yml), read as GitHub runs it: on a v* tag the check
job runs .ci/release-check, the script .ci/run runs after the README's test command; PyPI
gets the files that job checked, by trusted publishing; the image goes to the registry for
two architectures with the version's tag and `latest`, under the name the docs give.

Nothing is published here and no image is built. The quick parts of the script run (a tag
that is not the version stops it before the build; the customer's test it runs against the
installed wheel passes against this install); its build and the wheel's install run in
.ci/run, and tests/test_package.py builds and installs the wheel as well.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib

import pytest
import yaml
from conftest import REPO

import payroll_sandbox

pytest_plugins = ["pytester"]

WORKFLOW = REPO / ".github" / "workflows" / "release.yml"
RELEASE_CHECK = REPO / ".ci" / "release-check"
OWNER = "${{ github.repository_owner }}"
PUBLISHED = "ghcr.io/<owner>/payroll-sandbox"  # the image as README.md and docs/ci/ name it
VERSION = "${{ needs.check.outputs.version }}"


def workflow() -> dict:
    loaded = yaml.safe_load(WORKFLOW.read_text())
    loaded["on"] = loaded.pop(True)  # YAML 1.1 reads the key `on` as true
    return loaded


def job(name: str) -> dict:
    return workflow()["jobs"][name]


def steps_using(job: dict, action: str) -> list[dict]:
    return [step for step in job["steps"] if step.get("uses", "").split("@")[0] == action]


def step_index(job: dict, action: str) -> int:
    return next(i for i, step in enumerate(job["steps"])
                if step.get("uses", "").split("@")[0] == action)


def test_the_release_runs_on_a_version_tag_and_reads_the_repository_only():
    release = workflow()
    assert release["on"] == {"push": {"tags": ["v*"]}}
    assert release["permissions"] == {"contents": "read"}  # the jobs widen only their own


def test_the_check_job_runs_the_script_that_ci_runs_after_the_readme_test_command():
    check = job("check")
    [run] = [step for step in check["steps"] if ".ci/release-check" in step.get("run", "")]
    assert run["run"].splitlines()[-1] == "bash .ci/release-check dist"
    assert "python -m pip install --quiet build twine" in run["run"]
    assert run["env"] == {"PIP_CONSTRAINT": "constraints.txt",  # the lock, as in .ci/run
                          "RELEASE_TAG": "${{ github.ref_name }}"}
    assert check["outputs"]["version"] == f"${{{{ steps.{run['id']}.outputs.version }}}}"
    [upload] = steps_using(check, "actions/upload-artifact")
    assert upload["with"]["name"] == "dist" and upload["with"]["path"] == "dist/"
    assert "id-token" not in check.get("permissions", {})

    ci = (REPO / ".ci" / "run").read_text()
    tests = ci.index("pip install --quiet -e '.[test]' && pytest\n")
    assert tests < ci.index('bash .ci/release-check "$work/dist"\n')

    script = RELEASE_CHECK.read_text()
    for command in ("python -m build --outdir", "python -m twine check --strict",
                    "python -m venv", ".ci/installed_plugin_test.py", "-m pytest"):
        assert command in script, command
    test_extra = tomllib.loads((REPO / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]["test"]
    assert {"build", "twine"} <= {re.split(r"[<>=!~ ;\[]", r)[0] for r in test_extra}
    assert re.search(r"^twine==", (REPO / "constraints.txt").read_text(), re.M)


def test_pypi_gets_the_checked_files_by_trusted_publishing():
    pypi = job("pypi")
    assert pypi["needs"] == "check"
    assert pypi["environment"]["name"] == "pypi"
    assert pypi["permissions"] == {"id-token": "write"}
    [download] = steps_using(pypi, "actions/download-artifact")
    assert download["with"] == {"name": "dist", "path": "dist/"}  # no build of its own
    [publish] = steps_using(pypi, "pypa/gh-action-pypi-publish")
    assert publish["uses"] == "pypa/gh-action-pypi-publish@release/v1"
    assert "password" not in publish.get("with", {})  # no token: trusted publishing
    assert step_index(pypi, "actions/download-artifact") < step_index(
        pypi, "pypa/gh-action-pypi-publish")
    others = [name for name, other in workflow()["jobs"].items()
              if "id-token" in other.get("permissions", {}) and name != "pypi"]
    assert others == []


def test_the_image_is_pushed_for_two_architectures_with_the_version_and_latest():
    image = job("image")
    assert "check" in image["needs"]
    assert image["permissions"] == {"contents": "read", "packages": "write"}
    assert image["env"]["IMAGE"] == f"ghcr.io/{OWNER}/payroll-sandbox"
    assert image["env"]["IMAGE"].replace(OWNER, "<owner>") == PUBLISHED
    [named] = [step for step in image["steps"] if step.get("id") == "image"]
    [login] = steps_using(image, "docker/login-action")
    assert login["with"] == {"registry": "ghcr.io", "username": "${{ github.actor }}",
                             "password": "${{ secrets.GITHUB_TOKEN }}"}
    [build] = steps_using(image, "docker/build-push-action")
    settings = build["with"]
    assert set(settings["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert settings["push"] is True and settings["context"] == "."
    name = "${{ steps.image.outputs.name }}"
    assert settings["tags"].splitlines() == [f"{name}:{VERSION}", f"{name}:latest"]
    order = [step_index(image, action) for action in (
        "docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action",
        "docker/build-push-action")]
    assert order == sorted(order)
    assert image["steps"].index(named) < order[-1]


def test_the_image_name_is_made_lower_case_as_the_registry_wants(tmp_path):
    [named] = [step for step in job("image")["steps"] if step.get("id") == "image"]
    output = tmp_path / "output"
    ran = subprocess.run(["bash", "-c", named["run"]], capture_output=True, text=True,
                         timeout=30, env={**os.environ, "GITHUB_OUTPUT": str(output),
                                          "IMAGE": "ghcr.io/Acme-Payroll/payroll-sandbox"})
    assert ran.returncode == 0, ran.stderr
    assert output.read_text() == "name=ghcr.io/acme-payroll/payroll-sandbox\n"


def test_the_docs_name_the_image_the_release_pushes():
    readme = REPO / "README.md"
    docker_section = readme.read_text().split("## Docker and CI\n", 1)[1].split("\n## ")[0]
    assert f"`{PUBLISHED}`" in docker_section
    github = yaml.safe_load((REPO / "docs" / "ci" / "github-actions.yml").read_text())
    assert github["jobs"]["integration"]["services"]["sandbox"]["image"] == f"{PUBLISHED}:latest"
    assert f"{PUBLISHED}:latest" in (REPO / "compose.yaml").read_text()
    recipes = [readme, REPO / "compose.yaml", *(REPO / "docs" / "ci").iterdir()]
    assert [path.name for path in recipes if "your-org" in path.read_text()] == []


def test_a_tag_that_is_not_the_version_stops_the_release_before_the_build(tmp_path):
    ran = subprocess.run(["bash", RELEASE_CHECK, tmp_path / "dist"], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "RELEASE_TAG": "v0.0.0-not-the-version"})
    assert ran.returncode == 1
    assert (f"the tag v0.0.0-not-the-version is not v{payroll_sandbox.__version__}"
            in ran.stderr), ran.stderr
    assert "simulator/__init__.py" in ran.stderr
    assert list((tmp_path / "dist").iterdir()) == []  # nothing built


def test_the_customers_test_the_release_runs_passes_here(pytester, monkeypatch):
    """.ci/installed_plugin_test.py, which the script runs against the installed wheel, run
    against this install: the test itself is sound."""
    for name in list(os.environ):
        if name.startswith("PAYROLL_SANDBOX_") or name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RELEASE_VERSION", payroll_sandbox.__version__)
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_installed_plugin=(
        REPO / ".ci" / "installed_plugin_test.py").read_text())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:faker")
    assert result.parseoutcomes() == {"passed": 2}, result.stdout.str()
