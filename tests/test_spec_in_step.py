"""The spec the tests check is the repository's own copy (docs/spec/), so a clone runs its
suite with nothing beside it; .ci/spec-in-step, which .ci/run runs before the tests, holds
the copy to the spec it copies and names the file that drifted. Here it runs against a
spec folder made in a temporary directory: a copy of docs/spec/, then changed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

import payroll_sandbox

SCRIPT = REPO / ".ci" / "spec-in-step"
COPIES = REPO / "docs" / "spec"


def spec_like_the_copies(tmp_path: Path) -> Path:
    folder = tmp_path / "spec"
    shutil.copytree(COPIES, folder)
    return folder


def check(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, folder], capture_output=True, text=True,
                          timeout=60)


def test_the_copies_hold_the_spec_and_its_revision():
    assert {path.name for path in COPIES.iterdir()} == {
        "service-spec.md", "real-api-surface.md", "real-service-facts.md"}
    spec = (COPIES / "service-spec.md").read_bytes()
    assert payroll_sandbox.SPEC_REVISION == hashlib.sha256(spec).hexdigest()[:12]


def test_a_spec_in_step_with_the_copies_passes(tmp_path):
    ran = check(spec_like_the_copies(tmp_path))
    assert ran.returncode == 0, ran.stderr
    assert "docs/spec/ is in step with" in ran.stdout and ran.stderr == ""


def test_a_drifted_file_is_named_with_its_diff_and_the_command_that_fixes_it(tmp_path):
    spec = spec_like_the_copies(tmp_path)
    surface = spec / "real-api-surface.md"
    surface.write_text(surface.read_text() + "| GET | /new-operation | key | - | `ok`: boolean |\n")
    ran = check(spec)
    assert ran.returncode == 1
    assert "spec-in-step: docs/spec/real-api-surface.md drifted from " in ran.stderr
    assert f"cp {os.path.relpath(surface, REPO)} docs/spec/real-api-surface.md\n" in ran.stderr
    assert "+| GET | /new-operation |" in ran.stderr  # the diff shows where
    assert "real-service-facts.md" not in ran.stderr  # only the file that moved
    assert "SPEC_REVISION" not in ran.stderr


def test_a_changed_service_spec_names_the_revision_to_set(tmp_path):
    spec = spec_like_the_copies(tmp_path)
    service = spec / "service-spec.md"
    service.write_text(service.read_text() + "\nA new rule.\n")
    revision = hashlib.sha256(service.read_bytes()).hexdigest()[:12]
    ran = check(spec)
    assert ran.returncode == 1
    assert "docs/spec/service-spec.md drifted from" in ran.stderr
    assert f'set SPEC_REVISION = "{revision}"' in ran.stderr
    assert "simulator/__init__.py" in ran.stderr


def test_a_spec_file_without_a_copy_and_a_copy_without_its_file_are_named(tmp_path):
    spec = spec_like_the_copies(tmp_path)
    (spec / "new-facts.md").write_text("# New facts\n")
    (spec / "real-service-facts.md").unlink()
    ran = check(spec)
    assert ran.returncode == 1
    assert "docs/spec/new-facts.md is missing" in ran.stderr
    assert "docs/spec/real-service-facts.md copies no file of" in ran.stderr
    assert "git rm docs/spec/real-service-facts.md" in ran.stderr


def test_no_spec_folder_fails_saying_where_it_looked(tmp_path):
    ran = check(tmp_path / "nowhere")
    assert ran.returncode == 1
    assert f"no spec folder at {tmp_path / 'nowhere'}" in ran.stderr


def test_ci_runs_the_check_before_the_tests():
    ci = (REPO / ".ci" / "run").read_text()
    assert ci.index("python .ci/spec-in-step\n") < ci.index("&& pytest\n")


def test_no_test_reads_or_names_anything_beside_the_repository():
    """The tests read docs/spec/; none reaches out of the clone for it (the needles are
    built here so that this file does not hold them)."""
    needles = ["../" + "shared", "shared" + "/spec", "shared" + "/DESIGN", "REPO" + ".parent"]
    found = [f"{path.relative_to(REPO)}: {needle}"
             for path in sorted((REPO / "tests").rglob("*"))
             if path.is_file() and "__pycache__" not in path.parts
             for needle in needles if needle in path.read_text(errors="replace")]
    assert found == []
