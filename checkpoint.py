"""
ckpt.pt: what a checkpoint holds, how it is written (atomically: a kill or a full disk keeps the previous one) and read
(as data, never code: torch.load with weights_only=True), and every check it passes before a run resumes from it: its
fields, the model's and the optimizer's state, the data it was trained on (data_identity) and the settings that change
what a run computes (RUN_FIELDS). Every refusal is one line that names the field.
"""

import dataclasses
import hashlib
import json
import math
import os
import re
import warnings
import zipfile

import numpy as np
import torch

import config as settings
from config import MODEL_FIELDS, RESOLVED
from errors import TrainingError
from files import write_file


# Training settings that change what a run computes or logs. A resumed run must have the checkpoint's, compared as
# they act (run_settings: None stands for the value it resolves to), or its metrics would splice two runs. Free to
# change: max_iters (extending a run is resuming it with a larger one; the cosine's length, lr_decay_iters, is
# compared resolved, so a run whose lr_decay_iters was None, i.e. its max_iters, is extended with
# --lr_decay_iters=<its old max_iters>), and what changes where or how fast it runs, not what it computes beyond
# float rounding: device, compile, fused_adamw, fused_loss, sample_tokens, out_dir.
RUN_FIELDS = ("seed", "data_seed", "batch_size", "dtype", "optimizer", "relative", "lr", "min_lr", "warmup_iters",
              "lr_decay_iters", "weight_decay", "beta1", "beta2", "grad_clip", "eval_interval", "eval_iters",
              "eval_full_val", "dense_val_until", "dense_val_windows", "log_interval", "log_rows")




CKPT_KEYS = ("model", "optimizer", "step", "config", "data", "data_rng", "torch_rng", "tokens", "loss_sum", "n_summed")


def save_checkpoint(path, model, optimizer, step, config, gen, data, tokens=0, loss_sum=0.0, n_summed=0, emb0=None,
                    history=None, run_id=None):
    """Write ckpt.pt atomically (files.write_file: a fresh temporary file, then rename). A kill or a full disk
    mid-write leaves the previous checkpoint intact (and the temporary file is removed). `data` identifies the dataset (see data_identity); tokens,
    loss_sum and n_summed let a resumed run log exactly what the uninterrupted run would have; emb0 (log_rows: E
    at init, what emb_turn is measured from) lets it measure from the same reference; history, the metrics rows
    before `step`, makes the checkpoint the one record of its run's rows (a resumed run rewrites metrics.jsonl from
    it, so rows of another run, or none, can't be spliced in); run_id names the run (config.json names it too)."""
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), step=step,
                 config=dataclasses.asdict(config), data=data, data_rng=gen.get_state(),
                 torch_rng=torch.get_rng_state(), tokens=int(tokens), loss_sum=float(loss_sum),
                 n_summed=int(n_summed),
                 cuda_rng=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
    if emb0 is not None:
        state["emb0"] = emb0
    if history is not None:
        state["history"] = [dict(r) for r in history]
    if run_id is not None:
        state["run_id"] = run_id
    try:  # whole or not at all, never through a link (files.write_file); a Ctrl-C mid-write leaves the previous one
        write_file(path, lambda f: torch.save(state, f), "wb")
    except (OSError, RuntimeError) as e:  # torch.save reports a full disk as a RuntimeError
        why = getattr(e, "strerror", None) or str(e).strip().splitlines()[-1][:120]
        raise TrainingError(f"could not write the checkpoint {path}: {why} (the disk may be full; the previous "
                            f"checkpoint, if any, is kept)") from None


def load_checkpoint(path, config, data=None, model=None, optimizer=None):
    """Load ckpt.pt, refusing one that is corrupt, is not a tiedgpt checkpoint (anything but tensors and plain
    values, such as a pickle that would run code), holds the wrong contents (check_contents; with model and
    optimizer also check_model_state and check_optimizer_state), was made for another model, by a run with other
    settings (RUN_FIELDS), or on other data. Every refusal is one line that names the field."""
    if not os.path.exists(path):
        raise TrainingError(f"--resume: no checkpoint at {path}")
    if not os.path.isfile(path):
        raise TrainingError(f"--resume: {path} is not a regular file (a folder, a FIFO or a device?), so no checkpoint")
    try:  # torch.save writes a zip whose every part carries a CRC-32; torch.load does not check them
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (zipfile.BadZipFile, OSError, ValueError):
        bad = None  # not a zip at all: torch.load below says what it is
    if bad is not None:
        raise damaged(path, f"its part {bad} fails its checksum (bytes changed since it was written)")
    try:
        state = load_as_data(path)
    except Exception as e:  # weights_only refuses globals (code) with an UnpicklingError, as it does bad bytes
        code = re.search(r"(?:[Uu]nsupported global:|unsupported) GLOBAL (\S+)", str(e))
        why = (f"it asks to load {code.group(1)}, which is code, not data: refused, nothing was run" if code
               else "corrupt, or not a file torch.save wrote")
        raise TrainingError(f"--resume: {path} is not a tiedgpt checkpoint ({why})") from None
    if not isinstance(state, dict) or any(k not in state for k in CKPT_KEYS) or not isinstance(state["config"], dict):
        missing = [k for k in CKPT_KEYS if not isinstance(state, dict) or k not in state]
        raise TrainingError(f"--resume: {path} is not a tiedgpt checkpoint (made by another program, or by an "
                            f"older tiedgpt: " + (f"missing {missing})" if missing else "its config is not a dict)"))
    if "run_id" not in state or "history" not in state:  # (checkpoints before 2026-11-28 named no run)
        raise TrainingError(f"--resume: {path} names no run (an older tiedgpt wrote it), so the metrics.jsonl and "
                            f"config.json beside it can't be told from another run's: start the run again "
                            f"(--overwrite=true), or resume it with the version that wrote it")
    check_contents(path, state)
    saved = state["config"]
    made_with = saved.get("optimizer", "adamw")  # checkpoints from before optim.py were all AdamW
    if made_with != config.optimizer:  # first: another optimizer also changes a default model field (residual_std)
        raise TrainingError(f"--resume: {path} was trained with optimizer={made_with} (now {config.optimizer}): its "
                            f"saved optimizer state means nothing to {config.optimizer}; resume with "
                            f"--optimizer={made_with}, or start a new run")
    # the data's identity, before the model's fields: with vocab=corpus a changed text also changes vocab_size, and
    # the text is the cause
    diff = [f"{k}={state['data'].get(k)!r} (now {v!r})" for k, v in (data or {}).items()
            if k not in state["data"] or state["data"][k] != v]  # (every checkpoint naming its run has them all)
    if diff:
        raise TrainingError(f"--resume: {path} was trained on other data ({', '.join(diff)}); resuming would "
                            f"silently fine-tune it on this data. Start a new run with another --out_dir instead")
    diff = [f"{k}={saved.get(k)!r} (now {getattr(config, k)!r})" for k in MODEL_FIELDS if saved.get(k) != getattr(config, k)]
    if diff:
        raise TrainingError(f"--resume: {path} was made for another model: {', '.join(diff)}")
    if state["step"] > config.max_iters:  # before the run's settings: a smaller max_iters also moves the schedule
        raise TrainingError(f"--resume: {path} is at step {state['step']}, past --max_iters={config.max_iters}: "
                            f"give --max_iters={state['step']} or more")
    check_run_settings(path, saved, config)
    if model is not None:
        check_model_state(path, state, model)
    if optimizer is not None:
        check_optimizer_state(path, state["optimizer"], optimizer, model)
    return state


def written_by_a_run(path):
    """True if `path` is a file save_checkpoint could have written: a zip laid out as torch.save lays it out (one
    <name>/data.pkl beside <name>/version), whose pickle (protocol 2, torch's) holds the keys only a tiedgpt checkpoint
    has, data_rng and torch_rng, as pickled strings, and loads as --resume loads it: as data (weights_only=True: a
    pickle asking for code is refused, never run), its tensors mapped, not read (mmap). --overwrite deletes only such
    a file; one damaged in its pickle is not one, and stays."""
    if not os.path.isfile(path):  # (a FIFO would make the read below wait forever)
        return False
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
            if len(pickles) != 1 or pickles[0][:-len("data.pkl")] + "version" not in names:
                return False
            text = z.read(pickles[0])
    except Exception:  # not a zip, unreadable, or a part that fails its checksum
        return False
    if not (text.startswith(b"\x80\x02") and all(b"X" + len(k).to_bytes(4, "little") + k in text
                                                  for k in (b"data_rng", b"torch_rng"))):
        return False
    try:
        return isinstance(load_as_data(path, mmap=True), dict)
    except Exception:  # code asked for, or a damaged pickle
        return False


def load_as_data(path, mmap=False):
    """torch.load of tensors and plain values only (weights_only=True: a pickle asking for code raises, never runs),
    onto the CPU; mmap: tensors mapped, not read. Torch's warnings about pickles it then refuses are silenced: the
    caller's refusal is one line."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)


def damaged(path, what):
    """The one line for a checkpoint whose contents are wrong."""
    return TrainingError(f"--resume: {path} is damaged: {what}; resume from another checkpoint, or start a new run "
                         f"(--overwrite=true, or another --out_dir)")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_state(v):
    """A random generator's state: a uint8 tensor of the length torch's CPU generator (Mersenne Twister) uses."""
    return torch.is_tensor(v) and v.dtype == torch.uint8 and v.dim() == 1 and v.numel() == torch.get_rng_state().numel()


def _is_history(rows, step):
    """Metrics rows as save_checkpoint keeps them: JSON-able dicts (metrics.jsonl is written from them) whose whole
    steps strictly increase and come before the checkpoint's."""
    steps = [r.get("step") if isinstance(r, dict) else None for r in rows] if isinstance(rows, list) else [None]
    try:
        json.dumps(rows)
    except (TypeError, ValueError, RecursionError):
        return False
    return _is_int(step) and all(_is_int(s) and 0 <= s < step for s in steps) and \
        all(a < b for a, b in zip(steps, steps[1:]))


def check_contents(path, state):
    """The plain fields of a checkpoint have the types and ranges save_checkpoint writes."""
    checks = [("step", _is_int(state["step"]) and state["step"] >= 0, "a whole number >= 0"),
              ("tokens", _is_int(state["tokens"]) and 0 <= state["tokens"] < 2 ** 63, "a whole number in [0, 2**63)"),
              ("n_summed", _is_int(state["n_summed"]) and state["n_summed"] >= 0, "a whole number >= 0"),
              ("loss_sum", isinstance(state["loss_sum"], (int, float)) and not isinstance(state["loss_sum"], bool)
               and math.isfinite(state["loss_sum"]) and state["loss_sum"] >= 0,
               "a finite number >= 0 (a sum of cross-entropy losses)"),
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
               "None or a list of generator states"),
              ("history", _is_history(state["history"], state["step"]),
               "a list of metrics rows (dicts with whole, increasing steps before the checkpoint's)"),
              ("run_id", isinstance(state["run_id"], str) and state["run_id"] != "", "a run's name")]
    for field, ok, want in checks:
        if not ok:
            v = state[field] if field in state else None
            shown = (f"a {v.dtype} tensor of {v.numel()} values" if torch.is_tensor(v) else repr(v)[:40])
            raise damaged(path, f"its {field} is {shown}, not {want}")


def run_settings(cfg, defaults):
    """RUN_FIELDS of a config dict as they act: the four defaults that stand for another value resolved as
    config.resolved_defaults resolves them; dense_val_windows is moot (None) without dense_val_until. A field an older
    checkpoint lacks has the default it had before it existed."""
    get = lambda k: cfg.get(k, defaults.get(k))  # noqa: E731
    s = {k: get(k) for k in RUN_FIELDS}
    s.update(settings.resolved_defaults(get))
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
    raw = lambda cfg, k: cfg.get(k, defaults.get(k))  # noqa: E731
    # a field given the same value that acts differently only because another field changed (dense_val_windows when
    # dense_val_until turns on or off) is not named: the field that changed is
    diff = [k for k in RUN_FIELDS if a[k] != b[k] and not (k == "dtype" and "auto" in (a[k], b[k]))
            and (k in RESOLVED or raw(saved, k) != raw(now, k))]
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


def data_identity(c, meta, train_data, val_data, ids):
    """What a checkpoint's weights mean depends on the data: the dataset, its source text's and its token files'
    sha256, its token counts, and (vocab='corpus') which GPT-2 tokens the rows of E stand for."""
    ids_sha = None if ids is None else hashlib.sha256(np.asarray(ids, np.int64).tobytes()).hexdigest()
    return dict(dataset=meta["dataset"], source_sha256=meta.get("sha256"), train_sha256=meta.get("train_sha256"),
                val_sha256=meta.get("val_sha256"), train_tokens=int(len(train_data)), val_tokens=int(len(val_data)),
                vocab=c.vocab, vocab_ids_sha256=ids_sha)
