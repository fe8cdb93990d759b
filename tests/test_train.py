"""train.py: reproducible, resumable, distributable, and strict about bad input.

Every run here is a tiny model (1 layer, d=32) on pydoc's topics, prepared into a temp dir, so the whole
file takes seconds of CPU."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT

TINY = ["--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4", "--eval_iters=2",
        "--dataset=pydoc_topics", "--sample_tokens=0", "--log_interval=1"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    os.environ["TIEDGPT_DATA_DIR"] = str(d)
    import data.prepare as P
    old, P.DATA_DIR = P.DATA_DIR, str(d)
    P.prepare("pydoc_topics", log=lambda *_: None)
    yield d
    P.DATA_DIR = old
    del os.environ["TIEDGPT_DATA_DIR"]


def run(args, cwd=ROOT, **kw):
    return subprocess.run([sys.executable, "train.py", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, **kw)


def losses(out_dir):
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return {r["step"]: r["train_loss"] for r in map(json.loads, f) if "train_loss" in r}


def config(**kw):
    from train import Config
    base = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, eval_iters=2,
                dataset="pydoc_topics", sample_tokens=0, log_interval=1)
    return Config(**{**base, **kw})


def test_same_seed_gives_same_losses_on_cpu(data_dir):
    from train import train
    a = train(config(max_iters=8, eval_interval=4, out_dir=""), progress=False, log=lambda *_: None)
    b = train(config(max_iters=8, eval_interval=4, out_dir=""), progress=False, log=lambda *_: None)
    c = train(config(max_iters=8, eval_interval=4, out_dir="", seed=7), progress=False, log=lambda *_: None)
    assert [r.get("train_loss") for r in a] == [r.get("train_loss") for r in b]
    assert [r.get("train_loss") for r in a] != [r.get("train_loss") for r in c]


def test_fast_path_keeps_the_training_curve_of_the_straightforward_path(data_dir):
    """The speed-ups (fused output projection + loss, fused AdamW) change no number beyond float rounding:
    30 steps of train() track the textbook path (logits then F.cross_entropy, foreach AdamW)."""
    from train import train
    kw = dict(max_iters=30, eval_interval=15, out_dir="", vocab_size=50257)
    fast = train(config(**kw), progress=False, log=lambda *_: None)
    plain = train(config(fused_loss=False, fused_adamw=False, **kw), progress=False, log=lambda *_: None)
    for key in ("train_loss", "val_loss", "emb_grad_norm"):
        a = [r[key] for r in fast if key in r]
        b = [r[key] for r in plain if key in r]
        assert len(a) >= 3 and a == pytest.approx(b, rel=1e-4), key
    assert fast[-2]["train_loss"] < fast[0]["train_loss"] - 0.3  # it learned: the curves had room to differ


def test_bfloat16_training_tracks_float32(data_dir):
    """bf16 autocast (what a GPU run uses; here on the CPU) follows the fp32 curve to bf16's precision."""
    from train import train
    kw = dict(max_iters=20, eval_interval=20, out_dir="")
    f32 = [r["train_loss"] for r in train(config(dtype="float32", **kw), progress=False, log=lambda *_: None)[:-1]]
    b16 = [r["train_loss"] for r in train(config(dtype="bfloat16", **kw), progress=False, log=lambda *_: None)[:-1]]
    assert b16 == pytest.approx(f32, rel=0.02)
    assert b16 != f32  # it really ran in bf16


def test_history_records_what_lesson_04_needs(data_dir):
    from train import train
    h = train(config(max_iters=6, eval_interval=3, out_dir=""), progress=False, log=lambda *_: None)
    assert [r["step"] for r in h] == list(range(7))
    for r in h[:-1]:
        assert {"train_loss", "emb_grad_norm", "emb_rms", "lr", "tokens"} <= r.keys()
    assert [r["step"] for r in h if "val_loss" in r] == [0, 3, 6]
    assert h[0]["emb_rms"] == pytest.approx(32 ** -0.5, rel=0.02)  # sigma = d^-1/2 at step 0
    assert h[-2]["train_loss"] < h[0]["train_loss"]


def test_outputs_config_metrics_and_checkpoint(data_dir, tmp_path):
    p = run([*TINY, "--max_iters=4", "--eval_interval=2", f"--out_dir={tmp_path}"])
    assert p.returncode == 0, p.stderr
    cfg = json.load(open(tmp_path / "config.json"))
    assert cfg["config"]["head"] == "tied" and cfg["environment"]["torch"] == torch.__version__
    assert cfg["dataset"]["corpus"] == "pydoc_topics"
    assert sorted(losses(tmp_path)) == [0, 1, 2, 3]
    assert torch.load(tmp_path / "ckpt.pt", weights_only=False)["step"] == 4
    assert "final val loss" in p.stdout


def test_resume_after_sigkill_matches_uninterrupted_run(data_dir, tmp_path):
    """SIGKILL a run after its checkpoint at step 10, resume it, and get the losses of a run that was
    never interrupted: same model, optimizer, data-generator and RNG states."""
    args = [*TINY, "--n_embd=64", "--max_iters=60", "--eval_interval=10", "--dropout=0.1"]
    ref = run([*args, f"--out_dir={tmp_path / 'ref'}"])
    assert ref.returncode == 0, ref.stderr

    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "train.py", *args, f"--out_dir={out}"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (out / "ckpt.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = torch.load(out / "ckpt.pt", weights_only=False)["step"]
    assert killed_at < 60

    resumed = run([*args, f"--out_dir={out}", "--resume=true"])
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout
    a, b = losses(tmp_path / "ref"), losses(out)
    assert sorted(a) == sorted(b) == list(range(60))
    assert [a[s] for s in range(killed_at, 60)] == [b[s] for s in range(killed_at, 60)]


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(data_dir, tmp_path):
    proc = subprocess.Popen([sys.executable, "train.py", *TINY, "--max_iters=100000", "--eval_interval=1000",
                             f"--out_dir={tmp_path}"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (tmp_path / "metrics.jsonl").exists():
        time.sleep(0.05)
    while time.time() < deadline and len(losses(tmp_path)) < 5:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err
    assert "checkpoint saved" in out + err
    step = torch.load(tmp_path / "ckpt.pt", weights_only=False)["step"]
    assert step >= 5 and max(losses(tmp_path)) == step - 1  # every logged step is in the checkpoint


def test_ddp_two_processes_match_one_process_of_the_same_global_batch(data_dir, tmp_path):
    args = [*TINY, "--max_iters=6", "--eval_interval=3", "--batch_size=8", "--grad_clip=0.5"]
    one = run([*args, f"--out_dir={tmp_path / 'one'}"])
    assert one.returncode == 0, one.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          "train.py", *args, f"--out_dir={tmp_path / 'two'}"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-2000:]
    a, b = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert sorted(a) == sorted(b)
    for s in a:
        assert b[s] == pytest.approx(a[s], rel=1e-5, abs=1e-5)
    w1 = torch.load(tmp_path / "one" / "ckpt.pt", weights_only=False)["model"]
    w2 = torch.load(tmp_path / "two" / "ckpt.pt", weights_only=False)["model"]
    for k in w1:
        torch.testing.assert_close(w1[k], w2[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("flag, words", [
    ("--lerning_rate=1", "unknown flag --lerning_rate"),
    ("--lr=fast", "--lr expects float"),
    ("--lr=-0.1", "lr must be > 0"),
    ("--head=weird", "choose one of: tied, untied"),
    ("--compile=maybe", "expects true or false"),
    ("max_iters=3", "flags look like --key=value"),
    ("--block_size=10000000", "block_size=10000000 is beyond the data"),
])
def test_bad_input_gets_one_clear_line_and_exit_code_2(data_dir, flag, words):
    p = run([*TINY, "--out_dir=", flag])
    assert p.returncode == 2
    assert words in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_cuda_without_a_gpu_is_refused(data_dir):
    p = run([*TINY, "--out_dir=", "--device=cuda"])
    assert p.returncode == 2 and "no CUDA GPU" in p.stderr


def test_checkpoint_of_another_head_is_refused(data_dir, tmp_path):
    assert run([*TINY, "--max_iters=2", "--eval_interval=1", f"--out_dir={tmp_path}"]).returncode == 0
    p = run([*TINY, "--max_iters=4", f"--out_dir={tmp_path}", "--resume=true", "--head=ortho"])
    assert p.returncode == 1 and "made for another model: head='tied' (now 'ortho')" in p.stderr


def test_corrupt_checkpoint_is_refused(data_dir, tmp_path):
    (tmp_path / "ckpt.pt").write_bytes(b"not a checkpoint")
    p = run([*TINY, "--max_iters=4", f"--out_dir={tmp_path}", "--resume=true"])
    assert p.returncode == 1 and "not a readable checkpoint" in p.stderr


def test_non_finite_loss_stops_naming_the_step_and_keeps_the_last_checkpoint(data_dir, tmp_path):
    """An absurd learning rate blows the weights up; training stops and the checkpoint stays good."""
    assert run([*TINY, "--max_iters=2", "--eval_interval=2", f"--out_dir={tmp_path}"]).returncode == 0
    p = run([*TINY, "--max_iters=50", "--eval_interval=2", "--warmup_iters=0", "--lr=1e30", "--grad_clip=0",
             f"--out_dir={tmp_path}", "--resume=true"])
    assert p.returncode == 1 and "non-finite loss at step 3" in p.stderr, p.stderr
    state = torch.load(tmp_path / "ckpt.pt", weights_only=False)
    assert all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())


def test_help_lists_every_flag_with_its_default():
    p = run(["--help"])
    assert p.returncode == 0
    for flag in ("--head=tied", "--n_embd=256", "--lr=0.001", "--resume=False", "--emb_std=None"):
        assert flag in p.stdout


def test_corpus_vocab_shrinks_n_to_the_tokens_the_corpus_uses(data_dir):
    import numpy as np
    from data.prepare import load_split
    from train import corpus_vocab, get_batch, train
    c = config(vocab="corpus")
    train_data, val_data = load_split("pydoc_topics", "train"), load_split("pydoc_topics", "val")
    ids, lut, c2 = corpus_vocab(c, train_data, val_data)
    assert c2.vocab_size == len(ids) == len(set(train_data.tolist()) | set(val_data.tolist())) < 50257
    x, y = get_batch(train_data, 4, 16, torch.Generator().manual_seed(0), lut=lut)
    assert x.min() >= 0 and x.max() < c2.vocab_size
    x0, _ = get_batch(train_data, 4, 16, torch.Generator().manual_seed(0))
    assert np.array_equal(ids[x.numpy()], x0.numpy())  # renumbering is invertible
    h = train(config(vocab="corpus", max_iters=2, eval_interval=2, out_dir=""), progress=False, log=lambda *_: None)
    assert h[-1]["val_loss"] < 12


def test_bench_prints_speed_memory_and_on_request_a_profile(data_dir):
    p = run(TINY + ["--bench=2", "--bench_profile=true"])
    assert p.returncode == 0, p.stderr
    assert "tokens/s" in p.stdout and "ms/step" in p.stdout and "peak RSS" in p.stdout
    assert "Self CPU" in p.stdout and "aten::mm" in p.stdout  # the profiler's table of ops


def test_bench_against_the_nanogpt_style_baseline_reports_ratios(data_dir):
    """Both sides run in their own process on the same shape; the baseline really is the textbook path."""
    from train import NANOGPT, bench_against_baseline
    lines = []
    med = bench_against_baseline(config(bench=2), rounds=1, log=lines.append)
    assert set(med) == {"this repo", "nanoGPT-style"}
    assert all(m["tokens_per_s"] > 0 and m["peak_rss_mb"] > 0 for m in med.values())
    assert "--fused_loss=False" in lines[-2] and "--vocab_size=50304" in lines[-2]
    assert "speed" in lines[-1] and "x" in lines[-1]
    assert NANOGPT["fused_loss"] is False and NANOGPT["pos"] == "learned"
