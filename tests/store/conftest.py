"""Fixtures of the index tests: a small deterministic embedder and documents."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest


class HashEmbedder:
    """A deterministic bag-of-words embedder (hashed words, L2-normalised), no model files."""

    def __init__(self, dim: int = 64, model_id: str = "test/hash-embedder", salt: str = ""):
        self.dim = dim
        self.model_id = model_id
        self.salt = salt
        self.checksum = hashlib.sha256(f"{model_id}:{dim}:{salt}".encode()).hexdigest()
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                h = int.from_bytes(hashlib.md5((self.salt + w).encode()).digest()[:4], "little")
                out[i, h % self.dim] += 1.0
            n = np.linalg.norm(out[i])
            out[i] = out[i] / n if n else out[i]
        return out


@pytest.fixture
def embedder():
    return HashEmbedder()


TOPICS = {
    "apples": "Apples grow on trees in orchards. The apple harvest happens in autumn. Farmers pick red apples.",
    "rockets": "Rockets burn fuel to reach orbit. A rocket engine produces thrust. Launch pads hold rockets.",
    "violins": "A violin has four strings. Violinists play with a bow. The violin is used in orchestras.",
    "volcano": "A volcano erupts lava and ash. Magma rises from the mantle. Volcanic islands form in oceans.",
    "chess": "Chess is played on a board of sixty-four squares. The king must be protected. Pawns promote.",
}


@pytest.fixture
def docs():
    out = []
    for name, text in TOPICS.items():
        body = "\n\n".join(f"{text} Paragraph {i} about {name}." for i in range(3))
        out.append({"doc_id": name, "title": name.title(), "text": body})
    return out
