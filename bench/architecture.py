"""Architecture figures of the simulator, to compare before and after a redesign (issue 21).

Nothing here is a PASS/FAIL check: each figure is a count to set beside the same count on
another tree. The source figures read ROOT/simulator; the runtime figures run the
payroll_sandbox that this interpreter imports (so run it with that tree's interpreter:
`/tmp/vbase/bin/python bench/architecture.py --root /tmp/base`).

  modules_writing_tenant_state
      Modules under simulator/ with at least one write to tenant state, by this rule (ast,
      no type inference): a chain of attributes and subscripts, at least one attribute long,
      on a root named `tenant`, `self.tenant` or `self._tenant` (`tenant.x`, `tenant.x[k]`,
      `tenant.x.y`) that is the target of an assignment, an augmented or annotated
      assignment or a `del`, or whose method append, extend, pop, popitem, add, discard,
      remove, clear, update, setdefault or insert is called (`tenant.tasks.pop(...)`).
      A call in the chain ends it, and a name ends the tenant: writes to objects obtained
      from the tenant's collections (`task = tenant.tasks[k]; task.status = ...`,
      `tenant.companies.require(i).x = ...`) are out of scope, as are other names for a
      tenant (`runner.tenant`, `owner`) and a Tenant's methods writing `self.x`.
  files_crossed_task_create, files_crossed_advance_with_webhook
      Distinct source files of the package whose code ran (sys.setprofile 'call' events,
      every coroutine of the event loop included) while the app, in process, handled one
      `POST /task/create`, and one `POST /_sandbox/clock/advance` that runs a scenario step
      whose event is delivered to a local receiver (the advance answers once its deliveries
      have settled; the script checks that the receiver got it). A warm-up of the same two
      requests goes first, so lazy imports and caches are not counted.
  import_circles
      Strongly connected components (more than one module) of the import graph of
      simulator/: every import statement, under `if TYPE_CHECKING:` and inside functions too;
      `from P import n` points at module P.n when there is one, else at P.
  folder_circles
      The same graph by folder (`domain`, `routes`, `schemas`, ...; a module at the top of
      simulator/ is a node of its own): its strongly connected components of more than one.
  snapshot_lines
      Lines of simulator/edge/snapshot.py and of every module under simulator/ whose dotted
      name (its package's included) contains `snapshot` or `persist`.
  response_schemas_bare
      Operations of GET /openapi.json with a JSON 2xx answer (application/json or +json)
      whose `data` schema (the answer's own schema when it has no {"data": ...} envelope),
      $refs resolved, is a bare object (type object with no properties, oneOf/anyOf/allOf
      or additionalProperties schema) or a bare array (no items, or items a bare object);
      printed beside the number of such JSON operations.

    python bench/architecture.py [--root PATH] [--verbose] [--json]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from common import serve_hook

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "payroll_sandbox"

TENANT_NAMES = ("tenant",)                 # a bare name
TENANT_ATTRIBUTES = ("tenant", "_tenant")  # on `self`
MUTATORS = frozenset({"append", "extend", "pop", "popitem", "add", "discard", "remove", "clear",
                      "update", "setdefault", "insert"})
SNAPSHOT_WORDS = ("snapshot", "persist")
# The schemas of the files the project reads (fixtures, scenarios, config, data profiles),
# which stay hand-written: the payment method and the step fields are parts of a scenario
# file, written once for it and for the API.
PROJECT_FILE_SCHEMAS = ("simulator/schemas/fixtures.py", "simulator/schemas/scenarios.py",
                        "simulator/domain/tasks/states.py",
                        "simulator/domain/accounts/data_profiles.py")

# The default fixture account (fixtures: acme) and a task of the happy-path scenario: its
# first step (processing, 1 s after creation) emits nothing (queued -> processing is not
# announced), its second (authenticated, 2 s later) emits task-authentication-status-updated.
ACME = {"x-api-key": "sandbox-key-acme-0001", "x-api-secret": "sandbox-secret-acme-0001"}
WALMART = "6410a0000000000000000001"
TO_FIRST_STEP = 1
TO_EMITTING_STEP = 2
DRAIN_SECONDS = 60  # past the rest of the warm-up task's scenario (8 s in all)


# -- source: tenant writes, imports, snapshot lines --------------------------------------------

def source_modules(package_dir: Path) -> dict[str, Path]:
    """Every module under the package folder by dotted name relative to it ('' for the
    package itself, `domain` for domain/__init__.py)."""
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _is_tenant_root(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in TENANT_NAMES
    return (isinstance(node, ast.Attribute) and node.attr in TENANT_ATTRIBUTES
            and isinstance(node.value, ast.Name) and node.value.id == "self")


def _on_tenant_state(node: ast.expr) -> bool:
    """`node` is attributes and subscripts, at least one attribute, on a tenant root."""
    attributes = 0
    while not _is_tenant_root(node):
        if isinstance(node, ast.Attribute):
            attributes += 1
        elif not isinstance(node, ast.Subscript):
            return False
        node = node.value
    return attributes > 0


def _targets(node: ast.expr) -> Iterator[ast.expr]:
    """The assigned expressions of a target, tuples and starred ones unpacked."""
    if isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _targets(element)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


def tenant_writes(tree: ast.AST) -> list[int]:
    """The line of every write to tenant state in `tree` (the rule in the docstring)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target] if getattr(node, "value", None) is not None else []
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in MUTATORS):
            targets = [node.func.value]
        else:
            continue
        lines += [node.lineno for target in targets for expr in _targets(target)
                  if _on_tenant_state(expr)]
    return lines


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """`name`, else its longest prefix that is a module of the package."""
    parts = name.split(".") if name else []
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return "" if "" in modules else None


def imports_of(module: str, tree: ast.AST, modules: dict[str, Path], folder: str) -> set[str]:
    """The package's modules that `module` imports, wherever the import statement is."""
    is_package = modules[module].name == "__init__.py"
    own_package = module.split(".") if is_package else module.split(".")[:-1]
    own_package = [part for part in own_package if part]
    prefixes = (PACKAGE, folder)
    targets = set()

    def internal(dotted: str) -> str | None:  # an absolute name, relative to the package
        for prefix in prefixes:
            if dotted == prefix:
                return ""
            if dotted.startswith(prefix + "."):
                return dotted[len(prefix) + 1:]
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = internal(alias.name)
                if name is not None:
                    targets.add(_resolve(name, modules))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = own_package[:len(own_package) - (node.level - 1)]
                base = ".".join(base_parts + (node.module.split(".") if node.module else []))
            else:
                base = internal(node.module or "")
                if base is None:
                    continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}" if base else alias.name
                targets.add(submodule if submodule in modules else _resolve(base, modules))
    targets.discard(None)
    targets.discard(module)
    return targets


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of `graph`, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


@dataclass
class SourceFigures:
    writes: dict[str, int]            # file -> writes to tenant state
    circles: list[list[str]]          # modules (files) of each import circle
    folder_circles: list[list[str]]   # folders (or top-level modules) of each circle
    snapshot: dict[str, int]          # file -> lines
    schemas: dict[str, int]           # file -> hand-written schema objects ("properties")
    lines: int                        # lines of Python in the package


def source_figures(root: Path) -> SourceFigures:
    package_dir = root / "simulator"
    modules = source_modules(package_dir)

    def shown(module: str) -> str:
        return str(modules[module].relative_to(root))

    trees = {module: ast.parse(path.read_text(), str(path)) for module, path in modules.items()}
    writes = {shown(m): len(lines) for m, tree in trees.items() if (lines := tenant_writes(tree))}
    graph = {m: imports_of(m, tree, modules, package_dir.name) for m, tree in trees.items()}
    circles = [[shown(m) for m in component] for component in strongly_connected(graph)
               if len(component) > 1]
    folders = folder_graph(graph)
    folder_circles = sorted(sorted(c) for c in strongly_connected(folders) if len(c) > 1)
    # snapshot.py among them; a package named so counts with all its modules
    snapshot = {shown(m): len(path.read_text().splitlines()) for m, path in modules.items()
                if any(word in m for word in SNAPSHOT_WORDS)}
    # A schema object written by hand says "properties"; the project files' own schemas
    # (fixtures, scenarios) stay hand-written, and a struct's is derived (domain/shapes.py).
    texts = {shown(m): path.read_text() for m, path in modules.items()}
    schemas = {name: count for name, text in texts.items()
               if name not in PROJECT_FILE_SCHEMAS and (count := text.count('"properties"'))}
    return SourceFigures(writes, sorted(circles, key=lambda c: (-len(c), c)), folder_circles,
                         snapshot, schemas, sum(len(t.splitlines()) for t in texts.values()))


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph by folder (`domain.tasks` -> `domain`; a top-level module is its
    own node; the package itself, '', is left out)."""
    folders: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module:
            top = module.split(".")[0]
            folders.setdefault(top, set()).update(
                t.split(".")[0] for t in targets if t and t.split(".")[0] != top)
    return folders


# -- runtime: files crossed by a request, and the OpenAPI document -----------------------------

class Trace:
    """The package's source files whose code runs while it is active (every thread's
    'call' events; Python code only)."""

    def __init__(self, package_dir: Path) -> None:
        self.package_dir = package_dir
        self.filenames: set[str] = set()

    def _profile(self, frame, event, arg):
        if event == "call":
            self.filenames.add(frame.f_code.co_filename)

    @contextmanager
    def active(self) -> Iterator[Trace]:
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        try:
            yield self
        finally:
            sys.setprofile(None)
            threading.setprofile(None)

    def files(self) -> list[str]:
        """The files under the package folder, as `simulator/...` paths."""
        inside = {Path(os.path.realpath(name)) for name in self.filenames}
        return sorted(str(Path(self.package_dir.name, path.relative_to(self.package_dir)))
                      for path in inside if path.is_relative_to(self.package_dir))


class NotMeasured(Exception):
    """A runtime figure could not be taken as the docstring says."""


async def _call(client: TestClient, method: str, path: str, body: Any = None) -> Any:
    """One request with the acme keys; its JSON answer (`data` when enveloped). A refusal
    is NotMeasured: a figure of a refused request would mean nothing."""
    response = await client.request(method, path, json=body, headers=ACME)
    answer = await response.json(content_type=None)
    if not 200 <= response.status < 300:
        raise NotMeasured(f"{method} {path} answered {response.status}: {answer}")
    return answer.get("data", answer) if isinstance(answer, dict) else answer


def _task_body(identifier: str) -> dict:
    return {"identifier": identifier, "company": WALMART, "product": "deposit",
            "scenario": "happy-path"}


@dataclass
class RuntimeFigures:
    task_create: list[str]
    advance: list[str]
    advance_answer: dict
    webhooks_received: int
    openapi: dict = field(repr=False)


async def runtime_figures(package_dir: Path) -> RuntimeFigures:
    """Only the app factory and Settings, and HTTP paths: what stays when the inside moves."""
    from payroll_sandbox.app import create_app
    from payroll_sandbox.settings import Settings

    received: list[bytes] = []

    async def hook(request: web.Request) -> web.Response:
        received.append(await request.read())
        return web.Response()

    hook_runner, hook_url = await serve_hook(hook)
    app = create_app(Settings(port=0, clock="manual"))
    try:
        async with TestClient(TestServer(app)) as client:
            openapi = await _call(client, "GET", "/openapi.json")  # no envelope
            await _call(client, "PUT", "/_sandbox/webhooks/endpoints",
                        {"endpoints": [{"url": hook_url}]})
            # Warm-up: the same requests for another user, then the rest of its task.
            await _call(client, "POST", "/task/create", _task_body("architecture-warm-up"))
            await _call(client, "POST", "/_sandbox/clock/advance", {"seconds": TO_FIRST_STEP})
            await _call(client, "POST", "/_sandbox/clock/advance", {"seconds": TO_EMITTING_STEP})
            await _call(client, "POST", "/_sandbox/clock/advance", {"seconds": DRAIN_SECONDS})
            with Trace(package_dir).active() as create:
                await _call(client, "POST", "/task/create", _task_body("architecture"))
            await _call(client, "POST", "/_sandbox/clock/advance", {"seconds": TO_FIRST_STEP})
            before = len(received)
            with Trace(package_dir).active() as advance:
                answer = await _call(client, "POST", "/_sandbox/clock/advance",
                                     {"seconds": TO_EMITTING_STEP})
            delivered = len(received) - before
            if answer.get("jobsRun") != 1 or not answer.get("eventsEmitted") or not delivered:
                raise NotMeasured(f"the traced advance was not one step delivering a webhook "
                                 f"({answer}, {delivered} received): its figure would not "
                                 f"measure what it says")
    finally:
        await hook_runner.cleanup()
    return RuntimeFigures(create.files(), advance.files(), answer, delivered, openapi)


def _resolve_ref(schema: Any, document: dict) -> Any:
    seen = set()
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        if ref in seen or not ref.startswith("#/"):
            break
        seen.add(ref)
        schema = document
        for part in ref[2:].split("/"):
            schema = schema[part.replace("~1", "/").replace("~0", "~")]
    return schema


def _bare_object(schema: Any, document: dict) -> bool:
    schema = _resolve_ref(schema, document)
    return (isinstance(schema, dict) and schema.get("type") == "object"
            and not schema.get("properties")
            and not any(key in schema for key in ("oneOf", "anyOf", "allOf"))
            and not isinstance(schema.get("additionalProperties"), dict))


def _bare(schema: Any, document: dict) -> bool:
    schema = _resolve_ref(schema, document)
    if _bare_object(schema, document):
        return True
    return (isinstance(schema, dict) and schema.get("type") == "array"
            and not any(key in schema for key in ("oneOf", "anyOf", "allOf"))
            and ("items" not in schema or _bare_object(schema["items"], document)))


def response_schemas(document: dict) -> tuple[list[str], list[str]]:
    """(every JSON operation, the bare ones) as `METHOD /path`; an answer without the
    {"data": ...} envelope is marked `(no envelope)`."""
    operations, bare = [], []
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            schema = next((content["schema"]
                           for status, answer in operation["responses"].items()
                           if status.startswith("2")
                           for media, content in answer.get("content", {}).items()
                           if media == "application/json" or media.endswith("+json")), None)
            if schema is None:
                continue
            body = _resolve_ref(schema, document)
            data = body.get("properties", {}).get("data") if isinstance(body, dict) else None
            name = f"{method.upper()} {path}" + ("" if data is not None else " (no envelope)")
            operations.append(name)
            if _bare(data if data is not None else body, document):
                bare.append(name)
    return operations, bare


# -- the report --------------------------------------------------------------------------------

def figures(root: Path) -> dict[str, Any]:
    """Every figure, with the lists behind them under `details`; when the app cannot be
    built or a request fails, the runtime figures are None and `runtime_error` says why."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"this interpreter has no {PACKAGE} package")
    package_dir = Path(os.path.realpath(next(iter(spec.submodule_search_locations))))
    if package_dir != Path(os.path.realpath(root / "simulator")):
        print(f"warning: this interpreter imports {PACKAGE} from {package_dir}, not "
              f"{root / 'simulator'}: the runtime figures are of that tree", file=sys.stderr)
    source = source_figures(root)
    runtime, error = None, None
    try:
        runtime = asyncio.run(runtime_figures(package_dir))
    except (ImportError, NotMeasured) as problem:
        error = f"{type(problem).__name__}: {problem}"
    operations, bare = response_schemas(runtime.openapi) if runtime else ([], [])
    return {
        "root": str(root),
        "package": str(package_dir),
        "modules_writing_tenant_state": len(source.writes),
        "files_crossed_task_create": len(runtime.task_create) if runtime else None,
        "files_crossed_advance_with_webhook": len(runtime.advance) if runtime else None,
        "import_circles": len(source.circles),
        "folder_circles": len(source.folder_circles),
        "snapshot_lines": sum(source.snapshot.values()),
        "hand_written_schemas": sum(source.schemas.values()),
        "package_lines": source.lines,
        "response_schemas_bare": len(bare) if runtime else None,
        "json_operations": len(operations) if runtime else None,
        "runtime_error": error,
        "details": {
            "tenant_writes": source.writes,
            "task_create_files": runtime.task_create if runtime else None,
            "advance_files": runtime.advance if runtime else None,
            "advance": {"answer": runtime.advance_answer,
                        "webhooks_received": runtime.webhooks_received} if runtime else None,
            "import_circles": source.circles,
            "folder_circles": source.folder_circles,
            "snapshot_files": source.snapshot,
            "schema_files": source.schemas,
            "bare_operations": bare if runtime else None,
        },
    }


def print_text(result: dict[str, Any], verbose: bool) -> None:
    details = result["details"]
    unmeasured = "not measured (see runtime_error)"

    def listing(lines: list[str] | None) -> None:
        if verbose:
            for line in lines or ():
                print(f"    {line}")

    print(f"root: {result['root']} (runtime: {result['package']})")
    print(f"modules_writing_tenant_state: {result['modules_writing_tenant_state']}")
    listing([f"{name}: {count}" for name, count in sorted(details["tenant_writes"].items())])
    print("files_crossed_task_create: " + (
        str(result["files_crossed_task_create"]) if details["task_create_files"] is not None
        else unmeasured))
    listing(details["task_create_files"])
    advance = details["advance"]
    print("files_crossed_advance_with_webhook: " + (
        f"{result['files_crossed_advance_with_webhook']} ({advance['answer']['jobsRun']} job, "
        f"{advance['answer']['eventsEmitted']} event, {advance['webhooks_received']} "
        f"webhook received)" if advance else unmeasured))
    listing(details["advance_files"])
    print(f"import_circles: {result['import_circles']}")
    for circle in details["import_circles"]:
        print(f"    {len(circle)}: {' '.join(circle)}")
    print(f"folder_circles: {result['folder_circles']}")
    for circle in details["folder_circles"]:
        print(f"    {' <-> '.join(circle)}")
    print(f"snapshot_lines: {result['snapshot_lines']} ("
          + ", ".join(f"{name} {lines}" for name, lines in details["snapshot_files"].items())
          + ")")
    print(f"hand_written_schemas: {result['hand_written_schemas']} (\"properties\" outside "
          "the project files' schemas)")
    listing([f"{name}: {count}" for name, count in sorted(details["schema_files"].items(),
                                                          key=lambda item: -item[1])])
    print(f"package_lines: {result['package_lines']}")
    print("response_schemas_bare: " + (
        f"{result['response_schemas_bare']} of {result['json_operations']} JSON operations"
        if result["json_operations"] is not None else unmeasured))
    listing(details["bare_operations"])
    if result["runtime_error"]:
        print(f"runtime_error: {result['runtime_error']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=REPO,
                        help="the repository whose simulator/ is read (default: %(default)s)")
    parser.add_argument("--verbose", action="store_true",
                        help="list the modules, files and operations behind each count")
    parser.add_argument("--json", action="store_true", help="one JSON object, details included")
    args = parser.parse_args()
    root = args.root.resolve()
    if not (root / "simulator").is_dir():
        parser.error(f"{root} has no simulator/ folder")
    result = figures(root)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_text(result, args.verbose)
    if result["runtime_error"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
