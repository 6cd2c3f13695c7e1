"""The README's examples run as written against a real server (STYLE: README examples are tests),
and what it and docs/ state about the code is checked against the code."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from test_cli import serving

import payroll_sandbox
from payroll_sandbox.kit.cloudevents_sdk import sdk_major

pytest_plugins = ["pytester"]

README = REPO / "README.md"
DOCS = REPO / "docs"


def section(heading: str, path: Path = README) -> str:
    """The text under `## heading` up to the next `## ` heading."""
    text = path.read_text()
    assert f"## {heading}\n" in text, f"{path.name} has no section {heading!r}"
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of `text` whose info string is `language` ("" for a bare fence)."""
    found, current, kind = [], None, None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current, kind = [], line[3:].strip()
            else:
                if kind == language:
                    found.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return found


def shell_blocks(heading: str) -> list[str]:
    return blocks(section(heading), "sh")


def commands(block: str) -> list[str]:
    """Shell commands of a block, continuation lines joined, comments and servers left out."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#") and "serve" not in line]


def run_examples(heading: str, base_url: str, prelude: str = "") -> list[tuple[str, dict]]:
    outputs = []
    for block in shell_blocks(heading):
        for command in commands(block):
            if re.match(r"^[A-Z]+=", command):
                prelude += command + "\n"
                continue
            command = command.replace("localhost:8080", base_url.removeprefix("http://"))
            result = subprocess.run(["bash", "-c", prelude + command], capture_output=True,
                                    text=True, timeout=30)
            assert result.returncode == 0, (command, result.stderr)
            outputs.append((command, json.loads(result.stdout)))
    return outputs


@pytest.fixture(scope="module")
def server():
    """One `serve --clock manual` for the tests that only read what it serves or work in a
    fresh tenant of their own: (base URL, key, secret, ready line)."""
    with serving("--clock", "manual") as running:
        yield running


def try_it_variables() -> str:
    """KEY, SECRET and JSON as the Try it block sets them, for the sections that use them."""
    return "".join(c + "\n" for c in commands(shell_blocks("Try it")[0])
                   if re.match(r"^[A-Z]+=", c))


# -- Quick start ----------------------------------------------------------------------------

def test_quick_start_installs_with_the_plugin_and_pytest_aiohttp():
    """From a clone today; from PyPI once the release workflow has published a version, and
    the block says which is which."""
    install = shell_blocks("Quick start")[0]
    assert install.startswith("pip install -e . pytest-aiohttp ")
    later = install.splitlines()[1]
    assert later.startswith("# Not on PyPI yet; once released")
    assert later.endswith(": pip install payroll-sandbox pytest-aiohttp")
    assert ".github/workflows/release.yml" in later
    assert (REPO / ".github" / "workflows" / "release.yml").is_file()
    run = shell_blocks("Quick start")[-1]
    assert run.startswith("pytest test_webhooks.py")


@pytest.mark.skipif(sdk_major() != 2, reason="the Quick start's handler uses cloudevents 2.x")
def test_quick_start_passes_as_a_customers_test_file(pytester):
    """The Quick start's one python block, as `test_webhooks.py` beside the README's pytest.ini
    (every warning an error), in a pytest session of its own: its one test passes."""
    text = section("Quick start")
    [code] = blocks(text, "python")
    [ini] = blocks(text, "ini")
    assert len(code.splitlines()) <= 45
    assert "from cloudevents.core.bindings.http import" in code
    assert "x-hmac-signature-sha-256" in code and '"scenario": "auth-expired"' in code
    pytester.makeini(ini + "filterwarnings = error\n")
    pytester.makepyfile(test_webhooks=code)
    # A process of its own: this suite has a tests/test_webhooks.py module of its own.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_webhooks.py")
    assert result.parseoutcomes() == {"passed": 1}, result.stdout.str()


# -- Run and test, Try it, a task ------------------------------------------------------------

def test_readme_ready_line_has_the_fields_serve_prints(server):
    sample = blocks(section("Run and test"), "")[0].strip()
    *_, line = server
    assert sample.split()[:2] == line.split()[:2]
    assert [f.split("=")[0] for f in sample.split()[3:]] == \
        [f.split("=")[0] for f in line.split()[3:]]
    assert re.search(r" seed=\d+$", line)


def test_readme_try_it_examples_answer_without_errors():
    with serving("--clock", "manual") as (base_url, *_):
        outputs = run_examples("Try it", base_url)
    assert len(outputs) >= 9
    for command, body in outputs:
        assert "error" not in body and "data" in body, command
    search = next(body for command, body in outputs if '"walmart"' in command)
    assert search["data"][0]["name"] == "Walmart"
    health = next(body for command, body in outputs if command.endswith("/health"))
    assert health["data"]["version"] == payroll_sandbox.__version__
    assert health["data"]["spec"] == payroll_sandbox.SPEC_REVISION


def test_readme_task_example_ends_with_the_events_it_promises():
    with serving("--clock", "manual") as (base_url, *_):
        outputs = run_examples("A task, end to end", base_url, prelude=try_it_variables())
    events = outputs[-1][1]["data"]
    assert [e["eventType"] for e in events] == ["task-status-updated", "task-workflow-finished"]
    assert events[0]["body"]["data"]["previousStatus"] == "processing"
    assert events[0]["body"]["data"]["reason"] == "auth-expired"


# -- Tenants and keys -----------------------------------------------------------------------

def test_readme_tenant_table_is_the_bundled_accounts():
    rows = re.findall(r"^\| `([\w-]+)` \| (\w+) \| `([^`]+)` \| `([^`]+)` \| ([^|]+) \|",
                      section("Tenants and keys"), re.M)
    accounts = yaml.safe_load((REPO / "fixtures" / "accounts.yaml").read_text())["accounts"]
    assert [(name, environment, key, secret, [p.strip() for p in products.split(",")])
            for name, environment, key, secret, products in rows] == \
        [(a["name"], a["environment"], a["apiKey"], a["apiSecret"], a["products"])
         for a in accounts]


# -- Control plane: every body, run ----------------------------------------------------------

CURL_LOGGING = r"""
set -euo pipefail
echo 0 > "$LOG/count"
# Each curl of the block, logged (arguments, status, body); a status that is not 2xx fails
# the block, as `set -e` and `pipefail` carry it out of pipes and command substitutions.
curl() {
  local n out status
  n=$(( $(cat "$LOG/count") + 1 )); echo "$n" > "$LOG/count"
  printf '%s\0' "$@" > "$LOG/$n.args"
  out=$(command curl -sS -w '\n%{http_code}' "$@") || { echo "curl failed: $*" >&2; return 1; }
  status=${out##*$'\n'}; out=${out%$'\n'*}
  printf '%s' "$status" > "$LOG/$n.status"; printf '%s' "$out" > "$LOG/$n.body"
  printf '%s\n' "$out"
  [[ $status == 2?? ]] || { echo "HTTP $status from curl $*: $out" >&2; return 1; }
}
"""


def run_block(block: str, base_url: str, prelude: str, cwd: Path) -> list[dict]:
    """One ```sh block in one bash, as a reader pastes it; each curl call it made."""
    log = cwd / "log"
    shutil.rmtree(log, ignore_errors=True)
    log.mkdir()
    script = CURL_LOGGING + prelude + block.replace("localhost:8080",
                                                    base_url.removeprefix("http://"))
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                            cwd=cwd, env={**os.environ, "LOG": str(log)})
    assert result.returncode == 0, (block, result.stderr)
    calls = []
    for n in range(1, int((log / "count").read_text()) + 1):
        args = (log / f"{n}.args").read_text().split("\0")[:-1]
        url = next(a for a in args if a.startswith(base_url.removeprefix("http://")))
        method = (args[args.index("-X") + 1] if "-X" in args else
                  "POST" if {"-d", "--data", "--data-binary"} & set(args) else "GET")
        sent = next((args[i + 1] for i, a in enumerate(args) if a == "-d"), None)
        calls.append({"method": method, "path": "/" + url.split("/", 1)[1].split("?")[0],
                      "status": int((log / f"{n}.status").read_text()),
                      "answer": json.loads((log / f"{n}.body").read_text()),
                      "sent": json.loads(sent) if sent else None})
    return calls


def operation_matches(template: str, path: str) -> bool:
    return re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path) is not None


@pytest.mark.skipif(shutil.which("jq") is None and os.environ.get("CI") != "true",
                    reason="the README's control-plane examples use jq")
def test_readme_control_plane_examples_cover_every_body_and_answer_2xx(tmp_path):
    text = section("Control plane (`/_sandbox`)")
    with serving("--clock", "manual") as (base_url, *_):
        calls = [call for block in blocks(text, "sh")
                 for call in run_block(block, base_url, try_it_variables(), tmp_path)]
        with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=10) as response:
            document = json.load(response)
    for call in calls:
        assert 200 <= call["status"] < 300 and "data" in call["answer"], call
        assert "error" not in call["answer"], call

    # Every control-plane operation that takes a body has its example here (OpenAPI names
    # them; a snapshot restore's body is the document itself), and so do the deletes.
    wanted = {(method.upper(), path) for path, operations in document["paths"].items()
              if path.startswith("/_sandbox") for method, operation in operations.items()
              if isinstance(operation, dict) and "requestBody" in operation}
    wanted |= {("POST", "/_sandbox/snapshot"), ("POST", "/_sandbox/reset"),
               ("DELETE", "/_sandbox/companies/{companyId}"), ("DELETE", "/_sandbox/tenants/{name}")}
    missing = {(method, template) for method, template in wanted
               if not any(c["method"] == method and operation_matches(template, c["path"])
                          for c in calls)}
    assert not missing, f"no README example for {sorted(missing)}"

    def answer(method: str, path: str, **sent) -> dict:
        return next(c["answer"]["data"] for c in calls if c["method"] == method
                    and operation_matches(path, c["path"])
                    and all((c["sent"] or {}).get(k) == v for k, v in sent.items()))

    faults = next(c for c in calls if c["path"] == "/_sandbox/webhooks/faults" and c["sent"])
    assert faults["answer"]["data"] == faults["sent"]
    assert answer("PUT", "/_sandbox/webhooks/faults", duplicate=None) == \
        {"duplicate": 0, "outOfOrder": 0, "delay": 0, "delaySeconds": 60}
    maintenance = answer("POST", "/_sandbox/companies/{id}/status", status="under-maintenance")
    assert maintenance["status"] == "under-maintenance"
    assert maintenance["maintenanceProducts"] == ["deposit"]
    assert answer("POST", "/_sandbox/companies/{id}/status", status="operational")["status"] == \
        "operational"
    assert answer("PATCH", "/_sandbox/companies/{id}")["name"] == "Acme Logistics Inc"
    assert answer("POST", "/_sandbox/linked-accounts/{id}/disconnect")["connected"] is False
    assert answer("POST", "/_sandbox/linked-accounts/{id}/reconnect")["connected"] is True
    assert answer("PUT", "/_sandbox/users/{id}/scenario") == \
        {"identifier": "user-42", "scenario": "connection-error"}
    tenant = answer("POST", "/_sandbox/tenants")
    assert tenant["name"] == "ci-run-1" and tenant["apiKey"] and tenant["apiSecret"]
    assert answer("DELETE", "/_sandbox/tenants/{name}") == {"name": "ci-run-1", "deleted": True}
    assert answer("POST", "/_sandbox/snapshot")["restored"] is True
    matches = answer("GET", "/aggregator/employer-matches")
    assert matches, "the registered processor token's pipeline matched no employer"

    # The processor-token answer is the one the README shows, but for its random values.
    [shown] = [json.loads(b) for b in blocks(text, "json")]
    minted = answer("POST", "/_sandbox/aggregator/processor-token", scenario="item-login-required")
    assert minted.keys() == shown["data"].keys()
    random_fields = {"processorToken", "requestId", "accountId"}
    assert {k: v for k, v in minted.items() if k not in random_fields} == \
        {k: v for k, v in shown["data"].items() if k not in random_fields}
    assert minted["processorToken"].startswith("processor-sandbox-")
    assert shown["data"]["processorToken"].startswith("processor-sandbox-")


def test_readme_control_plane_table_names_every_control_plane_operation(server):
    """Every /_sandbox path of the OpenAPI document is in the table, whole or (a sibling of
    the path before it in the row: `/reconnect`) by its last segment."""
    table = section("Control plane (`/_sandbox`)").split("\n\n", 2)[1]
    plain = re.sub(r"\{[^}]+\}", "{}", table)
    base_url, *_ = server
    with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=10) as response:
        paths = json.load(response)["paths"]
    for path in paths:
        if not path.startswith("/_sandbox") or path.endswith((".js", ".css")):
            continue
        whole = re.sub(r"\{[^}]+\}", "{}", path)
        last = "/" + path.rsplit("/", 1)[1]
        assert f"{whole}`" in plain or f"`{last}`" in plain, \
            f"the control-plane table does not name {path}"


def table_flags(text: str) -> set[str]:
    """The flags a configuration table's rows start with (`--a X`, `--b Y` rows give both)."""
    return (set(re.findall(r"^\| `(--[a-z-]+)", text, re.M))
            | set(re.findall(r"^\| `--[^`]*`, `(--[a-z-]+)", text, re.M)))


def test_configuration_tables_name_every_flag_of_serve():
    """docs/configuration.md has every flag `payroll-sandbox serve` takes; the README's
    Configuration a few of them."""
    from payroll_sandbox.tools.cli import _parser

    serve = next(action for action in _parser()._subparsers._group_actions
                 if hasattr(action, "choices")).choices["serve"]
    flags = {option for action in serve._actions for option in action.option_strings
             if option.startswith("--") and option != "--help"}
    assert table_flags((DOCS / "configuration.md").read_text()) == flags
    shown = table_flags(section("Configuration"))
    assert {"--seed", "--clock", "--state-file"} <= shown <= flags


# -- Install footprint, Docker ------------------------------------------------------------

def test_readme_version_line_is_what_the_cli_prints():
    [shown] = blocks(section("Install footprint and compatibility"), "")
    printed = subprocess.run([sys.executable, "-m", "payroll_sandbox", "--version"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
    assert shown.strip() == printed.strip() == \
        f"payroll-sandbox {payroll_sandbox.__version__} (spec {payroll_sandbox.SPEC_REVISION})"


def test_readme_docker_and_ci_recipes_set_what_the_plugin_reads():
    """The recipes themselves run in tests/test_recipes.py."""
    from payroll_sandbox.kit.pytest_plugin import RECEIVER_HOST, URL_VARIABLE

    text = section("Docker and CI")
    assert "](docs/ci/testcontainers_conftest.py)" in text
    code = (DOCS / "ci" / "testcontainers_conftest.py").read_text()
    for name in (URL_VARIABLE, RECEIVER_HOST.upper()):
        assert f'os.environ["{name}"]' in code
    assert 'extra_hosts={"host.docker.internal": "host-gateway"}' in code
    job = (DOCS / "ci" / "github-actions.yml").read_text()
    assert "--add-host=host.docker.internal:host-gateway" in job
    assert f"{RECEIVER_HOST.upper()}: host.docker.internal" in job


# -- docs/ ---------------------------------------------------------------------------------

def test_docs_plugin_standalone_example_runs_against_a_server(tmp_path, server):
    receivers = section("Receivers: `WebhookReceiver` and `AsyncWebhookReceiver`",
                        DOCS / "plugin.md")
    [code] = blocks(receivers, "python")
    base_url, *_ = server  # the example makes a tenant of its own
    script = tmp_path / "example.py"
    script.write_text(code.replace("http://127.0.0.1:8080", base_url))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"company-updated [0-9a-f-]{36}\n", result.stdout)


def test_docs_plugin_tables_name_every_fixture_and_option():
    from payroll_sandbox.kit import pytest_plugin, testing
    from payroll_sandbox.kit import blocking
    from payroll_sandbox.kit import receivers

    text = (DOCS / "plugin.md").read_text()
    source = Path(pytest_plugin.__file__).read_text()
    fixtures = re.findall(r"@(?:pytest|pytest_asyncio)\.fixture[^\n]*\n\s*(?:async )?def (\w+)",
                          source)
    assert "payroll_sandbox_receiver_host" in fixtures
    for name in (f for f in fixtures if not f.startswith("_")):
        assert f"| `{name}` |" in text, name
    for name in [*pytest_plugin.OPTIONS, pytest_plugin.RECEIVER_HOST]:
        assert f"`--{name.replace('_', '-')} " in text and f"`{name}`" in text, name
    for cls in (blocking.Sandbox, receivers.WebhookReceiver, receivers._Receiving):
        for member in (m for m in vars(cls) if not m.startswith("_")):
            assert f"`{member}" in text, f"{cls.__name__}.{member}"


def test_docs_api_tables_name_only_declared_operations(server):
    """docs/api.md's tables guide a reader through what the schemas do not say; the
    reference of every operation is /docs, made from the declarations (its summary, its
    description, its example), so a new operation needs no row here. What a row names must
    be an operation the server declares: a row outlives no renamed or removed operation.
    A cell's `METHOD /path` names one, and so does each bare `/path` after it (that method)."""
    base_url, *_ = server
    with urllib.request.urlopen(f"{base_url}/openapi.json", timeout=10) as response:
        declared = {(method.upper(), path) for path, item in json.load(response)["paths"].items()
                    for method in item}
    named = []
    for row in re.findall(r"^\| (.+?) \|", section("Operations", DOCS / "api.md"), re.M):
        method = None
        for word, path in re.findall(r"`(?:(GET|POST|PUT|PATCH|DELETE) )?(/[^`\s]*)`", row):
            method = word or method
            named.append((method, path))
    assert len(named) >= 40, named  # the tables are read (a change of their form shows here)
    assert not [name for name in named if name not in declared]


def test_docs_benchmarks_name_every_benchmark_script():
    text = (DOCS / "benchmarks.md").read_text()
    named = set(re.findall(r"`python (bench/\w+\.py)", text))
    scripts = {f"bench/{p.name}" for p in (REPO / "bench").glob("*.py")
               if p.name not in ("common.py", "bare_server.py")}
    assert named == scripts


def test_docs_fixtures_scenario_example_is_the_bundled_file():
    [shown] = blocks((DOCS / "fixtures.md").read_text().split("## Scenario files\n")[1], "yaml")
    assert yaml.safe_load(shown) == \
        yaml.safe_load((REPO / "scenarios" / "auth-expired.yaml").read_text())


def test_readme_scenario_table_is_the_one_the_scenario_files_make():
    """Issue 23: the table lists every bundled scenario with the products it fits, made
    from the files (`python -m payroll_sandbox.load.scenarios.table` prints it)."""
    from payroll_sandbox.load.scenarios.table import bundled_table

    text = section("Tasks and scenarios")
    shown = "\n".join(line for line in text.splitlines() if line.startswith("|")) + "\n"
    assert shown == bundled_table(), ("regenerate the table: python -m "
                                      "payroll_sandbox.load.scenarios.table")
    named = set(re.findall(r"`([a-z][a-z-]+)`(?: \(|,| \|)", shown))
    assert {path.stem for path in (REPO / "scenarios").glob("*.yaml")} <= named


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_the_readme_and_docs_lead_somewhere():
    for page in [README, *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file, _, anchor = target.partition("#")
            path = (page.parent / file).resolve() if file else page
            assert path.exists(), f"{page.name}: {target}"
            if anchor:
                anchors = {slug(h) for h in re.findall(r"^#+ (.*)$", path.read_text(), re.M)}
                assert anchor in anchors, f"{page.name}: {target}"


def test_the_readme_links_each_docs_page_and_stays_a_guide():
    text = README.read_text()
    pages = sorted(path.name for path in (REPO / "docs").glob("*.md"))
    assert {"api.md", "plugin.md", "verify-against.md", "aggregator.md"} <= set(pages)
    for page in pages:
        assert f"](docs/{page})" in text, page
    assert len(text.splitlines()) <= 800
