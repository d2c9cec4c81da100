"""The store's manifest file and writer lock (see :mod:`momoka.store.store`)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path

from ..errors import StoreCorruptedError, StoreError, StoreLockedError, StoreMismatchError, StoreVersionError

#: The vector and BM25 views :class:`~momoka.Index` builds over the chunk texts themselves.
RAW_VIEW = "raw"

try:  # fcntl is POSIX-only
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

#: Version of the store layout written by this momoka. Stores with a higher
#: version are refused (:class:`StoreVersionError`); versions 1 and 2 are read and upgraded.
FORMAT_VERSION = 3
FORMAT_NAME = "momoka-store"
MANIFEST = "manifest.json"
LOCK = ".lock"


class _Lock:
    """An exclusive, non-blocking ``flock`` on ``STORE/.lock`` holding our pid."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`StoreLockedError` naming its holder.

        When the holder is this very process, an earlier ``Index``/``Store`` object
        that is no longer reachable may still hold it (stores reference
        themselves through their artifacts, so only the cycle collector frees
        them): one collection runs, then the lock is tried again. A holder that
        is still in use keeps it.
        """
        fd = self._try()
        if fd is None and self._holder() == str(os.getpid()):
            import gc  # start-up: gc

            gc.collect()
            fd = self._try()
        if fd is None:
            holder = self._holder()
            if holder == str(os.getpid()):
                who = "another Index or Store object of this process; close it (index.close(), or build/open " \
                      "it in a with block)"
            else:
                who = (f"process {holder}" if holder else "another process") + "; close it first"
            raise StoreLockedError(f"store {self.path.parent} is open for writing by {who} (readers need no lock)")
        # We hold the lock: any pid left in the file belonged to a dead writer.
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.fd = fd

    def _try(self) -> int | None:
        """An open descriptor holding the flock, or None when someone else holds it."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open store {self.path.parent} for writing: {os_reason(exc)}") from None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return None
            raise
        return fd

    def _holder(self) -> str:
        """The pid the holder wrote into the lock file ('' when unknown)."""
        try:
            return self.path.read_text().strip()
        except OSError:
            return ""

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)
            if fcntl is not None:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = None


def os_reason(exc: OSError) -> str:
    """A one-line reason for an OSError: read-only file system, permission denied, disk full..."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EACCES, errno.EPERM):
        reason = "permission denied"
    elif exc.errno == errno.EROFS:
        reason = "read-only file system"
    elif exc.errno == errno.ENOSPC:
        reason = "no space left on device"
    return f"{reason} ({exc.filename})" if exc.filename else reason


def read_manifest(path: str | os.PathLike) -> dict:
    """Read and validate ``STORE/manifest.json``.

    Raises :class:`StoreError` when ``path`` is not a store,
    :class:`StoreVersionError` when it was written by a newer format.
    """
    root = Path(path)
    if not root.exists():
        raise StoreError(f"no store at {root} (the directory does not exist)")
    if not root.is_dir():
        raise StoreError(f"{root} is not a store (not a directory)")
    mf = root / MANIFEST
    if not mf.is_file():
        raise StoreError(f"{root} is not a momoka store (no {MANIFEST}); build one with `momoka index`")
    try:
        manifest = json.loads(mf.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StoreError(f"{mf} is unreadable or not JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise StoreError(f"{root} is not a momoka store ({MANIFEST} has no format '{FORMAT_NAME}')")
    version = manifest.get("version")
    if not isinstance(version, int):
        raise StoreError(f"{mf}: missing or invalid format version")
    if version > FORMAT_VERSION:
        raise StoreVersionError(
            f"store {root} has format version {version}, newer than this momoka supports ({FORMAT_VERSION}); "
            "upgrade momoka"
        )
    if version < 1:
        raise StoreVersionError(f"store {root} has unknown format version {version}")
    check_manifest(root, manifest)
    return manifest


def manifest_checksum(manifest: dict) -> str:
    """sha256 of the manifest's content without its ``checksum`` field (canonical JSON)."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    blob = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def check_manifest(root: Path, manifest: dict) -> None:
    """StoreCorruptedError when the manifest's recorded checksum differs from its content."""
    want = manifest.get("checksum")
    if want is not None and want != manifest_checksum(manifest):
        p = Path(root) / "manifest.json"
        raise StoreCorruptedError(f"store {root} is corrupted: {p.name} does not match its checksum; "
                                  "restore the store from a backup or rebuild it", p)


def embedder_of(manifest: dict, view: str = RAW_VIEW) -> dict | None:
    """The embedder info of vector view ``view`` recorded in a manifest (either format version)."""
    if int(manifest.get("version") or 0) < 2:
        return manifest.get("embedder") if view == RAW_VIEW else None
    for e in manifest.get("artifacts") or []:
        if e.get("kind") == "vectors" and e.get("name") == view:
            return e.get("embedder")
    return None


def check_embedder(have: dict | None, want: dict, root: Path | str = "") -> None:
    """Raise :class:`StoreMismatchError` unless ``want`` is the embedder ``have`` (a view's, or None: no check)."""
    if have is None:
        return
    if want.get("model_id") != have.get("model_id") or want.get("checksum") != have.get("checksum"):
        raise StoreMismatchError(
            f"store {root} was built with embedder {have.get('model_id')} (sha256 {str(have.get('checksum'))[:12]}), "
            f"not {want.get('model_id')} (sha256 {str(want.get('checksum'))[:12]}); "
            "rebuild the store or use the same model"
        )
