"""The ``mcindex`` retriever: top-k' per view, united (MC-indexing §3.3, appendix E.1).

For each view (``raw``, ``keywords``, ``summary`` by default) the chunks are
ranked by that view alone, densely (the raw view's embedder, one query vector
for every view) or by BM25, and the top ``k'`` of each are kept, with
``k' = max(1, round(2k/3))`` unless ``per_view`` fixes it. ``fusion="union"``
(the paper): round-robin over the views by rank (rank 1 of every view in view
order, then rank 2 ...), the first occurrence of a chunk wins, duplicates are
dropped; the union is *not* cut to k (the paper picks k' so that it averages
about k), unless ``truncate=True``. ``fusion="rrf"``: reciprocal rank fusion of
the per-view rankings (each ``depth`` deep), cut to exactly k.

Every result reports, in ``Result.stats``, ``returned`` (the number of chunks
returned), ``per_view`` (k') and ``duplicates`` (per-view hits dropped as
already taken). Each item's provenance names the view that contributed it
first (``view``), its rank there, and every view that found it (``views``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ...errors import ConfigError, StoreError
from ...store.store import RAW_VIEW
from ..base import Item, Result
from ..standard.fusion import RRF_K, rrf
from ..standard.retrievers import StoreRetriever, check_k

__all__ = ["DEFAULT_VIEWS", "MCIndexRetriever", "per_view_k", "round_robin_union"]

DEFAULT_VIEWS = (RAW_VIEW, "keywords", "summary")
BACKENDS = ("dense", "bm25")
FUSIONS = ("union", "rrf")


def per_view_k(k: int) -> int:
    """The paper's k' for a target k: ``max(1, round(2k/3))`` (3 -> 2, 5 -> 3, 10 -> 7)."""
    return max(1, int(round(2 * k / 3)))


def round_robin_union(rankings: Sequence[Sequence[tuple[int, float]]]) -> list[tuple[int, int, int, list[int]]]:
    """Round-robin union of rankings: ``(chunk id, view index, rank, views that found it)``, first occurrence wins."""
    found: dict[int, list[int]] = {}
    for v, ranking in enumerate(rankings):
        for cid, _ in ranking:
            found.setdefault(int(cid), []).append(v)
    out, seen = [], set()
    depth = max((len(r) for r in rankings), default=0)
    for r in range(depth):
        for v, ranking in enumerate(rankings):
            if r < len(ranking):
                cid = int(ranking[r][0])
                if cid not in seen:
                    seen.add(cid)
                    out.append((cid, v, r + 1, found[cid]))
    return out


class MCIndexRetriever(StoreRetriever):
    """Multi-view retrieval over the raw, keyword and summary views (see the module docstring).

    Args:
        index: the :class:`momoka.Index` (built with the ``keywords`` and ``summary`` enrichers).
        backend: ``"dense"`` or ``"bm25"``.
        views: the views united (an ablation drops one, e.g. ``["raw", "summary"]``).
        fusion: ``"union"`` (the paper) or ``"rrf"``.
        per_view: k' for every k (None: :func:`per_view_k`).
        truncate: cut the union to k.
        depth: per-view depth of RRF (default ``max(50, 4k)``).
    """

    name = "mcindex"
    requires = {"enrich": ["keywords", "summary"]}

    def __init__(self, index: Any, *, backend: str = "dense", views: Sequence[str] | str = DEFAULT_VIEWS,
                 fusion: str = "union", per_view: int | None = None, truncate: bool = False,
                 depth: int | None = None, rrf_k: int = RRF_K):
        super().__init__(index)
        if backend not in BACKENDS:
            raise ConfigError(f"mcindex: backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if fusion not in FUSIONS:
            raise ConfigError(f"mcindex: fusion must be one of {', '.join(FUSIONS)}, not {fusion!r}")
        views = [v.strip() for v in views.split(",")] if isinstance(views, str) else list(views)
        if not views or len(set(views)) != len(views):
            raise ConfigError(f"mcindex: views must be distinct view names, got {views!r}")
        store = index.store
        for v in views:
            ok = store.has_vector_view(v) if backend == "dense" else store.has_bm25_view(v)
            if not ok:
                have = store.vector_views if backend == "dense" else store.bm25_views
                raise StoreError(f"mcindex: the store has no {backend} view {v!r} (views: {', '.join(have) or 'none'});"
                                 " build it with --enrich keywords,summary")
        if backend == "dense":
            ids = {store.vector_view(v).info["embedder"]["model_id"] for v in views}
            if len(ids) > 1:
                raise StoreError(f"mcindex: the views were embedded by different models ({', '.join(sorted(ids))})")
        self.per_view = None if per_view is None else check_k(per_view)
        if depth is not None:
            check_k(depth)
        self.backend, self.views, self.fusion = backend, views, fusion
        self.truncate, self.depth, self.rrf_k = bool(truncate), depth, int(rrf_k)

    def provenance(self) -> dict:
        return {"retriever": self.name, "backend": self.backend, "views": list(self.views), "fusion": self.fusion}

    def view_rankings(self, queries: list[str], k: int, allowed: list) -> list[list[list[tuple[int, float]]]]:
        """Per query, per view, the top ``k`` ``(chunk id, score)``."""
        store = self.index.store
        if self.backend == "dense":
            vecs = self.index.embed_queries(queries, view=self.views[0])
            per = [[store.vector_view(v).search(q, k, a) for v in self.views] for q, a in zip(vecs, allowed)]
        else:
            per = [[store.bm25_view(v).search(q, k, a) for v in self.views] for q, a in zip(queries, allowed)]
        return per

    def retrieve_batch(self, queries: Sequence[str], k: int = 5, *, doc_ids: Any = None,
                       per_query_doc_ids: Sequence[Any] | None = None) -> list[Result]:
        """:meth:`retrieve` for many queries; ``Result.stats["returned"]`` is the number of chunks returned."""
        queries = self.index.check_queries(queries)
        k = check_k(k)
        filters = self.filters(len(queries), doc_ids, per_query_doc_ids)
        kp = self.per_view or per_view_k(k)
        depth = (self.depth or max(50, 4 * k)) if self.fusion == "rrf" else kp
        t0 = time.perf_counter()
        per = self.view_rankings(queries, depth, filters)
        dt = (time.perf_counter() - t0) / max(1, len(queries))
        base = self.provenance()
        out = []
        for q, rankings in zip(queries, per):
            items: list[Item] = []
            if self.fusion == "rrf":
                first = {}
                for v, r in enumerate(rankings):
                    for rank, (cid, _) in enumerate(r, start=1):
                        first.setdefault(int(cid), []).append((v, rank))
                for rank, (cid, score) in enumerate(rrf(rankings, k, self.rrf_k), start=1):
                    hits = first[int(cid)]
                    v0, r0 = min(hits, key=lambda h: (h[1], h[0]))
                    prov = {**base, "view": self.views[v0], "view_rank": r0, "found_in": [self.views[v] for v, _ in hits]}
                    items.append(self._item(cid, score, rank, prov))
                dup = 0
            else:
                union = round_robin_union(rankings)
                dup = sum(len(r) for r in rankings) - len(union)
                if self.truncate:
                    union = union[:k]
                for rank, (cid, v, r, found) in enumerate(union, start=1):
                    score = dict(rankings[v])[cid]
                    prov = {**base, "view": self.views[v], "view_rank": r, "found_in": [self.views[x] for x in found]}
                    items.append(self._item(cid, score, rank, prov))
            stats = {"seconds": dt, "returned": len(items), "per_view": kp if self.fusion == "union" else depth,
                     "duplicates": dup}
            out.append(Result(q, tuple(items), self.name, stats))
        return out

    def _item(self, cid: int, score: float, rank: int, prov: dict) -> Item:
        m = self.index.member(cid)
        return Item((m,), float(score), rank, prov, self.index.title(m.doc_id))
