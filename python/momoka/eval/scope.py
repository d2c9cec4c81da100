"""MC-indexing's evaluation: recall of the answer scope at top k, and chunking error.

Recall of the answer scope (MC-indexing §5.2): the share of the ground-truth
answer scope's *tokens* found in the returned chunks, the overlaps of the
chunks summed ("10 % + 50 % + 0 % = 0.6"). Tokens are the words of the
document text (maximal runs of non-whitespace); a token counts as found when a
returned span overlaps it. The chunks one retriever returns do not overlap each
other, so summing per chunk equals covering by their union, which is what is
computed (a token is never counted twice). With several gold units (merged
overlapping spans) ``mode="all"`` pools their tokens; ``mode="any"`` (the
units are alternatives, e.g. every occurrence of a short answer) takes the best
unit.

Top k = 1.5 (appendix E.1): half the questions are asked with k = 1, the other
half with k = 2 (alternating in question order), and the recall is averaged;
any k with a fractional part of .5 is read the same way.

Chunking error (appendix A, Table 7): the share of gold units that no single
chunk holds whole; units that no chunk touches at all (e.g. inside a dropped
References section) are counted apart as ``lost``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputError
from .metrics import evidence_containment, merge_spans

__all__ = ["chunking_error", "evaluate_scope_recall", "k_schedule", "scope_recall", "word_spans"]

Span = tuple[str, int, int]
_TOKEN = re.compile(r"\S+")


def word_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``(start, end)`` of the tokens (non-whitespace runs) of ``text[start:end]``, as offsets into ``text``."""
    return [(m.start(), m.end()) for m in _TOKEN.finditer(text, start, end)]


def _covered(tokens: list[tuple[int, int]], union: list[tuple[int, int]]) -> int:
    """Tokens overlapping one of the sorted disjoint ``union`` spans."""
    starts = [a for a, _ in union]
    n = 0
    for s, e in tokens:
        i = bisect.bisect_right(starts, e - 1) - 1  # last span starting before the token ends
        if i >= 0 and union[i][1] > s:
            n += 1
    return n


def scope_recall(returned: Sequence[Span], gold: Sequence[Span], texts: Mapping[str, str], mode: str = "all") -> float:
    """Recall of the answer scope for one question (see the module docstring).

    ``returned``: the returned chunks' ``(doc_id, start, end)``; ``gold``: the
    answer scope spans; ``texts``: doc_id -> document text.
    """
    if mode not in ("all", "any"):
        raise InputError(f"mode must be 'all' or 'any', not {mode!r}")
    units = merge_spans(gold)
    if not units:
        raise InputError("a question without an answer scope has no scope recall")
    union = merge_spans(returned)
    per: list[tuple[int, int]] = []
    for d, s, e in units:
        if d not in texts:
            raise InputError(f"no text for document {d!r}")
        toks = word_spans(texts[d], s, e)
        mine = [(a, b) for dd, a, b in union if dd == d]
        per.append((_covered(toks, mine), len(toks)))
    if mode == "all":
        total = sum(n for _, n in per)
        return sum(c for c, _ in per) / total if total else 0.0
    return max((c / n if n else 0.0) for c, n in per)


def k_schedule(k: float, n: int) -> list[int]:
    """The integer k of each of ``n`` questions for a top-k cut-off (1.5: 1, 2, 1, 2 ...)."""
    if float(k).is_integer():
        if k < 1:
            raise InputError(f"k must be at least 1, got {k}")
        return [int(k)] * n
    if k < 1 or (2 * k) % 1 != 0:
        raise InputError(f"a fractional k must end in .5 (half the questions each way), got {k}")
    lo = int(np.floor(k))
    return [lo if i % 2 == 0 else lo + 1 for i in range(n)]


def evaluate_scope_recall(retrieve: Callable[[list[Any], int], Sequence[Sequence[Span]]], questions: Sequence[Any],
                          texts: Mapping[str, str], ks: Sequence[float] = (1.5, 3, 5, 10),
                          mode: str = "all") -> dict:
    """Mean scope recall at each k, and the mean number of chunks returned.

    ``retrieve(questions, k)`` returns, per question, the spans of the chunks
    returned for top ``k`` (an integer). Questions without gold are skipped.
    Returns ``{"n_questions", "recall@K", "returned@K" ...}`` (K as written in ``ks``).
    """
    qs = [q for q in questions if q.gold]
    out: dict[str, Any] = {"n_questions": len(qs)}
    if not qs:
        raise InputError("no question has an answer scope")
    cache: dict[int, list[Sequence[Span]]] = {}
    for k in ks:
        sched = k_schedule(k, len(qs))
        rec, cnt = [], []
        for kk in sorted(set(sched)):
            if kk not in cache:
                cache[kk] = list(retrieve(qs, kk))
        for i, (q, kk) in enumerate(zip(qs, sched)):
            spans = list(cache[kk][i])
            rec.append(scope_recall(spans, q.gold, texts, mode))
            cnt.append(len(spans))
        label = f"{k:g}"
        out[f"recall@{label}"] = float(np.mean(rec))
        out[f"returned@{label}"] = float(np.mean(cnt))
    return out


def chunking_error(chunk_spans: Mapping[str, Sequence[tuple[int, int]]], questions: Sequence[Any]) -> dict:
    """MC-indexing's chunking error: share of gold units not inside one chunk, and the units no chunk touches."""
    c = evidence_containment(chunk_spans, questions)
    lost = 0
    for q in questions:
        for d, s, e in merge_spans(q.gold):
            if not any(a < e and s < b for a, b in chunk_spans.get(d, ())):
                lost += 1
    units = c["evidence_units"]
    return {"units": units, "contained": c["contained"], "lost": lost,
            "error": 1 - c["fraction_contained"] if units else float("nan")}
