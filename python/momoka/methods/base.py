"""The small typed protocols every method implements, and the one result type.

Components (see ``docs/architecture.md``):

* :class:`Chunker` -- ``chunker(document) -> list[Chunk]``, with ``name`` and ``params()`` (the contract is
  :class:`momoka.chunking.base.Chunker`, the same object, loaded on first use);
* :class:`Enricher` -- adds views or metadata for some documents of an index;
* :class:`Relator` -- adds rows of a relation (a sparse graph over chunk ids);
* :class:`Retriever` -- ``retrieve(query, k) -> Result``;
* :class:`Refiner` -- ``refine(query, result) -> Result``;
* :class:`Reader` -- ``answer(question, result) -> Answer``.

A :class:`Result` is the ranked list of :class:`Item` one retriever returns for
one query. An item joins one or more member chunks (:class:`Member`), each with
its exact span: ``document.text[start:end] == member.text``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._validate import MAX_COUNT
from ..errors import ConfigError
from ..stats import Stats

if TYPE_CHECKING:
    from ..chunking.base import Chunker

#: The context budget (characters) `momoka query/ask` fill, the reader sends, and `momoka eval` scores at by default.
DEFAULT_BUDGET = 5000
#: Documents run through the pipeline together while indexing with commits (and a Ray task's default size).
ADD_BATCH = 32
#: The default chunker of every command and of :meth:`momoka.Index.build`.
DEFAULT_CHUNKER = "recursive"
#: Chunk size (tokens) of the default chunker, chosen by the equal-budget evaluation (docs/results.md).
DEFAULT_CHUNK_SIZE = 100
#: The default retriever of :meth:`momoka.Index.search`, ``query``, ``ask`` and ``eval``.
DEFAULT_RETRIEVER = "hybrid"
#: Context assembly (:mod:`momoka.methods.assemble`) widens a hit to its paragraph when the paragraph spans at
#: most this many characters and holds at least :data:`DEFAULT_ASSEMBLE_MIN_HITS` hits of the ranking, or when it
#: adds at most :data:`DEFAULT_ASSEMBLE_EXTRA` characters to the hit: the rule with the best worst case over the
#: five shared sets (docs/results.md).
DEFAULT_ASSEMBLE_CAP = 1000
DEFAULT_ASSEMBLE_MIN_HITS = 2
DEFAULT_ASSEMBLE_EXTRA = 300
#: Context assembly tries this many of the first hits that do not fit what is left of the budget for a cut to their
#: best run of sentences (the one holding the most weight of the question's terms) instead of skipping them, and takes
#: the run when it fills at least :data:`DEFAULT_ASSEMBLE_TRIM_FILL` of what is left (docs/results.md).
DEFAULT_ASSEMBLE_TRIM = 1
DEFAULT_ASSEMBLE_TRIM_FILL = 0.5

__all__ = [
    "DEFAULT_ASSEMBLE_CAP",
    "DEFAULT_ASSEMBLE_EXTRA",
    "DEFAULT_ASSEMBLE_MIN_HITS",
    "DEFAULT_ASSEMBLE_TRIM",
    "DEFAULT_ASSEMBLE_TRIM_FILL",
    "DEFAULT_BUDGET",
    "DEFAULT_CHUNKER",
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_RETRIEVER",
    "SEPARATOR",
    "Answer",
    "Chunker",
    "Citation",
    "Enricher",
    "FallbackCounts",
    "Item",
    "Member",
    "Reader",
    "Refiner",
    "Relator",
    "Result",
    "Retriever",
    "check_budget",
]

def check_budget(budget: Any, *, name: str = "a budget", optional: bool = False) -> int | None:
    """``budget`` when it is an int in [1, :data:`~momoka._validate.MAX_COUNT`] (a number of characters), or
    None when ``optional``; else :class:`ConfigError` naming it ``name``."""
    if optional and budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= MAX_COUNT:
        raise ConfigError(f"{name} must be a positive number of characters up to {MAX_COUNT:,}"
                          f"{' (or None)' if optional else ''}, got {budget!r}")
    return budget


#: Separator of member texts when an item's text is read as one passage.
SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Member:
    """One chunk (or a part of one) inside a result item, with its exact span.

    ``chunk_id`` is the store's id (-1 for a span that is not a stored chunk,
    e.g. a sentence picked by a refiner); ``text == document.text[start:end]``.
    ``section`` is the path of headings the span lies under (Markdown, HTML,
    Word, a PDF's outline; empty otherwise). ``page`` and ``page_end`` are the
    1-based numbers of the pages holding the first and the last character of
    the span's text (equal when it lies on one page) for a document with pages
    (a PDF), ``None`` otherwise; :meth:`momoka.Index.search` sets them on every
    member (:meth:`momoka.methods.results.Results.pages` computes them).
    """

    chunk_id: int
    doc_id: str
    start: int
    end: int
    text: str
    section: tuple[str, ...] = ()
    page: int | None = field(default=None, compare=False)
    page_end: int | None = field(default=None, compare=False)

    @property
    def span(self) -> tuple[str, int, int]:
        """``(doc_id, start, end)``."""
        return (self.doc_id, self.start, self.end)

    def to_dict(self) -> dict:
        """A JSON-serialisable view."""
        return {"chunk_id": self.chunk_id, "doc_id": self.doc_id, "start": self.start, "end": self.end,
                "section": list(self.section), "page": self.page, "page_end": self.page_end, "text": self.text}


@dataclass(frozen=True)
class Item:
    """One ranked result: one or more member chunks, a score, a rank and its provenance.

    ``provenance`` says how the item was made: at least ``"retriever"``; also
    e.g. ``"view"`` (the vector/BM25 view searched) or ``"kind"`` (Trail: chunk,
    full_path, node or pair) and ``"source"`` (the chunk it was expanded from).
    ``title`` is the document title shown with it (None when unknown).

    A single-chunk item reads as that chunk: ``doc_id``, ``start``, ``end``,
    ``text``, ``chunk_id``, ``section``, ``page`` and ``page_end`` are those of
    the first member (``page``: 1-based, ``None`` for a document without pages).
    """

    members: tuple[Member, ...]
    score: float
    rank: int
    provenance: dict = field(default_factory=dict, compare=False, hash=False)
    title: str | None = None

    @property
    def composite(self) -> bool:
        """True when the item joins more than one chunk."""
        return len(self.members) > 1

    @property
    def chunk_id(self) -> int:
        return self.members[0].chunk_id

    @property
    def chunk_ids(self) -> tuple[int, ...]:
        return tuple(m.chunk_id for m in self.members)

    @property
    def doc_id(self) -> str:
        return self.members[0].doc_id

    @property
    def start(self) -> int:
        return self.members[0].start

    @property
    def end(self) -> int:
        return self.members[0].end

    @property
    def section(self) -> tuple[str, ...]:
        return self.members[0].section

    @property
    def page(self) -> int | None:
        """The first member's first page (1-based; None for a document without pages)."""
        return self.members[0].page

    @property
    def page_end(self) -> int | None:
        """The first member's last page (1-based; equal to :attr:`page` when it lies on one page)."""
        return self.members[0].page_end

    @property
    def span(self) -> tuple[str, int, int]:
        """The first member's ``(doc_id, start, end)``."""
        return self.members[0].span

    @property
    def spans(self) -> tuple[tuple[str, int, int], ...]:
        """``(doc_id, start, end)`` of every member, in member order."""
        return tuple(m.span for m in self.members)

    @property
    def text(self) -> str:
        """The members' texts joined by :data:`SEPARATOR` (no title)."""
        return SEPARATOR.join(m.text for m in self.members)

    @property
    def n_chars(self) -> int:
        """Characters of document text the item returns."""
        return sum(m.end - m.start for m in self.members)

    @property
    def retriever(self) -> str | None:
        return self.provenance.get("retriever")

    def to_dict(self) -> dict:
        """A JSON-serialisable view."""
        return {"rank": self.rank, "score": self.score, "title": self.title, "page": self.page,
                "page_end": self.page_end, "provenance": dict(self.provenance),
                "members": [m.to_dict() for m in self.members]}


@dataclass(frozen=True)
class Result(Sequence):
    """The ranked items one retriever returned for one query (a sequence of :class:`Item`).

    ``stats`` holds per-query counts the retriever reports (candidates scored,
    truncations, seconds ...).
    """

    query: str
    items: tuple[Item, ...]
    retriever: str
    stats: dict = field(default_factory=dict, compare=False, hash=False)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return list(self.items[i])
        return self.items[i]

    def __iter__(self) -> Iterator[Item]:
        return iter(self.items)

    def spans(self) -> list[list[tuple[str, int, int]]]:
        """Per item, the spans of its members: the form :func:`momoka.eval.evaluate_retrieval` takes."""
        return [list(it.spans) for it in self.items]

    def distinct_chunks(self, k: int | None = None) -> list[Member]:
        """Members flattened in rank order, each chunk once (first occurrence), cut at ``k``."""
        seen: set = set()
        out: list[Member] = []
        for it in self.items:
            for m in it.members:
                key = m.chunk_id if m.chunk_id >= 0 else m.span
                if key not in seen:
                    seen.add(key)
                    out.append(m)
        return out if k is None else out[:k]

    def fit(self, budget: int, *, keep_first: bool = True, assemble: Any = None) -> "Result":
        """The items that fit in ``budget`` characters.

        Without ``assemble``: the longest prefix of the items whose total
        length fits. An item longer than what is left ends the prefix (so the
        ranking's order is kept). With ``assemble``, an assembler (a callable
        ``assemble(result, budget, keep_first=...) -> Result``, e.g. the
        :class:`~momoka.methods.assemble.Assembler` of :meth:`Corpus.assembler <momoka.methods.corpus.Corpus.assembler>`):
        hits that touch are merged, a hit is widened to its paragraph when that
        fits, an item that does not fit is skipped and the fill goes on, and
        no character is returned twice.

        With ``keep_first`` (default) the best item is kept even when it alone
        is longer than the budget, so a search never comes back empty for want
        of room (evaluation at a budget is strict:
        :func:`momoka.eval.metrics.fit_budget`). ``stats["budget"]`` records the budget.
        """
        check_budget(budget)
        if assemble is not None:
            return assemble(self, budget, keep_first=keep_first)
        n = sum(1 for total in accumulate(it.n_chars for it in self.items) if total <= budget)
        if keep_first and self.items:
            n = max(n, 1)
        return Result(self.query, self.items[:n], self.retriever, {**self.stats, "budget": budget})

    def to_dict(self) -> dict:
        """A JSON-serialisable view."""
        return {"query": self.query, "retriever": self.retriever, "stats": dict(self.stats),
                "items": [it.to_dict() for it in self.items]}


@dataclass(frozen=True)
class Citation:
    """A passage an answer cites: its number in the reader's context and its exact span.

    ``section``, ``page`` and ``page_end`` are as for :class:`Member`: the
    heading path of the passage it quotes, and the 1-based pages of its first
    and last character in a document with pages (None otherwise), set by
    :meth:`momoka.Index.ask` on every citation and context passage.
    """

    number: int
    doc_id: str
    start: int
    end: int
    text: str
    section: tuple[str, ...] = ()
    page: int | None = field(default=None, compare=False)
    page_end: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        return {"number": self.number, "doc_id": self.doc_id, "start": self.start, "end": self.end,
                "section": list(self.section), "page": self.page, "page_end": self.page_end, "text": self.text}


@dataclass(frozen=True)
class Answer:
    """A reader's answer: the text, the passages it cites (exact spans) and every passage it was given.

    ``cited_by`` says how the citations were found: ``"model"`` (the answer's
    own ``[n]`` markers), ``"overlap"`` (the answer named none, so the passages
    holding most of its words are cited), ``"none"``, or ``"evidence"``.
    ``no_answer`` is true when the model said the passages do not hold the
    answer (then ``citations`` is empty).

    ``kind`` is ``"generated"`` (a model wrote ``text``) or ``"evidence"`` (no
    model wrote anything: ``text`` is the best sentence quoted from a document,
    ``citations`` the best sentences, each an exact span, best first).
    """

    question: str
    text: str
    citations: tuple[Citation, ...]
    context: tuple[Citation, ...]
    model: str | None = None
    usage: dict = field(default_factory=dict, compare=False, hash=False)
    cited_by: str = "model"
    kind: str = "generated"
    no_answer: bool = False

    def to_dict(self) -> dict:
        return {"question": self.question, "kind": self.kind, "answer": self.text, "model": self.model,
                "cited_by": self.cited_by, "no_answer": self.no_answer,
                "citations": [c.to_dict() for c in self.citations],
                "context": [c.to_dict() for c in self.context], "usage": dict(self.usage)}


@dataclass
class FallbackCounts(Stats):
    """Counts every LLM chunker keeps: units whose answer could not be parsed, or whose items could not be
    placed on the source, and were cut by the deterministic fallback instead (text is never lost).
    ``to_dict()`` adds their sum ``fallback``."""

    derived = ("fallback",)

    fallback_parse: int = 0
    fallback_unplaced: int = 0

    @property
    def fallback(self) -> int:
        """Units cut by the deterministic fallback."""
        return self.fallback_parse + self.fallback_unplaced


# --------------------------------------------------------------------------- protocols


@runtime_checkable
class Enricher(Protocol):
    """Adds vector/BM25 views or metadata for the given documents of an index.

    ``enrich`` is called after the documents' chunks are in the store (and the
    raw views are filled), with a :class:`~momoka.methods.corpus.Batch` (the
    store, the documents, embedding; never the index itself); it must only touch
    rows of those documents, so that adding documents later runs it on the new
    ones alone. ``describe()`` gives the settings recorded in the manifest. An optional
    ``prepare(batch)`` creates the artifacts it declares (``produces``) in ``batch.store``;
    :meth:`momoka.Index.build`, :meth:`~momoka.Index.add` and :meth:`~momoka.Index.extend` call it
    before any document, so a declared artifact exists even when no document gave it a row.
    """

    name: str

    def enrich(self, batch: Any, doc_ids: Sequence[str]) -> None: ...

    def describe(self) -> dict: ...


@runtime_checkable
class Relator(Protocol):
    """Adds the rows of a relation (a sparse graph over chunk ids) for the given documents, given a
    :class:`~momoka.methods.corpus.Batch`; an optional ``prepare(batch)`` as for :class:`Enricher`."""

    name: str

    def relate(self, batch: Any, doc_ids: Sequence[str]) -> None: ...

    def describe(self) -> dict: ...


@runtime_checkable
class Retriever(Protocol):
    """Query in, one :class:`Result` out. ``requires`` names the enrichers and relators it needs.

    Its factory receives a :class:`~momoka.methods.corpus.Corpus` (store reads, query
    embedding, results, documents, other retrievers), never the index itself.
    """

    name: str

    def retrieve(self, query: str, k: int = 5) -> Result: ...

    def retrieve_batch(self, queries: Sequence[str], k: int = 5) -> list[Result]: ...


@runtime_checkable
class Refiner(Protocol):
    """Narrows a retriever's result (e.g. to evidence sentences) and returns a :class:`Result`."""

    name: str

    def refine(self, query: str, result: Result) -> Result: ...


@runtime_checkable
class Reader(Protocol):
    """Answers a question from a :class:`Result`, citing the spans it used."""

    name: str

    def answer(self, question: str, result: Result) -> Answer: ...


def __getattr__(name: str) -> Any:
    """``Chunker``: the chunker contract, defined with the chunkers (:class:`momoka.chunking.base.Chunker`)."""
    if name == "Chunker":
        from ..chunking.base import Chunker  # start-up: momoka.chunking (numpy, the native kernels) off `momoka --help`

        globals()["Chunker"] = Chunker
        return Chunker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
