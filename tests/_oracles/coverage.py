"""The hybrid retriever's query-term coverage step as it was first written: every candidate chunk's indexed
text tokenised in Python on every query (the native path reads the held terms from the postings instead)."""

from __future__ import annotations

from momoka.chunking.headers import headed, indexed_text
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


def cover_held_loop(ranking, query_terms, held, idf, weight, k):
    """``cover_held`` as it was first written: every remaining item valued in a Python loop at every step
    (its held terms' weights summed in the order of the set ``held[i] - covered``); first best in rank order."""
    items = list(ranking)
    if not items or weight <= 0 or not query_terms:
        return items[:k]
    vals = [float(s) for _, s in items]
    lo, hi = min(vals), max(vals)
    span = hi - lo
    base = [(v - lo) / span if span > 0 else 1.0 for v in vals]
    weights = {t: max(0.0, float(idf(t))) for t in query_terms}
    total = sum(weights.values())
    if total <= 0:
        return items[:k]
    hold = list(held)
    covered: set[str] = set()
    rest = list(range(len(items)))
    out = []
    while rest and len(out) < k:
        best, best_val = -1, float("-inf")
        for i in rest:
            val = base[i] + weight * sum(weights[t] for t in hold[i] - covered) / total
            if val > best_val:
                best, best_val = i, val
        rest.remove(best)
        covered |= hold[best]
        out.append((items[best][0], best_val))
    return out
