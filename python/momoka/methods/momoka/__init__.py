"""Momoka-RAG (papers/000): Momoka-Map indexing (titles, LLM chunking, MCTS semantic paths) and the Momoka-Trail retriever.

::

    from momoka.methods.momoka import MomokaMap
    mm = MomokaMap(referee="embedding")             # "ppl" (offline default), "llm", "embedding" or a callable
    index = mm.build(["report.md"], store="my.store", chunker="recursive", size=200)
    paths = mm.paths_for_chunks(chunks)             # P_i per chunk of one document (positions)

Where things live in the store: chunk ``metadata["momoka_path"]`` (positions
within the document), document ``metadata["momoka_title"]`` (T_D),
``metadata["momoka_title_source"]`` and ``metadata["momoka_map"]``; the
settings under ``manifest["extra"]["enrich"]``.
"""

from .llm_chunking import LLMChunker, LLMChunkStats
from .map import (
    DOC_RECORD_KEY,
    LONG_DOC_REMEDIES,
    PATH_KEY,
    PATH_SEPARATOR,
    TITLE_KEY,
    TITLE_SOURCE_KEY,
    MapStats,
    MomokaMap,
    topm_graph,
    window_graph,
)
from .referees import REFEREES, EmbeddingReferee, LLMReferee, PerplexityReferee, make_referee
from .title import TITLE_MODES, TitleStats, clean_title, fallback_title, make_titles, with_title

__all__ = [
    "DOC_RECORD_KEY",
    "LONG_DOC_REMEDIES",
    "PATH_KEY",
    "PATH_SEPARATOR",
    "REFEREES",
    "TITLE_KEY",
    "TITLE_MODES",
    "TITLE_SOURCE_KEY",
    "EmbeddingReferee",
    "LLMChunkStats",
    "LLMChunker",
    "LLMReferee",
    "MapStats",
    "MomokaMap",
    "PerplexityReferee",
    "TitleStats",
    "clean_title",
    "fallback_title",
    "make_referee",
    "make_titles",
    "topm_graph",
    "window_graph",
    "with_title",
]

# Momoka-Trail retriever (query time, Algorithm 1) and the Table 3 ablation.
from .ablation import VARIANTS, ablation_table, run_ablation
from .trail import (
    Candidate,
    StorePaths,
    TrailResult,
    TrailRetriever,
    build_candidates,
    candidate_text,
    distinct_chunk_items,
    store_has_paths,
    write_store_paths,
)

__all__ += [
    "VARIANTS",
    "Candidate",
    "StorePaths",
    "TrailResult",
    "TrailRetriever",
    "ablation_table",
    "build_candidates",
    "candidate_text",
    "distinct_chunk_items",
    "run_ablation",
    "store_has_paths",
    "write_store_paths",
]
