"""Shared fixtures. pytest.ini puts the repository root on the path, so tests import tiedgpt, train and data.prepare
exactly as a student's script in the root would."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import data.prepare as P  # noqa: E402
from data.prepare import get_encoding  # noqa: E402

# Tiny Shakespeare is never committed: tests read the copy beside the checkout, or one prepared locally.
SHAKESPEARE_CANDIDATES = [
    os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"),
    os.path.join(ROOT, "data", "shakespeare", "input.txt"),
]
_READ = []  # the default corpus was read by the test running now (see corpus_tests_are_marked)


def pytest_configure(config):
    config.addinivalue_line("markers", "corpus: reads the default corpus (Tiny Shakespeare, or offline its fallback); "
                                       "CI runs these again on a fresh offline machine (.ci/run)")


@pytest.fixture(autouse=True)
def corpus_tests_are_marked(request, monkeypatch):
    """A test that reads the default corpus must be marked `corpus`: CI's offline pass runs only those, on a copy of
    the checkout without Tiny Shakespeare, so an unmarked one would escape it. Reading it unmarked fails the test.
    (In-process reads are seen here; a test that reads it in another process, a notebook's kernel, is marked by hand.)"""
    real = P.dataset_dir
    monkeypatch.setattr(P, "dataset_dir", lambda name: (_READ.append(name) if name == "shakespeare" else None)
                        or real(name))
    _READ.clear()
    yield
    if (_READ or "corpus_tokens" in request.fixturenames) and request.node.get_closest_marker("corpus") is None:
        pytest.fail("this test reads the default corpus: mark it @pytest.mark.corpus so that CI's offline pass runs it")


def shakespeare_path():
    _READ.append("shakespeare")
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


@pytest.fixture(scope="session")
def corpus_tokens():
    """Real text as GPT-2 tokens: Tiny Shakespeare if we have it, else the pydoc topics fallback."""
    path = shakespeare_path()
    if path is None:
        from pydoc_data.topics import topics
        text = "\n\n".join(topics[k] for k in sorted(topics))
    else:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return np.array(get_encoding().encode_ordinary(text), dtype=np.int64)


# ----------------------------------------------------------------------------------------------------
# Tiny training runs: 1 layer, d=32, on pydoc's topics prepared into a temp dir, so each takes a second of CPU

TINY = ["--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4", "--eval_iters=2",
        "--dataset=pydoc_topics", "--sample_tokens=0", "--log_interval=1"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """pydoc's topics prepared into a temp dir, for this process and (TIEDGPT_DATA_DIR) the ones it starts."""
    d = tmp_path_factory.mktemp("data")
    os.environ["TIEDGPT_DATA_DIR"] = str(d)
    old, P.DATA_DIR = P.DATA_DIR, str(d)
    P.prepare("pydoc_topics", log=lambda *_: None)
    yield d
    P.DATA_DIR = old
    del os.environ["TIEDGPT_DATA_DIR"]


@pytest.fixture
def tiny_data(tmp_path_factory, monkeypatch):
    """pydoc's topics, prepared into a temp dir that train.py in this process and in child processes reads
    (TIEDGPT_DATA_DIR): real training in seconds, no Shakespeare needed."""
    d = tmp_path_factory.mktemp("data")
    monkeypatch.setenv("TIEDGPT_DATA_DIR", str(d))
    import data.prepare as P
    monkeypatch.setattr(P, "DATA_DIR", str(d))
    P.prepare("pydoc_topics", log=lambda *_: None)
    return d


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


@pytest.fixture(scope="session")
def generated_tokens():
    """generated_text as GPT-2 tokens (~6.5K), the same on every machine, offline."""
    return np.array(get_encoding().encode_ordinary(generated_text()), dtype=np.int64)
