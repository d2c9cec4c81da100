"""Query-term coverage: re-rank a fused ranking so that its top also covers the query terms the first items miss.

A comparison or multi-entity question ("Did A or B pay a larger dividend?") needs evidence about each
thing it names, but a relevance ranking puts every chunk about the better-matched one first. Taking
the query's terms as the aspects to cover (as xQuAD takes sub-queries, with MMR's greedy selection),
:func:`cover_terms` picks the items one at a time, each maximising

    base(c) + weight * sum(idf(t) for t in terms(c) & Q - covered) / sum(idf(t) for t in Q)

where ``base`` is the ranking's score min-max normalised over the list, ``Q`` the query's terms and
``covered`` the terms of the items picked so far. A query whose terms no item holds, or a weight of 0,
leaves the order as it is. The selected values never increase down the list (the gains only shrink),
and they are the items' new scores. The hybrid retriever applies it after fusion (its ``coverage``
option; the terms are the BM25 view's tokens of each chunk's indexed text).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import InputError

__all__ = ["cover_held", "cover_terms", "held_terms"]


def cover_terms(ranking: Sequence[tuple[int, float]], query_terms: set[str], terms_of: Callable[[int], set[str]],
                idf: Callable[[str], float], weight: float, k: int) -> list[tuple[int, float]]:
    """The top ``k`` of ``ranking`` (``(id, score)``, best first) picked greedily for score and new query terms.

    ``terms_of(id)``: the item's terms; ``idf(term)``: a term's weight. Ties go to the item ranked first.
    """
    items = list(ranking)
    if not items or weight <= 0 or not query_terms:
        return items[:k]
    return cover_held(items, query_terms, [terms_of(cid) & query_terms for cid, _ in items], idf, weight, k)


def cover_held(ranking: Sequence[tuple[int, float]], query_terms: set[str], held: Sequence[set[str]],
               idf: Callable[[str], float], weight: float, k: int) -> list[tuple[int, float]]:
    """:func:`cover_terms` given, per item of ``ranking``, the set of query terms it holds (``held[i]``, a
    subset of ``query_terms``) instead of all its terms."""
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
    if len(hold) != len(items):
        raise InputError(f"cover_held: {len(hold)} term sets for {len(items)} items")
    # Each step's values for all items at once (numpy, over a bool matrix of the terms each item holds); the
    # items within a rounding margin of the best are then valued as the plain loop values them (a set's sum in
    # its own order), and the first of them in rank order with the highest value is taken: the picks and their
    # values are those of that loop, to the bit, at a cost per step that does not grow with Python work per item.
    terms = list(weights)
    col = {t: j for j, t in enumerate(terms)}
    has = np.zeros((len(items), len(terms)), dtype=np.float64)
    for i, h in enumerate(hold):
        for t in h:
            has[i, col[t]] = 1.0
    w = np.array([weights[t] for t in terms], dtype=np.float64)
    base_a = np.array(base, dtype=np.float64)
    open_ = np.ones(len(terms), dtype=bool)  # the terms not covered yet
    left = np.ones(len(items), dtype=bool)  # the items not picked yet
    covered: set[str] = set()
    out: list[tuple[int, float]] = []
    while len(out) < min(k, len(items)):
        vals = base_a + weight * (has[:, open_] @ w[open_]) / total
        vals[~left] = -np.inf
        top = float(vals.max())
        best, best_val = -1, float("-inf")
        for i in np.flatnonzero(vals >= top - _MARGIN * (1.0 + abs(top))).tolist():  # rank order: a tie keeps the earlier
            val = base[i] + weight * sum(weights[t] for t in hold[i] - covered) / total
            if val > best_val:
                best, best_val = i, val
        left[best] = False
        covered |= hold[best]
        for t in hold[best]:
            open_[col[t]] = False
        out.append((items[best][0], best_val))
    return out


#: How far below the best numpy value an item may be and still be valued exactly (float64 sums of at most a few
#: dozen idf weights differ by orders of magnitude less).
_MARGIN = 1e-9


def held_terms(bm25: Any, ids: Sequence[int], query_terms: set[str], terms_of: Callable[[int], set[str]]) -> list[set[str]]:
    """Per id, ``terms_of(id) & query_terms`` with the terms read from ``bm25``'s postings
    (:meth:`~momoka.store.bm25.BM25.holds`; its document ids being the ids) instead of ``terms_of``.

    Each set is built as ``&`` builds it, so it iterates in the same order and the sums :func:`cover_held`
    takes over it round alike: ``&`` walks the smaller set, here ``query_terms`` (in its own order) unless
    the document has fewer distinct terms than the query; those documents, and ids not in ``bm25``, are
    given by ``terms_of(id) & query_terms``. ``bm25`` must hold exactly the tokens ``terms_of`` gives.
    """
    ids = list(ids)
    if not ids or not query_terms:
        return [terms_of(cid) & query_terms for cid in ids]
    order = list(query_terms)
    held, n_terms = bm25.holds(ids, order)
    n_q = len(order)
    return [terms_of(cid) & query_terms if n < n_q else {t for t, h in zip(order, row) if h}
            for cid, n, row in zip(ids, n_terms.tolist(), held.tolist())]
