"""research/cause.py's rules, tested on planted data before its runs are read: each verdict says what was planted,
the verdict that would call relativity the cause almost never fires when it is not, and the pre-registered plan is
the one reproduce.py runs."""

import numpy as np
import pytest

from research import cause, cause_record
from research.stats import MARGIN

pytestmark = pytest.mark.lab  # the research tools: pytest -m lab


def fake_run(group, arm, seed, level):
    """A run whose dense and whole-split val losses all equal `level` (so start = early400 = level)."""
    hist = [dict(step=s, val_subset_loss=level) for s in range(10, 201, 10)]
    hist += [dict(step=s, val_loss=level) for s in range(0, cause.STEPS + 1, 100)]
    return dict(id=f"{group}|{arm}|seed={seed}", group=group, arm=arm, head=arm, seed=seed, history=hist, config=dict(lr=3e-3),
                best_val=level)


def world(gaps, noise=0.0, rng=None, seeds=(1, 2, 3), raw=False):
    """Committed-style and new runs where logn - ortho (and logn - shuffle) is gaps[cell] in each cell; ortho's level
    differs by seed (shared within a seed, as pairing removes it), and `noise` is added per run."""
    rng = rng or np.random.default_rng(0)
    committed, new = [], []
    groups = {"tiger": "tiger", "lamb": "lamb", "twin tiger": "b tiger-twin lr=0.003",
              "twin lamb": "b lamb-twin lr=0.003", "c embedding": "c tiger embedding-only lr=0.003",
              "c body": "c tiger body-only lr=0.003", "twin tiger O": "b tiger-twin lr=0.01", "twin lamb O": "b lamb-twin lr=0.01", "a tiger": "a tiger"}
    for cell, gap in gaps.items():
        group = groups[cell]
        into = committed if cell in ("tiger", "lamb") else new
        for s in seeds:
            base = 5.0 + 0.1 * s
            for arm, level in (("ortho", base), ("shuffle", base), ("logn", base + gap),
                               ("shuffle_logn", base + gap / 2)):
                into.append(fake_run(group, arm, s, level + noise * rng.standard_normal()))
    return (new, committed) if raw else cause.cells(new, committed)


def test_twin_verdict_says_relativity_decides_only_when_logn_stops_lagging_under_the_twin():
    cs = world({"tiger": 0.3, "twin tiger": -0.1}, noise=0.01)
    assert cause.verdict_b(cs, "tiger", picked_lr=3e-3)["verdict"] == "relativity decides"
    cs = world({"tiger": 0.3, "twin tiger": 0.3}, noise=0.01)
    assert cause.verdict_b(cs, "tiger", picked_lr=3e-3)["verdict"] == "relativity is not needed"


def test_twin_verdict_depends_on_the_lr_when_the_two_lrs_disagree_and_waits_for_the_sweep():
    cs = world({"tiger": 0.3, "twin tiger": 0.3, "twin tiger O": -0.1}, noise=0.01)
    assert cause.verdict_b(cs, "tiger", picked_lr=1e-2)["verdict"] == "depends on the lr"
    assert cause.verdict_b(cs, "tiger", picked_lr=None)["verdict"] == "PENDING"


def test_twin_verdict_measures_the_lag_the_twin_removes_paired_by_seed():
    v = cause.verdict_b(world({"tiger": 0.3, "twin tiger": 0.1}), "tiger", picked_lr=3e-3)
    assert v["removed"]["mean"] == pytest.approx(0.2)


def test_relativity_decides_almost_never_fires_when_the_twin_still_lags_by_the_margin():
    """False alarms: with logn truly MARGIN behind ortho under the twin (not 'not lagging'), 'relativity decides' must
    fire in at most ~5% of worlds (a one-sided test at alpha = 0.05 per lr; both lrs are needed)."""
    rng = np.random.default_rng(1)
    hits = sum(cause.verdict_b(world({"tiger": 0.3, "twin tiger": MARGIN}, noise=0.01, rng=rng), "tiger",
                               picked_lr=3e-3)["verdict"] == "relativity decides" for _ in range(300))
    assert hits / 300 <= 0.08


def test_relativity_decides_is_found_when_the_twin_removes_the_lag():
    """Power: logn 0.05 ahead under the twin with a run noise of 0.01: found in most worlds."""
    rng = np.random.default_rng(2)
    hits = sum(cause.verdict_b(world({"tiger": 0.3, "twin tiger": -0.05}, noise=0.01, rng=rng), "tiger",
                               picked_lr=3e-3)["verdict"] == "relativity decides" for _ in range(200))
    assert hits / 200 >= 0.8


@pytest.mark.parametrize("gaps,expected", [
    (dict(tiger=0.4, **{"c embedding": 0.4, "c body": 0.0, "twin tiger": 0.0}), "the embedding's relativity carries the lag"),
    (dict(tiger=0.4, **{"c embedding": 0.0, "c body": 0.4, "twin tiger": 0.0}), "the body's relativity carries the lag"),
    (dict(tiger=0.4, **{"c embedding": 0.2, "c body": 0.2, "twin tiger": 0.0}), "both"),
    (dict(tiger=0.3, **{"c embedding": 0.3, "c body": 0.3, "twin tiger": 0.3}), "neither"),
])
def test_the_two_by_two_names_the_part_whose_relativity_carries_the_lag(gaps, expected):
    v = cause.verdict_c(world(gaps, noise=0.005))
    assert v["verdict"] == expected, (v["E"]["mean"], v["B"]["mean"])


def test_the_self_logit_control_without_a_learned_matrix_reads_like_appendix_bs_control():
    # logn lags shuffle_logn (gap/2) and shuffle_logn lags shuffle (gap/2): both
    assert cause.verdict_a(world({"tiger": 0.4, "a tiger": 0.4}, noise=0.005), "tiger")["verdict"] == "both"


def test_check_r_compares_a_re_made_run_with_the_committed_one_step_by_step():
    old = fake_run("tiger", "ortho", 1, 5.0)
    same, off = fake_run("ref tiger", "ortho", 1, 5.0 + 1e-4), fake_run("ref tiger", "ortho", 1, 5.01)
    assert cause.check_r([same], [old])[0]["passed"] and not cause.check_r([off], [old])[0]["passed"]


def test_the_plan_runs_the_registered_arms_at_400_steps_of_the_1200_step_schedule():
    from research import reproduce
    plan = reproduce.plan("cause", [])
    first = plan[0]
    assert first[0] == "ref tiger" and first[2]["max_iters"] == cause.STEPS and first[2]["lr_decay_iters"] == 1200
    twins = [o for g, a, o in plan if g.startswith("b tiger-twin")]
    assert {o["relative"] for o in twins} == {"none"} and len(twins) == 9
    sweeps = [o for g, a, o in plan if g.startswith("sweep ")]
    assert sweeps and all(o["max_iters"] == 1200 and o["lr_decay_iters"] is None for o in sweeps)
    assert all(o["log_rows"] for g, a, o in plan)


def test_the_report_says_pending_for_every_verdict_until_its_runs_are_in():
    committed = [fake_run("tiger", a, s, 5.0) for a in ("logn", "ortho", "shuffle") for s in (1, 2, 3)]
    lines = cause.report_lines([], committed)
    assert len(lines) == 7 and all("PENDING" in l for l in lines if not l.startswith("    "))
    assert "0 of" in cause.progress_lines([])[0]


def sweeps(best_by_lr):
    """The twins' sweep runs, each twin's tied run per lr with the best val loss planted (sweep S's rule picks the lr)."""
    return [dict(id=f"sweep {o}-twin lr={lr:g}|tied|seed=100", group=f"sweep {o}-twin lr={lr:g}", arm="tied",
                 head="tied", seed=100, history=[dict(step=0, val_loss=v)], config=dict(lr=lr), best_val=v)
            for o in ("tiger", "lamb") for lr, v in best_by_lr.items()]


PICK_3E3 = {1e-3: 5.5, 3e-3: 5.0, 1e-2: 5.1, 3e-2: 5.3}  # sweep S's rule picks 3e-3
PICK_1E2 = {1e-3: 5.5, 3e-3: 5.2, 1e-2: 5.0, 3e-2: 5.3}  # ... and here 1e-2


def test_the_answer_waits_until_every_verdict_of_the_twins_and_the_two_by_two_is_in():
    new, committed = world({"tiger": 0.3, "twin tiger": -0.1}, noise=0.01, raw=True)
    assert cause.answer(new + sweeps(PICK_3E3), committed).startswith("Not answered yet: lamb's twin, the 2 x 2 pending")


@pytest.mark.parametrize("gaps,picks,says", [
    # logn stops lagging under both twins, and only the embedding's relativity carries the lag: H_R as taught
    (dict(tiger=0.3, lamb=0.3, **{"twin tiger": -0.1, "twin lamb": -0.1, "c embedding": 0.3, "c body": -0.1}),
     PICK_3E3, "The data support the step's relativity, through the embedding (H_R, as the lesson tells it): "
               "logn - ortho +0.30 nats [.*] under Tiger, -0.10 nats [.*] under its twin at the same lr; .*"
               "the embedding's relativity adds +0.40 nats [.*] and the body's +0.00 nats"),
    # relativity under both twins, but the 2 x 2 puts the lag on the body: H_R as taught is NOT supported
    (dict(tiger=0.3, lamb=0.3, **{"twin tiger": -0.1, "twin lamb": -0.1, "c embedding": -0.1, "c body": 0.3}),
     PICK_3E3, "The data support the step's relativity, but the 2 x 2 finds the body's relativity carries the lag "
               "rather than the embedding alone: H_R as the lesson tells it is not supported"),
    # a lag at the matched lr, none at the twins' own larger lr: the step's size, with all three numbers in order
    (dict(tiger=0.3, lamb=0.3, **{"twin tiger": 0.3, "twin lamb": 0.3, "twin tiger O": -0.1, "twin lamb O": -0.1,
                                  "c embedding": 0.3, "c body": 0.3}),
     PICK_1E2, "The data support the step's size, not its relativity (H_S): logn - ortho +0.30 nats [.*] under "
               "Tiger, +0.30 nats [.*] under its twin at the same lr and -0.10 nats [.*] at the twin's own lr 0.01"),
    # logn lags under both twins at the lr both sweeps pick: not the relativity
    (dict(tiger=0.3, lamb=0.3, **{"twin tiger": 0.3, "twin lamb": 0.3, "c embedding": 0.3, "c body": 0.3}),
     PICK_3E3, "The data support a cause other than the step's relativity (H_S or H_C)"),
    # ... but the 2 x 2 finds a part through the embedding: the answer says the part Tiger's twin removes, and where
    (dict(tiger=0.4, lamb=0.4, **{"twin tiger": 0.3, "twin lamb": 0.3, "c embedding": 0.4, "c body": 0.3}),
     PICK_3E3, "The relative step is not needed for logn's lag, but under Tiger's rule it adds +0.10 nats [.*] of it "
               "(; .*%), through the embedding, and the rest is there without it"),
    # the twins disagree: no cause is named
    (dict(tiger=0.3, lamb=0.3, **{"twin tiger": -0.1, "twin lamb": 0.3, "c embedding": 0.3, "c body": -0.1}),
     PICK_3E3, "The data do not decide the cause: Tiger's twin points to the step's relativity; "
               "LAMB's twin points to a cause other than"),
    # the reverse 'depends on the lr' (no lag at the matched lr, a lag at the twin's own) has no reading in the plan
    (dict(tiger=0.3, lamb=0.3, **{"twin tiger": -0.1, "twin lamb": -0.1, "twin tiger O": 0.3, "twin lamb O": 0.3,
                                  "c embedding": 0.3, "c body": -0.1}),
     PICK_1E2, "The data do not decide the cause: Tiger's twin gives no reading (depends on the lr)"),
])
def test_the_answer_names_the_cause_the_pre_registration_gives_each_outcome_with_its_numbers(gaps, picks, says):
    import re
    new, committed = world(gaps, noise=0.002, raw=True)
    text = cause.answer(new + sweeps(picks), committed)
    pattern = ".*".join(r"\[[^]]*\]".join(re.escape(p) for p in part.split("[.*]")) for part in says.split("; .*"))
    assert re.search(pattern, text), text
    assert ("H_R" in text) == ("H_R" in says), text  # H_R is named only where the pre-registration allows
    assert "(start, paired over 3 seeds" in text


def embedding_verdict_near_the_margin(gaps):
    """A planted world where (c) finds 'the embedding's relativity carries the lag' with B's 90% interval ending
    `distance` below the margin: (new, committed, distance, near, far), where the deltas `near` and `far` put that
    distance just inside and just outside the fragility rule's reach."""
    new, committed = world(gaps, noise=0.002, rng=np.random.default_rng(3), raw=True)
    new += sweeps(PICK_3E3)
    v = cause.verdict_c(cause.cells(new, committed))
    assert v["verdict"] == "the embedding's relativity carries the lag"
    distance = MARGIN - v["B"]["ci90"][1]
    near = {o: dict(start=distance + 0.001, early=0.01) for o in ("tiger", "lamb")}
    far = {o: dict(start=distance - 0.001, early=0.01) for o in ("tiger", "lamb")}
    return new, committed, distance, near, far


def test_the_fragility_rule_marks_a_two_by_two_whose_body_effect_sits_within_delta_of_the_margin():
    """Section 5's rule on this section's verdicts: (c) says 'the embedding's relativity carries the lag' because B's
    90% interval ends below the margin; shifting B up by (margin - that end) makes B lag too, so the verdict is FRAGILE
    exactly when that distance is at most delta. A verdict far from every bar stays robust."""
    new, committed, distance, near, far = embedding_verdict_near_the_margin(
        dict(tiger=0.4, lamb=0.4, **{"twin tiger": 0.0, "twin lamb": 0.4, "c embedding": 0.4, "c body": 0.0,
                                     "a tiger": 0.4}))
    (line,) = [l for l in cause.fragility_lines(new, committed, near) if "(c)" in l]
    assert "FRAGILE: the embedding's relativity carries the lag -> both" in line and f"{distance:.4f}" in line, line
    (line,) = [l for l in cause.fragility_lines(new, committed, far) if "(c)" in l]
    assert "robust" in line, line
    marked = cause.fragile_parts(new, committed, near)   # ... and the verdict's own lines carry the mark
    assert marked == {"(c) the 2 x 2"} and cause.fragile_parts(new, committed, far) == set()
    assert [l for l in cause.report_lines(new, committed, fragile=marked) if "(FRAGILE)" in l] == [
        l for l in cause.report_lines(new, committed, fragile=marked) if l.startswith("(c)")]
    assert sum("(FRAGILE)" in l for l in cause.side_by_side(new, committed, fragile=marked)) == 1
    assert not any("FRAGILE" in l for l in cause.report_lines(new, committed) + cause.side_by_side(new, committed))
    (line,) = [l for l in cause.fragility_lines(new, committed, near) if "(a) tiger" in l]
    assert line.split()[2] == "robust:", line  # logn 0.2 behind shuffle_logn, 0.2 behind shuffle: far from every bar


def test_the_answer_marks_where_it_puts_the_part_fragile_exactly_when_the_fragility_rule_marks_the_two_by_two():
    """The answer says where (c) puts the part the relative step adds; when section 5's rule marks (c)'s verdict
    FRAGILE (B's 90% end within delta of the margin), the sentence says so with the shift, and only then."""
    new, committed, distance, near, far = embedding_verdict_near_the_margin(
        dict(tiger=0.4, lamb=0.4, **{"twin tiger": 0.3, "twin lamb": 0.3, "c embedding": 0.4, "c body": 0.3}))
    mark = f"through the embedding (FRAGILE: a shift of {distance:.4f} nats would make (c)'s verdict 'both'), and"
    assert mark in cause.answer(new, committed, delta=near)
    for text in (cause.answer(new, committed, delta=far), cause.answer(new, committed)):
        assert "through the embedding, and the rest" in text and "FRAGILE" not in text, text


def test_the_after_data_lines_print_how_much_smaller_the_lag_is_at_a_twins_own_lr_and_how_near_its_sweep_came():
    gaps = dict(tiger=0.4, lamb=0.4, **{"twin tiger": 0.3, "twin lamb": 0.3, "twin tiger O": 0.1, "twin lamb O": 0.1})
    new, committed = world(gaps, raw=True)
    text = "\n".join(cause_record.after_lines(new + sweeps(PICK_1E2), committed))
    assert "Tiger's twin at 3e-3 removes 25% of logn's lag" in text  # (0.4 - 0.3) / 0.4
    assert "the lag at 3e-3 minus the lag at its own lr 0.01 (start): gap(3e-3) - gap(0.01) +0.20" in text
    # a near tie: 1e-2 has the lowest val, but 3e-3 is within the margin, so the rule takes 3e-3; the line says how near
    text = "\n".join(cause_record.after_lines(new + sweeps({1e-3: 5.5, 3e-3: 5.2, 1e-2: 5.19, 3e-2: 5.3}), committed))
    assert "lowest best val 5.1900 at lr 0.01" in text and "0.003 (5.2000, 0.0100 higher)" in text
    assert "own lr" not in text  # both twins picked the matched lr: no second lr to compare


def test_the_after_data_lines_check_whether_each_twin_takes_its_originals_first_step():
    """The twins were meant to take the original's first step at the matched lr; the embedding's turn after step 0 in
    the re-made original's ortho run against the twin's says whether they did (LAMB's did not: its trust ratio scales
    up a normalised step whose norm is below the tensor's size, and the twin has no trust ratio)."""
    def run(group, turn):
        return dict(fake_run(group, "ortho", 1, 5.0), history=[dict(step=0, emb_turn=turn)])
    runs = [run("ref lamb", 2e-5), run("b lamb-twin lr=0.003", 5e-6), run("b lamb-twin lr=0.03", 5e-5)]
    (line,) = cause_record.first_step_lines(runs, "lamb")
    assert "LAMB 2e-05 rad; the twin 5e-06 at lr 0.003 (0.25x), 5e-05 at lr 0.03 (2.50x)" in line
    assert cause_record.first_step_lines(runs, "tiger") == []  # no re-made Tiger run: nothing to compare


def test_the_cause_figure_draws_each_part_as_a_paired_gap_over_time_and_leaves_out_what_has_no_runs():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from research import figures
    planted = {"tiger": 0.3, "twin tiger": 0.1, "c body": 0.2, "a tiger": 0.2}
    new, committed = world(planted, raw=True)
    for r in new + committed:  # a sparse subset point after the dense phase, as the committed runs log
        r["history"] += [dict(step=300, val_subset_loss=r["history"][0]["val_subset_loss"])]
    panels = cause.gap_panels(new, committed)
    a, b, c = panels.values()
    assert [label for label, *_ in a] == ["tiger: logn - shuffle_logn (self-logit)",
                                          "tiger: shuffle_logn - shuffle (small sigma)"]  # lamb has no runs: left out
    assert [label for label, *_ in b] == ["tiger", "tiger's twin, lr=0.003"]
    assert [label for label, *_ in c] == ["all relative", "body relative", "none relative"]
    # (a): committed logn is +0.3 over ortho and the new shuffle_logn +0.1 (world plants gap / 2): 0.2, then 0.1 over
    # committed shuffle; (b): tiger 0.3, its twin 0.1; (c): all 0.3, body 0.2, none (the twin) 0.1
    expected = [0.2, 0.1, 0.3, 0.1, 0.3, 0.2, 0.1]
    fig, ax = plt.subplots()
    for (label, x, y), want in zip(a + b + c, expected):
        ax.clear()
        assert figures.gap_over_time(ax, x, y, label, "tab:blue", until=cause.STEPS) == 3
        line = ax.lines[0]
        assert line.get_xdata().max() == figures.DENSE_UNTIL  # the dense phase only: step 300's point is not on it
        assert np.allclose(line.get_ydata(), want), label
    assert figures.gap_over_time(ax, b[1][1], {}, "nothing", "tab:red") == 0
    plt.close(fig)


def test_the_report_prints_the_two_by_twos_shares_of_the_lag_relativity_adds():
    """The pre-registration's descriptive shares E / (G_all - G_none) and B / (G_all - G_none), once (c) is decided."""
    new, committed = world(dict(tiger=0.4, **{"c embedding": 0.4, "c body": 0.0, "twin tiger": 0.0}), noise=0.0,
                           raw=True)
    line = next(l for l in cause.report_lines(new, committed) if "the lag relativity adds" in l)
    assert "G_all - G_none +0.400" in line and "its shares: E 1.00, B 0.00" in line, line


def sweep_s(best, device=None):
    """Sweep S's runs {opt: {lr: best val}} as records (on `device` when given: a re-make on a GPU)."""
    out = [dict(id=f"sweep {o} lr={lr:g}|tied|seed=100", group=f"sweep {o} lr={lr:g}", config=dict(lr=lr), best_val=v)
           for o, by_lr in best.items() for lr, v in by_lr.items()]
    return [dict(r, device=device) for r in out] if device else out


def test_the_gpu_sweeps_are_used_only_if_sweep_s_re_made_on_that_gpu_picks_what_the_cpu_picked():
    cpu = {"tiger": {1e-3: 5.3, 3e-3: 4.75, 1e-2: 4.78, 3e-2: 6.4}, "lamb": {1e-3: 5.1, 3e-3: 4.69, 1e-2: 4.68, 3e-2: 5.0}}
    same = {o: {lr: v + 0.01 for lr, v in d.items()} for o, d in cpu.items()}  # shifted alike: the same picks
    lines = cause_record.where_lines([], sweep_s(cpu), sweep_s(same, "GPU"))
    assert lines[-1].endswith("the twins' sweeps made there are used") and "moved by up to 0.010" in lines[0]
    other = {**same, "lamb": {**same["lamb"], 1e-2: 4.60}}  # on the GPU LAMB's 1e-2 wins by more than the 0.02 margin
    lines = cause_record.where_lines([], sweep_s(cpu), sweep_s(other, "GPU"))
    assert "picks 0.01 (the CPU's: 0.003)" in lines[1] and "descriptive only" in lines[-1]


def test_a_near_tie_is_set_beside_how_far_the_gpu_moved_the_same_two_lrs_against_each_other():
    cpu = {"tiger": {1e-3: 5.3, 3e-3: 4.75, 1e-2: 4.74, 3e-2: 6.4}}
    gpu = {"tiger": {1e-3: 5.3, 3e-3: 4.80, 1e-2: 4.76, 3e-2: 6.4}}  # 3e-3 up by 0.05, 1e-2 by 0.02: 0.03 apart
    line = cause_record._device_shift(sweep_s(cpu), "tiger", 3e-3, 1e-2, sweep_s(gpu, "GPU"))
    assert line.endswith("moved 0.0300 against each other"), line
    assert cause_record._device_shift(sweep_s(cpu), "lamb", 3e-3, 1e-2, sweep_s(gpu, "GPU")) == ""  # no LAMB runs: nothing


def test_the_cpu_budget_counts_steps_at_the_fastest_fresh_runs_time_not_the_logged_wall_times():
    runs = [dict(fake_run("a tiger", "logn", s, 5.0), wall_s=w, resumed_from_step=r, finished=f"2026-11-26 0{s}:00:00")
            for s, w, r in ((1, 800.0, 0), (2, 1200.0, 0), (3, 100.0, 300))]  # seed 3 resumed: its wall is a part only
    line = cause_record.where_lines(runs, [], [])[-2]
    assert "1,200 steps x 2.00 s a step" in line and "= 0.7 core-hours" in line and "wall times: 0.6 h" in line
    assert cause_record.where_lines(runs, [], [])[-1].endswith("after 3 runs, whose logged wall times came to 0.6 h")


def test_the_report_says_when_the_budgets_measure_came_and_what_wall_time_would_have_cut():
    """The idle-equivalent measure was adopted mid-campaign; the report prints what the logged wall times were by then,
    and which runs the cut rule (LAMB's twin's runs at its own lr go last) would have dropped by wall time."""
    def run(i, group, hours, when):
        return dict(fake_run(group, "logn", i, 5.0), id=f"r{i}", wall_s=hours * 3600, resumed_from_step=0, finished=when)
    runs = [run(1, "a tiger", 7.0, "2026-11-26 10:00:00"), run(2, "a lamb", 4.0, "2026-11-26 18:00:00"),
            run(3, "b lamb-twin lr=0.003", 2.0, "2026-11-26 19:00:00"),
            run(4, "b lamb-twin lr=0.01", 1.0, "2026-11-26 20:00:00"), run(5, "b lamb-twin lr=0.01", 1.0, "2026-11-26 21:00")]
    gpu = [dict(r, device="GPU") for r in sweeps(PICK_1E2)]  # the twins' sweeps: LAMB's twin picks 1e-2
    line = cause_record.where_lines(runs + gpu, [], [])[-1]
    assert "after 2 runs, whose logged wall times came to 11.0 h" in line, line
    assert "ran out at run 3 of 5, and the cut rule would have dropped LAMB's twin's 2 runs at its own lr" in line
    runs[2]["wall_s"] = 0.5 * 3600  # 11.5 h by the third run: the hours run out at the fourth
    assert "ran out at run 4 of 5" in cause_record.where_lines(runs + gpu, [], [])[-1]


@pytest.mark.reports
def test_every_committed_cause_run_was_made_at_the_preregistered_commit_and_says_where():
    """The cause campaign runs from a worktree pinned at its pre-registration; the runs made on the lent GPU (the
    twins' sweeps only, as the dated addition allows) say so, and sweep S's re-makes there guard them."""
    new, committed = cause.load()
    assert new and {r["git_commit"] for r in new} == {cause.PREREGISTERED_AT}
    on_gpu = {r["group"].split(" lr=")[0] for r in new if r.get("device")}
    assert on_gpu <= {"sweep tiger-twin", "sweep lamb-twin"}
    assert {r["git_commit"] for r in cause.load_runs(cause_record.DEVICE_CHECK)} == {cause.PREREGISTERED_AT}
    assert cause_record.where_lines(new, committed)[2].endswith("the twins' sweeps made there are used")


@pytest.mark.reports
def test_the_committed_cause_verdicts_fragility_under_section_5s_rule():
    """Appendix B section 11 (the rule applied 2026-11-27, after the data): only (c)'s verdict is FRAGILE, on both
    statistics, by the shift of the body's effect the prose quotes (0.0215; 0.0221 over steps 100-400). Pinned so the
    prose fails when the data or the rule change."""
    from research import fragility
    from research import plans
    from research import records
    runs = records.load_runs(records.committed_path("optim"))
    by = plans.settings("optim", runs)
    one = next(r for r in runs if "val_windows_last" in r)
    delta = {o: fragility.fragile_delta(by[o], len(one["val_windows_last"]), one["config"]["dense_val_windows"])[0]
             for o in ("tiger", "lamb")}
    new, committed = cause.load()
    for stat, shift in ((cause.PRIMARY, "0.0215"), (cause.SECONDARY, "0.0221")):
        lines = cause.fragility_lines(new, committed, delta, stat)
        assert len(lines) == 5 and [l for l in lines if "FRAGILE" in l] == [l for l in lines if "(c)" in l], lines
        assert f"-> both with a shift of {shift}" in lines[-1] and "B - 0" in lines[-1], lines[-1]
        assert cause.fragile_parts(new, committed, delta, stat) == {"(c) the 2 x 2"}
    assert ("through the embedding (FRAGILE: a shift of 0.0215 nats would make (c)'s verdict 'both')"
            in cause.answer(new, committed, delta=delta))
