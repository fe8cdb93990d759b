"""lessons/analysis05.py and reproduce.py's 'optim' plan: the campaign's two decisions (check B: may it run in bf16?
sweep S: which learning rate?) follow their pre-registered rules, and the plan grows only as they are made.

Every "run" here is a dict shaped like reproduce.py's records; nothing is trained."""
import dataclasses
import math
import os
import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "lessons"))
import analysis  # noqa: E402
import analysis05 as A5  # noqa: E402
import reproduce as R  # noqa: E402


def record(group, arm, overrides, best=5.0, vals=None, subset=None):
    """A finished run of the plan, with val losses `vals` at steps 0, 100, ... and val-subset losses {step: loss}."""
    c = dataclasses.asdict(R.Config(**{k: v for k, v in overrides.items() if k != "emb_std" or v != R.LOGN_SIGMA}))
    vals = vals or [9.0, 6.0, 5.5, best]
    hist = [dict(step=100 * i, val_loss=v) for i, v in enumerate(vals)]
    for s, v in (subset or {}).items():
        hist.append(dict(step=s, val_subset_loss=v))
    return dict(id=R.run_id(group, arm, overrides["seed"]), group=group, arm=arm, head=overrides["head"],
                seed=overrides["seed"], config=c, best_val=min(vals), history=sorted(hist, key=lambda r: r["step"]))


def test_pick_lr_takes_the_lowest_best_val_loss():
    assert A5.pick_lr({1e-3: 5.4, 3e-3: 5.2, 1e-2: 5.1, 3e-2: 5.3}) == dict(lr=1e-2, next=[])


def test_pick_lr_prefers_the_smaller_lr_within_the_margin():
    """Two lrs within 0.02 nats are a tie the seed can't break: the smaller one is closer to the author's."""
    assert A5.pick_lr({1e-3: 5.4, 3e-3: 5.115, 1e-2: 5.1, 3e-2: 5.3})["lr"] == 3e-3


def test_pick_lr_waits_for_the_whole_grid_and_extends_it_once_beyond_a_winning_end():
    assert A5.pick_lr({1e-3: 5.4}) == dict(lr=None, next=[3e-3, 1e-2, 3e-2])
    top = {1e-3: 5.4, 3e-3: 5.3, 1e-2: 5.2, 3e-2: 5.1}
    assert A5.pick_lr(top) == dict(lr=None, next=[0.1])
    assert A5.pick_lr({**top, 0.1: 5.0})["lr"] == 0.1  # the extension wins: taken, no second extension
    assert A5.pick_lr({**top, 0.1: 5.3})["lr"] == 3e-2
    bottom = {1e-3: 5.0, 3e-3: 5.3, 1e-2: 5.4, 3e-2: 5.5}
    assert A5.pick_lr(bottom)["next"] == [pytest.approx(1e-3 / 3)]


def test_pick_lr_ignores_diverged_runs():
    assert A5.pick_lr({1e-3: 5.4, 3e-3: 5.2, 1e-2: 5.1, 3e-2: math.nan})["lr"] == 1e-2


def check_runs(diff):
    """Check B's runs, the bf16 twin of each fp32 run off by `diff` nats at every evaluation."""
    out = []
    for g, a, o in R.plan("optim"):
        off = diff if o["dtype"] == "bfloat16" else 0.0
        out.append(record(g, a, o, vals=[9.0 + off, 6.0 + off, 5.5 + off, 5.2 + off]))
    return out


@pytest.mark.parametrize("diff, passed", [(0.004, True), (0.012, False)])
def test_bf16_check_passes_only_within_its_tolerance(diff, passed):
    runs = check_runs(diff)
    dec = R.optim_decisions(runs)
    assert dec["check"]["done"] and dec["check"]["passed"] is passed
    assert dec["dtype"] == ("bfloat16" if passed else "float32")
    assert len(dec["check"]["rows"]) == 6 and all(r["max_abs_diff"] == pytest.approx(diff) for r in dec["check"]["rows"])
    assert not R.optim_decisions(runs[:-1])["check"]["done"]  # one twin missing: no decision yet


def test_the_optim_plan_starts_with_check_b_alone():
    p = R.plan("optim")
    assert len(p) == 12 and all(g.startswith("check ") and o["max_iters"] == 300 for g, _, o in p)
    assert R.pending_decisions("optim", []) == ["check B (bf16)", "sweep S (tiger)", "sweep S (lamb)"]


def test_the_optim_plan_grows_with_its_decisions():
    runs = check_runs(0.0)
    p = R.plan("optim", runs)
    sweeps = [x for x in p if x[0].startswith("sweep ")]
    assert len(sweeps) == 8 and {o["dtype"] for _, _, o in sweeps} == {"bfloat16"}
    assert all(a == "tied" and o["seed"] == A5.SWEEP_SEED and o["emb_std"] == 0.02 for _, a, o in sweeps)
    assert not any(g in ("tiger", "lamb") for g, _, _ in p)  # no lr yet: no main runs
    best = {1e-3: 5.4, 3e-3: 5.2, 1e-2: 5.1, 3e-2: 5.3}
    runs += [record(g, a, o, best=best[o["lr"]], vals=[9, 6, best[o["lr"]]]) for g, a, o in sweeps]
    assert R.pending_decisions("optim", runs) == []
    p = R.plan("optim", runs)
    for opt in ("tiger", "lamb"):
        main = [(a, o) for g, a, o in p if g == opt]
        assert {o["lr"] for _, o in main} == {1e-2} and {o["dtype"] for _, o in main} == {"bfloat16"}
        seeds = {a: sorted(o["seed"] for b, o in main if b == a) for a, _ in main}
        assert seeds == dict(logn=[1, 2, 3, 4, 5], control=[1, 2, 3, 4, 5], ortho=[1, 2, 3, 4, 5],
                             tied=[1, 2, 3], shuffle=[1, 2, 3], untied=[1, 2, 3])
        assert len([g for g, _, _ in p if g == f"{opt} d^-1/2"]) == 12
    adamw = [(a, o) for g, a, o in p if g == "adamw"]
    assert len(adamw) == 9 and {o["lr"] for _, o in adamw} == {1e-3} and {o["residual_std"] for _, o in adamw} == {1e-4}
    c = R.config_for(next(o for g, a, o in p if g == "tiger" and a == "control"))
    assert c.head == "ortho" and c.emb_std == pytest.approx(math.log(11706) / 768)  # the arm's sigma wins


def test_a_failed_bf16_check_runs_fp32_and_cuts_seeds_4_5_and_d_half():
    runs = check_runs(0.05)
    sweeps = [x for x in R.plan("optim", runs) if x[0].startswith("sweep ")]
    runs += [record(g, a, o, best=5.0 + o["lr"]) for g, a, o in sweeps]
    p = R.plan("optim", runs)
    main = [o for g, _, o in p if not g.startswith(("check", "sweep"))]
    assert {o["dtype"] for o in main} == {"float32"} and max(o["seed"] for o in main) == 3
    assert not any("d^-1/2" in g for g, _, _ in p)


def test_start_is_the_mean_val_subset_loss_over_steps_10_to_200():
    g, a, o = R.plan("optim")[0]
    run = record(g, a, o, subset={0: 9.0, **{s: 6.0 + s / 1000 for s in range(10, 201, 10)}, 300: 1.0})
    assert A5.start(run) == pytest.approx(np.mean([6.0 + s / 1000 for s in range(10, 201, 10)]))
    assert analysis.STATS["start"] is A5.start


def test_settings_give_each_optimizer_its_own_runs_and_d_half_borrows_logn_and_control():
    rows = []
    for group, arm in [("tiger", "logn"), ("tiger", "ortho"), ("tiger d^-1/2", "ortho"), ("lamb", "logn"),
                       ("tiger", "control")]:
        rows.append(dict(group=group, arm=arm, head=arm, seed=1, history=[]))
    s = A5.settings(rows)
    assert sorted(s["tiger"]) == ["control", "logn", "ortho"]
    assert sorted(s["tiger, sigma=d^-1/2"]) == ["control", "logn", "ortho"]
    assert s["tiger, sigma=d^-1/2"]["ortho"][1]["group"] == "tiger d^-1/2"
    assert sorted(s["lamb"]) == ["logn"]
