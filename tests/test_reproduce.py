"""research/reproduce.py: the experiment runner behind lesson 04 — what it plans, how it stores runs, how it resumes.

The training itself is tested in test_train.py; here every "run" is replaced by a stub (monkeypatched run_one),
so these tests take well under a second each.
"""
import fcntl
import math
import os
import subprocess
import sys

import pytest

from helpers import ROOT, corpus_n

from research import plans
from research import records
from research import reproduce as R
from research import stats as S

pytestmark = pytest.mark.lab  # the research tools: pytest -m lab


def fake_run(group, arm, overrides, log=print, ckpt_dir=None):
    return dict(id=R.run_id(group, arm, overrides["seed"]), group=group, arm=arm, head=overrides["head"],
                seed=overrides["seed"], wall_s=0.0, threads=1, best_val=5.0, last_val=5.1, config=dict(overrides),
                history=[dict(step=0, val_loss=9.0), dict(step=10, val_loss=5.1 + 0.001 * overrides["seed"])])


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setattr(R, "run_one", fake_run)
    monkeypatch.setattr(R, "plan", lambda scale, runs=(): [("main", h, dict(head=h, seed=s)) for s in (1, 2) for h in ("tied", "logn")])
    monkeypatch.setattr(R, "check_corpus_for_comparison", lambda scale: None)  # nothing is trained: no corpus


def test_a_run_lands_as_its_own_file_and_a_restart_skips_it(stub, tmp_path):
    assert R.main("live", out=str(tmp_path), log=lambda *a: None) == 4
    assert len([p for p in os.listdir(tmp_path) if p.endswith(".json") and not p.startswith(".")]) == 4
    assert R.main("live", out=str(tmp_path), resume=True, log=lambda *a: None) == 0  # nothing left to do


def test_rerunning_into_a_folder_that_holds_runs_needs_resume(stub, tmp_path):
    R.main("live", out=str(tmp_path), log=lambda *a: None)
    with pytest.raises(SystemExit, match="--resume=true"):
        R.main("live", out=str(tmp_path), log=lambda *a: None)


def test_two_workers_never_train_the_same_run(stub, tmp_path):
    """A run whose lock another process holds is skipped: two workers on one folder split the plan."""
    rid = R.run_id("main", "tied", 1)
    with open(tmp_path / ("." + records.file_name(rid) + ".lock"), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # flock locks are per open file: this one blocks main()'s own open
        assert R.main("live", out=str(tmp_path), log=lambda *a: None) == 3
    assert rid not in {r["id"] for r in R.load_runs(str(tmp_path))}


def test_a_rerun_is_compared_run_by_run_with_the_committed_one(stub, tmp_path, monkeypatch):
    old, new = tmp_path / "old", tmp_path / "new"
    R.main("live", out=str(old), log=lambda *a: None)
    R.main("live", out=str(new), log=lambda *a: None)
    monkeypatch.setattr(R, "committed_path", lambda scale: str(old))
    lines = []
    assert R.compare_with_committed("live", str(new), log=lines.append) == 0.0
    assert "4 runs compared" in lines[-1]


@pytest.mark.slow
def test_the_cli_refuses_unknown_flags_with_one_line():
    p = subprocess.run([sys.executable, "-m", "research.reproduce", "live", "--bogus=1"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and "usage" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("argv, named", [
    ([], "names the plan"), (["x"], "'x'"), (["live", "--bogus=1"], "unknown flag --bogus"),
    (["live", "foo"], "'foo' is not a --key=value flag"), (["live", "--out=a", "--out=b"], "--out is given twice"),
    (["live", "--resume=yes"], "--resume expects true or false")])
def test_a_bad_command_line_is_refused_naming_what_is_wrong(argv, named, capsys):
    assert R._cli(argv) == 2
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and named in said[0] and said[1].startswith("usage:")


def test_d768_plan_is_the_seeds_regime_with_seed_driven_data_order():
    runs = R.plan("d768")
    assert len({R.run_id(g, a, o["seed"]) for g, a, o in runs}) == len(runs) == 42
    for g, a, o in runs:
        assert o["n_embd"] == 768 and o["max_iters"] >= 1200 and o["warmup_iters"] > 0
        assert o["data_seed"] is None and o["eval_full_val"]  # the seed drives the data order; the whole val split
        assert o.get("zero_init_residual", True)
    sigmas = {(g, a): o.get("emb_std") for g, a, o in runs}
    assert sigmas[("sigma=0.02", "ortho")] == 0.02 and sigmas[("sigma=d^-1/2", "ortho")] is None
    assert sigmas[("sigma=ln(n)/d", "control")] == plans.LOGN_SIGMA
    primary = [(a, o["seed"]) for g, a, o in runs[:15]]  # the primary comparison comes first, 5 seeds
    assert sorted(primary) == sorted((a, s) for a in ("logn", "control", "ortho") for s in range(1, 6))


@pytest.mark.corpus
def test_the_control_gets_logns_sigma_from_the_corpus_n():
    g, a, o = next(x for x in R.plan("d768") if x[1] == "control")
    c = R.config_for(o)
    logn = R.config_for(next(x for x in R.plan("d768") if x[1] == "logn")[2])
    n = corpus_n()  # the GPT-2 tokens the prepared corpus uses (11,706 for Tiny Shakespeare)
    assert c.head == "ortho" and c.emb_std == pytest.approx(math.log(n) / 768)
    assert dict(logn.__dict__, vocab_size=n, head="ortho", emb_std=c.emb_std) == dict(c.__dict__, vocab_size=n)


@pytest.mark.reports
def test_committed_d768_runs_were_made_from_the_plan():
    """Each committed d768 run's recorded config is the one the plan asks for (no run made with other settings)."""
    runs = R.load_runs(R.committed_path("d768"))
    if not runs:
        pytest.skip("no d768 runs committed yet")
    planned = {R.run_id(g, a, o["seed"]): o for g, a, o in R.plan("d768")}
    for r in runs:
        o = planned[r["id"]]
        c = r["config"]
        assert (c["n_embd"], c["n_layer"], c["head"], c["eval_full_val"] if "eval_full_val" in c else True) == \
               (o["n_embd"], o["n_layer"], o["head"], True)
        assert r["seed"] == o["seed"] and c["seed"] == o["seed"] and c["data_seed"] is None
        expect = {None: 768 ** -0.5, 0.02: 0.02, plans.LOGN_SIGMA: math.log(r["n"]) / 768}[o.get("emb_std")]
        if o["head"] == "logn":
            expect = math.log(r["n"]) / 768
        assert r["sigma"] == pytest.approx(expect)
        assert len([h for h in r["history"] if h.get("val_loss") is not None]) == 13  # steps 0, 100, ..., 1200


@pytest.mark.slow
@pytest.mark.corpus
def test_the_live_scale_rerun_reproduces_every_committed_run(tmp_path):
    """What `python -m research.reproduce live` does (about 6 minutes on 2 cores): all 24 live runs trained again
    into a fresh folder, each final val loss equal to the committed one up to float rounding across machines."""
    from helpers import shakespeare_path
    if shakespeare_path() is None:
        pytest.skip("needs Tiny Shakespeare (../shared/data or data/shakespeare/input.txt)")
    out = str(tmp_path / "live")
    assert R.main("live", out=out, log=lambda *a: None) == 24
    assert R.compare_with_committed("live", out, log=lambda *a: None) < 2e-3


def test_stopping_a_worker_prints_one_line_and_keeps_finished_runs(stub, tmp_path, monkeypatch, capsys):
    """A worker stopped mid-run (Ctrl-C, or a kill that train() turns into KeyboardInterrupt) exits with one line
    and code 130, the runs it finished stay on disk, and --resume=true picks up from there."""
    calls = []

    def stop_on_third(group, arm, overrides, log=print, ckpt_dir=None):
        calls.append(arm)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return fake_run(group, arm, overrides, log)

    monkeypatch.setattr(R, "run_one", stop_on_third)
    assert R._cli(["live", f"--out={tmp_path}"]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stopped" in err[0] and "--resume=true" in err[0]
    assert len(R.load_runs(str(tmp_path))) == 2


@pytest.mark.slow
def test_a_run_killed_mid_way_continues_from_its_checkpoint_to_the_same_record(tiny_data, tmp_path, monkeypatch):
    """With --ckpt_dir a run stopped mid-way (a session's hard stop, a kill) is not lost: a restarted worker
    continues it from the last evaluation's checkpoint, and the record equals the uninterrupted run's."""
    import train as T
    tiny = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, eval_iters=2, dataset="pydoc_topics",
                sample_tokens=0, log_interval=1, max_iters=30, eval_interval=10, out_dir="", head="tied", seed=3,
                data_seed=None, warmup_iters=5, vocab="corpus")
    whole = R.run_one("main", "tied", tiny, log=lambda *a: None)
    assert whole["resumed_from_step"] == 0

    real_lr_at, calls = T.lr_at, []

    def killed_at_step_25(it, c):  # the process dies during step 25: no checkpoint since step 20's evaluation
        calls.append(it)
        if it == 25:
            raise RuntimeError("killed")
        return real_lr_at(it, c)

    monkeypatch.setattr(T, "lr_at", killed_at_step_25)
    ckpt = tmp_path / "ckpt"
    with pytest.raises(RuntimeError, match="killed"):
        R.run_one("main", "tied", tiny, log=lambda *a: None, ckpt_dir=str(ckpt))
    monkeypatch.setattr(T, "lr_at", real_lr_at)
    folder = ckpt / records.file_name(R.run_id("main", "tied", 3))[:-len(".json")]
    assert R._ckpt_step(str(folder)) == 20

    said = []
    again = R.run_one("main", "tied", tiny, log=said.append, ckpt_dir=str(ckpt))
    assert again["resumed_from_step"] == 20 and "step 20" in said[0]
    for key in ("val_loss", "train_loss", "emb_rms"):
        assert [h.get(key) for h in again["history"]] == [h.get(key) for h in whole["history"]], key
    assert again["config"] == whole["config"]  # the record doesn't remember where it was checkpointed
    assert "val_windows_last" not in whole  # without a checkpoint there is no final model to score


@pytest.mark.slow
def test_the_record_keeps_each_val_windows_loss_under_the_final_model(tiny_data, tmp_path):
    """With --ckpt_dir the record holds the loss of every whole-split val window under the final model: their
    mean is the run's last whole-split val loss, and their spread is what lesson 04 reads measurement noise from."""
    tiny = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, eval_iters=2, dataset="pydoc_topics",
                sample_tokens=0, max_iters=12, eval_interval=6, out_dir="", head="ortho", seed=1, eval_full_val=True,
                vocab="corpus")
    rec = R.run_one("main", "ortho", tiny, log=lambda *a: None, ckpt_dir=str(tmp_path))
    w = rec["val_windows_last"]
    val_tokens = len(R.load_data(R.config_for(tiny), log=lambda *a: None)[3])
    assert len(w) == (val_tokens - 1) // 16
    assert sum(w) / len(w) == pytest.approx(rec["last_val"], abs=1e-5)
    assert max(w) - min(w) > 0.1  # windows differ: that spread is the measurement noise


def test_main_removes_a_finished_runs_checkpoint_and_says_where_a_stopped_one_is(stub, tmp_path, capsys,
                                                                                 monkeypatch):
    ckpt = tmp_path / "ckpt"
    seen = []

    def run_with_ckpt(group, arm, overrides, log=print, ckpt_dir=None):
        folder = os.path.join(ckpt_dir, records.file_name(R.run_id(group, arm, overrides["seed"]))[:-len(".json")])
        os.makedirs(folder)  # what train() would leave: a folder with a checkpoint
        seen.append(folder)
        if len(seen) == 3:
            raise KeyboardInterrupt
        return fake_run(group, arm, overrides, log)

    monkeypatch.setattr(R, "run_one", run_with_ckpt)
    assert R._cli(["live", f"--out={tmp_path / 'runs'}", f"--ckpt_dir={ckpt}"]) == 130
    assert [os.path.exists(f) for f in seen] == [False, False, True]  # finished runs' folders are gone
    err = capsys.readouterr().err
    assert "has a checkpoint in" in err and str(ckpt) in err


@pytest.mark.slow
def test_a_diverged_run_is_recorded_as_a_result_and_the_plan_goes_on(tiny_data, tmp_path, monkeypatch):
    """A run whose loss goes non-finite (here: lr 1e30, no clipping) must not stop the campaign or be retried
    forever: it lands as a record whose best and last are NaN, with NaN at every evaluation from the divergence
    on, so its comparisons read "invalid (non-finite loss)" and a sweep never picks its lr; the next run follows."""
    tiny = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, eval_iters=2, dataset="pydoc_topics",
                sample_tokens=0, log_interval=2, max_iters=20, eval_interval=10, out_dir="", seed=1, warmup_iters=0,
                vocab="corpus", grad_clip=0.0, dense_val_until=10)
    plan = [("g", "tied", dict(tiny, head="tied", lr=1e30)), ("g", "ortho", dict(tiny, head="ortho", lr=1e-3))]
    monkeypatch.setattr(R, "plan", lambda scale, runs=(): plan)
    assert R.main("live", out=str(tmp_path / "runs"), log=lambda *a: None, ckpt_dir=str(tmp_path / "ckpt")) == 2
    runs = {r["arm"]: r for r in R.load_runs(str(tmp_path / "runs"))}
    bad, good = runs["tied"], runs["ortho"]
    step = bad["diverged_at_step"]
    assert isinstance(step, int) and 0 <= step < 20 and good["diverged_at_step"] is None
    assert math.isnan(bad["best_val"]) and math.isnan(bad["last_val"]) and math.isfinite(good["best_val"])
    evals = [h["step"] for h in bad["history"] if h.get("val_loss") is not None]
    assert evals == [0, 10, 20]                                                   # every evaluation is still there
    assert all(math.isnan(h["val_loss"]) for h in bad["history"] if h.get("val_loss") is not None and h["step"] >= step)
    logged = lambda r, key: [h["step"] for h in r["history"] if h.get(key) is not None]
    assert logged(bad, "val_subset_loss") == logged(good, "val_subset_loss")  # the dense curves keep their length
    assert S.compare([records.best(bad) - records.best(good)] * 3)["word"] == "invalid (non-finite loss)"
    assert plans.pick_lr({1e-3: 5.0, 3e-3: bad["best_val"], 1e-2: 5.1, 3e-2: 5.2})["lr"] != 3e-3
    assert not (tmp_path / "ckpt" / records.file_name(bad["id"])[:-len(".json")]).exists()  # its checkpoint went too


def test_a_record_keeps_every_quantity_the_run_logged(tiny_data, tmp_path, monkeypatch):
    """A run's record keeps only the history keys in KEEP (the JSON stays small). A quantity train.py logs but KEEP
    lacks is lost when the run's checkpoint folder is removed: appendix B's first branch_ratio runs lost it that way."""
    tiny = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, eval_iters=2, dataset="pydoc_topics",
                sample_tokens=0, log_interval=2, max_iters=4, eval_interval=2, out_dir="", seed=1, vocab="corpus",
                dense_val_until=4, log_rows=True, optimizer="tiger", lr=1e-2)
    monkeypatch.setattr(R, "plan", lambda scale, runs=(): [("g", "logn", dict(tiny, head="logn"))])
    from train import train
    from research.probes import row_probe
    c = R.config_for(dict(tiny, head="logn"))
    logged = {k for row in train(c, progress=False, log=lambda *a: None, probes=[row_probe(c)])
              for k in row} - {"tokens_per_s", "time"}  # machine speed: not kept on purpose
    R.main("live", out=str(tmp_path / "runs"), log=lambda *a: None)
    kept = {k for h in R.load_runs(str(tmp_path / "runs"))[0]["history"] for k in h}
    assert logged - kept == set()


# --- issue 32: every mistyped or tampered input is one line; a comparison never spans two corpora ----------------

@pytest.mark.parametrize("flag", ["--arms=lgn", "--groups=mian", "--seeds=9"])
def test_an_unknown_arm_group_or_seed_is_one_line_listing_the_plans_and_runs_nothing(stub, tmp_path, capsys, flag):
    out = tmp_path / "runs"
    assert R._cli(["live", f"--out={out}", flag]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    name = flag[2:].split("=")[0]
    assert len(err) == 1 and "not in the live plan" in err[0] and f"whose {name} are:" in err[0], err
    assert "tied, logn" in err[0] or "1, 2" in err[0] or "main" in err[0]
    assert not out.exists()  # no empty folder left behind


def test_an_out_under_a_file_is_one_line(stub, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert R._cli(["live", f"--out={tmp_path / 'f' / 'sub'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "can't be made" in err[0] and "Traceback" not in err[0], err


@pytest.mark.parametrize("content, words", [
    ("[1, 2, 3]", "a list, not a JSON object"),
    ('{"foo": 1}', "its 'id' is missing"),
    ('{"id": "main|tied|seed=1", "group": "main", "seed": 1}', "its 'history' is missing"),
    ('{"id": "main|tied|seed=1", "group": "main", "seed": 1, "history": [{"val_loss": 5}]}', "history[0]"),
    ('{"id": "main|tied|seed=1", "gr', "is not valid JSON"),
])
def test_a_run_record_of_the_wrong_shape_is_one_line_naming_the_file_and_the_field(tmp_path, capsys, content, words):
    path = tmp_path / "main__tied__seed=1.json"
    path.write_text(content)
    with pytest.raises(ValueError) as e:
        R.load_runs(str(tmp_path))
    assert str(path) in str(e.value) and words in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert R._cli(["live", f"--out={tmp_path}", "--resume=true"]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_committed_runs_pass_the_record_checks():
    for scale in R.SCALES:
        R.load_runs(R.committed_path(scale))  # raises on the first record of the wrong shape


@pytest.mark.slow
def test_help_prints_every_plan_with_what_it_does_and_how_long_and_exits_0():
    p = subprocess.run([sys.executable, "-m", "research.reproduce", "--help"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    for scale in R.SCALES:
        assert f"\n  {scale} " in p.stdout
    assert "CHECK" in p.stdout and "not a demonstration" in p.stdout and "min each" in p.stdout


def with_corpus(record, dataset, n, sha256="abc"):
    return dict(record, corpus=dict(dataset=dataset, corpus=dataset, sha256=sha256, tokens=1000, n=n), n=n)


def test_a_comparison_across_corpora_is_refused_in_one_line(tmp_path, monkeypatch):
    """Committed runs made on Tiny Shakespeare and a re-run on the offline fallback differ by the corpora, not by float
    rounding: the comparison checks the corpus first and refuses, naming both."""
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    for seed in (1, 2):
        rec = fake_run("main", "tied", dict(head="tied", seed=seed))
        records.write_atomic(str(old / records.file_name(rec["id"])), with_corpus(rec, "shakespeare", 11706))
        records.write_atomic(str(new / records.file_name(rec["id"])), with_corpus(rec, "pydoc_topics", 5170, "def"))
    monkeypatch.setattr(R, "committed_path", lambda scale: str(old))
    with pytest.raises(ValueError, match=r"committed from shakespeare \(n = 11706.*re-made on pydoc_topics \(n = 5170") as e:
        R.compare_with_committed("live", str(new), log=lambda *a: None)
    assert "\n" not in str(e.value)


@pytest.mark.corpus
def test_a_rerun_on_another_corpus_is_refused_before_anything_is_trained(tiny_data, tmp_path, monkeypatch, capsys):
    """Offline, the plan's 'shakespeare' is prepared as the fallback corpus: `reproduce.py live` says so and stops
    before training, instead of training for minutes and then blaming rounding."""
    import data.prepare as P
    monkeypatch.setattr(P, "SHAKESPEARE_URL", "http://127.0.0.1:9/unreachable")  # no Tiny Shakespeare, no network
    committed = tmp_path / "committed"
    committed.mkdir()
    rec = fake_run("main", "tied", dict(head="tied", seed=1))
    records.write_atomic(str(committed / records.file_name(rec["id"])), dict(rec, config=dict(dataset="shakespeare"), n=11706))
    monkeypatch.setattr(R, "committed_path", lambda scale: str(committed))
    monkeypatch.setattr(R, "plan", lambda scale, runs=(): [("main", "tied", dict(TINY_RUN, dataset="shakespeare"))])
    monkeypatch.setattr(R, "run_one", lambda *a, **k: pytest.fail("trained although the corpus differs"))
    assert R._cli(["live", f"--out={tmp_path / 'runs'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "made on shakespeare (n = 11706)" in err[0] and "pydoc_topics" in err[0], err


TINY_RUN = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, eval_iters=2, sample_tokens=0,
                log_interval=2, max_iters=2, eval_interval=2, out_dir="", head="tied", seed=1, vocab="corpus")


@pytest.mark.corpus
def test_a_record_names_the_corpus_it_was_really_made_on(tiny_data, monkeypatch):
    """Asked for 'shakespeare' on a machine that can't get it, the run trains on the fallback, and its record says
    pydoc_topics with that text's sha256 and n, never 'shakespeare'."""
    import data.prepare as P
    monkeypatch.setattr(P, "SHAKESPEARE_URL", "http://127.0.0.1:9/unreachable")
    rec = R.run_one("main", "tied", dict(TINY_RUN, dataset="shakespeare"), log=lambda *a: None)
    import json
    meta = json.load(open(os.path.join(P.dataset_dir("pydoc_topics"), "meta.json")))
    assert rec["config"]["dataset"] == "pydoc_topics"
    assert rec["corpus"] == dict(dataset="pydoc_topics", corpus="pydoc_topics", sha256=meta["sha256"],
                                 tokens=meta["tokens"], n=rec["n"])
