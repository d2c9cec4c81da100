"""ETS (papers/002): evidence sentences found by tree search.

* :mod:`.candidates` -- the candidate sentences of retrieved chunks or whole
  documents, pre-filtered to the top N by the embedder (:func:`candidate_sentences`);
* :mod:`.reader` -- the reader likelihood P(y | q, d) = exp(mean token log-prob),
  greedy answers and correctness, on the local LM or an OpenAI-compatible endpoint
  (:class:`Reader`, :func:`is_correct`);

See ``docs/ets.md``.
"""

from __future__ import annotations

from .candidates import DEFAULT_N, Sentence, candidate_sentences
from .reader import Reader, is_correct

__all__ = ["DEFAULT_N", "Reader", "Sentence", "candidate_sentences", "is_correct"]
