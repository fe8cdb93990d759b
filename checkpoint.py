"""
Checkpoints and the run's folder: how train.py makes sure nothing is lost and nothing foreign runs.

- A checkpoint is data, never code: it holds only tensors and plain Python values (dicts, lists, numbers,
  strings), and it is read with torch.load(weights_only=True), which refuses anything else. So a ckpt.pt from a
  classmate can't run code on your machine (tested with a booby-trapped pickle).
- It is written atomically (a temporary file, then a rename), so a kill or a full disk mid-write keeps the
  previous one; and it is refused, in one line, when it was made for another model, optimizer or dataset.
- An out_dir belongs to one run at a time (a lock), and a fresh run never overwrites an earlier run's checkpoint.
"""

import dataclasses
import os

import torch

from tiedgpt import GPTConfig

MODEL_FIELDS = [f.name for f in dataclasses.fields(GPTConfig)]


class TrainingError(RuntimeError):
    """A problem the user can act on (diverged, bad checkpoint, busy out_dir): the CLI prints it as one line."""


class Diverged(TrainingError):
    """The loss went non-finite at `step`. train() sets `history`: the metrics rows logged before it, so that a
    caller that records runs (lessons/reproduce.py) can keep a diverged run as a result instead of losing it."""

    def __init__(self, message, step):
        super().__init__(message)
        self.step, self.history = step, []


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

