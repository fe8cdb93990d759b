"""
Run records: how a run is stored (one JSON file per run, written by research/reproduce.py) and read back. `logged` is
the one reader of a run's history; every curve, statistic and figure reads a run through it.
"""

import json
import math
import os
import subprocess

import numpy as np

from research import stats

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------------------------------
# Storage: a folder with one JSON file per run (or, for the older committed scales, one JSON file)

def run_id(group, arm, seed):
    return f"{group}|{arm}|seed={seed}"


def file_name(rid):
    return "".join(ch if ch.isalnum() or ch in "=.-_" else "_" for ch in rid.replace("|", "__")) + ".json"


def committed_path(scale):
    """Where the committed runs of a scale live (a folder for d768 and later, one file for the older scales)."""
    folder = os.path.join(HERE, "runs", f"repro_{scale}")
    return folder if os.path.isdir(folder) or scale in ("d768", "optim", "turn", "cause") else folder + ".json"


def _read_json(path):
    """A JSON file's contents, or one line naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        raise ValueError(f"{path} is not valid JSON ({str(e).splitlines()[0][:80]}); move it aside or delete it "
                         f"(a run's record: without it the run is made again)") from None
    except OSError as e:
        raise ValueError(f"{path} can't be read: {e.strerror or e}") from None


def write_atomic(path, obj):
    """Write JSON whole or not at all (a temporary file, then renamed over `path`): a reader, or a run interrupted
    while writing, never sees half a record."""
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


def git_state(cwd=os.path.dirname(HERE)):
    """Where a record was made: the commit checked out in `cwd` and whether tracked files had uncommitted changes
    (None, None outside a git checkout). A pre-registration binds only the runs made at the commit that wrote it."""
    def git(*args):
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True, timeout=5, cwd=cwd).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    commit = git("rev-parse", "HEAD") or None
    return dict(git_commit=commit, git_dirty=bool(git("status", "--porcelain", "--untracked-files=no")) if commit else None)


# What every reader of a run record relies on, field by field.
RECORD_FIELDS = dict(id=str, group=str, seed=int, history=list)
RECORD_OPTIONAL = dict(arm=str, head=str, config=dict, n=int, d=int, corpus=dict, best_val=(int, float),
                       last_val=(int, float), sigma=(int, float), wall_s=(int, float))


def check_record(r, where):
    """Refuse, in one line naming the file and the field, a run record that is not shaped as run_one writes them."""
    def wrong(v, t):
        return not isinstance(v, t) or isinstance(v, bool)
    if not isinstance(r, dict):
        raise ValueError(f"{where} is not a run record: a {type(r).__name__}, not a JSON object")
    for k, t in RECORD_FIELDS.items():
        if wrong(r.get(k), t):
            raise ValueError(f"{where} is not a run record: its {k!r} is "
                             f"{'missing' if k not in r else repr(r[k])[:30]}, not a {t.__name__}")
    for k, t in RECORD_OPTIONAL.items():
        if k in r and r[k] is not None and wrong(r[k], t):
            raise ValueError(f"{where}: its {k!r} is {repr(r[k])[:30]}, of the wrong type")
    arm = r.get("arm", r.get("head"))  # (the earliest records name the arm by its head)
    if arm is not None and r["id"] != run_id(r["group"], arm, r["seed"]):
        raise ValueError(f"{where}: its id {r['id']!r} is not its own group, arm and seed's "
                         f"({run_id(r['group'], arm, r['seed'])!r}): an edited record; move it aside")
    for i, h in enumerate(r["history"]):
        if not isinstance(h, dict) or wrong(h.get("step"), int):
            raise ValueError(f"{where}: its history[{i}] is not a row with a whole 'step'")
        if i and h["step"] <= r["history"][i - 1]["step"]:  # a row twice, or out of order, would weigh wrong
            raise ValueError(f"{where}: its history[{i}] (step {h['step']}) does not come after the row before it")
        bad = [k for k, v in h.items() if k != "step" and v is not None and wrong(v, (int, float))]
        if bad:
            raise ValueError(f"{where}: its history[{i}][{bad[0]!r}] is {repr(h[bad[0]])[:30]}, not a number")


def load_runs(path):
    """The runs stored at `path`: a folder of per-run JSON files, or one JSON file with a 'runs' list. Each is
    checked (check_record): a file of the wrong shape is one line naming it and the field."""
    if os.path.isdir(path):
        runs = []
        for name in sorted(os.listdir(path)):
            if name.endswith(".json") and not name.startswith("."):
                r = _read_json(os.path.join(path, name))
                check_record(r, os.path.join(path, name))
                if file_name(r["id"]) != name:
                    raise ValueError(f"{os.path.join(path, name)} holds run {r['id']!r}, whose file is "
                                     f"{file_name(r['id'])}: a copied or renamed record; move it aside")
                runs.append(r)
        return runs
    if os.path.exists(path):
        data = _read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
            raise ValueError(f"{path} is not a file of runs: a JSON object with a 'runs' list")
        for i, r in enumerate(data["runs"]):
            check_record(r, f"{path} runs[{i}]")
        return data["runs"]
    return []


# ----------------------------------------------------------------------------------------------------
# Reading a run

def logged(run, key):
    """{step: value} of every row of a run's history that logged `key`: the one reader of a run's history."""
    return {h["step"]: h[key] for h in run["history"] if h.get(key) is not None}


def curve(run, key="val_loss"):
    """(steps, values) as arrays, from logged()."""
    rows = logged(run, key)
    return np.array(list(rows), dtype=int), np.array(list(rows.values()), dtype=float)


def val_curve(run):
    """(steps, val losses) at the run's evaluations."""
    return curve(run, "val_loss")


def first_logged(run, key):
    """The first logged value of `key` (None if never logged)."""
    return next(iter(logged(run, key).values()), None)


def last_logged(run, key):
    """The last logged value of `key` (None if never logged)."""
    vals = list(logged(run, key).values())
    return vals[-1] if vals else None


def arm(run):
    """The arm a run belongs to (older files have no 'arm': their arm is the head)."""
    return run.get("arm", run["head"])


def by_arm(runs):
    """{arm: {seed: run}}."""
    out = {}
    for r in runs:
        out.setdefault(arm(r), {})[r["seed"]] = r
    return out


def stack(runs_by_seed, key="val_loss"):
    """(steps, seeds, values[seed, step]) of one arm's runs at the steps every run logged `key`."""
    seeds = sorted(runs_by_seed)
    per = [logged(runs_by_seed[s], key) for s in seeds]
    steps = sorted(set.intersection(*(set(p) for p in per))) if per else []
    return np.array(steps), seeds, np.array([[p[t] for t in steps] for p in per])


# ----------------------------------------------------------------------------------------------------
# Per-run statistics (lower = better)

def mean_over(run, key, lo, hi):
    """Mean of `key` over the logged steps lo <= step <= hi (NaN if none)."""
    vals = [v for t, v in logged(run, key).items() if lo <= t <= hi]
    return float(np.mean(vals)) if vals else math.nan


def early(run):
    """Mean val loss over the evaluations in the first half of training, step 0 excluded (lower = faster)."""
    steps, vals = val_curve(run)
    keep = (steps > 0) & (steps <= steps[-1] / 2)
    return float(vals[keep].mean())


def best(run):
    return float(val_curve(run)[1].min())


def last(run):
    return float(val_curve(run)[1][-1])


START_STEPS = (10, 200)  # 'start' (appendix B): the dense val-subset evaluations over these steps, inclusive


def start(run):
    """Mean val-subset loss over the dense evaluations in START_STEPS (lower = faster at the start)."""
    return mean_over(run, "val_subset_loss", *START_STEPS)


STATS = {"early": early, "best": best, "last": last, "start": start}
STAT_WORDS = {"early": "mean val loss over the first half", "best": "best val loss",
              "last": "val loss at the last step", "start": "mean val-subset loss over steps 10-200"}


def paired(a_runs, b_runs, stat):
    """Per-seed differences stat(A) - stat(B) over the seeds both arms have ({seed: run} dicts)."""
    f = STATS[stat] if isinstance(stat, str) else stat
    seeds = sorted(set(a_runs) & set(b_runs))
    return [f(a_runs[s]) - f(b_runs[s]) for s in seeds]


def gap_curve(a_runs, b_runs, key="val_loss", level=1 - stats.ALPHA):
    """Paired gap A - B at each step both logged `key`: (steps, mean, lo, hi, n seeds); lo/hi the t interval
    (NaN with fewer than 2 seeds)."""
    seeds = sorted(set(a_runs) & set(b_runs))
    if not seeds:
        e = np.array([])
        return e, e, e, e, 0
    sa, _, va = stack({s: a_runs[s] for s in seeds}, key)
    sb, _, vb = stack({s: b_runs[s] for s in seeds}, key)
    steps = np.array(sorted(set(sa.tolist()) & set(sb.tolist())))
    d = va[:, np.isin(sa, steps)] - vb[:, np.isin(sb, steps)]
    ci = [stats.interval(d[:, j], level) if len(seeds) >= 2 else None for j in range(len(steps))]
    lo = np.array([c[0] if c else np.nan for c in ci])
    hi = np.array([c[1] if c else np.nan for c in ci])
    return steps, d.mean(0), lo, hi, len(seeds)


def steps_to_target(run, target):
    """First step at which the linearly interpolated val curve reaches `target`; inf if it never does."""
    steps, vals = val_curve(run)
    keep = np.isfinite(vals)  # a non-finite evaluation (a diverged run) is skipped, never interpolated through
    steps, vals = steps[keep], vals[keep]
    if len(vals) == 0:
        return math.inf
    if vals[0] <= target:
        return float(steps[0])
    for i in range(1, len(steps)):
        if vals[i] <= target:  # the first crossing: vals[i - 1] > target >= vals[i]
            return float(steps[i - 1] + (vals[i - 1] - target) / (vals[i - 1] - vals[i]) * (steps[i] - steps[i - 1]))
    return math.inf


def measurement_noise(a_run, b_run, block=1, keep=None):
    """Standard error of the measured difference last(A) - last(B) that comes from the finite val split, from the
    runs' per-window val losses under the final model (val_windows_last: the same W windows for both;
    stats.window_error). keep: the indices of the windows to use (default all). None when either run has none
    (runs made without --ckpt_dir)."""
    if "val_windows_last" not in a_run or "val_windows_last" not in b_run:
        return None
    a, b = (np.asarray(r["val_windows_last"], float) for r in (a_run, b_run))
    if keep is not None:
        a, b = a[keep], b[keep]
    return stats.window_error(a, b, block)


def logn_gaps_at(folder, step, optimizers):
    """{optimizer: dict(subset=..., whole=..., seeds=[...])}: a campaign's mean logn - ortho at `step` over the seeds
    both arms have, on the dense val subset and (at multiples of 100) on the whole val split ({} without its runs).
    The runs of optimizer o are those of group o (appendix B's; demo.py prints them beside its own)."""
    runs = load_runs(folder) if os.path.isdir(folder) else []
    out = {}
    for opt in optimizers:
        by = by_arm([r for r in runs if r["group"] == opt])
        if not (by.get("logn") and by.get("ortho")):
            continue
        row = dict(seeds=sorted(set(by["logn"]) & set(by["ortho"])))
        for key, name in (("val_subset_loss", "subset"), ("val_loss", "whole")):
            steps, mean, *_ = gap_curve(by["logn"], by["ortho"], key)
            row[name] = float(mean[steps == step][0]) if step in steps else None
        out[opt] = row
    return out
