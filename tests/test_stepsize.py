"""The step-size sweep's rules (research/stepsize.py, fixed before its runs in research/preregistrations/stepsize.md),
tried on made-up runs first: under no effect they rarely give an answer, and a planted effect is found."""
import math

import numpy as np
import pytest

from research import stepsize as Z

pytestmark = pytest.mark.lab  # the research tools: pytest -m lab

STEPS = list(range(0, 101, 10))


def fake_runs(gap, drop=2.0, sd=0.05, seeds=(1, 2, 3, 4, 5), rng=None, cells=None):
    """Runs of every cell: ortho falls `drop(opt, lr)` nats by step 100 (linearly), logn sits `gap(opt, lr)` above it at
    the end, each seed's gap with noise of sd `sd`."""
    rng = rng or np.random.default_rng(0)
    drop = drop if callable(drop) else (lambda o, lr, d=drop: d)
    out = []
    for opt, lr in cells or Z.CELLS:
        for s in seeds:
            ortho = 9.8 - drop(opt, lr) * np.array(STEPS) / 100
            g = gap(opt, lr) + sd * rng.standard_normal()
            logn = ortho + 0.08 + (g - 0.08) * np.array(STEPS) / 100
            for arm, val in (("logn", logn), ("ortho", ortho)):
                out.append(dict(optimizer=opt, arm=arm, seed=s, config=dict(lr=lr), steps=STEPS,
                                val=val.tolist(), diverged=None))
    return out


def answer_of(runs):
    return Z.answer(Z.table(runs))


def test_the_run_order_starts_with_check_d_then_three_seeds_of_every_cell():
    order = Z.order()
    assert order[:4] == [("adamw", 3e-3, "logn", 1), ("adamw", 3e-3, "ortho", 1), ("tiger", 3e-3, "logn", 1),
                         ("tiger", 3e-3, "ortho", 1)]
    assert len(order) == len(set(order)) == len(Z.CELLS) * 2 * 5
    first_late_seed = next(i for i, r in enumerate(order) if r[3] > 3)
    assert {r[3] for r in order[:first_late_seed]} == {1, 2, 3}


def test_a_rule_flips_only_from_yes_at_a_small_step_to_no_at_a_larger_one():
    assert Z.flips(["yes", "can't tell", "no"])
    assert not Z.flips(["no", "yes"])  # the opposite order is not H_S's
    assert not Z.flips(["yes", "yes"])


def test_a_cell_in_which_nothing_moved_counts_for_neither_hypothesis():
    runs = fake_runs(lambda o, lr: 0.15, drop=lambda o, lr: 0.2 if lr < 1e-4 else 2.0)
    tab = Z.table(runs)
    assert tab[("adamw", 3e-5)]["state"] == "did not leave its start"
    assert tab[("adamw", 3e-5)]["word"] == "yes"  # a word, shown in grey, but not counted
    assert tab[("adamw", 1e-3)]["state"] == "trained"


def test_a_run_that_diverged_makes_its_cell_a_diverged_result_without_a_word():
    runs = fake_runs(lambda o, lr: 0.3)
    bad = next(r for r in runs if r["optimizer"] == "signum" and r["config"]["lr"] == 1e-2 and r["seed"] == 2)
    bad["diverged"] = 40
    tab = Z.table(runs)
    assert tab[("signum", 1e-2)]["state"] == "diverged" and tab[("signum", 1e-2)]["word"] is None
    worse = next(r for r in runs if r["optimizer"] == "adamw" and r["config"]["lr"] == 1e-2 and r["seed"] == 1)
    worse["val"][-1] = worse["val"][0] + 0.1  # ended above its start: diverged too
    assert Z.table(runs)[("adamw", 1e-2)]["state"] == "diverged"


def test_the_table_uses_only_the_seeds_every_cell_has():
    runs = [r for r in fake_runs(lambda o, lr: 0.3) if not (r["optimizer"] == "tiger" and r["seed"] == 5)]
    assert {c["n"] for c in Z.table(runs).values()} == {4}


def test_under_no_effect_the_answer_is_rarely_a_hypothesis():
    rng = np.random.default_rng(1)
    answers = [answer_of(fake_runs(lambda o, lr: 0.0, rng=rng)) for _ in range(300)]
    claimed = np.mean([a in ("H_S", "H_C", "both") for a in answers])
    assert claimed <= 0.08, f"false alarms {claimed:.1%}"


def test_each_cell_word_under_no_effect_is_wrong_about_one_time_in_twenty():
    rng = np.random.default_rng(2)
    words = [c["word"] for _ in range(100) for c in Z.table(fake_runs(lambda o, lr: 0.0, rng=rng)).values()]
    assert 0.02 <= np.mean([w != "can't tell" for w in words]) <= 0.08


def step_size_effect(o, lr):
    """H_S planted: logn behind at small steps, ahead at large, for AdamW and Signum alike."""
    return 0.3 if lr <= 3e-4 else -0.3


def rule_effect(o, lr):
    """H_C planted: AdamW always 'no', the sign rules always 'yes'."""
    return -0.2 if o == "adamw" else 0.5


@pytest.mark.parametrize("planted, expected", [(step_size_effect, "H_S"), (rule_effect, "H_C")])
def test_a_planted_effect_is_found(planted, expected):
    rng = np.random.default_rng(3)
    answers = [answer_of(fake_runs(planted, rng=rng)) for _ in range(50)]
    assert np.mean([a == expected for a in answers]) >= 0.95


def test_a_step_size_that_matters_under_one_rule_only_is_both():
    planted = lambda o, lr: step_size_effect(o, lr) if o == "adamw" else 0.5  # noqa: E731
    assert answer_of(fake_runs(planted)) == "both"


def test_signum_minus_adamw_is_paired_by_seed_at_each_shared_step():
    runs = fake_runs(lambda o, lr: 0.4 if o == "signum" else 0.1, sd=0.0)
    tr = Z.tracking(Z.table(runs), runs)
    assert set(tr) == set(Z.STEPS_LR) and all(t["mean"] == pytest.approx(0.3) for t in tr.values())


def test_the_figure_draws_every_cell_and_the_report_states_the_rule_and_both_predictions():
    import matplotlib
    matplotlib.use("Agg")
    runs = fake_runs(step_size_effect)
    runs[0]["diverged"] = 30  # adamw 3e-5, seed 1: its cell is drawn as diverged
    tab = Z.table(runs)
    fig = Z.figure(tab)
    assert len(fig.axes) == 2 and fig.axes[0].get_xscale() == "log"
    text = "\n".join(Z.report_lines(tab, runs))
    assert "AdamW lr 3e-05     diverged" in text and "the answer (pre-registered rule): H_S" in text
    assert "predicted under H_S" in text and "predicted under H_C" in text


def test_the_summary_figure_draws_each_trained_cell_once_and_names_the_unstable_one():
    """Lesson 04's figure: per optimizer, one point per lr that trained (left: the gap at step 100, right: the step of
    its peak); a diverged cell is left out, an unstable one left out and named."""
    import matplotlib
    matplotlib.use("Agg")
    runs = fake_runs(step_size_effect)
    runs[0]["diverged"] = 30  # adamw 3e-5, seed 1
    tab = Z.table(runs)
    fig = Z.figures.stepsize_summary(tab, Z.NAMES, unstable={("signum", 1e-2)})
    left, right = fig.axes
    trained = {o: sorted(lr for (opt, lr), c in tab.items() if opt == o and c["state"] != "diverged")
               for o in ("adamw", "signum", "tiger")}
    trained["signum"].remove(1e-2)
    expected = {Z.NAMES[o]: lrs for o, lrs in trained.items()}
    assert {c.get_label(): list(c.lines[0].get_xdata()) for c in left.containers} == expected  # the error bars
    assert {line.get_label(): list(line.get_xdata()) for line in right.get_lines()} == expected
    assert [t.get_text() for t in left.texts] == ["Signum 0.01: unstable, set aside"]


def test_lesson_04s_figure_puts_each_rule_at_the_step_it_takes_on_logns_embedding_for_its_size():
    """AdamW and Signum move each entry by lr, so by lr / sigma of logn's embedding (sigma = ln(n)/d); Tiger by lr of
    its size: on that axis Tiger at 3e-3 sits beside AdamW at 1e-4 (0.3% and 0.27% a step)."""
    import matplotlib
    matplotlib.use("Agg")
    sigma = math.log(11706) / 256
    assert Z.relative_step("adamw", 1e-4) == pytest.approx(1e-4 / sigma) == Z.relative_step("signum", 1e-4)
    assert Z.relative_step("tiger", 3e-3) == pytest.approx(3e-3)
    tab = Z.table(fake_runs(step_size_effect))
    left = Z.summary_figure(tab).axes[0]
    xs = {c.get_label(): list(c.lines[0].get_xdata()) for c in left.containers}
    assert xs["Tiger"] == pytest.approx(sorted(lr for (o, lr) in tab if o == "tiger"))
    assert xs["AdamW"] == pytest.approx([lr / sigma for lr in sorted(lr for (o, lr) in tab if o == "adamw")])


def test_the_report_and_figure_read_a_sweep_with_one_seed_so_far():
    """Partial data (the campaign lands run by run): one seed has no interval, its word is "can't tell"."""
    import matplotlib
    matplotlib.use("Agg")
    runs = fake_runs(step_size_effect, seeds=(1,))
    tab = Z.table(runs)
    assert {c["word"] for c in tab.values()} == {"can't tell"} and Z.answer(tab) == "undecided"
    Z.figure(tab)
    assert "(one seed: no interval)" in "\n".join(Z.report_lines(tab, runs))


@pytest.mark.reports
def test_appendix_b_section_12_reads_what_the_committed_sweep_gives():
    """Section 12's words against the committed runs (research/runs/stepsize): H_S by the pre-registered rule; under
    AdamW a 'yes' and a 'no' at neighbouring steps; Signum's only 'no' at the step just below the one where it
    diverged; Signum a little further behind than AdamW at the small steps; Tiger, at the distance AdamW reaches,
    many times further behind with its branches' output weights hardly moved."""
    runs = Z.load()
    assert len(runs) == len(Z.order()), "every planned run is committed"
    assert all(row["passed"] for row in Z.check_d(runs)), "check D: the sweep re-makes the committed demo's seed 1"
    tab = Z.table(runs)
    assert Z.answer(tab) == "H_S"
    adamw = [tab["adamw", lr]["word"] for lr in Z.STEPS_LR]
    assert any((a, b) == ("yes", "no") for a, b in zip(adamw, adamw[1:])), adamw
    signum = [(lr, tab["signum", lr]) for lr in Z.STEPS_LR]
    noes = [i for i, (_, c) in enumerate(signum) if c["state"] == "trained" and c["word"] == "no"]
    assert len(noes) == 1 and signum[noes[0] + 1][1]["state"] == "diverged", "one 'no', just below divergence"
    small = sorted(Z.tracking(tab, runs).items())[:2]
    assert all(t["ci95"][0] > 0 for _, t in small), "Signum further behind than AdamW at the two smallest steps"
    trained = {k: c for k, c in tab.items() if c["state"] == "trained"}
    t_lr = max(lr for o, lr in trained if o == "tiger")
    a_lr = min((lr for o, lr in trained if o == "adamw"),
               key=lambda lr: abs(trained["adamw", lr]["ortho_end"] - trained["tiger", t_lr]["ortho_end"]))
    assert abs(trained["adamw", a_lr]["ortho_end"] - trained["tiger", t_lr]["ortho_end"]) < 0.25, "as far"
    assert trained["tiger", t_lr]["mean"] > 5 * max(trained["adamw", a_lr]["mean"], 0.0)
    moved = {o: np.mean([r["proj_moved"][-1] for r in runs if (r["optimizer"], r["config"]["lr"]) == (o, lr)])
             for o, lr in (("tiger", t_lr), ("adamw", a_lr))}
    assert moved["tiger"] < moved["adamw"] / 10
    # Signum's only 'no' is the one unstable cell; set aside (after the data), the answer is 'both'
    assert set(Z.unstable(tab, runs)) == {("signum", 3e-3)} and Z.answer(tab, Z.unstable(tab, runs)) == "both"
    assert "that cell set aside (decided after seeing the data): both" in "\n".join(Z.report_lines(tab, runs))


def test_a_cell_whose_runs_climb_back_up_is_marked_unstable_and_can_be_set_aside():
    """A run that ends UNSTABLE_CLIMB nats or more above its own lowest val loss came apart within its steps: its cell
    is marked, and the answer without it is printed beside the rule's (a rule decided after the data)."""
    runs = fake_runs(lambda o, lr: 0.2 if lr < 1e-3 else -0.2)
    for r in runs:
        if (r["optimizer"], Z.lr_of(r)) == ("signum", 1e-2):
            r["val"] = r["val"][:-1] + [min(r["val"]) + 1.0]  # climbed back a nat by the last step
    tab = Z.table(runs)
    assert set(Z.unstable(tab, runs)) == {("signum", 1e-2)}
    assert "trained unstably" in "\n".join(Z.report_lines(tab, runs))
