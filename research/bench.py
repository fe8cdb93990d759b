"""
The benchmark (as nanoGPT keeps its own bench.py): time training steps, and compare this repository's path with a
plain nanoGPT-style twin of the same shape, in one command. It takes train.py's flags and three of its own:

    python -m research.bench --bench=5 --batch_size=16                        # tokens/s, ms/step, peak memory
    python -m research.bench --bench=5 --batch_size=16 --bench_baseline=true  # against the nanoGPT-style twin
    python -m research.bench --bench=3 --batch_size=16 --bench_profile=true   # torch.profiler's costliest ops
"""

import dataclasses
import json
import os
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, fields

import torch

from config import Config, parse_args
from data.prepare import load_data
from fused_loss import FusedLoss
from optim import make_optimizer
from rundir import TrainingError
from tiedgpt import GPT, flag
from train import get_batch, setup_device

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


PEAK_TFLOPS = 790.0  # measured bf16 dense matmul peak of an H100/H200; MFU on a GPU is reported against it


def flops_per_token(model):
    """Training FLOPs per token, PaLM-style: 6 per multiplying weight (the tied head too) plus attention's 12 L T d."""
    c = model.config
    head = c.vocab_size * c.n_embd if model.tied else 0  # untied: lm_head is in the non-embedding count
    return 6 * (model.get_num_params(non_embedding=True) + head) + 12 * c.n_layer * c.block_size * c.n_embd


@dataclass
class Bench(Config):
    """train.py's flags, and what to time."""
    bench: int = flag(10, "time this many steps (after 2 warm-up steps), print speed and memory")
    bench_baseline: bool = flag(False, "also time the nanoGPT-style path of the same shape, print ratios")
    bench_profile: bool = flag(False, "print torch.profiler's costliest ops (true|false)")


def bench(c, log=print):
    """Time c.bench training steps of the model c describes, on real batches, after 2 warm-up steps.
    Returns and prints tokens/s, ms/step and peak memory (process RSS; on a GPU, also allocated memory).
    Compare two settings by running both, e.g. --fused_loss=false against the default."""
    import resource
    device, dtype, autocast = setup_device(c)
    c, _, data, _, _, lut = load_data(c, log)
    torch.manual_seed(c.seed)
    model = GPT(c.model_config()).to(device)
    optimizer = make_optimizer(model, c)
    loss_model = FusedLoss(model) if c.fused_loss else model  # as train.py steps
    step_model = torch.compile(loss_model) if c.compile else loss_model
    gen = torch.Generator().manual_seed(c.seed)

    def step():
        x, y = get_batch(data, c.batch_size, c.block_size, gen, lut=lut)
        with autocast:
            loss = step_model(x.to(device), y.to(device))[1]  # (not keeping the textbook path's logits)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if c.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), c.grad_clip)
        optimizer.step()
        return loss

    for _ in range(2):
        step()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    profiler = nullcontext()
    if c.bench_profile:  # where the time goes, op by op (the timing below then includes the profiler's overhead)
        from torch.profiler import ProfilerActivity, profile
        profiler = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else []))
    t = time.perf_counter()
    with profiler:
        for _ in range(c.bench):
            loss = step()
        loss.item()
        sync()
    dt = (time.perf_counter() - t) / c.bench
    if c.bench_profile:
        key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
        log(profiler.key_averages().table(sort_by=key, row_limit=15, max_name_column_width=40))
    tok_s = c.batch_size * c.block_size / dt
    out = dict(tokens_per_s=tok_s, ms_per_step=1000 * dt, peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               device=str(device), dtype=dtype, threads=torch.get_num_threads())
    msg = (f"bench: {tok_s:,.0f} tokens/s, {1000 * dt:.1f} ms/step, peak RSS {out['peak_rss_mb']:,.0f} MB "
           f"| {device} {dtype}, {torch.get_num_threads()} threads, B={c.batch_size} T={c.block_size}, "
           f"head={c.head}, optimizer={c.optimizer}, fused_loss={c.fused_loss}, "
           + (f"fused_adamw={c.fused_adamw}, " if c.optimizer == "adamw" else "") + f"compile={c.compile}")
    if device.type == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2 ** 20
        out["mfu"] = flops_per_token(model) * tok_s / (PEAK_TFLOPS * 1e12)
        msg += f", peak GPU {out['peak_gpu_mb']:,.0f} MB, MFU {100 * out['mfu']:.1f}% of {PEAK_TFLOPS:.0f} TFLOP/s"
    log(msg)
    if os.environ.get("TIEDGPT_BENCH_JSON"):  # bench_against_baseline reads its child processes' results here
        with open(os.environ["TIEDGPT_BENCH_JSON"], "w") as f:
            json.dump(out, f)
    return out


# What a plain nanoGPT-style model of the same shape does differently: textbook logits -> F.cross_entropy,
# AdamW's foreach implementation (nanoGPT fuses only on CUDA), learned positions added to the embedding,
# GPT-2's residual init and biases, and the vocabulary padded to 50304.
NANOGPT = dict(fused_loss=False, fused_adamw=False, pos="learned", zero_init_residual=False, bias=True)


def bench_against_baseline(c, rounds=3, log=print):
    """Time c and its nanoGPT-style twin alternately (A B A B ...), each in a fresh process so that peak
    memory is its own, and report the medians and the ratios: one sitting, one machine, one command."""
    import statistics
    import tempfile
    padded = 50304 if c.vocab == "full" and c.vocab_size == 50257 else c.vocab_size  # (corpus: n is the data's)
    base = dataclasses.replace(c, **NANOGPT, vocab_size=padded)
    runs = {"this repo": (c, []), "nanoGPT-style": (base, [])}
    for r in range(rounds):
        for name, (cfg, results) in runs.items():
            argv = [f"--{f.name}={getattr(cfg, f.name)}" for f in fields(Bench)
                    if f.name != "bench_baseline" and getattr(cfg, f.name) != f.default]
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "bench.json")
                p = subprocess.run([sys.executable, "-m", "research.bench", *argv], cwd=ROOT,
                                   env={**os.environ, "TIEDGPT_BENCH_JSON": path}, capture_output=True, text=True)
                if p.returncode != 0 or not os.path.exists(path):
                    raise TrainingError(f"bench of {name} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
                with open(path) as f:
                    results.append(json.load(f))
            log(f"round {r + 1}/{rounds} {name:14} {results[-1]['tokens_per_s']:8,.0f} tokens/s  "
                f"{results[-1]['ms_per_step']:7.0f} ms/step  peak RSS {results[-1]['peak_rss_mb']:6,.0f} MB")
    med = {name: {k: statistics.median(r[k] for r in results) for k in ("tokens_per_s", "ms_per_step", "peak_rss_mb")}
           for name, (_, results) in runs.items()}
    a, b = med["this repo"], med["nanoGPT-style"]
    log("baseline flags: " + " ".join(f"--{k}={v}" for k, v in {**NANOGPT, "vocab_size": base.vocab_size}.items()))
    log(f"medians of {rounds}: this repo {a['tokens_per_s']:,.0f} tokens/s, {a['peak_rss_mb']:,.0f} MB | nanoGPT-style "
        f"{b['tokens_per_s']:,.0f} tokens/s, {b['peak_rss_mb']:,.0f} MB | speed {a['tokens_per_s'] / b['tokens_per_s']:.2f}x, "
        f"memory {a['peak_rss_mb'] / b['peak_rss_mb']:.2f}x")
    return med


def main(argv):
    """python -m research.bench --key=value ...: train.py's flags, timing instead of training; a bad flag is one line."""
    try:
        c = parse_args(argv, Bench, __doc__)
        if c.bench < 1:
            raise ValueError(f"--bench must be >= 1, the steps to time (got {c.bench})")
        (bench_against_baseline if c.bench_baseline else bench)(c)
    except (ValueError, TrainingError) as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
