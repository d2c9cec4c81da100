"""MoC's chunk-quality metrics: Boundary Clarity, Chunk Stickiness, Dissimilarity (METHODS 2.1, 2.2).

Computed per document (never across documents) on a causal LM:

* :func:`boundary_clarity` -- for consecutive chunks (d, q):
  ``mean NLL(q | d) / mean NLL(q)`` (``space="log"``, the reference) or the
  ratio of perplexities ``exp(.) / exp(.)`` (``space="ppl"``, paper eq. 1); the
  mean over pairs. Higher: clearer boundaries.
* :func:`chunk_stickiness` -- the graph of chunk pairs whose edge passes ``K``,
  and the entropy ``-sum p_v log2 p_v`` of its degree distribution, on the
  complete graph (all ordered pairs) and the sequence-aware one (the earlier
  chunk is the context of the later). ``edge_rule="reference"`` keeps pairs
  with ``ppl(q|d)/ppl(q) > K`` (the reference code, which reproduces the
  paper's magnitudes); ``"paper"`` keeps ``Edge(q|d) = 1 - ppl(q|d)/ppl(q) > K``
  (the paper's text). They select opposite pairs; every output names the rule.
  The edge is :func:`momoka.models.perplexity.edge_weight`, shared with Momoka's referee.
* :func:`dissimilarity` -- ``1 - cos(emb(q), emb(d))`` for consecutive chunks, mean.

The n^2 conditional passes of CS are batched per context chunk with its KV
cache reused (:func:`momoka.models.perplexity.mean_nll_given`). ``group_chars``
computes CS over runs of consecutive chunks spanning at most that many
characters (the reference's "documents" are meta-chunker windows), mean over runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..methods.moc._common import greedy_runs
from ..models.perplexity import edge_weight, mean_nll_given

__all__ = ["EDGE_RULES", "METRICS", "boundary_clarity", "chunk_stickiness", "dissimilarity",
           "quality_of_chunks", "stickiness_entropy"]

EDGE_RULES = ("reference", "paper")
METRICS = ("bc", "cs", "ds")


def boundary_clarity(lm: Any, chunks: Sequence[str], *, space: str = "log", reuse_kv: bool = True) -> float:
    """Mean BC over consecutive chunk pairs of one document (NaN with fewer than 2 chunks)."""
    if space not in ("log", "ppl"):
        raise ConfigError(f"space must be 'log' or 'ppl', not {space!r}")
    chunks = list(chunks)
    if len(chunks) < 2:
        return float("nan")
    alone = mean_nll_given(lm, None, chunks[1:], reuse_kv=reuse_kv)
    vals = []
    for k in range(len(chunks) - 1):
        a = float(mean_nll_given(lm, chunks[k], [chunks[k + 1]], reuse_kv=reuse_kv)[0])
        b = float(alone[k])
        vals.append(a / b if space == "log" else math.exp(a - b))
    return float(np.mean(vals))


def stickiness_entropy(keep: np.ndarray) -> float:
    """``-sum p_v log2 p_v`` of the degrees of the kept directed edges (``keep[i, j]``; 0 with no edge)."""
    keep = np.asarray(keep, dtype=bool).copy()
    np.fill_diagonal(keep, False)
    deg = keep.sum(axis=0) + keep.sum(axis=1)
    total = deg.sum()
    if total == 0:
        return 0.0
    p = deg[deg > 0] / total
    return float(-(p * np.log2(p)).sum())


def _cond_matrix(lm: Any, chunks: list[str], reuse_kv: bool) -> tuple[np.ndarray, np.ndarray]:
    """(mean NLL of j alone, mean NLL of j given i), one pass per context chunk."""
    n = len(chunks)
    alone = mean_nll_given(lm, None, chunks, reuse_kv=reuse_kv)
    cond = np.full((n, n), np.nan)
    for i in range(n):
        js = [j for j in range(n) if j != i]
        cond[i, js] = mean_nll_given(lm, chunks[i], [chunks[j] for j in js], reuse_kv=reuse_kv)
    return alone, cond


def chunk_stickiness(lm: Any, chunks: Sequence[str], *, K: float = 0.8, edge_rule: str = "reference",
                     reuse_kv: bool = True) -> dict:
    """CS of one group of chunks: ``{"complete": .., "sequential": .., "edge_rule": .., "K": ..}``."""
    if edge_rule not in EDGE_RULES:
        raise ConfigError(f"edge_rule must be one of {', '.join(EDGE_RULES)}, not {edge_rule!r}")
    if not 0 < K < 1 and edge_rule == "paper":
        raise ConfigError(f"K must lie in (0, 1) with the paper's rule, got {K!r}")
    chunks = list(chunks)
    n = len(chunks)
    if n < 2:
        return {"complete": 0.0, "sequential": 0.0, "edge_rule": edge_rule, "K": K}
    alone, cond = _cond_matrix(lm, chunks, reuse_kv)
    edge = edge_weight(np.exp(alone)[None, :], np.exp(cond))  # Edge(q=j | d=i)
    with np.errstate(invalid="ignore"):
        keep = (1.0 - edge > K) if edge_rule == "reference" else (edge > K)
    keep &= ~np.isnan(edge)
    return {"complete": stickiness_entropy(keep), "sequential": stickiness_entropy(np.triu(keep, 1)),
            "edge_rule": edge_rule, "K": K}


def dissimilarity(embedder: Any, chunks: Sequence[str]) -> float:
    """Mean ``1 - cos`` of consecutive chunks' embeddings (NaN with fewer than 2 chunks)."""
    chunks = list(chunks)
    if len(chunks) < 2:
        return float("nan")
    v = np.asarray(embedder.embed(chunks), dtype=np.float64)
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return float(np.mean(1.0 - (v[:-1] * v[1:]).sum(axis=1)))


def quality_of_chunks(text: str, spans: Sequence[tuple[int, int]], *, metrics: Sequence[str] = METRICS,
                      lm: Any = None, embedder: Any = None, K: float = 0.8, edge_rule: str = "reference",
                      space: str = "log", group_chars: int | None = None, reuse_kv: bool = True) -> dict:
    """BC, CS (complete and sequence-aware) and DS of one document's chunks ``text[a:b]``."""
    bad = sorted(set(metrics) - set(METRICS))
    if bad:
        raise ConfigError(f"unknown chunk metric(s) {bad}; choose from {', '.join(METRICS)}")
    chunks = [text[a:b] for a, b in spans]
    out: dict[str, Any] = {"chunks": len(chunks)}
    t0 = time.perf_counter()
    if "bc" in metrics:
        out["bc"] = boundary_clarity(lm, chunks, space=space, reuse_kv=reuse_kv)
    if "cs" in metrics:
        cs = [chunk_stickiness(lm, [chunks[k] for k in g], K=K, edge_rule=edge_rule, reuse_kv=reuse_kv)
              for g in greedy_runs(spans, group_chars)]
        out["cs_complete"] = float(np.mean([c["complete"] for c in cs])) if cs else 0.0
        out["cs_sequential"] = float(np.mean([c["sequential"] for c in cs])) if cs else 0.0
    if "ds" in metrics:
        out["ds"] = dissimilarity(embedder, chunks)
    out["seconds"] = time.perf_counter() - t0
    return out
