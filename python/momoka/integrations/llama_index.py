"""LlamaIndex retriever over any registered momoka retriever (extra ``momoka[llama-index]``).

>>> from momoka.integrations.llama_index import MomokaRetriever
>>> from llama_index.core.query_engine import RetrieverQueryEngine
>>> engine = RetrieverQueryEngine.from_args(MomokaRetriever("my.store", retriever="hybrid", k=5), llm=llm)
>>> response = engine.query("what did the report conclude?")
>>> [(n.node.metadata["doc_id"], n.node.start_char_idx, n.node.end_char_idx) for n in response.source_nodes]

Each ``NodeWithScore`` holds a ``TextNode`` with the item's text, momoka's
score, ``start_char_idx`` / ``end_char_idx`` set to the exact span in the
source document, a SOURCE relationship to the document id, and the metadata
of :func:`momoka.integrations._common.item_metadata`, plus, for a PDF
passage, ``page_label`` and ``page_end_label``: the 1-based page numbers as
strings, as LlamaIndex's PDF readers label pages (a document without pages
has neither key). Only ``doc_id``, ``title``, ``section`` and ``page_label``
are shown to the LLM. ``where`` filters the search on metadata
(:mod:`momoka.methods.filters`). ``aretrieve`` runs the search
in a worker thread, so the event loop is never blocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .._extras import require

require("llama_index.core", "llama-index", "momoka.integrations.llama_index", package="llama-index-core")

from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode  # noqa: E402

from ..methods.pipeline import DEFAULT_RETRIEVER  # noqa: E402
from . import _common  # noqa: E402

__all__ = ["MomokaRetriever"]

_SHOWN_TO_LLM = ("doc_id", "title", "section", "page_label")


class MomokaRetriever(BaseRetriever):
    """A LlamaIndex ``BaseRetriever`` returning momoka's ranked items as ``NodeWithScore``\\ s.

    ``index`` (a :class:`momoka.Index` or a store path), ``retriever`` (a
    registered name), ``k``, ``options`` (the retriever's), ``doc_ids`` and
    ``where`` (filters) are those of the LangChain adapter,
    :class:`momoka.integrations.langchain.MomokaRetriever`; ``kwargs`` are
    LlamaIndex's own (``callback_manager``, ``verbose`` ...).
    """

    def __init__(self, index: Any, *, retriever: str = DEFAULT_RETRIEVER, k: int = 5, options: dict | None = None,
                 doc_ids: Sequence[str] | None = None, where: dict | None = None, **kwargs: Any) -> None:
        self.index = _common.open_index(index)
        self.retriever = retriever
        self.k = k
        self.options = dict(options or {})
        self.doc_ids = list(doc_ids) if doc_ids is not None else None
        self.where = where
        _common.prepare(self.index, retriever, k, self.options, where)
        super().__init__(**kwargs)

    def _nodes(self, query: str) -> list[NodeWithScore]:
        result = _common.search(self.index, query, self.k, self.retriever, self.doc_ids, self.options, self.where)
        out = []
        for item in result:
            meta = {**_common.item_metadata(item, self.retriever), **_common.llama_index_pages(item)}
            hidden = [key for key in meta if key not in _SHOWN_TO_LLM]
            node = TextNode(id_=_common.item_id(item), text=item.text, metadata=meta,
                            start_char_idx=item.start, end_char_idx=item.end,
                            excluded_llm_metadata_keys=hidden, excluded_embed_metadata_keys=list(meta),
                            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=item.doc_id)})
            out.append(NodeWithScore(node=node, score=float(item.score)))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The ``k`` best items for the query as ``NodeWithScore``\\ s, in momoka's rank order."""
        return self._nodes(query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """:meth:`_retrieve` in a worker thread (the native search releases the GIL)."""
        return await asyncio.to_thread(self._nodes, query_bundle.query_str)
