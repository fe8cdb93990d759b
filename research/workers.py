"""
Train a list of configs in worker processes, each run saved as one JSON record the moment it finishes (demo.py and the
step-size sweep use it). A record holds the config, the val loss on the fixed val windows at every measured step and
the sizes train() logs; a file that is missing, damaged or made with another config is not a finished run, so the
same command re-makes it. Ctrl-C stops every run after its current step; finished runs stay on disk. A worker whose
parent dies (kill -9) stops too, after its current step.
"""

import dataclasses
import hashlib
import json
import math
import multiprocessing
import os
import queue as queue_module
import re
import signal
import threading
import time

import torch
from tqdm.auto import tqdm

from train import train

if multiprocessing.parent_process() is not None:  # a worker process: Ctrl-C is the main process's to handle
    signal.signal(signal.SIGINT, signal.SIG_IGN)

STEP_LINE = re.compile(r"^step (\d+):")  # train() says "step N: train ..., val ..." at each evaluation


def config_key(config):
    """A short hash of a run's whole config: a finished run is reused only by a run of exactly this config."""
    return hashlib.sha256(json.dumps(dataclasses.asdict(config), sort_keys=True).encode()).hexdigest()[:10]


def run_one(config, on_step=lambda step: None, probes=(), keep=()):
    """Train one run in this process and return its record: the config, and per measured step the val loss over
    the fixed val windows, with the embedding's rms and the final norm's mean gain (the two factors of the tied
    head's logit scale g d rms(E), appendix B) where train logged them. on_step(step) follows its progress; probes
    go to train(), and the row fields named in `keep` are kept beside emb_rms."""
    def log(*args, **kw):
        m = STEP_LINE.match(" ".join(map(str, args)))
        if m:
            on_step(int(m.group(1)))

    t0 = time.time()
    history = train(config, progress=False, log=log, probes=probes)
    val = [(r["step"], r["val_subset_loss"]) for r in history if r.get("val_subset_loss") is not None]
    rows = [r for r in history if "emb_rms" in r]
    return dict(optimizer=config.optimizer, arm=config.head, seed=config.seed, config=dataclasses.asdict(config),
                key=config_key(config), steps=[s for s, _ in val], val=[v for _, v in val],
                stat_steps=[r["step"] for r in rows], emb_rms=[r["emb_rms"] for r in rows],
                lnf_gain=[r["lnf_gain"] for r in rows], train_loss=[r["train_loss"] for r in rows],
                **{k: [r[k] for r in rows] for k in keep}, wall_s=time.time() - t0, threads=torch.get_num_threads(),
                finished=time.strftime("%Y-%m-%d %H:%M:%S"), text_sha256=text_sha256(config))


def text_sha256(config):
    """The sha256 of the text config's dataset was prepared from (its meta.json), or None where it is not prepared:
    a finished run is reused only on the text it was trained on (record_of)."""
    from data.prepare import dataset_dir
    try:
        with open(os.path.join(dataset_dir(config.dataset), "meta.json")) as f:
            return json.load(f)["sha256"]
    except (OSError, ValueError, KeyError):
        return None


def measured_steps(config):
    """The steps at which a finished run of `config` has a val loss: every eval_interval steps, and the last."""
    return sorted(set(range(0, config.max_iters + 1, config.eval_interval)) | {config.max_iters})


def curve_problem(rec, steps=None):
    """None if `rec` holds a whole val curve (a list of whole-number steps, `steps` if given, and as many finite
    val losses, and where it diverged, a step from its last to max_iters), else what is wrong with it, in a few words."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    cfg = rec.get("config")
    if isinstance(cfg, dict) and any(rec.get(k) != cfg.get(c) for k, c in (("optimizer", "optimizer"),
                                                                           ("arm", "head"), ("seed", "seed"))):
        return "its optimizer, arm or seed is not its config's"
    s, v = rec.get("steps"), rec.get("val")
    if not (isinstance(s, list) and s and all(isinstance(x, int) and not isinstance(x, bool) for x in s)):
        return "its steps are not a list of whole numbers"
    if steps is not None and s != steps:
        return f"its steps are not {steps[0]}..{steps[-1]}"
    if not (isinstance(v, list) and len(v) == len(s)):
        return "its val losses are not one per step"
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v):
        return "its val losses are not all finite numbers"
    # diverged (errors.Diverged): the step its loss went non-finite, its rows logged before it; at most max_iters (the
    # last evaluation's), and a curve that reaches max_iters did not diverge
    d, last = rec.get("diverged"), (cfg.get("max_iters") if isinstance(cfg, dict) else None)
    if d is not None and not (isinstance(d, int) and not isinstance(d, bool) and s[-1] <= d
                              and (not isinstance(last, int) or d <= last and s[-1] < last)):
        return "its diverged is not a step from where its curve stops to the run's last"
    return None


def record_of(path, config):
    """The JSON record at `path` if it was made with exactly `config`, else None (missing, cut short or another
    config's: the run is made again)."""
    try:
        with open(path) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    now = json.loads(json.dumps(dataclasses.asdict(config)))
    # every field of today's Config equal (a field older records have and Config no longer has is not compared)
    same = isinstance(rec, dict) and isinstance(rec.get("config"), dict) and \
        all(rec["config"].get(k) == v for k, v in now.items())
    # and made on the text there now (records made before runs kept it can't say: taken as they are)
    return rec if same and ("text_sha256" not in rec or rec["text_sha256"] == text_sha256(config)) else None


def finished_run(path, config):
    """The record at `path` if it is a finished run of exactly `config` with a whole, finite val curve, else None (a
    missing, damaged or foreign file is made again)."""
    rec = record_of(path, config)
    return rec if rec is not None and curve_problem(rec, measured_steps(config)) is None else None


def write_record(path, rec):
    with open(path, "w") as f:
        json.dump(rec, f)


def expected_seconds(c, steps, evals, windows, jobs, workers, threads):
    """How long `jobs` runs of config c should take here, and one training step's time: the step timed on this machine
    (after a warm-up step) times the steps, plus the evaluations (a forward pass costs about a third of a training
    step's forward and backward), the runs shared among the workers, plus a few seconds to start them."""
    from fused_loss import FusedLoss
    from tiedgpt import GPT
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        step = FusedLoss(GPT(c.model_config()))
        x = torch.randint(0, c.vocab_size, (c.batch_size, c.block_size))
        times = []
        for _ in range(3):
            t = time.perf_counter()
            step(x, x)[1].backward()
            times.append(time.perf_counter() - t)
    finally:
        torch.set_num_threads(before)
    per_run = min(times[1:]) * (steps + evals * windows / (3 * c.batch_size))
    return math.ceil(jobs / workers) * per_run + 5 * (workers > 1), min(times[1:])


# ----------------------------------------------------------------------------------------------------
# Worker processes: each takes whole runs off a queue, trains them with its threads, saves each as it finishes and
# reports its steps. Ctrl-C reaches every process of the terminal: a worker ignores it (see the top of this file) except
# inside train(), whose own handler stops the run after its current step; the main process then stops the workers.

def _stop_when_orphaned(parent):
    """A worker's watchdog: once its parent process is gone (killed, say), SIGTERM this process, which train() turns
    into a stop after the current step."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


def _worker(tasks, results, threads, run=None, parent=None):
    torch.set_num_threads(threads)
    threading.Thread(target=_stop_when_orphaned, args=(parent or os.getppid(),), daemon=True).start()
    # train's (hidden) tqdm bar would make a cross-process lock that a worker stopped mid-run leaves behind (a warning
    # at exit): a thread lock is all one process needs
    tqdm.set_lock(threading.RLock())
    for path, config in iter(tasks.get, None):
        name = os.path.basename(path)
        try:
            write_record(path, (run or run_one)(config, on_step=lambda step: results.put(("step", name, step))))
        except KeyboardInterrupt:  # train() stopped on Ctrl-C (or SIGTERM) after its current step
            results.put(("stopped", name, None))
            return
        except Exception as e:
            results.put(("failed", name, f"{config.optimizer}, {config.head}, seed {config.seed}: {e}"))
            return
        results.put(("done", name, None))


def run_all(jobs, workers, threads, bar, log=print, run=None):
    """Run the (path, config) jobs with `run` (default run_one), `workers` at a time, each saved to its path as it
    finishes. The bar advances by every step a run reports (without a bar, one line per finished run).
    KeyboardInterrupt (Ctrl-C) propagates, the finished runs being on disk already; RuntimeError if a run fails."""
    total = {os.path.basename(p): c.max_iters for p, c in jobs}
    shown, finished = {}, []

    def advance(name, step):
        step = min(step, total[name])
        bar.update(step - shown.get(name, 0))
        shown[name] = step

    def finish(name):
        advance(name, total[name])
        finished.append(name)
        if bar.disable:
            log(f"{len(finished)} of {len(jobs)} runs done ({name.rsplit('__', 1)[0]})")

    if workers <= 1 or len(jobs) <= 1:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            for path, config in jobs:
                name = os.path.basename(path)
                write_record(path, (run or run_one)(config, on_step=lambda step: advance(name, step)))
                finish(name)
        finally:
            torch.set_num_threads(before)
        return
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per worker: no threads inherited through fork
    tasks, results = ctx.Queue(), ctx.Queue()
    for job in jobs:
        tasks.put(job)
    procs = [ctx.Process(target=_worker, args=(tasks, results, threads, run, os.getpid()), daemon=True)
             for _ in range(min(workers, len(jobs)))]  # (never more than there are runs)
    for p in procs:
        tasks.put(None)  # one "no more runs" per worker
        p.start()
    try:
        while len(finished) < len(jobs):
            try:
                kind, name, info = results.get(timeout=1.0)
            except queue_module.Empty:
                if not any(p.is_alive() for p in procs):
                    raise RuntimeError("the worker processes ended before their runs did") from None
                continue
            if kind == "step":
                advance(name, info)
            elif kind == "done":
                finish(name)
            elif kind == "stopped":
                raise KeyboardInterrupt
            else:
                raise RuntimeError(info)
        for p in procs:  # all runs done: each worker reads its "no more runs" and exits by itself
            p.join(timeout=30)
    finally:  # done, Ctrl-C or a failed run: stop the workers (runs in progress are dropped; finished ones are saved)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
        tasks.cancel_join_thread()  # runs nobody will take may still sit in the pipe: don't wait for them


# ----------------------------------------------------------------------------------------------------
# The machine, as a record of where runs were made says it

def available_cores():
    """The cores this process may use (its affinity where the system says, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def cpu_name():
    """The processor's model name, for records of where a run was timed."""
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def loadavg():
    """The 1-minute load average (None where the platform has none): how busy the machine was."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None
