"""Metadata filters on search: ``Index.search(..., where={"type": "pdf", "folder": "docs", "page": (3, 7)})``.

The grammar (every key optional; the keys given must all hold; a list of values holds when any does):

* ``type``: the file type of the document, from the extension of the file it was indexed from
  (``pdf``, ``docx``, ``html``, ``markdown``, ``text``; ``md``, ``txt``, ``htm`` are read as their
  type). A document indexed from a text, a dict or a :class:`~momoka.text.Document` without a source
  path has no type and matches no ``type`` filter.
* ``folder``: the document lies in this folder: the folder's path components begin the document id's
  (``docs`` matches ``docs/guide`` and ``docs/api/intro``, not ``docsets/x``), or begin the path of the
  file it was indexed from, as it was given to ``momoka index`` / :meth:`~momoka.Index.build`.
* ``title``: the document's title, compared without case and with runs of whitespace as one space.
* ``page``: a page range, 1-based and inclusive: ``3``, ``(3, 7)``, ``[3, None]`` (3 to the end) or
  the strings ``"3"``, ``"3-7"``, ``"3-"``. A passage matches when its text touches one of those pages
  (its first and last page, :meth:`~momoka.methods.results.Results.pages`, overlap the range; an item
  of several members when every member does). Documents without pages (everything but PDFs) never match.

How it is applied, before any budget is filled:

* ``type``, ``folder``, ``title`` (and, for ``page``, the documents that have a page in the range) select
  documents; those become the search's document filter, intersected with ``doc_ids``: the same
  mechanism as ``doc_ids``, inside the retriever, so the retriever ranks matching chunks only (dense
  search is then exact over them; BM25 scores keep the whole store's statistics).
* ``page`` is then applied to the ranking: momoka asks the retriever for the items the search needs
  (``k``, or the depth that fills the budget), keeps those on the pages, and asks again four times as
  deep until enough match or the retriever has nothing more (fewer items than asked, or as many as the
  selected documents have chunks). For ``bm25`` and ``dense`` (whose ranking at a larger ``k`` begins
  with the one at a smaller ``k``) the items are exactly the filtered full ranking; for ``hybrid`` (its
  fusion depth and re-ranks grow with ``k``) and the paper methods they are the matching items of the
  deepest ranking read. The cost grows with how rare matching passages are: a page range over a whole
  store of PDFs can read every chunk, so give it with a document filter (``type``, ``folder``,
  ``title``, ``doc_ids``) when the store is large. ``result.stats["where"]`` records the filter and,
  with a page range, how many items were read (``read``).

A key not in :data:`WHERE_KEYS` is a :class:`~momoka.errors.ConfigError` naming the valid keys.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from .._validate import check_int
from ..errors import ConfigError
from ..text.io import FORMATS, resolve_format
from .base import Result

__all__ = ["WHERE_KEYS", "Where", "document_type", "filtered_search", "parse_pages"]

#: The keys a ``where`` filter takes.
WHERE_KEYS = ("type", "folder", "title", "page")
#: The document types ``type`` matches (the parser formats of :data:`momoka.text.io.FORMATS`).
TYPES = ("pdf", "docx", "html", "markdown", "text")
#: How much deeper each new read of the ranking is, with a page range.
GROWTH = 4

_RANGE = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d+)?)?\s*$")


def document_type(source: str | None) -> str | None:
    """The type (``pdf``, ``docx``, ``html``, ``markdown``, ``text``) of a document indexed from ``source``,
    from its extension as :func:`momoka.text.io.resolve_format` reads it; None without a source."""
    if not source:
        return None
    return FORMATS.get(Path(source).suffix.lower(), "text")


def parse_pages(value: Any) -> tuple[int, int | None]:
    """``(first, last)`` of a page range (1-based, inclusive; ``last`` None: to the end) from ``3``,
    ``(3, 7)``, ``[3, None]``, ``"3"``, ``"3-7"`` or ``"3-"``; :class:`ConfigError` for anything else."""
    bad = ConfigError(f"a page range is a page number (3), two of them ([3, 7], \"3-7\") or an open range "
                      f"(\"3-\", [3, null]), pages counting from 1; got {value!r}")
    if isinstance(value, str):
        m = _RANGE.match(value)
        if not m:
            raise bad
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
    elif isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise bad
        lo, hi = value
    else:
        lo = hi = value
    for v in (lo, hi):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise bad
    if lo is None or lo < 1 or (hi is not None and hi < lo):
        raise bad
    return lo, hi


def _strings(key: str, value: Any) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not values or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"filter {key!r} takes a string or a non-empty list of strings, not {value!r}")
    return tuple(values)


def _parts(path: str) -> tuple[str, ...]:
    """The components of a ``/`` or ``\\`` separated path, without ``.`` and empty ones."""
    return tuple(p for p in PurePosixPath(path.replace("\\", "/")).parts if p not in (".", ""))


def _title_key(title: str) -> str:
    return " ".join(title.split()).casefold()


@dataclass(frozen=True)
class Where:
    """A checked ``where`` filter (see the module doc); build it with :meth:`parse`."""

    types: frozenset | None = None
    folders: tuple | None = None
    titles: frozenset | None = None
    pages: tuple | None = None
    given: dict | None = None

    @classmethod
    def parse(cls, where: Any) -> Where | None:
        """The filter ``where`` (a dict; a :class:`Where` is returned as is); None for None or ``{}``.
        Raises :class:`ConfigError` for an unknown key or a bad value."""
        if where is None or isinstance(where, Where):
            return where
        if not isinstance(where, dict):
            raise ConfigError(f"where must be a dict of filters ({', '.join(WHERE_KEYS)}), not {type(where).__name__}")
        unknown = sorted(str(k) for k in where if k not in WHERE_KEYS)
        if unknown:
            raise ConfigError(f"unknown filter key(s) {', '.join(map(repr, unknown))}; the valid keys are "
                              f"{', '.join(WHERE_KEYS)}")
        if not where:
            return None
        types = folders = titles = pages = None
        if "type" in where:
            names = _strings("type", where["type"])
            try:
                types = frozenset(resolve_format("x", t) for t in names)
            except ConfigError:
                raise ConfigError(f"unknown document type in {where['type']!r}; the types are {', '.join(TYPES)} "
                                  "(md, txt and htm also)") from None
        if "folder" in where:
            folders = tuple(_parts(f) for f in _strings("folder", where["folder"]))
        if "title" in where:
            titles = frozenset(_title_key(t) for t in _strings("title", where["title"]))
        if "page" in where:
            pages = parse_pages(where["page"])
        given = {k: (list(v) if isinstance(v, tuple) else v) for k, v in where.items()}
        return cls(types, folders, titles, pages, given)

    def matches_document(self, entry: Any) -> bool:
        """Whether a stored document (a :class:`~momoka.store.documents.DocEntry`) passes the document keys
        (and, with a page range, has a page in it)."""
        if self.types is not None and document_type(entry.source) not in self.types:
            return False
        if self.folders is not None:
            homes = [_parts(entry.doc_id)[:-1]] + ([_parts(entry.source)[:-1]] if entry.source else [])
            if not any(h[: len(f)] == f for f in self.folders for h in homes):
                return False
        if self.titles is not None and _title_key(entry.title or "") not in self.titles:
            return False
        if self.pages is not None:
            spans = entry.metadata.get("pages")
            if not spans or len(spans) < self.pages[0]:
                return False
        return True

    def documents(self, store: Any) -> list[str]:
        """The ids of the documents of ``store`` that pass (:meth:`matches_document`), in store order."""
        return [d for d, e in store.documents.items() if self.matches_document(e)]

    def on_pages(self, item: Any) -> bool:
        """Whether every member of ``item`` touches the page range (True without one)."""
        if self.pages is None:
            return True
        lo, hi = self.pages
        return all(m.page is not None and m.page_end >= lo and (hi is None or m.page <= hi) for m in item.members)


def _scope(allowed: list[str], doc_filter: Any, store: Any) -> list[str]:
    """``allowed`` (the where-selected ids) narrowed to the ids of a ``doc_ids`` entry (None: all)."""
    if doc_filter is None:
        return allowed
    ids = [doc_filter] if isinstance(doc_filter, str) else list(doc_filter)
    store.chunk_ids_of(ids)  # InputError naming unknown ids, as without a where filter
    keep = set(ids)
    return [d for d in allowed if d in keep]


def filtered_search(retriever: Any, corpus: Any, queries: Sequence[str], depth: int, where: Any,
                    doc_ids: Any = None, per_query_doc_ids: Sequence[Any] | None = None) -> list[Result]:
    """``retriever.retrieve_batch(queries, depth, ...)`` under the filter ``where`` (the rule in the module doc):
    per query, at most ``depth`` items that match, in the retriever's order, ranked from 1."""
    w = Where.parse(where)
    if w is None:
        kw = {"doc_ids": doc_ids} if per_query_doc_ids is None else {"per_query_doc_ids": per_query_doc_ids}
        return retriever.retrieve_batch(queries, depth, **kw)
    queries = corpus.check_queries(queries)
    depth = check_int(depth, "k", minimum=1)
    store = corpus.store
    allowed = w.documents(store)
    if per_query_doc_ids is not None:
        if doc_ids is not None:
            raise ConfigError("give doc_ids or per_query_doc_ids, not both")
        if len(per_query_doc_ids) != len(queries):
            raise ConfigError("per_query_doc_ids needs one entry per query")
        scopes = [_scope(allowed, f, store) for f in per_query_doc_ids]
    else:
        scopes = [_scope(allowed, doc_ids, store)] * len(queries)
    chunks = {}
    for s in scopes:
        if id(s) not in chunks:
            chunks[id(s)] = sum(len(store.documents[d].chunk_ids) for d in s)
    stats = {"where": w.given}
    out: list[Result | None] = [None if s else Result(q, (), retriever.name, {"where": w.given})
                                for q, s in zip(queries, scopes)]
    todo = [i for i, s in enumerate(scopes) if s]
    n = depth
    while todo:
        same = all(scopes[i] is scopes[todo[0]] for i in todo)
        kw = {"doc_ids": scopes[todo[0]]} if same else {"per_query_doc_ids": [scopes[i] for i in todo]}
        got = retriever.retrieve_batch([queries[i] for i in todo], n, **kw)
        if w.pages is None:
            for i, res in zip(todo, got):
                out[i] = Result(res.query, res.items, res.retriever, {**res.stats, **stats})
            break
        left = []
        for i, res in zip(todo, got):
            res = corpus.results.locate(res)
            kept = [it for it in res if w.on_pages(it)]
            if len(kept) >= depth or len(res) < n or n >= chunks[id(scopes[i])]:
                items = tuple(replace(it, rank=r) for r, it in enumerate(kept[:depth], start=1))
                out[i] = Result(res.query, items, res.retriever, {**res.stats, "where": {**w.given, "read": len(res)}})
            else:
                left.append(i)
        todo, n = left, n * GROWTH
    return out  # type: ignore[return-value]
