"""What the framework adapters share: opening the index, one search call, item metadata."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .._validate import check_int
from ..errors import ConfigError


def open_index(index: Any) -> Any:
    """A :class:`momoka.Index` from an index (returned as is) or a store path (opened read-only)."""
    if isinstance(index, (str, os.PathLike)):
        from ..methods.pipeline import Index  # start-up: momoka.methods.pipeline

        return Index.open(index)
    if not callable(getattr(index, "search", None)):
        raise ConfigError(f"give a momoka.Index or a store path, not {type(index).__name__}")
    return index


def prepare(index: Any, retriever: str, k: int, options: dict, where: dict | None = None) -> None:
    """Check ``k`` and ``where`` and build the retriever once now, so a bad name, option or filter fails at
    construction."""
    check_int(k, "k", minimum=1)
    if where is not None:
        from ..methods.filters import Where  # start-up: momoka.methods.filters

        Where.parse(where)
    build = getattr(getattr(index, "corpus", index), "retriever", None)
    if callable(build):
        build(retriever, **options)


def search(index: Any, query: str, k: int, retriever: str, doc_ids: Sequence[str] | None, options: dict,
           where: dict | None = None):
    """``index.search(query, k, retriever, doc_ids=..., where=..., **options)``: momoka's ranked :class:`Result`
    (``where``: the metadata filter of :mod:`momoka.methods.filters`)."""
    if where is None:
        return index.search(query, k, retriever, doc_ids=doc_ids, **options)
    return index.search(query, k, retriever, doc_ids=doc_ids, where=where, **options)


def item_id(item: Any) -> str:
    """A stable id for a returned item: ``doc_id:start-end`` of each member, joined by ``+``."""
    return "+".join(f"{d}:{s}-{e}" for d, s, e in item.spans)


def item_metadata(item: Any, retriever: str) -> dict:
    """The metadata every adapter attaches to an item.

    ``doc_id``, ``start``, ``end`` and ``section`` are the first member's
    (for a single-chunk item, ``document.text[start:end]`` is exactly the text
    returned); ``spans`` lists ``[doc_id, start, end]`` of every member (a
    Trail composite has several); ``score`` and ``rank`` are momoka's;
    ``retriever`` is the registered name asked. Each adapter adds the page of
    a PDF passage in its framework's convention (:func:`langchain_pages`,
    :func:`llama_index_pages`).
    """
    return {
        "doc_id": item.doc_id, "start": item.start, "end": item.end, "section": list(item.section),
        "score": float(item.score), "rank": item.rank, "retriever": retriever, "chunk_id": item.chunk_id,
        "title": item.title, "spans": [list(s) for s in item.spans],
    }


def langchain_pages(item: Any) -> dict:
    """LangChain's page keys for an item of a document with pages: ``page``, 0-based, as LangChain's PDF
    loaders (``PyPDFLoader``, ``PyMuPDFLoader``) set it on every ``Document``, and ``page_end``, the last
    page, 0-based too; ``{}`` for a document without pages (as LangChain's loaders of other formats)."""
    if item.page is None:
        return {}
    return {"page": item.page - 1, "page_end": item.page_end - 1}


def llama_index_pages(item: Any) -> dict:
    """LlamaIndex's page keys for an item of a document with pages: ``page_label``, the 1-based page number
    as a string, as LlamaIndex's PDF readers set it on every node, and ``page_end_label``, the last page
    the same way; ``{}`` for a document without pages."""
    if item.page is None:
        return {}
    return {"page_label": str(item.page), "page_end_label": str(item.page_end)}
