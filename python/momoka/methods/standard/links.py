"""Title links: a passage that names another passage's title brings that passage in right after it.

A bridge question ("Where was the director of film X born?") needs two passages: the one about X, which
the question matches, and the one about the director, which it does not name. The first names the
second by its title, as an encyclopaedia links its articles (HotpotQA's bridge questions were built
from those links). :func:`link_titles` follows such mentions from the top of a ranking: for each of
its first ``top`` items, every title of another passage written in the item's text (from a word start; the
first letter as in the title, the others in any case: "Excalibur (Film)" names "Excalibur (film)") brings the passage that title heads into the ranking right after the item, unless
it is already ranked there or above. A title links only when it

- heads a passage, has at least 4 characters and a capital letter. A title heads the first chunk of
  its document when it is the document's title (a corpus of pages, a wiki, a folder of files: each
  page's title is its document's, not a line of its text), and the chunk that holds it when it is a
  title line in the chunk or a section or title line its contextual header names (:func:`chunk_titles`;
  a long document's sections);
- is not written in the query (those passages are placed by the query's own links, below) and is not a
  title of the linking item itself (its own heading, or its own document's title);
- is rare in the collection: its rarest BM25 term is in at most ``max(2, 2 %)`` of the chunks (an
  ordinary section name such as "Evaluation" or "Dataset" is not a link).

Each linked passage takes the score of the item that names it, so scores never increase down the
list.

The question itself links too: a passage whose (linkable) title the question writes ("Who is older,
Annie Morton or Terry Richardson?") is placed right after the first item, in the order named, unless
it already ranks that high (within the first item and the named passages); it takes the first item's
score. A comparison question names both passages it needs, but the one its other terms favour less
can rank far down (16th for "Terry Richardson", whose passage writes "Terrence Richardson"); its
title is the surest sign of what it is about.

Titles need a capital letter and are found from whitespace word starts, so text in scripts without
case or spaces between words (Chinese, Japanese) gets no links. The hybrid retriever applies it after
the coverage re-rank (its ``links`` option, the number of top items followed, 0 turning links off;
``query_links=False`` keeps the items' links only).
The table of titles (:class:`TitleTable`) is built once per retriever from the stored chunks (their
text and ``metadata["header"]``) and their documents' titles.
"""

from __future__ import annotations

import re
import sys
import types
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from ..._core import split_paragraphs
from ...chunking._splitter import title_lines

__all__ = ["chunk_titles", "DocumentTitles", "TitleTable", "link_titles", "RARE_SHARE", "RARE_MIN"]

#: A title links only when its rarest term is in at most this share of the chunks ...
RARE_SHARE = 0.02
#: ... or in at most this many chunks (small collections).
RARE_MIN = 2
_PARENTHESIS = re.compile(r"\s*\([^()]*\)$")  # "Battle of Manila (1945)" is written "Battle of Manila"
_WORD = re.compile(r"\S+")
_TRAILING = ".,;:!?\"')]}"  # punctuation a word may carry after a title's first word


def _norm(title: str) -> str:
    return _PARENTHESIS.sub("", " ".join(title.split())).strip()


def _is_title(t: str) -> bool:
    """At least 4 characters and a capital letter: what may be a title."""
    return len(t) >= 4 and any(ch.isupper() for ch in t)


def _word_keys(word: str) -> list[str]:
    """A text's word and the same word without each trailing punctuation mark, longest first: the keys a
    title's first word is looked up by ("Outrage!?" -> "Outrage!" -> "Outrage")."""
    keys = [word]
    while len(word) > 1 and word[-1] in _TRAILING:
        word = word[:-1]
        keys.append(word)
    return keys


def _fold(word: str) -> str:
    """A word's look-up key: its first character as written, the rest in lower case."""
    return word[:1] + word[1:].lower()


def _written(text: str, at: int, title: str) -> bool:
    """Whether ``text`` writes ``title`` at ``at``: the same characters, or the same but for the case of
    letters after the first ("Excalibur (Film)" for the title "Excalibur (film)"; the first letter's case must
    match, so "the crown" in running text does not name "The Crown")."""
    if text.startswith(title, at):
        return True
    part = text[at:at + len(title)]
    return len(part) == len(title) and part[:1] == title[:1] and part.lower() == title.lower()


def _at(text: str, m: re.Match, by_key: dict[str, tuple[tuple[int, ...], dict]]) -> list[str]:
    """The titles that ``text`` writes at the word ``m`` (:func:`_written`): those written exactly, or when
    none is, those written but for the case of later letters (two titles that differ only in case, "Marco Da
    Silva" and "Marco da Silva", are two subjects: the exact one wins). ``by_key`` (:meth:`TitleTable._keys`):
    per :func:`_fold` of a title's first word, the titles' lengths and, per (length, lower-cased title), the
    titles in table order; a title is looked up by the text's slice of its length, so a word that starts
    thousands of titles ("The") costs one look-up per length, not one comparison per title."""
    at = m.start()
    found: list[str] = []
    for key in _word_keys(m.group()):
        entry = by_key.get(_fold(key))
        if entry is None:
            continue
        lengths, by_lower = entry
        hits: list[tuple[int, str]] = []
        for n in lengths:
            part = text[at:at + n]
            if len(part) < n:
                break  # (lengths ascend: the text ends before the longer ones)
            for order, t in by_lower.get((n, part.lower()), ()):
                if part[:1] == t[:1]:
                    hits.append((order, t))
        hits.sort()
        found += [t for _, t in hits]
    exact = [t for t in found if text.startswith(t, at)]
    return exact or found


def chunk_titles(text: str, header: str | None, doc_title: str | None = None) -> list[str]:
    """The titles a chunk holds: the lines of its contextual ``header`` but its document's title
    (``doc_title``: its section path and title line) and the title lines in its text
    (:func:`momoka.chunking.title_lines`), each without a trailing parenthesis, in that order, those of at
    least 4 characters with a capital letter."""
    own_title = " ".join((doc_title or "").split())
    parts = [line for line in (header or "").split("\n") if line and line != own_title]
    if "\n" in text.strip():  # a title line is a line over another
        starts, ends = split_paragraphs(text)
        doc = types.SimpleNamespace(text=text, paragraphs=np.stack([starts, ends], axis=1).reshape(-1))
        line_ends, _ = title_lines(doc)
        parts += [text[text.rfind("\n", 0, e) + 1:e] for e in line_ends.tolist()]
    out: list[str] = []
    for p in parts:
        t = _norm(p)
        if _is_title(t) and t not in out:
            out.append(t)
    return out


class TitleTable:
    """The titles of a collection's chunks: which chunk each title heads (the first chunk holding it, per
    document), each chunk's own titles, and which titles are rare enough to link (see the module doc).

    ``chunks``: ``(chunk id, doc id, text, header, document title)`` in document order (a document's title
    heads its first chunk: :attr:`doc_title`); ``doc_freq(title)``:
    the number of chunks holding the title's rarest term; ``n_chunks``: the collection's size.
    """

    def __init__(self, chunks: Iterable[tuple[int, str, str, str | None, str | None]], doc_freq: Callable[[str], int],
                 n_chunks: int):
        self.heads: dict[str, dict[str, int]] = defaultdict(dict)  # title -> {doc id: first chunk}
        self.own: dict[int, tuple[str, ...]] = {}  # the chunks that hold a title: their titles (one string each)
        self.doc_title: dict[str, str] = {}  # doc id -> its title (as linked), for documents with one
        for cid, doc_id, text, header, doc_title in chunks:
            if doc_id not in self.doc_title:
                t = _norm(doc_title or "")
                self.doc_title[doc_id] = sys.intern(t) if _is_title(t) else ""
                if self.doc_title[doc_id]:
                    self.heads[self.doc_title[doc_id]].setdefault(doc_id, cid)
            titles = tuple(sys.intern(t) for t in chunk_titles(text, header, doc_title))
            if titles:
                for t in titles:
                    self.heads[t].setdefault(doc_id, cid)
                self.own[cid] = titles
        limit = max(RARE_MIN, RARE_SHARE * n_chunks)
        self.by_word: dict[str, list[str]] = defaultdict(list)
        self._linkable = 0
        for t in self.heads:
            if doc_freq(t) <= limit:
                self.by_word[_fold(t.split()[0])].append(t)
                self._linkable += 1
        self._by_key = self._keys(self.by_word)

    @staticmethod
    def _keys(by_word: dict[str, list[str]]) -> dict[str, tuple[tuple[int, ...], dict]]:
        """Per first-word key: the lengths of its titles (ascending) and, per (length, lower-cased title),
        ``(position in by_word[key], title)`` pairs (what :func:`_at` looks titles up by)."""
        out: dict[str, tuple[tuple[int, ...], dict]] = {}
        for key, titles in by_word.items():
            by_lower: dict[tuple[int, str], list[tuple[int, str]]] = defaultdict(list)
            for order, t in enumerate(titles):
                by_lower[(len(t), t.lower())].append((order, t))
            out[key] = (tuple(sorted({len(t) for t in titles})), dict(by_lower))
        return out

    def __len__(self) -> int:
        """The number of linkable titles."""
        return self._linkable

    def mentions(self, text: str) -> list[str]:
        """The linkable titles written in ``text`` (from a word start, the first letter's case as
        in the title, the others' any: :func:`_written`), in text order; a
        title's first word may carry the text's punctuation (``Outrage!?`` names ``Outrage!``)."""
        out: list[str] = []
        for m in _WORD.finditer(text):
            for t in _at(text, m, self._by_key):
                if t not in out:
                    out.append(t)
        return out

    def head(self, title: str, doc_id: str) -> int:
        """The chunk ``title`` heads: in ``doc_id`` when it heads one there, else in the first document."""
        where = self.heads[title]
        return where.get(doc_id, next(iter(where.values())))


def link_titles(ranking: Sequence[tuple[int, float]], query: str, table: TitleTable, text_of: Callable[[int], str],
                doc_of: Callable[[int], str], top: int, k: int,
                allowed: Callable[[int], bool] | None = None, *,
                query_links: bool = True) -> list[tuple[int, float]]:
    """``ranking`` (``(id, score)``, best first) with, right after each of its first ``top`` items, the passages
    that item names by title (see the module doc), in the order named, cut to ``k`` items. An item already
    placed (above, or as an earlier item's link) is not placed again, and its own links are not followed.
    A linked passage takes the linking item's score when higher than its own. Then, unless ``query_links``
    is False, the passages ``query`` names by title are placed right after the first item (module doc).
    ``text_of(id)`` and ``doc_of(id)``: a chunk's text and document; ``allowed(id)``: whether a linked chunk
    may be returned (a document filter)."""
    items = list(ranking)
    if top <= 0 or not items or not len(table):
        return items[:k]
    out, score = _item_links(items, query, table, text_of, doc_of, top, k, allowed)
    if query_links:
        out = _query_links(out, score, query, table, doc_of, allowed)
    return [(c, score[c]) for c in out[:k]]


def _item_links(items: list, query: str, table: TitleTable, text_of: Callable[[int], str],
                doc_of: Callable[[int], str], top: int, k: int,
                allowed: Callable[[int], bool] | None) -> tuple[list[int], dict[int, float]]:
    """The ranking's ids with each top item's named passages right after it, and every id's score."""
    score = dict(items)
    out: list[int] = []
    placed: set[int] = set()
    for rank, (cid, _) in enumerate(items):
        if len(out) >= k:
            break
        if cid in placed:
            continue
        out.append(cid)
        placed.add(cid)
        if rank >= top:
            continue
        own = table.own.get(cid, ())
        doc = doc_of(cid)
        for t in table.mentions(text_of(cid)):
            if t in query or t in own or t == table.doc_title.get(doc):
                continue
            target = table.head(t, doc)
            if target in placed or (allowed is not None and not allowed(target)):
                continue
            out.append(target)
            placed.add(target)
            score[target] = max(score.get(target, float("-inf")), score[cid])
    return out, score


def _query_links(out: list[int], score: dict[int, float], query: str, table: TitleTable,
                 doc_of: Callable[[int], str], allowed: Callable[[int], bool] | None) -> list[int]:
    """``out`` with the passages ``query`` names by title right after its first item (module doc)."""
    first = out[0]
    named: list[int] = []
    for t in table.mentions(query):
        target = table.head(t, doc_of(first))
        if target not in named and (allowed is None or allowed(target)):
            named.append(target)
    high = set(out[:1 + len(named)])
    move = [c for c in named if c not in high]
    if not move:
        return out
    for c in move:
        score[c] = max(score.get(c, float("-inf")), score[first])
    rest = [c for c in out if c not in move]
    return rest[:1] + move + rest[1:]


class DocumentTitles:
    """The documents a text names by their titles (the hybrid retriever's ``named_documents``).

    ``documents``: ``(doc id, title)`` pairs. A title counts when it has at least 4 characters and a capital
    letter; the documents that share it (namesakes: two companies of one name, one company's reports of
    several years) are named together. :meth:`mentions` reads the text from each word start
    (the first letter's case as in the title, the others' any; a title's first word may carry punctuation, as in :meth:`TitleTable.mentions`),
    taking the longest title that starts there and going on after it.
    """

    def __init__(self, documents: Iterable[tuple[str, str | None]]):
        owners: dict[str, list[str]] = defaultdict(list)
        for doc_id, title in documents:
            t = " ".join((title or "").split())
            if _is_title(t):
                owners[t].append(doc_id)
        self.docs_of: dict[str, tuple[str, ...]] = {t: tuple(ds) for t, ds in owners.items()}
        self.by_word: dict[str, list[str]] = defaultdict(list)
        for t in self.docs_of:
            self.by_word[_fold(t.split()[0])].append(t)
        self._by_key = TitleTable._keys(self.by_word)

    def __len__(self) -> int:
        """The number of titles that count."""
        return len(self.docs_of)

    def mentions(self, text: str) -> list[tuple[str, tuple[str, ...]]]:
        """``(title, doc ids)`` of each title ``text`` names, in text order, each title once (the doc ids: every
        document of that title, in the order given)."""
        out: list[tuple[str, tuple[str, ...]]] = []
        pos = 0
        for m in _WORD.finditer(text):
            if m.start() < pos:
                continue
            best = max(_at(text, m, self._by_key), key=len, default=None)
            if best is not None:
                pos = m.start() + len(best)
                if all(t != best for t, _ in out):
                    out.append((best, self.docs_of[best]))
        return out
