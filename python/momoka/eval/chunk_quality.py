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
cache reused (:func:`momoka.models.perplexity.mean_nll_given`); the context's
own run gives its alone score, and :func:`quality_of_chunks` computes one table
per document that BC and CS share (:func:`conditional_nlls`). ``group_chars``
computes CS over runs of consecutive chunks spanning at most that many
characters (the reference's "documents" are meta-chunker windows), mean over runs.

``windows=N`` samples a long document instead of scoring all of it: N windows of
``group_chars`` characters, evenly spaced from its start to its end
(:func:`window_runs`), the same character windows for every chunker; BC is then the
mean over the consecutive pairs inside the windows and CS the mean over the windows'
runs (the chunks wholly inside each). The cost is then about N runs per document,
whatever its length.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..methods.moc._common import greedy_runs
from ..models.perplexity import edge_weight, mean_nll_given

__all__ = ["EDGE_RULES", "METRICS", "boundary_clarity", "chunk_stickiness", "conditional_nlls", "dissimilarity",
           "quality_of_chunks", "stickiness_entropy", "window_runs"]

EDGE_RULES = ("reference", "paper")
METRICS = ("bc", "cs", "ds")


def conditional_nlls(lm: Any, chunks: Sequence[str], pairs: Sequence[tuple[int, int]], *,
                     reuse_kv: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(alone, cond)``: mean NLL of every chunk after the document start, and ``cond[i, j]`` of chunk
    ``j`` after chunk ``i`` for each requested pair (NaN elsewhere).

    One pass per context chunk ``i`` with its KV cache reused for all its
    targets; with ``reuse_kv`` the same pass also gives chunk ``i``'s ``alone``
    score (the context run *is* the chunk scored after the document start), so
    only chunks that are never a context get a separate (batched) alone pass.
    Without ``reuse_kv`` every pair and every alone score is run in full.
    """
    chunks = list(chunks)
    n = len(chunks)
    alone = np.full(n, np.nan)
    cond = np.full((n, n), np.nan)
    by_ctx: dict[int, list[int]] = {}
    for i, j in pairs:
        if i != j and j not in by_ctx.setdefault(i, []):
            by_ctx[i].append(j)
    for i, js in sorted(by_ctx.items()):
        if reuse_kv:
            alone[i], cond[i, js] = mean_nll_given(lm, chunks[i], [chunks[j] for j in js], with_context=True)
        else:
            cond[i, js] = mean_nll_given(lm, chunks[i], [chunks[j] for j in js], reuse_kv=False)
    targets = {j for _, j in pairs}
    need = [j for j in sorted(targets) if np.isnan(alone[j])]
    if need:
        alone[need] = mean_nll_given(lm, None, [chunks[j] for j in need], reuse_kv=reuse_kv)
    return alone, cond


def _bc(alone: np.ndarray, cond: np.ndarray, space: str, pairs: Sequence[tuple[int, int]] | None = None) -> float:
    """Mean BC over ``pairs`` (context, target) of the table (None: every consecutive pair)."""
    if pairs is None:
        pairs = [(k, k + 1) for k in range(len(alone) - 1)]
    if not pairs:
        return float("nan")
    i, j = np.asarray(pairs).T
    a = cond[i, j]
    b = alone[j]
    return float(np.mean(a / b if space == "log" else np.exp(a - b)))


def window_runs(spans: Sequence[tuple[int, int]], length: int, windows: int, width: int) -> list[list[int]]:
    """Indices of the spans wholly inside each of ``windows`` character windows of ``width``, evenly spaced
    over ``[0, length)`` (the first at 0, the last ending at ``length``; one window when ``length <= width``).

    Windows that overlap may share spans; a window holding no whole span is left out, and so is a
    window holding exactly the spans of the one before it.
    """
    if windows < 1 or width < 1:
        raise ConfigError(f"windows and width must be at least 1, got {windows!r} and {width!r}")
    if length <= width:
        starts = [0]
    else:
        last = length - width
        starts = sorted({round(k * last / (windows - 1)) for k in range(windows)}) if windows > 1 else [0]
    out: list[list[int]] = []
    for s in starts:
        run = [k for k, (a, b) in enumerate(spans) if a >= s and b <= s + width]
        if run and (not out or run != out[-1]):
            out.append(run)
    return out


def _check_space(space: str) -> None:
    if space not in ("log", "ppl"):
        raise ConfigError(f"space must be 'log' or 'ppl', not {space!r}")


def _check_edge(edge_rule: str, K: float) -> None:
    if edge_rule not in EDGE_RULES:
        raise ConfigError(f"edge_rule must be one of {', '.join(EDGE_RULES)}, not {edge_rule!r}")
    if not 0 < K < 1 and edge_rule == "paper":
        raise ConfigError(f"K must lie in (0, 1) with the paper's rule, got {K!r}")


def boundary_clarity(lm: Any, chunks: Sequence[str], *, space: str = "log", reuse_kv: bool = True) -> float:
    """Mean BC over consecutive chunk pairs of one document (NaN with fewer than 2 chunks)."""
    _check_space(space)
    chunks = list(chunks)
    if len(chunks) < 2:
        return float("nan")
    alone, cond = conditional_nlls(lm, chunks, [(k, k + 1) for k in range(len(chunks) - 1)], reuse_kv=reuse_kv)
    return _bc(alone, cond, space)


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


def _cs(alone: np.ndarray, cond: np.ndarray, K: float, edge_rule: str) -> dict:
    """CS of one group from its alone scores and conditional matrix (``cond[i, j]``: j given i)."""
    if len(alone) < 2:
        return {"complete": 0.0, "sequential": 0.0, "edge_rule": edge_rule, "K": K}
    edge = edge_weight(np.exp(alone)[None, :], np.exp(cond))  # Edge(q=j | d=i)
    with np.errstate(invalid="ignore"):
        keep = (1.0 - edge > K) if edge_rule == "reference" else (edge > K)
    keep &= ~np.isnan(edge)
    return {"complete": stickiness_entropy(keep), "sequential": stickiness_entropy(np.triu(keep, 1)),
            "edge_rule": edge_rule, "K": K}


def _all_pairs(idx: Sequence[int]) -> list[tuple[int, int]]:
    return [(i, j) for i in idx for j in idx if i != j]


def chunk_stickiness(lm: Any, chunks: Sequence[str], *, K: float = 0.8, edge_rule: str = "reference",
                     reuse_kv: bool = True) -> dict:
    """CS of one group of chunks: ``{"complete": .., "sequential": .., "edge_rule": .., "K": ..}``."""
    _check_edge(edge_rule, K)
    chunks = list(chunks)
    if len(chunks) < 2:
        return _cs(np.zeros(len(chunks)), np.zeros((len(chunks),) * 2), K, edge_rule)
    alone, cond = conditional_nlls(lm, chunks, _all_pairs(range(len(chunks))), reuse_kv=reuse_kv)
    return _cs(alone, cond, K, edge_rule)


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
                      space: str = "log", group_chars: int | None = None, reuse_kv: bool = True,
                      windows: int | None = None) -> dict:
    """BC, CS (complete and sequence-aware) and DS of one document's chunks ``text[a:b]``.

    With ``windows`` (and ``group_chars``, the window width) BC and CS are computed on that many evenly
    spaced windows of the document (:func:`window_runs`; ``out["windows"]`` says how many held chunks);
    DS stays over the whole document (it needs no LM).
    """
    bad = sorted(set(metrics) - set(METRICS))
    if bad:
        raise ConfigError(f"unknown chunk metric(s) {bad}; choose from {', '.join(METRICS)}")
    if "bc" in metrics:
        _check_space(space)
    if "cs" in metrics:
        _check_edge(edge_rule, K)
    chunks = [text[a:b] for a, b in spans]
    out: dict[str, Any] = {"chunks": len(chunks)}
    t0 = time.perf_counter()
    # one table of conditional NLLs per document: BC's consecutive pairs and CS's in-group pairs share
    # their passes, and every context pass also yields that chunk's alone score
    if windows is not None:
        if not group_chars:
            raise ConfigError("windows needs group_chars, the width of a window in characters")
        runs = window_runs(spans, len(text), windows, group_chars)
        groups = runs if "cs" in metrics else []
        bc_pairs = sorted({(k, k + 1) for g in runs for k in g if k + 1 in g}) if "bc" in metrics else []
        out["windows"] = len(runs)
    else:
        groups = greedy_runs(spans, group_chars) if "cs" in metrics else []
        bc_pairs = [(k, k + 1) for k in range(len(chunks) - 1)] if "bc" in metrics else []
    pairs = list(bc_pairs)
    for g in groups:
        pairs += _all_pairs(g)
    n = len(chunks)
    alone, cond = conditional_nlls(lm, chunks, pairs, reuse_kv=reuse_kv) if pairs else \
        (np.full(n, np.nan), np.full((n, n), np.nan))
    if "bc" in metrics:
        out["bc"] = _bc(alone, cond, space, bc_pairs)
    if "cs" in metrics:
        cs = [_cs(alone[g], cond[np.ix_(g, g)], K, edge_rule) for g in groups]
        out["cs_complete"] = float(np.mean([c["complete"] for c in cs])) if cs else 0.0
        out["cs_sequential"] = float(np.mean([c["sequential"] for c in cs])) if cs else 0.0
    if "ds" in metrics:
        out["ds"] = dissimilarity(embedder, chunks)
    out["seconds"] = time.perf_counter() - t0
    return out
