"""
Train a tiedgpt model. One process on a CPU or GPU, or several with DistributedDataParallel:

    python train.py --head=ortho
    python train.py --head=logn --optimizer=tiger        # steps relative to each weight's size (optim.py)
    torchrun --standalone --nproc_per_node=4 train.py --head=ortho

Every field of Config (config.py) is a --key=value flag (--help lists them). Output goes to out_dir (default
out/<head>): config.json, metrics.jsonl (a row per logged step) and ckpt.pt (at every evaluation and on Ctrl-C);
--resume=true continues the checkpointed run (rundir.py; what a run promises: docs/training.md). The file reads in the
order a run happens: 1. data; 2. the machine; 3. model, optimizer and the loop (evaluate / checkpoint -> batch -> lr
-> forward -> backward -> clip -> step -> log), each helper just above its caller; 4. the end; the command line.
From Python: `from train import Config, train; history = train(Config(head="logn"))`.
"""

import dataclasses
import math
import os
import signal
import sys
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from config import Config, parse_args
from data.prepare import get_encoding, load_data, split_windows
from fused_loss import FusedLoss, LinearCrossEntropy
from optim import make_optimizer
from rundir import (TrainingError, append_row, claim_out_dir, data_identity, save_checkpoint, start_state,
                    write_run_files)
from tiedgpt import GPT, predicted_initial_loss


class Diverged(TrainingError):
    """The loss went non-finite at `step`; `history` holds the rows before it (research/ keeps such a run)."""

    def __init__(self, message, step):
        super().__init__(message)
        self.step, self.history = step, []


class Stopped(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM at a step's end, its checkpoint saved and said."""


# ----------------------------------------------------------------------------------------------------
# 1. Data: random windows of the token memmap. A torch.Generator picks them, so its state is part of a
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
def full_split_loss(model, data, block_size, device, autocast=nullcontext(), lut=None, subset=None):
    """Mean cross-entropy over every non-overlapping block_size window of `data` (subset=K: K of them, evenly spaced:
    data.prepare.split_windows). The windows are all as long, so the batches' means weighted by their windows is it."""
    total, n_win = 0.0, 0
    for xy in split_windows(data, block_size, lut, subset=subset):
        xy = torch.from_numpy(xy).to(device)
        with autocast:
            loss = model(xy[:, :-1], xy[:, 1:])[1]
        total += loss.float().item() * len(xy)
        n_win += len(xy)
    return total / n_win


# ----------------------------------------------------------------------------------------------------
# 2. The machine: processes (one, or torchrun's), device and dtype, memory

def setup_device(c, ddp=False, local_rank=0):
    """The torch.device, the compute dtype's name and the autocast context that Config c asks for. Under torchrun each
    process takes the GPU of its LOCAL_RANK; plain 'cuda' means this process's GPU (set_device needs an index)."""
    mps = torch.backends.mps.is_available()
    if c.device == "auto":
        device = f"cuda:{local_rank}" if torch.cuda.is_available() else "mps" if mps and not ddp else "cpu"
    elif c.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={c.device} but this machine has no CUDA GPU; use --device=cpu")
    elif c.device == "mps" and not mps:  # Apple silicon: untested by this project (no such machine)
        raise ValueError("device=mps but this machine has no usable Apple GPU (torch.backends.mps); use --device=cpu")
    else:
        device = f"cuda:{local_rank}" if c.device == "cuda" or (ddp and c.device.startswith("cuda")) else c.device
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    dtype = c.dtype
    if dtype == "auto":
        dtype = "bfloat16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "float32"
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if dtype == "bfloat16" else nullcontext()
    return device, dtype, autocast


def check_memory(c, device):
    """Refuse, in one line, a CPU run that would not fit in the memory free now (Linux): 16 bytes a parameter (weight,
    gradient, AdamW's two moments), the activations backward keeps (~34 d + 5 T n_head floats a token and layer: the
    attention and MLP inputs, their scores) and the head's buffer (the fused loss's chunk, or the logits thrice)."""
    d, n, L, T = c.n_embd, c.vocab_size, c.n_layer, c.block_size
    params = n * d * (1 if c.head_spec.tied else 2) + L * 12 * d * d + 2 * d * d
    head = LinearCrossEntropy.CHUNK_ELEMENTS * 4 if c.fused_loss else 3 * c.batch_size * T * n * 4
    need = 16 * params + c.batch_size * T * L * (34 * d + 5 * T * c.n_head) * 4 + head
    meminfo = open("/proc/meminfo").read() if os.path.exists("/proc/meminfo") else ""
    have = next((int(line.split()[1]) * 1024 for line in meminfo.splitlines() if line.startswith("MemAvailable:")), 0)
    if device.type == "cpu" and have and need > have:
        raise ValueError(f"this run needs about {need / 2 ** 30:.1f} GiB but only {have / 2 ** 30:.1f} GiB of memory "
                         f"is free; lower n_embd, n_layer, batch_size or block_size (or use --vocab=corpus)")


# ----------------------------------------------------------------------------------------------------
# 3. Model, optimizer and the training loop, with the helpers it calls

@dataclass
class Run:
    """What the loop and its helpers share: what setup() makes once, then where the run stands, which the loop
    advances (a fresh run starts at step 0; a resumed one where its checkpoint left off: rundir.start_state)."""
    c: Config
    model: torch.nn.Module  # the model itself: evaluated, checkpointed, sampled
    loss_model: torch.nn.Module  # (idx, targets) -> (logits or None, loss): FusedLoss(model) with fused_loss
    step_model: torch.nn.Module  # what a training step calls: loss_model, compiled and/or wrapped in DDP
    optimizer: torch.optim.Optimizer
    gen: torch.Generator  # picks the training batches (its state is checkpointed)
    train_data: np.ndarray
    val_data: np.ndarray
    ids: np.ndarray  # vocab='corpus': the GPT-2 id of each row of E (None for the full vocabulary)
    lut: np.ndarray  # and GPT-2 id -> row
    data_id: dict  # what the data is (rundir.data_identity), checked on resume
    device: torch.device
    autocast: object
    ddp: bool
    world: int
    master: bool  # rank 0: the process that evaluates, logs and writes files
    rows: slice  # this process's rows of the global batch
    probes: list  # callables (model, step) -> dict, merged into every logged row
    lock: object  # the out_dir's lock (rundir.claim_out_dir), held for the run's life (None: no out_dir)
    step: int  # the updates done: the next step to take
    tokens: int  # training tokens seen
    loss_sum: torch.Tensor  # training losses summed since the last logged row, on the device: no host sync per step
    n_summed: int  # how many
    history: list  # the logged rows
    ckpt_step: int = None  # the step of the last checkpoint written or resumed from
    first_bad: torch.Tensor = None  # the first step whose loss was not finite (-1: none), on the device
    t0: float = 0.0  # when the loop started, and the time and step of the last logged row (tokens/s)
    t_last: float = 0.0
    step_last: int = 0

    def path(self, name):
        return os.path.join(self.c.out_dir, name) if self.c.out_dir and self.master else None


def setup(c, log, probes=()):
    """Processes and device, data, model and optimizer (resumed with c.resume), the run's files, and the lines that
    say what is about to happen: the Run. The out_dir is claimed only once the data and settings have passed their
    checks, so a refused run leaves no folder behind."""
    ddp = int(os.environ.get("RANK", -1)) != -1  # torchrun passes each process its place: RANK, WORLD_SIZE, LOCAL_RANK
    rank, world, local_rank = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")) if ddp else (0, 1, 0)
    master = rank == 0
    log = log if master else (lambda *a, **k: None)
    device, dtype, autocast = setup_device(c, ddp, local_rank)
    c = dataclasses.replace(c, dtype=dtype)  # what runs, not 'auto': config.json and ckpt.pt record it
    if ddp and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    if c.batch_size % world:
        raise ValueError(f"batch_size={c.batch_size} must be divisible by the {world} processes")
    c, meta, train_data, val_data, ids, lut = load_data(c, log)
    data_id = data_identity(c, meta, train_data, val_data, ids)
    check_memory(c, device)
    lock = claim_out_dir(c) if master and c.out_dir else None
    try:
        torch.manual_seed(c.seed)  # the model's init; then the batches' order, from data_seed
        model = GPT(c.model_config()).to(device)
        optimizer = make_optimizer(model, c)  # optim.py
        gen = torch.Generator().manual_seed(c.resolved()["data_seed"])
        state = start_state(c, model, optimizer, gen, data_id, log)
        if lock:
            write_run_files(c, meta, device, world, state["history"])
    except BaseException:
        if lock:
            lock.close()
        raise
    state["loss_sum"] = torch.tensor(state["loss_sum"], device=device)  # (a resumed run's: the checkpoint's sum)
    loss_model = FusedLoss(model) if c.fused_loss else model
    step_model = torch.compile(loss_model) if c.compile else loss_model
    if ddp:
        step_model = torch.nn.parallel.DistributedDataParallel(
            step_model, device_ids=[local_rank] if device.type == "cuda" else None)
    share = c.batch_size // world
    run = Run(c, model, loss_model, step_model, optimizer, gen, train_data, val_data, ids, lut, data_id, device,
              autocast, ddp, world, master, slice(rank * share, (rank + 1) * share), list(probes), lock, **state,
              ckpt_step=state["step"] if c.resume else None)
    log(f"{model.get_num_params() / 1e6:.2f}M non-embedding parameters | head={c.head} n={c.vocab_size} "
        f"d={c.n_embd} sigma={c.sigma:.4g} d*sigma={c.n_embd * c.sigma:.2f} ln(n)={math.log(c.vocab_size):.2f} "
        f"| {meta['dataset']} ({meta['corpus']}) on {device}, {dtype}, {world} process(es) | {c.optimizer}"
        + (f", residual branches start at N(0, {c.residual_std:g}^2)" if c.zero_init_residual and c.residual_std
           else ""))
    if run.step == 0:  # what the step-0 line should show: that comparison is lesson 01's puzzle
        r = meta["repeat_fraction"]
        log(f"expect at step 0: loss ~ {predicted_initial_loss(c.model_config(), r):.2f} for head={c.head} "
            f"(theory with repeat rate r={r:.3f}; uniform guessing would be ln(n) = {math.log(c.vocab_size):.2f})")
    return run


def lr_at(it, c):
    """Linear warmup to lr over warmup_iters, then cosine from lr down to min_lr at lr_decay_iters."""
    resolved = c.resolved()  # None means lr/10 and max_iters (config.resolved_defaults)
    min_lr, decay_iters = resolved["min_lr"], resolved["lr_decay_iters"]
    if it < c.warmup_iters:
        return c.lr * (it + 1) / (c.warmup_iters + 1)
    if it >= decay_iters:
        return min_lr
    progress = (it - c.warmup_iters) / max(1, decay_iters - c.warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (c.lr - min_lr)


def checkpoint(run):
    """Write ckpt.pt (rundir.CKPT_KEYS) for the weights after run.step updates: with the batch generator's and torch's
    random states, the tokens seen, the training losses summed since the last row (averaged over the processes, as
    logged) and the rows logged before this step, a resumed run logs exactly what this one would have. A loss that
    went non-finite since the last check stops the run first: diverged weights never overwrite a good checkpoint."""
    check_finite(run)
    total = run.loss_sum.clone()
    if run.ddp:
        dist.all_reduce(total)
        total /= run.world
    if run.path("ckpt.pt"):
        save_checkpoint(run.path("ckpt.pt"), dict(
            model=run.model.state_dict(), optimizer=run.optimizer.state_dict(), step=run.step,
            config=dataclasses.asdict(run.c), data=run.data_id, data_rng=run.gen.get_state(),
            torch_rng=torch.get_rng_state(), cuda_rng=torch.cuda.get_rng_state_all() if torch.cuda.is_available()
            else None, tokens=run.tokens, loss_sum=total.item(), n_summed=run.n_summed, history=run.history))
    if run.c.out_dir:  # every process: each may be the one that reports a divergence
        run.ckpt_step = run.step


def check_finite(run):
    """Stop if a training loss since the last check was not finite (run.first_bad >= 0)."""
    if (bad := run.first_bad.item()) >= 0:
        diverged(run, bad)


def diverged(run, step):
    """Stop the run, naming the step whose loss went non-finite and the last checkpoint before it."""
    kept = (f"the last checkpoint before it is kept: {os.path.join(run.c.out_dir, 'ckpt.pt')}, step {run.ckpt_step}"
            if run.ckpt_step is not None else "no checkpoint was written before it")
    raise Diverged(f"non-finite loss at step {step}; stopping ({kept})", step)


@torch.no_grad()
def evaluate(run, full=True, dense=False):
    """The eval losses of the current weights, as a metrics row's fields. full: eval_train_loss and val_loss, means
    over eval_iters fixed batches of each split (the same batches every time; val over the whole split with
    eval_full_val). dense: val_subset_loss, over dense_val_windows windows of the val split. A non-finite one stops
    the run."""
    c, model, loss_of = run.c, run.model, run.loss_model
    model.eval()
    out = {}
    if dense:  # a subset of the val split's windows (Config.dense_val_until)
        out["val_subset_loss"] = full_split_loss(loss_of, run.val_data, c.block_size, run.device, run.autocast,
                                                 run.lut, subset=c.dense_val_windows)
    for split, data in (("val", run.val_data), ("train", run.train_data)) if full else ():
        if split == "val" and c.eval_full_val:
            out["val_loss"] = full_split_loss(loss_of, data, c.block_size, run.device, run.autocast, run.lut)
            continue
        g, losses = torch.Generator().manual_seed(12345), []
        for _ in range(c.eval_iters):
            x, y = get_batch(data, c.batch_size, c.block_size, g, lut=run.lut)
            with run.autocast:
                losses.append(loss_of(x.to(run.device), y.to(run.device))[1])
        out["val_loss" if split == "val" else "eval_train_loss"] = torch.stack(losses).mean().item()
    model.train()
    if not all(map(math.isfinite, out.values())):
        diverged(run, run.step)
    return out


def evaluations_at(step, c):
    """(full, dense): whether `step` gets the full evaluation (and a checkpoint), and whether it gets the dense
    val-subset one (every log_interval steps up to dense_val_until, and at every full evaluation)."""
    full = step % c.eval_interval == 0 or step == c.max_iters
    return full, c.dense_val_until > 0 and (full or (step <= c.dense_val_until and step % c.log_interval == 0))


def train_step(run, logging_now):
    """One step: batch -> lr -> forward (only the loss is kept: the textbook path's logits would hold (B*T) x n floats)
    -> backward -> clip -> update. Returns what a logged row reports of it: lr, the gradient norm before clipping
    (None without clipping) and, when logging_now, the embedding's own."""
    c = run.c
    x, y = get_batch(run.train_data, c.batch_size, c.block_size, run.gen, run.rows, run.lut)
    lr = lr_at(run.step, c)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    with run.autocast:
        loss = run.step_model(x.to(run.device, non_blocking=True), y.to(run.device, non_blocking=True))[1]
    run.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    # before clipping: the raw size of the embedding's (summed, if tied) gradient
    emb_grad_norm = run.model.transformer.wte.weight.grad.norm() if logging_now else None
    grad_norm = torch.nn.utils.clip_grad_norm_(run.model.parameters(), c.grad_clip) if c.grad_clip > 0 else None
    run.optimizer.step()
    loss = loss.detach()
    run.first_bad = torch.where((run.first_bad < 0) & ~torch.isfinite(loss), run.step, run.first_bad)
    run.loss_sum += loss
    run.n_summed += 1
    run.tokens += c.batch_size * c.block_size
    return lr, grad_norm, emb_grad_norm


@torch.no_grad()
def weight_stats(model):
    """The sizes lesson 04 follows: the RMS of the embedding and of the branches' last layers, the final norm's gain."""
    ws = [m.weight for m in model.modules() if getattr(m, "RESIDUAL_OUT", False)]
    resid = math.sqrt(sum(w.float().pow(2).sum().item() for w in ws) / max(1, sum(w.numel() for w in ws)))
    return dict(emb_rms=model.transformer.wte.weight.pow(2).mean().sqrt().item(), resid_rms=resid,
                lnf_gain=model.transformer.ln_f.weight.mean().item())


def log_row(run, row, lr, grad_norm, emb_grad_norm):
    """Complete `row` with the training loss averaged since the last row (over every process), the step's numbers,
    the weights' sizes and every probe's fields, and append it to the history (and metrics.jsonl)."""
    check_finite(run)
    if run.ddp:  # the logged loss is the global batch's, as in a 1-process run
        dist.all_reduce(run.loss_sum)
        run.loss_sum /= run.world
    now, step = time.time(), run.step
    tokens_per_s = (step + 1 - run.step_last) * run.c.batch_size * run.c.block_size / max(now - run.t_last, 1e-9)
    row.update(step=step, tokens=run.tokens, train_loss=(run.loss_sum / run.n_summed).item(), lr=lr,
               grad_norm=None if grad_norm is None else grad_norm.item(), emb_grad_norm=emb_grad_norm.item(),
               **weight_stats(run.model), **{k: v for probe in run.probes for k, v in probe(run.model, step).items()},
               tokens_per_s=tokens_per_s, time=now - run.t0)
    run.loss_sum.zero_()
    run.n_summed, run.t_last, run.step_last = 0, now, step + 1
    add_row(run, row)


def add_row(run, row):  # (into metrics.jsonl after the step's checkpoint: a resumed run never misses a row)
    run.history.append(row)
    if run.path("metrics.jsonl"):
        append_row(run.path("metrics.jsonl"), row)


def catch_stop_signals():
    """Ctrl-C (SIGINT) and SIGTERM only append to the list returned (with the old handlers, to put back); the loop
    checks it between two steps, saves a checkpoint and stops. A second one stops at once (a KeyboardInterrupt)."""
    stop, handlers = [], {}

    def on_signal(*_):
        if stop:
            raise KeyboardInterrupt
        stop.append(True)
    if threading.current_thread() is threading.main_thread():  # (only the main thread may set a handler)
        handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    return stop, handlers


def in_notebook():
    """True when IPython runs a shell here (a notebook); merely imported (as after executing notebooks), it is not."""
    ipython = sys.modules.get("IPython")
    return ipython is not None and ipython.get_ipython() is not None


def progress_bar(c, step, show, log):
    """(bar, say, plain). The bar redraws one line: right for a terminal or a notebook, unreadable in a log file, where
    every logged row is one plain line instead (plain=True). say() prints a line without breaking the bar."""
    bar = tqdm(total=c.max_iters, initial=step, disable=not (show and (sys.stdout.isatty() or in_notebook())),
               dynamic_ncols=True)
    return bar, (bar.write if not bar.disable else log), show and bar.disable


def show_progress(bar, plain, log, run, row):
    """A logged row on the bar (loss, tokens/s), or as one plain line."""
    bar.set_postfix(dict(loss=f"{row['train_loss']:.3f}", tok_s=f"{row['tokens_per_s']:,.0f}"), refresh=False)
    if plain:
        log(f"step {row['step']}/{run.c.max_iters}: loss {row['train_loss']:.4f}, {row['tokens_per_s']:,.0f} tokens/s")


def train(c, progress=True, log=print, probes=()):
    """Train per Config c; return the history: a dict per logged step (step, tokens, train_loss since the last row, lr,
    grad_norm, emb_grad_norm, weight_stats', each probe's: callables (model, step) -> dict, tokens_per_s, time; at
    evaluations val_loss, eval_train_loss and with dense_val_until val_subset_loss). Raises Diverged (with the history
    so far), TrainingError (a busy out_dir, a checkpoint it can't resume), ValueError (settings), Stopped (Ctrl-C)."""
    run = setup(c, log, probes)
    try:
        return loop(run, progress, log if run.master else (lambda *a, **k: None))
    finally:
        if run.lock:
            run.lock.close()


def loop(run, progress, log):
    c, start_step = run.c, run.step
    run.first_bad = torch.full((), -1, device=run.device, dtype=torch.long)
    stop, handlers = catch_stop_signals()
    bar, say, plain = progress_bar(c, run.step, progress and run.master, log)
    run.t0 = run.t_last = time.time()
    run.step_last = run.step
    try:
        while True:
            row, (full, dense) = {}, evaluations_at(run.step, c)
            if full or dense:
                check_finite(run)  # a step since the last log went non-finite: name it
                if run.master:
                    row.update(step=run.step, **evaluate(run, full, dense))
                    if full:
                        say(f"step {run.step}: train {row['eval_train_loss']:.4f}, val {row['val_loss']:.4f}")
                if full and (run.step > start_step or not c.resume):  # (a resumed run's first step is on disk)
                    checkpoint(run)
            if run.step >= c.max_iters:
                if row:
                    add_row(run, row)
                break
            if stop:
                checkpoint(run)
                say(f"interrupted at step {run.step}" + (f"; checkpoint saved to {run.path('ckpt.pt')}"
                                                         if run.path("ckpt.pt") else ""))
                raise Stopped
            logging_now = full or dense or run.step % c.log_interval == 0  # (the same on every process)
            lr, grad_norm, emb_grad_norm = train_step(run, logging_now)
            if logging_now:
                log_row(run, row, lr, grad_norm, emb_grad_norm)
                show_progress(bar, plain, log, run, row)
            run.step += 1
            bar.update(1)
    except Diverged as e:  # hand the rows logged so far to the caller (metrics.jsonl has them too)
        e.history = run.history
        raise
    finally:
        bar.close()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        if run.ddp and dist.is_initialized():
            dist.destroy_process_group()
    if run.master:
        finish(run, time.time() - run.t0, log)
    return run.history


# ----------------------------------------------------------------------------------------------------
# 4. The end

def finish(run, seconds, log):
    """The final line (the last val loss) and, with sample_tokens, a sample of text from the trained model."""
    c = run.c
    final = [r for r in run.history if r.get("val_loss") is not None][-1]
    log(f"final val loss {final['val_loss']:.4f} at step {final['step']} ({seconds:.0f} s)")
    if not c.sample_tokens:
        return
    enc = get_encoding()
    start = enc.encode_ordinary("\n")  # one token, 198
    if run.lut is not None:  # vocab='corpus': the tokens renumbered (a text without "\n": from its first token, row 0)
        start = [max(int(run.lut[start[0]]), 0)]
    start = torch.tensor([start], device=run.device)
    with run.autocast:
        out = run.model.eval().generate(start, c.sample_tokens, temperature=0.8, top_k=200)[0].tolist()
    if run.ids is not None:
        out = run.ids[out].tolist()
    log("sample:\n" + enc.decode([t for t in out if t < enc.n_vocab]))


# ----------------------------------------------------------------------------------------------------
# Command line: --key=value over Config

def main(argv):
    """A Config from the flags, then train(). A problem the user can act on is one line on stderr and a non-zero exit:
    2 a setting or file that can't be used, 1 a run that can't start or go on, 130 Ctrl-C; a bug keeps its traceback."""
    try:
        train(parse_args(argv, doc=__doc__))
    except Stopped:  # the first Ctrl-C: the run said where its checkpoint is
        return 130
    except KeyboardInterrupt:  # a second one stops wherever the run is
        print("train.py: stopped at once by Ctrl-C; the last checkpoint, if any, stands", file=sys.stderr)
        return 130
    except (ValueError, TrainingError) as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    except OSError as e:  # a disk that filled up, or a folder that vanished, while reading or writing a run's files
        print(f"train.py: could not read or write {e.filename or 'a file'}: {e.strerror or e}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # out of memory (a GPU's, or a CPU's past the estimate); anything else is a bug
        if not isinstance(e, torch.OutOfMemoryError) and "can't allocate memory" not in str(e):
            raise
        print(f"train.py: out of memory ({str(e).strip().splitlines()[0][:100]}); lower batch_size, block_size, "
              f"n_embd or n_layer", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
