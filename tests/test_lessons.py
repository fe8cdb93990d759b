"""The lessons are notebooks a student runs top to bottom, so a broken lesson is a broken test.

Each notebook in lessons/ is executed headlessly with nbclient, from the lessons/ folder (as JupyterLab would
run it), with TIEDGPT_LESSON_FAST=1: the same code on smaller widths and batches, a few seconds per notebook.
The outputs committed in the notebooks come from full runs (`jupyter nbconvert --to notebook --execute
--inplace lessons/NAME.ipynb`, without the switch); the last test checks that they were committed executed.
"""
import glob
import os

import pytest

from conftest import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

LESSONS = sorted(glob.glob(os.path.join(ROOT, "lessons", "*.ipynb")))
IDS = [os.path.basename(p) for p in LESSONS]


def _errors(nb):
    return [f"cell {i}: {o.get('ename')}: {o.get('evalue')}" for i, cell in enumerate(nb.cells)
            if cell.cell_type == "code" for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def test_there_are_lessons():
    assert len(LESSONS) >= 3, f"expected the lesson notebooks in {os.path.join(ROOT, 'lessons')}"


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_lesson_notebook_runs_top_to_bottom(path, monkeypatch):
    monkeypatch.setenv("TIEDGPT_LESSON_FAST", "1")  # the kernel inherits os.environ; restored after the test
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": os.path.dirname(path)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    assert not _errors(nb)


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_lesson_notebook_is_committed_with_outputs(path):
    """Opened in JupyterLab, a lesson shows its results: every code cell ran, in order, in one session,
    with at least one figure and no error."""
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), \
        "re-run the notebook top to bottom before committing (jupyter nbconvert --execute --inplace)"
    assert not _errors(nb)
    assert any("image/png" in o.get("data", {}) for c in code for o in c.outputs), "no figure in the outputs"
