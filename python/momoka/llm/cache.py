"""On-disk response cache: one SQLite file in WAL mode.

Keys are SHA-256 hashes of ``(kind, model[, endpoint], payload)`` where the payload holds
the messages (or prompt) and every parameter that changes the answer. Values
are small JSON objects (:meth:`Completion.to_cache`).

Concurrency: WAL lets any number of readers run beside one writer; every write
is one ``BEGIN IMMEDIATE`` transaction of ``INSERT OR IGNORE`` rows, and a busy
timeout makes a second writer process wait for its turn instead of failing, so
two processes filling the same cache lose nothing and corrupt nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from .. import settings
from ..errors import ConfigError, LLMError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key     TEXT PRIMARY KEY,
    kind    TEXT NOT NULL,
    model   TEXT NOT NULL,
    value   TEXT NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID
"""


def default_cache_path() -> Path:
    """``$MOMOKA_LLM_CACHE``, else ``momoka_home()/llm.sqlite`` (``$MOMOKA_HOME``, else
    ``$XDG_CACHE_HOME/momoka``, else ``~/.cache/momoka``: where the models are too)."""
    env = settings.get_path("MOMOKA_LLM_CACHE")
    if env is not None:
        return env
    from ..models.catalog import momoka_home  # start-up: momoka.models.catalog

    return momoka_home() / "llm.sqlite"


def make_key(kind: str, model: str, payload: Any, endpoint: str | None = None) -> str:
    """Stable hex key of a request: independent of dict key order, sensitive to every value.

    ``endpoint`` (the server's URL) is part of the key when given, so two
    servers serving different models under one name never share answers.
    """
    head = [kind, model] if endpoint is None else [kind, model, endpoint]
    blob = json.dumps(head + [payload], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """A thread-safe handle on one cache file (see the module docstring).

    ``ResponseCache(path)`` creates the file and its directory when missing.
    ``timeout`` is how long a writer waits for another process's transaction.
    """

    def __init__(self, path: str | os.PathLike, *, timeout: float = 60.0):
        self.path = Path(path).expanduser()
        if self.path.exists() and self.path.is_dir():
            raise ConfigError(f"LLM cache path {self.path} is a directory, expected a file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        self._pid = os.getpid()
        try:
            conn = sqlite3.connect(
                str(self.path), timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            # Switching to WAL takes an exclusive lock that SQLite's busy handler does not wait for,
            # so two processes opening a new cache at once can see "database is locked": retry it.
            mode = self._retry_locked(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            if str(mode).lower() != "wal":
                raise ConfigError(f"LLM cache {self.path}: cannot switch to WAL mode (got {mode!r})")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._retry_locked(lambda: conn.execute(_SCHEMA))
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"LLM cache {self.path} is not a usable SQLite file: {exc}") from exc
        return conn

    @property
    def _db(self) -> sqlite3.Connection:
        """The connection of this process (a forked child opens its own)."""
        if self._pid != os.getpid():
            self._conn = self._open()
        return self._conn

    # -- internals ---------------------------------------------------------

    def _retry_locked(self, fn):
        """Run ``fn`` again while SQLite reports a lock, until ``timeout``."""
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                msg = str(exc).lower()
                if ("locked" not in msg and "busy" not in msg) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    # -- reads ---------------------------------------------------------------

    def get_many(self, keys: Iterable[str]) -> dict[str, dict]:
        """Cached values of those ``keys`` that are present."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, dict] = {}
        if not keys:
            return out
        with self._lock:
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                q = f"SELECT key, value FROM responses WHERE key IN ({','.join('?' * len(part))})"
                rows = self._retry_locked(lambda: self._db.execute(q, part).fetchall())
                for k, v in rows:
                    out[k] = json.loads(v)
        return out

    def get(self, key: str) -> dict | None:
        """The cached value of ``key``, or None."""
        return self.get_many([key]).get(key)

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    # -- writes --------------------------------------------------------------

    def put_many(self, rows: Iterable[tuple[str, str, str, Mapping]]) -> int:
        """Store ``(key, kind, model, value)`` rows in one transaction; returns the number written.

        Existing keys are left unchanged (the first answer stored wins).
        """
        now = time.time()
        data = [(k, kind, model, json.dumps(v, ensure_ascii=False, separators=(",", ":")), now) for k, kind, model, v in rows]
        if not data:
            return 0

        def write():
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                cur = db.executemany(
                    "INSERT OR IGNORE INTO responses(key, kind, model, value, created) VALUES (?,?,?,?,?)", data
                )
                n = cur.rowcount
                db.execute("COMMIT")
                return n
            except BaseException:
                db.execute("ROLLBACK")
                raise

        with self._lock:
            try:
                return self._retry_locked(write)
            except sqlite3.DatabaseError as exc:
                raise LLMError(f"cannot write to the LLM cache {self.path}: {exc}") from exc

    def put(self, key: str, kind: str, model: str, value: Mapping) -> None:
        """Store one value (see :meth:`put_many`)."""
        self.put_many([(key, kind, model, value)])

    def delete(self, keys: Iterable[str]) -> int:
        """Delete these keys (absent ones are ignored); returns how many were deleted."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return 0

        def wipe():
            n = 0
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                n += self._db.execute(f"DELETE FROM responses WHERE key IN ({','.join('?' * len(part))})",
                                      part).rowcount
            return n

        with self._lock:
            return self._retry_locked(wipe)

    def clear(self, model: str | None = None) -> int:
        """Delete every entry (or those of one ``model``); returns how many."""
        with self._lock:
            def wipe():
                if model is None:
                    return self._db.execute("DELETE FROM responses").rowcount
                return self._db.execute("DELETE FROM responses WHERE model = ?", (model,)).rowcount

            return self._retry_locked(wipe)

    # -- inspection ------------------------------------------------------------

    def stats(self) -> dict:
        """Entries per (model, kind), total entries and file size in bytes."""
        with self._lock:
            rows = self._db.execute(
                "SELECT model, kind, COUNT(*) FROM responses GROUP BY model, kind ORDER BY model, kind"
            ).fetchall()
        size = sum(p.stat().st_size for p in [self.path, Path(str(self.path) + "-wal")] if p.exists())
        return {
            "path": str(self.path),
            "entries": sum(r[2] for r in rows),
            "bytes": size,
            "by_model": [{"model": m, "kind": k, "entries": n} for m, k, n in rows],
        }

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` answer (``"ok"`` when sound)."""
        with self._lock:
            return self._db.execute("PRAGMA integrity_check").fetchone()[0]

    def close(self) -> None:
        """Close the connection (the file stays)."""
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error:  # pragma: no cover
                pass

    def __enter__(self) -> "ResponseCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"
