"""research/figures.py: the lessons' plots draw what they say and label it (axes, bands, the margin)."""

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from research import appendix_a as A
from research import claims as C
from research import figures as F
from research import records

pytestmark = pytest.mark.lab  # the research tools: pytest -m lab


@pytest.fixture
def by():
    runs = C.synthetic_runs({"tied": 0.0, "logn": 0.05, "shuffle": 0.0}, 3, rng=0)
    for r in runs:  # a train loss and an embedding size at every logged step, as real runs have
        for row in r["history"]:
            row.update(train_loss=row["val_loss"] + 0.1, emb_rms=0.02 + row["step"] / 1e5, lr=1e-3)
    return records.by_arm(runs)


def test_curves_draw_a_line_per_arm_and_label_both_panels(by):
    fig, (a, b) = plt.subplots(1, 2)
    F.curves(a, b, by, "sigma=0.02")
    assert len(a.lines) == len(b.lines) == 3
    assert "min-max" in a.get_title() and a.get_ylabel() and b.get_xscale() == "log"
    plt.close(fig)


def test_gaps_draw_each_pair_with_its_interval_and_the_margin(by):
    fig, ax = plt.subplots()
    assert F.gaps(ax, by, [("logn", "tied"), ("logn", "shuffle"), ("logn", "absent")], "gaps") == 2
    assert "95%" in ax.get_legend().get_title().get_text()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("margin" in t for t in labels) and "logn - tied (3 seeds)" in labels
    plt.close(fig)


def test_sizes_and_shared_limits(by):
    fig, (a, b) = plt.subplots(1, 2)
    F.sizes(a, by, "emb_rms", "rms(E)", "rms")
    F.sizes(b, by, None, "relative step", "lr / rms(E)", transform=A.relative_step, log=True)
    assert len(a.lines) == 3 and b.get_yscale() == "log" and b.get_legend() is not None
    lo, hi = F.shared_ylim([a, b])
    assert a.get_ylim() == b.get_ylim() and lo < hi
    plt.close(fig)
