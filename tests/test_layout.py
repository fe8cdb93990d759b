"""The code stays readable: the root holds what a student runs and reads, the core files keep nanoGPT's proportions,
no function outside the lab is longer than a screen, and the modules import each other one way.

All of it is read from the source with `ast`, nothing is imported or run."""
import ast
import glob
import os

import pytest

from helpers import ROOT

# the root: the model, the trainer and the modules it needs, the optimizers, and the demo a student runs
ROOT_FILES = {"tiedgpt.py", "train.py", "config.py", "rundir.py", "optim.py", "fused_loss.py", "demo.py"}
CORE = sorted(ROOT_FILES) + ["data/prepare.py"]
MAX_LINES = dict(train=500)  # train.py: nanoGPT's is 336 lines, build-nanogpt's train_gpt2.py 521
MAX_FUNCTION_LINES = 60  # a function fits on one screen
MAX_COLUMNS = 120


def _source(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def test_the_root_holds_what_a_student_runs_and_reads():
    """Tools a student does not run (the benchmark, the campaign runners, the probes) live in research/."""
    here = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "*.py"))}
    assert here == ROOT_FILES, f"root Python files: {sorted(here)}; the lab's tools belong in research/"


def test_train_py_is_at_most_500_lines():
    assert len(_source("train.py").splitlines()) <= MAX_LINES["train"]


OUTSIDE_THE_LAB = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "*.py"))
                         + glob.glob(os.path.join(ROOT, "data", "*.py")))


@pytest.mark.parametrize("name", OUTSIDE_THE_LAB)
def test_no_function_outside_the_lab_is_longer_than_a_screen(name):
    tree = ast.parse(_source(name))
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})" for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{name}: functions over {MAX_FUNCTION_LINES} lines: {', '.join(long)}"


@pytest.mark.parametrize("name", CORE)
def test_no_line_in_the_core_is_wider_than_120_columns(name):
    wide = [i for i, line in enumerate(_source(name).splitlines(), 1) if len(line) > MAX_COLUMNS]
    assert not wide, f"{name}: lines over {MAX_COLUMNS} columns: {wide}"


# ----------------------------------------------------------------------------------------------------
# Imports one way: no module reaches, directly or round a circle, back to itself

def project_modules():
    """{module name: path} for the project's own modules, named as they are imported from the repository root (pytest.ini's
    pythonpath, a notebook's one sys.path line): the top-level .py files by name, research/*.py as research.<name> and
    data/*.py as data.<name>."""
    mods = {os.path.splitext(os.path.basename(p))[0]: p for p in glob.glob(os.path.join(ROOT, "*.py"))}
    for package in ("research", "data"):
        for path in glob.glob(os.path.join(ROOT, package, "*.py")):
            name = os.path.splitext(os.path.basename(path))[0]
            if name != "__init__":
                mods[f"{package}.{name}"] = path
    return mods


def imports_of(path, mods):
    """The project modules `path` imports anywhere in it: at the top, inside functions, or under `if`."""
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n in mods}
    return found


def import_graph():
    mods = project_modules()
    return {m: imports_of(p, mods) - {m} for m, p in mods.items()}


def cycles(graph):
    """Every import circle, each as the list of modules round it, found by depth-first search (each circle once,
    starting from its alphabetically first module)."""
    found = []

    def walk(path):
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == path[0]:
                found.append(path + [nxt])
            elif nxt > path[0] and nxt not in path:
                walk(path + [nxt])

    for start in sorted(graph):
        walk([start])
    return found


def test_the_cycle_finder_finds_a_circle_and_only_circles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_sees_function_local_imports():
    graph = import_graph()
    assert "train" in graph["research.bench"] and "research.bench" not in graph["train"]
    assert {"tiedgpt", "config", "optim", "rundir", "fused_loss", "data.prepare"} <= graph["train"]


CORE_MODULES = ("tiedgpt", "train", "config", "optim", "rundir", "fused_loss", "data.prepare")


def test_the_core_modules_import_each_other_one_way():
    graph = import_graph()
    core = [c for c in cycles(graph) if set(c) & set(CORE_MODULES)]
    assert not core, "import circles: " + "; ".join(" -> ".join(c) for c in core)


def test_no_module_of_the_project_imports_itself_round_a_circle():
    found = cycles(import_graph())
    assert not found, "import circles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_core_imports_nothing_from_the_lab_or_the_class():
    """The core (model, trainer and what they import) is what a student reads first: research/ and lessons/ live
    beside it and may import it, never the other way round."""
    graph = import_graph()
    into = {m: sorted(n for n in graph[m] if n.startswith(("research", "lessons")) or n == "demo")
            for m in CORE_MODULES if m in graph}
    assert not any(into.values()), f"the core imports the lab: {into}"


# Fields only a train.Run has (a run record of research/ is a dict with other keys)
RUN_ONLY = {"loss_model", "step_model", "first_bad", "loss_sum", "n_summed", "ckpt_step", "t_last", "step_last",
            "train_data", "val_data"}


def test_no_function_outside_train_py_takes_a_run():
    """What only the loop uses lives beside the loop: a function elsewhere that reads a Run's own fields from an
    argument would take the loop's state by duck typing."""
    found = []
    for name, path in project_modules().items():
        if name == "train":
            continue
        for fn in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
            used = {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id in params and n.attr in RUN_ONLY}
            if used:
                found.append(f"{name}.{fn.name} ({', '.join(sorted(used))})")
    assert not found, f"functions that take a train.Run outside train.py: {found}"


def test_no_module_is_over_450_lines_but_the_model_and_the_trainer():
    """A module over 450 lines usually holds two concerns."""
    long = {name: n for name, path in project_modules().items()
            if name not in ("tiedgpt", "train") and (n := len(open(path, encoding="utf-8").read().splitlines())) > 450}
    assert not long, f"modules over 450 lines: {long}"


def test_every_module_docstring_is_api_of_at_most_20_lines():
    """Lab notes and measurements live in docs/ and the appendices; tiedgpt.py's docstrings derive the heads."""
    long = {}
    for name, path in project_modules().items():
        doc = ast.get_docstring(ast.parse(open(path, encoding="utf-8").read()), clean=False)
        if name != "tiedgpt" and doc and len(doc.strip("\n").splitlines()) > 20:
            long[name] = len(doc.strip("\n").splitlines())
    assert not long, f"module docstrings over 20 lines: {long}"
