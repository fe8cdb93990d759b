"""
Lesson 05's campaign, "the optimizer decides": its plan and its statistics, fixed before its data. This docstring
and reproduce.py's 'optim' plan were committed on 2026-11-25 before the first run of that scale started; a rule
added later is marked so, with its date. (Since 2026-11-26 lesson 05 is lessons/appendix_b_the_optimizer_campaign.ipynb
and lesson 04 is appendix A, the AdamW campaign. Its title overreached: the data show that the optimizer's whole
CONFIGURATION decides, not yet that the step's relativity does; see the corrections of 2026-11-26 at the end.)

The question
    Lesson 04 found, under AdamW, that logn is NOT the slowest fix (claim 1 CONTRADICTED at sigma = 0.02 and
    d^-1/2). The post's author trained with optimizers whose step is RELATIVE to each weight's size: LAMB, and his
    own Tiger (optim.py). Under them a small init stays small for ~1/lr steps. Do the post's four claims hold under
    Tiger and under LAMB, and does the control say the small sigma is the cause?

The setting (reproduce.py, scale 'optim')
    Lesson 04's d768 configuration (2 layers, d = 768, 12 heads, T = 64, 8 sequences a step, n = 11,706 with
    vocab=corpus, 1200 steps, 100 of linear warmup then cosine to lr/10, gradient clipping at 1.0, whole-split val
    loss every 100 steps), with four changes, the same for every arm and every optimizer:
    1. The residual branches start NEAR zero, residual_std = 1e-4 (rule R), not at exactly zero.
    2. Dense early evaluation: the val loss over a fixed subset of 128 of the 528 val windows (8,192 predicted
       tokens, evenly spaced) every 10 steps up to step 200 and at every whole-split evaluation (val_subset_loss).
    3. bf16 autocast, if check B passes; otherwise fp32, and the cuts of 'Budget' apply.
    4. Per optimizer: the peak lr (AdamW: lesson 04's 1e-3; Tiger and LAMB: sweep S) and the weight decay of its
       reference (AdamW 0.1 as lesson 04; Tiger 0.01, tiger.py; LAMB 0.01, You et al. 2019).

Rule R, the residual init (measured on 2026-11-25 before this plan was written: the fresh d768 model of seed 1 per
arm, first loss over 64 val windows with branches at std s, against the same model with the branches set to 0):
    s = 1e-5: every arm within 0.01%; s = 1e-4: within 0.82% (tied -0.82%, logn -0.68%, the others < 0.1%);
    s = 1e-3: tied -33%, logn -4.5%. Rule: the largest s of the decade grid whose first loss is within 1% of the
    2-gram model's for every arm: s = 1e-4. Tiger can't move exact zeros (lr x RMS(0) = 0); the same s is used
    under LAMB and AdamW so that the side-by-side differs in the optimizer alone. Under a relative step the
    branches can grow at most by exp(sum of lr_t) (optim.relative_step_budget): with this schedule the sum is
    ~0.66 x peak lr x 1000, so at peak 1e-3 the branches grow at most 1.9x (the model stays nearly a 2-gram model
    for the whole run) and at 1e-2 at most ~700x. The lr therefore decides whether the branches ever matter, and
    the sweep S, judged on tied's val loss, takes that into account.
    [Corrected 2026-11-26, after the data (issue 33): the bound is on the branches' WEIGHTS, and the two inferences
    from it above - "the model stays nearly a 2-gram model" and "the lr decides whether the branches ever matter" -
    read weight size as function. At lr 3e-3 the weights grew only 1.04x by step 190 under Tiger, yet the branches
    added 6.91 times the embedding at step 100 (branch_weight_lines): a coherent change of tiny weights.]

Check B, bf16 (run first; decides the campaign's dtype)
    Arms tied (sigma = 0.02) and logn, seed 1, 300 steps of the same schedule (max_iters = 300: the warmup and a
    shorter cosine), each in fp32 and in bf16 autocast, under AdamW (lr 1e-3), Tiger and LAMB (lr 1e-2, the upper
    middle of the sweep's grid: larger steps amplify rounding). bf16 PASSES if every whole-split val loss (steps 0,
    100, 200, 300) of each bf16 run is within BF16_TOLERANCE = 0.01 nats of its fp32 twin: half the margin, about
    twice the measurement error of a paired difference in lesson 04 (0.004-0.006 nats).

Sweep S, the learning rate of each relative optimizer (run after B)
    tied at sigma = 0.02, seed 100 (not a campaign seed, so no campaign run is selected on), the full schedule,
    peak lr in LR_GRID = 1e-3, 3e-3, 1e-2, 3e-2. The lr with the lowest best whole-split val loss wins; if another
    grid lr's best is within MARGIN (0.02 nats) of the winner's, the smallest such lr is taken (closest to the
    author's 1e-3 to 2e-3). If the chosen lr is an end of the grid, the grid is extended once by one point beyond
    it (x 1/3 or x 10/3) and the rule is applied again to all points. Why tied alone: it is the baseline, and none
    of the claims is about its speed, so the lr is not chosen for or against logn.
    How a 1200-step run stands in for the author's long runs: a relative step's budget is sum lr_t (a tensor's
    norm can change by at most exp of it). The author's max lr 1e-3 to 2e-3 over tens of thousands of steps gives
    a budget in the tens; 1200 steps give ~0.66 x lr x 1000. A small lr would leave a 1200-step run with a budget
    far below his, so the sweep lets the data choose the lr that makes the best use of 1200 steps; lesson 05 prints
    the chosen lr, its budget and what the embedding and the branches did with it.

Arms and seeds (sigma = 0.02 unless named; seed drives init and data order, as in lesson 04)
    Per relative optimizer (Tiger, LAMB): tied, logn (sigma = ln(n)/d), control (ortho at ln(n)/d), ortho, shuffle,
    untied: seeds 1-5 for logn, control and ortho, 1-3 for the others.
    AdamW at rule R's init: logn, control, ortho, seeds 1-3 (to show that AdamW's verdicts of lesson 04, made with
    exact-zero branches in fp32, do not hinge on the init). AdamW's verdicts are lesson 04's.
    sigma = d^-1/2 (lowest priority): ortho, tied, untied, shuffle at d^-1/2, seeds 1-3, per relative optimizer
    (logn and the control serve both settings, as in lesson 04).
    Order: B; S; Tiger seeds 1-3 (all arms); LAMB seeds 1-3; AdamW; seeds 4-5; sigma = d^-1/2. The plan grows as its
    decisions are made (AdamW's runs need only B, an optimizer's runs its own lr); a worker takes the first runnable
    run, so AdamW's runs may fill the time while a sweep run finishes.

Budget (planned 2026-11-25: one d768 step measured at 256 ms in bf16 with AdamW, 296 with Tiger, 332 with LAMB, one
thread, vs 736-926 ms in fp32): about 8-10 minutes a 1200-step run with evaluations, one thread; 12 check runs of 300
steps, 8-10 sweep runs, 45 runs at sigma = 0.02 and 24 at d^-1/2: ~14 core-hours in bf16, within the 20 asked. In fp32
(check B failed) the same plan would take ~35: then sigma = d^-1/2 and seeds 4-5 are cut (~20 core-hours).

The statistics: lesson 04's, applied per optimizer
    analysis.py's words (different, alike, inconclusive), MARGIN = 0.02, MIN_SEEDS = 3, paired t intervals over
    seeds, Bonferroni over a claim's comparisons, claims 1-4 with amendments a-f and the control as in analysis.py,
    on each optimizer's own runs: settings 'tiger', 'lamb' (sigma = 0.02) and 'tiger, sigma=d^-1/2', 'lamb,
    sigma=d^-1/2'. Statistic 'early' (mean whole-split val loss over steps 100-600) is primary for claims 1-2 and the
    control, as in lesson 04. Secondary, reported beside it and labelled so: 'start' = mean val-subset loss over
    steps 10-200 (20 dense points), for claim 1 and the control. A claim whose primary and secondary verdicts differ
    is flagged. Also descriptive: the paired gaps over time (dense to step 200, then every 100), pointwise 95%.

Predictions of the mechanism, written before the data (lesson 05 holds them against the measurements; the verdicts
come from the rules above whatever these say)
    P1. Under a relative step the embedding's RMS moves by at most a factor (1 + lr_t) per step (Tiger: per row; LAMB:
        per tensor), so logn's and the control's rms(E) stay below the sigma = 0.02 arms' for at least
        ln(0.02 / 0.0122) / lr ~ 0.49 / lr steps; measured growth will be slower than the bound where updates are not
        aligned with the weights. Under AdamW the relative step lr / rms(E) is ~0.08 at logn's start: the gap can
        close within tens of steps (lesson 04: rms(E) 0.0122 -> 0.045 in 500 steps in the issue's pilot).
    P2. The tied head's logit scale is about g d rms(E) (g: the final norm's mean gain): ln n = 9.37 for logn and the
        control at step 0, d x 0.02 = 15.4 for the sigma = 0.02 arms. While rms(E) is held near its init, logn and
        the control can't express logits as large as the others': under Tiger and LAMB both should lag ortho on
        early (claim 1 SUPPORTED against ortho and shuffle; the control 'small sigma'); under AdamW neither (lesson 04).
    P3. tied at sigma = 0.02 starts at a first loss of ~14.8 and must shrink its self-logit with relative steps; we make
        no prediction of its speed against the fixes.

Corrections to the predictions, added 2026-11-25 after the sweeps and the first Tiger runs (logn and control, seed 1)
had landed, on an independent review's reading (the predictions are not rules: no verdict depends on them)
    - P1's bound holds for rms(E) against the FIXED level 0.02, in units of sum lr_t (not of steps at the peak lr: the
      warmup makes the first steps smaller): ln(0.02 d / ln n) = 0.49. Against the sigma = 0.02 ARMS it is about half
      that, since they can shrink by (1 - lr_t) a step while logn grows by (1 + lr_t).
    - P2 left out the final norm's gain g, the other factor of the logit scale g d rms(E). Tiger moves g by an absolute
      lr_t / 2 a step (g <= 1 + sum lr_t / 2), LAMB by a relative (1 + lr_t) like E; so the logit scale can grow by
      1.64x within sum lr_t = 0.34 (Tiger) or 0.25 (LAMB), not 0.49 (logit_scale_budget). Measured in tiger logn seed 1:
      rms(E) 0.0122 -> 0.0188, g 1.00 -> 1.74.

Added 2026-11-25 after Tiger's seeds 1-2 had landed (descriptive, not a rule: no verdict depends on it)
    'In practice' (lesson 05 section 9, issue 20's "which init and head to choose under which optimizer"): per
    optimizer and statistic, the arms ranked by their mean over the seeds all of them share, each with its paired
    difference from the first and that comparison's word on its own (95% t interval, no Bonferroni: a guide to
    which arms the first is not shown to beat, never a verdict) - ranking().
    Precision (lesson 05 section 2): one measurement's error of a paired difference of claim 1's and the control's
    pairs (per-window val losses, the larger of per-window and blocks-of-8 errors, as lesson 04) against the seeds'
    scatter of the same differences; "small" if at most half the sd - precision_lines().
    The logit scale beside the loss (lesson 05 section 6): on steps 10-200 and on the first half, the mean logit scale
    and the mean loss of logn, the control and ortho - scale_against_loss(). An association between two outcomes,
    not a test of P2 (P2's test is the pre-registered control - ortho comparison).

Added 2026-11-25 after LAMB's seed 1 had landed (a check of the data's origin, not a rule)
    Provenance (lesson 05 section 2): the commit each run was made at, against PREREGISTERED_AT, the commit that
    wrote this docstring - provenance_lines().

Added 2026-11-25 after all 65 campaign runs were in, and written before any of its runs: an exploratory look at
section 8's untested reading (reproduce.py's scale 'turn'; one seed, so described, never a verdict)
    The reading: logn must unlearn the 2-gram start's tied self-logit; a relative step turns a row of E by at most
    ~lr_t radians a step whatever its size (train.emb_turn's docstring), AdamW by up to ~lr / sigma, which is large for
    logn's small sigma; so under Tiger and LAMB the self-logit goes slowly, and logn with it.
    Runs: logn, the control and ortho under AdamW (lr 1e-3), Tiger and LAMB (3e-3, sweep S's choice), seed 1, the
    campaign's configuration and schedule stopped at step 200 (the 'start' window, where claim 1 is SUPPORTED under
    both relative optimizers), fp32, with train.py's log_rows every 10 steps: emb_turn (the mean angle of E's rows
    from their init) and self_logit (the logit for repeating the input token minus the mean logit, 16 fixed val
    windows). What the reading expects (a miss is reported as a miss; nothing is re-run or tuned after):
    T1. Under Tiger, every logged emb_turn <= the sum of lr_t so far (a bound: a miss would be a bug).
    T2. logn's rows turn more under AdamW than under Tiger and under LAMB: emb_turn at steps 50, 100 and 190.
    T3. logn's self_logit falls more slowly under Tiger and LAMB than under AdamW: at steps 50, 100 and 190 it is
        larger under each relative optimizer than under AdamW.
    T4. The control and ortho start with a self_logit near 0 and have none to unlearn: at step 190 logn's exceeds the
        control's by more under Tiger and under LAMB than under AdamW.
    The reading is contradicted if T3 fails (the self-logit goes as fast under a relative step, so it can't be what
    holds logn back), and weakened if T2 fails with T3 holding (the self-logit is held, but not by the rows' turn).

Added 2026-11-25 after the nine 'turn' runs were in and read (T3 failed; section 10 found that a row's turn can't lower
its own logit), written before these three runs: what the branches add (exploratory, one seed, never a verdict)
    The question section 10 left open: what lowers logn's self-logit, within 10 steps under AdamW and near step 100
    under Tiger and LAMB, when E has hardly changed? Candidate: the residual branches' output. train.branch_ratio =
    rms(x_L - x_0) / rms(x_0) at the final norm's input; resid_rms (the branches' weights) can't show a coherent change
    of tiny weights. Runs: the three logn runs of the 'turn' plan re-made (groups '<optimizer> branches'), now with
    branch_ratio in log_rows. Having seen the self-logit curves, we expect if the candidate is right:
    B1. Under AdamW, logn's branch_ratio exceeds 1 by step 10 (its self-logit was 1.84 there).
    B2. Under Tiger and under LAMB, logn's branch_ratio is below 1 at steps 10 and 50 (self-logit still above 7) and
        above 1 at step 100 (where it had met the control's).
    C. A check: the re-made runs' emb_turn and self_logit equal the committed ones' within 1e-6 (same config and seed;
       the extra measurement changes no weight).
    If B2 fails because the ratio stays below 1 through step 100, the branches are not what lowers the self-logit under
    a relative step, and the route stays open.
    A first attempt (commit 211012c) lost branch_ratio from its records: reproduce.KEEP lacked it (fixed and tested).
    Of it we saw only logn's branch_ratio at steps 0-20 while it ran (adamw 0.45 at step 0; tiger 0.21 at step 0;
    lamb 0.21, 0.21, 0.23 at steps 0, 10, 20), and check C on its two finished records (emb_turn and self_logit
    equal to the committed runs' exactly). The three runs were re-made at the commit with the fix; nothing above changed.

Corrections of 2026-11-26, made after all the data on issue 33's review (wording and reporting only: no verdict
changes, no run was added; each is printed in appendix B where it applies)
    1. Weight size is not function. resid_rms (the branches' weights) hardly grows under Tiger and LAMB, but
       branch_ratio (what they add) passes 1 by step 60-70 and peaks near 10 (Tiger) and 6 (LAMB): from then on these
       models are far from the 2-gram model. branch_weight_lines prints both; no sentence may infer the model's
       function from the weights' rms.
    2. The logit scale g d rms(E) leaves out the trainable d x d matrix P of ortho's head (and the control's). A
       relative step bounds P's Frobenius norm, not its operator norm (rank_one_growth: 100 steps at 3e-3 on one
       rank-1 gradient, Frobenius x1.05, operator norm x8.5 at d = 768, under Tiger and LAMB alike). P's norm was
       never logged, so section 6's "logn's scale reaches / stays below ortho's" compares logn's whole scale with part
       of ortho's. And the control differs from logn by P as well as by the self-logit, so the control verdict
       'self-logit' names the control's whole difference (analysis.py, "The control's confound").
    3. Fragility: one rule for every verdict, analysis.py's of 2026-11-26 (verdict_flip, fragile_lines), with delta =
       twice one measurement's error of section 2 (fragile_delta, fragility_lines). Written after the data, knowing
       which verdicts it would mark.
    4. "The optimizer decides": the two sides also differ in the peak lr (3e-3 from sweep S against AdamW's 1e-3,
       not swept), the weight decay (0.01 inside a relative step against AdamW's decoupled 0.1) and the betas
       (configuration_lines). The data show that the optimizer's configuration decides; relativity is not yet shown
       to be the cause.
    5. Gradient clipping to norm 1.0 runs before every step of every optimizer (train.py). Under Tiger and LAMB the
       raw norm is far above 1 at every logged step, so each step's gradient enters the optimizer at unit norm and
       Tiger's momentum averages unit-norm gradients. Neither reference (tiger.py; You et al.'s Algorithm 2) clips.
       configuration_lines prints the raw norms.
    6. Per-row bounds. Tiger steps E row by row, so each row's norm changes by at most a factor (1 + lr_t) a step and
       turns by at most about lr_t radians. LAMB bounds only the whole tensor's norm (|dE| = lr_t |E|): one row can
       grow or turn more than lr_t, the more the more unevenly Adam's direction spreads over the rows. So T1's bound
       ('a relative step turns a row by at most ~lr_t radians', above) is exact for Tiger (where T1 tested it), not for
       LAMB, and section 1's bound on the largest logit, e^(2 sum lr_t) under LAMB, holds for the mean logit scale
       g d rms(E), and for the largest logit only while LAMB's step spreads evenly over E's rows and the gain's entries.
"""

import functools
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import analysis  # noqa: E402
from analysis import MARGIN  # noqa: E402

RESIDUAL_STD = 1e-4  # rule R
BF16_TOLERANCE = 0.01  # check B, nats
LR_GRID = (1e-3, 3e-3, 1e-2, 3e-2)  # sweep S
SWEEP_SEED = 100
RELATIVE = ("tiger", "lamb")
START_STEPS = (10, 200)  # 'start': mean val-subset loss over these steps (inclusive)
# The commit that wrote this docstring and the plan, recorded here on 2026-11-25 after Tiger's runs were in (a commit
# can't name itself). Every campaign run records the commit it ran at (reproduce.py's git_commit); the campaign runs
# from a worktree pinned here, so that fixes on main can't change runs in flight. provenance_lines checks it.
PREREGISTERED_AT = "3ece28e2cdf37b871843e037f9e31a01cdb0900b"


# ----------------------------------------------------------------------------------------------------
# Check B and sweep S: the two decisions the plan takes from its own first runs

def bf16_check(runs, planned=None):
    """Check B on the check runs ({(optimizer, arm, dtype): run}). Returns dict(done, passed, rows) with one row per
    (optimizer, arm): the largest |bf16 - fp32| whole-split val loss over the shared evaluations. `planned`: the
    (optimizer, arm) pairs the check needs (reproduce.py's plan); it is done only when every one has both runs."""
    rows = []
    keys = sorted({(o, a) for o, a, _ in runs} | set(planned or ()))
    for o, a in keys:
        pair = [runs.get((o, a, dt)) for dt in ("float32", "bfloat16")]
        if None in pair:
            continue
        (s32, v32), (s16, v16) = (analysis.val_curve(r) for r in pair)
        both = sorted(set(s32.tolist()) & set(s16.tolist()))
        diff = [abs(v16[s16.tolist().index(s)] - v32[s32.tolist().index(s)]) for s in both]
        # np.max, not max: a diverged twin's NaN must fail the check (max() skips a NaN that doesn't come first)
        rows.append(dict(optimizer=o, arm=a, steps=both, max_abs_diff=float(np.max(diff)) if diff else math.nan))
    done = len(rows) == len(keys) and len(rows) > 0
    passed = done and all(r["max_abs_diff"] < BF16_TOLERANCE for r in rows)
    return dict(done=done, passed=passed, rows=rows)


def pick_lr(best_by_lr, grid=LR_GRID):
    """Sweep S's rule on {lr: best val loss of tied}. Returns dict(lr, next): `lr` the choice (None until decided),
    `next` the lrs still to run (the grid's, then one extension beyond an end that wins)."""
    todo = [lr for lr in grid if lr not in best_by_lr]
    if todo:
        return dict(lr=None, next=todo)
    scores = {lr: v for lr, v in best_by_lr.items() if math.isfinite(v)}
    if not scores:  # every run diverged: nothing to choose
        return dict(lr=None, next=[])
    winner = min(scores, key=scores.get)
    choice = min(lr for lr, v in scores.items() if v <= scores[winner] + MARGIN)
    lo, hi = min(grid), max(grid)
    if choice in (lo, hi) and len(grid) == len(LR_GRID):  # an end wins: extend once beyond it
        beyond = round(lo / 3, 12) if choice == lo else round(hi * 10 / 3, 12)
        return pick_lr(best_by_lr, tuple(sorted(grid + (beyond,))))
    return dict(lr=choice, next=[])


# ----------------------------------------------------------------------------------------------------
# Statistics

def start(run):
    """Mean val-subset loss over the dense evaluations in START_STEPS (lower = faster at the start)."""
    lo, hi = START_STEPS
    vals = [r["val_subset_loss"] for r in run["history"] if r.get("val_subset_loss") is not None and lo <= r["step"] <= hi]
    return float(np.mean(vals)) if vals else math.nan


analysis.STATS.setdefault("start", start)
analysis.STAT_WORDS.setdefault("start", "mean val-subset loss over steps 10-200")

# The settings the claims judge ('The statistics' above); AdamW's re-runs at rule R's init (logn, control, ortho only)
# are set beside lesson 04's runs instead.
JUDGED = ("tiger", "lamb", "tiger, sigma=d^-1/2", "lamb, sigma=d^-1/2")
SETTINGS = {"tiger": ("tiger",), "lamb": ("lamb",), "tiger, sigma=d^-1/2": ("tiger", "tiger d^-1/2"),
            "lamb, sigma=d^-1/2": ("lamb", "lamb d^-1/2"), "adamw (residual_std=1e-4)": ("adamw",)}


def settings(runs):
    """{setting: {arm: {seed: run}}} of the campaign's runs. The d^-1/2 settings borrow logn and the control from their
    optimizer's main group, and take its other arms from the d^-1/2 group only."""
    out = {}
    for name, groups in SETTINGS.items():
        rs = [r for r in runs if r["group"] == groups[-1] or (len(groups) > 1 and r["group"] == groups[0]
                                                                 and r["arm"] in ("logn", "control"))]
        out[name] = analysis.by_arm(rs)
    return out


def claims(by_arm):
    """Lesson 04's claims and control on one optimizer's setting, plus the secondary 'start' versions of claim 1 and
    the control (labelled so)."""
    out = analysis.all_claims(by_arm)
    dense = any(math.isfinite(start(r)) for runs in by_arm.values() for r in runs.values())
    if dense:  # runs made without dense evaluation (lesson 04's) have no 'start'
        out["1 logn slowest (start, secondary)"] = analysis.claim_slowest(by_arm, stat="start")
        out["control (start, secondary)"] = analysis.control_verdict(by_arm, stat="start")
    return out


# ----------------------------------------------------------------------------------------------------
# Reading the campaign (lesson 05). Reporting only: no rule of its own.

def check_lines(runs):
    """Check B as printable lines: each (optimizer, arm)'s fp32 and bf16 whole-split val losses, their largest
    difference against BF16_TOLERANCE, and the decision."""
    check = bf16_check({(r["config"]["optimizer"], r["arm"], r["config"]["dtype"]): r
                        for r in runs if r["group"].startswith("check ")})
    out = []
    for row in check["rows"]:
        pair = {r["config"]["dtype"]: analysis.val_curve(r)[1] for r in runs if r["group"].startswith("check ")
                and r["config"]["optimizer"] == row["optimizer"] and r["arm"] == row["arm"]}
        out.append(f"  {row['optimizer']:5} {row['arm']:5} fp32 " + " ".join(f"{v:.3f}" for v in pair["float32"])
                   + " | bf16 " + " ".join(f"{v:.3f}" for v in pair["bfloat16"])
                   + f" | largest |diff| {row['max_abs_diff']:.4f}" + ("" if row["max_abs_diff"] < BF16_TOLERANCE else
                                                                       f"  > {BF16_TOLERANCE}"))
    verdict = ("PENDING (not all check runs are in)" if not check["done"] else
               "PASSED: the campaign runs in bf16" if check["passed"] else
               "FAILED: the campaign runs in fp32, with the plan's cuts (seeds 4-5 and sigma = d^-1/2)")
    return out + [f"check B: {verdict}"]


def provenance_lines(runs, commit=PREREGISTERED_AT):
    """Which commit made the runs: a pre-registration binds only the runs made at the commit that wrote it. Runs made
    elsewhere are named (none is dropped: the reader decides), so a campaign that changed under its own feet shows."""
    other = sorted(r["id"] for r in runs if r.get("git_commit") != commit)
    line = f"made at the pre-registration's commit {commit[:7]}: {len(runs) - len(other)} of {len(runs)} runs"
    return [line] + ([f"  made elsewhere: {', '.join(other)}"] if other else [])


def run_config(run):
    """The train.Config a committed run was made with, from its record (keys a later Config lacks are left out)."""
    from train import Config
    return Config(**{k: v for k, v in run["config"].items() if k in Config.__dataclass_fields__})


def schedule(config):
    """The learning rate at every step of a run's schedule (train.lr_at)."""
    from train import lr_at
    return [lr_at(t, config) for t in range(config.max_iters)]


def budget(config):
    """sum lr_t over a run: a relative step can change a tensor's norm by at most exp(sum lr_t)."""
    return float(sum(schedule(config)))


def logit_scale_budget(optimizer, ratio):
    """The least sum of lr_t over which a relative optimizer can raise the tied logit scale g d rms(E) by `ratio` (g the
    final norm's mean gain, from 1). LAMB moves every tensor, E and g alike, by at most a factor (1 + lr_t) a step, so
    the scale by at most e^(2 S): S = ln(ratio) / 2. Tiger moves E's rows by at most (1 + lr_t) but g by an absolute
    lr_t / 2, so g <= 1 + S / 2: the least S with e^S (1 + S / 2) >= ratio (by bisection)."""
    if ratio <= 1:
        return 0.0
    if optimizer == "lamb":
        return math.log(ratio) / 2
    if optimizer != "tiger":
        raise ValueError(f"a logit-scale budget is defined for tiger and lamb, not {optimizer!r}")
    lo, hi = 0.0, math.log(ratio)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if math.exp(mid) * (1 + mid / 2) < ratio else (lo, mid)
    return hi


def steps_to_budget(config, total):
    """The first step by which the schedule's sum of lr_t reaches `total` (None if the run ends first): the earliest
    step at which a relative optimizer can have changed a norm by e^total."""
    done = np.cumsum(schedule(config))
    hit = np.nonzero(done >= total)[0]
    return int(hit[0]) + 1 if len(hit) else None


def branch_growth(runs_by_seed):
    """How far the residual branches' WEIGHTS grew: the median over seeds of the last logged resid_rms over the first.
    Weights, not function: a coherent change of tiny weights can add a lot to the residual stream (branch_lines)."""
    return float(np.median([analysis.last_logged(r, "resid_rms") / r["history"][0]["resid_rms"]
                            for r in runs_by_seed.values()]))


def _first_at_or_above(steps, values, level):
    hit = np.asarray(steps)[np.asarray(values) >= level]
    return int(hit[0]) if len(hit) else None


def mechanism_lines(name, by_arm, ratio):
    """Section 6's reading of one setting, means over seeds: when logn's rms(E) reaches 0.02 and when its logit scale
    g d rms(E) first reaches ortho's g d rms(E) (the sigma = 0.02 head without a self-logit), each beside the earliest
    step a relative optimizer's budget allows (`ratio` = 0.02 d / ln n; steps_to_budget, logit_scale_budget); its gain g
    and how far its branches' weights grew by the end. Reporting only. Corrected 2026-11-26 (issue 33): ortho's logit
    scale is g d rms(E) times up to the operator norm of its trainable d x d matrix P, which these runs never logged, so
    the comparison is with part of ortho's scale only, and the line says so."""
    logn = by_arm.get("logn")
    if not logn:
        return []
    bad = sorted(s for s, r in logn.items() if r.get("diverged_at_step") is not None)
    if bad:  # its sizes stop where it diverged: a mean over seeds would mix lengths
        return [f"{name}: logn diverged (seed {', '.join(map(str, bad))}): no reading of its sizes"]
    first = next(iter(logn.values()))
    c, cfg = first["config"], run_config(first)
    relative = c.get("optimizer", "adamw") in RELATIVE

    def bound(total):
        at = steps_to_budget(cfg, total)
        return f"; a relative step can't before step {at}" if at else "; beyond this run's budget"

    s, _, e = analysis.stack(logn, "emb_rms")
    at = _first_at_or_above(s, e.mean(0), 0.02)
    out = [f"{name}: logn's rms(E) " + (f"reaches 0.02 at step {at}" if at is not None else
                                         f"stays below 0.02 to step {int(s[-1])}")
           + (bound(math.log(ratio)) if relative else "")]
    runs = [r for rs in (logn, by_arm.get("ortho", {})) for r in rs.values()]
    if by_arm.get("ortho") and all(r["history"][0].get("lnf_gain") is not None for r in runs):
        (sl, vl), (so, vo) = logit_scale(logn), logit_scale(by_arm["ortho"])
        common = sorted(set(sl.tolist()) & set(so.tolist()))
        gap = [vl[sl.tolist().index(t)] - vo[so.tolist().index(t)] for t in common]
        at = _first_at_or_above(common, gap, 0.0)
        g = np.mean([analysis.last_logged(r, "lnf_gain") for r in logn.values()])
        out.append(f"{name}: logn's logit scale g d rms(E) " + (f"reaches ortho's g d rms(E) at step {at}" if at is not
                   None else "stays below ortho's g d rms(E)") + " (ortho's without its matrix P, whose norm was not logged)"
                   + (bound(logit_scale_budget(c['optimizer'], ratio)) + " against the fixed 15.4" if relative else "")
                   + f"; logn's gain g ends at {g:.2f}")
    out += scale_against_loss(name, by_arm)
    if all(r["history"][0].get("resid_rms") for r in logn.values()):
        out.append(f"{name}: logn's residual branches' weights (resid_rms) grew {branch_growth(logn):.3g}x (median over "
                   f"seeds; weights, not what the branches add)")
    return out


def scale_against_loss(name, by_arm, arms=("logn", "control", "ortho")):
    """P2 put logn's and the control's lag behind ortho down to their small logit scale g d rms(E). Descriptive, added
    2026-11-25 after Tiger's seeds 1-2 (P2's own test is the pre-registered control - ortho comparison): on two windows,
    START_STEPS with 'start' and the first half (early's steps, 0 < t <= max_iters / 2) with 'early', each arm's mean
    logit scale beside its mean loss (means over seeds), and which of logn and the control has the larger scale and
    which the lower loss. The scale is g d rms(E): for the control and ortho it leaves out their head's trainable d x d
    matrix P (never logged; corrected 2026-11-26, issue 33), and the lines say so. Scale and loss are both outcomes of training: an association, not a cause. Lines saying
    'invalid' if a run diverged; [] if an arm is missing or its runs did not log the gain."""
    if not all(by_arm.get(a) for a in arms) or \
            any(r["history"][0].get("lnf_gain") is None for a in arms for r in by_arm[a].values()):
        return []
    runs = [r for a in arms for r in by_arm[a].values()]
    if any(r.get("diverged_at_step") is not None for r in runs):
        return [f"{name}: logit scale against loss: invalid (a run diverged)"]
    last = max(h["step"] for r in runs for h in r["history"])
    half = runs[0].get("config", {}).get("max_iters", last) / 2
    out = []
    for (lo, hi), stat, key in ((START_STEPS, "start", "val_subset_loss"), ((1, half), "early", "val_loss")):
        scale, loss = {}, {}
        for a in arms:  # the scale at the very steps the statistic averages
            s, v = logit_scale(by_arm[a])
            at = analysis.stack(by_arm[a], key)[0]
            at = at[(at >= lo) & (at <= hi)]
            scale[a] = float(v[np.isin(s, at)].mean()) if len(at) else math.nan
            loss[a] = float(np.mean([analysis.STATS[stat](r) for r in by_arm[a].values()]))
        what = "val-subset loss" if stat == "start" else "val loss"
        window = f"steps {lo}-{hi:g}" if stat == "start" else f"first half (evaluations to step {hi:g})"
        if not all(map(math.isfinite, list(scale.values()) + list(loss.values()))):
            out.append(f"{name}, {window}: invalid (a non-finite value)")
            continue
        big = max(("logn", "control"), key=scale.get)
        out.append(f"{name}, {window}: mean g d rms(E) " + ", ".join(f"{a} {scale[a]:.1f}" for a in arms)
                   + f"; mean {what} " + ", ".join(f"{a} {loss[a]:.3f}" for a in arms)
                   + f" -> of logn and the control, {big} has the larger g d rms(E) (P not counted) and the "
                   + ("lower" if loss[big] < loss[({"logn", "control"} - {big}).pop()] else "higher") + " loss")
    return out


def differs(claims_):
    """The pre-registered flag: claim 1 and the control, where the primary ('early') and secondary ('start') verdicts
    differ. Lines to print (empty: they agree, or one is missing)."""
    out = []
    for primary, secondary in (("1 logn slowest", "1 logn slowest (start, secondary)"),
                               ("control: why logn is slow", "control (start, secondary)")):
        a, b = claims_.get(primary), claims_.get(secondary)
        if a and b and a["verdict"] != b["verdict"] and "PENDING" not in (a["verdict"], b["verdict"]):
            out.append(f"FLAGGED: {primary}: {a['verdict']} on early (primary) but {b['verdict']} on start (secondary)")
    return out


def sweep_lines(runs):
    """Sweep S as printable lines: per relative optimizer, each lr's best val loss of tied, the schedule's budget, how
    far the weights of the residual branches and of the embedding grew (their rms: weights, not function), and the lr
    the rule chose."""
    out = []
    for opt in RELATIVE:
        rs = sorted((r for r in runs if r["group"].startswith(f"sweep {opt} ")), key=lambda r: r["config"]["lr"])
        for r in rs:
            c = run_config(r)
            head = (f"  {opt:5} lr {c.lr:<7g} best val {r['best_val']:.3f}   sum lr_t {budget(c):5.2f} (norms can grow "
                    f"<= {math.exp(budget(c)):8.3g}x)")
            if r.get("diverged_at_step") is not None:  # its sizes stop where it diverged: say so, don't read them
                out.append(head + f"   DIVERGED at step {r['diverged_at_step']}")
                continue
            grow = {k: analysis.last_logged(r, k) / r["history"][0][k] for k in ("resid_rms", "emb_rms")}
            out.append(head + f"   weights' rms grew: branches {grow['resid_rms']:6.2f}x, E {grow['emb_rms']:.2f}x")
        pick = pick_lr({r["config"]["lr"]: r["best_val"] for r in rs})
        out.append(f"  {opt}: " + (f"lr {pick['lr']:g} chosen" if pick["lr"] else f"waiting for lr {pick['next']}"))
    return out


def logit_scale(runs_by_seed):
    """The tied logit scale g d rms(E) over training (g: the final norm's mean gain), mean over seeds: the largest
    logit the head can give a token whose row points like h. (steps, values)."""
    steps, _, g = analysis.stack(runs_by_seed, "lnf_gain")
    _, _, e = analysis.stack(runs_by_seed, "emb_rms")
    d = next(iter(runs_by_seed.values()))["d"]
    return steps, (g * e).mean(0) * d


def ranking(by_arm, stat, arms=None):
    """The arms ranked by their mean `stat` over the seeds every one of them has (descriptive: see the docstring's
    'In practice'). Rows dict(arm, mean, n, vs_first) where vs_first is analysis.compare of arm - first (None for the
    first), one comparison on its own. [] below MIN_SEEDS shared seeds."""
    arms = [a for a in (arms or by_arm) if by_arm.get(a)]
    seeds = sorted(set.intersection(*(set(by_arm[a]) for a in arms))) if arms else []
    if len(seeds) < analysis.MIN_SEEDS:
        return []
    f = analysis.STATS[stat]
    means = {a: float(np.mean([f(by_arm[a][s]) for s in seeds])) for a in arms}
    order = sorted(arms, key=lambda a: (not math.isfinite(means[a]), means[a]))
    pick = lambda a: {s: by_arm[a][s] for s in seeds}
    return [dict(arm=a, mean=means[a], n=len(seeds),
                 vs_first=None if i == 0 else analysis.compare(analysis.paired(pick(a), pick(order[0]), stat)))
            for i, a in enumerate(order)]


def ranking_lines(name, by_arm, stat, arms=None):
    """ranking() as printable lines, one per arm."""
    rows = ranking(by_arm, stat, arms)
    if not rows:
        return [f"{name}: fewer than {analysis.MIN_SEEDS} seeds shared by every arm: no ranking yet"]
    out = [f"{name}, {analysis.STAT_WORDS.get(stat, stat)} ({rows[0]['n']} seeds), in the order of the means; each "
           f"arm against the lowest, one unadjusted 95% comparison each (not verdicts):"]
    for i, r in enumerate(rows):
        v = r["vs_first"]
        word = None if v is None else v["word"] if v["word"] in ("inconclusive", "pending") or \
            v["word"].startswith("invalid") else v["word"].replace("A higher", "higher") + " (unadjusted)"
        out.append(f"  {i + 1}. {r['arm']:8} {r['mean']:.4f}" + ("" if v is None else
                   f"   vs {rows[0]['arm']}: {v['mean']:+.4f} [{v['ci95'][0]:+.4f}, {v['ci95'][1]:+.4f}] {word}"
                   if v["ci95"] else f"   vs {rows[0]['arm']}: {word}"))
    return out


MEASURED_PAIRS = [("logn", f) for f in analysis.CORE_FIXES] + [("logn", "control"), ("control", "ortho")]


def measurement_error(by_arm, windows, subset, block=8):
    """One measured paired difference's error, as precision_lines prints it: for claim 1's and the control's pairs and
    every seed whose runs kept per-window val losses, the larger of the per-window and blocks-of-`block` standard
    errors, on the whole split and on the dense subset's own windows; the medians over pairs x seeds. dict(whole,
    subset, n), or None when no such pair has window losses."""
    from data.prepare import subset_windows
    idx = subset_windows(windows, subset)

    def se(ra, rb, keep=None):
        pick = lambda r: {"val_windows_last": [r["val_windows_last"][i] for i in keep] if keep is not None
                          else r["val_windows_last"]}
        return max(analysis.measurement_noise(pick(ra), pick(rb), k) for k in (1, block))

    rows = [(se(by_arm[a][s], by_arm[b][s]), se(by_arm[a][s], by_arm[b][s], idx))
            for a, b in MEASURED_PAIRS if by_arm.get(a) and by_arm.get(b)
            for s in sorted(set(by_arm[a]) & set(by_arm[b]))
            if "val_windows_last" in by_arm[a][s] and "val_windows_last" in by_arm[b][s]]
    if not rows:
        return None
    whole, sub = (float(np.median(col)) for col in zip(*rows))
    return dict(whole=whole, subset=sub, n=len(rows))


def precision_lines(name, by_arm, windows, subset, block=8):
    """How much of a paired difference is measurement and how much is seed (the project's standard: measurement noise
    small next to seed noise), for claim 1's pairs and the control's. Measurement: for each such pair and seed whose
    runs kept per-window val losses (val_windows_last, the final model's), the standard error of the difference, the
    larger of the per-window one and the one over blocks of `block` adjacent windows (neighbours are correlated; lesson
    04 takes the same max); on the whole split (`windows` W) and on the dense subset's own windows
    (train.subset_windows, `subset` K); the median over pairs and seeds. Seed: the sd over seeds of the same pairs'
    differences on 'early' (whole split) and 'start' (subset), pooled, with its degrees of freedom. "small" when the
    error is at most half that sd: a threshold chosen with this check, after Tiger's seeds 1-2. Descriptive. The
    errors are the final model's; in the first half, where the gaps are large, they may be larger."""
    err = measurement_error(by_arm, windows, subset, block)
    if err is None:
        return [f"{name}: none of claim 1's or the control's pairs has per-window val losses: no measurement error here"]
    whole, sub = err["whole"], err["subset"]
    out = [f"{name}: one measured paired difference (claim 1's and the control's pairs, at the last step) errs by "
           f"{whole:.4f} nats on the whole split ({windows} windows) and {sub:.4f} on the {subset}-window subset (the "
           f"larger of the per-window and blocks-of-{block} errors; median over {err['n']} pairs x seeds)"]
    for stat, err in (("early", whole), ("start", sub)):
        if not any(h.get("val_subset_loss") is not None for rs in by_arm.values() for r in rs.values()
                   for h in r["history"]) and stat == "start":
            out.append(f"  {stat:5}: not measured in these runs")
            continue
        ss, df, bad = 0.0, 0, 0
        for a, b in MEASURED_PAIRS:
            if by_arm.get(a) and by_arm.get(b):
                d = np.asarray(analysis.paired(by_arm[a], by_arm[b], stat), float)
                if not np.isfinite(d).all():
                    bad += 1
                elif len(d) >= 2:
                    ss, df = ss + float(((d - d.mean()) ** 2).sum()), df + len(d) - 1
        note = f"; {bad} comparison(s) left out: a run diverged" if bad else ""
        if not df:
            out.append(f"  {stat:5}: fewer than 2 paired seeds: no seed spread yet{note}")
            continue
        sd = math.sqrt(ss / df)
        out.append(f"  {stat:5}: the seeds scatter those differences by sd {sd:.4f} (pooled, {df} degrees of freedom): "
                   f"error / sd = {err / sd:.2f}, {'small' if err <= sd / 2 else 'not small'} next to the seed noise "
                   f"(small: at most half){note}")
    return out


# ----------------------------------------------------------------------------------------------------
# The fragility rule, added 2026-11-26 AFTER all the data (issue 33; see the docstring): reporting, no verdict changes

def fragile_delta(by_arm, windows, subset):
    """The rule's delta per statistic for one setting: twice one measured paired difference's error (measurement_error:
    the whole split's for early, best and last, the dense subset's for start), never below analysis.FRAGILE_EDGE; where
    nothing was measured, FRAGILE_EDGE. Returns ({stat: delta}, a phrase saying where it came from)."""
    err = measurement_error(by_arm, windows, subset)
    edge = analysis.FRAGILE_EDGE
    if err is None:
        return {st: edge for st in ("early", "best", "last", "start")}, \
            f"no measured error: FRAGILE_EDGE {edge}"
    delta = {st: max(edge, 2 * err["whole"]) for st in ("early", "best", "last")}
    delta["start"] = max(edge, 2 * err["subset"])
    return delta, f"twice one measurement's error: {delta['early']:.4f} (whole split), {delta['start']:.4f} (subset)"


def fragility_lines(name, verdicts, delta, names):
    """Every verdict of `names` in one setting under the 2026-11-26 rule: FRAGILE or robust, with the smallest shift
    of its comparisons that changes it (analysis.fragile_lines) against the statistic's delta."""
    out = []
    for claim in names:
        c = verdicts.get(claim)
        line = c and analysis.fragile_lines(claim, c, delta[c["stat"]])
        if line:
            out.append(f"  {claim:34} {line}")
    return out


def verdict_grid(claims_by_setting, names):
    """Lines of a table: one row per claim in `names`, one column per setting, each cell its verdict."""
    cols = list(claims_by_setting)
    out = [f"{'claim':34}" + "".join(f"{c[:22]:>24}" for c in cols)]
    for name in names:
        out.append(f"{name[:34]:34}" + "".join(f"{claims_by_setting[c].get(name, {}).get('verdict', '-'):>24}"
                                            for c in cols))
    return out


@functools.lru_cache(maxsize=None)
def val_repeat_rate():
    """The share of val-split positions whose target repeats their input token (tiedgpt.repeat_fraction): where the tied
    self-logit helps at step 0. Read from the prepared data once."""
    import reproduce
    from tiedgpt import repeat_fraction
    c = reproduce.config_for(reproduce.plan("optim")[0][2])
    return repeat_fraction(np.asarray(reproduce.load_data(c, log=lambda *a: None)[3], dtype=np.int64))


def two_gram_first_loss(run):
    """The first loss the 2-gram model predicts (tiedgpt.predicted_initial_loss, with the val split's repeat rate) for a
    run's model: rule R says a run's step-0 val loss lies within 1% of it."""
    from tiedgpt import GPTConfig, predicted_initial_loss
    cfg = GPTConfig(**{k: v for k, v in run["config"].items() if k in GPTConfig.__dataclass_fields__})
    return predicted_initial_loss(cfg, val_repeat_rate())


# ----------------------------------------------------------------------------------------------------
# Section 10 (exploratory, after the campaign; expectations T1-T4 in the docstring, written before the runs)

TURN_STEPS = (50, 100, 190)  # where T2 and T3 are read (log_rows' rows are measured after that step's update)


def turn_runs(runs, branches=False):
    """The 'turn' scale's runs as {optimizer: {arm: run}} (one seed): the first nine, or (branches=True) the three
    re-made logn runs that also log branch_ratio."""
    out = {}
    for r in runs:
        if r["group"].endswith(" branches") == branches:
            out.setdefault(r["config"]["optimizer"], {})[r["arm"]] = r
    return out


def logged(run, key):
    """{step: value} of a log_rows quantity (emb_turn, self_logit)."""
    return {h["step"]: h[key] for h in run["history"] if key in h}


def turn_bound(run):
    """{step: sum of lr_t over steps 0..step}: Tiger's bound on emb_turn at each logged row (T1)."""
    done = np.cumsum(schedule(run_config(run)))
    return {s: float(done[s]) for s in logged(run, "emb_turn")}


def turn_expectations(by_opt):
    """T1-T4 held against the runs: [(name, held, what was found)], with None for held where runs are missing."""
    out = []

    def have(*keys):
        return all(o in by_opt and a in by_opt[o] for o, a in keys)
    if have(("tiger", "logn")):
        worst = max((logged(r, "emb_turn")[s] / b, a, s) for a, r in by_opt["tiger"].items()
                    for s, b in turn_bound(r).items())
        out.append(("T1", worst[0] <= 1, f"under Tiger emb_turn reaches at most {worst[0]:.0%} of the sum of lr_t so "
                    f"far ({worst[1]}, step {worst[2]}): the bound " + ("holds" if worst[0] <= 1 else "FAILS")))
    for name, key, sign, what in (("T2", "emb_turn", -1, "logn's emb_turn (rad)"),
                                  ("T3", "self_logit", +1, "logn's self_logit (nats)")):
        if not have(("adamw", "logn"), ("tiger", "logn"), ("lamb", "logn")):
            out.append((name, None, "runs missing"))
            continue
        v = {o: logged(by_opt[o]["logn"], key) for o in ("adamw", "tiger", "lamb")}
        held = all(sign * (v[o][s] - v["adamw"][s]) > 0 for o in ("tiger", "lamb") for s in TURN_STEPS)
        out.append((name, held, f"{what} at steps {', '.join(map(str, TURN_STEPS))}: " + "; ".join(
            f"{o} " + ", ".join(f"{v[o][s]:.2f}" for s in TURN_STEPS) for o in ("adamw", "tiger", "lamb"))))
    if have(*[(o, a) for o in ("adamw", "tiger", "lamb") for a in ("logn", "control")]):
        s = TURN_STEPS[-1]
        gap = {o: logged(by_opt[o]["logn"], "self_logit")[s] - logged(by_opt[o]["control"], "self_logit")[s]
               for o in ("adamw", "tiger", "lamb")}
        out.append(("T4", gap["tiger"] > gap["adamw"] and gap["lamb"] > gap["adamw"],
                    f"logn - control self_logit at step {s}: " + ", ".join(f"{o} {g:+.2f}" for o, g in gap.items())))
    else:
        out.append(("T4", None, "runs missing"))
    return out


EXPECTED = {True: "as expected", False: "NOT as expected", None: "pending"}  # section 10's words: never a verdict


def turn_lines(by_opt):
    """Section 10's printout: each expectation, what was found, and whether it held (never a verdict: one seed)."""
    return [f"{name} {EXPECTED[held]}: {found}" for name, held, found in turn_expectations(by_opt)]


def turn_detail_lines(by_opt, steps=(0, 10, 50, 100, 190)):
    """Described after the runs (added 2026-11-25 once they were in; no expectation rests on it): per optimizer, logn's
    emb_turn, rms(E) against step 0's, self_logit, and its self_logit above the control's at the same step. The control
    has no self-logit to unlearn, so its self_logit (which rises for every arm as the model learns which tokens are
    frequent: the input token usually is one) is the baseline the excess is read against."""
    out = []
    for opt, by in by_opt.items():
        if not ("logn" in by and "control" in by):
            continue
        t, z, zc, e = (logged(by[a], k) for a, k in (("logn", "emb_turn"), ("logn", "self_logit"),
                                                      ("control", "self_logit"), ("logn", "emb_rms")))
        out.append(f"{opt:5} logn at steps {', '.join(map(str, steps))}: turn " + ", ".join(f"{t[s]:.3f}" for s in steps)
                   + " rad; rms(E) / step 0's " + ", ".join(f"{e[s] / e[0]:.2f}" for s in steps)
                   + "; self_logit " + ", ".join(f"{z[s]:.2f}" for s in steps)
                   + "; above the control's " + ", ".join(f"{z[s] - zc[s]:+.2f}" for s in steps))
    return out


BRANCH_STEPS = (0, 10, 50, 100, 190)


def branch_expectations(branches, turn):
    """B1, B2 and check C (docstring) held against the re-made logn runs `branches` and the first nine `turn` (both
    {optimizer: {arm: run}}): [(name, held or None where runs are missing, what was found)]."""
    have = [o for o in ("adamw", "tiger", "lamb") if "logn" in branches.get(o, {})]
    ratio = {o: logged(branches[o]["logn"], "branch_ratio") for o in have}
    out = []
    if "adamw" in ratio:
        out.append(("B1", ratio["adamw"][10] > 1, f"adamw: logn's branch_ratio at step 10 is {ratio['adamw'][10]:.2f}"))
    else:
        out.append(("B1", None, "runs missing"))
    rel = [o for o in ("tiger", "lamb") if o in ratio]
    if len(rel) == 2:
        ok = all(ratio[o][10] < 1 and ratio[o][50] < 1 and ratio[o][100] > 1 for o in rel)
        out.append(("B2", ok, "; ".join(f"{o}: at steps 10, 50, 100 " + ", ".join(f"{ratio[o][s]:.2f}" for s in (10, 50, 100))
                                        for o in rel)))
    else:
        out.append(("B2", None, "runs missing"))
    if have:
        worst = max(abs(logged(branches[o]["logn"], k)[s] - v) for o in have for k in ("emb_turn", "self_logit")
                    for s, v in logged(turn[o]["logn"], k).items())
        out.append(("C", worst <= 1e-6, f"the re-made runs' emb_turn and self_logit differ from the committed ones' by at "
                                        f"most {worst:.1e}"))
    return out


def branch_lines(branches, turn):
    """The printout of B1, B2 and C, then logn's branch_ratio and self_logit per optimizer at BRANCH_STEPS, and the
    logged steps where the ratio first exceeds 1 and where it is largest (those two added after the runs were in,
    2026-11-26: described, no expectation rests on them)."""
    lines = [f"{n} {EXPECTED[ok]}: {found}" for n, ok, found in branch_expectations(branches, turn)]
    for o, by in branches.items():
        b, z = logged(by["logn"], "branch_ratio"), logged(by["logn"], "self_logit")
        cross = next((s for s in sorted(b) if b[s] > 1), None)
        peak = max(b, key=b.get)
        lines.append(f"  {o:5} logn at steps {', '.join(map(str, BRANCH_STEPS))}: branch_ratio "
                     + ", ".join(f"{b[s]:.2f}" for s in BRANCH_STEPS) + "; self_logit "
                     + ", ".join(f"{z[s]:.2f}" for s in BRANCH_STEPS)
                     + f"; the ratio first above 1 at step {cross}, largest at step {peak} ({b[peak]:.2f})")
    return lines


# ----------------------------------------------------------------------------------------------------
# Added 2026-11-26 after all the data, on issue 33's review: what the report had read wrongly. Reporting only.

def branch_weight_lines(branches):
    """Weights are not function. Per optimizer, from section 10's re-made logn runs (seed 1, steps 0-190): the rms of
    the branches' weights (resid_rms) at the first and last logged step, beside what the branches ADD to the final
    norm's input (branch_ratio) at step 100, at its largest and at the last step. Under a relative step the weights
    hardly move while what they add grows past the embedding: a coherent change of tiny weights (section 6 shows the
    same for a d x d matrix)."""
    out = []
    for o in ("tiger", "lamb", "adamw"):
        r = branches.get(o, {}).get("logn")
        if not r:
            continue
        w, b = logged(r, "resid_rms"), logged(r, "branch_ratio")
        first, last, peak = min(w), max(w), max(b, key=b.get)
        cross = next((t for t in sorted(b) if b[t] > 1), None)
        above = cross is not None and all(b[t] > 1 for t in b if t >= cross)
        out.append(f"{o:5} logn (seed 1): the branches' weights, rms {w[first]:.3e} at step {first} -> {w[last]:.3e} at "
                   f"step {last} ({w[last] / w[first]:.3g}x); what they add, branch_ratio {b[100]:.2f} at step 100, "
                   f"largest {b[peak]:.2f} at step {peak}, {b[max(b)]:.2f} at step {max(b)}"
                   + (f"; above 1 at every logged step from {cross} to {max(b)}" if above else
                      f"; first above 1 at step {cross}"))
    return out


def configuration_lines(runs):
    """What differs between the optimizers besides the step's relativity (issue 33): per main group, the lr, the weight
    decay and how it is applied, the betas and eps (optim.py's reference constants for Tiger and LAMB, the run's Config
    for AdamW), and the gradient clipping that runs before every step, with the raw gradient norm logged before it
    (train.py logs clip_grad_norm_'s return value): median over the group's logged steps, and the lowest."""
    import optim
    import torch
    adam_eps = torch.optim.AdamW([torch.zeros(1, requires_grad=True)]).defaults["eps"]
    how = {"adamw": "decoupled, x lr", "tiger": "decoupled, x the RMS-scaled step", "lamb": "inside r, so under the trust ratio"}
    out = []
    for opt in ("adamw", "tiger", "lamb"):
        rs = [r for r in runs if r["group"] == opt]
        if not rs:
            continue
        c = rs[0]["config"]
        wd = c.get("weight_decay")
        wd = optim.DEFAULT_WEIGHT_DECAY[opt] if wd is None else wd
        betas = {"adamw": f"betas ({c['beta1']:g}, {c['beta2']:g}), eps {adam_eps:g}",
                 "tiger": f"beta {optim.TIGER_BETA:g} (one momentum, no second moment)",
                 "lamb": f"betas ({optim.LAMB_BETAS[0]:g}, {optim.LAMB_BETAS[1]:g}), eps {optim.LAMB_EPS:g}"}[opt]
        lrs = sorted({r["config"]["lr"] for r in rs})
        norms = [h["grad_norm"] for r in rs for h in r["history"] if h.get("grad_norm") is not None]
        clip = sorted({r["config"]["grad_clip"] for r in rs})
        out.append(f"{opt:5}: peak lr {', '.join(f'{x:g}' for x in lrs)} ("
                   + ("appendix A's, not swept" if opt == "adamw" else "sweep S") + f"); weight decay {wd:g} ({how[opt]}); "
                   + betas + f"; gradient clipped to norm {', '.join(f'{x:g}' for x in clip)} before every step: the raw "
                   f"norm's median {np.median(norms):.1f}, lowest {min(norms):.2f} ({len(norms)} logged steps of "
                   f"{len(rs)} runs)")
    return out


def rank_one_growth(make, d=768, lr=3e-3, steps=100, seed=0):
    """What a relative step bounds, and what it doesn't. A d x d matrix P, orthogonal at init (as ortho's head is),
    takes `steps` steps at a constant `lr` on one fixed rank-1 gradient -u v^T (a gradient that keeps pointing the same
    way), with the optimizer `make(params, lr)` builds (no weight decay). Returns (|P_T|_F / |P_0|_F,
    |P_T|_op / |P_0|_op): the Frobenius norm, which the relative step bounds by e^(steps lr), and the operator norm, the
    most P can stretch one direction, which it does not bound: each step adds a rank-1 matrix of Frobenius norm about
    lr |P|_F, and those add up in ONE direction, so |P|_op grows by about steps lr |P|_F = steps lr sqrt(d) while |P|_F
    grows by only sqrt(1 + (steps lr)^2)."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen))
    u, v = torch.randn(d, 1, generator=gen), torch.randn(d, 1, generator=gen)
    grad = -(u @ v.T) / (u.norm() * v.norm())
    p = torch.nn.Parameter(q.clone())
    opt = make([p], lr)
    for _ in range(steps):
        p.grad = grad.clone()
        opt.step()
    norms = lambda m, o: float(torch.linalg.matrix_norm(m, ord=o))  # noqa: E731
    return norms(p.detach(), "fro") / norms(q, "fro"), norms(p.detach(), 2) / norms(q, 2)
