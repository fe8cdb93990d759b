"""
Turn text into GPT-2 tokens on disk: data/<dataset>/train.bin, val.bin (uint16) and meta.json.

    python data/prepare.py                        # Tiny Shakespeare (downloaded once, if it can be)
    python data/prepare.py --input=my_book.txt    # any UTF-8 text, into data/<file stem>-<hash of its path>/

The tokenizer is GPT-2's byte-pair encoding (tiktoken's r50k_base, the same ranks as its 'gpt2'), loaded from
data/r50k_base.tiktoken, so nothing is downloaded. When Tiny Shakespeare can't be had (no file, no network), we say so
loudly and fall back to a text every Python has, pydoc_data.topics, prepared under its own name (data/pydoc_topics/):
the next run tries Shakespeare again. meta.json records the sha256 of the source text and of each token file: a changed
text is prepared again, and a token file that is not the one prepare.py wrote is refused, never trained on.
"""

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BPE_FILE = os.path.join(HERE, "r50k_base.tiktoken")
DATA_DIR = os.environ.get("TIEDGPT_DATA_DIR", HERE)  # where prepared datasets live (tests use a temporary folder)
OFFLINE = os.environ.get("TIEDGPT_OFFLINE", "") not in ("", "0")  # never try to download (CI's offline pass)
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
    return _encoding


def dataset_dir(dataset):
    return os.path.join(DATA_DIR, dataset)


def input_name(input):
    """The dataset name of an --input file: its stem and 8 hex digits of its absolute path's sha256, so that two
    files named book.txt never share a folder, and one named shakespeare.txt never lands on the built-in dataset."""
    path = os.path.abspath(input)
    return f"{os.path.splitext(os.path.basename(path))[0]}-{hashlib.sha256(path.encode()).hexdigest()[:8]}"


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_text(path, what):
    """(text, sha256 of its bytes) of a UTF-8 text file, or one line that names the file and says what to do."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n"), hashlib.sha256(raw).hexdigest()
    except UnicodeDecodeError as e:
        raise ValueError(f"{what} {path} is not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); "
                         f"convert it first, e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8") from None
    except OSError as e:
        raise ValueError(f"{what} {path} can't be read: {e.strerror}") from None


def pydoc_topics():
    from pydoc_data.topics import topics
    text = "\n\n".join(topics[k] for k in sorted(topics))
    return text, "pydoc_data.topics", "pydoc_topics", hashlib.sha256(text.encode()).hexdigest()


def load_text(dataset="shakespeare", input=None, log=print):
    """(text, source, corpus, sha256): the --input file, or the named default corpus."""
    if input is not None:
        text, sha = read_text(input, "--input")
        return text, os.path.abspath(input), os.path.splitext(os.path.basename(input))[0], sha
    if dataset == "pydoc_topics":
        return pydoc_topics()
    if dataset != "shakespeare":
        raise ValueError(f"unknown dataset {dataset!r}: use 'shakespeare', 'pydoc_topics', or --input=FILE")
    path = os.path.join(dataset_dir("shakespeare"), "input.txt")
    if not os.path.exists(path):
        try:
            if OFFLINE:
                raise OSError("TIEDGPT_OFFLINE is set, so nothing is downloaded")
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
            text, _, corpus, sha = pydoc_topics()
            return text, "pydoc_data.topics (fallback: Tiny Shakespeare unavailable)", corpus, sha
    text, sha = read_text(path, "Tiny Shakespeare's")
    return text, SHAKESPEARE_URL if sha == SHAKESPEARE_SHA256 else path, "shakespeare", sha


def write_whole(path, data):
    """Write `path` under a name of its own first, then rename it (whole or not at all): a process reading the data,
    or a second one preparing it at once (pytest runs on every core), never sees half a file. (rundir.write_file's one
    fixed .tmp name would let two such writers clash.)"""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{os.path.basename(path)}.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def prepare(dataset="shakespeare", input=None, val_fraction=0.1, log=print):
    """Tokenise a corpus into data/<dataset>/{train,val}.bin and meta.json; returns the metadata. The split is by
    position: the first (1 - val_fraction) of the tokens train, the rest validate."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    text, source, corpus, sha = load_text(dataset, input, log)
    dataset = input_name(input) if input is not None else corpus  # (the fallback under its own name)
    ids = np.array(get_encoding().encode_ordinary(text), dtype=np.uint16)  # n = 50257 < 65536 fits in uint16
    split = int(len(ids) * (1 - val_fraction))
    if not 0 < split < len(ids):
        raise ValueError(f"{source}: its {len(ids):,} tokens split at val_fraction={val_fraction} leave none for "
                         f"training or none for validation: give a longer text or another --val_fraction")
    out = dataset_dir(dataset)
    os.makedirs(out, exist_ok=True)
    meta_path = os.path.join(out, "meta.json")
    try:  # gone until the new token files are whole: a kill leaves no stale meta.json
        os.remove(meta_path)
    except FileNotFoundError:  # not prepared yet, or another process preparing the same data removed it first
        pass
    meta = dict(dataset=dataset, corpus=corpus, source=source, sha256=sha, chars=len(text), encoding="r50k_base",
                vocab_size=VOCAB_SIZE, tokens=len(ids), train_tokens=split, val_tokens=len(ids) - split,
                distinct_tokens=int(len(np.unique(ids))),
                repeat_fraction=float((ids[1:] == ids[:-1]).mean()),  # r: targets equal to their input token
                val_fraction=val_fraction)
    for name, part in (("train", ids[:split]), ("val", ids[split:])):
        write_whole(os.path.join(out, f"{name}.bin"), part.tobytes())
        meta[f"{name}_sha256"] = hashlib.sha256(part.tobytes()).hexdigest()
    write_whole(meta_path, json.dumps(meta, indent=2).encode())
    log(f"{dataset}: {meta['tokens']:,} tokens ({split:,} train, {meta['val_tokens']:,} val) from {source} -> {out}")
    return meta


def ensure_prepared(dataset="shakespeare", input=None, log=print):
    """The metadata of a prepared dataset, preparing it first if it is not (or not whole) or if its source text
    changed. A token file that is not the one prepare.py wrote: ValueError, one line."""
    name = input_name(input) if input is not None else dataset
    d = dataset_dir(name)
    try:
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        files = {split: os.path.join(d, f"{split}.bin") for split in ("train", "val")}
        wrong = [path for split, path in files.items() if sha256_of(path) != meta[f"{split}_sha256"]]
    except (OSError, ValueError, KeyError):  # not prepared, or cut short before its meta.json was written
        return prepare(dataset, input, log=log)
    source = input or (os.path.join(d, "input.txt") if name == "shakespeare" else None)
    if source and os.path.isfile(source) and sha256_of(source) != meta["sha256"]:
        log(f"{source} changed since {d} was prepared: preparing it again")
        return prepare(dataset, input, meta["val_fraction"], log=log)
    if wrong:
        raise ValueError(f"{wrong[0]} is not the file prepare.py wrote (its sha256 is not meta.json's): delete {d} "
                         f"(any input.txt there is your text: keep it) and run again to prepare it anew")
    return meta


def load_split(dataset, split):
    """The tokens of one split as a read-only uint16 memmap."""
    return np.memmap(os.path.join(dataset_dir(dataset), f"{split}.bin"), dtype=np.uint16, mode="r")


def corpus_vocab(c, train_data, val_data):
    """For vocab='corpus': (ids, lut, config) with ids the sorted GPT-2 ids that occur, lut their new numbers, and
    the config's vocab_size set to len(ids). For vocab='full': (None, None, c)."""
    if c.vocab == "full":
        return None, None, c
    ids = np.unique(np.concatenate([np.unique(train_data), np.unique(val_data)]))
    lut = np.full(2 ** 16, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    return ids, lut, dataclasses.replace(c, vocab_size=len(ids))


def load_data(c, log=print):
    """Prepare (once) and open the dataset; check block_size against it; apply vocab='corpus'. Returns (c with the
    effective vocab_size, meta, train tokens, val tokens, ids, lut)."""
    meta = ensure_prepared(c.dataset, c.input, log=log)
    train_data, val_data = load_split(meta["dataset"], "train"), load_split(meta["dataset"], "val")
    if c.block_size + 1 >= min(len(train_data), len(val_data)):
        raise ValueError(f"block_size={c.block_size} is beyond the data: {meta['dataset']} has "
                         f"{len(train_data)} train and {len(val_data)} val tokens")
    ids, lut, c = corpus_vocab(c, train_data, val_data)
    if c.vocab_size < VOCAB_SIZE and c.vocab == "full":
        raise ValueError(f"vocab_size={c.vocab_size} is smaller than the tokenizer's {VOCAB_SIZE}")
    return c, meta, train_data, val_data, ids, lut


def subset_windows(n_win, subset):
    """The indices of the `subset` windows (of n_win) that a dense evaluation scores: evenly spaced, the same K at
    every call (all of them if subset is None or >= n_win)."""
    if subset and subset < n_win:
        return np.unique(np.linspace(0, n_win - 1, subset).round().astype(np.int64))
    return np.arange(n_win)


def split_windows(data, block_size, lut=None, windows_per_batch=64, subset=None):
    """Every non-overlapping block_size window of `data` (plus its next-token targets), as (windows, T + 1) int64
    arrays of token ids: what train.full_split_loss scores. `lut` renumbers ids (vocab='corpus'); subset=K keeps K
    of the windows, evenly spaced over the split (subset_windows)."""
    starts = subset_windows((len(data) - 1) // block_size, subset) * block_size
    for i in range(0, len(starts), windows_per_batch):
        xy = np.stack([data[j:j + block_size + 1] for j in starts[i:i + windows_per_batch]]).astype(np.int64)
        yield xy if lut is None else lut[xy]


def main(argv):
    opts = dict(dataset="shakespeare", input=None, val_fraction="0.1")
    for arg in argv:
        if arg in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        key, eq, val = arg[2:].partition("=")
        if not arg.startswith("--") or not eq or key not in opts:
            print(f"prepare.py: bad argument {arg!r}; use --dataset=NAME, --input=FILE, --val_fraction=F",
                  file=sys.stderr)
            return 2
        opts[key] = val
    try:
        fraction = float(opts["val_fraction"])
    except ValueError:
        print(f"prepare.py: --val_fraction expects a number in (0, 1), got {opts['val_fraction']!r}", file=sys.stderr)
        return 2
    try:
        prepare(opts["dataset"], opts["input"], fraction)
    except ValueError as e:
        print(f"prepare.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
