"""Conditional perplexity on a causal LM: MoC's edge ``Edge(q|d)`` and mean NLLs with KV reuse.

One implementation shared by Momoka's perplexity referee
(:class:`momoka.methods.momoka.PerplexityReferee`) and MoC's chunk-quality
metrics (:mod:`momoka.eval.chunk_quality`):

* :func:`edge_weight` -- ``Edge(q|d) = (ppl(q) - ppl(q|d)) / ppl(q)`` (MoC eq. 2);
* :func:`pair_edges` -- the edges of many ``(d, q)`` text pairs (batched, ``ppl(q)`` memoised);
* :func:`mean_nll_given` -- mean NLL (nats) of many targets after one context,
  the context run once and its KV cache reused for all targets
  (:meth:`CausalLM.prefix_batch`); the O(n^2) passes of Boundary Clarity and
  Chunk Stickiness go through it one context chunk at a time.

Scoring convention (as :class:`CausalLM`): a target is scored after the document
start token, then the context's tokens when there is one; context and target are
tokenised separately and their ids concatenated, and every target token is scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["edge_weight", "mean_nll_given", "pair_edges"]


def edge_weight(ppl_q: Any, ppl_q_given_d: Any) -> np.ndarray:
    """``(ppl(q) - ppl(q|d)) / ppl(q)``: how much ``d`` makes ``q`` less perplexing (MoC eq. 2)."""
    base = np.asarray(ppl_q, dtype=np.float64)
    return (base - np.asarray(ppl_q_given_d, dtype=np.float64)) / base


def pair_edges(lm: Any, pairs: Sequence[tuple[str, str]], *, max_chars: int | None = None,
               ppl_cache: dict | None = None) -> np.ndarray:
    """``Edge(q|d)`` of each ``(d, q)`` pair, with ``lm.perplexity`` and ``lm.conditional_perplexities``.

    ``max_chars`` cuts ``d`` to its last and ``q`` to its first ``max_chars``
    characters; ``ppl_cache`` (a dict) memoises ``ppl(q)`` across calls.
    """
    if not pairs:
        return np.zeros(0)
    cut = (lambda t, tail: t) if max_chars is None else \
        (lambda t, tail: t[-max_chars:] if tail else t[:max_chars])
    d = [cut(x, True) for x, _ in pairs]
    q = [cut(y, False) for _, y in pairs]
    memo = ppl_cache if ppl_cache is not None else {}
    need = [t for t in dict.fromkeys(q) if t not in memo]
    if need:
        for t, v in zip(need, np.asarray(lm.perplexity(need), dtype=np.float64)):
            memo[t] = float(v)
    cond = np.asarray(lm.conditional_perplexities(q, d), dtype=np.float64)
    return edge_weight([memo[t] for t in q], cond)


def mean_nll_given(lm: Any, context: str | None, targets: Sequence[str], *, reuse_kv: bool = True,
                   max_context_tokens: int | None = None, batch_tokens: int = 1024,
                   with_context: bool = False):
    """Mean NLL (nats per scored token) of each target after ``context`` (None: after the document start only).

    With ``reuse_kv`` (and an ``lm`` that has ``prefix_batch``) the context runs
    once and all targets are scored in batches on its cached keys and values;
    otherwise every (context, target) pair is run in full
    (``lm.token_logprobs_batch``), which is what the KV reuse saves.
    ``max_context_tokens`` keeps only the last tokens of the context (the rest
    of the window is left to the targets). Empty targets give NaN.

    ``with_context=True`` returns ``(context_nll, nlls)``: ``context_nll`` is the
    context's own mean NLL after the document start, read from the same run of
    the context with KV reuse (NaN when the context was cut, is empty, or
    ``reuse_kv`` is off) -- MoC's "chunk alone" score for free.
    """
    ids = [lm.encode(t) for t in targets]
    cids = lm.encode(context) if context else []
    ctx = [lm.doc_start_id] + cids
    longest = max((len(x) for x in ids), default=0)
    room = lm.window - longest
    if max_context_tokens is not None:
        room = min(room, max_context_tokens + 1)
    if len(ctx) > room:
        ctx = [lm.doc_start_id] + ctx[len(ctx) - room + 1:]
    full = len(cids) > 0 and len(ctx) == len(cids) + 1
    own = float("nan")
    if reuse_kv and hasattr(lm, "prefix_batch"):
        if with_context and full:
            lps, pre = lm.prefix_batch(ctx, ids, batch_tokens=batch_tokens, return_prefix=True)
            own = float(-pre.mean())
        else:
            lps = lm.prefix_batch(ctx, ids, batch_tokens=batch_tokens)
    else:
        lps = lm.score_ids([(ctx, x) for x in ids])
    nlls = np.asarray([float(-lp.mean()) if len(lp) else float("nan") for lp in lps], dtype=np.float64)
    return (own, nlls) if with_context else nlls
