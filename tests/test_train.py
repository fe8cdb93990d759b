"""train.py: reproducible, resumable, distributable, and strict about its settings. (What a run promises about its
files and checkpoints is in test_promises.py.)

Every run here is a tiny model (1 layer, d=32) on pydoc's topics, prepared into a temp dir, so the whole file takes
seconds of CPU."""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import train as T
from helpers import ROOT, TINY, config, rows, run  # the fixture data_dir is in conftest.py too
from rundir import TrainingError, load_checkpoint


def quiet(*_):
    pass


def test_same_seed_gives_same_losses_on_cpu(data_dir):
    a = T.train(config(max_iters=8, eval_interval=4, out_dir=""), progress=False, log=quiet)
    b = T.train(config(max_iters=8, eval_interval=4, out_dir=""), progress=False, log=quiet)
    c = T.train(config(max_iters=8, eval_interval=4, out_dir="", seed=7), progress=False, log=quiet)
    assert [r.get("train_loss") for r in a] == [r.get("train_loss") for r in b]
    assert [r.get("train_loss") for r in a] != [r.get("train_loss") for r in c]


def test_training_lowers_the_loss_and_logs_what_the_lessons_read(data_dir):
    h = T.train(config(max_iters=6, eval_interval=3, out_dir=""), progress=False, log=quiet)
    assert [r["step"] for r in h] == list(range(7))
    for r in h[:-1]:
        assert {"train_loss", "emb_grad_norm", "emb_rms", "resid_rms", "lnf_gain", "lr", "tokens"} <= r.keys()
    assert [r["step"] for r in h if "val_loss" in r] == [0, 3, 6]
    assert h[0]["emb_rms"] == pytest.approx(32 ** -0.5, rel=0.02)  # sigma = d^-1/2 at step 0
    assert 0 < h[0]["resid_rms"] < 1e-3  # zero-initialised branches, after one step
    assert h[-2]["train_loss"] < h[0]["train_loss"]


@pytest.mark.slow
def test_fast_path_keeps_the_training_curve_of_the_straightforward_path(data_dir):
    """The speed-ups (fused output projection + loss, fused AdamW) change no number beyond float rounding:
    30 steps of train() track the textbook path (logits then F.cross_entropy, foreach AdamW)."""
    kw = dict(max_iters=30, eval_interval=15, out_dir="", vocab_size=50257)
    fast = T.train(config(**kw), progress=False, log=quiet)
    plain = T.train(config(fused_loss=False, fused_adamw=False, **kw), progress=False, log=quiet)
    for key in ("train_loss", "val_loss", "emb_grad_norm"):
        a = [r[key] for r in fast if key in r]
        b = [r[key] for r in plain if key in r]
        assert len(a) >= 3 and a == pytest.approx(b, rel=1e-4), key
    assert fast[-2]["train_loss"] < fast[0]["train_loss"] - 0.3  # it learned: the curves had room to differ


@pytest.mark.slow
def test_bfloat16_training_tracks_float32(data_dir):
    """bf16 autocast (what a GPU run uses; here on the CPU) follows the fp32 curve to bf16's precision."""
    kw = dict(max_iters=20, eval_interval=20, out_dir="")
    f32 = [r["train_loss"] for r in T.train(config(dtype="float32", **kw), progress=False, log=quiet)[:-1]]
    b16 = [r["train_loss"] for r in T.train(config(dtype="bfloat16", **kw), progress=False, log=quiet)[:-1]]
    assert b16 == pytest.approx(f32, rel=0.02)
    assert b16 != f32  # it really ran in bf16


def test_a_run_writes_its_config_metrics_and_checkpoint(data_dir, tmp_path):
    p = run([*TINY, "--max_iters=4", "--eval_interval=2", f"--out_dir={tmp_path}"])
    assert p.returncode == 0, p.stderr
    cfg = json.load(open(tmp_path / "config.json"))
    assert cfg["config"]["head"] == "tied" and cfg["environment"]["torch"] == torch.__version__
    assert cfg["dataset"]["corpus"] == "pydoc_topics"
    assert sorted(rows(tmp_path)) == [0, 1, 2, 3, 4]
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["step"] == 4
    assert "final val loss" in p.stdout and "\r" not in p.stdout  # piped: plain lines, no bar


def test_a_piped_run_states_the_expected_first_loss(data_dir, tmp_path, capsys):
    """The first lines say what step 0 should show: the head's predicted first loss next to ln n (lesson 01)."""
    from tiedgpt import predicted_initial_loss
    assert T.main([*TINY, "--max_iters=4", "--eval_interval=2", "--log_interval=2", f"--out_dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert out.count("final val loss") == 1 and "step 2/4: loss" in out
    expected = predicted_initial_loss(config().model_config(),
                                      json.load(open(tmp_path / "config.json"))["dataset"]["repeat_fraction"])
    assert f"expect at step 0: loss ~ {expected:.2f}" in out and "ln(n) = 10.82" in out


@pytest.mark.slow
def test_ddp_two_processes_match_one_process_of_the_same_global_batch(data_dir, tmp_path):
    # step 3 evaluates but is not a logging step: every process must still log it (a rank that doesn't, hangs the rest)
    args = [*TINY, "--max_iters=6", "--eval_interval=3", "--log_interval=2", "--batch_size=8", "--grad_clip=0.5"]
    one = run([*args, f"--out_dir={tmp_path / 'one'}"])
    assert one.returncode == 0, one.stderr
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          "train.py", *args, f"--out_dir={tmp_path / 'two'}"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert two.returncode == 0, two.stderr[-2000:]
    a, b = rows(tmp_path / "one"), rows(tmp_path / "two")
    assert sorted(a) == sorted(b)
    for s in a:  # every loss either run logged at that step (the last step's row is an evaluation only)
        for k in ("train_loss", "val_loss"):
            assert (k in a[s]) == (k in b[s]), (s, k)
            if k in a[s]:
                assert b[s][k] == pytest.approx(a[s][k], rel=1e-5, abs=1e-5), (s, k)
    w1 = torch.load(tmp_path / "one" / "ckpt.pt", weights_only=True)["model"]
    w2 = torch.load(tmp_path / "two" / "ckpt.pt", weights_only=True)["model"]
    for k in w1:
        torch.testing.assert_close(w1[k], w2[k], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("asked, ddp, local_rank, gets", [("cuda", False, 0, "cuda:0"), ("cuda:1", False, 0, "cuda:1"),
                                                          ("cuda", True, 3, "cuda:3"), ("auto", False, 0, "cuda:0")])
def test_cuda_devices_always_carry_an_index_for_set_device(monkeypatch, asked, ddp, local_rank, gets):
    """torch.cuda.set_device refuses a bare 'cuda' (found on an H100, 2026-11-26): the CUDA path, checked without a GPU."""
    given = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: given.append(d))
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32  # setup_device turns TF32 on
    try:
        device, dtype, _ = T.setup_device(config(device=asked, dtype="float32", out_dir=""), ddp, local_rank)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    assert str(device) == gets and given == [device] and device.index is not None


def test_a_non_finite_loss_stops_naming_the_step_and_the_checkpoint_kept(data_dir, tmp_path, monkeypatch):
    """An absurd learning rate from step 5 on blows the weights up; training stops naming the step, and the checkpoint
    written before it (step 4) stays good."""
    real_lr_at = T.lr_at
    monkeypatch.setattr(T, "lr_at", lambda it, c: 1e30 if it >= 5 else real_lr_at(it, c))
    with pytest.raises(T.Diverged) as e:
        T.train(config(max_iters=20, eval_interval=2, grad_clip=0.0, out_dir=str(tmp_path)), progress=False, log=quiet)
    assert f"non-finite loss at step {e.value.step};" in str(e.value) and e.value.step in (5, 6)
    assert f"{tmp_path / 'ckpt.pt'}, step 4" in str(e.value) and len(e.value.history) >= 5
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert state["step"] == 4 and all(torch.isfinite(v).all() for v in state["model"].values())


def test_a_second_ctrl_c_stops_at_once_even_inside_a_long_evaluation(data_dir, tmp_path, capsys, monkeypatch):
    """The first Ctrl-C (or SIGTERM) asks the loop to checkpoint and stop at the next step; a long evaluation would make
    the user wait for it. A second one stops at once, wherever the run is, and says so in one line."""
    stop, handlers = T.catch_stop_signals()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert stop == [True]  # the first: noted, the run goes on to the step's end
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # (a long evaluation would be here)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    monkeypatch.setattr(T, "evaluate", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    assert T.main([*TINY, "--max_iters=4", f"--out_dir={tmp_path}"]) == 130
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Ctrl-C" in err and "last checkpoint" in err


# ----------------------------------------------------------------------------------------------------
# Settings: each a --key=value flag, each checked

def test_help_lists_every_flag_with_its_default_and_what_it_does():
    from dataclasses import fields
    p = run(["--help"])
    assert p.returncode == 0
    for flag in ("--head=tied", "--n_embd=256", "--lr=0.001", "--resume=False", "--emb_std=None"):
        assert flag in p.stdout
    assert all(f.metadata.get("help") for f in fields(T.Config)), "a flag without a --help line"
    assert "ortho" in p.stdout and "mps" in p.stdout and "corpus" in p.stdout  # the allowed values are listed


def test_each_head_gets_its_own_default_out_dir():
    assert T.Config(head="ortho").out_dir == os.path.join("out", "ortho")
    assert T.Config(head="logn").out_dir != T.Config(head="ortho").out_dir  # the README's two runs can't collide


@pytest.mark.parametrize("field, value", [
    ("grad_clip", -1.0), ("norm_eps", -1.0), ("emb_std", 0.0), ("min_lr", 0.01), ("weight_decay", -0.1),
    ("lr", 0.0), ("beta2", 1.0), ("dropout", 1.0), ("data_seed", -1), ("dense_val_windows", 0), ("lr_decay_iters", -1),
    ("device", "cuda1"), ("dtype", "float16"), ("vocab", "some"),
])
def test_out_of_range_settings_are_refused_naming_the_setting(field, value):
    with pytest.raises(ValueError, match=field if field not in ("grad_clip", "weight_decay", "beta2") else "must be"):
        T.Config(**{field: value})


def test_flags_that_would_do_nothing_are_refused():
    with pytest.raises(ValueError, match="--vocab_size has no effect with --vocab=corpus"):
        T.parse_args(["--vocab=corpus", "--vocab_size=1000"])
    with pytest.raises(ValueError, match="beta1/--beta2 are AdamW's"):
        T.Config(optimizer="tiger", beta2=0.999)


def test_corpus_vocab_shrinks_n_to_the_tokens_the_corpus_uses(data_dir):
    import numpy as np
    from data.prepare import corpus_vocab, load_split
    c = config(vocab="corpus")
    train_data, val_data = load_split("pydoc_topics", "train"), load_split("pydoc_topics", "val")
    ids, lut, c2 = corpus_vocab(c, train_data, val_data)
    assert c2.vocab_size == len(ids) == len(set(train_data.tolist()) | set(val_data.tolist())) < 50257
    x, y = T.get_batch(train_data, 4, 16, torch.Generator().manual_seed(0), lut=lut)
    assert x.min() >= 0 and x.max() < c2.vocab_size
    x0, _ = T.get_batch(train_data, 4, 16, torch.Generator().manual_seed(0))
    assert np.array_equal(ids[x.numpy()], x0.numpy())  # renumbering is invertible
    h = T.train(config(vocab="corpus", max_iters=2, eval_interval=2, out_dir=""), progress=False, log=quiet)
    assert h[-1]["val_loss"] < 12


def test_each_default_that_stands_for_another_value_is_worked_out_in_one_place(monkeypatch):
    """min_lr, lr_decay_iters, weight_decay and data_seed default to None, which stands for another value. One function
    works each out (config.resolved_defaults); change its rule and every reader follows: the lr schedule, the
    optimizer, the batch order and the checkpoint's settings check."""
    import config as C
    from optim import make_optimizer
    from rundir import run_settings
    from tiedgpt import GPT
    real = C.resolved_defaults

    def other_rule(get):  # a changed rule: min_lr lr/2, the cosine twice max_iters, decay 0.5, batches from seed + 1
        return dict(real(get), min_lr=get("lr") / 2, lr_decay_iters=2 * get("max_iters"), weight_decay=0.5,
                    data_seed=get("seed") + 1)
    c = config(lr=1e-3, max_iters=10, warmup_iters=0, seed=7)
    monkeypatch.setattr(C, "resolved_defaults", other_rule)
    assert T.lr_at(1000, c) == pytest.approx(5e-4)  # past the cosine: min_lr
    assert T.lr_at(10, c) > 5e-4 + 1e-6  # step 10 is mid-cosine now (it ends at 20)
    assert make_optimizer(GPT(c.model_config()), c).param_groups[0]["weight_decay"] == 0.5
    s = run_settings(dataclasses.asdict(c))
    assert (s["min_lr"], s["lr_decay_iters"], s["weight_decay"], s["data_seed"]) == (5e-4, 20, 0.5, 8)
    assert c.resolved()["data_seed"] == 8  # train.setup seeds the batch generator from c.resolved()


# ----------------------------------------------------------------------------------------------------
# Resuming: what may change (max_iters, with the schedule kept) and what may not (what the run computes)

@pytest.fixture(scope="module")
def made(data_dir, tmp_path_factory):
    """A finished 4-step run with a checkpoint at step 4 (and dense val on, so that every setting has something to
    change), on the CPU, so that it ran in float32 on every machine."""
    out = tmp_path_factory.mktemp("made")
    T.train(config(max_iters=4, eval_interval=2, dense_val_until=2, dense_val_windows=8, device="cpu",
                   out_dir=str(out)), progress=False, log=quiet)
    return out


SAME = dict(max_iters=6, lr_decay_iters=4, eval_interval=2, dense_val_until=2, dense_val_windows=8, dtype="float32")


def checked(made, **kw):
    """load_checkpoint of the made run's checkpoint by a run of config(**kw), with the data it was made on."""
    state = torch.load(made / "ckpt.pt", weights_only=True)
    return load_checkpoint(str(made / "ckpt.pt"), config(**kw), state["data"])


@pytest.mark.parametrize("field, value", [
    ("seed", 7), ("data_seed", 5), ("batch_size", 8), ("block_size", 8), ("dtype", "bfloat16"), ("dropout", 0.1),
    ("lr", 3e-3), ("min_lr", 0.0), ("warmup_iters", 5), ("lr_decay_iters", 100), ("weight_decay", 0.0),
    ("beta1", 0.8), ("beta2", 0.99), ("grad_clip", 0.5), ("eval_interval", 1), ("eval_iters", 3),
    ("eval_full_val", True), ("dense_val_until", 4), ("dense_val_windows", 16), ("log_interval", 2),
    ("optimizer", "lamb"), ("head", "ortho"), ("n_embd", 64),
])
def test_every_setting_that_changes_what_a_run_computes_is_checked_on_resume(made, field, value):
    with pytest.raises(TrainingError, match=f"{field}=") as e:
        checked(made, **{**SAME, field: value})
    assert "\n" not in str(e.value)
    checked(made, **SAME)  # and the same settings resume


def test_a_changed_seed_is_named_not_the_defaults_that_follow_it(made):
    with pytest.raises(TrainingError, match=r"seed=1337 \(now 7\); ") as e:
        checked(made, **SAME, seed=7)
    assert "data_seed" not in str(e.value) and "--seed=1337" in str(e.value)


def test_extending_a_run_keeps_its_schedule_or_is_refused(data_dir, tmp_path):
    """lr_decay_iters=None means max_iters: a larger max_iters would stretch the cosine the run was on. So the extension
    is refused with the flag that keeps the schedule, and with that flag the extended run is the run made at the larger
    max_iters from the start, row for row. A max_iters below the checkpoint's step is refused, naming the step."""
    kw = dict(eval_interval=2, out_dir=str(tmp_path))
    T.train(config(max_iters=4, **kw), progress=False, log=quiet)
    with pytest.raises(TrainingError, match=r"lr_decay_iters=4 \(now 8, as lr_decay_iters=None stands for max_iters\)"
                                            r".*--lr_decay_iters=4"):
        T.train(config(max_iters=8, resume=True, **kw), progress=False, log=quiet)
    with pytest.raises(TrainingError, match="at step 4, past --max_iters=3: give --max_iters=4 or more"):
        T.train(config(max_iters=3, resume=True, **kw), progress=False, log=quiet)
    T.train(config(max_iters=8, lr_decay_iters=4, resume=True, **kw), progress=False, log=quiet)
    whole = T.train(config(max_iters=8, lr_decay_iters=4, eval_interval=2, out_dir=""), progress=False, log=quiet)
    keys = ("train_loss", "val_loss", "lr", "tokens")
    assert {r["step"]: [r.get(k) for k in keys] for r in whole} == \
           {s: [r.get(k) for k in keys] for s, r in rows(tmp_path).items()}


def test_a_run_records_the_dtype_it_ran_in_not_auto(data_dir, tmp_path):
    """dtype=auto picks bfloat16 on a GPU that has it, float32 elsewhere: the checkpoint and config.json record the one
    that ran, so a run made in bfloat16 on a GPU is not resumed in float32 on a CPU without a word."""
    T.train(config(max_iters=1, eval_interval=1, out_dir=str(tmp_path)), progress=False, log=quiet)  # device=auto
    ran = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["config"]["dtype"] == ran
    assert json.loads((tmp_path / "config.json").read_text())["config"]["dtype"] == ran


@pytest.mark.parametrize("why", ["a missing --input", "--resume without a checkpoint", "a model too big"])
def test_a_refused_run_leaves_no_out_dir_behind(data_dir, tmp_path, capsys, why):
    out = tmp_path / "new"
    args = {"a missing --input": [f"--input={tmp_path / 'nope.txt'}"], "--resume without a checkpoint": ["--resume=true"],
            "a model too big": ["--n_embd=16384"]}
    assert T.main([*TINY, *args[why], "--max_iters=2", f"--out_dir={out}"]) in (1, 2)
    assert len(capsys.readouterr().err.strip().splitlines()) == 1 and not out.exists()
