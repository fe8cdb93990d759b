"""research/stats.py, claims.py and appendix_a.py: the rules that turn the runs into words, tested on data where the
truth is known.

A rule that calls equal things "different" 30% of the time, or never finds a real difference, would make the
lesson's verdicts worthless whatever the experiment. So the rules are run on synthetic curves: every arm equal
plus seed noise (how often do they cry wolf?) and with a planted difference (how often do they see it?).
"""
import math

import numpy as np
import pytest

from research import appendix_a as A
from research import claims as C
from research import fragility as Fr
from research import plans
from research import records
from research import stats as S

pytestmark = pytest.mark.lab  # the research tools: pytest -m lab

ARMS = ["tied", "logn", "untied", "ortho", "shuffle", "control"]
DRAWS = 2000


def verdicts(effects, seeds, draws=DRAWS, rng=0, **kw):
    """Claim verdicts over many synthetic experiments; a dict claim -> list of verdict words."""
    rng = np.random.default_rng(rng)
    out = {}
    for _ in range(draws):
        for claim, v in C.all_claims(records.by_arm(C.synthetic_runs(effects, seeds, rng=rng, **kw))).items():
            out.setdefault(claim, []).append(v["verdict"])
    return out


def rate(words, word):
    return np.mean([w == word for w in words])


def test_a_clear_difference_is_called_higher_and_a_tiny_one_alike():
    assert S.compare([0.10, 0.11, 0.09])["word"] == "A higher"
    assert S.compare([-0.10, -0.11, -0.09])["word"] == "A lower"
    assert S.compare([0.001, -0.001, 0.0005])["word"] == "alike"
    assert S.compare([0.05, -0.05, 0.04])["word"] == "inconclusive"  # no difference found is NOT "alike"
    assert S.compare([0.01, 0.0101, 0.0099])["word"] == "A higher (within the margin)"


def test_fewer_than_three_seeds_give_no_verdict():
    assert S.compare([0.1, 0.2])["word"] == "pending"
    runs = C.synthetic_runs({a: 0.0 for a in ARMS}, seeds=2, rng=0)
    assert {v["verdict"] for v in C.all_claims(records.by_arm(runs)).values()} == {"PENDING"}


def test_confidence_interval_is_the_textbook_t_interval():
    d = [1.0, 2.0, 3.0]  # mean 2, sd 1, n 3: 2 +- t(0.975, 2) / sqrt(3) = 2 +- 4.303 / 1.732
    lo, hi = S.interval(d, 0.95)
    assert (lo, hi) == pytest.approx((2 - 4.3027 / math.sqrt(3), 2 + 4.3027 / math.sqrt(3)), rel=1e-4)


def test_equal_arms_are_called_different_about_five_percent_of_the_time():
    """Under the null (all arms equal, only seed noise), one paired comparison's 95% interval excludes 0 in
    about 5% of experiments: that is what alpha = 0.05 promises."""
    rng = np.random.default_rng(1)
    calls = []
    for _ in range(DRAWS):
        by = records.by_arm(C.synthetic_runs({"logn": 0.0, "ortho": 0.0}, seeds=3, rng=rng))
        calls.append(S.compare(records.paired(by["logn"], by["ortho"], "early"))["word"].startswith("A "))
    assert 0.03 < np.mean(calls) < 0.07


@pytest.mark.slow
def test_under_the_null_the_claims_are_rarely_decided_wrongly():
    """All arms equal: 'logn slowest' is (falsely) SUPPORTED and 'alike' claims are (falsely) CONTRADICTED in at
    most ~5% of experiments, with 3 seeds and with 5."""
    for seeds in (3, 5):
        v = verdicts({a: 0.0 for a in ARMS}, seeds, draws=1000, rng=seeds)
        assert rate(v["1 logn slowest"], "SUPPORTED") <= 0.06
        assert rate(v["2 other fixes converge alike"], "CONTRADICTED") <= 0.06
        assert rate(v["3 all fixes end alike"], "CONTRADICTED") <= 0.06
        assert rate(v["4 no final gain over tied"], "CONTRADICTED") <= 0.06
        causes = [w in ("small sigma", "self-logit", "both") for w in v["control: why logn is slow"]]
        assert np.mean(causes) <= 0.05  # with nothing slow, the control rarely names a cause


def test_a_planted_lag_of_logn_is_found_most_of_the_time():
    """logn 3 noise units slower than every other fix (noise: the sd of a paired difference of `early`; here
    3 units = 0.026 nats, beyond the 0.02 margin): with 5 seeds, claim 1 is SUPPORTED in most experiments and
    the control's answer names the right cause."""
    run_sd = 0.015
    unit = run_sd * math.sqrt(2 / 6)  # early averages 6 evaluations; a difference has two runs' noise
    lag = 3 * unit
    assert lag > S.MARGIN
    v = verdicts(dict({a: 0.0 for a in ARMS}, logn=lag), seeds=5, draws=500, rng=7, run_sd=run_sd)
    assert rate(v["1 logn slowest"], "SUPPORTED") >= 0.8
    assert rate(v["control: why logn is slow"], "self-logit") >= 0.8
    both = verdicts(dict({a: 0.0 for a in ARMS}, logn=lag, control=lag), seeds=5, draws=500, rng=8, run_sd=run_sd)
    assert rate(both["control: why logn is slow"], "small sigma") >= 0.8


def test_a_planted_final_gain_over_tied_contradicts_the_no_gain_claim():
    v = verdicts(dict({a: -0.05 for a in ARMS}, tied=0.0), seeds=5, draws=300, rng=9)
    assert rate(v["4 no final gain over tied"], "CONTRADICTED") >= 0.9


def test_truly_equal_arms_with_small_noise_are_called_alike():
    """Equivalence needs evidence: with noise well below the margin, equal arms are "alike" (TOST) nearly always."""
    v = verdicts({a: 0.0 for a in ARMS}, seeds=5, draws=300, rng=10, run_sd=0.004)
    assert rate(v["2 other fixes converge alike"], "SUPPORTED") >= 0.9
    assert rate(v["1 logn slowest"], "CONTRADICTED") >= 0.9  # alike the others: not the slowest


def test_two_points_are_never_a_trend():
    assert S.trend([1.0, 2.0]) == "too few points"
    assert S.trend([1.0, 2.0, 3.0]) == "increasing"
    assert S.trend([3.0, 1.0, 0.5]) == "decreasing"
    assert S.trend([1.0, 3.0, 2.0]) == "no monotone trend"


def test_steps_to_target_interpolates_between_evaluations():
    run = dict(history=[dict(step=0, val_loss=9.0), dict(step=100, val_loss=7.0), dict(step=200, val_loss=5.0)])
    assert records.steps_to_target(run, 6.0) == pytest.approx(150.0)
    assert records.steps_to_target(run, 7.0) == pytest.approx(100.0)
    assert records.steps_to_target(run, 9.5) == 0.0
    assert records.steps_to_target(run, 4.0) == math.inf


def test_early_is_the_mean_over_the_first_half_without_step_zero():
    run = dict(history=[dict(step=s, val_loss=float(s)) for s in range(0, 1201, 100)])
    assert records.early(run) == pytest.approx(np.mean([100, 200, 300, 400, 500, 600]))
    assert records.best(run) == 0.0 and records.last(run) == 1200.0


def test_d768_settings_share_the_logn_and_control_runs():
    from research import reproduce
    runs = [dict(group=g, arm=a, head=o["head"], seed=o["seed"], history=[]) for g, a, o in reproduce.plan("d768")]
    s = plans.settings("d768", runs)
    for name in ("sigma=0.02", "sigma=d^-1/2"):
        assert sorted(s[name]["logn"]) == [1, 2, 3, 4, 5] and sorted(s[name]["control"]) == [1, 2, 3, 4, 5]
        assert {"tied", "untied", "ortho", "shuffle"} <= set(s[name])
    assert sorted(s["sigma=0.02"]["ortho"]) == [1, 2, 3, 4, 5]  # the primary comparison has 5 seeds


def test_the_conclusion_names_the_comparison_that_contradicts_a_claim():
    """The lesson's conclusion is generated from the verdicts: a planted logn *lead* contradicts claim 1, and the
    sentence quotes that pair with its interval rather than a bare verdict word."""
    runs = C.synthetic_runs(dict({a: 0.0 for a in ARMS}, logn=-0.08), seeds=5, seed_sd=0.03, run_sd=0.005, rng=3)
    claims = C.all_claims(records.by_arm(runs))
    text = C.explain("1 logn slowest", claims["1 logn slowest"])
    assert claims["1 logn slowest"]["verdict"] == "CONTRADICTED"
    assert "CONTRADICTED" in text and "logn - ortho" in text and "logn ahead" in text and "[" in text
    control = C.explain_control(claims["control: why logn is slow"])
    assert claims["control: why logn is slow"]["verdict"] == "logn not slow"
    assert "no slowness for the control to explain" in control and "AHEAD of the control" in control


def test_the_conclusion_says_pending_with_the_seed_count():
    runs = C.synthetic_runs({a: 0.0 for a in ARMS}, seeds=2, rng=0)
    text = C.explain("1 logn slowest", C.all_claims(records.by_arm(runs))["1 logn slowest"])
    assert "PENDING" in text and "paired seeds in a comparison so far: 2" in text


def test_a_claim_waits_until_every_arm_it_names_has_run():
    """The plan runs logn, the control and ortho first. Claim 1 is about *every* other fix, so beating ortho alone
    must not make logn 'slowest': the claim stays PENDING and says which arms it waits for."""
    runs = C.synthetic_runs({"logn": 0.1, "ortho": 0.0, "control": 0.0}, seeds=5, run_sd=0.005, rng=0)
    c = C.claim_slowest(records.by_arm(runs))
    assert c["rows"][0]["word"] == "A higher"  # logn is clearly behind ortho ...
    assert c["verdict"] == "PENDING" and c["waiting"] == ["untied", "shuffle"]  # ... but the claim waits
    assert "waiting for untied, shuffle" in C.explain("1 logn slowest", c)
    assert c["rows"][0]["ci_bonferroni"] == pytest.approx(  # k counts the 3 planned comparisons, not the 1 run
        S.interval(c["rows"][0]["diffs"], 1 - S.ALPHA / 3))


def test_an_inconclusive_claim_4_prints_both_interval_ends_the_rule_read():
    """Claim 4 is one-sided: 'no gain' needs F - tied's 90% interval above -MARGIN, 'a gain' its Bonferroni interval
    below 0. A fix 0.05 nats better with three noisy seeds can have a 90% interval below 0 and still a Bonferroni
    interval that reaches 0: the claim is INCONCLUSIVE, and the sentence must show the interval that left it open."""
    runs = C.synthetic_runs(dict({a: 0.0 for a in ARMS}, logn=-0.05), seeds=3, run_sd=0.02, rng=5)
    c = C.claim_no_gain(records.by_arm(runs))
    r = next(r for r in c["rows"] if r["a"] == "logn")
    assert c["verdict"] == "INCONCLUSIVE" and not r["no_gain"] and not r["gain"]
    assert r["ci90"][1] < 0 < r["ci_bonferroni"][1]  # below tied at 90%, yet no gain shown after Bonferroni
    text = C.explain("4 no final gain over tied", c)
    assert "logn - tied" in text and "Bonferroni [" in text and f"above -{S.MARGIN}" in text


def test_ending_worse_than_tied_does_not_contradict_no_gain():
    """The author's remark is one-sided: 'the fixes gave no gain over tying'. A fix that ends clearly WORSE than
    tied agrees with it; only a fix that ends better contradicts it."""
    worse = records.by_arm(C.synthetic_runs(dict({a: 0.0 for a in ARMS}, ortho=0.1), seeds=5, run_sd=0.004, rng=1))
    c = C.claim_no_gain(worse)
    assert c["verdict"] == "SUPPORTED" and any(r["worse"] for r in c["rows"])
    assert "WORSE than tied" in C.explain("4 no final gain over tied", c)
    better = records.by_arm(C.synthetic_runs(dict({a: 0.0 for a in ARMS}, ortho=-0.1), seeds=5, run_sd=0.004, rng=1))
    assert C.claim_no_gain(better)["verdict"] == "CONTRADICTED"


def test_the_control_names_no_cause_from_an_inconclusive_comparison():
    """'self-logit' needs logn to lag the control AND the control to be shown not to lag ortho. With the second
    comparison inconclusive (one seed's control far behind), the control says 'undecided'."""
    runs = C.synthetic_runs({"logn": 0.3, "control": 0.0, "ortho": 0.0}, seeds=3, run_sd=0.001, rng=2)
    for r in runs:
        if r["arm"] == "control" and r["seed"] == 3:
            for h in r["history"]:
                h["val_loss"] += 0.15
    v = C.control_verdict(records.by_arm(runs))
    assert v["rows"][0]["word"] == "A higher" and v["rows"][1]["word"] == "inconclusive"
    assert v["verdict"] == "undecided"


def test_arms_exactly_one_margin_apart_are_rarely_called_alike():
    """The other side of TOST: when the true difference sits right at the margin, 'alike' is a false claim of
    equivalence, and it must come up at most ~5% of the time."""
    rng = np.random.default_rng(11)
    calls = [S.compare(records.paired(*(lambda b: (b["logn"], b["ortho"]))(records.by_arm(C.synthetic_runs(
        {"logn": S.MARGIN, "ortho": 0.0}, seeds=3, run_sd=0.02, rng=rng))), "early"))["alike"] for _ in range(DRAWS)]
    assert np.mean(calls) <= 0.06


def test_synthetic_runs_can_give_arms_different_seed_counts():
    runs = C.synthetic_runs({"logn": 0.0, "ortho": 0.0, "tied": 0.0}, seeds={"logn": 5, "ortho": 5, "tied": 3}, rng=0)
    assert {a: sorted(s) for a, s in records.by_arm(runs).items()} == {"logn": [1, 2, 3, 4, 5], "ortho": [1, 2, 3, 4, 5],
                                                                   "tied": [1, 2, 3]}


def test_steps_to_target_rows_pair_by_seed_and_flag_a_target_crossed_before_the_first_evaluation():
    mk = lambda vals: dict(history=[dict(step=s, val_loss=v) for s, v in zip((0, 100, 200), vals)])
    by = {"logn": {1: mk([9.0, 7.0, 5.0]), 2: mk([9.0, 6.0, 5.0])},
          "ortho": {1: mk([9.0, 8.0, 5.0]), 2: mk([9.0, 8.0, 5.0])}}
    rows = {(r["q"], r["arm"]): r for r in A.target_rows(by, n=math.exp(9.0))}  # ln n = 9: L_q = 9 - 4q
    r = rows[(0.5, "ortho")]  # target 7.0: ortho at 133.3 in both seeds, logn at 100 and 66.7
    assert r["target"] == pytest.approx(7.0) and r["mean"] == pytest.approx(400 / 3)
    assert r["diff"] == pytest.approx(np.mean([100 - 400 / 3, 200 / 3 - 400 / 3])) and r["pairs"] == 2
    assert rows[(0.5, "logn")]["early_cross"] and not r["early_cross"]


def test_a_gain_over_tied_inside_the_margin_is_no_gain():
    """Claim 4 with a real but tiny gain (0.008 nats, under half the 0.02 margin) measured very precisely: the gain
    is significant, but the margin says it doesn't matter, so 'no gain' is SUPPORTED, not CONTRADICTED."""
    runs = C.synthetic_runs(dict({a: 0.0 for a in ARMS}, ortho=-0.008), seeds=5, run_sd=0.002, rng=4)
    c = C.claim_no_gain(records.by_arm(runs))
    ortho = next(r for r in c["rows"] if r["a"] == "ortho")
    assert ortho["word"].startswith("A lower") and ortho["no_gain"] and not ortho["gain"]
    assert c["verdict"] == "SUPPORTED"


def test_the_control_explains_nothing_when_logn_is_not_slow():
    """The control asks *why* logn is slow. If logn is not behind ortho, a control lagging ortho must not be
    reported as 'the small sigma is the cause': there is nothing to explain."""
    runs = C.synthetic_runs({"logn": 0.0, "ortho": 0.0, "control": 0.05}, seeds=5, run_sd=0.004, rng=5)
    v = C.control_verdict(records.by_arm(runs))
    assert v["rows"][1]["word"] == "A higher"  # the control does lag ortho ...
    assert v["verdict"] == "logn not slow"      # ... but logn doesn't, so no cause is named


def test_alike_and_no_gain_claims_wait_for_their_arms_too():
    runs = C.synthetic_runs({"logn": 0.0, "untied": 0.0, "ortho": 0.0}, seeds=5, run_sd=0.004, rng=6)
    by = records.by_arm(runs)
    c2 = C.claim_alike(by, C.CORE_FIXES, "early")
    assert c2["verdict"] == "PENDING" and c2["waiting"] == ["shuffle"]
    c4 = C.claim_no_gain(by)
    assert c4["verdict"] == "PENDING" and "tied" in c4["waiting"]


def test_a_diverged_run_is_named_not_averaged():
    """A run whose loss went non-finite makes its comparisons 'invalid', and steps-to-target skips its bad
    evaluations instead of turning every target into NaN."""
    assert S.compare([0.01, float("nan"), 0.02])["word"] == "invalid (non-finite loss)"
    mk = lambda vals: dict(history=[dict(step=s, val_loss=v) for s, v in zip((0, 100, 200), vals)])
    by = {"logn": {1: mk([9.0, float("nan"), float("nan")]), 2: mk([9.0, 6.0, 5.0])},
          "ortho": {1: mk([9.0, 8.0, 5.0]), 2: mk([9.0, 8.0, 4.0])}}
    rows = {(r["q"], r["arm"]): r for r in A.target_rows(by, n=math.exp(9.0))}
    assert all(math.isfinite(r["target"]) for r in rows.values())
    logn = rows[(0.5, "logn")]
    assert logn["reached"] == 1 and logn["seeds"] == 2          # the diverged seed never reaches it
    assert rows[(0.5, "ortho")]["pairs"] == 1                   # and its pair is left out of the interval


def test_measurement_noise_is_the_standard_error_over_val_windows():
    """Two runs scored on the same W windows: the error of their measured difference is sd / sqrt(W) of the
    window differences; averaging adjacent windows first exposes correlated neighbours."""
    rng = np.random.default_rng(0)
    W = 528
    base = rng.normal(5.0, 1.0, W)                      # windows differ a lot in difficulty...
    a = dict(val_windows_last=(base + rng.normal(0.03, 0.1, W)).tolist())  # ...but both runs see the same ones
    b = dict(val_windows_last=base.tolist())
    se = records.measurement_noise(a, b)
    assert se == pytest.approx(0.1 / math.sqrt(W), rel=0.1)  # the shared difficulty cancels in the pair
    assert records.measurement_noise(a, dict()) is None            # a run made without --ckpt_dir
    # neighbours that move together (a slow drift shared by blocks of 8 windows): block SE is the larger one
    drift = np.repeat(rng.normal(0, 0.1, W // 8), 8)
    c = dict(val_windows_last=(base + drift + rng.normal(0, 0.02, W)).tolist())
    assert records.measurement_noise(c, b, block=8) > 2 * records.measurement_noise(c, b, block=1)
    rows = A.measurement_rows({"x": {1: a, 2: a}, "y": {1: b}, "z": {1: dict()}})
    assert [(r["a"], r["b"], r["seed"]) for r in rows] == [("x", "y", 1)]


def test_a_contradiction_quotes_the_interval_that_decided_it_and_whether_it_clears_the_margin():
    """CONTRADICTED rests on a Bonferroni interval: the sentence quotes it, and says so when the difference,
    though shown to exist, was not shown to be bigger than the margin of 'alike'."""
    seeds = [0.024, 0.022, 0.020]  # a tight, real difference of about one margin
    r = dict(a="untied", b="shuffle", **S.compare(seeds, k=3))
    assert r["bonferroni"] == "higher" and not r["alike"] and r["ci90"][0] < S.MARGIN  # different, size unshown
    text = C.explain("2 other fixes converge alike", dict(verdict="CONTRADICTED", stat="early", rows=[r]))
    assert "Bonferroni [" in text and "not shown to exceed" in text
    big = dict(a="untied", b="shuffle", **S.compare([0.06, 0.05, 0.055], k=3))
    assert "not shown to exceed" not in C.explain("2 other fixes converge alike",
                                                  dict(verdict="CONTRADICTED", stat="early", rows=[big]))


def test_an_inconclusive_claim_says_when_a_95_percent_difference_fails_the_bonferroni_correction():
    r = dict(a="x", b="y", mean=0.03, word="A higher", bonferroni=None, alike=False, ci95=(0.001, 0.06),
             ci90=(0.01, 0.05), ci_bonferroni=(-0.01, 0.07), n=3)
    text = C.explain("3 all fixes end alike", dict(verdict="INCONCLUSIVE", stat="best", rows=[r]))
    assert "not after the Bonferroni correction" in text and "too wide" not in text


# --- what lesson 04 reports beside the rules (added 2026-11-25; descriptive, no verdict changes) ----------------

def test_each_fix_is_compared_with_plain_tying_paired_by_seed():
    by = records.by_arm(C.synthetic_runs({"tied": 0.0, "logn": 0.0, "ortho": 0.1, "shuffle": 0.0}, seeds=5, rng=3))
    rows = {r["a"]: r for r in A.fixes_vs_tied(by)}
    assert set(rows) == {"logn", "ortho", "shuffle"} and all(r["b"] == "tied" for r in rows.values())
    assert rows["ortho"]["word"] == "A higher" and rows["ortho"]["mean"] == pytest.approx(0.1, abs=0.02)


def test_the_original_two_sided_claim_4_needs_every_fix_alike_tied():
    """A fix that ends clearly WORSE than tied is 'no gain' under amendment b, but not 'alike' under the original rule."""
    by = records.by_arm(C.synthetic_runs({"tied": 0.0, "logn": 0.1, "untied": 0.0, "ortho": 0.0, "shuffle": 0.0},
                                   seeds=5, seed_sd=0.01, run_sd=0.002, rng=4))
    assert C.claim_no_gain(by)["verdict"] == "SUPPORTED"
    assert A.claim_no_gain_two_sided(by)["verdict"] == "CONTRADICTED"


def test_alike_needs_seeds_and_a_seed_spread_well_below_the_margin():
    """Two truly equal arms are called alike only when the 90% interval fits inside +-0.02: rarely with 3 seeds at the
    spread lesson 04 measured on early (0.021), reliably only with many more; at a tiny spread 3 seeds do."""
    assert S.alike_power(0.021, 3) < 0.2 and S.alike_power(0.021, 5) < 0.4
    assert S.seeds_for_alike(0.021) > 8 and S.seeds_for_alike(0.003) == 3
    assert S.seeds_for_alike(0.03) > S.seeds_for_alike(0.021) and S.seeds_for_alike(1.0, most=10) is None
    assert S.alike_power(0.021, 10) > S.alike_power(0.021, 5)  # more seeds, more power


def test_a_small_seed_spread_from_two_degrees_of_freedom_is_no_evidence_of_a_shared_error():
    """The review's case: sd 0.0033 over 3 seeds against a measurement error of 0.0048: P ~ 0.38, not evidence."""
    d = np.array([-1.0, 0.0, 1.0]) * 0.0033  # sd exactly 0.0033
    assert S.shared_error_p(d, 0.0048) == pytest.approx(0.377, abs=0.005)
    assert S.shared_error_p(np.linspace(-1, 1, 30) * 0.0005, 0.0048) < 1e-6  # 30 seeds that agree this well: shared


def test_gap_phases_find_a_crossing_that_a_window_mean_hides():
    steps = np.arange(0, 1201, 100)
    mean = np.where(steps <= 300, -0.03, 0.03)
    lo, hi = mean - 0.01, mean + 0.01
    ph = S.gap_phases(steps, mean, lo, hi)
    assert ph["ahead"] == [100, 200, 300] and ph["behind"] == list(range(400, 1201, 100))
    assert ph["first"] == (100, pytest.approx(-0.03)) and ph["last"] == (1200, pytest.approx(0.03))


def test_verdict_rates_count_each_claims_verdicts_over_synthetic_experiments():
    v = C.verdict_rates({a: 0.0 for a in ARMS}, 3, draws=20, rng=np.random.default_rng(5))
    assert all(len(words) == 20 for words in v.values()) and "1 logn slowest" in v
    assert C.rate(["SUPPORTED", "PENDING", "SUPPORTED", "INCONCLUSIVE"], "SUPPORTED") == 0.5


def test_target_and_map_tables_have_a_line_per_arm_and_per_group():
    by = records.by_arm(C.synthetic_runs({a: 0.0 for a in ARMS}, 3, rng=6))
    lines = A.target_lines(by, 11706)
    assert sum(line.startswith("  q = ") for line in lines) == len(A.TARGET_FRACTIONS)
    assert len(lines) == len(A.TARGET_FRACTIONS) * (1 + len(ARMS)) and "logn - ortho" in "\n".join(lines)
    old = {"full": {"main": by, "d=512": records.by_arm(C.synthetic_runs({a: 0.0 for a in ARMS}, 1, rng=7))}}
    table, lines = A.map_rows(old)
    assert set(table) == {"full main", "full d=512"} and len(lines) == 3 and "exploratory (1 seed)" in lines[2]


def test_shared_error_line_names_the_fixes_a_shared_error_would_unsettle_and_where_it_was_measured():
    c4 = dict(verdict="SUPPORTED", rows=[dict(a="logn", ci90=(-0.015, 0.03)), dict(a="ortho", ci90=(0.01, 0.05))])
    meas = [dict(a="ortho", b="tied", seed=1, se=0.004, setting="sigma=d^-1/2"),
            dict(a="shuffle", b="untied", seed=3, se=0.002, setting="sigma=0.02")]
    line = A.shared_error_line("sigma=0.02", c4, meas)
    assert "0.008 nats" in line and "ortho - tied at sigma=d^-1/2, seed 1" in line
    assert "logn would no longer be shown" in line and "ortho," not in line  # -0.015 - 0.008 < -0.02; 0.01 - 0.008 not
    assert "borrowed" in line  # sigma=0.02 has no F - tied pair with window losses
    assert "borrowed" not in A.shared_error_line("sigma=d^-1/2", c4, meas)
    assert A.shared_error_line("sigma=0.02", dict(c4, verdict="INCONCLUSIVE"), meas) is None
    assert A.shared_error_line("sigma=0.02", c4, []) is None


# --- the fragility rule of 2026-11-26 (added after the data): one rule for every verdict --------------------------

def planted(mean, half90):
    """Three seeds' differences whose mean is `mean` and whose 90% t interval is mean +- half90."""
    sd = half90 * math.sqrt(3) / S.t_quantile(0.95, 2)
    return {1: mean - sd, 2: mean, 3: mean + sd}


def test_planted_differences_have_the_planted_interval():
    r = S.compare(list(planted(0.01, 0.008).values()))
    assert r["ci90"] == pytest.approx((0.002, 0.018))


def control_with(co_upper90, half90=0.01):
    """logn far behind the control and ortho; control - ortho with its 90% interval's upper end at `co_upper90`."""
    co = planted(co_upper90 - half90, half90)
    by = {"ortho": {s: 0.0 for s in co}, "control": co, "logn": {s: co[s] + 0.3 + 0.01 * s for s in co}}
    return C.control_verdict(by, stat=lambda v: v)


def test_a_control_verdict_whose_deciding_end_clears_the_bar_by_a_hair_is_fragile_and_one_that_clears_it_well_is_not():
    """The LAMB case of issue 33: 'self-logit' needs the control shown not to lag ortho (90% upper end below +0.02);
    an end at +0.018 is fragile at delta 0.005 (a shift of 0.002 undoes it), an end at +0.010 is not (0.010 needed)."""
    near, far = control_with(0.018), control_with(0.010)
    assert near["verdict"] == far["verdict"] == "self-logit"
    flip = Fr.verdict_flip("control: why logn is slow", near)
    assert flip["to"] == "undecided" and flip["distance"] == pytest.approx(0.002, abs=1e-6)
    assert Fr.fragile_lines("control: why logn is slow", near, 0.005).startswith("FRAGILE: self-logit -> undecided")
    assert Fr.fragile_lines("control: why logn is slow", far, 0.005).startswith("robust: self-logit -> undecided")
    assert Fr.fragile_lines("control: why logn is slow", far, 0.0232).startswith("FRAGILE")  # twice a measured error


def test_an_undecided_verdict_that_misses_its_bar_by_a_hair_is_fragile_too():
    """The Tiger case: 'undecided' because control - ortho's 90% upper end is +0.0228, 0.0028 above the bar."""
    near, far = control_with(0.0228, 0.02), control_with(0.035, 0.02)  # 95% lower ends -0.027, -0.015: no lag
    assert near["verdict"] == far["verdict"] == "undecided"
    assert Fr.verdict_flip("control: why logn is slow", near)["distance"] == pytest.approx(0.0028, abs=1e-6)
    assert Fr.fragile_lines("control: why logn is slow", near, 0.005).startswith("FRAGILE: undecided -> self-logit")
    assert Fr.fragile_lines("control: why logn is slow", far, 0.005).startswith("robust")


def claim2_with(first_end, second_end):
    """Claim 2 CONTRADICTED by two pairs that differ: untied - shuffle and ortho - shuffle, each with its Bonferroni
    interval's upper end at the given (negative) value; untied - ortho in between, inconclusive."""
    k = 3   # Bonferroni half-width 0.06: the 90% interval is then wider than the margin's 0.04, so never "alike"
    sd = 0.06 * math.sqrt(3) / S.t_quantile(1 - 0.05 / k / 2, 2)
    us = {s: first_end - 0.06 + sd * z for s, z in zip((1, 2, 3), (-1, 0, 1))}
    os_ = {s: second_end - 0.06 + sd * z for s, z in zip((1, 2, 3), (-1, 0, 1))}
    by = {"shuffle": {s: 0.0 for s in us}, "untied": us, "ortho": os_}
    return C.claim_alike(by, ["untied", "ortho", "shuffle"], lambda v: v)


def test_a_verdict_that_any_one_comparison_decides_is_fragile_only_when_every_deciding_comparison_is_near_its_bar():
    """The LAMB claim 2 case: CONTRADICTED by untied - shuffle (Bonferroni end -0.031) and by ortho - shuffle (-0.002).
    The near one alone can't undo it: robust. When both ends are near, it is fragile."""
    one_near = claim2_with(-0.031, -0.002)
    assert one_near["verdict"] == "CONTRADICTED"
    flip = Fr.verdict_flip("2 other fixes converge alike", one_near)
    assert flip["distance"] == pytest.approx(0.031, abs=1e-6)
    assert Fr.fragile_lines("2 other fixes converge alike", one_near, 0.0232).startswith("robust")
    both_near = claim2_with(-0.004, -0.002)
    assert Fr.fragile_lines("2 other fixes converge alike", both_near, 0.005).startswith("FRAGILE: CONTRADICTED")


def test_a_single_comparisons_word_follows_the_same_rule():
    """Section 7 of appendix B reads single comparisons: an 'A lower' whose 95% upper end is -0.002 is fragile."""
    r = dict(a="logn", b="control", **S.compare(list(planted(-0.02, 0.012).values())))
    r95 = r["ci95"][1]
    assert r["word"] == "A lower" and r95 < 0
    one = dict(verdict=r["word"], rows=[r])
    assert Fr.verdict_flip("logn - control", one)["distance"] == pytest.approx(-r95, abs=1e-6)
    assert Fr.fragile_lines("logn - control", one, -r95 + 1e-4).startswith("FRAGILE")
    assert Fr.fragile_lines("logn - control", one, -r95 - 1e-4).startswith("robust")
    assert Fr.fragile_lines("x", dict(verdict="PENDING", rows=[]), 0.005) is None
    broken = dict(a="logn", b="control", **S.compare([0.1, float("nan"), 0.2]))
    assert Fr.fragile_lines("x", dict(verdict=broken["word"], rows=[broken]), 0.005).startswith("no reading")


def test_splitting_the_claims_into_rows_and_verdicts_changed_no_verdict():
    """The rule recomputes verdicts from shifted rows with the claims' own row-level functions: unshifted, they give
    the verdicts the claims gave."""
    runs = C.synthetic_runs(dict({a: 0.0 for a in ARMS}, logn=0.1), seeds=3, seed_sd=0.03, run_sd=0.005, rng=5)
    claims = C.all_claims(records.by_arm(runs))
    for name, c in claims.items():
        rows = c["rows"] + ([c["slow"]] if "slow" in c else [])
        assert Fr._verdict_of(Fr._kind(name, c), rows) == c["verdict"], name


@pytest.mark.reports
def test_appendix_a_marks_its_fragile_verdicts_with_the_one_rule_and_its_own_measured_error():
    """Appendix A section 6 (changed 2026-11-26): the one fragility rule, with delta twice the median measured error of
    the setting's pairs that kept window losses (none of claim 1's or the control's did). Pinned: delta, and each
    verdict's label with the smallest shift that changes it, so the report's and docs/campaigns.md's words about them
    fail when the data or the rule change."""
    from research import plans
    runs = records.load_runs(records.committed_path("d768"))
    windows = len(next(r for r in runs if "val_windows_last" in r)["val_windows_last"])
    said = {"sigma=0.02": (0.0111, {"1 logn slowest": (False, 0.0172), "1 with bert and channel": (True, 0.0107),
                                    "2 other fixes converge alike": (True, 0.0014),
                                    "2 with bert and channel": (False, 0.0348), "3 all fixes end alike": (True, 0.0054),
                                    "3 all fixes end alike (last)": (True, 0.0009),
                                    "4 no final gain over tied": (True, 0.0067),
                                    "4 no final gain over tied (last)": (True, 0.0006),
                                    "control: why logn is slow": (False, 0.0884)}),
            "sigma=d^-1/2": (0.0158, {"1 logn slowest": (False, 0.0395), "2 other fixes converge alike": (True, 0.0083),
                                      "3 all fixes end alike": (False, 0.0344),
                                      "3 all fixes end alike (last)": (False, 0.0305),
                                      "4 no final gain over tied": (True, 0.0055),
                                      "4 no final gain over tied (last)": (True, 0.0055),
                                      "control: why logn is slow": (False, 0.1291)})}
    for name, by in plans.settings("d768", runs).items():
        delta, where = Fr.fragile_delta(by, windows, None)
        assert delta["best"] == pytest.approx(said[name][0], abs=1e-4) and "pairs with window losses" in where
        verdicts = C.all_claims(by)
        assert set(verdicts) == set(said[name][1])
        for claim, (fragile, shift) in said[name][1].items():
            line = Fr.fragile_lines(claim, verdicts[claim], delta[verdicts[claim]["stat"]])
            assert line.startswith("FRAGILE" if fragile else "robust"), (name, claim, line)
            assert Fr.verdict_flip(claim, verdicts[claim])["distance"] == pytest.approx(shift, abs=1e-4), (name, claim)
