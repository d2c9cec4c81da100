"""The ``ets`` refiner: a retriever's result narrowed to evidence sentences by early-terminating beam search.

``ETSRefiner.refine(query, result)`` runs ETS's beam (:func:`.beam.run_beam`:
B1 = ``expansion`` sentences per node, B2 = ``beam`` paths per depth, up to
``max_depth`` sentences, the path of highest value wins) with one of two policies:

* ``policy="offline"`` (the default when no LLM endpoint is configured):
  :class:`.offline.OfflinePolicy`: the next sentence is ranked by the question
  reformulated with the sentences already chosen, by the embedder and BM25
  fused, over the sentences of the first stage's chunks and of the chunks the
  store's ``hybrid`` retriever finds for the reformulated question (the whole
  store); the value is :class:`.offline.CoverageValue` (the question's content
  terms the evidence covers, and its similarity to the question). Needs the
  index (``corpus``), as ``momoka ask``/``eval`` give it.
* ``policy="lm"`` (the default when an endpoint is configured): the local
  instruction LM writes the evidence after the paper's extraction prompt
  (:class:`.beam.LMPolicy`, no trained policy is shipped) over the top ``n``
  sentences of the result by the embedder (:func:`.candidate_sentences`, in
  document order); the value is the reader's likelihood of its own answer (or a
  value model given as a callable).

The output: with the index and a ``budget`` (default 5,000 characters, the
default context), the stored chunks holding the evidence sentences come first,
each widened to its whole paragraph when that spans at most ``paragraph_cap``
characters (0: never), then the first stage's chunks in their order, assembled to the budget as
``momoka query`` fills it (:meth:`Corpus.assembler
<momoka.methods.corpus.Corpus.assembler>`: touching hits merged, a hit widened to
a small paragraph), so the refined context is compared with the first stage's at
equal characters; each evidence item's ``provenance["evidence"]`` lists its
sentences' spans. With ``budget=None`` (or no index) the result is the
sentences alone, one item per sentence in document order, each member an exact
span (``chunk_id`` -1). Defaults from ``METHODS.md`` section 4: N = 30, B1 = B2
= 3, depth 5.

Registered as refiner ``ets``; ``momoka ask DIR "q" --refine ets`` and
``momoka eval --data SET --retriever dense --refine ets`` use it.
"""

from __future__ import annotations

import time
from math import comb
from collections.abc import Callable, Sequence
from typing import Any

from ... import settings
from ..._validate import check_choice, check_float, check_int
from ...errors import ConfigError
from ...llm import ENV_BASE_URL, client_from_env
from ..base import DEFAULT_BUDGET, Item, Member, Result, check_budget
from ...registry import register
from .beam import LMPolicy, beam_search
from .candidates import candidate_sentences
from .offline import CoverageValue, OfflinePolicy
from .reader import ANSWER_MAX_TOKENS, Reader

__all__ = ["POLICIES", "ETSRefiner"]

#: The ``policy`` names: ``auto`` is ``lm`` when an endpoint is configured, else ``offline``.
POLICIES = ("auto", "offline", "lm")


class ETSRefiner:
    """Evidence sentences for a query from any retriever's result (module docstring).

    Options: ``policy``: ``"auto"`` (default: ``"lm"`` when ``MOMOKA_LLM_BASE_URL``
    (``--llm-url``) is set, else ``"offline"``), ``"offline"``, ``"lm"`` or a
    :class:`.beam.Policy` object (an LM policy); ``corpus``: the index as a
    component sees it (:class:`momoka.methods.corpus.Corpus`; the CLI, ``Index.ask``
    and the eval runner give it); ``budget``: the characters of the output, evidence
    first, then the first stage (None: the evidence sentences alone); the offline
    policy's ``chunks`` (retrieved per reformulated question), ``dense_weight`` (of
    the fused sentence score) and ``coverage_weight`` (of the value); ``paragraph_cap``:
    an evidence sentence comes back as its whole paragraph when that spans at most
    this many characters, else as its chunk (0: always its chunk);
    ``embedder`` (the LM policy's pre-filter; the index's when built by the CLI or
    the eval runner), ``n`` candidates (LM policy), ``expansion`` (B1), ``beam`` (B2),
    ``max_depth``, ``early_termination`` (LM policy; the offline one identifies
    whole sentences); ``reader``: where the LM policy's value (the reader's
    likelihood of its own answer) comes from: None (default) the configured
    endpoint when there is one, else the local LM; ``"local"``; an
    OpenAI-compatible URL; or a reader object. An endpoint must score prompts
    (``/completions`` with ``echo`` and ``logprobs``, as vLLM and ``momoka llm
    serve`` do); ``value``: a callable ``(question, evidence_texts) -> float`` used
    instead (a value model), or ``"coverage"`` / ``"reader"`` (default: coverage
    with the offline policy, reader with the LM policy); ``lm``: the local causal
    LM shared by LM policy and reader (default: the registry's); ``progress``: a
    progress line per beam-search node (None: its default rules, False: silent).
    """

    name = "ets"

    def __init__(self, *, embedder: Any = None, corpus: Any = None, policy: Any = "auto",
                 budget: int | None = DEFAULT_BUDGET, n: int = 30, expansion: int = 3, beam: int = 3,
                 max_depth: int = 5, early_termination: bool = True, reader: Any = None,
                 value: Callable | str | None = None, lm: Any = None, chunks: int = 10, dense_weight: float = 0.3,
                 coverage_weight: float = 0.5, paragraph_cap: int = 2000, progress: bool | None = None):
        n, expansion, beam, max_depth = (check_int(v, f"ets: {key}", minimum=1) for key, v in (
            ("n", n), ("expansion", expansion), ("beam", beam), ("max_depth", max_depth)))
        if not isinstance(early_termination, bool):
            raise ConfigError(f"ets: early_termination must be true or false, got {early_termination!r}")
        if value is not None and not callable(value):
            check_choice(value, "ets: value (a callable, 'coverage' or 'reader')", ("coverage", "reader"))
        if isinstance(policy, str) or policy is None:
            policy = check_choice(policy or "auto", "ets: policy", POLICIES)
        self.budget = check_budget(budget, name="ets: budget", optional=True)
        self.embedder = embedder if embedder is not None else getattr(corpus, "embedder", None)
        self.corpus = corpus
        self.n, self.expansion, self.beam, self.max_depth = n, expansion, beam, max_depth
        self.early_termination = early_termination
        self._reader_spec, self._value, self._lm = reader, value, lm
        self._policy_spec, self._policy = policy, None
        self._offline_options = {"chunks": chunks, "dense_weight": dense_weight}
        # checked now (bad options fail before any work), used when the offline policy is made
        CoverageValue(lambda t: None, lambda q: None, coverage_weight=coverage_weight)
        check_int(chunks, "ets: chunks", minimum=1)
        check_float(dense_weight, "ets: dense_weight", minimum=0.0, maximum=1.0)
        self.coverage_weight = coverage_weight
        self.paragraph_cap = check_int(paragraph_cap, "ets: paragraph_cap", minimum=0)
        self.progress = progress

    @property
    def policy_name(self) -> str:
        """``"offline"`` or ``"lm"``: which policy runs (``auto`` resolved; an object is an LM policy)."""
        spec = self._policy_spec
        if not isinstance(spec, str):
            return "lm"
        if spec == "auto":
            return "lm" if settings.get_text(ENV_BASE_URL) else "offline"
        return spec

    # lazily built: loading the LM is slow and not needed to list or validate components
    def _shared_lm(self):
        if self._lm is None:
            from ...models import default_causal_lm  # start-up: momoka.models

            self._lm = default_causal_lm()
        return self._lm

    @property
    def policy(self):
        """The policy: an :class:`.offline.OfflinePolicy` or an LM policy (:class:`.beam.Policy`)."""
        if self._policy is None:
            if not isinstance(self._policy_spec, str):
                self._policy = self._policy_spec
            elif self.policy_name == "offline":
                if self.corpus is None:
                    raise ConfigError("ets: the offline policy searches the index: give corpus= "
                                      "(Index.ask and momoka eval do), or policy='lm'")
                self._policy = OfflinePolicy(self.corpus, **self._offline_options)
            else:
                self._policy = LMPolicy(self._shared_lm())
        return self._policy

    @property
    def reader(self):
        """The reader whose likelihood of its own answer is the LM policy's value (:class:`.reader.Reader`)."""
        if not isinstance(self._reader_spec, (str, type(None))):
            return self._reader_spec
        if self._reader_spec is None and settings.get_text(ENV_BASE_URL):
            self._reader_spec = Reader(client=client_from_env())  # the configured endpoint
        elif self._reader_spec in (None, "", "local"):
            self._reader_spec = Reader(self._shared_lm())
        else:
            self._reader_spec = Reader.from_spec(self._reader_spec)
        return self._reader_spec

    def _value_kind(self) -> str:
        if callable(self._value):
            return "model"
        return self._value or ("coverage" if self.policy_name == "offline" else "reader")

    def value_fn(self) -> Callable[[str, list[str]], float]:
        """The value of an evidence set: a value model, the coverage value, or the reader's likelihood of its
        own answer (module docstring)."""
        kind = self._value_kind()
        if kind == "model":
            return self._value
        if kind == "coverage":
            pol = self.policy if self.policy_name == "offline" else OfflinePolicy(self.corpus, **self._offline_options)
            return CoverageValue(pol.vectors, pol.query_vector, coverage_weight=self.coverage_weight)
        reader = self.reader
        return lambda q, ev: reader.answer_with_likelihood(q, ev)[1]

    def search(self, query: str, texts: Sequence[str], *, early_termination: bool | None = None):
        """:func:`.beam.beam_search` over ``texts`` with this refiner's LM policy, value and sizes."""
        return beam_search(query, texts, self.policy, self.value_fn(),
                           expansion=self.expansion, beam=self.beam, max_depth=self.max_depth,
                           early_termination=self.early_termination if early_termination is None
                           else early_termination, progress=self.progress)

    def refine(self, query: str, result: Result) -> Result:
        """The evidence ETS picks for ``query`` from ``result`` (and, offline, the store), then the budget's fill."""
        t0 = time.perf_counter()
        name = f"{result.retriever}+ets"
        base = _chunk_ids(result)
        if self.policy_name == "offline":
            found, seen = self.policy.search(query, base, self.value_fn(), expansion=self.expansion,
                                             beam=self.beam, max_depth=self.max_depth, progress=self.progress)
            evidence = [(sp, seen[sp][0], seen[sp][1], None) for sp in found.path]
            n_cands = len(seen)
        else:
            cands = candidate_sentences(query, result=result, embedder=self.embedder, n=self.n)
            if not cands:
                return Result(query, (), name, {"candidates": 0, "seconds": time.perf_counter() - t0})
            found = self.search(query, [c.text for c in cands])
            evidence = [(cands[i].span, cands[i].text, None, cands[i].score) for i in found.path]
            n_cands = len(cands)
        stats = {"candidates": n_cands, "value": found.value, "evidence": len(evidence), **found.stats.to_dict()}
        if self.budget is not None and self.corpus is not None:
            out = self._filled(query, evidence, result, name, found.value, stats)
        else:
            titles = {it.doc_id: it.title for it in result}
            items = []
            for rank, ((d, s, e), text, _cid, cos) in enumerate(evidence, 1):
                prov = {"retriever": "ets", "source": result.retriever, "kind": "sentence"}
                if cos is not None:
                    prov["cosine"] = cos
                items.append(Item((Member(-1, d, s, e, text),), found.value, rank, prov,
                                  titles.get(d) if d in titles else (self.corpus.title(d) if self.corpus else None)))
            out = Result(query, tuple(items), name, stats)
        out.stats["seconds"] = time.perf_counter() - t0
        return out

    def estimate(self, question: str = "") -> dict:
        """Pre-run bound on the calls one question costs (no model loaded, nothing called).

        The beam search expands at most ``min(beam, expansion ** d)`` nodes at depth ``d`` (``max_depth``
        depths, at most ``n`` candidates), each into at most ``expansion`` children, and values each
        new evidence set once: ``value_calls_max``, capped by the number of distinct sets of the ``n``
        candidates. With the reader's likelihood as the value, each valuation is one answer (at most
        the reader's ``max_tokens``) and, unless the answer is empty, one scoring of it: on an endpoint
        two requests (``/chat/completions`` then ``/completions``), so ``llm_calls_max`` is twice
        ``value_calls_max``; locally, with a value model or with the offline policy's coverage value no
        request. The LM policy runs on the local model (one prompt per question, one scoring per
        expanded node) and the offline one on the store; neither makes a request.
        """
        depths = min(self.max_depth, self.n)
        nodes = sum(min(self.beam, self.expansion ** d) for d in range(depths))
        values = min(nodes * self.expansion, sum(comb(self.n, d) for d in range(1, depths + 1)))
        kind = self._value_kind()
        reader = self.reader_name() if kind == "reader" else None
        remote = reader not in (None, "local")
        max_tokens = getattr(self._reader_spec, "max_tokens", ANSWER_MAX_TOKENS)
        return {"per": "question", "policy": self.policy_name, "candidates_max": self.n, "nodes_max": nodes,
                "value_calls_max": values,
                "value": {"model": "model", "coverage": "coverage", "reader": "reader likelihood"}[kind],
                "reader": reader, "llm_calls_max": 2 * values if remote else 0,
                "completion_tokens_max": values * max_tokens if remote else 0}

    def _filled(self, query: str, evidence: list, result: Result, name: str, value: float, stats: dict) -> Result:
        """The chunks holding the evidence, then the first stage's chunks, assembled to :attr:`budget`."""
        corpus = self.corpus
        asm = corpus.assembler()
        ranked: dict[int, tuple[float, dict]] = {}
        for span, _text, cid, _cos in evidence:
            cid = cid if cid is not None else _holding_chunk(corpus, span, result)
            if cid is None:
                continue
            wide = self.paragraph_cap and 0 < asm.parent_span(cid) <= self.paragraph_cap
            prov = {"retriever": "ets", "source": result.retriever, "kind": "evidence", "evidence": [list(span)]}
            for c in (asm.parent(cid) if wide else (cid,)):
                had = ranked.setdefault(c, (value, prov))[1]
                if had is not prov and had.get("kind") == "evidence" and list(span) not in had["evidence"]:
                    had["evidence"].append(list(span))
        for it in result:
            for cid in _chunk_ids(Result(query, (it,), result.retriever)):
                ranked.setdefault(cid, (it.score, {**it.provenance, "kind": "fill"}))
        items = []
        for rank, (cid, (score, prov)) in enumerate(ranked.items(), 1):
            m = corpus.member(cid)
            prov.pop("assembly", None)
            items.append(Item((m,), float(score), rank, prov, corpus.title(m.doc_id)))
        return Result(query, tuple(items), name, stats).fit(self.budget, assemble=asm)

    def describe(self) -> dict:
        """The settings (for reports)."""
        kind = self._value_kind()
        out = {"policy": self.policy_name, "budget": self.budget, "expansion": self.expansion, "beam": self.beam,
               "max_depth": self.max_depth,
               "value": {"model": "model", "coverage": "coverage of the question's terms and similarity",
                         "reader": "reader likelihood of its own answer"}[kind],
               "reader": self.reader_name() if kind == "reader" else None}
        if self.policy_name == "offline":
            out.update(self._offline_options, coverage_weight=self.coverage_weight)
        else:
            out.update(n=self.n, early_termination=self.early_termination)
        return out

    def reader_name(self) -> str:
        """Which reader gives the value, without loading it: ``local`` or the endpoint's URL."""
        spec = self._reader_spec
        if isinstance(spec, Reader):
            return str(getattr(spec.client, "base_url", None) or "local")
        if spec is None and settings.get_text(ENV_BASE_URL):
            return settings.get_text(ENV_BASE_URL)
        return "local" if spec in (None, "", "local") else str(spec)


def _chunk_ids(result: Result) -> list[int]:
    """The stored chunks of ``result``'s items in rank order (an assembled item: the chunks it holds)."""
    out: dict[int, None] = {}
    for it in result:
        held = (it.provenance.get("assembly") or {}).get("chunks")
        for cid in held if held else [m.chunk_id for m in it.members]:
            if int(cid) >= 0:
                out.setdefault(int(cid), None)
    return list(out)


def _holding_chunk(corpus: Any, span: tuple[str, int, int], result: Result) -> int | None:
    """The stored chunk of ``result`` that overlaps the sentence ``span`` most (None: none does)."""
    d, s, e = span
    best, most = None, 0
    for cid in _chunk_ids(result):
        m = corpus.member(cid)
        ov = min(e, m.end) - max(s, m.start) if m.doc_id == d else 0
        if ov > most:
            best, most = cid, ov
    return best


@register("refiner", "ets", summary="ETS evidence sentences: early-terminating beam search; offline the question "
          "reformulated by the path over the whole store (policy=offline), or a LM policy (policy=lm)")
def _make_ets(**options: Any) -> ETSRefiner:
    return ETSRefiner(**options)
