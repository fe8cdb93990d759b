"""
Appendix A's report (the AdamW campaign, scale d768, and the older scales' map): the campaign's design in numbers,
steps to target, the design's resolution and measurement noise, and the older checks it printed. Its rules, fixed before
the d768 data: research/preregistrations/appendix_a.md. Reporting only: the verdicts come from claims.py.
"""

import itertools
import math

import numpy as np

from research.claims import CORE_FIXES, EXTRA_FIXES, alike_verdict, claim
from research.records import STATS, best, last_logged, measurement_noise, paired, stack, steps_to_target, val_curve
from research.stats import ALPHA, MARGIN, MIN_SEEDS, compare, interval, pooled_sd, t_quantile

TARGET_FRACTIONS = (0.5, 0.8, 0.95)


def targets(by_arm_, n):
    """The setting's target losses L_q = ln n - q (ln n - L*), L* the worst arm's mean best val."""
    means = [np.mean([best(r) for r in runs.values()]) for runs in by_arm_.values() if runs]
    worst = max(m for m in means if np.isfinite(m))  # a diverged run must not make every target NaN
    return {q: math.log(n) - q * (math.log(n) - worst) for q in TARGET_FRACTIONS}


def target_rows(by_arm_, n, ref="logn"):
    """Steps to each target L_q (see targets()), per arm: mean over the seeds that reach it, how many reach
    it, and the paired difference ref - arm (seeds where both reach it) with its 95% interval. `early_cross`:
    some run crosses the target before its first evaluation after step 0 (a straight line from step 0)."""
    out = []
    for q, t in targets(by_arm_, n).items():
        for a, runs in by_arm_.items():
            st = {s: steps_to_target(r, t) for s, r in runs.items()}
            first_eval = {s: (val_curve(r)[0][1:2].tolist() or [math.inf])[0] for s, r in runs.items()}
            ok = [v for v in st.values() if math.isfinite(v)]
            row = dict(q=q, target=t, arm=a, seeds=len(st), reached=len(ok),
                       mean=float(np.mean(ok)) if ok else math.inf,
                       early_cross=any(st[s] < first_eval[s] for s in st))
            if ref in by_arm_ and a != ref:
                rs = {s: steps_to_target(r, t) for s, r in by_arm_[ref].items()}
                d = [rs[s] - st[s] for s in sorted(set(rs) & set(st)) if math.isfinite(rs[s]) and math.isfinite(st[s])]
                row.update(diff=float(np.mean(d)) if d else math.nan, ci95=interval(d, 1 - ALPHA), pairs=len(d))
            out.append(row)
    return out


def resolution(by_arm_, pairs, stat, seeds=(3, 5)):
    """How finely the design can decide: the sd over seeds of the paired differences A - B of `stat`
    (stats.pooled_sd over the `pairs` that have >= 2 seeds) and the half-width of the 90% interval (what "alike" must
    fit inside +-MARGIN) it implies with each number of seeds. Returns (pooled sd, {seeds: half-width}, number of pairs
    used). A rough estimate: with 2-3 seeds each pair's sd has 1-2 degrees of freedom, and pairs share runs."""
    sd, _, used = pooled_sd(paired(by_arm_[a], by_arm_[b], stat) for a, b in pairs
                            if by_arm_.get(a) and by_arm_.get(b))
    if not used:
        return math.nan, {}, 0
    return sd, {k: t_quantile(1 - ALPHA, k - 1) * sd / math.sqrt(k) for k in seeds}, used


def measurement_rows(by_arm_, block=1):
    """measurement_noise() for every pair of arms and every seed both have with window losses:
    a list of dict(a, b, seed, se)."""
    out = []
    for a, b in itertools.combinations(sorted(by_arm_), 2):
        for s in sorted(set(by_arm_[a]) & set(by_arm_[b])):
            se = measurement_noise(by_arm_[a][s], by_arm_[b][s], block)
            if se is not None:
                out.append(dict(a=a, b=b, seed=s, se=se))
    return out


def fixes_vs_tied(by_arm_, stat="early", fixes=("logn",) + tuple(CORE_FIXES + EXTRA_FIXES)):
    """Each fix against plain tying on `stat` (F - tied, paired by seed): the comparison a student wants first. One row
    per fix that has runs, with compare()'s words; k = the number of fixes for the Bonferroni interval."""
    present = [f for f in fixes if by_arm_.get(f)]
    if not by_arm_.get("tied"):
        return []
    return [dict(a=f, b="tied", **compare(paired(by_arm_[f], by_arm_["tied"], stat), k=len(present))) for f in present]


def claim_no_gain_two_sided(by_arm_, fixes=["logn"] + CORE_FIXES, base="tied", stat="best"):
    """Claim 4 under its ORIGINAL rule (before amendment b): SUPPORTED only if every F is "alike" tied (two-sided);
    CONTRADICTED if some F differs from tied with its Bonferroni interval and is not alike; else INCONCLUSIVE. Shown in
    appendix A so the reader sees what amendment b changed."""
    return claim(by_arm_, [(f, base) for f in fixes], stat, alike_verdict, names=[base] + list(fixes))


def shared_error_line(setting, claim4, meas):
    """What a measurement error shared by every seed would do to claim 4's SUPPORTED in `setting`: shift every seed's
    F - tied by twice the largest measured error of a paired difference (`meas`: rows with a, b, seed, se, setting) and
    name the fixes that would then no longer be shown within the margin. It says where that error was measured, and
    when the setting has no F - tied pair with window losses (the error is then borrowed from other pairs). None when
    claim 4 isn't SUPPORTED there or nothing was measured."""
    if not meas or not claim4 or claim4["verdict"] != "SUPPORTED":
        return None
    src = max(meas, key=lambda r: r["se"])
    floor = 2 * src["se"]
    fails = [r["a"] for r in claim4["rows"] if r["ci90"][0] - floor <= -MARGIN]
    own = any(r["setting"] == setting and "tied" in (r["a"], r["b"]) for r in meas)
    where = f"{src['a']} - {src['b']} at {src['setting']}, seed {src['seed']}" + (
        "" if own else f"; no F - tied pair at {setting} has window losses, so this error is borrowed from other pairs")
    return (f"Claim 4 and the measurement: shifting every seed's F - tied by a shared measurement error of {floor:.3f} "
            f"nats (twice the largest measured: {where}), " + (
                f"{', '.join(fails)} would no longer be shown within the margin: 'no gain' holds for the measured val "
                "split, not beyond its own error" if fails else "every fix still stays within the margin") + ".")


def design_lines(config, n, n_train, n_val_pred, runs):
    """Appendix A's setting in numbers, read off a run's Config and the data: what comes from the post, and what makes
    it a small, controlled setting rather than a pre-training run. Returns printable lines."""
    c, d, T, B = config, config.n_embd, config.block_size, config.batch_size
    tokens = c.max_iters * B * T
    out = [f"model: n = {n:,} (ln n = {math.log(n):.2f}), d = {d}, {c.n_layer} layers x {c.n_head} heads, T = {T}, "
           f"zero-init residual = {c.zero_init_residual}, pos = {c.pos}"]
    for name, sigma in {"sigma=0.02": 0.02, "sigma=d^-1/2": d ** -0.5, "logn / control": math.log(n) / d}.items():
        out.append(f"  {name:15} sigma = {sigma:.4f}, d*sigma = {d * sigma:5.2f}")
    out.append(f"training: {c.max_iters} steps of {B} x {T} = {B * T} tokens = {tokens:,} tokens, "
               f"{tokens / n_train:.1f} passes over the {n_train:,}-token train split; warmup {c.warmup_iters}, "
               f"one peak lr {c.lr:g} (AdamW)")
    out.append(f"validation: the whole val split, {n_val_pred:,} predicted tokens, every {c.eval_interval} steps")
    if runs:
        dtypes = sorted({"float32 (dtype=auto)" if r["config"].get("dtype") == "auto" else
                         r["config"].get("dtype", "?") for r in runs})
        gap = [last_logged(r, "val_loss") - last_logged(r, "eval_train_loss") for r in runs
               if last_logged(r, "eval_train_loss")]
        out.append(f"runs: {', '.join(dtypes)} on a CPU, {runs[0]['threads']} thread each; at the last step val - "
                   f"train loss = {np.median(gap):.2f} nats (median over runs): the model has begun to memorise its "
                   f"{n_train:,} training tokens")
    return out


def target_lines(by_arm_, n):
    """target_rows() as printable lines: per target, each arm's mean step and how many seeds reach it, and the paired
    difference logn - arm with its 95% interval. '*' marks a target crossed before the first evaluation after step 0."""
    rows, out = target_rows(by_arm_, n), []
    for q in TARGET_FRACTIONS:
        rq = [r for r in rows if r["q"] == q]
        out.append(f"  q = {q} (target {rq[0]['target']:.3f})" + (" *" if any(r["early_cross"] for r in rq) else ""))
        for r in rq:
            vs = ""
            if "diff" in r and r["pairs"]:
                ci = f"[{r['ci95'][0]:+5.0f}, {r['ci95'][1]:+5.0f}]" if r["ci95"] else "[  n/a ]"
                vs = f"   logn - {r['arm']}: {r['diff']:+5.0f} steps {ci} ({r['pairs']} pairs)"
            out.append(f"    {r['arm']:8} step {r['mean']:6.0f}  ({r['reached']}/{r['seeds']} seeds reach it){vs}")
    return out


def map_rows(old):
    """The small-scale map ({'scale group': seed_gap_rows(...)}) of the older scales ({scale: settings}) and its table
    as printable lines; a group with one seed is labelled exploratory instead of given a word."""
    table, lines = {}, [f"{'scale / setting':22} {'seeds':>7}  {'early gap per seed':32} {'word (early)':28} "
                        f"{'best gap per seed':32} {'word (best)'}"]
    for scale, sets in old.items():
        for g, by in sets.items():
            row = seed_gap_rows(by)
            if row is None:
                continue
            table[f"{scale} {g}"] = row
            words = [row[k]["word"] if len(row["seeds"]) >= MIN_SEEDS else "exploratory (1 seed)"
                     for k in ("early", "best")]
            gaps = [" ".join(f"{x:+.3f}" for x in row["gap"][k]) for k in ("early", "best")]
            lines.append(f"{scale + ' ' + g:22} {','.join(map(str, row['seeds'])):>7}  {gaps[0]:32} {words[0]:28} "
                         f"{gaps[1]:32} {words[1]}")
    return table, lines


def relative_step(runs_by_seed):
    """Adam's relative step on the embedding, lr / rms(E), at every logged step: (steps, mean over seeds).
    Adam moves each entry by about lr per step whatever the gradient's size, so lr / rms(E) is the fraction of
    the embedding's own size that one step can change."""
    steps, _, rms = stack(runs_by_seed, "emb_rms")
    _, _, lr = stack(runs_by_seed, "lr")
    return steps, (lr / rms).mean(0)


def seed_gap_rows(by_arm_, fixes=CORE_FIXES, slow="logn"):
    """The small-scale map's row for one setting: per seed, logn - mean(other fixes) on early and best, plus
    the word of that gap over seeds (compare(): a summary of the map, not claim 1, which compares logn with each
    fix separately) when there are >= MIN_SEEDS. Uses every seed the setting has."""
    fixes = [f for f in fixes if by_arm_.get(f)]
    if not by_arm_.get(slow) or not fixes:
        return None
    seeds = sorted(set(by_arm_[slow]).intersection(*(set(by_arm_[f]) for f in fixes)))
    gap = {st: [STATS[st](by_arm_[slow][s]) - np.mean([STATS[st](by_arm_[f][s]) for f in fixes]) for s in seeds]
           for st in ("early", "best")}
    return dict(seeds=seeds, gap=gap, early=compare(gap["early"]), best=compare(gap["best"]))


