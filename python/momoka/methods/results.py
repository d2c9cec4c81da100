"""Results over one store: members, titles, :class:`~momoka.methods.base.Result` construction, the
context assembler and how many items fill a budget.

:class:`Results` is what :class:`momoka.Index` (and through it a retriever's
:class:`~momoka.methods.corpus.Corpus`) builds its results with; what it derives from the chunk
table (the assemblers, the mean chunk length) is computed once per state of that table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..store.store import RAW_VIEW
from ..text.document import page_number
from .base import (DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_EXTRA, DEFAULT_ASSEMBLE_MIN_HITS, DEFAULT_ASSEMBLE_TRIM,
                   DEFAULT_ASSEMBLE_TRIM_FILL, Answer, Item, Member, Result, check_budget)


class Results:
    """Members, titles and results of the chunks of ``store``; the assembler and read depth of a budget."""

    def __init__(self, store: Any):
        self.store = store
        self.reset()

    def reset(self) -> None:
        """Forget what was derived from the chunk table (after the store moved to another commit)."""
        self._mean_chunk: tuple = (None, 1.0)  # (chunk-table state, mean chunk length): see depth_for
        self._assemblers: tuple = (None, {})  # (chunk-table state, {rule: Assembler}): see assembler
        self._page_starts: dict = {}  # doc id -> (its stored page spans, their start offsets): see pages

    def member(self, chunk_id: int) -> Member:
        """The :class:`~momoka.methods.base.Member` for a stored chunk (with its pages, :meth:`pages`)."""
        doc_id, start, end, text, section = self.store.chunks.row(int(chunk_id))
        page, page_end = self.pages(doc_id, start, end, text)
        return Member(int(chunk_id), doc_id, start, end, text, section, page, page_end)

    # ------------------------------------------------------------------ pages

    def pages(self, doc_id: str, start: int, end: int, text: str | None = None) -> tuple[int | None, int | None]:
        """``(first, last)``: the 1-based numbers of the pages holding the first and the last character of the
        span ``[start, end)`` of document ``doc_id``, or ``(None, None)`` when the document has no pages
        (only PDFs have them) or is not in the store.

        With ``text`` (the span's text), leading and trailing whitespace is not counted, so a passage that
        begins with the blank line between two pages is on the page of its first word. This is the one place
        momoka computes a page: results, citations, the CLI, the server and the adapters all read it from here.
        """
        entry = self.store.documents.get(doc_id)
        spans = entry.metadata.get("pages") if entry is not None else None
        if not spans:
            return None, None
        cached = self._page_starts.get(doc_id)
        if cached is None or cached[0] is not spans:  # a replaced document has a new list of spans
            cached = (spans, np.asarray([s for s, _ in spans], dtype=np.int64))
            self._page_starts[doc_id] = cached
        if text:
            lead, kept = len(text) - len(text.lstrip()), len(text.strip())
            if kept:
                start, end = start + lead, start + lead + kept
        first = page_number(cached[1], start)
        return first, max(first, page_number(cached[1], max(start, end - 1)))

    def _paged(self, m: Any) -> Any:
        """``m`` (a Member or a Citation) with its pages set from :meth:`pages`."""
        page, page_end = self.pages(m.doc_id, m.start, m.end, m.text)
        return m if (page, page_end) == (m.page, m.page_end) else replace(m, page=page, page_end=page_end)

    def locate(self, result: Result) -> Result:
        """``result`` with the pages (:meth:`pages`) of every member of every item set (an item made of spans
        that are not stored chunks, e.g. assembled or refined ones, gets them here)."""
        items = []
        for it in result.items:
            members = tuple(self._paged(m) for m in it.members)
            items.append(it if all(a is b for a, b in zip(members, it.members)) else replace(it, members=members))
        return Result(result.query, tuple(items), result.retriever, result.stats)

    def locate_answer(self, answer: Answer) -> Answer:
        """``answer`` with the pages of every citation and context passage set (:meth:`pages`), and the section
        of a citation that has none taken from the context passage holding its first character."""
        context = tuple(self._paged(c) for c in answer.context)

        def section(c: Any) -> Any:
            if c.section:
                return c
            home = next((p for p in context if p.doc_id == c.doc_id and p.start <= c.start < max(p.end, p.start + 1)),
                        None)
            return c if home is None or not home.section else replace(c, section=home.section)

        citations = tuple(self._paged(section(c)) for c in answer.citations)
        return replace(answer, citations=citations, context=context)

    def title(self, doc_id: str) -> str | None:
        """The document's title as stored (None when it has none)."""
        d = self.store.documents.get(doc_id)
        return (d.title or None) if d is not None else None

    def result(self, query: str, ranked: Sequence[tuple[Any, float]], retriever: str, provenance: dict | None = None,
               *, stats: dict | None = None) -> Result:
        """A :class:`~momoka.methods.base.Result` from ranked ``(chunk id or tuple of ids, score)`` pairs."""
        prov = dict(provenance or {"retriever": retriever})
        items = []
        for rank, (ids, score) in enumerate(ranked, start=1):
            ids = (int(ids),) if isinstance(ids, (int, np.integer)) else tuple(int(i) for i in ids)
            members = tuple(self.member(i) for i in ids)
            items.append(Item(members, float(score), rank, prov, self.title(members[0].doc_id)))
        return Result(query, tuple(items), retriever, dict(stats or {}))

    def _chunk_state(self) -> tuple:
        """What identifies the chunk table's current state, for caches derived from it."""
        chunks = self.store.chunks
        return (id(chunks), chunks.n_slots, self.store.n_chunks)

    def assembler(self, cap: int = DEFAULT_ASSEMBLE_CAP, *, min_hits: int = DEFAULT_ASSEMBLE_MIN_HITS,
                  extra: int = DEFAULT_ASSEMBLE_EXTRA, trim: int = DEFAULT_ASSEMBLE_TRIM,
                  trim_fill: float = DEFAULT_ASSEMBLE_TRIM_FILL):
        """The :class:`~momoka.methods.assemble.Assembler` over the store's chunks with these widening and
        trimming settings (built once per state of the chunk table); it trims with the raw BM25 view's tokens
        and term weights (no hit is trimmed in a store without that view)."""
        from .assemble import Assembler  # start-up: momoka.methods.assemble

        key = self._chunk_state()
        if self._assemblers[0] != key:
            self._assemblers = (key, {})
        made = self._assemblers[1]
        rule = (cap, min_hits, extra, trim, trim_fill)
        if rule not in made:
            made[rule] = Assembler(self.store.chunks, self.member, cap, min_hits=min_hits, extra=extra, trim=trim,
                                   trim_fill=trim_fill, terms=self._terms)
        return made[rule]

    def _terms(self) -> Any:
        """The raw BM25 view's index (None when the store has none): what an assembler trims hits with."""
        store = self.store
        return store.bm25_view(RAW_VIEW).index if store.has_bm25_view(RAW_VIEW) else None

    def depth_for(self, budget: int) -> int:
        """How many items to read to fill ``budget`` characters: enough at half the mean chunk length."""
        check_budget(budget)
        store = self.store
        if store.n_chunks == 0:
            return 1
        key = self._chunk_state()
        if self._mean_chunk[0] != key:  # once per state of the chunk table, not per query
            starts, ends = store.chunks.column("start"), store.chunks.column("end")
            live = store.chunks.column("live").astype(bool)
            self._mean_chunk = (key, float(np.mean((ends - starts)[live])) if live.any() else 1.0)
        return max(1, int(np.ceil(2 * budget / max(self._mean_chunk[1], 1.0))) + 1)
