"""
The figures of lesson 04 and the appendices: loss curves per arm, paired gaps between arms, sizes of weights.
Plotting only: every number drawn comes from records.py (stack, gap_curve, curve), read through its one
reader of a run.
Each function draws on axes it is given and labels everything it draws (axes, units, what a band is).
"""

import math

import numpy as np

from research.records import curve, gap_curve, stack
from research.stats import MARGIN, t_quantile

COLORS = {"tied": "black", "logn": "tab:red", "control": "tab:pink", "untied": "tab:blue", "ortho": "tab:green",
          "shuffle": "tab:orange", "bert": "tab:purple", "channel": "tab:brown", "scale": "tab:gray"}
STYLES = {"control": (0, (4, 2)), "bert": (0, (1, 1)), "channel": (0, (1, 1))}  # the arms beside the post's core fixes
ORDER = ["tied", "logn", "control", "untied", "ortho", "shuffle", "bert", "channel", "scale"]


def _arms(by):
    return sorted(by, key=lambda a: ORDER.index(a) if a in ORDER else len(ORDER))


def curves(ax_val, ax_train, by, title, train_until=300, early_key="train_loss"):
    """One setting in two panels. ax_val: the whole-split val loss from the first evaluation after step 0 (step 0 is the
    first loss, lessons 02-03), line = mean over seeds, band = min-max over seeds. ax_train: the training loss (logged
    every 10 steps, the mean since the last log) over the first `train_until` steps on a log axis, mean over seeds: where
    the tied head's high start and the first fast drop are, which the evaluations every 100 steps don't see.
    early_key='val_subset_loss' draws the dense val-subset loss there instead (appendix B's runs log it)."""
    for a in _arms(by):
        runs, col, ls = by[a], COLORS.get(a, "gray"), STYLES.get(a, "-")
        s, _, v = stack(runs)
        keep = s > 0
        ax_val.plot(s[keep], v.mean(0)[keep], color=col, ls=ls, lw=1.6, label=f"{a} ({len(runs)} seeds)")
        ax_val.fill_between(s[keep], v.min(0)[keep], v.max(0)[keep], color=col, alpha=0.10)
        s, _, v = stack(runs, early_key)
        keep = (s > 0) & (s <= train_until)
        ax_train.plot(s[keep], v.mean(0)[keep], color=col, ls=ls, lw=1.4, label=a)
    what = "train loss" if early_key == "train_loss" else "val loss on the val subset"
    ax_val.set(title=f"{title}: val loss (line: mean, band: min-max over seeds)", xlabel="step",
               ylabel="val loss, whole split (nats)")
    ax_train.set(title=f"{title}: {what}, steps 10-{train_until}", xlabel="step (log scale)",
                 ylabel=f"{what} (nats), mean over seeds", xscale="log")


def gaps(ax, by, pairs, title, key="val_loss", colors=None, start=1, ylabel="val loss difference (nats)", margin=True):
    """The paired gap A - B of each pair (a seed's A minus the same seed's B, averaged over the seeds both have) at every
    step both logged `key` from `start` on, with its pointwise 95% t interval as a band, the 0 line and (margin=True)
    the +-MARGIN band of "alike", which the rules apply to val losses only. Above 0: A is behind (higher loss). Returns
    the number of pairs drawn."""
    drawn = 0
    for a, b in pairs:
        if not (by.get(a) and by.get(b)):
            continue
        s, m, lo, hi, n = gap_curve(by[a], by[b], key)
        keep = s >= start
        col = (colors or {}).get((a, b), COLORS.get(b, "gray"))
        ax.plot(s[keep], m[keep], color=col, marker="o", ms=2.5, label=f"{a} - {b} ({n} seeds)")
        ax.fill_between(s[keep], lo[keep], hi[keep], color=col, alpha=0.15)
        drawn += 1
    ax.axhline(0, color="k", lw=0.8)
    if margin:
        ax.axhspan(-MARGIN, MARGIN, color="grey", alpha=0.25, label=f"+-{MARGIN} margin of 'alike'")
    ax.set(title=title, xlabel="step", ylabel=ylabel)
    if drawn:
        ax.legend(fontsize=8, title="band: pointwise 95% interval", title_fontsize=8)
    else:
        ax.text(0.5, 0.5, "no paired runs yet", transform=ax.transAxes, ha="center")
    return drawn


def sizes(ax, by, key, title, ylabel, transform=None, log=False):
    """A logged size over training (emb_rms, resid_rms, lnf_gain, or a function of a run's rows via `transform`), mean
    over seeds per arm."""
    for a in _arms(by):
        if transform is None:
            s, _, v = stack(by[a], key)
            y = v.mean(0)
        else:
            s, y = transform(by[a])
        ax.plot(s, y, color=COLORS.get(a, "gray"), ls=STYLES.get(a, "-"), label=a)
    ax.set(title=title, xlabel="step", ylabel=ylabel, yscale="log" if log else "linear")
    ax.legend(fontsize=8)


OPT_STYLES = {"adamw": "-", "tiger": "--", "lamb": ":"}


def turns(ax_turn, ax_self, by_opt, bound=None):
    """Appendix B section 10 (one seed): emb_turn, the mean angle of E's rows from their init, and self_logit, the logit
    for repeating the input token above the mean, over the first 200 steps; colour = arm, line style = optimizer.
    bound: {step: sum of lr_t}, Tiger's bound on emb_turn, drawn in grey."""
    for opt, by in by_opt.items():
        for a in _arms(by):
            for ax, key in ((ax_turn, "emb_turn"), (ax_self, "self_logit")):
                ax.plot(*curve(by[a], key), color=COLORS.get(a, "gray"), ls=OPT_STYLES.get(opt, "-"), lw=1.5, label=f"{a}, {opt}")
    if bound:
        line, = ax_turn.plot(list(bound), list(bound.values()), color="gray", lw=3, alpha=0.4,
                             label="Tiger's bound: sum of lr_t")
        ax_turn.legend(handles=[line], fontsize=8, loc="lower right")
    ax_turn.set(title="how far E's rows have turned from their init", xlabel="step",
                ylabel="mean angle of a row from its init (radians)", yscale="log")
    ax_self.set(title="the self-logit: the input token's logit above the mean", xlabel="step",
                ylabel="z[input token] - mean z (nats)")
    ax_self.axhline(0, color="k", lw=0.8)


def branches(ax, by_opt):
    """Appendix B section 10: logn's branch_ratio (what the residual branches add to the final norm's input, against the
    embedding) per optimizer, one seed, on a log axis with the level 1 where the branches start to dominate."""
    for opt, by in by_opt.items():
        ax.plot(*curve(by["logn"], "branch_ratio"), color=COLORS["logn"], ls=OPT_STYLES.get(opt, "-"), lw=1.5, label=f"logn, {opt}")
    ax.axhline(1, color="k", lw=0.8)
    ax.set(title="what the branches add to the final norm's input", xlabel="step", yscale="log",
           ylabel="rms(x_L - x_0) / rms(x_0)")
    ax.legend(fontsize=8)


DENSE_UNTIL = 200  # the campaigns' dense val-subset evaluations end here (later subset points are sparse)


def gap_over_time(ax, a_runs, b_runs, label, color, ls="-", until=None):
    """One paired gap A - B over time, as the cause plan shows every verdict: dense on the val subset (a line, steps
    10-DENSE_UNTIL, with its pointwise 95% band), then on the whole val split (markers with 95% bars, every 100 steps
    from step 100 to `until`). Returns the number of seeds paired (0: nothing drawn)."""
    s, m, lo, hi, n = gap_curve(a_runs, b_runs, "val_subset_loss")
    if not n:
        return 0
    keep = (s > 0) & (s <= min(DENSE_UNTIL, until or DENSE_UNTIL))
    ax.plot(s[keep], m[keep], color=color, ls=ls, lw=1.6, label=f"{label} ({n} seeds)")
    ax.fill_between(s[keep], lo[keep], hi[keep], color=color, alpha=0.12, lw=0)
    s, m, lo, hi, _ = gap_curve(a_runs, b_runs, "val_loss")
    keep = (s >= 100) & (s <= (until or s.max(initial=0)))
    ax.errorbar(s[keep], m[keep], yerr=np.abs(np.array([lo, hi])[:, keep] - m[keep]), color=color, fmt="o", ms=4,
                capsize=2, lw=1)
    return n


def legend_outside(ax, title=None):
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title=title, title_fontsize=8)


def shared_ylim(axes, pad=0.01):
    """One y range for panels that should be compared by eye (the widest of their data)."""
    lo = min(ax.get_ylim()[0] for ax in axes)
    hi = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(lo - pad, hi + pad)
    return lo, hi


def zoom(ax, by, span=1.2):
    """Limit ax's y range to the part of the val curves that differ (from the lowest loss to `span` nats above it)."""
    low = min(float(np.min(stack(r)[2])) for r in by.values())
    ax.set_ylim(low - 0.05, low + span)


# demo.py's figure

OPT_COLORS = dict(tiger="tab:orange", lamb="tab:purple", adamw="tab:blue", signum="tab:green")
OPT_NAMES = dict(tiger="Tiger", lamb="LAMB", adamw="AdamW", signum="Signum")


def demo_figure(result):
    """One panel per optimizer with both heads' val loss (thin: seeds; thick: their mean), then the paired gap
    logn - ortho per optimizer (thin: seeds; thick: mean; band: its 95% t interval; dot: where the verdict is read).
    demo.py's result (demo.json); unlike the functions above it makes its own Figure, which it returns."""
    import matplotlib.pyplot as plt
    opts = list(result["verdicts"])
    fig, axes = plt.subplots(1, len(opts) + 1, figsize=(5 * len(opts) + 6, 4.2))
    for ax, opt in zip(axes, opts):
        for arm, style in (("logn", "-"), ("ortho", "--")):
            curves = [r for r in result["runs"] if r["optimizer"] == opt and r["arm"] == arm]
            for r in curves:
                ax.plot(r["steps"], r["val"], style, color=OPT_COLORS.get(opt, "gray"), lw=0.6, alpha=0.4)
            mean = np.mean([r["val"] for r in curves], 0)
            ax.plot(curves[0]["steps"], mean, style, color=OPT_COLORS.get(opt, "gray"), lw=2,
                    label=f"{arm} (mean of {len(curves)} seeds)")
        ax.set(title=f"{OPT_NAMES.get(opt, opt)}: val loss of both heads", xlabel="training step",
               ylabel="val loss (nats)")
        ax.legend(fontsize=9)
    ax = axes[-1]
    ax.axhline(0, color="black", lw=0.8)
    for opt, g in result["gaps"].items():
        steps, col, v = np.array(g["steps"]), OPT_COLORS.get(opt, "gray"), result["verdicts"][opt]
        per_seed = np.array(list(g["per_seed"].values()))
        for row in per_seed:
            ax.plot(steps, row, color=col, lw=0.7, alpha=0.45)
        ax.plot(steps, per_seed.mean(0), color=col, lw=2.2,
                label=f"{OPT_NAMES.get(opt, opt)}: {v['mean']:+.2f} at step {v['step']} -> {v['word']}")
        ax.plot([v["step"]], [v["mean"]], "o", color=col, ms=6)
        if len(per_seed) > 1:
            half = t_quantile(0.975, len(per_seed) - 1) * per_seed.std(0, ddof=1) / math.sqrt(len(per_seed))
            ax.fill_between(steps, per_seed.mean(0) - half, per_seed.mean(0) + half, color=col, alpha=0.15, lw=0)
    ax.set(xlabel="training step", ylabel="logn - ortho (nats)", title="The gap: above 0, logn is behind")
    ax.legend(loc="best", fontsize=9)
    fig.tight_layout()
    return fig


# research/stepsize.py's figures (the step-size sweep: lesson 04, appendix B section 12)

STEPSIZE_COLORS = dict(adamw="tab:blue", signum="tab:green", tiger="tab:orange")


def stepsize_figure(tab, names, step_of):
    """Two panels. Left: the gap at the last step (mean, 95% interval over seeds) against the per-entry step on the
    embedding, one line per optimizer. Right: the same gaps against ortho's val loss at that step (how far training
    got). Filled: trained; hollow: did not leave its start; x: diverged (drawn at 0). names: optimizer -> its name;
    step_of(opt, lr): the (lowest, highest) per-entry step on the embedding. Returns the Figure."""
    import matplotlib.pyplot as plt
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.6))
    for opt in STEPSIZE_COLORS:
        rows = sorted((lr, c) for (o, lr), c in tab.items() if o == opt)
        if not rows:
            continue
        col = STEPSIZE_COLORS[opt]
        x = [math.sqrt(np.prod(step_of(opt, lr))) for lr, _ in rows]
        ok = [(xi, c) for xi, (_, c) in zip(x, rows) if c["state"] != "diverged"]
        if ok:
            ax.plot([p for p, _ in ok], [c["mean"] for _, c in ok], color=col, lw=1.5, label=names[opt])
            bx.plot([c["ortho_end"] for _, c in ok], [c["mean"] for _, c in ok], color=col, lw=1.0, alpha=0.6,
                    label=names[opt])
        for xi, (lr, c) in zip(x, rows):
            if c["state"] == "diverged":
                ax.plot([xi], [0], "x", color=col, ms=9, mew=2)
                continue
            face = col if c["state"] == "trained" else "white"
            lo, hi = step_of(opt, lr)
            ci = c["ci95"] or (c["mean"], c["mean"])
            ax.errorbar([xi], [c["mean"]], yerr=[[c["mean"] - ci[0]], [ci[1] - c["mean"]]],
                        xerr=[[xi - lo], [hi - xi]] if hi > lo else None, fmt="o", color=col, mfc=face, ms=6)
            bx.errorbar([c["ortho_end"]], [c["mean"]], yerr=[[c["mean"] - ci[0]], [ci[1] - c["mean"]]],
                        fmt="o", color=col, mfc=face, ms=6)
    for a in (ax, bx):
        a.axhline(0, color="black", lw=0.8)
        a.set_ylabel("logn - ortho, val loss at step 100 (nats)")
        a.legend(fontsize=9)
    states = {c["state"] for c in tab.values()}
    key = [k for s, k in (("trained", "filled: trained"), ("did not leave its start", "hollow: hardly moved"),
                          ("diverged", "x: diverged")) if s in states]
    ax.set(xscale="log", xlabel="step per entry on the embedding, after warmup (Tiger: logn's to ortho's rows)",
           title="Above 0: logn slowest. " + "; ".join(key))
    bx.set(xlabel="ortho's val loss at step 100 (lower: training got further)",
           title="The same gaps against how far training got")
    bx.invert_xaxis()
    fig.tight_layout()
    return fig


def stepsize_curves_figure(tab, names, unstable=()):
    """Every cell's mean gap over steps 0-100 (the seeds' mean; report_lines prints the intervals at step 100), one
    panel per optimizer, one line per lr (darker: larger), a dot at each curve's peak: when the lag opens and closes. The cells in
    `unstable` are dashed, and the y-axis is the stable cells' range: an unstable curve that leaves it is cut off
    there (its label says so). Returns the Figure."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(STEPSIZE_COLORS), figsize=(4.6 * len(STEPSIZE_COLORS), 3.6), sharey=True)
    stable = [v for key, c in tab.items() if c["state"] != "diverged" and key not in unstable for v in c["curve"]]
    for ax, opt in zip(axes, STEPSIZE_COLORS):
        rows = sorted((lr, c) for (o, lr), c in tab.items() if o == opt and c["state"] != "diverged")
        for k, (lr, c) in enumerate(rows):
            cmap = plt.get_cmap({"adamw": "Blues", "signum": "Greens", "tiger": "Oranges"}[opt])
            shade, shaky = cmap(0.35 + 0.6 * k / max(1, len(rows) - 1)), (opt, lr) in unstable
            ax.plot(c["steps"], c["curve"], color=shade, lw=2, ls="--" if shaky else "-",
                    label=f"lr {lr:g}" + (" (unstable, off the scale)" if shaky else ""))
            if not shaky:
                peak = int(np.argmax(c["curve"]))
                ax.plot(c["steps"][peak], c["curve"][peak], "o", color=shade, ms=6)
        ax.axhline(0, color="black", lw=0.8)
        ax.set(title=names[opt], xlabel="step")
        ax.legend(fontsize=7, loc="upper left")
    axes[0].set_ylabel("val loss, logn - ortho (nats)")
    axes[0].set_ylim(min(stable) - 0.1, max(stable) + 0.1)
    fig.tight_layout()
    return fig


def stepsize_summary(tab, names, unstable=(), x=None, xlabel="learning rate"):
    """The sweep at a glance, one line per optimizer against x(opt, lr) (the learning rate if None; log scale): left,
    the gap logn - ortho at step 100 (the seeds' mean and 95% interval); right, the step at which the mean gap peaked.
    Diverged cells are left out; the `unstable` ones too, each named in a note below the left panel's zero line.
    Returns the Figure."""
    import matplotlib.pyplot as plt
    x = x or (lambda opt, lr: lr)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for opt, color in STEPSIZE_COLORS.items():
        cells = sorted((lr, c) for (o, lr), c in tab.items() if o == opt and c["state"] != "diverged")
        kept = [(lr, c) for lr, c in cells if (opt, lr) not in unstable]
        lrs = [x(opt, lr) for lr, _ in kept]
        means = np.array([c["mean"] for _, c in kept])
        lo = np.array([c["ci95"][0] if c["ci95"] else c["mean"] for _, c in kept])
        hi = np.array([c["ci95"][1] if c["ci95"] else c["mean"] for _, c in kept])
        left.errorbar(lrs, means, yerr=[means - lo, hi - means], fmt="o-", color=color, capsize=3, label=names[opt])
        right.plot(lrs, [c["steps"][int(np.argmax(c["curve"]))] for _, c in kept], "o-", color=color,
                   label=names[opt])
        for lr, _ in cells:
            if (opt, lr) in unstable:
                at = x(opt, lr)
                left.annotate(f"{names[opt]} {lr:g}: unstable, set aside", (at, 0), xytext=(at, -0.2),
                              color=color, ha="center", fontsize=7, arrowprops=dict(arrowstyle="-", color=color))
    left.axhline(0, color="black", lw=0.8)
    left.set(xscale="log", xlabel=xlabel, ylabel="logn - ortho at step 100 (nats)", title="How far behind at step 100")
    right.set(xscale="log", xlabel=xlabel, ylabel="step", title="When the lag peaked")
    left.legend(fontsize=8)
    fig.tight_layout()
    return fig
