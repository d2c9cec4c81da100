"""Fixtures of the methods tests: a small deterministic embedder, tiny documents and a store with paths."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest


class WordHashEmbedder:
    """A deterministic bag-of-words embedder (hashed words, L2-normalised), no model files."""

    def __init__(self, dim: int = 64):
        self.dim = dim
        self.model_id = "test/word-hash"
        self.checksum = hashlib.sha256(f"word-hash:{dim}".encode()).hexdigest()

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", t.lower()):
                out[i, int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little") % self.dim] += 1.0
            n = np.linalg.norm(out[i])
            out[i] = out[i] / n if n else out[i]
        return out


PARAS = {
    "orchard": ["Apples grow on trees in the orchard.", "The harvest of apples happens in autumn.",
                "Farmers sell cider at the market.", "Bees pollinate the blossoms in spring."],
    "rocket": ["Rockets burn fuel to reach orbit.", "The engine produces thrust at launch.",
               "Engineers test the engine on a stand."],
}


@pytest.fixture
def word_embedder():
    return WordHashEmbedder()


@pytest.fixture
def tiny_docs():
    from momoka.text import Document

    return [Document.from_text("\n\n".join(ps), title=name.title(), doc_id=name) for name, ps in PARAS.items()]
