"""Referees: batch judges of "does chunk B complete chunk A?" (the I term of Momoka eq. 4 / eq. 7).

Every referee is a callable ``referee(pairs) -> np.ndarray`` taking a list of
``(a_text, b_text)`` pairs and returning one value in ``[0, 1]`` per pair. In
pair mode (eq. 4) ``a_text`` is the root chunk; in path mode (eq. 7) it is the
text of the path so far (chunks joined by a blank line).

* :class:`LLMReferee`: the paper's judge (Figure 4 prompt, Figure 5 in path
  mode) through the LLM layer: batched, concurrent, cached on disk, resumable.
  A reply that is neither 0 nor 1 is re-asked by the layer's parser; one still
  malformed afterwards scores 0 and is counted (``stats.malformed``,
  ``last_malformed``); :class:`~momoka.methods.momoka.map.MomokaMap` bounds and
  records them by the rule of :mod:`momoka.methods.fallbacks`.
* :class:`PerplexityReferee`: MoC's edge weight on the local causal LM,
  ``Edge(b|a) = (ppl(b) - ppl(b|a)) / ppl(b)``; 1 when the edge exceeds a
  threshold (or the clipped edge itself with ``soft=True``). Batched.
* :class:`EmbeddingReferee`: cosine similarity above a threshold; it also
  yields a sparse thresholded similarity matrix so the MCTS can run natively.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import settings
from ..._validate import check_float, check_int
from ...errors import ConfigError, InputError, LLMError, LLMResponseError
from ...stats import Stats

#: Names accepted by :func:`make_referee`.
REFEREES = ("ppl", "llm", "embedding")
#: Seconds per pair of the perplexity referee on the local causal LM (135M, CPU), fastest and slowest measured
#: on the shared 2-core machine (``docs/momoka.md``, "Benchmark"): the figures of the warning a ``ppl`` run
#: gives before it starts.
PPL_SECONDS_PER_PAIR = (0.3, 2.2)


def default_referee() -> str:
    """The referee used when none is named: ``"llm"`` when ``MOMOKA_LLM_BASE_URL`` is set, else ``"embedding"``
    (fast, native, and it reuses an index's stored vectors; the perplexity referee takes seconds per pair)."""
    return "llm" if settings.get_text("MOMOKA_LLM_BASE_URL") else "embedding"


@dataclass
class RefereeStats(Stats):
    """Counts of a referee: ``pairs`` judged and the ``ones`` among them."""

    pairs: int = 0
    ones: int = 0


@dataclass
class LLMRefereeStats(RefereeStats):
    """Counts of an :class:`LLMReferee`: also ``zeros`` and ``malformed`` (replies still neither 0 nor 1 after
    the re-asks: scored 0)."""

    zeros: int = 0
    malformed: int = 0


@dataclass
class PerplexityRefereeStats(RefereeStats):
    """Counts of a :class:`PerplexityReferee`: also ``lm_texts``, the texts the causal LM scored."""

    lm_texts: int = 0


@dataclass
class EmbeddingRefereeStats(RefereeStats):
    """Counts of an :class:`EmbeddingReferee`: also ``native_docs``, the documents given a whole similarity
    matrix (:meth:`EmbeddingReferee.matrix`)."""

    native_docs: int = 0


def _check_pairs(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    out = list(pairs)
    for k, p in enumerate(out):
        if not isinstance(p, (tuple, list)) or len(p) != 2 or not all(isinstance(x, str) for x in p):
            raise InputError(f"referee pair {k} must be a (str, str) tuple")
    return out


#: Times the LLM referee asks again after a verdict that is neither 0 nor 1 (its default ``max_reasks``).
LLM_REFEREE_REASKS = 2


class LLMReferee:
    """The paper's LLM judge (Figures 4 and 5) as a batch callable.

    Args:
        llm: an LLM client of :mod:`momoka.llm` (default: ``client_from_env()``,
            i.e. the endpoint in ``MOMOKA_LLM_BASE_URL`` or the local model).
        mode: ``"pair"`` (Figure 4, eq. 4) or ``"path"`` (Figure 5, eq. 7).
        max_reasks: re-asks of a malformed reply (by the LLM layer's parser).
        max_tokens: tokens allowed for the verdict.

    ``stats`` (:class:`LLMRefereeStats`): ``pairs`` judged, ``ones``, ``zeros`` and ``malformed`` (replies
    that stayed neither 0 nor 1 after the re-asks: scored 0, METHODS.md 3.5);
    ``last_malformed``: ``(position, reply)`` of the malformed pairs of the last
    call. Malformed replies are not kept in the LLM cache, so asking again
    reaches the model. A request that fails for good (network, server) raises
    :class:`~momoka.errors.LLMError`; answers already received are cached, so a
    rerun resumes. The share of malformed verdicts is bounded by the
    searcher (:class:`~momoka.methods.momoka.map.MomokaMap`, ``--llm-max-failed``).
    """

    name = "llm"

    def __init__(self, llm: Any = None, *, mode: str = "pair", max_reasks: int = LLM_REFEREE_REASKS,
                 max_tokens: int = 4):
        if mode not in ("pair", "path"):
            raise ConfigError(f"referee mode must be 'pair' or 'path', not {mode!r}")
        if llm is None:
            from ...llm import client_from_env  # start-up: momoka.llm

            llm = client_from_env()
        self.llm = llm
        self.mode = mode
        self.max_reasks = max_reasks
        self.max_tokens = max_tokens
        self.stats = LLMRefereeStats()
        self.last_malformed: list[tuple[int, str]] = []

    def messages(self, a: str, b: str) -> list[dict]:
        """The chat messages sent for one pair."""
        from ...llm import prompts  # start-up: momoka.llm.prompts

        if self.mode == "pair":
            return prompts.messages("momoka.referee", initial_chunk=a, new_chunk=b)
        return prompts.messages("momoka.referee_path", context_text=a, new_chunk=b)

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        from ...llm import parse_binary  # start-up: momoka.llm

        pairs = _check_pairs(pairs)
        if not pairs:
            return np.zeros(0)
        batch = [self.messages(a, b) for a, b in pairs]
        res = self.llm.complete_parsed(batch, parse_binary, max_reasks=self.max_reasks, temperature=0,
                                       max_tokens=self.max_tokens, method="referee")
        out = np.zeros(len(pairs))
        self.last_malformed = []
        for k, p in enumerate(res):
            if p.ok:
                out[k] = float(p.value)
            elif p.error is None or isinstance(p.error, LLMResponseError):
                self.stats.malformed += 1
                self.last_malformed.append((k, str(p.raw)))
            else:
                raise LLMError(f"referee request failed: {p.error}") from p.error
        self.stats.pairs += len(pairs)
        ones = int((out == 1).sum())
        self.stats.ones += ones
        self.stats.zeros += len(pairs) - ones
        return out

    def config(self) -> dict:
        """Settings recorded in the store."""
        return {"name": self.name, "mode": self.mode, "model": getattr(self.llm, "model", None),
                "max_reasks": self.max_reasks, "temperature": 0}

    def estimate_tokens(self, a_chars: int, b_chars: int) -> int:
        """Rough prompt tokens of one judgement (4 characters per token plus the template)."""
        return (a_chars + b_chars + 700) // 4


class PerplexityReferee:
    """MoC's perplexity edge as a referee: ``Edge(b|a) = (ppl(b) - ppl(b|a)) / ppl(b)``.

    Args:
        lm: an object with ``perplexity(texts)`` and ``conditional_perplexities(qs, ds)``
            (default: :func:`momoka.models.default_causal_lm`, the local causal LM).
        threshold: the verdict is 1 when ``Edge > threshold`` (default 0.1: the
            preceding chunk makes ``b`` at least 10 % less perplexing).
        soft: return ``clip(Edge, 0, 1)`` instead of the 0/1 verdict.
        max_chars: ``a`` and ``b`` are cut to this many characters (``a`` keeps
            its end, ``b`` its start) to bound the model's work.

    ``ppl(b)`` is computed once per distinct text (kept in memory). ``stats``: :class:`PerplexityRefereeStats`.
    """

    name = "ppl"

    def __init__(self, lm: Any = None, *, threshold: float = 0.1, soft: bool = False, max_chars: int = 1500):
        threshold = check_float(threshold, "threshold", minimum=-1, maximum=1, below=True)
        if lm is None:
            from ...models import default_causal_lm  # start-up: momoka.models

            lm = default_causal_lm()
        self.lm = lm
        self.threshold = float(threshold)
        self.soft = soft
        self.max_chars = max_chars
        self._ppl: dict[str, float] = {}
        self.stats = PerplexityRefereeStats()

    def edges(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The raw edge weights ``(ppl(b) - ppl(b|a)) / ppl(b)`` of the pairs (:func:`momoka.models.perplexity.pair_edges`)."""
        from ...models.perplexity import pair_edges  # start-up: momoka.models.perplexity

        pairs = _check_pairs(pairs)
        if not pairs:
            return np.zeros(0)
        before = len(self._ppl)
        e = pair_edges(self.lm, pairs, max_chars=self.max_chars, ppl_cache=self._ppl)
        self.stats.lm_texts += len(self._ppl) - before + len(pairs)
        return e

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        e = self.edges(pairs)
        out = np.clip(e, 0.0, 1.0) if self.soft else (e > self.threshold).astype(np.float64)
        self.stats.pairs += len(e)
        self.stats.ones += int((e > self.threshold).sum())
        return out

    def config(self) -> dict:
        """Settings recorded in the store."""
        return {"name": self.name, "threshold": self.threshold, "soft": self.soft, "max_chars": self.max_chars,
                "model": getattr(self.lm, "model_id", None) or type(self.lm).__name__}


#: Per-embedder cosine floors of the embedding referee: an embedder whose unrelated texts still score high
#: cosines has them rescaled as ``(cos - floor) / (1 - floor)`` before the threshold and the soft value,
#: so one threshold means the same for every embedder. multilingual-e5-small: 0.70, so its cosine 0.85 meets
#: the default threshold 0.5 (quantile-matched: the e5 cosine passed by as many within-document paragraph
#: pairs as all-MiniLM-L6-v2's 0.5 passes, ``bench/micro/bench_models_e5.py``). Embedders not listed
#: (the MiniLM graphs): floor 0, cosines unchanged.
COSINE_FLOORS = {"multilingual-e5-small": 0.70}


class EmbeddingReferee:
    """Cosine similarity above a threshold as a referee.

    Args:
        embedder: an object with ``embed(texts) -> (n, dim)`` (default:
            :meth:`momoka.models.Embedder.default`).
        threshold: the verdict is 1 when ``cos(a, b) > threshold``, the cosine rescaled by the
            embedder's floor (:data:`COSINE_FLOORS`; none for the default embedder).
        soft: return ``clip(cos, 0, 1)`` (the rescaled cosine) instead of the verdict.
        max_edges: :meth:`matrix` keeps at most this many entries per row (the
            most similar), which bounds memory on long documents.

    Called on text pairs it embeds the distinct texts (kept in memory by
    content hash). :meth:`matrix` gives the whole thresholded similarity
    matrix of a document as CSR arrays for :meth:`momoka.mcts.MCTS.run_native`. ``stats``:
    :class:`EmbeddingRefereeStats`.
    """

    name = "embedding"

    def __init__(self, embedder: Any = None, *, threshold: float = 0.5, soft: bool = False, max_edges: int = 64):
        threshold = check_float(threshold, "threshold", minimum=-1, maximum=1, below=True)
        max_edges = check_int(max_edges, "max_edges", minimum=1)
        self._embedder = embedder
        self.threshold = float(threshold)
        self.soft = soft
        self.max_edges = max_edges
        self._vec: dict[bytes, np.ndarray] = {}
        self.stats = EmbeddingRefereeStats()

    @property
    def embedder(self):
        """The embedder (the default one is loaded on first use)."""
        if self._embedder is None:
            from ...models import Embedder  # start-up: momoka.models

            self._embedder = Embedder.default()
        return self._embedder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-normalised embeddings of ``texts`` (distinct texts embedded once)."""
        keys = [hashlib.sha1(t.encode("utf-8", "surrogatepass")).digest() for t in texts]
        need = {}
        for k, t in zip(keys, texts):
            if k not in self._vec and k not in need:
                need[k] = t
        if need:
            v = np.asarray(self.embedder.embed(list(need.values())), dtype=np.float32)
            v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            for k, row in zip(need, v):
                self._vec[k] = row
        if not texts:
            return np.zeros((0, 1), np.float32)
        return np.stack([self._vec[k] for k in keys])

    @property
    def cosine_floor(self) -> float:
        """The floor of the embedder's cosines (:data:`COSINE_FLOORS`; 0: cosines used as they are)."""
        return COSINE_FLOORS.get(getattr(self._embedder, "model_id", None), 0.0) if self._embedder is not None else 0.0

    def _rescaled(self, cos: np.ndarray) -> np.ndarray:
        f = self.cosine_floor
        return cos if f == 0 else (cos - f) / (1.0 - f)

    def _value(self, cos: np.ndarray) -> np.ndarray:
        return np.clip(cos, 0.0, 1.0) if self.soft else (cos > self.threshold).astype(np.float64)

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        pairs = _check_pairs(pairs)
        if not pairs:
            return np.zeros(0)
        va = self.embed([a for a, _ in pairs])
        vb = self.embed([b for _, b in pairs])
        cos = self._rescaled((va * vb).sum(axis=1).astype(np.float64))
        self.stats.pairs += len(pairs)
        self.stats.ones += int((cos > self.threshold).sum())
        return self._value(cos)

    def matrix(self, vectors: np.ndarray, block: int = 1024) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CSR ``(data, indices, indptr)`` of the referee's values over all chunk pairs of one document.

        Row ``i`` holds the (at most :attr:`max_edges`) most similar chunks ``j != i``
        whose cosine with ``i`` exceeds the threshold, with the referee's value
        (1, or the clipped cosine with ``soft``); missing entries are 0. Built in
        row blocks, so memory stays ``O(n * max_edges)``.
        """
        v = np.asarray(vectors, dtype=np.float32)
        if v.ndim != 2:
            raise InputError(f"vectors must be a 2-D array, got shape {v.shape}")
        v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        n = len(v)
        data, indices, indptr = [], [], [0]
        k = min(self.max_edges, max(n - 1, 0))
        for s in range(0, n, block):
            sim = v[s : s + block] @ v.T
            rows = np.arange(s, min(s + block, n))
            sim[rows - s, rows] = -np.inf
            if k < n - 1:
                top = np.argpartition(-sim, k - 1, axis=1)[:, :k] if k > 0 else np.zeros((len(rows), 0), int)
            else:
                top = np.broadcast_to(np.arange(n), (len(rows), n))
            for r in range(len(rows)):
                cols = np.sort(top[r])
                vals = self._rescaled(sim[r, cols])
                keep = vals > self.threshold
                cols, vals = cols[keep], vals[keep]
                data.append(self._value(vals.astype(np.float64)))
                indices.append(cols.astype(np.int64))
                indptr.append(indptr[-1] + len(cols))
        self.stats.native_docs += 1
        cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
        return cat(data, np.float64), cat(indices, np.int64), np.asarray(indptr, dtype=np.int64)

    def config(self) -> dict:
        """Settings recorded in the store (with ``cosine_floor`` when the embedder has one)."""
        out = {"name": self.name, "threshold": self.threshold, "soft": self.soft, "max_edges": self.max_edges,
               "model": getattr(self._embedder, "model_id", None) if self._embedder is not None else "default"}
        if self.cosine_floor:
            out["cosine_floor"] = self.cosine_floor
        return out


def make_referee(name: str | Any = None, *, mode: str = "pair", llm: Any = None, lm: Any = None,
                 embedder: Any = None, threshold: float | None = None) -> Any:
    """A referee by name: ``"llm"``, ``"ppl"``, ``"embedding"``, or an object passed through.

    ``None`` picks :func:`default_referee`: the LLM referee on the endpoint of
    ``MOMOKA_LLM_BASE_URL`` when it is set, else the embedding referee.
    """
    if name is None:
        name = default_referee()
    if not isinstance(name, str):
        if not callable(name):
            raise ConfigError(f"a referee must be a name ({', '.join(REFEREES)}) or a callable, not {name!r}")
        return name
    if name == "llm":
        return LLMReferee(llm, mode=mode)
    kw = {} if threshold is None else {"threshold": threshold}
    if name == "ppl":
        return PerplexityReferee(lm, **kw)
    if name == "embedding":
        return EmbeddingReferee(embedder, **kw)
    raise ConfigError(f"unknown referee {name!r}; choose one of {', '.join(REFEREES)}")
