"""Shared fixtures. The repository root goes on sys.path so tests import tiedgpt, train and data.prepare
exactly as a student's script in the root would."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from data.prepare import get_encoding  # noqa: E402

# Tiny Shakespeare is never committed: tests read the copy beside the checkout, or one prepared locally.
SHAKESPEARE_CANDIDATES = [
    os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"),
    os.path.join(ROOT, "data", "shakespeare", "input.txt"),
]


def shakespeare_path():
    return next((p for p in SHAKESPEARE_CANDIDATES if os.path.exists(p)), None)


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
