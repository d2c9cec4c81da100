"""Pieces every MoC / Meta-Chunking chunker shares: sentence spans, dynamic merge, building chunks.

Spans are ``(start, end)`` offsets into the document text; sentence spans come
from :attr:`momoka.text.Document.sentences` (trimmed, whitespace between them),
so a chunk made of sentences ``i..j`` is ``text[start_i:end_j]``: exact, never
truncated, and consecutive chunks leave only whitespace between them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._validate import check_int
from ...errors import ConfigError, InputError
from ...text import Document

__all__ = ["MERGE_UNITS", "as_document", "dynamic_merge", "greedy_runs", "groups_to_spans", "length_fn",
           "sentence_spans"]

#: Units :func:`dynamic_merge` measures length in.
MERGE_UNITS = ("chars", "tokens")


def as_document(document: Any):
    """``document`` as a :class:`momoka.text.Document` (a str is read as plain text)."""
    if isinstance(document, str):
        return Document.from_text(document)
    if not isinstance(getattr(document, "text", None), str):
        raise InputError(f"expected a momoka.text.Document (or a str), got {type(document).__name__}")
    return document


def sentence_spans(document: Any) -> list[tuple[int, int]]:
    """The document's sentence spans as a list of ``(start, end)``."""
    return [(int(a), int(b)) for a, b in np.asarray(as_document(document).sentences).tolist()]


def groups_to_spans(sentences: Sequence[tuple[int, int]], ends: Sequence[int]) -> list[tuple[int, int]]:
    """Chunk spans from the indices of the sentences that end a chunk (the last sentence always ends one)."""
    n = len(sentences)
    if n == 0:
        return []
    cut = sorted({int(e) for e in ends if 0 <= int(e) < n - 1}) + [n - 1]
    out, first = [], 0
    for e in cut:
        out.append((sentences[first][0], sentences[e][1]))
        first = e + 1
    return out


def length_fn(text: str, unit: str, encode: Callable[[str], list] | None = None) -> Callable[[int, int], int]:
    """``f(start, end)`` measuring ``text[start:end]`` in ``unit`` (``"tokens"`` needs ``encode``)."""
    if unit == "chars":
        return lambda a, b: b - a
    if unit == "tokens":
        if encode is None:
            raise ConfigError("merge_unit='tokens' needs a tokenizer (the chunker's language model)")
        return lambda a, b: len(encode(text[a:b]))
    raise ConfigError(f"merge_unit must be one of {', '.join(MERGE_UNITS)}, not {unit!r}")


def dynamic_merge(spans: Sequence[tuple[int, int]], target: int | None,
                  length: Callable[[int, int], int]) -> list[tuple[int, int]]:
    """Greedy left-to-right merge of consecutive spans while the merged span stays within ``target``.

    Meta-Chunking's dynamic merge (METHODS 1.4) on exact spans: a merged chunk
    is ``text[first.start:last.end]`` and its length is measured on that span.
    A span longer than ``target`` is never split and never produces an empty
    chunk before it (the reference emits ``""`` when the first chunk is too
    long). ``target=None`` returns the spans unchanged.
    """
    spans = [(int(a), int(b)) for a, b in spans]
    if target is None or not spans:
        return spans
    target = check_int(target, "merge target", minimum=1)
    out = []
    cur = spans[0]
    for s in spans[1:]:
        if length(cur[0], s[1]) <= target:
            cur = (cur[0], s[1])
        else:
            out.append(cur)
            cur = s
    out.append(cur)
    return out


def greedy_runs(spans: Sequence[tuple[int, int]], max_chars: int | None) -> list[list[int]]:
    """Indices of consecutive spans grouped greedily so a run spans at most ``max_chars`` (None: one run).

    A span longer than ``max_chars`` is a run of its own; there is never an empty run.
    """
    if max_chars is None:
        return [list(range(len(spans)))] if len(spans) else []
    out: list[list[int]] = []
    cur: list[int] = []
    for k, (_, b) in enumerate(spans):
        if cur and b - spans[cur[0]][0] > max_chars:
            out.append(cur)
            cur = []
        cur.append(k)
    if cur:
        out.append(cur)
    return out
