"""
Train a tiedgpt model. One process on a CPU or GPU:

    python train.py --head=ortho
    python train.py --head=tied --n_embd=512 --max_iters=2000 --device=cuda

or several GPUs (or CPU processes) with DistributedDataParallel:

    torchrun --standalone --nproc_per_node=4 train.py --head=ortho

Every field of Config is a --key=value flag (python train.py --help lists them). Output goes to out_dir
(default out/<head>): config.json (the resolved config and the environment), metrics.jsonl (one row per
logged step) and ckpt.pt (model + optimizer + RNG states + step, written atomically; tensors and plain values
only, read back with weights_only=True). --resume=true continues from ckpt.pt; a SIGKILL loses only the steps
since the last checkpoint, and Ctrl-C saves one before exiting. A folder holding an earlier run's checkpoint
is never overwritten silently (--resume=true or --overwrite=true), and one folder serves one run at a time.

From Python (notebooks): `from train import Config, train; history = train(Config(head="logn"))`.
"""

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, fields

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm.auto import tqdm

from data.prepare import ensure_prepared, get_encoding, load_split
from optim import OPTIMIZERS, make_optimizer
from tiedgpt import GPT, HEADS, POSITIONS, GPTConfig, predicted_initial_loss

MODEL_FIELDS = [f.name for f in fields(GPTConfig)]
# Under Tiger the residual branches start at N(0, TIGER_RESIDUAL_STD^2) instead of exactly 0 (see Config); small
# enough that a fresh model's first loss stays within 1% of the 2-gram prediction at d = 768 (measured: lesson 05)
TIGER_RESIDUAL_STD = 1e-4
PEAK_TFLOPS = 790.0  # measured bf16 dense matmul peak of an H100/H200; MFU on a GPU is reported against it


@dataclass
class Config(GPTConfig):
    """Model fields come from GPTConfig (head, n_layer, n_embd, emb_std, ...); training fields follow.
    The defaults train a 4x256 model on Tiny Shakespeare that shows the tied-head story on a 2-core CPU
    in a few minutes: the first loss of `tied` is ~16 (d sigma = sqrt(256)), the fixes start near ln n."""
    block_size: int = 128
    # data
    dataset: str = "shakespeare"  # 'shakespeare' (downloaded once), 'pydoc_topics', or see --input
    input: str = None  # any UTF-8 text file; prepared into data/<file stem>/ on first use
    # 'full': the softmax runs over all n = 50257 GPT-2 tokens. 'corpus': only over the tokens that occur
    # in the corpus (11,706 for Tiny Shakespeare), renumbered 0..n-1, so n, ln n and the head's cost shrink.
    # A speed knob for teaching; it changes n, and every result made with it must say so.
    vocab: str = "full"
    batch_size: int = 8  # sequences per step, summed over all DDP processes
    # optimisation: linear warmup then cosine decay to min_lr. 'adamw' steps are absolute (~lr per coordinate);
    # 'tiger' and 'lamb' step by a fraction lr of each weight's own size (see optim.py, and lesson 05)
    optimizer: str = "adamw"
    max_iters: int = 300
    lr: float = 1e-3
    min_lr: float = None  # None: lr / 10
    warmup_iters: int = 20
    lr_decay_iters: int = None  # None: max_iters
    weight_decay: float = None  # None: the optimizer's own (adamw 0.1 as nanoGPT; tiger and lamb 0.01, their references')
    beta1: float = 0.9  # AdamW's betas (Tiger and LAMB use their references' constants: optim.py)
    beta2: float = 0.95
    grad_clip: float = 1.0  # 0 disables clipping
    # True: torch's fused AdamW (one pass per tensor). False: the foreach implementation nanoGPT gets on a
    # CPU. Same update up to float rounding (tested); only the speed differs.
    fused_adamw: bool = True
    # evaluation and logging
    eval_interval: int = 50  # also the checkpoint interval
    eval_iters: int = 10  # batches per loss estimate; the same batches at every evaluation
    # True: val_loss is the mean over the WHOLE val split (every non-overlapping block_size window, each
    # token predicted once) instead of eval_iters random batches, so that measurement noise is small next to
    # the differences between seeds (33.8K tokens on Tiny Shakespeare). eval_train_loss stays on eval_iters.
    eval_full_val: bool = False
    # > 0: up to this step, every log_interval steps (and at every evaluation), also the val loss over a fixed
    # subset of dense_val_windows whole-split windows, evenly spaced (val_subset_loss): the first steps, where
    # heads differ most, seen densely at a fraction of a whole-split evaluation's cost
    dense_val_until: int = 0
    dense_val_windows: int = 128
    log_interval: int = 10
    seed: int = 1337  # model init (and dropout)
    data_seed: int = None  # training batches; None: same as seed. Fix it to give every run the same data
    # system
    device: str = "auto"  # auto (cuda, else mps, else cpu) | cpu | cuda | cuda:N | mps (Apple GPUs; untested here)
    dtype: str = "auto"  # auto (bfloat16 on GPUs that support it, else float32) | float32 | bfloat16
    compile: bool = False  # torch.compile the model
    # where config.json, metrics.jsonl and ckpt.pt go. None: out/<head>, so runs of different heads never
    # share a folder. '' writes nothing (handy in notebooks). A folder that holds an earlier run's checkpoint
    # is refused unless resume (continue it) or overwrite (replace it) says what to do with it.
    out_dir: str = None
    resume: bool = False  # continue from out_dir/ckpt.pt
    overwrite: bool = False  # start afresh in an out_dir that holds an earlier run's checkpoint, replacing it
    sample_tokens: int = 100  # printed at the end; 0 to skip
    bench: int = 0  # > 0: time this many training steps (after 2 warm-up steps), print speed and memory, exit
    bench_baseline: bool = False  # with bench: also time the nanoGPT-style path of the same shape, print ratios
    bench_profile: bool = False  # with bench: run the timed steps under torch.profiler and print the top ops

    def __post_init__(self):
        for f in fields(self):  # NaN or inf can't mean anything for any setting here
            v = getattr(self, f.name)
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"{f.name} must be a finite number, got {v}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose one of: {', '.join(OPTIMIZERS)}")
        if self.optimizer == "tiger" and self.zero_init_residual:
            # Tiger steps each matrix by lr * RMS(matrix): exact zeros (RMS 0) would never move, and the blocks
            # would stay the identity for ever. Near-zero branches keep the fresh model the 2-gram model.
            if self.residual_std is None:
                self.residual_std = TIGER_RESIDUAL_STD
            elif self.residual_std == 0:
                raise ValueError("optimizer=tiger moves each matrix by lr x its own RMS, so residual branches that start "
                                 "at exactly zero (residual_std=0) never move; give a small --residual_std (default "
                                 f"under tiger: {TIGER_RESIDUAL_STD:g}) or --zero_init_residual=false")
        super().__post_init__()
        if self.out_dir is None:
            self.out_dir = os.path.join("out", self.head)
        if not self.norm_eps > 0:
            raise ValueError(f"norm_eps must be > 0, got {self.norm_eps}")
        for name in ("seed", "data_seed"):
            v = getattr(self, name)
            if v is not None and not 0 <= v < 2 ** 63:
                raise ValueError(f"{name} must be in [0, 2**63), got {v}")
        for name in ("batch_size", "eval_iters", "log_interval", "eval_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if min(self.max_iters, self.warmup_iters, self.sample_tokens, self.bench) < 0:
            raise ValueError("max_iters, warmup_iters, sample_tokens and bench must be >= 0")
        if not self.lr > 0 or (self.min_lr is not None and self.min_lr < 0):
            raise ValueError(f"lr must be > 0 and min_lr >= 0, got lr={self.lr}, min_lr={self.min_lr}")
        if min(self.dense_val_until, self.dense_val_windows) < 0:
            raise ValueError("dense_val_until and dense_val_windows must be >= 0")
        if (self.weight_decay is not None and self.weight_decay < 0) or self.grad_clip < 0 or not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ValueError("weight_decay and grad_clip must be >= 0, betas in [0, 1)")
        if (self.bench_baseline or self.bench_profile) and not self.bench:
            raise ValueError("bench_baseline and bench_profile need bench=N (the number of steps to time)")
        if self.vocab not in ("full", "corpus"):
            raise ValueError(f"vocab must be full or corpus, got {self.vocab!r}")
        if self.dtype == "float16":
            raise ValueError("dtype float16 is not supported: its narrow range needs loss scaling (a GradScaler), "
                             "which this code leaves out; use bfloat16 (same speed on GPUs that have it) or float32")
        if self.dtype not in ("auto", "float32", "bfloat16"):
            raise ValueError(f"dtype must be auto, float32 or bfloat16, got {self.dtype!r}")
        if self.device not in ("auto", "cpu", "mps") and not self.device.startswith("cuda"):
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {self.device!r}")
        if self.resume and self.overwrite:
            raise ValueError("resume and overwrite contradict each other: continue the run, or replace it")

    def model_config(self):
        return GPTConfig(**{k: getattr(self, k) for k in MODEL_FIELDS})


# One line per flag for --help: what it does and the values it takes (the dataclass comments say more).
HELP = dict(
    vocab_size="n, the vocabulary (50257: GPT-2's BPE; vocab=corpus sets it from the data)",
    block_size="context length T in tokens",
    n_layer="transformer blocks", n_head="attention heads (n_embd must divide evenly)", n_embd="width d",
    dropout="dropout probability in [0, 1)", bias="biases in Linear layers and norms (true|false)",
    head="output head: " + " | ".join(HEADS),
    emb_std="sigma, the embedding's init std (None: d**-0.5; GPT-2 used 0.02); logn sets its own",
    zero_init_residual="residual branches start at zero, so a fresh model is the 2-gram model (true|false)",
    pos="positions: " + " | ".join(POSITIONS),
    channel_groups="groups of the 'channel' head's shuffle", norm_eps="the norms' epsilon (> 0)",
    norm="layernorm (GPT-2) | rmsnorm (LLaMA-style)", softcap="the softcap head's cap c: logits -> c tanh(z/c)",
    fused_loss="compute head + cross-entropy together without building the logits (true|false)",
    dataset="shakespeare | pydoc_topics (or use --input)", input="any UTF-8 text file to train on",
    vocab="full (all 50257 tokens) | corpus (only the tokens the data use: smaller n, faster)",
    batch_size="sequences per step, over all processes", max_iters="training steps",
    lr="peak learning rate (> 0)", min_lr="final learning rate of the cosine (None: lr/10)",
    warmup_iters="linear warmup steps", lr_decay_iters="steps of the cosine decay (None: max_iters)",
    optimizer="adamw (absolute steps) | tiger | lamb (steps relative to each weight's size; see optim.py)",
    weight_decay="weight decay of matrices (>= 0; None: adamw 0.1, tiger and lamb 0.01)",
    beta1="AdamW beta1 in [0, 1)", beta2="AdamW beta2 in [0, 1)",
    residual_std="with zero_init_residual: init std of the branches' last layers (None or 0: exactly 0; tiger: 1e-4)",
    grad_clip="clip the gradient norm to this (0: off)",
    fused_adamw="torch's fused AdamW (true) or the foreach one (false); same numbers",
    eval_interval="steps between evaluations and checkpoints", eval_iters="batches per loss estimate",
    eval_full_val="val loss over the whole val split instead of eval_iters batches (true|false)",
    dense_val_until="up to this step, a val-subset loss every log_interval steps (0: off)",
    dense_val_windows="windows of the val split in that subset (evenly spaced)",
    log_interval="steps between logged rows", seed="init seed, in [0, 2**63)",
    data_seed="batch-order seed (None: the same as seed)",
    device="auto | cpu | cuda | cuda:N | mps", dtype="auto | float32 | bfloat16 (float16 is refused: see README)",
    compile="torch.compile the model (true|false)",
    out_dir="folder for config.json, metrics.jsonl, ckpt.pt (None: out/<head>; '': write nothing)",
    resume="continue from out_dir/ckpt.pt (true|false)",
    overwrite="replace an earlier run's checkpoint in out_dir (true|false)",
    sample_tokens="tokens of text to print at the end (0: none)",
    bench="time this many steps, print speed and memory, exit (0: train)",
    bench_baseline="with bench: also time the nanoGPT-style path and print ratios (true|false)",
    bench_profile="with bench: print torch.profiler's costliest ops (true|false)",
)


class TrainingError(RuntimeError):
    """A problem the user can act on (diverged, bad checkpoint): the CLI prints it as one line."""


# ----------------------------------------------------------------------------------------------------
# Data: random windows of the token memmap. A torch.Generator picks them, so its state is part of a
# checkpoint and a resumed run sees exactly the batches the uninterrupted run would have seen.

def get_batch(data, batch_size, block_size, gen, rows=slice(None), lut=None):
    """The global batch is drawn whole (same on every process); `rows` keeps this process's share.
    `lut` renumbers token ids (vocab='corpus')."""
    ix = torch.randint(len(data) - block_size - 1, (batch_size,), generator=gen)[rows]
    xy = np.stack([data[i:i + block_size + 1] for i in ix.tolist()]).astype(np.int64)
    if lut is not None:
        xy = lut[xy]
    xy = torch.from_numpy(xy)
    return xy[:, :-1], xy[:, 1:]


def split_windows(data, block_size, device, lut=None, windows_per_batch=64, subset=None):
    """Every non-overlapping block_size window of `data` (plus its next-token targets), as (windows, T + 1)
    batches of token ids on `device`: what full_split_loss and window_losses score. The < block_size tokens
    past the last whole window are left out. `lut` renumbers ids (vocab='corpus'). subset=K keeps K of the
    windows, evenly spaced over the split (all of them if K >= their number): the same K at every call."""
    n_win = (len(data) - 1) // block_size
    starts = np.arange(n_win) * block_size
    if subset and subset < n_win:
        starts = starts[np.unique(np.linspace(0, n_win - 1, subset).round().astype(np.int64))]
        n_win = len(starts)
    for i in range(0, n_win, windows_per_batch):
        xy = np.stack([data[j:j + block_size + 1] for j in starts[i:i + windows_per_batch]]).astype(np.int64)
        if lut is not None:
            xy = lut[xy]
        yield torch.from_numpy(xy).to(device)


@torch.no_grad()
def full_split_loss(model, data, block_size, device, autocast=nullcontext(), lut=None, windows_per_batch=64,
                    subset=None):
    """Mean cross-entropy over every non-overlapping block_size window of `data` (subset=K: over K of them, evenly
    spaced; see split_windows): each token after a window's first is predicted once, from up to block_size tokens
    of context. All windows have the same length, so the mean of batch means, weighted by the number of windows
    in each batch, is the mean over tokens."""
    total, n_win = 0.0, 0
    for xy in split_windows(data, block_size, device, lut, windows_per_batch, subset):
        with autocast:
            loss = model(xy[:, :-1], xy[:, 1:], return_logits=False)[1]
        total += loss.float().item() * len(xy)
        n_win += len(xy)
    return total / n_win


@torch.no_grad()
def window_losses(model, data, block_size, device, lut=None, windows_per_batch=64):
    """The loss of each window full_split_loss averages, as a float64 numpy array: their mean is full_split_loss
    up to float rounding. Lesson 04 uses the spread over windows to measure how noisy a whole-split val loss
    is: a paired difference A - B measured on W windows has standard error sd(window differences) / sqrt(W)."""
    out = []
    for xy in split_windows(data, block_size, device, lut, windows_per_batch):
        logits = model.logits(model.hidden(xy[:, :-1])).float()  # (windows, T, n): one batch at a time
        per_token = F.cross_entropy(logits.transpose(1, 2), xy[:, 1:], reduction="none")  # (windows, T)
        out.append(per_token.mean(1).double().cpu().numpy())
    return np.concatenate(out)


@torch.no_grad()
def branch_rms(model):
    """RMS over the weights of every residual branch's last layer (attention's and the MLP's c_proj): how far the
    branches have grown from their (near-)zero init. 0 for a fresh model with exactly-zero branches."""
    ws = [m.weight for m in model.modules() if getattr(m, "RESIDUAL_OUT", False)]
    return math.sqrt(sum(w.float().pow(2).sum().item() for w in ws) / max(1, sum(w.numel() for w in ws)))


def corpus_vocab(c, train_data, val_data):
    """For vocab='corpus': (ids, lut, config) with ids the sorted GPT-2 ids that occur, lut their new
    numbers, and the config's vocab_size set to len(ids). For vocab='full': (None, None, c)."""
    if c.vocab == "full":
        return None, None, c
    ids = np.unique(np.concatenate([np.unique(train_data), np.unique(val_data)]))
    lut = np.full(2 ** 16, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    return ids, lut, dataclasses.replace(c, vocab_size=len(ids))


def lr_at(it, c):
    """Linear warmup to lr over warmup_iters, then cosine from lr down to min_lr at lr_decay_iters."""
    min_lr = c.lr / 10 if c.min_lr is None else c.min_lr
    decay_iters = c.max_iters if c.lr_decay_iters is None else c.lr_decay_iters
    if it < c.warmup_iters:
        return c.lr * (it + 1) / (c.warmup_iters + 1)
    if it >= decay_iters:
        return min_lr
    progress = (it - c.warmup_iters) / max(1, decay_iters - c.warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (c.lr - min_lr)


def setup_device(c, local_rank=0, ddp=False):
    """The torch.device, the compute dtype's name and the autocast context that Config c asks for.
    Under torchrun each process takes the GPU of its LOCAL_RANK."""
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if c.device == "auto":
        device = f"cuda:{local_rank}" if torch.cuda.is_available() else "mps" if mps and not ddp else "cpu"
    elif c.device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"device={c.device} but this machine has no CUDA GPU; use --device=cpu")
        device = f"cuda:{local_rank}" if ddp else c.device
    elif c.device == "mps":  # Apple silicon. Untested by this project (no such machine): float32, foreach AdamW
        if not mps:
            raise ValueError("device=mps but this machine has no usable Apple GPU (torch.backends.mps); use --device=cpu")
        if ddp:
            raise ValueError("device=mps runs one process; torchrun needs cuda or cpu")
        device = "mps"
    else:
        device = "cpu"
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dtype = c.dtype
    if dtype == "auto":
        dtype = "bfloat16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "float32"
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if dtype == "bfloat16" else nullcontext()
    return device, dtype, autocast


def load_data(c, log=print):
    """Prepare (once) and open the dataset; check block_size and vocab_size against it; apply vocab='corpus'.
    Returns (c with the effective vocab_size, meta, train tokens, val tokens, ids, lut)."""
    meta = ensure_prepared(c.dataset, c.input, log=log)
    train_data, val_data = load_split(meta["dataset"], "train"), load_split(meta["dataset"], "val")
    if c.block_size + 1 >= min(len(train_data), len(val_data)):
        raise ValueError(f"block_size={c.block_size} is beyond the data: {meta['dataset']} has "
                         f"{len(train_data)} train and {len(val_data)} val tokens")
    ids, lut, c = corpus_vocab(c, train_data, val_data)
    if c.vocab == "full" and meta["vocab_size"] > c.vocab_size:
        raise ValueError(f"vocab_size={c.vocab_size} is smaller than the tokenizer's {meta['vocab_size']}")
    return c, meta, train_data, val_data, ids, lut


def flops_per_token(model):
    """Training FLOPs per token, PaLM-style: 6 per weight that multiplies (the head counts even when tied;
    the lookup does not) plus attention's 12 L T d."""
    c = model.config
    head = c.vocab_size * c.n_embd if model.tied else 0  # untied: lm_head is in the non-embedding count
    return 6 * (model.get_num_params(non_embedding=True) + head) + 12 * c.n_layer * c.block_size * c.n_embd


# ----------------------------------------------------------------------------------------------------
# Checkpoints. A checkpoint is data, never code: it holds only tensors and plain Python values (dicts,
# lists, numbers, strings), and it is read with torch.load(weights_only=True), which refuses anything else.
# So a ckpt.pt from a classmate can't run code on your machine (tested with a booby-trapped pickle).

CKPT_KEYS = ("model", "optimizer", "step", "config", "data", "data_rng", "torch_rng", "tokens", "loss_sum", "n_summed")


def save_checkpoint(path, model, optimizer, step, config, gen, data, tokens=0, loss_sum=0.0, n_summed=0):
    """Write ckpt.pt atomically: to ckpt.pt.tmp, then rename. A kill or a full disk mid-write leaves the previous
    checkpoint intact (and the .tmp is removed). `data` identifies the dataset (see data_identity); tokens,
    loss_sum and n_summed let a resumed run log exactly what the uninterrupted run would have."""
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), step=step,
                 config=dataclasses.asdict(config), data=data, data_rng=gen.get_state(),
                 torch_rng=torch.get_rng_state(), tokens=int(tokens), loss_sum=float(loss_sum),
                 n_summed=int(n_summed),
                 cuda_rng=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
    tmp = path + ".tmp"
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise TrainingError(f"could not write the checkpoint {path}: {e.strerror or e} "
                            f"(the previous checkpoint, if any, is kept)") from None


def load_checkpoint(path, config, data=None):
    """Load ckpt.pt, refusing one that is corrupt, is not a tiedgpt checkpoint (anything but tensors and plain
    values, such as a pickle that would run code), was made for another model, or on other data."""
    if not os.path.exists(path):
        raise TrainingError(f"--resume: no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # weights_only refuses globals (code) with an UnpicklingError, as it does bad bytes
        import re
        code = re.search(r"(?:[Uu]nsupported global:|unsupported) GLOBAL (\S+)", str(e))
        why = (f"it asks to load {code.group(1)}, which is code, not data: refused, nothing was run" if code
               else "corrupt, or not a file torch.save wrote")
        raise TrainingError(f"--resume: {path} is not a tiedgpt checkpoint ({why})") from None
    if not isinstance(state, dict) or any(k not in state for k in CKPT_KEYS) or not isinstance(state["config"], dict):
        raise TrainingError(f"--resume: {path} is not a tiedgpt checkpoint (made by another program, or by an "
                            f"older tiedgpt: missing {[k for k in CKPT_KEYS if not isinstance(state, dict) or k not in state]})")
    saved = state["config"]
    same_weights = ("dropout", "fused_loss")  # may change between runs: they don't change the weights' meaning
    diff = [f"{k}={saved.get(k)!r} (now {getattr(config, k)!r})" for k in MODEL_FIELDS
            if k not in same_weights and saved.get(k) != getattr(config, k)]
    if diff:
        raise TrainingError(f"--resume: {path} was made for another model: {', '.join(diff)}")
    made_with = saved.get("optimizer", "adamw")  # checkpoints from before optim.py were all AdamW
    if made_with != config.optimizer:
        raise TrainingError(f"--resume: {path} was trained with optimizer={made_with} (now {config.optimizer}): its "
                            f"saved optimizer state means nothing to {config.optimizer}; resume with "
                            f"--optimizer={made_with}, or start a new run")
    if data is not None and state["data"] != data:
        diff = [f"{k}={state['data'].get(k)!r} (now {v!r})" for k, v in data.items() if state["data"].get(k) != v]
        raise TrainingError(f"--resume: {path} was trained on other data ({', '.join(diff)}); resuming would "
                            f"silently fine-tune it on this data. Start a new run with another --out_dir instead")
    return state


def data_identity(c, meta, train_data, val_data, ids):
    """What a checkpoint's weights mean depends on the data: the dataset, its source text's sha256, its token
    counts, and (vocab='corpus') which GPT-2 tokens the rows of E stand for."""
    import hashlib
    return dict(dataset=meta["dataset"], source_sha256=meta.get("sha256"), train_tokens=int(len(train_data)),
                val_tokens=int(len(val_data)), vocab=c.vocab,
                vocab_ids_sha256=None if ids is None else hashlib.sha256(np.asarray(ids, np.int64).tobytes()).hexdigest())


def claim_out_dir(c):
    """Make out_dir and hold an exclusive lock on it (out_dir/.lock) for the run's life: a second run on the same
    folder is refused instead of overwriting the first's files. Also refuses a fresh run over an earlier run's
    checkpoint (resume or overwrite must say what to do with it) and the source tree itself. Returns the open
    lock file (closing it releases the lock; so does the process ending, however it ends)."""
    import fcntl
    d = c.out_dir
    if os.path.exists(os.path.join(d, "tiedgpt.py")):
        raise ValueError(f"out_dir={d!r} is the source tree; give a folder of its own (default: out/<head>)")
    if os.path.exists(d) and not os.path.isdir(d):
        raise ValueError(f"out_dir={d!r} is a file, not a folder")
    try:
        os.makedirs(d, exist_ok=True)
        lock = open(os.path.join(d, ".lock"), "a+")
    except OSError as e:
        raise ValueError(f"out_dir={d!r} can't be used: {e.strerror or e}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        other = lock.read().strip() or "?"
        lock.close()
        raise TrainingError(f"out_dir={d!r} is in use by another run (pid {other}); wait for it to finish, "
                            f"or give this run another --out_dir") from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    ckpt = os.path.join(d, "ckpt.pt")
    if os.path.exists(ckpt) and not c.resume and not c.overwrite:
        lock.close()
        raise TrainingError(f"{ckpt} holds an earlier run's checkpoint: --resume=true continues it, "
                            f"--out_dir=NEW starts a new run beside it, --overwrite=true replaces it")
    return lock


def estimate_memory(c):
    """Rough bytes a training step needs: 16 per parameter (weight, gradient, AdamW's two moments, fp32), the
    activations kept for backward (about 34 d + 5 T n_head floats per token per layer), and the output head's
    buffer (the fused path's chunk, or the textbook path's logits, their softmax and gradient)."""
    from tiedgpt import LinearCrossEntropy
    d, n, L, T = c.n_embd, c.vocab_size, c.n_layer, c.block_size
    params = n * d * (1 if c.head != "untied" else 2) + L * 12 * d * d + 2 * d * d
    tokens = c.batch_size * T
    acts = tokens * L * (34 * d + 5 * T * c.n_head) * 4
    head = LinearCrossEntropy.CHUNK_ELEMENTS * 4 if c.fused_loss else 3 * tokens * n * 4
    return 16 * params + acts + head


def available_memory():
    """MemAvailable from /proc/meminfo in bytes (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return None


# ----------------------------------------------------------------------------------------------------

def environment(device, world_size):
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return dict(torch=torch.__version__, device=str(device), world_size=world_size, git_commit=commit,
                cuda_device=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                threads=torch.get_num_threads(), python=sys.version.split()[0])


def train(c, progress=True, log=print):
    """Train per Config c and return the history: a list of dicts, one per logged step, with step,
    tokens, train_loss (mean since the last row), lr, grad_norm, emb_grad_norm, emb_rms, resid_rms (see branch_rms),
    lnf_gain (the final norm's mean gain), time, at evaluations val_loss and eval_train_loss (means over fixed
    batches), and with dense_val_until val_subset_loss. Raises TrainingError on
    divergence, a bad checkpoint or a busy out_dir, ValueError on impossible settings.
    The out_dir is locked for the run's life (see claim_out_dir)."""
    master = int(os.environ.get("RANK", 0)) == 0
    lock = claim_out_dir(c) if master and c.out_dir else None
    try:
        return _train(c, progress, log)
    finally:
        if lock is not None:
            lock.close()


def _train(c, progress, log):
    # -- processes and devices
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ["LOCAL_RANK"])
    else:
        rank, world, local_rank = 0, 1, 0
    master = rank == 0
    log = log if master else (lambda *a, **k: None)
    device, dtype, autocast = setup_device(c, local_rank, ddp)
    if ddp and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    if c.batch_size % world:
        raise ValueError(f"batch_size={c.batch_size} must be divisible by the {world} processes")
    rows = slice(rank * (c.batch_size // world), (rank + 1) * (c.batch_size // world))

    # -- data
    c, meta, train_data, val_data, ids, lut = load_data(c, log)
    dataset = meta["dataset"]
    data_id = data_identity(c, meta, train_data, val_data, ids)
    need, have = estimate_memory(c), available_memory()
    if device.type == "cpu" and have is not None and need > have:
        raise ValueError(f"this run needs about {need / 2 ** 30:.1f} GiB but only {have / 2 ** 30:.1f} GiB of memory is "
                         f"available; lower n_embd, n_layer, batch_size or block_size (or use --vocab=corpus)")

    # -- model, optimizer, and (on --resume) their saved state
    torch.manual_seed(c.seed)
    model = GPT(c.model_config()).to(device)
    optimizer = make_optimizer(model, c)
    gen = torch.Generator().manual_seed(c.seed if c.data_seed is None else c.data_seed)
    step, history = 0, []
    tokens_seen, resumed_sum, resumed_n = 0, 0.0, 0  # a checkpoint carries these over (see save_checkpoint)
    ckpt_path = os.path.join(c.out_dir, "ckpt.pt") if c.out_dir else None
    metrics_path = os.path.join(c.out_dir, "metrics.jsonl") if c.out_dir else None
    if c.resume:
        if not c.out_dir:
            raise ValueError("--resume needs an out_dir")
        state = load_checkpoint(ckpt_path, c, data_id)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        gen.set_state(state["data_rng"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        step = state["step"]
        tokens_seen, resumed_sum, resumed_n = state["tokens"], state["loss_sum"], state["n_summed"]
        if os.path.exists(metrics_path):  # keep the rows up to the checkpoint; later ones will be redone
            with open(metrics_path) as f:
                history = [r for r in map(json.loads, f) if r["step"] < step]
        log(f"resumed from {ckpt_path} at step {step}")
    if master and c.out_dir:
        with open(os.path.join(c.out_dir, "config.json"), "w") as f:
            json.dump(dict(config=dataclasses.asdict(c), dataset=meta,
                           environment=environment(device, world)), f, indent=2)
        with open(metrics_path, "w") as f:  # rewritten whole: a resumed run drops rows past its checkpoint
            f.writelines(json.dumps(r) + "\n" for r in history)
    raw_model = model
    if c.compile:
        model = torch.compile(model)
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank] if device.type == "cuda" else None)

    @torch.no_grad()
    def evaluate(full=True, dense=False):
        """Mean loss over eval_iters fixed batches of each split (the same batches every time); dense: also the
        val-subset loss; full=False: that alone."""
        raw_model.eval()
        out = {}
        if dense:  # a subset of the val split's windows (Config.dense_val_until)
            out["val_subset"] = full_split_loss(raw_model, val_data, c.block_size, device, autocast, lut,
                                                subset=c.dense_val_windows)
            if not full:
                raw_model.train()
                return out
        for split, data in (("train", train_data), ("val", val_data)):
            g = torch.Generator().manual_seed(12345)
            losses = []
            if split == "val" and c.eval_full_val:
                out[split] = full_split_loss(raw_model, data, c.block_size, device, autocast, lut)
                continue
            for _ in range(c.eval_iters):
                x, y = get_batch(data, c.batch_size, c.block_size, g, lut=lut)
                with autocast:
                    losses.append(raw_model(x.to(device), y.to(device), return_logits=False)[1])
            out[split] = torch.stack(losses).mean().item()
        raw_model.train()
        return out

    def checkpoint(at):
        total = loss_sum.clone()  # the losses summed since the last row: the global batch's, as logged
        if ddp:
            dist.all_reduce(total)
            total /= world
        if master and ckpt_path:
            save_checkpoint(ckpt_path, raw_model, optimizer, at, c, gen, data_id, tokens_seen,
                            total.item(), n_summed)

    # Ctrl-C (SIGINT) and SIGTERM only raise a flag; the loop saves a checkpoint between two steps and stops
    stop = []
    handlers = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            handlers[sig] = signal.signal(sig, lambda *_: stop.append(True))
        except ValueError:  # not the main thread: leave signals alone
            pass

    log(f"{raw_model.get_num_params() / 1e6:.2f}M non-embedding parameters | head={c.head} n={c.vocab_size} "
        f"d={c.n_embd} sigma={c.sigma:.4g} d*sigma={c.n_embd * c.sigma:.2f} ln(n)={math.log(c.vocab_size):.2f} "
        f"| {dataset} ({meta['corpus']}) on {device}, {dtype}, {world} process(es) | {c.optimizer}"
        + (f", residual branches start at N(0, {c.residual_std:g}^2)" if c.zero_init_residual and c.residual_std else ""))
    if step == 0:  # what the step-0 line should show: that comparison is lesson 01's puzzle
        r = meta.get("repeat_fraction", 0.0)
        log(f"expect at step 0: loss ~ {predicted_initial_loss(c.model_config(), r):.2f} for head={c.head} "
            f"(theory with repeat rate r={r:.3f}; uniform guessing would be ln(n) = {math.log(c.vocab_size):.2f})")
    wte = raw_model.transformer.wte.weight
    tokens_per_step = c.batch_size * c.block_size
    fpt = flops_per_token(raw_model)
    start_step = step
    # Losses stay on the device between log steps: no host sync per step.
    # A resumed run restarts these from the checkpoint: its first row then averages the same steps as the
    # uninterrupted run's.
    loss_sum, n_summed = torch.tensor(resumed_sum, device=device), resumed_n
    first_bad = torch.full((), -1, device=device, dtype=torch.long)
    t0 = t_last = time.time()
    step_last = step
    # The bar redraws one line with carriage returns: right for a terminal or a notebook, unreadable in a log
    # file. Elsewhere (stdout piped or redirected) every logged row becomes one plain line instead.
    interactive = sys.stdout.isatty() or "ipykernel" in sys.modules
    bar = tqdm(total=c.max_iters, initial=step, disable=not (progress and master and interactive),
               dynamic_ncols=True)
    plain = progress and master and bar.disable
    say = bar.write if not bar.disable else log
    try:
        while True:
            # Row `step` describes the weights after `step` updates: their eval losses, and the training
            # loss and gradient computed with them in iteration `step`.
            row = {}
            full = step % c.eval_interval == 0 or step == c.max_iters
            dense = c.dense_val_until > 0 and (full or (step <= c.dense_val_until and step % c.log_interval == 0))
            if full or dense:
                if (bad := first_bad.item()) >= 0:  # a step since the last log went non-finite: name it
                    raise TrainingError(f"non-finite loss at step {bad}; stopping"
                                        + (f" (last good checkpoint kept: {ckpt_path})" if ckpt_path else ""))
                if master:
                    losses = evaluate(full, dense)
                    if not all(map(math.isfinite, losses.values())):
                        raise TrainingError(f"non-finite loss at evaluation of step {step}; stopping "
                                            f"(last good checkpoint kept: {ckpt_path})")
                    row["step"] = step
                    if dense:
                        row["val_subset_loss"] = losses["val_subset"]
                    if full:
                        row.update(val_loss=losses["val"], eval_train_loss=losses["train"])
                        say(f"step {step}: train {losses['train']:.4f}, val {losses['val']:.4f}")
                if full and step > start_step:
                    checkpoint(step)
            if step >= c.max_iters:
                if row:
                    _append(history, row, metrics_path)
                break
            if stop:
                checkpoint(step)
                say(f"interrupted at step {step}" + (f"; checkpoint saved to {ckpt_path}" if ckpt_path else ""))
                raise KeyboardInterrupt

            x, y = get_batch(train_data, c.batch_size, c.block_size, gen, rows, lut)
            lr = lr_at(step, c)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with autocast:
                _, loss = model(x.to(device, non_blocking=True), y.to(device, non_blocking=True), return_logits=False)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            logging_now = bool(row) or step % c.log_interval == 0
            if logging_now:  # before clipping: the raw size of the embedding's (summed, if tied) gradient
                emb_grad_norm = wte.grad.norm()
            grad_norm = (torch.nn.utils.clip_grad_norm_(raw_model.parameters(), c.grad_clip)
                         if c.grad_clip > 0 else None)
            optimizer.step()
            loss = loss.detach()
            first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), step, first_bad)
            loss_sum += loss
            n_summed += 1
            tokens_seen += tokens_per_step
            if logging_now:
                if (bad := first_bad.item()) >= 0:
                    raise TrainingError(f"non-finite loss at step {bad}; stopping"
                                        + (f" (last good checkpoint kept: {ckpt_path})" if ckpt_path else ""))
                if ddp:  # the logged loss is the global batch's, as in a 1-process run
                    dist.all_reduce(loss_sum)
                    loss_sum /= world
                now = time.time()
                tok_s = (step + 1 - step_last) * tokens_per_step / max(now - t_last, 1e-9)
                row.update(step=step, tokens=tokens_seen,
                           train_loss=(loss_sum / n_summed).item(), lr=lr,
                           grad_norm=None if grad_norm is None else grad_norm.item(),
                           emb_grad_norm=emb_grad_norm.item(), emb_rms=wte.detach().pow(2).mean().sqrt().item(),
                           resid_rms=branch_rms(raw_model), lnf_gain=raw_model.transformer.ln_f.weight.mean().item(),
                           tokens_per_s=tok_s, time=now - t0)
                postfix = dict(loss=f"{row['train_loss']:.3f}", tok_s=f"{tok_s:,.0f}")
                if device.type == "cuda":
                    postfix["mfu"] = f"{100 * fpt * tok_s / (PEAK_TFLOPS * 1e12):.1f}%"
                bar.set_postfix(postfix, refresh=False)
                if plain:
                    log(f"step {step}/{c.max_iters}: loss {row['train_loss']:.4f}, {tok_s:,.0f} tokens/s")
                loss_sum.zero_()
                n_summed, t_last, step_last = 0, now, step + 1
                if master:
                    _append(history, row, metrics_path)
            step += 1
            bar.update(1)
    finally:
        bar.close()
        for sig, h in handlers.items():
            signal.signal(sig, h)
        if ddp and dist.is_initialized():
            dist.destroy_process_group()

    if master:
        final = [r for r in history if r.get("val_loss") is not None][-1]
        log(f"final val loss {final['val_loss']:.4f} at step {final['step']} ({time.time() - t0:.0f} s)")
        if c.sample_tokens:
            enc = get_encoding()
            start = enc.encode_ordinary("\n")
            if lut is not None:  # vocab='corpus': the model only knows the corpus's tokens, renumbered
                start = lut[start].tolist() if (lut[start] >= 0).all() else lut[val_data[:1].astype(np.int64)].tolist()
            start = torch.tensor([start], device=device)
            with autocast:
                out = raw_model.eval().generate(start, c.sample_tokens, temperature=0.8, top_k=200)[0].tolist()
            if ids is not None:
                out = ids[out].tolist()
            log("sample:\n" + enc.decode([t for t in out if t < enc.n_vocab]))
    return history


def _append(history, row, path):
    history.append(row)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def bench(c, log=print):
    """Time c.bench training steps of the model c describes, on real batches, after 2 warm-up steps.
    Returns and prints tokens/s, ms/step and peak memory (process RSS; on a GPU, also allocated memory).
    Compare two settings by running both, e.g. --fused_loss=false against the default."""
    import resource
    device, dtype, autocast = setup_device(c)
    c, _, data, _, _, lut = load_data(c, log)
    torch.manual_seed(c.seed)
    model = GPT(c.model_config()).to(device)
    optimizer = make_optimizer(model, c)
    step_model = torch.compile(model) if c.compile else model
    gen = torch.Generator().manual_seed(c.seed)

    def step():
        x, y = get_batch(data, c.batch_size, c.block_size, gen, lut=lut)
        with autocast:
            _, loss = step_model(x.to(device), y.to(device), return_logits=False)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), c.grad_clip)
        optimizer.step()
        return loss

    for _ in range(2):
        step()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    profiler = nullcontext()
    if c.bench_profile:  # where the time goes, op by op (the timing below then includes the profiler's overhead)
        from torch.profiler import ProfilerActivity, profile
        profiler = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else []))
    t = time.perf_counter()
    with profiler:
        for _ in range(c.bench):
            loss = step()
        loss.item()
        sync()
    dt = (time.perf_counter() - t) / c.bench
    if c.bench_profile:
        key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
        log(profiler.key_averages().table(sort_by=key, row_limit=15, max_name_column_width=40))
    tok_s = c.batch_size * c.block_size / dt
    out = dict(tokens_per_s=tok_s, ms_per_step=1000 * dt, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               device=str(device), dtype=dtype, threads=torch.get_num_threads())
    msg = (f"bench: {tok_s:,.0f} tokens/s, {1000 * dt:.1f} ms/step, peak RSS {out['peak_rss_mb']:,.0f} MB "
           f"| {device} {dtype}, {torch.get_num_threads()} threads, B={c.batch_size} T={c.block_size}, "
           f"head={c.head}, fused_loss={c.fused_loss}, fused_adamw={c.fused_adamw}, compile={c.compile}")
    if device.type == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2 ** 20
        out["mfu"] = flops_per_token(model) * tok_s / (PEAK_TFLOPS * 1e12)
        msg += f", peak GPU {out['peak_gpu_mb']:,.0f} MB, MFU {100 * out['mfu']:.1f}% of {PEAK_TFLOPS:.0f} TFLOP/s"
    log(msg)
    if os.environ.get("TIEDGPT_BENCH_JSON"):  # bench_against_baseline reads its child processes' results here
        with open(os.environ["TIEDGPT_BENCH_JSON"], "w") as f:
            json.dump(out, f)
    return out


# What a plain nanoGPT-style model of the same shape does differently: textbook logits -> F.cross_entropy,
# AdamW's foreach implementation (nanoGPT fuses only on CUDA), learned positions added to the embedding,
# GPT-2's residual init and biases, and the vocabulary padded to 50304.
NANOGPT = dict(fused_loss=False, fused_adamw=False, pos="learned", zero_init_residual=False, bias=True)


def bench_against_baseline(c, rounds=3, log=print):
    """Time c and its nanoGPT-style twin alternately (A B A B ...), each in a fresh process so that peak
    memory is its own, and report the medians and the ratios: one sitting, one machine, one command."""
    import statistics
    import tempfile
    base = dataclasses.replace(c, **NANOGPT, vocab_size=50304 if c.vocab_size == 50257 else c.vocab_size)
    runs = {"this repo": (c, []), "nanoGPT-style": (base, [])}
    for r in range(rounds):
        for name, (cfg, results) in runs.items():
            argv = [f"--{f.name}={getattr(cfg, f.name)}" for f in fields(Config)
                    if f.name != "bench_baseline" and getattr(cfg, f.name) != f.default]
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "bench.json")
                p = subprocess.run([sys.executable, os.path.abspath(__file__), *argv],
                                   env={**os.environ, "TIEDGPT_BENCH_JSON": path}, capture_output=True, text=True)
                if p.returncode != 0 or not os.path.exists(path):
                    raise TrainingError(f"bench of {name} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
                with open(path) as f:
                    results.append(json.load(f))
            log(f"round {r + 1}/{rounds} {name:14} {results[-1]['tokens_per_s']:8,.0f} tokens/s  "
                f"{results[-1]['ms_per_step']:7.0f} ms/step  peak RSS {results[-1]['peak_rss_mb']:6,.0f} MB")
    med = {name: {k: statistics.median(r[k] for r in results) for k in ("tokens_per_s", "ms_per_step", "peak_rss_mb")}
           for name, (_, results) in runs.items()}
    a, b = med["this repo"], med["nanoGPT-style"]
    log(f"baseline flags: " + " ".join(f"--{k}={v}" for k, v in {**NANOGPT, "vocab_size": base.vocab_size}.items()))
    log(f"medians of {rounds}: this repo {a['tokens_per_s']:,.0f} tokens/s, {a['peak_rss_mb']:,.0f} MB | nanoGPT-style "
        f"{b['tokens_per_s']:,.0f} tokens/s, {b['peak_rss_mb']:,.0f} MB | speed {a['tokens_per_s'] / b['tokens_per_s']:.2f}x, "
        f"memory {a['peak_rss_mb'] / b['peak_rss_mb']:.2f}x")
    return med


# ----------------------------------------------------------------------------------------------------
# Command line: --key=value over Config

def parse_args(argv):
    kinds = {f.name: f for f in fields(Config)}
    kw = {}
    for arg in argv:
        if arg in ("-h", "--help"):
            print(__doc__.strip() + "\n\nflags (--key=value, default shown):")
            width = max(len(f"--{f.name}={f.default}") for f in fields(Config))
            for f in fields(Config):
                print(f"  {f'--{f.name}={f.default}':{width}}  {HELP.get(f.name, '')}")
            sys.exit(0)
        key, eq, val = arg[2:].partition("=")
        if not arg.startswith("--") or not eq:
            raise ValueError(f"bad argument {arg!r}: flags look like --key=value (see --help)")
        if key not in kinds:
            raise ValueError(f"unknown flag --{key} (see --help for the list)")
        kw[key] = _convert(key, val, kinds[key])
    return Config(**kw)


def _convert(key, val, field):
    default = field.default
    if val.lower() == "none" and default is None:
        return None
    kind = {"emb_std": float, "min_lr": float, "lr_decay_iters": int, "data_seed": int, "weight_decay": float,
            "residual_std": float,
            "input": str, "out_dir": str}.get(key, type(default))
    if kind is bool:
        if val.lower() in ("true", "1", "yes"):
            return True
        if val.lower() in ("false", "0", "no"):
            return False
        raise ValueError(f"--{key} expects true or false, got {val!r}")
    try:
        return kind(val)
    except ValueError:
        raise ValueError(f"--{key} expects {kind.__name__}, got {val!r}") from None


def main(argv):
    try:
        config = parse_args(argv)
    except ValueError as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 2
    try:
        if config.bench and config.bench_baseline:
            bench_against_baseline(config)
        elif config.bench:
            bench(config)
        else:
            train(config)
    except (ValueError, FileNotFoundError) as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 2
    except TrainingError as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except OSError as e:  # a disk that filled up or a folder that vanished while writing metrics or config
        print(f"train.py: could not write {e.filename or 'a file'}: {e.strerror or e}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        if "memory" not in str(e).lower():
            raise
        print(f"train.py: out of memory ({str(e).strip().splitlines()[0][:100]}); lower batch_size, block_size, "
              f"n_embd or n_layer", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
