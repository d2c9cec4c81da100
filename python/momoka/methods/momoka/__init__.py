"""Momoka-RAG (papers/000) as registered components.

* chunker ``llm`` (:class:`LLMChunker`, the paper's Figure 3 prompt, recovered onto the source);
* enricher ``title`` (:class:`TitleEnricher`: T_D per document and the ``titled`` vector view);
* relator ``paths`` (:class:`PathRelator` over :class:`MomokaMap`: MCTS semantic paths per chunk);
* retrievers ``mm`` (dense over the ``titled`` view) and ``trail`` / ``momoka``
  (:class:`TrailRetriever`, Algorithm 1).

::

    import momoka
    index = momoka.Index.build(["report.md"], store="my.store", chunker="fixed", size=128,
                               enrich=["title"], relate=["paths"])   # offline: the embedding referee
    for item in index.search("what did the report conclude?", k=5, retriever="trail"):
        print(item.score, item.spans)
"""

from .components import PATHS_RELATION, TITLED_VIEW, PathRelator, TitleEnricher
from .llm_chunking import LLMChunker, LLMChunkStats
from .map import (
    DOC_RECORD_KEY,
    LONG_DOC_REMEDIES,
    PATH_SEPARATOR,
    TITLE_KEY,
    TITLE_SOURCE_KEY,
    MapStats,
    MomokaMap,
    topm_graph,
    window_graph,
)
from .referees import (
    PPL_SECONDS_PER_PAIR,
    REFEREES,
    EmbeddingReferee,
    LLMReferee,
    PerplexityReferee,
    default_referee,
    make_referee,
)
from .title import TITLE_MODES, TitleStats, clean_title, fallback_title, make_titles, with_title
from .trail import Candidate, TrailRetriever, build_candidates, candidate_text

__all__ = [
    "DOC_RECORD_KEY",
    "LONG_DOC_REMEDIES",
    "PATHS_RELATION",
    "PATH_SEPARATOR",
    "PPL_SECONDS_PER_PAIR",
    "REFEREES",
    "TITLED_VIEW",
    "TITLE_KEY",
    "TITLE_MODES",
    "TITLE_SOURCE_KEY",
    "Candidate",
    "EmbeddingReferee",
    "LLMChunkStats",
    "LLMChunker",
    "LLMReferee",
    "MapStats",
    "MomokaMap",
    "PathRelator",
    "PerplexityReferee",
    "TitleEnricher",
    "TitleStats",
    "TrailRetriever",
    "build_candidates",
    "candidate_text",
    "clean_title",
    "default_referee",
    "fallback_title",
    "make_referee",
    "make_titles",
    "topm_graph",
    "window_graph",
    "with_title",
]
