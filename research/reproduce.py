"""
The convergence experiment behind lesson 04: every head, same data, same batches, several seeds.

    python -m research.reproduce --help  # the plans: what each does, how many runs, how long the committed ones took
    python -m research.reproduce live    # ~6 min on 2 cores: a CHECK, not the finding: re-makes the 24 committed
                                        # live-scale runs into out/reproduce/live and compares each final val loss
    python -m research.reproduce d768    # appendix A: 42 runs of ~25 min (two workers on 2 idle cores)
    python -m research.reproduce optim   # appendix B: ~65 runs under AdamW, Tiger and LAMB; days on 2 cores
    python -m research.reproduce turn    # appendix B section 10: 12 runs of its first 200 steps
    python -m research.reproduce cause   # appendix B section 11: ~60 runs of 400 steps and 8 sweep runs
    python -m research.reproduce full    # the older CPU-sized grids (300 steps), kept for the small-scale map (and gpt2)

Flags: --out=DIR (default out/reproduce/<scale>), --resume=true to continue in a folder that already holds runs
(without it a non-empty folder is refused: nothing is overwritten), --groups=, --seeds=, --arms= to run a subset (a
name the plan lacks is refused with the list it has), --ckpt_dir=DIR to checkpoint runs in progress. Each finished run
is one JSON file, written atomically, and a restarted worker skips the runs already there; with --ckpt_dir a run in
progress keeps train.py's checkpoint (~0.3 GB at d768, written at every evaluation and on Ctrl-C) in DIR/<run>/ and a
restarted worker continues it bit for bit. Two workers may share a folder (each run is claimed with an flock on
`.<run>.lock`): on a 2-core CPU, `OMP_NUM_THREADS=1 python -m research.reproduce d768 --resume=true ... &` twice.

The plans are in research/plans.py, a run's record in research/records.py, the rules in research/preregistrations/.
"""

import dataclasses
import fcntl
import math
import os
import platform
import shutil
import sys
import time
from statistics import median

import torch

from config import Config
from data.prepare import load_data
from research.plans import LOGN_SIGMA, SCALES, config_for, pending_decisions, plan
from research.probes import row_probe, window_losses
from research.records import committed_path, file_name, git_state, last_logged, load_runs, run_id, write_atomic
from rundir import TrainingError, check_out_folder
from tiedgpt import GPT
from train import Diverged, evaluations_at, train

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WAIT_S = 30  # a worker with nothing to run while another makes a run the plan waits for checks again after this

KEEP = ("step", "tokens", "train_loss", "val_loss", "emb_grad_norm", "emb_rms", "grad_norm", "lr",
        "val_subset_loss", "resid_rms", "lnf_gain", "emb_turn", "self_logit", "branch_ratio", "head_opnorm",
        "logit_scale")

# What each plan is for, for --help (how many runs and how long they took is computed from the plan and the
# committed runs). A plan without a line here is described by this file's docstring.
PLAN_HELP = dict(
    live="a CHECK that the committed live-scale runs (1 layer, d=256, 150 steps, 8 heads x 3 seeds) are what this "
         "code makes: re-made into a fresh folder, each final val loss compared with the committed one; not a "
         "demonstration of the finding",
    full="the older CPU-sized grids (2 layers, d=256, 300 steps; sweeps of lr, d, warmup, steps and n), kept for "
         "the small-scale map",
    gpt2="GPT-2's width and init (d=768, sigma=0.02), the full grid's depth and length, 5 core heads x 3 seeds",
    d768="the post's regime (lesson 04, appendix A): d=768, zero-init residuals, sigma 0.02 and d^-1/2, warmup + "
         "cosine over 1200 steps, whole-split val",
    optim="appendix B's campaign: d768 under AdamW, Tiger and LAMB; check B and sweep S first, the plan grows as "
          "they decide (rules in research/preregistrations/appendix_b.md)",
    turn="appendix B section 10: the first 200 steps of 3 arms per optimizer with log_rows, then logn again with "
         "branch_ratio",
    cause="appendix B section 11: controls that change one thing each (absolute twins of Tiger and LAMB, shuffle at "
          "logn's sigma, Tiger relative on the embedding or the body only), 400 steps of the optim schedule, ~10 min "
          "a run on one thread plus 8 sweep runs of ~27 min (plan and rules in research/preregistrations/cause.md)",
)


def plan_help():
    """--help's text: usage, and for each plan what it does, its runs, and how long the committed ones took."""
    lines = [__doc__.strip().splitlines()[0], "", USAGE, "", "plans:"]
    for scale in SCALES:
        committed = load_runs(committed_path(scale))
        n = len(plan(scale, committed))
        walls = [r["wall_s"] for r in committed if isinstance(r.get("wall_s"), (int, float))]
        took = (f"the {len(walls)} committed runs took a median {median(walls) / 60:.0f} min each, "
                f"{sum(walls) / 3600:.1f} h of worker time in all, on the machine that made them" if walls
                else "no committed runs to time")
        lines.append(f"  {scale:6} {PLAN_HELP.get(scale, 'see the docstring of research/reproduce.py')}. "
                     f"{n} runs; {took}.")
    return "\n".join(lines)


def plan_names(scale, runs=()):
    """The groups, arms and seeds `scale`'s plan holds, in plan order: over the runs so far and over the committed
    ones (the optim plan grows as its decisions are made)."""
    out = dict(groups=[], arms=[], seeds=[])
    for g, a, o in plan(scale, list(runs)) + plan(scale, load_runs(committed_path(scale))):
        for key, v in (("groups", g), ("arms", a), ("seeds", o["seed"])):
            if v not in out[key]:
                out[key].append(v)
    return out


def _ckpt_folder(ckpt_dir, rid):
    """Where run `rid` keeps its checkpoint under --ckpt_dir: a folder named like its JSON file."""
    return os.path.join(ckpt_dir, file_name(rid)[:-len(".json")])


def _ckpt_step(folder):
    """The step of the checkpoint in `folder` (a run's --ckpt_dir folder), or 0 if it holds none (or one that can't
    be read: a checkpoint is a cache, and one we can't read costs a restart, nothing more)."""
    path = os.path.join(folder, "ckpt.pt")
    if not os.path.exists(path):
        return 0
    try:
        return int(torch.load(path, map_location="cpu", weights_only=True)["step"])  # data, never code
    except Exception as e:
        print(f"reproduce.py: can't read the checkpoint {path} ({type(e).__name__}); the run starts over",
              file=sys.stderr)
        return 0


def final_window_losses(folder, config, val_data, lut):
    """The loss of every whole-split val window (probes.window_losses) under the model in folder/ckpt.pt, which
    at the end of a run is the final model. Appendix A reads the measurement noise of a val loss off them."""
    state = torch.load(os.path.join(folder, "ckpt.pt"), map_location="cpu", weights_only=True)  # data, not code
    model = GPT(config.model_config())
    model.load_state_dict(state["model"])
    return window_losses(model.eval(), val_data, config.block_size, "cpu", lut)


def diverged_history(history, step, config):
    """A diverged run's history as the run would have logged it had it gone on: its rows before `step`, then a
    non-finite loss at every evaluation from `step` to the end (weights that hold a NaN or inf keep producing one).
    Its statistics are then what they mean: `best` and `last` non-finite, `early` finite only if the first half
    was clean; the analysis names such a comparison "invalid (non-finite loss)" (stats.compare). If the
    training loss went non-finite at an evaluation step, that step's (finite) evaluation is recorded as NaN too: one
    point, and best is NaN by design anyway. The JSON then holds the bare token NaN, which Python's json reads back
    (a strict JSON reader would not)."""
    rows = [dict(r) for r in history if r["step"] < step]
    for s in range(step, config.max_iters + 1):
        row = dict(step=s)
        full, dense = evaluations_at(s, config)  # the same rule as train's loop
        if full:
            row["val_loss"] = math.nan
        if dense:
            row["val_subset_loss"] = math.nan
        if len(row) > 1:
            rows.append(row)
    return rows


def run_one(group, arm, overrides, log=print, ckpt_dir=None):
    """Train one run of the plan and return its record (the config the model was built from, its history).
    With ckpt_dir, the run checkpoints into ckpt_dir/<run>/ and, if a checkpoint is already there (a worker
    stopped mid-run), continues from it; the record says from which step (resumed_from_step) and wall_s is
    then the time of this last part only. It also keeps, from the final checkpoint, the loss of every val window
    under the final model (val_windows_last), whose spread measures the noise of a whole-split val loss. A run
    whose loss goes non-finite is recorded, not raised: diverged_at_step says where, its history is
    diverged_history's, best_val non-finite (sweep S's pick_lr then never chooses its lr)."""
    config = config_for(overrides)
    rid = run_id(group, arm, config.seed)
    start = 0
    if ckpt_dir:
        folder = _ckpt_folder(ckpt_dir, rid)
        start = _ckpt_step(folder)
        # resume continues the checkpoint; overwrite lets a fresh start replace a checkpoint of step 0
        config = dataclasses.replace(config, out_dir=folder, resume=start > 0, overwrite=start == 0)
        if start:
            log(f"{rid}: continuing from the checkpoint at step {start} in {folder}")
    t0 = time.time()
    try:
        probes = [row_probe(config)] if overrides.get("log_rows") else []  # (appendix B section 10's runs)
        history, diverged = train(config, progress=False, log=lambda *a: None, probes=probes), None
    except Diverged as e:  # a result, not a crash: recorded (the statistics call it invalid)
        history, diverged = diverged_history(e.history, e.step, config), e.step
        log(f"{rid}: the loss went non-finite at step {diverged}; recorded as diverged")
    wall = time.time() - t0
    # the record's config is the run's, whatever folder it was checkpointed in
    config = dataclasses.replace(config, out_dir="", resume=False, overwrite=False)
    # with vocab='corpus', train() shrinks vocab_size to the corpus's n; logn's sigma depends on that n
    model_config, meta, _, val_data, _, lut = load_data(config, log=lambda *a: None)
    if config.input is None:  # the corpus really used: the offline fallback is named as such, never 'shakespeare'
        model_config = dataclasses.replace(model_config, dataset=meta["dataset"])
    vals = [r["val_loss"] for r in history if r.get("val_loss") is not None]
    extra = {}
    if ckpt_dir and diverged is None:  # the final checkpoint holds the trained model: keep each val window's loss
        extra["val_windows_last"] = [round(float(x), 6) for x in final_window_losses(folder, model_config, val_data, lut)]
    return dict(id=rid, group=group, arm=arm, head=config.head, seed=config.seed, resumed_from_step=start,
            wall_s=wall, threads=torch.get_num_threads(), finished=time.strftime("%Y-%m-%d %H:%M:%S"),
            git_commit=git_state(ROOT)["git_commit"], torch=torch.__version__, python=platform.python_version(),
            config=dataclasses.asdict(model_config), corpus=corpus_identity(meta, model_config.vocab_size),
            n=model_config.vocab_size, d=config.n_embd,
            sigma=model_config.sigma, best_val=min(vals) if diverged is None else math.nan, last_val=vals[-1],
            diverged_at_step=diverged,
            history=[{k: r[k] for k in KEEP + ("eval_train_loss",) if k in r} for r in history], **extra)


def corpus_identity(meta, n):
    """What a run was made on: the prepared dataset's name, its source text's sha256, its token count, and n."""
    return dict(dataset=meta["dataset"], corpus=meta["corpus"], sha256=meta["sha256"], tokens=meta["tokens"], n=n)


def corpus_of(record):
    """A record's corpus identity as far as it says: records made before they named their corpus have only their
    config's dataset and n (sha256 None)."""
    c = record.get("corpus") or {}
    return dict(dataset=c.get("dataset") or (record.get("config") or {}).get("dataset"), sha256=c.get("sha256"),
                n=c.get("n") or record.get("n"))


def corpus_difference(a, b):
    """The fields on which two corpus identities differ (a field one of them doesn't know is not a difference)."""
    return [k for k in ("dataset", "sha256", "n") if a[k] is not None and b[k] is not None and a[k] != b[k]]


def _corpus_words(c):
    return f"{c['dataset']} (n = {c['n']}" + (f", sha256 {c['sha256'][:12]}...)" if c["sha256"] else ")")


def check_corpus_for_comparison(scale):
    """Before re-making runs to compare with the committed ones: the corpus this machine prepares for the plan must
    be theirs, or the comparison would measure the corpora's difference and call it rounding. One line if not."""
    committed = load_runs(committed_path(scale))
    if not committed:
        return
    g, a, o = plan(scale, committed)[0]
    c2, meta = load_data(config_for(o), log=lambda *a: None)[:2]
    now = corpus_of(dict(corpus=corpus_identity(meta, c2.vocab_size)))
    twin = next((r for r in committed if r["id"] == run_id(g, a, o["seed"])), None)  # n depends on the run's vocab
    then = corpus_of(twin) if twin is not None else dict(corpus_of(committed[0]), n=None)
    if corpus_difference(then, now):
        raise SystemExit(f"reproduce.py: the committed {scale} runs were made on {_corpus_words(then)}, but this "
                         f"machine prepares {_corpus_words(now)}: a re-run could not be compared with them. Put Tiny "
                         f"Shakespeare at data/shakespeare/input.txt (data/README.md) and run again")


def main(scale, out=None, resume=False, groups=None, seeds=None, arms=None, log=print, ckpt_dir=None,
         check_corpus=False):
    """Run the plan's runs that `out` lacks (a subset with groups/seeds/arms); returns the number run.
    ckpt_dir: where runs in progress keep their checkpoints (None: nowhere; a stopped run starts over).
    check_corpus: first refuse to run if the corpus differs from the committed runs' (they will be compared)."""
    try:  # never into the repository's own folders: finished runs are copied into research/runs/ by hand
        out = check_out_folder(os.path.join(ROOT, "out", "reproduce", scale) if out is None else out, "--out")
        ckpt_dir = ckpt_dir and check_out_folder(ckpt_dir, "--ckpt_dir")  # up front, named as the flag the user gave
    except ValueError as e:
        raise SystemExit(f"reproduce.py: {e}") from None
    runs = load_runs(out)
    if runs and not resume:
        raise SystemExit(f"reproduce.py: {out} already holds {len(runs)} runs; add --resume=true to continue "
                         f"them, or give a new --out=DIR")
    check_made_by_plan(scale, runs, out)
    check_one_text(scale, runs, out)
    names = plan_names(scale, runs)
    for flag, given in (("groups", groups), ("arms", arms), ("seeds", seeds)):
        unknown = [x for x in given or () if x not in names[flag]]
        if unknown:  # a typo would otherwise run nothing and say all is done
            raise SystemExit(f"reproduce.py: --{flag}: {', '.join(map(str, unknown))} not in the {scale} plan, "
                             f"whose {flag} are: {', '.join(map(str, names[flag]))}")
    if check_corpus:  # a re-run on another corpus would compare two corpora and blame rounding
        check_corpus_for_comparison(scale)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise SystemExit(f"reproduce.py: --out={out} can't be made: {e.strerror or e}") from None

    def todo(runs):
        have = {r["id"] for r in runs}
        return [(g, a, o) for g, a, o in plan(scale, runs) if run_id(g, a, o["seed"]) not in have
                and (groups is None or g in groups) and (seeds is None or o["seed"] in seeds)
                and (arms is None or a in arms)]

    log(f"{scale}: {len(runs)} runs in {out}, {len(todo(runs))} to go"
        + (f" so far (waiting for {', '.join(pending_decisions(scale, runs))})" if pending_decisions(scale, runs) else ""))
    done = 0
    while True:
        # re-plan after every run: the optim plan grows as its check and sweep runs land (other workers' too)
        runs = load_runs(out)
        ran = False
        for group, arm, overrides in todo(runs):
            rid = run_id(group, arm, overrides["seed"])
            path = os.path.join(out, file_name(rid))
            with open(os.path.join(out, "." + file_name(rid) + ".lock"), "a") as lock:
                try:  # another worker has this run: take the next one
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                if os.path.exists(path):  # finished by another worker meanwhile
                    continue
                record = run_one(group, arm, overrides, log, ckpt_dir=ckpt_dir)
                write_atomic(path, record)
                if ckpt_dir:  # the run is safe in its JSON: its checkpoint has done its job
                    shutil.rmtree(_ckpt_folder(ckpt_dir, rid), ignore_errors=True)
            done += 1
            ran = True
            log(f"[{done}] {rid}: best val {record['best_val']:.4f}, last {record['last_val']:.4f} "
                f"({record['wall_s']:.0f} s, {record['threads']} thread(s))")
            break
        if ran:
            continue
        runs = load_runs(out)
        waiting = pending_decisions(scale, runs)
        if not waiting or not todo(runs):  # nothing left that this worker could ever run
            if waiting:
                log(f"{scale}: nothing to run; the plan still waits for {', '.join(waiting)}, which no worker is making")
            return done
        time.sleep(WAIT_S)  # another worker is making a run the plan's next decision needs


def compare_with_committed(scale, out, log=print):
    """Print, run by run, the new last val loss against the committed one (same id), once every pair is known to
    have been made on the same corpus (a ValueError in one line if not)."""
    new = {r["id"]: r for r in load_runs(out)}
    old = {r["id"]: r for r in load_runs(committed_path(scale))}
    both = sorted(set(new) & set(old))
    if not both:
        log(f"no committed {scale} runs to compare with")
        return None
    for rid in both:
        then, now = corpus_of(old[rid]), corpus_of(new[rid])
        if corpus_difference(then, now):
            raise ValueError(f"{rid} was committed from {_corpus_words(then)} but re-made on {_corpus_words(now)}: "
                             f"not comparable, so not compared (put Tiny Shakespeare at data/shakespeare/input.txt)")
    diffs = []
    for rid in both:
        a, b = last_logged(old[rid], "val_loss"), last_logged(new[rid], "val_loss")
        diffs.append(abs(a - b))
        log(f"  {rid:28} committed {a:.4f}  now {b:.4f}  diff {b - a:+.5f}")
    log(f"{len(both)} runs compared with {committed_path(scale)}: largest |diff| {max(diffs):.5f} nats "
        f"(float rounding differs between machines and thread counts; anything above ~1e-3 is worth a look)")
    return max(diffs)


USAGE = (f"usage: python -m research.reproduce {'|'.join(SCALES)} [--out=DIR] [--resume=true] "
         "[--groups=G1,G2] [--seeds=1,2] [--arms=logn,control] [--ckpt_dir=DIR]   (--help: the plans)")


def check_made_by_plan(scale, runs, out):
    """Refuse (one line) a folder holding a run the plan names but made with other settings: another plan's run
    under the same id (live, full and gpt2 share ids like main|tied|seed=1), an edited record, or a run made before a
    default changed would be taken as this plan's. The whole resolved config is compared (config_for): the plan's
    overrides must be there; a field an older record lacks (added to Config since) is not compared."""
    have = {r["id"]: r.get("config") or {} for r in runs}
    for group, arm, overrides in plan(scale, runs):
        made = have.get(run_id(group, arm, overrides["seed"]))
        if made is None:
            continue
        # not compared: logn's emb_std, which is computed from n (config_for), and the dataset and n (the corpus checks)
        logn = overrides.get("emb_std") == LOGN_SIGMA
        overrides = {k: v for k, v in overrides.items() if k != "log_rows"}  # (a probe, not a setting: config_for)
        want = dataclasses.asdict(Config(**dict(overrides, emb_std=None) if logn else overrides))
        differ = [f"{k} {made.get(k, 'missing')!r} (the plan: {v!r})" for k, v in want.items()
                  if k not in ("dataset", "vocab_size") + ("emb_std",) * logn and (k in overrides or k in made)
                  and made.get(k, made) != v]
        if differ:
            raise SystemExit(f"reproduce.py: {os.path.join(out, file_name(run_id(group, arm, overrides['seed'])))} "
                             f"was not made by the {scale} plan ({', '.join(differ[:3])}): give another --out")


def check_one_text(scale, runs, out):
    """Refuse (one line) to add runs to a folder whose runs were made on another text than the one prepared now (the
    corpus was changed in between): one folder, one text. Records without the text's sha256 can't say: not checked."""
    shas = {r["corpus"].get("sha256") for r in runs if isinstance(r.get("corpus"), dict)} - {None}
    if shas:
        meta = load_data(config_for(plan(scale, runs)[0][2]), log=lambda *a: None)[1]
        if shas != {meta["sha256"]}:
            raise SystemExit(f"reproduce.py: {out} holds runs made on another text than data/{meta['dataset']}'s "
                             f"now (sha256 {meta['sha256'][:12]}...): give another --out")


FLAGS = ("out", "resume", "groups", "seeds", "arms", "ckpt_dir")


def bad_args(argv, opts):
    """What is wrong with the command line, in words (None when nothing is): the plan comes first, then --key=value
    flags, each known and given once."""
    if not argv or argv[0] not in SCALES:
        return f"the first argument names the plan, one of {', '.join(SCALES)} (got {repr(argv[0]) if argv else 'none'})"
    for a in argv[1:]:
        if not (a.startswith("--") and "=" in a):
            return f"{a!r} is not a --key=value flag"
        if a[2:].split("=", 1)[0] not in FLAGS:
            return f"unknown flag {a.split('=', 1)[0]} (flags: {', '.join('--' + f for f in FLAGS)})"
    keys = [a[2:].split("=", 1)[0] for a in argv[1:]]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        return f"--{twice[0]} is given twice"
    if opts.get("resume", "false").lower() not in ("true", "false"):
        return f"--resume expects true or false, got {opts['resume']!r}"
    return None


def _cli(argv):
    usage = USAGE
    if any(a in ("-h", "--help") for a in argv):
        print(plan_help())
        return 0
    opts = dict(a[2:].split("=", 1) for a in argv[1:] if a.startswith("--") and "=" in a)
    wrong = bad_args(argv, opts)
    if wrong:  # two lines: what is wrong, then the usage
        print(f"reproduce.py: {wrong}\n{usage}", file=sys.stderr)
        return 2
    scale = argv[0]
    try:
        seeds = [int(s) for s in opts["seeds"].split(",")] if "seeds" in opts else None
    except ValueError:
        print(f"reproduce.py: --seeds expects numbers like 1,2, got {opts['seeds']!r}", file=sys.stderr)
        return 2
    out = opts.get("out", os.path.join(ROOT, "out", "reproduce", scale))  # an empty --out= is refused, not the default
    compare = os.path.abspath(out) != os.path.abspath(committed_path(scale))
    try:
        main(scale, out=out, check_corpus=compare, resume=opts.get("resume", "false").lower() == "true", seeds=seeds,
             groups=opts["groups"].split(",") if "groups" in opts else None,
             arms=opts["arms"].split(",") if "arms" in opts else None, ckpt_dir=opts.get("ckpt_dir") or None)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    except (TrainingError, ValueError) as e:  # a checkpoint or a setting was refused (a divergence is recorded)
        print(f"reproduce.py: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # a record that can't be written: a read-only or full disk
        print(f"reproduce.py: can't write {e.filename or 'in ' + out}: {e.strerror or e} (finished runs are kept)",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C or a kill: finished runs are on disk, the one in progress is not
        where = (f"the one in progress has a checkpoint in {opts['ckpt_dir']} (--resume=true with the same "
                 f"--ckpt_dir continues it)" if opts.get("ckpt_dir") else
                 "the one in progress was not saved (--resume=true re-runs it; --ckpt_dir=DIR would keep it)")
        print(f"reproduce.py: stopped; the runs finished so far are in {out}, {where}", file=sys.stderr)
        return 130
    if compare:
        try:
            compare_with_committed(scale, out)
        except ValueError as e:
            print(f"reproduce.py: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(_cli(sys.argv[1:]))
