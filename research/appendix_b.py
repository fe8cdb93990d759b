"""
Appendix B's report (the optimizer campaign, scale 'optim', and its exploratory 'turn' runs): check B, sweep S, the
claims per optimizer, what the relative step bounds and what it does not, the measurement's precision, fragility and
sections 10-11's expectations, as printable lines. Its plan and rules, fixed before the data, with the dated additions
and corrections: research/preregistrations/appendix_b.md. Reporting only: the verdicts come from claims.py.
"""

import functools
import math

import numpy as np

from research.claims import all_claims, claim_slowest, control_verdict
from research.fragility import MEASURED_PAIRS, measurement_error
from data.prepare import load_data
from research.plans import BF16_TOLERANCE, RELATIVE, bf16_check, config_for, pick_lr, plan
from research.records import (START_STEPS, STAT_WORDS, STATS, committed_path, first_logged, last_logged, logged,
                              logn_gaps_at, paired, stack, start, val_curve)
from research.stats import MIN_SEEDS, compare, pooled_sd
from tiedgpt import GPTConfig, predicted_initial_loss, repeat_fraction
from config import Config
from train import lr_at

# The commit that wrote the pre-registration and the plan, recorded here on 2026-11-25 after Tiger's runs were in (a commit
# can't name itself). Every campaign run records the commit it ran at (reproduce.py's git_commit); the campaign runs
# from a worktree pinned here, so that fixes on main can't change runs in flight. provenance_lines checks it.
PREREGISTERED_AT = "3ece28e2cdf37b871843e037f9e31a01cdb0900b"
# The settings the claims judge (plans.SETTINGS["optim"]); AdamW's re-runs at rule R's init (logn, control, ortho only)
# are set beside appendix A's runs instead.
JUDGED = ("tiger", "lamb", "tiger, sigma=d^-1/2", "lamb, sigma=d^-1/2")


def claims(by_arm):
    """Appendix A's claims and control on one optimizer's setting, plus the secondary 'start' versions of claim 1 and
    the control (labelled so)."""
    out = all_claims(by_arm)
    dense = any(math.isfinite(start(r)) for runs in by_arm.values() for r in runs.values())
    if dense:  # runs made without dense evaluation (appendix A's) have no 'start'
        out["1 logn slowest (start, secondary)"] = claim_slowest(by_arm, stat="start")
        out["control (start, secondary)"] = control_verdict(by_arm, stat="start")
    return out


# ----------------------------------------------------------------------------------------------------
# Reading the campaign: printable lines. Reporting only: no rule of its own.

def check_lines(runs):
    """Check B as printable lines: each (optimizer, arm)'s fp32 and bf16 whole-split val losses, their largest
    difference against BF16_TOLERANCE, and the decision."""
    check = bf16_check({(r["config"]["optimizer"], r["arm"], r["config"]["dtype"]): r
                        for r in runs if r["group"].startswith("check ")})
    out = []
    for row in check["rows"]:
        pair = {r["config"]["dtype"]: val_curve(r)[1] for r in runs if r["group"].startswith("check ")
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
    return Config(**{k: v for k, v in run["config"].items() if k in Config.__dataclass_fields__})


def schedule(config):
    """The learning rate at every step of a run's schedule (train.lr_at)."""
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
    return float(np.median([last_logged(r, "resid_rms") / first_logged(r, "resid_rms")
                            for r in runs_by_seed.values()]))


def _first_at_or_above(steps, values, level):
    hit = np.asarray(steps)[np.asarray(values) >= level]
    return int(hit[0]) if len(hit) else None


def mechanism_lines(name, by_arm, ratio):
    """Section 6's reading of one setting, means over seeds: when logn's rms(E) reaches 0.02 and when its logit scale
    g d rms(E) first reaches ortho's g d rms(E) (the sigma = 0.02 head without a self-logit), each beside the earliest
    step a relative optimizer's budget allows (`ratio` = 0.02 d / ln n; steps_to_budget, logit_scale_budget); its gain g
    and how far its branches' weights grew by the end. Reporting only. Ortho's logit scale is g d rms(E) times up to the
    operator norm of its trainable d x d matrix P, which these runs never logged: the line says it compares with part."""
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

    s, _, e = stack(logn, "emb_rms")
    at = _first_at_or_above(s, e.mean(0), 0.02)
    out = [f"{name}: logn's rms(E) " + (f"reaches 0.02 at step {at}" if at is not None else
                                         f"stays below 0.02 to step {int(s[-1])}")
           + (bound(math.log(ratio)) if relative else "")]
    runs = [r for rs in (logn, by_arm.get("ortho", {})) for r in rs.values()]
    if by_arm.get("ortho") and all(first_logged(r, "lnf_gain") is not None for r in runs):
        (sl, vl), (so, vo) = logit_scale(logn), logit_scale(by_arm["ortho"])
        common = sorted(set(sl.tolist()) & set(so.tolist()))
        gap = [vl[sl.tolist().index(t)] - vo[so.tolist().index(t)] for t in common]
        at = _first_at_or_above(common, gap, 0.0)
        g = np.mean([last_logged(r, "lnf_gain") for r in logn.values()])
        out.append(f"{name}: logn's logit scale g d rms(E) " + (f"reaches ortho's g d rms(E) at step {at}" if at is not
                   None else "stays below ortho's g d rms(E)") + " (ortho's without its matrix P, whose norm was not logged)"
                   + (bound(logit_scale_budget(c['optimizer'], ratio)) + " against the fixed 15.4" if relative else "")
                   + f"; logn's gain g ends at {g:.2f}")
    out += scale_against_loss(name, by_arm)
    if all(first_logged(r, "resid_rms") for r in logn.values()):
        out.append(f"{name}: logn's residual branches' weights (resid_rms) grew {branch_growth(logn):.3g}x (median over "
                   f"seeds; weights, not what the branches add)")
    return out


def scale_against_loss(name, by_arm, arms=("logn", "control", "ortho")):
    """The logit scale g d rms(E) beside the loss (prediction P2 put the lag down to the scale): on START_STEPS with
    'start' and on the first half with 'early', each arm's mean scale and mean loss (means over seeds), and which of
    logn and the control has the larger scale and which the lower loss. For the control and ortho the scale leaves out
    their head's matrix P (never logged), and the lines say so. Both are outcomes of training: an association, not a
    cause. 'invalid' lines if a run diverged; [] if an arm is missing or its runs did not log the gain."""
    if not all(by_arm.get(a) for a in arms) or \
            any(first_logged(r, "lnf_gain") is None for a in arms for r in by_arm[a].values()):
        return []
    runs = [r for a in arms for r in by_arm[a].values()]
    if any(r.get("diverged_at_step") is not None for r in runs):
        return [f"{name}: logit scale against loss: invalid (a run diverged)"]
    last = max(max(logged(r, "step")) for r in runs)
    half = runs[0].get("config", {}).get("max_iters", last) / 2
    out = []
    for (lo, hi), stat, key in ((START_STEPS, "start", "val_subset_loss"), ((1, half), "early", "val_loss")):
        scale, loss = {}, {}
        for a in arms:  # the scale at the very steps the statistic averages
            s, v = logit_scale(by_arm[a])
            at = stack(by_arm[a], key)[0]
            at = at[(at >= lo) & (at <= hi)]
            scale[a] = float(v[np.isin(s, at)].mean()) if len(at) else math.nan
            loss[a] = float(np.mean([STATS[stat](r) for r in by_arm[a].values()]))
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
            grow = {k: last_logged(r, k) / first_logged(r, k) for k in ("resid_rms", "emb_rms")}
            out.append(head + f"   weights' rms grew: branches {grow['resid_rms']:6.2f}x, E {grow['emb_rms']:.2f}x")
        pick = pick_lr({r["config"]["lr"]: r["best_val"] for r in rs})
        out.append(f"  {opt}: " + (f"lr {pick['lr']:g} chosen" if pick["lr"] else f"waiting for lr {pick['next']}"))
    return out


def logit_scale(runs_by_seed):
    """The tied logit scale g d rms(E) over training (g: the final norm's mean gain), mean over seeds: the largest
    logit the head can give a token whose row points like h. (steps, values)."""
    steps, _, g = stack(runs_by_seed, "lnf_gain")
    _, _, e = stack(runs_by_seed, "emb_rms")
    d = next(iter(runs_by_seed.values()))["d"]
    return steps, (g * e).mean(0) * d


def ranking(by_arm, stat, arms=None):
    """The arms ranked by their mean `stat` over the seeds every one of them has (descriptive: see the docstring's
    'In practice'). Rows dict(arm, mean, n, vs_first) where vs_first is compare of arm - first (None for the
    first), one comparison on its own. [] below MIN_SEEDS shared seeds."""
    arms = [a for a in (arms or by_arm) if by_arm.get(a)]
    seeds = sorted(set.intersection(*(set(by_arm[a]) for a in arms))) if arms else []
    if len(seeds) < MIN_SEEDS:
        return []
    f = STATS[stat]
    means = {a: float(np.mean([f(by_arm[a][s]) for s in seeds])) for a in arms}
    order = sorted(arms, key=lambda a: (not math.isfinite(means[a]), means[a]))
    pick = lambda a: {s: by_arm[a][s] for s in seeds}
    return [dict(arm=a, mean=means[a], n=len(seeds),
                 vs_first=None if i == 0 else compare(paired(pick(a), pick(order[0]), stat)))
            for i, a in enumerate(order)]


def ranking_lines(name, by_arm, stat, arms=None):
    """ranking() as printable lines, one per arm."""
    rows = ranking(by_arm, stat, arms)
    if not rows:
        return [f"{name}: fewer than {MIN_SEEDS} seeds shared by every arm: no ranking yet"]
    out = [f"{name}, {STAT_WORDS.get(stat, stat)} ({rows[0]['n']} seeds), in the order of the means; each "
           f"arm against the lowest, one unadjusted 95% comparison each (not verdicts):"]
    for i, r in enumerate(rows):
        v = r["vs_first"]
        word = None if v is None else v["word"] if v["word"] in ("inconclusive", "pending") or \
            v["word"].startswith("invalid") else v["word"].replace("A higher", "higher") + " (unadjusted)"
        out.append(f"  {i + 1}. {r['arm']:8} {r['mean']:.4f}" + ("" if v is None else
                   f"   vs {rows[0]['arm']}: {v['mean']:+.4f} [{v['ci95'][0]:+.4f}, {v['ci95'][1]:+.4f}] {word}"
                   if v["ci95"] else f"   vs {rows[0]['arm']}: {word}"))
    return out


def precision_lines(name, by_arm, windows, subset, block=8):
    """How much of a paired difference is measurement and how much is seed (the project's standard: measurement noise
    small next to seed noise), for claim 1's pairs and the control's. Measurement: for each such pair and seed whose
    runs kept per-window val losses (val_windows_last, the final model's), the standard error of the difference, the
    larger of the per-window one and the one over blocks of `block` adjacent windows (neighbours are correlated; lesson
    04 takes the same max); on the whole split (`windows` W) and on the dense subset's own windows
    (data.prepare.subset_windows, `subset` K); the median over pairs and seeds. Seed: the sd over seeds of the same pairs'
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
        if stat == "start" and not any(logged(r, "val_subset_loss") for rs in by_arm.values() for r in rs.values()):
            out.append(f"  {stat:5}: not measured in these runs")
            continue
        diffs = [np.asarray(paired(by_arm[a], by_arm[b], stat), float) for a, b in MEASURED_PAIRS
                 if by_arm.get(a) and by_arm.get(b)]
        bad = sum(not np.isfinite(d).all() for d in diffs)
        sd, df, _ = pooled_sd(d for d in diffs if np.isfinite(d).all())
        note = f"; {bad} comparison(s) left out: a run diverged" if bad else ""
        if not df:
            out.append(f"  {stat:5}: fewer than 2 paired seeds: no seed spread yet{note}")
            continue
        out.append(f"  {stat:5}: the seeds scatter those differences by sd {sd:.4f} (pooled, {df} degrees of freedom): "
                   f"error / sd = {err / sd:.2f}, {'small' if err <= sd / 2 else 'not small'} next to the seed noise "
                   f"(small: at most half){note}")
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
    c = config_for(plan("optim")[0][2])
    return repeat_fraction(np.asarray(load_data(c, log=lambda *a: None)[3], dtype=np.int64))


def two_gram_first_loss(run):
    """The first loss the 2-gram model predicts (tiedgpt.predicted_initial_loss, with the val split's repeat rate) for a
    run's model: rule R says a run's step-0 val loss lies within 1% of it."""
    cfg = GPTConfig(**{k: v for k, v in run["config"].items() if k in GPTConfig.__dataclass_fields__})
    return predicted_initial_loss(cfg, val_repeat_rate())


# ----------------------------------------------------------------------------------------------------
# The campaign's number beside demo.py's, where the demo's setting is the campaign's

DEMO_SETTING = dict(n_embd=768, n_layer=2, n_head=12, batch_size=8, block_size=64, warmup=100, schedule=1200,
                    lr_tiger=3e-3, lr_lamb=3e-3, lr_adamw=1e-3, ortho_dsigma=15.36, val_windows=128)
DEMO_STEPS = range(0, 201, 10)  # where the campaign measured the same 128 val windows (val_subset_loss)


def campaign_comparison(settings, dataset):
    """What a demo (its settings, a dict of demo.RUN_KEYS) can say about this campaign: the settings that differ from
    it, and (only if none does and the campaign measured the same val windows at the demo's last step) the
    campaign's mean logn - ortho there (records.logn_gaps_at)."""
    differs = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in settings.items()
               if k in DEMO_SETTING and v != DEMO_SETTING[k]]
    if dataset.get("dataset") != "shakespeare":
        differs.append(f"dataset={dataset.get('dataset')}")
    same = not differs and settings["steps"] in DEMO_STEPS
    step = settings["steps"] if same else 100
    return dict(same_setting=same, differs=differs, step=step,
                gaps=logn_gaps_at(committed_path("optim"), step, ("tiger", "lamb", "adamw")))


def campaign_lines(result, names):
    """campaign_comparison in words, for demo.verdict_lines (names: {optimizer: name})."""
    camp = result.get("campaign") or {}
    known = {o: g for o, g in (camp.get("gaps") or {}).items() if o in result["verdicts"]}
    if camp.get("same_setting") and known:
        return [f"  the campaign (appendix B) at step {camp['step']}, same setting and val windows: " + ", ".join(
            f"{names.get(o, o)} {g['subset']:+.2f}" for o, g in known.items() if g.get("subset") is not None)]
    if known:
        shown = ", ".join(f"{names.get(o, o)} {g['whole']:+.2f}" for o, g in known.items() if g.get("whole") is not None)
        return [f"  the campaign (appendix B, d=768) measured at step {camp['step']}: {shown} (whole val split); "
                f"this demo's setting differs ({', '.join(camp['differs'])}), so compare signs, not sizes"]
    return []
