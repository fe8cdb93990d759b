"""
A run's folder, out_dir: the lock that makes it one run's at a time, the files a run writes there (config.json and
metrics.jsonl; ckpt.pt is checkpoint.py's), and where a run starts: fresh, or resumed from its checkpoint with the
metrics rows that came before it (start_state).
"""

import dataclasses
import fcntl
import json
import math
import os
import re
import stat
import tempfile
import uuid

import torch

from checkpoint import load_checkpoint, written_by_a_run
from errors import TrainingError
from files import cut_writes, edited, sealed, set_aside, special, write_file
from machine import environment


ROOT = os.path.dirname(os.path.abspath(__file__))
REPO_FOLDERS = ("research", "lessons", "data", "docs", "tests", ".ci", ".git")  # the repository's own: never an output


def check_out_folder(path, name="out_dir", base=None):
    """The absolute output folder `path` (relative to `base`, default the working folder), or a one-line ValueError
    where writing there would lose or mix something: nothing given, a file (or a path through one), the repository's
    root, or a folder inside its own files (REPO_FOLDERS: the committed runs and lessons live there)."""
    if not path:
        raise ValueError(f"{name} is empty: give a folder of its own (e.g. out/something)")
    if len(os.fsencode(path)) >= 4096:  # PATH_MAX: os.makedirs would recurse past Python's limit before the OS says so
        raise ValueError(f"{name}={path[:60]!r}... is {len(os.fsencode(path))} bytes long, over the 4096 a path may "
                         f"have: give a shorter one")
    full = os.path.realpath(os.path.join(base or os.getcwd(), path))
    if any(len(part.encode()) > 255 for part in full.split(os.sep)):
        raise ValueError(f"{name}={path[:60]!r}... has a folder name over 255 bytes, longer than a disk allows: "
                         f"give a shorter one")
    probe = full
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise ValueError(f"{name}={path!r} is a file, or inside one: not a folder")
    root = checkout_holding(full)
    if root and (full == root or any(full == os.path.join(root, f) or full.startswith(os.path.join(root, f) + os.sep)
                                     for f in REPO_FOLDERS)):
        whose = "the repository's" if root == os.path.realpath(ROOT) else f"the checkout {root}'s"
        raise ValueError(f"{name}={path!r} is inside {whose} own files ({os.path.relpath(full, root)}): give "
                         f"a folder of its own (e.g. out/something)")
    return full


def checkout_holding(folder):
    """The nearest folder at or above `folder` that is a checkout of this project (it holds tiedgpt.py, as every
    version has), or None: this one or another clone, whose committed runs and lessons are never an output either."""
    while True:
        if os.path.isfile(os.path.join(folder, "tiedgpt.py")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


# what a run writes in its out_dir (ckpt.pt.tmp: the temporary name of older versions, still cleared by --overwrite)
RUN_FILES = ("ckpt.pt", "ckpt.pt.tmp", "metrics.jsonl", "config.json")


def claim_out_dir(c):
    """Make out_dir and hold an exclusive lock on it (out_dir/.lock) for the run's life: a second run on the same
    folder is refused instead of overwriting the first's files. Also refuses a fresh run over an earlier run's
    checkpoint (resume or overwrite must say what to do with it) and the source tree itself; with overwrite, the
    earlier run's files are removed now, before the new run could be killed, so that no later --resume can continue
    the old run in the new one's folder. Returns the open lock file (release_out_dir closes it; so does the process
    ending, however it ends)."""
    d = c.out_dir
    check_out_folder(d, "out_dir")
    if os.path.exists(os.path.join(d, "tiedgpt.py")):
        raise ValueError(f"out_dir={d!r} is the source tree; give a folder of its own (default: out/<head>)")
    made = not os.path.exists(d), not os.path.lexists(os.path.join(d, ".lock"))
    if os.path.islink(os.path.join(d, ".lock")):  # the pid written below would go into the link's target
        raise TrainingError(f"{os.path.join(d, '.lock')} is a link: a run writes only files of its own; remove "
                            f"the link, or give another --out_dir")
    try:
        os.makedirs(d, exist_ok=True)
        lock = open_lock(os.path.join(d, ".lock"))
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
    try:
        check_still_claimed(lock)  # taken by this run, not one that replaced .lock (open_lock) as this one opened it
    except TrainingError:
        lock.close()
        raise TrainingError(f"out_dir={d!r} is being claimed by another run right now; wait for it to finish, "
                            f"or give this run another --out_dir") from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    ckpt = os.path.join(d, "ckpt.pt")
    links = [f for f in RUN_FILES if os.path.islink(os.path.join(d, f))]
    if links:  # writing through a link would change a file outside this run's folder
        release_out_dir(lock, refused=True)
        raise TrainingError(f"{os.path.join(d, links[0])} is a link to {os.path.realpath(os.path.join(d, links[0]))}: "
                            f"a run writes only files of its own; remove the link, or give another --out_dir")
    odd = [f for f in RUN_FILES if special(os.path.join(d, f))]
    if odd:  # a FIFO or a device: reading it could wait forever, and it is no run's file
        release_out_dir(lock, refused=True)
        raise TrainingError(f"{os.path.join(d, odd[0])} is not a regular file (a FIFO or a device?): a run's files "
                            f"are its own regular files; move it away, or give another --out_dir")
    foreign = [f for f in ("config.json", "metrics.jsonl") if not_a_runs(os.path.join(d, f))]
    if foreign:  # a file of the user's under a run file's name: --overwrite and --resume would replace it too
        release_out_dir(lock, refused=True)
        raise TrainingError(f"{os.path.join(d, foreign[0])} is not a tiedgpt run's {foreign[0]} (a file of yours, "
                            f"edited, or an older tiedgpt's): a run replaces only files of its own; move it away, or "
                            f"give another --out_dir")
    folders = [f for f in RUN_FILES if os.path.isdir(os.path.join(d, f))]
    if folders:  # (before --overwrite removes anything: a refusal midway would leave the run half deleted)
        release_out_dir(lock, refused=True)
        raise TrainingError(f"{os.path.join(d, folders[0])} is a folder, not a run's file: a run reads and writes "
                            f"only files of its own; move it away, or give another --out_dir")
    earlier = [f for f in ("ckpt.pt", "metrics.jsonl", "config.json") if os.path.exists(os.path.join(d, f))]
    # a checkpoint is judged by its content too: --overwrite deletes only what a run wrote (--resume says more)
    if "ckpt.pt" in earlier and not c.resume and not written_by_a_run(ckpt):
        release_out_dir(lock, refused=True)
        raise TrainingError(f"{ckpt} is not a checkpoint a tiedgpt run wrote (or one damaged since): a run replaces "
                            f"only a run's own files; move it away, or give another --out_dir")
    if earlier and not c.resume and not c.overwrite:  # a fresh run never writes over another run's files
        release_out_dir(lock, refused=True)
        if "ckpt.pt" in earlier:
            raise TrainingError(f"{ckpt} holds an earlier run's checkpoint: --resume=true continues it, "
                                f"--out_dir=NEW starts a new run beside it, --overwrite=true replaces it")
        raise TrainingError(f"{d} holds an earlier run's {' and '.join(earlier)} (no checkpoint to resume): "
                            f"--out_dir=NEW starts a new run beside them, --overwrite=true replaces them")
    if c.overwrite:
        for name in RUN_FILES:
            if name == "ckpt.pt.tmp" and not written_by_a_run(os.path.join(d, name)):
                continue  # an older version's temporary name: cleared only if it is a whole checkpoint
            try:
                os.remove(os.path.join(d, name))
            except FileNotFoundError:
                pass
            except OSError as e:
                release_out_dir(lock)
                raise ValueError(f"--overwrite: can't remove {os.path.join(d, name)}: {e.strerror or e}") from None
    return lock


def not_a_runs(path):
    """True if `path` is a file that no run wrote (a file of the user's, one edited since, or an older tiedgpt's),
    judged by what a run writes there: a config.json holding the run's name and config ({"run": ..., "config": {...},
    "dataset": ...}) under its intact seal (files.sealed); a metrics.jsonl whose every line is a row ({"step": ...,
    with tokens, a loss or the lr}) naming one run, the last one perhaps cut by a kill (a first row so cut, only beside
    a run's config.json). Empty: a run stopped before its first row. A folder is left to the checks that open it."""
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return False
    try:
        with open(path, encoding="utf-8") as f:
            if path.endswith(".json"):
                got = json.load(f)
                return not (isinstance(got, dict) and isinstance(got.get("run"), str) and "sha256" in got
                            and not edited(got) and isinstance(got.get("config"), dict) and "dataset" in got)
            runs = set()
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:  # a run's last row cut by a kill (no newline) starts as every row does, and
                    # follows its run's rows, or (its first) the config.json a run writes first
                    config_json = os.path.join(os.path.dirname(path), "config.json")
                    return line.endswith("\n") or not line.startswith('{"step": ') or not (
                        runs or os.path.isfile(config_json) and not not_a_runs(config_json))
                runs.add(row.get("run") if isinstance(row, dict) else None)
                step = row.get("step") if isinstance(row, dict) else None
                if not (isinstance(step, int) and not isinstance(step, bool) and isinstance(row["run"], str)
                        and {"tokens", "train_loss", "val_loss", "lr"} & set(row)) or len(runs) > 1:
                    return True
            return False
    except (OSError, ValueError, KeyError, RecursionError):  # (ValueError: not JSON, not UTF-8)
        return True  # unreadable, not text, not JSON or nested too deep for a reader: no run wrote it


def run_named(path):
    """The run a config.json names (None: none, one from before config.json named its run, or one edited since its
    run wrote it: its seal, files.edited)."""
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
        named = info.get("run")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return named if isinstance(named, str) and not edited(info) else None


def remove_run_files(folder):
    """Remove a finished run's own files (RUN_FILES and its .lock) from `folder`, and the folder if that empties it;
    anything else there is the user's and stays."""
    for name in (*RUN_FILES, ".lock"):
        try:
            os.remove(os.path.join(folder, name))
        except OSError:
            pass
    try:
        os.rmdir(folder)
    except OSError:
        pass


def open_lock(path):
    """A lock file opened for reading and appending without following a link (O_NOFOLLOW), so a link planted in its
    place can't lead the lock's writes into another file; .path is where it is. A lock holds a run's pid or nothing:
    a file holding anything else is the user's, refused. A lock hard-linked elsewhere (a backup made with cp -al) is
    replaced by a fresh one of this folder's own, once no run holds it, so the pid written into it changes nothing
    else."""
    refusal = f"{path} is not a run's lock (a file holding a pid, or nothing): move it away, or give another folder"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except IsADirectoryError:
        raise TrainingError(refusal) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode) or not re.fullmatch(rb"\d{0,20}\n?", os.pread(fd, 64, 0)):
        os.close(fd)  # (a FIFO or a device is not a lock either)
        raise TrainingError(refusal)
    lock = os.fdopen(fd, "a+")
    lock.path = path
    if os.fstat(lock.fileno()).st_nlink == 1:
        return lock
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # a run holds it: the caller's own flock says so
        return lock
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".lock.", suffix=".tmp")
    os.fchmod(fd, 0o644)
    os.replace(tmp, path)  # the backup keeps the old file; this folder gets its own
    lock.close()
    fresh = os.fdopen(fd, "a+")
    fresh.path = path
    return fresh


def check_still_claimed(lock):
    """Stop, in one line, a run whose out_dir lock was removed or replaced while it ran (someone deleted the .lock
    and another run took the folder): writing on would splice two runs' files."""
    held = os.fstat(lock.fileno())
    try:
        now = os.lstat(lock.path)
    except OSError:
        now = None
    if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
        raise TrainingError(f"{lock.path} was removed or replaced while this run held it: another run may be writing "
                            f"in {os.path.dirname(lock.path)}, so this one stops without writing more (its last "
                            f"checkpoint stands, unless the other run replaced it)")


def release_out_dir(lock, refused=False):
    """Release claim_out_dir's lock. A run refused, or stopped before it wrote any of its files, leaves the folder as
    it found it: the lock file goes if the claim made it, and so does the folder if the claim made it and it is empty."""
    d = os.path.dirname(lock.path)
    made_dir, made_lock = getattr(lock, "made", (False, False))
    try:
        if made_lock and (refused or not any(os.path.exists(os.path.join(d, f)) for f in RUN_FILES)):
            os.remove(lock.path)
            if made_dir and not os.listdir(d):
                os.rmdir(d)
    except OSError:
        pass
    finally:
        lock.close()


def metrics_line(row, run_id):
    """A row as metrics.jsonl holds it: the row, then the run's name ("run"), so that the file says whose it is
    even where no rows come before a checkpoint (start_state)."""
    return json.dumps(row if run_id is None else {**row, "run": run_id}) + "\n"


def write_run_files(c, meta, device, world, history, run_id=None):
    """config.json (the run's name, the resolved config, the dataset, the machine) and metrics.jsonl, rewritten
    whole: a resumed run drops the rows past its checkpoint."""
    info = sealed(dict(run=run_id, config=dataclasses.asdict(c), dataset=meta, environment=environment(device, world)))
    # replaced, not rewritten in place: a hard link to either (a backup made with cp -al, say) keeps its content,
    # and the rows appended later go to this run's own file
    write_file(os.path.join(c.out_dir, "config.json"), lambda f: json.dump(info, f, indent=2))
    write_file(os.path.join(c.out_dir, "metrics.jsonl"), lambda f: f.writelines(metrics_line(r, run_id) for r in history))


def append_row(history, row, path, lock=None, run_id=None):
    """A metrics row: into the history, and (with an out_dir) as one more line of metrics.jsonl (naming run_id),
    once the run's lock is checked to be still its own (check_still_claimed)."""
    history.append(row)
    if lock is not None:
        check_still_claimed(lock)
    if not path:
        return
    try:  # never through a link planted at metrics.jsonl while the run ran
        f = os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644), "a")
    except OSError as e:
        raise TrainingError(f"{path} can't be appended to ({e.strerror}; a link put in its place?): this run stops "
                            f"without writing there (its last checkpoint stands)") from None
    with f:
        if os.fstat(f.fileno()).st_nlink == 1:
            f.write(metrics_line(row, run_id))
            return
    # hard-linked since it was written (a cp -al backup made mid-run): the run goes on in a file of its own
    write_file(path, lambda g: g.writelines(metrics_line(r, run_id) for r in history))


def read_metrics(path, before, runs=None):
    """The rows of a metrics.jsonl (if there is one) before step `before`, each checked: a JSON object with a whole
    step; the run's name each line ends with is taken off (and added to the set `runs`, None for a line with none,
    for every row, past `before` too). A last line without its newline was cut by a kill while being written, after
    the checkpoint (rows are appended after their step's checkpoint): it is dropped like every row past the
    checkpoint. Anything else wrong is one line naming the file and the line."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    out = []
    for i, line in enumerate(lines, 1):
        try:
            r = json.loads(line)
        except (ValueError, RecursionError):  # (RecursionError: nested too deep to read)
            if i == len(lines) and not line.endswith("\n"):
                break
            raise TrainingError(f"--resume: {path} line {i} is not JSON; fix or remove that line") from None
        if not isinstance(r, dict) or not isinstance(r.get("step"), int) or isinstance(r["step"], bool):
            raise TrainingError(f"--resume: {path} line {i} is not a metrics row (a JSON object with a whole step); "
                                f"fix or remove that line")
        run = r.pop("run", None)
        if runs is not None:
            runs.add(run)
        if r["step"] < before:
            out.append(r)
    return out


def start_state(c, model, optimizer, gen, data_id, device, log, master=True):
    """Where a run stands before its first step: dict(step, tokens, loss_sum, n_summed, history, ckpt_step, emb0,
    run_id). run_id names the run: new for a fresh one, the checkpoint's for a resumed one (a new one for a checkpoint
    from before checkpoints kept it).
    Fresh: step 0, and (log_rows) E at init, emb0, what emb_turn measures from. With c.resume: model, optimizer,
    batch generator and RNGs as ckpt.pt left them (checked field by field first: load_checkpoint), the checkpoint's
    step, token count and running loss sum, and the metrics rows before its step (later ones will be redone): the
    checkpoint's own, so a metrics.jsonl that does not hold them (another run's, edited, damaged) is set aside, kept
    whole beside it, by the master process; so is one with a row, or a config.json, that does not name the checkpoint's
    run (at step 0 the rows before it can't tell: there are none), and one holding rows this run won't write again
    (past c.max_iters, or the evaluation of the last step of a run now extended)."""
    # a resumed run takes the checkpoint's emb0; one from before checkpoints kept it is rebuilt here from the seed,
    # which load_checkpoint makes sure is the checkpoint's
    state = dict(step=0, tokens=0, loss_sum=0.0, n_summed=0, history=[], ckpt_step=None, run_id=uuid.uuid4().hex,
                 emb0=model.transformer.wte.weight.detach().clone() if c.log_rows else None)
    # kept: by content a write's leftover can't be told from a file of the user's
    for name, size in cut_writes(c.out_dir, ("ckpt.pt", "config.json", "metrics.jsonl")) if master else ():
        log(f"{os.path.join(c.out_dir, name)} is the temporary file of a write cut short (a kill, a crash): no run "
            f"reads it; delete it to free its {size:,} bytes")
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
    # the rows before the checkpoint are the checkpoint's own (write_run_files rewrites metrics.jsonl from them)
    state.update(step=saved["step"], tokens=saved["tokens"], loss_sum=saved["loss_sum"], n_summed=saved["n_summed"],
                 ckpt_step=saved["step"], run_id=saved["run_id"], history=saved["history"])
    metrics, runs = os.path.join(c.out_dir, "metrics.jsonl"), set()
    try:
        rows = read_metrics(metrics, before=math.inf, runs=runs)
        # rows past the checkpoint are written again by this run, but only up to its max_iters, and a full evaluation
        # only on its grid or at its last step (a run extended past its old last step won't evaluate that one again)
        same = [r for r in rows if r["step"] < state["step"]] == state["history"] and \
            all(r["step"] <= c.max_iters and ("val_loss" not in r or r["step"] % c.eval_interval == 0
                                              or r["step"] == c.max_iters) for r in rows)
    except TrainingError:
        same = False
    # the run owns only a metrics.jsonl whose every row names it (rows past the checkpoint, dropped unread otherwise,
    # may be another run's: at step 0 there are no others) and the config.json naming it (one missing, or from
    # before config.json named its run, is not that run's)
    same = same and runs <= {saved["run_id"]} and run_named(os.path.join(c.out_dir, "config.json")) == saved["run_id"]
    if master and os.path.exists(metrics) and not same:  # it and its config.json are kept, together
        suffix = set_aside(metrics, os.path.join(c.out_dir, "config.json"))
        log(f"{metrics} did not hold the checkpoint's rows before step {state['step']}, or it or its config.json "
            f"names another run (another run's, edited or damaged), or it holds rows this run won't write again "
            f"(past --max_iters={c.max_iters}, or the evaluation of an old last step): kept, with its config.json, "
            f"as *{suffix}; the checkpoint's rows are written instead")
    config_json = os.path.join(c.out_dir, "config.json")
    if master and not os.path.exists(metrics) and os.path.exists(config_json):
        # a run writes the two together: a config.json alone is of some other run (a checkpoint copied in, say)
        suffix = set_aside(config_json)
        log(f"{config_json} had no metrics.jsonl beside it, so it may not be this checkpoint's run's: kept as "
            f"*{suffix}; this run's are written instead")
    log(f"resumed from {ckpt_path} at step {state['step']}")
    return state
