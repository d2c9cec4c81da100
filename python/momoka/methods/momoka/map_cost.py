"""The cost model of Momoka-Map: referee calls and tokens expected before a run
(:meth:`~momoka.methods.momoka.map.MomokaMap.estimate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .referees import LLM_REFEREE_REASKS


class MapCostModel:
    """The pre-run estimate of :class:`~momoka.methods.momoka.map.MomokaMap` (part of it)."""

    def estimate(self, documents: Sequence[Any], chunks: Sequence[Sequence[Any]]) -> dict:
        """Pre-run estimate of referee calls and tokens for documents already chunked.

        Pair mode: a root's distinct requests are at most ``min(cands, iterations *
        rollout)`` (``cands``: the other chunks, or the window); the expected count
        under random expansion is ``cands * (1 - exp(-iterations * rollout / cands))``.
        Path mode: at most ``iterations * rollout`` per root (little memoisation).
        Tokens: 4 characters per token plus about 150 tokens of prompt template. With the LLM referee,
        ``llm_calls_max`` bounds the requests: each judgement once, plus ``max_reasks`` re-asks (2) of a
        verdict that is neither 0 nor 1; ``llm_calls_expected`` assumes well-formed verdicts.
        """
        calls_max = calls_exp = 0.0
        tok_exp = 0.0
        n_total = 0
        for cs in chunks:
            n = len(cs)
            n_total += n
            if n <= 1:
                continue
            lens = np.asarray([len(c.text) for c in cs], dtype=np.float64)
            mean_len = float(lens.mean())
            iters = self.iterations
            cands = n - 1
            if n - 1 > self.iterations and self.long_docs == "window" and self.expansion != "topm":
                cands = min(n - 1, 3 * self.window - 1)
            if self.expansion == "topm":
                cands = min(n - 1, self.top_m * (self.path_cap + 1))
            if n - 1 > self.iterations and self.long_docs == "scale":
                iters = min(self.max_iterations, max(iters, math.ceil(self.scale * (n - 1))))
            steps = iters * self.rollout
            if self.reward == "pair":
                per_max = min(cands, steps)
                per_exp = cands * (1 - math.exp(-steps / cands))
                tok = 2 * mean_len / 4 + 150
            else:
                per_max = steps
                per_exp = steps * 0.8
                tok = (1 + self.path_cap / 2) * mean_len / 4 + mean_len / 4 + 150
            calls_max += n * per_max
            calls_exp += n * per_exp
            tok_exp += n * per_exp * tok
        out = {
            "documents": len(documents),
            "chunks": n_total,
            "referee": self.referee_name,
            "referee_calls_max": int(calls_max),
            "referee_calls_expected": int(round(calls_exp)),
            "referee_prompt_tokens_expected": int(round(tok_exp)),
        }
        if out["referee"] == "llm":  # each judgement is one request, plus a re-ask per malformed verdict
            reasks = getattr(getattr(self, "_referee", None), "max_reasks", LLM_REFEREE_REASKS)
            out["llm_calls_expected"] = out["referee_calls_expected"]
            out["llm_calls_max"] = int(calls_max) * (1 + int(reasks))
        return out
