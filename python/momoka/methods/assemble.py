"""Small-to-big context assembly: spend a character budget on context a reader can use.

A retriever ranks fine units (chunks of about 100 tokens). Cutting that ranking
at a budget (:meth:`momoka.methods.base.Result.fit` without an assembler) keeps
the longest prefix that fits, so evidence spread over a paragraph comes back
as fragments, or not at all when one long item ends the prefix.
:class:`Assembler` fills the budget instead, in rank order:

* a hit is **widened** to its parent unit, the enclosing paragraph (every live
  chunk of the same document with the same ``paragraph`` index in the chunk
  table), when its new characters fit what is left of the budget and either
  the paragraph adds at most ``extra`` characters to the hit (a small window
  around it, as LlamaIndex's sentence-window retriever) or it spans at most
  ``cap`` characters and holds at least ``min_hits`` hits of the ranking (as
  LlamaIndex's auto-merging retriever); otherwise the hit is taken alone;
* the first hit that does not fit what is left (widened or not) is
  **trimmed** when it can be: cut to its run of whole sentences that fits
  what is left, overlaps no text already taken and holds the greatest weight
  of the question's terms (the sum of
  :meth:`~momoka.store.bm25.BM25.term_weight` over the distinct BM25 tokens
  of the query it holds; ties: the shorter run, then the earlier), taken
  when that run holds a query term and fills at least ``trim_fill`` of what
  is left. The budget's tail then goes to the best sentences of the best
  hit left out instead of to smaller, lower-ranked hits; a run that would
  fill little of it is not worth the hits it pushes out. ``trim`` sets how
  many of the first hits that do not fit are tried so (0: none);
* a hit that does not fit and is not trimmed is **skipped**, and the fill
  goes on with the next one;
* hits of one document that overlap or touch (only whitespace between them)
  are **merged** into one item, and no character is returned twice: a chunk
  already covered is dropped, one that overlaps covered text is cut to its
  new part (still an exact span: ``document.text[start:end] == member.text``);
* neighbouring spans are **joined** with the whitespace between them when the
  store knows it (each chunk's :attr:`~momoka.text.model.Chunk.tail`, kept
  since store format 3's tail column), so a run of chunks comes back as one
  member, the exact text of the document from the first start to the last
  end (``chunk_id`` -1 when it joins more than one chunk; the item's
  ``provenance["assembly"]["chunks"]`` lists the stored chunks it holds).
  The joined whitespace counts against the budget. Where tails are unknown
  (stores built before they were kept) touching chunks stay separate members
  of one item, the whitespace between them not returned.

Characters are counted as the members' lengths, joined whitespace included.
With tails known, a widened paragraph comes back as the whole paragraph. The
defaults (:data:`DEFAULT_ASSEMBLE_CAP`, :data:`DEFAULT_ASSEMBLE_MIN_HITS`,
:data:`DEFAULT_ASSEMBLE_EXTRA`, :data:`DEFAULT_ASSEMBLE_TRIM`,
:data:`DEFAULT_ASSEMBLE_TRIM_FILL`) were chosen on the shared sets by the best
worst case (docs/results.md). An assembled item lists its members
in document order; ``provenance["assembly"]`` names the ranks of the hits it
holds (``hits``), those widened (``widened``) and those trimmed
(``trimmed``; a trimmed run is a member with ``chunk_id`` -1 unless it is a
whole stored chunk of a composite item); the result's
``stats`` count them (``assembled_widened``, ``assembled_merged``,
``assembled_trimmed``, ``assembled_skipped``).

The parent and adjacency tables are built once per state of the chunk table,
with numpy (:meth:`Corpus.assembler <momoka.methods.corpus.Corpus.assembler>` caches them).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .._validate import check_float, check_int
from ..text.segment import split_sentences
from .base import (DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_EXTRA, DEFAULT_ASSEMBLE_MIN_HITS, DEFAULT_ASSEMBLE_TRIM,
                   DEFAULT_ASSEMBLE_TRIM_FILL, Item, Member, Result, check_budget)

__all__ = ["DEFAULT_ASSEMBLE_CAP", "DEFAULT_ASSEMBLE_EXTRA", "DEFAULT_ASSEMBLE_MIN_HITS", "DEFAULT_ASSEMBLE_TRIM",
           "DEFAULT_ASSEMBLE_TRIM_FILL", "Assembler"]


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint union of half-open intervals (touching ones joined)."""
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _total(spans: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in spans)


def _fuse(pieces: list[Member]) -> tuple[Member, ...]:
    """Members with each run of contiguous pieces of one document (one's end the next's start) made one member:
    the run's exact text, ``chunk_id`` -1 when it joins several pieces."""
    out: list[Member] = []
    for m in pieces:
        last = out[-1] if out else None
        if last is not None and last.doc_id == m.doc_id and last.end == m.start:
            out[-1] = Member(-1, m.doc_id, last.start, m.end, last.text + m.text, last.section)
        else:
            out.append(m)
    return tuple(out)


class _Sets:
    """Union-find over hit numbers."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        p = self.parent.setdefault(x, x)
        while p != self.parent[p]:
            self.parent[p] = self.parent[self.parent[p]]
            p = self.parent[p]
        self.parent[x] = p
        return p

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)  # the best-ranked hit names the set


class Assembler:
    """Merges, widens and fits a :class:`~momoka.methods.base.Result` into a budget (see the module doc).

    Args:
        chunks: the store's chunk table (its ``doc``, ``paragraph``, ``start``,
            ``end`` and ``live`` columns and ``doc_list`` are read once, here).
        member: ``chunk id -> Member`` with the chunk's exact text (:meth:`Corpus.member <momoka.methods.corpus.Corpus.member>`).
        cap: widen a hit to a paragraph spanning at most this many characters
            when the paragraph holds at least ``min_hits`` hits (0: never).
        min_hits: hits of the ranking (any rank) a paragraph must hold to be
            widened to by ``cap`` (1: every hit's paragraph up to ``cap``).
        extra: widen a hit to its paragraph whenever that adds at most this
            many characters to it (0: never). With ``cap`` and ``extra`` 0 no
            hit is widened; merging and skipping still apply.
        trim: how many of the first hits that do not fit are tried for a
            cut to their best run of sentences (0: none).
        trim_fill: the least share of what is left of the budget (0 to 1)
            that run must fill to be taken.
        terms: ``() -> BM25`` giving the index whose tokens and
            :meth:`~momoka.store.bm25.BM25.term_weight` score those runs
            (called at each assembly, so it follows the store; it may
            return None); None: no hit is trimmed.
    """

    def __init__(self, chunks: Any, member: Callable[[int], Member], cap: int = DEFAULT_ASSEMBLE_CAP, *,
                 min_hits: int = DEFAULT_ASSEMBLE_MIN_HITS, extra: int = DEFAULT_ASSEMBLE_EXTRA,
                 trim: int = DEFAULT_ASSEMBLE_TRIM, trim_fill: float = DEFAULT_ASSEMBLE_TRIM_FILL,
                 terms: Callable[[], Any] | None = None):
        self.cap = check_int(cap, "the assembly cap", minimum=0)
        self.min_hits = check_int(min_hits, "the assembly min_hits", minimum=1)
        self.extra = check_int(extra, "the assembly extra", minimum=0)
        self.trim = check_int(trim, "the assembly trim", minimum=0)
        self.trim_fill = check_float(trim_fill, "the assembly trim_fill", minimum=0.0, maximum=1.0)
        self._terms = terms
        self._member = member
        live = np.asarray(chunks.column("live"), dtype=bool)
        ids = np.flatnonzero(live).astype(np.int64)
        doc = np.asarray(chunks.column("doc"), dtype=np.int64)[ids]
        par = np.asarray(chunks.column("paragraph"), dtype=np.int64)[ids]
        start = np.asarray(chunks.column("start"), dtype=np.int64)[ids]
        end = np.asarray(chunks.column("end"), dtype=np.int64)[ids]
        self._doc_code = {d: i for i, d in enumerate(chunks.doc_list)}
        # Parents: live chunks grouped by (doc, paragraph), each group's chunks by start.
        order = np.lexsort((start, par, doc))
        g_new = np.ones(len(order), dtype=bool)
        g_new[1:] = (doc[order][1:] != doc[order][:-1]) | (par[order][1:] != par[order][:-1])
        g_first = np.flatnonzero(g_new)
        self._g_ids = ids[order]
        self._g_off = np.append(g_first, len(order)).astype(np.int64)
        self._g_span = (np.maximum.reduceat(end[order], g_first) - np.minimum.reduceat(start[order], g_first)
                        if len(order) else np.zeros(0, dtype=np.int64))
        self._group = np.full(int(chunks.n_slots), -1, dtype=np.int64)
        self._group[ids[order]] = np.cumsum(g_new) - 1
        # Adjacency: per document, chunk starts ascending and the running maximum of their ends.
        by_start = np.lexsort((start, doc))
        self._d_start = start[by_start]
        d_sorted = doc[by_start]
        reach = float(end.max() + 1) if len(end) else 1.0
        self._d_reach = (np.maximum.accumulate(end[by_start] + d_sorted * reach) - d_sorted * reach
                         if len(end) else np.zeros(0)).astype(np.int64)
        n_docs = len(chunks.doc_list)
        self._d_lo = np.searchsorted(d_sorted, np.arange(n_docs), side="left")
        self._d_hi = np.searchsorted(d_sorted, np.arange(n_docs), side="right")
        # Tails: the live chunks whose tail is known, by (document, end), for the joins.
        tail_fn = getattr(chunks, "tail_column", None)
        tail, self._tails = tail_fn() if tail_fn is not None else (np.full(len(live), -1, dtype=np.int32), [])
        tail = np.asarray(tail, dtype=np.int64)[ids]
        known = tail >= 0
        self._t_mult = int(end.max()) + 1 if len(end) else 1
        t_key = doc[known] * self._t_mult + end[known]
        t_order = np.argsort(t_key, kind="stable")
        self._t_key, self._t_val = t_key[t_order], tail[known][t_order]

    # -- look-ups -------------------------------------------------------------

    def parent(self, chunk_id: int) -> tuple[int, ...]:
        """The live chunks of ``chunk_id``'s paragraph, by start (``()`` for an unknown or deleted chunk)."""
        c = int(chunk_id)
        if not 0 <= c < len(self._group) or self._group[c] < 0:
            return ()
        g = int(self._group[c])
        return tuple(int(i) for i in self._g_ids[self._g_off[g]:self._g_off[g + 1]])

    def parent_span(self, chunk_id: int) -> int:
        """Characters from the first start to the last end of ``chunk_id``'s paragraph (0 when unknown)."""
        c = int(chunk_id)
        if not 0 <= c < len(self._group) or self._group[c] < 0:
            return 0
        return int(self._g_span[self._group[c]])

    def touching(self, doc_id: str, end: int, start: int) -> bool:
        """True when ``[end, start)`` of ``doc_id`` is empty or holds no live chunk (only whitespace, by the
        chunkers' contract that chunks cover every other character)."""
        if start <= end:
            return True
        d = self._doc_code.get(doc_id)
        if d is None:
            return False
        lo, hi = int(self._d_lo[d]), int(self._d_hi[d])
        k = lo + int(np.searchsorted(self._d_start[lo:hi], start, side="left"))
        return k == lo or int(self._d_reach[k - 1]) <= end

    def bridge(self, doc_id: str, end: int, start: int) -> str | None:
        """The text of ``doc_id`` from ``end`` to ``start`` when the store knows it: ``""`` when ``start <= end``,
        else the tail of a live chunk of the document ending at ``end`` that reaches ``start`` exactly (None when
        there is none)."""
        if start <= end:
            return ""
        d = self._doc_code.get(doc_id)
        if d is None or end >= self._t_mult:
            return None
        key = d * self._t_mult + int(end)
        lo = int(np.searchsorted(self._t_key, key, side="left"))
        hi = int(np.searchsorted(self._t_key, key, side="right"))
        for t in self._t_val[lo:hi].tolist():
            if len(self._tails[t]) == start - end:
                return self._tails[t]
        return None

    def _join(self, doc_id: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The union of ``spans``, neighbours joined where :meth:`bridge` knows the text between them."""
        out: list[tuple[int, int]] = []
        for s, e in _merge(spans):
            if out and self.bridge(doc_id, out[-1][1], s) is not None:
                out[-1] = (out[-1][0], e)
            else:
                out.append((s, e))
        return out

    def _hits_per_paragraph(self, result: Result) -> dict[int, int]:
        """Paragraph group -> the number of the ranking's members (stored chunks) inside it."""
        out: dict[int, int] = {}
        n = len(self._group)
        for it in result.items:
            for m in it.members:
                if 0 <= m.chunk_id < n and self._group[m.chunk_id] >= 0:
                    g = int(self._group[m.chunk_id])
                    out[g] = out.get(g, 0) + 1
        return out

    def _widened(self, item: Item, hits: dict[int, int]) -> tuple[Member, ...] | None:
        """The item's members with each stored chunk replaced by its paragraph when the rule of the module doc
        says so (``hits``: :meth:`_hits_per_paragraph` of the ranking); None when nothing widens."""
        if not self.cap and not self.extra:
            return None
        out: list[Member] = []
        grew = False
        for m in item.members:
            fam = self.parent(m.chunk_id) if m.chunk_id >= 0 else ()
            span = self.parent_span(m.chunk_id) if len(fam) > 1 else 0
            if len(fam) > 1 and (span - (m.end - m.start) <= self.extra or (
                    span <= self.cap and hits.get(int(self._group[m.chunk_id]), 0) >= self.min_hits)):
                out.extend(m if c == m.chunk_id else self._member(c) for c in fam)
                grew = True
            else:
                out.append(m)
        return tuple(out) if grew else None

    def _trimmed(self, item: Item, left: int, taken: dict[str, list[tuple[int, int]]], query: set[str],
                 bm25: Any, weights: dict[str, float]) -> tuple[Member, ...] | None:
        """The run of whole sentences of one of ``item``'s members that fits ``left`` characters, overlaps no
        ``taken`` text and holds the greatest weight of ``query`` terms (ties: shorter, then earlier); None when
        no run holds a query term."""
        best: tuple[float, int, int, int, Member] | None = None  # (-weight, length, member number, start, member)
        for k, m in enumerate(item.members):
            if not m.text:
                continue
            starts, ends = split_sentences(m.text)
            busy = taken.get(m.doc_id, [])
            runs: list[tuple[int, int, set[str]] | None] = []  # absolute spans; None: overlaps taken text
            for s, e in zip(starts.tolist(), ends.tolist()):
                a, b = m.start + s, m.start + e
                clash = any(a < y and x < b for x, y in busy)
                runs.append(None if clash else (a, b, set(bm25.tokenize(m.text[s:e])) & query))
            for i, first in enumerate(runs):
                if first is None:
                    continue
                held: set[str] = set()
                for j in range(i, len(runs)):
                    run = runs[j]
                    if run is None or run[1] - first[0] > left:
                        break
                    held |= run[2]
                    if not held:
                        continue
                    for t in held:
                        if t not in weights:
                            weights[t] = bm25.term_weight(t)
                    key = (-math.fsum(weights[t] for t in held), run[1] - first[0], k, first[0])
                    if best is None or key < best[:4]:
                        best = (*key, m)
        if best is None:
            return None
        _, _, _, a, m = best
        b = a + best[1]
        if (a, b) == (m.start, m.end):  # the whole member (of a composite item): still the stored chunk
            return (m,)
        return (Member(-1, m.doc_id, a, b, m.text[a - m.start:b - m.start], m.section),)

    # -- assembly -------------------------------------------------------------

    def __call__(self, result: Result, budget: int, *, keep_first: bool = True) -> Result:
        """The assembled :class:`Result` of ``result`` within ``budget`` characters.

        With ``keep_first`` the best hit is kept (not widened) even when it
        alone is longer than the budget, as in :meth:`Result.fit`.
        """
        check_budget(budget)
        taken: dict[str, list[tuple[int, int]]] = {}
        accepted: list[tuple[int, tuple[Member, ...]]] = []  # (hit number, members)
        widened: set[int] = set()
        trimmed: set[int] = set()
        used = skipped = tried = 0
        hits = self._hits_per_paragraph(result) if self.cap or self.extra else {}
        can_trim = bool(self.trim) and self._terms is not None
        bm25: Any = None  # the BM25 index and the query's tokens, looked up at the first hit that does not fit
        query: set[str] = set()
        weights: dict[str, float] = {}
        for i, item in enumerate(result.items):
            wide = self._widened(item, hits)
            choices = [(wide, "wide"), (item.members, "")] if wide is not None else [(item.members, "")]
            if can_trim and tried < self.trim:
                choices.append((None, "trim"))
            placed = False
            for members, how in choices:
                if how == "trim":
                    if bm25 is None:
                        bm25 = self._terms()
                        query = set(bm25.tokenize(result.query)) if bm25 is not None else set()
                        if not query:  # no index to weigh terms by, or a query without a term: nothing to trim
                            can_trim = False
                            break
                    tried += 1
                    left = budget - used
                    members = self._trimmed(item, left, taken, query, bm25, weights)
                    if members is None or members[0].end - members[0].start < self.trim_fill * left:
                        break
                by_doc: dict[str, list[tuple[int, int]]] = {}
                for m in members:
                    by_doc.setdefault(m.doc_id, []).append((m.start, m.end))
                grown = {d: self._join(d, taken.get(d, []) + sp) for d, sp in by_doc.items()}
                new = sum(_total(g) - _total(taken.get(d, [])) for d, g in grown.items())
                if used + new <= budget or (keep_first and i == 0 and not how):
                    used += new
                    taken.update(grown)
                    accepted.append((i, members))
                    if how == "wide":
                        widened.add(i)
                    elif how == "trim":
                        trimmed.add(i)
                    placed = True
                    break
            if not placed:
                skipped += 1
        items = self._items(result, accepted, widened, trimmed)
        stats = {**result.stats, "budget": budget, "assembled_cap": self.cap, "assembled_min_hits": self.min_hits,
                 "assembled_extra": self.extra, "assembled_trim": self.trim, "assembled_trim_fill": self.trim_fill,
                 "assembled_widened": len(widened),
                 "assembled_merged": sum(1 for it in items if len(it.provenance["assembly"]["hits"]) > 1),
                 "assembled_trimmed": len(trimmed), "assembled_skipped": skipped}
        return Result(result.query, tuple(items), result.retriever, stats)

    def _items(self, result: Result, accepted: list[tuple[int, tuple[Member, ...]]], widened: set[int],
               trimmed: set[int]) -> list[Item]:
        """Cut the accepted members to disjoint exact spans and group them into items (touching = one item)."""
        sets = _Sets()
        by_doc: dict[str, list[tuple[int, int, int, Member]]] = {}
        for i, members in accepted:
            sets.find(i)
            for m in members:
                by_doc.setdefault(m.doc_id, []).append((m.start, -m.end, i, m))
        kept: list[tuple[int, Member]] = []  # (hit number, disjoint member)
        for doc_id, rows in by_doc.items():
            rows.sort(key=lambda r: (r[0], r[1], r[2]))
            run_hit, run_end = -1, -1
            for start, neg_end, i, m in rows:
                end = -neg_end
                gap = self.bridge(doc_id, run_end, start) if run_hit >= 0 and start > run_end else None
                if run_hit >= 0 and (start <= run_end or gap is not None or self.touching(doc_id, run_end, start)):
                    sets.union(run_hit, i)
                else:
                    run_hit = i
                if end <= run_end:
                    continue  # already returned whole
                if start < run_end:  # overlaps what is returned: keep the new tail (an exact span still)
                    m = Member(m.chunk_id, doc_id, run_end, end, m.text[run_end - start:], m.section)
                if gap:  # the whitespace before it, returned with it
                    kept.append((i, Member(-1, doc_id, run_end, start, gap, m.section)))
                kept.append((i, m))
                run_end = max(run_end, end)
        groups: dict[int, list[Member]] = {}
        hits: dict[int, list[int]] = {}
        for i, _ in accepted:
            hits.setdefault(sets.find(i), []).append(i)
        for i, m in kept:
            groups.setdefault(sets.find(i), []).append(m)
        items = []
        for rank, root in enumerate(sorted(groups), start=1):
            first = result.items[root]
            doc_rank: dict[str, int] = {}
            for i in hits[root]:
                for m in result.items[i].members:
                    doc_rank.setdefault(m.doc_id, len(doc_rank))
            pieces = sorted(groups[root], key=lambda m: (doc_rank.get(m.doc_id, len(doc_rank)), m.start))
            prov = {**first.provenance, "assembly": {"hits": [result.items[i].rank for i in hits[root]],
                                                     "widened": [result.items[i].rank for i in hits[root]
                                                                 if i in widened],
                                                     "trimmed": [result.items[i].rank for i in hits[root]
                                                                 if i in trimmed],
                                                     "chunks": [m.chunk_id for m in pieces if m.chunk_id >= 0]}}
            items.append(Item(_fuse(pieces), first.score, rank, prov, first.title))
        return items
