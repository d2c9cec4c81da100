"""Checks an LLM answer passes before it is kept: grounded in its source, not the same for unrelated sources.

Shared by every LLM stage whose answer describes a text (document titles,
MC-indexing's keyword and summary views):

* **Content terms** (:func:`content_terms`) are BM25's analyser output
  (:func:`momoka.store.bm25.tokenize` with Porter stems and English stop words
  dropped: ``"Zebras Migrating"`` gives ``zebra``, ``migrat``; every CJK
  character is a term of its own).
* **Grounding** (:func:`grounding_problem`): at least a given share of an
  answer's distinct content terms occur among its source's, and the answer has
  at least one.
* **The same answer for unrelated sources** (:class:`AnswerLedger`): the same
  answer (same lower-cased words, :func:`answer_key`) given to two items whose
  sources share less than :data:`RELATED_JACCARD` of their content terms
  (Jaccard, from bottom-k sketches: :func:`sketch`, :func:`jaccard`) is a
  fallback for the later item, and for both when they are in the same batch.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["AnswerLedger", "MIN_GROUNDED_SHARE", "RELATED_JACCARD", "SKETCH_TERMS", "answer_key", "content_terms", "grounding",
           "grounding_problem", "jaccard", "sketch"]

#: Share of an answer's distinct content terms that must occur in its source by default (titles, keywords).
MIN_GROUNDED_SHARE = 0.5
#: Two sources are related when their content terms overlap at least this much (Jaccard).
RELATED_JACCARD = 0.25
#: Content terms kept per source for the Jaccard estimate (bottom-k sketch; exact up to this many terms).
SKETCH_TERMS = 64
#: Answers an :class:`AnswerLedger` remembers by default (least recently seen forgotten first).
LEDGER_ANSWERS = 10_000
#: Items remembered per answer by an :class:`AnswerLedger`.
LEDGER_PER_ANSWER = 8


def content_terms(text: str) -> set[str]:
    """The distinct content terms of ``text``: BM25's tokens with Porter stems, English stop words dropped (tokeniser
    rule 1: every CJK character a term)."""
    from ..store.bm25 import tokenize  # start-up: momoka.store.bm25

    return set(tokenize(text, stem=True, stopwords="english", tokenizer_version=1))


def grounding(answer: str, source_terms: set[str]) -> tuple[int, int]:
    """``(found, total)``: how many of ``answer``'s distinct content terms occur in ``source_terms``."""
    terms = content_terms(answer)
    return len(terms & source_terms), len(terms)


def grounding_problem(answer: str, source_terms: set[str], min_share: float = MIN_GROUNDED_SHARE, *,
                      what: str = "answer", where: str = "source") -> str | None:
    """Why ``answer`` is not grounded in a source with ``source_terms`` (None when it is): it needs a content
    term, and at least ``min_share`` of its distinct content terms must occur in the source. ``what`` and
    ``where`` name the two in the reason (``"title"``, ``"document"``)."""
    found, total = grounding(answer, source_terms)
    if total == 0:
        return f"the {what} has no content word"
    if found / total < min_share:  # a share, not found < min_share * total: 0.3 * 10 > 3 in floats
        return f"only {found} of the {what}'s {total} content words occur in the {where}"
    return None


def answer_key(answer: str) -> tuple[str, ...]:
    """What makes two answers "the same": their lower-cased words (BM25's tokens, stop words kept, no stems; rule 1:
    every CJK character a word)."""
    from ..store.bm25 import tokenize  # start-up: momoka.store.bm25

    return tuple(tokenize(answer, tokenizer_version=1))


def sketch(terms: set[str], k: int = SKETCH_TERMS) -> np.ndarray:
    """The bottom-``k`` sketch of a term set: the ``k`` smallest 64-bit hashes (BLAKE2b) of its terms, sorted."""
    hs = np.fromiter((int.from_bytes(hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                     "little") for t in terms), dtype=np.uint64, count=len(terms))
    hs.sort()
    return hs[:k].copy()


def jaccard(a: np.ndarray, b: np.ndarray, k: int = SKETCH_TERMS) -> float:
    """Jaccard similarity of two term sets from their bottom-``k`` sketches (:func:`sketch`): exact when the
    two sets together have at most ``k`` terms, else the bottom-k estimate (1.0 for two empty sets)."""
    union = np.union1d(a, b)[:k]
    if len(union) == 0:
        return 1.0
    both = np.intersect1d(a, b, assume_unique=True)
    return float(np.isin(union, both, assume_unique=True).sum()) / len(union)


class AnswerLedger:
    """The answers a run kept, to find the same answer given to unrelated sources.

    Remembers, per answer (:func:`answer_key`), up to :data:`LEDGER_PER_ANSWER` items with a sketch of the
    content terms of their sources; at most ``capacity`` answers (least recently seen forgotten first).
    ``what`` and ``of`` name the answer and the item in the reasons (``"title"``, ``"document"``).
    """

    def __init__(self, capacity: int = LEDGER_ANSWERS, *, what: str = "answer", of: str = "item"):
        self.capacity = int(capacity)
        self.what, self.of = what, of
        self._answers: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def check(self, entries: Sequence[tuple[Any, str, np.ndarray]]) -> dict[int, str]:
        """Check a batch of ``(item_id, answer, sketch)`` and remember them; ``{position: reason}`` of the
        entries whose answer was also given to an item unrelated to theirs (in this batch or earlier)."""
        keys = [answer_key(t) for _, t, _ in entries]
        groups: dict[tuple, list[int]] = {}
        for i, k in enumerate(keys):
            groups.setdefault(k, []).append(i)
        out: dict[int, str] = {}
        for k, members in groups.items():
            earlier = list(self._answers.get(k, ()))
            for i in members:
                item_id, _, sk = entries[i]
                others = earlier + [(entries[j][0], entries[j][2]) for j in members if j != i]
                for other_id, other_sk in others:
                    if other_id != item_id and jaccard(sk, other_sk) < RELATED_JACCARD:
                        out[i] = (f"the same {self.what} was given to {self.of} {other_id!r}, which shares less "
                                  f"than {RELATED_JACCARD:g} of its content words")
                        break
            held = self._answers.setdefault(k, [])
            self._answers.move_to_end(k)
            for i in members:
                if len(held) < LEDGER_PER_ANSWER and all(entries[i][0] != d for d, _ in held):
                    held.append((entries[i][0], entries[i][2]))
        while len(self._answers) > self.capacity:
            self._answers.popitem(last=False)
        return out
