"""A resumed run is the run that was checkpointed, or it is refused; every file the project reads is checked field by
field; every refusal is one line and a non-zero exit. (Issue 32: an adversarial pass's ten cases and four notes.)

Tiny runs (1 layer, d=32) on pydoc's topics prepared into a temp dir, and train.main called in-process (the command
line without a new Python each time), so the whole file takes seconds of CPU."""
import json
import math
import os

import pytest
import torch

import train as T
from helpers import TINY, config, rows  # and the fixture data_dir
from probes import emb_turn
from checkpoint import load_checkpoint
from errors import Diverged, TrainingError


def quiet(*_):
    pass


def cli(args, capsys):
    """train.py's command line, in this process: (exit code, stderr)."""
    capsys.readouterr()
    code = T.main([*TINY, *args])
    return code, capsys.readouterr().err


def one_line(err):
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err




@pytest.fixture(scope="module")
def made(data_dir, tmp_path_factory):
    """A finished 4-step run with a checkpoint at step 4 (and dense val and log_rows on, so that every setting has
    something to change). On the CPU, so that it ran in float32 on every machine: on a GPU it would be bfloat16, and
    asking for bfloat16 would change nothing."""
    out = tmp_path_factory.mktemp("made")
    T.train(config(max_iters=4, eval_interval=2, dense_val_until=2, dense_val_windows=8, log_rows=True,
                   device="cpu", out_dir=str(out)), progress=False, log=quiet)
    return out


# --- 1. --overwrite=true removes the old run before the new one can be killed --------------------------------------

def test_a_killed_overwrite_run_can_never_be_resumed_into_the_old_runs_weights(data_dir, tmp_path, monkeypatch):
    """An overwriting run killed before its first checkpoint leaves nothing of the old run to resume: --resume is
    refused (no checkpoint) instead of continuing the old run's weights under the new run's metrics."""
    T.train(config(max_iters=4, eval_interval=2, out_dir=str(tmp_path)), progress=False, log=quiet)
    real_lr_at = T.lr_at

    def killed_at_step_3(it, c):  # the new run dies at step 3, before its first checkpoint (step 10)
        if it == 3:
            raise RuntimeError("killed")
        return real_lr_at(it, c)
    monkeypatch.setattr(T, "lr_at", killed_at_step_3)
    with pytest.raises(RuntimeError, match="killed"):
        T.train(config(max_iters=20, eval_interval=10, lr=3e-3, overwrite=True, out_dir=str(tmp_path)),
                progress=False, log=quiet)
    monkeypatch.setattr(T, "lr_at", real_lr_at)
    assert not (tmp_path / "ckpt.pt").exists()
    with pytest.raises(TrainingError, match="no checkpoint"):
        T.train(config(max_iters=20, eval_interval=10, lr=3e-3, resume=True, out_dir=str(tmp_path)),
                progress=False, log=quiet)


# --- 2, 3. every setting that changes what is computed or logged is the checkpoint's ----------------------------

def test_a_changed_seed_on_resume_is_one_line_naming_both_values_and_the_way_out(made, capsys):
    before = (made / "config.json").read_text(), (made / "metrics.jsonl").read_text()
    code, err = cli(["--max_iters=6", "--eval_interval=2", "--dense_val_until=2", "--dense_val_windows=8",
                     "--log_rows=true", "--device=cpu", f"--out_dir={made}", "--resume=true", "--seed=7"], capsys)
    assert code == 1 and one_line(err), err
    assert "seed=1337 (now 7)" in err and "--seed=1337" in err and "--overwrite=true" in err
    assert ((made / "config.json").read_text(), (made / "metrics.jsonl").read_text()) == before  # nothing rewritten


@pytest.mark.parametrize("field, value", [
    ("seed", 7), ("data_seed", 5), ("batch_size", 8), ("block_size", 8), ("dtype", "bfloat16"), ("dropout", 0.1),
    ("lr", 3e-3), ("min_lr", 0.0), ("warmup_iters", 5), ("lr_decay_iters", 100), ("weight_decay", 0.0),
    ("beta1", 0.8), ("beta2", 0.99), ("grad_clip", 0.5), ("eval_interval", 1), ("eval_iters", 3),
    ("eval_full_val", True), ("dense_val_until", 4), ("dense_val_windows", 16), ("log_interval", 2),
    ("log_rows", False), ("optimizer", "lamb"),
])
def test_every_setting_that_changes_what_is_computed_or_logged_is_checked_on_resume(made, field, value):
    same = dict(max_iters=6, lr_decay_iters=4, eval_interval=2, dense_val_until=2, dense_val_windows=8, log_rows=True)
    with pytest.raises(TrainingError, match=f"{field}=") as e:
        load_checkpoint(str(made / "ckpt.pt"), config(**{**same, field: value}))
    assert "\n" not in str(e.value)
    load_checkpoint(str(made / "ckpt.pt"), config(**same))  # and the same settings resume


def test_a_run_records_the_dtype_it_ran_in_not_auto(data_dir, tmp_path):
    """dtype=auto picks bfloat16 on a GPU that has it, float32 elsewhere: the checkpoint and config.json record the one
    that ran, so a run made in bfloat16 on a GPU is not resumed in float32 on a CPU without a word."""
    made = tmp_path
    T.train(config(max_iters=1, eval_interval=1, out_dir=str(made)), progress=False, log=quiet)  # device=auto
    ran = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"
    assert torch.load(made / "ckpt.pt", weights_only=True)["config"]["dtype"] == ran
    assert json.loads((made / "config.json").read_text())["config"]["dtype"] == ran


def test_extending_a_run_keeps_its_schedule_or_is_refused(data_dir, tmp_path):
    """lr_decay_iters=None means max_iters: a larger max_iters would stretch the cosine the run was on. So the
    extension is refused with the flag that keeps the schedule, and with that flag the extended run is the run made
    at the larger max_iters from the start, row for row."""
    kw = dict(eval_interval=2, out_dir=str(tmp_path))
    T.train(config(max_iters=4, **kw), progress=False, log=quiet)
    with pytest.raises(TrainingError, match=r"lr_decay_iters=None, i.e. max_iters = 4 \(now None, i.e. max_iters "
                                              r"= 8\).*--lr_decay_iters=4"):
        T.train(config(max_iters=8, resume=True, **kw), progress=False, log=quiet)
    T.train(config(max_iters=8, lr_decay_iters=4, resume=True, **kw), progress=False, log=quiet)
    whole = T.train(config(max_iters=8, lr_decay_iters=4, eval_interval=2, out_dir=""), progress=False, log=quiet)
    keys = ("train_loss", "val_loss", "lr", "tokens")
    assert {r["step"]: [r.get(k) for k in keys] for r in whole} == \
           {s: [r.get(k) for k in keys] for s, r in rows(tmp_path).items()}


@pytest.mark.parametrize("lr_decay_iters", [4, None])
def test_resuming_with_max_iters_below_the_checkpoints_step_is_refused(made, lr_decay_iters):
    """Named first, before the schedule it also changes (lr_decay_iters=None means max_iters): the fix is one flag."""
    with pytest.raises(TrainingError, match="at step 4, past --max_iters=3: give --max_iters=4 or more$"):
        load_checkpoint(str(made / "ckpt.pt"), config(max_iters=3, lr_decay_iters=lr_decay_iters, eval_interval=2,
                                                        dense_val_until=2, dense_val_windows=8, log_rows=True))


def test_a_resumed_log_rows_run_measures_emb_turn_from_the_init_it_saved(data_dir, tmp_path):
    """emb_turn is measured from E at init: the checkpoint keeps that init (emb0), so a resumed run measures from the
    reference the uninterrupted run measures from."""
    kw = dict(eval_interval=2, log_rows=True, lr_decay_iters=6)
    T.train(config(max_iters=2, out_dir=str(tmp_path), **kw), progress=False, log=quiet)
    saved = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    E = saved["model"]["transformer.wte.weight"]
    assert saved["emb0"].shape == E.shape and emb_turn(E, saved["emb0"]) > 0
    resumed = T.train(config(max_iters=6, out_dir=str(tmp_path), resume=True, **kw), progress=False, log=quiet)
    whole = T.train(config(max_iters=6, out_dir="", **kw), progress=False, log=quiet)
    assert [r.get("emb_turn") for r in resumed] == [r.get("emb_turn") for r in whole]


# --- 7. a checkpoint that loads but holds the wrong contents ---------------------------------------------------------

def tamper(state, kind):
    m, o = state["model"], state["optimizer"]
    if kind == "a config that claims another shape":
        state["config"]["n_embd"] = 64  # resumed with --n_embd=64: the weights are 32 wide
    elif kind == "a missing state-dict key":
        del m["transformer.ln_f.weight"]
    elif kind == "optimizer={}":
        state["optimizer"] = {}
    elif kind == "a 3-byte data_rng":
        state["data_rng"] = torch.tensor([1, 2, 3], dtype=torch.uint8)
    elif kind == "step='abc'":
        state["step"] = "abc"
    elif kind == "a NaN weight":
        m["transformer.wte.weight"][0, 0] = math.nan
    elif kind == "optimizer moments of the wrong shape":
        o["state"][0]["exp_avg"] = o["state"][0]["exp_avg"][:1]
    elif kind == "loss_sum=inf":
        state["loss_sum"] = math.inf
    elif kind == "a weight of another dtype kind":
        m["transformer.ln_f.weight"] = m["transformer.ln_f.weight"].long()


@pytest.mark.parametrize("kind, words", [
    ("a config that claims another shape", "but the config it records makes"),
    ("a missing state-dict key", "transformer.ln_f.weight"),
    ("optimizer={}", "its optimizer is"),
    ("a 3-byte data_rng", "its data_rng is a torch.uint8 tensor of 3 values"),
    ("step='abc'", "its step is 'abc'"),
    ("a NaN weight", "its model['transformer.wte.weight'] holds non-finite values"),
    ("optimizer moments of the wrong shape", "exp_avg"),
    ("loss_sum=inf", "loss_sum"),
    ("a weight of another dtype kind", "torch.int64"),
])
def test_a_checkpoint_with_the_wrong_contents_is_one_line_naming_the_field(data_dir, tmp_path, capsys, kind, words):
    T.train(config(max_iters=2, eval_interval=2, out_dir=str(tmp_path)), progress=False, log=quiet)
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    tamper(state, kind)
    torch.save(state, tmp_path / "ckpt.pt")
    width = ["--n_embd=64"] if kind.startswith("a config") else []
    code, err = cli(["--max_iters=2", "--eval_interval=2", f"--out_dir={tmp_path}", "--resume=true", *width], capsys)
    assert code == 1 and one_line(err) and words in err and str(tmp_path / "ckpt.pt") in err, err


def test_lamb_state_relabelled_adamw_is_refused_naming_what_it_holds(data_dir, tmp_path, capsys):
    T.train(config(max_iters=2, eval_interval=2, optimizer="lamb", weight_decay=0.05, out_dir=str(tmp_path)),
            progress=False, log=quiet)
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    state["config"]["optimizer"] = "adamw"
    torch.save(state, tmp_path / "ckpt.pt")
    code, err = cli(["--max_iters=2", "--eval_interval=2", "--weight_decay=0.05", f"--out_dir={tmp_path}",
                     "--resume=true"], capsys)
    assert code == 1 and one_line(err) and "['m', 't', 'v']" in err and "AdamW keeps" in err, err


def test_a_line_cut_by_a_kill_is_dropped_and_a_damaged_metrics_file_is_refused_untouched(data_dir, tmp_path):
    """The checkpoint holds its run's rows: a line cut by a kill past it is dropped (the run writes it again); a
    metrics.jsonl damaged before it is no run's file any more, refused in one line and left as it is."""
    kw = dict(eval_interval=2, lr_decay_iters=6, out_dir=str(tmp_path))
    T.train(config(max_iters=2, **kw), progress=False, log=quiet)
    good = (tmp_path / "metrics.jsonl").read_text()
    (tmp_path / "metrics.jsonl").write_text(good + '{"step": 2, "train_lo')  # a kill mid-write, past the checkpoint
    assert [r["step"] for r in T.train(config(max_iters=3, resume=True, **kw), progress=False, log=quiet)] == [0, 1, 2, 3]
    assert not list(tmp_path.glob("metrics.jsonl.set-aside-*"))
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    damaged = "\n".join(lines[:1] + ["[1, 2]"] + lines[1:]) + "\n"
    (tmp_path / "metrics.jsonl").write_text(damaged)
    with pytest.raises(TrainingError, match="metrics.jsonl is not a tiedgpt run's metrics.jsonl") as e:
        T.train(config(max_iters=6, resume=True, **kw), progress=False, log=quiet)
    assert "\n" not in str(e.value) and (tmp_path / "metrics.jsonl").read_text() == damaged


# --- 8. a divergence names a checkpoint that exists and came before it -----------------------------------------------

def test_a_divergence_before_any_checkpoint_says_there_is_none(data_dir, tmp_path, capsys):
    code, err = cli(["--max_iters=30", "--eval_interval=100", "--warmup_iters=0", "--lr=1e30", "--grad_clip=0",
                     f"--out_dir={tmp_path}"], capsys)
    assert code == 1 and one_line(err) and "no checkpoint was written before it" in err, err
    assert not (tmp_path / "ckpt.pt").exists()


def test_a_divergence_names_the_last_checkpoint_written_before_it(data_dir, tmp_path, monkeypatch):
    real_lr_at = T.lr_at
    monkeypatch.setattr(T, "lr_at", lambda it, c: 1e30 if it >= 5 else real_lr_at(it, c))  # blows up at step 5
    with pytest.raises(Diverged) as e:
        T.train(config(max_iters=20, eval_interval=2, grad_clip=0.0, out_dir=str(tmp_path)), progress=False, log=quiet)
    assert f"{tmp_path / 'ckpt.pt'}, step 4" in str(e.value) and e.value.step in (5, 6)
    assert torch.load(tmp_path / "ckpt.pt", weights_only=True)["step"] == 4


# --- also noted: flags that do nothing, dense_val_windows=0, a folder as --input, a refused run's out_dir -----------

@pytest.mark.parametrize("optimizer", ["tiger", "lamb"])
def test_betas_that_tiger_and_lamb_would_ignore_are_refused(optimizer):
    with pytest.raises(ValueError, match="beta1/--beta2 are AdamW's"):
        T.Config(optimizer=optimizer, beta2=0.999)
    T.Config(optimizer=optimizer)  # the defaults are fine (they are not used)
    T.Config(optimizer="adamw", beta2=0.999)


def test_dense_val_windows_must_be_a_count_not_zero_for_all():
    with pytest.raises(ValueError, match="dense_val_windows must be >= 1"):
        T.Config(dense_val_until=10, dense_val_windows=0)


def test_a_folder_given_as_input_is_called_a_folder(data_dir, tmp_path, capsys):
    code, err = cli([f"--input={tmp_path}", "--out_dir="], capsys)
    assert code == 2 and one_line(err) and "is a folder" in err, err


@pytest.mark.parametrize("why", ["a missing --input", "--resume without a checkpoint"])
def test_a_refused_run_leaves_no_out_dir_behind(data_dir, tmp_path, capsys, why):
    out = tmp_path / "new"
    args = {"a missing --input": [f"--input={tmp_path / 'nope.txt'}"], "--resume without a checkpoint": ["--resume=true"]}
    code, err = cli([*args[why], "--max_iters=2", f"--out_dir={out}"], capsys)
    assert code in (1, 2) and one_line(err), err
    assert not out.exists()


def test_a_refused_run_in_an_existing_folder_leaves_it_as_it_was(data_dir, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    code, err = cli(["--resume=true", "--max_iters=2", f"--out_dir={tmp_path}"], capsys)
    assert code == 1 and sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_a_resume_refusal_names_only_the_settings_that_changed(made):
    """Turning the dense val measurement off changes what dense_val_windows does, not its value: the refusal names
    dense_val_until, the setting that changed, and not 'dense_val_windows=8 (now 8)'."""
    same = dict(max_iters=6, lr_decay_iters=4, eval_interval=2, dense_val_windows=8, log_rows=True)
    with pytest.raises(TrainingError, match="dense_val_until=2 \\(now 0\\)") as e:
        load_checkpoint(str(made / "ckpt.pt"), config(**same, dense_val_until=0))
    assert "dense_val_windows" not in str(e.value)
