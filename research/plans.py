"""
The campaigns' plans: every run as (group, arm, overrides of train.Config), most important first, and the decisions
a plan takes from its own first runs (appendix B's check B and sweep S, the cause plan's twin sweeps). The plans and
their rules were fixed before their runs: research/preregistrations/. research/reproduce.py runs them.

Seeds. From the d768 scale on, the run's seed drives both the model init and the training data order
(data_seed = seed): two seeds differ in both, and comparisons are paired by seed. Two heads of one seed see the same
batches; tied, logn, untied, shuffle and channel also share the init draw, but ortho, bert and the control build
their head's weights before the blocks are initialised (tiedgpt.GPT.__init__), which uses up random numbers, so their
init draw differs (kept: changing it would change the committed runs). The older scales (live, full, gpt2) fixed the
data order (data_seed = 0) and varied only the init; their plans are kept as they were so that the committed runs
can be re-made and compared.
"""

import math

import numpy as np

from research import records
from data.prepare import load_data
from research.stats import MARGIN
from config import Config

CORE_HEADS = ["tied", "logn", "untied", "ortho", "shuffle"]  # the post's comparison
# bert (dense + bias + activation after the norm) and channel (ShuffleNet's channel shuffle) are fixes the post
# itself suggests; scale (the logits times a fixed c = ln(n) / (d sigma), tiedgpt.LogitScale) is ours
ALL_HEADS = CORE_HEADS + ["bert", "channel", "scale"]
SEEDS = [1, 2, 3]
SCALES = ("live", "full", "gpt2", "d768", "optim", "turn", "cause")

# Shared settings of the older scales. vocab='corpus' restricts the softmax to the tokens Tiny Shakespeare
# uses (n = 11,706, ln n = 9.37) so a CPU can afford the grid; sigma = d^-1/2 keeps d*sigma = sqrt(d) >> ln n.
BASE = dict(dataset="shakespeare", vocab="corpus", n_head=4, block_size=64, batch_size=8, lr=1e-3,
            warmup_iters=0, weight_decay=0.1, grad_clip=1.0, eval_iters=4, log_interval=10, data_seed=0,
            out_dir="", sample_tokens=0)

# The d768 scale: the post's regime. GPT-2 small's width and head size (12 heads of 64), zero-initialised
# residual branches (tiedgpt's default), 2 layers (what a CPU affords at this width), warmup then cosine,
# 1200 steps = 614K tokens = 2 epochs of Tiny Shakespeare's train split, validation on the WHOLE val split
# (33.8K tokens) every 100 steps. data_seed=None: the run's seed drives the data order too.
D768 = dict(BASE, n_layer=2, n_embd=768, n_head=12, max_iters=1200, warmup_iters=100, eval_interval=100,
            eval_iters=8, eval_full_val=True, data_seed=None)
LOGN_SIGMA = "ln(n)/d"  # emb_std placeholder: logn's sigma, resolved with the corpus's n when the run starts

# Arms: a head, or a head with another init. 'control' is ortho (no self-logit: a random rotation after the
# norm) at logn's small sigma = ln(n)/d. logn and control share sigma and differ in the self-logit; ortho and
# control share the head and differ in sigma. So if control lags like logn, the small sigma is the cause.
ARMS = {h: dict(head=h) for h in ALL_HEADS}
ARMS["control"] = dict(head="ortho", emb_std=LOGN_SIGMA)
# The cause plan's control without a learned matrix (research/cause.py, part a): the half swap at logn's sigma. It shares
# logn's sigma and has no self-logit, like the control, but nothing in its head learns (ortho's P does).
ARMS["shuffle_logn"] = dict(head="shuffle", emb_std=LOGN_SIGMA)


# The optim scale (appendix B): the d768 configuration under AdamW, Tiger and LAMB. Its plan, rules R, B and S and
# its statistics: research/preregistrations/appendix_b.md. Branches start near zero (rule R: Tiger can't move exact
# zeros), the first 200 steps are evaluated densely on a val subset, and weight decay is each optimizer's own.
OPTIM = dict(D768, residual_std=1e-4, dense_val_until=200, dense_val_windows=128, weight_decay=None)
OPTIM_ADAMW_LR = 1e-3  # appendix A's
OPTIM_CHECK_LR = dict(adamw=1e-3, tiger=1e-2, lamb=1e-2)
TURN_LR = 3e-3  # the lr sweep S chose for Tiger and for LAMB (appendix B section 2 prints it from the sweep's runs)


def arms(base, group, names, seeds, **kw):
    """The runs of arms `names` x `seeds` in one group: the scale's `base` settings, the group's `kw`, then the arm's
    own (its head, and the control's sigma ln(n)/d, win over the group's)."""
    return [(group, a, {**base, **kw, **ARMS[a], "seed": s}) for s in seeds for a in names]


# Appendix B's check B and sweep S (research/preregistrations/appendix_b.md): the two decisions its plan takes from its
# own first runs.
RESIDUAL_STD = OPTIM["residual_std"]  # rule R
BF16_TOLERANCE = 0.01  # check B, nats
LR_GRID = (1e-3, 3e-3, 1e-2, 3e-2)  # sweep S
SWEEP_SEED = 100
RELATIVE = ("tiger", "lamb")


def bf16_check(runs, planned=None):
    """Check B on the check runs ({(optimizer, arm, dtype): run}). Returns dict(done, passed, rows) with one row per
    (optimizer, arm): the largest |bf16 - fp32| whole-split val loss over the shared evaluations. `planned`: the
    (optimizer, arm) pairs the check needs (the plan's); it is done only when every one has both runs."""
    rows = []
    keys = sorted({(o, a) for o, a, _ in runs} | set(planned or ()))
    for o, a in keys:
        pair = [runs.get((o, a, dt)) for dt in ("float32", "bfloat16")]
        if None in pair:
            continue
        v32, v16 = (records.logged(r, "val_loss") for r in pair)
        diff = [abs(v16[s] - v32[s]) for s in sorted(set(v32) & set(v16))]
        # np.max, not max: a diverged twin's NaN must fail the check (max() skips a NaN that doesn't come first)
        rows.append(dict(optimizer=o, arm=a, steps=sorted(set(v32) & set(v16)),
                         max_abs_diff=float(np.max(diff)) if diff else math.nan))
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


def optim_decisions(runs):
    """The optim plan's two decisions from its own first runs (check B and sweep S): dict(check, dtype, lr,
    sweep_next). dtype is None until check B is done; lr[opt] None until sweep S has chosen."""
    check = bf16_check({(r["config"]["optimizer"], r["arm"], r["config"]["dtype"]): r
                        for r in runs if r["group"].startswith("check ")},
                       planned=[(opt, arm) for opt in OPTIM_CHECK_LR for arm in ("tied", "logn")])
    dtype = ("bfloat16" if check["passed"] else "float32") if check["done"] else None
    lr, sweep_next = {}, {}
    for opt in RELATIVE:
        pick = pick_lr({r["config"]["lr"]: r["best_val"] for r in runs if r["group"].startswith(f"sweep {opt} ")})
        lr[opt], sweep_next[opt] = pick["lr"], pick["next"]
    return dict(check=check, dtype=dtype, lr=lr, sweep_next=sweep_next)


# The cause plan (research/preregistrations/cause.md): the first 400 steps of the optim schedule, its arms and seeds.
CAUSE_STEPS = 400  # every run of the plan stops here (its schedule still runs to step 1200)
CAUSE_SEEDS = [1, 2, 3]
B_ARMS = ["logn", "ortho", "shuffle_logn"]  # (b) at the matched lr
B_ARMS_PICKED = ["logn", "ortho"]  # (b) at the twin's own lr
C_ARMS = ["logn", "ortho"]  # (c)


def twin_lrs(runs):
    """Each absolute twin's lr from its sweep runs, by sweep S's rule (pick_lr on the best whole-split val loss of
    each lr's 1200-step tied run): {optimizer: dict(lr, next)}, lr None until decided, next the lrs still to run."""
    return {opt: pick_lr({r["config"]["lr"]: r["best_val"] for r in runs
                          if r["group"].startswith(f"sweep {opt}-twin ")}) for opt in RELATIVE}


def plan_optim(runs=()):
    """The optim scale's plan as far as its decisions allow: check B first; once it is done, sweep S (in its dtype);
    once an optimizer's lr is chosen, that optimizer's runs. Re-planned by the workers after every run."""

    out = []
    for opt, lr in OPTIM_CHECK_LR.items():
        for dtype in ("float32", "bfloat16"):
            out += arms(OPTIM, f"check {opt} {dtype}", ["tied", "logn"], [1], emb_std=0.02, optimizer=opt, lr=lr,
                        dtype=dtype, max_iters=300)
    dec = optim_decisions(runs)
    dtype = dec["dtype"]
    if dtype is None:
        return out
    for opt in RELATIVE:
        done = [r["config"]["lr"] for r in runs if r["group"].startswith(f"sweep {opt} ")]
        for lr in sorted(set(done) | set(dec["sweep_next"][opt])):
            out += arms(OPTIM, f"sweep {opt} lr={lr:g}", ["tied"], [SWEEP_SEED], emb_std=0.02, optimizer=opt, lr=lr,
                        dtype=dtype)
    six, three = ["logn", "control", "ortho"], ["tied", "shuffle", "untied"]
    full = dtype == "bfloat16"  # fp32 (check B failed) costs ~2.7x: seeds 4-5 and sigma = d^-1/2 are cut
    main = {opt: dict(optimizer=opt, lr=dec["lr"][opt], dtype=dtype) for opt in RELATIVE if dec["lr"][opt]}
    for opt, kw in main.items():
        out += arms(OPTIM, opt, six + three, [1, 2, 3], emb_std=0.02, **kw)
    out += arms(OPTIM, "adamw", six, [1, 2, 3], emb_std=0.02, optimizer="adamw", lr=OPTIM_ADAMW_LR, dtype=dtype)
    if full:
        for opt, kw in main.items():
            out += arms(OPTIM, opt, six, [4, 5], emb_std=0.02, **kw)
        for opt, kw in main.items():
            out += arms(OPTIM, f"{opt} d^-1/2", ["ortho", "tied", "untied", "shuffle"], [1, 2, 3], emb_std=None, **kw)
    return out


def plan_cause(runs=()):
    """The cause plan (research/preregistrations/cause.md fixes its order, arms and rules): every run the first 400 steps
    of the optim campaign's schedule (its cosine still runs to step 1200) with log_rows, fp32 (the campaign's dtype);
    the twins' lr sweeps run the whole schedule, as sweep S did. Re-planned after every run: the twins' runs at their
    own lr wait for their sweep."""
    base = {**OPTIM, "emb_std": 0.02, "dtype": "float32", "max_iters": CAUSE_STEPS,
            "lr_decay_iters": OPTIM["max_iters"], "log_rows": True}

    lr = TURN_LR
    out = arms(base, "ref tiger", ["ortho"], [1], optimizer="tiger", lr=lr)  # a re-make of committed steps: check R
    out += arms(base, "a tiger", ["shuffle_logn"], CAUSE_SEEDS, optimizer="tiger", lr=lr)
    out += arms(base, "a lamb", ["shuffle_logn"], CAUSE_SEEDS, optimizer="lamb", lr=lr)
    out += arms(base, f"b tiger-twin lr={lr:g}", B_ARMS, CAUSE_SEEDS, optimizer="tiger", relative="none", lr=lr)
    for rel in ("embedding", "body"):
        out += arms(base, f"c tiger {rel}-only lr={lr:g}", C_ARMS, CAUSE_SEEDS, optimizer="tiger", relative=rel, lr=lr)
    out += arms(base, f"b lamb-twin lr={lr:g}", B_ARMS, CAUSE_SEEDS, optimizer="lamb", relative="none", lr=lr)
    out += arms(base, "ref lamb", ["ortho"], [1], optimizer="lamb", lr=lr)
    picks = twin_lrs(runs)
    for opt in ("tiger", "lamb"):
        done = [r["config"]["lr"] for r in runs if r["group"].startswith(f"sweep {opt}-twin ")]
        for slr in sorted(set(done) | set(picks[opt]["next"])):
            out += [(f"sweep {opt}-twin lr={slr:g}", "tied", {**base, **ARMS["tied"], "seed": SWEEP_SEED,
                     "optimizer": opt, "relative": "none", "lr": slr, "max_iters": OPTIM["max_iters"],
                     "lr_decay_iters": None})]
    for opt in ("tiger", "lamb"):
        if picks[opt]["lr"] is not None and picks[opt]["lr"] != lr:
            out += arms(base, f"b {opt}-twin lr={picks[opt]['lr']:g}", B_ARMS_PICKED, CAUSE_SEEDS, optimizer=opt,
                        relative="none", lr=picks[opt]["lr"])
    return out


def pending_decisions(scale, runs):
    """What the plan still waits for before it is whole (the optim and cause plans depend on their own runs)."""
    if scale == "cause":
        return [f"the {opt} twin's lr sweep" for opt, p in twin_lrs(runs).items() if p["lr"] is None]
    if scale != "optim":
        return []
    dec = optim_decisions(runs)
    return (["check B (bf16)"] if dec["dtype"] is None else []) + \
        [f"sweep S ({opt})" for opt, lr in dec["lr"].items() if lr is None]


def plan(scale, runs=()):
    """(group, arm, overrides) triples, most important first: a worker takes them in this order. `runs`: the runs
    made so far, which the optim scale's plan depends on (check B, sweep S)."""
    if scale == "optim":
        return plan_optim(runs)
    if scale == "cause":
        return plan_cause(runs)
    if scale == "turn":  # after the optim campaign, exploratory (preregistrations/appendix_b.md): the first 200 of
        # its steps (the same schedule: its cosine still runs to step 1200) with log_rows, seed 1, at the campaign's lrs
        lrs = dict(adamw=OPTIM_ADAMW_LR, tiger=TURN_LR, lamb=TURN_LR)
        runs = [(opt, a, {**OPTIM, "emb_std": 0.02, **ARMS[a], "seed": 1, "optimizer": opt, "lr": lr,
                          "dtype": "float32", "max_iters": 200, "lr_decay_iters": OPTIM["max_iters"], "log_rows": True})
                for opt, lr in lrs.items() for a in ("logn", "control", "ortho")]
        # then logn again per optimizer, the same run, now that log_rows also logs branch_ratio (section 10's question)
        return runs + [(f"{g} branches", a, o) for g, a, o in runs if a == "logn"]
    if scale == "live":
        main = dict(BASE, n_layer=1, n_embd=256, max_iters=150, eval_interval=15)
        return [("main", h, dict(main, head=h, seed=s)) for s in SEEDS for h in ALL_HEADS]
    if scale == "gpt2":  # GPT-2's width and init (d sigma = 15.4), full's depth and length
        main = dict(BASE, n_layer=2, n_embd=768, emb_std=0.02, max_iters=300, eval_interval=25)
        return [("main", h, dict(main, head=h, seed=s)) for s in SEEDS for h in CORE_HEADS]
    if scale == "d768":
        # logn and the control have sigma = ln(n)/d whatever the other heads use: one set of runs serves both
        # settings. 1. The primary comparison, seed by seed: logn, the control, and ortho at GPT-2's sigma.
        runs = []
        for s in [1, 2, 3, 4, 5]:
            runs += arms(D768, "sigma=ln(n)/d", ["logn", "control"], [s])
            runs += arms(D768, "sigma=0.02", ["ortho"], [s], emb_std=0.02)
        # 2. the rest of the post's heads at sigma = 0.02, 3 seeds (bert/channel: claim 2 with and without them)
        runs += arms(D768, "sigma=0.02", ["tied", "untied", "shuffle"], SEEDS, emb_std=0.02)
        runs += arms(D768, "sigma=0.02", ["bert", "channel"], SEEDS, emb_std=0.02)
        # 3. the post's other common init, sigma = d^-1/2 (d sigma = 27.7), 3 seeds
        return runs + arms(D768, "sigma=d^-1/2", ["ortho", "tied", "untied", "shuffle"], SEEDS)
    main = dict(BASE, n_layer=2, n_embd=256, max_iters=300, eval_interval=25)
    runs = [("main", h, dict(main, head=h, seed=s)) for s in SEEDS for h in CORE_HEADS]
    sweeps = [("lr=3e-3", dict(lr=3e-3)), ("d=512", dict(n_embd=512)), ("warmup=100", dict(warmup_iters=100)),
              ("d=128", dict(n_embd=128)), ("lr=3e-4", dict(lr=3e-4))]
    for group, knob in sweeps:
        runs += [(group, h, dict(main, head=h, seed=1, **knob)) for h in CORE_HEADS]
    runs += [("main", h, dict(main, head=h, seed=s)) for s in SEEDS for h in ALL_HEADS[5:]]
    runs += [("steps=1200", h, dict(main, head=h, seed=1, max_iters=1200, eval_interval=50)) for h in CORE_HEADS]
    return runs + [("n=50257", h, dict(main, head=h, seed=1, vocab="full")) for h in CORE_HEADS]


def config_for(overrides):
    """The Config of one run, with the ln(n)/d placeholder resolved from the corpus's n. A plan's log_rows is no
    setting of train.py's: it asks research/reproduce.py for the row probe (research/probes.py), so it is left out."""
    overrides = {k: v for k, v in overrides.items() if k != "log_rows"}
    if overrides.get("emb_std") == LOGN_SIGMA:
        n = load_data(Config(**{**overrides, "emb_std": None}), log=lambda *a: None)[0].vocab_size
        overrides = dict(overrides, emb_std=math.log(n) / overrides["n_embd"])
    return Config(**overrides)



# The settings the reports judge, per scale: {setting: [(group, the arms it takes from that group, None: all)]}. In
# d768, logn and the control (sigma = ln(n)/d) serve both sigma settings; appendix B's d^-1/2 settings borrow them
# from their optimizer's main group. Other scales: one setting per group, 'main' first.
SETTINGS = {
    "d768": {"sigma=0.02": [("sigma=0.02", None), ("sigma=ln(n)/d", None)],
             "sigma=d^-1/2": [("sigma=d^-1/2", None), ("sigma=ln(n)/d", None)]},
    "optim": {"tiger": [("tiger", None)], "lamb": [("lamb", None)],
              "tiger, sigma=d^-1/2": [("tiger d^-1/2", None), ("tiger", ("logn", "control"))],
              "lamb, sigma=d^-1/2": [("lamb d^-1/2", None), ("lamb", ("logn", "control"))],
              "adamw (residual_std=1e-4)": [("adamw", None)]},
}


def settings(scale, runs):
    """{setting name: {arm: {seed: run}}} of a scale's runs (SETTINGS)."""
    table = SETTINGS.get(scale) or {g: [(g, None)] for g in sorted({r["group"] for r in runs},
                                                                   key=lambda g: (g != "main", g))}
    return {name: records.by_arm([r for r in runs if any(r["group"] == g and (arms is None or r["arm"] in arms)
                                                         for g, arms in parts)]) for name, parts in table.items()}


def load_scale(scale, path=None):
    """(runs, missing ids) of a scale: the committed runs (or those at `path`) and the plan's runs they lack."""
    runs = records.load_runs(path or records.committed_path(scale))
    have = {r["id"] for r in runs}
    return runs, [rid for rid in (records.run_id(g, a, o["seed"]) for g, a, o in plan(scale, runs)) if rid not in have]
