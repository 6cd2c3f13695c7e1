"""The README's examples run as written against a real server (STYLE: README examples are tests)."""

from __future__ import annotations

import json
import re
import subprocess

from conftest import REPO
from test_cli import serving


def shell_blocks(section: str) -> list[str]:
    text = (REPO / "README.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", body, re.S)


def commands(block: str) -> list[str]:
    """Shell commands of a block, continuation lines joined, comments and servers left out."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#") and "serve" not in line]


def run_examples(section: str, base_url: str, prelude: str = "") -> list[dict]:
    outputs = []
    for block in shell_blocks(section):
        for command in commands(block):
            if command.startswith(("KEY=", "SECRET=")) or re.match(r"^[A-Z]+=", command):
                prelude += command + "\n"
                continue
            command = command.replace("localhost:8080", base_url.removeprefix("http://"))
            result = subprocess.run(["bash", "-c", prelude + command], capture_output=True,
                                    text=True, timeout=30)
            assert result.returncode == 0, (command, result.stderr)
            outputs.append((command, json.loads(result.stdout)))
    return outputs


def test_readme_try_it_examples_answer_without_errors():
    with serving("--clock", "manual") as (base_url, *_):
        outputs = run_examples("Try it", base_url)
    assert len(outputs) >= 8
    for command, body in outputs:
        assert "error" not in body and "data" in body, command
    search = next(body for command, body in outputs if '"walmart"' in command)
    assert search["data"][0]["name"] == "Walmart"


def test_readme_task_example_ends_with_the_events_it_promises():
    with serving("--clock", "manual") as (base_url, *_):
        keys = "".join(c + "\n" for c in commands(shell_blocks("Try it")[0])
                       if re.match(r"^[A-Z]+=", c))
        outputs = run_examples("A task, end to end", base_url, prelude=keys)
    events = outputs[-1][1]["data"]
    assert [e["eventType"] for e in events] == ["task-status-updated", "task-workflow-finished"]
    assert events[0]["body"]["data"]["previousStatus"] == "processing"
    assert events[0]["body"]["data"]["reason"] == "auth-expired"
