"""The customer suite's coverage report: the tenants' tallies (GET /_sandbox/coverage, read
from each test tenant before it goes) added up, measured against the server's catalog,
written as JSON, printed as a table and gated (`--payroll-sandbox-coverage=FILE`,
`--payroll-sandbox-cov-fail-under=N`; `payroll-sandbox exec --coverage FILE`).

A tally is plain counts (name -> how many), so the tallies of `-n` workers add up to the
serial run's: the merge is a sum, whatever order the tenants came in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..client import SandboxError

FORMAT_VERSION = 1
# The report's sections, in the table's order: (key, the table's words).
SECTIONS = (("scenarios", "scenarios"), ("reasons", "failure reasons"),
            ("eventTypes", "event types delivered"), ("apiFaults", "API faults"),
            ("webhookFaults", "webhook faults"), ("profiles", "profiles"),
            ("lifeEvents", "life events"), ("handlerChecks", "handler checks passed"))
TALLIED = ("products", *(key for key, _ in SECTIONS))
GATED = "reasons"  # the gate's measure: the catalog's failure reasons of the products used
WHOLE = ("eventTypes", "apiFaults", "webhookFaults", "profiles", "lifeEvents")  # not per product


class CoverageError(Exception):
    """A report that cannot be written (its folder missing, not writable, a directory)."""


class Tally:
    """Tallies added up: key -> name -> how many, and how many tenants gave one."""

    def __init__(self) -> None:
        self.counts: dict[str, dict[str, int]] = {key: {} for key in TALLIED}
        self.tenants = 0

    def add(self, tally: Mapping[str, Mapping[str, int]], tenants: int = 1) -> None:
        for key in TALLIED:
            counts = self.counts[key]
            for name, number in (tally.get(key) or {}).items():
                counts[name] = counts.get(name, 0) + number
        self.tenants += tenants

    def merge(self, other: Mapping[str, Any]) -> None:
        """Another process's `dump()` (an xdist worker's)."""
        self.add(other["counts"], other["tenants"])

    def dump(self) -> dict[str, Any]:
        return {"counts": self.counts, "tenants": self.tenants}


def handler_checks(report: Any) -> dict[str, int]:
    """The checks a check-handler report passed, as a tally's counts."""
    from ..checker.report import PASS

    return {check.name: 1 for check in report.checks if check.status == PASS}


def catalog_for(catalog: Mapping[str, Any], products: Iterable[str]) -> dict[str, list[str]]:
    """What there is to reach, per section: the scenarios and failure reasons of the products
    the suite used (every product when it used none), and everything else whole."""
    from ..checker.checks import CHECKS

    used = set(products)
    scenarios = {name: entry for name, entry in catalog["scenarios"].items()
                 if not used or used & set(entry["products"])}
    return {"scenarios": sorted(scenarios),
            "reasons": sorted({e["reason"] for e in scenarios.values() if e["reason"]}),
            **{key: list(catalog.get(key, ())) for key in WHOLE}, "handlerChecks": list(CHECKS)}


def report(tally: Tally, catalog: Mapping[str, Any] | None) -> dict[str, Any]:
    """The report: per section what was reached (with counts) and what the catalog has that
    the suite never reached; `percent` of the gated section."""
    counts = tally.counts
    known = catalog_for(catalog, counts["products"]) if catalog else {}
    document: dict[str, Any] = {"version": FORMAT_VERSION, "tenants": tally.tenants,
                                "products": sorted(counts["products"]),
                                "productCounts": dict(sorted(counts["products"].items()))}
    for key, _ in SECTIONS:
        reached = sorted(counts[key])
        document[key] = {"reached": reached,
                         "missing": [name for name in known.get(key, ()) if name not in counts[key]],
                         "counts": dict(sorted(counts[key].items()))}
    # No catalog: no tenant was read, nothing was measured (0, so a gate fails).
    document["percent"] = (percent(len(known[GATED]), document[GATED]["missing"]) if known
                           else 0.0)
    return document


def percent(catalog_size: int, missing: list[str]) -> float:
    """The share of a catalog reached, in percent (an empty catalog: all of it)."""
    if not catalog_size:
        return 100.0
    return round(100.0 * (catalog_size - len(missing)) / catalog_size, 2)


def inside_working_folder(path: str | os.PathLike[str]) -> Path:
    """`path` resolved (symlinks followed): a report lands inside the working folder, so a
    path outside it, or through a symlink to elsewhere, is refused (issue 48: hostile input)."""
    folder, target = Path.cwd().resolve(), Path(path).resolve()
    if not target.is_relative_to(folder):
        raise CoverageError(f"payroll-sandbox coverage: cannot write the report to {path}: "
                            f"it is outside the working folder {folder} (it resolves to "
                            f"{target}); give a path inside it")
    return target


def write(document: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """The report as JSON at `path`; a CoverageError naming it and why when it cannot be."""
    target = inside_working_folder(path)  # again: a symlink may have been put in its way
    try:
        target.write_text(json.dumps(document, indent=2) + "\n")
    except OSError as error:
        raise CoverageError(f"payroll-sandbox coverage: cannot write the report to {target}: "
                            f"{error.strerror or error}") from None


def check_writable(path: str | os.PathLike[str]) -> None:
    """Refuses, before the run, a report path that cannot be written: its folder missing or
    not writable, a directory in its place, or outside the working folder."""
    inside_working_folder(path)
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise CoverageError(f"payroll-sandbox coverage: {target} is a directory, not a file")
    if not folder.is_dir():
        raise CoverageError(f"payroll-sandbox coverage: cannot write the report to {target}: "
                            f"no folder {folder}")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise CoverageError(f"payroll-sandbox coverage: cannot write the report to {target}: "
                            "permission denied")


def table(document: Mapping[str, Any]) -> list[str]:
    """The terminal summary, a line per section, as a coverage tool prints it."""
    rows = [("Section", "Catalog", "Reached", "Missing", "Cover")]
    for key, words in SECTIONS:
        section = document[key]
        missing = len(section["missing"])
        hit = sum(1 for name in section["reached"] if name not in section["missing"])
        size = hit + missing
        rows.append((words, str(size), str(len(section["reached"])), str(missing),
                     f"{percent(size, section['missing']):.0f}%"))
    products = ", ".join(document["products"]) or "none"
    widths = [max(len(row[n]) for row in rows) for n in range(5)]
    lines = ["  ".join(cell.ljust(w) if n == 0 else cell.rjust(w)
                       for n, (cell, w) in enumerate(zip(row, widths))) for row in rows]
    rule = "-" * len(lines[0])
    gated = document[GATED]
    return [lines[0], rule, *lines[1:], rule,
            f"failure reasons of the products used ({products}): {document['percent']:.2f}% "
            f"from {document['tenants']} tenant{'' if document['tenants'] == 1 else 's'}",
            *([f"never reached: {', '.join(gated['missing'])}"] if gated["missing"] else [])]


def below(document: Mapping[str, Any], fail_under: float | None) -> str | None:
    """The gate's message when the report is below `fail_under` percent, else None."""
    if fail_under is None or document["percent"] >= fail_under:
        return None
    return (f"payroll-sandbox coverage: {document['percent']:.2f}% of the failure reasons of "
            f"the products used, below --payroll-sandbox-cov-fail-under={fail_under:g}")


class SessionCoverage:
    """The run's coverage: the tallies of the tenants this process read (and, in xdist's
    controller, its workers'), the server's catalog, and at the end the report."""

    def __init__(self, path: str | None, fail_under: float | None) -> None:
        self.path, self.fail_under = path, fail_under
        self.tally = Tally()
        self.catalog: dict[str, Any] | None = None
        self.document: dict[str, Any] | None = None
        self.problem: str | None = None

    def read(self, tenant: Any) -> None:
        """The tenant's tally, before it goes (the catalog once per process); `tenant` is the
        plugin's Sandbox."""
        try:
            answer = tenant.get("/_sandbox/coverage",
                                catalog="true" if self.catalog is None else "false")
        except SandboxError as error:
            if error.status in (401, 404):
                return  # the test deleted its tenant: nothing is left to count
            raise
        self.tally.add({**answer["tally"], "handlerChecks": dict(tenant.handler_checks)})
        self.catalog = answer["catalog"] or self.catalog

    def merge(self, output: dict[str, Any]) -> None:
        self.tally.merge(output)
        self.catalog = self.catalog or output["catalog"]

    def finish(self) -> dict[str, Any]:
        self.document = report(self.tally, self.catalog)
        if self.path is not None:
            try:
                write(self.document, self.path)
            except CoverageError as error:
                self.problem = str(error)
        return self.document
