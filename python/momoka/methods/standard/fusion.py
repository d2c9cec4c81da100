"""Fusion of several rankings into one.

* :func:`rrf`: reciprocal rank fusion, optionally weighted per ranking;
* :func:`convex`: a convex combination of per-ranking min-max normalised
  scores (a chunk absent from a ranking scores 0 there), so a ranking whose
  scores are flat (a weak BM25 match) moves the fused order little, while
  plain RRF gives every ranking the same pull whatever its scores;
* :func:`document_prior`: a fused ranking re-scored by how strongly its
  items' documents match (each item's score plus a weight times the best
  score its document has in the ranking).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from ...errors import ConfigError

#: Reciprocal rank fusion constant (Cormack et al.).
RRF_K = 60


def rrf(rankings: Sequence[Sequence[tuple[int, float]]], k: int, rrf_k: int = RRF_K,
        weights: Sequence[float] | None = None) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: ``score(c) = sum over rankings of w_r / (rrf_k + rank)`` (rank from 1).

    ``weights``: one per ranking (default all 1). Ties go to the item ranked
    first earliest (its best rank, then the earlier ranking).
    """
    ws = _weights(rankings, weights)
    score: dict[int, float] = {}
    first: dict[int, tuple[int, int]] = {}
    for r, ranking in enumerate(rankings):
        for rank, (cid, _) in enumerate(ranking, start=1):
            score[cid] = score.get(cid, 0.0) + ws[r] / (rrf_k + rank)
            first.setdefault(cid, (rank, r))
    return _top(score, first, k)


def convex(rankings: Sequence[Sequence[tuple[int, float]]], k: int,
           weights: Sequence[float] | None = None) -> list[tuple[int, float]]:
    """Convex combination of min-max normalised scores: ``score(c) = sum_r w_r * (s_r(c) - min_r) / (max_r - min_r)``.

    Each ranking is normalised over the items it returned (its best item 1,
    its worst 0; a ranking whose scores are all equal gives each of its items
    1); an item a ranking did not return scores 0 there. ``weights`` default
    to equal shares. Ties as in :func:`rrf`.
    """
    ws = _weights(rankings, weights)
    score: dict[int, float] = {}
    first: dict[int, tuple[int, int]] = {}
    for r, ranking in enumerate(rankings):
        if not ranking:
            continue
        vals = [float(s) for _, s in ranking]
        lo, hi = min(vals), max(vals)
        span = hi - lo
        for rank, ((cid, _), v) in enumerate(zip(ranking, vals), start=1):
            norm = (v - lo) / span if span > 0 else 1.0
            score[cid] = score.get(cid, 0.0) + ws[r] * norm
            first.setdefault(cid, (rank, r))
    return _top(score, first, k)


def document_prior(ranking: Sequence[tuple[int, float]], doc_of: Callable[[int], Hashable],
                   weight: float) -> list[tuple[int, float]]:
    """``ranking`` (``(id, score)``, best first) re-scored as ``score(c) + weight * max score of c's document``.

    The document's score is the best score any of its items has in ``ranking`` (document-aware passage
    retrieval: a passage of the document the query is about outranks a slightly closer passage of a
    document it is not about). ``doc_of(id)``: the item's document (any key). Returned best first; ties keep the
    ranking's order. ``weight`` 0 returns the ranking unchanged.
    """
    items = [(cid, float(s)) for cid, s in ranking]
    if weight <= 0 or not items:
        return items
    docs = [doc_of(cid) for cid, _ in items]
    best: dict = {}
    for d, (_, s) in zip(docs, items):
        if d not in best or s > best[d]:
            best[d] = s
    scored = [(cid, s + weight * best[d]) for d, (cid, s) in zip(docs, items)]
    order = sorted(range(len(scored)), key=lambda i: -scored[i][1])  # stable: ties keep their order
    return [scored[i] for i in order]


def _weights(rankings: Sequence, weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * len(rankings)
    ws = [float(w) for w in weights]
    if len(ws) != len(rankings) or any(w < 0 for w in ws):
        raise ConfigError(f"fusion needs one non-negative weight per ranking ({len(rankings)}), got {list(weights)}")
    return ws


def _top(score: dict[int, float], first: dict[int, tuple[int, int]], k: int) -> list[tuple[int, float]]:
    order = sorted(score, key=lambda c: (-score[c], first[c]))
    return [(c, score[c]) for c in order[:k]]
