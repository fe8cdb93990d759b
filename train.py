"""
Train a tiedgpt model. One process on a CPU or GPU, or several with DistributedDataParallel:

    python train.py --head=ortho
    python train.py --head=logn --optimizer=tiger        # steps relative to each weight's size (optim.py)
    torchrun --standalone --nproc_per_node=4 train.py --head=ortho

Every field of Config (config.py) is a --key=value flag: python train.py --help lists them. Output goes to out_dir
(default out/<head>): config.json, metrics.jsonl (one row per logged step) and ckpt.pt (written atomically at every
evaluation and on Ctrl-C); --resume=true continues the checkpointed run (docs/training.md).

The file reads in the order a run happens: 1. data; 2. model, optimizer (setup) and the training loop (`_train`:
evaluate / checkpoint -> batch -> lr -> forward -> backward -> clip -> step -> log), with the helpers it calls just
above it; 3. the end (final line, a sample); then the command line. Beside it, one concern a file: config.py,
optim.py, checkpoint.py (ckpt.pt), rundir.py (the out_dir's lock and files, resuming), machine.py, errors.py,
probes.py and bench.py.

From Python (notebooks): `from train import Config, train; history = train(Config(head="logn"))`.
"""

import dataclasses
import math
import os
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass

if __name__ == "__main__":  # Ctrl-C while the imports below load: end quietly (exit 130), not with a traceback
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))  # at once: nothing is written yet

import numpy as np  # noqa: E402
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from checkpoint import data_identity, save_checkpoint
from config import Config, parse_args
from data.prepare import get_encoding, load_data, split_windows
from errors import Diverged, Stopped, explain
from fused_loss import FusedLoss
from machine import PEAK_TFLOPS, check_memory, flops_per_token, in_notebook, setup_device, setup_processes
from optim import make_optimizer
from probes import row_probe, weight_stats
from rundir import append_row, check_still_claimed, claim_out_dir, release_out_dir, start_state, write_run_files
from tiedgpt import GPT, predicted_initial_loss


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
            loss = model(xy[:, :-1], xy[:, 1:])[1]
        total += loss.float().item() * len(xy)
        n_win += len(xy)
    return total / n_win


# ----------------------------------------------------------------------------------------------------
# 2. Model, optimizer and the training loop, with the helpers it calls

@dataclass
class Run:
    """Everything the loop and its helpers share: what setup() makes once, then where the run stands, which the
    loop advances (a fresh run starts at step 0; a resumed one where its checkpoint left off: rundir.start_state)."""
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
    data_id: dict  # what the data is (see data_identity), checked on resume
    device: torch.device
    autocast: object
    ddp: bool
    world: int
    master: bool  # rank 0: the process that evaluates, logs and writes files
    rows: slice  # this process's rows of the global batch
    ckpt_path: str
    metrics_path: str
    probes: list  # callables (model, step) -> dict, merged into every logged row (weight_stats first)
    step: int  # where the run stands: updates done, the next step to take
    tokens: int  # training tokens seen
    loss_sum: torch.Tensor  # training losses summed since the last logged row, on the device (no sync per step)
    n_summed: int  # how many
    history: list  # the logged rows
    ckpt_step: int  # the step of the last checkpoint this run wrote or resumed from (last_checkpoint)
    emb0: torch.Tensor  # E at init, with log_rows (probes.row_probe)
    run_id: str  # the run's name, in its checkpoint and config.json: a run's files are those of the run its ckpt names
    first_bad: torch.Tensor = None  # the first step whose loss was not finite (-1: none), on the device
    t0: float = 0.0  # wall-clock start, and the time and step of the last logged row (tokens/s)
    t_last: float = 0.0
    step_last: int = 0
    lock: object = None  # the out_dir's lock (rundir.claim_out_dir), checked before every write


def setup(c, log, held, probes=()):
    """Processes and device, data, model and optimizer (resumed with c.resume), the run's files, and the lines that
    say what is about to happen: the Run. The out_dir is claimed (its lock appended to `held`) only once the data
    and settings have passed their checks, so a refused run leaves no folder behind."""
    ddp, rank, world, local_rank = setup_processes()
    master = rank == 0
    log = log if master else (lambda *a, **k: None)
    device, dtype, autocast = setup_device(c, local_rank, ddp)
    c = dataclasses.replace(c, dtype=dtype)  # what runs, not 'auto': config.json and ckpt.pt record it
    if ddp and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    if c.batch_size % world:
        raise ValueError(f"batch_size={c.batch_size} must be divisible by the {world} processes")
    c, meta, train_data, val_data, ids, lut = load_data(c, log)
    data_id = data_identity(c, meta, train_data, val_data, ids)
    check_memory(c, device)
    if master and c.out_dir:
        held.append(claim_out_dir(c))
    torch.manual_seed(c.seed)  # the model's init; then the batches' order, from data_seed
    model = GPT(c.model_config()).to(device)
    optimizer = make_optimizer(model, c)  # optim.py
    gen = torch.Generator().manual_seed(c.resolved()["data_seed"])
    state = start_state(c, model, optimizer, gen, data_id, device, log, master)
    if master and c.out_dir:
        write_run_files(c, meta, device, world, state["history"], state["run_id"])
    loss_model = FusedLoss(model) if c.fused_loss else model
    step_model = torch.compile(loss_model) if c.compile else loss_model
    if ddp:
        step_model = torch.nn.parallel.DistributedDataParallel(
            step_model, device_ids=[local_rank] if device.type == "cuda" else None)
    rows = [row_probe(state["emb0"], val_data, c.block_size, device, lut, autocast)] if c.log_rows else []
    out = (lambda name: os.path.join(c.out_dir, name)) if c.out_dir else (lambda name: None)
    share = c.batch_size // world
    run = Run(c, model, loss_model, step_model, optimizer, gen, train_data, val_data, ids, lut, data_id, device,
              autocast, ddp, world, master, slice(rank * share, (rank + 1) * share), out("ckpt.pt"),
              out("metrics.jsonl"), [weight_stats, *rows, *probes], **state)
    log(f"{model.get_num_params() / 1e6:.2f}M non-embedding parameters | head={c.head} n={c.vocab_size} "
        f"d={c.n_embd} sigma={c.sigma:.4g} d*sigma={c.n_embd * c.sigma:.2f} ln(n)={math.log(c.vocab_size):.2f} "
        f"| {meta['dataset']} ({meta['corpus']}) on {device}, {dtype}, {world} process(es) | {c.optimizer}"
        + (f", residual branches start at N(0, {c.residual_std:g}^2)" if c.zero_init_residual and c.residual_std
           else ""))
    if run.step == 0:  # what the step-0 line should show: that comparison is lesson 01's puzzle
        r = meta.get("repeat_fraction", 0.0)
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
    """Write ckpt.pt for the weights after run.step updates. loss_sum (the losses summed since the last row) is
    averaged over the processes first, so that it is the global batch's, as logged."""
    total = run.loss_sum.clone()
    if run.ddp:
        dist.all_reduce(total)
        total /= run.world
    if run.master and run.ckpt_path:
        if run.lock:
            check_still_claimed(run.lock)
        save_checkpoint(run.ckpt_path, run.model, run.optimizer, run.step, run.c, run.gen, run.data_id, run.tokens,
                        total.item(), run.n_summed, emb0=run.emb0, history=run.history, run_id=run.run_id)
    if run.ckpt_path:  # every process: each may be the one that reports a divergence
        run.ckpt_step = run.step


def last_checkpoint(run):
    """What a divergence message says of checkpoints: the last one that exists and was written (or resumed from)
    before the first non-finite value (every checkpoint is written after the checks that cover the steps before it,
    and a resumed one was checked finite), or that there is none."""
    if run.ckpt_path and run.ckpt_step is not None and os.path.exists(run.ckpt_path):
        return f"the last checkpoint before it is kept: {run.ckpt_path}, step {run.ckpt_step}"
    return "no checkpoint was written before it" + ("" if run.ckpt_path else " (out_dir='' writes none)")


def check_finite(run):
    """Stop, naming the step, if a training loss since the last check was not finite (run.first_bad >= 0)."""
    if (bad := run.first_bad.item()) >= 0:
        raise Diverged(f"non-finite loss at step {bad}; stopping ({last_checkpoint(run)})", bad)


@torch.no_grad()
def evaluate(run, step, full=True, dense=False):
    """The eval losses of the current weights, as a metrics row's fields. full: eval_train_loss and val_loss, means
    over eval_iters fixed batches of each split (the same batches every time; val over the whole split with
    eval_full_val). dense: val_subset_loss, over dense_val_windows windows of the val split. A non-finite one stops
    the run."""
    c, model, loss_of = run.c, run.model, run.loss_model
    model.eval()
    out = {}
    if dense:  # a subset of the val split's windows (Config.dense_val_until)
        out["val_subset_loss"] = full_split_loss(loss_of, run.val_data, c.block_size, run.device, run.autocast, run.lut,
                                                 subset=c.dense_val_windows)
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
        raise Diverged(f"non-finite loss at evaluation of step {step}; stopping ({last_checkpoint(run)})", step)
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


def log_row(run, row, lr, grad_norm, emb_grad_norm):
    """Complete `row` with the training loss averaged since the last row (over every process), the step's numbers and
    every probe's, and append it to the history."""
    check_finite(run)
    if run.ddp:  # the logged loss is the global batch's, as in a 1-process run
        dist.all_reduce(run.loss_sum)
        run.loss_sum /= run.world
    now, step = time.time(), run.step
    tokens_per_s = (step + 1 - run.step_last) * run.c.batch_size * run.c.block_size / max(now - run.t_last, 1e-9)
    row.update(step=step, tokens=run.tokens, train_loss=(run.loss_sum / run.n_summed).item(), lr=lr,
               grad_norm=None if grad_norm is None else grad_norm.item(), emb_grad_norm=emb_grad_norm.item(),
               **{k: v for probe in run.probes for k, v in probe(run.model, step).items()},
               tokens_per_s=tokens_per_s, time=now - run.t0)
    run.loss_sum.zero_()
    run.n_summed, run.t_last, run.step_last = 0, now, step + 1
    if run.master:
        append_row(run.history, row, run.metrics_path, run.lock, run.run_id)


def catch_stop_signals():
    """Ctrl-C (SIGINT) and SIGTERM only append to the returned list; the loop checks it between two steps, saves a
    checkpoint and stops. A second one stops at once (KeyboardInterrupt wherever the run is, a long evaluation say;
    the last checkpoint stands). Returns (that list, the previous handlers for restore_signals)."""
    stop, handlers = [], {}

    def on_signal(*_):
        if stop:
            raise KeyboardInterrupt
        stop.append(True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            handlers[sig] = signal.signal(sig, on_signal)
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
    interactive = sys.stdout.isatty() or in_notebook()
    bar = tqdm(total=c.max_iters, initial=step, disable=not (show and interactive), dynamic_ncols=True)
    return bar, (bar.write if not bar.disable else log), show and bar.disable


def show_progress(bar, plain, log, run, row):
    """A logged row on the bar (loss, tokens/s, MFU on a GPU), or as one plain line."""
    postfix = dict(loss=f"{row['train_loss']:.3f}", tok_s=f"{row['tokens_per_s']:,.0f}")
    if run.device.type == "cuda":
        postfix["mfu"] = f"{100 * flops_per_token(run.model) * row['tokens_per_s'] / (PEAK_TFLOPS * 1e12):.1f}%"
    bar.set_postfix(postfix, refresh=False)
    if plain:
        log(f"step {row['step']}/{run.c.max_iters}: loss {row['train_loss']:.4f}, {row['tokens_per_s']:,.0f} tokens/s")


def train(c, progress=True, log=print, probes=()):
    """Train per Config c and return the history: one dict per logged step, with step, tokens, train_loss (mean since
    the last row), lr, grad_norm, emb_grad_norm, probes.weight_stats', with log_rows probes.row_probe's, each of
    `probes`' (callables (model, step) -> dict), tokens_per_s, time; at evaluations val_loss and eval_train_loss, with
    dense_val_until val_subset_loss. Raises Diverged (a TrainingError, with the history so far) on divergence,
    TrainingError on a bad checkpoint or a busy out_dir (locked for the run's life), ValueError on bad settings."""
    held = []  # the out_dir's lock, once setup has claimed it
    try:
        return _train(c, progress, log, held, probes)
    finally:
        for lock in held:
            release_out_dir(lock)


def _train(c, progress, log, held, probes):
    """The loop. Row `step` of the history describes the weights after `step` updates: their eval losses, and the
    training loss and gradient computed with them in iteration `step`."""
    run = setup(c, log, held, probes)
    run.lock = held[0] if held else None
    c, log = run.c, log if run.master else (lambda *a, **k: None)
    start_step = run.step
    # Losses stay on the device between log steps: no host sync per step. A resumed run restarts the sum from the
    # checkpoint: its first row then averages the same steps as the uninterrupted run's.
    run.loss_sum = torch.tensor(run.loss_sum, device=run.device)
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
                    row.update(step=run.step, **evaluate(run, run.step, full, dense))
                    if full:
                        say(f"step {run.step}: train {row['eval_train_loss']:.4f}, val {row['val_loss']:.4f}")
                if full and run.step > start_step:  # (the step a run starts or resumes from is on disk already)
                    checkpoint(run)
            if run.step >= c.max_iters:
                if row:
                    append_row(run.history, row, run.metrics_path, run.lock, run.run_id)
                break
            if stop:
                checkpoint(run)
                say(f"interrupted at step {run.step}" + (f"; checkpoint saved to {run.ckpt_path}" if run.ckpt_path
                                                         else ""))
                raise Stopped
            logging_now = bool(row) or run.step % c.log_interval == 0
            lr, grad_norm, emb_grad_norm = train_step(run, logging_now)
            if logging_now:
                log_row(run, row, lr, grad_norm, emb_grad_norm)
                show_progress(bar, plain, log, run, row)
            run.step += 1
            bar.update(1)
    except Diverged as e:  # hand the rows logged so far to the caller (the metrics.jsonl has them too)
        e.history = run.history
        raise
    finally:
        bar.close()
        restore_signals(handlers)
        if run.ddp and dist.is_initialized():
            dist.destroy_process_group()
    if run.master:
        finish(run, time.time() - run.t0, log)
    return run.history


# ----------------------------------------------------------------------------------------------------
# 3. The end

def finish(run, seconds, log):
    """The final line (the last val loss) and, with sample_tokens, a sample of text from the trained model."""
    c = run.c
    final = [r for r in run.history if r.get("val_loss") is not None][-1]
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


# ----------------------------------------------------------------------------------------------------
# Command line: --key=value over Config





def main(argv, task=None, prog="train.py", doc=__doc__):
    """The command line: a Config from the flags, then `task` with it (train; bench.py passes its benchmark, its name
    and its help). Every problem the user can act on is one line on stderr and a non-zero exit (errors.explain); a bug
    is a traceback."""
    try:
        config = parse_args(argv, doc=doc)
        if config.bench and task is None:
            raise ValueError("--bench times steps instead of training: python bench.py --bench=N (same flags)")
        (task or train)(config)
    except KeyboardInterrupt as e:  # a second Ctrl-C stops wherever the run is: the last checkpoint stands
        if not isinstance(e, Stopped):
            print(f"{prog}: stopped at once by Ctrl-C; the last checkpoint, if any, stands", file=sys.stderr)
        return 130
    except Exception as e:
        line, code = explain(e)
        print(f"{prog}: {line}", file=sys.stderr)
        return code
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the imports are in: Ctrl-C stops a run cleanly
    sys.exit(main(sys.argv[1:]))
