"""Momoka-Trail: the query-time retriever of Momoka-RAG (paper section 3.2, Algorithm 1).

For a query, the retriever

1. fetches the ``2K`` best chunks with a first-stage retriever (dense by default);
2. expands each retrieved chunk ``c`` with its Momoka-Map path ``P_c`` into the
   candidates ``c``, ``c + join(P_c)``, every node ``p`` of ``P_c`` and every pair
   ``c + p`` (METHODS.md 3, item 8), deduplicated by their ordered tuple of
   member chunks (the first occurrence is kept);
3. scores every candidate with the reranker in **one** batch and returns the
   top ``K``.

A candidate is a *composite* when it joins more than one chunk. Its reranking
text is the document title ``T_D`` (when known and enabled), then the members'
texts, all separated by ``"\\n\\n"``. ``T_D`` is written once, before the first
member: it is not repeated for the other members (the paper stores it in front
of every chunk, so a plain concatenation would repeat it). The title is used for
scoring only; a result's spans point at the exact document text of each member.

Every result lists the source spans it joins, ``(doc_id, start, end)`` per member
in member order, so evaluation and callers see exactly which text was returned.
Composites longer than the reranker's input limit are scored on a truncated
input; they are counted (``TrailRetriever.truncated``, per call in
``last_stats``).

Paths come from the store built by Momoka-Map (see :class:`StorePaths`) or from
any mapping ``chunk_id -> sequence of chunk ids``. A store without paths raises
:class:`~momoka.errors.PathsMissingError`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import ConfigError, InputError, PathsMissingError

__all__ = [
    "SEPARATOR",
    "Candidate",
    "StorePaths",
    "TrailResult",
    "TrailRetriever",
    "build_candidates",
    "candidate_text",
    "distinct_chunk_items",
    "store_has_paths",
    "write_store_paths",
]

# Store keys and the composite separator are Momoka-Map's: chunk metadata PATH_KEY holds a
# chunk's path as chunk indices within its document, document metadata TITLE_KEY holds T_D.
from .map import PATH_KEY, TITLE_KEY
from .map import PATH_SEPARATOR as SEPARATOR

#: Manifest ``extra`` key under which the path settings are recorded.
MANIFEST_KEY = "momoka_map"


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Candidate:
    """One candidate of the expanded pool: its ordered member chunk ids and how it was formed.

    ``kind`` is ``"chunk"`` (the retrieved chunk alone), ``"full_path"`` (the chunk
    joined with its whole path), ``"node"`` (one path node alone) or ``"pair"``
    (the chunk joined with one node). ``source`` is the retrieved chunk it came from.
    """

    members: tuple[int, ...]
    kind: str
    source: int


def build_candidates(initial: Sequence[int], path_of: Callable[[int], Sequence[int]]) -> list[Candidate]:
    """The expanded candidate pool of Algorithm 1 for the retrieved chunks ``initial`` (in rank order).

    For each retrieved chunk ``c`` with path ``P = path_of(c)`` (the chunk itself and
    repeats are dropped from ``P``), the candidates are, in this order: ``(c,)``,
    ``(c, *P)`` when ``P`` is not empty, then for each node ``p`` of ``P``: ``(p,)`` and
    ``(c, p)``. Candidates with the same ordered member tuple are kept once (the first
    occurrence, so a one-node path gives ``(c, p)`` as ``"full_path"``).
    """
    seen: set[tuple[int, ...]] = set()
    out: list[Candidate] = []

    def push(members: tuple[int, ...], kind: str, src: int) -> None:
        if members not in seen:
            seen.add(members)
            out.append(Candidate(members, kind, src))

    for c in initial:
        c = int(c)
        path = [int(p) for p in dict.fromkeys(int(x) for x in path_of(c)) if int(p) != c]
        push((c,), "chunk", c)
        if path:
            push((c, *path), "full_path", c)
        for p in path:
            push((p,), "node", c)
            push((c, p), "pair", c)
    return out


def candidate_text(texts: Sequence[str], title: str | None = None, sep: str = SEPARATOR) -> str:
    """The reranking text of a candidate: ``title`` (once, when given) then the member texts, joined by ``sep``."""
    parts = ([title] if title and title.strip() else []) + list(texts)
    return sep.join(parts)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class TrailResult:
    """One result of the Trail retriever.

    ``chunk_ids``: the store ids of the members, in order (the retrieved chunk first for
    composites). ``spans``: ``(doc_id, start, end)`` of each member, same order: the
    document text ``doc.text[start:end]`` of each part is exactly what was joined.
    ``text``: the members' texts joined by ``"\\n\\n"`` (no title). ``score``: the
    reranker's score; ``rank`` from 1. ``kind`` and ``source``: see :class:`Candidate`.
    ``truncated``: the reranker saw this candidate cut at its input limit.
    """

    chunk_ids: tuple[int, ...]
    spans: tuple[tuple[str, int, int], ...]
    score: float
    rank: int
    text: str
    kind: str
    source: int
    truncated: bool = False

    @property
    def composite(self) -> bool:
        """True when the result joins more than one chunk."""
        return len(self.chunk_ids) > 1

    @property
    def doc_id(self) -> str:
        """The document of the (first) member."""
        return self.spans[0][0]

    def to_dict(self) -> dict:
        """A JSON-serialisable view."""
        return {"rank": self.rank, "score": self.score, "kind": self.kind, "source": self.source,
                "chunk_ids": list(self.chunk_ids), "spans": [list(s) for s in self.spans],
                "truncated": self.truncated, "text": self.text}


def distinct_chunk_items(results: Sequence[TrailResult] | Sequence[Sequence[int]], k: int | None = None,
                         span_of: Callable[[int], tuple[str, int, int]] | None = None) -> list:
    """The distinct-chunk view of a ranked result list.

    The members of the results are flattened in rank order (members in their order
    inside each result), repeats are dropped (first occurrence kept), and the list is
    cut at ``k`` (None: no cut). Returns chunk ids, or single-span items
    ``[(doc_id, start, end)]`` when ``span_of`` is given (the form
    :func:`momoka.eval.evaluate_retrieval` takes). Metrics on this view count each
    returned chunk once: Precision@k is then the share of relevant chunks among the
    first ``k`` distinct chunks the reader receives.
    """
    seen: dict[int, None] = {}
    for r in results:
        ids = r.chunk_ids if isinstance(r, TrailResult) else r
        for cid in ids:
            seen.setdefault(int(cid), None)
    flat = list(seen)
    if k is not None:
        flat = flat[:k]
    if span_of is None:
        return flat
    return [[span_of(c)] for c in flat]


# --------------------------------------------------------------------------- paths in a store


def store_has_paths(store: Any) -> bool:
    """Whether ``store`` (a :class:`momoka.index.Store`) holds Momoka-Map paths for its chunks."""
    extra = (store.manifest.get("extra") or {}) if isinstance(store.manifest, dict) else {}
    if extra.get(MANIFEST_KEY):
        return True
    enrich = extra.get("enrich")  # written by an index built with MomokaMap as its enrich hook
    if isinstance(enrich, dict) and enrich.get("method") == "momoka-map":
        return True
    if not store.chunks:
        return False
    return all(PATH_KEY in (rec.get("metadata") or {}) for rec in store.chunks.values())


def write_store_paths(store: Any, paths: Mapping[int, Sequence[int]], settings: Mapping[str, Any] | None = None,
                      titles: Mapping[str, str] | None = None) -> None:
    """Record paths (store chunk id -> path as store chunk ids, root excluded) in ``store``.

    Each path is kept in its chunk's record as chunk *indices within the document*
    (``metadata["momoka_path"]``), so it survives compaction of store ids; ``settings``
    (referee, iterations, rollout, C...) go to the manifest. ``titles`` (doc_id -> T_D)
    go to the documents' metadata. Paths must stay inside one document
    (:class:`InputError` otherwise). Call ``store.save()`` to persist.
    """
    index_of = {cid: int(rec["index"]) for cid, rec in store.chunks.items()}
    for cid, path in paths.items():
        rec = store.chunks.get(int(cid))
        if rec is None:
            raise InputError(f"no chunk {cid} in the store")
        out = []
        for p in path:
            prec = store.chunks.get(int(p))
            if prec is None or prec["doc_id"] != rec["doc_id"]:
                raise InputError(f"path of chunk {cid} leaves its document (node {p})")
            out.append(index_of[int(p)])
        rec.setdefault("metadata", {})[PATH_KEY] = out
    for doc_id, title in (titles or {}).items():
        store.documents[doc_id].metadata[TITLE_KEY] = title
    extra = store.manifest.setdefault("extra", {})
    extra[MANIFEST_KEY] = dict(settings or {"paths": True})
    store._dirty = True


class StorePaths:
    """Paths and titles read from a :class:`momoka.index.Store` built by Momoka-Map.

    ``paths(chunk_id)`` gives the path as store chunk ids; ``title(doc_id)`` the
    stored ``T_D`` (falling back to the document's own title when ``fallback_title``).

    Raises:
        PathsMissingError: the store holds no paths (built without Momoka-Map).
    """

    def __init__(self, store: Any, *, fallback_title: bool = True):
        if not store_has_paths(store):
            where = f" at {store.path}" if getattr(store, "path", None) else ""
            raise PathsMissingError(
                f"the store{where} has no Momoka-Map paths: the Trail retriever needs them; "
                "build the index with Momoka-Map paths (or pass paths=... explicitly)"
            )
        self.store = store
        self.fallback_title = fallback_title

    def __call__(self, chunk_id: int) -> list[int]:
        rec = self.store.chunks.get(int(chunk_id))
        if rec is None:
            raise InputError(f"no chunk {chunk_id} in the store")
        idx = (rec.get("metadata") or {}).get(PATH_KEY) or []
        ids = self.store.documents[rec["doc_id"]].chunk_ids
        return [ids[i] for i in idx if 0 <= i < len(ids)]

    def title(self, doc_id: str) -> str | None:
        d = self.store.documents.get(doc_id)
        if d is None:
            return None
        t = d.metadata.get(TITLE_KEY)
        if t is None and self.fallback_title:
            t = d.title
        return t or None


# --------------------------------------------------------------------------- the retriever


def _limit_checker(reranker: Any) -> Callable[[str, list[str]], list[bool]] | None:
    """A function telling which passages exceed the reranker's input limit (None if unknown)."""
    tok = getattr(reranker, "tokenizer", None)
    max_len = getattr(reranker, "max_length", None)
    pair = tok is not None
    if tok is None:
        emb = getattr(reranker, "embedder", None)
        tok = getattr(emb, "tokenizer", None)
        max_len = getattr(emb, "max_length", None)
    if tok is not None and max_len:

        def check(query: str, texts: list[str]) -> list[bool]:
            if not texts:
                return []
            tok.no_truncation()
            if pair:
                encs = tok.encode_batch([(query, t) for t in texts], add_special_tokens=True)
            else:
                encs = tok.encode_batch(texts, add_special_tokens=True)
            return [len(e.ids) > max_len for e in encs]

        return check
    max_chars = getattr(reranker, "max_passage_chars", None)
    if max_chars:
        return lambda query, texts: [len(t) > max_chars for t in texts]
    return None


class TrailRetriever:
    """Momoka-Trail retriever (Algorithm 1) over a :class:`momoka.index.Index`.

    Args:
        index: the index (its store gives chunks, titles and, by default, paths).
        reranker: anything with ``score(query, passages) -> array`` (a
            :mod:`momoka.models` reranker); default: cosine with the index's embedder.
        retriever: first stage: ``"dense"`` (default), ``"bm25"``, ``"hybrid"``, or a
            callable ``(query, n) -> ranked chunk ids or Hits``.
        paths: ``chunk_id -> path (chunk ids)`` mapping or callable; default: the
            store's Momoka-Map paths (:class:`StorePaths`).
        titles: prepend ``T_D`` for reranking (True, default), or not (False), or a
            mapping ``doc_id -> title``.
        expand: factor of the first stage depth (``expand * k``; the paper's 2).

    Raises:
        PathsMissingError: the store has no paths and none were given.
    """

    def __init__(self, index: Any, *, reranker: Any = None, retriever: str | Callable = "dense",
                 paths: Mapping[int, Sequence[int]] | Callable[[int], Sequence[int]] | None = None,
                 titles: bool | Mapping[str, str] = True, expand: int = 2, sep: str = SEPARATOR):
        self.index = index
        self.store = index.store
        if paths is None:
            sp = StorePaths(self.store)
            self._path_of: Callable[[int], Sequence[int]] = sp
            self._stored = sp
        else:
            self._stored = None
            if callable(paths):
                self._path_of = paths
            else:
                mp = {int(k): list(v) for k, v in paths.items()}
                self._path_of = lambda c: mp.get(int(c), [])
        if isinstance(retriever, str) and retriever not in ("dense", "bm25", "hybrid"):
            raise ConfigError(f"retriever must be dense, bm25, hybrid or a callable, not {retriever!r}")
        self.retriever = retriever
        if isinstance(expand, bool) or not isinstance(expand, int) or expand < 1:
            raise ConfigError(f"expand must be a positive integer, got {expand!r}")
        self.expand = expand
        self.sep = sep
        self.titles = titles
        self._reranker = reranker
        self._checker = None
        self.truncated = 0  # composites truncated by the reranker, all calls
        self.last_stats: dict[str, Any] = {}

    @property
    def reranker(self):
        """The reranker (default: cosine similarity with the index's embedder)."""
        if self._reranker is None:
            from ...models import CosineReranker

            emb = self.index.embedder
            if emb is None:
                raise ConfigError("this index has no embedder: pass a reranker to the Trail retriever")
            self._reranker = CosineReranker(emb)
        return self._reranker

    def title(self, doc_id: str) -> str | None:
        """The title ``T_D`` used for reranking chunks of ``doc_id`` (None when titles are off)."""
        if self.titles is False:
            return None
        if isinstance(self.titles, Mapping):
            return self.titles.get(doc_id)
        if self._stored is not None:
            return self._stored.title(doc_id)
        d = self.store.documents.get(doc_id)
        if d is None:
            return None
        return d.metadata.get(TITLE_KEY) or d.title or None

    def path(self, chunk_id: int) -> list[int]:
        """The stored path of a chunk (store chunk ids, root excluded)."""
        return [int(p) for p in self._path_of(int(chunk_id))]

    # ------------------------------------------------------------------ first stage

    def _initial(self, queries: list[str], n: int, doc_ids: Iterable[str] | None) -> list[list[int]]:
        if callable(self.retriever):
            out = []
            for q in queries:
                got = self.retriever(q, n)
                out.append([int(getattr(h, "chunk_id", h)) for h in list(got)[:n]])
            return out
        hits = self.index.search_batch(queries, k=n, method=self.retriever, doc_ids=doc_ids)
        return [[h.chunk_id for h in hs] for hs in hits]

    # ------------------------------------------------------------------ query

    def retrieve(self, query: str, k: int = 5, *, doc_ids: Iterable[str] | None = None) -> list[TrailResult]:
        """The ``k`` best candidates for ``query`` (see the module doc), best first."""
        return self.retrieve_batch([query], k, doc_ids=doc_ids)[0]

    def retrieve_batch(self, queries: Sequence[str], k: int = 5, *,
                       doc_ids: Iterable[str] | None = None) -> list[list[TrailResult]]:
        """:meth:`retrieve` for many queries (the first stage runs as one batch).

        ``last_stats`` then holds per-call totals: ``candidates``, ``composites``,
        ``truncated`` (composites over the reranker's limit) and ``seconds``.
        """
        if isinstance(queries, str):
            raise InputError("retrieve_batch takes a list of queries; use retrieve() for one")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        queries = list(queries)
        for q in queries:
            if not isinstance(q, str):
                raise InputError(f"query must be str, got {type(q).__name__}")
        if doc_ids is not None and not isinstance(doc_ids, str):
            doc_ids = list(doc_ids)
        t0 = time.perf_counter()
        initial = self._initial(queries, self.expand * k, doc_ids)
        reranker = self.reranker
        if self._checker is None:
            self._checker = _limit_checker(reranker) or (lambda q, ts: [False] * len(ts))
        stats = {"queries": len(queries), "candidates": 0, "composites": 0, "truncated": 0}
        out: list[list[TrailResult]] = []
        for q, init in zip(queries, initial):
            cands = build_candidates(init, self.path)
            recs = [[self.store.chunks[c] for c in cand.members] for cand in cands]
            texts = [candidate_text([r["text"] for r in rs], self.title(rs[0]["doc_id"]), self.sep) for rs in recs]
            with warnings.catch_warnings():  # truncation is counted here, per composite
                warnings.filterwarnings("ignore", message=".*truncat")
                scores = np.asarray(reranker.score(q, texts), dtype=np.float64) if texts else np.zeros(0)
            comp = [i for i, c in enumerate(cands) if len(c.members) > 1]
            over = self._checker(q, [texts[i] for i in comp])
            trunc = {i for i, o in zip(comp, over) if o}
            stats["candidates"] += len(cands)
            stats["composites"] += len(comp)
            stats["truncated"] += len(trunc)
            order = sorted(range(len(cands)), key=lambda i: (-scores[i], i))[:k]
            res = []
            for rank, i in enumerate(order, 1):
                rs = recs[i]
                res.append(TrailResult(
                    chunk_ids=cands[i].members,
                    spans=tuple((r["doc_id"], int(r["start"]), int(r["end"])) for r in rs),
                    score=float(scores[i]), rank=rank, text=self.sep.join(r["text"] for r in rs),
                    kind=cands[i].kind, source=cands[i].source, truncated=i in trunc))
            out.append(res)
        self.truncated += stats["truncated"]
        stats["seconds"] = time.perf_counter() - t0
        self.last_stats = stats
        return out
