"""
The lessons' figure style, and the few figures too long to draw in a cell. Importing this module sets matplotlib's style
for the notebook (a grid, white figures); every number a figure draws is computed in the lesson's cell that calls it.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm's notice in a notebook without ipywidgets
plt.rcParams.update({"figure.dpi": 90, "axes.grid": True, "grid.alpha": 0.3, "figure.facecolor": "white",
                     "legend.fontsize": 8})


def logit_panels(logits, token):
    """One panel per head: a histogram of the n - 1 other logits (log count) and a red line at the self-logit, the
    score for `token` itself, with the probability p_self the softmax gives it. logits: {head: (n,) tensor}."""
    lo = min(z.min().item() for z in logits.values()) - 1
    hi = max(z.max().item() for z in logits.values()) + 1
    fig, axes = plt.subplots(1, len(logits), figsize=(4.3 * len(logits), 3.4), sharex=True, sharey=True)
    for ax, (head, z) in zip(np.atleast_1d(axes), logits.items()):
        crowd = torch.cat([z[:token], z[token + 1:]])
        p_self = torch.softmax(z.double(), 0)[token].item()
        ax.hist(crowd.numpy(), bins=np.linspace(lo, hi, 120), color="tab:blue", alpha=0.8, label="the other logits")
        ax.axvline(z[token].item(), color="tab:red", lw=2, label=f"self-logit {z[token]:.1f} (p_self {p_self:.2g})")
        ax.set(yscale="log", title=head, xlabel="initial logit")
        ax.legend(loc="upper right")
    np.atleast_1d(axes)[0].set_ylabel("tokens")
    fig.tight_layout()
    return fig


def gap_bands(ax, curves, colors, until=None):
    """Paired gaps over the steps, one line per name: curves = {name: (steps, mean, lo, hi)}; the band is the pointwise
    95% interval over the seeds. Above 0 the first arm is behind."""
    for name, (steps, mean, lo, hi) in curves.items():
        keep = steps <= (until or steps.max())
        ax.plot(steps[keep], mean[keep], color=colors.get(name, "gray"), lw=2, label=name)
        ax.fill_between(steps[keep], lo[keep], hi[keep], color=colors.get(name, "gray"), alpha=0.15, lw=0)
    ax.axhline(0, color="black", lw=0.8)
    ax.legend()
