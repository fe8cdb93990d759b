"""
Appendix B sections 10 and after, as printable lines: how the fresh tied model's 2-gram start is undone under each
optimizer (the 'turn' runs: how far the embedding's rows turn, how much self-logit is left, what the residual branches
add, expectations T1-T4 written before those runs), and what a relative step does and does not bound (weights against
what they add, the optimizers' whole configuration, the operator norm of a matrix under rank-1 steps).
"""

import numpy as np
import torch

import optim
from research.appendix_b import run_config, schedule
from research.records import logged


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
    """Descriptive (no expectation rests on it): per optimizer, logn's emb_turn, rms(E) against step 0's, self_logit,
    and its self_logit above the control's at the same step. The control has no self-logit to unlearn, so its
    self_logit (which rises for every arm as the model learns which tokens are frequent: the input token usually is
    one) is the baseline the excess is read against."""
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
    """The printout of B1, B2 and C, then logn's branch_ratio and self_logit per optimizer at BRANCH_STEPS, the
    logged steps where the ratio first exceeds 1 and where it is largest, and where the self_logit first falls below 7
    (descriptive: no expectation rests on them; the last added 2026-11-27 so that the reading's steps are printed)."""
    lines = [f"{n} {EXPECTED[ok]}: {found}" for n, ok, found in branch_expectations(branches, turn)]
    for o, by in branches.items():
        b, z = logged(by["logn"], "branch_ratio"), logged(by["logn"], "self_logit")
        cross = next((s for s in sorted(b) if b[s] > 1), None)
        peak = max(b, key=b.get)
        low = next((s for s in sorted(z) if z[s] < 7), None)
        lines.append(f"  {o:5} logn at steps {', '.join(map(str, BRANCH_STEPS))}: branch_ratio "
                     + ", ".join(f"{b[s]:.2f}" for s in BRANCH_STEPS) + "; self_logit "
                     + ", ".join(f"{z[s]:.2f}" for s in BRANCH_STEPS)
                     + f"; the ratio first above 1 at step {cross}, largest at step {peak} ({b[peak]:.2f}); "
                     f"the self_logit first below 7 at step {low}")
    return lines


# ----------------------------------------------------------------------------------------------------
# What a relative step does and does not bound: weights against what they add, the optimizers' whole configuration,
# and the operator norm of a matrix under rank-1 steps

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
    """What differs between the optimizers besides the step's relativity: per main group, the lr, the weight
    decay and how it is applied, the betas and eps (optim.py's reference constants for Tiger and LAMB, the run's Config
    for AdamW), and the gradient clipping that runs before every step, with the raw gradient norm logged before it
    (train.py logs clip_grad_norm_'s return value): median over the group's logged steps, and the lowest."""
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
        norms = [v for r in rs for v in logged(r, "grad_norm").values()]
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
