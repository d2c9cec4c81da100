"""The ``recursive`` chunker: recursive splitting over a separator hierarchy under a size limit, and
:func:`looks_hard_wrapped`, which picks its separators for hard-wrapped prose."""

from __future__ import annotations

import re
from typing import Any, Sequence

from .._validate import check_int
from ..errors import ConfigError
from ._splitter import SENTENCE, Splitter
from ._tokens import resolve_tokenizer
from .base import ClassicChunker, _check_unit

__all__ = ["RecursiveChunker", "looks_hard_wrapped"]

_SENTENCE_END = re.compile(r"[.!?:;][\"')\]]*$")
_CELL_GAP = re.compile(r" {3,}|\t|\|")


def _check_separators(separators: Any) -> tuple:
    if isinstance(separators, str) or not isinstance(separators, Sequence) or not separators:
        raise ConfigError("separators must be a non-empty sequence of strings (or SENTENCE / PARAGRAPH)")
    for s in separators:
        if not isinstance(s, str) or s == "":
            raise ConfigError(f"every separator must be a non-empty string, got {s!r}")
    return tuple(separators)


class RecursiveChunker(ClassicChunker):
    """Recursive splitting over a separator hierarchy, under a size limit.

    The text is cut after each occurrence of the first separator and the
    pieces are joined greedily while they fit in ``size``; a piece still too
    big is split the same way with the next separator, and so on; what is
    still too big after the last separator is cut by characters or tokens.
    :data:`SENTENCE` and :data:`PARAGRAPH` stand for the document's own
    sentence and paragraph boundaries. Every chunk fits in ``size`` except a
    single token (``unit="tokens"``) bigger than the limit.
    """

    name = "recursive"
    keep_headings_with_text = True
    DEFAULT_SEPARATORS = ("\n\n", "\n", SENTENCE, " ")
    #: For hard-wrapped prose (lines cut at ~70 characters inside sentences): sentences before line breaks,
    #: chosen per document by ``hard_wrap``. Not for every document: on all of the shared sets' documents
    #: it costs 10.3 points of complete coverage at 5,000 characters on DragonBall and 13.8 on Qasper
    #: (tables and lists whose lines carry no sentence end), docs/chunking.md.
    HARD_WRAPPED_SEPARATORS = ("\n\n", SENTENCE, "\n", " ")

    HARD_WRAP_MODES = ("off", "auto", "on")

    def __init__(
        self,
        size: int = 256,
        separators: Sequence[str] = DEFAULT_SEPARATORS,
        unit: str = "tokens",
        tokenizer: Any = None,
        hard_wrap: str = "off",
        max_embed_tokens: int | None = None,
        embed_tokenizer: Any = None,
        glue_titles: bool = False,
    ):
        self.size = check_int(size, "size", minimum=1)
        self.separators = _check_separators(separators)
        self.unit = _check_unit(unit, tokenizer)
        self.tokenizer = tokenizer
        self._source = resolve_tokenizer(tokenizer) if unit == "tokens" else None
        if hard_wrap not in self.HARD_WRAP_MODES:
            raise ConfigError(f"hard_wrap must be one of {', '.join(self.HARD_WRAP_MODES)}, not {hard_wrap!r}")
        #: ``"auto"``: a document that :func:`looks_hard_wrapped` is split at sentences before single line
        #: breaks; ``"on"``: every document; ``"off"``: the separators as given. ``momoka index`` and
        #: :meth:`momoka.Index.build` use ``"auto"`` (:func:`momoka.methods.pipeline.chunker_params`); the
        #: class default stays ``"off"`` so stores built before the option chunk new documents as before.
        self.hard_wrap = hard_wrap
        if not isinstance(glue_titles, bool):
            raise ConfigError(f"glue_titles must be true or false, not {glue_titles!r}")
        #: True: no cut falls between a heading or a title line (the first line of a paragraph of several
        #: lines, at most 80 characters, not ending a sentence: ``Battle of Calabria`` over its text) and
        #: the text after it, at any separator, so a title is never a chunk alone or the end of one.
        #: ``momoka index`` and :meth:`momoka.Index.build` use True; the class default stays False so stores
        #: built before the option chunk new documents as before.
        self.glue_titles = glue_titles
        self._limit_embedding(max_embed_tokens, embed_tokenizer)

    def params(self) -> dict:
        params = {"size": self.size, "separators": self.separators, "unit": self.unit, "hard_wrap": self.hard_wrap}
        if self.glue_titles:
            params["glue_titles"] = True
        return self._embed_params(params)

    def _embed_separators(self, sp: Splitter) -> tuple:
        return self.separators_for(sp.text)

    def _token_limit(self) -> int | None:
        return self.size if self.unit == "tokens" else None

    def separators_for(self, text: str) -> tuple:
        """The separators used for ``text``: a single line break moves after :data:`SENTENCE` where the
        hard-wrap mode says so."""
        seps = self.separators
        if self.hard_wrap == "off" or "\n" not in seps or SENTENCE not in seps:
            return seps
        if self.hard_wrap == "auto" and not looks_hard_wrapped(text):
            return seps
        i, j = seps.index("\n"), seps.index(SENTENCE)
        if i > j:
            return seps
        out = list(seps)
        out.insert(j, out.pop(i))  # the line break goes right after SENTENCE
        return tuple(out)

    def _spans(self, sp: Splitter) -> list:
        return sp.split_ranges([(sp.first_nonws(0, sp.n), sp.n)], self.separators_for(sp.text), self.size)


def looks_hard_wrapped(text: str, *, min_lines: int = 20) -> bool:
    """True for prose hard-wrapped at a fixed width: at least half the non-blank lines 55-80 characters
    long and not table rows, and at least half of those ending inside a sentence (no ``. ! ? : ;``).

    Plain-text licences, RFCs and Gutenberg books are; tables, lists, Markdown and HTML text, and
    documents with one paragraph per line are not (none of the five shared retrieval sets' documents
    is; docs/chunking.md).
    """
    lines = [ln.rstrip() for ln in text.split("\n") if ln.strip()]
    if len(lines) < min_lines:
        return False
    # a table row (runs of spaces, tabs or bars between cells) is not a wrapped line of prose
    wrapped = [ln for ln in lines if 55 <= len(ln) <= 80 and not _CELL_GAP.search(ln.strip())]
    if 2 * len(wrapped) < len(lines):
        return False
    open_ended = sum(1 for ln in wrapped if not _SENTENCE_END.search(ln))
    return 2 * open_ended >= len(wrapped)
