"""Sentence and paragraph segmentation (native, GIL released).

Offsets are Python ``str`` offsets (code points), exact for any text
(Latin-1, CJK, emoji), returned as two ``int64`` numpy arrays
``(starts, ends)``: span ``k`` is ``text[starts[k]:ends[k]]``. Spans never
include surrounding whitespace (as ``str.isspace`` defines it), are sorted and
do not overlap; sentences never cross a paragraph boundary.

Rules (see ``docs/text.md`` for the full list): a sentence ends after
``. ! ? …`` (and runs like ``?!`` or ``...``) plus closing quotes/brackets
when whitespace follows and the next word does not start lowercase; after
CJK ``。！？`` (plus closing quotes) without needing whitespace; never after an
abbreviation (Dr. Mr. e.g. i.e. U.S. ...), a capital initial (J. R. R.
Tolkien), ``No. 5``-style prefixes before a digit, or inside a number
(3.14). A blank line always ends a sentence. What a single line break does is
set by ``newlines``: ``"auto"`` (default) ends a sentence after a heading-like
line (short, no final punctuation, next line not lowercase) or a line ending
in ``:``, so hard-wrapped prose stays joined; ``"ignore"`` treats it as a
space; ``"break"`` always ends the sentence.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from .. import _core
from ..errors import ConfigError, InputError

__all__ = ["split_sentences", "split_paragraphs", "get_segmenter", "span_sentences"]


@lru_cache(maxsize=32)
def _segmenter(newlines: str, abbreviations: tuple[str, ...]) -> _core.Segmenter:
    return _core.Segmenter(newlines, abbreviations)


NEWLINE_MODES = ("auto", "ignore", "break")


def get_segmenter(newlines: str = "auto", abbreviations: Iterable[str] = ()) -> _core.Segmenter:
    """A (cached) native segmenter.

    ``abbreviations`` extends the built-in list with words that never end a
    sentence (case-insensitive; a trailing period is ignored: ``"Ph.D"``,
    ``"approx."``). ``newlines`` is ``"auto"``, ``"ignore"`` or ``"break"``
    (what a single line break does; a blank line always ends a sentence).
    """
    if newlines not in NEWLINE_MODES:
        raise ConfigError(f"newlines must be one of {', '.join(NEWLINE_MODES)}; got {newlines!r}")
    abbr = tuple(sorted(set(abbreviations))) if abbreviations else ()
    for a in abbr:
        if not isinstance(a, str):
            raise TypeError(f"abbreviations must be str, got {type(a).__name__}")
    return _segmenter(newlines, abbr)


def _check_str(text: object) -> None:
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")


def split_sentences(
    text: str, *, newlines: str = "auto", abbreviations: Iterable[str] = ()
) -> tuple[np.ndarray, np.ndarray]:
    """Sentence spans of ``text`` as ``(starts, ends)`` int64 arrays of str offsets.

    Paragraphs (blank-line separated) are found first and sentences are split
    inside each, so no sentence crosses a blank line.
    """
    _check_str(text)
    return get_segmenter(newlines, abbreviations).split(text)


def split_sentences_within(
    text: str,
    starts: np.ndarray,
    ends: np.ndarray,
    *,
    newlines: str = "auto",
    abbreviations: Iterable[str] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Sentence spans inside each ``[starts[k], ends[k])`` region (e.g. parsed paragraphs).

    Regions must be sorted and disjoint for the result to be sorted; blank
    lines inside a region still end sentences.
    """
    _check_str(text)
    return get_segmenter(newlines, abbreviations).split_within(
        text, np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(ends, dtype=np.int64)
    )


def split_paragraphs(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Paragraph spans of ``text`` as ``(starts, ends)`` int64 arrays.

    Paragraphs are separated by a blank line (a whitespace run holding two or
    more line breaks; ``\\r\\n`` counts once) or by U+2029, and are trimmed of
    surrounding whitespace.
    """
    _check_str(text)
    return _core.split_paragraphs(text)


def _merged_spans(spans: Iterable) -> list[tuple[str, int, str]]:
    """Spans (objects with ``doc_id``, ``start``, ``end``, ``text``) merged per document:
    ``(doc_id, start, text)`` in first-seen order."""
    by_doc: dict[str, list[tuple[int, int, str]]] = {}
    for m in spans:
        if m.end <= m.start:
            continue
        if len(m.text) != m.end - m.start:
            raise InputError(f"member {m.doc_id}[{m.start}:{m.end}] has {len(m.text)} characters of text, "
                             f"not {m.end - m.start}: not an exact span")
        by_doc.setdefault(m.doc_id, []).append((m.start, m.end, m.text))
    out: list[tuple[str, int, str]] = []
    for doc_id, spans in by_doc.items():
        spans.sort()
        cur_s, cur_e, cur_t = spans[0]
        for s, e, t in spans[1:]:
            if s <= cur_e:  # overlapping or touching: extend with the part past cur_e
                if e > cur_e:
                    cur_t += t[cur_e - s:]
                    cur_e = e
            else:
                out.append((doc_id, cur_s, cur_t))
                cur_s, cur_e, cur_t = s, e, t
        out.append((doc_id, cur_s, cur_t))
    return out


def span_sentences(spans: Iterable) -> list[tuple[str, int, int, str]]:
    """``(doc_id, start, end, text)`` of every non-blank sentence of ``spans``, in document order.

    ``spans`` are objects with ``doc_id``, ``start``, ``end`` and ``text`` (members,
    citations), each an exact span of its document; overlapping or touching spans of
    one document are merged first, so a shared sentence comes once. Offsets are the
    document's.
    """
    out: list[tuple[str, int, int, str]] = []
    for doc_id, base, text in _merged_spans(spans):
        starts, ends = split_sentences(text)
        for s, e in zip(starts.tolist(), ends.tolist()):
            if text[s:e].strip():
                out.append((doc_id, base + s, base + e, text[s:e]))
    return out
