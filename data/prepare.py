"""
Turn text into GPT-2 tokens on disk: data/<dataset>/train.bin, val.bin (uint16) and meta.json.

    python data/prepare.py                        # Tiny Shakespeare (downloaded once, if it can be)
    python data/prepare.py --input=my_book.txt    # any UTF-8 text; dataset name = file stem

The tokenizer is GPT-2's byte-pair encoding (tiktoken's r50k_base: the same ranks as its 'gpt2'), loaded
from data/r50k_base.tiktoken so nothing is downloaded. When the default corpus can't be had (no file, no
network), we say so loudly and fall back to a text every Python has: pydoc_data.topics, the reference
manual's topics (~465 KB), prepared under its own name (data/pydoc_topics/), never under Shakespeare's: the
next run tries Shakespeare again, so the real text is used as soon as it is at data/shakespeare/input.txt.

A prepared dataset is tied to its source. meta.json records the source's path and sha256; each run checks them
and re-prepares (and says so) when the text changed. Files from --input are prepared into data/<stem>-<hash>/,
the hash taken from the file's absolute path, so two files named book.txt never share a folder and a file named
shakespeare.txt never lands on the built-in dataset. A prepared folder that is damaged (unreadable meta.json,
missing keys, token files of the wrong size or with ids beyond the vocabulary) is refused with one line that
names the file and the fix.
"""

import dataclasses
import errno
import hashlib
import json
import os
import sys
import urllib.request

import numpy as np

try:
    from files import special, write_file
except ImportError:  # run as `python data/prepare.py`: the repository root, where files.py is, is the folder above
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from files import special, write_file

HERE = os.path.dirname(os.path.abspath(__file__))
BPE_FILE = os.path.join(HERE, "r50k_base.tiktoken")
# Prepared datasets live beside this file unless TIEDGPT_DATA_DIR points elsewhere (tests use a temp dir).
DATA_DIR = os.environ.get("TIEDGPT_DATA_DIR", HERE)
# TIEDGPT_OFFLINE=1: never try to download (a machine without network; CI's offline pass sets it): the fallback at once
OFFLINE = os.environ.get("TIEDGPT_OFFLINE", "") not in ("", "0")
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


def input_name(input):
    """The dataset name of an --input file: its stem plus 8 hex digits of its absolute path's sha256."""
    path = os.path.abspath(input)
    stem = os.path.splitext(os.path.basename(path))[0]
    return f"{stem}-{hashlib.sha256(path.encode()).hexdigest()[:8]}"


def read_text(path, what):
    """(text, sha256) of a UTF-8 text file, both from one read of its bytes (so the hash meta.json records is the text
    that was tokenised, even if the file is replaced meanwhile), or one line that names the file and says what to do.
    Line ends are read as Python's text mode reads them (\\r\\n and \\r become \\n); the sha256 is the bytes'."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as e:
        raise ValueError(f"{what} {path} is not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); "
                         f"convert it first, e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8") from None
    except IsADirectoryError:
        raise ValueError(f"{what} {path} is a folder, not a text file") from None
    except OSError as e:
        raise ValueError(f"{what} {path} can't be read: {e.strerror}") from None
    return text, hashlib.sha256(raw).hexdigest()


def load_text(dataset="shakespeare", input=None, log=print):
    """Return (text, source, corpus, sha256). `input` is a path; otherwise the named default corpus. sha256 is the
    source file's bytes as they were read (of the text itself where there is no file)."""
    if input is not None:
        if os.path.isdir(input):
            raise ValueError(f"--input {input} is a folder, not a text file; give the file inside it")
        if os.path.exists(input) and not os.path.isfile(input):
            raise ValueError(f"--input {input} is not a regular file (a device or a pipe?): give a text file")
        if not os.path.isfile(input):
            raise FileNotFoundError(f"--input file not found: {input}")
        text, sha = read_text(input, "--input")
        return text, os.path.abspath(input), os.path.splitext(os.path.basename(input))[0], sha
    if dataset == "pydoc_topics":
        return _with_sha(_pydoc_topics(), "pydoc_data.topics", "pydoc_topics")
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
            write_file(path, lambda f: f.write(raw), "wb")
        except Exception as e:  # offline, blocked, or corrupted: say so, don't die
            bar = "!" * 78
            log(f"{bar}\nWARNING: could not get Tiny Shakespeare ({type(e).__name__}: {e}).\n"
                f"Falling back to the Python reference manual's topics (pydoc_data.topics).\n"
                f"Results will NOT be on Shakespeare; meta.json records corpus='pydoc_topics'.\n"
                f"To use Shakespeare offline, put the text at {path}\n{bar}")
            return _with_sha(_pydoc_topics(), "pydoc_data.topics (fallback: Tiny Shakespeare unavailable)",
                             "pydoc_topics")
    text, sha = read_text(path, "Tiny Shakespeare's")
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != SHAKESPEARE_SHA256:  # a text put there by hand
        return text, f"{path} (not the Tiny Shakespeare download: its sha256 differs)", "shakespeare", sha
    return text, SHAKESPEARE_URL, "shakespeare", sha


def _with_sha(text, source, corpus):
    return text, source, corpus, hashlib.sha256(text.encode("utf-8")).hexdigest()


def prepare(dataset="shakespeare", input=None, val_fraction=0.1, log=print):
    """Tokenise a corpus into data/<dataset>/{train,val}.bin and meta.json; returns the metadata.

    The split is by position: the first (1 - val_fraction) of the tokens train, the rest validate.
    When `input` is given the dataset is named after the file."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    text, source, corpus, sha = load_text(dataset, input, log)
    if input is not None:
        dataset = input_name(input)
    elif corpus != dataset:  # the fallback lives under its own name, never under the corpus it replaces
        dataset = corpus
    enc = get_encoding()
    ids = np.array(enc.encode_ordinary(text), dtype=np.uint16)  # n = 50257 < 65536 fits in uint16
    if len(ids) < 100:
        raise ValueError(f"corpus {source} has only {len(ids)} tokens; need at least 100")
    split = int(len(ids) * (1 - val_fraction))
    if not 0 < split < len(ids):  # (1 - 1e-17 is 1.0 in floating point: every token would train)
        raise ValueError(f"val_fraction={val_fraction} leaves {'no' if split >= len(ids) else 'every'} token of the "
                         f"{len(ids):,} for validation: give a fraction that leaves some for each split")
    out = dataset_dir(dataset)
    parts = {"train.bin": ids[:split].tobytes(), "val.bin": ids[split:].tobytes()}
    before = own_files(dataset, parts)  # the folder's earlier preparation, or None; files it did not make are refused
    os.makedirs(out, exist_ok=True)
    for name, part in (("train", ids[:split]), ("val", ids[split:])):
        _atomic_write(os.path.join(out, f"{name}.bin"), part.tobytes())
    hashes = {f"{name}_sha256": hashlib.sha256(part.tobytes()).hexdigest()
              for name, part in (("train", ids[:split]), ("val", ids[split:]))}
    meta = dict(
        dataset=dataset, corpus=corpus, source=source,
        sha256=sha,  # of the bytes tokenised above, which is what ensure_prepared compares on every later run
        chars=len(text),
        encoding="r50k_base", vocab_size=VOCAB_SIZE,
        tokens=len(ids), train_tokens=split, val_tokens=len(ids) - split,
        distinct_tokens=int(len(np.unique(ids))),
        repeat_fraction=float((ids[1:] == ids[:-1]).mean()),  # r: targets equal to their input token
        val_fraction=val_fraction,  # kept when a changed text is prepared again (ensure_prepared)
        **hashes,  # the token files' own identity: a file damaged in place is caught (check_prepared)
    )
    _atomic_write(os.path.join(out, "meta.json"), json.dumps(meta, indent=2).encode())
    if before and before["sha256"] == meta["sha256"] and before["train_tokens"] != split:
        log(f"note: {dataset}'s split changed ({before['train_tokens']:,} -> {split:,} train tokens): runs made on "
            f"the old split can't be resumed (train.py refuses them); prepare again with the old --val_fraction "
            f"to go back")
    log(f"{dataset}: {meta['tokens']:,} tokens ({meta['train_tokens']:,} train, {meta['val_tokens']:,} val) "
        f"from {source} -> {out}")
    return meta


def own_files(dataset, parts=None):
    """The meta.json of data/<dataset> if the folder holds prepare.py's own files (None if it holds none of them), or
    a one-line ValueError: prepare replaces train.bin, val.bin and meta.json only where its own meta.json vouches for
    them, so a user's files (a folder linked here, say) are never written over. Token files that already hold the
    bytes `parts` would write (a first prepare interrupted before its meta.json) lose nothing: they count as none."""
    d = dataset_dir(dataset)
    present = [f for f in ("train.bin", "val.bin", "meta.json") if os.path.lexists(os.path.join(d, f))]
    for f in present:
        if os.path.isdir(os.path.join(d, f)) or special(os.path.join(d, f)):
            raise ValueError(f"{os.path.join(d, f)} is a folder or a FIFO, not prepare.py's {f}: move it away and run "
                             f"again")
    if not present or parts and all(f in parts and _same_bytes(os.path.join(d, f), parts[f]) for f in present):
        return None
    try:
        meta = load_meta(dataset)
    except (ValueError, OSError):
        raise ValueError(f"{d} holds {', '.join(present)} not made by prepare.py (no meta.json of its own vouches "
                         f"for them): move them away, or delete them if prepare.py made them, and run again") from None
    for split in ("train", "val"):  # meta.json vouches only for the token files it names, by size and sha256
        path = os.path.join(d, f"{split}.bin")
        if not os.path.lexists(path) or parts and _same_bytes(path, parts.get(f"{split}.bin", b"")):
            continue
        if not os.path.isfile(path) or os.path.getsize(path) != 2 * meta[f"{split}_tokens"] or (
                _source_sha256(path) != meta.get(f"{split}_sha256")):  # (one from before the hashes can't vouch)
            raise ValueError(f"{path} is not the {split}.bin that {d}/meta.json vouches for (its size or sha256 "
                             f"differs, or it names none): move it away, or delete it if prepare.py made it, and run "
                             f"again")
    return meta


def _same_bytes(path, data):
    try:
        with open(path, "rb") as f:
            return os.fstat(f.fileno()).st_size == len(data) and f.read() == data
    except OSError:  # a dangling link, say: not these bytes
        return False


def _atomic_write(path, data):
    write_file(path, lambda f: f.write(data), "wb")  # whole or not at all, never through a link


META_TYPES = dict(dataset=str, corpus=str, source=str, sha256=str, vocab_size=int, tokens=int, train_tokens=int,
                  val_tokens=int)


def meta_problem(meta, dataset):
    """What is wrong with a meta.json's values (None if nothing): the fields train.py uses, field by field."""
    bad = [k for k, t in META_TYPES.items() if not isinstance(meta.get(k), t) or isinstance(meta.get(k), bool)]
    if bad:
        return f"lacks or mistypes {', '.join(bad)}"
    if meta["dataset"] != dataset:  # the token files are read from the folder meta.json names
        return f"names dataset {meta['dataset']!r}, but it is in {dataset_dir(dataset)}"
    if meta["vocab_size"] != VOCAB_SIZE:
        return f"says vocab_size {meta['vocab_size']}, but the tokenizer (r50k_base) has {VOCAB_SIZE}"
    if min(meta["train_tokens"], meta["val_tokens"]) < 0 or meta["tokens"] != meta["train_tokens"] + meta["val_tokens"]:
        return (f"says tokens {meta['tokens']} = train_tokens {meta['train_tokens']} + val_tokens "
                f"{meta['val_tokens']}, which does not add up")
    r = meta.get("repeat_fraction", 0.0)  # older meta.json files lack it
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
        return f"says repeat_fraction {r!r}, which is not a fraction"
    return None


def load_meta(dataset):
    """meta.json of a prepared dataset, checked: one line naming the file and the fix if it is damaged."""
    path = os.path.join(dataset_dir(dataset), "meta.json")
    fix = refix(dataset)
    if os.path.isdir(path):
        raise ValueError(f"{path} is a folder, not prepare.py's meta.json: move it away and run again")
    if special(path):  # a FIFO: reading it would wait forever
        raise ValueError(f"{path} is not a regular file (a FIFO or a device?): move it away and run again")
    try:
        with open(path) as f:
            meta = json.load(f)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # (nested too deep to read)
        raise ValueError(f"{path} is not valid JSON ({str(e).splitlines()[0][:60]}): {fix}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path} is not a JSON object: {fix}")
    problem = meta_problem(meta, dataset)
    if problem:
        raise ValueError(f"{path} {problem}: {fix}")
    return meta


def check_prepared(dataset, meta):
    """The token files agree with meta.json: whole uint16 values, the recorded counts, ids below the vocabulary, and
    the bytes meta.json's sha256 names (a file damaged in place keeps its size)."""
    fix = refix(dataset)
    for split in ("train", "val"):
        path = os.path.join(dataset_dir(dataset), f"{split}.bin")
        if special(path) or os.path.isdir(path):  # a FIFO: reading it would wait forever
            raise ValueError(f"{path} is not a regular file (a folder, a FIFO or a device?): {fix}")
        size = os.path.getsize(path)
        if size % 2:
            raise ValueError(f"{path} has an odd size ({size} bytes), so it is not uint16 tokens: {fix}")
        if size // 2 != meta[f"{split}_tokens"]:
            raise ValueError(f"{path} holds {size // 2:,} tokens but meta.json says {meta[f'{split}_tokens']:,}: {fix}")
        if meta.get(f"{split}_sha256") and _source_sha256(path) != meta[f"{split}_sha256"]:  # first: whose file is it
            raise ValueError(f"{path} is not the file that was prepared (its sha256 differs from meta.json's): move it "
                             f"away if it is yours; else {fix}")
        if size and int(load_split(dataset, split).max()) >= meta["vocab_size"]:
            raise ValueError(f"{path} holds token ids >= the vocabulary's {meta['vocab_size']}: {fix}")


def refix(dataset):
    """The advice for a damaged prepared dataset: remove what prepare.py made, never the source text beside it."""
    d = dataset_dir(dataset)
    return f"delete meta.json, train.bin and val.bin in {d} (the derived files; any input.txt stays) and run again"


def _source_sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ensure_prepared(dataset="shakespeare", input=None, log=print):
    """Metadata of a prepared dataset, preparing it first if its files are missing or its source changed."""
    name = input_name(input) if input is not None else dataset
    d = dataset_dir(name)
    if all(os.path.exists(os.path.join(d, f)) for f in ("train.bin", "val.bin", "meta.json")):
        meta = load_meta(name)
        # the file the text came from: only --input and Shakespeare have one (a stray data/pydoc_topics/input.txt is
        # no source of the pydoc text)
        source = os.path.abspath(input) if input is not None else (
            os.path.join(d, "input.txt") if name == "shakespeare" else "")
        if dataset == "shakespeare" and input is None and meta["corpus"] != "shakespeare":
            log(f"{d} holds the {meta['corpus']} fallback, not Shakespeare: trying Shakespeare again")
            return prepare(dataset, input, log=log)
        # the split the user chose, as the token counts show it (a val_fraction they don't bear out is not taken)
        fraction = meta.get("val_fraction")
        if not (isinstance(fraction, float) and 0.0 < fraction < 1.0
                and int(meta["tokens"] * (1 - fraction)) == meta["train_tokens"]):
            fraction = meta["val_tokens"] / meta["tokens"] if 0 < meta["val_tokens"] < meta["tokens"] else 0.1
        if os.path.isfile(source) and meta["sha256"] != _source_sha256(source):  # (a folder there is no text)
            log(f"{source} changed since {d} was prepared: preparing it again")
            return prepare(dataset, input, fraction, log=log)
        if "train_sha256" not in meta and (os.path.isfile(source) or name == "pydoc_topics"):
            log(f"{d} was prepared before token files were hashed: preparing it again")
            return prepare(dataset, input, fraction, log=log)
        check_prepared(name, meta)
        return meta
    return prepare(dataset, input, log=log)


def load_split(dataset, split):
    """The tokens of one split as a read-only uint16 memmap."""
    return np.memmap(os.path.join(dataset_dir(dataset), f"{split}.bin"), dtype=np.uint16, mode="r")


def corpus_vocab(c, train_data, val_data):
    """For vocab='corpus': (ids, lut, config) with ids the sorted GPT-2 ids that occur, lut their new
    numbers, and the config's vocab_size set to len(ids). For vocab='full': (None, None, c)."""
    if c.vocab == "full":
        return None, None, c
    ids = np.unique(np.concatenate([np.unique(train_data), np.unique(val_data)]))
    lut = np.full(2 ** 16, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    return ids, lut, dataclasses.replace(c, vocab_size=len(ids))


def load_data(c, log=print):
    """Prepare (once) and open the dataset; check block_size and vocab_size against it; apply vocab='corpus'.
    Returns (c with the effective vocab_size, meta, train tokens, val tokens, ids, lut)."""
    meta = ensure_prepared(c.dataset, c.input, log=log)
    train_data, val_data = load_split(meta["dataset"], "train"), load_split(meta["dataset"], "val")
    if c.block_size + 1 >= min(len(train_data), len(val_data)):
        raise ValueError(f"block_size={c.block_size} is beyond the data: {meta['dataset']} has "
                         f"{len(train_data)} train and {len(val_data)} val tokens")
    ids, lut, c = corpus_vocab(c, train_data, val_data)
    if ids is not None and len(ids) < 2:
        raise ValueError(f"{meta['dataset']} uses only {len(ids)} distinct token: vocab=corpus needs at least 2 (a "
                         f"softmax over one token has nothing to learn); use --vocab=full or another text")
    if c.vocab == "full" and meta["vocab_size"] > c.vocab_size:
        raise ValueError(f"vocab_size={c.vocab_size} is smaller than the tokenizer's {meta['vocab_size']}")
    return c, meta, train_data, val_data, ids, lut


def subset_windows(n_win, subset):
    """The indices of the `subset` windows (of n_win) that a dense evaluation scores: evenly spaced, the same K at
    every call (all of them if subset is None or >= n_win)."""
    if subset and subset < n_win:
        return np.unique(np.linspace(0, n_win - 1, subset).round().astype(np.int64))
    return np.arange(n_win)


def split_windows(data, block_size, lut=None, windows_per_batch=64, subset=None):
    """Every non-overlapping block_size window of `data` (plus its next-token targets), as (windows, T + 1) int64
    arrays of token ids: what train.full_split_loss scores. The < block_size tokens past the last whole window are
    left out. `lut` renumbers ids (vocab='corpus'). subset=K keeps K of the windows, evenly spaced over the split (all
    of them if K >= their number): the same K at every call."""
    starts = subset_windows((len(data) - 1) // block_size, subset) * block_size
    for i in range(0, len(starts), windows_per_batch):
        xy = np.stack([data[j:j + block_size + 1] for j in starts[i:i + windows_per_batch]]).astype(np.int64)
        yield xy if lut is None else lut[xy]


def main(argv):
    opts = dict(dataset="shakespeare", input=None, val_fraction="0.1")
    for arg in argv:
        key, eq, val = arg.lstrip("-").partition("=")
        if arg in ("-h", "--help"):
            try:
                print(__doc__.strip(), flush=True)
            except BrokenPipeError:  # `--help | head -1`: the reader has gone; nothing more to say
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
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
    except KeyboardInterrupt:  # Ctrl-C while tokenising or writing: each file is whole, the old one or the new
        print("prepare.py: interrupted; run it again to finish (a half-prepared dataset is refused, never read)",
              file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, UnicodeDecodeError) as e:
        print(f"prepare.py: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a folder that can't be made (a name too long, no permission, a full disk)
        advice = "; give the text file a shorter name" if e.errno == errno.ENAMETOOLONG else ""
        print(f"prepare.py: can't write {e.filename or 'the prepared files'}: {e.strerror or e}{advice}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
