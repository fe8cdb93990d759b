"""
Train a tiedgpt model. One process on a CPU or GPU:

    python train.py --head=ortho
    python train.py --head=tied --n_embd=512 --max_iters=2000 --device=cuda
    python train.py --head=logn --optimizer=tiger        # steps relative to each weight's size (optim.py)

or several GPUs (or CPU processes) with DistributedDataParallel:

    torchrun --standalone --nproc_per_node=4 train.py --head=ortho

Every field of Config is a --key=value flag (python train.py --help lists them). Output goes to out_dir
(default out/<head>): config.json (the resolved config and the environment), metrics.jsonl (one row per
logged step) and ckpt.pt (model + optimizer + RNG states + step, written atomically; tensors and plain values
only, read back with weights_only=True). --resume=true continues from ckpt.pt; a SIGKILL loses only the steps
since the last checkpoint, and Ctrl-C saves one before exiting. A resumed run is the run that was checkpointed:
every setting that changes what it computes or logs must be the checkpoint's (runtime.RUN_FIELDS), except
--max_iters, which may grow to extend it on its schedule. A folder holding an earlier run's checkpoint is never
overwritten silently (--resume=true, or --overwrite=true, which removes it first), and one folder serves one run
at a time.

The file reads in the order a run happens: the Config; 1. processes and device; 2. data; 3. model, optimizer
and the state a run resumes from (checkpoints); 4. the training loop (`_train`: batch -> lr -> forward ->
backward -> clip -> step -> log / evaluate / checkpoint), with the helpers it calls just above it; 5. the end
(final line, a sample); then the command line. The optimizers are in optim.py, the benchmark (--bench) in bench.py.

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
from tqdm.auto import tqdm

from runtime import (MODEL_FIELDS, Diverged, TrainingError, claim_out_dir, load_checkpoint, release_out_dir,
                        save_checkpoint)
from data.prepare import ensure_prepared, get_encoding, load_split, split_windows
from optim import LAMB_BETAS, OPTIMIZERS, RELATIVE, TIGER_BETA, make_optimizer
from probes import row_probe, weight_stats
from tiedgpt import GPT, HEADS, POSITIONS, GPTConfig, predicted_initial_loss

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
    # which weights tiger and lamb step relative to their own size: 'all' (the optimizers as published), 'none' (their
    # absolute twins: a step scale frozen at the first step), 'embedding' or 'body' (tiger only): see optim.py
    relative: str = "all"
    beta1: float = 0.9  # AdamW's betas (Tiger and LAMB use their references' constants, optim.py: others refused)
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
    # True: every logged row also has emb_turn, self_logit and branch_ratio (probes.row_probe): how far the rows of E have
    # turned from their init, how much of the fresh tied model's 2-gram self-logit is left, and how much the residual
    # branches add to what the head sees (lesson 05, section 10)
    log_rows: bool = False
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
        if self.relative not in RELATIVE:
            raise ValueError(f"relative must be one of {', '.join(RELATIVE)}, got {self.relative!r}")
        if self.relative != "all" and (self.optimizer == "adamw" or
                                       (self.optimizer == "lamb" and self.relative != "none")):
            raise ValueError(f"relative={self.relative} is not defined for optimizer={self.optimizer} (adamw's step is "
                             "already absolute; lamb takes all or none, tiger any of all, embedding, body, none)")
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
        if self.dense_val_until < 0:
            raise ValueError(f"dense_val_until must be >= 0 (0: off), got {self.dense_val_until}")
        if self.dense_val_windows < 1:  # 0 once meant "all of them" without saying so: eval_full_val is that
            raise ValueError(f"dense_val_windows must be >= 1 (the windows in the dense subset; more than the val "
                             f"split has means all of them), got {self.dense_val_windows}")
        if (self.weight_decay is not None and self.weight_decay < 0) or self.grad_clip < 0 or not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ValueError("weight_decay and grad_clip must be >= 0, betas in [0, 1)")
        betas = {f.name: f.default for f in fields(self) if f.name in ("beta1", "beta2")}
        if self.optimizer in ("tiger", "lamb") and (self.beta1, self.beta2) != (betas["beta1"], betas["beta2"]):
            # a flag that does nothing must not be recorded in config.json as if it had
            raise ValueError(f"--beta1/--beta2 are AdamW's; optimizer={self.optimizer} uses its reference's constants "
                             f"(optim.py: tiger beta {TIGER_BETA}, lamb betas {LAMB_BETAS}): leave them at "
                             f"{betas['beta1']}/{betas['beta2']}")
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
    relative="tiger/lamb: which weights step relative to their size: all | none (absolute twin) | embedding | body",
    beta1="AdamW beta1 in [0, 1) (tiger, lamb: their own; leave it)", beta2="AdamW beta2 in [0, 1) (likewise)",
    residual_std="with zero_init_residual: init std of the branches' last layers (None or 0: exactly 0; tiger: 1e-4)",
    grad_clip="clip the gradient norm to this (0: off)",
    fused_adamw="torch's fused AdamW (true) or the foreach one (false); same numbers",
    eval_interval="steps between evaluations and checkpoints", eval_iters="batches per loss estimate",
    eval_full_val="val loss over the whole val split instead of eval_iters batches (true|false)",
    dense_val_until="up to this step, a val-subset loss every log_interval steps (0: off)",
    dense_val_windows="windows of the val split in that subset (evenly spaced; >= 1)",
    log_interval="steps between logged rows",
    log_rows="also log emb_turn (E's rows' angle from their init), self_logit, branch_ratio and head_scale (true|false)",
    seed="init seed, in [0, 2**63)",
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



# ----------------------------------------------------------------------------------------------------
# 1. Processes and device

def setup_processes():
    """(ddp, rank, world, local_rank): one process (False, 0, 1, 0), or this one's place among torchrun's
    processes, which torchrun passes in the environment (RANK, WORLD_SIZE, LOCAL_RANK)."""
    if int(os.environ.get("RANK", -1)) == -1:
        return False, 0, 1, 0
    return True, int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])


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


def environment(device, world_size):
    """What config.json records of the machine: torch and Python versions, device, processes, the git commit."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return dict(torch=torch.__version__, device=str(device), world_size=world_size, git_commit=commit,
                cuda_device=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                threads=torch.get_num_threads(), python=sys.version.split()[0])


# ----------------------------------------------------------------------------------------------------
# 2. Data: random windows of the token memmap. A torch.Generator picks them, so its state is part of a
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


@torch.no_grad()
def full_split_loss(model, data, block_size, device, autocast=nullcontext(), lut=None, windows_per_batch=64,
                    subset=None):
    """Mean cross-entropy over every non-overlapping block_size window of `data` (subset=K: over K of them, evenly
    spaced; see split_windows): each token after a window's first is predicted once, from up to block_size tokens
    of context. All windows have the same length, so the mean of batch means, weighted by the number of windows
    in each batch, is the mean over tokens."""
    total, n_win = 0.0, 0
    for xy in split_windows(data, block_size, lut, windows_per_batch, subset):
        xy = torch.from_numpy(xy).to(device)
        with autocast:
            loss = model(xy[:, :-1], xy[:, 1:], return_logits=False)[1]
        total += loss.float().item() * len(xy)
        n_win += len(xy)
    return total / n_win


def corpus_vocab(c, train_data, val_data):
    """For vocab='corpus': (ids, lut, config) with ids the sorted GPT-2 ids that occur, lut their new
    numbers, and the config's vocab_size set to len(ids). For vocab='full': (None, None, c)."""
    if c.vocab == "full":
        return None, None, c
    ids = np.unique(np.concatenate([np.unique(train_data), np.unique(val_data)]))
    lut = np.full(2 ** 16, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    return ids, lut, dataclasses.replace(c, vocab_size=len(ids))


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


def data_identity(c, meta, train_data, val_data, ids):
    """What a checkpoint's weights mean depends on the data: the dataset, its source text's sha256, its token
    counts, and (vocab='corpus') which GPT-2 tokens the rows of E stand for."""
    import hashlib
    return dict(dataset=meta["dataset"], source_sha256=meta.get("sha256"), train_tokens=int(len(train_data)),
                val_tokens=int(len(val_data)), vocab=c.vocab,
                vocab_ids_sha256=None if ids is None else hashlib.sha256(np.asarray(ids, np.int64).tobytes()).hexdigest())


# ----------------------------------------------------------------------------------------------------
# 3. Model, optimizer, and the state a run resumes from (runtime.py writes, reads and checks ckpt.pt)

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


def check_memory(c, device):
    """Refuse, in one line, a CPU run that would not fit in the memory the machine has free."""
    need, have = estimate_memory(c), available_memory()
    if device.type == "cpu" and have is not None and need > have:
        raise ValueError(f"this run needs about {need / 2 ** 30:.1f} GiB but only {have / 2 ** 30:.1f} GiB of memory is "
                         f"available; lower n_embd, n_layer, batch_size or block_size (or use --vocab=corpus)")


def build(c, device, data_id, log):
    """The model (initialised from c.seed), its optimizer (optim.py) and the batch generator (data_seed), and where
    the run stands: dict(step, tokens, loss_sum, n_summed, history). With c.resume all of them are as ckpt.pt left
    them, and history holds the metrics rows before the checkpoint's step (later ones will be redone)."""
    torch.manual_seed(c.seed)
    model = GPT(c.model_config()).to(device)
    optimizer = make_optimizer(model, c)
    gen = torch.Generator().manual_seed(c.seed if c.data_seed is None else c.data_seed)
    # log_rows measures turns from the init: keep it (a resumed run takes the checkpoint's; one from before checkpoints
    # kept it is rebuilt here from the seed, which load_checkpoint makes sure is the checkpoint's)
    where = dict(step=0, tokens=0, loss_sum=0.0, n_summed=0, history=[], ckpt_step=None,
                 emb0=model.transformer.wte.weight.detach().clone() if c.log_rows else None)
    if not c.resume:
        return model, optimizer, gen, where
    if not c.out_dir:
        raise ValueError("--resume needs an out_dir")
    ckpt_path = os.path.join(c.out_dir, "ckpt.pt")
    state = load_checkpoint(ckpt_path, c, data_id, model, optimizer)  # checked field by field, settings too
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        gen.set_state(state["data_rng"])
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"][:torch.cuda.device_count()])
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as e:  # what the checks did not foresee
        raise TrainingError(f"--resume: {ckpt_path} can't be loaded into this run: "
                            f"{(str(e).strip().splitlines() or [type(e).__name__])[0][:200]}") from None
    if where["emb0"] is not None and state.get("emb0") is not None:  # log_rows' reference, as the run measured from
        where["emb0"] = state["emb0"].to(device)
    # tokens, loss_sum and n_summed: see save_checkpoint
    where.update(step=state["step"], tokens=state["tokens"], loss_sum=state["loss_sum"], n_summed=state["n_summed"],
                 ckpt_step=state["step"])
    # keep the rows up to the checkpoint; later ones will be redone
    where["history"] = read_metrics(os.path.join(c.out_dir, "metrics.jsonl"), before=where["step"])
    log(f"resumed from {ckpt_path} at step {where['step']}")
    return model, optimizer, gen, where


def read_metrics(path, before):
    """The rows of a metrics.jsonl (if there is one) before step `before`, each checked: a JSON object with a whole
    step. A last line without its newline was cut by a kill while being written, after the checkpoint (rows are
    appended after their step's checkpoint): it is dropped like every row past the checkpoint. Anything else wrong is
    one line naming the file and the line."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    out = []
    for i, line in enumerate(lines, 1):
        try:
            r = json.loads(line)
        except ValueError:
            if i == len(lines) and not line.endswith("\n"):
                break
            raise TrainingError(f"--resume: {path} line {i} is not JSON; fix or remove that line") from None
        if not isinstance(r, dict) or not isinstance(r.get("step"), int) or isinstance(r["step"], bool):
            raise TrainingError(f"--resume: {path} line {i} is not a metrics row (a JSON object with a whole step); "
                                f"fix or remove that line")
        if r["step"] < before:
            out.append(r)
    return out


def write_run_files(c, meta, device, world, history):
    """config.json (the resolved config, the dataset, the machine) and metrics.jsonl, rewritten whole: a resumed
    run drops the rows past its checkpoint."""
    with open(os.path.join(c.out_dir, "config.json"), "w") as f:
        json.dump(dict(config=dataclasses.asdict(c), dataset=meta, environment=environment(device, world)), f, indent=2)
    with open(os.path.join(c.out_dir, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in history)


def flops_per_token(model):
    """Training FLOPs per token, PaLM-style: 6 per weight that multiplies (the head counts even when tied;
    the lookup does not) plus attention's 12 L T d."""
    c = model.config
    head = c.vocab_size * c.n_embd if model.tied else 0  # untied: lm_head is in the non-embedding count
    return 6 * (model.get_num_params(non_embedding=True) + head) + 12 * c.n_layer * c.block_size * c.n_embd


# ----------------------------------------------------------------------------------------------------
# 4. The training loop, and the helpers it calls

@dataclass
class Run:
    """What the loop and its helpers share, set up once by setup(); the loop itself keeps what changes per step."""
    c: Config
    model: torch.nn.Module  # the model itself: evaluated, checkpointed, sampled
    step_model: torch.nn.Module  # what a training step calls: the model, compiled and/or wrapped in DDP
    optimizer: torch.optim.Optimizer
    gen: torch.Generator  # picks the training batches (its state is checkpointed)
    train_data: np.ndarray
    val_data: np.ndarray
    ids: np.ndarray  # vocab='corpus': the GPT-2 id of each row of E (None for the full vocabulary)
    lut: np.ndarray  # and GPT-2 id -> row
    data_id: dict  # what the data is (see data_identity), checked on resume
    device: torch.device
    autocast: object
    ddp: bool
    world: int
    master: bool  # rank 0: the process that evaluates, logs and writes files
    rows: slice  # this process's rows of the global batch
    ckpt_path: str
    metrics_path: str
    flops_per_token: float
    emb0: torch.Tensor = None  # E at init, with log_rows (see probes.row_probe)
    probes: list = ()  # callables (model, step) -> dict, merged into every logged row (weight_stats first)
    ckpt_step: int = None  # the step of the last checkpoint this run wrote or resumed from (see last_checkpoint)


def setup(c, log, held, probes=()):
    """Sections 1-3 for one run: processes and device, data, model and optimizer (resumed with c.resume), the run's
    files, and the lines that say what is about to happen. Returns (Run, where the run stands: see build). The
    out_dir is claimed (its lock appended to `held`) only once the data and settings have passed their checks, so
    a refused run leaves no folder behind."""
    ddp, rank, world, local_rank = setup_processes()
    master = rank == 0
    log = log if master else (lambda *a, **k: None)
    device, dtype, autocast = setup_device(c, local_rank, ddp)
    c = dataclasses.replace(c, dtype=dtype)  # what runs, not 'auto': config.json and ckpt.pt record it, resume compares it
    if ddp and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    if c.batch_size % world:
        raise ValueError(f"batch_size={c.batch_size} must be divisible by the {world} processes")
    c, meta, train_data, val_data, ids, lut = load_data(c, log)
    data_id = data_identity(c, meta, train_data, val_data, ids)
    check_memory(c, device)
    if master and c.out_dir:
        held.append(claim_out_dir(c))
    model, optimizer, gen, where = build(c, device, data_id, log)
    if master and c.out_dir:
        write_run_files(c, meta, device, world, where["history"])
    step_model = torch.compile(model) if c.compile else model
    if ddp:
        step_model = torch.nn.parallel.DistributedDataParallel(
            step_model, device_ids=[local_rank] if device.type == "cuda" else None)
    share = c.batch_size // world
    run = Run(c, model, step_model, optimizer, gen, train_data, val_data, ids, lut, data_id, device, autocast, ddp, world,
              master, rows=slice(rank * share, (rank + 1) * share),
              ckpt_path=os.path.join(c.out_dir, "ckpt.pt") if c.out_dir else None,
              metrics_path=os.path.join(c.out_dir, "metrics.jsonl") if c.out_dir else None,
              flops_per_token=flops_per_token(model), emb0=where.pop("emb0"), ckpt_step=where.pop("ckpt_step"))
    rows = [row_probe(run.emb0, val_data, c.block_size, device, lut, autocast)] if run.emb0 is not None else []
    run.probes = [weight_stats, *rows, *probes]
    log(f"{model.get_num_params() / 1e6:.2f}M non-embedding parameters | head={c.head} n={c.vocab_size} "
        f"d={c.n_embd} sigma={c.sigma:.4g} d*sigma={c.n_embd * c.sigma:.2f} ln(n)={math.log(c.vocab_size):.2f} "
        f"| {meta['dataset']} ({meta['corpus']}) on {device}, {dtype}, {world} process(es) | {c.optimizer}"
        + (f", residual branches start at N(0, {c.residual_std:g}^2)" if c.zero_init_residual and c.residual_std else ""))
    if where["step"] == 0:  # what the step-0 line should show: that comparison is lesson 01's puzzle
        r = meta.get("repeat_fraction", 0.0)
        log(f"expect at step 0: loss ~ {predicted_initial_loss(c.model_config(), r):.2f} for head={c.head} "
            f"(theory with repeat rate r={r:.3f}; uniform guessing would be ln(n) = {math.log(c.vocab_size):.2f})")
    return run, where


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


@torch.no_grad()
def evaluate(run, step, full=True, dense=False):
    """The eval losses of the current weights, as a metrics row's fields. full: eval_train_loss and val_loss, means
    over eval_iters fixed batches of each split (the same batches every time; val over the whole split with
    eval_full_val). dense: val_subset_loss, over dense_val_windows windows of the val split. A non-finite one stops
    the run."""
    c, model = run.c, run.model
    model.eval()
    out = {}
    if dense:  # a subset of the val split's windows (Config.dense_val_until)
        out["val_subset_loss"] = full_split_loss(model, run.val_data, c.block_size, run.device, run.autocast, run.lut,
                                                 subset=c.dense_val_windows)
    for split, data in (("val", run.val_data), ("train", run.train_data)) if full else ():
        if split == "val" and c.eval_full_val:
            out["val_loss"] = full_split_loss(model, data, c.block_size, run.device, run.autocast, run.lut)
            continue
        g, losses = torch.Generator().manual_seed(12345), []
        for _ in range(c.eval_iters):
            x, y = get_batch(data, c.batch_size, c.block_size, g, lut=run.lut)
            with run.autocast:
                losses.append(model(x.to(run.device), y.to(run.device), return_logits=False)[1])
        out["val_loss" if split == "val" else "eval_train_loss"] = torch.stack(losses).mean().item()
    model.train()
    if not all(map(math.isfinite, out.values())):
        raise Diverged(f"non-finite loss at evaluation of step {step}; stopping ({last_checkpoint(run)})", step)
    return out


def evaluations_at(step, c):
    """(full, dense): whether `step` gets the full evaluation (and a checkpoint), and whether it gets the dense
    val-subset one (every log_interval steps up to dense_val_until, and at every full evaluation)."""
    full = step % c.eval_interval == 0 or step == c.max_iters
    return full, c.dense_val_until > 0 and (full or (step <= c.dense_val_until and step % c.log_interval == 0))


def check_finite(first_bad, run):
    """Stop, naming the step, if a training loss since the last check was not finite (first_bad >= 0)."""
    if (bad := first_bad.item()) >= 0:
        raise Diverged(f"non-finite loss at step {bad}; stopping ({last_checkpoint(run)})", bad)


def last_checkpoint(run):
    """What a divergence message says of checkpoints: the last one that exists and was written (or resumed from)
    before the first non-finite value (every checkpoint is written after the checks that cover the steps before it,
    and a resumed one was checked finite), or that there is none."""
    if run.ckpt_path and run.ckpt_step is not None and os.path.exists(run.ckpt_path):
        return f"the last checkpoint before it is kept: {run.ckpt_path}, step {run.ckpt_step}"
    return "no checkpoint was written before it" + ("" if run.ckpt_path else " (out_dir='' writes none)")


def checkpoint(run, step, tokens, loss_sum, n_summed):
    """Write ckpt.pt for the weights after `step` updates. loss_sum (the losses summed since the last row) is
    averaged over the processes first, so that it is the global batch's, as logged."""
    total = loss_sum.clone()
    if run.ddp:
        dist.all_reduce(total)
        total /= run.world
    if run.master and run.ckpt_path:
        save_checkpoint(run.ckpt_path, run.model, run.optimizer, step, run.c, run.gen, run.data_id, tokens,
                        total.item(), n_summed, emb0=run.emb0)
    if run.ckpt_path:  # every process: each may be the one that reports a divergence
        run.ckpt_step = step


def catch_stop_signals():
    """Ctrl-C (SIGINT) and SIGTERM only append to the returned list; the loop checks it between two steps, saves a
    checkpoint and stops. Returns (that list, the previous handlers for restore_signals)."""
    stop, handlers = [], {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            handlers[sig] = signal.signal(sig, lambda *_: stop.append(True))
        except ValueError:  # not the main thread: leave signals alone
            pass
    return stop, handlers


def restore_signals(handlers):
    """Put back the signal handlers catch_stop_signals replaced."""
    for sig, h in handlers.items():
        signal.signal(sig, h)


def progress_bar(c, step, show, log):
    """(bar, say, plain). The bar redraws one line with carriage returns: right for a terminal or a notebook,
    unreadable in a log file. Elsewhere (stdout piped or redirected) every logged row becomes one plain line
    instead (plain=True). say() prints a line without breaking the bar."""
    ipython = sys.modules.get("IPython")  # a notebook: IPython is running a shell (merely imported, it is not one)
    interactive = sys.stdout.isatty() or (ipython is not None and ipython.get_ipython() is not None)
    bar = tqdm(total=c.max_iters, initial=step, disable=not (show and interactive), dynamic_ncols=True)
    return bar, (bar.write if not bar.disable else log), show and bar.disable


def show_progress(bar, plain, log, run, row):
    """A logged row on the bar (loss, tokens/s, MFU on a GPU), or as one plain line."""
    postfix = dict(loss=f"{row['train_loss']:.3f}", tok_s=f"{row['tokens_per_s']:,.0f}")
    if run.device.type == "cuda":
        postfix["mfu"] = f"{100 * run.flops_per_token * row['tokens_per_s'] / (PEAK_TFLOPS * 1e12):.1f}%"
    bar.set_postfix(postfix, refresh=False)
    if plain:
        log(f"step {row['step']}/{run.c.max_iters}: loss {row['train_loss']:.4f}, {row['tokens_per_s']:,.0f} tokens/s")


def _append(history, row, path):
    """A metrics row: into the history, and (with an out_dir) as one more line of metrics.jsonl."""
    history.append(row)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def train(c, progress=True, log=print, probes=()):
    """Train per Config c and return the history: a list of dicts, one per logged step, with step, tokens, train_loss
    (mean since the last row), lr, grad_norm, emb_grad_norm, emb_rms, resid_rms (see branch_rms), lnf_gain (the final
    norm's mean gain), with log_rows emb_turn, self_logit, branch_ratio (probes.row_probe), the fields of each of
    `probes` (callables (model, step) -> dict), time, at evaluations val_loss and eval_train_loss (means over fixed
    batches), and with dense_val_until val_subset_loss. Raises Diverged (a
    TrainingError, with the history so far) on divergence, TrainingError on a bad checkpoint or a busy out_dir,
    ValueError on impossible settings. The out_dir is locked for the run's life (see claim_out_dir), from the moment
    the data and settings have passed their checks."""
    held = []  # the out_dir's lock, once setup has claimed it
    try:
        return _train(c, progress, log, held, probes)
    finally:
        for lock in held:
            release_out_dir(lock)


def _train(c, progress, log, held, probes):
    """The loop. Row `step` of the history describes the weights after `step` updates: their eval losses, and the
    training loss and gradient computed with them in iteration `step`."""
    run, where = setup(c, log, held, probes)
    c, log = run.c, log if run.master else (lambda *a, **k: None)
    step, tokens_seen, history = where["step"], where["tokens"], where["history"]
    start_step, tokens_per_step = step, c.batch_size * c.block_size
    # Losses stay on the device between log steps: no host sync per step. A resumed run restarts these from the
    # checkpoint: its first row then averages the same steps as the uninterrupted run's.
    loss_sum, n_summed = torch.tensor(where["loss_sum"], device=run.device), where["n_summed"]
    first_bad = torch.full((), -1, device=run.device, dtype=torch.long)  # the first step with a non-finite loss
    stop, handlers = catch_stop_signals()
    bar, say, plain = progress_bar(c, step, progress and run.master, log)
    t0 = t_last = time.time()
    step_last = step
    try:
        while True:
            row = {}
            full, dense = evaluations_at(step, c)
            if full or dense:
                check_finite(first_bad, run)  # a step since the last log went non-finite: name it
                if run.master:
                    row.update(step=step, **evaluate(run, step, full, dense))
                    if full:
                        say(f"step {step}: train {row['eval_train_loss']:.4f}, val {row['val_loss']:.4f}")
                if full and step > start_step:
                    checkpoint(run, step, tokens_seen, loss_sum, n_summed)
            if step >= c.max_iters:
                if row:
                    _append(history, row, run.metrics_path)
                break
            if stop:
                checkpoint(run, step, tokens_seen, loss_sum, n_summed)
                say(f"interrupted at step {step}" + (f"; checkpoint saved to {run.ckpt_path}" if run.ckpt_path else ""))
                raise KeyboardInterrupt

            x, y = get_batch(run.train_data, c.batch_size, c.block_size, run.gen, run.rows, run.lut)
            lr = lr_at(step, c)
            for group in run.optimizer.param_groups:
                group["lr"] = lr
            with run.autocast:
                _, loss = run.step_model(x.to(run.device, non_blocking=True), y.to(run.device, non_blocking=True),
                                         return_logits=False)
            run.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            logging_now = bool(row) or step % c.log_interval == 0
            if logging_now:  # before clipping: the raw size of the embedding's (summed, if tied) gradient
                emb_grad_norm = run.model.transformer.wte.weight.grad.norm()
            grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), c.grad_clip) if c.grad_clip > 0 else None
            run.optimizer.step()
            loss = loss.detach()
            first_bad = torch.where((first_bad < 0) & ~torch.isfinite(loss), step, first_bad)
            loss_sum += loss
            n_summed += 1
            tokens_seen += tokens_per_step
            if logging_now:
                check_finite(first_bad, run)
                if run.ddp:  # the logged loss is the global batch's, as in a 1-process run
                    dist.all_reduce(loss_sum)
                    loss_sum /= run.world
                now = time.time()
                row.update(step=step, tokens=tokens_seen, train_loss=(loss_sum / n_summed).item(), lr=lr,
                           grad_norm=None if grad_norm is None else grad_norm.item(),
                           emb_grad_norm=emb_grad_norm.item(),
                           **{k: v for probe in run.probes for k, v in probe(run.model, step).items()},
                           tokens_per_s=(step + 1 - step_last) * tokens_per_step / max(now - t_last, 1e-9), time=now - t0)
                show_progress(bar, plain, log, run, row)
                loss_sum.zero_()
                n_summed, t_last, step_last = 0, now, step + 1
                if run.master:
                    _append(history, row, run.metrics_path)
            step += 1
            bar.update(1)
    except Diverged as e:  # hand the rows logged so far to the caller (the metrics.jsonl has them too)
        e.history = history
        raise
    finally:
        bar.close()
        restore_signals(handlers)
        if run.ddp and dist.is_initialized():
            dist.destroy_process_group()
    if run.master:
        finish(run, history, time.time() - t0, log)
    return history


# ----------------------------------------------------------------------------------------------------
# 5. The end

def finish(run, history, seconds, log):
    """The final line (the last val loss) and, with sample_tokens, a sample of text from the trained model."""
    c = run.c
    final = [r for r in history if r.get("val_loss") is not None][-1]
    log(f"final val loss {final['val_loss']:.4f} at step {final['step']} ({seconds:.0f} s)")
    if not c.sample_tokens:
        return
    enc = get_encoding()
    start = enc.encode_ordinary("\n")
    if run.lut is not None:  # vocab='corpus': the model only knows the corpus's tokens, renumbered
        start = run.lut[start].tolist() if (run.lut[start] >= 0).all() else \
            run.lut[run.val_data[:1].astype(np.int64)].tolist()
    start = torch.tensor([start], device=run.device)
    with run.autocast:
        out = run.model.eval().generate(start, c.sample_tokens, temperature=0.8, top_k=200)[0].tolist()
    if run.ids is not None:
        out = run.ids[out].tolist()
    log("sample:\n" + enc.decode([t for t in out if t < enc.n_vocab]))


def __getattr__(name):
    """The benchmark lives in bench.py; `from train import bench, bench_against_baseline, NANOGPT` still works."""
    if name in ("bench", "bench_against_baseline", "NANOGPT"):
        import bench
        return getattr(bench, name)
    raise AttributeError(f"module 'train' has no attribute {name!r}")


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
        if config.bench:  # bench.py times steps instead of training (as nanoGPT's bench.py does)
            import bench
            (bench.bench_against_baseline if config.bench_baseline else bench.bench)(config)
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
