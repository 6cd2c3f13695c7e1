"""Loading scenario files: schema first, then the spec's transitions, step by step.

A file that breaks a transition is rejected with the file, the step and the
transition named, so a scenario can never drive a task where the real service
would not go.

A task scenario also says which products it fits (a payment-method failure is a pay-link
`switch` story, a linked account's disconnection a user-link one): the file's `products`,
else derived from its steps (`products_of`), then made concrete against the service
profile's products at start (`resolve_products`). A task runs only a scenario that fits
its product; a scenario never changes a task's product.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from ...domain.links.processor_links import STAGES
from ...domain.tasks.choosing import HAPPY_PATH
from ...domain.tasks.pay_link import PAY_LINK
from ...domain.tasks.states import (FAILED, FINAL, PROCESSING, QUEUED, Scenario, Step,
                             transition_error, written_payment_method)
from ..fixtures import ConfigError, load_yaml, validate_document
from ...schemas.scenarios import SCENARIO_SCHEMA

TASK_FIELDS = ("status", "patch", "authenticated", "reason", "meta", "flow", "product",
               "authenticationMethod", "paymentMethod", "connected", "accounts")
MANAGED_BY_REASON = "subscription-managed-by-partner-provider"
# Step fields only a task of one scope has (fixtures service.yaml: each product's scope).
# Spec: Task (`flow` for action tasks, `authenticationMethod` for pay-link tasks), Payment
# method object (switch tasks), Account and bill (pay-link); Linked account (user-link).
SCOPE_FIELDS = {PAY_LINK: ("flow", "authenticationMethod", "paymentMethod", "accounts"),
                "user-link": ("linkedAccount", "piiDataDeleted")}


def load_scenario(path: Path) -> Scenario:
    document = load_yaml(path)
    validate_document(document, SCENARIO_SCHEMA, str(path))
    kind = document.get("kind", "task")
    steps = []
    at = 0.0
    for number, raw in enumerate(document["steps"]):
        if not math.isfinite(raw.get("after", 0)):
            raise ConfigError(str(path), f"$.steps[{number}].after", "must be a finite number")
        at += raw.get("after", 0)
        changes = {k: v for k, v in raw.items() if k != "after"}
        if "paymentMethod" in changes:  # its expiry as events write it, whatever the file's form
            changes["paymentMethod"] = written_payment_method(changes["paymentMethod"])
        steps.append(Step(at=at, changes=changes))
    if kind != "task" and "products" in document:
        raise ConfigError(str(path), "$.products", "a processor-link scenario runs no "
                          "task: it has no products")
    check = _task_step_problems if kind == "task" else _processor_step_problems
    problems = [(str(path), where, message) for where, message in check(steps)]
    if problems:
        raise ConfigError.collected(problems)
    if kind == "task":
        products, scope, products_at = products_of(document, steps, str(path))
    else:
        products, scope, products_at = (), None, "$.kind"
    return Scenario(name=path.stem, description=document["description"], kind=kind,
                    steps=tuple(steps), products=products, scope=scope, file=str(path),
                    products_at=products_at)


def products_of(document: dict[str, Any], steps: list[Step],
                file: str) -> tuple[tuple[str, ...] | None, str | None, str]:
    """(products, scope, where they were named) of a task scenario: the file's `products`;
    else an older file's step `product` (which no longer changes the task's product: it
    names the one product the scenario fits); else the scope its steps belong to (pay-link
    steps such as `flow` or `paymentMethod`, user-link ones such as `linkedAccount`); else
    None and None: every product."""
    named = [(n, s.get("product")) for n, s in enumerate(steps) if "product" in s.changes]
    if "products" in document:
        if named:
            raise ConfigError(file, f"$.steps[{named[0][0]}].product",
                              f"step {named[0][0]}: with `products`, leave a step's product "
                              "out (a scenario never changes a task's product)")
        return tuple(document["products"]), None, "$.products"
    if named:
        for number, product in named[1:]:
            if product != named[0][1]:
                raise ConfigError(file, f"$.steps[{number}].product",
                                  f"step {number} names {product}, step {named[0][0]} "
                                  f"{named[0][1]}: list the products it fits in `products`")
        return (named[0][1],), None, f"$.steps[{named[0][0]}].product"
    scopes = {scope: next((f"$.steps[{n}].{name}" for n, s in enumerate(steps)
                           for name in fields if name in s.changes), None)
              for scope, fields in SCOPE_FIELDS.items()}
    found = {scope: at for scope, at in scopes.items() if at is not None}
    if len(found) > 1:
        raise ConfigError(file, "$.products", "its steps are of pay-link tasks ("
                          f"{found['pay-link']}) and of user-link tasks ({found['user-link']}): "
                          "name the products it fits in `products`")
    return None, next(iter(found), None), "$.products"


def _task_step_problems(steps: list[Step]) -> Iterator[tuple[str, str]]:
    """(where, why) a task's steps break the spec's transitions. The event rules themselves
    (no repeated authentication event, no task-status-updated before resolution,
    user.connected) are the engine's; here a file is refused when a step asks for what they
    forbid."""
    status = QUEUED
    for number, step in enumerate(steps):
        where = f"$.steps[{number}]"
        new = step.get("status")
        patch = step.get("patch", False)
        if patch and new is None:
            yield (f"{where}.patch", f"step {number}: a patch needs a status")
        if new is not None:
            problem = transition_error(status, new, patch=patch)
            if problem:
                yield (f"{where}.status", f"step {number}: {problem}")
        elif status in FINAL and any(k in step.changes for k in TASK_FIELDS):
            yield (where, f"step {number} changes the task after it became "
                   f"{status}; nothing but a patch may follow a final status")
        elif status == QUEUED and any(k in step.changes for k in TASK_FIELDS):
            yield (where, f"step {number} changes the task while it is queued; "
                   "move it to processing first")
        if step.get("connected") is True:
            yield (f"{where}.connected",
                   f"step {number}: only the hosted flow's open page makes a user "
                   "present (user.connected); a scenario can only say the user "
                   "left: connected: false")
        if status == QUEUED and new != PROCESSING and "authenticated" in step.changes:
            yield (f"{where}.authenticated",
                   f"step {number}: a task authenticates only while processing; it "
                   f"goes {QUEUED} -> {new} here")
        if new is not None:
            status = new
        if step.get("reason") is not None and new != FAILED:
            yield (f"{where}.reason",
                   f"step {number}: a reason goes with status failed")
        if new == FAILED and step.get("reason") is None:
            yield (f"{where}.reason", f"step {number}: status failed needs a reason")
        # Why a task failed goes with its failure; a data request (what the task needs
        # from the app) comes while it runs.
        if "meta" in step.changes and new != FAILED and set(step.get("meta") or {}) != {"dataRequest"}:
            yield (f"{where}.meta", f"step {number}: meta goes with status failed (only "
                                    f"meta.dataRequest comes while the task runs)")
        if step.get("reason") == MANAGED_BY_REASON and "managedBy" not in step.get("meta", {}):
            yield (f"{where}.meta",
                   f"step {number}: {MANAGED_BY_REASON} needs meta.managedBy")
    if status not in FINAL:
        yield ("$.steps", f"the task ends {status}; a scenario must end it "
               "completed or failed")


PROCESSOR_FIELDS = ("stage", "aggregatorError")


def _processor_step_problems(steps: list[Step]) -> Iterator[tuple[str, str]]:
    """(where, why) a processor-link pipeline's steps break its order: stages in order, or
    an aggregator error that ends it."""
    done = -1
    for number, step in enumerate(steps):
        where = f"$.steps[{number}]"
        fields = [k for k in step.changes if k in PROCESSOR_FIELDS]
        others = [k for k in step.changes if k not in PROCESSOR_FIELDS]
        if others:
            yield (f"{where}.{others[0]}",
                   f"step {number}: a processor-link scenario has only stage and "
                   "aggregatorError steps")
        if len(fields) != 1:
            yield (where, f"step {number}: one of stage or aggregatorError")
        if number and "aggregatorError" in steps[number - 1].changes:
            yield (where, f"step {number} follows the end of the pipeline")
        if "stage" in step.changes:
            stage = STAGES.index(step.get("stage"))
            if stage <= done or (stage > 0 and done < 0):
                yield (f"{where}.stage", f"step {number}: stages run in the order "
                       f"{' -> '.join(STAGES)}, transactions first")
            done = stage
        elif done == len(STAGES) - 1:  # an aggregator error after the last stage
            yield (where, f"step {number} follows the end of the pipeline")


def load_scenarios(directory: Path) -> dict[str, Scenario]:
    """Every *.yaml in the folder, by name (the file name without .yaml)."""
    if not directory.is_dir():
        raise ConfigError(str(directory), "$", "scenarios folder not found")
    misnamed = sorted(directory.glob("*.yml"))
    if misnamed:
        raise ConfigError(str(misnamed[0]), "$", "scenario files end in .yaml")
    scenarios, problems = {}, []
    for path in sorted(directory.glob("*.yaml")):
        try:
            scenarios[path.stem] = load_scenario(path)
        except ConfigError as error:  # every file's problems, not only the first file's
            problems += error.problems
    if problems:
        raise ConfigError.collected(problems)
    return scenarios


def scenario_folders(settings_scenarios: Path, bundled: Path) -> list[Path]:
    """The folders a server loads, in order: the bundled scenarios, then `--scenarios`
    (its files add to the bundled ones and replace those of the same name)."""
    if settings_scenarios.resolve() == bundled.resolve():
        return [bundled]
    return [bundled, settings_scenarios]


def resolve_products(scenarios: Mapping[str, Scenario],
                     products: Mapping[str, str]) -> dict[str, Scenario]:
    """The scenarios with concrete `products`, in the order of the service profile's
    `products` (product -> scope): a product a file names must be one of them, and the
    default task scenario must fit every one (a task with nothing chosen runs it)."""
    resolved, problems = {}, []
    for name, scenario in scenarios.items():
        if scenario.kind != "task":
            resolved[name] = replace(scenario, products=())
            continue
        unknown = [p for p in scenario.products or () if p not in products]
        for product in unknown:
            at = scenario.products_at
            if at == "$.products":
                at += f"[{scenario.products.index(product)}]"
            problems.append((scenario.file, at, (f"no product is named {product!r} (the "
                                                 f"service profile's: {', '.join(products)})")))
        fitting = tuple(p for p in products if scenario.fits(p, products.get))
        problems += _authentication_method_problems(scenario, fitting, products)
        if name == HAPPY_PATH and not unknown and len(fitting) < len(products):
            problems.append((scenario.file, scenario.products_at,
                             (f"{name} is the default task scenario: it must fit every "
                              f"product ({', '.join(products)})")))
        resolved[name] = replace(scenario, products=fitting)
    if problems:
        raise ConfigError.collected(problems)
    return resolved


def _authentication_method_problems(scenario: Scenario, fitting: tuple[str, ...],
                                    products: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """Spec (Task): `authenticationMethod` has values "For pay-link Tasks" only, so a
    scenario whose steps set it may fit pay-link products only (one that names no products
    fits those by that step)."""
    other = [p for p in fitting if products.get(p) != PAY_LINK]
    setting = [n for n, step in enumerate(scenario.steps) if "authenticationMethod" in step.changes]
    if not other or not setting:
        return []
    return [(scenario.file, f"$.steps[{setting[0]}].authenticationMethod",
             f"step {setting[0]} sets authenticationMethod, which only a pay-link task has "
             f"(spec: Task); the scenario fits {', '.join(other)} too: name pay-link products "
             f"only in `products`")]


def load_all_scenarios(folders: list[Path]) -> dict[str, Scenario]:
    """The scenarios of every folder, a later folder's replacing an earlier's by name."""
    scenarios: dict[str, Scenario] = {}
    for folder in folders:
        scenarios.update(load_scenarios(folder))
    return scenarios
