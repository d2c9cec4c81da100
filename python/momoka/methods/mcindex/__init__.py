"""MC-indexing (multi-view content-aware indexing) as registered components.

MC-indexing = the ``sections`` chunker (one chunk per smallest structural
division, References/See also/Notes and a table of contents dropped by a rule
the user can change) + the ``keywords`` and ``summary`` enrichers (each writes
its own vector view and its own BM25 view of the same name; the chunk text is
the ``raw`` view) + the ``mcindex`` retriever (top-k' per view, round-robin
union with duplicates removed, or RRF; dense or BM25).

::

    ix = momoka.Index.build(["paper.md"], store="s", chunker="sections", enrich=["keywords", "summary"])
    ix.search("what data did they use?", k=5, retriever="mcindex")            # dense, union
    ix.search("...", k=5, retriever="mcindex", backend="bm25", fusion="rrf")

Offline by default; ``-o keywords.backend=llm`` (or ``MOMOKA_LLM_BASE_URL``)
makes both views with the paper's prompts through :mod:`momoka.llm`.
"""

from __future__ import annotations

from typing import Any

from ...registry import register
from .retriever import DEFAULT_VIEWS, MCIndexRetriever, per_view_k, round_robin_union
from .sections import DEFAULT_DROP, SectionsChunker, detect_sections
from .views import KeywordsEnricher, SummaryEnricher, ViewEnricher

__all__ = [
    "DEFAULT_DROP",
    "DEFAULT_VIEWS",
    "KeywordsEnricher",
    "MCIndexRetriever",
    "SectionsChunker",
    "SummaryEnricher",
    "ViewEnricher",
    "detect_sections",
    "per_view_k",
    "round_robin_union",
]


@register("chunker", "sections", summary="MC-indexing content-aware chunks: smallest sections, references dropped "
          "(options headings, drop, drop_toc, max_size)")
def _sections(**options: Any) -> SectionsChunker:
    if "size" in options:  # the index's generic size: FLC within sections
        options["max_size"] = options.pop("size")
    return SectionsChunker(**options)


@register("enricher", "keywords", summary="MC-indexing keyword view, vector + BM25 (option backend=auto|offline|llm)",
          produces=("bm25/keywords", "vectors/keywords"))  # the vectors when the index has an embedder
def _keywords(**options: Any) -> KeywordsEnricher:
    return KeywordsEnricher(**options)


@register("enricher", "summary", summary="MC-indexing summary view, vector + BM25 (option backend=auto|offline|llm)",
          produces=("bm25/summary", "vectors/summary"))  # the vectors when the index has an embedder
def _summary(**options: Any) -> SummaryEnricher:
    return SummaryEnricher(**options)


def _mcindex_needs(o: dict) -> tuple[str, ...]:
    views = o.get("views", DEFAULT_VIEWS)
    views = [v.strip() for v in views.split(",")] if isinstance(views, str) else list(views)
    kind = "bm25" if o.get("backend") == "bm25" else "vectors"
    return tuple(f"{kind}/{v}" for v in views)


@register("retriever", "mcindex", summary="MC-indexing: top-k' per view (raw, keywords, summary), round-robin union "
          "(options backend=dense|bm25, fusion=union|rrf, views)", requires={"enrich": ["keywords", "summary"]},
          needs=_mcindex_needs)
def _mcindex(index: Any, **options: Any) -> MCIndexRetriever:
    return MCIndexRetriever(index, **options)
