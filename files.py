"""
How the project writes a file: whole or not at all, and never through a link. Every writer (checkpoints, run files,
run records, token files, figures) goes through write_file; set_aside gives a kept file a name nothing else has;
sealed and edited tell a JSON file the project wrote from one edited since.
"""

import hashlib
import json
import os
import re
import stat
import tempfile
import time


def content_sha256(obj):
    """The sha256 of a dict's content (every key but its own 'sha256'), as JSON reads it back."""
    body = json.loads(json.dumps({k: v for k, v in obj.items() if k != "sha256"}))
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def sealed(obj):
    """The dict with its seal: 'sha256', its content's (content_sha256), so an edit made since can be told (edited)."""
    return dict(obj, sha256=content_sha256(obj))


def edited(obj):
    """True if a sealed dict no longer holds what was written. One written before seals can't say: False."""
    return isinstance(obj, dict) and "sha256" in obj and obj["sha256"] != content_sha256(obj)


def cut_writes(folder, names):
    """(name, size) of each temporary file write_file left in `folder` when killed mid-write (kill -9 runs no cleanup)
    while writing one of `names`: a regular file named as it names them, .<name>.<mkstemp's 8 characters>.tmp."""
    pattern = rf"\.({'|'.join(map(re.escape, names))})\.[a-z0-9_]{{8}}\.tmp"
    found = []
    for name in sorted(os.listdir(folder) if folder and os.path.isdir(folder) else []):
        if re.fullmatch(pattern, name):
            try:
                st = os.lstat(os.path.join(folder, name))  # (a link, a folder or a FIFO under the name is no write's)
            except OSError:  # gone since listed
                continue
            if stat.S_ISREG(st.st_mode):
                found.append((name, st.st_size))
    return found


def write_file(path, write, mode="w"):
    """Write `path` whole or not at all: write(f) fills a new temporary file beside it, made with an unguessable name
    and O_EXCL (tempfile.mkstemp), so nothing planted under a temporary name is written through; it then replaces
    `path` (os.replace), so a symbolic or hard link at `path` is replaced and the file it led to is never touched. A
    failure, Ctrl-C included, removes the temporary file and leaves `path` as it was."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    # (a kill -9 before os.replace below leaves tmp behind: cut_writes finds it)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    return path


def special(path):
    """True if `path` is there but neither a regular file nor a folder (a FIFO, a device, a socket; through a link
    too): opening one to read can wait forever, so every reader refuses it first."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def set_aside(*paths):
    """Rename each existing path to path + the same suffix, .set-aside-<time> (with -2, -3... where a file of that
    name exists already, within one second say), so that files kept together keep one suffix. Returns the suffix."""
    stem = f".set-aside-{time.strftime('%Y%m%d-%H%M%S')}"
    suffix, n = stem, 1
    while any(os.path.lexists(p + suffix) for p in paths):
        n += 1
        suffix = f"{stem}-{n}"
    for p in paths:
        if os.path.lexists(p):
            os.replace(p, p + suffix)
    return suffix
