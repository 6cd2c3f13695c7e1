"""Hostile input, round five (issue 48), the half that needs a browser or a process.

XSS: every new field the dashboard and the hosted flow show (the flow's callbacks on the
dashboard's timeline, the autopilot's company and username, a user bound to a profile with
a timeline) carries `<img src=x onerror=...>` and `<script>` text; in Chromium no script of
it runs (a window flag stays unset), the text is shown as text, and axe finds no serious or
critical violation. Processes: `exec --coverage` and `--payroll-sandbox-coverage` with a path
outside the working folder, or through a symlink to elsewhere, stop at the start with a usage
error and write nothing there.
"""

from __future__ import annotations

import json

import pytest
from axe_playwright_python.async_playwright import Axe
from calls import call
from conftest import ACME, page_errors, run_cli
from test_autopilot_browser import ended, heard, started
from test_flow_look_browser import axe_blocking
from test_sdk_browser import token_of
from test_sdk_protocol_browser import open_raw, page, sandbox  # noqa: F401

pytest_plugins = ["pytester"]
IN_THE_BROWSERS_LOOP = pytest.mark.asyncio(loop_scope="session")  # conftest.browser's

IMG = "<img src=x onerror=\"window.__xss='img'\">"
SCRIPT = "<script>window.__xss='script'</script>"
HOSTILE = f"Evil {IMG}{SCRIPT} Co"
USER = "xss-five"
BLOCKING = ("serious", "critical")


async def no_script_ran(target) -> None:
    assert await target.evaluate("() => window.__xss === undefined"), "a hostile script ran"
    assert await target.evaluate("""() => document.querySelectorAll('img[src=x]').length +
        [...document.scripts].filter(s => s.textContent.includes('__xss')).length""") == 0


async def blocking_violations(target) -> list:
    violations = (await Axe().run(target)).response["violations"]
    return [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
            for v in violations if v["impact"] in BLOCKING]


@IN_THE_BROWSERS_LOOP
async def test_hostile_names_run_no_script_in_the_flow_or_on_the_dashboard(
        page, sandbox, browser_context):  # noqa: F811
    """A company named with markup, an autopilot that picks it and signs in, a user bound to
    a profile with a timeline, and callbacks whose payloads carry markup: the flow runs to
    its end and the dashboard draws them, and no script of theirs runs anywhere."""
    company = (await call(sandbox, "POST", "/_sandbox/companies", status=201, json={
        "name": HOSTILE, "connector": {"availableProducts": ["deposit"]}}))["data"]["_id"]
    await call(sandbox, "PUT", f"/_sandbox/users/{USER}/profile", json={"data": {
        "timeline": [{"at": "+30d", "income": {"income": 95_000}}]}})
    await call(sandbox, "PUT", f"/_sandbox/users/{USER}/autopilot",
               json={"company": company, "username": "test-good"})
    bound = (await call(sandbox, "GET", f"/_sandbox/users/{USER}/autopilot"))["data"]
    assert bound["autopilot"]["company"] == company

    await page.evaluate("() => { window.events = []; }")
    token = await token_of(sandbox, USER)
    await open_raw(page, {"tasks": [{"operation": "deposit"}]}, token)
    await started(page)
    frame = next(f for f in page.frames if f != page.main_frame)
    await no_script_ran(frame)
    assert await axe_blocking(page) == []
    await no_script_ran(frame)
    await call(sandbox, "POST", "/_sandbox/clock/run-until-idle")
    await ended(page)
    await no_script_ran(page)
    told = await heard(page)
    assert any(HOSTILE in json.dumps(payload, ensure_ascii=False).replace('\\"', '"')
               for _, payload in told), told  # passed on as the text it is

    public = {"x-public-token": token}
    await call(sandbox, "POST", "/sdk/callbacks", headers=public, json={
        "flow": "hostile-flow", "messages": [
            {"event": "interaction", "payload": {"name": HOSTILE, "value": {"x": IMG}}},
            {"event": "close", "payload": {"reason": SCRIPT, "handoff": IMG}}]})

    board = await browser_context.new_page()
    errors = page_errors(board)
    fragment = f"#key={ACME['x-api-key']}&secret={ACME['x-api-secret']}"
    await board.goto(str(sandbox.server.make_url("/_sandbox/")) + fragment)
    for text in (SCRIPT, HOSTILE):  # each shown on a mark of the timeline, as the text it is
        await board.wait_for_function("""text => [...document.querySelectorAll('.callback')]
            .some(m => (m.getAttribute('aria-label') || '').includes(text))""", arg=text)
    await board.fill("#profile-user", USER)
    await no_script_ran(board)
    assert await blocking_violations(board) == []
    assert errors == []


# -- the coverage report's path, as the processes take it -------------------------------------

def test_exec_refuses_a_coverage_path_outside_the_working_folder(tmp_path):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / "link").symlink_to(elsewhere, target_is_directory=True)
    for path in (str(elsewhere / "report.json"), "../elsewhere/report.json", "link/report.json"):
        result = run_cli("exec", "--coverage", path, "--", "true", cwd=work)
        assert result.returncode == 2, (path, result.stderr)
        assert "outside the working folder" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert list(elsewhere.iterdir()) == []
    inside = run_cli("exec", "--coverage", "report.json", "--", "true", cwd=work)
    assert inside.returncode == 0, inside.stderr
    assert (work / "report.json").is_file()


def test_the_plugin_refuses_a_coverage_path_outside_the_working_folder(pytester, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (pytester.path / "link").symlink_to(elsewhere, target_is_directory=True)
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_one="def test_one(payroll_sandbox):\n    pass\n")
    for path in (str(elsewhere / "report.json"), "link/report.json"):
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist",
            f"--payroll-sandbox-coverage={path}", timeout=120)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        assert "outside the working folder" in result.stderr.str()
    assert list(elsewhere.iterdir()) == []
