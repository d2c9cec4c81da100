"""MoC and Meta-Chunking (papers/001 and the methods it builds on) as registered components.

* chunker ``ppl`` (:class:`PPLChunker`): perplexity chunking with exact offsets, streamed and cached;
* chunker ``msp`` (:class:`MSPChunker`): margin-sampling chunking;
* chunker ``meta`` (:class:`MetaChunker`): the outline meta-chunker, ``router=True`` for the
  granularity router and its experts; alias ``moc`` has the router on.

Every chunker takes ``size`` as its dynamic-merge target (characters by default)::

    momoka chunk report.md --chunker ppl --size 400
    momoka eval-chunking --data dragonball_finance_en --chunker fixed,ppl,meta --metrics bc,cs,ds --evidence-mode all

The chunk-quality metrics (Boundary Clarity, Chunk Stickiness, Dissimilarity)
live in :mod:`momoka.eval.chunk_quality`.
"""

from __future__ import annotations

from typing import Any

from ...registry import register
from ._common import dynamic_merge, groups_to_spans, sentence_spans
from .meta import CLASS_BOUNDS, CLASS_TARGETS, MetaChunker, MetaChunkStats, sentence_windows
from .msp import MSPChunker, label_ids, msp_boundaries
from .ppl import PPLChunker, PPLChunkStats, ppl_boundaries, reference_truncate

__all__ = [
    "CLASS_BOUNDS",
    "CLASS_TARGETS",
    "MSPChunker",
    "MetaChunkStats",
    "MetaChunker",
    "PPLChunkStats",
    "PPLChunker",
    "dynamic_merge",
    "groups_to_spans",
    "label_ids",
    "msp_boundaries",
    "ppl_boundaries",
    "reference_truncate",
    "sentence_spans",
    "sentence_windows",
]


def _size(options: dict) -> dict:
    if "size" in options:
        if options.get("merge_target") is not None:
            raise ValueError("give size or merge_target, not both")
        options["merge_target"] = options.pop("size")
    return options


@register("chunker", "ppl", summary="Meta-Chunking perplexity chunking (sentence NLL minima; size = merge target)")
def _ppl(**options: Any) -> PPLChunker:
    return PPLChunker(**_size(options))


@register("chunker", "msp", summary="Meta-Chunking margin-sampling chunking (P(2)-P(1); size = merge target)")
def _msp(**options: Any) -> MSPChunker:
    return MSPChunker(**_size(options))


@register("chunker", "meta", summary="MoC meta-chunker: LLM outlines recovered onto the text (size = merge target)")
def _meta(**options: Any) -> MetaChunker:
    return MetaChunker(**_size(options))


@register("chunker", "moc", summary="MoC: granularity router + meta-chunker experts (size = merge target)")
def _moc(**options: Any) -> MetaChunker:
    options.setdefault("router", True)
    return MetaChunker(**_size(options))
