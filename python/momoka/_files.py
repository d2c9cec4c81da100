"""File helpers shared by every layer (a leaf module: it imports nothing from momoka)."""

from __future__ import annotations

import hashlib
import os
import stat

#: What :func:`path_kind` calls the things at a path that are not regular files or directories.
_SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISCHR, "a character device"))


def path_kind(path: str | os.PathLike) -> str:
    """What is at ``path``, found without opening it (opening a FIFO blocks until a writer comes).

    ``"file"`` (a regular file, also through a symbolic link), ``"directory"``,
    ``"missing"``, or the words for anything else: ``"a dangling symbolic link"``,
    ``"a FIFO (named pipe)"``, ``"a socket"``, ``"a block device"``,
    ``"a character device"``, ``"a special file"``, ``"not accessible (<reason>)"``.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return "a dangling symbolic link"
        except OSError:
            pass
        return "missing" if isinstance(exc, FileNotFoundError) else f"not accessible ({exc.strerror})"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return next((name for test, name in _SPECIAL if test(mode)), "a special file")


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in blocks of ``chunk`` bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()
