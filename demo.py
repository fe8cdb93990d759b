"""
The finding, live: does ln(n)/d converge slowest? The optimizer's configuration decides.

    python demo.py                       # the default demo (its measured time: README.md)
    python demo.py --seeds=1,2,3,4,5     # more seeds: a tighter interval, a longer wait
    python demo.py --optimizers=tiger,lamb,adamw
    python demo.py --device=cuda         # on one H100: 23 s (research/runs/demo_h100.json)
    python demo.py --tiny                # seconds: the tests' size; its numbers mean nothing

What it does. The post says the logn head (tied embeddings with sigma = ln(n)/d, so the fresh model's self-logit
is exactly ln n) converges slowest of the fixes. Appendix B found that this holds under the post author's
optimizers, whose step is RELATIVE to each weight's size (Tiger, LAMB), and not under AdamW, whose step is
ABSOLUTE (optim.py says why). Here that comparison is re-made small enough to watch: for each optimizer and
seed, one `logn` run and one `ortho` run (a random rotation after the final norm: no self-logit, embedding at
the usual logit scale), the same seed giving both the same batches. Plotted is their paired gap,

    gap(step) = val loss of logn - val loss of ortho     (same seed, same val windows; > 0: logn is behind)

and at the last step a table answers "Is ln(n)/d slowest?" per optimizer, with the spread over seeds.

The verdict rule, fixed before any demo run: at the reported step (the last one) each seed gives one gap; over
the seeds, the 95% t interval of their mean. Interval above 0: "yes" (logn is behind ortho); below 0: "no"
(logn is ahead); containing 0 (or one seed only): "can't tell". No other rule and no other step is consulted.

The setting (Demo's defaults) is the campaign's (appendix B: 2 layers, heads of 64, vocab = the corpus's n = 11,706
tokens, 8 sequences of 64 tokens a step, 100 warmup steps then a cosine that would end at step 1,200, branches at
N(0, 1e-4^2), float32, weight decay each optimizer's own, the val loss on the same 128 val windows every 10 steps)
at d = 256 instead of 768, for 100 steps (the step where the campaign's numbers are quoted), 5 seeds. What d
changes, and what keeps the campaign's mechanism at d = 256:
  - ortho keeps the campaign's logit scale d * sigma = 15.36 (sigma = 15.36 / d = 0.06; 0.02 at d = 768), logn its
    own d * sigma = ln n = 9.37 at every d. (sigma = 0.02 at d = 256 would give ortho 5.1, below logn's: the opposite
    of the campaign's order.)
  - Tiger's and LAMB's lr stay 3e-3: a relative step does not depend on d. AdamW's is 1e-3 x 768 / d = 3e-3, so that
    its step relative to logn's embedding, lr / sigma = lr d / ln n, is the campaign's 0.08.
How it was chosen, measured on seeds 101-104 (not the default seeds, so the committed run also checks it):
  - d = 128, AdamW at 1e-3 (2 seeds): at step 100 Tiger +0.59, AdamW -0.10; but AdamW hardly grew logn's logit scale
    g d rms(E) (9.4 -> 10.1; the campaign: 9.4 -> 15.8), and ortho started 0.33 nats BEHIND logn (ortho's first loss is
    ~ ln n + d sigma^2 / 2, and d sigma^2 = 15.36^2 / d is 1.8 at d = 128): not the campaign's mechanism.
  - d = 128, AdamW at 6e-3 (2 seeds): the scale grew (9.4 -> 13.3), and AdamW's gap was +0.01, sd 0.09: can't tell.
  - d = 256, AdamW at 3e-3 (4 seeds): Tiger +0.70 (sd 0.05), AdamW -0.09 (sd 0.05), Tiger minus AdamW +0.78 (sd 0.03),
    and the campaign's curves in small: logn's logit scale 9.4 -> 8.6 under Tiger, -> 14.3 under AdamW (the campaign:
    -> 9.0 and -> 15.8); under AdamW logn first behind (+0.15 at step 10; campaign +0.43), then ahead. Chosen.
AdamW's gap at step 100 is small next to its spread (about 2x its sd here, 3x in the campaign; all 8 seeds above and
of the first default run were below 0): "no" needs several seeds. The first full run, seeds 1-4, said "no" with the
interval's upper end at -0.01; the fifth seed was added then, for precision (a choice made after seeing that run).
Tiger's gap is 8-15x its sd, and the flip (Tiger minus AdamW) 7-29x.

Results go to --out (default out/demo/): runs/ (one JSON per finished run, written as it finishes), demo.json
(the settings, every run's curve, the gaps, the verdicts, the wall time, the machine) and demo.png (the figure).
Ctrl-C stops: finished runs stay in runs/, and the same command later reuses every finished run whose config is
the same (--fresh=true re-makes them). On a CPU the runs go to --workers processes of one thread each (default:
2 with 2 or more cores; two one-thread processes side by side beat one two-thread process here, measured).

Lesson 04 imports load_result, figure and verdict_lines, and reads the committed default run, research/runs/demo.json.
"""

import dataclasses
from dataclasses import dataclass, fields
import hashlib
import json
import math
import multiprocessing
import os
import platform
import queue as queue_module
import re
import signal
import sys
import threading
import time

if multiprocessing.parent_process() is not None:  # a worker process (run_all): Ctrl-C is the main process's to handle
    signal.signal(signal.SIGINT, signal.SIG_IGN)

ROOT = os.path.dirname(os.path.abspath(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from machine import in_notebook  # noqa: E402
from tiedgpt import flag  # noqa: E402
from config import Config, convert  # noqa: E402
from config import parse_args as config_parse_args  # noqa: E402
from data.prepare import load_data  # noqa: E402
from errors import TrainingError  # noqa: E402
from machine import setup_device  # noqa: E402
from train import train  # noqa: E402

from research import records  # noqa: E402  (research/records.py: how a run is stored and read)
from research.stats import interval, t_quantile  # noqa: E402  (research/stats.py: the campaigns' t interval)

COMMITTED = os.path.join(ROOT, "research", "runs", "demo.json")  # one full default run, made with this file (lesson 04 reads it)
CAMPAIGN = os.path.join(ROOT, "research", "runs", "repro_optim")  # appendix B's committed runs
OPTIMIZER_NAMES = ("tiger", "lamb", "adamw", "signum")
ARMS = ("logn", "ortho")  # the gap is logn - ortho
RESIDUAL_STD = 1e-4  # the campaign's branch init (train.TIGER_RESIDUAL_STD), for every optimizer alike

@dataclass
class Demo:
    """The demo's settings, each a --key=value flag (train.py's parser; bare --tiny and --fresh mean =true). The run
    settings first (RUN_KEYS: they make a run's config), then how to run them."""
    seeds: str = flag("1,2,3,4,5", "comma-separated seeds (>= 0); each draws init and batch order (logn and ortho "
                                   "of one seed share the batches)")
    optimizers: str = flag("tiger,adamw", "comma-separated: tiger, lamb, adamw")
    steps: int = flag(100, "steps per run; the verdict is read at the last (a multiple of eval_every)")
    n_embd: int = flag(256, "width d (the campaign: 768)")
    n_layer: int = flag(2, "transformer blocks")
    n_head: int = flag(4, "attention heads (heads of 64 at d = 256)")
    batch_size: int = flag(8, "sequences per step")
    block_size: int = flag(64, "tokens per sequence")
    warmup: int = flag(100, "linear warmup steps")
    schedule: int = flag(1200, "the cosine's length (lr_decay_iters): the campaign's lr curve, cut at steps")
    # Tiger's and LAMB's lr are the campaign's (a relative step does not depend on d); AdamW's is the campaign's
    # 1e-3 x 768 / d, so that its step relative to logn's embedding, lr / sigma = lr d / ln n, is the same
    lr_tiger: float = flag(3e-3, "Tiger's peak lr")
    lr_lamb: float = flag(3e-3, "LAMB's peak lr")
    lr_adamw: float = flag(3e-3, "AdamW's peak lr")
    lr_signum: float = flag(3e-3, "Signum's peak lr: its per-entry step (optim.py), AdamW's at the same lr")
    ortho_dsigma: float = flag(15.36, "ortho's d * sigma, the tied head's logit scale (GPT-2's 0.02 x 768)")
    eval_every: int = flag(10, "steps between val measurements")
    val_windows: int = flag(128, "val windows measured (evenly spaced over the val split; the campaign's subset)")
    dataset: str = flag("shakespeare", "shakespeare | pydoc_topics (what data/prepare.py falls back to offline)")
    device: str = flag("auto", "auto (cuda, else mps, else cpu) | cpu | cuda | cuda:N")
    workers: int = flag(0, "processes side by side (0: 2 on a CPU with >= 2 cores, else 1)")
    threads: int = flag(0, "torch threads per process (0: 1 with several workers, else torch's default)")
    out: str = flag("out/demo", "folder for runs/, demo.json, demo.png (relative to the repository root)")
    fresh: bool = flag(False, "true: re-make runs already finished with this config in out/runs/")
    tiny: bool = flag(False, "true: the tests' seconds-long setting (TINY); its numbers mean nothing")

    def __post_init__(self):
        """Refuse impossible settings before any run starts (ValueError, one line)."""
        try:
            seeds = seeds_of(self.seeds)
        except ValueError:
            raise ValueError(f"--seeds expects comma-separated whole numbers, got {self.seeds!r}") from None
        if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
            raise ValueError(f"--seeds needs distinct seeds >= 0, got {self.seeds!r}")
        opts = optimizers_of(self.optimizers)
        if not opts or len(set(opts)) != len(opts) or set(opts) - set(OPTIMIZER_NAMES):
            raise ValueError(f"--optimizers takes distinct names from {', '.join(OPTIMIZER_NAMES)}, "
                             f"got {self.optimizers!r}")
        for k in ("steps", "eval_every", "val_windows", "workers", "threads", "warmup", "schedule", "n_embd", "n_head",
                  "n_layer", "batch_size", "block_size"):
            least = 0 if k in ("workers", "threads", "warmup") else 1
            if getattr(self, k) < least:
                raise ValueError(f"--{k} must be >= {least}, got {getattr(self, k)}")
        if self.steps % self.eval_every:
            raise ValueError(f"--steps ({self.steps}) must be a multiple of --eval_every ({self.eval_every})")
        if not self.ortho_dsigma > 0:
            raise ValueError(f"--ortho_dsigma must be > 0, got {self.ortho_dsigma}")
        for o in opts:
            run_config(self, o, "ortho", seeds[0], self.dataset, "cpu")  # Config's checks (lr > 0, heads divide d)


RUN_KEYS = ("seeds", "optimizers", "steps", "n_embd", "n_layer", "n_head", "batch_size", "block_size", "warmup",
            "schedule", "lr_tiger", "lr_lamb", "lr_adamw", "lr_signum", "ortho_dsigma", "eval_every", "val_windows", "dataset")
TINY = dict(seeds="1,2", steps=4, n_embd=16, n_layer=1, n_head=1, batch_size=2, block_size=16, warmup=2, schedule=8,
            eval_every=2, val_windows=4, workers=1, threads=1, out="out/demo_tiny")


def parse_args(argv):
    """Demo from --key=value flags (config.parse_args); --tiny puts TINY's settings under the flags given."""
    if any(a in ("-h", "--help") for a in argv):
        argv = ["--help"]  # the help, whatever else was given
    argv = [f"{a}=true" if a in ("--tiny", "--fresh") else a for a in argv]
    tiny = [a.partition("=")[2] for a in argv if a.startswith("--tiny=")]
    if tiny and convert(next(f for f in fields(Demo) if f.name == "tiny"), tiny[-1]):
        argv = [f"--{k}={v}" for k, v in TINY.items()] + argv  # a later flag wins
    return config_parse_args(argv, Demo, __doc__)


def seeds_of(text):
    return [int(x) for x in str(text).split(",") if x.strip()]


def optimizers_of(text):
    return [x.strip() for x in text.split(",") if x.strip()]


# ----------------------------------------------------------------------------------------------------
# One run

def run_config(s, opt, arm, seed, dataset, device):
    """train.Config of one run. Every run shares everything but its head (arm), optimizer (and that optimizer's lr
    and default weight decay) and seed. Validation: every eval_every steps the val loss over val_windows fixed val
    windows (train's dense_val_until / val_subset_loss); the 'full' evaluation train does every eval_every steps is
    kept as cheap as it goes (eval_iters=1) and is not used."""
    return Config(dataset=dataset, vocab="corpus", n_layer=s.n_layer, n_embd=s.n_embd, n_head=s.n_head,
                  block_size=s.block_size, batch_size=s.batch_size, head=arm,
                  # ortho at the campaign's logit scale d * sigma; logn sets sigma = ln(n)/d itself
                  emb_std=s.ortho_dsigma / s.n_embd if arm == "ortho" else None,
                  residual_std=RESIDUAL_STD, optimizer=opt, lr=getattr(s, f"lr_{opt}"), warmup_iters=s.warmup,
                  max_iters=s.steps, lr_decay_iters=s.schedule, dtype="float32", device=device,
                  eval_interval=s.eval_every, eval_iters=1, log_interval=s.eval_every,
                  dense_val_until=s.steps, dense_val_windows=s.val_windows, seed=seed, data_seed=None,
                  out_dir="", sample_tokens=0)


def config_key(config):
    """A short hash of a run's whole config: a finished run is reused only by a run of exactly this config."""
    return hashlib.sha256(json.dumps(dataclasses.asdict(config), sort_keys=True).encode()).hexdigest()[:10]


def run_path(runs_dir, config):
    return os.path.join(runs_dir, f"{config.optimizer}__{config.head}__seed={config.seed}__{config_key(config)}.json")


STEP_LINE = re.compile(r"^step (\d+):")  # train() says "step N: train ..., val ..." at each evaluation


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
                finished=time.strftime("%Y-%m-%d %H:%M:%S"))


def finished_run(path, config):
    """The record at `path` if it is a finished run of exactly `config`, else None (a damaged file is re-made)."""
    try:
        with open(path) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return None
    same = isinstance(rec, dict) and rec.get("config") == json.loads(json.dumps(dataclasses.asdict(config)))
    return rec if same and rec.get("steps") and rec["steps"][-1] == config.max_iters else None


# ----------------------------------------------------------------------------------------------------
# Worker processes: each takes whole runs off a queue, trains them with its threads, saves each as it finishes and
# reports its steps. Ctrl-C reaches every process of the terminal: a worker ignores it (see the top of this file) except
# inside train(), whose own handler stops the run after its current step; the main process then stops the workers.

def _worker(tasks, results, threads, run=None):
    torch.set_num_threads(threads)
    # train's (hidden) tqdm bar would make a cross-process lock that a worker stopped mid-run leaves behind (a warning
    # at exit): a thread lock is all one process needs
    tqdm.set_lock(threading.RLock())
    for path, config in iter(tasks.get, None):
        name = os.path.basename(path)
        try:
            records.write_atomic(path, (run or run_one)(config, on_step=lambda step: results.put(("step", name, step))))
        except KeyboardInterrupt:  # train() stopped on Ctrl-C (or SIGTERM) after its current step
            results.put(("stopped", name, None))
            return
        except Exception as e:
            results.put(("failed", name, f"{config.optimizer}, {config.head}, seed {config.seed}: {e}"))
            return
        results.put(("done", name, None))


def run_all(jobs, workers, threads, bar, log=print, run=None):
    """Run the (path, config) jobs with `run` (default run_one), `workers` at a time, each saved to its path as it
    finishes. The bar advances by
    every step a run reports (without a bar, one line per finished run). KeyboardInterrupt (Ctrl-C) propagates, the
    finished runs being on disk already; RuntimeError if a run fails."""
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
            log(f"demo: {len(finished)} of {len(jobs)} runs done ({name.rsplit('__', 1)[0]})")

    if workers <= 1 or len(jobs) <= 1:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            for path, config in jobs:
                name = os.path.basename(path)
                records.write_atomic(path, (run or run_one)(config, on_step=lambda step: advance(name, step)))
                finish(name)
        finally:
            torch.set_num_threads(before)
        return
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter per worker: no threads inherited through fork
    tasks, results = ctx.Queue(), ctx.Queue()
    for job in jobs:
        tasks.put(job)
    procs = [ctx.Process(target=_worker, args=(tasks, results, threads, run), daemon=True) for _ in range(workers)]
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
        for q in (tasks, results):
            q.close()


# ----------------------------------------------------------------------------------------------------
# The result: curves, paired gaps, verdicts

def word(ci):
    """The verdict rule (module docstring): the 95% interval of the mean gap above 0 -> yes, below 0 -> no."""
    if ci is None or ci[0] <= 0 <= ci[1]:
        return "can't tell"
    return "yes" if ci[0] > 0 else "no"


def gaps(runs, opt, seeds):
    """Per seed, logn's val curve minus ortho's (same seed, same steps, same windows) under `opt`."""
    by = {(r["arm"], r["seed"]): r for r in runs if r["optimizer"] == opt}
    out = {}
    for s in seeds:
        a, b = by[("logn", s)], by[("ortho", s)]
        assert a["steps"] == b["steps"], "logn and ortho were measured at different steps"
        out[str(s)] = (np.array(a["val"]) - np.array(b["val"])).tolist()
    return by[("logn", seeds[0])]["steps"], out


def summarise(s, runs, dataset, wall_s, reused, device, workers, threads):
    """The whole result as one JSON-able dict (what demo.json holds)."""
    seeds, opts = seeds_of(s.seeds), optimizers_of(s.optimizers)
    result = dict(settings={k: getattr(s, k) for k in RUN_KEYS}, dataset=dataset, runs=runs, gaps={}, verdicts={})
    for opt in opts:
        steps, per_seed = gaps(runs, opt, seeds)
        g = np.array([per_seed[str(x)] for x in seeds])
        result["gaps"][opt] = dict(steps=steps, per_seed=per_seed, mean=g.mean(0).tolist(),
                                   sd=(g.std(0, ddof=1) if len(seeds) > 1 else np.zeros(len(steps))).tolist())
        last = g[:, -1]
        ci = interval(last, 0.95)
        sd = float(last.std(ddof=1)) if len(last) > 1 else None
        result["verdicts"][opt] = dict(step=steps[-1], mean=float(last.mean()), sd=sd, ci95=ci, n=len(last),
                                       per_seed=last.tolist(), word=word(ci),
                                       effect_over_spread=abs(float(last.mean())) / sd if sd else None)
    # the contrast itself, seed by seed: a relative-step optimizer's gap minus AdamW's (same seed, same data order)
    rel = [o for o in opts if o in ("tiger", "lamb")]  # a relative step against AdamW's absolute one
    if rel and "adamw" in opts:
        d = np.array(result["verdicts"][rel[0]]["per_seed"]) - np.array(result["verdicts"]["adamw"]["per_seed"])
        sd = float(d.std(ddof=1)) if len(d) > 1 else None
        result["flip"] = dict(of=rel[0], minus="adamw", per_seed=d.tolist(), mean=float(d.mean()), sd=sd,
                              ci95=interval(d, 0.95), effect_over_spread=abs(float(d.mean())) / sd if sd else None)
    result["campaign"] = campaign_comparison(s, dataset)
    result["run"] = dict(wall_s=wall_s, runs_reused=reused, runs_total=len(runs), device=device, workers=workers,
                         threads_per_worker=threads, cpu=cpu_name(), cpu_count=os.cpu_count(),
                         cuda_device=torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
                         torch=torch.__version__, python=platform.python_version(), **records.git_state(ROOT),
                         finished=time.strftime("%Y-%m-%d %H:%M:%S"))
    return result


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _loadavg():
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # not on every platform
        return None


# ----------------------------------------------------------------------------------------------------
# The campaign's number at the same step, where the demo's setting is the campaign's

CAMPAIGN_SETTING = dict(n_embd=768, n_layer=2, n_head=12, batch_size=8, block_size=64, warmup=100, schedule=1200,
                        lr_tiger=3e-3, lr_lamb=3e-3, lr_adamw=1e-3, ortho_dsigma=15.36, val_windows=128,
                        dataset="shakespeare")
CAMPAIGN_STEPS = range(0, 201, 10)  # where the campaign measured the same 128 val windows (val_subset_loss)


def campaign_gaps(step, folder=CAMPAIGN):
    """{optimizer: dict(subset=..., whole=..., seeds=[...])}: appendix B's mean logn - ortho at `step` over the seeds
    both arms have, on the dense val subset and (at multiples of 100) on the whole val split. {} if absent."""
    runs = records.load_runs(folder) if os.path.isdir(folder) else []
    out = {}
    for opt in OPTIMIZER_NAMES:
        by = records.by_arm([r for r in runs if r["group"] == opt])
        if not (by.get("logn") and by.get("ortho")):
            continue
        row = dict(seeds=sorted(set(by["logn"]) & set(by["ortho"])))
        for key, name in (("val_subset_loss", "subset"), ("val_loss", "whole")):
            steps, mean, *_ = records.gap_curve(by["logn"], by["ortho"], key)
            row[name] = float(mean[steps == step][0]) if step in steps else None
        out[opt] = row
    return out


def campaign_comparison(s, dataset):
    """What the demo can say about the campaign: the settings that differ from it, and (only if none does and the
    campaign measured the same val windows at the demo's last step) the campaign's gap there."""
    now = {k: getattr(s, k) for k in CAMPAIGN_SETTING if k != "dataset"}
    differs = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in now.items() if v != CAMPAIGN_SETTING[k]]
    if dataset.get("dataset") != "shakespeare":
        differs.append(f"dataset={dataset.get('dataset')}")
    same = not differs and s.steps in CAMPAIGN_STEPS
    return dict(same_setting=same, differs=differs, step=s.steps if same else 100,
                gaps=campaign_gaps(s.steps if same else 100))


# ----------------------------------------------------------------------------------------------------
# What lesson 04 imports

def load_result(path=COMMITTED):
    """A demo result (demo.json) as a dict; ValueError, one line, for a file that is not one."""
    try:
        with open(path) as f:
            result = json.load(f)
    except OSError as e:
        raise ValueError(f"can't read {path}: {e.strerror}") from None
    except ValueError:
        raise ValueError(f"{path} is not JSON") from None
    if not isinstance(result, dict) or not {"settings", "gaps", "verdicts", "runs"} <= set(result):
        raise ValueError(f"{path} is not a demo result (it lacks settings, gaps, verdicts or runs)")
    return result


OPT_COLORS = dict(tiger="tab:orange", lamb="tab:purple", adamw="tab:blue", signum="tab:green")
OPT_NAMES = dict(tiger="Tiger", lamb="LAMB", adamw="AdamW", signum="Signum")


def figure(result):
    """The paired gap logn - ortho over the steps, one colour per optimizer: thin lines are single seeds, the thick
    line their mean, the band its 95% t interval; above 0 logn is behind. Returns the matplotlib Figure."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.6))
    ax.axhline(0, color="black", lw=0.8)
    for opt, g in result["gaps"].items():
        steps, col = np.array(g["steps"]), OPT_COLORS.get(opt, "gray")
        per_seed = np.array(list(g["per_seed"].values()))
        for row in per_seed:
            ax.plot(steps, row, color=col, lw=0.7, alpha=0.45)
        mean, n = per_seed.mean(0), len(per_seed)
        v = result["verdicts"][opt]
        ax.plot(steps, mean, color=col, lw=2.2, label=f"{OPT_NAMES.get(opt, opt)}: {v['mean']:+.2f} at step "
                f"{v['step']} ({n} seeds) -> {v['word']}")
        ax.plot([v["step"]], [v["mean"]], "o", color=col, ms=6)  # where the verdict is read
        if n > 1:
            half = t_quantile(0.975, n - 1) * per_seed.std(0, ddof=1) / math.sqrt(n)
            ax.fill_between(steps, mean - half, mean + half, color=col, alpha=0.15, lw=0)
    st = result["settings"]
    ax.set(xlabel="training step", ylabel="val loss: logn - ortho (nats)",
           title=f"Is ln(n)/d slowest? Above 0: logn is behind ortho (d={st['n_embd']}, {st['n_layer']} layers, "
                 f"{result['dataset'].get('dataset')})")
    ax.legend(loc="best", fontsize=9, title="mean gap (band: 95% interval over seeds)", title_fontsize=8)
    fig.tight_layout()
    return fig


def verdict_lines(result):
    """The answer in plain words: a header, one row per optimizer, the campaign beside it (or why not)."""
    n = len(seeds_of(result["settings"]["seeds"]))
    lines = [f"Is ln(n)/d slowest? logn - ortho, val loss at the last step, over {n} paired seed{'s' * (n > 1)} "
             f"(> 0: logn is behind)"]
    for opt, v in result["verdicts"].items():
        name = OPT_NAMES.get(opt, opt)
        spread = (f"seeds {min(v['per_seed']):+.2f} to {max(v['per_seed']):+.2f}, sd {v['sd']:.2f}, 95% interval "
                  f"{v['ci95'][0]:+.2f} to {v['ci95'][1]:+.2f}") if v["ci95"] else "one seed: no interval"
        if v["word"] == "yes":
            say = f"yes, logn is {v['mean']:.2f} nats behind ortho at step {v['step']}"
        elif v["word"] == "no":
            say = f"no, logn is {-v['mean']:.2f} nats ahead of ortho at step {v['step']}"
        elif v["ci95"] is None:
            say = f"can't tell from one seed (gap {v['mean']:+.2f} at step {v['step']}): no spread to judge it by"
        else:
            say = f"can't tell: the gap {v['mean']:+.2f} at step {v['step']} is within the seeds' noise"
        lines.append(f"  {name + ':':7s}{say} ({spread})")
    flip = result.get("flip")
    if flip and flip["ci95"]:
        lines.append(f"  The optimizer (its configuration) decides: seed by seed, the gap under {OPT_NAMES.get(flip['of'], flip['of'])} minus "
                     f"under AdamW is {flip['mean']:+.2f} nats (sd {flip['sd']:.2f}, 95% interval {flip['ci95'][0]:+.2f} "
                     f"to {flip['ci95'][1]:+.2f})")
    camp = result.get("campaign") or {}
    known = {o: g for o, g in (camp.get("gaps") or {}).items() if o in result["verdicts"]}
    if camp.get("same_setting") and known:
        lines.append(f"  the campaign (appendix B) at step {camp['step']}, same setting and val windows: " + ", ".join(
            f"{OPT_NAMES.get(o, o)} {g['subset']:+.2f}" for o, g in known.items() if g.get("subset") is not None))
    elif known:
        lines.append(f"  the campaign (appendix B, d=768) measured at step {camp['step']}: " + ", ".join(
            f"{OPT_NAMES.get(o, o)} {g['whole']:+.2f}" for o, g in known.items() if g.get("whole") is not None)
            + f" (whole val split); this demo's setting differs ({', '.join(camp['differs'])}), so compare signs, "
              f"not sizes")
    return lines


# ----------------------------------------------------------------------------------------------------
# The demo

def main(argv, log=print):
    """Parse flags, run what is missing, write demo.json and demo.png, print the verdicts. Returns the exit code:
    0 done, 1 a run failed, 2 a bad flag or setting, 130 interrupted (finished runs kept)."""
    t0, load0 = time.time(), _loadavg()
    try:
        s = parse_args(argv)
        device = str(setup_device(Config(device=s.device, out_dir=""))[0])
    except ValueError as e:
        print(f"demo.py: {e}", file=sys.stderr)
        return 2
    out = s.out if os.path.isabs(s.out) else os.path.join(ROOT, s.out)
    runs_dir = os.path.join(out, "runs")
    os.makedirs(runs_dir, exist_ok=True)
    try:  # prepare the data once, here, before any worker needs it
        c, meta = load_data(run_config(s, "adamw", "logn", 0, s.dataset, "cpu"), log=log)[:2]
    except (ValueError, FileNotFoundError) as e:
        print(f"demo.py: {e}", file=sys.stderr)
        return 2
    dataset = dict(dataset=meta["dataset"], sha256=meta.get("sha256"), n=c.vocab_size)
    device_kind = "cuda" if device.startswith("cuda") else device
    workers = s.workers or (2 if device_kind == "cpu" and (os.cpu_count() or 1) >= 2 else 1)
    threads = s.threads or (1 if workers > 1 else torch.get_num_threads())
    configs = [run_config(s, o, a, seed, meta["dataset"], device if device_kind != "cpu" else "cpu")
               for seed in seeds_of(s.seeds) for o in optimizers_of(s.optimizers) for a in ARMS]
    jobs, runs = [], {}
    for config in configs:
        path = run_path(runs_dir, config)
        rec = None if s.fresh else finished_run(path, config)
        if rec is None:
            jobs.append((path, config))
        else:
            runs[path] = rec
    reused = len(runs)
    log(f"demo: {len(configs)} runs ({', '.join(optimizers_of(s.optimizers))} x logn, ortho x seeds {s.seeds}), d={s.n_embd}, "
        f"{s.steps} steps, n={c.vocab_size} ({meta['dataset']}), on {device_kind}"
        + (f" in {workers} processes of 1 thread" if workers > 1 else f" with {threads} thread(s)")
        + (f"; {reused} finished runs reused from {runs_dir}" if reused else ""))
    # the bar redraws one line: right for a terminal or a notebook; a log file gets one line per finished run instead
    interactive = sys.stderr.isatty() or in_notebook()
    bar = tqdm(total=sum(c.max_iters for _, c in jobs), unit="step", desc="demo", dynamic_ncols=True,
               disable=not (jobs and interactive))
    try:
        run_all(jobs, workers, threads, bar, log)
    except KeyboardInterrupt:
        bar.close()
        kept = sum(finished_run(p, c) is not None for p, c in jobs)
        print(f"demo.py: interrupted; {reused + kept} of {len(configs)} runs are finished and kept in {runs_dir} "
              f"(the same command continues from them)", file=sys.stderr)
        return 130
    except (TrainingError, ValueError, RuntimeError) as e:
        bar.close()
        print(f"demo.py: a run failed ({str(e).strip().splitlines()[0][:200]}); finished runs are kept in {runs_dir}",
              file=sys.stderr)
        return 1
    bar.close()
    made = [finished_run(run_path(runs_dir, c), c) for c in configs]
    if any(r is None for r in made):
        print(f"demo.py: a run's file in {runs_dir} is missing or damaged; run again to re-make it", file=sys.stderr)
        return 1
    result = summarise(s, made, dataset, time.time() - t0, reused, device_kind, workers, threads)
    # how busy the machine was (1-minute load average, at the start and the end): a wall time means little without it
    result["run"].update(loadavg_start=load0, loadavg_end=_loadavg())
    records.write_atomic(os.path.join(out, "demo.json"), result)
    import matplotlib
    matplotlib.use("Agg")
    fig = figure(result)
    fig.savefig(os.path.join(out, "demo.png"), dpi=120)
    for line in verdict_lines(result):
        log(line)
    log(f"wall time {result['run']['wall_s']:.0f} s ({reused} of {len(configs)} runs reused); wrote "
        f"{os.path.relpath(os.path.join(out, 'demo.json'), ROOT)} and demo.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
