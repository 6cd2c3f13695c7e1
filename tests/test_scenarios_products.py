"""Issue 23: which products a scenario fits. A scenario file names them (`products`) or its
steps imply them; they are made concrete against the service profile at start, and a
scenario never changes a task's product (the API side: tests/test_tasks.py). The
command-line tests call `payroll-sandbox`'s main in-process (test_cli_toolkit.py runs
`scenarios` as a process)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine import Engine, bundled

from payroll_sandbox.tools.cli import main
from payroll_sandbox.load.fixtures import ConfigError
from payroll_sandbox.load.scenarios.loader import load_scenario, resolve_products
from payroll_sandbox.schemas.responses import Scenario as ScenarioView

PROFILE = {"deposit": "user-link", "verify": "user-link", "switch": "pay-link",
           "present": "pay-link"}
PROCESSING = "  - after: 1\n    status: processing\n"
COMPLETED = "  - after: 1\n    status: completed\n"


def write(tmp_path: Path, steps: str, *, header: str = "", name: str = "case") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"description: a scenario under test\n{header}steps:\n{steps}",
                    encoding="utf-8")
    return path


def refusal(path: Path, loader=load_scenario) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        loader(path)
    return caught.value


# -- what a file says, and what its steps imply ----------------------------------------------

@pytest.mark.parametrize("header, steps, fits", [
    ("products: [present, switch]\n", PROCESSING + COMPLETED, ("switch", "present")),
    ("", PROCESSING + "    product: switch\n" + COMPLETED, ("switch",)),
    ("", PROCESSING + "    flow: change-plan\n" + COMPLETED, ("switch", "present")),
    ("", PROCESSING + "    authenticationMethod: true-auth\n" + COMPLETED,
     ("switch", "present")),
    ("", PROCESSING + "  - linkedAccount: disconnected\n" + COMPLETED, ("deposit", "verify")),
    ("", PROCESSING + COMPLETED + "  - piiDataDeleted: true\n", ("deposit", "verify")),
    ("", PROCESSING + COMPLETED, ("deposit", "verify", "switch", "present")),
], ids=["named", "older-step-product", "pay-link-flow", "pay-link-auth-method",
        "user-link-linked-account", "user-link-pii", "neither-fits-every-product"])
def test_a_scenario_fits_the_products_its_file_names_or_its_steps_imply(
        tmp_path, header, steps, fits):
    scenario = load_scenario(write(tmp_path, steps, header=header))
    resolved = resolve_products({"case": scenario}, PROFILE)["case"]
    assert resolved.products == fits   # in the service profile's order
    assert ScenarioView.of(resolved).products == list(fits)
    for product in PROFILE:
        assert resolved.fits(product) is (product in fits)


def test_an_unresolved_scenario_fits_by_the_scope_of_its_steps(tmp_path):
    scenario = load_scenario(write(tmp_path, PROCESSING + "    flow: switch\n" + COMPLETED))
    assert (scenario.products, scenario.scope) == (None, "pay-link")
    assert scenario.fits("switch", PROFILE.get) and not scenario.fits("deposit", PROFILE.get)


@pytest.mark.parametrize("header, steps, path, words", [
    ("products: [switch]\n", PROCESSING + "    product: switch\n" + COMPLETED,
     "$.steps[0].product", "leave a step's product out"),
    ("", PROCESSING + "    product: switch\n  - product: present\n" + COMPLETED,
     "$.steps[1].product", "list the products it fits in `products`"),
    ("", PROCESSING + "    flow: switch\n  - linkedAccount: disconnected\n" + COMPLETED,
     "$.products", "pay-link tasks ($.steps[0].flow) and of user-link tasks"),
    ("products: []\n", PROCESSING + COMPLETED, "$.products", "should be non-empty"),
    ("products: [switch, switch]\n", PROCESSING + COMPLETED, "$.products", "non-unique"),
    ("products: [1]\n", PROCESSING + COMPLETED, "$.products[0]", "not of type 'string'"),
], ids=["products-and-a-step-product", "two-step-products", "pay-link-and-user-link-steps",
        "empty", "repeated", "not-a-name"])
def test_a_file_whose_products_cannot_be_told_is_refused_naming_the_path(
        tmp_path, header, steps, path, words):
    error = refusal(write(tmp_path, steps, header=header))
    assert (error.file, error.path) == (str(tmp_path / "case.yaml"), path)
    assert words in error.message


def test_a_processor_link_scenario_has_no_products(tmp_path):
    error = refusal(write(tmp_path, "  - stage: pull-transactions\n",
                          header="kind: processor-link\nproducts: [deposit]\n"))
    assert error.path == "$.products" and "runs no task" in error.message


def test_resolving_refuses_a_product_the_service_profile_does_not_have(tmp_path):
    named = load_scenario(write(tmp_path, PROCESSING + COMPLETED,
                                header="products: [switch, payroll]\n", name="named"))
    older = load_scenario(write(tmp_path, PROCESSING + "    product: bills\n" + COMPLETED,
                                name="older"))
    with pytest.raises(ConfigError) as caught:
        resolve_products({"named": named, "older": older}, PROFILE)
    assert [(Path(f).name, p) for f, p, _ in caught.value.problems] == [
        ("named.yaml", "$.products[1]"), ("older.yaml", "$.steps[0].product")]
    assert "no product is named 'payroll' (the service profile's: deposit, verify, switch, " \
           "present)" in caught.value.problems[0][2]


def test_resolving_refuses_a_happy_path_that_does_not_fit_every_product(tmp_path):
    happy = load_scenario(write(tmp_path, PROCESSING + COMPLETED, header="products: [deposit]\n",
                                name="happy-path"))
    with pytest.raises(ConfigError) as caught:
        resolve_products({"happy-path": happy}, PROFILE)
    assert caught.value.path == "$.products"
    assert "happy-path is the default task scenario: it must fit every product" in \
        caught.value.message


def test_an_older_step_product_names_what_it_fits_and_changes_nothing(tmp_path):
    """`product: switch` in a step: a switch task runs it (and stays a switch task), a
    present task may not (it used to become a switch task silently)."""
    from payroll_sandbox.errors import ScenarioDoesNotFit

    write(tmp_path, PROCESSING + "    product: switch\n    flow: switch\n" + COMPLETED,
          name="old-switch")
    engine = Engine(seed=7, scenarios=tmp_path)
    assert engine.registry.scenarios["old-switch"].products == ("switch",)
    netflix = "6410a0000000000000000060"
    with pytest.raises(ScenarioDoesNotFit):
        engine.api_task({"identifier": "u", "company": netflix, "product": "present",
                         "scenario": "old-switch"})
    _, [task] = engine.api_task({"identifier": "u", "company": netflix, "product": "switch",
                                 "scenario": "old-switch"})
    engine.run_until_idle()
    assert (task.product, task.flow, task.status) == ("switch", "switch", "completed")


# -- the bundled scenarios --------------------------------------------------------------------

def test_bundled_scenarios_fit_what_their_stories_are_about():
    loaded = bundled()
    scenarios, every = loaded.scenarios, tuple(loaded.fixtures.service.products)
    pay_link = {name for name, s in scenarios.items()
                if any(k in step.changes for step in s.steps
                       for k in ("flow", "paymentMethod", "accounts"))}
    # The pay-link stories are exactly the scenarios that fit switch tasks only.
    assert pay_link and pay_link == {name for name, s in scenarios.items()
                                     if s.products == ("switch",)}
    assert scenarios["distribution-not-supported"].products == ("deposit",)
    assert scenarios["linked-account-disconnected"].products == ("deposit", "verify")
    assert scenarios["pii-data-deleted"].products == ("deposit", "verify")
    assert scenarios["happy-path"].products == every
    assert scenarios["item-login-required"].products == ()
    # No bundled file changes a product in a step any more.
    assert not [n for n, s in scenarios.items() if any("product" in st.changes for st in s.steps)]


def test_scenarios_validate_refuses_an_unknown_product_with_exit_2(tmp_path, capsys):
    write(tmp_path, PROCESSING + COMPLETED, header="products: [payroll]\n", name="mine")
    assert main(["scenarios", "validate", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"payroll-sandbox: configuration error: {tmp_path / 'mine.yaml'}: $.products[0]: no "
        "product is named 'payroll' (the service profile's: deposit, verify, identify, tax, "
        "switch, present, manage)")


def test_scenarios_list_says_what_each_fits(capsys):
    assert main(["scenarios", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    fits = {line.split()[0]: line.split()[4] for line in lines}
    assert fits["payment-method-declined"] == "fits=switch"
    assert fits["happy-path"] == "fits=every-product"
    assert fits["linked-account-disconnected"] == "fits=deposit,verify"
    assert fits["item-login-required"] == "fits=no-task"
