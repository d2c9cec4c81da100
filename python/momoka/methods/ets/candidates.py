"""ETS candidates: the sentences a search may pick, pre-filtered by the embedder.

ETS (papers/002, section 3.1) segments the retrieved long article into sentences and,
as METHODS.md section 4 settles, keeps the top ``N = 30`` of them by the embedder's
cosine to the query. :func:`candidate_sentences` does this for

* a :class:`~momoka.methods.base.Result` (any retriever's): the sentences of its
  items' member spans. Overlapping or touching spans of one document are merged
  first, so a sentence that two overlapping chunks share is a candidate once;
* or whole documents (:class:`momoka.text.Document`): their own sentence spans
  (paragraph-aware, ``Document.sentences``).

Sentences come from the shared segmenter (:mod:`momoka.text`), keep their exact
spans (``document.text[start:end] == sentence.text``) and are returned in document
order: documents in the order they first appear (retrieval rank, or the given
order), sentences by start offset. That is the order the reader sees evidence in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validate import check_int
from ...errors import InputError
from ...text import span_sentences

__all__ = ["DEFAULT_N", "Sentence", "candidate_sentences", "embed_query"]

#: Pre-filter size (METHODS.md section 4).
DEFAULT_N = 30


@dataclass(frozen=True)
class Sentence:
    """One candidate evidence sentence with its exact span (``text == document.text[start:end]``).

    ``score`` is the embedder's cosine to the query.
    """

    doc_id: str
    start: int
    end: int
    text: str
    score: float

    @property
    def span(self) -> tuple[str, int, int]:
        """``(doc_id, start, end)``."""
        return (self.doc_id, self.start, self.end)


def _raw_sentences(result: Any, documents: Sequence[Any] | None) -> list[tuple[str, int, int, str]]:
    """``(doc_id, start, end, text)`` of every non-blank sentence, in document order."""
    out: list[tuple[str, int, int, str]] = []
    if documents is not None:
        for i, d in enumerate(documents):
            text = getattr(d, "text", None)
            if not isinstance(text, str):
                raise InputError(f"document {i} is a {type(d).__name__}, not a momoka.text.Document")
            doc_id = d.doc_id if getattr(d, "doc_id", None) is not None else str(i)
            for s, e in np.asarray(d.sentences).tolist():
                if text[s:e].strip():
                    out.append((doc_id, int(s), int(e), text[s:e]))
        return out
    return span_sentences(m for item in result for m in item.members)


def embed_query(embedder: Any, query: str) -> np.ndarray:
    """The query's vector (the embedder's query form when it has one), L2-normalised."""
    fn = getattr(embedder, "embed_query", None)
    v = np.asarray(fn([query]) if callable(fn) else embedder.embed([query]), dtype=np.float32)[0]
    return v / max(float(np.linalg.norm(v)), 1e-12)


def candidate_sentences(
    query: str,
    *,
    result: Any = None,
    documents: Sequence[Any] | None = None,
    embedder: Any = None,
    n: int = DEFAULT_N,
    index: Any = None,
) -> list[Sentence]:
    """The top ``n`` sentences by embedder cosine to ``query``, returned in document order.

    Give exactly one of ``result`` (a :class:`~momoka.methods.base.Result`: its
    members' sentences) or ``documents`` (:class:`momoka.text.Document` objects,
    each with a ``doc_id``; a missing id becomes the document's position). The
    embedder is ``embedder`` or else ``index.embedder``. Ties in score keep the
    earlier sentence. Fewer than ``n`` sentences: all of them.

    Raises :class:`~momoka.errors.InputError` for an empty query, neither or both
    sources, or no embedder; :class:`~momoka.errors.ConfigError` for ``n < 1``.
    """
    if not isinstance(query, str) or not query.strip():
        raise InputError("candidate_sentences needs a non-empty query")
    if (result is None) == (documents is None):
        raise InputError("candidate_sentences takes exactly one of result= or documents=")
    n = check_int(n, "n (sentences kept)", minimum=1)
    if embedder is None and index is not None:
        embedder = getattr(index, "corpus", index).embedder  # an Index or its read side
    if embedder is None:
        raise InputError("candidate_sentences needs an embedder (embedder= or an index with a vector view)")
    raw = _raw_sentences(result, documents)
    if not raw:
        return []
    q = embed_query(embedder, query)
    v = np.asarray(embedder.embed([r[3] for r in raw]), dtype=np.float32)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    scores = v @ q
    keep = np.argsort(-scores, kind="stable")[:n]
    keep.sort()  # raw is in document order
    return [Sentence(raw[i][0], raw[i][1], raw[i][2], raw[i][3], float(scores[i])) for i in keep]
