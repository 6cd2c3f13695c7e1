"""The customer's own app on a real port: the plugin's `payroll_sandbox_asgi_server` and
`payroll_sandbox.testing.AsgiServer` (uvicorn), and docs/plugin.md's FastAPI, Flask and
Django recipes run as written, each in a pytest session of its own (issue 34, point 2)."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
from pathlib import Path

import pytest

from conftest import REPO, require_extra
from test_readme import README, blocks, section

from payroll_sandbox.testing import ReceiverHost
from payroll_sandbox.kit.asgi import AsgiServer

for module in ("uvicorn", "fastapi", "flask", "a2wsgi", "django"):
    require_extra(module)

pytest_plugins = ["pytester"]

PLUGIN_DOCS = REPO / "docs" / "plugin.md"
RECIPES = "Your own app on a real port: ASGI and WSGI"


def recipe(framework: str) -> dict[str, str]:
    """The files of docs/plugin.md's recipe under `### <framework>`: each python block,
    named by its first line (`# app.py`)."""
    text = section(RECIPES, PLUGIN_DOCS)
    assert f"\n### {framework}\n" in text, framework
    part = text.split(f"\n### {framework}\n", 1)[1].split("\n### ", 1)[0]
    files = {}
    for block in blocks(part, "python"):
        first, _, rest = block.partition("\n")
        name = re.fullmatch(r"# ([\w.]+\.py)", first)
        assert name, f"a {framework} block does not start with its file name: {first!r}"
        files[name.group(1)] = rest
    return files


def run_recipe(pytester: pytest.Pytester, framework: str) -> pytest.RunResult:
    """The recipe's files beside the Quick start's pytest.ini (every warning an error), in
    a pytest process of its own, as a customer runs it."""
    [ini] = blocks(section("Quick start", README), "ini")
    pytester.makeini(ini + "filterwarnings = error\n")
    for name, text in recipe(framework).items():
        (pytester.path / name).write_text(text)
    # Only the plugins the recipe uses: this environment's others cost seconds at each start.
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:hypothesispytest",
        "-p", "no:faker", "-q", timeout=180)


def test_fastapi_recipe_gets_its_webhooks_in_a_sync_and_an_async_test(pytester):
    files = recipe("FastAPI")
    assert set(files) == {"app.py", "test_webhooks.py"}
    assert "payroll_sandbox_asgi_server(app)" in files["test_webhooks.py"]
    assert "async def test_" in files["test_webhooks.py"]
    result = run_recipe(pytester, "FastAPI")
    assert result.parseoutcomes() == {"passed": 2}, result.stdout.str()


def test_flask_recipe_gets_its_webhooks_through_a2wsgi(pytester):
    files = recipe("Flask (WSGI)")
    assert "payroll_sandbox_asgi_server(WSGIMiddleware(app))" in files["test_webhooks.py"]
    result = run_recipe(pytester, "Flask (WSGI)")
    assert result.parseoutcomes() == {"passed": 1}, result.stdout.str()


def test_django_recipe_gets_its_webhooks_through_its_asgi_handler(pytester):
    files = recipe("Django")
    assert set(files) == {"webhooks.py", "conftest.py", "test_webhooks.py"}
    assert "payroll_sandbox_asgi_server(get_asgi_application())" in files["test_webhooks.py"]
    result = run_recipe(pytester, "Django")
    assert result.parseoutcomes() == {"passed": 1}, result.stdout.str()


# -- the fixture and the server, on a bare ASGI app ------------------------------------------

def recording_app(received: list[dict], lifespan: list[str] | None = None):
    """An ASGI 3 app without a framework: POST bodies appended to `received`, 204; the
    lifespan's messages appended to `lifespan`."""

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].rsplit(".", 1)[1]  # startup, shutdown
                if lifespan is not None:
                    lifespan.append(kind)
                await send({"type": f"{message['type']}.complete"})
                if kind == "shutdown":
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        received.append(json.loads(body))
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return app


def refused(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_the_factory_serves_an_app_the_sandbox_delivers_to(payroll_sandbox,
                                                           payroll_sandbox_asgi_server):
    received: list[dict] = []
    base_url = payroll_sandbox_asgi_server(recording_app(received))
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", base_url)
    payroll_sandbox.use_webhook_url(f"{base_url}/hooks")
    payroll_sandbox.trigger("company-updated")  # answers once it was delivered
    assert [body["eventType"] for body in received] == ["company-updated"]


async def test_the_factory_serves_an_app_in_an_async_test(async_payroll_sandbox,
                                                          payroll_sandbox_asgi_server):
    received: list[dict] = []
    base_url = payroll_sandbox_asgi_server(recording_app(received))
    await async_payroll_sandbox.use_webhook_url(f"{base_url}/hooks")
    await async_payroll_sandbox.trigger("company-updated")
    assert [body["eventType"] for body in received] == ["company-updated"]
    await asyncio.sleep(0)  # the test's loop was never blocked by the app


def test_the_server_runs_the_lifespan_and_stops_listening_at_close():
    lifespan: list[str] = []
    with AsgiServer(recording_app([], lifespan)) as server:
        assert lifespan == ["startup"]  # before start() returned
        url = server.url
        assert not refused(url)
    assert lifespan == ["startup", "shutdown"]
    assert refused(url)


def test_the_servers_the_factory_started_stop_after_the_test(pytester):
    """Two apps in one test; after the session each port refuses connections."""
    urls = pytester.path / "urls.json"
    pytester.makepyfile(test_two=f"""
import json

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return
    await send({{"type": "http.response.start", "status": 204, "headers": []}})
    await send({{"type": "http.response.body", "body": b""}})

def test_two_apps(payroll_sandbox_asgi_server):
    urls = [payroll_sandbox_asgi_server(app), payroll_sandbox_asgi_server(app, lifespan="off")]
    assert urls[0] != urls[1]
    open({str(urls)!r}, "w").write(json.dumps(urls))
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:schemathesis",
                                           "-p", "no:hypothesispytest", "-p", "no:faker", "-q")
    assert result.parseoutcomes() == {"passed": 1}, result.stdout.str()
    assert all(refused(url) for url in json.loads(urls.read_text()))


def test_a_receiver_host_is_where_it_listens_and_the_host_its_url_names():
    host = ReceiverHost.advertising("sandbox-reaches-me.example")
    with AsgiServer(recording_app([]), host=host) as server:
        assert server.url == f"http://sandbox-reaches-me.example:{server.port}"
        assert not refused(f"http://127.0.0.1:{server.port}")  # every interface


def test_a_wsgi_app_is_refused_naming_a2wsgi():
    from flask import Flask

    def wsgi_app(environ, start_response):
        start_response("204 No Content", [])
        return []

    for app in (Flask(__name__), wsgi_app):
        with pytest.raises(TypeError, match=r"WSGI app .*a2wsgi.*WSGIMiddleware\(app\)"):
            AsgiServer(app).start()


def test_a_startup_that_fails_raises_and_leaves_nothing_listening(caplog):
    async def app(scope, receive, send):
        assert scope["type"] == "lifespan"
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "no database"})

    server = AsgiServer(app)
    with pytest.raises(RuntimeError, match="lifespan startup failed"):
        server.start()
    assert server.port is None
    assert "no database" in caplog.text  # uvicorn's own log line, captured by pytest


def test_without_uvicorn_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # `import uvicorn` raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'payroll-sandbox\[asgi\]'"):
        AsgiServer(recording_app([])).start()


def test_the_asgi_extra_is_uvicorn():
    text = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^asgi = \["uvicorn>=[\d.]+"\]', text, re.M)
    assert "payroll-sandbox[asgi]" in section(RECIPES, PLUGIN_DOCS)
    assert Path(PLUGIN_DOCS).read_text().count("| `payroll_sandbox_asgi_server` |") == 1
