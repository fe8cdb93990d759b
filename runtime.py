"""
What train.py needs of the machine and the disk, so that the loop in train.py stays the lesson: processes and device,
the run's files, checkpoints and resuming, the out_dir's lock, stop signals, the progress bar and the memory check.
How it makes sure nothing is lost and nothing foreign runs:

- A run's output goes to out_dir: config.json (the resolved config and the environment), metrics.jsonl (one row per
  logged step) and ckpt.pt (model + optimizer + RNG states + step, written at every evaluation and on Ctrl-C or
  SIGTERM). A SIGKILL loses only the steps since the last checkpoint.

- A checkpoint is data, never code: it holds only tensors and plain Python values (dicts, lists, numbers,
  strings), and it is read with torch.load(weights_only=True), which refuses anything else. So a ckpt.pt from a
  classmate can't run code on your machine (tested with a booby-trapped pickle).
- It is written atomically (a temporary file, then a rename), so a kill or a full disk mid-write keeps the
  previous one; and it is refused, in one line, when it was made for another model, optimizer or dataset.
- A resumed run is the run that was checkpointed, or it is refused: every setting that changes what is computed or
  logged (RUN_FIELDS) must be the checkpoint's, so that nothing splices two runs into one metrics file; only
  --max_iters may grow, to extend a run on its schedule.
- What it holds is checked field by field before any of it is used (check_contents, check_model_state,
  check_optimizer_state): a checkpoint that loads but holds the wrong thing is one line naming the field.
- An out_dir belongs to one run at a time (a lock), and a fresh run never overwrites an earlier run's checkpoint;
  --overwrite=true removes it before the new run starts, so a kill can't leave the old run there to resume.
"""

import dataclasses
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
from contextlib import nullcontext

import numpy as np
import torch
import torch.distributed as dist
from tqdm.auto import tqdm

from optim import DEFAULT_WEIGHT_DECAY
from fused_loss import LinearCrossEntropy
from tiedgpt import GPTConfig

MODEL_FIELDS = [f.name for f in dataclasses.fields(GPTConfig)]
# Training settings that change what a run computes or logs. A resumed run must have the checkpoint's, compared as
# they act (run_settings: None stands for the value it resolves to), or its metrics would splice two runs. Free to
# change: max_iters (extending a run is resuming it with a larger one; the cosine's length, lr_decay_iters, is
# compared resolved, so a run whose lr_decay_iters was None, i.e. its max_iters, is extended with
# --lr_decay_iters=<its old max_iters>), and what changes where or how fast it runs, not what it computes beyond
# float rounding: device, compile, fused_adamw, fused_loss, sample_tokens, out_dir.
RUN_FIELDS = ("seed", "data_seed", "batch_size", "dtype", "optimizer", "relative", "lr", "min_lr", "warmup_iters",
              "lr_decay_iters", "weight_decay", "beta1", "beta2", "grad_clip", "eval_interval", "eval_iters",
              "eval_full_val", "dense_val_until", "dense_val_windows", "log_interval", "log_rows")
RESOLVED = dict(data_seed="seed", min_lr="lr/10", lr_decay_iters="max_iters", weight_decay="the optimizer's")


class TrainingError(RuntimeError):
    """A problem the user can act on (diverged, bad checkpoint, busy out_dir): the CLI prints it as one line."""


class Diverged(TrainingError):
    """The loss went non-finite at `step`. train() sets `history`: the metrics rows logged before it, so that a
    caller that records runs (research/reproduce.py) can keep a diverged run as a result instead of losing it."""

    def __init__(self, message, step):
        super().__init__(message)
        self.step, self.history = step, []


CKPT_KEYS = ("model", "optimizer", "step", "config", "data", "data_rng", "torch_rng", "tokens", "loss_sum", "n_summed")


def save_checkpoint(path, model, optimizer, step, config, gen, data, tokens=0, loss_sum=0.0, n_summed=0, emb0=None):
    """Write ckpt.pt atomically: to ckpt.pt.tmp, then rename. A kill or a full disk mid-write leaves the previous
    checkpoint intact (and the .tmp is removed). `data` identifies the dataset (see data_identity); tokens,
    loss_sum and n_summed let a resumed run log exactly what the uninterrupted run would have; emb0 (log_rows: E
    at init, what emb_turn is measured from) lets it measure from the same reference."""
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), step=step,
                 config=dataclasses.asdict(config), data=data, data_rng=gen.get_state(),
                 torch_rng=torch.get_rng_state(), tokens=int(tokens), loss_sum=float(loss_sum),
                 n_summed=int(n_summed),
                 cuda_rng=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
    if emb0 is not None:
        state["emb0"] = emb0
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


def load_checkpoint(path, config, data=None, model=None, optimizer=None):
    """Load ckpt.pt, refusing one that is corrupt, is not a tiedgpt checkpoint (anything but tensors and plain
    values, such as a pickle that would run code), holds the wrong contents (check_contents; with model and
    optimizer also check_model_state and check_optimizer_state), was made for another model, by a run with other
    settings (RUN_FIELDS), or on other data. Every refusal is one line that names the field."""
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
    check_contents(path, state)
    saved = state["config"]
    diff = [f"{k}={saved.get(k)!r} (now {getattr(config, k)!r})" for k in MODEL_FIELDS if saved.get(k) != getattr(config, k)]
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
    check_run_settings(path, saved, config)
    if state["step"] > config.max_iters:
        raise TrainingError(f"--resume: {path} is at step {state['step']}, past --max_iters={config.max_iters}: "
                            f"give --max_iters={state['step']} or more")
    if model is not None:
        check_model_state(path, state, model)
    if optimizer is not None:
        check_optimizer_state(path, state["optimizer"], optimizer, model)
    return state


def damaged(path, what):
    """The one line for a checkpoint whose contents are wrong."""
    return TrainingError(f"--resume: {path} is damaged: {what}; resume from another checkpoint, or start a new run "
                         f"(--overwrite=true, or another --out_dir)")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_state(v):
    """A random generator's state: a uint8 tensor of the length torch's CPU generator (Mersenne Twister) uses."""
    return torch.is_tensor(v) and v.dtype == torch.uint8 and v.dim() == 1 and v.numel() == torch.get_rng_state().numel()


def check_contents(path, state):
    """The plain fields of a checkpoint have the types and ranges save_checkpoint writes."""
    checks = [("step", _is_int(state["step"]) and state["step"] >= 0, "a whole number >= 0"),
              ("tokens", _is_int(state["tokens"]) and state["tokens"] >= 0, "a whole number >= 0"),
              ("n_summed", _is_int(state["n_summed"]) and state["n_summed"] >= 0, "a whole number >= 0"),
              ("loss_sum", isinstance(state["loss_sum"], (int, float)) and not isinstance(state["loss_sum"], bool)
               and math.isfinite(state["loss_sum"]), "a finite number"),
              ("data", isinstance(state["data"], dict), "a dict"),
              ("model", isinstance(state["model"], dict), "a dict of tensors"),
              ("optimizer", isinstance(state["optimizer"], dict) and isinstance(state["optimizer"].get("state"), dict)
               and isinstance(state["optimizer"].get("param_groups"), list)
               and all(isinstance(g, dict) and isinstance(g.get("params"), list)
                       for g in state["optimizer"]["param_groups"]),
               "an optimizer's state dict (state and param_groups)"),
              ("data_rng", _is_state(state["data_rng"]), f"a generator state ({torch.get_rng_state().numel()} bytes)"),
              ("torch_rng", _is_state(state["torch_rng"]), f"a generator state ({torch.get_rng_state().numel()} bytes)"),
              ("cuda_rng", state.get("cuda_rng") is None or (isinstance(state["cuda_rng"], list) and all(
                  torch.is_tensor(t) and t.dtype == torch.uint8 for t in state["cuda_rng"])),
               "None or a list of generator states")]
    for field, ok, want in checks:
        if not ok:
            v = state[field] if field in state else None
            shown = (f"a {v.dtype} tensor of {v.numel()} values" if torch.is_tensor(v) else repr(v)[:40])
            raise damaged(path, f"its {field} is {shown}, not {want}")


def run_settings(cfg, defaults):
    """RUN_FIELDS of a config dict as they act: data_seed None is the seed, min_lr None lr/10, lr_decay_iters None
    max_iters, weight_decay None the optimizer's default (optim.DEFAULT_WEIGHT_DECAY); dense_val_windows is moot
    (None) without dense_val_until. A field an older checkpoint lacks has the default it had before it existed."""
    s = {k: cfg.get(k, defaults.get(k)) for k in RUN_FIELDS}
    if s["data_seed"] is None:
        s["data_seed"] = s["seed"]
    if s["min_lr"] is None and isinstance(s["lr"], (int, float)):
        s["min_lr"] = s["lr"] / 10
    if s["lr_decay_iters"] is None:
        s["lr_decay_iters"] = cfg.get("max_iters", defaults.get("max_iters"))
    if s["weight_decay"] is None:
        s["weight_decay"] = DEFAULT_WEIGHT_DECAY.get(s["optimizer"])
    if not s["dense_val_until"]:
        s["dense_val_windows"] = None
    return s


def check_run_settings(path, saved, config):
    """Refuse, in one line, a resumed run whose RUN_FIELDS differ from the checkpoint's: it names each setting, both
    values, and the flags that resume the checkpointed run."""
    now = dataclasses.asdict(config)
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    a, b = run_settings(saved, defaults), run_settings(now, defaults)
    # dtype: train.setup records the resolved one; 'auto' is a checkpoint from before it did (not known what ran)
    diff = [k for k in RUN_FIELDS if a[k] != b[k] and not (k == "dtype" and "auto" in (a[k], b[k]))]
    if not diff:
        return

    def shown(cfg, res, k):
        raw = cfg.get(k, defaults.get(k))
        return f"{raw!r}" if raw == res[k] or k not in RESOLVED else f"{raw!r}, i.e. {RESOLVED[k]} = {res[k]!r}"
    what = ", ".join(f"{k}={shown(saved, a, k)} (now {shown(now, b, k)})" for k in diff)
    flags = " ".join(f"--{k}={a[k]}" for k in diff if a[k] is not None)
    raise TrainingError(f"--resume: {path} was made with {what}; a resumed run must compute what the checkpointed "
                        f"run would have, so resume with {flags}, or start a new run (--overwrite=true, or another "
                        f"--out_dir)")


def _finite(t):
    return not t.is_floating_point() or bool(torch.isfinite(t).all())


def check_model_state(path, state, model):
    """The checkpoint's weights are this model's: the same names, shapes and kinds, all finite; with log_rows, its
    emb0 is shaped like the embedding."""
    saved, want = state["model"], model.state_dict()
    missing, extra = [k for k in want if k not in saved], [k for k in saved if k not in want]
    if missing or extra:
        raise damaged(path, f"its model lacks {missing[:3]} and has extra {extra[:3]} for this config")
    for k, t in want.items():
        v = saved[k]
        if not torch.is_tensor(v):
            raise damaged(path, f"its model[{k!r}] is {type(v).__name__}, not a tensor")
        if v.shape != t.shape or v.is_floating_point() != t.is_floating_point():
            raise damaged(path, f"its model[{k!r}] is a {v.dtype} tensor of shape {list(v.shape)}, but the config "
                                f"it records makes a {t.dtype} tensor of shape {list(t.shape)}")
        if not _finite(v):
            raise damaged(path, f"its model[{k!r}] holds non-finite values (NaN or inf)")
    emb0 = state.get("emb0")
    E = want["transformer.wte.weight"]
    if emb0 is not None and not (torch.is_tensor(emb0) and emb0.shape == E.shape and emb0.is_floating_point()
                                 and _finite(emb0)):
        raise damaged(path, f"its emb0 (log_rows' reference) is not a finite tensor of shape {list(E.shape)}")


def _state_layout(optimizer):
    """What one step of `optimizer`'s class keeps per parameter, by group and parameter rank: {(group, ndim): {key:
    'param' (a tensor shaped like the parameter) | 'scalar' | 'other'}}. Found by stepping an optimizer of the same
    class and group settings over small stand-ins (2 x 3 and 3 entries), so it holds for any optimizer in optim.py;
    None if the class can't be rebuilt that way."""
    shapes = {1: (3,), 2: (2, 3)}
    try:
        stand_ins, groups = {}, []
        for i, g in enumerate(optimizer.param_groups):
            ps = []
            for nd in sorted({p.dim() for p in g["params"]}):
                p = torch.full(shapes.get(nd, (2,) * nd), 0.5, requires_grad=True)
                p.grad = torch.full_like(p, 0.1)
                stand_ins[(i, nd)] = p
                ps.append(p)
            groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": ps})
        probe = type(optimizer)(groups)
        probe.step()
        return {key: {k: "param" if torch.is_tensor(v) and v.shape == p.shape and v.dim() else
                      "scalar" if not torch.is_tensor(v) or v.numel() == 1 else "other"
                      for k, v in probe.state[p].items()}
                for key, p in stand_ins.items()}
    except Exception:
        return None


def check_optimizer_state(path, saved, optimizer, model=None):
    """The saved optimizer state is this optimizer's: as many groups of as many parameters, and for each parameter
    the state this optimizer keeps (the keys one of its steps writes, each shaped as it shapes them), finite."""
    name = type(optimizer).__name__
    sizes = [len(g["params"]) for g in saved["param_groups"]]
    want = [len(g["params"]) for g in optimizer.param_groups]
    if sizes != want:
        raise damaged(path, f"its optimizer has parameter groups of sizes {sizes}, this {name} {want}")
    names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
    layout = _state_layout(optimizer)
    for i, (sg, g) in enumerate(zip(saved["param_groups"], optimizer.param_groups)):
        for index, p in zip(sg["params"], g["params"]):
            st = saved["state"].get(index)
            if st is None:  # a parameter that has not been stepped yet keeps no state
                continue
            who = f"its optimizer state of {names.get(id(p), f'parameter {index}')}"
            if not isinstance(st, dict):
                raise damaged(path, f"{who} is {type(st).__name__}, not a dict")
            expect = None if layout is None else layout.get((i, p.dim()))
            if expect is not None and set(st) != set(expect):
                raise damaged(path, f"{who} holds {sorted(st)}, but {name} keeps {sorted(expect)} (was it made by "
                                    f"another optimizer?)")
            for k, v in st.items():
                kind = None if expect is None else expect[k]
                if kind == "param" and not (torch.is_tensor(v) and v.shape == p.shape):
                    raise damaged(path, f"{who}[{k!r}] should be shaped like the parameter, {list(p.shape)}")
                if kind == "scalar" and not (isinstance(v, (int, float)) or torch.is_tensor(v) and v.numel() == 1):
                    raise damaged(path, f"{who}[{k!r}] should be one number")
                if (torch.is_tensor(v) and not _finite(v)) or (isinstance(v, float) and not math.isfinite(v)):
                    raise damaged(path, f"{who}[{k!r}] holds non-finite values (NaN or inf)")


RUN_FILES = ("ckpt.pt", "ckpt.pt.tmp", "metrics.jsonl", "config.json")  # what a run writes in its out_dir


def claim_out_dir(c):
    """Make out_dir and hold an exclusive lock on it (out_dir/.lock) for the run's life: a second run on the same
    folder is refused instead of overwriting the first's files. Also refuses a fresh run over an earlier run's
    checkpoint (resume or overwrite must say what to do with it) and the source tree itself; with overwrite, the
    earlier run's files are removed now, before the new run could be killed, so that no later --resume can continue
    the old run in the new one's folder. Returns the open lock file (release_out_dir closes it; so does the process
    ending, however it ends)."""
    import fcntl
    d = c.out_dir
    if os.path.exists(os.path.join(d, "tiedgpt.py")):
        raise ValueError(f"out_dir={d!r} is the source tree; give a folder of its own (default: out/<head>)")
    if os.path.exists(d) and not os.path.isdir(d):
        raise ValueError(f"out_dir={d!r} is a file, not a folder")
    made = not os.path.exists(d), not os.path.exists(os.path.join(d, ".lock"))
    try:
        os.makedirs(d, exist_ok=True)
        lock = open(os.path.join(d, ".lock"), "a+")
    except OSError as e:
        raise ValueError(f"out_dir={d!r} can't be used: {e.strerror or e}") from None
    lock.made = made  # (folder, lock file) this claim made: release_out_dir removes them if the run wrote nothing
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
    if c.overwrite:
        for name in RUN_FILES:
            try:
                os.remove(os.path.join(d, name))
            except FileNotFoundError:
                pass
            except OSError as e:
                release_out_dir(lock)
                raise ValueError(f"--overwrite: can't remove {os.path.join(d, name)}: {e.strerror or e}") from None
    return lock


def release_out_dir(lock):
    """Release claim_out_dir's lock. A run refused before it wrote any of its files leaves the folder as it found
    it: the lock file goes if the claim made it, and so does the folder if the claim made it and it is empty."""
    d = os.path.dirname(lock.name)
    made_dir, made_lock = getattr(lock, "made", (False, False))
    try:
        if made_lock and not any(os.path.exists(os.path.join(d, f)) for f in RUN_FILES):
            os.remove(lock.name)
            if made_dir and not os.listdir(d):
                os.rmdir(d)
    except OSError:
        pass
    finally:
        lock.close()


# ----------------------------------------------------------------------------------------------------
# Processes and device

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
        # torch.cuda.set_device needs an index: plain 'cuda' means this process's GPU (LOCAL_RANK, 0 without torchrun)
        device = f"cuda:{local_rank}" if ddp or c.device == "cuda" else c.device
    elif c.device == "mps":  # Apple silicon. Untested by this project (no such machine): float32, foreach AdamW
        if not mps:
            raise ValueError("device=mps but this machine has no usable Apple GPU (torch.backends.mps); use "
                             "--device=cpu")
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
# The run's files: config.json, metrics.jsonl, and where a run stands (a fresh start, or its checkpoint)

def write_run_files(c, meta, device, world, history):
    """config.json (the resolved config, the dataset, the machine) and metrics.jsonl, rewritten whole: a resumed
    run drops the rows past its checkpoint."""
    with open(os.path.join(c.out_dir, "config.json"), "w") as f:
        json.dump(dict(config=dataclasses.asdict(c), dataset=meta, environment=environment(device, world)), f,
                  indent=2)
    with open(os.path.join(c.out_dir, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in history)


def append_row(history, row, path):
    """A metrics row: into the history, and (with an out_dir) as one more line of metrics.jsonl."""
    history.append(row)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


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


def start_state(c, model, optimizer, gen, data_id, device, log):
    """Where a run stands before its first step: dict(step, tokens, loss_sum, n_summed, history, ckpt_step, emb0).
    Fresh: step 0, and (log_rows) E at init, emb0, what emb_turn measures from. With c.resume: model, optimizer,
    batch generator and RNGs as ckpt.pt left them (checked field by field first: load_checkpoint), the checkpoint's
    step, token count and running loss sum, and the metrics rows before its step (later ones will be redone)."""
    # a resumed run takes the checkpoint's emb0; one from before checkpoints kept it is rebuilt here from the seed,
    # which load_checkpoint makes sure is the checkpoint's
    state = dict(step=0, tokens=0, loss_sum=0.0, n_summed=0, history=[], ckpt_step=None,
                 emb0=model.transformer.wte.weight.detach().clone() if c.log_rows else None)
    if not c.resume:
        return state
    if not c.out_dir:
        raise ValueError("--resume needs an out_dir")
    ckpt_path = os.path.join(c.out_dir, "ckpt.pt")
    saved = load_checkpoint(ckpt_path, c, data_id, model, optimizer)  # checked field by field, settings too
    try:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        gen.set_state(saved["data_rng"])
        torch.set_rng_state(saved["torch_rng"])
        if saved["cuda_rng"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["cuda_rng"][:torch.cuda.device_count()])
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as e:  # what the checks did not foresee
        raise TrainingError(f"--resume: {ckpt_path} can't be loaded into this run: "
                            f"{(str(e).strip().splitlines() or [type(e).__name__])[0][:200]}") from None
    if state["emb0"] is not None and saved.get("emb0") is not None:  # log_rows' reference, as the run measured from
        state["emb0"] = saved["emb0"].to(device)
    # tokens, loss_sum and n_summed: see save_checkpoint
    state.update(step=saved["step"], tokens=saved["tokens"], loss_sum=saved["loss_sum"], n_summed=saved["n_summed"],
                 ckpt_step=saved["step"])
    state["history"] = read_metrics(os.path.join(c.out_dir, "metrics.jsonl"), before=state["step"])
    log(f"resumed from {ckpt_path} at step {state['step']}")
    return state


def checkpoint(run):
    """Write ckpt.pt for the weights after run.step updates. loss_sum (the losses summed since the last row) is
    averaged over the processes first, so that it is the global batch's, as logged."""
    total = run.loss_sum.clone()
    if run.ddp:
        dist.all_reduce(total)
        total /= run.world
    if run.master and run.ckpt_path:
        save_checkpoint(run.ckpt_path, run.model, run.optimizer, run.step, run.c, run.gen, run.data_id, run.tokens,
                        total.item(), run.n_summed, emb0=run.emb0)
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


def explain(e):
    """What the command line says of an exception that ended a run, and its exit code: 2 for settings or files that
    can't be used, 1 for a run that could not go on (TrainingError, a failed write, out of memory). Anything else is
    a bug: raised again, traceback and all."""
    if isinstance(e, (ValueError, FileNotFoundError)):
        return str(e), 2
    if isinstance(e, TrainingError):
        return str(e), 1
    if isinstance(e, OSError):  # a disk that filled up or a folder that vanished while writing metrics or config
        return f"could not write {e.filename or 'a file'}: {e.strerror or e}", 1
    if isinstance(e, RuntimeError) and "memory" in str(e).lower():
        return (f"out of memory ({str(e).strip().splitlines()[0][:100]}); lower batch_size, block_size, n_embd or "
                f"n_layer"), 1
    raise e


def check_device_settings(c):
    """Refuse, in one line, a device or dtype that setup_device can't give."""
    if c.dtype == "float16":
        raise ValueError("dtype float16 is not supported: its narrow range needs loss scaling (a GradScaler), "
                         "which this code leaves out; use bfloat16 (same speed on GPUs that have it) or float32")
    if c.dtype not in ("auto", "float32", "bfloat16"):
        raise ValueError(f"dtype must be auto, float32 or bfloat16, got {c.dtype!r}")
    if c.device not in ("auto", "cpu", "mps") and not c.device.startswith("cuda"):
        raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {c.device!r}")


def data_identity(c, meta, train_data, val_data, ids):
    """What a checkpoint's weights mean depends on the data: the dataset, its source text's sha256, its token
    counts, and (vocab='corpus') which GPT-2 tokens the rows of E stand for."""
    ids_sha = None if ids is None else hashlib.sha256(np.asarray(ids, np.int64).tobytes()).hexdigest()
    return dict(dataset=meta["dataset"], source_sha256=meta.get("sha256"), train_tokens=int(len(train_data)),
                val_tokens=int(len(val_data)), vocab=c.vocab, vocab_ids_sha256=ids_sha)




# ----------------------------------------------------------------------------------------------------
# Stop signals, the progress bar and the memory check: how a run behaves on a machine (train.py calls them)

PEAK_TFLOPS = 790.0  # measured bf16 dense matmul peak of an H100/H200; MFU on a GPU is reported against it


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


def in_notebook():
    """True when IPython is running a shell here (a notebook). Merely imported, as a test run that executed
    notebooks leaves it, it is not one."""
    ipython = sys.modules.get("IPython")
    return ipython is not None and ipython.get_ipython() is not None


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


def estimate_memory(c):
    """Rough bytes a training step needs: 16 per parameter (weight, gradient, AdamW's two moments, fp32), the
    activations kept for backward (about 34 d + 5 T n_head floats per token per layer), and the output head's
    buffer (the fused path's chunk, or the textbook path's logits, their softmax and gradient)."""
    d, n, L, T = c.n_embd, c.vocab_size, c.n_layer, c.block_size
    params = n * d * (1 if c.head_spec.tied else 2) + L * 12 * d * d + 2 * d * d
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
        raise ValueError(f"this run needs about {need / 2 ** 30:.1f} GiB but only {have / 2 ** 30:.1f} GiB of memory "
                         f"is available; lower n_embd, n_layer, batch_size or block_size (or use --vocab=corpus)")


def flops_per_token(model):
    """Training FLOPs per token, PaLM-style: 6 per weight that multiplies (the head counts even when tied;
    the lookup does not) plus attention's 12 L T d."""
    c = model.config
    head = c.vocab_size * c.n_embd if model.tied else 0  # untied: lm_head is in the non-embedding count
    return 6 * (model.get_num_params(non_embedding=True) + head) + 12 * c.n_layer * c.block_size * c.n_embd
