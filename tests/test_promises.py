"""What a run promises (docs/training.md, "What a run promises"): one test for each promise, in the order the docs list
them. Tiny runs (1 layer, d=32) on pydoc's topics prepared into a temporary folder; the command line is called in this
process (train.main) except where the promise is about a process being killed."""
import errno
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import train as T
from helpers import ROOT, TINY, config, rows

KW = ["--max_iters=30", "--eval_interval=10", "--log_interval=2", "--dropout=0.1"]  # dropout: the RNG state matters


def quiet(*_):
    pass


def cli(args, capsys):
    """train.py's command line, in this process: (exit code, what it said on stderr)."""
    capsys.readouterr()
    code = T.main([*TINY, *args])
    return code, capsys.readouterr().err


def one_line(err):
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


def same_rows(a, b, from_step):
    keys = ("train_loss", "val_loss", "tokens", "lr")
    return all({k: a[s].get(k) for k in keys} == {k: b[s].get(k) for k in keys} for s in a if s >= from_step)


def full_disk(obj, f):
    """torch.save on a disk that fills up: it writes a little, then fails."""
    f.write(b"partial")
    raise OSError(errno.ENOSPC, "No space left on device")


def kill_after_checkpoint(out, sig):
    """Start `python train.py` in out, send `sig` once it has logged the row of step 10 (after that step's checkpoint),
    and wait for it."""
    p = subprocess.Popen([sys.executable, "train.py", *TINY, *KW, f"--out_dir={out}"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and not (
            (out / "metrics.jsonl").exists() and '"step": 10,' in (out / "metrics.jsonl").read_text()):
        time.sleep(0.005)
    p.send_signal(sig)
    return p, p.communicate(timeout=120)


# 1. Killed at any moment, a run resumes to the losses of a run never interrupted, bit for bit on the CPU.

@pytest.mark.parametrize("how", ["kill -9", "Ctrl-C", "a full disk"])
def test_a_killed_run_resumes_to_the_losses_of_a_run_never_interrupted(data_dir, tmp_path, capsys, monkeypatch, how):
    ref = tmp_path / "ref"
    assert cli([*KW, f"--out_dir={ref}"], capsys)[0] == 0
    out = tmp_path / "run"
    if how == "a full disk":  # the checkpoint at step 20 can't be written: the run stops, the one at step 10 stays
        assert cli([*KW, "--max_iters=10", "--lr_decay_iters=30", f"--out_dir={out}"], capsys)[0] == 0
        before = (out / "ckpt.pt").read_bytes()
        monkeypatch.setattr(torch, "save", full_disk)
        code, err = cli([*KW, f"--out_dir={out}", "--resume=true"], capsys)
        monkeypatch.undo()
        assert code == 1 and one_line(err) and "No space left" in err and "previous checkpoint" in err
        assert (out / "ckpt.pt").read_bytes() == before and not list(out.glob("*.tmp"))
    else:
        p, (said, err) = kill_after_checkpoint(out, signal.SIGKILL if how == "kill -9" else signal.SIGINT)
        assert p.returncode == (-signal.SIGKILL if how == "kill -9" else 130), "the run ended before its signal"
        assert how == "kill -9" or ("checkpoint saved" in said and "Traceback" not in err)
    stopped_at = torch.load(out / "ckpt.pt", weights_only=True)["step"]
    assert 10 <= stopped_at < 30
    before = rows(out)
    assert cli([*KW, f"--out_dir={out}", "--resume=true"], capsys)[0] == 0
    a, b = rows(ref), rows(out)
    # it went on from the checkpoint, not from step 0: the rows before it are the first run's own (their times too)
    assert all(b[s]["time"] == before[s]["time"] for s in before if s < stopped_at)
    assert sorted(a) == sorted(b)  # every row is there once, those logged after the checkpoint logged again
    assert same_rows(a, b, 0)  # the row at the stop included: it averages steps from both sides of it


# 2. A checkpoint is data, never code; a damaged or foreign one is refused in one line.

class Booby:
    """Unpickling this calls os.system: what a malicious ckpt.pt would do to torch.load(weights_only=False)."""
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("ckpt", ["holding code", "damaged", "another program's"])
def test_a_checkpoint_is_read_as_data_and_a_bad_one_is_refused_in_one_line(data_dir, tmp_path, capsys, ckpt):
    assert cli(["--max_iters=2", "--eval_interval=2", f"--out_dir={tmp_path}"], capsys)[0] == 0
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    if ckpt == "holding code":
        state["config"]["trap"] = Booby(str(tmp_path / "PWNED"))
        torch.save(state, tmp_path / "ckpt.pt")
    elif ckpt == "damaged":
        data = (tmp_path / "ckpt.pt").read_bytes()
        (tmp_path / "ckpt.pt").write_bytes(data[:len(data) // 2])
    else:
        torch.save({"weights": torch.zeros(3)}, tmp_path / "ckpt.pt")
    code, err = cli(["--max_iters=4", f"--out_dir={tmp_path}", "--resume=true"], capsys)
    assert code == 1 and one_line(err) and "is not a tiedgpt checkpoint" in err, err
    assert not (tmp_path / "PWNED").exists(), "the checkpoint ran code"


# 3. A run writes only into a folder that is empty or holds that same run's files, never into the repository's own
#    folders; --overwrite=true removes only the run's own files, by name; two runs never share a folder at once.

@pytest.mark.parametrize("folder", ["an earlier run's", "an earlier run's, with --overwrite", "a folder of yours",
                                    "the repository's research/", "in use by another run"])
def test_a_run_writes_only_into_an_empty_folder_or_its_own_runs(data_dir, tmp_path, capsys, folder):
    out = tmp_path / "out"
    assert cli(["--max_iters=2", "--eval_interval=2", f"--out_dir={out}"], capsys)[0] == 0
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    args = ["--max_iters=2", "--eval_interval=2", "--seed=2", f"--out_dir={out}"]
    if folder == "an earlier run's, with --overwrite":
        assert cli([*args, "--overwrite=true"], capsys)[0] == 0
        assert (out / "ckpt.pt").read_bytes() != before["ckpt.pt"]
        assert sorted(before) == sorted(f.name for f in out.iterdir())
        return
    if folder == "a folder of yours":
        (out / "notes.txt").write_text("mine")
    if folder in ("a folder of yours", "in use by another run"):  # even with --overwrite=true
        args.append("--overwrite=true")
    if folder == "the repository's research/":
        args[-1] = "--out_dir=" + os.path.join(ROOT, "research", "runs", "new")
    lock = T.claim_out_dir(config(out_dir=str(out), resume=True)) if folder == "in use by another run" else None
    try:
        code, err = cli(args, capsys)
    finally:
        lock and lock.close()
    assert code in (1, 2) and one_line(err), err
    assert {"an earlier run's": "--overwrite=true replaces it", "a folder of yours": "notes.txt",
            "the repository's research/": "inside the repository's own files",
            "in use by another run": f"in use by another run (pid {os.getpid()})"}[folder] in err
    assert all((out / name).read_bytes() == data for name, data in before.items())
    assert not os.path.exists(os.path.join(ROOT, "research", "runs", "new"))


# 4. --resume refuses a checkpoint of other data or other settings, and names each difference.

def test_resume_refuses_other_data_or_settings_naming_each_difference(data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli(["--max_iters=2", "--eval_interval=2", f"--out_dir={out}"], capsys)[0] == 0
    code, err = cli(["--max_iters=4", "--lr_decay_iters=2", "--eval_interval=2", f"--out_dir={out}", "--resume=true",
                     "--seed=7", "--lr=0.002", "--head=ortho"], capsys)
    assert code == 1 and one_line(err)
    for said in ("seed=1337 (now 7)", "lr=0.001 (now 0.002)", "head='tied' (now 'ortho')", "--seed=1337"):
        assert said in err, err
    book = tmp_path / "book.txt"
    book.write_text("To be, or not to be, that is the question. " * 400)
    code, err = cli(["--max_iters=4", "--lr_decay_iters=2", "--eval_interval=2", f"--out_dir={out}", "--resume=true",
                     f"--input={book}"],
                    capsys)
    assert code == 1 and one_line(err) and "dataset='pydoc_topics' (now 'book-" in err and "train_sha256=" in err
    code, err = cli(["--max_iters=4", "--lr_decay_iters=2", "--eval_interval=2", f"--out_dir={out}", "--resume=true",
                     "--vocab=corpus"], capsys)  # the flag to give back is --vocab (it sets vocab_size itself)
    assert code == 1 and one_line(err) and "--vocab=full" in err and "--vocab_size" not in err, err
    assert cli(["--max_iters=4", "--lr_decay_iters=2", "--eval_interval=2", f"--out_dir={out}", "--resume=true"],
               capsys)[0] == 0


# 5. The demo and the sweeps never write over committed runs; a token file that is not what prepare.py wrote is
#    refused, not trained on.

@pytest.mark.parametrize("tool", ["demo.py", "research.stepsize"])
def test_the_demo_and_the_sweep_refuse_the_repositorys_own_folders(tool, capsys):
    import demo
    from research import stepsize
    before = sorted(os.listdir(os.path.join(ROOT, "research", "runs")))
    main = demo.main if tool == "demo.py" else stepsize.main
    assert main(["--tiny=true" if tool == "demo.py" else "--seeds=1", "--out=research/runs"]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "inside the repository's own files" in err
    assert sorted(os.listdir(os.path.join(ROOT, "research", "runs"))) == before


def test_a_token_file_that_is_not_what_prepare_wrote_is_refused(data_dir, tmp_path, capsys):
    import numpy as np
    path = data_dir / "pydoc_topics" / "train.bin"
    good = path.read_bytes()
    tokens = np.frombuffer(good, dtype=np.uint16).copy()
    tokens[100] = (tokens[100] + 1) % 50257  # one token changed in place: same size, other bytes
    path.write_bytes(tokens.tobytes())
    try:
        code, err = cli(["--max_iters=2", "--out_dir="], capsys)
    finally:
        path.write_bytes(good)
    assert code == 2 and one_line(err) and "train.bin is not the file prepare.py wrote" in err, err


# 6. Every bad flag, value or file is one line and a non-zero exit.

BAD = [("--lerning_rate=1", "unknown flag --lerning_rate"), ("--lr=fast", "--lr expects float"),
       ("--lr=-0.1", "lr must be > 0"), ("--head=weird", "choose one of: tied, untied"),
       ("max_iters=3", "flags look like --key=value"), ("--block_size=10000000", "is beyond the data"),
       ("--dropout=1.5", "dropout must be in [0, 1)"), ("--dtype=float16", "dtype must be"),
       ("--n_embd=16384 --device=cpu", "lower n_embd"), ("--input=/no/such/book.txt", "can't be read"),
       ("--resume=true", "no checkpoint at"), ("--compile=maybe", "expects true or false")]


@pytest.mark.parametrize("flag, words", BAD, ids=[b[0] for b in BAD])
def test_every_bad_flag_value_or_file_is_one_line_and_a_nonzero_exit(data_dir, tmp_path, capsys, flag, words):
    code, err = cli([f"--out_dir={tmp_path / 'out'}", *flag.split()], capsys)
    assert code in (1, 2) and one_line(err) and words in err, err


def test_the_command_line_itself_says_one_line_with_no_traceback(data_dir):
    p = subprocess.run([sys.executable, "train.py", *TINY, "--lerning_rate=1"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and one_line(p.stderr) and "unknown flag" in p.stderr
