"""
tiedgpt: a small GPT whose output head is chosen by one flag, built to study *tied embeddings*.

Tying means the input embedding E (n x d) is also the output projection: logits = h . E^T.
The whole project is about one consequence of that at initialisation:

    With every residual branch starting at zero, a fresh GPT is a 2-gram model. Token i enters as its
    embedding w_i, flows untouched to the final norm, which turns it into h = w_i / sigma, and the tied
    head scores every token k by h . w_k = w_i . w_k / sigma. The self-score is |w_i|^2 / sigma ~ d*sigma,
    the others are ~0, so the first loss is ~ log(e^{d sigma} + n - 1) ~ d*sigma, far above the uniform
    ln(n) whenever d*sigma >> ln(n).

The heads (GPTConfig.head) are the fixes we compare; each one's docstring derives its first loss and
`predicted_initial_loss` turns those derivations into numbers that tests/ check against the real model.

Layout follows nanoGPT's model.py: config dataclass, attention, MLP, block, the heads (one table, HEAD_TABLE: the
only place a head's name is read), GPT, then the theory. GPT.forward computes the textbook loss; the fused loss that
train.py uses by default, the same numbers without building the logits, is in fused_loss.py.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("rope", "none", "learned")


def flag(default, help):
    """A config field with its one line of `python train.py --help` (train.py reads it from the field's metadata)."""
    return field(default=default, metadata=dict(help=help))


@dataclass
class GPTConfig:
    # n: GPT-2's BPE. Not padded to 50304: every extra row would be an extra logit
    vocab_size: int = flag(50257, "n, the vocabulary (50257: GPT-2's BPE; vocab=corpus sets it from the data)")
    block_size: int = flag(256, "context length T in tokens")
    n_layer: int = flag(4, "transformer blocks")
    n_head: int = flag(4, "attention heads (n_embd must divide evenly)")
    n_embd: int = flag(256, "width d")
    dropout: float = flag(0.0, "dropout probability in [0, 1)")
    # GPT-2 had biases; they are not needed here
    bias: bool = flag(False, "biases in Linear layers and norms (true|false)")
    head: str = flag("tied", "output head, a row of HEAD_TABLE: tied | untied | logn | ortho | bert | shuffle | "
                             "channel | scale | softcap")
    # sigma, the std of the token embedding at init. None means d**-0.5, so every |w_i| ~ 1: the
    # "unit-norm" init of the original Transformer's embeddings. It puts d*sigma = sqrt(d) well above
    # ln(n) ~ 10.8 for every width we can afford on a CPU (d=256 gives 16), which is the regime the
    # derivation is about. GPT-2 used 0.02 (d*sigma = 15.4 at d=768, but only 5.1 at d=256): pass
    # emb_std=0.02 to study it. PyTorch's nn.Embedding default would be 1.0 (d*sigma = d).
    emb_std: float = flag(None, "sigma, the embedding's init std (None: d**-0.5; GPT-2 used 0.02); logn sets its own")
    # Residual branches start at zero (their output projections are zero-initialised), so at step 0
    # each block is the identity and the network *is* the 2-gram model of the derivation.
    # False gives nanoGPT's GPT-2 init (N(0, 0.02/sqrt(2 L)) output projections).
    zero_init_residual: bool = flag(True, "residual branches start at zero, so a fresh model is the 2-gram model "
                                          "(true|false)")
    # With zero_init_residual: None (or 0) starts the branches' last layers at exactly 0; a small std (e.g. 1e-4)
    # starts them NEAR zero, N(0, residual_std^2): still the 2-gram model at step 0 to within a small error, but
    # movable by an optimizer whose step is relative to the weight's size (Tiger: lr x RMS, and RMS(0) = 0).
    residual_std: float = flag(None, "with zero_init_residual: init std of the branches' last layers (None or 0: "
                                     "exactly 0; tiger: 1e-4)")
    # How positions enter. 'rope' rotates queries and keys inside attention and adds nothing to the
    # residual stream, so w_i reaches the final norm untouched. 'learned' is GPT-2's additive table
    # (it breaks the 2-gram premise a little); 'none' relies on the causal mask alone.
    pos: str = flag("rope", "positions: " + " | ".join(POSITIONS))
    channel_groups: int = flag(4, "groups of the 'channel' (ShuffleNet) head's shuffle")
    # it shrinks w_i/sigma a little, and the theory accounts for it
    norm_eps: float = flag(1e-5, "the norms' epsilon (> 0)")
    # 'layernorm' (GPT-2: subtract the mean, divide by the std) or 'rmsnorm' (LLaMA and most tied models trained
    # today: divide by the root mean square, no mean subtraction). At init both give h ~ w_i / sigma.
    norm: str = flag("layernorm", "layernorm (GPT-2) | rmsnorm (LLaMA-style)")
    # (Gemma 2's final cap is 30)
    softcap: float = flag(30.0, "the softcap head's cap c: logits -> c tanh(z/c)")

    def __post_init__(self):
        """Refuse configurations that can't work, with one line that says why and lists the choices."""
        if self.head not in HEADS:
            raise ValueError(f"unknown head {self.head!r}; choose one of: {', '.join(HEADS)}")
        if self.norm not in NORMS:
            raise ValueError(f"unknown norm {self.norm!r}; choose one of: {', '.join(NORMS)}")
        if not self.norm_eps > 0:
            raise ValueError(f"norm_eps must be > 0, got {self.norm_eps}")
        if not self.softcap > 0:
            raise ValueError(f"softcap must be > 0, got {self.softcap}")
        if self.pos not in POSITIONS:
            raise ValueError(f"unknown pos {self.pos!r}; choose one of: {', '.join(POSITIONS)}")
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        d = self.n_embd
        if d % self.n_head:
            raise ValueError(f"n_embd={d} must be divisible by n_head={self.n_head}")
        if self.pos == "rope" and (d // self.n_head) % 2:
            raise ValueError(f"rope needs an even head size, got n_embd/n_head = {d // self.n_head}")
        problem = getattr(self.head_spec.after_norm, "problem", lambda c: None)(self)  # the head's own needs
        if problem:
            raise ValueError(f"head {self.head!r} {problem}; valid heads: {', '.join(HEADS)}")
        if self.emb_std is not None and not self.emb_std > 0:
            raise ValueError(f"emb_std must be > 0 (or None for d**-0.5), got {self.emb_std}")
        if self.residual_std is not None and not (self.residual_std >= 0 and self.zero_init_residual):
            raise ValueError(f"residual_std={self.residual_std} needs zero_init_residual=true and a value >= 0 (it "
                             f"sets how near zero the branches start; zero_init_residual=false is GPT-2's init)")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")

    @property
    def head_spec(self):
        """This config's row of HEAD_TABLE."""
        return HEAD_TABLE[self.head]

    @property
    def sigma(self):
        """The embedding std the model is initialised with, after the head's own rule (logn)."""
        if self.head_spec.logn_sigma:
            return math.log(self.vocab_size) / self.n_embd  # d * sigma = ln n: self-logit equals ln n
        return self.emb_std if self.emb_std is not None else self.n_embd ** -0.5


# ----------------------------------------------------------------------------------------------------
# The transformer body (nanoGPT's, with rotary positions and zero-initialised residual branches)

def rope_tables(head_size, block_size, base=10000.0):
    """cos/sin tables for rotary embeddings: pair (x_2j, x_2j+1) at position t turns by t * base^(-2j/hs)."""
    inv_freq = base ** (-torch.arange(0, head_size, 2, dtype=torch.float32) / head_size)
    angles = torch.outer(torch.arange(block_size, dtype=torch.float32), inv_freq)  # (T, hs/2)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """Rotate each (even, odd) pair of x (B, nh, T, hs) by its angle. A rotation keeps |x|, and q.k then
    depends on positions only through their difference."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.c_proj.RESIDUAL_OUT = True  # marks the branch's last layer for the init in GPT._init_weights
        self.n_head, self.dropout, self.rope = config.n_head, config.dropout, config.pos == "rope"
        if self.rope:
            cos, sin = rope_tables(config.n_embd // config.n_head, config.block_size)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if self.rope:
            cos, sin = self.rope_cos[:T].to(q.dtype), self.rope_sin[:T].to(q.dtype)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        # flash attention where the backend has it; is_causal masks the future
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return F.dropout(self.c_proj(y), self.dropout, self.training)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.c_proj.RESIDUAL_OUT = True
        self.dropout = config.dropout

    def forward(self, x):
        return F.dropout(self.c_proj(F.gelu(self.c_fc(x))), self.dropout, self.training)


def make_norm(config):
    """LayerNorm: h = (x - mean(x)) / sqrt(var(x) + eps) * g (+ b). RMSNorm: h = x / sqrt(mean(x^2) + eps) * g.
    For a fresh embedding row w (mean ~ 0) the two differ only by the mean subtraction: LayerNorm's h loses the
    component along (1, ..., 1), one of d directions, which is where its -1/d effects come from."""
    if config.norm == "rmsnorm":
        return nn.RMSNorm(config.n_embd, eps=config.norm_eps)
    return nn.LayerNorm(config.n_embd, eps=config.norm_eps, bias=config.bias)


class Block(nn.Module):
    """Pre-norm block: x + attn(ln(x)), then x + mlp(ln(x)). With c_proj = 0 both branches add 0."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = make_norm(config)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = make_norm(config)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


# ----------------------------------------------------------------------------------------------------
# Output heads. Each one maps the final-norm output h (.., d) to h' (.., d); logits are then h' . E^T
# (or h' . W^T for 'untied'). Every docstring derives the first loss; `predicted_initial_loss` encodes it.
# Notation: a = the self-logit h'.w_i (input token i scoring itself), v = variance of the other logits.

class Identity(nn.Module):
    """tied / untied / logn / softcap: logits come straight from h (softcap then caps them: see softcap_self_logit).

    tied:   h = w_i / sigma, so a = |w_i|^2 / sigma ~ d sigma and v = |h|^2 sigma^2 = d sigma^2.
    logn:   the same with sigma = ln(n)/d, so a = ln n: the self-logit weighs e^{ln n} = n, as much as all
            the others together, and the first loss is ~ ln(2n) instead of ~ d sigma.
    untied: h . u_k with every u_k independent of h: all n logits ~ N(0, d sigma^2), no outlier, so the
            loss is ~ log(n E[e^z]) = ln n + d sigma^2 / 2.
    """

    def __init__(self, config=None):
        super().__init__()

    def forward(self, h):
        return h


class OrthoProjection(nn.Module):
    """ortho: h' = h P with P a trainable d x d matrix, orthogonal at init.

    P keeps lengths (|hP| = |h|) but turns w_i to a direction almost orthogonal to w_i itself:
    cos(w, wP) = w^T P w / |w|^2 has mean tr(P)/d and spread ~ d^-1/2 (Johnson-Lindenstrauss: a random
    rotation of a d-vector is nearly orthogonal to it). So the self-logit joins the crowd,
    a ~ N(0, d sigma^2) like every other logit, and the loss is ~ ln n + d sigma^2 / 2.
    """

    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(config.n_embd, config.n_embd, bias=False)

    def reset_parameters(self):
        nn.init.orthogonal_(self.proj.weight)

    def forward(self, h):
        return self.proj(h)


class BertTransform(nn.Module):
    """bert: h' = LayerNorm(GELU(h D + b)), BERT's masked-LM head transform, then the tied projection.

    It generalises `ortho` (dense + bias + activation + norm). D starts orthogonal, b at 0, so h D is a
    random rotation of h (coordinates ~ N(0, 1)); GELU and the norm keep |h'|^2 ~ d while leaving h'
    as unrelated to w_i as in `ortho`. All logits ~ N(0, d sigma^2): loss ~ ln n + d sigma^2 / 2.
    """

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.n_embd, config.n_embd, bias=True)
        self.norm = nn.LayerNorm(config.n_embd, eps=config.norm_eps)

    def reset_parameters(self):
        nn.init.orthogonal_(self.dense.weight)
        nn.init.zeros_(self.dense.bias)
        self.norm.reset_parameters()

    def forward(self, h):
        return self.norm(F.gelu(self.dense(h)))


class HalfSwap(nn.Module):
    """shuffle: h' = S(h) = h[d/2:] ++ h[:d/2], no parameters.

    S(w) . w = 2 w[:d/2] . w[d/2:], twice a dot product of two independent halves: mean 0, variance
    4 (d/2) sigma^4 = 2 d sigma^4 (each pair w_j w_{j+d/2} is counted twice, since the swap is its own
    inverse). Divided by sigma (the norm): a ~ N(0, 2 d sigma^2), no outlier: one logit among n with
    twice the others' variance changes the sum by a relative ~ e^{d sigma^2 / 2} / n, nothing.
    Loss ~ ln n + d sigma^2/2. (cos(S(w), w) therefore has spread sqrt(2/d), not the sqrt(1/d) of a random
    rotation; its measured mean is -1/d, not 0, because LayerNorm removes w's mean first: after that the
    coordinates sum to 0, so S(h) . h = -|h|^2/d on average.)
    """

    def __init__(self, config=None):
        super().__init__()

    @staticmethod
    def problem(config):
        return f"swaps two halves and needs an even n_embd, got {config.n_embd}" if config.n_embd % 2 else None

    def forward(self, h):
        d = h.size(-1)
        return torch.cat((h[..., d // 2:], h[..., : d // 2]), dim=-1)


class ChannelShuffle(nn.Module):
    """channel: ShuffleNet's channel shuffle: view h as (g, d/g), transpose to (d/g, g), flatten.

    A fixed permutation with no parameters: the transpose of a g x (d/g) grid. Unlike the half swap it keeps a
    few coordinates in place (index a*(d/g)+b stays where a*(d/g-1) = b*(g-1): 0, d-1, and gcd(g-1, d/g-1)-1
    more), and each fixed coordinate adds w_j^2/sigma ~ sigma to the self-logit: negligible. Its cycles are not
    all long: at d=256, g=4 six are 2-cycles, and with g = sqrt(d) the grid is square, the transpose is its own
    inverse and every cycle has length 1 or 2, as for the half swap (tested). A 2-cycle counts its product
    w_j w_k twice, so the self-logit's variance lies between d sigma^2 and the half swap's 2 d sigma^2: still
    no outlier, loss ~ ln n + d sigma^2 / 2. Measured, cos(P(h), h) has mean (fixed - 1)/d, not fixed/d:
    LayerNorm has already removed the mean (see HalfSwap).
    """

    def __init__(self, config):
        super().__init__()
        self.groups = config.channel_groups

    @staticmethod
    def problem(config):
        g, d = config.channel_groups, config.n_embd
        return f"needs n_embd={d} divisible by channel_groups={g} (>= 2)" if g < 2 or d % g else None

    def forward(self, h):
        g, d = self.groups, h.size(-1)
        return h.unflatten(-1, (g, d // g)).transpose(-1, -2).flatten(-2)


class LogitScale(nn.Module):
    """scale: tied, sigma unchanged, logits multiplied by the fixed c = ln(n) / (d sigma).

    The self-logit d sigma becomes exactly ln n (as in `logn`) and the others shrink to
    N(0, c^2 d sigma^2) = N(0, (ln n)^2 / d): the same first loss as `logn`, ~ ln(2n), but the
    embedding keeps its size. A buffer, not a parameter: nothing learns it.
    """

    def __init__(self, config):
        super().__init__()
        c = math.log(config.vocab_size) / (config.n_embd * config.sigma)
        self.register_buffer("c", torch.tensor(c), persistent=False)

    def forward(self, h):
        return h * self.c  # scaling h scales every logit h . w_k by c


@dataclass(frozen=True)
class Head:
    """One row of HEAD_TABLE: everything that makes a head what it is.
    after_norm  the module applied to the final norm's output h before the projection (its docstring derives the
                first loss)
    tied        logits h' . E^T from the embedding E itself; False: a separate matrix W, initialised like E
    logn_sigma  E's init std is ln(n)/d (d sigma = ln n) instead of emb_std
    cap         every logit z -> c tanh(z / c), c = GPTConfig.softcap
    first_loss  which derivation predicted_initial_loss uses: 'self' (h' = h: w_i scores itself ~ d sigma above the
                rest), 'unrelated' (h' unrelated to w_i: every logit ~ N(0, d sigma^2)), 'unit' (unrelated, and a
                norm after the transform makes |h'|^2 = d), 'scaled' (self, times LogitScale's c)"""
    after_norm: type = Identity
    tied: bool = True
    logn_sigma: bool = False
    cap: bool = False
    first_loss: str = "self"


HEAD_TABLE = {
    "tied": Head(),
    "untied": Head(tied=False, first_loss="unrelated"),
    "logn": Head(logn_sigma=True),
    "ortho": Head(OrthoProjection, first_loss="unrelated"),
    "bert": Head(BertTransform, first_loss="unit"),
    "shuffle": Head(HalfSwap, first_loss="unrelated"),
    "channel": Head(ChannelShuffle, first_loss="unrelated"),
    "scale": Head(LogitScale, first_loss="scaled"),
    "softcap": Head(cap=True),
}
HEADS = tuple(HEAD_TABLE)


# ----------------------------------------------------------------------------------------------------

class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),  # E: row i is w_i
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=make_norm(config),
        ))
        if config.pos == "learned":
            self.transformer.wpe = nn.Embedding(config.block_size, config.n_embd)
        spec = config.head_spec
        self.head = spec.after_norm(config)  # what the head does after the final norm (HEAD_TABLE)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if spec.tied:
            # The tie: one Parameter object serves as both tables. nn.Embedding looks rows up in it,
            # nn.Linear multiplies by its transpose, and backward adds both uses' gradients into one .grad.
            self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        if hasattr(self.head, "reset_parameters"):
            self.head.reset_parameters()
        # The embedding is initialised last, so nothing above (lm_head is tied to it) overwrites it.
        # Re-initialising *either* name after tying re-initialises both: they are one tensor.
        nn.init.normal_(self.transformer.wte.weight, mean=0.0, std=config.sigma)
        if not spec.tied:  # "initialised like E": same law, independent draw
            nn.init.normal_(self.lm_head.weight, mean=0.0, std=config.sigma)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            if getattr(module, "RESIDUAL_OUT", False):
                if self.config.zero_init_residual and self.config.residual_std:  # near zero (see GPTConfig)
                    nn.init.normal_(module.weight, 0.0, self.config.residual_std)
                elif self.config.zero_init_residual:
                    nn.init.zeros_(module.weight)  # the branch adds exactly 0 at step 0
                else:  # GPT-2: shrink the branch by sqrt of the number of residual additions
                    nn.init.normal_(module.weight, 0.0, 0.02 / math.sqrt(2 * self.config.n_layer))
            else:
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)  # wpe; wte is set in __init__

    @property
    def tied(self):
        return self.lm_head.weight is self.transformer.wte.weight

    def get_num_params(self, non_embedding=True):
        """Parameters, counting a tied tensor once (model.parameters() already dedups it).
        non_embedding=True leaves out the token embedding (and a learned position table), as nanoGPT
        does; an untied output matrix is a real extra weight and stays counted."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.transformer.wte.weight.numel()
            if "wpe" in self.transformer:
                n -= self.transformer.wpe.weight.numel()
        return n

    def hidden(self, idx):
        """Token ids (B, T) -> final-norm output h (B, T, d), before the head."""
        T = idx.size(1)
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.config.block_size}")
        x = self.transformer.wte(idx)  # w_i
        if "wpe" in self.transformer:
            x = x + self.transformer.wpe(torch.arange(T, device=idx.device))
        x = self.transformer.drop(x)
        for block in self.transformer.h:
            x = block(x)  # at init each block returns x unchanged (zero-initialised residual branches)
        return self.transformer.ln_f(x)  # h = (w_i - mean) / std ~ w_i / sigma

    def logits(self, h):
        """h (.., d) -> logits (.., n): the head's transform, then h' . E^T (or h' . W^T); the softcap head
        then bounds every logit to (-c, c) with c tanh(z / c)."""
        z = self.lm_head(self.head(h))
        if self.config.head_spec.cap:
            c = self.config.softcap
            z = c * torch.tanh(z / c)
        return z

    def forward(self, idx, targets=None, return_logits=True):
        """As nanoGPT: `logits, loss = model(idx, targets)` gives the logits of every position and the mean
        cross-entropy, loss = mean_t -log softmax(z_t)[y_t] (targets equal to -1 are ignored); without targets, the
        logits of the last position only (all that generation needs) and loss None. return_logits=False hands back
        None for the logits. train.py computes the same loss without building the (B*T) x n logits:
        fused_loss.FusedLoss, its fast default."""
        h = self.hidden(idx)
        if targets is None:
            h = h[:, [-1], :]
        logits = self.logits(h)
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)).float(),
                                                            targets.reshape(-1), ignore_index=-1)
        return (logits if return_logits else None), loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        """Sample max_new_tokens continuations of idx (B, T), feeding each prediction back in."""
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        for _ in range(max_new_tokens):
            idx_cond = idx[:, -self.config.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("inf")
            idx_next = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


# ----------------------------------------------------------------------------------------------------
# The theory, as numbers

def seed_initial_loss(n, d, sigma):
    """The seed's prediction: self-logit d sigma, every other logit exactly 0,
    loss = log(e^{d sigma} + (n - 1) e^0)."""
    return math.log(math.exp(d * sigma) + n - 1)


def refined_initial_loss(n, d, sigma, r=0.0, eps=0.0):
    """The tied model's first loss, one step past the seed.

    1. The other logits are not 0: h . w_k = w_i . w_k / sigma with E[w_i . w_k] = 0 and
       E[(w_i . w_k)^2] = d sigma^4, so they are ~ N(0, d sigma^2), and E[e^z] = e^{d sigma^2 / 2}.
       Summing n - 1 of them: log(e^{d sigma} + (n - 1) e^{d sigma^2 / 2}).
    2. A fraction r of targets repeat the input token (j = i); their loss is lower by the self-logit:
       loss = log(...) - r d sigma.
    3. (eps > 0) LayerNorm divides by sqrt(sigma^2 + eps), not sigma: with rho = sigma/sqrt(sigma^2+eps)
       the self-logit is d sigma rho and the variance d sigma^2 rho^2. With eps = 1e-5 that is -1.2% at
       sigma = 0.02; eps = 0 gives the formula in the docs.
    """
    rho = sigma / math.sqrt(sigma * sigma + eps)
    a, v = d * sigma * rho, d * sigma * sigma * rho * rho
    return _log_sum(a, n - 1, v) - r * a


def _log_sum(a, m, v):
    """log(e^a + m e^{v/2}), computed without overflow."""
    b = math.log(m) + v / 2
    hi = max(a, b)
    return hi + math.log(math.exp(a - hi) + math.exp(b - hi))


def normed_scale(config):
    """(a, v) for a fresh embedding row after the final norm: a = |w|^2-ish self-logit of the tied head, and
    v / sigma^2 = |h|^2. With m2 the mean square the norm divides by (per coordinate):
        rmsnorm:   m2 = sigma^2                   (h = w / sqrt(mean(w^2) + eps))
        layernorm: m2 = sigma^2 (1 - 1/d)         (the mean is removed first: d - 1 degrees of freedom left)
    h = w / sqrt(m2 + eps), so |h|^2 = d m2 / (m2 + eps) = d rho^2 and the self-logit h . w = d m2 / sqrt(m2 + eps)
    = d sqrt(m2) rho (LayerNorm's h . w = h . (w - mean), as h sums to 0). Every other logit h . w_k has
    variance sigma^2 |h|^2 = d sigma^2 rho^2."""
    d, sigma = config.n_embd, config.sigma
    m2 = sigma * sigma * (1.0 - 1.0 / d if config.norm == "layernorm" else 1.0)
    rho2 = m2 / (m2 + config.norm_eps)
    return d * math.sqrt(m2 * rho2), d * sigma * sigma * rho2


def softcap_self_logit(a, c):
    """The softcap head: tied, then every logit z -> c tanh(z / c) (Gemma 2, modded-nanogpt, nanochat cap logits
    this way). tanh is odd and ~ identity near 0, so the other logits ~ N(0, v) pass almost unchanged when
    v << c^2 (E[e^z] stays ~ e^{v/2}), while the self-logit d sigma is bounded: a -> c tanh(a / c) < c. The first
    loss is log(e^{c tanh(a/c)} + (n - 1) e^{v/2}) - r c tanh(a/c): near d sigma while c >> d sigma (the cap is
    idle), near ln n only when c is well below ln n. And the cap costs something later: no logit exceeds c, so
    no prediction is surer than e^c / (e^c + (n - 1) e^{-c}), a floor under the loss."""
    return c * math.tanh(a / c)


def predicted_initial_loss(config, r=0.0):
    """Expected first-step loss of GPT(config) on text where a fraction r of targets repeat their input,
    per the derivation in each head's docstring. Valid in the 2-gram configuration
    (zero_init_residual=True, pos != 'learned'), where h = norm(w_i) exactly; see normed_scale for a and v."""
    n, d, sigma = config.vocab_size, config.n_embd, config.sigma
    spec = config.head_spec
    a, v = normed_scale(config)
    if spec.first_loss == "scaled":  # tied logits times c = ln(n) / (d sigma): a -> c a, v -> c^2 v
        c = math.log(n) / (d * sigma)
        a, v = c * a, c * c * v
    if spec.cap:
        a = softcap_self_logit(a, config.softcap)
    if spec.first_loss in ("self", "scaled"):  # tied, logn (its own sigma = ln(n)/d), scale, softcap
        return _log_sum(a, n - 1, v) - r * a
    # unrelated (untied, ortho, shuffle, channel): |h'| = |h| and h' is unrelated to w_i, so all n logits are
    # ~ N(0, v): loss = log(n e^{v/2}) = ln n + v/2. unit (bert): its final LayerNorm makes |h'|^2 = d (its input has
    # variance ~ 1 >> eps), so v = d sigma^2 there.
    return math.log(n) + (d * sigma * sigma if spec.first_loss == "unit" else v) / 2


def repeat_fraction(tokens):
    """r: the fraction of next-token targets equal to their input token (x_{t+1} == x_t)."""
    t = np.asarray(tokens, dtype=np.int64)
    return float((t[1:] == t[:-1]).mean())
