"""demo.py, the finding live: it runs end to end (tiny), keeps finished runs through Ctrl-C, refuses bad flags
in one line, words its verdict as the numbers say, and its committed result is what its defaults make."""
import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import ROOT

import demo as D
from research import workers as W


def tiny(out):
    return ["--tiny", "--dataset=pydoc_topics", f"--out={out}"]


def test_the_demo_runs_end_to_end_in_its_tiny_mode_and_writes_its_figure_and_result(tiny_data, tmp_path):
    lines = []
    assert D.main(tiny(tmp_path), log=lines.append) == 0
    result = D.load_result(str(tmp_path / "demo.json"))
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    assert set(result["verdicts"]) == {"tiger", "adamw"}
    assert len(result["runs"]) == 2 * 2 * 2 and result["run"]["runs_reused"] == 0
    steps = list(range(0, D.TINY["steps"] + 1, D.TINY["eval_every"]))
    for r in result["runs"]:
        assert r["steps"] == steps and all(np.isfinite(r["val"]))
    assert result["dataset"]["dataset"] == "pydoc_topics"
    assert any(line.lstrip().startswith("Tiger:") for line in lines) and any("AdamW:" in line for line in lines)
    assert len(os.listdir(tmp_path / "runs")) == 8


def test_the_progress_bar_follows_every_evaluated_step_of_a_run(tiny_data):
    """train() says 'step N: ...' at each evaluation; the bar moves on those lines, not only when a run ends."""
    import torch
    s, seen, threads = D.parse_args(["--tiny", "--dataset=pydoc_topics"]), [], torch.get_num_threads()
    torch.set_num_threads(1)  # as the demo's tiny mode does: a tiny model only waits for a second thread
    try:
        W.run_one(D.run_config(s, "tiger", "logn", 1, "pydoc_topics", "cpu"), on_step=seen.append)
    finally:
        torch.set_num_threads(threads)
    assert seen == list(range(0, s.steps + 1, s.eval_every))


def test_a_process_that_imported_the_notebook_kernel_is_still_no_notebook_so_no_bar_in_a_log():
    """A test run that executed notebooks has ipykernel imported; only a running IPython shell is a notebook."""
    pytest.importorskip("ipykernel")  # jupyterlab brings it (requirements.txt); a GPU image without it skips
    from train import in_notebook
    assert "ipykernel" in sys.modules and not in_notebook()


def test_ctrl_c_keeps_the_finished_runs_and_the_same_command_reuses_them(tiny_data, tmp_path, monkeypatch, capsys):
    real, calls = W.run_one, []

    def interrupted_after_the_first_run(config, on_step=lambda step: None):
        calls.append(config)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(config, on_step)

    one_seed = tiny(tmp_path) + ["--seeds=1"]  # 4 runs
    monkeypatch.setattr(W, "run_one", interrupted_after_the_first_run)
    assert D.main(one_seed, log=lambda *a: None) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "finished runs are kept" in err[0]
    assert len(os.listdir(tmp_path / "runs")) == 1 and not (tmp_path / "demo.json").exists()

    monkeypatch.setattr(W, "run_one", real)
    assert D.main(one_seed, log=lambda *a: None) == 0
    assert D.load_result(str(tmp_path / "demo.json"))["run"]["runs_reused"] == 1
    assert D.main(one_seed + ["--fresh"], log=lambda *a: None) == 0
    assert D.load_result(str(tmp_path / "demo.json"))["run"]["runs_reused"] == 0


def test_a_bad_flag_gets_one_line_and_exit_code_2(capsys):
    for bad in (["--bogus=1"], ["--seeds=1,x"], ["--steps=0"], ["--optimizers=sgd"], ["--steps=105"], ["--n_head=5"],
                ["seeds=1"], ["--fresh=maybe"], ["--n_embd=0"], ["--quick", "--tiny"]):
        assert D.main(bad, log=lambda *a: None) == 2, bad
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("demo.py: "), (bad, err)


def test_device_cuda_without_a_gpu_is_one_line_not_a_traceback(capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert D.main(["--device=cuda"], log=lambda *a: None) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def planted(gaps_by_opt, steps=(0, 10, 20)):
    """A result whose logn - ortho gap at the last step is planted per seed (ortho's curve is a flat 5.0)."""
    s = D.parse_args(["--tiny", f"--seeds={','.join(str(i) for i in range(1, 1 + len(next(iter(gaps_by_opt.values())))))}",
                      f"--optimizers={','.join(gaps_by_opt)}", "--steps=20", "--eval_every=10"])
    runs = []
    for opt, gaps in gaps_by_opt.items():
        for seed, g in enumerate(gaps, 1):
            for arm, last in (("logn", 5.0 + g), ("ortho", 5.0)):
                runs.append(dict(optimizer=opt, arm=arm, seed=seed, steps=list(steps), val=[9.0, 7.0, last]))
    return D.summarise(s, runs, dict(dataset="shakespeare", n=11706), 1.0, 0, "cpu", 2, 1)


def test_the_verdict_says_yes_no_or_cant_tell_as_the_planted_gaps_say():
    result = planted(dict(tiger=[0.50, 0.55, 0.45], lamb=[0.04, -0.05, 0.02], adamw=[-0.30, -0.34, -0.26]))
    words = {o: v["word"] for o, v in result["verdicts"].items()}
    assert words == dict(tiger="yes", lamb="can't tell", adamw="no")
    lines = D.verdict_lines(result)
    row = {o: next(l for l in lines if l.lstrip().startswith(D.OPT_NAMES[o] + ":")) for o in words}
    assert "yes, logn is 0.50 nats behind ortho at step 20" in row["tiger"]
    assert "no, logn is 0.30 nats ahead of ortho at step 20" in row["adamw"]
    assert "can't tell" in row["lamb"] and "within the seeds' noise" in row["lamb"]
    assert "sd 0.05" in row["tiger"] and "seeds +0.45 to +0.55" in row["tiger"]
    assert result["verdicts"]["tiger"]["effect_over_spread"] == pytest.approx(10.0)


def test_the_quick_runs_verdict_averages_each_seeds_gap_over_its_last_three_measurements():
    """--verdict_evals=3 (the quick run's rule, research/preregistrations/quick_demo.md): one noisy last step can't
    decide; each seed's mean gap over the last three measurements does."""
    gaps = {1: [-0.10, -0.08, -0.09], 2: [-0.08, -0.09, 0.02], 3: [-0.09, -0.10, -0.08]}  # seed 2's last is noise
    runs = [dict(optimizer="adamw", arm=arm, seed=s, steps=[0, 10, 20, 30], val=[9.0, *(5.0 + (g if arm == "logn" else 0)
                                                                                    for g in gaps[s])])
            for s in gaps for arm in ("logn", "ortho")]
    last = D.answer(runs, [1, 2, 3], ["adamw"], k=1)[1]["adamw"]
    mean = D.answer(runs, [1, 2, 3], ["adamw"], k=3)[1]["adamw"]
    assert last["word"] == "can't tell" and mean["word"] == "no" and mean["steps_read"] == [10, 20, 30]
    result = dict(settings=dict(seeds="1,2,3"), verdicts=dict(adamw=mean))
    assert "over steps 10-30" in D.verdict_lines(result)[1]


def test_one_seed_can_never_say_yes_however_large_its_gap():
    assert planted(dict(tiger=[2.0]))["verdicts"]["tiger"]["word"] == "can't tell"


def test_the_campaign_number_is_printed_beside_the_demo_only_for_the_campaigns_own_setting():
    from research.appendix_b import DEMO_SETTING, campaign_comparison
    s = dataclasses.replace(D.Demo(), **DEMO_SETTING, steps=100)
    settings = lambda s: {k: getattr(s, k) for k in D.RUN_KEYS}  # noqa: E731
    same = campaign_comparison(settings(s), dict(dataset="shakespeare"))
    assert same["same_setting"] and same["differs"] == []
    assert same["gaps"]["tiger"]["subset"] == pytest.approx(0.770, abs=0.001)  # appendix B, seeds 1-3, step 100
    assert same["gaps"]["adamw"]["whole"] == pytest.approx(-0.135, abs=0.001)
    other = campaign_comparison(settings(dataclasses.replace(s, n_embd=128, n_head=2)), dict(dataset="shakespeare"))
    assert not other["same_setting"] and other["differs"] == ["n_embd=128", "n_head=2"]
    assert not campaign_comparison(settings(s), dict(dataset="pydoc_topics"))["same_setting"]
    result = planted(dict(tiger=[0.5, 0.6], adamw=[-0.2, -0.3]))
    result["campaign"] = other
    assert "this demo's setting differs (n_embd=128, n_head=2)" in D.verdict_lines(result)[-2]


def test_load_result_refuses_a_file_that_is_not_a_demo_result(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(ValueError, match="not a whole demo result"):
        D.load_result(str(tmp_path / "x.json"))


# ----------------------------------------------------------------------------------------------------
# The runs it keeps: a finished run is reused by the same command, a damaged one made again

def test_the_demo_refuses_a_file_as_its_output_folder_in_one_line(tmp_path, capsys):
    (tmp_path / "f").write_text("mine")
    assert D.main(["--tiny", "--dataset=pydoc_topics", f"--out={tmp_path / 'f'}"], log=lambda *a: None) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a folder" in err[0] and (tmp_path / "f").read_text() == "mine"


@pytest.mark.parametrize("damage", [dict(val=None), dict(val=[1.0]), dict(nan=True), dict(steps=[0]), "cut short"])
def test_a_damaged_run_file_is_made_again_not_read(tiny_data, tmp_path, damage):
    assert D.main(tiny(tmp_path) + ["--seeds=1"], log=lambda *a: None) == 0
    path = next(p for p in sorted((tmp_path / "runs").iterdir()) if p.name.startswith("adamw__logn"))
    rec = json.loads(path.read_text())
    if damage == "cut short":
        path.write_text(path.read_text()[:100])
    else:
        if damage.get("nan"):
            damage = dict(val=rec["val"][:-1] + [float("nan")])
        path.write_text(json.dumps({**rec, **damage}))
    assert D.main(tiny(tmp_path) + ["--seeds=1"], log=lambda *a: None) == 0
    result = D.load_result(str(tmp_path / "demo.json"))
    assert result["run"]["runs_reused"] == 3  # the damaged one was made again
    assert all(np.isfinite(r["val"]).all() for r in result["runs"])


def test_no_more_worker_processes_start_than_there_are_runs(tiny_data, tmp_path, monkeypatch):
    asked = []

    def interrupted(jobs, workers, *_, **__):
        asked.append((len(jobs), workers))
        raise KeyboardInterrupt
    monkeypatch.setattr(D, "run_all", interrupted)
    assert D.main(tiny(tmp_path) + ["--seeds=1", "--workers=1000"], log=lambda *a: None) == 130
    assert asked == [(4, 4)]


def test_load_result_computes_the_verdicts_from_the_runs_whatever_the_file_says(tmp_path):
    with open(D.COMMITTED) as f:
        result = json.load(f)
    assert D.load_result(D.COMMITTED)["verdicts"]["adamw"]["word"] == "no"
    result["verdicts"]["adamw"]["word"] = "yes"
    (tmp_path / "edited.json").write_text(json.dumps(result))
    assert D.load_result(str(tmp_path / "edited.json"))["verdicts"]["adamw"]["word"] == "no"


@pytest.mark.slow
def test_killing_the_demo_stops_its_workers(tiny_data, tmp_path):
    """A worker whose parent dies (kill -9) stops after its current step instead of running on unseen."""
    import signal
    import time
    args = [sys.executable, "demo.py", "--tiny", "--dataset=pydoc_topics", "--workers=2", "--steps=2000",
            "--schedule=4000", f"--out={tmp_path}"]
    p = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    alive = lambda k: os.path.exists(f"/proc/{k}") and open(f"/proc/{k}/stat").read().split()[2] != "Z"  # noqa: E731
    try:
        for _ in range(60):  # wait for the two workers to start
            kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
            if len(kids) >= 2:
                break
            time.sleep(1)
        assert len(kids) >= 2
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        deadline = time.time() + 30
        while time.time() < deadline and any(alive(k) for k in kids):
            time.sleep(0.5)
        assert not any(alive(k) for k in kids), "the workers ran on after the demo was killed"
    finally:
        p.kill()
