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


@pytest.mark.parametrize("head", ["tied", "logn"])
def test_committed_live_runs_are_reproduced_by_the_code(head, tmp_path, monkeypatch):
    """Lesson 04's data are not just numbers in a file: re-running the recorded config (first 30 of its steps,
    same lr schedule) gives the recorded val losses again."""
    import json
    import shutil
    import data.prepare as P
    from conftest import shakespeare_path
    from train import Config, train
    if shakespeare_path() is None:
        pytest.skip("needs Tiny Shakespeare (../shared/data or data/shakespeare/input.txt)")
    (tmp_path / "shakespeare").mkdir()
    shutil.copy(shakespeare_path(), tmp_path / "shakespeare" / "input.txt")
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    with open(os.path.join(ROOT, "lessons", "data", "repro_live.json")) as f:
        run = next(r for r in json.load(f)["runs"] if r["id"] == f"main|{head}|seed=1")
    recorded = {r["step"]: r["val_loss"] for r in run["history"] if r.get("val_loss") is not None}
    c = {k: v for k, v in run["config"].items() if k in Config.__dataclass_fields__}
    c.update(vocab_size=50257, max_iters=30, lr_decay_iters=c["max_iters"], out_dir="")  # corpus vocab re-derives n
    again = {r["step"]: r["val_loss"] for r in train(Config(**c), progress=False, log=lambda *a: None)
             if r.get("val_loss") is not None}
    assert sorted(again) == [0, 15, 30]
    for step, loss in again.items():
        assert loss == pytest.approx(recorded[step], rel=1e-3), step
