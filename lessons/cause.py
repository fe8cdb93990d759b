"""
Why the optimizer decides: controls that change one thing each (issue 33). The plan, the predictions under each
hypothesis and the verdict rules below were written on 2026-11-26, before any run of this plan existed, and committed
with reproduce.py's 'cause' plan; the runs are made from a git worktree pinned at that commit. A rule added later is
marked so, with its date.

What appendix B showed, and what it did not
    Under Tiger and LAMB (lr 3e-3 from sweep S, weight decay 0.01, their references' betas) logn lags ortho early
    (claim 1 SUPPORTED); under AdamW (lr 1e-3, decay 0.1, betas 0.9/0.95) it does not. The two sides differ in the
    step's relativity AND in lr, decay, betas and the update rule, so the data show that the optimizer CONFIGURATION
    decides. Its leading explanation, that a relative step moves logn's small embedding (sigma = ln(n)/d = 0.0122)
    less than a sigma = 0.02 one, is untested. Its control (ortho at logn's sigma) has a learned d x d matrix P after
    the norm whose operator norm a relative step does not bound, so "logn pays for its self-logit" was confounded.

The setting (reproduce.py, scale 'cause')
    Appendix B's optim configuration (d = 768, 2 layers, 12 heads, T = 64, 8 sequences a step, n = 11,706 with
    vocab=corpus, residual_std = 1e-4, warmup 100 then cosine to lr/10 at step 1200, clipping at 1.0, fp32, dense
    val-subset loss every 10 steps to step 200, whole-split val loss every 100), STOPPED at step STEPS = 400 of the
    same schedule (the effect lives early: appendix B's logn - ortho at step 100 is +0.75 nats under Tiger, +0.62
    under LAMB), with train.py's log_rows every 10 steps: emb_turn, self_logit, branch_ratio (what the residual
    branches add against the embedding, at the final norm's input) and, for heads with P, head_opnorm = |P|_2 and
    logit_scale = g d rms(E) |P|_2. Seeds 1-3 (the campaign's; a seed drives init and data order). The first 400
    steps of a 1200-step run are the same computation whatever max_iters says (the lr schedule is pinned by
    lr_decay_iters = 1200), so a new run is paired with the committed runs of its seed.

The arms (sigma = 0.02 unless named)
    (a) The self-logit alone, with no learned matrix in the head: shuffle_logn = the half swap at logn's sigma
        (parameter-free, no self-logit, logn's small sigma), under Tiger and LAMB at 3e-3, seeds 1-3. Read against
        the committed logn (same sigma, tied self-logit) and shuffle (same head, sigma = 0.02) of the same seeds.
    (b) The relative step alone: each optimizer's absolute twin (optim.py, relative='none'): the same rule with each
        weight's RMS replaced by a scale frozen at the first step (the token embedding: 0.02, the sigma = 0.02 arms'
        init; every other tensor: its own RMS at init), so at step 0 every sigma = 0.02 arm takes exactly the
        original's step and only the relativity differs. Tiger's twin is essentially Lion (Chen et al. 2023) with
        one beta; LAMB's twin is AdamW with LAMB's betas, eps and decay. Arms logn, ortho and shuffle_logn, seeds
        1-3, at the matched lr 3e-3. Then each twin's own lr: sweep S's rule unchanged (tied, sigma = 0.02, seed 100,
        the WHOLE 1200-step schedule, grid 1e-3, 3e-3, 1e-2, 3e-2, lowest best whole-split val, the smallest lr within
        0.02 nats of it, one extension beyond a winning end; analysis05.pick_lr). It must run the whole schedule:
        applied to the committed Tiger and LAMB sweeps truncated at step 400, the rule picks 1e-2 for both, not the
        3e-3 it picks on 1200 steps (computed 2026-11-26 from committed runs, before this plan). If the twin's pick
        differs from 3e-3, logn and ortho run at it too, seeds 1-3.
    (c) Which parameter's relativity matters, under Tiger's rule at 3e-3: relative steps on the token embedding only
        (relative='embedding') and on every other matrix only ('body'; norm gains keep Tiger's absolute rule in all
        four), arms logn and ortho, seeds 1-3. With the committed Tiger runs ('all') and the twin of (b) ('none')
        they make a 2 x 2.
    Check R (first run): ortho under Tiger, seed 1, re-made here; its val_subset_loss and val_loss at every step
        <= 400 must equal the committed run's within R_TOLERANCE = 1e-3 nats (float rounding across CPU kinds), so
        that new runs may be paired with committed ones. If R fails, the committed arms that (a), (b) and (c) read
        are re-made in this plan first (added then, dated), and no verdict uses a committed run. ortho under LAMB,
        seed 1 is re-made too (last of the matched-lr runs): P's norm under LAMB, descriptive.

Order, and the budget (<= 12 core-hours)
    R; (a) Tiger, LAMB; (b) Tiger's twin at 3e-3; (c); (b) LAMB's twin at 3e-3; ref LAMB; the twins' sweeps; the twins'
    runs at their own lr. One 400-step run ~ 9.5 min on one thread (appendix B's 1200-step runs took ~27 min), so 38
    runs ~ 6.0 h, 8 sweep runs ~ 3.6 h, 12 runs at the picked lrs ~ 1.9 h: ~11.5 core-hours. If a sweep extends
    (+0.45 h each), LAMB's twin's picked-lr runs come last and are cut if the budget is spent (said so in the report).

The statistics: lesson 04's words (analysis.compare: paired t intervals over the seeds, MARGIN = 0.02 nats,
"A higher" = 95% interval above 0, "shown not to lag" = 90% interval's upper end below +MARGIN), on
    PRIMARY   start = mean val-subset loss over steps 10-200 (analysis05.start; 20 dense points, 8,192 tokens each)
    SECONDARY early400 = mean whole-split val loss over steps 100-400 (4 points). A verdict whose primary and secondary
              readings differ is printed with both and flagged "differs"; the primary is the answer.
    Every verdict is also shown as the paired gap over time (dense to step 200, then every 100), pointwise 95%.

Hypotheses, and what each predicts (written before the data; the verdicts come from the rules, whatever these say)
    H_R (relativity): logn lags because a relative step moves each weight in proportion to its size, so logn's small
        E moves less (per entry, lr x 0.0122 against lr x 0.02 at init) and its tied self-logit is undone later.
        Predicts: (b) under the twins logn does not lag ortho (at the matched lr, and at the twin's own lr);
        (c) the embedding's relativity carries the lag; (a) by itself says nothing about H_R.
    H_S (small steps): at lr 3e-3 every weight of these optimizers moves ~lr x 0.02 = 6e-5 a step, ~17x less than
        AdamW's ~1e-3, and logn has the most to undo (its self-logit); relativity itself adds little (at the matched
        lr the twin's first steps ARE the original's, and in 400 steps a relative step can change a weight's size by
        at most exp(sum lr_t) ~ e^1.0). Predicts: (b) at 3e-3 logn still lags under the twins; at a larger own lr the
        lag shrinks or goes; (c) neither part's relativity carries much.
    H_C (the rest of the configuration: the sign/normalised update, betas, decay, clipping): logn lags under the
        twins at both lrs, as under the originals.
    (a) separates the tied self-logit from the small sigma without P: "self-logit" if logn lags shuffle_logn and
        shuffle_logn is shown not to lag shuffle; "small sigma" if shuffle_logn lags shuffle and logn is shown not
        to lag shuffle_logn; "both" if both lag; else "undecided" (analysis.control_verdict's rule, amendments c and
        e included, with shuffle_logn as the control and shuffle as the sigma = 0.02 arm).

Verdict rules
    (a) per optimizer (Tiger, LAMB): the rule just above, on start.
    (b) per twin, on start, logn - ortho under the twin at the matched lr (M) and at its own lr (O; O = M if the
        sweep picks 3e-3):
        "relativity decides"        logn shown not to lag ortho at M and at O;
        "relativity is not needed"  logn - ortho "A higher" at M and at O (logn still slowest with absolute steps);
        "depends on the lr"         "A higher" at one and shown not to lag at the other;
        "undecided"                 otherwise.
        Beside it, descriptive: the lag the twin removes at M, (logn - ortho)_original - (logn - ortho)_twin, paired
        by seed, with its interval; and logn - shuffle_logn under the twin (is the self-logit still a cost?).
    (c) with G_cell = logn - ortho per seed on start in the four cells (all, embedding, body, none):
        embedding effect  E = ((G_all - G_body) + (G_embedding - G_none)) / 2
        body effect       B = ((G_all - G_embedding) + (G_body - G_none)) / 2
        interaction       I = (G_all - G_body) - (G_embedding - G_none)        (descriptive)
        "the embedding's relativity carries the lag"  E "A higher" and B shown not positive (90% upper < +MARGIN);
        "the body's"                                  B "A higher" and E shown not positive;
        "both"                                        E and B "A higher";
        "neither"                                     E and B both shown not positive;
        "undecided"                                   otherwise.
        Each effect is one paired comparison at alpha = 0.05 (no Bonferroni: the verdicts above are intersections of
        tests, each at alpha). Shares E / (G_all - G_none) and B / (G_all - G_none) are printed, descriptive.
    What each outcome means, said now: (b) "relativity decides" with (c) "embedding" supports H_R as the lesson tells
        it. (b) "relativity is not needed" supports H_S or H_C, and (c) then decides nothing ("neither" expected).
        (b) "depends on the lr" with a lag at M and none at O supports H_S: the step's size, not its relativity.
        "undecided" is reported as such; no run is added or re-run to move it.

Logged, descriptive (no verdict): head_opnorm and logit_scale of every ortho run (twins, 2 x 2, the two re-made
originals), branch_ratio of every run in the dense phase.
"""

import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import analysis05 as A5  # noqa: E402

STEPS = 400  # every run of the plan stops here (its schedule still runs to step 1200)
SEEDS = [1, 2, 3]
SWEEP_SEED = A5.SWEEP_SEED  # 100, as sweep S
B_ARMS = ["logn", "ortho", "shuffle_logn"]  # (b) at the matched lr
B_ARMS_PICKED = ["logn", "ortho"]  # (b) at the twin's own lr
C_ARMS = ["logn", "ortho"]  # (c)
R_TOLERANCE = 1e-3  # check R, nats
# The commit that wrote this docstring and the plan (recorded in the next commit: a commit can't name itself). The
# campaign runs from a worktree pinned here; every run records the commit it was made at (reproduce.py's git_commit).
PREREGISTERED_AT = "076beb6448b4c667d1e2648e3400d34f36fd68ac"


def twin_lrs(runs):
    """Each twin's lr from its sweep runs, by sweep S's rule (analysis05.pick_lr on the best whole-split val loss of
    each lr's 1200-step tied run): {optimizer: dict(lr, next)}, lr None until decided, next the lrs still to run."""
    out = {}
    for opt in ("tiger", "lamb"):
        best = {r["config"]["lr"]: r["best_val"] for r in runs if r["group"].startswith(f"sweep {opt}-twin ")}
        out[opt] = A5.pick_lr(best)
    return out


# ----------------------------------------------------------------------------------------------------
# The statistics and the verdicts (the rules of the docstring, in code; written 2026-11-26 while the first runs were
# in progress and before any of them was read)

import analysis  # noqa: E402
from analysis import MARGIN, compare, paired  # noqa: E402

MATCHED_LR = 3e-3  # sweep S's choice for Tiger and LAMB: the twins' matched lr


def early400(run):
    """Mean whole-split val loss over the evaluations at steps 100-400 (the secondary statistic)."""
    vals = [r["val_loss"] for r in run["history"] if r.get("val_loss") is not None and 100 <= r["step"] <= STEPS]
    return float(np.mean(vals)) if vals else math.nan


STATS = {"start": A5.start, "early400": early400}
PRIMARY, SECONDARY = "start", "early400"


def cells(new_runs, committed_runs):
    """{cell: {arm: {seed: run}}}: 'tiger' and 'lamb' (the committed originals), 'a tiger', 'a lamb', 'twin tiger lr=..',
    'twin lamb lr=..', 'c embedding', 'c body' (the new runs), 'ref tiger', 'ref lamb' (check R's re-makes)."""
    out = {opt: analysis.by_arm([r for r in committed_runs if r["group"] == opt]) for opt in ("tiger", "lamb")}
    for r in new_runs:
        g = r["group"]
        name = (g.replace("b ", "twin ").replace("-twin", "") if g.startswith("b ")
                else f"c {g.split()[2].split('-')[0]}" if g.startswith("c ") else g)
        out.setdefault(name, {}).setdefault(r["arm"], {})[r["seed"]] = r
    return out


def check_r(new_runs, committed_runs):
    """Check R: each re-made run against the committed run of the same id, at every shared step <= STEPS: the largest
    |difference| of val_subset_loss and val_loss. Returns [dict(id, steps, max_abs_diff, passed)]."""
    old = {r["id"]: r for r in committed_runs}
    rows = []
    for r in new_runs:
        if not r["group"].startswith("ref "):
            continue
        rid = r["id"].replace(r["group"], r["group"][4:], 1)  # 'ref tiger|ortho|seed=1' -> 'tiger|ortho|seed=1'
        if rid not in old:
            continue
        a = {(h["step"], k): h[k] for h in old[rid]["history"] for k in ("val_subset_loss", "val_loss")
             if h.get(k) is not None and h["step"] <= STEPS}
        b = {(h["step"], k): h[k] for h in r["history"] for k in ("val_subset_loss", "val_loss") if h.get(k) is not None}
        both = sorted(set(a) & set(b))
        diff = max(abs(a[k] - b[k]) for k in both) if both else math.nan
        rows.append(dict(id=rid, steps=len(both), max_abs_diff=diff, passed=bool(diff <= R_TOLERANCE)))
    return rows


def _row(a_runs, b_runs, stat, a, b):
    return dict(a=a, b=b, **compare(paired(a_runs, b_runs, STATS[stat])))


def _lags(r):
    return r["word"] == "A higher"


def _not_lag(r):  # shown not to lag: the 90% interval's upper end below +MARGIN (analysis.py, amendment c)
    return r.get("ci90") is not None and r["ci90"][1] < MARGIN


def verdict_a(cs, opt, stat=PRIMARY):
    """(a): the self-logit or the small sigma, with no learned matrix: analysis.control_verdict's rule with shuffle_logn
    as the control and shuffle (sigma = 0.02) as the reference arm."""
    orig, new = cs.get(opt, {}), cs.get(f"a {opt}", {})
    by = {"logn": orig.get("logn", {}), "control": new.get("shuffle_logn", {}), "ortho": orig.get("shuffle", {})}
    v = analysis.control_verdict(by, stat=STATS[stat])
    names = {"control": "shuffle_logn", "ortho": "shuffle", "logn": "logn"}
    for r in v["rows"] + ([v["slow"]] if v.get("slow") else []):
        r["a"], r["b"] = names[r["a"]], names[r["b"]]
    return dict(v, optimizer=opt, stat=stat)


def _seed_diffs(a_runs, b_runs, stat):
    seeds = sorted(set(a_runs) & set(b_runs))
    return seeds, [STATS[stat](a_runs[s]) - STATS[stat](b_runs[s]) for s in seeds]


def verdict_b(cs, opt, picked_lr, stat=PRIMARY):
    """(b): logn - ortho under opt's absolute twin at the matched lr (M) and at its own lr (O = picked_lr; None while
    its sweep is undecided). Also the lag the twin removes at M (paired by seed) and logn - shuffle_logn under it."""
    m = cs.get(f"twin {opt} lr={MATCHED_LR:g}", {})
    rows = {"M": _row(m.get("logn", {}), m.get("ortho", {}), stat, "logn", "ortho")}
    if picked_lr is not None and picked_lr != MATCHED_LR:
        o = cs.get(f"twin {opt} lr={picked_lr:g}", {})
        rows["O"] = _row(o.get("logn", {}), o.get("ortho", {}), stat, "logn", "ortho")
    elif picked_lr == MATCHED_LR:
        rows["O"] = rows["M"]
    orig = cs.get(opt, {})
    g_orig = dict(zip(*_seed_diffs(orig.get("logn", {}), orig.get("ortho", {}), stat)))
    g_twin = dict(zip(*_seed_diffs(m.get("logn", {}), m.get("ortho", {}), stat)))
    seeds = sorted(set(g_orig) & set(g_twin))
    removed = dict(a=f"{opt} gap", b="twin gap", **compare([g_orig[s] - g_twin[s] for s in seeds]))
    selfl = _row(m.get("logn", {}), m.get("shuffle_logn", {}), stat, "logn", "shuffle_logn")
    words = [r["word"] for r in rows.values()]
    if "O" not in rows or any(w == "pending" or w.startswith("invalid") for w in words):
        verdict = "PENDING"
    elif _not_lag(rows["M"]) and _not_lag(rows["O"]):
        verdict = "relativity decides"
    elif _lags(rows["M"]) and _lags(rows["O"]):
        verdict = "relativity is not needed"
    elif (_lags(rows["M"]) and _not_lag(rows["O"])) or (_not_lag(rows["M"]) and _lags(rows["O"])):
        verdict = "depends on the lr"
    else:
        verdict = "undecided"
    return dict(verdict=verdict, optimizer=opt, stat=stat, picked_lr=picked_lr, rows=rows, removed=removed,
                self_logit=selfl)


def verdict_c(cs, stat=PRIMARY):
    """(c): the 2 x 2 under Tiger's rule at the matched lr. G_cell = logn - ortho per seed in the cells all (committed
    Tiger), embedding-only, body-only and none (the twin); the embedding and body main effects and their interaction,
    per seed over the seeds all four cells share."""
    names = {"all": "tiger", "embedding": "c embedding", "body": "c body", "none": f"twin tiger lr={MATCHED_LR:g}"}
    G = {}
    for cell, key in names.items():
        c = cs.get(key, {})
        G[cell] = dict(zip(*_seed_diffs(c.get("logn", {}), c.get("ortho", {}), stat)))
    seeds = sorted(set.intersection(*(set(g) for g in G.values())))
    g = {cell: np.array([G[cell][s] for s in seeds]) for cell in G}
    E = compare((g["all"] - g["body"] + g["embedding"] - g["none"]) / 2)
    B = compare((g["all"] - g["embedding"] + g["body"] - g["none"]) / 2)
    I = compare((g["all"] - g["body"]) - (g["embedding"] - g["none"]))
    total = compare(g["all"] - g["none"])
    if any(r["word"] == "pending" or r["word"].startswith("invalid") for r in (E, B)):
        verdict = "PENDING"
    elif _lags(E) and _lags(B):
        verdict = "both"
    elif _lags(E) and _not_lag(B):
        verdict = "the embedding's relativity carries the lag"
    elif _lags(B) and _not_lag(E):
        verdict = "the body's relativity carries the lag"
    elif _not_lag(E) and _not_lag(B):
        verdict = "neither"
    else:
        verdict = "undecided"
    return dict(verdict=verdict, stat=stat, seeds=seeds, E=E, B=B, I=I, total=total,
                gaps={cell: g[cell].tolist() for cell in g})


# ----------------------------------------------------------------------------------------------------
# The report (appendix B's section on the controls): lines to print, and the paired gaps over time

def load(new_path=None, committed_path=None):
    """(new runs, committed optim runs) from lessons/data/repro_cause and lessons/data/repro_optim by default."""
    import reproduce
    return (reproduce.load_runs(new_path or os.path.join(HERE, "data", "repro_cause")),
            reproduce.load_runs(committed_path or os.path.join(HERE, "data", "repro_optim")))


def _fmt(r):
    if r["word"] == "pending":
        return f"{r['a']} - {r['b']}: pending ({r['n']} of {len(SEEDS)} seeds)"
    lo, hi = r["ci95"]
    return f"{r['a']} - {r['b']} {r['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}] ({r['word']})"


def progress_lines(new_runs):
    """How far the plan is: runs in, by part, and the commit they were made at."""
    import reproduce
    plan = reproduce.plan("cause", new_runs)
    have = {r["id"] for r in new_runs}
    parts = {}
    for g, a, o in plan:
        part = g.split()[0]
        n, d = parts.get(part, (0, 0))
        parts[part] = (n + 1, d + (reproduce.run_id(g, a, o["seed"]) in have))
    commits = sorted({r.get("git_commit", "?")[:7] for r in new_runs})
    return [f"{len(have)} of {len(plan)} planned runs in (so far: the plan grows when a sweep decides): "
            + ", ".join(f"{p} {d}/{n}" for p, (n, d) in parts.items()),
            f"made at commit(s) {', '.join(commits) or '-'}; pre-registered at {PREREGISTERED_AT[:7]}"]


def report_lines(new_runs, committed_runs, stat=PRIMARY):
    """Every verdict of the plan on `stat`, each with the rows it rests on; PENDING where runs are missing."""
    out = []
    for r in check_r(new_runs, committed_runs):
        out.append(f"check R: {r['id']} re-made, largest |diff| over {r['steps']} evaluations {r['max_abs_diff']:.2g} "
                   f"-> {'passed' if r['passed'] else 'FAILED'}")
    cs = cells(new_runs, committed_runs)
    for opt in ("tiger", "lamb"):
        v = verdict_a(cs, opt, stat)
        out.append(f"(a) {opt}: {v['verdict']}" + "".join(f"; {_fmt(r)}" for r in v["rows"]))
    picks = twin_lrs(new_runs)
    for opt in ("tiger", "lamb"):
        v = verdict_b(cs, opt, picks[opt]["lr"], stat)
        own = "sweep pending" if v["picked_lr"] is None else f"own lr {v['picked_lr']:g}"
        out.append(f"(b) {opt}'s twin ({own}): {v['verdict']}; at 3e-3 {_fmt(v['rows']['M'])}"
                   + (f"; at {v['picked_lr']:g} {_fmt(v['rows']['O'])}" if "O" in v["rows"] and v["picked_lr"] != MATCHED_LR
                      else ""))
        out.append(f"    lag the twin removes: {_fmt(v['removed'])}; under the twin {_fmt(v['self_logit'])}")
    v = verdict_c(cs, stat)
    out.append(f"(c) tiger 2 x 2: {v['verdict']}; embedding effect {_fmt(dict(v['E'], a='E', b='0'))}; "
               f"body effect {_fmt(dict(v['B'], a='B', b='0'))}")
    return out


PREDICTIONS = {  # the docstring's, one line per part: what each hypothesis expects (written before the data)
    "(a) self-logit without P": dict(H_R="(says nothing)", H_S="(says nothing)", H_C="(says nothing)"),
    "(b) Tiger's twin": dict(H_R="relativity decides", H_S="depends on the lr (lag at 3e-3, none at its own lr)",
                              H_C="relativity is not needed"),
    "(b) LAMB's twin": dict(H_R="relativity decides", H_S="depends on the lr (lag at 3e-3, none at its own lr)",
                             H_C="relativity is not needed"),
    "(c) Tiger 2 x 2": dict(H_R="the embedding's relativity carries the lag", H_S="neither", H_C="neither"),
}


def side_by_side(new_runs, committed_runs, stat=PRIMARY):
    """The predictions of each hypothesis beside the verdict the rules give (PENDING until the runs are in)."""
    cs, picks = cells(new_runs, committed_runs), twin_lrs(new_runs)
    got = {"(a) self-logit without P": " / ".join(f"{o}: {verdict_a(cs, o, stat)['verdict']}" for o in ("tiger", "lamb")),
           "(b) Tiger's twin": verdict_b(cs, "tiger", picks["tiger"]["lr"], stat)["verdict"],
           "(b) LAMB's twin": verdict_b(cs, "lamb", picks["lamb"]["lr"], stat)["verdict"],
           "(c) Tiger 2 x 2": verdict_c(cs, stat)["verdict"]}
    return [f"{part}: verdict {got[part]} | H_R expects {p['H_R']}; H_S {p['H_S']}; H_C {p['H_C']}"
            for part, p in PREDICTIONS.items()]


def opnorm_curves(new_runs):
    """{run id: (steps, head_opnorm)} of every new run that logged P's operator norm (ortho arms)."""
    out = {}
    for r in new_runs:
        rows = [h for h in r["history"] if h.get("head_opnorm") is not None]
        if rows:
            out[r["id"]] = ([h["step"] for h in rows], [h["head_opnorm"] for h in rows])
    return out
