"""`payroll-sandbox exec [serve flags] -- CMD [ARGS...]` as a real process: CMD's exit status,
its environment, signals passed on, undelivered webhooks named on standard error, and the
recipes of docs/exec.md (a Node `node:test` suite, a Go test) run under it and passing."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, run_cli

EXEC = [sys.executable, "-m", "payroll_sandbox", "exec"]
SERVING = "payroll-sandbox serving "
REPORT = "webhook deliveries of this run never got a 2xx"


def python(*parts: str) -> list[str]:
    """CMD: this Python running the parts of a script, one after the other."""
    return [sys.executable, "-c", "\n".join(textwrap.dedent(part) for part in parts)]


# A CMD's helper: one call to the sandbox with the keys exec gave it.
CALL = """
    import json, os, urllib.request
    URL = os.environ["PAYROLL_SANDBOX_URL"]
    KEYS = {"x-api-key": os.environ["PAYROLL_SANDBOX_API_KEY"],
            "x-api-secret": os.environ["PAYROLL_SANDBOX_API_SECRET"]}
    def call(method, path, body=None):
        request = urllib.request.Request(URL + path, method=method, headers={
            **KEYS, "content-type": "application/json"},
            data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)["data"]
"""


def closed_port() -> int:
    """A port nothing listens on (taken from the system, then given back)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_exec_exits_with_the_commands_status():
    result = run_cli("exec", "--", "sh", "-c", "exit 3")
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith(SERVING)  # the ready line goes to stderr, stdout is CMD's
    assert result.stdout == ""
    assert REPORT not in result.stderr


def test_exec_without_a_command_or_with_an_unknown_one_says_so():
    result = run_cli("exec")
    assert result.returncode == 2 and "no command given" in result.stderr
    result = run_cli("exec", "--", "no-such-command-here")
    assert result.returncode == 127
    assert "no-such-command-here: command not found" in result.stderr


def test_exec_gives_the_command_the_url_and_the_default_tenants_keys():
    result = run_cli("exec", "--", *python(CALL, """
        clock = call("GET", "/_sandbox/clock")
        found = call("POST", "/company/search", {"query": "Walmart"})
        print(json.dumps({"url": URL, "key": KEYS["x-api-key"], "mode": clock["mode"],
                          "found": found[0]["name"]}))
    """))
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    fields = dict(part.split("=", 1) for part in result.stderr.splitlines()[0].split()[3:])
    assert seen["url"] == result.stderr.split()[2] and seen["url"].startswith("http://127.0.0.1:")
    assert seen["key"] == fields["x-api-key"] == "sandbox-key-acme-0001"
    assert seen["mode"] == "manual"  # exec's default: a suite moves the clock, never sleeps
    assert seen["found"] == "Walmart"
    # The server is gone once exec has ended.
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(seen["url"] + "/health", timeout=5)


def test_exec_takes_serve_flags_and_variables_over_its_own_defaults():
    script = python(CALL, 'print(call("GET", "/_sandbox/clock")["mode"])')
    assert run_cli("exec", "--clock", "real", "--", *script).stdout.strip() == "real"
    assert run_cli("exec", "--", *script,
                   env={"PAYROLL_SANDBOX_CLOCK": "real"}).stdout.strip() == "real"
    port = closed_port()
    result = run_cli("exec", "--port", str(port), "--", *python(CALL, "print(URL)"))
    assert result.stdout.strip() == f"http://127.0.0.1:{port}"


def test_exec_names_every_undelivered_webhook_with_tenant_type_url_and_error():
    port = closed_port()
    url = f"http://127.0.0.1:{port}/hooks"
    result = run_cli("exec", "--", *python(CALL, f"""
        call("PUT", "/_sandbox/webhooks/endpoints", {{"endpoints": [{{"url": "{url}"}}]}})
        call("POST", "/_sandbox/events/trigger", {{"eventType": "company-updated"}})
        call("POST", "/_sandbox/clock/advance", {{"seconds": 120}})  # every retry made
        call("POST", "/_sandbox/events/trigger", {{"eventType": "company-created"}})
        # A tenant of the run's own, deleted before the end: its ledger is named too.
        made = call("POST", "/_sandbox/tenants", {{"name": "per-test"}})
        KEYS.update({{"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}})
        call("PUT", "/_sandbox/webhooks/endpoints", {{"endpoints": [{{"url": "{url}"}}]}})
        call("POST", "/_sandbox/events/trigger", {{"eventType": "company-deleted"}})
        call("DELETE", "/_sandbox/tenants/per-test")
    """))
    assert result.returncode == 0, result.stderr  # CMD's status, whatever was undelivered
    report = result.stderr[result.stderr.index("payroll-sandbox exec: 3 " + REPORT):]
    lines = report.splitlines()[1:]
    assert len(lines) == 3, report
    deleted, failed, pending = lines  # the tenants that left first, as they left
    assert failed.startswith(f"  tenant acme: company-updated to {url} [failed, 3 attempts")
    assert "connection refused" in failed.lower() or "connect" in failed.lower()
    assert pending.startswith(f"  tenant acme: company-created to {url} [pending, 1 attempt")
    assert "which never got there" in pending  # the manual clock never reached the retry
    assert deleted.startswith(f"  tenant per-test (deleted): company-deleted to {url} [")
    assert "the tenant was deleted before the next attempt" in deleted


def test_exec_says_nothing_of_webhooks_when_every_delivery_got_a_2xx():
    from payroll_sandbox.testing import WebhookReceiver

    with WebhookReceiver() as receiver:
        result = run_cli("exec", "--", *python(CALL, f"""
            call("PUT", "/_sandbox/webhooks/endpoints", {{"endpoints": [{{"url": "{receiver.url}"}}]}})
            call("POST", "/_sandbox/events/trigger", {{"eventType": "company-updated"}})
        """))
        assert result.returncode == 0, result.stderr
        assert [d.event_type for d in receiver.deliveries] == ["company-updated"]
    assert "never got a 2xx" not in result.stderr


# CMD for the signal tests: says it is ready, then waits; the signal's handler prints it
# and exits 7 (a suite cleaning up and reporting its own status).
TRAPPING = """
    import signal, sys, time
    def stop(signum, frame):
        print(f"got {signal.Signals(signum).name}", flush=True)
        sys.exit(7)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    time.sleep(60)
    print("never signalled", flush=True)
"""


def start_exec(*cmd: str) -> subprocess.Popen:
    """exec without a terminal (as CI runs it), its stdout CMD's, read as text."""
    return subprocess.Popen([*EXEC, "--", *cmd], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_exec_passes_a_signal_on_to_the_command_and_exits_as_it_does(signum):
    process = start_exec(*python(TRAPPING))
    try:
        assert process.stdout.readline() == "ready\n", process.stderr.read()
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert stdout == f"got {signum.name}\n", stderr
    assert process.returncode == 7, stderr


def test_exec_exits_128_plus_the_signal_when_it_ends_the_command():
    process = start_exec(*python('print("ready", flush=True); import time; time.sleep(60)'))
    try:
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM


def test_ctrl_c_at_a_terminal_reaches_the_command_once():
    """The terminal signals its whole foreground process group, exec and CMD alike: exec
    does not pass that SIGINT on a second time (a second Ctrl-C means "now" to many test
    runners)."""
    import fcntl
    import pty
    import termios

    counting = python("""
        import signal, sys, time
        seen = []
        signal.signal(signal.SIGINT, lambda *_: seen.append(1))
        print("ready", flush=True)
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # a second SIGINT, if any, comes meanwhile
        print(f"interrupts={len(seen)}", flush=True)
        sys.exit(5)
    """)
    master, slave = pty.openpty()

    def own_terminal() -> None:  # a session of its own, the pty its controlling terminal
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    process = subprocess.Popen([*EXEC, "--", *counting], stdin=slave, stdout=slave,
                               stderr=slave, preexec_fn=own_terminal, cwd=REPO)
    os.close(slave)
    output = b""
    try:
        output = read_until(master, b"ready", timeout=30)
        os.write(master, b"\x03")  # Ctrl-C
        process.wait(timeout=30)
        output += read_until(master, b"interrupts=", timeout=5)
        output += read_until(master, b"\n", timeout=5)
    finally:
        process.kill()
        os.close(master)
    assert b"interrupts=1" in output, output
    assert process.returncode == 5


def read_until(fd: int, mark: bytes, timeout: float) -> bytes:
    """What a pty's master reads until `mark` has come (or the time is up, or it closed)."""
    import select

    seen = b""
    deadline = time.monotonic() + timeout
    while mark not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            seen += chunk
    return seen


# -- the recipes of docs/exec.md, run as the docs show them -----------------------------------

DOC = REPO / "docs" / "exec.md"
JAVA_JARS = Path("/usr/share/java")  # Debian's junit5 and libjackson2-databind-java
RECIPES = {"node": ["package.json", "app.mjs", "test/webhooks.test.mjs",
                    "test/verify.test.mjs"],
           "playwright": ["package.json", "sandbox-flow.mjs", "test/flow.test.mjs"],
           "go": ["go.mod", "app.go", "app_test.go"],
           "java": ["pom.xml", "src/main/java/recipe/App.java",
                    "src/test/java/recipe/AppTest.java"]}
PACKAGES = "apt-get install nodejs npm golang-go default-jdk-headless junit5 libjackson2-databind-java"


def require_tool(name: str) -> str:
    """A toolchain the recipes need (a command, or a file's path): skipped where it is
    missing, a failure in CI (CI=true, where .ci/run installs them)."""
    found = str(name) if Path(name).is_absolute() and Path(name).exists() else shutil.which(name)
    if found is None:
        message = f"{name} is not installed (the recipes of docs/exec.md need it; {PACKAGES})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def fenced_blocks(text: str) -> list[str]:
    """The contents of every fenced block of a Markdown text."""
    found, current = [], None
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                found.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return found


def test_docs_exec_shows_every_recipe_file_as_the_tests_run_it():
    shown = fenced_blocks(DOC.read_text())
    for language, files in RECIPES.items():
        for name in files:
            text = (REPO / "examples" / language / name).read_text()
            assert text in shown, f"docs/exec.md does not show examples/{language}/{name} as it is"
    assert "payroll-sandbox exec -- npm test" in DOC.read_text()
    assert "payroll-sandbox exec -- go test -count=1 ./..." in DOC.read_text()


@pytest.fixture(scope="module")
def node_recipe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/node copied to a temporary folder, its locked dependencies installed from
    the npm registry (`npm ci`), as a newcomer's checkout would have them."""
    require_tool("node")
    require_tool("npm")
    folder = tmp_path_factory.mktemp("recipe") / "node"
    shutil.copytree(REPO / "examples" / "node", folder,
                    ignore=shutil.ignore_patterns("node_modules"))
    result = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=folder,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return folder


@pytest.mark.long
def test_the_node_recipe_passes_under_exec(node_recipe):
    result = subprocess.run([*EXEC, "--", "npm", "test"], cwd=node_recipe, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\bpass 2\b", result.stdout) and re.search(r"\bfail 0\b", result.stdout)
    assert "never got a 2xx" not in result.stderr


@pytest.mark.long
def test_a_node_app_that_refuses_its_webhooks_fails_and_exec_says_why(node_recipe, tmp_path):
    """The same suite with the app checking signatures against a wrong secret: the suite
    fails, and exec names each delivery the app refused with its 401."""
    broken = tmp_path / "node"
    shutil.copytree(node_recipe, broken, symlinks=True)
    test_file = broken / "test" / "webhooks.test.mjs"
    source = test_file.read_text()
    assert "createApp({ secret: tenant.apiSecret })" in source
    test_file.write_text(source.replace("createApp({ secret: tenant.apiSecret })",
                                        'createApp({ secret: "not the secret" })'))
    result = subprocess.run([*EXEC, "--", "npm", "test"], cwd=broken, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode != 0
    assert re.search(r"\bfail 1\b", result.stdout), result.stdout
    report = result.stderr[result.stderr.index("payroll-sandbox exec: "):]
    *lines, bundles = report.splitlines()[1:]
    assert lines and all("(deleted): " in line and "non-2xx response 401" in line
                         for line in lines), report
    # The run failed: its tenants' bundles, the one it deleted among them.
    assert bundles.startswith("payroll-sandbox exec: the run failed; 2 tenant bundles "), report
    assert len(list((broken / "payroll-sandbox-bundles").glob("exec-*-deleted-1.json"))) == 1
    assert any(" task-status-updated to http://127.0.0.1:" in line for line in lines), report


@pytest.mark.long
def test_the_playwright_recipe_runs_the_flow_on_autopilot_under_exec(tmp_path, chromium):
    """examples/playwright, its locked playwright-core installed (`npm ci`): Debian's
    chromium opens the hosted flow from a page of its own, the flow plays itself, and the
    callbacks ledger equals what the page heard."""
    require_tool("node")
    require_tool("npm")
    folder = tmp_path / "playwright"
    shutil.copytree(REPO / "examples" / "playwright", folder,
                    ignore=shutil.ignore_patterns("node_modules"))
    installed = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=folder,
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    result = subprocess.run([*EXEC, "--", "npm", "test"], cwd=folder, capture_output=True,
                            text=True, timeout=300, env={**os.environ, "CHROMIUM_PATH": chromium})
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"\bpass 1\b", result.stdout) and re.search(r"\bfail 0\b", result.stdout)


@pytest.mark.long
def test_the_go_recipe_passes_under_exec(tmp_path):
    require_tool("go")
    folder = tmp_path / "go"
    shutil.copytree(REPO / "examples" / "go", folder)
    result = subprocess.run([*EXEC, "--", "go", "test", "-count=1", "./..."], cwd=folder,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok  \texample.com/payroll-sandbox-recipe"), result.stdout
    assert "never got a 2xx" not in result.stderr


@pytest.mark.long
def test_the_java_recipe_passes_under_exec_with_junit(tmp_path):
    """The commands docs/exec.md shows for JUnit without Maven (Maven Central is out of
    reach here), run as shown from a copy of examples/java."""
    for tool in ("javac", "java", *(JAVA_JARS / jar for jar in (
            "junit-platform-console-standalone.jar", "jackson-databind.jar",
            "jackson-core.jar", "jackson-annotations.jar"))):
        require_tool(str(tool))
    [commands] = [block for block in fenced_blocks(DOC.read_text())
                  if "junit-platform-console-standalone" in block]
    folder = tmp_path / "java"
    shutil.copytree(REPO / "examples" / "java", folder)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # payroll-sandbox
    result = subprocess.run(["bash", "-ec", commands], cwd=folder, capture_output=True,
                            text=True, timeout=600, env={**os.environ, "PATH": path})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 tests successful" in result.stdout and "0 tests failed" in result.stdout
    assert "never got a 2xx" not in result.stderr


# -- requests verified from another language, and a failed run's bundles (issue 46) -------------

def test_a_node_test_verifies_requests_with_near_misses_under_exec(tmp_path):
    """examples/node/test/verify.test.mjs (Node's own test runner and fetch, no package):
    POST /_sandbox/requests/verify passes on the exact request and names the 3 paths
    planted in a near miss, as the Python plugin's assert_called does."""
    require_tool("node")
    shutil.copy(REPO / "examples" / "node" / "test" / "verify.test.mjs", tmp_path)
    result = subprocess.run([*EXEC, "--bundles", "off", "--", "node", "--test",
                             "verify.test.mjs"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^# pass 2$", result.stdout, re.M) and re.search(r"^# fail 0$",
                                                                      result.stdout, re.M)


def test_a_failed_run_leaves_a_bundle_per_tenant_it_touched(tmp_path):
    result = subprocess.run([*EXEC, "--", *python(CALL, """
        made = call("POST", "/_sandbox/tenants", {"name": "kept"})
        keys = {"x-api-key": made["apiKey"], "x-api-secret": made["apiSecret"]}
        def as_tenant(method, path, body=None, keys=keys):
            request = urllib.request.Request(URL + path, method=method, headers={
                **keys, "content-type": "application/json"},
                data=None if body is None else json.dumps(body).encode())
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.load(response)["data"]
        as_tenant("POST", "/task/create", {"identifier": "u1",
                  "company": "6410a0000000000000000001", "product": "deposit"})
        gone = call("POST", "/_sandbox/tenants", {"name": "gone"})
        gone = {"x-api-key": gone["apiKey"], "x-api-secret": gone["apiSecret"]}
        as_tenant("GET", "/_sandbox/clock", keys=gone)
        as_tenant("DELETE", "/_sandbox/tenants/gone", keys=gone)
        raise SystemExit(1)
    """)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    folder = tmp_path / "payroll-sandbox-bundles"
    assert sorted(p.name for p in folder.iterdir()) == [
        "exec-acme.json", "exec-gone-deleted-1.json", "exec-kept.json"]
    assert f"3 tenant bundles written to {folder}" in result.stderr
    kept = json.loads((folder / "exec-kept.json").read_text())
    assert kept["tenant"] == "kept" and len(kept["snapshot"]["tasks"]) == 1
    assert kept["test"].startswith("exec: ")
    # A run that passes writes none; --bundles off writes none either.
    for flags, argv in (([], ["true"]), (["--bundles", "off"], ["false"])):
        shutil.rmtree(folder, ignore_errors=True)
        result = subprocess.run([*EXEC, *flags, "--", *argv], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120)
        assert not folder.exists() and "bundle" not in result.stderr


def test_serve_open_bundle_refuses_what_is_no_bundle_and_starts_nothing(tmp_path):
    for name, text, says in (("torn.json", "{", "not JSON"),
                             ("newer.json", json.dumps({
                                 "format": "payroll-sandbox-bundle", "version": 99}),
                              "format version 99")):
        path = tmp_path / name
        path.write_text(text)
        result = run_cli("serve", "--port", "0", "--open-bundle", str(path))
        assert result.returncode == 2, result.stderr
        assert result.stdout == "" and f"configuration error: {path}: $" in result.stderr
        assert says in result.stderr
