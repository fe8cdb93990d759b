"""
How the cause campaign (appendix B section 11) was made and what it measured beside its verdicts: how far the plan
is, where its runs ran and the budget's measure, the first steps of the twins, the operator norms of ortho's P, and the
numbers its reading cites (after_lines, added after the data). Descriptive: no rule of its own; the verdicts are
cause.py's.
"""

import os

from research.cause import (MATCHED_LR, NAMES, PRIMARY, SECONDARY, _fmt, _seed_diffs, cells,
                            original_gap, verdict_b)
from research.plans import pick_lr, twin_lrs
from research.records import HERE, load_runs, logged
from research.stats import MARGIN, compare


DEVICE_CHECK = os.path.join(HERE, "runs", "cause_device_check")  # sweep S re-made on the lent GPU: the sweeps' guard


BUDGET_CORE_HOURS = 12


def where_lines(new_runs, committed_runs, check_runs=None):
    """Where the runs were made, the guard that let the twins' sweeps run on a GPU, and the budget (the dated addition
    of 2026-11-26, evening, in preregistrations/cause.md): sweep S re-made on that GPU must pick what the CPU picked,
    and CPU time is counted as each run's steps times the idle single-thread time per step (the fastest fresh run's)."""
    check_runs = load_runs(DEVICE_CHECK) if check_runs is None else check_runs
    out = []
    if check_runs:
        cpu = {r["id"]: r for r in committed_runs}
        same = True
        for opt in NAMES:
            gpu = [r for r in check_runs if r["group"].startswith(f"sweep {opt} ")]
            picks = [pick_lr({r["config"]["lr"]: r["best_val"] for r in rs})["lr"]
                     for rs in ([cpu[r["id"]] for r in gpu], gpu)]
            same &= picks[0] == picks[1]
            worst = max(abs(r["best_val"] - cpu[r["id"]]["best_val"]) for r in gpu)
            out.append(f"device guard, sweep S under {NAMES[opt]} re-made on {gpu[0]['device']}: picks {picks[1]:g} "
                       f"(the CPU's: {picks[0]:g}); best val moved by up to {worst:.3f} nats across its {len(gpu)} lrs")
        out.append("  -> the twins' sweeps made there are used" if same else
                   "  -> the GPU picks otherwise: its twin sweeps are descriptive only; the sweeps run on the CPU")
    on_gpu = [r for r in new_runs if r.get("device")]
    on_cpu = [r for r in new_runs if not r.get("device")]
    if on_gpu:
        out.append(f"{len(on_gpu)} runs made on {on_gpu[0]['device']} (the twins' lr sweeps, "
                   f"{', '.join(sorted({r['group'].split()[1] for r in on_gpu}))}), {len(on_cpu)} on the CPU")
    steps_of = {r["id"]: max(logged(r, "val_loss")) for r in on_cpu}  # the last evaluation is the last step
    fresh = [r["wall_s"] / steps_of[r["id"]] for r in on_cpu if not r.get("resumed_from_step")]
    if fresh:
        steps = sum(steps_of.values())
        idle = min(fresh)
        hours = steps * idle / 3600
        out.append(f"CPU budget: {steps:,} steps x {idle:.2f} s a step (the fastest fresh run, one thread) = "
                   f"{hours:.1f} core-hours of the plan's {BUDGET_CORE_HOURS} (logged wall times: "
                   f"{sum(r['wall_s'] for r in on_cpu) / 3600:.1f} h, slower when the workers shared the cores)")
        out += _wall_lines(on_cpu, twin_lrs(new_runs)["lamb"]["lr"])
    return out


MEASURE_ADOPTED = "2026-11-26 18:26:45"  # UTC, the commit of the dated addition that adopted the budget's measure


def _wall_lines(on_cpu, lamb_lr):
    """When the idle-equivalent measure was adopted, and what the logged wall times would have cut (the rule: LAMB's
    twin's runs at its own lr come last and are cut once the budget is spent). Runs in the order they finished."""
    runs, hours, passed = sorted(on_cpu, key=lambda r: r["finished"]), 0.0, None
    for k, r in enumerate(runs, 1):
        hours += r["wall_s"] / 3600
        passed = passed or (k if hours > BUDGET_CORE_HOURS else None)
    before = [r for r in runs if r["finished"] < MEASURE_ADOPTED]
    cut = [r for r in runs[passed or len(runs):] if r["group"] == f"b lamb-twin lr={lamb_lr:g}"]
    return [f"  that measure was adopted ({MEASURE_ADOPTED[:16]} UTC) after {len(before)} runs, whose logged wall times "
            f"came to {sum(r['wall_s'] for r in before) / 3600:.1f} h"
            + (f"; by wall time the {BUDGET_CORE_HOURS} hours ran out at run {passed} of {len(runs)}, and the cut rule "
               f"would have dropped LAMB's twin's {len(cut)} runs at its own lr" if passed else "")]


def after_lines(new_runs, committed_runs):
    """Numbers the reading cites that no rule of the plan prints, computed after every verdict was in (added
    2026-11-26, late, after the data; they describe and decide nothing): the share of each original's lag (start) that its
    twin removes at the matched lr; for a twin whose own lr differs, how much smaller its lag is there than at the
    matched lr (paired by seed, on both statistics); and how near each twin's sweep came to picking another lr."""
    cs, picks = cells(new_runs, committed_runs), twin_lrs(new_runs)
    out = []
    for opt in NAMES:
        v = verdict_b(cs, opt, picks[opt]["lr"])
        if v["verdict"] == "PENDING":
            continue
        lr = v["picked_lr"]
        out.append(f"{NAMES[opt]}'s twin at 3e-3 removes {v['removed']['mean'] / original_gap(cs, opt)['mean']:.0%} "
                   f"of logn's lag under {NAMES[opt]} ({PRIMARY})")
        for stat in (PRIMARY, SECONDARY) if lr != MATCHED_LR else ():
            gaps = [dict(zip(*_seed_diffs(c.get("logn", {}), c.get("ortho", {}), stat)))
                    for c in (cs.get(f"twin {opt} lr={x:g}", {}) for x in (MATCHED_LR, lr))]
            seeds = sorted(set(gaps[0]) & set(gaps[1]))
            r = compare([gaps[0][s] - gaps[1][s] for s in seeds])
            out.append(f"  the lag at 3e-3 minus the lag at its own lr {lr:g} ({stat}): "
                       + _fmt(dict(r, a="gap(3e-3)", b=f"gap({lr:g})")))
        sweep = {r["config"]["lr"]: r["best_val"] for r in new_runs if r["group"].startswith(f"sweep {opt}-twin ")}
        best = min(sweep, key=sweep.get)
        out.append(f"  its sweep: lowest best val {sweep[best]:.4f} at lr {best:g}; the rule takes the smallest lr within "
                   f"{MARGIN} nats of it: {lr:g} ({sweep[lr]:.4f}, {sweep[lr] - sweep[best]:.4f} higher)"
                   + (f"; a shift of {MARGIN - (sweep[lr] - sweep[best]):.4f} between the two would pick {best:g}"
                      + _device_shift(committed_runs, opt, lr, best) if best != lr else ""))
        out += first_step_lines(new_runs, opt)
    return out


def _device_shift(committed_runs, opt, lr, other, check_runs=None):
    """How far sweep S's runs at `lr` and `other` moved against each other when re-made on the GPU (the device check):
    the size of shift that the device alone can make between two lrs of one sweep."""
    runs = {"cpu": committed_runs, "gpu": load_runs(DEVICE_CHECK) if check_runs is None else check_runs}
    val = {k: {r["config"]["lr"]: r["best_val"] for r in rs if r["group"].startswith(f"sweep {opt} ")}
           for k, rs in runs.items()}
    if not all(x in v for v in val.values() for x in (lr, other)):
        return ""
    moved = (val["gpu"][lr] - val["gpu"][other]) - (val["cpu"][lr] - val["cpu"][other])
    return f"; re-made on the GPU, sweep S's runs at these two lrs moved {abs(moved):.4f} against each other"


def first_step(new_runs, opt, seed=1):
    """Does the twin take the original's first step? ortho's embedding turn after step 0 (emb_turn, radians) in the
    re-made original (check R's run) and in each of its twin's runs of the same seed: (original's, {lr: twin's}),
    None where a run is missing. The same step gives the same turn."""
    ortho = {r["group"]: logged(r, "emb_turn").get(0) for r in new_runs if r["arm"] == "ortho" and r["seed"] == seed}
    twins = {float(g.split("lr=")[1]): v for g, v in ortho.items() if g.startswith(f"b {opt}-twin ") and v}
    return (ortho[f"ref {opt}"], twins) if ortho.get(f"ref {opt}") and twins else None


def first_step_lines(new_runs, opt, seed=1):
    """first_step as a line: the twin's turn beside the original's, and their ratio (1.00x: the same step)."""
    got = first_step(new_runs, opt, seed)
    if not got:
        return []
    ref, twins = got
    return [f"  its first step (ortho's embedding turn after step 0, seed {seed}): {NAMES[opt]} {ref:.3g} rad; the twin "
            + ", ".join(f"{v:.3g} at lr {lr:g} ({v / ref:.2f}x)" for lr, v in sorted(twins.items()))]


def opnorm_curves(new_runs):
    """{run id: (steps, head_opnorm)} of every new run that logged P's operator norm (ortho arms)."""
    out = {}
    for r in new_runs:
        rows = logged(r, "head_opnorm")
        if rows:
            out[r["id"]] = (list(rows), list(rows.values()))
    return out
