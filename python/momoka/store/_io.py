"""File helpers shared by the store and its artifacts: durable writes, checksums, names."""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .._files import sha256_file
from ..errors import ConfigError, InputError

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def check_name(name: object, what: str = "artifact") -> str:
    """``name`` if it is a valid artifact name (letters, digits, ``_``, ``-``, ``.``), else ConfigError."""
    if not isinstance(name, str) or not _NAME.match(name) or name in (".", ".."):
        raise ConfigError(f"{what} name must be letters, digits, '_', '-' or '.', not {name!r}")
    return name


def fsync_dir(path: Path) -> None:
    """fsync a directory (its entries), where the platform allows it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """fsync a file written by someone else (numpy, hnswlib, the native BM25)."""
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and fsync it (``path``'s folder is created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


class _Writes:
    """A file seen by numpy as a plain stream: np.save then writes through Python, whose errors keep their
    errno (ENOSPC: "no space left on device"), instead of ``tofile``'s "N requested and M written"."""

    def __init__(self, f):
        self.write = f.write


def write_npy(path: Path, arr: np.ndarray) -> None:
    """Save one array as ``.npy`` (no pickles) and fsync it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        np.save(_Writes(f), np.ascontiguousarray(arr), allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())


def check_native_write(path: Path) -> None:
    """After a native library wrote ``path`` (its own streams report no errno): OSError ENOSPC when the
    file system has no space left, so a short write is named for what it is."""
    try:
        st = os.statvfs(Path(path).parent)
        # root may write into the blocks reserved for it: only no free block at all is full for root
        full = (st.f_bfree if os.geteuid() == 0 else st.f_bavail) == 0
    except (OSError, AttributeError):  # pragma: no cover - platforms without statvfs
        return
    if full:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def jsonl(rows: Iterable[dict]) -> bytes:
    """Rows as JSON lines (UTF-8)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")



def check_json(value: object, what: str) -> None:
    """:class:`InputError` naming ``what`` unless ``value`` is JSON-serialisable."""
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what} is not JSON-serialisable: {exc}") from None
