"""The hybrid retriever's query-term coverage step as it was first written: every candidate chunk's indexed
text tokenised in Python on every query (the native path reads the held terms from the postings instead)."""

from __future__ import annotations

from momoka.chunking.context import headed, indexed_text
from momoka.methods.standard.coverage import cover_terms


def cover_by_tokenising(retriever, queries, fused, k):
    """``HybridRetriever._cover`` tokenising each candidate's text: the plain-Python reference."""
    store = retriever.index.store
    bv = store.bm25_view(retriever.bm25.view)
    bm = bv.index
    with_headers = headed(bv.source)
    terms: dict[int, set[str]] = {}
    for f in fused:
        for cid, _ in f:
            if cid not in terms:
                terms[cid] = set(bm.tokenize(indexed_text(store.chunks.get(cid), with_headers)))
    return [cover_terms(f, set(bm.tokenize(q)), terms.__getitem__, bm.term_weight, retriever.coverage, k)
            for q, f in zip(queries, fused)]
