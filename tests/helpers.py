"""What the tests share: the repository's root, the default corpus (Tiny Shakespeare, or offline its fallback), tiny
training settings and runs, and a small generated text every machine has. Fixtures are in conftest.py."""
import os
import sys

import numpy as np

import data.prepare as P

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Tiny Shakespeare is never committed: tests read the copy beside the checkout, or one prepared locally.
SHAKESPEARE_CANDIDATES = [
    os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"),
    os.path.join(ROOT, "data", "shakespeare", "input.txt"),
]
READ = []  # the default corpus was read by the test running now (conftest.corpus_tests_are_marked)


def shakespeare_path():
    READ.append("shakespeare")
    return next((p for p in SHAKESPEARE_CANDIDATES if os.path.exists(p)), None)


def prepared_corpus():
    """(train, val) tokens of the default corpus as data/prepare.py prepares it on this machine: Tiny Shakespeare, or
    offline its fallback. Tests compute their expectations from these, never from Shakespeare's own figures."""
    meta = P.ensure_prepared("shakespeare", log=lambda *a: None)
    return (np.asarray(P.load_split(meta["dataset"], "train"), dtype=np.int64),
            np.asarray(P.load_split(meta["dataset"], "val"), dtype=np.int64))


def corpus_n():
    """n under vocab='corpus': how many distinct GPT-2 tokens the prepared corpus uses (11,706 for Tiny Shakespeare)."""
    train, val = prepared_corpus()
    return len(np.union1d(train, val))


# ----------------------------------------------------------------------------------------------------
# Tiny training runs: 1 layer, d=32, on pydoc's topics prepared into a temp dir, so each takes a second of CPU

TINY = ["--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4", "--eval_iters=2",
        "--dataset=pydoc_topics", "--sample_tokens=0", "--log_interval=1"]


def run(args, cwd=ROOT, script="train.py", **kw):
    """`python train.py ARGS` (or another script) in a fresh process."""
    import subprocess
    return subprocess.run([sys.executable, script, *args], cwd=cwd, capture_output=True, text=True, timeout=300, **kw)


def rows(out_dir):
    """A run's metrics.jsonl as {step: row}."""
    import json
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        return {r["step"]: r for r in map(json.loads, f)}


def config(**kw):
    """A train.Config of the tiny shape, with kw on top."""
    from train import Config
    base = dict(n_layer=1, n_head=2, n_embd=32, block_size=16, batch_size=4, eval_iters=2,
                dataset="pydoc_topics", sample_tokens=0, log_interval=1)
    return Config(**{**base, **kw})


# A small corpus every machine has: sentences drawn from a fixed grammar over word lists written for this project
# (no source text, no licence; data/README.md). Few tokens repeat their input (r ~ 1.5%, as in real prose and unlike
# pydoc's topics, ~15%), which is what the heads' first-loss predictions assume.
WORDS = dict(
    adj="quiet bright early narrow heavy silver distant gentle hollow crooked patient bitter golden restless wooden "
        "brave pale tired sudden ancient clever muddy frozen humble eager scarlet lonely honest crowded velvet".split(),
    noun="river lantern farmer window garden soldier kettle harbour letter mountain candle sailor orchard bridge "
         "teacher forest hammer village mirror castle blanket merchant meadow violin tower shepherd wagon island "
         "ribbon doctor".split(),
    verb="carried watched painted followed mended crossed opened remembered guarded answered borrowed polished "
         "praised hid counted visited lifted traded emptied found".split(),
    adv="slowly gladly rarely softly firmly calmly often barely kindly loudly".split(),
    prep="beside under behind across beyond near towards above past through".split(),
    det="the a every one another my our their this that".split(),
)


def generated_text(sentences=600, seed=0):
    """`sentences` sentences from WORDS, the same text for the same seed on every machine."""
    import random
    rng, pick = random.Random(seed), lambda kind: rng.choice(WORDS[kind])
    out = []
    for _ in range(sentences):
        very = "very very " if rng.random() < 0.2 else ""  # prose repeats a token now and then: r ~ 1.5%
        s = (f"{pick('det')} {very}{pick('adj')} {pick('noun')} {pick('adv')} {pick('verb')} "
             f"{pick('det')} {pick('noun')}")
        if rng.random() < 0.5:
            s += f" {pick('prep')} {pick('det')} {pick('adj')} {pick('noun')}"
        out.append(s[0].upper() + s[1:] + rng.choice([".", ".", ".", ";", "!", "?"]))
    return "\n".join(" ".join(out[i:i + 4]) for i in range(0, len(out), 4)) + "\n"
