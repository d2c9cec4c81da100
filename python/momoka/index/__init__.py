"""Deprecated: ``momoka.index`` is :mod:`momoka.store` (this alias goes in the next release)."""

from .._deprecated import alias

alias("momoka.index", "momoka.store", {m: m for m in (
    "artifact", "bm25", "bm25_view", "chunk_table", "delta", "documents", "node_table", "relations", "segments",
    "store", "vectors", "_io", "_lease", "_manifest", "_merger", "_v1", "_v2", "_verify")} | {"_registry": "_kinds"})
