"""LangChain retriever over any registered momoka retriever (extra ``momoka[langchain]``).

>>> from momoka.integrations.langchain import MomokaRetriever
>>> retriever = MomokaRetriever("my.store", retriever="hybrid", k=5)
>>> docs = retriever.invoke("what did the report conclude?")
>>> docs[0].metadata["doc_id"], docs[0].metadata["start"], docs[0].metadata["end"]

Each returned ``langchain_core.documents.Document`` holds the item's text as
``page_content`` and, in ``metadata``, ``doc_id``, ``start``, ``end``,
``section``, ``score``, ``rank``, ``retriever``, ``chunk_id``, ``title`` and
``spans`` (see :func:`momoka.integrations._common.item_metadata`), and for a
PDF passage ``page`` and ``page_end``, **0-based** as LangChain's PDF loaders
number pages (``metadata["page"] + 1`` is the page momoka prints; a document
without pages has neither key). ``where`` filters the search on metadata
(:mod:`momoka.methods.filters`; its ``page`` range is 1-based). Documents
come in momoka's rank order. ``ainvoke`` runs the search in a worker thread,
so the event loop is never blocked.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .._extras import require

require("langchain_core", "langchain", "momoka.integrations.langchain", package="langchain-core")

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from pydantic import ConfigDict, Field  # noqa: E402

from ..methods.pipeline import DEFAULT_RETRIEVER  # noqa: E402
from . import _common  # noqa: E402

__all__ = ["MomokaRetriever"]


class MomokaRetriever(BaseRetriever):
    """A LangChain ``BaseRetriever`` returning momoka's ranked items as ``Document``\\ s.

    Args:
        index: a :class:`momoka.Index` or the path of a store (opened read-only).
        retriever: a registered retriever name (``dense``, ``bm25``, ``hybrid``, ``trail`` ...).
        k: how many items to return.
        options: options for that retriever (e.g. ``{"view": "titled"}`` for ``dense``).
        doc_ids: restrict every search to these documents (None: all).
        where: a metadata filter on every search (``{"type": "pdf", "page": [3, 7]}``;
            :mod:`momoka.methods.filters`, pages 1-based).

    Unknown retriever names, bad options and a store that lacks what the
    retriever needs raise :mod:`momoka.errors` exceptions at construction.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any
    retriever: str = DEFAULT_RETRIEVER
    k: int = 5
    options: dict = Field(default_factory=dict)
    doc_ids: list[str] | None = None
    where: dict | None = None

    def __init__(self, index: Any = None, **data: Any) -> None:
        if index is None:
            index = data.pop("index", None)
        super().__init__(index=_common.open_index(index), **data)
        _common.prepare(self.index, self.retriever, self.k, self.options, self.where)

    def _documents(self, query: str) -> list[Document]:
        result = _common.search(self.index, query, self.k, self.retriever, self.doc_ids, self.options, self.where)
        return [Document(page_content=item.text,
                         metadata={**_common.item_metadata(item, self.retriever), **_common.langchain_pages(item)},
                         id=_common.item_id(item)) for item in result]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        """The ``k`` best items for ``query`` as ``Document``\\ s, in momoka's rank order."""
        return self._documents(query)

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        """:meth:`_get_relevant_documents` in a worker thread (the native search releases the GIL)."""
        return await asyncio.to_thread(self._documents, query)
