"""The package's layout rules that a change could quietly break (docs/ARCHITECTURE.md).

The import graph is bench/architecture.py's (which counts the same circles for issue 21's
figures), read here so both say the same."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import payroll_sandbox

PACKAGE = Path(payroll_sandbox.__file__).parent
BENCH = Path(__file__).resolve().parents[2] / "bench"


def _architecture():
    """bench/architecture.py as a module (it imports its neighbour bench/common.py)."""
    spec = importlib.util.spec_from_file_location("architecture", BENCH / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


architecture = _architecture()


def _imports() -> dict[str, set[str]]:
    """Module ('' for the package, `domain.tasks`, ...) -> the package's modules it
    imports: at the top, in functions and under TYPE_CHECKING alike (an import for
    typing's sake is still a dependency)."""
    modules = architecture.source_modules(PACKAGE)
    return {module: architecture.imports_of(module, ast.parse(path.read_text()), modules,
                                            PACKAGE.name)
            for module, path in modules.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    return [c for c in architecture.strongly_connected(graph) if len(c) > 1]


def test_no_import_circles():
    """No two modules of the package need each other, even only for type hints."""
    assert _circles(_imports()) == []


def test_no_folder_level_import_circle():
    """The folders show the rings (docs/ARCHITECTURE.md): the edge, the transport, the customer
    kit, the operator tools, the start-up load and the domain each import only rings inside
    them; the domain imports none of `schemas`, the load (the catalog, the fixtures, the
    scenarios) or the settings (the types it needs live in it: the event types, the data
    records, the company and user views), and `schemas` imports the domain's; the transport
    does not import the settings, nor the scenarios' table the start-up load."""
    assert _circles(architecture.folder_graph(_imports())) == []


def test_the_check_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_domain_imports_no_web_or_transport_module():
    """The domain holds the rules and the state; it never imports the edge (aiohttp's
    routes, the middleware, rendering, snapshots, the request and answer schemas), the
    transport that sends webhooks and runs the clock, the start-up load, or the kit and
    tools around them."""
    outside = ("edge", "transport", "kit", "tools", "checker", "load", "app", "settings",
               "schemas", "testing", "verify", "client")
    leaks = {module: sorted(t for t in targets if t.split(".")[0] in outside)
             for module, targets in _imports().items() if module.startswith("domain")}
    assert {module: found for module, found in leaks.items() if found} == {}


def test_the_top_level_is_the_face_and_no_folder_is_crowded():
    """Issue 44's layout: at most 12 modules at the top (the package's face, its entry points
    and a few shared helpers) and at most 15 in any folder."""
    counts: dict[str, int] = {}
    for module, path in architecture.source_modules(PACKAGE).items():
        if module and path.name != "__init__.py":
            folder = module.rpartition(".")[0]
            counts[folder] = counts.get(folder, 0) + 1
    assert counts[""] <= 12, counts[""]
    assert {f: n for f, n in counts.items() if n > 15} == {}


def test_the_public_names_stay_where_customers_import_them():
    """The folders moved the modules, not the names the docs give customers:
    `from payroll_sandbox.testing import ...` (docs/plugin.md), `payroll_sandbox.verify.verify`
    (docs/verify-against.md), `payroll_sandbox.checker.check_handler` (docs/check-handler.md)."""
    import payroll_sandbox.checker
    import payroll_sandbox.testing
    import payroll_sandbox.verify
    from payroll_sandbox.kit.blocking import Sandbox
    from payroll_sandbox.tools.verify import verify

    assert [name for name in payroll_sandbox.testing.__all__
            if not hasattr(payroll_sandbox.testing, name)] == []
    assert payroll_sandbox.testing.Sandbox is Sandbox
    assert payroll_sandbox.verify.verify is verify
    assert callable(payroll_sandbox.checker.check_handler)
