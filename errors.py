"""
What a run can fail with, and the one line the command line prints for each (explain): a TrainingError is a problem
the user can act on (a diverged run, a bad checkpoint, a busy out_dir), a ValueError a setting or file that can't be
used; anything else is a bug and keeps its traceback.
"""

import os
import sys


class TrainingError(RuntimeError):
    """A problem the user can act on (diverged, bad checkpoint, busy out_dir): the CLI prints it as one line."""


class Stopped(KeyboardInterrupt):
    """A run stopped by a first Ctrl-C or SIGTERM at a step's end, its checkpoint saved and said: nothing more to say."""


class Diverged(TrainingError):
    """The loss went non-finite at `step`. train() sets `history`: the metrics rows logged before it, so that a
    caller that records runs (research/reproduce.py) can keep a diverged run as a result instead of losing it."""

    def __init__(self, message, step):
        super().__init__(message)
        self.step, self.history = step, []


def print_help(text):
    """Print a command's --help; if the reader has gone (`--help | head -1`), end quietly instead of a BrokenPipeError
    traceback."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def explain(e):
    """What the command line says of an exception that ended a run, and its exit code: 2 for settings or files that
    can't be used, 1 for a run that could not go on (TrainingError, a failed write, out of memory). Anything else is
    a bug: raised again, traceback and all."""
    if isinstance(e, (ValueError, FileNotFoundError)):
        return str(e), 2
    if isinstance(e, TrainingError):
        return str(e), 1
    if isinstance(e, OSError):  # a disk that filled up or a folder that vanished while writing metrics or config
        return f"could not write {e.filename or 'a file'}: {e.strerror or e}", 1
    if isinstance(e, RuntimeError) and "memory" in str(e).lower():
        return (f"out of memory ({str(e).strip().splitlines()[0][:100]}); lower batch_size, block_size, n_embd or "
                f"n_layer"), 1
    raise e
