"""
Turn text into GPT-2 tokens on disk: data/<dataset>/train.bin, val.bin (uint16) and meta.json.

    python data/prepare.py                        # Tiny Shakespeare (downloaded once, if it can be)
    python data/prepare.py --input=my_book.txt    # any UTF-8 text; dataset name = file stem

The tokenizer is GPT-2's byte-pair encoding (tiktoken's r50k_base: the same ranks as its 'gpt2'), loaded
from data/r50k_base.tiktoken so nothing is downloaded. When the default corpus can't be had (no file, no
network), we say so loudly and fall back to a text every Python has: pydoc_data.topics, the reference
manual's topics (~465 KB). meta.json records which corpus was used, so a result never hides it.
"""

import hashlib
import json
import os
import sys
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BPE_FILE = os.path.join(HERE, "r50k_base.tiktoken")
# Prepared datasets live beside this file unless TIEDGPT_DATA_DIR points elsewhere (tests use a temp dir).
DATA_DIR = os.environ.get("TIEDGPT_DATA_DIR", HERE)
BPE_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
VOCAB_SIZE = 50257  # n for GPT-2's BPE: 50,000 merges + 256 bytes + <|endoftext|>

_encoding = None


def get_encoding():
    """GPT-2's tokenizer, offline: tiktoken's r50k_base built from the committed rank file."""
    global _encoding
    if _encoding is None:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
        from tiktoken_ext.openai_public import r50k_pat_str
        ranks = load_tiktoken_bpe(BPE_FILE, expected_hash=BPE_SHA256)
        _encoding = tiktoken.Encoding("r50k_base", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                                      special_tokens={"<|endoftext|>": VOCAB_SIZE - 1})
        assert _encoding.n_vocab == VOCAB_SIZE
    return _encoding


def dataset_dir(dataset):
    return os.path.join(DATA_DIR, dataset)


def _pydoc_topics():
    from pydoc_data.topics import topics
    return "\n\n".join(topics[k] for k in sorted(topics))


def load_text(dataset="shakespeare", input=None, log=print):
    """Return (text, source, corpus). `input` is a path; otherwise the named default corpus."""
    if input is not None:
        if not os.path.isfile(input):
            raise FileNotFoundError(f"--input file not found: {input}")
        with open(input, encoding="utf-8") as f:
            return f.read(), os.path.abspath(input), os.path.splitext(os.path.basename(input))[0]
    if dataset == "pydoc_topics":
        return _pydoc_topics(), "pydoc_data.topics", "pydoc_topics"
    if dataset != "shakespeare":
        raise ValueError(f"unknown dataset {dataset!r}: use 'shakespeare', 'pydoc_topics', or --input=FILE")
    path = os.path.join(dataset_dir("shakespeare"), "input.txt")
    if not os.path.exists(path):
        try:
            log(f"downloading Tiny Shakespeare from {SHAKESPEARE_URL}")
            with urllib.request.urlopen(SHAKESPEARE_URL, timeout=15) as resp:
                raw = resp.read()
            if hashlib.sha256(raw).hexdigest() != SHAKESPEARE_SHA256:
                raise ValueError("downloaded file has an unexpected sha256")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(raw)
        except Exception as e:  # offline, blocked, or corrupted: say so, don't die
            bar = "!" * 78
            log(f"{bar}\nWARNING: could not get Tiny Shakespeare ({type(e).__name__}: {e}).\n"
                f"Falling back to the Python reference manual's topics (pydoc_data.topics).\n"
                f"Results will NOT be on Shakespeare; meta.json records corpus='pydoc_topics'.\n"
                f"To use Shakespeare offline, put the text at {path}\n{bar}")
            return _pydoc_topics(), "pydoc_data.topics (fallback: Tiny Shakespeare unavailable)", "pydoc_topics"
    with open(path, encoding="utf-8") as f:
        return f.read(), SHAKESPEARE_URL, "shakespeare"


def prepare(dataset="shakespeare", input=None, val_fraction=0.1, log=print):
    """Tokenise a corpus into data/<dataset>/{train,val}.bin and meta.json; returns the metadata.

    The split is by position: the first (1 - val_fraction) of the tokens train, the rest validate.
    When `input` is given the dataset is named after the file."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    text, source, corpus = load_text(dataset, input, log)
    if input is not None:
        dataset = corpus
    enc = get_encoding()
    ids = np.array(enc.encode_ordinary(text), dtype=np.uint16)  # n = 50257 < 65536 fits in uint16
    if len(ids) < 100:
        raise ValueError(f"corpus {source} has only {len(ids)} tokens; need at least 100")
    split = int(len(ids) * (1 - val_fraction))
    out = dataset_dir(dataset)
    os.makedirs(out, exist_ok=True)
    for name, part in (("train", ids[:split]), ("val", ids[split:])):
        _atomic_write(os.path.join(out, f"{name}.bin"), part.tobytes())
    meta = dict(
        dataset=dataset, corpus=corpus, source=source,
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), chars=len(text),
        encoding="r50k_base", vocab_size=VOCAB_SIZE,
        tokens=len(ids), train_tokens=split, val_tokens=len(ids) - split,
        distinct_tokens=int(len(np.unique(ids))),
        repeat_fraction=float((ids[1:] == ids[:-1]).mean()),  # r: targets equal to their input token
    )
    _atomic_write(os.path.join(out, "meta.json"), json.dumps(meta, indent=2).encode())
    log(f"{dataset}: {meta['tokens']:,} tokens ({meta['train_tokens']:,} train, {meta['val_tokens']:,} val) "
        f"from {source} -> {out}")
    return meta


def _atomic_write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def load_meta(dataset):
    with open(os.path.join(dataset_dir(dataset), "meta.json")) as f:
        return json.load(f)


def ensure_prepared(dataset="shakespeare", input=None, log=print):
    """Metadata of a prepared dataset, preparing it first if its files are missing."""
    name = os.path.splitext(os.path.basename(input))[0] if input is not None else dataset
    d = dataset_dir(name)
    if all(os.path.exists(os.path.join(d, f)) for f in ("train.bin", "val.bin", "meta.json")):
        return load_meta(name)
    return prepare(dataset, input, log=log)


def load_split(dataset, split):
    """The tokens of one split as a read-only uint16 memmap."""
    return np.memmap(os.path.join(dataset_dir(dataset), f"{split}.bin"), dtype=np.uint16, mode="r")


def main(argv):
    opts = dict(dataset="shakespeare", input=None, val_fraction="0.1")
    for arg in argv:
        key, eq, val = arg.lstrip("-").partition("=")
        if arg in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if not arg.startswith("--") or not eq or key not in opts:
            print(f"prepare.py: bad argument {arg!r}; use --dataset=NAME, --input=FILE, --val_fraction=F",
                  file=sys.stderr)
            return 2
        opts[key] = val
    try:
        prepare(opts["dataset"], opts["input"], float(opts["val_fraction"]))
    except (ValueError, FileNotFoundError, UnicodeDecodeError) as e:
        print(f"prepare.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
