"""Shared fixtures. The repository root goes on sys.path so tests import tiedgpt, train and data.prepare
exactly as a student's script in the root would."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

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
