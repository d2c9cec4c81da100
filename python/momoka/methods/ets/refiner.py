"""The ``ets`` refiner: a retriever's result narrowed to evidence sentences by early-terminating beam search.

``ETSRefiner.refine(query, result)`` takes the sentences of the result's
member spans, keeps the top ``n`` by the embedder (:func:`.candidate_sentences`,
in document order), runs :func:`.beam.beam_search` over them with the local
instruction LM as the policy (the paper's extraction prompt; no trained policy
is shipped) and the reader's likelihood of its own answer as the value (or a
value model given as a callable), and returns the chosen sentences as a
:class:`~momoka.methods.base.Result`: one item per sentence, in document
order, each member an exact span (``chunk_id`` -1: a sentence is not a stored
chunk). Defaults from ``METHODS.md`` section 4: N = 30, B1 = B2 = 3, depth 5.

Registered as refiner ``ets``; ``momoka ask DIR "q" --refine ets`` and
``momoka eval --data SET --retriever dense --refine ets`` use it.
"""

from __future__ import annotations

import time
from math import comb
from collections.abc import Callable, Sequence
from typing import Any

from ... import settings
from ..._validate import check_int
from ...errors import ConfigError
from ...llm import ENV_BASE_URL, client_from_env
from ..base import Item, Member, Result
from ...registry import register
from .beam import LMPolicy, beam_search
from .candidates import candidate_sentences
from .reader import ANSWER_MAX_TOKENS, Reader

__all__ = ["ETSRefiner"]


class ETSRefiner:
    """Evidence sentences for a query from any retriever's result (module docstring).

    Options: ``embedder`` (the pre-filter's; the index's when built by the CLI
    or the eval runner), ``n`` candidates, ``expansion`` (B1), ``beam`` (B2),
    ``max_depth``, ``early_termination``; ``reader``: where the value (the
    reader's likelihood of its own answer) comes from: None (default) the
    endpoint of ``MOMOKA_LLM_BASE_URL`` (``--llm-url``) when one is configured,
    else the local LM; ``"local"``; an OpenAI-compatible URL; or a reader object.
    An endpoint must score prompts (``/completions`` with ``echo`` and
    ``logprobs``, as vLLM and ``momoka llm serve`` do); ``value``: a callable ``(question,
    evidence_texts) -> float`` used instead (a value model); ``policy``: a
    :class:`.beam.Policy` (default: the local LM); ``lm``: the local causal LM
    shared by policy and reader (default: the registry's); ``progress``: a
    progress line per beam-search node (:class:`momoka.progress.Progress`; None:
    its default rules, False: silent).
    """

    name = "ets"

    def __init__(self, *, embedder: Any = None, n: int = 30, expansion: int = 3, beam: int = 3, max_depth: int = 5,
                 early_termination: bool = True, reader: Any = None, value: Callable | None = None,
                 policy: Any = None, lm: Any = None, progress: bool | None = None):
        n, expansion, beam, max_depth = (check_int(v, f"ets: {key}", minimum=1) for key, v in (
            ("n", n), ("expansion", expansion), ("beam", beam), ("max_depth", max_depth)))
        if not isinstance(early_termination, bool):
            raise ConfigError(f"ets: early_termination must be true or false, got {early_termination!r}")
        if value is not None and not callable(value):
            raise ConfigError("ets: value must be a callable (question, evidence_texts) -> float")
        self.embedder = embedder
        self.n, self.expansion, self.beam, self.max_depth = n, expansion, beam, max_depth
        self.early_termination = early_termination
        self._reader_spec, self._value, self._policy, self._lm = reader, value, policy, lm
        self.progress = progress

    # lazily built: loading the LM is slow and not needed to list or validate components
    def _shared_lm(self):
        if self._lm is None:
            from ...models import default_causal_lm  # start-up: momoka.models

            self._lm = default_causal_lm()
        return self._lm

    @property
    def policy(self):
        """The policy (default: the local LM with the ETS extraction prompt)."""
        if self._policy is None:
            self._policy = LMPolicy(self._shared_lm())
        return self._policy

    @property
    def reader(self):
        """The reader whose likelihood of its own answer is the value (:class:`.reader.Reader`)."""
        if not isinstance(self._reader_spec, (str, type(None))):
            return self._reader_spec
        if self._reader_spec is None and settings.get_text(ENV_BASE_URL):
            self._reader_spec = Reader(client=client_from_env())  # the configured endpoint
        elif self._reader_spec in (None, "", "local"):
            self._reader_spec = Reader(self._shared_lm())
        else:
            self._reader_spec = Reader.from_spec(self._reader_spec)
        return self._reader_spec

    def value_fn(self) -> Callable[[str, list[str]], float]:
        """The value of an evidence set: the value model, else the reader's likelihood of its own answer."""
        if self._value is not None:
            return self._value
        reader = self.reader
        return lambda q, ev: reader.answer_with_likelihood(q, ev)[1]

    def search(self, query: str, texts: Sequence[str], *, early_termination: bool | None = None):
        """:func:`.beam.beam_search` over ``texts`` with this refiner's policy, value and sizes."""
        return beam_search(query, texts, self.policy, self.value_fn(),
                           expansion=self.expansion, beam=self.beam, max_depth=self.max_depth,
                           early_termination=self.early_termination if early_termination is None
                           else early_termination, progress=self.progress)

    def refine(self, query: str, result: Result) -> Result:
        """The evidence sentences ETS picks among the sentences of ``result`` (one item per sentence)."""
        t0 = time.perf_counter()
        cands = candidate_sentences(query, result=result, embedder=self.embedder, n=self.n)
        name = f"{result.retriever}+ets"
        if not cands:
            return Result(query, (), name, {"candidates": 0, "seconds": time.perf_counter() - t0})
        found = self.search(query, [c.text for c in cands])
        titles = {it.doc_id: it.title for it in result}
        items = []
        for rank, i in enumerate(found.path, 1):
            c = cands[i]
            items.append(Item((Member(-1, c.doc_id, c.start, c.end, c.text),), found.value, rank,
                              {"retriever": "ets", "source": result.retriever, "kind": "sentence",
                               "cosine": c.score}, titles.get(c.doc_id)))
        stats = {"candidates": len(cands), "value": found.value, **found.stats.to_dict(),
                 "seconds": time.perf_counter() - t0}
        return Result(query, tuple(items), name, stats)

    def estimate(self, question: str = "") -> dict:
        """Pre-run bound on the calls one question costs (no model loaded, nothing called).

        The beam search expands at most ``min(beam, expansion ** d)`` nodes at depth ``d`` (``max_depth``
        depths, at most ``n`` candidates), each into at most ``expansion`` children, and values each
        new evidence set once: ``value_calls_max``, capped by the number of distinct sets of the ``n``
        candidates. With the reader's likelihood as the value, each valuation is one answer (at most
        the reader's ``max_tokens``) and, unless the answer is empty, one scoring of it: on an endpoint
        two requests (``/chat/completions`` then ``/completions``), so ``llm_calls_max`` is twice
        ``value_calls_max``; locally (or with a value model) no request. The policy runs on the local
        model (one prompt per question, one scoring per expanded node) and makes no request.
        """
        depths = min(self.max_depth, self.n)
        nodes = sum(min(self.beam, self.expansion ** d) for d in range(depths))
        values = min(nodes * self.expansion, sum(comb(self.n, d) for d in range(1, depths + 1)))
        reader = None if self._value is not None else self.reader_name()
        remote = reader not in (None, "local")
        max_tokens = getattr(self._reader_spec, "max_tokens", ANSWER_MAX_TOKENS)
        return {"per": "question", "candidates_max": self.n, "nodes_max": nodes, "value_calls_max": values,
                "value": "model" if reader is None else "reader likelihood", "reader": reader,
                "llm_calls_max": 2 * values if remote else 0,
                "completion_tokens_max": values * max_tokens if remote else 0}

    def describe(self) -> dict:
        """The settings (for reports)."""
        return {"n": self.n, "expansion": self.expansion, "beam": self.beam, "max_depth": self.max_depth,
                "early_termination": self.early_termination,
                "value": "model" if self._value is not None else "reader likelihood of its own answer",
                "reader": None if self._value is not None else self.reader_name()}

    def reader_name(self) -> str:
        """Which reader gives the value, without loading it: ``local`` or the endpoint's URL."""
        spec = self._reader_spec
        if isinstance(spec, Reader):
            return str(getattr(spec.client, "base_url", None) or "local")
        if spec is None and settings.get_text(ENV_BASE_URL):
            return settings.get_text(ENV_BASE_URL)
        return "local" if spec in (None, "", "local") else str(spec)


@register("refiner", "ets", summary="ETS evidence sentences: early-terminating beam search over the result's "
          "sentences (local LM policy, reader-likelihood value)")
def _make_ets(**options: Any) -> ETSRefiner:
    return ETSRefiner(**options)
