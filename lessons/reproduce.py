"""
The convergence experiment behind lesson 04: every head, same data, same batches, several seeds.

    python lessons/reproduce.py live   # ~6 minutes on a 2-core CPU: what lesson 04 can re-run
    python lessons/reproduce.py full   # the CPU-sized full grid: main runs + width / lr / warmup / length / n sweeps
    python lessons/reproduce.py gpt2   # the seed's own example, d=768 and sigma=0.02, 3 seeds of the 5 core heads

Set OMP_NUM_THREADS=1 to run the two scales side by side on a 2-core machine (that is how the committed
data were made: one core each, so the wall times in the files are single-core times).

Each finished run is appended to lessons/data/repro_<scale>.json at once (written atomically), and a
restarted script skips the runs already there, so an interrupted sweep loses at most one run.
Only the head (and, in the sweeps, the swept knob) differs between runs of a group; the training batches
come from one data seed for all runs, and the model seed is the run's seed.
"""

import dataclasses
import json
import math
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402

from train import Config, load_data, train  # noqa: E402

CORE_HEADS = ["tied", "logn", "untied", "ortho", "shuffle"]  # the seed's comparison
ALL_HEADS = CORE_HEADS + ["bert", "channel", "scale"]  # plus our extensions
SEEDS = [1, 2, 3]
SCALES = ("live", "full", "gpt2")
KEEP = ("step", "tokens", "train_loss", "val_loss", "emb_grad_norm", "emb_rms", "grad_norm", "lr")

# Shared settings. vocab='corpus' restricts the softmax to the tokens Tiny Shakespeare uses (n = 11,706,
# ln n = 9.37) so a CPU can afford the grid; sigma = d^-1/2 keeps d*sigma = sqrt(d) >> ln n.
BASE = dict(dataset="shakespeare", vocab="corpus", n_head=4, block_size=64, batch_size=8, lr=1e-3,
            warmup_iters=0, weight_decay=0.1, grad_clip=1.0, eval_iters=4, log_interval=10, data_seed=0,
            out_dir="", sample_tokens=0)


def plan(scale):
    """(group, overrides) pairs, most important first."""
    if scale == "live":
        main = dict(n_layer=1, n_embd=256, max_iters=150, eval_interval=15)
        return [("main", dict(main, head=h, seed=s)) for s in SEEDS for h in ALL_HEADS]
    if scale == "gpt2":  # the seed's own example: GPT-2's width and init (d sigma = 15.4), full's depth and length
        main = dict(n_layer=2, n_embd=768, emb_std=0.02, max_iters=300, eval_interval=25)
        return [("main", dict(main, head=h, seed=s)) for s in SEEDS for h in CORE_HEADS]
    main = dict(n_layer=2, n_embd=256, max_iters=300, eval_interval=25)
    runs = [("main", dict(main, head=h, seed=s)) for s in SEEDS for h in CORE_HEADS]
    sweeps = [("lr=3e-3", dict(lr=3e-3)), ("d=512", dict(n_embd=512)), ("warmup=100", dict(warmup_iters=100)),
              ("d=128", dict(n_embd=128)), ("lr=3e-4", dict(lr=3e-4))]
    for group, knob in sweeps:
        runs += [(group, dict(main, head=h, seed=1, **knob)) for h in CORE_HEADS]
    runs += [("main", dict(main, head=h, seed=s)) for s in SEEDS for h in ALL_HEADS[5:]]
    # training length: 4x the steps (the cosine schedule stretches with it), does the order last?
    runs += [("steps=1200", dict(main, head=h, seed=1, max_iters=1200, eval_interval=50)) for h in CORE_HEADS]
    # the full GPT-2 vocabulary (ln n = 10.8) instead of the corpus's; the seed's own example is the gpt2 scale
    return runs + [("n=50257", dict(main, head=h, seed=1, vocab="full")) for h in CORE_HEADS]


def run_id(group, overrides):
    return f"{group}|{overrides['head']}|seed={overrides['seed']}"


def main(scale, path=None, groups=None, seeds=None):
    path = path or os.path.join(HERE, "data", f"repro_{scale}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path) as f:
            result = json.load(f)
    else:
        result = dict(scale=scale, base=BASE, runs=[], environment=dict(
            torch=torch.__version__, python=platform.python_version(), machine=platform.machine(),
            processor=platform.processor(), threads=torch.get_num_threads(), device="cpu"))
    repair_recorded_n(result)
    done = {r["id"] for r in result["runs"]}
    todo = [(g, o) for g, o in plan(scale) if run_id(g, o) not in done and (groups is None or g in groups)
            and (seeds is None or o["seed"] in seeds)]
    print(f"{scale}: {len(done)} runs done, {len(todo)} to go -> {path}")
    for i, (group, overrides) in enumerate(todo):
        config = Config(**{**BASE, **overrides})
        t0 = time.time()
        history = train(config, progress=False, log=lambda *a: None)
        wall = time.time() - t0
        # record the config the model was built from: with vocab='corpus', train() shrinks vocab_size to the
        # corpus's n, and sigma (for logn) and the scale head's c depend on that n
        model_config = load_data(config, log=lambda *a: None)[0]
        result["runs"].append(dict(
            id=run_id(group, overrides), group=group, head=config.head, seed=config.seed, wall_s=wall,
            config=dataclasses.asdict(model_config),
            n=model_config.vocab_size, d=config.n_embd, sigma=model_config.sigma,
            history=[{k: r[k] for k in KEEP if k in r} for r in history]))
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.replace(tmp, path)
        last = [r for r in history if "val_loss" in r][-1]
        print(f"[{i + 1}/{len(todo)}] {run_id(group, overrides)}: val {last['val_loss']:.3f} "
              f"at step {last['step']} ({wall:.0f} s)", flush=True)


def repair_recorded_n(result):
    """Files written before 2026-11-21 recorded config.vocab_size = 50257 and sigma = ln(50257)/d for logn, read
    before train() shrank n to the corpus's vocabulary; the models themselves used n (the step-0 embedding RMS in
    the history shows it). Rewrite those two fields from n, once, and say so in the file's notes."""
    fixed = []
    for r in result["runs"]:
        if r["config"]["vocab"] == "corpus" and r["config"]["vocab_size"] != r["n"]:
            r["config"]["vocab_size"] = r["n"]
            sigma = Config(**{k: v for k, v in r["config"].items() if k in Config.__dataclass_fields__}).sigma
            if abs(sigma - r["sigma"]) > 1e-12:
                fixed.append(f"{r['id']}: sigma {r['sigma']:.4f} -> {sigma:.4f}")
            r["sigma"] = sigma
    if fixed:
        result.setdefault("notes", []).append(
            "repaired by repair_recorded_n: config.vocab_size was recorded as the tokenizer's 50257 instead of the "
            "corpus n the model used; sigma recomputed from n for: " + "; ".join(fixed))
    return result


def merge(into, other):
    """Add the runs of JSON file `other` that `into` lacks (a second worker ran the plan from the end)."""
    with open(into) as f:
        a = json.load(f)
    with open(other) as f:
        b = json.load(f)
    have = {r["id"] for r in a["runs"]}
    a["runs"] += [r for r in b["runs"] if r["id"] not in have]
    order = {run_id(g, o): i for i, (g, o) in enumerate(plan(a["scale"]))}
    a["runs"].sort(key=lambda r: order.get(r["id"], len(order)))
    with open(into + ".tmp", "w") as f:
        json.dump(a, f)
    os.replace(into + ".tmp", into)
    print(f"{into}: {len(a['runs'])} runs")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["merge"] and len(args) == 3:
        merge(args[1], args[2])
        sys.exit(0)
    opts = dict(a[2:].split("=", 1) for a in args[1:] if a.startswith("--") and "=" in a)
    if not args or args[0] not in SCALES or len(opts) != len(args) - 1 or set(opts) - {"path", "groups", "seeds"}:
        print("usage: python lessons/reproduce.py live|full|gpt2 [--groups=G1,G2] [--seeds=1,2] [--path=FILE] | merge INTO OTHER",
              file=sys.stderr)
        sys.exit(2)
    # --groups / --seeds run only those (a second worker, writing to its own --path, merged afterwards)
    main(args[0], path=opts.get("path"), groups=opts["groups"].split(",") if "groups" in opts else None,
         seeds=[int(s) for s in opts["seeds"].split(",")] if "seeds" in opts else None)
