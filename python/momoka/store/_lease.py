"""Leases on generations: a reader keeps the generation it loaded until it lets go.

Every generation folder holds an empty file ``.lease`` (written by the save
that made it). A reader (any :class:`~momoka.store.store.Store` opened on a
generation) holds a shared ``flock`` on it; the writer deletes an old
generation only after taking an exclusive, non-blocking ``flock`` on the same
file, and skips it (deleting it at a later save) while any reader holds it.
``flock`` locks belong to an open file description, so two stores in one
process lease independently, and the kernel drops them when the process dies:
a killed reader never leaves a stale lease.

A reader that took its lease on a file the writer was deleting (opened before
the unlink, locked after it) sees that the path no longer names its file and
gives the lease up (:class:`FileNotFoundError`, so the caller re-reads the
manifest). Generations written before leases existed get their ``.lease``
file from whoever opens them first; where that cannot be created (a
read-only directory) the reader holds no lease.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

try:  # fcntl is POSIX-only
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

#: Name of the lease file inside each generation folder.
LEASE = ".lease"
_BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)


def write_lease_file(gen_dir: Path) -> None:
    """Create the (empty) lease file of a generation being written."""
    Path(gen_dir, LEASE).touch()


def _open(path: Path) -> int | None:
    """An fd on the lease file, creating it for a generation written before leases; None when impossible."""
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise
    try:
        return os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except FileNotFoundError:
        raise
    except OSError:  # a read-only directory: no lease (nobody can delete the generation there either)
        return None


class Lease:
    """A shared lock on one generation (see the module docstring); :meth:`release` lets it go."""

    def __init__(self, gen_dir: Path, fd: int | None):
        self.gen_dir = gen_dir
        self.fd = fd

    @classmethod
    def take(cls, gen_dir: Path) -> Lease:
        """Lease ``gen_dir``; FileNotFoundError when the generation is gone or being deleted."""
        path = Path(gen_dir) / LEASE
        fd = _open(path)
        if fd is None or fcntl is None:
            return cls(Path(gen_dir), fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, FileNotFoundError) or exc.errno in _BUSY:  # deleted, or being deleted now
                raise FileNotFoundError(errno.ENOENT, "generation is being deleted", str(gen_dir)) from None
            raise
        if not same:
            os.close(fd)
            raise FileNotFoundError(errno.ENOENT, "generation was deleted", str(gen_dir))
        return cls(Path(gen_dir), fd)

    def release(self) -> None:
        """Drop the lease (idempotent)."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)  # closing the last fd of the description drops the flock


def delete_unleased(gen_dir: Path) -> bool:
    """Delete generation ``gen_dir`` unless a reader leases it; True when it was deleted."""
    path = Path(gen_dir) / LEASE
    try:
        fd = _open(path)
    except FileNotFoundError:
        return False
    if fd is not None and fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in _BUSY:
                return False
            raise
    try:
        # renamed away first, under the exclusive lock: a reader arriving now finds no folder (so it cannot
        # create a fresh lease file inside a half-deleted one) and re-reads the manifest; a leftover of a
        # crash here is a ``.tmp-`` name, which the next writer removes
        gone = Path(gen_dir).with_name(f"{Path(gen_dir).name}.tmp-del-{os.getpid()}")
        try:
            os.rename(gen_dir, gone)
        except FileNotFoundError:
            return True
        shutil.rmtree(gone, ignore_errors=True)
    finally:
        if fd is not None:
            os.close(fd)
    return not Path(gen_dir).exists()
