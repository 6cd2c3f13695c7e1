"""The README's scenario table, made from the scenario files: which products each
scenario fits and how its task ends (tests/test_readme.py keeps the README equal to it).

`python -m payroll_sandbox.load.scenarios.table` prints it for the bundled scenarios and
fixtures; `markdown_table(scenarios, products)` makes it for any loaded set.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...domain.links.processor_links import DEFAULT_SCENARIO as PROCESSOR_DEFAULT
from ...domain.tasks.choosing import HAPPY_PATH
from .loader import Scenario

HEADER = "| Fits | Completed | Failed |\n|---|---|---|"


def markdown_table(scenarios: Mapping[str, Scenario], products: Mapping[str, str]) -> str:
    """One row per set of products a scenario fits (every product first, processor links
    last), its scenarios split by how their task (or pipeline) ends."""
    order = list(products)
    rows: dict[tuple[int, ...], tuple[list[str], list[str]]] = {}
    for name in sorted(scenarios, key=lambda n: (n not in (HAPPY_PATH, PROCESSOR_DEFAULT), n)):
        scenario = scenarios[name]
        fits = scenario.products or ()
        key = ((-1,) if scenario.kind != "task" else (0,) if len(fits) == len(order)
               else tuple(order.index(p) + 1 for p in fits))
        completed, failed = rows.setdefault(key, ([], []))
        outcome, cell = _cell(scenario)
        (failed if outcome == "failed" else completed).append(cell)
    lines = [HEADER]
    for key in sorted(rows, key=lambda k: (k == (-1,), k)):
        if key == (-1,):
            label = "no task: processor links"
        elif key == (0,):
            label = "every product"
        else:
            label = ", ".join(f"`{order[i - 1]}`" for i in key)
        completed, failed = rows[key]
        lines.append(f"| {label} | {', '.join(completed) or '-'} | {', '.join(failed) or '-'} |")
    return "\n".join(lines) + "\n"


def _cell(scenario: Scenario) -> tuple[str, str]:
    """(completed or failed, the scenario's name with what the table says of it)."""
    notes = []
    if scenario.name in (HAPPY_PATH, PROCESSOR_DEFAULT):
        notes.append("default")
    if scenario.kind != "task":
        error = next((s.get("aggregatorError") for s in scenario.steps
                      if s.get("aggregatorError")), None)
        if error:
            notes.append(f"`{error['errorCode']}`")
        return ("failed" if error else "completed"), _named(scenario.name, notes)
    reason = next((s.get("reason") for s in reversed(scenario.steps) if s.get("reason")), None)
    if scenario.outcome == "failed":
        if reason != scenario.name:
            notes.append(f"`{reason}`")
        if not any(s.get("status") == "processing" for s in scenario.steps):
            notes.append("from `queued`")
    elif any(s.get("patch") for s in scenario.steps):
        notes.append(f"`{reason}`, then patched")
    return scenario.outcome, _named(scenario.name, notes)


def _named(name: str, notes: list[str]) -> str:
    return f"`{name}`" + (f" ({', '.join(notes)})" if notes else "")


def bundled_table() -> str:
    """The table of the bundled scenarios against the bundled service profile (read here,
    not through the server's start-up load, which imports this package)."""
    from ..fixtures import load_fixtures
    from ...settings import bundled_dir
    from .loader import load_all_scenarios, resolve_products

    products = load_fixtures(bundled_dir("fixtures")).service.products
    return markdown_table(resolve_products(load_all_scenarios([bundled_dir("scenarios")]),
                                           products), products)


if __name__ == "__main__":
    print(bundled_table(), end="")
