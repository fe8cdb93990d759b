"""Nothing lost on a GPU: the CUDA paths of a run's files (kill and resume, the dtype a run records, torchrun's lock,
a second Ctrl-C). Skipped on a machine without a CUDA GPU, as in CI; run on a lent GPU with `pytest -m cuda`.

On a GPU the backward pass adds into the embedding's gradient with atomics, so two runs of the same batches agree to
rounding, not to the bit (on the CPU they agree to the bit: test_promises.py). A resumed run that saw other batches
would differ by tenths of a nat at its first step, so a 1e-3 agreement tells the two apart."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from helpers import ROOT, TINY, run

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

GPU = [*TINY, "--device=cuda", "--eval_interval=100", "--log_interval=10"]


def rows(out_dir):
    """A run's metrics.jsonl as {step: row}, a line cut by a kill left out."""
    got = {}
    for line in (out_dir / "metrics.jsonl").read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        got[r["step"]] = r
    return got


def start(args):
    return subprocess.Popen([sys.executable, "train.py", *GPU, *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def wait_for_checkpoint(p, out_dir, past_step):
    """Until ckpt.pt exists and the run has logged a row past `past_step` (so a kill now loses steps)."""
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if os.path.exists(out_dir / "ckpt.pt") and (out_dir / "metrics.jsonl").exists() and \
                max(rows(out_dir), default=-1) > past_step:
            return
        time.sleep(0.01)
    raise AssertionError(f"the run ended or stalled before its checkpoint (exit {p.poll()})")


def test_a_cuda_run_killed_mid_way_resumes_on_the_same_batches(data_dir, tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert run([*GPU, "--max_iters=1000", f"--out_dir={whole}"]).returncode == 0
    p = start(["--max_iters=1000", f"--out_dir={killed}"])
    wait_for_checkpoint(p, killed, past_step=100)
    p.send_signal(signal.SIGKILL)
    p.wait()
    cut = max(rows(killed))
    assert cut < 1000, "the run ended before the kill: nothing was tested"
    r = run([*GPU, "--max_iters=1000", f"--out_dir={killed}", "--resume=true"])
    assert r.returncode == 0, r.stderr
    a, b = rows(whole), rows(killed)
    assert sorted(b) == sorted(a), "the resumed run's rows are not the uninterrupted run's steps, once each"
    gap = max(abs(a[s][k] - b[s][k]) for s in a for k in ("train_loss", "val_loss") if k in a[s])
    print(f"killed at step {cut}; largest loss difference from the uninterrupted run: {gap:.2e}")
    assert gap < 1e-3


def test_a_bf16_cuda_run_resumes_on_the_gpu_and_is_refused_in_float32_on_the_cpu(data_dir, tmp_path):
    first = run([*GPU, "--dtype=bfloat16", "--max_iters=20", "--lr_decay_iters=30", "--eval_interval=10",
                 f"--out_dir={tmp_path}"])
    assert first.returncode == 0, first.stderr
    assert json.loads((tmp_path / "config.json").read_text())["config"]["dtype"] == "bfloat16"
    on_cpu = run([*TINY, "--device=cpu", "--max_iters=30", "--lr_decay_iters=30", "--eval_interval=10",
                  f"--out_dir={tmp_path}", "--resume=true"])
    assert on_cpu.returncode != 0 and len(on_cpu.stderr.strip().splitlines()) <= 3, on_cpu.stderr
    assert "dtype" in on_cpu.stderr
    again = run([*GPU, "--dtype=bfloat16", "--max_iters=30", "--lr_decay_iters=30", "--eval_interval=10",
                 f"--out_dir={tmp_path}", "--resume=true"])
    assert again.returncode == 0, again.stderr
    assert max(rows(tmp_path)) == 30


def test_torchrun_with_one_gpu_claims_the_out_dir_and_lets_it_go(data_dir, tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",  # torchrun
           "train.py", *GPU, "--lr_decay_iters=30", "--max_iters=20", "--eval_interval=10", f"--out_dir={tmp_path}"]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert max(rows(tmp_path)) == 20
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)  # the same folder, no resume
    assert second.returncode != 0 and "--resume=true" in second.stderr + second.stdout
    assert max(rows(tmp_path)) == 20, "the refused run touched the first run's metrics"
    resumed = subprocess.run([*cmd[:-2], "--max_iters=30", *cmd[-2:], "--resume=true"], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)  # the lock was let go: it can go on
    assert resumed.returncode == 0, resumed.stderr
    assert max(rows(tmp_path)) == 30


def test_a_second_ctrl_c_stops_a_cuda_run_at_once_and_keeps_a_checkpoint_that_resumes(data_dir, tmp_path):
    p = start(["--max_iters=100000", f"--out_dir={tmp_path}"])  # lr_decay_iters follows max_iters: given below
    wait_for_checkpoint(p, tmp_path, past_step=100)
    p.send_signal(signal.SIGINT)
    p.send_signal(signal.SIGINT)
    t = time.time()
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130 and time.time() - t < 30, err
    assert not [f for f in os.listdir(tmp_path) if "tmp" in f], os.listdir(tmp_path)
    last = max(rows(tmp_path))
    r = run([*GPU, f"--max_iters={last + 20}", "--lr_decay_iters=100000", f"--out_dir={tmp_path}", "--resume=true"])
    assert r.returncode == 0, r.stderr
