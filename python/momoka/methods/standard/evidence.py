"""The extractive reader: the sentences that best answer a question, quoted from the documents.

With no endpoint, ``momoka ask`` answers with this reader: no model writes
anything, so nothing is invented. The passages within the budget (the same
ones the LLM reader would be given, :func:`~.reader.budget_context`) are cut
into sentences by the shared segmenter (:func:`momoka.text.span_sentences`:
overlapping passages merged first, exact document offsets), and each sentence
is scored by

    score = cos(embed(question), embed(sentence)) + term_weight * terms(question, sentence)

where ``terms`` is the idf-weighted share of the question's content words
(BM25's analyser: lower case, English stop words dropped, Porter stems) that the
sentence contains, the idf taken over the candidate sentences. The best
``sentences`` are returned as an :class:`~momoka.methods.base.Answer` of kind
``"evidence"``: ``citations`` are the sentences, best first, each ``doc
[start:end]`` with ``document.text[start:end] == sentence``; ``text`` is the
best one. A store without vectors (no embedder) scores by the terms alone, with
a warning.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..._validate import check_float, check_int
from ...errors import InputError
from ...text import span_sentences
from ..base import DEFAULT_BUDGET, Answer, Citation, Result, check_budget
from ..grounding import content_terms
from ...registry import register
from .reader import budget_context

#: Sentences quoted by default.
DEFAULT_SENTENCES = 3
#: Weight of the question-term share beside the embedder's cosine.
TERM_WEIGHT = 0.5


def term_scores(question: str, sentences: list[str]) -> np.ndarray:
    """Per sentence, the idf-weighted share of the question's content words it contains (0 to 1).

    idf(t) = ln(1 + N / df(t)) over the ``N`` sentences; a question with no
    content word scores 0 everywhere.
    """
    q = content_terms(question)
    sets = [content_terms(s) for s in sentences]
    if not q or not sets:
        return np.zeros(len(sentences), dtype=np.float64)
    n = len(sets)
    idf = {t: math.log(1.0 + n / max(1, sum(t in s for s in sets))) for t in q}
    total = sum(idf.values())
    return np.asarray([sum(idf[t] for t in q & s) / total for s in sets], dtype=np.float64)


class EvidenceReader:
    """Answer by quoting the best sentences of the retrieved passages (no generation).

    Args:
        embedder: anything with ``embed(texts)`` (and optionally ``embed_query``):
            the index's embedder. ``None``: terms only (a warning says so).
        max_context_chars: characters of passages searched (the ``--budget``;
            ``None``: every passage of the result).
        sentences: how many sentences to quote.
        term_weight: weight of the question-term share beside the cosine.
    """

    name = "evidence"

    def __init__(self, embedder: Any = None, *, max_context_chars: int | None = DEFAULT_BUDGET,
                 sentences: int = DEFAULT_SENTENCES, term_weight: float = TERM_WEIGHT):
        check_budget(max_context_chars, name="max_context_chars", optional=True)
        sentences = check_int(sentences, "sentences", minimum=1)
        term_weight = check_float(term_weight, "term_weight", minimum=0)
        self.embedder = embedder
        self.max_context_chars = max_context_chars
        self.sentences = sentences
        self.term_weight = float(term_weight)

    def scores(self, question: str, sentences: list[str]) -> np.ndarray:
        """The score of each sentence (cosine + ``term_weight`` x term share; terms only without an embedder)."""
        s = self.term_weight * term_scores(question, sentences)
        if self.embedder is None:
            return s
        from ..ets.candidates import embed_query  # start-up: momoka.methods.ets.candidates

        q = embed_query(self.embedder, question)
        v = np.asarray(self.embedder.embed(sentences), dtype=np.float32)
        v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return (v @ q).astype(np.float64) + s

    def answer(self, question: str, result: Result) -> Answer:
        """The best sentences of ``result``'s passages for ``question``, quoted with their exact spans."""
        if not isinstance(question, str) or not question.strip():
            raise InputError("the question is empty")
        context = budget_context(result, self.max_context_chars)
        if not context:
            raise InputError("nothing was retrieved to answer from")
        if self.embedder is None:
            warnings.warn("no embedder (the store has no vectors): evidence sentences are ranked by the "
                          "question's words alone", stacklevel=2)
        sents = span_sentences(context)
        if not sents:
            raise InputError("the retrieved passages hold no sentence")
        scores = self.scores(question, [t for _, _, _, t in sents])
        best = np.argsort(-scores, kind="stable")[: self.sentences]
        cites = tuple(Citation(r + 1, sents[i][0], sents[i][1], sents[i][2], sents[i][3]) for r, i in enumerate(best))
        model = getattr(self.embedder, "model_id", None) or (type(self.embedder).__name__ if self.embedder else "terms")
        return Answer(question, cites[0].text, cites, tuple(context), model=f"evidence:{model}",
                      usage={"scores": [round(float(scores[i]), 4) for i in best], "sentences": len(sents)},
                      cited_by="evidence", kind="evidence")


@register("reader", "evidence", summary="quote the sentences of the retrieved passages that best answer the "
          "question (embedder + question terms; no generation; the default with no endpoint)")
def _evidence_reader(**options: Any) -> EvidenceReader:
    return EvidenceReader(**options)
