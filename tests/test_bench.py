"""research/bench.py, the benchmark: tokens/s and memory of training steps, against a nanoGPT-style twin of the same
shape in the same sitting. Lab tests: pytest -m lab."""
import subprocess
import sys

import pytest

from helpers import ROOT, TINY, config

pytestmark = pytest.mark.lab


@pytest.mark.slow
def test_bench_prints_speed_memory_and_on_request_a_profile(data_dir):
    p = subprocess.run([sys.executable, "-m", "research.bench", *TINY, "--bench=2", "--bench_profile=true",
                        "--optimizer=tiger"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "tokens/s" in p.stdout and "ms/step" in p.stdout and "peak RSS" in p.stdout and "optimizer=tiger" in p.stdout
    assert "Self CPU" in p.stdout and "aten::mm" in p.stdout  # the profiler's table of ops


@pytest.mark.slow
def test_bench_against_the_nanogpt_style_baseline_reports_ratios(data_dir):
    """Both sides run in their own process on the same shape; the baseline really is the textbook path."""
    from research.bench import NANOGPT, Bench, bench_against_baseline
    lines = []
    c = Bench(**{**config().__dict__, "bench": 2, "vocab": "corpus", "vocab_size": 50257})
    med = bench_against_baseline(c, rounds=1, log=lines.append)
    assert set(med) == {"this repo", "nanoGPT-style"}
    assert all(m["tokens_per_s"] > 0 and m["peak_rss_mb"] > 0 for m in med.values())
    assert "--fused_loss=False" in lines[-2] and "speed" in lines[-1]
    assert NANOGPT["fused_loss"] is False and NANOGPT["pos"] == "learned"


def test_bench_refuses_fewer_than_one_step_in_one_line(capsys):
    from research.bench import main
    assert main(["--bench=0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--bench must be >= 1" in err
