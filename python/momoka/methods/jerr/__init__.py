"""JERR (papers/003): synopsis, deduplicated entity DAG and MCTS over it, as registered components.

* relator ``jerr`` -- per document, units of the paper's chunk size, a synopsis
  per unit, entities and directed edges (offline back-end, or the paper's
  App. A prompts through :mod:`momoka.llm`), exact dedup (native Bloom filter +
  trie) and near dedup (SimHash <= 3 bits, union-find, first seen represents),
  the DAG (cycle-closing edges dropped and counted), stored as node tables
  ``jerr.entities`` / ``jerr.edges`` and relations ``jerr.mentions`` / ``jerr.edges``;
* retriever ``jerr`` -- Algorithm 1 as written (one start node, win/visit UCB
  c = sqrt 2, best-child simulation summing keyword matches over depth <= 10,
  100 simulations, the root's children by win/visit), its native-engine
  ``variant=virtual-root``, or ``method=pagerank``; then, with an LLM, the
  look-up prompt picks the units to read again; items are nodes with their
  chunk spans;
* reader ``jerr`` -- nodes + synopsis + chunks to the LLM (App. A.5 / A.6).

::

    ix = momoka.Index.build(["story.txt"], store="s", relate=["jerr"])
    ix.search("who opened the door?", k=5, retriever="jerr")

See ``docs/jerr.md``.
"""

from __future__ import annotations

from .components import BACKENDS, JerrReader, JerrRelator, JerrRetriever
from .extract import UnitExtraction, content_words, extract_offline, make_units
from .graph import EntityGraph, build_dag, build_graph, dedup, normalise, read_graphs
from .search import Alg1Tree, NodeGraph, alg1_search, keywords, mcts_top_nodes, pagerank_top_nodes, start_node

__all__ = [
    "Alg1Tree",
    "BACKENDS",
    "EntityGraph",
    "JerrReader",
    "JerrRelator",
    "JerrRetriever",
    "NodeGraph",
    "UnitExtraction",
    "alg1_search",
    "build_dag",
    "build_graph",
    "content_words",
    "dedup",
    "extract_offline",
    "keywords",
    "make_units",
    "mcts_top_nodes",
    "normalise",
    "pagerank_top_nodes",
    "read_graphs",
    "start_node",
]
