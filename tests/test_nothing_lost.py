"""Nothing lost, nothing mixed: a run's files belong to the run its checkpoint names, the data are the data that were
prepared, and every refusal is one line with a non-zero exit (issue 45: an adversarial pass's silent paths).

Tiny runs on pydoc's topics in a temp dir, and the command lines called in-process, except where a new Python is the
point (a pipe closed early, a killed process): those are marked slow."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import train as T
from errors import TrainingError
from helpers import ROOT, TINY, config, rows


def quiet(*_):
    pass


def one_line(err):
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


def tiny_run(out, steps, **kw):
    return T.train(config(max_iters=steps, out_dir=str(out), **{"eval_interval": 50, **kw}), progress=False, log=quiet)


# --- a run's files belong to the run its checkpoint names ---------------------------------------------------------

def test_a_checkpoint_copied_from_another_run_resumes_with_that_runs_rows_not_a_splice(data_dir, tmp_path):
    """The issue's case at a tenth of its steps (A: 5, B: 15, A resumed from B's checkpoint to 20)."""
    a, b = tmp_path / "A", tmp_path / "B"
    tiny_run(a, 5, seed=1, eval_interval=5)
    tiny_run(b, 15, seed=2, eval_interval=5)
    (a / "ckpt.pt").write_bytes((b / "ckpt.pt").read_bytes())      # B's checkpoint, copied into A's folder
    tiny_run(a, 20, seed=2, lr_decay_iters=15, eval_interval=5, resume=True)
    got, b_rows = rows(a), rows(b)
    assert all(got[s] == b_rows[s] for s in b_rows if s < 15), "the rows before the checkpoint must be B's own"
    assert max(got) == 20


def test_a_deleted_metrics_file_is_restored_from_the_checkpoint_on_resume(data_dir, tmp_path):
    tiny_run(tmp_path, 10, eval_interval=5)
    before = rows(tmp_path)
    (tmp_path / "metrics.jsonl").unlink()
    tiny_run(tmp_path, 15, lr_decay_iters=10, eval_interval=5, resume=True)
    after = rows(tmp_path)
    assert all(after[s] == before[s] for s in before if s < 10) and max(after) == 15


def test_a_resumed_run_names_the_temporary_file_a_killed_checkpoint_write_left_and_keeps_it(data_dir, tmp_path):
    """kill -9 during a checkpoint write leaves its hidden temporary file (files.write_file can't remove it). Its
    content can't tell it from a file of the user's, so it is kept, and the resumed run says where and what it is."""
    tiny_run(tmp_path, 10, eval_interval=5)
    left = tmp_path / ".ckpt.pt.k7x2_q9a.tmp"
    left.write_bytes(b"PK" + b"\0" * 3000)          # the start of a zip, as a cut torch.save leaves it
    said = []
    T.train(config(max_iters=15, lr_decay_iters=10, eval_interval=5, out_dir=str(tmp_path), resume=True),
            progress=False, log=said.append)
    note = [s for s in said if left.name in s]
    assert left.exists() and len(note) == 1 and "kill" in note[0] and "delete" in note[0] and "3,002 bytes" in note[0]


def test_a_link_or_folder_named_like_a_cut_write_is_left_alone_and_blocks_nothing(data_dir, tmp_path):
    """The seventeenth pass's F2: a dangling link under such a name refused every run with a bare errno line (its size
    was read). Only a regular file is a write's leftover; anything else under the name is not a run's, and is left."""
    (tmp_path / ".ckpt.pt.abcdefgh.tmp").symlink_to(tmp_path / "nowhere")
    (tmp_path / ".config.json.abcdefgh.tmp").mkdir()
    said = []
    T.train(config(max_iters=5, eval_interval=5, out_dir=str(tmp_path)), progress=False, log=said.append)
    T.train(config(max_iters=10, lr_decay_iters=5, eval_interval=5, out_dir=str(tmp_path), resume=True),
            progress=False, log=said.append)
    assert not [s for s in said if "abcdefgh" in s] and (tmp_path / ".ckpt.pt.abcdefgh.tmp").is_symlink()


def test_a_fresh_run_refuses_a_folder_holding_an_earlier_runs_metrics_or_config(data_dir, tmp_path):
    tiny_run(tmp_path, 50)
    (tmp_path / "ckpt.pt").unlink()                                # a finished run whose checkpoint was deleted
    kept = (tmp_path / "metrics.jsonl").read_text()
    with pytest.raises(TrainingError, match="metrics.jsonl") as e:
        tiny_run(tmp_path, 10)
    assert one_line(str(e.value)) and (tmp_path / "metrics.jsonl").read_text() == kept
    (tmp_path / "metrics.jsonl").unlink()                          # a folder with only a config.json of the user's
    with pytest.raises(TrainingError, match="config.json"):
        tiny_run(tmp_path, 10)


def made_up_shakespeare(tmp_path, monkeypatch, text):
    """data/shakespeare/input.txt holding `text`, in a temp data folder (the tests' stand-in for a replaced corpus)."""
    import data.prepare as P
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    (tmp_path / "shakespeare").mkdir()
    (tmp_path / "shakespeare" / "input.txt").write_text(text)
    return P, tmp_path / "shakespeare"


def a_book(tmp_path, monkeypatch, text):
    """A text of the user's, tmp_path/book.txt holding `text`, prepared into a temp data folder: (data.prepare, path)."""
    import data.prepare as P
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path / "data"))
    (tmp_path / "book.txt").write_text(text)
    return P, tmp_path / "book.txt"


# --- the data are the data that were prepared ----------------------------------------------------------------------

def test_a_token_file_corrupted_in_place_is_refused_not_trained_on(data_dir, tmp_path):
    import data.prepare as P
    tiny_run(tmp_path, 50)
    path = os.path.join(P.dataset_dir("pydoc_topics"), "train.bin")
    good = open(path, "rb").read()
    try:
        bad = bytearray(good)
        bad[2000:30000] = bytes(28000)                             # same size, zeros in the middle
        open(path, "wb").write(bytes(bad))
        with pytest.raises(ValueError, match="train.bin"):
            tiny_run(tmp_path / "fresh", 10)
        with pytest.raises((ValueError, TrainingError), match="train.bin"):
            tiny_run(tmp_path, 100, lr_decay_iters=50, resume=True)
    finally:
        open(path, "wb").write(good)


@pytest.mark.corpus
def test_a_token_file_that_is_not_the_prepared_one_is_named_so_before_its_contents_are_judged(tmp_path, monkeypatch):
    """The seventeenth pass's 3f: a same-size train.bin of other bytes was refused for its token ids, with the advice
    to delete it. Its sha256 says first that it is not the prepared file, and the advice keeps a file of the user's."""
    P, d = made_up_shakespeare(tmp_path, monkeypatch, "To be, or not to be: that is the question. " * 40)
    P.prepare("shakespeare", log=quiet)
    (d / "train.bin").write_bytes(bytes([255]) * (d / "train.bin").stat().st_size)   # ids 65535, past the vocabulary
    with pytest.raises(ValueError, match="train.bin is not the file that was prepared.*move it away") as e:
        P.ensure_prepared("shakespeare", log=quiet)
    assert one_line(str(e.value))


@pytest.mark.corpus
def test_a_meta_json_from_before_token_hashes_vouches_only_for_the_bytes_prepare_would_write(tmp_path, monkeypatch):
    """The sixteenth pass's A: such a meta.json names the token files' sizes, not their sha256. A folder it made is
    prepared again and gains the hashes; a same-size train.bin of the user's put there is refused, and kept."""
    P, d = made_up_shakespeare(tmp_path, monkeypatch, "To be, or not to be: that is the question. " * 40)
    P.prepare("shakespeare", log=quiet)
    meta = json.loads((d / "meta.json").read_text())
    old = {k: v for k, v in meta.items() if not k.endswith("_sha256") or k == "sha256"}
    (d / "meta.json").write_text(json.dumps(old))                  # as an older tiedgpt wrote it
    assert "train_sha256" in P.ensure_prepared("shakespeare", log=quiet)
    (d / "meta.json").write_text(json.dumps(old))
    mine = bytes(reversed((d / "train.bin").read_bytes()))         # the user's file, of the same size
    (d / "train.bin").write_bytes(mine)
    with pytest.raises(ValueError, match="train.bin") as e:
        P.ensure_prepared("shakespeare", log=quiet)
    assert one_line(str(e.value)) and (d / "train.bin").read_bytes() == mine


@pytest.mark.corpus  # (a made-up text prepared as 'shakespeare' in a temp dir)
def test_the_fix_for_a_damaged_meta_json_never_deletes_the_source_text(tmp_path, monkeypatch):
    P, d = made_up_shakespeare(tmp_path, monkeypatch, "To be, or not to be: that is the question. " * 40)
    P.prepare("shakespeare", log=quiet)
    (d / "meta.json").write_text("{broken")
    with pytest.raises(ValueError) as e:
        P.ensure_prepared("shakespeare", log=quiet)
    advice = str(e.value).split(": ", 1)[1]
    assert "delete meta.json, train.bin and val.bin" in advice and f"delete {d}" not in advice


@pytest.mark.corpus  # (a made-up text prepared as 'shakespeare' in a temp dir)
def test_a_replaced_input_txt_is_not_recorded_as_tiny_shakespeares_download(tmp_path, monkeypatch):
    P, _ = made_up_shakespeare(tmp_path, monkeypatch, "Not Shakespeare at all, but my own words. " * 40)
    meta = P.prepare("shakespeare", log=quiet)
    assert meta["source"] != P.SHAKESPEARE_URL and "input.txt" in meta["source"]


# --- every refusal is one line ---------------------------------------------------------------------------------------

def test_a_full_disk_while_writing_a_checkpoint_is_one_line_and_leaves_no_temporary_file(data_dir, tmp_path,
                                                                                           monkeypatch):
    import checkpoint
    tiny_run(tmp_path, 50)
    kept = (tmp_path / "ckpt.pt").read_bytes()

    def full_disk(obj, f):
        f.write(b"x" * 1000)
        raise RuntimeError("[enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing file "
                           "data/3: file write failed")
    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    with pytest.raises(TrainingError, match="could not write the checkpoint") as e:
        tiny_run(tmp_path, 100, lr_decay_iters=50, resume=True)
    assert one_line(str(e.value))
    assert not list(tmp_path.glob("*.tmp")) and (tmp_path / "ckpt.pt").read_bytes() == kept


def test_a_corpus_of_one_distinct_token_is_one_clear_line(tmp_path, monkeypatch, capsys):
    import data.prepare as P
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    (tmp_path / "nul.txt").write_text("\x00" * 5000)
    code = T.main([*[a for a in TINY if not a.startswith("--dataset")], f"--input={tmp_path / 'nul.txt'}",
                   "--vocab=corpus", "--max_iters=2", f"--out_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert code == 2 and one_line(err) and "distinct token" in err


def test_a_final_lr_above_the_peak_is_refused():
    with pytest.raises(ValueError, match="min_lr"):
        config(lr=1e-3, min_lr=1e-2)


def test_a_vocab_size_flag_that_the_corpus_vocabulary_would_replace_is_refused(capsys, tmp_path):
    code = T.main(["--vocab=corpus", "--vocab_size=1000", "--max_iters=1", f"--out_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert code == 2 and one_line(err) and "--vocab_size has no effect with --vocab=corpus" in err


def test_a_misspelled_cuda_device_is_named_as_a_bad_device_not_a_missing_gpu():
    with pytest.raises(ValueError, match="device must be"):
        config(device="cudax")


def test_resuming_with_another_optimizer_names_the_optimizer(data_dir, tmp_path):
    tiny_run(tmp_path, 50)
    with pytest.raises(TrainingError, match="optimizer=adamw") as e:
        tiny_run(tmp_path, 100, lr_decay_iters=50, resume=True, optimizer="tiger")
    assert "residual_std" not in str(e.value)


def test_bench_with_zero_steps_is_one_line(capsys):
    import bench
    assert bench.main([*TINY, "--bench=0"]) == 2
    assert one_line(capsys.readouterr().err)


def test_prepare_with_a_file_name_too_long_for_the_disk_is_one_line(tmp_path, capsys):
    import data.prepare as P
    long = tmp_path / ("x" * 250 + ".txt")                         # a valid name; its dataset folder's is too long
    long.write_text("Some words to prepare. " * 200)
    assert P.main([f"--input={long}"]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "shorter name" in err


@pytest.mark.slow
@pytest.mark.parametrize("command", [["demo.py"], ["data/prepare.py"], ["train.py"], ["bench.py"],
                                     ["-m", "research.reproduce"], ["-m", "research.stepsize"]])
def test_help_piped_into_head_ends_quietly(command):
    p = subprocess.run(f"{sys.executable} {' '.join(command)} --help | head -1", shell=True, cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() and p.stderr == "", p.stderr[-300:]


@pytest.mark.slow
def test_killing_the_demo_stops_its_workers(tiny_data, tmp_path):
    args = [sys.executable, "demo.py", "--tiny", "--dataset=pydoc_topics", "--workers=2", "--steps=2000",
            "--schedule=4000", f"--out={tmp_path}"]
    p = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(60):                                        # wait for the two workers to start
            kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
            if len(kids) >= 2:
                break
            time.sleep(1)
        assert len(kids) >= 2
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        deadline = time.time() + 30
        while time.time() < deadline and any(os.path.exists(f"/proc/{k}") and
                                             open(f"/proc/{k}/stat").read().split()[2] != "Z" for k in kids):
            time.sleep(0.5)
        assert not any(os.path.exists(f"/proc/{k}") and open(f"/proc/{k}/stat").read().split()[2] != "Z"
                       for k in kids), "the workers ran on after the demo was killed"
    finally:
        p.kill()


@pytest.mark.slow
@pytest.mark.parametrize("inside", ["numpy", "torch"])
@pytest.mark.parametrize("script", [["train.py"], ["demo.py"], ["bench.py"], ["-m", "research.reproduce"],
                                    ["-m", "research.stepsize"]])
def test_ctrl_c_while_the_imports_load_ends_quietly(script, inside):
    """Ctrl-C while numpy or torch is being imported (seconds): exit 130, no traceback (a SystemExit raised inside
    numpy's import once ended in a RecursionError). The signal is sent once the script is inside that import
    (-X importtime reports each module as it finishes), not after a fixed sleep, which on a busy machine could land
    before the script's first line."""
    p = subprocess.Popen([sys.executable, "-X", "importtime", *script, "--help"], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in p.stderr:
        seen.append(line)
        if inside in line:                                         # inside `import numpy` or `import torch`
            break
    p.send_signal(signal.SIGINT)
    err = "".join(seen) + p.communicate(timeout=60)[1]
    assert p.returncode == 130 and "Traceback" not in err, err[-300:]


# --- an adversarial pass's findings (issue 45's Done-when) ------------------------------------------------------------

def test_reproduce_refuses_to_write_into_the_repositorys_own_folders(capsys):
    from research import reproduce as R
    before = sorted(os.listdir(os.path.join(ROOT, "research", "runs")))
    for out in ("research/runs/x", os.path.join(ROOT, "lessons", "x")):
        assert R._cli(["live", f"--out={out}"]) == 2
        assert one_line(capsys.readouterr().err)
    assert sorted(os.listdir(os.path.join(ROOT, "research", "runs"))) == before
    assert not os.path.exists(os.path.join(ROOT, "lessons", "x"))


def test_a_demo_run_file_whose_fields_contradict_its_config_is_made_again(tiny_data, tmp_path):
    import demo as D
    args = ["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"]
    assert D.main(args, log=quiet) == 0
    a, b = sorted((tmp_path / "runs").glob("adamw__logn__*"))
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    ra["seed"], rb["seed"] = rb["seed"], ra["seed"]              # swap the seeds the pairing reads
    a.write_text(json.dumps(ra))
    b.write_text(json.dumps(rb))
    assert D.main(args, log=quiet) == 0
    assert D.load_result(str(tmp_path / "demo.json"))["run"]["runs_reused"] == 6


def test_the_demo_runs_no_more_threads_per_process_than_the_machine_has_cores(tiny_data, tmp_path):
    """--threads=99999 ran out of memory in torch (5000: a segfault, not a word); more threads than cores only slow
    a run down, so it is capped there, and the first line and demo.json say what ran."""
    import demo as D
    said = []
    assert D.main(["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}", "--threads=99999"], log=said.append) == 0
    assert any(f"with {os.cpu_count()} thread(s)" in s for s in said if s.startswith("demo:"))
    assert D.load_result(str(tmp_path / "demo.json"))["run"]["threads_per_worker"] == os.cpu_count()


def test_load_result_refuses_settings_its_runs_were_not_made_with(tmp_path):
    import demo as D
    result = json.loads(open(D.COMMITTED).read())
    result["settings"]["n_embd"] = 768
    (tmp_path / "x.json").write_text(json.dumps(result))
    with pytest.raises(ValueError, match="settings are not what its runs were made with"):
        D.load_result(str(tmp_path / "x.json"))


def test_a_demo_result_made_with_other_settings_is_kept_not_overwritten(tiny_data, tmp_path):
    import demo as D
    assert D.main(["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}", "--seeds=1,2"], log=quiet) == 0
    first = (tmp_path / "demo.json").read_text()
    assert D.main(["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}", "--seeds=3,4"], log=quiet) == 0
    (kept,) = tmp_path.glob("demo.json.set-aside-*")
    assert kept.read_text() == first


def test_the_sweep_makes_a_damaged_run_file_again_and_keeps_a_diverged_one(tmp_path):
    from research import stepsize as Z
    config = Z.run_config("signum", 1e-2, "logn", 1)
    path = tmp_path / "run.json"
    path.write_text("null")
    assert not Z.finished(str(path), config)
    import dataclasses
    path.write_text(json.dumps(dict(optimizer="signum", arm="logn", seed=1, config=dataclasses.asdict(config),
                                    steps=[0, 10], val=[9.9, 9.5], diverged=14)))
    assert Z.finished(str(path), config)


@pytest.mark.parametrize("steps, diverged", [([0, 10], True), ([0, 10], "yes"), ([0, 10], 5), ([0, 10], -1),
                                             ([0, 10], 101), ([0, 10], 10 ** 9), (None, 100)])
def test_a_sweep_record_whose_divergence_is_no_step_after_its_curve_is_not_a_result(tmp_path, steps, diverged):
    """The sixteenth pass's D: a whole, finite curve with diverged=true turned its report cell to "diverged"; the
    seventeenth's F1: so did diverged=150 on a run of 100 steps. A run that diverged logged its rows up to the step
    where its loss went non-finite: a whole number, at or after them, and at most max_iters (where the last evaluation
    is); a curve that reaches max_iters did not diverge."""
    from research import stepsize as Z
    import dataclasses
    config = Z.run_config("signum", 1e-2, "logn", 1)
    steps = steps or Z.workers.measured_steps(config)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(dict(optimizer="signum", arm="logn", seed=1, config=dataclasses.asdict(config),
                                    steps=steps, val=[9.9] * len(steps), diverged=diverged)))
    assert config.max_iters == 100 and not Z.finished(str(path), config)


@pytest.mark.parametrize("case", ["missing", "empty", "null record", "nan record"])
def test_the_sweep_report_refuses_what_it_cannot_read_in_one_line(case, tmp_path, capsys):
    from research import stepsize as Z
    folder = tmp_path / "runs"
    if case != "missing":
        folder.mkdir()
    if case == "null record":
        (folder / "a.json").write_text("null")
    if case == "nan record":
        (folder / "a.json").write_text(json.dumps(dict(optimizer="adamw", arm="logn", seed=1, steps=[0, 10],
                                                       val=[9.9, float("nan")], config=dict(lr=1e-3))))
    assert Z.main(["--report=true", f"--runs={folder}"]) == 2
    assert one_line(capsys.readouterr().err)


def test_a_run_file_that_is_a_link_is_refused_and_its_target_kept(data_dir, tmp_path):
    other = tmp_path / "mine.json"
    other.write_text('{"my": "notes"}')
    out = tmp_path / "run"
    out.mkdir()
    os.symlink(other, out / "config.json")
    with pytest.raises(TrainingError, match="is a link"):
        tiny_run(out, 10)
    assert other.read_text() == '{"my": "notes"}'


def test_a_refused_run_leaves_no_lock_and_a_too_long_name_makes_no_folders(data_dir, tmp_path):
    (tmp_path / "config.json").write_text("{}")                    # the user's own file
    with pytest.raises(TrainingError):
        tiny_run(tmp_path, 10)
    assert sorted(os.listdir(tmp_path)) == ["config.json"]
    deep = tmp_path / "a" / "b" / ("x" * 300)
    with pytest.raises(ValueError, match="over 255"):
        tiny_run(deep, 10)
    assert not (tmp_path / "a").exists()


def test_a_metrics_file_set_aside_keeps_its_config_beside_it(data_dir, tmp_path):
    a, b = tmp_path / "A", tmp_path / "B"
    tiny_run(a, 5, seed=1, eval_interval=5)
    tiny_run(b, 10, seed=2, eval_interval=5)
    config_a = (a / "config.json").read_text()
    (a / "ckpt.pt").write_bytes((b / "ckpt.pt").read_bytes())
    tiny_run(a, 15, seed=2, lr_decay_iters=10, eval_interval=5, resume=True)
    (kept,) = a.glob("config.json.set-aside-*")
    assert kept.read_text() == config_a and list(a.glob("metrics.jsonl.set-aside-*"))


def test_a_raw_pickle_as_a_checkpoint_is_refused_in_one_line_without_a_warning(tmp_path, recwarn):
    import pickle
    from checkpoint import load_checkpoint
    (tmp_path / "ckpt.pt").write_bytes(pickle.dumps({"step": 1}, protocol=4))
    with pytest.raises(TrainingError, match="not a tiedgpt checkpoint") as e:
        load_checkpoint(str(tmp_path / "ckpt.pt"), config())
    assert one_line(str(e.value)) and not [w for w in recwarn if "torch" in str(w.filename)]


def test_bench_speaks_as_bench(capsys):
    import bench
    assert bench.main([*TINY, "--bench=0"]) == 2
    assert capsys.readouterr().err.startswith("bench.py: ")
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    assert capsys.readouterr().out.startswith("The benchmark")


def test_a_second_ctrl_c_stops_at_once_even_inside_a_long_evaluation():
    """The first Ctrl-C (or SIGTERM) asks the loop to checkpoint and stop at the next step; a long evaluation would
    make the user wait for it. A second one stops at once, wherever the run is."""
    stop, handlers = T.catch_stop_signals()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert stop == [True]                                     # the first: noted, the run goes on to the step's end
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)                                         # (a long evaluation would be here)
    finally:
        T.restore_signals(handlers)


def test_a_run_stopped_at_once_by_a_second_ctrl_c_says_so_in_one_line(data_dir, tmp_path, monkeypatch, capsys):
    """The twelfth pass: a second Ctrl-C during an evaluation ended with exit 130 and nothing said; the first one's
    stop says its own line (the checkpoint it saved) and no second."""
    def second_ctrl_c(*_, **__):
        raise KeyboardInterrupt                                    # what the second signal raises, wherever the run is
    monkeypatch.setattr(T, "evaluate", second_ctrl_c)
    assert T.main([*TINY, "--max_iters=4", f"--out_dir={tmp_path / 'a'}"]) == 130
    err = capsys.readouterr().err
    assert one_line(err) and "Ctrl-C" in err and "last checkpoint" in err
    monkeypatch.undo()
    monkeypatch.setattr(T, "catch_stop_signals", lambda: ([True], {}))  # a first Ctrl-C before step 0's end
    assert T.main([*TINY, "--max_iters=4", f"--out_dir={tmp_path / 'b'}"]) == 130
    assert capsys.readouterr().err == ""


def test_a_checkpoint_write_stopped_by_ctrl_c_leaves_the_previous_checkpoint_and_no_tmp(tmp_path, monkeypatch):
    import checkpoint as K
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    path = str(tmp_path / "ckpt.pt")
    args = (model, opt, 1, config(), torch.Generator(), {})
    K.save_checkpoint(path, *args)
    before = (tmp_path / "ckpt.pt").read_bytes()

    def interrupted(state, f):
        f.write(b"half")
        raise KeyboardInterrupt
    monkeypatch.setattr(K.torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        K.save_checkpoint(path, *args)
    assert (tmp_path / "ckpt.pt").read_bytes() == before and not list(tmp_path.glob("*.tmp"))


# --- a second adversarial pass (after the fixes above) ---------------------------------------------------------------

def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(data_dir, tmp_path, capsys):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".lock").symlink_to(target)
    code = T.main([*TINY, "--max_iters=2", f"--out_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert code != 0 and one_line(err) and ".lock is a link" in err
    assert target.read_text() == "keep me"


def test_a_run_whose_lock_was_deleted_stops_before_writing_again(data_dir, tmp_path):
    """Deleting a 'stale' .lock lets another run take the folder: the first run must not write on beside it."""
    import rundir
    lock = rundir.claim_out_dir(config(out_dir=str(tmp_path / "out")))
    try:
        rundir.check_still_claimed(lock)                         # held: fine
        os.remove(lock.path)                                      # someone deletes the lock ...
        other = rundir.open_lock(lock.path)                       # ... and another run makes its own
        with pytest.raises(TrainingError, match="was removed or replaced while this run held it"):
            rundir.append_row([], {"step": 1}, str(tmp_path / "out" / "metrics.jsonl"), lock)
        assert not (tmp_path / "out" / "metrics.jsonl").exists()
        other.close()
    finally:
        lock.close()


def test_the_demo_figure_replaces_a_link_named_demo_png_and_keeps_its_target(tiny_data, tmp_path):
    import demo as D
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "demo.png").symlink_to(target)
    assert D.main(["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path / 'out'}"], log=quiet) == 0
    assert target.read_text() == "keep me" and not (tmp_path / "out" / "demo.png").is_symlink()


def test_a_checkpoint_with_changed_bytes_is_refused_by_its_checksums(data_dir, tmp_path):
    tiny_run(tmp_path, 2)
    path = tmp_path / "ckpt.pt"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF                                    # one flipped byte inside the weights
    path.write_bytes(bytes(raw))
    with pytest.raises(TrainingError, match="fails its checksum"):
        tiny_run(tmp_path, 4, resume=True)


def test_out_folders_past_the_path_limit_and_run_files_that_are_folders_are_one_line(tmp_path):
    import rundir
    from research import records
    with pytest.raises(ValueError, match="over the 4096 a path may have"):
        rundir.check_out_folder(str(tmp_path) + "/a" * 2100, "out_dir")
    (tmp_path / "run.json").mkdir()
    with pytest.raises(ValueError, match="is a folder, not a run file"):
        records.write_atomic(str(tmp_path / "run.json"), {"a": 1})


def test_the_sweep_refuses_bad_seeds_and_stops_on_ctrl_c_in_one_line(tmp_path, capsys, monkeypatch):
    from research import stepsize as Z
    from research import workers
    for flag, named in (("--seeds=x", "--seeds"), ("--seeds=", "--seeds"), ("--workers=0", "--workers")):
        assert Z.main([flag, f"--out={tmp_path}"]) == 2
        err = capsys.readouterr().err                              # the twelfth pass: each names its own flag only
        assert one_line(err) and named in err and ({"--seeds", "--workers"} - {named}).pop() not in err, err

    def interrupted(*_, **__):
        raise KeyboardInterrupt
    monkeypatch.setattr(workers, "run_all", interrupted)
    assert Z.main(["--seeds=1", f"--out={tmp_path}"]) == 130
    assert "finished runs are kept" in capsys.readouterr().err


def test_reproduce_refuses_an_empty_out_instead_of_using_the_default(capsys):
    from research import reproduce as R
    assert R._cli(["live", "--out="]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "empty" in err


def test_a_negative_lr_decay_iters_is_refused():
    with pytest.raises(ValueError, match="lr_decay_iters must be >= 0"):
        config(lr_decay_iters=-5)


# --- a third adversarial pass: links at every name a tool writes -----------------------------------------------------

def test_a_resume_leaves_a_hard_linked_backup_of_the_runs_files_as_it_was(data_dir, tmp_path):
    """A backup made with hard links (cp -al) shares the files' bytes: a resumed run replaces config.json and
    metrics.jsonl with files of its own instead of writing into the shared ones."""
    tiny_run(tmp_path / "run", 2)
    (tmp_path / "backup").mkdir()
    for name in ("config.json", "metrics.jsonl"):
        os.link(tmp_path / "run" / name, tmp_path / "backup" / name)
    before = {n: (tmp_path / "backup" / n).read_bytes() for n in ("config.json", "metrics.jsonl")}
    tiny_run(tmp_path / "run", 4, lr_decay_iters=2, resume=True)
    assert {n: (tmp_path / "backup" / n).read_bytes() for n in before} == before
    assert len(rows(tmp_path / "run")) > len(before["metrics.jsonl"].splitlines())


def test_a_lock_file_hard_linked_to_a_users_file_is_refused_and_that_file_kept(data_dir, tmp_path, capsys):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (tmp_path / "out").mkdir()
    os.link(target, tmp_path / "out" / ".lock")
    code = T.main([*TINY, "--max_iters=2", f"--out_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert code != 0 and one_line(err) and "not a run's lock" in err and target.read_text() == "keep me"


def test_a_run_resumes_in_a_folder_backed_up_with_cp_al_and_the_backups_lock_is_untouched(data_dir, tmp_path):
    """C113: cp -al hard-links every file, .lock too. The lock (a pid) is replaced by one of the folder's own."""
    tiny_run(tmp_path / "run", 2)
    subprocess.run(["cp", "-al", str(tmp_path / "run"), str(tmp_path / "backup")], check=True)
    before = (tmp_path / "backup" / ".lock").read_bytes()
    tiny_run(tmp_path / "run", 4, lr_decay_iters=2, resume=True)
    assert (tmp_path / "backup" / ".lock").read_bytes() == before
    assert os.stat(tmp_path / "run" / ".lock").st_nlink == 1


def test_a_lock_file_that_holds_something_else_than_a_pid_is_the_users_and_is_kept(data_dir, tmp_path, capsys):
    """C3: the lock's name is the run's, but a .lock holding notes is not a lock: truncating it to a pid loses them."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".lock").write_text("my notes about this folder")
    code = T.main([*TINY, "--max_iters=2", f"--out_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert code != 0 and one_line(err) and (tmp_path / "out" / ".lock").read_text() == "my notes about this folder"


@pytest.mark.parametrize("made", [os.mkfifo, os.mkdir], ids=["a FIFO", "a folder"])
def test_a_lock_that_is_not_a_file_is_refused_naming_the_lock(data_dir, tmp_path, capsys, made):
    (tmp_path / "out").mkdir()
    made(tmp_path / "out" / ".lock")
    code = T.main([*TINY, "--max_iters=2", f"--out_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert code != 0 and one_line(err) and ".lock is not a run's lock" in err


def test_files_are_written_through_a_fresh_temporary_name_never_a_planted_one(tmp_path):
    """write_file (every writer: checkpoints, run files, records, token files, figures) never opens a name someone
    could have planted a link at: the old fixed names (path.tmp, path.<pid>.tmp) are left alone."""
    import files
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    for planted in ("ckpt.pt.tmp", f"run.json.{os.getpid()}.tmp", "train.bin.tmp", "demo.png.tmp.png"):
        (tmp_path / planted).symlink_to(target)
    for name in ("ckpt.pt", "run.json", "train.bin", "demo.png"):
        files.write_file(str(tmp_path / name), lambda f: f.write("new"))
        assert (tmp_path / name).read_text() == "new"
    assert target.read_text() == "keep me"


def test_two_set_asides_in_one_second_get_two_names(tmp_path):
    import files
    kept = []
    for content in ("first", "second"):
        (tmp_path / "metrics.jsonl").write_text(content)
        kept.append(files.set_aside(str(tmp_path / "metrics.jsonl")))
    assert len(set(kept)) == 2
    assert sorted(p.read_text() for p in tmp_path.glob("metrics.jsonl.set-aside-*")) == ["first", "second"]


def test_a_finished_runs_checkpoint_folder_keeps_the_users_own_files(tmp_path):
    import rundir
    for name in ("ckpt.pt", "metrics.jsonl", "config.json", ".lock", "notes.txt"):
        (tmp_path / name).write_text("x")
    rundir.remove_run_files(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# --- a fourth adversarial pass: links made while a run runs, run files that can't be reused ---------------------------

def test_a_metrics_file_swapped_for_a_link_mid_run_is_not_written_through(tmp_path):
    import rundir
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    path = tmp_path / "metrics.jsonl"
    rundir.append_row([], {"step": 0}, str(path))
    path.unlink()
    path.symlink_to(target)                                       # swapped while the run runs
    with pytest.raises(TrainingError, match="can't be appended to"):
        rundir.append_row([{"step": 0}], {"step": 1}, str(path))
    assert target.read_text() == "keep me"


def test_a_hard_linked_backup_made_mid_run_stops_growing(tmp_path):
    import rundir
    path, backup = tmp_path / "metrics.jsonl", tmp_path / "backup.jsonl"
    history = []
    rundir.append_row(history, {"step": 0}, str(path))
    os.link(path, backup)                                         # cp -al while the run runs
    rundir.append_row(history, {"step": 1}, str(path))
    rundir.append_row(history, {"step": 2}, str(path))
    assert backup.read_text().splitlines() == ['{"step": 0}']
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [0, 1, 2]


def test_a_demo_run_file_that_cannot_be_reused_is_kept_beside_the_new_one(tiny_data, tmp_path):
    import demo as D
    args = ["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"]
    assert D.main(args, log=quiet) == 0
    (first, *_) = sorted((tmp_path / "runs").glob("adamw__logn__*.json"))
    first.write_text("my own notes")
    assert D.main(args, log=quiet) == 0
    (kept,) = (tmp_path / "runs").glob(first.name + ".set-aside-*")
    assert kept.read_text() == "my own notes" and json.loads(first.read_text())["arm"] == "logn"


def test_the_sweep_keeps_a_damaged_run_file_beside_the_one_it_makes_again(tmp_path, monkeypatch, capsys):
    from research import stepsize as Z
    from research import workers
    runs = tmp_path / "runs"
    runs.mkdir()
    damaged = runs / Z.file_name("adamw", 3e-3, "logn", 1)
    damaged.write_text("my own notes")
    monkeypatch.setattr(workers, "run_all", lambda *a, **k: None)
    assert Z.main(["--seeds=1", f"--out={tmp_path}"]) == 0
    (kept,) = runs.glob(damaged.name + ".set-aside-*")
    assert kept.read_text() == "my own notes"


# --- the fourth pass's last finds: folders that are not prepare's or the run's ----------------------------------------

def test_prepare_never_replaces_token_files_it_did_not_make(tmp_path, monkeypatch):
    """data/<name> linked to a folder of the user's, holding their own train.bin: preparing a text of that name is
    refused in one line, and their file is kept (prepare replaces only what its own meta.json vouches for)."""
    import data.prepare as P
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path / "data"))
    mine = tmp_path / "my_tokens"
    mine.mkdir()
    (mine / "train.bin").write_bytes(b"my own tokens")
    text = tmp_path / "notes.txt"
    text.write_text("Words of my own, for a corpus of my own. " * 40)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / P.input_name(text)).symlink_to(mine)     # data/notes-<hash> -> the user's folder
    with pytest.raises(ValueError, match="not made by prepare.py") as e:
        P.prepare(input=str(text), log=quiet)
    assert "\n" not in str(e.value) and (mine / "train.bin").read_bytes() == b"my own tokens"
    (mine / "train.bin").unlink()                               # moved away: now the folder is prepare's to fill
    assert P.prepare(input=str(text), log=quiet)["dataset"] == P.input_name(text) and (mine / "meta.json").exists()
    P.prepare(input=str(text), log=quiet)                       # and its own files it prepares again


def test_a_meta_json_that_is_a_folder_is_named_as_a_folder(data_dir, tmp_path, monkeypatch):
    import data.prepare as P
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    (tmp_path / "pydoc_topics" / "meta.json").mkdir(parents=True)
    for f in ("train.bin", "val.bin"):
        (tmp_path / "pydoc_topics" / f).write_bytes(b"")
    for call in (P.ensure_prepared, P.prepare):
        with pytest.raises(ValueError, match="meta.json is a folder"):
            call("pydoc_topics", log=quiet)


def test_preparing_again_with_another_split_says_earlier_runs_cannot_resume(tmp_path, monkeypatch):
    import data.prepare as P
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    P.prepare("pydoc_topics", log=quiet)
    said = []
    P.prepare("pydoc_topics", val_fraction=0.2, log=said.append)
    assert any("split" in s and "resume" in s for s in said), said


@pytest.mark.parametrize("inside", ["research/runs", "lessons/data", "research", "."])
def test_an_output_folder_inside_another_checkouts_own_files_is_refused(tmp_path, inside, capsys):
    """A second clone of the project beside this one: its committed runs are never an output either."""
    import demo as D
    other = tmp_path / "tiedgpt-copy"
    (other / "research" / "runs").mkdir(parents=True)
    (other / "lessons" / "data").mkdir(parents=True)
    (other / "tiedgpt.py").write_text("# a checkout, of any version\n")
    (other / "research" / "runs" / "demo.json").write_text("committed")
    assert D.main(["--tiny", "--dataset=pydoc_topics", f"--out={other / inside}"], log=quiet) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "checkout" in err
    with pytest.raises(ValueError, match="checkout"):
        tiny_run(other / inside, 1)
    assert (other / "research" / "runs" / "demo.json").read_text() == "committed"
    assert sorted(os.listdir(other / "research" / "runs")) == ["demo.json"]


# --- a fifth adversarial pass (on 67a37f1) ------------------------------------------------------------------------------

def test_overwrite_never_removes_a_config_json_that_no_run_wrote(data_dir, tmp_path):
    (tmp_path / "config.json").write_text('{"database": "prod"}')
    for kw in ({}, {"overwrite": True}, {"resume": True}):
        with pytest.raises(TrainingError, match="not a tiedgpt run's config.json") as e:
            tiny_run(tmp_path, 1, **kw)
        assert one_line(str(e.value))
    assert (tmp_path / "config.json").read_text() == '{"database": "prod"}'


def test_a_metrics_file_of_another_tool_is_refused_and_so_is_a_cut_row_with_no_run_beside_it(data_dir, tmp_path):
    import rundir
    (tmp_path / "metrics.jsonl").write_text('{"epoch": 1, "acc": 0.5}\n')
    assert rundir.not_a_runs(str(tmp_path / "metrics.jsonl"))
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "train_lo')  # cut by a kill, but no run's config.json beside it
    assert rundir.not_a_runs(str(tmp_path / "metrics.jsonl"))


def test_reproduce_never_deletes_a_users_files_in_its_checkpoint_folder(tiny_data, tmp_path):
    """--ckpt_dir=K: a run checkpoints in K/<run>/; a config.json there that no run wrote is refused, not removed."""
    from research import reproduce as R
    user = tmp_path / "user"
    user.mkdir()
    (user / "config.json").write_text('{"app": 9}')
    tiny = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, eval_iters=2, sample_tokens=0,
                max_iters=2, eval_interval=2, head="tied", seed=2, dataset="pydoc_topics")
    (tmp_path / "k").mkdir()
    os.symlink(user, R._ckpt_folder(str(tmp_path / "k"), R.run_id("main", "tied", 2)))
    with pytest.raises(SystemExit, match="not a tiedgpt run's config.json"):
        R.run_one("main", "tied", tiny, log=quiet, ckpt_dir=str(tmp_path / "k"))
    assert (user / "config.json").read_text() == '{"app": 9}'


def test_the_demo_keeps_a_demo_png_it_did_not_make(tiny_data, tmp_path):
    import demo as D
    (tmp_path / "demo.png").write_text("my photo")
    assert D.main(["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"], log=quiet) == 0
    (kept,) = tmp_path.glob("demo.png.set-aside-*")
    assert kept.read_text() == "my photo"


def test_a_runs_folder_linked_into_the_repository_is_refused(tmp_path, capsys):
    import demo as D
    (tmp_path / "runs").symlink_to(os.path.join(ROOT, "lessons"))
    before = sorted(os.listdir(os.path.join(ROOT, "lessons")))
    assert D.main(["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"], log=quiet) == 2
    assert one_line(capsys.readouterr().err) and sorted(os.listdir(os.path.join(ROOT, "lessons"))) == before


def test_a_demo_result_that_cannot_be_written_is_one_line(tiny_data, tmp_path, monkeypatch, capsys):
    import demo as D

    def read_only(path, *a):
        raise PermissionError(13, "Permission denied", path)
    monkeypatch.setattr(D.records, "write_atomic", read_only)
    assert D.main(["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"], log=quiet) == 1
    err = capsys.readouterr().err
    assert one_line(err) and "demo.json" in err and "Permission denied" in err


def _committed_live_record(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    with open(os.path.join(ROOT, "research", "runs", "repro_live.json")) as f:
        return out, next(r for r in json.load(f)["runs"] if r["id"] == "main|tied|seed=1")


def test_reproduce_refuses_another_plans_run_under_the_same_id(tmp_path):
    from research import reproduce as R
    out, record = _committed_live_record(tmp_path)
    record["config"]["max_iters"] = 300                            # the full plan's main|tied|seed=1
    (out / "main__tied__seed=1.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="was not made by the live plan"):
        R.main("live", out=str(out), resume=True, log=quiet)


def test_a_record_whose_id_was_edited_is_refused(tmp_path):
    from research.records import load_runs
    out, record = _committed_live_record(tmp_path)
    record["id"] = "main|ortho|seed=1"                             # a tied run passed off as ortho's
    (out / "main__ortho__seed=1.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="an edited record"):
        load_runs(str(out))


def test_a_reproduce_lock_that_is_a_link_is_one_line(tmp_path, monkeypatch, capsys):
    from research import reproduce as R
    monkeypatch.setattr(R, "check_corpus_for_comparison", lambda scale: None)
    monkeypatch.setattr(R, "run_one", lambda *a, **k: pytest.fail("ran although its lock is a link"))
    (tmp_path / "target").write_text("mine")
    (tmp_path / ".main__tied__seed=1.json.lock").symlink_to(tmp_path / "target")
    assert R._cli(["live", "--seeds=1", "--arms=tied", f"--out={tmp_path}"]) == 1
    assert one_line(capsys.readouterr().err) and (tmp_path / "target").read_text() == "mine"


def _stepsize_runs(tmp_path):
    from research import stepsize as Z
    runs = tmp_path / "s"
    runs.mkdir()
    for f in sorted(os.listdir(Z.COMMITTED)):
        if f.startswith("tiger_lr=0.01__") or f.startswith("tiger_lr=0.003__"):
            (runs / f).write_text(open(os.path.join(Z.COMMITTED, f)).read())
    return Z, runs


def test_the_sweep_report_refuses_a_stray_record_standing_in_for_a_run(tmp_path, capsys):
    Z, runs = _stepsize_runs(tmp_path)
    record = json.loads((runs / "tiger_lr=0.01__ortho__seed=3.json").read_text())
    record["config"]["lr"] = 0.003                                 # a backup of another cell's run, renamed
    (runs / "zzz_backup_of_old_run.json").write_text(json.dumps(record))
    assert Z.main(["--report=true", f"--runs={runs}"]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "zzz_backup_of_old_run.json" in err and "copied or renamed" in err


@pytest.mark.parametrize("damage", [lambda r: r.update(config=None), lambda r: r.pop("optimizer"),
                                    lambda r: r.update(steps=r["steps"][:-1], val=r["val"][:-1])])
def test_a_malformed_sweep_record_is_one_line_in_the_report(tmp_path, capsys, damage):
    Z, runs = _stepsize_runs(tmp_path)
    path = runs / "tiger_lr=0.01__logn__seed=2.json"
    record = json.loads(path.read_text())
    damage(record)
    path.write_text(json.dumps(record))
    assert Z.main(["--report=true", f"--runs={runs}"]) == 2
    assert one_line(capsys.readouterr().err)


@pytest.mark.parametrize("flags", [["--seeds=9"], ["--seeds=6,7"], ["--workers=-3"]])
def test_the_sweep_refuses_seeds_it_does_not_have_instead_of_making_nothing(tmp_path, capsys, flags):
    from research import stepsize as Z
    assert Z.main([*flags, f"--out={tmp_path}"]) == 2
    assert one_line(capsys.readouterr().err) and not (tmp_path / "runs").exists()


def test_the_sweeps_runs_folder_linked_into_the_repository_is_refused(tmp_path, capsys):
    from research import stepsize as Z
    (tmp_path / "runs").symlink_to(os.path.join(ROOT, "research", "runs", "stepsize"))
    before = sorted(os.listdir(os.path.join(ROOT, "research", "runs", "stepsize")))
    assert Z.main(["--seeds=1", f"--out={tmp_path}"]) == 2
    assert one_line(capsys.readouterr().err)
    assert sorted(os.listdir(os.path.join(ROOT, "research", "runs", "stepsize"))) == before


def test_bench_against_the_baseline_works_with_the_corpus_vocabulary(monkeypatch):
    """The baseline pads n to 50304 as nanoGPT does, but only the full vocabulary: with vocab=corpus, n is the data's
    (the flag would be refused). Each timed process is faked here: it reports made-up timings."""
    import bench
    asked = []

    def fake(argv, env, **kw):
        asked.append(argv)
        with open(env["TIEDGPT_BENCH_JSON"], "w") as f:
            json.dump(dict(tokens_per_s=1.0, ms_per_step=1.0, peak_rss_mb=1.0), f)
        return subprocess.CompletedProcess(argv, 0, "", "")
    monkeypatch.setattr(bench.subprocess, "run", fake)
    bench.bench_against_baseline(config(vocab="corpus"), rounds=1, log=quiet)
    bench.bench_against_baseline(config(), rounds=1, log=quiet)
    assert not any(a.startswith("--vocab_size") for a in asked[1]) and "--vocab_size=50304" in asked[3]


def test_ctrl_c_while_prepare_tokenises_is_one_line(monkeypatch, capsys):
    import data.prepare as P

    def interrupted(*a, **k):
        raise KeyboardInterrupt                                    # what Ctrl-C raises mid-tokenising
    monkeypatch.setattr(P, "prepare", interrupted)
    assert P.main(["--dataset=pydoc_topics"]) == 130
    assert one_line(capsys.readouterr().err)


@pytest.mark.corpus  # (a made-up text prepared as 'shakespeare' in a temp dir)
def test_an_input_txt_that_became_a_folder_leaves_the_prepared_data_in_use(tmp_path, monkeypatch):
    P, d = made_up_shakespeare(tmp_path, monkeypatch, "Words of my own, prepared once. " * 40)
    made = P.prepare("shakespeare", log=quiet)
    (d / "input.txt").unlink()
    (d / "input.txt").mkdir()
    assert P.ensure_prepared("shakespeare", log=quiet) == made


# --- a sixth adversarial pass (on c467fc9) --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, content", [
    ("config.json", b'{\n  "model_type": "gpt2",\n  "n_embd": 768\n}\n'),   # a Hugging Face model's config
    ("config.json", b"\xff\xfebinary"),                                      # not text at all
    ("metrics.jsonl", b"my notes: lr 3e-4 was best"),                        # one line, no newline at its end
    ("metrics.jsonl", b"\n# my log\n"),                                      # a blank first line
    ("metrics.jsonl", b'{"step": 1, "my_loss": 3.2}\n'),                     # another tool's rows
])
def test_a_users_file_under_a_run_files_name_survives_overwrite(data_dir, tmp_path, name, content):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(TrainingError, match=f"not a tiedgpt run's {name}"):
        tiny_run(tmp_path, 1, overwrite=True)
    assert (tmp_path / name).read_bytes() == content


def test_what_a_run_wrote_is_its_own_and_an_edited_or_older_file_is_not(data_dir, tmp_path):
    """A run's config.json is sealed and names the run; every row of its metrics.jsonl names it too, the last one
    perhaps cut by a kill. An edit, a second run's rows, or an older tiedgpt's file (no name, no seal) is not a run's:
    a run won't replace it, even with --overwrite."""
    import rundir
    tiny_run(tmp_path / "run", 2)
    config_json, metrics = (tmp_path / "run" / n for n in ("config.json", "metrics.jsonl"))
    mine = metrics.read_text()
    for path, text, a_runs in ((metrics, mine, True), (metrics, mine + '{"step": 3, "train_lo', True),  # cut by a kill
                               (metrics, mine + "my notes\n", False),
                               (metrics, '{"step": 100, "lr": 0.1, "acc": 0.93}', False),  # whole, no newline, no run
                               (metrics, mine + mine.replace(json.loads(mine.split("\n")[0])["run"], "other"), False),
                               (metrics, '{"step": 0, "val_loss": 9.3, "tokens": 64}\n', False),   # an older run's
                               (config_json, config_json.read_text(), True),
                               (config_json, config_json.read_text().replace('"seed": 1', '"seed": 7'), False),
                               (config_json, '{"head": "tied", "n_embd": 32, "out_dir": "out/tied"}', False)):
        path.write_text(text)
        assert rundir.not_a_runs(str(path)) is not a_runs, text


def test_the_demo_keeps_a_demo_png_that_is_not_the_figure_its_result_recorded(tiny_data, tmp_path):
    import demo as D
    args = ["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"]
    assert D.main(args, log=quiet) == 0
    (tmp_path / "demo.png").write_text("my photo")                  # beside a demo.json of the same settings
    assert D.main(args, log=quiet) == 0
    (kept,) = tmp_path.glob("demo.png.set-aside-*")
    assert kept.read_text() == "my photo" and (tmp_path / "demo.png").read_bytes().startswith(b"\x89PNG")
    assert D.main(args, log=quiet) == 0 and len(list(tmp_path.glob("demo.png.set-aside-*"))) == 1  # its own: redrawn


def test_reproduce_refuses_a_record_whose_config_was_emptied(tmp_path):
    from research import reproduce as R
    out, record = _committed_live_record(tmp_path)
    record["config"] = {}                                          # nothing left to differ: not the plan's either
    (out / "main__tied__seed=1.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="was not made by the live plan"):
        R.main("live", out=str(out), resume=True, log=quiet)


def test_the_sweep_report_refuses_runs_made_with_other_settings(tmp_path, capsys):
    Z, runs = _stepsize_runs(tmp_path)
    path = runs / "tiger_lr=0.01__logn__seed=2.json"
    record = json.loads(path.read_text())
    record["config"]["n_embd"] = 16                                # a smaller run, read as if at the sweep's d
    path.write_text(json.dumps(record))
    assert Z.main(["--report=true", f"--runs={runs}"]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "sweep's settings" in err


# --- runs are reused only on the text they were trained on (the sixth pass's DS2, DS3, S3, P15r) ---------------------------

def test_the_demo_makes_its_runs_again_after_the_text_changed_and_keeps_the_old_result(tiny_data, tmp_path):
    """DS2, and C55: the result made on the old text (same settings) is kept beside the new one, not replaced."""
    import data.prepare as P
    import demo as D
    args = ["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"]
    assert D.main(args, log=quiet) == 0
    first = (tmp_path / "demo.json").read_text(), (tmp_path / "demo.png").read_bytes()
    meta_path = os.path.join(P.dataset_dir("pydoc_topics"), "meta.json")
    meta = json.loads(open(meta_path).read())
    meta["sha256"] = "0" * 64                                      # as if prepared again from another text
    open(meta_path, "w").write(json.dumps(meta))
    said = []
    assert D.main(args, log=said.append) == 0
    assert not any("reused" in s for s in said[:3]) and list((tmp_path / "runs").glob("*.set-aside-*"))
    assert all(json.loads(p.read_text())["text_sha256"] == "0" * 64 for p in (tmp_path / "runs").glob("*.json"))
    (kept,) = tmp_path.glob("demo.json.set-aside-*")
    assert (kept.read_text(), (tmp_path / f"demo.png{kept.name[len('demo.json'):]}").read_bytes()) == first


@pytest.mark.corpus  # (the default corpus is prepared to say what text is there now)
def test_reproduce_refuses_to_add_runs_on_another_text_to_a_folder(tmp_path):
    from research import reproduce as R
    out, record = _committed_live_record(tmp_path)
    record["corpus"] = dict(record.get("corpus") or {}, sha256="0" * 64)   # made on a text that is not there now
    (out / "main__tied__seed=1.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match="another text"):
        R.main("live", out=str(out), resume=True, log=quiet)


@pytest.mark.parametrize("left", [("train.bin", "val.bin"), ("train.bin",)])
def test_a_first_prepare_interrupted_before_its_meta_json_finishes_when_run_again(tmp_path, monkeypatch, left):
    """The tokens it had written are the very bytes the rerun writes: replacing them loses nothing."""
    P, text = a_book(tmp_path, monkeypatch, "A book of my own, prepared in two tries. " * 40)
    d = tmp_path / "data" / P.input_name(text)
    P.prepare(input=str(text), log=quiet)
    for f in {"meta.json", "train.bin", "val.bin"} - set(left):
        (d / f).unlink()                                           # what a Ctrl-C before meta.json leaves
    assert P.prepare(input=str(text), log=quiet)["dataset"] == P.input_name(text)
    (d / "meta.json").unlink()
    (d / "train.bin").write_bytes(b"tokens of my own")             # other bytes: still refused
    with pytest.raises(ValueError, match="not made by prepare.py"):
        P.prepare(input=str(text), log=quiet)


# --- the seventh pass's finds ------------------------------------------------------------------------------------------

def test_meta_json_records_the_sha256_of_the_text_that_was_tokenised_even_if_the_file_changes_meanwhile(
        tmp_path, monkeypatch):
    """C58: a text swapped while prepare.py tokenises must not be recorded as the text the tokens came from."""
    P, text = a_book(tmp_path, monkeypatch, "The first text, the one that is read. " * 40)
    first = P._source_sha256(str(text))
    enc = P.get_encoding()
    real = enc.encode_ordinary

    def swapped_meanwhile(s):
        text.write_text("A second text, put there while the first was tokenised. " * 40)
        return real(s)
    monkeypatch.setattr(enc, "encode_ordinary", swapped_meanwhile)
    assert P.prepare(input=str(text), log=quiet)["sha256"] == first
    monkeypatch.setattr(enc, "encode_ordinary", real)
    said = []
    P.ensure_prepared(input=str(text), log=said.append)          # so the next run sees the change and prepares again
    assert any("changed" in s for s in said)


def test_a_text_with_windows_line_ends_is_tokenised_as_before_and_hashed_as_its_bytes(tmp_path, monkeypatch):
    import data.prepare as P
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"one line\r\nanother\rlast\n")
    assert P.read_text(str(path), "--input") == ("one line\nanother\nlast\n", P._source_sha256(str(path)))


def test_prepare_never_replaces_a_token_file_its_meta_json_does_not_vouch_for(tmp_path, monkeypatch):
    """C59: a val.bin of the user's beside prepare's valid meta.json, and the text changed: the file is kept."""
    P, text = a_book(tmp_path, monkeypatch, "A book of my own, prepared once. " * 40)
    meta = P.prepare(input=str(text), log=quiet)
    mine = tmp_path / "data" / meta["dataset"] / "val.bin"
    mine.write_bytes(b"my own tokens")
    text.write_text("The book, edited. " * 50)
    with pytest.raises(ValueError, match="vouches for") as e:
        P.ensure_prepared(input=str(text), log=quiet)
    assert one_line(str(e.value)) and mine.read_bytes() == b"my own tokens"


def test_a_stray_input_txt_beside_the_pydoc_topics_does_not_prepare_them_again_on_every_run(tmp_path, monkeypatch):
    """C54: only Shakespeare's folder holds its source text; an input.txt anywhere else is not the corpus's."""
    import data.prepare as P
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    P.prepare("pydoc_topics", log=quiet)
    (tmp_path / "pydoc_topics" / "input.txt").write_text("a stray file")
    said = []
    P.ensure_prepared("pydoc_topics", log=said.append)
    assert said == []


@pytest.mark.parametrize("field, edited", [("dropout", 0.1), ("beta2", 0.99), ("bias", True), ("weight_decay", 0.0)])
def test_reproduce_refuses_a_run_made_with_other_settings_than_the_plans_outside_its_overrides(
        tmp_path, monkeypatch, field, edited):
    """C78-C90: the whole resolved config is the plan's, not only the keys the plan sets (an edited record, or a run
    made before a default changed, would otherwise be added to)."""
    from research import reproduce as R
    monkeypatch.setattr(R, "run_one", lambda *a, **k: pytest.fail("ran beside a run of other settings"))
    out, record = _committed_live_record(tmp_path)
    assert record["config"][field] != edited
    record["config"][field] = edited
    (out / "main__tied__seed=1.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit, match=f"was not made by the live plan .*{field}"):
        R.main("live", out=str(out), resume=True, log=quiet)


@pytest.mark.reports
def test_every_committed_run_is_its_plans_by_the_whole_resolved_config():
    from research import reproduce as R
    for scale in R.SCALES:
        R.check_made_by_plan(scale, R.load_runs(R.committed_path(scale)), R.committed_path(scale))


@pytest.mark.parametrize("mode", ["--overwrite=true", "--resume=false"])
@pytest.mark.parametrize("content", ["bytes", "another program's torch file", "a zip naming the fields in passing"])
def test_overwrite_never_deletes_a_ckpt_pt_no_run_wrote(data_dir, tmp_path, capsys, content, mode):
    """C1, C2 (and the eighth pass's F1-2): --overwrite replaces a run's own files; a ckpt.pt is judged by what is in
    it, as config.json is: torch.save's layout, and the checkpoint's own keys pickled. A fresh run says the same
    (the sixteenth pass's E: it advised --overwrite=true, which then refused the file)."""
    import zipfile
    path = tmp_path / "ckpt.pt"
    if content == "bytes":
        path.write_bytes(b"my model, trained for a week")
    elif content == "a zip naming the fields in passing":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("thesis/data.pkl", b"chapter 3: data_rng and torch_rng")
            z.writestr("thesis/version", b"3")
    else:
        torch.save({"model": {"w": torch.ones(2)}, "iter_num": 5000, "best_val_loss": 2.9}, path)   # a nanoGPT-like one
    kept = path.read_bytes()
    code = T.main([*TINY, "--max_iters=2", f"--out_dir={tmp_path}", mode])
    err = capsys.readouterr().err
    assert code != 0 and one_line(err) and "not a checkpoint a tiedgpt run wrote" in err and path.read_bytes() == kept
    assert "--overwrite=true replaces" not in err


def test_overwrite_clears_a_runs_own_checkpoint_and_leaves_a_ckpt_pt_tmp_that_is_none(data_dir, tmp_path):
    """C4: ckpt.pt.tmp is an older version's temporary name; a file there that is no checkpoint is not the run's."""
    tiny_run(tmp_path, 2)
    (tmp_path / "ckpt.pt.tmp").write_text("my notes")
    tiny_run(tmp_path, 3, overwrite=True)
    assert (tmp_path / "ckpt.pt.tmp").read_text() == "my notes" and len(rows(tmp_path)) > 0


def test_reproduce_ckpt_dir_never_deletes_a_ckpt_pt_no_run_wrote(tmp_path, monkeypatch):
    """C61: a run's --ckpt_dir folder holding someone's ckpt.pt: the fresh start (overwrite) refuses, the file stays."""
    import rundir
    from research import reproduce as R

    def claim_only(config, **_):          # the run's claim on its folder, then stop: no plan is trained here
        rundir.release_out_dir(rundir.claim_out_dir(config))
        pytest.fail("claimed a folder holding a foreign ckpt.pt")
    monkeypatch.setattr(R, "train", claim_only)
    folder = tmp_path / "ckpts" / "main__tied__seed=1"
    folder.mkdir(parents=True)
    (folder / "ckpt.pt").write_bytes(b"my model, trained for a week")
    with pytest.raises(SystemExit, match="not a checkpoint a tiedgpt run wrote.*--ckpt_dir"):
        R.main("live", out=str(tmp_path / "o"), seeds=[1], arms=["tied"], groups=["main"], log=quiet,
               ckpt_dir=str(tmp_path / "ckpts"))
    assert (folder / "ckpt.pt").read_bytes() == b"my model, trained for a week"


@pytest.mark.parametrize("where", ["the checkout's root", "its research folder"])
def test_reproduce_refuses_a_ckpt_dir_in_the_checkout_up_front_naming_the_flag(tmp_path, monkeypatch, capsys, where):
    """C67, C119: nothing was lost there, but a checkout is never an output, and the refusal names --ckpt_dir."""
    from research import reproduce as R
    monkeypatch.setattr(R, "run_one", lambda *a, **k: pytest.fail("ran with its checkpoints in the checkout"))
    ckpt_dir = ROOT if where == "the checkout's root" else os.path.join(ROOT, "research")
    assert R._cli(["live", "--seeds=1", "--arms=tied", f"--out={tmp_path}", f"--ckpt_dir={ckpt_dir}"]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "--ckpt_dir=" in err


def test_a_row_whose_step_is_true_is_not_a_runs_row(tmp_path):
    """C12: a bool is an int in Python; a run's step is a whole number, never true."""
    import rundir
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": true, "lr": 1}\n')
    assert rundir.not_a_runs(str(path))
    path.write_text('{"step": 0, "lr": 0.001, "run": "a1"}\n')
    assert not rundir.not_a_runs(str(path))


def test_a_config_json_without_its_metrics_is_set_aside_when_a_copied_checkpoint_resumes(data_dir, tmp_path):
    """C17: a run writes config.json and metrics.jsonl together; a config.json alone may be another run's."""
    a, b = tmp_path / "A", tmp_path / "B"
    tiny_run(a, 5, seed=1, eval_interval=5)
    tiny_run(b, 10, seed=2, eval_interval=5)
    config_a = (a / "config.json").read_text()
    (a / "metrics.jsonl").unlink()
    (a / "ckpt.pt").write_bytes((b / "ckpt.pt").read_bytes())
    tiny_run(a, 15, seed=2, lr_decay_iters=10, eval_interval=5, resume=True)
    (kept,) = a.glob("config.json.set-aside-*")
    assert kept.read_text() == config_a


@pytest.mark.parametrize("config_json", ["as written", "deleted"])
def test_a_step_0_checkpoint_copied_into_another_runs_folder_sets_that_runs_files_aside(data_dir, tmp_path, monkeypatch,
                                                                                      config_json):
    """The eighth pass's F1-1: a Ctrl-C in the first evaluation leaves a checkpoint with no rows before it, so rows
    can't tell whose metrics.jsonl is there; the run's name in config.json and in the checkpoint can. The ninth
    pass's s0c: a missing config.json is not the checkpoint's either (s0b, one that names no run, is an older
    tiedgpt's: refused as no run's, test_what_a_run_wrote_is_its_own_and_an_edited_or_older_file_is_not)."""
    a, b = tmp_path / "A", tmp_path / "B"
    real = T.evaluate

    def ctrl_c_during(*args, **kw):
        os.kill(os.getpid(), signal.SIGINT)                        # the first evaluation is interrupted
        return real(*args, **kw)
    monkeypatch.setattr(T, "evaluate", ctrl_c_during)
    with pytest.raises(KeyboardInterrupt):
        tiny_run(a, 10)
    monkeypatch.setattr(T, "evaluate", real)
    assert torch.load(a / "ckpt.pt", weights_only=True)["step"] == 0
    tiny_run(b, 10, seed=2)
    if config_json == "deleted":
        (b / "config.json").unlink()
    before = (b / "metrics.jsonl").read_text()
    (b / "ckpt.pt").write_bytes((a / "ckpt.pt").read_bytes())
    tiny_run(b, 10, resume=True)
    (kept,) = b.glob("metrics.jsonl.set-aside-*")
    assert kept.read_text() == before


def test_another_runs_metrics_copied_beside_a_step_0_checkpoint_and_its_own_config_is_set_aside(data_dir, tmp_path,
                                                                                                monkeypatch):
    """The eleventh pass's A: with no rows before step 0 and the checkpoint's own config.json beside it, only the run's
    name on every row of metrics.jsonl tells that the rows are another run's (they would be dropped as "past the
    checkpoint", unread)."""
    a, b = tmp_path / "A", tmp_path / "B"
    real = T.evaluate

    def ctrl_c_during(*args, **kw):
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kw)
    monkeypatch.setattr(T, "evaluate", ctrl_c_during)
    with pytest.raises(KeyboardInterrupt):
        tiny_run(a, 10)
    monkeypatch.setattr(T, "evaluate", real)
    tiny_run(b, 10, seed=2)
    before = (b / "metrics.jsonl").read_text()
    (a / "metrics.jsonl").write_text(before)                       # B's rows, beside A's checkpoint and config.json
    tiny_run(a, 10, resume=True)
    (kept,) = a.glob("metrics.jsonl.set-aside-*")
    assert kept.read_text() == before
    assert {r["run"] for r in rows(a).values()} == {json.loads((a / "config.json").read_text())["run"]}


def test_rows_past_a_smaller_max_iters_that_a_resumed_run_will_not_redo_are_kept(data_dir, tmp_path):
    """The eleventh pass's B: rows past the checkpoint are dropped because the resumed run writes them again; rows past
    its --max_iters it never writes, so the metrics.jsonl holding them is kept whole beside the run."""
    kw = dict(eval_interval=4, lr_decay_iters=8)
    tiny_run(tmp_path, 4, **kw)
    at_4 = (tmp_path / "ckpt.pt").read_bytes()
    tiny_run(tmp_path, 8, resume=True, **kw)
    before = (tmp_path / "metrics.jsonl").read_text()
    (tmp_path / "ckpt.pt").write_bytes(at_4)                       # the run's own step-4 checkpoint, rows 5-8 past it
    tiny_run(tmp_path, 6, resume=True, **kw)
    (kept,) = tmp_path.glob("metrics.jsonl.set-aside-*")
    assert kept.read_text() == before and max(rows(tmp_path)) == 6


@pytest.mark.parametrize("dropped", [("run_id",), ("run_id", "history")])
def test_a_checkpoint_that_names_no_run_is_refused_and_the_files_beside_it_are_untouched(data_dir, tmp_path, capsys,
                                                                                       dropped):
    """The twelfth pass's 1: a checkpoint from before checkpoints named their run (and kept their rows) can't tell
    whose metrics.jsonl and config.json lie beside it, so resuming it would splice or drop another run's rows."""
    a, b = tmp_path / "A", tmp_path / "B"
    tiny_run(a, 10, eval_interval=5, lr_decay_iters=20)
    tiny_run(b, 10, seed=7, eval_interval=5, lr_decay_iters=20)
    old = torch.load(a / "ckpt.pt", weights_only=True)
    for key in dropped:
        del old[key]
    torch.save(old, b / "ckpt.pt")                                 # an older version's checkpoint, beside B's files
    before = {n: (b / n).read_text() for n in ("metrics.jsonl", "config.json")}
    code = T.main([*TINY, "--max_iters=20", "--eval_interval=5", "--lr_decay_iters=20", f"--out_dir={b}",
                   "--resume=true"])
    err = capsys.readouterr().err
    assert code != 0 and one_line(err) and "names no run" in err
    assert {n: (b / n).read_text() for n in before} == before


@pytest.mark.parametrize("mode", ["resume", "overwrite"])
def test_a_config_json_edited_since_its_run_wrote_it_is_refused_not_replaced(data_dir, tmp_path, mode):
    """The twelfth pass's 4: a run writes its config.json again when it resumes (and --overwrite removes it); one the
    user has edited (a note added) is told by its seal and refused in one line, untouched."""
    tiny_run(tmp_path, 5, eval_interval=5, lr_decay_iters=10)
    info = json.loads((tmp_path / "config.json").read_text())
    edited = json.dumps({**info, "note": "lr 3e-4 was best"})
    (tmp_path / "config.json").write_text(edited)
    with pytest.raises(TrainingError, match="is not a tiedgpt run's config.json") as e:
        tiny_run(tmp_path, 10, eval_interval=5, lr_decay_iters=10, **{mode: True})
    assert one_line(str(e.value)) and (tmp_path / "config.json").read_text() == edited


def test_a_checkpoint_whose_data_identity_was_emptied_is_refused(data_dir, tmp_path):
    """The twelfth pass: data={} left nothing to compare, so the run resumed on whatever text it was given."""
    tiny_run(tmp_path, 5, eval_interval=5, lr_decay_iters=10)
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    state["data"] = {}
    torch.save(state, tmp_path / "ckpt.pt")
    with pytest.raises(TrainingError, match="trained on other data") as e:
        tiny_run(tmp_path, 10, eval_interval=5, lr_decay_iters=10, resume=True)
    assert one_line(str(e.value))


def test_extending_a_finished_run_keeps_the_evaluation_of_its_old_last_step(data_dir, tmp_path):
    """The thirteenth pass's 1: a run evaluates its last step (6 here) even off the eval_interval grid; extended to 8,
    it no longer evaluates step 6, so that row would be written again without its val_loss. The file holding it is
    kept whole beside the run."""
    tiny_run(tmp_path, 6, eval_interval=4)
    before = (tmp_path / "metrics.jsonl").read_text()
    assert "val_loss" in rows(tmp_path)[6]
    tiny_run(tmp_path, 8, eval_interval=4, lr_decay_iters=6, resume=True)
    (kept,) = tmp_path.glob("metrics.jsonl.set-aside-*")
    assert kept.read_text() == before and "val_loss" not in rows(tmp_path)[6]


def test_a_checkpoint_whose_config_is_not_a_dict_is_refused_naming_that(data_dir, tmp_path):
    """The thirteenth pass: the refusal said "missing []"."""
    tiny_run(tmp_path, 5, eval_interval=5, lr_decay_iters=10)
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    state["config"] = "adamw"
    torch.save(state, tmp_path / "ckpt.pt")
    with pytest.raises(TrainingError, match="its config is not a dict"):
        tiny_run(tmp_path, 10, eval_interval=5, lr_decay_iters=10, resume=True)


def test_overwrite_keeps_a_checkpoint_with_pickled_code_and_runs_nothing(data_dir, tmp_path):
    """The fourteenth pass's 2: --resume refused such a ckpt.pt (it asks to load os.system) but --overwrite deleted
    it: both now judge it as torch.load(weights_only=True) does, which refuses it without running it."""
    import checkpoint as K
    from test_train import Booby
    tiny_run(tmp_path, 2)
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    state["history"].append(Booby(str(tmp_path / "PWNED")))
    torch.save(state, tmp_path / "ckpt.pt")
    kept = (tmp_path / "ckpt.pt").read_bytes()
    assert not K.written_by_a_run(str(tmp_path / "ckpt.pt"))
    with pytest.raises(TrainingError, match="not a checkpoint a tiedgpt run wrote"):
        tiny_run(tmp_path, 2, overwrite=True)
    assert (tmp_path / "ckpt.pt").read_bytes() == kept and not (tmp_path / "PWNED").exists()


def test_a_lone_cut_line_is_a_runs_only_beside_its_runs_config(data_dir, tmp_path):
    """The fourteenth pass's 1: a file holding only the start of a row could be a run's first row cut by a kill, but
    a run writes its config.json first: with no run's config.json beside it, it is the user's, kept by --overwrite."""
    import rundir
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "val_loss": 3.2, "my own note')
    assert rundir.not_a_runs(str(tmp_path / "metrics.jsonl"))
    with pytest.raises(TrainingError, match="not a tiedgpt run's metrics.jsonl"):
        tiny_run(tmp_path, 2, overwrite=True)
    tiny_run(tmp_path / "run", 2)
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 0, "train_lo')  # a run's first row, cut by a kill
    assert not rundir.not_a_runs(str(tmp_path / "run" / "metrics.jsonl"))


def test_a_json_file_nested_too_deep_to_read_is_one_line_for_every_reader(data_dir, tmp_path, capsys):
    """The eighth pass's 11 tracebacks, one cause: json raises RecursionError (not a ValueError) on deep nesting."""
    import data.prepare as P
    import demo as D
    import rundir
    from research import records, workers
    from research import stepsize as Z
    deep = "[" * 100000 + "]" * 100000
    path = tmp_path / "deep.json"
    path.write_text(deep)
    with pytest.raises(ValueError, match="not JSON"):
        D.load_result(str(path))
    assert workers.record_of(str(path), config()) is None
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "x.json").write_text(deep)
    with pytest.raises(ValueError, match="not valid JSON"):
        records.load_runs(str(tmp_path / "runs"))
    assert Z.main(["--report=true", f"--runs={tmp_path / 'runs'}"]) == 2 and one_line(capsys.readouterr().err)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "metrics.jsonl").write_text(deep + "\n")
    assert rundir.not_a_runs(str(tmp_path / "out" / "metrics.jsonl"))
    code = T.main([*TINY, "--max_iters=2", f"--out_dir={tmp_path / 'out'}"])
    assert code != 0 and one_line(capsys.readouterr().err) and not (tmp_path / "out" / ".lock").exists()
    meta = os.path.join(P.dataset_dir("pydoc_topics"), "meta.json")
    kept = open(meta).read()
    try:
        open(meta, "w").write(deep)
        with pytest.raises(ValueError, match="not valid JSON"):
            P.load_meta("pydoc_topics")
    finally:
        open(meta, "w").write(kept)


# --- what a tool wrote is sealed with its content's sha256 (the eighth pass's F4-1, de2, dl7c, ssr4) ------------------

@pytest.mark.slow  # (the tiny demo, twice)
def test_a_demo_result_or_run_edited_since_it_was_written_is_never_taken_as_the_demos(tiny_data, tmp_path):
    """F4-1: a demo.json of the user's editing is kept, not replaced; de2: an edited run file is made again, not read."""
    import demo as D
    args = ["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"]
    assert D.main(args, log=quiet) == 0
    result = json.loads((tmp_path / "demo.json").read_text())
    result["notes"] = "mine"
    (tmp_path / "demo.json").write_text(json.dumps(result))
    with pytest.raises(ValueError, match="edited since demo.py wrote it"):
        D.load_result(str(tmp_path / "demo.json"))
    run = sorted((tmp_path / "runs").glob("*.json"))[0]
    rec = json.loads(run.read_text())
    rec["val"][-1] = 0.5                                           # a better last loss, typed in
    run.write_text(json.dumps(rec))
    said = []
    assert D.main(args, log=said.append) == 0
    (kept,) = tmp_path.glob("demo.json.set-aside-*")
    assert json.loads(kept.read_text())["notes"] == "mine"
    assert json.loads(run.read_text())["val"][-1] != 0.5 and list((tmp_path / "runs").glob("*.set-aside-*"))


def test_a_reproduce_record_edited_since_its_run_wrote_it_is_refused(tmp_path):
    from research import records
    out, record = _committed_live_record(tmp_path)
    path = out / "main__tied__seed=1.json"
    records.write_atomic(str(path), record)
    assert len(records.load_runs(str(out))) == 1
    sealed = json.loads(path.read_text())
    sealed["history"][-1]["val_loss"] -= 0.1                     # a better last loss, typed in
    path.write_text(json.dumps(sealed))
    with pytest.raises(ValueError, match="edited since its run wrote it"):
        records.load_runs(str(out))


def test_a_committed_demo_result_holding_a_run_twice_is_refused(tmp_path):
    import demo as D
    result = json.loads(open(D.COMMITTED).read())
    twin = dict(result["runs"][0], val=[v + 5 for v in result["runs"][0]["val"]])
    result["runs"].insert(0, twin)
    (tmp_path / "demo.json").write_text(json.dumps(result))
    with pytest.raises(ValueError, match="holds a run twice"):
        D.load_result(str(tmp_path / "demo.json"))


@pytest.mark.corpus  # (the text's sha256 is the prepared default corpus's)
def test_the_sweep_report_names_another_text_as_the_reason_a_run_is_refused(tmp_path, capsys):
    Z, runs = _stepsize_runs(tmp_path)
    path = runs / "tiger_lr=0.01__logn__seed=2.json"
    record = json.loads(path.read_text())
    record["text_sha256"] = "0" * 64
    path.write_text(json.dumps(record))
    assert Z.main(["--report=true", f"--runs={runs}"]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "another text" in err


# --- the eighth pass's wrong reasons: each refusal names its real cause ---------------------------------------------

def test_resuming_after_the_text_changed_names_the_text_not_the_vocabulary(tmp_path, monkeypatch):
    """s1: with vocab=corpus a changed text also changes n; the refusal names the data, the cause."""
    P, text = a_book(tmp_path, monkeypatch, open(os.path.join(ROOT, "data", "README.md")).read() * 3)
    tiny_run(tmp_path / "run", 2, input=str(text), dataset="shakespeare", vocab="corpus")
    text.write_text(text.read_text() + " Zygomorphic quetzalcoatl.\n")
    with pytest.raises(TrainingError, match="trained on other data"):
        tiny_run(tmp_path / "run", 4, input=str(text), dataset="shakespeare", vocab="corpus", resume=True)


def test_an_input_that_is_a_device_is_named_as_no_regular_file(capsys):
    import data.prepare as P
    assert P.main(["--input=/dev/null"]) != 0
    err = capsys.readouterr().err
    assert one_line(err) and "not a regular file" in err


def test_a_changed_text_is_prepared_again_with_the_split_it_was_prepared_with(tmp_path, monkeypatch):
    """q2: --val_fraction=0.5, then the text changes: the next run prepares it at 0.5 again, not the default 0.1."""
    P, text = a_book(tmp_path, monkeypatch, "A book of my own, split in half. " * 40)
    P.prepare(input=str(text), val_fraction=0.5, log=quiet)
    text.write_text("A book of my own, split in half, and edited. " * 40)
    meta = P.ensure_prepared(input=str(text), log=quiet)
    assert meta["val_fraction"] == 0.5 and abs(meta["val_tokens"] - meta["train_tokens"]) <= 1


def test_bench_with_negative_steps_says_the_least_it_takes_as_it_does_for_zero(capsys):
    """bn2: train.py's own check (0 means no bench) answered first, with '>= 0'."""
    import bench
    assert bench.main(["--bench=-1"]) == 2 and ">= 1" in capsys.readouterr().err


def test_a_users_config_json_in_a_ckpt_dir_run_folder_is_refused_naming_the_ckpt_dir(tmp_path, monkeypatch):
    """ck2: reproduce's flag is --ckpt_dir; its refusal says so, before anything trains."""
    from research import reproduce as R
    monkeypatch.setattr(R, "train", lambda *a, **k: pytest.fail("trained beside a file of the user's"))
    folder = tmp_path / "ckpts" / "main__tied__seed=1"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"app": 9}')
    with pytest.raises(SystemExit, match="not a tiedgpt run's config.json.*--ckpt_dir"):
        R.main("live", out=str(tmp_path / "o"), seeds=[1], arms=["tied"], groups=["main"], log=quiet,
               ckpt_dir=str(tmp_path / "ckpts"))
    assert (folder / "config.json").read_text() == '{"app": 9}'


# --- the ninth pass's finds ---------------------------------------------------------------------------------------------

def test_a_fifo_under_a_name_a_tool_reads_is_refused_in_one_line_not_waited_on(data_dir, tmp_path, capsys):
    """Opening a FIFO to read waits for a writer that never comes: every reader refuses one first (7 hangs)."""
    import data.prepare as P
    import demo as D
    from research import records, workers
    from research import reproduce as R
    from research import stepsize as Z

    def hung(*_):
        raise TimeoutError("a reader waited on the FIFO")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        tiny_run(tmp_path / "run", 2)
        for name in ("metrics.jsonl", "config.json", "ckpt.pt"):
            kept = (tmp_path / "run" / name).read_bytes()
            (tmp_path / "run" / name).unlink()
            os.mkfifo(tmp_path / "run" / name)
            code = T.main([*TINY, "--max_iters=4", "--lr_decay_iters=2", f"--out_dir={tmp_path / 'run'}",
                           "--resume=true"])
            err = capsys.readouterr().err
            assert code != 0 and one_line(err) and "not a regular file" in err, name
            (tmp_path / "run" / name).unlink()
            (tmp_path / "run" / name).write_bytes(kept)
        fifo = tmp_path / "runs" / "zz.json"
        fifo.parent.mkdir()
        os.mkfifo(fifo)
        with pytest.raises(ValueError, match="not a regular file"):
            records.load_runs(str(fifo.parent))
        assert Z.main(["--report=true", f"--runs={fifo.parent}"]) == 2 and one_line(capsys.readouterr().err)
        with pytest.raises(ValueError, match="not a regular file"):
            D.load_result(str(fifo))
        assert workers.record_of(str(fifo), config()) is None
        os.mkfifo(tmp_path / "ckpt.pt")
        with pytest.raises(SystemExit, match="not a checkpoint a tiedgpt run wrote"):
            R._ckpt_step(str(tmp_path))
        meta = os.path.join(P.dataset_dir("pydoc_topics"), "meta.json")
        kept = open(meta).read()
        os.remove(meta)
        os.mkfifo(meta)
        try:
            with pytest.raises(ValueError, match="not a regular file"):
                P.load_meta("pydoc_topics")
        finally:
            os.remove(meta)
            open(meta, "w").write(kept)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.slow  # (the tiny demo, twice)
def test_the_demo_reuses_only_run_files_sealed_as_written(tiny_data, tmp_path):
    """d9: a run file edited and stripped of its seal reads as an older, unsealed one; the demo makes it again."""
    import demo as D
    args = ["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"]
    assert D.main(args, log=quiet) == 0
    run = sorted((tmp_path / "runs").glob("*.json"))[0]
    rec = json.loads(run.read_text())
    made = rec["val"][-1]
    rec["val"][-1] -= 5
    del rec["sha256"]
    run.write_text(json.dumps(rec))
    assert D.main(args, log=quiet) == 0
    assert json.loads(run.read_text())["val"][-1] == made and list((tmp_path / "runs").glob("*.set-aside-*"))


def test_a_val_fraction_the_token_counts_do_not_bear_out_is_not_taken(tmp_path, monkeypatch):
    """p5c: meta.json's val_fraction edited by hand; a changed text is prepared again at the split on disk."""
    P, text = a_book(tmp_path, monkeypatch, "A book of my own, split as usual. " * 40)
    meta = P.prepare(input=str(text), log=quiet)
    path = tmp_path / "data" / meta["dataset"] / "meta.json"
    path.write_text(json.dumps(dict(meta, val_fraction=0.5)))
    text.write_text("A book of my own, split as usual, and edited. " * 40)
    again = P.ensure_prepared(input=str(text), log=quiet)
    assert again["val_tokens"] < again["train_tokens"] / 5


# --- the tenth pass's finds ---------------------------------------------------------------------------------------------

@pytest.mark.slow  # (the tiny demo, twice)
def test_a_fifo_at_demo_png_is_set_aside_not_waited_on(tiny_data, tmp_path):
    import demo as D
    args = ["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path}"]
    assert D.main(args, log=quiet) == 0
    (tmp_path / "demo.png").unlink()
    os.mkfifo(tmp_path / "demo.png")
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("waited on the FIFO"))
    signal.alarm(60)
    try:
        assert D.main(args, log=quiet) == 0
    finally:
        signal.alarm(0)
    assert list(tmp_path.glob("demo.png.set-aside-*")) and (tmp_path / "demo.png").read_bytes().startswith(b"\x89PNG")


def test_a_split_with_no_tokens_on_one_side_is_refused_and_a_fifo_token_file_is_never_read(tmp_path, monkeypatch):
    """C: 1 - 1e-17 is 1.0, so --val_fraction=1e-17 gave a val split of 0 tokens; B: a FIFO there then hung."""
    P, text = a_book(tmp_path, monkeypatch, "A book of my own, split in two. " * 40)
    with pytest.raises(ValueError, match="val_fraction=1e-17 leaves no token"):
        P.prepare(input=str(text), val_fraction=1e-17, log=quiet)
    meta = P.prepare(input=str(text), log=quiet)
    d = tmp_path / "data" / meta["dataset"]
    (d / "val.bin").unlink()
    os.mkfifo(d / "val.bin")
    (d / "meta.json").write_text(json.dumps(dict(meta, val_tokens=0, tokens=meta["train_tokens"])))
    with pytest.raises(ValueError, match="not a regular file"):
        P.check_prepared(meta["dataset"], P.load_meta(meta["dataset"]))
    os.remove(d / "val.bin")
    os.mkdir(d / "val.bin")                                        # the thirteenth pass: a folder's size, read as tokens
    with pytest.raises(ValueError, match="val.bin is not a regular file"):
        P.check_prepared(meta["dataset"], P.load_meta(meta["dataset"]))


@pytest.mark.parametrize("edit", ["a tensor in a row", "a row twice", "a negative loss sum", "tokens past 2**63"])
def test_a_crafted_checkpoint_whose_rows_or_sums_no_run_writes_is_refused_in_one_line(data_dir, tmp_path, edit):
    """D, I: rows that can't be written as JSON (a traceback), a row twice, a loss sum below 0, a token count past
    any run's: each is a checkpoint no run wrote."""
    tiny_run(tmp_path, 20, eval_interval=10)
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    if edit == "a tensor in a row":
        state["history"][0]["val_loss"] = torch.tensor(1.0)
    elif edit == "a row twice":
        state["history"].insert(0, dict(state["history"][0]))
    elif edit == "a negative loss sum":
        state["loss_sum"] = -1e308
    else:
        state["tokens"] = 2 ** 70
    torch.save(state, tmp_path / "ckpt.pt")
    with pytest.raises(TrainingError, match="is damaged") as e:
        tiny_run(tmp_path, 30, eval_interval=10, lr_decay_iters=20, resume=True)
    assert one_line(str(e.value))


@pytest.mark.parametrize("mode", ["--overwrite=true", "--resume=true"])
def test_a_folder_under_a_run_files_name_is_refused_before_anything_is_removed(data_dir, tmp_path, capsys, mode):
    """H: under --overwrite the refusal came after ckpt.pt was gone. The twelfth pass: under --resume it said
    'could not write' of a file it was reading."""
    tiny_run(tmp_path, 2)
    (tmp_path / "metrics.jsonl").unlink()
    (tmp_path / "metrics.jsonl").mkdir()
    kept = (tmp_path / "ckpt.pt").read_bytes()
    code = T.main([*TINY, "--max_iters=2", f"--out_dir={tmp_path}", mode])
    err = capsys.readouterr().err
    assert code != 0 and one_line(err) and "metrics.jsonl is a folder" in err
    assert (tmp_path / "ckpt.pt").read_bytes() == kept


def test_a_record_whose_history_repeats_or_reverses_a_step_is_refused(tmp_path):
    from research import records
    out, record = _committed_live_record(tmp_path)
    for history in (record["history"][:1] + record["history"], record["history"][::-1]):
        path = out / "main__tied__seed=1.json"
        path.write_text(json.dumps(dict(record, history=history)))
        with pytest.raises(ValueError, match="does not come after the row before it"):
            records.load_runs(str(out))
