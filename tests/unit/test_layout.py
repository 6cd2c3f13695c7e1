"""The package's layout rules that a change could quietly break (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import payroll_sandbox

PACKAGE = Path(payroll_sandbox.__file__).parent


def _imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports: at the top, in functions and under
    TYPE_CHECKING alike (an import for typing's sake is still a dependency)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(["payroll_sandbox", *parts])] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    found = f"{target}.{alias.name}"
                    graph[name].add(found if found in modules else target)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names)
        graph[name] = {target for target in graph[name] if target in modules and target != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_circles():
    """No two modules of the package need each other, even only for type hints."""
    assert _circles(_imports()) == []


def test_the_check_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_domain_imports_no_web_or_transport_module():
    """The domain holds the rules and the state; it never imports the edge (aiohttp's
    routes, the middleware, rendering) or the transport that sends webhooks."""
    graph = _imports()
    outside = ("payroll_sandbox.routes", "payroll_sandbox.middleware", "payroll_sandbox.render",
               "payroll_sandbox.webhooks", "payroll_sandbox.app", "payroll_sandbox.keys",
               "payroll_sandbox.server", "payroll_sandbox.snapshot", "payroll_sandbox.scheduler")
    leaks = {name: sorted(t for t in targets if t.startswith(outside))
             for name, targets in graph.items() if name.startswith("payroll_sandbox.domain")}
    assert {name: found for name, found in leaks.items() if found} == {}
