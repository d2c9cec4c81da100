"""Small-to-big context assembly: spend a character budget on context a reader can use.

A retriever ranks fine units (chunks of about 100 tokens). Cutting that ranking
at a budget (:meth:`momoka.methods.base.Result.fit` without an assembler) keeps
the longest prefix that fits, so evidence spread over a paragraph comes back
as fragments, or not at all when one long item ends the prefix.
:class:`Assembler` fills the budget instead, in rank order:

* a hit is **widened** to its parent unit, the enclosing paragraph (every live
  chunk of the same document with the same ``paragraph`` index in the chunk
  table), when the paragraph spans at most ``cap`` characters and its new
  characters fit what is left of the budget; otherwise the hit is taken alone;
* a hit (widened or not) that does not fit what is left is **skipped**, and
  the fill goes on with the next one;
* hits of one document that overlap or touch (only whitespace between them)
  are **merged** into one item, and no character is returned twice: a chunk
  already covered is dropped, one that overlaps covered text is cut to its
  new part (still an exact span: ``document.text[start:end] == member.text``).

Characters are counted as the members' lengths (the whitespace between two
chunks is not stored and not returned). That is why the default cap
(:data:`DEFAULT_ASSEMBLE_CAP`) is 0, merge and skip only: a widened paragraph
comes back as its chunks, with the whitespace between them uncovered, so
evidence that is a whole paragraph is still not covered completely, and the
widening spends budget that other hits would have used (docs/results.md). An assembled item lists its members
in document order; ``provenance["assembly"]`` names the ranks of the hits it
holds (``hits``) and those widened (``widened``); the result's ``stats``
count them (``assembled_widened``, ``assembled_merged``, ``assembled_skipped``).

The parent and adjacency tables are built once per state of the chunk table,
with numpy (:meth:`momoka.Index.assembler` caches them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from .base import DEFAULT_ASSEMBLE_CAP, Item, Member, Result, check_budget

__all__ = ["DEFAULT_ASSEMBLE_CAP", "Assembler"]


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint union of half-open intervals (touching ones joined)."""
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _measure_new(taken: list[tuple[int, int]], spans: list[tuple[int, int]]) -> int:
    """Characters of the union of ``spans`` outside the disjoint intervals ``taken``."""
    new = 0
    for s, e in _merge(spans):
        new += e - s
        for a, b in taken:
            if a < e and s < b:
                new -= min(b, e) - max(a, s)
    return new


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
        member: ``chunk id -> Member`` with the chunk's exact text (:meth:`momoka.Index.member`).
        cap: widen a hit only to a paragraph spanning at most this many
            characters (0: never widen; merging and skipping still apply).
    """

    def __init__(self, chunks: Any, member: Callable[[int], Member], cap: int = DEFAULT_ASSEMBLE_CAP):
        if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 0:
            raise ConfigError(f"an assembly cap must be a number of characters >= 0, got {cap!r}")
        self.cap = int(cap)
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

    def _widened(self, item: Item) -> tuple[Member, ...] | None:
        """The item's members with each stored chunk replaced by its paragraph when that spans at most
        :attr:`cap` characters; None when nothing widens."""
        if not self.cap:
            return None
        out: list[Member] = []
        grew = False
        for m in item.members:
            fam = self.parent(m.chunk_id) if m.chunk_id >= 0 else ()
            if len(fam) > 1 and self.parent_span(m.chunk_id) <= self.cap:
                out.extend(m if c == m.chunk_id else self._member(c) for c in fam)
                grew = True
            else:
                out.append(m)
        return tuple(out) if grew else None

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
        used = skipped = 0
        for i, item in enumerate(result.items):
            wide = self._widened(item)
            choices = ((wide, True), (item.members, False)) if wide is not None else ((item.members, False),)
            for members, is_wide in choices:
                by_doc: dict[str, list[tuple[int, int]]] = {}
                for m in members:
                    by_doc.setdefault(m.doc_id, []).append((m.start, m.end))
                new = sum(_measure_new(taken.get(d, []), sp) for d, sp in by_doc.items())
                if used + new <= budget or (keep_first and i == 0 and not is_wide):
                    used += new
                    for d, sp in by_doc.items():
                        taken[d] = _merge(taken.get(d, []) + sp)
                    accepted.append((i, members))
                    if is_wide:
                        widened.add(i)
                    break
            else:
                skipped += 1
        items = self._items(result, accepted, widened)
        stats = {**result.stats, "budget": budget, "assembled_cap": self.cap, "assembled_widened": len(widened),
                 "assembled_merged": sum(1 for it in items if len(it.provenance["assembly"]["hits"]) > 1),
                 "assembled_skipped": skipped}
        return Result(result.query, tuple(items), result.retriever, stats)

    def _items(self, result: Result, accepted: list[tuple[int, tuple[Member, ...]]], widened: set[int]) -> list[Item]:
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
                if run_hit >= 0 and (start < run_end or self.touching(doc_id, run_end, start)):
                    sets.union(run_hit, i)
                else:
                    run_hit = i
                if end <= run_end:
                    continue  # already returned whole
                if start < run_end:  # overlaps what is returned: keep the new tail (an exact span still)
                    m = Member(m.chunk_id, doc_id, run_end, end, m.text[run_end - start:], m.section)
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
            members = tuple(sorted(groups[root], key=lambda m: (doc_rank.get(m.doc_id, len(doc_rank)), m.start)))
            prov = {**first.provenance, "assembly": {"hits": [result.items[i].rank for i in hits[root]],
                                                     "widened": [result.items[i].rank for i in hits[root]
                                                                 if i in widened]}}
            items.append(Item(members, first.score, rank, prov, first.title))
        return items
