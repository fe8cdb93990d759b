"""
Probes: what appendix B measures of a model beyond its loss. A probe is a callable (model, step) -> dict that
train.train(config, probes=[...]) merges into every logged row, as minGPT's trainer calls its callbacks; row_probe(c)
is the one research/reproduce.py gives the runs its plans mark log_rows (appendix B section 10: how the fresh tied
model's 2-gram start is undone). window_losses is for the records of a finished run.
"""

import math
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F

from data.prepare import load_data, split_windows
from tiedgpt import GPT

ROW_WINDOWS = 16  # the fixed val windows self_logit and branch_ratio are measured on (1,024 positions at T = 64)


@torch.no_grad()
def emb_turn(E, E0):
    """The mean over the rows w_i of E of their angle to their init w_i(0), in radians: atan2(|w_i x w_i(0)|,
    w_i . w_i(0)), where in d dimensions |a x b| = |a - (a . b^) b^| |b|. Tiger moves each row by exactly
    lr_t |w_i| (row by row; plus its decay), which turns it by at most ~lr_t radians: under Tiger the turn is at most
    the sum of lr_t, whatever the row's size. LAMB bounds only the whole tensor's step (lr_t |E|), so one row can move
    or turn by more. AdamW moves each entry by ~lr: a row of rms sigma by up to ~lr / sigma.
    (A turn alone does not lower the row's own logit: see self_logit.)"""
    E, E0 = E.detach().double(), E0.detach().double()
    u0 = E0 / E0.norm(dim=1, keepdim=True)
    perp = (E - (E * u0).sum(1, keepdim=True) * u0).norm(dim=1)  # the part of w_i off w_i(0)'s direction
    return torch.atan2(perp * E0.norm(dim=1), (E * E0).sum(1)).mean().item()


@torch.no_grad()
def self_logit(model, windows, autocast=nullcontext()):
    """Over every position t of the (windows, T + 1) token batches, the logit the model gives to REPEATING the input
    token minus its mean logit, z_t[x_t] - mean_k z_t[k]. With the branches near zero the final norm sees w_i itself,
    and the tied head scores the input token z_ii = LN(w_i) . w_i ~ g d std(w_i) ~ d sigma above the rest (lesson 02:
    ln n for logn, d x 0.02 = 15.4 at sigma = 0.02), whatever direction w_i points in; a rotation after the norm
    (ortho, the control) starts it near 0."""
    was_training, total, count = model.training, 0.0, 0
    model.eval()
    for xy in windows:
        x = xy[:, :-1]
        with autocast:
            z = model.logits(model.hidden(x)).float()  # (windows, T, n)
        total += (z.gather(-1, x.unsqueeze(-1)).squeeze(-1) - z.mean(-1)).sum().item()
        count += x.numel()
    model.train(was_training)
    return total / count


@torch.no_grad()
def branch_ratio(model, windows, autocast=nullcontext()):
    """How much the residual branches add to the stream the final norm sees, against the embedding they add to:
    rms(x_L - x_0) / rms(x_0) over every position of the windows, x_0 the input to the first block (w_i, plus a
    learned position) and x_L the final norm's input. Near 0 the fresh model is lesson 02's 2-gram model; above 1
    the branches dominate what the head sees. Unlike resid_rms (the branches' weights), it sees a coherent change of
    tiny weights, which can make a large output."""
    seen = {}
    hook = model.transformer.ln_f.register_forward_pre_hook(lambda m, args: seen.update(x=args[0].float()))
    was_training, added, base = model.training, 0.0, 0.0
    model.eval()
    try:
        for xy in windows:
            x = xy[:, :-1]
            with autocast:
                model.hidden(x)
                x0 = model.transformer.wte(x)
                if "wpe" in model.transformer:
                    x0 = x0 + model.transformer.wpe(torch.arange(x.size(1), device=x.device))
            added += (seen["x"] - x0.float()).pow(2).sum().item()
            base += x0.float().pow(2).sum().item()
    finally:
        hook.remove()
        model.train(was_training)
    return math.sqrt(added / base)


@torch.no_grad()
def head_scale(model):
    """The head's d x d matrix P after the final norm (ortho's proj, bert's dense), if it has one: its operator norm
    |P|_2 (the largest factor by which P stretches h), and the tied logit scale including it, g d rms(E) |P|_2 (g the
    final norm's mean gain). A relative step bounds P's Frobenius norm, not |P|_2: a consistent low-rank gradient can
    grow |P|_2 many times faster. {} for heads without a matrix (their logit scale is g d rms(E))."""
    P = getattr(model.head, "proj", None) or getattr(model.head, "dense", None)
    if P is None:
        return {}
    op = torch.linalg.matrix_norm(P.weight.detach().float(), ord=2).item()
    E, g = model.transformer.wte.weight.detach().float(), model.transformer.ln_f.weight.detach().float().mean().item()
    return dict(head_opnorm=op, logit_scale=g * E.size(1) * E.pow(2).mean().sqrt().item() * op)


def windows_on(device, data, block_size, lut=None, windows_per_batch=64, subset=None):
    """split_windows' batches (data/prepare.py), as token tensors on `device`."""
    for xy in split_windows(data, block_size, lut, windows_per_batch, subset):
        yield torch.from_numpy(xy).to(device)


def row_probe(c, device="cpu", autocast=nullcontext()):
    """The log_rows probe of a run of Config c: emb_turn of E from its init, and self_logit and branch_ratio over
    ROW_WINDOWS fixed val windows (measured, like emb_rms, on the weights after the row's step): how the 2-gram start
    is undone, and by what; for heads with a matrix after the norm, its operator norm and the logit scale with it
    (head_scale). E's init is rebuilt from the seed as train.setup builds the model (the global RNG is put back), so a
    resumed run measures from the same init."""
    c, _, _, val_data, _, lut = load_data(c, log=lambda *a: None)
    state = torch.get_rng_state()
    torch.manual_seed(c.seed)
    emb0 = GPT(c.model_config()).transformer.wte.weight.detach().clone().to(device)
    torch.set_rng_state(state)

    def probe(model, step):
        windows = lambda: windows_on(device, val_data, c.block_size, lut, subset=ROW_WINDOWS)  # noqa: E731
        return dict(emb_turn=emb_turn(model.transformer.wte.weight, emb0),
                    self_logit=self_logit(model, windows(), autocast),
                    branch_ratio=branch_ratio(model, windows(), autocast), **head_scale(model))
    return probe


@torch.no_grad()
def window_losses(model, data, block_size, device, lut=None, windows_per_batch=64):
    """The loss of each window train.full_split_loss averages, as a float64 numpy array: their mean is full_split_loss
    up to float rounding. Lesson 04 uses the spread over windows to measure how noisy a whole-split val loss
    is: a paired difference A - B measured on W windows has standard error sd(window differences) / sqrt(W)."""
    out = []
    for xy in windows_on(device, data, block_size, lut, windows_per_batch):
        logits = model.logits(model.hidden(xy[:, :-1])).float()  # (windows, T, n): one batch at a time
        per_token = F.cross_entropy(logits.transpose(1, 2), xy[:, 1:], reduction="none")  # (windows, T)
        out.append(per_token.mean(1).double().cpu().numpy())
    return np.concatenate(out)
