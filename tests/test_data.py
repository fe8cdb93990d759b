"""The tokenizer works offline and the prepare step turns any text into token files plus metadata."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from data import prepare as P


def test_tokenizer_loads_offline_and_matches_gpt2_ids():
    enc = P.get_encoding()
    assert enc.encode_ordinary("hello world") == [31373, 995]
    assert enc.encode_ordinary("Hello world") == [15496, 995]
    assert enc.n_vocab == 50257


def test_tokenizer_round_trips_text():
    enc = P.get_encoding()
    text = "To be, or not to be: that is the question.\n\nÉtude — naïve café 🙂"
    assert enc.decode(enc.encode_ordinary(text)) == text


def test_prepare_writes_uint16_splits_and_metadata(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    src = tmp_path / "poem.txt"
    src.write_text("the cat sat on the mat.\n\n" * 200, encoding="utf-8")
    meta = P.prepare(input=str(src), log=lambda *_: None)
    train = np.fromfile(tmp_path / "poem" / "train.bin", dtype=np.uint16)
    val = np.fromfile(tmp_path / "poem" / "val.bin", dtype=np.uint16)
    assert len(train) == meta["train_tokens"] and len(val) == meta["val_tokens"]
    assert meta["tokens"] == len(train) + len(val) and meta["corpus"] == "poem"
    assert P.get_encoding().decode(np.concatenate([train, val]).tolist()) == src.read_text()
    assert json.loads((tmp_path / "poem" / "meta.json").read_text())["vocab_size"] == 50257


def test_missing_corpus_falls_back_loudly_to_pydoc_topics(tmp_path, monkeypatch):
    """No Shakespeare file and no network: a warning, the pydoc corpus, and meta.json says so."""
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    monkeypatch.setattr(P, "SHAKESPEARE_URL", "http://127.0.0.1:9/unreachable")
    said = []
    meta = P.prepare("shakespeare", log=said.append)
    assert meta["corpus"] == "pydoc_topics" and "fallback" in meta["source"]
    assert any("WARNING" in s for s in said)
    assert meta["tokens"] > 50_000


def test_shakespeare_has_the_documented_token_count_and_repeat_fraction(corpus_tokens):
    from conftest import shakespeare_path
    if shakespeare_path() is None:
        pytest.skip("Tiny Shakespeare not available here")
    assert len(corpus_tokens) == 338_025
    r = float((corpus_tokens[1:] == corpus_tokens[:-1]).mean())
    assert 0.015 < r < 0.03  # ~2%, mostly "\n\n" after "\n\n"


def test_prepare_cli_rejects_a_missing_input_with_one_line(tmp_path):
    p = subprocess.run([sys.executable, "data/prepare.py", f"--input={tmp_path}/nope.txt"], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "not found" in p.stderr
