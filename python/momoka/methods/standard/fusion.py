"""Fusion of several rankings into one."""

from __future__ import annotations

from collections.abc import Sequence

#: Reciprocal rank fusion constant (Cormack et al.).
RRF_K = 60


def rrf(rankings: Sequence[Sequence[tuple[int, float]]], k: int, rrf_k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: ``score(c) = sum over rankings of 1 / (rrf_k + rank)`` (rank from 1).

    Ties go to the item ranked first earliest (its best rank, then the earlier ranking).
    """
    score: dict[int, float] = {}
    first: dict[int, tuple[int, int]] = {}
    for r, ranking in enumerate(rankings):
        for rank, (cid, _) in enumerate(ranking, start=1):
            score[cid] = score.get(cid, 0.0) + 1.0 / (rrf_k + rank)
            first.setdefault(cid, (rank, r))
    order = sorted(score, key=lambda c: (-score[c], first[c]))
    return [(c, score[c]) for c in order[:k]]
