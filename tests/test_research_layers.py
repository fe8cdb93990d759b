"""The experiment machinery in research/ is a small package whose imports go one way: statistics <- run records <-
claims <- the reports, with the plans and the worker beside them. These tests read the source with `ast`, so an import
hidden inside a function counts too."""
import ast
import os

import numpy as np
import pytest

from helpers import ROOT

pytestmark = pytest.mark.lab  # the research tools: pytest -m lab

RESEARCH = os.path.join(ROOT, "research")
# Each module of the package and the package modules it may import (anything else of research/ is refused).
LAYERS = {
    "stats": set(),
    "records": {"stats"},
    "claims": {"stats", "records"},
    "fragility": {"stats", "records", "claims"},
    "plans": {"stats", "records"},
    "appendix_a": {"stats", "records", "claims"},
    "appendix_b": {"stats", "records", "claims", "fragility", "plans"},
    "turn": {"records", "appendix_b"},
    "cause": {"stats", "records", "claims", "fragility", "plans"},
    "cause_record": {"stats", "records", "plans", "cause"},
    "figures": {"stats", "records"},
    "reproduce": {"stats", "records", "plans", "probes"},
    "probes": set(),
    "quick_demo": set(),
    "workers": {"records"},
    "stepsize": {"stats", "records", "workers", "figures"},
}
ENTRY_POINTS = {"reproduce", "budget", "bench"}  # run with python -m research.NAME


def _tree(name):
    with open(os.path.join(RESEARCH, name + ".py")) as f:
        return ast.parse(f.read())


def _imports(tree):
    """Every module name imported anywhere in the file, function bodies included."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.removeprefix("research.").split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "research":
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module.removeprefix("research.").split(".")[0])
    return out


MODULES = sorted(f[:-3] for f in os.listdir(RESEARCH) if f.endswith(".py") and f != "__init__.py")


def test_every_module_of_the_package_has_a_place_in_the_layers():
    assert set(MODULES) - ENTRY_POINTS - set(LAYERS) == set(), "a new module in research/: give it a layer here"


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_the_experiment_modules_import_one_way(name):
    package = _imports(_tree(name)) & set(MODULES)
    assert package <= LAYERS[name], f"{name} imports {sorted(package - LAYERS[name])}, above its layer"


@pytest.mark.parametrize("name", MODULES)
def test_no_module_of_the_package_edits_sys_path(name):
    """Each is imported as research.NAME (python -m research.NAME from the repository root runs a script)."""
    edits = [n for n in ast.walk(_tree(name)) if isinstance(n, ast.Attribute) and n.attr == "path"
             and isinstance(n.value, ast.Name) and n.value.id == "sys"]
    assert not edits, f"{name} edits sys.path"


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_no_module_writes_into_another_modules_tables(name):
    """`other.TABLE[key] = ...` or `other.TABLE.setdefault(...)` from outside: a table is changed where it is defined."""
    bad = []
    for node in ast.walk(_tree(name)):
        target = node.targets[0] if isinstance(node, ast.Assign) else None
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute):
            bad.append(ast.unparse(target))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("setdefault", "update") and isinstance(node.func.value, ast.Attribute):
            bad.append(ast.unparse(node.func))
    assert not bad, f"{name} writes into another module's table: {bad}"


@pytest.mark.parametrize("name", sorted(set(LAYERS) - {"records"}))
def test_only_records_reads_a_runs_history(name):
    """records.logged is the one reader of a run's history; every other module reads a run through it."""
    reads = [ast.unparse(n) for n in ast.walk(_tree(name)) if isinstance(n, ast.Subscript)
             and isinstance(n.slice, ast.Constant) and n.slice.value == "history"]
    assert not reads, f"{name} reads a run's history itself: {reads}"


def test_the_pooled_seed_sd_weights_each_comparison_by_its_degrees_of_freedom():
    from research import stats
    five, three = [0.1, 0.3, 0.2, 0.0, 0.4], [1.0, 1.2, 1.1]
    ss = sum((x - np.mean(five)) ** 2 for x in five) + sum((x - np.mean(three)) ** 2 for x in three)
    sd, df, used = stats.pooled_sd([five, three, [7.0]])       # a comparison with one seed has no spread to give
    assert (df, used) == (6, 2) and sd == pytest.approx((ss / 6) ** 0.5)
    assert sd != pytest.approx(np.sqrt(np.mean([np.var(five, ddof=1), np.var(three, ddof=1)])))
    assert np.isnan(stats.pooled_sd([[1.0]])[0])
