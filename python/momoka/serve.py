"""A query server over a store that follows its commits (``momoka serve``).

``POST /search`` takes a JSON object ``{"query", "k", "budget", "retriever",
"options", "doc_ids", "where"}`` (only ``query`` is required; ``where``: the
metadata filter of :mod:`momoka.methods.filters`) and answers
``{"query", "retriever", "generation", "hits": [{"rank", "doc_id", "start",
"end", "text", "score", "title", "section", "page", "page_end", "spans"}], "ms"}``; ``GET
/health`` answers the store path, its generation, documents and chunks, and
the state of the limits below. Every error is JSON ``{"error": message}`` with
a status: 400 bad input (a body that is not UTF-8 or JSON or is nested too
deeply, numbers out of range, a lone surrogate in the query, a malformed
request line, header or ``Content-Length``, an unknown ``where`` key, and a
retriever the store cannot serve), 401 a missing or wrong bearer token, 404
unknown path, 405 wrong method, 408 a request too slow to arrive, 411 a chunked
body, 413 a body over ``max_body``, 414/431 over-long request or header lines,
503 too many requests waiting or too many connections, 500 anything else (never
a traceback, on the wire or on stderr).

What a client can cost is bounded (:class:`QueryServer`'s ``max_body``,
``read_timeout``, ``idle_timeout``, ``max_connections``, ``workers`` and
``queue``, enforced by the HTTP layer), and so is what the server keeps per
request: each snapshot keeps at most ``max_retrievers`` built retrievers
(one per retriever and ``options``; :attr:`momoka.Index.corpus`'s ``max_retrievers``),
least recently used dropped first. ``token``: a bearer token every request
must send, compared in constant time; required to bind an address that is
not loopback (the CLI takes it from ``--token`` or ``MOMOKA_SERVE_TOKEN``).

Point in time: the server holds one :class:`~momoka.store.store.Store`
generation open as a snapshot (an :class:`~momoka.Index`, leased, see
:mod:`momoka.store._lease`). A background thread checks the manifest every
``poll`` seconds (a ``stat``; the manifest is read only when it changed); on
a new commit it opens the new generation as a new snapshot, reads what the
default retriever needs (one warm-up search), then swaps it in. A request
takes the snapshot current when it starts and runs on it to the end, so an
answer comes from exactly one generation, named in the answer; the old
snapshot is closed (its lease released) when its last request ends. A new
generation that cannot be opened leaves the old one serving and is retried
at the next poll (``/health`` shows the error).

Searches run on a bounded thread pool (``workers`` threads) off the event
loop; at most ``queue`` more requests wait, beyond that the answer is 503.
The HTTP layer is :class:`momoka.llm.server.HTTPServer`.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ._validate import MAX_COUNT, check_float, check_int
from .errors import ConfigError, InputError, MomokaError, StoreCorruptedError, StoreError
from .store._manifest import MANIFEST, read_manifest
from .llm.server import HTTPServer, Request, Response
from .llm.server import MAX_CONNECTIONS as DEFAULT_MAX_CONNECTIONS
from .methods.pipeline import DEFAULT_RETRIEVER, Index

__all__ = ["DEFAULT_PORT", "QueryServer", "is_loopback"]

#: The port ``momoka serve`` listens on unless told.
DEFAULT_PORT = 8765
#: Fields a ``/search`` request may carry.
FIELDS = ("query", "k", "budget", "retriever", "options", "doc_ids", "where")
#: The query the warm-up search of a new snapshot runs (it reads the lazily loaded parts).
WARM_QUERY = "warm up"
#: Default limits on what one client can cost (``momoka serve --max-body``, ``--read-timeout``, ...).
DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_READ_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 10.0
#: Built retrievers a snapshot keeps (one per retriever and options; the least recently used dropped first).
DEFAULT_MAX_RETRIEVERS = 32
#: What a bearer token is made of (RFC 6750's characters), and its shortest length.
TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~+/=-]+")
MIN_TOKEN = 16


class _Snapshot:
    """One open generation and the requests running on it."""

    def __init__(self, index: Index):
        self.index = index
        self.generation = int(index.store.manifest.get("generation") or 0)
        self.documents = len(index.store.documents)
        self.chunks = index.store.n_chunks
        self.refs = 0
        self.retired = False


def _positive(body: dict, key: str) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    return check_int(v, repr(key), minimum=1, maximum=MAX_COUNT, error=InputError)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address of this machine only (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def _check_token(token: str | None, host: str) -> bytes | None:
    if token is None:
        if not is_loopback(host):
            raise ConfigError(f"serving on {host} (not a loopback address) needs a bearer token: give --token "
                              "or set MOMOKA_SERVE_TOKEN (e.g. python -c 'import secrets; "
                              "print(secrets.token_urlsafe())')")
        return None
    if not isinstance(token, str):
        raise ConfigError(f"the bearer token must be text, got {type(token).__name__}")
    if len(token) < MIN_TOKEN or not TOKEN_CHARS.fullmatch(token):
        why = f"got {len(token)}" if len(token) < MIN_TOKEN else "got other characters"
        raise ConfigError(f"the bearer token must be {MIN_TOKEN} or more of A-Z a-z 0-9 - . _ ~ + / = ({why})")
    return token.encode("ascii")


class QueryServer:
    """Serve searches over the store at ``store`` on ``host:port`` (port 0: any free one), following its commits.

    ``retriever``, ``k``, ``budget`` and ``options`` (``{retriever: {key:
    value}}``, as ``-o`` gives them) are the defaults a request may override.
    ``embedder``: the store's embedder object (default: loaded from the model
    registry once, shared by every snapshot). Opening the store and the
    warm-up search happen here, so a store or retriever that cannot serve
    fails before anything listens. :meth:`start` listens;
    :meth:`serve_forever` blocks; :meth:`stop` ends.

    What a client can cost is bounded: ``max_body`` bytes a request body (more
    is 413, answered without reading it), ``read_timeout`` seconds for a
    request's head and again for its body (else 408), ``idle_timeout``
    seconds of silence before a connection is closed, ``max_connections``
    connections at once (one more is 503), ``workers`` + ``queue`` searches
    at once (one more is 503), ``max_retrievers`` retrievers kept built per
    snapshot (one per retriever and options, least recently used dropped).
    ``token``: a bearer token every request must send (``Authorization:
    Bearer TOKEN``, compared in constant time; else 401); required when
    ``host`` is not a loopback address.
    """

    def __init__(self, store: str | os.PathLike, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 retriever: str = DEFAULT_RETRIEVER, k: int | None = None, budget: int | None = None,
                 options: dict[str, dict] | None = None, workers: int = 4, queue: int = 64, poll: float = 0.5,
                 embedder: Any = None, max_body: int = DEFAULT_MAX_BODY, read_timeout: float = DEFAULT_READ_TIMEOUT,
                 idle_timeout: float = DEFAULT_IDLE_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 max_retrievers: int = DEFAULT_MAX_RETRIEVERS, token: str | None = None):
        defaults = {"k": k, "budget": budget}
        for key in defaults:
            _positive(defaults, key)
        workers = check_int(workers, "workers", minimum=1)
        queue = check_int(queue, "queue", minimum=0)
        poll = check_float(poll, "poll", minimum=0, above=True, unit="seconds")
        self.max_retrievers = check_int(max_retrievers, "max_retrievers", minimum=1)
        self._token = _check_token(token, host)
        self._http = HTTPServer(self._handle, host, port, max_body=max_body, read_timeout=read_timeout,
                                idle_timeout=idle_timeout, max_connections=max_connections,
                                error=lambda status, msg: Response(status, {"error": msg}))  # checks the limits
        self.path = Path(store)
        self.retriever, self.k, self.budget = retriever, k, budget
        self.options = {name: dict(v) for name, v in (options or {}).items()}
        self.workers, self.queue, self.poll = workers, queue, poll
        self._embedder = embedder
        self._lock = threading.Lock()
        self._seen: tuple | None = None  # (inode, mtime, size) of the manifest last read
        self._snapshot = self._open()
        self._embedder = self._snapshot.index.corpus.embedder  # loaded once, shared by the snapshots to come
        self.refresh_error: str | None = None
        self.refreshes = 0
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="momoka-search")
        self._pending = 0  # requests admitted and not answered (touched on the event loop only)
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    # ------------------------------------------------------------------ snapshots

    def _manifest_stamp(self) -> tuple | None:
        try:
            st = os.stat(self.path / MANIFEST)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _open(self) -> _Snapshot:
        stamp = self._manifest_stamp()
        ix = Index.open(self.path, embedder=self._embedder, progress=False)
        ix.corpus.max_retrievers = self.max_retrievers
        try:
            snap = _Snapshot(ix)
            if snap.documents:
                self._run(snap, {"query": WARM_QUERY, "k": 1})  # reads BM25 / HNSW / relations now, not in a request
        except BaseException:
            ix.close()
            raise
        self._seen = stamp
        return snap

    def check(self) -> bool:
        """Look for a new commit and swap it in; True when the snapshot changed (the poller calls this)."""
        stamp = self._manifest_stamp()
        if stamp is None or stamp == self._seen:
            return False
        try:
            if int(read_manifest(self.path).get("generation") or 0) == self._snapshot.generation:
                self._seen = stamp
                return False
            snap = self._open()
        except MomokaError as exc:
            self.refresh_error = str(exc)
            raise
        if self._stop.is_set():  # stopped while the new snapshot was opening: nobody would close it
            snap.index.close()
            return False
        with self._lock:
            old, self._snapshot = self._snapshot, snap
            old.retired = True
            close = old.refs == 0
        if close:
            old.index.close()
        self.refresh_error = None
        self.refreshes += 1
        return True

    def _poll(self) -> None:
        reported = None
        while not self._stop.wait(self.poll):
            try:
                self.check()
            except Exception as exc:  # keep serving the old snapshot; say so once per distinct error
                msg = f"{type(exc).__name__}: {exc}" if not isinstance(exc, MomokaError) else str(exc)
                self.refresh_error = msg
                if msg != reported:
                    print(f"momoka: warning: cannot open the store's new commit, still serving generation "
                          f"{self._snapshot.generation}: {msg}", file=sys.stderr, flush=True)
                    reported = msg

    def _acquire(self) -> _Snapshot:
        with self._lock:
            snap = self._snapshot
            snap.refs += 1
            return snap

    def _release(self, snap: _Snapshot) -> None:
        with self._lock:
            snap.refs -= 1
            close = snap.retired and snap.refs == 0
        if close:
            snap.index.close()

    # ------------------------------------------------------------------ requests

    def _run(self, snap: _Snapshot, body: dict) -> dict:
        """One validated search on ``snap`` (raises MomokaError for bad input)."""
        unknown = sorted(set(body) - set(FIELDS))
        if unknown:
            raise InputError(f"unknown field(s) {', '.join(map(repr, unknown))}; a search takes {', '.join(FIELDS)}")
        query = body.get("query")
        if not isinstance(query, str):
            raise InputError(f"'query' must be a string, not {type(query).__name__}")
        retriever = body.get("retriever") or self.retriever
        if not isinstance(retriever, str):
            raise InputError(f"'retriever' must be a string, not {retriever!r}")
        options = body.get("options") or {}
        if not isinstance(options, dict):
            raise InputError(f"'options' must be an object of retriever options, not {options!r}")
        doc_ids = body.get("doc_ids")
        if doc_ids is not None and not (isinstance(doc_ids, str) or (
                isinstance(doc_ids, list) and all(isinstance(d, str) for d in doc_ids))):
            raise InputError("'doc_ids' must be a document id or a list of them")
        k, budget = _positive(body, "k"), _positive(body, "budget")
        if k is None and budget is None:
            k, budget = self.k, self.budget
        options = {**self.options.get(retriever, {}), **options}
        try:  # built (or found in the snapshot's cache) here, so a bad option value is told from a failing search
            snap.index.corpus.retriever(retriever, **options)
        except (TypeError, ValueError, OverflowError) as exc:
            names = ", ".join(sorted(options))
            raise InputError(f"retriever {retriever!r}: a bad value among its options {names[:200]}: "
                             f"{type(exc).__name__}: {exc}") from None
        t0 = time.perf_counter()
        res = snap.index.search(query, k=k, retriever=retriever, budget=budget, doc_ids=doc_ids,
                                where=body.get("where"), **options)
        hits = [{"rank": it.rank, "doc_id": it.doc_id, "start": it.start, "end": it.end, "text": it.text,
                 "score": it.score, "title": it.title, "section": list(it.section), "page": it.page,
                 "page_end": it.page_end, "spans": [list(s) for s in it.spans]} for it in res]
        return {"query": query, "retriever": retriever, "generation": snap.generation, "hits": hits,
                "ms": round((time.perf_counter() - t0) * 1000, 3)}

    def search(self, body: dict) -> dict:
        """Answer one ``/search`` body on the current snapshot (what a request runs, off the event loop)."""
        snap = self._acquire()
        try:
            return self._run(snap, body)
        finally:
            self._release(snap)

    def health(self) -> dict:
        """The ``/health`` answer: the store, the generation served, its documents and chunks, the requests and
        connections open and the limits on them, and the retrievers kept built (``retrievers_cached``, at most
        ``max_retrievers``)."""
        snap = self._snapshot
        http = self._http
        return {"status": "ok", "store": str(self.path), "generation": snap.generation, "documents": snap.documents,
                "chunks": snap.chunks, "retriever": self.retriever, "refreshes": self.refreshes,
                "refresh_error": self.refresh_error, "in_flight": self._pending,
                "retrievers_cached": snap.index.corpus.cached_retrievers, "max_retrievers": self.max_retrievers,
                "connections": http.connections, "max_connections": http.max_connections,
                "max_body": http.max_body, "read_timeout": http.read_timeout, "idle_timeout": http.idle_timeout,
                "refused": dict(http.stats), "auth": self._token is not None}

    def _authorized(self, req: Request) -> Response | None:
        """None when the request may pass (no token set, or the right one); else the 401 to answer."""
        if self._token is None:
            return None
        scheme, _, given = req.headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return Response(401, {"error": "this server needs a bearer token: send Authorization: Bearer TOKEN"},
                            {"WWW-Authenticate": 'Bearer realm="momoka"'})
        if not hmac.compare_digest(given.strip().encode("latin-1"), self._token):  # constant time
            return Response(401, {"error": "wrong bearer token"},
                            {"WWW-Authenticate": 'Bearer realm="momoka", error="invalid_token"'})
        return None

    async def _handle(self, req: Request) -> Response:
        denied = self._authorized(req)
        if denied is not None:
            return denied
        path = req.path.split("?")[0].rstrip("/") or "/"
        routes = {"/search": "POST", "/health": "GET"}
        if path not in routes:
            return Response(404, {"error": f"no route {path}; the server answers POST /search and GET /health"})
        if req.method != routes[path]:
            return Response(405, {"error": f"{path} takes {routes[path]}, not {req.method}"})
        if path == "/health":
            return Response(200, self.health())
        try:
            body = req.json()
        except ValueError as exc:  # not UTF-8, not JSON, nested too deeply
            return Response(400, {"error": str(exc)})
        if not isinstance(body, dict):
            return Response(400, {"error": "the request body must be a JSON object"})
        if self._pending >= self.workers + self.queue:
            return Response(503, {"error": f"server busy: {self._pending} requests in progress; try again"})
        self._pending += 1
        try:
            out = await asyncio.get_running_loop().run_in_executor(self._pool, self.search, body)
            return Response(200, out)
        except (InputError, ConfigError) as exc:
            return Response(400, {"error": str(exc)})
        except StoreCorruptedError as exc:
            return Response(500, {"error": str(exc)})
        except StoreError as exc:  # what this store cannot answer (a retriever without its artifacts)
            return Response(400, {"error": str(exc)})
        except MomokaError as exc:
            return Response(500, {"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - a bug: a 500 with its one-line reason, logged, no traceback
            print(f"momoka: error: /search failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            return Response(500, {"error": f"internal error ({type(exc).__name__}): {exc}"})
        finally:
            self._pending -= 1

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """``http://host:port`` once started."""
        return self._http.url

    def start(self) -> QueryServer:
        """Listen and start following commits; returns self."""
        self._http.start()
        self._poller = threading.Thread(target=self._poll, name="momoka-serve-poll", daemon=True)
        self._poller.start()
        return self

    def stop(self) -> None:
        """Stop listening and following commits, and close the snapshot."""
        self._stop.set()
        self._http.stop()
        if self._poller is not None:
            self._poller.join()  # a check in flight finishes (and closes what it opened) first
        self._pool.shutdown(wait=True)
        self._snapshot.index.close()

    def serve_forever(self) -> None:
        """Start (if needed) and block until interrupted."""
        if self._poller is None:
            self.start()
        try:
            self._http.serve_forever()
        finally:
            self.stop()

    def __enter__(self) -> QueryServer:
        return self.start() if self._poller is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
