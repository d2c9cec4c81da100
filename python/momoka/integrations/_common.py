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


def prepare(index: Any, retriever: str, k: int, options: dict) -> None:
    """Check ``k`` and build the retriever once now, so a bad name or option fails at construction."""
    check_int(k, "k", minimum=1)
    build = getattr(index, "retriever", None)
    if callable(build):
        build(retriever, **options)


def search(index: Any, query: str, k: int, retriever: str, doc_ids: Sequence[str] | None, options: dict):
    """``index.search(query, k, retriever, doc_ids=..., **options)``: momoka's ranked :class:`Result`."""
    return index.search(query, k, retriever, doc_ids=doc_ids, **options)


def item_id(item: Any) -> str:
    """A stable id for a returned item: ``doc_id:start-end`` of each member, joined by ``+``."""
    return "+".join(f"{d}:{s}-{e}" for d, s, e in item.spans)


def item_metadata(item: Any, retriever: str) -> dict:
    """The metadata every adapter attaches to an item.

    ``doc_id``, ``start``, ``end`` and ``section`` are the first member's
    (for a single-chunk item, ``document.text[start:end]`` is exactly the text
    returned); ``spans`` lists ``[doc_id, start, end]`` of every member (a
    Trail composite has several); ``score`` and ``rank`` are momoka's;
    ``retriever`` is the registered name asked.
    """
    return {
        "doc_id": item.doc_id, "start": item.start, "end": item.end, "section": list(item.section),
        "score": float(item.score), "rank": item.rank, "retriever": retriever, "chunk_id": item.chunk_id,
        "title": item.title, "spans": [list(s) for s in item.spans],
    }
