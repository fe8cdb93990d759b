"""
The optimizers train.py can use (--optimizer=), and why the choice matters for a small init (docs/optimizers.md says
more, with what was measured):

    adamw   moves every entry by about lr per step, whatever its size: ABSOLUTE (torch.optim.AdamW; Loshchilov &
            Hutter 2019). A weight of size sigma moves by a fraction ~ lr / sigma of itself: a small init moves fast.
    signum  Tiger's update with one fixed per-entry step, lr, for every matrix: ABSOLUTE too (Signum, Bernstein et al.
            2018, with Tiger's decoupled decay and its half step for vectors).
    tiger   moves every entry of a matrix by exactly lr * RMS(matrix) per step (Su 2023; reference tiger.py in
            github.com/bojone/tiger): RELATIVE to the matrix's size, so |W| changes by at most a factor 1 + lr a step.
    lamb    rescales Adam's direction so each tensor moves by exactly lr * |W| (You et al. 2019, Algorithm 2): RELATIVE.

Under a relative step a small init stays small for ~ 1 / lr steps, and the tied head's logit scale (~ d sigma) with
it. The ABSOLUTE TWINS (--relative=none) test whether the relativity itself is what matters: the same rule with each
weight's RMS replaced by a scale frozen at the first step; --relative=embedding / body (Tiger only) keep the relative
step on the token embedding only, or on every other matrix only (appendix B section 11, research/cause.py).
train.py clips the gradient norm before every optimizer's step (neither reference clips).
"""

import dataclasses
import math

import torch

OPTIMIZERS = ("adamw", "tiger", "lamb", "signum")

# The references' constants. Tiger: tiger.py's defaults (beta=0.965, weight_decay=0.01). LAMB: You et al. 2019
# trained BERT with beta1 = 0.9, beta2 = 0.999, epsilon = 1e-6 and weight decay 0.01.
TIGER_BETA = 0.965
LAMB_BETAS = (0.9, 0.999)
LAMB_EPS = 1e-6
DEFAULT_WEIGHT_DECAY = dict(adamw=0.1, tiger=0.01, lamb=0.01, signum=0.01)  # adamw: nanoGPT's 0.1
RELATIVE = ("all", "embedding", "body", "none")  # Config.relative: which weights step relative to their size
TWIN_EMB_SCALE = 0.02  # the absolute twins' step scale for the token embedding: the sigma = 0.02 arms' init RMS


class Tiger(torch.optim.Optimizer):
    """Tiger: sign of the momentum, scaled by the weight's own RMS.

    Each parameter group has a `kind` that picks tiger.py's rule for its tensors (the reference picks by the
    variable's name, in `_resource_apply`):
        'vector' (norm gains, biases; `re.findall('bias|beta|gamma', var.name)`): lr * 0.5, no weight decay
                 (`lr, d = lr * 0.5, 0`). An absolute step, like Adam's.
        'rows'   (token and position embeddings; `'embeddings' in var.name`): lr * RMS of each ROW
                 (`lr * root_mean_square(var, axis=-1, keepdims=True)`): a token's row moves by a fixed fraction
                 of its own size.
        'matrix' (every other weight: `lr * root_mean_square(var)`): lr * RMS of the whole tensor.
    Then, with m the momentum and g the gradient:
        m <- beta m + (1 - beta) g                  (`m_t = tf.assign(m, b1 * m + b2 * g)`, b1 = beta, b2 = 1 - beta)
        W <- W - (sign(m) + wd W) * step_size       (`u = (tf.sign(m_t) + d * var) * lr`, `var - u`)
    so decoupled weight decay is scaled by the same (RMS-scaled) step size. RMS is of W before the update.
    A matrix of exact zeros has RMS 0 and never moves: see Config's residual_std in train.py.

    Left out of the reference: gradient accumulation (grad_accum_steps; train.py has none) and its NaN guard (a
    non-finite gradient shrinks the weights by 0.99 instead of updating): train.py stops on a non-finite loss.
    Added to it: train.py clips the gradient norm before the step (the reference does not; see the module docstring).

    The absolute twin (a group with relative=False): step_size = lr * s, with s frozen at the first step (the group's
    `scale` if given, else the tensor's RMS then), for 'rows' and 'matrix' alike; 'vector' is unchanged (absolute).
    """

    def __init__(self, params, lr=1e-3, beta=TIGER_BETA, weight_decay=0.01):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Tiger's beta must be in [0, 1), got {beta}")
        super().__init__(params, dict(lr=lr, beta=beta, weight_decay=weight_decay, kind="matrix", relative=True,
                                      scale=None))
        for group in self.param_groups:
            if group["kind"] not in ("matrix", "rows", "vector"):
                raise ValueError(f"Tiger's group kind must be matrix, rows or vector, got {group['kind']!r}")

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, beta, kind = group["lr"], group["beta"], group["kind"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["m"] = torch.zeros_like(p)
                m = state["m"]
                m.lerp_(p.grad, 1 - beta)  # m <- beta m + (1 - beta) g, in one pass
                if kind == "vector":
                    p.add_(m.sign(), alpha=-lr * 0.5)
                    continue
                wd = group["weight_decay"]
                if not group.get("relative", True):  # the absolute twin: a scale frozen at the first step
                    step_size = lr * frozen_scale(state, p, group.get("scale"))
                elif kind == "rows":  # (n, 1): each row's RMS
                    step_size = lr * torch.linalg.vector_norm(p, dim=-1, keepdim=True) / math.sqrt(p.size(-1))
                else:
                    step_size = lr * torch.linalg.vector_norm(p) / math.sqrt(p.numel())
                # W - (sign(m) + wd W) s  =  W (1 - wd s) - sign(m) s: two in-place passes, no temporary of W's size
                p.mul_(1 - wd * step_size).addcmul_(m.sign(), step_size, value=-1)


class Lamb(torch.optim.Optimizer):
    """LAMB, You et al. 2019, Algorithm 2, with phi(z) = z:

        m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2                (Adam's moments)
        r  = m_hat / (sqrt(v_hat) + eps) + wd W                          (m_hat = m / (1 - b1^t), v_hat likewise)
        W <- W - lr * (|W| / |r|) * r                                    (the trust ratio |W| / |r|, per tensor)

    So every tensor moves by exactly lr * |W| (Frobenius norms) per step, whatever the gradient's scale. Where
    |W| = 0 or |r| = 0 the ratio is 1 (the usual convention): a zero tensor takes Adam's plain step and so,
    unlike under Tiger, it can leave zero. Weight decay sits inside r, as in the paper (not decoupled); the
    parameter groups set it per tensor (train.py: matrices 0.01, vectors 0). The trust ratio applies to every
    tensor, the norms' gains included, as Algorithm 2 is printed; BERT's TensorFlow LAMB instead exempts LayerNorm
    and bias variables from it (exclude_from_layer_adaptation), so there they take Adam's absolute step. For the
    tied head the final norm's gain is the other factor of the logit scale (appendix B), so the choice matters.
    The trust ratio bounds each TENSOR's change; one row of E can grow or turn by more than lr_t of its own size.
    Added to Algorithm 2: train.py clips the gradient norm before the step (see the module docstring).

    The absolute twin (a group with relative=False): W <- W - lr * s * r, s frozen at the first step (the group's
    `scale` if given, else the tensor's RMS then). That is AdamW (decoupled decay: lr s wd W) at lr s with LAMB's
    betas and eps. At t = 1, r = g / (|g| + eps) entrywise, so |r| ~ sqrt(numel) only where the gradient's entries
    are far above eps; then LAMB's step lr |W| / |r| * r ~ lr RMS(W) * r is the twin's. Where they are not (likely
    with clipped gradients over large tensors), |r| < sqrt(numel): LAMB's trust ratio scales its step back up to
    lr |W| and the twin's stays smaller, so the first steps do NOT agree (ortho's embedding: 0.24x LAMB's at the
    same lr, measured after the runs; cause_record.first_step) and the twin changes the step's size as well as its
    relativity.
    """

    def __init__(self, params, lr=1e-3, betas=LAMB_BETAS, eps=LAMB_EPS, weight_decay=0.01):
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"LAMB's betas must be in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, relative=True,
                                      scale=None))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            (b1, b2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                state["t"] += 1
                t, m, v = state["t"], state["m"], state["v"]
                m.lerp_(p.grad, 1 - b1)
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                # r = m_hat / (sqrt(v_hat) + eps) + wd W, with m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t)
                r = v.sqrt().div_(math.sqrt(1 - b2 ** t)).add_(eps).reciprocal_().mul_(m).div_(1 - b1 ** t)
                if wd:
                    r.add_(p, alpha=wd)
                if not group.get("relative", True):  # the absolute twin: AdamW at lr * s
                    p.sub_(r.mul_(group["lr"] * frozen_scale(state, p, group.get("scale"))))
                    continue
                w_norm, r_norm = p.norm(), r.norm()
                ratio = torch.where((w_norm > 0) & (r_norm > 0), w_norm / r_norm, torch.ones_like(w_norm))
                p.sub_(r.mul_(group["lr"] * ratio))


def frozen_scale(state, p, scale=None):
    """The absolute twins' scale s of tensor p: `scale` if given, else RMS(p) at the first call (the first step, so
    the init's RMS), kept in the optimizer's state so that a resumed run steps by the same s."""
    if "scale" not in state:
        rms = torch.linalg.vector_norm(p) / math.sqrt(p.numel())
        state["scale"] = torch.full((), scale, device=p.device) if scale is not None else rms
    return state["scale"]


# Under Tiger the residual branches start at N(0, TIGER_RESIDUAL_STD^2) instead of exactly 0 (train.Config); small
# enough that a fresh model's first loss stays within 1% of the 2-gram prediction at d = 768 (measured: appendix B)
TIGER_RESIDUAL_STD = 1e-4


def check_settings(c):
    """Refuse, in one line, optimizer settings of Config c that can't mean anything. (It reads c and changes nothing:
    Config gives Tiger its near-zero branches, TIGER_RESIDUAL_STD, before it asks.)"""
    if c.optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {c.optimizer!r}; choose one of: {', '.join(OPTIMIZERS)}")
    if c.relative not in RELATIVE:
        raise ValueError(f"relative must be one of {', '.join(RELATIVE)}, got {c.relative!r}")
    absolute = c.optimizer in ("adamw", "signum")
    if c.relative != "all" and (absolute or (c.optimizer == "lamb" and c.relative != "none")):
        raise ValueError(f"relative={c.relative} is not defined for optimizer={c.optimizer} (adamw's and signum's "
                         "steps are already absolute; lamb takes all or none, tiger any of all, embedding, body, none)")
    if c.optimizer == "tiger" and c.zero_init_residual and c.residual_std == 0:
        # Tiger steps each matrix by lr * RMS(matrix): exact zeros (RMS 0) would never move, and the blocks
        # would stay the identity for ever. Near-zero branches keep the fresh model the 2-gram model.
        raise ValueError("optimizer=tiger moves each matrix by lr x its own RMS, so residual branches that start "
                         "at exactly zero (residual_std=0) never move; give a small --residual_std (default "
                         f"under tiger: {TIGER_RESIDUAL_STD:g}) or --zero_init_residual=false")
    if (c.weight_decay is not None and c.weight_decay < 0) or c.grad_clip < 0 or not 0 <= min(c.beta1, c.beta2) \
            or not max(c.beta1, c.beta2) < 1:
        raise ValueError("weight_decay and grad_clip must be >= 0, betas in [0, 1)")
    betas = {f.name: f.default for f in dataclasses.fields(c) if f.name in ("beta1", "beta2")}
    if c.optimizer != "adamw" and (c.beta1, c.beta2) != (betas["beta1"], betas["beta2"]):
        # a flag that does nothing must not be recorded in config.json as if it had
        raise ValueError(f"--beta1/--beta2 are AdamW's; optimizer={c.optimizer} uses its reference's constants "
                         f"(optim.py: tiger and signum beta {TIGER_BETA}, lamb betas {LAMB_BETAS}): leave them at "
                         f"{betas['beta1']}/{betas['beta2']}")


def make_optimizer(model, c):
    """The optimizer Config c names, over model's trainable parameters. Every rule below says which tensors
    decay: matrices (including the embedding) do, vectors (norm gains, biases) don't: nanoGPT's rule, and
    BERT's for LAMB, and tiger.py's for its 'bias|beta|gamma' variables."""
    params = [p for p in model.parameters() if p.requires_grad]
    matrices, vectors = [p for p in params if p.dim() >= 2], [p for p in params if p.dim() < 2]
    wd = c.resolved()["weight_decay"]
    # the token embedding (tied: also the output head) and a learned position table: Tiger moves them row by row
    tables = [model.transformer.wte.weight] + ([model.transformer.wpe.weight] if "wpe" in model.transformer else [])
    rows = [p for p in matrices if any(p is t for t in tables)]
    rest = [p for p in matrices if not any(p is t for t in tables)]
    # c.relative: which of them step relative to their own size ('all': the optimizer as published); the others take
    # the absolute twin's step, whose scale for the tables is TWIN_EMB_SCALE and for every other tensor its init RMS
    emb_rel, body_rel = c.relative in ("all", "embedding"), c.relative in ("all", "body")
    emb_scale = None if emb_rel else TWIN_EMB_SCALE
    if c.optimizer == "tiger":
        groups = [dict(params=rows, kind="rows", weight_decay=wd, relative=emb_rel, scale=emb_scale),
                  dict(params=rest, kind="matrix", weight_decay=wd, relative=body_rel),
                  dict(params=vectors, kind="vector", weight_decay=0.0)]
        return Tiger([g for g in groups if g["params"]], lr=c.lr)
    if c.optimizer == "signum":  # Tiger's update with one fixed per-entry step, lr, for every matrix (scale 1)
        groups = [dict(params=matrices, kind="matrix", weight_decay=wd, relative=False, scale=1.0),
                  dict(params=vectors, kind="vector", weight_decay=0.0)]
        return Tiger([g for g in groups if g["params"]], lr=c.lr)
    if c.optimizer == "lamb" and c.relative == "all":  # as published: every tensor by its own trust ratio
        return Lamb([dict(params=matrices, weight_decay=wd), dict(params=vectors, weight_decay=0.0)], lr=c.lr)
    if c.optimizer == "lamb":  # the twin, relative='none' (Config refuses 'embedding' and 'body' for LAMB)
        groups = [dict(params=rows, weight_decay=wd, relative=emb_rel, scale=emb_scale),
                  dict(params=rest, weight_decay=wd, relative=body_rel),
                  dict(params=vectors, weight_decay=0.0, relative=body_rel)]
        return Lamb([g for g in groups if g["params"]], lr=c.lr)
    groups = [dict(params=matrices, weight_decay=wd), dict(params=vectors, weight_decay=0.0)]
    # AdamW, fused: one kernel per tensor updates p, m and v in a single pass (on a 2-core CPU ~4x faster than the
    # foreach implementation over the 12.9M-entry embedding); same update within float rounding
    on_mps = any(p.device.type == "mps" for p in params)  # keep Apple GPUs on the long-supported foreach path
    impl = dict(fused=True) if c.fused_adamw and not on_mps else dict(foreach=True)
    return torch.optim.AdamW(groups, lr=c.lr, betas=(c.beta1, c.beta2), **impl)


def relative_step_budget(lrs):
    """The most a tensor's norm can grow under a relative step of fraction lr_t per step: prod (1 + lr_t)
    <= exp(sum lr_t). E.g. 1200 steps at lr 1e-3: at most e^1.2 = 3.3x; a cosine schedule averages ~0.55 lr."""
    return math.exp(sum(math.log1p(lr) for lr in lrs))
