"""The figures of issue 44 (the struct is the value), read off the source of a tree: to set
beside the same figures of another tree (`--root`). Nothing here is a PASS/FAIL check.

  shape_structs
      Classes under simulator/ that subclass View, Command or Answer (domain/shapes.py),
      directly or through another such class.
  shape_structs_as_values
      Those of them used as runtime values: called (`TaskView(...)`, `X.from_record(...)`
      counts as X), given as a decode or convert target (`type=X`, `convert(x, X)`,
      `list[X]` there included), named as an operation's `body=`/`query=` when the pipeline
      decodes bodies by type (routes/pipeline.py calls msgspec.json.decode or convert with
      the operation's shape), made from a record (`view_of(X, record)`, `X.of(...)`), an
      event type's data (declared with `@event`: emitting one makes it), or
      nested as a field's type in a struct that is itself a value
      (a value's fields are made with it). An operation's struct is counted where a call
      names it as `body=`, `query=` or `command=`.
  hand_views_in_domain
      `def record/details/view/status_of/describe` in simulator/domain/.
  hand_body_readers
      `def read(cls` and `def from_body(cls` anywhere in simulator/.
  trigger_branches
      `event_type ==` and `event_type in` in simulator/domain/webhooks/triggers.py.
  stored_lines, name_based_ranges
      Lines of simulator/domain/stored.py (wherever it lives), and whether a function named
      `_ranged` or `_is_time` is still there.
  top_level_modules, largest_folder, modules_600
      Python modules directly in simulator/ (packages not counted); the folder with the most
      modules (its own, not its subfolders'); modules of 600 lines or more.

    python bench/struct_values.py [--root PATH] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

SHAPE_BASES = {"View", "Command", "Answer"}
HAND_VIEWS = {"record", "details", "view", "status_of", "describe"}


def modules(package: Path) -> list[Path]:
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


def _base_names(node: ast.ClassDef) -> list[str]:
    names = []
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.append(base.id)
        elif isinstance(base, ast.Attribute):
            names.append(base.attr)
    return names


def shape_structs(trees: dict[Path, ast.AST]) -> dict[str, dict[str, str]]:
    """Every shape struct by name: its bases and its fields' annotations (source text)."""
    classes: dict[str, tuple[list[str], dict[str, str]]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = {item.target.id: ast.unparse(item.annotation) for item in node.body
                          if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
                classes[node.name] = (_base_names(node), fields)
    shapes: dict[str, dict[str, str]] = {}
    changed = True
    while changed:
        changed = False
        for name, (bases, fields) in classes.items():
            if name not in shapes and name not in SHAPE_BASES and (
                    SHAPE_BASES & set(bases) or set(bases) & shapes.keys()):
                shapes[name] = fields
                changed = True
    return shapes


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


# Calls that take a struct to declare or describe it, and the keywords that do.
DECLARING = {"schema_of", "published", "of", "raw", "choice", "operation", "_declare_answer",
             "isinstance", "issubclass", "defstruct", "type_info", "fields", "Record", "setdefault",
             "append", "get", "Part", "Sections"}
DECLARING_KEYWORDS = {"response", "shape", "bases", "response_shape", "body_shape", "query_shape"}


def callee_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def values(trees: dict[Path, ast.AST], shapes: dict[str, dict[str, str]],
           pipeline_decodes: bool) -> set[str]:
    used: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(  # @event(...): made when emitted
                    isinstance(d, ast.Call) and callee_name(d.func) == "event"
                    for d in node.decorator_list):
                used.add(node.name)
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if callee_name(func) in shapes:  # X(...), module.X(...)
                used.add(callee_name(func))
            elif (isinstance(func, ast.Attribute) and callee_name(func.value) in shapes
                  and (func.attr == "of" or func.attr.startswith("from_"))):
                used.add(callee_name(func.value))  # X.of(...), module.X.of(...)
            # A struct handed to a call to be made there (`accounts.record(a, SessionAccount)`),
            # not to one that declares or describes it (its schema, an operation's answer).
            if callee_name(func) not in DECLARING:
                handed = [*node.args, *(k.value for k in node.keywords
                                        if k.arg not in DECLARING_KEYWORDS)]
                used |= {callee_name(arg) for arg in handed
                         if isinstance(arg, (ast.Name, ast.Attribute))} & shapes.keys()
            if callee_name(func) in ("view_of", "made", "example_of") and node.args:
                used |= _names_in(node.args[0]) & shapes.keys()
            if callee_name(func) in ("event", "defstruct"):  # made when emitted
                used |= _names_in(node) & shapes.keys()
            callee = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if callee in ("decode", "convert"):
                targets = [kw.value for kw in node.keywords if kw.arg == "type"]
                if callee == "convert" and len(node.args) > 1:
                    targets.append(node.args[1])
                for target in targets:
                    used |= _names_in(target) & shapes.keys()
            if pipeline_decodes:
                for kw in node.keywords:
                    if kw.arg in ("body", "query", "command"):
                        used |= _names_in(kw.value) & shapes.keys()
    # A value's struct fields are made with it.
    changed = True
    while changed:
        changed = False
        for name in list(used):
            for annotation in shapes[name].values():
                for inner in set(re.findall(r"\w+", annotation)) & shapes.keys():
                    if inner not in used:
                        used.add(inner)
                        changed = True
    return used


def figures(root: Path) -> dict:
    package = root / "simulator"
    files = modules(package)
    texts = {p: p.read_text() for p in files}
    trees = {p: ast.parse(t) for p, t in texts.items()}
    shapes = shape_structs(trees)
    pipeline = next((t for p, t in texts.items() if p.name == "pipeline.py"), "")
    pipeline_decodes = bool(re.search(r"decode_body|msgspec\.(json\.decode|convert)\(", pipeline))
    used = values(trees, shapes, pipeline_decodes)
    hand_views = sorted(f"{p.relative_to(package)}:{n.lineno} {n.name}"
                        for p, tree in trees.items() if "domain" in p.relative_to(package).parts
                        for n in ast.walk(tree)
                        if isinstance(n, ast.FunctionDef) and n.name in HAND_VIEWS)
    readers = sorted(f"{p.relative_to(package)}:{i + 1}" for p, t in texts.items()
                     for i, line in enumerate(t.splitlines())
                     if re.search(r"def (read|from_body)\(cls", line))
    triggers = next((t for p, t in texts.items() if p.name == "triggers.py"), "")
    stored = next((t for p, t in texts.items() if p.name == "stored.py"), "")
    folders: dict[str, int] = {}
    for p in files:
        folders[str(p.parent.relative_to(package)) or "."] = folders.get(
            str(p.parent.relative_to(package)) or ".", 0) + 1
    largest = max(folders.items(), key=lambda item: item[1])
    big = sorted((f"{p.relative_to(package)} {len(t.splitlines())}" for p, t in texts.items()
                  if len(t.splitlines()) >= 600))
    return {
        "shape_structs": len(shapes),
        "shape_structs_as_values": len(used),
        "pipeline_decodes_by_type": pipeline_decodes,
        "hand_views_in_domain": len(hand_views),
        "hand_body_readers": len(readers),
        "trigger_branches": len(re.findall(r"event_type (==|in )", triggers)),
        "stored_lines": len(stored.splitlines()),
        "name_based_ranges": bool(re.search(r"def (_ranged|_is_time)\(", stored)),
        "top_level_modules": sum(1 for p in files if p.parent == package),
        "largest_folder": f"{largest[0]} ({largest[1]})",
        "modules_600": len(big),
        "details": {"hand_views": hand_views, "readers": readers, "modules_600": big,
                    "not_values": sorted(shapes.keys() - used), "folders": folders},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    result = figures(args.root)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        if key != "details":
            print(f"{key}: {value}")
    if args.verbose:
        for key, value in result["details"].items():
            print(f"{key}:")
            for line in (value.items() if isinstance(value, dict) else value):
                print(f"    {line}")


if __name__ == "__main__":
    main()
