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

from helpers import ROOT, TINY, config, rows, run  # the fixture data_dir is in conftest.py too
from errors import Diverged, TrainingError



def losses(out_dir):
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return {r["step"]: r["train_loss"] for r in map(json.loads, f) if "train_loss" in r}


def test_same_seed_gives_same_losses_on_cpu(data_dir):
    from train import train
    a = train(config(max_iters=8, eval_interval=4, out_dir=""), progress=False, log=lambda *_: None)
    b = train(config(max_iters=8, eval_interval=4, out_dir=""), progress=False, log=lambda *_: None)
    c = train(config(max_iters=8, eval_interval=4, out_dir="", seed=7), progress=False, log=lambda *_: None)
    assert [r.get("train_loss") for r in a] == [r.get("train_loss") for r in b]
    assert [r.get("train_loss") for r in a] != [r.get("train_loss") for r in c]


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["step"] == 4
    assert "final val loss" in p.stdout


@pytest.mark.slow
def test_resume_after_sigkill_matches_uninterrupted_run(data_dir, tmp_path):
    """SIGKILL a run after its checkpoint at step 10, resume it, and get the losses of a run that was
    never interrupted: same model, optimizer, data-generator and RNG states."""
    args = [*TINY, "--n_embd=64", "--max_iters=60", "--eval_interval=10", "--dropout=0.1", "--log_interval=4"]
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
    killed_at = torch.load(out / "ckpt.pt", weights_only=True)["step"]
    assert killed_at < 60

    resumed = run([*args, f"--out_dir={out}", "--resume=true"])
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout
    a, b = rows(tmp_path / "ref"), rows(out)
    assert sorted(a) == sorted(b) == sorted(set(range(0, 60, 4)) | set(range(0, 61, 10)))
    # every row from the checkpoint on, the first included (it averages steps from both sides of the kill),
    # is the uninterrupted run's, to the bit: losses, tokens, learning rate
    for s in [s for s in a if s >= killed_at]:
        assert {k: a[s].get(k) for k in ("train_loss", "val_loss", "tokens", "lr")} == \
               {k: b[s].get(k) for k in ("train_loss", "val_loss", "tokens", "lr")}, s


@pytest.mark.slow
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
    step = torch.load(tmp_path / "ckpt.pt", weights_only=True)["step"]
    assert step >= 5 and max(losses(tmp_path)) == step - 1  # every logged step is in the checkpoint


@pytest.mark.slow
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
    w1 = torch.load(tmp_path / "one" / "ckpt.pt", weights_only=True)["model"]
    w2 = torch.load(tmp_path / "two" / "ckpt.pt", weights_only=True)["model"]
    for k in w1:
        torch.testing.assert_close(w1[k], w2[k], rtol=1e-4, atol=1e-5)


BAD_INPUT = [
    ("--lerning_rate=1", "unknown flag --lerning_rate"),
    ("--lr=fast", "--lr expects float"),
    ("--lr=-0.1", "lr must be > 0"),
    ("--head=weird", "choose one of: tied, untied"),
    ("--compile=maybe", "expects true or false"),
    ("max_iters=3", "flags look like --key=value"),
    ("--block_size=10000000", "block_size=10000000 is beyond the data"),
    ("--grad_clip=nan", "grad_clip must be a finite number"),
    ("--seed=100000000000000000000000", "seed must be in [0, 2**63)"),
    ("--dtype=float16", "float16 is not supported"),
    ("--n_embd=16384", "lower n_embd"),  # refused from the memory estimate before anything is allocated
]


# each case starts train.py (~2 s of Python and torch start-up): two in the default run, all with -m slow
@pytest.mark.parametrize("flag, words",
                         BAD_INPUT[:2] + [pytest.param(*c, marks=pytest.mark.slow) for c in BAD_INPUT[2:]])
def test_bad_input_gets_one_clear_line_and_exit_code_2(data_dir, flag, words):
    p = run([*TINY, "--out_dir=", flag])
    assert p.returncode == 2
    assert words in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.slow
def test_asking_for_cuda_without_a_gpu_is_refused(data_dir):
    p = run([*TINY, "--out_dir=", "--device=cuda"])
    assert p.returncode == 2 and "no CUDA GPU" in p.stderr


@pytest.mark.parametrize("asked, ddp, local_rank, gets", [("cuda", False, 0, "cuda:0"), ("cuda:1", False, 0, "cuda:1"),
                                                          ("cuda", True, 3, "cuda:3"), ("auto", False, 0, "cuda:0")])
def test_cuda_devices_always_carry_an_index_for_set_device(monkeypatch, asked, ddp, local_rank, gets):
    """torch.cuda.set_device refuses a bare 'cuda' (found on an H100, 2026-11-26): the CUDA path, checked without a GPU."""
    import machine
    from train import Config
    given = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: given.append(d))
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32  # setup_device turns TF32 on
    try:
        device, dtype, _ = machine.setup_device(Config(device=asked, dtype="float32", out_dir=""), local_rank, ddp)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    assert str(device) == gets and given == [device] and device.index is not None


@pytest.mark.slow
def test_checkpoint_of_another_head_is_refused(data_dir, tmp_path):
    assert run([*TINY, "--max_iters=2", "--eval_interval=1", f"--out_dir={tmp_path}"]).returncode == 0
    p = run([*TINY, "--max_iters=4", f"--out_dir={tmp_path}", "--resume=true", "--head=ortho"])
    assert p.returncode == 1 and "made for another model: head='tied' (now 'ortho')" in p.stderr


def test_corrupt_checkpoint_is_refused(data_dir, tmp_path):
    (tmp_path / "ckpt.pt").write_bytes(b"not a checkpoint")
    p = run([*TINY, "--max_iters=4", f"--out_dir={tmp_path}", "--resume=true"])
    assert p.returncode == 1 and "not a tiedgpt checkpoint" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_non_finite_loss_stops_naming_the_step_and_keeps_the_last_checkpoint(data_dir, tmp_path, monkeypatch):
    """An absurd learning rate from step 2 on blows the weights up; training stops and the checkpoint stays good."""
    import train as T
    real_lr_at = T.lr_at
    monkeypatch.setattr(T, "lr_at", lambda it, c: 1e30 if it >= 2 else real_lr_at(it, c))
    with pytest.raises(Diverged, match="non-finite loss at step 3"):
        T.train(config(max_iters=50, eval_interval=2, grad_clip=0.0, out_dir=str(tmp_path)), progress=False,
                log=lambda *_: None)
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert state["step"] == 2
    assert all(torch.isfinite(v).all() for v in state["model"].values() if v.is_floating_point())


def test_help_lists_every_flag_with_its_default():
    p = run(["--help"])
    assert p.returncode == 0
    for flag in ("--head=tied", "--n_embd=256", "--lr=0.001", "--resume=False", "--emb_std=None"):
        assert flag in p.stdout


def test_corpus_vocab_shrinks_n_to_the_tokens_the_corpus_uses(data_dir):
    import numpy as np
    from data.prepare import load_split
    from data.prepare import corpus_vocab
    from train import get_batch, train
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


@pytest.mark.slow
def test_bench_prints_speed_memory_and_on_request_a_profile(data_dir):
    p = run(TINY + ["--bench=2", "--bench_profile=true"], script="bench.py")
    assert p.returncode == 0, p.stderr
    assert "tokens/s" in p.stdout and "ms/step" in p.stdout and "peak RSS" in p.stdout
    assert "Self CPU" in p.stdout and "aten::mm" in p.stdout  # the profiler's table of ops


@pytest.mark.slow
def test_bench_against_the_nanogpt_style_baseline_reports_ratios(data_dir):
    """Both sides run in their own process on the same shape; the baseline really is the textbook path."""
    from bench import NANOGPT, bench_against_baseline
    lines = []
    med = bench_against_baseline(config(bench=2), rounds=1, log=lines.append)
    assert set(med) == {"this repo", "nanoGPT-style"}
    assert all(m["tokens_per_s"] > 0 and m["peak_rss_mb"] > 0 for m in med.values())
    assert "--fused_loss=False" in lines[-2] and "--vocab_size=50304" in lines[-2]
    assert "speed" in lines[-1] and "x" in lines[-1]
    assert NANOGPT["fused_loss"] is False and NANOGPT["pos"] == "learned"



# --- reliability: a checkpoint is data, an out_dir belongs to one run, nothing is lost without a word ----------

def one_line(p):
    return len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


class Booby:
    """Unpickling this calls os.system: what a malicious ckpt.pt would do to torch.load(weights_only=False)."""
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.slow
def test_checkpoint_with_pickled_code_is_refused_and_runs_nothing(data_dir, tmp_path):
    assert run([*TINY, "--max_iters=2", "--eval_interval=2", f"--out_dir={tmp_path}"]).returncode == 0
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    pwned = tmp_path / "PWNED"
    state["config"]["trap"] = Booby(str(pwned))
    torch.save(state, tmp_path / "ckpt.pt")
    p = run([*TINY, "--max_iters=4", f"--out_dir={tmp_path}", "--resume=true"])
    assert p.returncode == 1 and one_line(p) and "not a tiedgpt checkpoint" in p.stderr and "code" in p.stderr
    assert not pwned.exists(), "the checkpoint ran code"


@pytest.mark.slow
def test_resuming_on_other_data_is_refused(data_dir, tmp_path):
    book = tmp_path / "book.txt"
    book.write_text("To be, or not to be, that is the question. " * 400)
    out = tmp_path / "run"
    assert run([*TINY, "--max_iters=2", "--eval_interval=2", f"--out_dir={out}"]).returncode == 0
    p = run([*TINY, "--max_iters=4", f"--out_dir={out}", "--resume=true", f"--input={book}"])
    assert p.returncode == 1 and one_line(p) and "trained on other data" in p.stderr, p.stderr


@pytest.mark.parametrize("kind", ["a file"] + [pytest.param(k, marks=pytest.mark.slow)
                                  for k in ("under a file", "unwritable", "the source tree")])
def test_an_unusable_out_dir_gets_one_line(data_dir, tmp_path, kind):
    f = tmp_path / "f"
    f.write_text("x")
    out = {"a file": f, "under a file": f / "sub", "unwritable": "/proc/tiedgpt_out", "the source tree": ROOT}[kind]
    p = run([*TINY, "--max_iters=2", f"--out_dir={out}"])
    assert p.returncode == 2 and one_line(p) and "out_dir" in p.stderr, p.stderr


def test_a_full_disk_while_checkpointing_keeps_the_previous_checkpoint(data_dir, tmp_path, monkeypatch):
    import errno
    import train as T
    T.train(config(max_iters=2, eval_interval=2, lr_decay_iters=4, out_dir=str(tmp_path)), progress=False,
            log=lambda *_: None)
    before = (tmp_path / "ckpt.pt").read_bytes()
    real_save = torch.save

    def full(obj, path, *a, **k):  # write a little, then fail as a full disk does
        path.write(b"partial")  # (the file torch.save is given)
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(TrainingError, match="No space left on device.*previous checkpoint"):
        T.train(config(max_iters=4, eval_interval=2, lr_decay_iters=4, out_dir=str(tmp_path), resume=True), progress=False,
                log=lambda *_: None)
    monkeypatch.setattr(torch, "save", real_save)
    assert (tmp_path / "ckpt.pt").read_bytes() == before and not list(tmp_path.glob("*.tmp"))


@pytest.mark.slow
def test_a_second_run_on_a_busy_out_dir_is_refused(data_dir, tmp_path):
    import train as T
    lock = T.claim_out_dir(config(out_dir=str(tmp_path)))  # this test process plays the first run
    try:
        p = run([*TINY, "--max_iters=2", f"--out_dir={tmp_path}"])
    finally:
        lock.close()
    assert p.returncode == 1 and one_line(p) and f"in use by another run (pid {os.getpid()})" in p.stderr
    assert run([*TINY, "--max_iters=2", f"--out_dir={tmp_path}"]).returncode == 0  # free again


@pytest.mark.slow
def test_a_fresh_run_never_overwrites_an_earlier_runs_checkpoint(data_dir, tmp_path):
    assert run([*TINY, "--max_iters=2", "--eval_interval=2", f"--out_dir={tmp_path}"]).returncode == 0
    before = (tmp_path / "ckpt.pt").read_bytes()
    p = run([*TINY, "--max_iters=2", "--eval_interval=2", f"--out_dir={tmp_path}", "--seed=2"])
    assert p.returncode == 1 and one_line(p) and "--resume=true" in p.stderr and "--overwrite=true" in p.stderr
    assert (tmp_path / "ckpt.pt").read_bytes() == before
    p = run([*TINY, "--max_iters=2", "--eval_interval=2", f"--out_dir={tmp_path}", "--seed=2", "--overwrite=true"])
    assert p.returncode == 0 and (tmp_path / "ckpt.pt").read_bytes() != before


def test_each_head_gets_its_own_default_out_dir():
    from train import Config
    assert Config(head="ortho").out_dir == os.path.join("out", "ortho")
    assert Config(head="logn").out_dir != Config(head="ortho").out_dir  # the README's two runs can't collide


@pytest.mark.parametrize("field, value", [
    ("grad_clip", float("nan")), ("norm_eps", -1.0), ("norm_eps", float("nan")), ("emb_std", float("inf")),
    ("min_lr", float("nan")), ("weight_decay", float("inf")), ("lr", float("inf")), ("beta2", float("nan")),
    ("dropout", float("nan")), ("data_seed", -1), ("seed", 2 ** 64),
])
def test_non_finite_and_out_of_range_settings_are_refused_naming_the_setting(field, value):
    from train import Config
    with pytest.raises(ValueError, match=field):
        Config(**{field: value})


@pytest.mark.slow
def test_mps_is_a_choice_and_is_refused_without_an_apple_gpu(data_dir):
    from train import Config
    assert Config(device="mps").device == "mps"
    if torch.backends.mps.is_available():
        pytest.skip("this machine has an Apple GPU")
    p = run([*TINY, "--out_dir=", "--device=mps"])
    assert p.returncode == 2 and one_line(p) and "no usable Apple GPU" in p.stderr


@pytest.mark.slow
def test_help_describes_every_flag():
    from dataclasses import fields

    from tiedgpt import HEADS
    from train import Config
    assert all(f.metadata.get("help") for f in fields(Config)), "a flag without a --help line"
    assert all(h in dict((f.name, f) for f in fields(Config))["head"].metadata["help"] for h in HEADS)
    p = run(["--help"])
    assert "ortho" in p.stdout and "mps" in p.stdout and "corpus" in p.stdout  # the allowed values are listed


def test_a_piped_run_prints_plain_lines_and_states_the_expected_first_loss(data_dir, tmp_path):
    """stdout to a file or pipe: no carriage-return bar, one line per logged row, the final line once; the first
    lines say what step 0 should show (the head's predicted first loss next to ln n)."""
    from tiedgpt import predicted_initial_loss
    from train import Config
    p = run([*TINY, "--max_iters=4", "--eval_interval=2", "--log_interval=2", f"--out_dir={tmp_path}"])
    assert p.returncode == 0 and "\r" not in p.stdout
    assert p.stdout.count("final val loss") == 1 and "step 2/4: loss" in p.stdout
    expected = predicted_initial_loss(Config(n_layer=1, n_head=2, n_embd=32, block_size=16).model_config(),
                                      json.load(open(tmp_path / "config.json"))["dataset"]["repeat_fraction"])
    assert f"expect at step 0: loss ~ {expected:.2f}" in p.stdout and "ln(n) = 10.82" in p.stdout


@pytest.mark.slow
def test_a_divergence_is_reported_at_the_step_it_happened(data_dir):
    """Rows are logged every 10 steps, but the message names the step whose loss went non-finite."""
    bad = ["--max_iters=30", "--warmup_iters=0", "--lr=1e30", "--grad_clip=0", "--out_dir="]
    every = run([*TINY, *bad, "--eval_interval=100"])
    sparse = run([*TINY, *bad, "--log_interval=10", "--eval_interval=10"])
    step = every.stderr.split("non-finite loss at step ")[1].split(";")[0]
    assert int(step) < 10 and f"non-finite loss at step {step};" in sparse.stderr, sparse.stderr


@pytest.mark.slow
def test_tokens_count_on_from_the_checkpoint_when_a_run_is_extended(data_dir, tmp_path):
    assert run([*TINY, "--max_iters=4", "--eval_interval=4", "--lr_decay_iters=8", f"--out_dir={tmp_path}"]).returncode == 0
    assert run([*TINY, "--max_iters=8", "--eval_interval=4", "--lr_decay_iters=8", f"--out_dir={tmp_path}",
                "--resume=true"]).returncode == 0
    r = rows(tmp_path)
    assert r[7]["tokens"] == 8 * 4 * 16  # 8 steps of 4 x 16 (a changed batch_size is refused: test_checkpoint.py)


@pytest.mark.slow
def test_the_rmsnorm_softcap_variant_trains_from_the_command_line(data_dir):
    p = run([*TINY, "--max_iters=3", "--eval_interval=3", "--out_dir=", "--norm=rmsnorm", "--head=softcap",
             "--softcap=5"])
    assert p.returncode == 0, p.stderr
    assert "head=softcap" in p.stdout and "final val loss" in p.stdout


def test_each_default_that_stands_for_another_value_is_worked_out_in_one_place(monkeypatch):
    """min_lr, lr_decay_iters, weight_decay and data_seed default to None, which stands for another value. One function
    works each out (config.resolved_defaults); change its rule and every reader follows: the lr schedule, the
    optimizer, the batch order and the checkpoint's settings check."""
    import config as C
    import train as T
    from checkpoint import run_settings
    from optim import make_optimizer
    from tiedgpt import GPT
    real = C.resolved_defaults

    def other_rule(get):  # a changed rule: min_lr lr/2, the cosine twice max_iters, decay 0.5, batches from seed + 1
        r = real(get)
        r.update(min_lr=get("lr") / 2, lr_decay_iters=2 * get("max_iters"), weight_decay=0.5, data_seed=get("seed") + 1)
        return r
    c = config(lr=1e-3, max_iters=10, warmup_iters=0, seed=7)
    monkeypatch.setattr(C, "resolved_defaults", other_rule)
    assert T.lr_at(1000, c) == pytest.approx(5e-4)  # past the cosine: min_lr
    assert T.lr_at(10, c) > 5e-4 + 1e-6  # step 10 is mid-cosine now (it ends at 20)
    opt = make_optimizer(GPT(c.model_config()), c)
    assert opt.param_groups[0]["weight_decay"] == 0.5
    import dataclasses
    s = run_settings(dataclasses.asdict(c), {})
    assert (s["min_lr"], s["lr_decay_iters"], s["weight_decay"], s["data_seed"]) == (5e-4, 20, 0.5, 8)
    assert c.resolved()["data_seed"] == 8  # train.setup seeds the batch generator from c.resolved()
