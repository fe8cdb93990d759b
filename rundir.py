"""
A run's folder, out_dir: the lock that keeps it one run's at a time, the files a run writes there (config.json,
metrics.jsonl and ckpt.pt) and where a run starts: fresh at step 0, or resumed from ckpt.pt. What a run promises, with
the test that shows each promise, and what is not guarded: docs/training.md.
"""

import dataclasses
import fcntl
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import torch

import config
from config import MODEL_FIELDS, RESOLVED

ROOT = os.path.dirname(os.path.realpath(__file__))
REPO_FOLDERS = ("research", "lessons", "data", "docs", "tests", ".ci", ".git")  # the repository's own: never an output
# what a run writes in out_dir, and the temporary names it writes them under (write_file): --overwrite removes these
RUN_FILES = tuple(name + tmp for name in ("ckpt.pt", "metrics.jsonl", "config.json") for tmp in ("", ".tmp"))


class TrainingError(RuntimeError):
    """A run that can't start or go on, for a reason the user can act on (a busy folder, a checkpoint of another
    run, a diverged loss): train.py's command line prints it as one line."""


def check_out_folder(path, name="out_dir", base=None):
    """The absolute folder `path` (relative to `base`, default the working folder), or a one-line ValueError if it
    can't hold output: empty, a file, or the repository itself or one of its own folders (REPO_FOLDERS), where the
    committed runs and lessons live."""
    if not path:
        raise ValueError(f"{name} is empty: give a folder of its own (e.g. out/something)")
    full = os.path.realpath(os.path.join(base or os.getcwd(), path))
    if os.path.exists(full) and not os.path.isdir(full):
        raise ValueError(f"{name}={path!r} is a file, not a folder")
    inside = os.path.relpath(full, ROOT)
    if full == ROOT or inside.split(os.sep)[0] in REPO_FOLDERS:
        raise ValueError(f"{name}={path!r} is inside the repository's own files ({inside}): give a folder of its "
                         f"own (e.g. out/something)")
    return full


def claim_out_dir(c):
    """Lock out_dir for this run once it is free for it: empty, or with --overwrite=true holding only a run's files
    (removed now, by name), or with --resume=true holding the checkpoint to continue. The lock is an flock on
    out_dir/.lock, held while the returned file is open, and released when the process ends, however it ends (the
    file stays: removing it could let a third run lock a new file while a second waits for the old one)."""
    d = check_out_folder(c.out_dir)
    there = sorted(set(os.listdir(d)) - {".lock"}) if os.path.isdir(d) else []
    refuse_unless_free(d, there, c)  # before anything is made: a refused run leaves the folder as it was
    try:
        os.makedirs(d, exist_ok=True)
        lock = open(os.path.join(d, ".lock"), "a+")
    except OSError as e:
        raise ValueError(f"out_dir={c.out_dir!r} can't be used: {e.strerror}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        other = lock.read().strip() or "?"
        lock.close()
        raise TrainingError(f"out_dir={c.out_dir!r} is in use by another run (pid {other}); wait for it to finish, "
                            f"or give this run another --out_dir") from None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    if c.overwrite:
        for name in there:
            os.remove(os.path.join(d, name))
    return lock


def refuse_unless_free(d, there, c):
    """One line (TrainingError) if out_dir d, holding the files `there`, is not free for run c."""
    if c.resume and "ckpt.pt" not in there:
        raise TrainingError(f"--resume: no checkpoint at {os.path.join(d, 'ckpt.pt')}")
    others = [f for f in there if f not in RUN_FILES]
    if others and not c.resume:
        raise TrainingError(f"{d} holds files that are no run's ({', '.join(others[:3])}): a run writes into an "
                            f"empty folder or its own run's; give another --out_dir")
    if there and not (c.resume or c.overwrite):
        if "ckpt.pt" in there:
            raise TrainingError(f"{d} holds an earlier run's checkpoint: --resume=true continues it, "
                                f"--overwrite=true replaces it, --out_dir=NEW starts a new run beside it")
        raise TrainingError(f"{d} holds an earlier run's {', '.join(there)}: --overwrite=true replaces them, "
                            f"--out_dir=NEW starts a new run beside them")


# ----------------------------------------------------------------------------------------------------
# The files

def write_file(path, write, mode="w"):
    """Write `path` whole or not at all: write(f) fills path.tmp, which then replaces path (os.replace is atomic).
    A failure, Ctrl-C included, removes path.tmp and leaves path as it was; a kill -9 can leave path.tmp behind."""
    tmp = path + ".tmp"
    try:
        with open(tmp, mode) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def environment(device, world):
    """What config.json records of the machine: torch and Python versions, device, processes, the git commit."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=ROOT).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return dict(torch=torch.__version__, device=str(device), world_size=world, git_commit=commit,
                cuda_device=torch.cuda.get_device_name(device) if device.type == "cuda" else None,
                threads=torch.get_num_threads(), python=sys.version.split()[0])


def write_run_files(c, meta, device, world, history):
    """config.json (the resolved config, the dataset, the machine) and metrics.jsonl, rewritten whole from `history`:
    a resumed run's rows are its checkpoint's, and rows logged after that checkpoint are logged again."""
    info = dict(config=dataclasses.asdict(c), dataset=meta, environment=environment(device, world))
    write_file(os.path.join(c.out_dir, "config.json"), lambda f: json.dump(info, f, indent=2))
    write_file(os.path.join(c.out_dir, "metrics.jsonl"), lambda f: f.writelines(json.dumps(r) + "\n" for r in history))


def append_row(path, row):
    """One more line of metrics.jsonl: written after its step's checkpoint, so a resumed run never misses one."""
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")


# ----------------------------------------------------------------------------------------------------
# The checkpoint: written whole (write_file), read as data (torch.load with weights_only=True: tensors and plain
# values, never code), and resumed only by a run that computes what the checkpointed run would have

# Training settings that change what a run computes or logs: a resumed run must have the checkpoint's (compared as
# they act: None stands for the value it resolves to). Free to change: max_iters (extending a run is resuming it with
# a larger one; the cosine's length is compared resolved, so give --lr_decay_iters=<the old max_iters>), and what
# changes where or how fast it runs, not what it computes beyond float rounding: device, compile, fused_adamw,
# fused_loss, sample_tokens, out_dir.
RUN_FIELDS = ("seed", "data_seed", "batch_size", "dtype", "optimizer", "relative", "lr", "min_lr", "warmup_iters",
              "lr_decay_iters", "weight_decay", "beta1", "beta2", "grad_clip", "eval_interval", "eval_iters",
              "eval_full_val", "dense_val_until", "dense_val_windows", "log_interval")
CKPT_KEYS = ("model", "optimizer", "step", "config", "data", "data_rng", "torch_rng", "cuda_rng", "tokens",
             "loss_sum", "n_summed", "history")


def save_checkpoint(path, state):
    """Write ckpt.pt whole or not at all: a kill or a full disk keeps the previous checkpoint."""
    try:
        write_file(path, lambda f: torch.save(state, f), "wb")
    except (OSError, RuntimeError) as e:  # torch.save reports a full disk as a RuntimeError
        why = getattr(e, "strerror", None) or str(e).strip().splitlines()[-1][:120]
        raise TrainingError(f"could not write the checkpoint {path}: {why} (the disk may be full; the previous "
                            f"checkpoint, if any, is kept)") from None


def run_settings(cfg):
    """RUN_FIELDS of a config dict as they act (resolved_defaults)."""
    return {**{k: cfg[k] for k in RUN_FIELDS}, **config.resolved_defaults(cfg.get)}


def differences(saved, c, data_id):
    """What differs between a checkpoint and this run, as (name, checkpoint's, this run's): the data (data_identity),
    the model's fields and the run's settings (RUN_FIELDS, compared as they act)."""
    now = dataclasses.asdict(c)
    old_run, new_run = run_settings(saved["config"]), run_settings(now)
    pairs = [(k, saved["data"].get(k), v) for k, v in data_id.items()]
    pairs += [(k, saved["config"].get(k), now[k]) for k in MODEL_FIELDS]
    # a default standing for another setting (RESOLVED) is named only where it was given, or stands for max_iters
    # (free to change): where it stands for the seed, lr or the optimizer, that setting is named itself
    pairs += [(k, old_run[k], new_run[k]) for k in RUN_FIELDS if not (
        k in RESOLVED and k != "lr_decay_iters" and saved["config"].get(k) is None and now[k] is None)]
    return [(k, a, b) for k, a, b in pairs if a != b]


def load_checkpoint(path, c, data_id):
    """ckpt.pt as a dict, or one line (TrainingError) saying why this run can't resume it: it is not a checkpoint
    this code wrote (damaged, another program's, or one holding code), it is past max_iters, or its data, model or
    settings differ from this run's (each difference named, with the flags that resume it)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # weights_only refuses a pickle that asks for code as it refuses bad bytes: nothing runs
        raise TrainingError(f"--resume: {path} is not a tiedgpt checkpoint (damaged, not written by torch.save, or "
                            f"holding code, which is never run)") from None
    missing = [k for k in CKPT_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise TrainingError(f"--resume: {path} is not a tiedgpt checkpoint (it lacks {', '.join(missing)})")
    if state["step"] > c.max_iters:
        raise TrainingError(f"--resume: {path} is at step {state['step']}, past --max_iters={c.max_iters}: give "
                            f"--max_iters={state['step']} or more")
    diff = differences(state, c, data_id)
    if diff:
        said = ", ".join(f"{k}={a!r} (now {b!r}" + (f", as {k}=None stands for {RESOLVED[k]})"
                                                     if k in RESOLVED and getattr(c, k) is None else ")")
                         for k, a, b in diff)
        named = {k for k, _, _ in diff}  # --vocab sets vocab_size itself: name the flag the user gives
        flags = " ".join(f"--{k}={a}" for k, a, _ in diff if k in RUN_FIELDS or k in ("dataset", "vocab")
                         or (k in MODEL_FIELDS and not (k == "vocab_size" and "vocab" in named)))
        raise TrainingError(f"--resume: {path} was made with {said}; a resumed run must compute what the checkpointed "
                            f"run would have, so resume with its data and settings" + (f" ({flags})" if flags else "")
                            + ", or start a new run (--overwrite=true, or another --out_dir)")
    return state


def start_state(c, model, optimizer, gen, data_id, log):
    """Where a run stands before its first step: dict(step, tokens, loss_sum, n_summed, history). Fresh: step 0.
    With c.resume: the model, optimizer, batch generator and random states as ckpt.pt left them, its step, token
    count, the training losses summed since its last logged row, and the metrics rows before its step."""
    if not c.resume:
        return dict(step=0, tokens=0, loss_sum=0.0, n_summed=0, history=[])
    path = os.path.join(c.out_dir, "ckpt.pt")
    saved = load_checkpoint(path, c, data_id)
    try:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        gen.set_state(saved["data_rng"])
        torch.set_rng_state(saved["torch_rng"])
        if saved["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["cuda_rng"][:torch.cuda.device_count()])
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as e:
        raise TrainingError(f"--resume: {path} is damaged: {(str(e).strip().splitlines() or ['?'])[0][:200]}") from None
    log(f"resumed from {path} at step {saved['step']}")
    return {k: saved[k] for k in ("step", "tokens", "loss_sum", "n_summed", "history")}


def data_identity(c, meta, train_data, val_data, ids):
    """What a checkpoint's weights mean depends on the data: the dataset, its source text's and token files' sha256,
    its token counts, and (vocab='corpus') which GPT-2 tokens the rows of E stand for."""
    ids_sha = None if ids is None else hashlib.sha256(np.asarray(ids, np.int64).tobytes()).hexdigest()
    return dict(dataset=meta["dataset"], source_sha256=meta["sha256"], train_sha256=meta["train_sha256"],
                val_sha256=meta["val_sha256"], train_tokens=int(len(train_data)), val_tokens=int(len(val_data)),
                vocab=c.vocab, vocab_ids_sha256=ids_sha)
