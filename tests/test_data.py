"""The tokenizer works offline and the prepare step turns any text into token files plus metadata."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import ROOT
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
    d = tmp_path / meta["dataset"]
    assert meta["dataset"].startswith("poem-")  # the file's stem and a hash of its path
    train = np.fromfile(d / "train.bin", dtype=np.uint16)
    val = np.fromfile(d / "val.bin", dtype=np.uint16)
    assert len(train) == meta["train_tokens"] and len(val) == meta["val_tokens"]
    assert meta["tokens"] == len(train) + len(val) and meta["corpus"] == "poem"
    assert P.get_encoding().decode(np.concatenate([train, val]).tolist()) == src.read_text()
    assert json.loads((d / "meta.json").read_text())["vocab_size"] == 50257


@pytest.mark.corpus
def test_missing_corpus_falls_back_loudly_to_pydoc_topics(tmp_path, monkeypatch):
    """No Shakespeare file and no network: a warning, the pydoc corpus, and meta.json says so."""
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    monkeypatch.setattr(P, "SHAKESPEARE_URL", "http://127.0.0.1:9/unreachable")
    said = []
    meta = P.prepare("shakespeare", log=said.append)
    assert meta["corpus"] == "pydoc_topics" and "fallback" in meta["source"]
    assert any("WARNING" in s for s in said)
    assert meta["tokens"] > 50_000
    assert meta["dataset"] == "pydoc_topics" and not (tmp_path / "shakespeare" / "meta.json").exists()


@pytest.mark.corpus
def test_offline_mode_falls_back_without_trying_to_download(tmp_path, monkeypatch):
    """TIEDGPT_OFFLINE=1 (CI's offline pass): the fallback at once, loudly, and no network call at all."""
    import urllib.request
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    monkeypatch.setattr(P, "OFFLINE", True)
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: pytest.fail("tried to download"))
    said = []
    assert P.prepare("shakespeare", log=said.append)["corpus"] == "pydoc_topics"
    assert any("TIEDGPT_OFFLINE" in s for s in said)


@pytest.mark.corpus
def test_shakespeare_has_the_documented_token_count_and_repeat_fraction(corpus_tokens):
    from helpers import shakespeare_path
    if shakespeare_path() is None:
        pytest.skip("Tiny Shakespeare not available here")
    assert len(corpus_tokens) == 338_025
    r = float((corpus_tokens[1:] == corpus_tokens[:-1]).mean())
    assert 0.015 < r < 0.03  # ~2%, mostly "\n\n" after "\n\n"


def test_prepare_cli_rejects_a_missing_input_with_one_line(tmp_path):
    p = subprocess.run([sys.executable, "data/prepare.py", f"--input={tmp_path}/nope.txt"], cwd=ROOT,
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "can't be read" in p.stderr


def test_prepare_cli_names_the_flag_whose_value_is_not_a_number():
    p = subprocess.run([sys.executable, "data/prepare.py", "--val_fraction=abc"], cwd=ROOT, capture_output=True,
                       text=True)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "--val_fraction expects a number" in p.stderr



# --- a prepared dataset is tied to its source; damage gets one line naming the file and the fix ---------------

def text_file(path, line="the cat sat on the mat.\n\n", times=200):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(line * times, encoding="utf-8")
    return path


def quiet(*_):
    pass


def test_two_files_with_the_same_name_never_share_a_prepared_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path / "data"))
    a = P.ensure_prepared(input=str(text_file(tmp_path / "a" / "book.txt", "alpha beta gamma.\n")), log=quiet)
    b = P.ensure_prepared(input=str(text_file(tmp_path / "b" / "book.txt", "one two three four.\n")), log=quiet)
    assert a["dataset"] != b["dataset"] and a["sha256"] != b["sha256"]
    assert P.load_split(b["dataset"], "train")[:4].tolist() == P.get_encoding().encode_ordinary("one two three four")


def test_an_input_named_shakespeare_does_not_land_on_the_builtin_dataset(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path / "data"))
    meta = P.ensure_prepared(input=str(text_file(tmp_path / "x" / "shakespeare.txt")), log=quiet)
    assert meta["dataset"] != "shakespeare" and meta["dataset"].startswith("shakespeare-")


def test_an_edited_source_is_prepared_again(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path / "data"))
    book = text_file(tmp_path / "book.txt", "old words here.\n")
    first = P.ensure_prepared(input=str(book), log=quiet)
    text_file(book, "brand new text instead.\n")
    said = []
    second = P.ensure_prepared(input=str(book), log=said.append)
    assert second["sha256"] != first["sha256"] and any("changed" in s for s in said)
    assert P.load_split(second["dataset"], "train")[:2].tolist() == P.get_encoding().encode_ordinary("brand new")


@pytest.mark.corpus
def test_the_real_shakespeare_replaces_the_offline_fallback_once_it_is_there(tmp_path, monkeypatch):
    """Offline, the fallback is used (loudly); put the text where the warning says, and the next run uses it."""
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path))
    monkeypatch.setattr(P, "SHAKESPEARE_URL", "http://127.0.0.1:9/unreachable")
    assert P.ensure_prepared("shakespeare", log=quiet)["corpus"] == "pydoc_topics"
    text_file(tmp_path / "shakespeare" / "input.txt", "First Citizen:\nBefore we proceed any further, hear me speak.\n", 100)
    monkeypatch.setattr(P, "SHAKESPEARE_SHA256", "not checked for a local file")
    meta = P.ensure_prepared("shakespeare", log=quiet)
    assert meta["corpus"] == "shakespeare" and meta["dataset"] == "shakespeare"


def test_a_preparation_cut_short_is_prepared_again(tmp_path, monkeypatch):
    """prepare.py removes meta.json first and writes it last: a kill in between leaves no meta.json, or half of one,
    and the next run prepares the text again."""
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path / "data"))
    book = text_file(tmp_path / "book.txt")
    meta = P.prepare(input=str(book), log=quiet)
    (tmp_path / "data" / meta["dataset"] / "meta.json").write_text('{"dataset": "bo')
    said = []
    assert P.ensure_prepared(input=str(book), log=said.append) == meta and any("->" in s for s in said)


def test_a_changed_text_is_prepared_again_with_the_split_it_was_prepared_with(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "DATA_DIR", str(tmp_path / "data"))
    book = text_file(tmp_path / "book.txt", "A book of my own, split in half. ", 40)
    P.prepare(input=str(book), val_fraction=0.5, log=quiet)
    text_file(book, "A book of my own, split in half, and edited. ", 40)
    meta = P.ensure_prepared(input=str(book), log=quiet)
    assert meta["val_fraction"] == 0.5 and abs(meta["val_tokens"] - meta["train_tokens"]) <= 1


def test_windows_line_ends_are_read_as_python_reads_text_and_hashed_as_bytes(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"one line\r\nanother\rlast\n")
    assert P.read_text(str(path), "--input") == ("one line\nanother\nlast\n", P.sha256_of(str(path)))


def test_a_non_utf8_input_is_named_with_the_fix(tmp_path):
    book = tmp_path / "latin1.txt"
    book.write_bytes("café crème, déjà vu. ".encode("latin-1") * 100)
    with pytest.raises(ValueError, match="not UTF-8 text.*iconv") as e:
        P.prepare(input=str(book), log=quiet)
    assert str(book) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.slow
def test_corpus_vocab_on_a_text_without_newlines_still_samples(tmp_path):
    """The sample starts from "\n"; a corpus without that token used to crash after training finished."""
    book = tmp_path / "oneline.txt"
    book.write_text("the cat sat on the mat and the dog sat on the log " * 60, encoding="utf-8")
    env = {**os.environ, "TIEDGPT_DATA_DIR": str(tmp_path / "data")}
    p = subprocess.run([sys.executable, "train.py", "--n_layer=1", "--n_head=2", "--n_embd=32", "--block_size=16",
                        "--batch_size=4", "--eval_iters=1", "--max_iters=2", "--out_dir=", f"--input={book}",
                        "--vocab=corpus", "--sample_tokens=5"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=env)
    assert p.returncode == 0, p.stderr
    assert "sample:" in p.stdout
