"""ETS (papers/002): evidence sentences found by tree search.

* :mod:`.candidates` -- the candidate sentences of retrieved chunks or whole
  documents, pre-filtered to the top N by the embedder (:func:`candidate_sentences`);
* :mod:`.reader` -- the reader likelihood P(y | q, d) = exp(mean token log-prob),
  greedy answers and correctness, on the local LM or an OpenAI-compatible endpoint
  (:class:`Reader`, :func:`is_correct`);
* :mod:`.annotate` -- the MCTS annotation on the native engine (scored top-M
  expansion by reader likelihood) and the export of its paths as policy/value
  training records (:func:`~.annotate.annotate_dataset`, ``momoka ets annotate``);
* :mod:`.beam` -- inference: the early-terminating beam search over a policy LM
  whose sentence decoding stops at the candidate's unique token prefix;
* :mod:`.refiner` -- the ``ets`` refiner (``--refine ets``) that runs that search
  on any retriever's result and returns the sentences as exact-span items.

See ``docs/ets.md``.
"""

from __future__ import annotations

from .candidates import DEFAULT_N, Sentence, candidate_sentences
from .reader import Reader, is_correct

__all__ = ["DEFAULT_N", "Reader", "Sentence", "candidate_sentences", "is_correct"]
