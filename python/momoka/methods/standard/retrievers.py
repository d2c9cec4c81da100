"""Dense, BM25 and hybrid retrieval over a store's views.

Each retriever searches named views of the index's store (``"raw"``: the chunk
texts; an enricher may add others, e.g. Momoka's ``"titled"``) and returns one
:class:`~momoka.methods.base.Result` per query whose items are single chunks.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..._validate import MAX_COUNT, check_choice, check_float, check_int
from ...chunking.headers import HEADED_TEXT, headed, indexed_text
from ...errors import ConfigError, StoreError
from ...store.store import RAW_VIEW
from ..base import Result
from ...registry import register
from .coverage import cover_held, cover_terms, held_terms
from .links import DocumentTitles, TitleTable, link_titles
from .fusion import RRF_K, convex, document_prior, rrf

#: The hybrid retriever's default weight of query-term coverage (:mod:`.coverage`), chosen with the other
#: defaults by the best worst case over the shared sets (docs/results.md).
DEFAULT_COVERAGE = 1.5
#: How many top items of the hybrid ranking have the passages they name by title placed after them (:mod:`.links`;
#: measured in docs/results.md).
DEFAULT_LINKS = 2
#: When a query names two or more documents by title, how many chunks of each (for its part of the query)
#: come first (measured in docs/results.md).
DEFAULT_NAMED_DOCUMENTS = 2
#: The weight of a chunk's document in the hybrid ranking (:func:`.fusion.document_prior`; measured in
#: docs/results.md).
DEFAULT_DOCUMENT_WEIGHT = 0.3



class StoreRetriever:
    """Common part of the retrievers that rank the chunks of an index.

    Subclasses implement :meth:`rank_batch`; this class validates queries and
    ``k``, resolves document filters and turns ``(chunk_id, score)`` rankings
    into :class:`Result` objects.
    """

    name = "store"
    requires: dict = {}

    def __init__(self, index: Any):
        self.index = index

    # ------------------------------------------------------------------ to implement

    def rank_batch(self, queries: list[str], k: int, allowed: list[list[int] | None]) -> list[list[tuple[int, float]]]:
        """Per query, the top ``k`` ``(chunk_id, score)`` among ``allowed`` chunk ids (None: all)."""
        raise NotImplementedError

    def provenance(self) -> dict:
        """What every item of this retriever records about how it was found."""
        return {"retriever": self.name}

    # ------------------------------------------------------------------ API

    def retrieve(self, query: str, k: int = 5, *, doc_ids: Iterable[str] | str | None = None) -> Result:
        """The ``k`` best chunks for ``query``, best first (``doc_ids``: only these documents)."""
        return self.retrieve_batch([query], k, doc_ids=doc_ids)[0]

    def retrieve_batch(self, queries: Sequence[str], k: int = 5, *, doc_ids: Iterable[str] | str | None = None,
                       per_query_doc_ids: Sequence[Any] | None = None) -> list[Result]:
        """:meth:`retrieve` for many queries (query embeddings are computed in one batch).

        ``doc_ids`` filters every query alike; ``per_query_doc_ids`` gives one
        filter per query instead (a doc id, a list of ids, or None).
        """
        queries = self.index.check_queries(queries)
        k = check_k(k)
        filters = self.filters(len(queries), doc_ids, per_query_doc_ids)
        t0 = time.perf_counter()
        ranked = self.rank_batch(queries, k, filters)
        dt = (time.perf_counter() - t0) / max(1, len(queries))
        prov = self.provenance()
        return [self.index.result(q, r, self.name, prov, stats={"seconds": dt}) for q, r in zip(queries, ranked)]

    def filters(self, n: int, doc_ids: Any, per_query: Sequence[Any] | None) -> list[list[int] | None]:
        """Per query, the allowed chunk ids (None: every chunk)."""
        store = self.index.store
        if per_query is not None:
            if doc_ids is not None:
                raise ConfigError("give doc_ids or per_query_doc_ids, not both")
            if len(per_query) != n:
                raise ConfigError("per_query_doc_ids needs one entry per query")
            cache: dict[tuple, list[int]] = {}
            out: list[list[int] | None] = []
            for f in per_query:
                if f is None:
                    out.append(None)
                    continue
                key = (f,) if isinstance(f, str) else tuple(f)
                if key not in cache:
                    cache[key] = store.chunk_ids_of(list(key))
                out.append(cache[key])
            return out
        if doc_ids is None:
            return [None] * n
        allowed = store.chunk_ids_of([doc_ids] if isinstance(doc_ids, str) else list(doc_ids))
        return [allowed] * n


def check_k(k: Any) -> int:
    """``k`` as an int in [1, :data:`~momoka._validate.MAX_COUNT`], or :class:`ConfigError`."""
    return check_int(k, "k", minimum=1, maximum=MAX_COUNT)


class DenseRetriever(StoreRetriever):
    """Cosine top-k over a vector view (HNSW, or exact search within a document filter).

    Args:
        index: the :class:`momoka.Index`.
        view: the vector view searched (default ``"raw"``: chunk texts).
    """

    name = "dense"

    def __init__(self, index: Any, *, view: str = RAW_VIEW):
        super().__init__(index)
        store = index.store
        if not store.has_vector_view(view):
            if view == RAW_VIEW:
                raise StoreError("this index was built without an embedder: use the bm25 retriever")
            raise StoreError(f"the store has no vector view {view!r} (views: {', '.join(store.vector_views) or 'none'}); "
                             "build it with the enricher that makes it")
        self.view = view

    def provenance(self) -> dict:
        return {"retriever": self.name, "view": self.view}

    def rank_batch(self, queries, k, allowed, vecs=None):
        """:meth:`StoreRetriever.rank_batch`; ``vecs``: the queries' vectors when already embedded."""
        if vecs is None:
            vecs = self.index.embed_queries(queries, view=self.view)
        vv = self.index.store.vector_view(self.view)
        return [vv.search(v, k, a) for v, a in zip(vecs, allowed)]


class BM25Retriever(StoreRetriever):
    """Okapi BM25 (native) over a BM25 view; only chunks sharing a term with the query are returned."""

    name = "bm25"

    def __init__(self, index: Any, *, view: str = RAW_VIEW):
        super().__init__(index)
        if not index.store.has_bm25_view(view):
            raise StoreError(f"the store has no BM25 view {view!r} "
                             f"(views: {', '.join(index.store.bm25_views) or 'none'})")
        self.view = view

    def provenance(self) -> dict:
        return {"retriever": self.name, "view": self.view}

    def rank_batch(self, queries, k, allowed):
        bv = self.index.store.bm25_view(self.view)
        return [bv.search(q, k, a) for q, a in zip(queries, allowed)]


#: Fusion rules of the hybrid retriever.
FUSIONS = ("convex", "rrf")


class HybridRetriever(StoreRetriever):
    """Fusion of a dense and a BM25 ranking, each ``depth`` deep (default ``max(50, 4k)``).

    Args:
        index: the :class:`momoka.Index`.
        view, bm25_view: the vector and BM25 views fused (default ``"raw"``).
        fusion: ``"convex"`` (default: ``dense_weight`` x min-max normalised
            cosine + (1 - ``dense_weight``) x normalised BM25) or ``"rrf"``
            (reciprocal rank fusion, weighted by ``dense_weight`` and
            ``1 - dense_weight`` times 2, so 0.5 is plain RRF).
        dense_weight: the dense ranking's share, in [0, 1].
        depth: how deep each ranking is read.
        rrf_k: the RRF constant.
        document_weight: each fused score plus this weight times the best fused score of the chunk's
            document (:func:`~momoka.methods.standard.fusion.document_prior`, before the coverage
            re-rank): a chunk of the document the query is about outranks a slightly closer chunk of
            another; 0 keeps the fused scores.
        coverage: the weight of query-term coverage in a greedy re-rank of the fused ranking
            (:func:`~momoka.methods.standard.coverage.cover_terms`: each next item is the one whose
            normalised score plus ``coverage`` times the share of the query's idf mass it adds to what
            the items before it cover is highest; the terms are the BM25 tokens of each chunk's indexed
            text); 0 keeps the fused order.
        links: how many of the top items have the passages they name by title placed right after them
            (:func:`~momoka.methods.standard.links.link_titles`, after the coverage re-rank; the table
            of titles is built from the stored chunks at the first search); 0 turns it off.
        query_links: with ``links``, the passages the query names by title are also placed right
            after the first item (False: only the items' links).
        named_documents: when the query names two or more documents by their titles ("Compare the
            debt of Acme Corp in 2018 and Beta Ltd in 2020"), each named document's best
            ``named_documents`` chunks for the query with the other titles taken out come first,
            the documents taken in turn (:class:`~momoka.methods.standard.links.DocumentTitles`: a
            title of at least 4 characters with a capital letter; documents sharing a title are named
            together, and the best chunks of any of them come first); 0 turns it off.

    The defaults were chosen by the cross-set evaluation at equal context
    budget in the README ("Baselines and the default pipeline, at equal context budget"). On a store
    without vectors it is BM25 alone (and says so in the provenance).
    """

    name = "hybrid"

    def __init__(self, index: Any, *, view: str = RAW_VIEW, bm25_view: str = RAW_VIEW, fusion: str = "convex",
                 dense_weight: float = 0.6, depth: int | None = None, rrf_k: int = RRF_K,
                 coverage: float = DEFAULT_COVERAGE, links: int = DEFAULT_LINKS, query_links: bool = True,
                 named_documents: int = DEFAULT_NAMED_DOCUMENTS,
                 document_weight: float = DEFAULT_DOCUMENT_WEIGHT):
        super().__init__(index)
        self.document_weight = check_float(document_weight, "hybrid: document_weight", minimum=0)
        self.named_documents = check_int(named_documents, "hybrid: named_documents", minimum=0)
        self._doc_titles: DocumentTitles | None = None
        self.links = check_int(links, "hybrid: links", minimum=0)
        if not isinstance(query_links, bool):
            raise ConfigError(f"hybrid: query_links must be true or false, not {query_links!r}")
        self.query_links = query_links
        self._titles: TitleTable | None = None
        self.coverage = check_float(coverage, "hybrid: coverage", minimum=0)
        check_choice(fusion, "hybrid: fusion", FUSIONS)
        dense_weight = check_float(dense_weight, "hybrid: dense_weight", minimum=0, maximum=1)
        self.bm25 = BM25Retriever(index, view=bm25_view)
        store = index.store
        self.dense = DenseRetriever(index, view=view) if (store.has_vector_view(view) or view != RAW_VIEW) else None
        if depth is not None:
            check_k(depth)
        self.depth, self.rrf_k = depth, int(rrf_k)
        self.fusion, self.dense_weight = fusion, dense_weight

    def provenance(self) -> dict:
        if self.dense is None:
            return {"retriever": self.name, "fused": ["bm25"], "bm25_view": self.bm25.view}
        out = {"retriever": self.name, "fused": ["dense", "bm25"], "view": self.dense.view,
               "bm25_view": self.bm25.view, "fusion": self.fusion, "dense_weight": self.dense_weight,
               "document_weight": self.document_weight, "coverage": self.coverage, "links": self.links,
               "query_links": self.query_links, "named_documents": self.named_documents}
        if self.fusion == "rrf":
            out["rrf_k"] = self.rrf_k
        return out

    def rank_batch(self, queries, k, allowed):
        if self.dense is None:
            return self.bm25.rank_batch(queries, k, allowed)
        parts = self._named_parts(queries, allowed) if self.named_documents > 0 else None
        vecs = sub_vecs = None
        ranks_parts = parts is not None and any(len(ids) > 1 for ids in parts[1])  # (see _named)
        if ranks_parts and getattr(self.index.embedder_for(self.dense.view), "batch_independent", False):
            # one embedding call for the questions and the parts of them that name documents (the vectors
            # are those of separate calls: this embedder's vectors depend on their text alone)
            both = self.index.embed_queries(list(queries) + parts[0], view=self.dense.view)
            vecs, sub_vecs = both[:len(queries)], both[len(queries):]
        ranked = self._rank(queries, k, allowed, vecs)
        return self._named(ranked, k, parts, sub_vecs) if parts else ranked

    def _named_parts(self, queries: list[str], allowed: list) -> tuple[list[str], list[list[int]], list[int]] | None:
        """The sub-queries of the queries that name two or more documents by title, each with its document's
        chunk ids and the index of its query (None when there are none): the query with the other titles
        taken out, ranked within the named document (``named_documents``)."""
        if self._doc_titles is None:
            self._doc_titles = DocumentTitles((d, self.index.title(d)) for d in self.index.store.documents)
        if not len(self._doc_titles):
            return None
        store = self.index.store
        subs: list[str] = []
        sub_allowed: list[list[int]] = []
        owner: list[int] = []
        for i, q in enumerate(queries):
            named = self._doc_titles.mentions(q)
            if len(named) < 2:
                continue
            keep = None if allowed[i] is None else set(allowed[i])
            for title, doc_ids in named:
                ids = store.chunk_ids_of(list(doc_ids))
                if keep is not None:
                    ids = [c for c in ids if c in keep]
                if not ids:
                    continue
                part = q
                for other, _ in named:
                    if other != title:
                        part = part.replace(other, " ")
                subs.append(" ".join(part.split()))
                sub_allowed.append(ids)
                owner.append(i)
        return (subs, sub_allowed, owner) if subs else None

    def _named(self, ranked: list[list[tuple[int, float]]], k: int,
               parts: tuple[list[str], list[list[int]], list[int]], sub_vecs=None) -> list[list[tuple[int, float]]]:
        """Each ranking with, first, the best chunks of each document its query names by title
        (``named_documents``; ``parts`` from :meth:`_named_parts`, ``sub_vecs`` their vectors if embedded)."""
        subs, sub_allowed, owner = parts
        if all(len(ids) == 1 for ids in sub_allowed):
            # every named document is one chunk (a corpus of pages or passages): each part's ranking is that
            # chunk, as ranking it would find, without embedding or ranking the parts
            part_rankings = [[(ids[0], 0.0)] for ids in sub_allowed]
        else:
            part_rankings = self._rank(subs, self.named_documents, sub_allowed, sub_vecs)
        parts_of: dict[int, list[list[tuple[int, float]]]] = {}
        for i, r in zip(owner, part_rankings):
            parts_of.setdefault(i, []).append(r)
        out = list(ranked)
        for i, lists in parts_of.items():
            top = ranked[i][0][1] if ranked[i] else max((r[0][1] for r in lists if r), default=0.0)
            first: list[tuple[int, float]] = []
            seen: set[int] = set()
            for j in range(self.named_documents):
                for r in lists:
                    if j < len(r) and r[j][0] not in seen:
                        first.append((r[j][0], top))
                        seen.add(r[j][0])
            out[i] = (first + [(c, s) for c, s in ranked[i] if c not in seen])[:k]
        return out

    def _rank(self, queries: list[str], k: int, allowed: list, vecs=None) -> list[list[tuple[int, float]]]:
        """Fusion, the document prior, the coverage re-rank and the title links (the ranking before
        ``named_documents``; ``vecs``: the queries' vectors when already embedded)."""
        d = self.depth or max(50, 4 * k)
        dense = self.dense.rank_batch(queries, d, allowed, vecs)
        sparse = self.bm25.rank_batch(queries, d, allowed)
        w = (self.dense_weight, 1.0 - self.dense_weight)
        if self.fusion == "rrf":
            fused = [rrf([a, b], d, self.rrf_k, weights=(2 * w[0], 2 * w[1])) for a, b in zip(dense, sparse)]
        else:
            fused = [convex([a, b], d, weights=w) for a, b in zip(dense, sparse)]
        if self.document_weight > 0:
            doc_of = self.index.store.chunks.column("doc").__getitem__  # the document's code: no id look-up
            fused = [document_prior(f, doc_of, self.document_weight) for f in fused]
        ranked = [f[:k] for f in fused] if self.coverage <= 0 else self._cover(queries, fused, k)
        if self.links <= 0:
            return ranked
        table, chunks = self._title_table(), self.index.store.chunks
        return [link_titles(r, q, table, chunks.text, chunks.doc_id, self.links, k,
                            None if a is None else set(a).__contains__, query_links=self.query_links)
                for q, r, a in zip(queries, ranked, allowed)]

    def _title_table(self) -> TitleTable:
        """The :class:`~momoka.methods.standard.links.TitleTable` of the stored chunks (built once); a title's
        rarity is the BM25 view's document frequency of its rarest term."""
        if self._titles is None:
            store = self.index.store
            bm = store.bm25_view(self.bm25.view).index
            ch = store.chunks

            doc_titles: dict[str, str | None] = {}

            def rows():
                for cid, doc_id, text, meta in ch.scan():
                    if doc_id not in doc_titles:
                        doc_titles[doc_id] = self.index.title(doc_id)
                    yield cid, doc_id, text, meta.get("header"), doc_titles[doc_id]

            def doc_freq(title: str) -> int:
                return min((bm.doc_freq(t) for t in bm.tokenize(title)), default=bm.n_docs)

            self._titles = TitleTable(rows(), doc_freq, bm.n_docs)
        return self._titles

    def _cover(self, queries: list[str], fused: list[list[tuple[int, float]]], k: int) -> list[list[tuple[int, float]]]:
        """:func:`cover_terms` over each fused list, the terms being the BM25 view's tokens of each chunk's
        indexed text and their weights :meth:`~momoka.store.bm25.BM25.term_weight`.

        Which query terms a chunk holds is read from the view's postings (:func:`.coverage.held_terms`), not
        by tokenising its text, when the view indexes exactly the text tokenised here (its source is the chunk
        text or the headed chunk text); the sets, and so the scores, are those of tokenising, to the bit.
        """
        store = self.index.store
        bv = store.bm25_view(self.bm25.view)
        bm = bv.index
        with_headers = headed(bv.source)
        native = (bv.source or {}).get("text") in ("chunk", HEADED_TEXT)
        tokens: dict[int, set[str]] = {}

        def terms_of(cid: int) -> set[str]:
            if cid not in tokens:
                tokens[cid] = set(bm.tokenize(indexed_text(store.chunks.get(cid), with_headers)))
            return tokens[cid]

        out = []
        for q, f in zip(queries, fused):
            query_terms = set(bm.tokenize(q))
            if not native or not f or not query_terms or self.coverage <= 0:
                out.append(cover_terms(f, query_terms, terms_of, bm.term_weight, self.coverage, k))
                continue
            held = held_terms(bm, [cid for cid, _ in f], query_terms, terms_of)
            out.append(cover_held(f, query_terms, held, bm.term_weight, self.coverage, k))
        return out


@register("retriever", "dense", summary="cosine top-k over a vector view (option view=raw)", aliases=("base",),
          needs=lambda o: (f"vectors/{o.get('view', RAW_VIEW)}",))
def _dense(index: Any, **options: Any) -> DenseRetriever:
    return DenseRetriever(index, **options)


@register("retriever", "bm25", summary="native Okapi BM25 over a BM25 view",
          needs=lambda o: (f"bm25/{o.get('view', RAW_VIEW)}",))
def _bm25(index: Any, **options: Any) -> BM25Retriever:
    return BM25Retriever(index, **options)


@register("retriever", "hybrid", summary="fusion of dense and BM25 (the default; options fusion=convex|rrf, "
          "dense_weight, document_weight, coverage, links)", needs=lambda o: (f"bm25/{o.get('bm25_view', RAW_VIEW)}",) + (
              (f"vectors/{o['view']}",) if o.get("view", RAW_VIEW) != RAW_VIEW else ()))
def _hybrid(index: Any, **options: Any) -> HybridRetriever:
    return HybridRetriever(index, **options)

