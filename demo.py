"""
The finding, live: does ln(n)/d converge slowest? logn against ortho under Tiger and AdamW, seed by seed.

    python demo.py --quick                      # the classroom run: 4 seeds, about 4.5 minutes on 2 cores
    python demo.py                              # the committed run (research/runs/demo.json): 5 seeds, 100 steps
    python demo.py --optimizers=adamw --lr_adamw=1e-4     # AdamW at a small step (the step-size sweep)
    python demo.py --tiny                       # seconds: the tests' size; its numbers mean nothing

For each optimizer and seed it trains one `logn` run (tied, sigma = ln(n)/d) and one `ortho` run (a trainable matrix
after the final norm that starts as a rotation), the same seed giving both the same batches, and takes their gap

    gap(step) = val loss of logn - val loss of ortho        (> 0: logn is behind)

The verdict rule, fixed before any demo run: each seed's gap at the last step (with --verdict_evals=K, averaged
over the last K evaluations: the quick run's K = 3, research/preregistrations/quick_demo.md); the 95% t interval of
their mean above 0 "yes" (logn is behind), below 0 "no", containing 0 "can't tell". The setting is appendix B's at
d = 256; docs/demo.md says how it was chosen. Results go to --out (default out/demo/): runs/ (one JSON per finished
run: the same command reuses them, so Ctrl-C loses nothing finished), demo.json and demo.png (the curves and the gap).
"""

import json
import os
import platform
import sys
import time
from dataclasses import dataclass, fields

import numpy as np
import torch
from tqdm.auto import tqdm

from config import Config, convert
from config import parse_args as config_parse_args
from data.prepare import load_data
from research import records
from research.appendix_b import campaign_comparison, campaign_lines
from research.figures import OPT_NAMES
from research.figures import demo_figure as figure  # lesson 04 draws the result as demo.figure(result)
from research.stats import interval
from research.workers import (available_cores, config_key, cpu_name, curve_problem, expected_seconds, finished_run,
                              loadavg, measured_steps, run_all)
from rundir import TrainingError, check_out_folder
from tiedgpt import flag
from train import in_notebook, setup_device

ROOT = os.path.dirname(os.path.abspath(__file__))
COMMITTED = os.path.join(ROOT, "research", "runs", "demo.json")  # one full default run (lesson 04 reads it)
OPTIMIZER_NAMES = ("tiger", "lamb", "adamw", "signum")
ARMS = ("logn", "ortho")  # the gap is logn - ortho
RESIDUAL_STD = 1e-4  # the campaign's branch init (optim.TIGER_RESIDUAL_STD), for every optimizer alike


@dataclass
class Demo:
    """The demo's settings, each a --key=value flag (config.py's parser; bare --quick, --tiny and --fresh mean =true).
    The run settings first (RUN_KEYS: they make a run's config), then how to run them."""
    seeds: str = flag("1,2,3,4,5", "comma-separated seeds (>= 0); each draws init and batch order (logn and ortho "
                                   "of one seed share the batches)")
    optimizers: str = flag("tiger,adamw", "comma-separated: tiger, lamb, adamw, signum")
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
    verdict_evals: int = flag(1, "the verdict reads each seed's gap averaged over its last K measurements (1: the last "
                                 "step's)")
    val_windows: int = flag(128, "val windows measured (evenly spaced over the val split; the campaign's subset)")
    dataset: str = flag("shakespeare", "shakespeare | pydoc_topics (what data/prepare.py falls back to offline)")
    device: str = flag("auto", "auto (cuda, else mps, else cpu) | cpu | cuda | cuda:N")
    workers: int = flag(0, "processes side by side (0: on a CPU one per core available, at most one per run)")
    threads: int = flag(0, "torch threads per process (0: 1 with several workers, else torch's default), <= cores")
    out: str = flag("out/demo", "folder for runs/, demo.json, demo.png (relative to the repository root)")
    fresh: bool = flag(False, "true: re-make runs already finished with this config in out/runs/")
    quick: bool = flag(False, "true: the classroom run (QUICK: 4 seeds, 100 steps, about 4.5 minutes on 2 cores)")
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
                  "n_layer", "batch_size", "block_size", "verdict_evals"):
            least = 0 if k in ("workers", "threads", "warmup") else 1
            if getattr(self, k) < least:
                raise ValueError(f"--{k} must be >= {least}, got {getattr(self, k)}")
        if self.steps % self.eval_every:
            raise ValueError(f"--steps ({self.steps}) must be a multiple of --eval_every ({self.eval_every})")
        if not self.ortho_dsigma > 0:
            raise ValueError(f"--ortho_dsigma must be > 0, got {self.ortho_dsigma}")
        if self.dataset not in ("shakespeare", "pydoc_topics"):
            raise ValueError(f"--dataset must be shakespeare or pydoc_topics, got {self.dataset!r} (the demo's runs "
                             "are the campaign's, on Tiny Shakespeare; pydoc_topics is its offline stand-in)")
        for o in opts:
            run_config(self, o, "ortho", seeds[0], self.dataset, "cpu")  # Config's checks (lr > 0, heads divide d)


RUN_KEYS = ("seeds", "optimizers", "steps", "n_embd", "n_layer", "n_head", "batch_size", "block_size", "warmup",
            "schedule", "lr_tiger", "lr_lamb", "lr_adamw", "lr_signum", "ortho_dsigma", "eval_every", "val_windows",
            "dataset", "verdict_evals")
# The classroom run: 4 seeds, 64 val windows, each seed's gap averaged over steps 80-100, fixed before its test on ten
# fresh seed sets (research/preregistrations/quick_demo.md; docs/demo.md says what it found)
QUICK = dict(seeds="1,2,3,4", val_windows=64, verdict_evals=3, out="out/demo_quick")
TINY = dict(seeds="1,2", steps=4, n_embd=16, n_layer=1, n_head=1, batch_size=2, block_size=16, warmup=2, schedule=8,
            eval_every=2, val_windows=4, workers=1, threads=1, out="out/demo_tiny")


def parse_args(argv):
    """Demo from --key=value flags (config.parse_args); --quick and --tiny put their presets under the flags given."""
    if any(a in ("-h", "--help") for a in argv):
        argv = ["--help"]  # the help, whatever else was given
    argv = [f"{a}=true" if a in ("--quick", "--tiny", "--fresh") else a for a in argv]
    presets = []
    for name, preset in (("quick", QUICK), ("tiny", TINY)):
        given = [a.partition("=")[2] for a in argv if a.startswith(f"--{name}=")]
        if given and convert(next(f for f in fields(Demo) if f.name == name), given[-1]):
            argv, presets = [f"--{k}={v}" for k, v in preset.items()] + argv, presets + [name]  # a later flag wins
    if len(presets) > 1:  # merged, they'd make a setting neither means (tiny's schedule over quick's steps)
        raise ValueError("--quick and --tiny are two presets: give one")
    return config_parse_args(argv, Demo, __doc__)


def seeds_of(text):
    return [int(x) for x in str(text).split(",") if x.strip()]


def optimizers_of(text):
    return [x.strip() for x in text.split(",") if x.strip()]


# ----------------------------------------------------------------------------------------------------
# The runs

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


def run_path(runs_dir, config):
    return os.path.join(runs_dir, f"{config.optimizer}__{config.head}__seed={config.seed}__{config_key(config)}.json")


# ----------------------------------------------------------------------------------------------------
# The answer: paired gaps and the verdicts, computed from the runs' val curves (and again whenever a result is read)

def word(ci):
    """The verdict rule (module docstring): the 95% interval of the mean gap above 0 -> yes, below 0 -> no."""
    if ci is None or ci[0] <= 0 <= ci[1]:
        return "can't tell"
    return "yes" if ci[0] > 0 else "no"


def spread(values):
    """The mean of per-seed values with its sd, 95% t interval and |mean| / sd (None where one seed has no spread)."""
    v = np.asarray(values, float)
    sd = float(v.std(ddof=1)) if len(v) > 1 else None
    return dict(mean=float(v.mean()), sd=sd, ci95=interval(v, 0.95), n=len(v), per_seed=v.tolist(),
                effect_over_spread=abs(float(v.mean())) / sd if sd else None)


def answer(runs, seeds, opts, k=1):
    """(gaps, verdicts, flip) from the runs: per optimizer and seed logn's val curve minus ortho's (same seed, same
    steps, same windows), the verdict on each seed's gap averaged over the last k measured steps, and a relative
    step's gap minus AdamW's, seed by seed."""
    by = {(r["optimizer"], r["arm"], r["seed"]): r for r in runs}
    gaps, verdicts = {}, {}
    for opt in opts:
        pairs = [(by[(opt, "logn", s)], by[(opt, "ortho", s)]) for s in seeds]
        steps = pairs[0][0]["steps"]
        if any(a["steps"] != steps or b["steps"] != steps for a, b in pairs):
            raise ValueError(f"{opt}'s logn and ortho runs were measured at different steps")
        g = np.array([np.array(a["val"]) - np.array(b["val"]) for a, b in pairs])
        gaps[opt] = dict(steps=steps, per_seed={str(s): row.tolist() for s, row in zip(seeds, g)},
                         mean=g.mean(0).tolist(), sd=(g.std(0, ddof=1) if len(seeds) > 1 else 0 * g[0]).tolist())
        verdicts[opt] = dict(step=steps[-1], steps_read=steps[-k:], **spread(g[:, -k:].mean(1)))
        verdicts[opt]["word"] = word(verdicts[opt]["ci95"])
    relative = [o for o in opts if o in ("tiger", "lamb")]
    flip = None
    if relative and "adamw" in opts:
        d = np.array(verdicts[relative[0]]["per_seed"]) - np.array(verdicts["adamw"]["per_seed"])
        flip = dict(of=relative[0], minus="adamw", **spread(d))
    return gaps, verdicts, flip


def summarise(s, runs, dataset, wall_s, reused, device, workers, threads):
    """The whole result as one JSON-able dict (what demo.json holds)."""
    gaps, verdicts, flip = answer(runs, seeds_of(s.seeds), optimizers_of(s.optimizers), s.verdict_evals)
    result = dict(settings={k: getattr(s, k) for k in RUN_KEYS}, dataset=dataset, runs=runs, gaps=gaps,
                  verdicts=verdicts, **({"flip": flip} if flip else {}))
    result["campaign"] = campaign_comparison({k: getattr(s, k) for k in RUN_KEYS}, dataset)
    result["run"] = dict(wall_s=wall_s, runs_reused=reused, runs_total=len(runs), device=device, workers=workers,
                         threads_per_worker=threads, cpu=cpu_name(), cpu_count=os.cpu_count(),
                         cuda_device=torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
                         torch=torch.__version__, python=platform.python_version(), **records.git_state(ROOT),
                         finished=time.strftime("%Y-%m-%d %H:%M:%S"))
    return result


# ----------------------------------------------------------------------------------------------------
# What lesson 04 imports: a result read back (and checked), its figure and its verdicts in words

def load_result(path=COMMITTED):
    """A demo result (demo.json) as a dict, its gaps and verdicts computed again from its runs' val curves (so they are
    what the runs say, whatever the file's own copies say). ValueError, one line, for a file that is not one."""
    try:
        with open(path) as f:
            result = json.load(f)
        seeds, opts = seeds_of(result["settings"]["seeds"]), optimizers_of(result["settings"]["optimizers"])
        for problem in filter(None, map(curve_problem, result["runs"])):
            raise ValueError(f"a run in it is damaged: {problem}")
        gaps, verdicts, flip = answer(result["runs"], seeds, opts, result["settings"].get("verdict_evals", 1))
    except OSError as e:
        raise ValueError(f"can't read {path}: {e.strerror}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        why = e if isinstance(e, ValueError) else f"missing {e}"
        raise ValueError(f"{path} is not a whole demo result ({why})") from None
    return dict(result, gaps=gaps, verdicts=verdicts, **({"flip": flip} if flip else {}))


def read_at(v):
    """Where a verdict was read: 'at step 100', or 'over steps 80-100' (the mean of the last K measurements)."""
    first, last = v.get("steps_read", [v["step"]])[0], v["step"]
    return f"at step {last}" if first == last else f"over steps {first}-{last}"


def verdict_lines(result):
    """The answer in plain words: a header, one row per optimizer, the campaign beside it, and last the takeaway."""
    n = len(seeds_of(result["settings"]["seeds"]))
    where = read_at(next(iter(result["verdicts"].values())))
    lines = [f"Is logn behind ortho? logn - ortho, val loss {where}, over {n} paired seed{'s' * (n > 1)} (> 0: logn "
             f"is behind)"]
    for opt, v in result["verdicts"].items():
        name, ci, at = OPT_NAMES.get(opt, opt), v["ci95"], read_at(v)
        spread_ = (f"seeds {min(v['per_seed']):+.2f} to {max(v['per_seed']):+.2f}, sd {v['sd']:.2f}, 95% interval "
                   f"{ci[0]:+.2f} to {ci[1]:+.2f}") if ci else "one seed: no interval"
        if v["word"] == "yes":
            say = f"yes, logn is {v['mean']:.2f} nats behind ortho {at}"
        elif v["word"] == "no":
            say = f"no, logn is {-v['mean']:.2f} nats ahead of ortho {at}"
        elif ci is None:
            say = f"can't tell from one seed (gap {v['mean']:+.2f} {at}): no spread to judge it by"
        else:
            say = f"can't tell: the gap {v['mean']:+.2f} {at} is within the seeds' noise"
        lines.append(f"  {name + ':':7s}{say} ({spread_})")
    flip = result.get("flip")
    if flip and flip["ci95"]:
        lines.append(f"  {OPT_NAMES[flip['of']]} minus AdamW, seed by seed: {flip['mean']:+.2f} nats (95% interval "
                     f"{flip['ci95'][0]:+.2f} to {flip['ci95'][1]:+.2f})")
    lines += campaign_lines(result, OPT_NAMES)
    return lines + [takeaway(result)]


def takeaway(result):
    """The one line to remember, from the verdicts."""
    v, say = result["verdicts"], {"yes": "logn is behind ortho", "no": "it is not"}
    words = {OPT_NAMES.get(o, o): x["word"] for o, x in v.items()}
    said = "; ".join(f"under {name} {say.get(w, 'no answer yet')}" for name, w in words.items())
    if {"yes", "no"} <= set(words.values()):
        return f"Takeaway: same model, data and seeds; {said}. The optimizer (its whole configuration) decides."
    unclear = [name for name, w in words.items() if w == "can't tell"]
    if unclear:
        return (f"Takeaway: {said} ({', '.join(unclear)}: within the seeds' noise "
                f"{read_at(next(iter(v.values())))}).")
    return f"Takeaway: {said}."


# ----------------------------------------------------------------------------------------------------
# The demo

def main(argv, log=print):
    """Parse flags, make the runs not made yet, write demo.json and demo.png, print the verdicts. Returns the exit
    code: 0 done, 1 a run failed or a file can't be written, 2 a bad flag or setting, 130 stopped by Ctrl-C (the
    finished runs are kept: the same command goes on from them)."""
    t0, load0 = time.time(), loadavg()
    try:
        s = parse_args(argv)
        out = check_out_folder(s.out, "--out", base=ROOT)
        device = str(setup_device(Config(device=s.device, out_dir=""))[0])
        device = "cuda" if device.startswith("cuda") else device
        # prepare the data once, here, before any worker needs it
        c, meta = load_data(run_config(s, "adamw", "logn", 0, s.dataset, "cpu"), log=log)[:2]
    except ValueError as e:
        print(f"demo.py: {e}", file=sys.stderr)
        return 2
    runs_dir = os.path.join(out, "runs")
    configs = [run_config(s, o, a, seed, meta["dataset"], device)
               for seed in seeds_of(s.seeds) for o in optimizers_of(s.optimizers) for a in ARMS]
    try:
        os.makedirs(runs_dir, exist_ok=True)
        made, reused, workers, threads = make_runs(s, c, meta, configs, runs_dir, device, log)
        result = summarise(s, made, dict(dataset=meta["dataset"], sha256=meta["sha256"], n=c.vocab_size),
                           time.time() - t0, reused, device, workers, threads)
        result["run"].update(loadavg_start=load0, loadavg_end=loadavg())  # how busy the machine was: a wall time
        write_result(result, out)                                          # means little without it
    except KeyboardInterrupt:
        print(f"demo.py: interrupted; the finished runs are kept in {runs_dir} (the same command continues from "
              f"them)", file=sys.stderr)
        return 130
    except (TrainingError, RuntimeError) as e:
        print(f"demo.py: a run failed ({str(e).strip().splitlines()[0][:200]}); finished runs are kept in {runs_dir}",
              file=sys.stderr)
        return 1
    except OSError as e:  # a folder that can't be written (read-only, full)
        print(f"demo.py: can't write {e.filename or 'the output'}: {e.strerror or e} (finished runs are kept)",
              file=sys.stderr)
        return 1
    log(f"wall time {result['run']['wall_s']:.0f} s ({reused} of {len(configs)} runs reused); wrote "
        f"{os.path.relpath(os.path.join(out, 'demo.json'), ROOT)} and demo.png")
    for line in verdict_lines(result):
        log(line)
    return 0


def make_runs(s, c, meta, configs, runs_dir, device, log):
    """Make the runs of `configs` that runs_dir does not hold finished (all of them with --fresh), in worker processes
    on a CPU (one single-thread process per core: faster than one process of two threads), saying first how long they
    should take. Returns (every run's record, how many were reused, workers, threads per worker)."""
    jobs = [(run_path(runs_dir, cfg), cfg) for cfg in configs]
    todo = [(p, cfg) for p, cfg in jobs if s.fresh or finished_run(p, cfg) is None]
    workers = min(s.workers or (available_cores() if device == "cpu" else 1), max(1, len(todo)))
    threads = s.threads or (1 if workers > 1 else torch.get_num_threads())
    reused = len(jobs) - len(todo)
    log(f"demo: {len(configs)} runs ({', '.join(optimizers_of(s.optimizers))} x logn, ortho x seeds {s.seeds}), "
        f"d={s.n_embd}, {s.steps} steps, n={c.vocab_size} ({meta['dataset']}), on {device}"
        + (f" in {workers} processes of" if workers > 1 else " with") + f" {threads} thread(s)"
        + (f"; {reused} finished runs reused from {runs_dir}" if reused else ""))
    if todo and device == "cpu":
        secs, step_s = expected_seconds(c, s.steps, len(measured_steps(configs[0])), s.val_windows, len(todo),
                                        workers, threads)
        log(f"expected: about {secs / 60:.1f} minutes ({len(todo)} runs of {s.steps} steps; one step takes "
            f"{step_s:.2f} s here)")
    # the bar redraws one line: right for a terminal or a notebook; a log file gets one line per finished run instead
    bar = tqdm(total=sum(cfg.max_iters for _, cfg in todo), unit="step", desc="demo", dynamic_ncols=True,
               disable=not (todo and (sys.stderr.isatty() or in_notebook())))
    try:
        run_all(todo, workers, threads, bar, log)
    finally:
        bar.close()
    made = [finished_run(p, cfg) for p, cfg in jobs]
    if any(r is None for r in made):
        raise RuntimeError(f"a run's file in {runs_dir} is missing or damaged; run again to re-make it")
    return made, reused, workers, threads


def write_result(result, out):
    """demo.json (the whole result) and demo.png (its figure) in `out`."""
    import matplotlib
    if not in_notebook():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = figure(result)
    fig.savefig(os.path.join(out, "demo.png"), dpi=120)
    plt.close(fig)  # drawn: free it (a notebook shows the figure from demo.figure, not from here)
    with open(os.path.join(out, "demo.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
