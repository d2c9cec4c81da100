"""File helpers shared by every layer (a leaf module: it imports nothing from momoka)."""

from __future__ import annotations

import hashlib
import os


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in blocks of ``chunk`` bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()
