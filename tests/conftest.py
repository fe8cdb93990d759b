"""Fixtures. pytest.ini puts the repository root on the path, so tests import tiedgpt, train and data.prepare exactly
as a student's script in the root would; what tests share besides fixtures is in helpers.py."""
import os

if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest.ini runs the tests on the cores side by side (pytest-xdist):
    os.environ["OMP_NUM_THREADS"] = "1"   # one thread each, and in the processes and notebook kernels they start
    import torch                          # (two processes of two threads on two cores wait on each other: 2.7x slower)
    torch.set_num_threads(1)

import numpy as np
import pytest

import data.prepare as P
from data.prepare import get_encoding
from helpers import READ, generated_text, shakespeare_path


def pytest_configure(config):
    config.addinivalue_line("markers", "corpus: reads the default corpus (Tiny Shakespeare, or offline its fallback); "
                                       "CI runs these again on a fresh offline machine (.ci/run)")
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU (skipped without one, as in CI): pytest -m cuda")


@pytest.fixture(autouse=True)
def corpus_tests_are_marked(request, monkeypatch):
    """A test that reads the default corpus must be marked `corpus`: CI's offline pass runs only those, on a copy of
    the checkout without Tiny Shakespeare, so an unmarked one would escape it. Reading it unmarked fails the test.
    (In-process reads are seen here; a test that reads it in another process, a notebook's kernel, is marked by hand.)"""
    real = P.dataset_dir
    monkeypatch.setattr(P, "dataset_dir", lambda name: (READ.append(name) if name == "shakespeare" else None)
                        or real(name))
    READ.clear()
    yield
    if (READ or "corpus_tokens" in request.fixturenames) and request.node.get_closest_marker("corpus") is None:
        pytest.fail("this test reads the default corpus: mark it @pytest.mark.corpus so that CI's offline pass runs it")


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


@pytest.fixture(scope="session")
def generated_tokens():
    """generated_text as GPT-2 tokens (~6.5K), the same on every machine, offline."""
    return np.array(get_encoding().encode_ordinary(generated_text()), dtype=np.int64)
